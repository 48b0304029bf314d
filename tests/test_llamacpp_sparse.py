"""llama.cpp's DeepSeek Sparse Attention and DeepSeek-V4 caches, worked by hand from the source.

Rules (ggml-org/llama.cpp master @3f545bec, docs/ENGINES.md L5a, L5b):
- DSA (src/llama-kv-cache-dsa.cpp, create_memory in src/llama-model.cpp): a main MLA cache of
  one K row of kv_lora_rank + rope (576) values a cell in the decoder's layers (filter_mla drops
  the MTP block), and an indexer cache of one K row of indexer_head_size (128) values a cell in
  the layers that run their own indexer (filter_lid: every layer for DeepSeek-V3.2 and GLM-5 /
  5.1, the 21 "full" layers for GLM-5.2); both in the -ctk type, no V, n_ctx_seq cells a stream.
- DeepSeek-V4 (src/llama-kv-cache-dsv4.cpp): one stream a sequence; an iSWA cache of the
  512-value latent whose non-SWA half holds 0 layers and whose SWA half holds
  PAD256(min(cells, 128 + n_ubatch)) cells of all 43 layers; CSA, HCA and lightning-indexer
  caches of PAD256(ceil(cells / ratio)) cells (the "creating" line prints the unpadded count);
  float32 compressor states 2 × rows × width a layer and stream.
"""

import pytest

from kvcore import CacheOptions, InputError, load_model
from kvcore.engines import EngineRequest, engine_plan, llamacpp
from kvcore.parallel import Parallel

GiB = 2**30


def req(model, ctx, seqs=1, kv="f16", kv_v=None, **kw):
    return EngineRequest(spec=load_model(model), context=ctx, sequences=seqs,
                         cache=CacheOptions(kv_k=kv, kv_v=kv_v or kv),
                         kv_budget_bytes=kw.pop("budget", 400 * GiB), **kw)


def test_glm52_f16_lines_at_128k():
    r = engine_plan("llama.cpp", req("glm-5.2", 131072))
    # main: 78 layers × 576 × 2 B × 131,072 cells = 11,777,605,632 B = 11,232 MiB
    # indexer: 21 layers × 128 × 2 B × 131,072 = 704,643,072 B = 672 MiB
    assert list(r.log_lines) == [
        "llama_kv_cache_dsa: creating main KV cache, size = 131072 cells",
        "llama_kv_cache: size = 11232.00 MiB (131072 cells,  78 layers,  1/1 seqs), "
        "K (f16): 11232.00 MiB, V (f16):    0.00 MiB",
        "llama_kv_cache_dsa: creating indexer KV cache, size = 131072 cells",
        "llama_kv_cache: size =  672.00 MiB (131072 cells,  21 layers,  1/1 seqs), "
        "K (f16):  672.00 MiB, V (f16):    0.00 MiB",
    ]
    assert r.extra["kv_bytes"] == 11_777_605_632 + 704_643_072
    assert r.command.startswith("llama-server -m glm-5.2-BF16.gguf -c 131072 -np 1 -ctk f16 -ctv f16")
    assert any("b10259" in n for n in r.notes)


def test_glm52_split_over_two_devices_logs_each_cache_after_its_buffers():
    # -sm layer, 2 devices: layer i on CUDA0 while i / 79 < 1/2 (0..39), 40..77 on CUDA1.
    # llama_kv_cache_dsa logs "creating main", then the main llama_kv_cache's buffer lines and
    # size line, then "creating indexer" and the indexer cache's (src/llama-kv-cache-dsa.cpp,
    # src/llama-kv-cache.cpp ctors). At 32,768 cells f16: main 576 × 2 B = 36 MiB a layer,
    # 40 and 38 layers; indexer 128 × 2 B = 8 MiB a layer in the indexer types' "full"
    # layers: 0, 1, 2, 6, .., 38 (12) on CUDA0 and 42, .., 74 (9) on CUDA1
    r = engine_plan("llama.cpp", req("glm-5.2", 32768, parallel=Parallel(pp=2)))
    assert list(r.log_lines) == [
        "llama_kv_cache_dsa: creating main KV cache, size = 32768 cells",
        "llama_kv_cache:      CUDA0 KV buffer size =  1440.00 MiB",
        "llama_kv_cache:      CUDA1 KV buffer size =  1368.00 MiB",
        "llama_kv_cache: size = 2808.00 MiB ( 32768 cells,  78 layers,  1/1 seqs), "
        "K (f16): 2808.00 MiB, V (f16):    0.00 MiB",
        "llama_kv_cache_dsa: creating indexer KV cache, size = 32768 cells",
        "llama_kv_cache:      CUDA0 KV buffer size =    96.00 MiB",
        "llama_kv_cache:      CUDA1 KV buffer size =    72.00 MiB",
        "llama_kv_cache: size =  168.00 MiB ( 32768 cells,  21 layers,  1/1 seqs), "
        "K (f16):  168.00 MiB, V (f16):    0.00 MiB",
    ]


def test_deepseek_v4_split_logs_no_buffer_for_an_empty_cache_and_one_per_state():
    # DeepSeek-V4-Flash over 2 devices (43 layers: 0..21 on CUDA0, i / 44 < 1/2): the raw
    # iSWA cache's non-SWA half holds no layer, so its ctx_map stays empty and it logs its
    # size line alone; each compressed cache and each llama_dsv4_comp_state logs its
    # buffers ("DSV4 <name> state buffer size") before its own line
    r = engine_plan("llama.cpp", req("deepseek-v4-flash", 32768, parallel=Parallel(pp=2)))
    lines = list(r.log_lines)
    i = lines.index("llama_kv_cache_iswa: creating non-SWA KV cache, size = 32768 cells")
    assert lines[i + 1].startswith("llama_kv_cache: size =    0.00 MiB")
    assert lines[i + 2].startswith("llama_kv_cache_iswa: creating     SWA KV cache")
    # SWA: PAD256(128 + 512) = 768 cells, 512 × 2 B K only = 0.75 MiB a layer: 22 and 21
    assert lines[i + 3] == "llama_kv_cache:      CUDA0 KV buffer size =    16.50 MiB"
    assert lines[i + 4] == "llama_kv_cache:      CUDA1 KV buffer size =    15.75 MiB"
    j = lines.index("llama_kv_cache_dsv4: creating DSV4 HCA compressor state")
    # HCA state: 2 (kv, score) × 512 × 128 rows × 4 B = 0.5 MiB a layer, one stream
    assert lines[j + 1].startswith("llama_dsv4_comp_state:      CUDA0 DSV4 hca state buffer size")
    assert lines[j + 2].startswith("llama_dsv4_comp_state:      CUDA1 DSV4 hca state buffer size")
    assert lines[j + 3].startswith("llama_dsv4_comp_state: hca ratio = 128")


def test_glm52_q8_four_streams():
    # -c 262144 -np 4: 65,536 cells in each of 4 streams; q8_0 rows: 576 → 18 × 34 = 612 B,
    # 128 → 4 × 34 = 136 B. Main 78 × 612 × 262,144 = 11,934 MiB; indexer 21 × 136 × 262,144
    # = 714 MiB
    r = engine_plan("llama.cpp", req("glm-5.2", 65536, seqs=4, kv="q8_0"))
    assert r.log_lines[1] == ("llama_kv_cache: size = 11934.00 MiB ( 65536 cells,  78 layers,  "
                              "4/4 seqs), K (q8_0): 11934.00 MiB, V (q8_0):    0.00 MiB")
    assert r.log_lines[3] == ("llama_kv_cache: size =  714.00 MiB ( 65536 cells,  21 layers,  "
                              "4/4 seqs), K (q8_0):  714.00 MiB, V (q8_0):    0.00 MiB")
    assert "-c 262144 -np 4 -ctk q8_0 -ctv q8_0" in r.command


def test_deepseek_v32_every_decoder_layer_has_indexer_keys():
    # 61 layers both; f16 at 163,840 cells: 61 × 1152 × 163,840 = 10,980 MiB,
    # 61 × 256 × 163,840 = 2,440 MiB
    r = engine_plan("llama.cpp", req("deepseek-v3.2", 163840))
    assert r.log_lines[1] == ("llama_kv_cache: size = 10980.00 MiB (163840 cells,  61 layers,  "
                              "1/1 seqs), K (f16): 10980.00 MiB, V (f16):    0.00 MiB")
    assert r.log_lines[3] == ("llama_kv_cache: size = 2440.00 MiB (163840 cells,  61 layers,  "
                              "1/1 seqs), K (f16): 2440.00 MiB, V (f16):    0.00 MiB")
    # q8_0, 2 sequences of 32,768: 61 × 612 × 65,536 = 2,333.25 MiB; 61 × 136 × 65,536 = 518.5
    r = engine_plan("llama.cpp", req("deepseek-v3.2", 32768, seqs=2, kv="q8_0"))
    assert " 2333.25 MiB ( 32768 cells,  61 layers,  2/2 seqs)" in r.log_lines[1]
    assert "  518.50 MiB ( 32768 cells,  61 layers,  2/2 seqs)" in r.log_lines[3]
    assert r.extra["kv_bytes"] == 61 * 612 * 65536 + 61 * 136 * 65536


@pytest.mark.parametrize("model", ["glm-5", "glm-5.1"])
def test_glm5_and_51_index_every_layer(model):
    # training context below 1,048,576: every one of the 78 layers runs its own indexer
    r = engine_plan("llama.cpp", req(model, 8192))
    assert "(  8192 cells,  78 layers,  1/1 seqs), K (f16):  156.00 MiB" in r.log_lines[3]


def test_dsa_unified_one_stream():
    # --kv-unified with 2 sequences of 16,384: one stream of 32,768 cells
    from kvcore.engines import EngineSettings
    r = engine_plan("llama.cpp", req("deepseek-v3.2", 16384, seqs=2,
                                     settings=EngineSettings(kv_unified=True)))
    assert "( 32768 cells,  61 layers,  2/1 seqs)" in r.log_lines[3]
    assert r.extra["kv_bytes"] == 61 * (1152 + 256) * 32768


def test_flash_64000_bf16_every_cache():
    # -c 64000 -ub 4096, one sequence, bf16 (the run of ggml-org/llama.cpp#27680)
    from kvcore.engines import EngineSettings
    r = engine_plan("llama.cpp", req("deepseek-v4-flash", 64000, kv="bf16",
                                     settings=EngineSettings(n_ubatch=4096)))
    assert list(r.log_lines) == [
        "llama_kv_cache_dsv4: creating DSV4 raw KV cache",
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 64000 cells",
        "llama_kv_cache: size =    0.00 MiB ( 64000 cells,   0 layers,  1/1 seqs), "
        "K (bf16):    0.00 MiB, V (bf16):    0.00 MiB",
        # PAD256(min(64000, 128 + 4096)) = 4352; 43 × 1024 B × 4352 = 182.75 MiB
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 4352 cells",
        "llama_kv_cache: size =  182.75 MiB (  4352 cells,  43 layers,  1/1 seqs), "
        "K (bf16):  182.75 MiB, V (bf16):    0.00 MiB",
        # ceil(64000 / 4) = 16000, padded to 16128: 21 × 1024 × 16128 = 330.75 MiB
        "llama_kv_cache_dsv4: creating DSV4 CSA compressed KV cache, size = 16000 cells",
        "llama_kv_cache: size =  330.75 MiB ( 16128 cells,  21 layers,  1/1 seqs), "
        "K (bf16):  330.75 MiB, V (bf16):    0.00 MiB",
        # ceil(64000 / 128) = 500, padded to 512: 20 × 1024 × 512 = 10 MiB
        "llama_kv_cache_dsv4: creating DSV4 HCA compressed KV cache, size = 500 cells",
        "llama_kv_cache: size =   10.00 MiB (   512 cells,  20 layers,  1/1 seqs), "
        "K (bf16):   10.00 MiB, V (bf16):    0.00 MiB",
        # indexer keys: 21 × 256 × 16128 = 86,704,128 B = 82.6875 MiB
        "llama_kv_cache_dsv4: creating DSV4 lightning-indexer KV cache, size = 16000 cells",
        "llama_kv_cache: size =   82.69 MiB ( 16128 cells,  21 layers,  1/1 seqs), "
        "K (bf16):   82.69 MiB, V (bf16):    0.00 MiB",
        "llama_kv_cache_dsv4: creating DSV4 CSA compressor state",
        "llama_dsv4_comp_state: csa ratio = 4, state = 8 x 1024, streams = 1, rs_seq = 0, "
        "layers = 21, size =    1.31 MiB",
        "llama_kv_cache_dsv4: creating DSV4 HCA compressor state",
        "llama_dsv4_comp_state: hca ratio = 128, state = 128 x 512, streams = 1, rs_seq = 0, "
        "layers = 20, size =   10.00 MiB",
        "llama_kv_cache_dsv4: creating DSV4 lightning-indexer compressor state",
        "llama_dsv4_comp_state: lid ratio = 4, state = 8 x 256, streams = 1, rs_seq = 0, "
        "layers = 21, size =    0.33 MiB",
    ]
    kv = 43 * 1024 * 4352 + 21 * 1024 * 16128 + 20 * 1024 * 512 + 21 * 256 * 16128
    state = 21 * 2 * 8 * 1024 * 4 + 20 * 2 * 128 * 512 * 4 + 21 * 2 * 8 * 256 * 4
    assert r.extra["kv_bytes"] == kv and r.extra["state_bytes"] == state == 12_206_080
    assert r.command.startswith("llama-server -m deepseek-v4-flash.gguf -c 64000 -np 1 "
                                "-ctk bf16 -ctv bf16")


def test_dsv4_streams_ignore_unified():
    # --kv-unified -np 4 -c 32768: n_ctx_seq = 32768, but the DSV4 caches keep 4 streams of it
    from kvcore.engines import EngineSettings
    m = llamacpp.kv_bytes(load_model("deepseek-v4-flash"), 8192, 4, "f16", "f16", unified=True)
    assert m.cache("csa").cells == 8192 and m.cache("csa").streams == 4
    assert m.cache("SWA").cells == 768
    # Pro: 61 layers, 30 of ratio 4 and 31 of ratio 128, q8_0 (512 → 16 × 34 = 544 B,
    # 128 → 136 B), 1 sequence of 131,072: SWA 768 × 61 × 544, CSA 32768 × 30 × 544,
    # HCA 1024 × 31 × 544, indexer 32768 × 30 × 136
    m = llamacpp.kv_bytes(load_model("deepseek-v4-pro"), 131072, 1, "q8_0", "q8_0")
    assert m.kv_bytes == (768 * 61 * 544 + 32768 * 30 * 544 + 1024 * 31 * 544
                          + 32768 * 30 * 136)
    r = engine_plan("llama.cpp", req("deepseek-v4-flash", 8192, seqs=4,
                                     settings=EngineSettings(kv_unified=True)))
    assert any("ignores --kv-unified" in n for n in r.notes)


def test_dsv4_swa_full():
    m = llamacpp.kv_bytes(load_model("deepseek-v4-flash"), 4096, 1, "f16", "f16", swa_full=True)
    assert m.cache("SWA").cells == 4096
    assert m.cache("SWA").bytes == 43 * 1024 * 4096


@pytest.mark.parametrize("model", ["glm-5.2", "deepseek-v3.2", "deepseek-v4-flash"])
def test_sparse_refusals_are_one_line(model):
    with pytest.raises(InputError) as e:
        engine_plan("llama.cpp", req(model, 8192, kv="q8_0", kv_v="f16"))
    assert "different K (q8_0) and V (f16)" in str(e.value) and "\n" not in str(e.value)
    assert e.value.field == "kv_v"
    with pytest.raises(InputError) as e:
        engine_plan("llama.cpp", EngineRequest(
            spec=load_model(model), context=8192, sequences=1,
            cache=CacheOptions(kv_k="f16", kv_v="f16", mtp=True), kv_budget_bytes=400 * GiB))
    assert "MTP" in str(e.value) and "\n" not in str(e.value)


def test_budget_counts_every_cache_and_state():
    # a KV budget is the pool: DSA needs both caches, DeepSeek-V4 its caches and f32 states
    need = 61 * (1152 + 256) * 8192
    assert engine_plan("llama.cpp", req("deepseek-v3.2", 8192, budget=need)).fits
    assert not engine_plan("llama.cpp", req("deepseek-v3.2", 8192, budget=need - 1)).fits
    # Flash at 8,192 cells: SWA 768, CSA and indexer 2,048, HCA 256 cells
    need = (43 * 1024 * 768 + 21 * 1024 * 2048 + 20 * 1024 * 256 + 21 * 256 * 2048
            + 12_206_080)
    assert engine_plan("llama.cpp", req("deepseek-v4-flash", 8192, budget=need)).fits
    assert not engine_plan("llama.cpp", req("deepseek-v4-flash", 8192, budget=need - 1)).fits


@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-v2-lite-chat", "kimi-k2-instruct"])
def test_every_mla_model_needs_one_cache_type(model):
    # llama_init_from_model refuses -ctk != -ctv wherever is_mla() holds, not only for the
    # sparse caches (b10217); the same types plan as before
    with pytest.raises(InputError) as e:
        engine_plan("llama.cpp", req(model, 8192, kv="q8_0", kv_v="f16"))
    assert "different K (q8_0) and V (f16)" in str(e.value) and "MLA" in str(e.value)
    assert "\n" not in str(e.value) and e.value.field == "kv_v"
    assert engine_plan("llama.cpp", req(model, 8192, kv="q8_0")).fits


def test_mixed_types_stay_allowed_without_mla():
    r = engine_plan("llama.cpp", req("llama-3.1-8b", 8192, kv="q8_0", kv_v="q4_0"))
    assert "-ctk q8_0 -ctv q4_0" in r.command


def test_command_echoes_a_non_default_ubatch():
    from kvcore.engines import EngineSettings

    plain = engine_plan("llama.cpp", req("llama-3.1-8b", 8192))
    assert "-ub" not in plain.command
    r = engine_plan("llama.cpp", req("llama-3.1-8b", 8192,
                                     settings=EngineSettings(n_ubatch=2048)))
    assert " -ub 2048" in r.command


def test_ax_k2_runs_as_a_dsa_cache_with_an_indexer_in_every_layer():
    # src/models/axk2.cpp @04fbdf3a: build_attn_inp_k_dsa; AXK2Config's defaults (48 layers,
    # a 128 + 32 latent, 128-value indexer keys), its converter's AXK2ForCausalLM
    from kvcore import spec_from_config
    n = 48
    cfg = {"architectures": ["AXK2ForCausalLM"], "model_type": "axk2", "vocab_size": 163840,
           "hidden_size": 2048, "intermediate_size": 5120, "moe_intermediate_size": 512,
           "num_hidden_layers": n, "num_attention_heads": 32, "num_key_value_heads": 32,
           "n_shared_experts": 1, "n_routed_experts": 128, "kv_lora_rank": 128,
           "q_lora_rank": 384, "qk_rope_head_dim": 32, "v_head_dim": 64, "qk_nope_head_dim": 64,
           "num_experts_per_tok": 8, "tie_word_embeddings": False,
           "mlp_layer_types": ["dense"] + ["sparse"] * (n - 1), "index_topk": 2048,
           "index_head_dim": 128, "index_n_heads": 16, "head_dim": 32,
           "layer_types": ["indexed_attention"] * n, "gated_norm_rank": 16}
    spec = spec_from_config(cfg, name="A.X-K2", source="test")
    r = engine_plan("llama.cpp", EngineRequest(spec=spec, context=65536, sequences=1,
                                               cache=CacheOptions(kv_k="q8_0", kv_v="q8_0"),
                                               kv_budget_bytes=40 * GiB))
    # main: 48 layers × 160 values in q8_0 (170 B) × 65,536 cells = 510 MiB; indexer: 48 × 128
    # values (136 B) × 65,536 = 408 MiB
    assert list(r.log_lines) == [
        "llama_kv_cache_dsa: creating main KV cache, size = 65536 cells",
        "llama_kv_cache: size =  510.00 MiB ( 65536 cells,  48 layers,  1/1 seqs), "
        "K (q8_0):  510.00 MiB, V (q8_0):    0.00 MiB",
        "llama_kv_cache_dsa: creating indexer KV cache, size = 65536 cells",
        "llama_kv_cache: size =  408.00 MiB ( 65536 cells,  48 layers,  1/1 seqs), "
        "K (q8_0):  408.00 MiB, V (q8_0):    0.00 MiB",
    ]
    assert any(n.startswith("llama.cpp runs A.X-K2 as axk2") for n in r.notes)
    # its converter is newer than the table read: no "registers no" note
    assert not any("registers no" in n for n in r.notes)
    for engine in ("vllm", "sglang", "trtllm"):
        with pytest.raises(InputError, match="A.X-K2"):
            engine_plan(engine, EngineRequest(spec=spec, context=65536, sequences=1,
                                              cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                              kv_budget_bytes=40 * GiB))
