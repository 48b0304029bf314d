"""inclusionAI's Bailing hybrids as their published configs give them (``layer_group_size``,
no ``layer_types``): Ring-linear-2.0 (lightning and grouped-query layers), Ling-2.6 (lightning
and MLA), Ling-3.0 (Kimi Delta Attention and MLA)."""

import pytest
from rawonly import ENGINES, refusal_and_raw

from kvcore import ConfigError
from kvcore.hf import spec_from_config
from kvcore.model import LayerKind

#: Ring-mini-linear-2.0's config.json (its mlx-community conversion's copy)
RING_MINI_LINEAR = {
    "architectures": ["BailingMoeLinearV2ForCausalLM"], "model_type": "bailing_moe_linear",
    "num_hidden_layers": 20, "hidden_size": 2048, "num_attention_heads": 16,
    "num_key_value_heads": 4, "head_dim": 128, "layer_group_size": 5, "group_norm_size": 4,
    "first_k_dense_replace": 1, "num_experts": 256, "num_experts_per_tok": 8,
    "num_shared_experts": 1, "moe_intermediate_size": 512,
    "moe_shared_expert_intermediate_size": 512, "intermediate_size": 5120, "n_group": 8,
    "topk_group": 4, "score_function": "sigmoid", "moe_router_enable_expert_bias": True,
    "routed_scaling_factor": 2.5, "vocab_size": 157184, "max_position_embeddings": 131072,
    "partial_rotary_factor": 0.5, "rope_theta": 1e6, "use_qk_norm": True,
    "linear_silu": False, "num_nextn_predict_layers": 0, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16"}
#: Ling-2.6-flash's geometry (BailingMoeV2_5ForCausalLM; its FP8 and MXFP4 republications)
LING_26_FLASH = {
    "architectures": ["BailingMoeV2_5ForCausalLM"], "model_type": "bailing_hybrid",
    "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 32, "head_dim": 128, "num_kv_heads_for_linear_attn": 32,
    "layer_group_size": 8, "group_norm_size": 4, "first_k_dense_replace": 1,
    "num_experts": 256, "num_experts_per_tok": 8, "num_shared_experts": 1,
    "moe_intermediate_size": 1024, "moe_shared_expert_intermediate_size": 1024,
    "intermediate_size": 9216, "q_lora_rank": 1536, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "max_position_embeddings": 131072, "num_nextn_predict_layers": 1, "vocab_size": 157184,
    "tie_word_embeddings": False}
#: Ling-3.0-flash's geometry (BailingMoeV3ForCausalLM; its int4 checkpoint's config)
LING_30_FLASH = {
    "architectures": ["BailingMoeV3ForCausalLM"], "model_type": "bailing_hybrid",
    "num_hidden_layers": 42, "hidden_size": 2560, "num_attention_heads": 32,
    "num_key_value_heads": 32, "head_dim": 128, "q_lora_rank": None, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "short_conv_kernel_size": 4, "no_kda_lora": True, "kda_safe_gate": True,
    "kda_lower_bound": -5.0, "num_experts": 512, "num_experts_per_tok": 8,
    "num_shared_experts": 1, "moe_intermediate_size": 768,
    "moe_shared_expert_intermediate_size": 768, "first_k_dense_replace": 2,
    "intermediate_size": 6144, "layer_group_size": 6, "vocab_size": 157184,
    "tie_word_embeddings": False, "max_position_embeddings": 131072}


def spec(cfg, **over):
    return spec_from_config({**cfg, **over}, name="bailing", source="test")


def by_kind(s):
    return {g.kind: g for g in s.groups if not g.mtp}


def test_ring_linear_closes_each_group_with_a_grouped_query_layer():
    s = spec(RING_MINI_LINEAR)
    groups = by_kind(s)
    full, linear = groups[LayerKind.FULL], groups[LayerKind.LINEAR]
    assert full.layers == (4, 9, 14, 19)
    assert (full.n_kv_heads, full.head_dim_k, full.head_dim_v) == (4, 128, 128)
    # lightning attention: a 128 × 128 matrix for each of the 16 heads (multi-head: the
    # linear layers ignore num_key_value_heads)
    assert linear.count == 16 and linear.state_values == 16 * 128 * 128
    assert linear.conv_state_values == 0
    # the published 16.4B
    assert round(s.params.total / 1e9, 1) == 16.4
    # a lightning layer projects q, k, v, the output gate and o at 16 heads × 128; a full
    # layer q and o at 16 heads, k and v at 4
    fewer_full = spec(RING_MINI_LINEAR, layer_group_size=10)
    lightning = 5 * 2048 * 2048
    gqa = 2 * 2048 * 2048 + 2 * 2048 * 4 * 128
    assert fewer_full.params.total - s.params.total == 2 * (lightning - gqa)


def test_ling_2_6_closes_each_lightning_group_with_an_mla_layer():
    s = spec(LING_26_FLASH)
    groups = by_kind(s)
    mla, linear = groups[LayerKind.MLA], groups[LayerKind.LINEAR]
    assert mla.layers == (7, 15, 23, 31) and mla.head_dim_k == 512 + 64
    assert linear.count == 28 and linear.state_values == 32 * 128 * 128
    # 104.2B, and its MTP layer (an MLA layer and a MoE, eh_proj and three norms; the model's
    # embedding and head are its own) 3.3B more: the 107B third parties list
    assert round(s.params.total / 1e9, 1) == 104.2
    assert round((s.params.total + s.params.mtp) / 1e9, 1) == 107.5
    assert s.mtp_layers == 1


def test_ling_3_published_config_reads_as_the_transformers_resaved_one():
    # transformers' BailingHybridConfig writes layer_types and linear_* fields; the
    # checkpoint's own config gives layer_group_size and the KDA fields
    s = spec(LING_30_FLASH)
    groups = by_kind(s)
    assert groups[LayerKind.MLA].count == 7
    assert groups[LayerKind.LINEAR].count == 35
    assert groups[LayerKind.LINEAR].state_values == 32 * 128 * 128 + 3 * 3 * 4096
    resaved = {**{k: v for k, v in LING_30_FLASH.items()
                  if k not in ("layer_group_size", "short_conv_kernel_size")},
               "head_dim": 64, "linear_head_dim": 128, "linear_num_heads": 32,
               "linear_conv_kernel_dim": 4,
               "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "linear_attention"
                               for i in range(42)]}
    other = spec(resaved)
    assert other.groups == s.groups and other.params.total == s.params.total


def test_a_latent_without_its_rotary_part_is_refused():
    with pytest.raises(ConfigError) as e:
        spec(LING_30_FLASH, use_mla_nope=True)
    assert e.value.field == "use_mla_nope" and "\n" not in str(e.value)


def test_a_kda_config_without_heads_is_a_one_line_error():
    with pytest.raises(ConfigError) as e:
        spec(LING_30_FLASH, num_attention_heads=None)
    assert e.value.field == "num_attention_heads" and "\n" not in str(e.value)


@pytest.mark.parametrize("cfg", [RING_MINI_LINEAR, LING_26_FLASH, LING_30_FLASH])
def test_layers_past_the_last_whole_group_are_refused(cfg):
    with pytest.raises(ConfigError) as e:
        spec(cfg, num_hidden_layers=cfg["num_hidden_layers"] + 1)
    assert e.value.field == "layer_group_size" and "\n" not in str(e.value)


@pytest.mark.parametrize(("cfg", "engine"), [
    *((RING_MINI_LINEAR, e) for e in ENGINES),
    *((LING_26_FLASH, e) for e in ENGINES if e not in ("vllm", "sglang"))])
def test_engines_are_refused_and_raw_sizes_them(cfg, engine):
    s = spec(cfg)
    error, raw = refusal_and_raw(s, engine, "h200")
    assert "Bailing hybrids' linear-attention state" in str(error) and error.field == "engine"
    # raw plans the checkpoint's bfloat16 weights
    assert raw.weights_bytes == 2 * s.params.total


#: Ling-3.0-tiny's geometry (inclusionAI/Ling-3.0-tiny: 24 layers, 128 experts, 7.9B)
LING_30_TINY = {**LING_30_FLASH, "num_hidden_layers": 24, "hidden_size": 1536,
                "num_attention_heads": 16, "num_key_value_heads": 16, "q_lora_rank": 256,
                "num_experts": 128, "moe_intermediate_size": 512,
                "moe_shared_expert_intermediate_size": 512, "first_k_dense_replace": 1,
                "intermediate_size": 4608, "layer_group_size": 4}


def test_llama_cpp_runs_ling_3_as_a_k_only_latent_beside_its_kda_states():
    from kvcore import CacheOptions, find_gpu, get_format
    from kvcore.engines import EngineRequest, engine_plan

    s = spec(LING_30_TINY)
    assert round(s.params.total / 1e9, 1) == 7.9
    q8 = get_format("q8_0")
    req = EngineRequest(spec=s, context=65536, sequences=1,
                        cache=CacheOptions(kv_k=q8, kv_v=q8), gpus=(find_gpu("4090"),))
    r = engine_plan("llama.cpp", req)
    # 6 MLA layers of one 576-value latent, K only, in q8_0 (612 bytes a row): 229.5 MiB at
    # 64k tokens, the cache a public run of the published Q4_K_M GGUF reported at 64k (a q8_0
    # cache gives exactly that; f16 would be 432 MiB)
    (kv,) = [line for line in r.log_lines if line.startswith("llama_kv_cache: size")]
    assert "229.50 MiB" in kv and "6 layers" in kv
    # the 18 KDA layers' f32 state: 16 heads × 128 × 128 and 3 × 3 × 2048 conv values each
    (rs,) = [line for line in r.log_lines if line.startswith("llama_memory_recurrent")]
    assert f"{18 * (16 * 128 * 128 + 3 * 3 * 2048) * 4 / 2**20:.2f} MiB" in rs
    error, _ = refusal_and_raw(s, "trtllm", "h200")
    assert "Bailing hybrids' linear-attention state" in str(error)


@pytest.mark.parametrize("nextn", [0, 1])
def test_a_bailingmoe3_gguf_reads_as_its_config(tmp_path, nextn):
    from ggufmake import dense_model, write_gguf

    from kvcore import load_model

    cfg = LING_30_TINY
    n, arch = cfg["num_hidden_layers"], "bailingmoe3"
    heads = cfg["num_attention_heads"]
    blocks = n + nextn
    # llama.cpp's loader (src/models/bailingmoe3.cpp): head_count_kv by block, 0 on the KDA
    # layers, the draft blocks (MLA) counted in block_count after the decoder's
    kv = [heads if (i + 1) % 4 == 0 or i >= n else 0 for i in range(blocks)]
    meta, tensors = dense_model(
        arch, layers=blocks, hidden=cfg["hidden_size"], heads=heads, kv_heads=heads,
        head_dim=192, ffn=cfg["intermediate_size"], vocab=256, ctx=131072, quant=8,
        head_type=8, experts=cfg["num_experts"], used=cfg["num_experts_per_tok"],
        expert_ffn=cfg["moe_intermediate_size"], extra={
            f"{arch}.attention.head_count_kv": kv, f"{arch}.attention.key_length_mla": 192,
            f"{arch}.attention.value_length_mla": 128, f"{arch}.attention.kv_lora_rank": 512,
            f"{arch}.attention.q_lora_rank": 256, f"{arch}.rope.dimension_count": 64,
            f"{arch}.ssm.conv_kernel": 4, f"{arch}.kda.head_dim": 128,
            f"{arch}.expert_shared_count": 1, f"{arch}.leading_dense_block_count": 1,
            f"{arch}.nextn_predict_layers": nextn})
    path = tmp_path / "ling.gguf"
    write_gguf(path, meta, tensors)
    s = load_model(str(path))
    assert s.model_type == "bailing_hybrid" and s.mtp_layers == nextn
    ref = spec(LING_30_TINY)
    assert s.groups_for(mtp=False) == ref.groups_for(mtp=False)


def test_vllm_runs_ling_3_with_kimi_linears_kda_pages_and_no_lora():
    from kvcore import CacheOptions, InputError, find_gpu, get_format
    from kvcore.engines import EngineRequest, EngineSettings, engine_plan
    from kvcore.engines.lora import LoRA
    from kvcore.parallel import Parallel

    s = spec(LING_30_FLASH)
    f16 = get_format("f16")

    def req(**over):
        return EngineRequest(spec=s, context=131072, sequences=4, weights="fp8",
                             cache=CacheOptions(kv_k=f16, kv_v=f16), gpus=(find_gpu("h100"),),
                             parallel=Parallel(tp=4), **over)

    r = engine_plan("vllm", req())
    # a rank's KDA state: 8 of the 32 heads' 128 × 128 matrices in f32 and their q, k, v
    # convolutions' 3 taps in bf16 (542,720 bytes) fills a page of 128-token multiples of the
    # 576-value latent: 4 × 128 tokens
    state = 8 * 128 * 128 * 4 + 3 * 3 * 8 * 128 * 2
    assert state == 542_720 and r.block_tokens == 512
    with pytest.raises(InputError, match="BailingMoeV25ForCausalLM. take no LoRA") as e:
        engine_plan("vllm", req(settings=EngineSettings(lora=LoRA(1, 16))))
    assert e.value.field == "enable_lora"


def test_vllm_runs_ling_2_6_with_lightning_pages_split_by_its_norm_groups():
    from kvcore import CacheOptions, InputError, find_gpu, get_format
    from kvcore.engines import EngineRequest, engine_plan
    from kvcore.parallel import Parallel

    s = spec(LING_26_FLASH)
    f16 = get_format("f16")

    def req(tp):
        return EngineRequest(spec=s, context=131072, sequences=4, weights="fp8",
                             cache=CacheOptions(kv_k=f16, kv_v=f16),
                             gpus=(find_gpu("h100"),), parallel=Parallel(tp=tp))

    # a rank's lightning state: 8 of the 32 heads' 128 × 128 matrices in the model dtype
    # (262,144 bytes) fills a page of 2 × 128 tokens of the 576-value latent
    assert engine_plan("vllm", req(4)).block_tokens == 256
    # its output norm runs over group_norm_size 4 groups of heads: tp 8 would split a group
    with pytest.raises(InputError, match="4 heads .channels, or norm groups.") as e:
        engine_plan("vllm", req(8))
    assert e.value.field == "tp"


def test_sglang_runs_ling_2_6_with_a_lightning_state_pool():
    from kvcore import CacheOptions, find_gpu, get_format
    from kvcore.engines import EngineRequest, engine_plan
    from kvcore.parallel import Parallel

    f16 = get_format("f16")
    req = EngineRequest(spec=spec(LING_26_FLASH), context=131072, sequences=4, weights="fp8",
                        cache=CacheOptions(kv_k=f16, kv_v=f16), gpus=(find_gpu("h100"),),
                        parallel=Parallel(tp=4))
    r = engine_plan("sglang", req)
    # a slot: 28 lightning layers × 8 of the 32 heads' 128 × 128 matrices in f32 (14.0 MiB);
    # extra_buffer gives a request 3 + 2 slots
    (pool,) = [n for n in r.notes if n.startswith("Mamba state pool")]
    assert f"slots of {28 * 8 * 128 * 128 * 4 / 2**20:.1f} MiB" in pool
    assert "(5 slots a request)" in pool


def test_sglang_runs_ling_3_with_kimi_linear_state_slots():
    from dataclasses import replace

    from kvcore import CacheOptions, find_gpu, get_format
    from kvcore.engines import EngineRequest, engine_plan
    from kvcore.parallel import Parallel

    f16 = get_format("f16")
    req = EngineRequest(spec=spec(LING_30_FLASH), context=131072, sequences=4,
                        cache=CacheOptions(kv_k=f16, kv_v=f16), gpus=(find_gpu("h200"),) * 2,
                        parallel=Parallel(tp=2))
    r = engine_plan("sglang", req)
    # configs/bailing_hybrid.py with use_kda: KimiLinearStateShape over 32 heads × 128 split
    # in two, three convolutions of 3 columns in bf16 and a 16 × 128 × 128 state in f32, in
    # each of the 35 KDA layers (42 layers, an MLA layer closing every 6)
    slot = 35 * (3 * 3 * (32 * 128 // 2) * 2 + 16 * 128 * 128 * 4)
    (pool,) = [n for n in r.notes if n.startswith("Mamba state pool")]
    assert f"slots of {slot / 2**20:.1f} MiB" in pool and "(5 slots a request)" in pool
    # the MLA pool: 7 layers of a 576-value latent (kv_lora_rank 512 + qk_rope_head_dim 64)
    (kv,) = [n for n in r.log_lines if n.startswith("KV Cache is allocated")]
    tokens = int(kv.split("#tokens: ")[1].split(",")[0])
    assert abs(tokens * 7 * 576 * 2 - r.kv_pool_bytes) < 7 * 576 * 2
    assert r.fits
    # the breakable prefill graph is dropped only where the config names its KDA layers
    # (uses_kda_attention: linear_attn_config's kda_layers, or layer_types with
    # linear_num_heads and linear_head_dim), not in the published layer_group_size form:
    # 0.898 on two H200s, 0.909 without the graph
    assert "mem_fraction_static=0.898" in r.log_lines
    assert not req.spec.kda_declared and req.spec.kda
    named = spec(LING_30_FLASH, layer_types=["full_attention" if (i + 1) % 6 == 0
                                             else "linear_attention" for i in range(42)],
                 linear_num_heads=32, linear_head_dim=128)
    assert named.kda_declared
    assert "mem_fraction_static=0.909" in engine_plan("sglang", replace(req, spec=named)).log_lines
