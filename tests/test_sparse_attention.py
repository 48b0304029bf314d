"""DeepSeek-V4 (compressed sparse attention) and MiniMax-M3 (block-sparse attention with index
heads): raw sizes their caches layer kind by layer kind; SGLang sizes DeepSeek-V4's pools
(DSV4PoolConfigurator), SGLang and vLLM MiniMax-M3's; the other engines refuse them."""

import json
from pathlib import Path

import pytest

from app.cli import main
from kvcore import CacheOptions, LayerKind, cache_size, load_model, model_catalog, spec_from_config
from kvcore.engines import EngineSettings
from kvcore.kv import bytes_per_token, marginal_bytes_per_token
from kvcore.parallel import Parallel

CONFIGS = Path(__file__).parent / "data" / "configs"
ENGINES = ("vllm", "sglang", "llama.cpp", "trtllm")
L = 131_072


def config(name):
    entry = next((e for e in model_catalog() if e.id == name), None)
    if entry is not None:
        return entry.config()
    return json.loads((CONFIGS / f"{name}.json").read_text())


def spec(name):
    return spec_from_config(config(name), name=name, source="test")


def ref(name):
    """A catalog id, or the path of a config kept among the test data."""
    path = CONFIGS / f"{name}.json"
    return str(path) if path.exists() else name


def run(capsys, *args):
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def by_kind(size):
    out = {}
    for g in size.groups:
        key = (g.group.kind, g.group.ratio)
        out[key] = out.get(key, 0) + g.total_bytes
    return out


def test_v4_flash_raw_f16_per_kind():
    # compress_ratios (43 layers + 1 MTP): 0 at 0, 1; 4 at 2, 4, ..., 42 (21); 128 at 3, ...,
    # 41 (20); the 44th entry (0) is the MTP layer. Every layer keeps a 128-token window of
    # one 512-value latent (K = V); f16 = 2 B a value; the compressor state is float32.
    s = spec("deepseek-v4-flash")
    assert s.num_layers == 43
    size = cache_size(s, L, 1, CacheOptions())
    kinds = by_kind(size)
    assert kinds[(LayerKind.SLIDING, 1)] == 43 * 128 * 512 * 2 == 5_636_096
    assert kinds[(LayerKind.COMPRESSED, 4)] == 21 * (L // 4) * 512 * 2 == 704_643_072
    assert kinds[(LayerKind.COMPRESSED, 128)] == 20 * (L // 128) * 512 * 2 == 20_971_520
    # the indexer's key: index_head_dim 128 per 4 tokens
    assert kinds[(LayerKind.INDEX, 4)] == 21 * (L // 4) * 128 * 2 == 176_160_768
    # ratio 4: kv + score rows of two overlapping blocks, 2 × 8 × (2·512), and the indexer's
    # compressor 2 × 8 × (2·128); ratio 128: 2 × 128 × 512; 4 bytes each
    assert kinds[(LayerKind.COMPRESSOR, 4)] == 21 * (2 * 8 * 1024 + 2 * 8 * 256) * 4 == 1_720_320
    assert kinds[(LayerKind.COMPRESSOR, 128)] == 20 * 2 * 128 * 512 * 4 == 10_485_760
    # past the window a token adds 21 × (1024 + 256) / 4 + 20 × 1024 / 128
    assert marginal_bytes_per_token(s) == 21 * 320 + 20 * 8 == 6_880
    assert bytes_per_token(s) == 6_880 + 43 * 1024
    # a block is folded only when whole: 130 tokens hold 32 ratio-4 entries, no ratio-128 one
    assert by_kind(cache_size(s, 130, 1))[(LayerKind.COMPRESSED, 4)] == 21 * 32 * 1024
    assert (LayerKind.COMPRESSED, 128) not in {k for k, v in by_kind(cache_size(s, 127, 1)).items()
                                               if v}


def test_v4_pro_raw_fp8_and_block_formats():
    # Pro: 61 layers: 128 at 0, 1 and the odd layers to 59 (31), 4 at 2, 4, ..., 60 (30)
    s = spec("deepseek-v4-pro")
    fp8 = CacheOptions(kv_k="fp8", kv_v="fp8")
    assert marginal_bytes_per_token(s, fp8) == 30 * (512 + 128) // 4 + 31 * 512 // 128 == 4_924
    # q8_0 latents (544 B) over 128 tokens are not whole bytes: 30 × (544 + 136) / 4 = 5,100
    # and 31 × 544 / 128 = 131.75, rounded up once to 5,232
    q8 = CacheOptions(kv_k="q8_0", kv_v="q8_0")
    assert marginal_bytes_per_token(s, q8) == 5_232
    # the cache itself is exact: whole entries
    assert cache_size(s, 1280, 1, q8).kv_bytes == (61 * 128 * 544 + 30 * 320 * (544 + 136)
                                                   + 31 * 10 * 544)


def test_v4_sglang_fp8_checkpoint_config_reads_the_same():
    # SGLang's FP8 repack names the model_type deepseek_ref; the cache is the same
    assert spec("deepseek-v4-pro-fp8-sgl").groups == spec("deepseek-v4-pro").groups


def test_v4_parameters_and_checkpoint_format():
    # published: Flash 284B total / 13B active, Pro 1.6T / 49B
    flash, pro = spec("deepseek-v4-flash"), spec("deepseek-v4-pro")
    assert round(flash.params.total / 1e9) == 284 and round(flash.params.active / 1e9) == 13
    assert round(pro.params.total / 1e11) == 16 and round(pro.params.active / 1e9) == 49
    assert flash.checkpoint_weights == "fp8_mxfp4_moe"


def test_m3_raw_f16_per_kind():
    # 60 layers of 4 KV heads × 128 for K and V; the 57 sparse layers (3..59) add one index
    # key head of sparse_index_dim 128 (sparse_disable_index_value 1: no index value)
    s = spec("minimax-m3")
    size = cache_size(s, L, 1, CacheOptions())
    kinds = by_kind(size)
    assert kinds[(LayerKind.FULL, 1)] == 60 * 4 * (128 + 128) * 2 * L
    assert kinds[(LayerKind.INDEX, 1)] == 57 * 128 * 2 * L
    assert bytes_per_token(s) == marginal_bytes_per_token(s) == 122_880 + 14_592 == 137_472
    # an index value where the layer keeps one
    cfg = config("minimax-m3")
    cfg["sparse_attention_config"]["sparse_disable_index_value"][3] = 0
    s2 = spec_from_config(cfg, name="m3", source="test")
    assert bytes_per_token(s2) == 137_472 + 128 * 2


def test_m3_parameters_moe_pattern():
    s = spec("minimax-m3")
    # 3 dense layers of dense_intermediate_size 12288, 57 MoE layers of 128 experts × 3072
    assert s.params.experts == 57 * 128 * 3 * 6144 * 3072


@pytest.mark.parametrize(("name", "words", "engines"), [
    ("deepseek-v4-flash", "DeepSeek-V4's compressed sparse attention", ("trtllm",)),
    ("deepseek-v4-pro-fp8-sgl", "DeepSeek-V4's compressed sparse attention", ("trtllm",)),
    # (SGLang and vLLM size MiniMax-M3's cache: tests/test_sglang_minimax.py)
    ("minimax-m3", "MiniMax-M3's block-sparse attention index cache", ("llama.cpp", "trtllm")),
])
def test_engines_refuse_what_they_do_not_model(name, words, engines, capsys):
    for engine in engines:
        code, out, err = run(capsys, ref(name), "--ctx", "128k", "--engine", engine,
                             "--gpu", "h200")
        assert code == 2 and out == ""
        assert words in err and engine in err and err.count("\n") == 1
    code, out, _ = run(capsys, ref(name), "--ctx", "128k", "--gpu", "h200")
    assert code == 0 and "index" in out


#: what the refusal names as missing (docs/ENGINES.md §7): TensorRT-LLM runs DeepSeek-V4
_DSV4_WHY = {
    "trtllm": ("DeepseekV4CacheManager", "KVCacheManagerV2", "per-role pools", "typical step"),
}


@pytest.mark.parametrize("name", ["deepseek-v4-flash", "deepseek-v4-pro"])
@pytest.mark.parametrize("engine", sorted(_DSV4_WHY))
def test_dsv4_refusal_names_what_is_missing(name, engine, capsys):
    code, out, err = run(capsys, ref(name), "--ctx", "128k", "--engine", engine)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert all(w in err for w in _DSV4_WHY[engine]), err


@pytest.mark.parametrize("name", ["deepseek-v4-flash", "deepseek-v4-pro"])
def test_llamacpp_sizes_dsv4(name, capsys):
    # llama_kv_cache_dsv4 @3f545bec (tests/test_llamacpp_sparse.py works the lines by hand)
    code, out, _ = run(capsys, ref(name), "--ctx", "128k", "--engine", "llama.cpp",
                       "--kv-budget", "200GiB")
    assert code == 0
    assert "llama_kv_cache_dsv4: creating DSV4 CSA compressed KV cache, size = 32768 cells" in out
    assert "llama_dsv4_comp_state: hca ratio = 128, state = 128 x 512" in out


def test_m3_refusal_gives_no_dsv4_reason(capsys):
    code, _, err = run(capsys, ref("minimax-m3"), "--ctx", "128k", "--engine", "trtllm")
    assert code == 2 and "KVCacheManagerV2" not in err


# --- SGLang's DeepSeek-V4 pools (DSV4PoolConfigurator) ---------------------------------------

def sglang_v4(name, seqs, **kw):
    from kvcore import find_gpu, get_format
    from kvcore.engines import EngineRequest, engine_plan
    kv, mtp = kw.pop("kv", "f16"), kw.pop("mtp", False)
    fmt = get_format(kv)
    return engine_plan("sglang", EngineRequest(
        spec=spec(name), context=L, sequences=seqs,
        cache=CacheOptions(kv_k=fmt, kv_v=fmt, mtp=mtp),
        gpus=() if "kv_budget_bytes" in kw else (find_gpu("h200"),), **kw))


def test_sglang_v4_flash_pools_from_a_budget():
    # SGLang 0.5.23's DSV4PoolConfigurator. A latent row (KVLayout.V4) is 448 fp8 + 64 × 2 bf16
    # + 448/64 scales + 1 pad = 584 B, each page padded to a multiple of 576 B:
    #   window pages of 256 rows: 149,504 → 149,760 B = 585 B a token
    #   ratio-4 pages of 64 rows: 37,376 → 37,440 B = 585 B; ratio-128 pages of 2 rows:
    #   1,168 → 1,728 B = 864 B
    # a window slot: 585 × 43 + 8/256 (8 ring rows a 256-token page) × (8,192 + 2,048) × 21
    #   = 25,155 + 6,720 = 31,875 B
    # bytes per full token: 0.1 × 31,875 + (585/4 + 132/4) × 21 + 864/128 × 20
    #   = 3,187.5 + 3,764.25 + 135 = 7,086.75
    # c128 state (4 running requests): (4 + 1) × 128 + 128 + 1 = 769 rows → 896 (multiple of
    # 128) × 2 × 512 × 4 B × 20 layers = 73,400,320 B
    # full = int((107,374,182,400 − 73,400,320) / 7,086.75) = 15,141,042 → 15,140,864 (page 256)
    # swa = int(1,514,086.4) = 1,514,086 → 1,513,984; c4 = full // 4 = 3,785,216;
    # c128 = full // 128 = 118,288; c4_state = 1,513,984 // 256 × 8 = 47,312
    r = sglang_v4("deepseek-v4-flash", 4, kv_budget_bytes=100 * 1024**3)
    assert r.kv_tokens == 15_140_864 and r.blocks == 15_140_864 // 256
    assert r.extra["bytes_per_full_token"] == 7086.75
    assert r.extra["c128_state_bytes"] == 73_400_320
    assert r.extra["pools"] == {"full": 15_140_864, "swa": 1_513_984, "c4": 3_785_216,
                                "c128": 118_288, "c4_state": 47_312, "c128_state": 0}
    assert r.log_lines == (
        "DSV4 SWA sizing: mode=ratio (explicit), swa_tokens=1513984, swa_full_tokens_ratio=0.1",
        "DSV4 memory calculation: unified=False, unified_fp8=False, dspark_draft_bf16=False, "
        "bytes_per_full_token=7086.75, available_bytes=100.00 GB, c128_state_fixed=0.07 GB, "
        "c2_state_fixed=0.00 GB, swa_fixed=0.00 GB, swa_ring_fixed=0.00 GB, "
        "c4_state_fixed=0.00 GB, full_token=15140864",
        "DSV4 pool sizes: full=15140864, swa=1513984, c4=3785216, c128=118288, "
        "c4_state=47312, c128_state=0")
    # the most sequences: --max-running-requests n sizes the c128 state, (n + 1) × 128 + 129
    # rows rounded up to 128, × 4,096 B × 20 layers; n = 114: 14,976 rows = 1,226,833,920 B,
    # full = int((107,374,182,400 − 1,226,833,920) / 7,086.75) → 14,978,048 ≥ 114 × 131,072
    # = 14,942,208; n = 115: 15,104 rows → 14,976,768 < 15,073,280
    assert r.fits and r.max_sequences == 114


def test_sglang_v4_pro_pools_from_a_budget():
    # Pro: 61 layers, 30 of ratio 4, 31 of ratio 128: a window slot 585 × 61 + 8/256 × 10,240
    # × 30 = 35,685 + 9,600 = 45,285 B;
    #   0.1 × 45,285 + 179.25 × 30 + 6.75 × 31 = 4,528.5 + 5,377.5 + 209.25 = 10,115.25
    # c128 state (8 requests): 9 × 128 + 129 = 1,281 rows → 1,408 × 4,096 B × 31 = 178,782,208 B
    # full = int((107,374,182,400 − 178,782,208) / 10,115.25) = 10,597,404 → 10,597,376;
    # swa = int(1,059,737.6) → 1,059,584; c4 2,649,344; c128 82,792; c4_state 33,112
    r = sglang_v4("deepseek-v4-pro", 8, kv_budget_bytes=100 * 1024**3, kv="fp8_e4m3")
    assert r.extra["bytes_per_full_token"] == 10115.25
    assert r.extra["c128_state_bytes"] == 178_782_208
    assert r.extra["pools"] == {"full": 10_597_376, "swa": 1_059_584, "c4": 2_649_344,
                                "c128": 82_792, "c4_state": 33_112, "c128_state": 0}
    assert "--kv-cache-dtype fp8_e4m3" in r.command and "--max-running-requests 8" in r.command


def test_sglang_v4_pro_over_two_pipeline_stages():
    # get_pp_indices: 61 layers over 2 stages are [0, 30) and [30, 61); each stage sizes its
    # pools over its own slice of compress_ratios, and the pipeline keeps the smallest count
    #   stage 0: 30 layers, 14 of ratio 4, 16 of ratio 128: slot 585 × 30 + 320 × 14 = 22,030;
    #     0.1 × 22,030 + 179.25 × 14 + 6.75 × 16 = 4,820.5; c128 1,408 rows × 4,096 × 16
    #     = 92,274,688 → int((107,374,182,400 − 92,274,688) / 4,820.5) = 22,255,348 → 22,255,104
    #   stage 1: 31 layers, 16 and 15: slot 585 × 31 + 320 × 16 = 23,255;
    #     0.1 × 23,255 + 179.25 × 16 + 6.75 × 15 = 5,294.75; c128 1,408 × 4,096 × 15
    #     = 86,507,520 → int((107,374,182,400 − 86,507,520) / 5,294.75) = 20,263,029
    #     → 20,262,912
    r = sglang_v4("deepseek-v4-pro", 8, kv_budget_bytes=100 * 1024**3,
                  parallel=Parallel(pp=2))
    assert r.kv_tokens == 20_262_912 and r.binding_stage == 1
    assert r.extra["bytes_per_full_token"] == 5294.75
    assert r.extra["c128_state_bytes"] == 86_507_520
    assert r.log_lines[0] == "DSV4 pool PP slice: rank=1 layers=[30,61) local=31/61"
    assert "--pp 2" in r.command


def test_sglang_v4_mtp_under_pipeline_stages_is_refused(capsys):
    code, out, err = run(capsys, "deepseek-v4-flash", "--ctx", "128k", "--engine", "sglang",
                         "--gpu", "h200", "--tp", "8", "--pp", "2", "--mtp")
    assert code == 2 and out == "" and "last pipeline stage" in err and err.count("\n") == 1


def test_sglang_v4_data_parallel_replicas():
    # --dp without DP attention: replicas, each sizing the pools above with its own
    # --max-running-requests 4 (attn_dp_size 1, so the c128 reserve is the same)
    r = sglang_v4("deepseek-v4-flash", 4, kv_budget_bytes=100 * 1024**3,
                  parallel=Parallel(dp=2))
    assert r.kv_tokens == 2 * 15_140_864 and r.extra["pools"]["full"] == 15_140_864
    assert r.extra["c128_state_bytes"] == 73_400_320 and "--dp 2" in r.command


def test_sglang_v4_with_its_mtp_draft():
    # EAGLE with the NextN layer: rings of 16 (ratio 4) and 256 (ratio 128) rows, and every
    # token priced (43 + 1)/43 as dear for the draft worker's pools:
    #   window slot 585 × 43 + 16/256 × 10,240 × 21 = 25,155 + 13,440 = 38,595 B
    #   (0.1 × 38,595 + 3,764.25 + 135) × 44/43 = 7,758.75 × 44/43 = 7,939.186…
    # c128 state (4 requests): 5 × 256 + 256 + 1 = 1,537 rows → 1,664 × 4,096 B × 20
    #   = 136,314,880 B
    # full = int((107,374,182,400 − 136,314,880) / 7,939.186…) = 13,507,413 → 13,507,328;
    # swa → 1,350,656; c4_state = 1,350,656 // 256 × 16 = 84,416
    r = sglang_v4("deepseek-v4-flash", 4, kv_budget_bytes=100 * 1024**3, mtp=True)
    assert round(r.extra["bytes_per_full_token"], 6) == round(7758.75 * 44 / 43, 6)
    assert r.extra["c128_state_bytes"] == 136_314_880
    assert r.extra["pools"] == {"full": 13_507_328, "swa": 1_350_656, "c4": 3_376_832,
                                "c128": 105_526, "c4_state": 84_416, "c128_state": 0}
    assert ("--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 4") in r.command
    assert any("44/43" in n for n in r.notes)


def test_sglang_v4_max_total_tokens_sizes_the_pools_again():
    # _apply_token_constraints: 1,000,000 < the profiled 15,140,864, so
    # calculate_pool_sizes_from_max_tokens sizes every pool from it, to the page: full
    # 999,936; swa int(99,993.6) → 99,840; c4 249,984; c128 7,812; c4_state 390 × 8 = 3,120
    r = sglang_v4("deepseek-v4-flash", 4, kv_budget_bytes=100 * 1024**3,
                  settings=EngineSettings(max_total_tokens=1_000_000))
    assert r.kv_tokens == 999_936 and r.max_context == 999_936 // 4
    assert r.max_sequences == 999_936 // L == 7
    assert r.extra["pools"] == {"full": 999_936, "swa": 99_840, "c4": 249_984,
                                "c128": 7_812, "c4_state": 3_120, "c128_state": 0}
    # the profiled pools' three lines, then the capped ones' two
    assert r.log_lines[1].endswith("full_token=15140864")
    assert r.log_lines[3:] == (
        "DSV4 SWA sizing: mode=ratio (explicit), swa_tokens=99840, swa_full_tokens_ratio=0.1",
        "DSV4 pool sizes: full=999936, swa=99840, c4=249984, c128=7812, c4_state=3120, "
        "c128_state=0")
    assert "--max-total-tokens 1000000" in r.command
    # above the profiled count SGLang warns and keeps it
    big = sglang_v4("deepseek-v4-flash", 4, kv_budget_bytes=100 * 1024**3,
                    settings=EngineSettings(max_total_tokens=20_000_000))
    assert big.kv_tokens == 15_140_864
    assert big.log_lines[-1] == ("max_total_tokens=20000000 is larger than the profiled value "
                                 "15140864. Use the profiled value instead.")
    # a pool under the context: tp_worker warns once it is built
    short = sglang_v4("deepseek-v4-flash", 1, kv_budget_bytes=100 * 1024**3,
                      settings=EngineSettings(max_total_tokens=100_000))
    assert short.kv_tokens == 99_840 and not short.fits
    assert short.log_lines[-1].startswith("KV pool holds 99840 tokens, fewer than "
                                          "--context-length 131072.")
    # a cap whose window pool (int(299.8) → 256 tokens) is under the floor: SGLang raises
    low = sglang_v4("deepseek-v4-flash", 4, kv_budget_bytes=100 * 1024**3,
                    settings=EngineSettings(max_total_tokens=3_000))
    assert not low.fits and low.kv_tokens == 0
    assert low.log_lines[0].startswith("ValueError: SWA pool (256 tokens) cannot hold")


def test_sglang_v4_tiny_pool_is_refused_at_start(capsys):
    # 30 MiB (31,457,280 B) is less than one request's c128 state (41,943,040 B): full and
    # window pools of 0 tokens, under SGLang's admission floor of window 128 + page 256, on
    # which it raises
    code, out, _ = run(capsys, "deepseek-v4-flash", "--ctx", "4k", "--engine", "sglang",
                       "--kv-budget", "30MiB")
    assert code == 0 and "does not fit" in out and "max context 0" in out
    assert ("ValueError: SWA pool (0 tokens) cannot hold even one request: the prefill "
            "admission floor is sliding_window_size (128) + page_size (256).") in out
    assert "DSV4 pool sizes" not in out


def test_sglang_v4_on_an_h200_budget():
    # the budget itself is SGLang's usual one (mem_fraction_static, weights); the DSV4 line
    # prints it in GiB and the tokens follow from it as above
    r = sglang_v4("deepseek-v4-flash", 1, parallel=Parallel(tp=8))
    rest = r.kv_pool_bytes
    fixed = (2 * 128 + 129 + 127) // 128 * 128 * 2 * 512 * 4 * 20
    assert r.extra["c128_state_bytes"] == fixed == 41_943_040
    assert r.kv_tokens == int((rest - fixed) / 7086.75) // 256 * 256
    assert r.log_lines[0].startswith("mem_fraction_static=")
    assert f"available_bytes={rest / 1024**3:.2f} GB" in r.log_lines[2]


@pytest.mark.parametrize(("args", "words"), [
    (("--enable-lora", "--max-lora-rank", "16", "--lora-target-modules", "all"), "--enable-lora"),
    (("--kv", "fp8_e5m2"), "fp8_e5m2"),
    (("--kv", "q8_0"), "q8_0"),
])
def test_sglang_v4_refuses_what_it_does_not_size(args, words, capsys):
    code, out, err = run(capsys, "deepseek-v4-flash", "--ctx", "128k", "--engine", "sglang",
                         "--gpu", "h200", *args)
    assert code == 2 and out == "" and words in err and err.count("\n") == 1


def test_sglang_v4_cli_prints_the_pool_lines(capsys):
    code, out, _ = run(capsys, "deepseek-v4-flash", "--ctx", "128k", "--engine", "sglang",
                       "--gpu", "h200", "--tp", "8")
    assert code == 0 and "DSV4 pool sizes: full=" in out and "585 B with the page padding" in out
    assert "DSV4 SWA sizing: mode=ratio (explicit)" in out


@pytest.mark.parametrize(("args", "words"), [
    (("--mtp", "--speculative-tokens", "11"), "at most 10"),
    (("--mtp", "--speculative-tokens", "1"), "2 to 10"),
])
def test_sglang_v4_draft_tokens_the_ring_keeps(args, words, capsys):
    code, out, err = run(capsys, "deepseek-v4-flash", "--ctx", "128k", "--engine", "sglang",
                         "--gpu", "h200", "--tp", "8", *args)
    assert code == 2 and out == "" and words in err and err.count("\n") == 1


# --- vLLM's DeepSeek-V4 cache (release 0.33.0: packed KV cache groups) -----------------------
# Pages (fp8_ds_mla: 448 fp8 + 64 × 2 bf16 + 7 scale bytes + 1 pad = 584 B a row; every page
# rounded up to a multiple of 576 B):
#   window (every layer): 64-token blocks, 64 × 584 = 37,376 → 65 × 576 = 37,440 B, W = 128
#   ratio-4 latent: 256-token blocks of 256 / 4 = 64 rows: 37,376 → 37,440 B
#   ratio-4 indexer keys: 64 rows × (128 + 128 / 128 × 4 = 132) = 8,448 → 15 × 576 = 8,640 B
#   ratio-128 latent: 256 / 128 = 2 rows × 584 = 1,168 → 3 × 576 = 1,728 B
#   ratio-4 compressor state: 4-token blocks of 2 × 2 × 512 float32 = 8,192 B a row:
#     32,768 → 57 × 576 = 32,832 B, a window of 8 rows
#   ratio-4 indexer compressor state: 4 × 2 × 2 × 128 × 4 = 8,192 → 8,640 B, window 8
#   ratio-128 compressor state: 8-token blocks of 2 × 512 × 4 = 4,096 B: 32,768 → 32,832 B,
#     window 128
# Buckets (one spec type and block size): windows; the 256-token full-attention specs; the
# ratio-4 states; the ratio-128 states. The ratio-4 state bucket mixes two page sizes in equal
# counts, so the buckets of one page size each are split into groups of about as many layers
# (_approximate_gcd over the balanced buckets' counts, no fewer than that bucket's).
# A block id spans the widest group; a request at L tokens needs cdiv(L, 256) full blocks and
# cdiv(min(W − 1 + 2 × max_num_batched_tokens, L), block) + 1 of each window and state group.


def vllm_v4(name, seqs, length=L, **kw):
    from kvcore import find_gpu, get_format
    from kvcore.engines import EngineRequest, EngineSettings, engine_plan
    fmt = get_format(kw.pop("kv", "fp8_e4m3"))
    settings = EngineSettings(**kw.pop("settings", {}))
    mtp = kw.pop("mtp", False)
    return engine_plan("vllm", EngineRequest(
        spec=spec(name), context=length, sequences=seqs,
        cache=CacheOptions(kv_k=fmt, kv_v=fmt, mtp=mtp),
        gpus=(find_gpu(kw.pop("gpu", "h200")),), settings=settings,
        parallel=kw.pop("parallel", Parallel(tp=8)), **kw))


def test_vllm_v4_flash_pages_and_groups():
    from kvcore.engines.vllm_dsv4 import approximate_gcd, bytes_per_block, groups, layer_specs
    s = spec("deepseek-v4-flash")
    pages = {ls.what: (ls.page, len(layers)) for ls, layers in layer_specs(s)}
    assert pages == {"window": (37_440, 43), "c4 latent": (37_440, 21),
                     "c4 indexer": (8_640, 21), "c4 state": (32_832, 21),
                     "c4 indexer state": (8_640, 21), "c128 latent": (1_728, 20),
                     "c128 state": (32_832, 20)}
    # balanced bucket counts 43 (windows), 21 (ratio-4 states), 20 (ratio-128 states), no
    # fewer than 21: d = 22 pads 1 + 1 + 2 = 4 (d = 21 pads 20 + 0 + 1 = 21)
    assert approximate_gcd([43, 21, 20], 21) == 22
    gs = groups(s)
    # windows in cdiv(43, 22) = 2 groups of 22 and 21; full 21 × 37,440 + 21 × 8,640 +
    # 20 × 1,728 = 1,002,240; ratio-4 states 21 × (32,832 + 8,640) = 870,912; ratio-128
    # states 20 × 32,832 = 656,640
    assert sorted((g.layers, g.bytes) for g in gs) == sorted([
        (22, 823_680), (21, 786_240), (62, 1_002_240), (42, 870_912), (20, 656_640)])
    assert bytes_per_block(gs) == 1_002_240


def test_vllm_v4_flash_from_a_budget():
    # 100 GiB // 1,002,240 = 107,134 blocks; at 131,072 tokens with max_num_batched_tokens
    # 8,192 (H200: 70 to 160 GiB) and 2 batches in flight (16,384 tokens) a request needs
    # 512 (full) + 2 × (cdiv(127 + 16,384, 64) + 1 = 259) + (cdiv(7 + 16,384, 4) + 1 = 4,099)
    # + (cdiv(127 + 16,384, 8) + 1 = 2,065) = 7,194 blocks
    r = vllm_v4("deepseek-v4-flash", 4, kv_budget_bytes=100 * 1024**3)
    assert r.blocks == 107_134 and r.extra["bytes_per_block"] == 1_002_240
    assert r.extra["blocks_per_request"] == 7_194 and r.extra["in_flight_tokens"] == 16_384
    assert r.max_concurrency == 107_134 / 7_194
    # the null block held back: (107,134 − 1) // 7,194 = 14
    assert r.max_sequences == 14 and r.fits
    assert r.log_lines == (
        "Available KV cache memory: 100.0 GiB",
        "GPU KV cache size: 1,951,941 tokens, Maximum concurrency for 131,072 tokens per "
        "request: 14.89x")
    assert r.block_tokens == 256 and "--kv-cache-dtype fp8" in r.command


def test_vllm_v4_pro_from_a_budget():
    # Pro: 61 windows, 30 ratio-4 and 31 ratio-128 layers; balanced counts 61, 30, 31, no
    # fewer than 30: d = 31 pads 1 + 1 + 0 = 2; windows in 2 groups of 31 and 30; full
    # 30 × 37,440 + 30 × 8,640 + 31 × 1,728 = 1,435,968 B a block (the widest);
    # 30 GiB (beside 99.1 GiB of weights a card) // 1,435,968 = 22,432; the same 7,194 blocks
    # a request
    from kvcore.engines.vllm_dsv4 import groups
    assert sorted(g.bytes for g in groups(spec("deepseek-v4-pro"))) == [
        1_017_792, 1_123_200, 1_160_640, 1_244_160, 1_435_968]
    r = vllm_v4("deepseek-v4-pro", 1, kv_budget_bytes=30 * 1024**3, kv="f16")
    assert r.blocks == 22_432 and r.extra["blocks_per_request"] == 7_194
    assert r.kv_tokens == int(22_432 / 7_194 * L) == 408_702
    # f16 stands for auto, which vLLM turns into fp8_ds_mla all the same
    assert "--kv-cache-dtype" not in r.command and "fp8_ds_mla" in r.notes[0]


def test_vllm_v4_pro_over_two_pipeline_stages():
    # the groups are the whole model's (get_global_kv_cache_groups); a stage holds their
    # projection onto its layers (_project_kv_cache_groups_to_worker). 61 layers: [0, 31)
    # and [31, 61); ratio 128 on layers 0, 1 and the odd ones, ratio 4 on the even ones from 2.
    # The full group on stage 0: 15 × 37,440 + 15 × 8,640 + 16 × 1,728 = 718,848 B, on stage 1
    # 15, 15, 15: 717,120 B; the windows' two groups (even and odd layers of the 61) 16 × 37,440
    # = 599,040 and 15 × 37,440 on stage 0; the states 15 × (32,832 + 8,640) = 622,080 and
    # 16 × 32,832 = 525,312: the full group is the widest on both.
    # 30 GiB a stage: 44,810 blocks on stage 0, 44,918 on stage 1: every stage keeps 44,810.
    # 3 batches in flight (pp + 1): 24,576 tokens; a request 512 + 2 × (cdiv(127 + 24,576, 64)
    # + 1 = 387) + (cdiv(7 + 24,576, 4) + 1 = 6,147) + (cdiv(127 + 24,576, 8) + 1 = 3,089)
    # = 10,522 blocks
    r = vllm_v4("deepseek-v4-pro", 1, kv_budget_bytes=30 * 1024**3,
                parallel=Parallel(tp=8, pp=2))
    assert r.blocks == 44_810 and r.binding_stage == 0
    assert r.extra["bytes_per_block"] == 718_848
    assert r.extra["in_flight_tokens"] == 24_576 and r.extra["blocks_per_request"] == 10_522
    assert r.max_sequences == (44_810 - 1) // 10_522 == 4
    assert "--pipeline-parallel-size 2" in r.command
    assert any("718,848 / 717,120 B" in n and "44,810 / 44,918 blocks" in n for n in r.notes)


def test_vllm_v4_data_parallel_engines():
    # --data-parallel-size 2 at tp 4: an engine and a cache a DP rank, the routed experts split
    # over the 8 ranks, the rest over the 4 of an engine; the pools of one engine as above
    from kvcore.engines import EngineRequest
    from kvcore.engines.base import loaded_weights
    w = loaded_weights(EngineRequest(spec=spec("deepseek-v4-flash"), context=L))
    r = vllm_v4("deepseek-v4-flash", 4, kv_budget_bytes=100 * 1024**3,
                parallel=Parallel(tp=4, dp=2))
    rest = w.bytes - w.expert_bytes - w.replicated_bytes
    assert r.weights_bytes == rest // 4 + w.expert_bytes // 8 + w.replicated_bytes
    assert r.blocks == 107_134 and r.kv_tokens == 2 * int(107_134 / 7_194 * L)
    assert "--data-parallel-size 2" in r.command


def test_vllm_v4_flash_with_its_mtp_draft():
    # speculative_config method "mtp": the next-n layer (layer 43, compress ratio 0) registers
    # its window beside the target's 43, so the window bucket holds 44: balanced counts 44, 21,
    # 20, no fewer than 21: d = 22 pads 0 + 1 + 2 = 3; windows in 2 groups of 22
    # (22 × 37,440 = 823,680 B each); the full group stays the widest, so the blocks and a
    # request's 7,194 are those without the draft
    from kvcore.engines.vllm_dsv4 import groups
    gs = groups(spec("deepseek-v4-flash"), mtp=True)
    assert sorted((g.layers, g.bytes) for g in gs) == sorted([
        (22, 823_680), (22, 823_680), (62, 1_002_240), (42, 870_912), (20, 656_640)])
    r = vllm_v4("deepseek-v4-flash", 4, kv_budget_bytes=100 * 1024**3, mtp=True)
    assert r.blocks == 107_134 and r.extra["blocks_per_request"] == 7_194
    assert ("--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'"
            in r.command)
    assert any("compress ratio 0: a 128-token window" in n for n in r.notes)


def test_vllm_v4_request_blocks_follow_batch_and_length():
    # --max-num-batched-tokens 2,048: 4,096 in flight: 512 + 2 × (cdiv(4,223, 64) + 1 = 67)
    # + (cdiv(4,103, 4) + 1 = 1,027) + (cdiv(4,223, 8) + 1 = 529) = 2,202
    r = vllm_v4("deepseek-v4-flash", 1, kv_budget_bytes=100 * 1024**3,
                settings={"max_num_batched_tokens": 2048})
    assert r.extra["blocks_per_request"] == 2_202 and "--max-num-batched-tokens 2048" in r.command
    # 8,192 tokens: the windows hold the whole request: 32 + 2 × (128 + 1) + (2,048 + 1)
    # + (1,024 + 1) = 3,364
    r = vllm_v4("deepseek-v4-flash", 1, length=8192, kv_budget_bytes=100 * 1024**3)
    assert r.extra["blocks_per_request"] == 3_364
    # B200 (179 GiB): 16,384 batched tokens, 32,768 in flight
    r = vllm_v4("deepseek-v4-flash", 1, gpu="b200", kv_budget_bytes=100 * 1024**3)
    assert r.extra["in_flight_tokens"] == 32_768


def test_vllm_v4_too_small_a_budget_prints_vllms_error():
    # 4 GiB // 1,002,240 = 4,285 blocks < 7,194: the check plans against 4 GiB − one block
    r = vllm_v4("deepseek-v4-flash", 1, kv_budget_bytes=4 * 1024**3)
    assert r.blocks == 4_285 and not r.fits and r.max_sequences == 0
    needed = 7_194 * 1_002_240
    assert r.log_lines[-1].startswith(
        f"ValueError: To serve at least one request with the model's max seq len (131072), "
        f"({round(needed / 1024**3, 2)} GiB KV cache is needed")


@pytest.mark.parametrize(("args", "words"), [
    (("--enable-lora", "--max-lora-rank", "16", "--lora-target-modules", "all"), "--enable-lora"),
    (("--mtp", "--pp", "2"), "MTP under pipeline parallelism"),
    (("--speculative-tokens", "1"), "speculative decoding"),
    (("--block-size", "64"), "blocks of 256 tokens"),
    (("--kv", "fp8_e5m2"), "fp8_e5m2"),
    (("--kv", "q8_0"), "q8_0"),
    (("--gpu", "a100"), "Hopper sm90 and Blackwell sm100"),
    (("--gpu", "rtx-5090"), "Hopper sm90 and Blackwell sm100"),
])
def test_vllm_v4_refuses_what_it_does_not_size(args, words, capsys):
    base = ["--ctx", "128k", "--engine", "vllm", "--tp", "8"]
    if "--gpu" not in args:
        base += ["--gpu", "h200"]
    code, out, err = run(capsys, "deepseek-v4-flash", *base, *args)
    assert code == 2 and out == "" and words in err and err.count("\n") == 1


def test_vllm_v4_refuses_sglangs_repack(capsys):
    code, out, err = run(capsys, ref("deepseek-v4-pro-fp8-sgl"), "--ctx", "128k", "--engine",
                         "vllm", "--gpu", "h200", "--tp", "8")
    assert code == 2 and out == "" and "model_type deepseek_ref" in err
    assert err.count("\n") == 1


def test_vllm_v4_pages_reproduce_a_real_022_log():
    # vllm-project/vllm#44376 (tests/data/engine_logs/vllm-deepseek-v4-flash-2xgh200-tp2-fp8):
    # vLLM 0.22, Flash, LLM(max_model_len=30000, block_size=256, kv_cache_dtype fp8) on GH200
    # printed "(6.66 GiB KV cache is needed ... available KV cache memory (5.44 GiB) ...
    # estimated maximum model length is 13528". 0.22 (package commit g0b3ba88f1,
    # v1/core/kv_cache_utils.py _pool_bytes_per_block, _get_kv_cache_groups_uniform_groups)
    # grouped the same specs into the same five groups, but a block spanned the sum of the
    # full specs' distinct pages (37,440 + 8,640 + 1,728 = 47,808) × the most layer tuples of
    # any group (22) = 1,051,776 B, and a window kept W − 1 + max_num_batched_tokens (16,384
    # for the LLM class on a ≥ 70 GiB card) tokens. The pages and per-group block counts are
    # kvplan's own:
    from kvcore.engines.vllm_dsv4 import groups, layer_specs
    s = spec("deepseek-v4-flash")
    full_pages = {ls.page for ls, _ in layer_specs(s) if ls.kind == "full"}
    per_block = sum(full_pages) * 22
    assert per_block == 1_051_776
    gs = groups(s)

    def needed(length):
        return per_block * sum(g.blocks_per_request(length, 16_384) for g in gs)

    # 30,000 tokens: 118 + 2 × 259 + 4,099 + 2,065 = 6,800 blocks
    assert needed(30_000) == 6_800 * per_block and round(needed(30_000) / 1024**3, 2) == 6.66
    # the estimate 13,528 bounds the available memory: needed(13,528) ≤ it < needed(13,529),
    # both printing as 5.44 GiB
    low, high = needed(13_528), needed(13_529)
    assert low < high and round(low / 1024**3, 2) == round((high - 1) / 1024**3, 2) == 5.44


def test_vllm_v4_budget_alone_and_find_gpu(capsys):
    # no card: max_num_batched_tokens 8,192 as on an H200, so the same 7,194 blocks a request;
    # 40 GiB // 1,002,240 = 42,853 blocks
    code, out, _ = run(capsys, "deepseek-v4-flash", "--ctx", "128k", "--engine", "vllm",
                       "--kv-budget", "40GiB", "--json")
    report = json.loads(out)["engine_report"]
    assert code == 0 and report["blocks"] == 40 * 1024**3 // 1_002_240 == 42_853
    assert report["extra"]["blocks_per_request"] == 7_194
    # the card check is per card, so find-gpu still searches
    code, out, _ = run(capsys, "deepseek-v4-flash", "--ctx", "128k", "--engine", "vllm",
                       "--find-gpu")
    assert code == 0 and "smallest:" in out


def test_minimax_m3_llamacpp_refusal_names_what_is_missing(capsys):
    code, out, err = run(capsys, ref("minimax-m3"), "--ctx", "128k", "--engine", "llama.cpp")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert all(w in err for w in ("LLM_ARCH_MINIMAX_M3", "indexer_kv", "n_embd_k_idx(il)")), err
    # the other engines give no llama.cpp reason
    code, out, err = run(capsys, ref("minimax-m3"), "--ctx", "128k", "--engine", "vllm")
    assert code == 2 and "LLM_ARCH" not in err


def test_vllm_v4_without_the_extensible_cache_takes_the_older_budget():
    # --no-enable-extensible-kv-cache: 0.92 of the card less weights, peak and non-torch
    # memory, whole blocks of it, and the flag in the command (it had been read, then ignored)
    import math

    from kvcore import find_gpu
    from kvcore.engines import vllm

    r = vllm_v4("deepseek-v4-flash", 1, settings={"extensible_kv_cache": False})
    used = r.weights_bytes + sum(b for _, b in r.overheads)
    assert r.kv_pool_bytes == math.ceil(find_gpu("h200").total_bytes * 0.92) - used
    assert r.budget_bytes == math.ceil(find_gpu("h200").total_bytes * 0.92)
    assert r.blocks == r.kv_pool_bytes // r.extra["bytes_per_block"]
    assert r.command.endswith("--no-enable-extensible-kv-cache")
    on = vllm_v4("deepseek-v4-flash", 1)
    assert on.budget_bytes == find_gpu("h200").total_bytes
    assert "extensible" not in on.command
    assert on.kv_pool_bytes != r.kv_pool_bytes
    assert vllm.BEFORE_SNAPSHOT in dict(on.overheads).values()
    # the extensible cache's one segment (blocks outermost) of blocks × 1,002,240 B, mapped in
    # whole 2 MiB granules once the workers commit; the fixed cache prints no such line
    physical = -(-on.blocks * 1_002_240 // (2 << 20)) * (2 << 20)
    assert on.log_lines[-1] == (f"Extended KV cache to {on.blocks} blocks "
                                f"({physical / 1024**3:.2f} GiB).")
    assert not any(line.startswith("Extended") for line in r.log_lines)


@pytest.mark.parametrize("gpu", ["8xa100-80gb", "8xmi300x"])
def test_sglang_v4_cards_its_kernels_do_not_run_on(gpu, capsys):
    # the dsv4 backend decodes with FlashMLA's sparse kernels (SM90, SM100) or its SM120 port
    code, out, err = run(capsys, "deepseek-v4-flash", "--ctx", "32k", "--engine", "sglang",
                         "--gpu", gpu, "--tp", "8")
    assert code == 2 and out == "" and "Hopper (sm90) and Blackwell" in err
    assert err.count("\n") == 1


# --- DeepSeek Sparse Attention: the plan's table as the serving engines store it ------------

@pytest.mark.parametrize(("model", "engine", "kv", "gpu", "latent_row"), [
    ("deepseek-v3.2", "vllm", "fp8_e4m3", "h200", 656),   # fp8_ds_mla rows
    ("deepseek-v3.2", "vllm", "bf16", "h200", 1152),
    ("glm-5.2", "sglang", "bf16", "h200", 1152),
    ("glm-5.2", "trtllm", "fp8_e4m3", "b200", 576),      # the latent at the KV dtype
])
def test_dsa_table_prices_the_engines_indexer_and_latent_rows(model, engine, kv, gpu,
                                                              latent_row):
    # the serving engines keep the indexer's 128-value keys in fp8 with an fp32 scale (132
    # bytes a row) whatever the cache's format; the table's bytes a token are the engine's
    from app.common import make_query
    from kvcore.query import answer

    spec = load_model(model)
    data = answer(make_query(spec, context=8192, sequences=1, engine=engine, gpu=gpu, gpus=8,
                             kv=kv))
    mla = next(g for g in spec.groups if g.kind is LayerKind.MLA)
    idx = next(g for g in spec.groups if g.kind is LayerKind.INDEXER)
    per_token = mla.count * latent_row + idx.count * 132
    assert data["bytes_per_token"] == per_token
    rows = {g["kind"]: g for g in data["breakdown"]}
    assert rows["indexer"]["k_bytes"] == idx.count * 132 * 8192
    assert "132 bytes a row" in rows["indexer"]["stored"]
    assert ("fp8_ds_mla" in (rows["mla"]["stored"] or "")) == (latent_row == 656)
    assert not rows["mla"]["scale_bytes"] or latent_row != 656
    notes = " ".join(data["engine_report"]["notes"])
    assert f"{per_token:,} bytes a token per rank" in notes
    # llama.cpp keeps the indexer keys in the -ctk type, as the raw plan does
    raw = answer(make_query(spec, context=8192, sequences=1, engine="llama.cpp", gpu=gpu,
                            gpus=8, kv="f16"))
    assert raw["bytes_per_token"] == mla.count * 1152 + idx.count * 256


def test_dsa_quality_note_names_the_fp8_ds_mla_rows_and_leaves_the_indexer_out():
    from kvcore.query import quality_here

    spec = load_model("deepseek-v3.2")
    ds = CacheOptions(kv_k="fp8_e4m3", kv_v="fp8_e4m3", indexer_fp8=True, fp8_ds_mla=True)
    bits, note = quality_here(spec, ds)
    mla = next(g for g in spec.groups if g.kind is LayerKind.MLA)
    idx = next(g for g in spec.groups if g.kind is LayerKind.INDEXER)
    # the latent's 656 bytes and the indexer's fp8 keys over their f16 bytes
    assert bits == round(16 * (mla.count * 656 + idx.count * 128)
                         / (mla.count * 1152 + idx.count * 256), 4)
    assert "(its latent in fp8_ds_mla rows (656 bytes for 576 values))" in note
    # its quality is the nearest measured layout's (a scale a 128-value row), not the one
    # per-tensor scale of fp8_e4m3's measured row
    from kvcore.formats import _measured

    pth = _measured()["fp8_pth"]["out_rel_err"] * 100
    assert note.startswith(f"{pth:.1f}% attention-output error vs f16 (measured) for fp8 "
                           "with its own scale a 128-value row (fp8_pth)")
    assert "calibrated" not in note
    # bf16 under the same engine: its own 16 bits, the fp8 indexer rows left out
    assert quality_here(spec, CacheOptions(kv_k="bf16", kv_v="bf16", indexer_fp8=True))[0] == 16
