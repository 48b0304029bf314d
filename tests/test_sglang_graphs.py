"""SGLang's CUDA-graph settings in its automatic mem_fraction_static, and --enable-dp-lm-head."""

import pytest

import kvcore
from app.common import make_query
from kvcore.catalog import load_model
from kvcore.command import read_command
from kvcore.engines import engine_plan
from kvcore.engines.base import EngineSettings
from kvcore.engines.sglang import auto_mem_fraction, prefill_graph_sizes

MiB = 1024**2
H200 = 143_771 * MiB


def frac(reserved_mib: float) -> float:
    mib = H200 / MiB
    return round((mib - max(reserved_mib, 10 * 1024)) / mib, 3)


def test_decode_graph_batch_given_is_neither_capped_nor_dropped():
    # tp 1 on a 141 GB card: chunk 8192, decode max_bs 256 capped at the running requests;
    # a dense model's prefill graphs at 8 MiB each up to the chunk
    base = 512 + 8192 * 1.5 + 1 / 8 * 1024 + prefill_graph_sizes(8192) * 8
    assert auto_mem_fraction(H200, 1, 1, running=4) == frac(base + 4 * 2)
    assert auto_mem_fraction(H200, 1, 1, running=4, decode_bs=200) == frac(base + 200 * 2)
    assert auto_mem_fraction(H200, 1, 1, running=4, decode_graph=False) == frac(base)


def test_prefill_graph_top_given_or_capped_by_max_total_tokens():
    base = 512 + 8192 * 1.5 + 1 / 8 * 1024 + 4 * 2
    assert auto_mem_fraction(H200, 1, 1, running=4, prefill_bs=1024) == \
        frac(base + prefill_graph_sizes(1024) * 8)
    assert auto_mem_fraction(H200, 1, 1, running=4, max_total=2000) == \
        frac(base + prefill_graph_sizes(2000) * 8)
    assert auto_mem_fraction(H200, 1, 1, running=4, prefill_graph=False) == frac(base)
    # fewer sizes, less set aside
    assert prefill_graph_sizes(1024) < prefill_graph_sizes(8192)


def plan(**settings):
    q = make_query(load_model("qwen3-8b"), gpu="h200", engine="sglang", context="32k",
                   sequences=4, settings=EngineSettings(**settings))
    return engine_plan("sglang", q)


def test_settings_reach_the_plan_and_its_command():
    auto = plan()
    fixed = plan(cuda_graph_max_bs_decode=200)
    off = plan(decode_cuda_graph=False, prefill_cuda_graph=False)
    assert fixed.extra["mem_fraction_static"] < auto.extra["mem_fraction_static"]
    assert off.extra["mem_fraction_static"] > auto.extra["mem_fraction_static"]
    assert fixed.kv_tokens < auto.kv_tokens < off.kv_tokens
    assert "--cuda-graph-max-bs-decode 200" in fixed.command
    assert "--disable-decode-cuda-graph --disable-prefill-cuda-graph" in off.command
    # a batch given fixes the reserve: the pool no longer shrinks with the running requests,
    # so the most sequences are the first pool's
    assert fixed.max_sequences == fixed.kv_tokens // 32768
    assert "decode-graph cap" not in " ".join(fixed.notes)
    assert "picks itself" in " ".join(fixed.notes)


@pytest.mark.parametrize(("flags", "want"), [
    ("--cuda-graph-max-bs-decode 64", {"cuda_graph_max_bs_decode": 64}),
    ("--cuda-graph-max-bs 128", {"cuda_graph_max_bs_decode": 128}),
    ("--cuda-graph-max-bs-prefill 2048", {"cuda_graph_max_bs_prefill": 2048}),
    ("--disable-cuda-graph", {"disable_decode_cuda_graph": True,
                              "disable_prefill_cuda_graph": True}),
    ("--cuda-graph-backend-decode disabled", {"disable_decode_cuda_graph": True}),
    ("--cuda-graph-backend-prefill breakable", {"disable_prefill_cuda_graph": False}),
    ("--disable-prefill-cuda-graph", {"disable_prefill_cuda_graph": True}),
    ("--enable-dp-lm-head", {"enable_dp_lm_head": True}),
])
def test_launch_commands(flags, want):
    got = read_command(f"python -m sglang.launch_server --model-path x {flags}").settings
    assert {k: got.get(k) for k in want} == want


def test_a_bad_graph_backend_is_refused():
    with pytest.raises(kvcore.InputError, match="takes full, breakable or disabled"):
        read_command("python -m sglang.launch_server --model-path x "
                     "--cuda-graph-backend-decode fast")


def test_dp_lm_head_splits_the_head_over_the_group():
    # DeepSeek-V3's untied lm_head (129,280 × 7,168 in 16 bits) whole on each card of groups
    # of one card, instead of an eighth
    def weights(**kw):
        q = make_query(load_model("deepseek-v3"), gpu="8xh200", engine="sglang", attn_dp=8,
                       context="32k", sequences=64, settings=EngineSettings(**kw))
        return engine_plan("sglang", q)
    head = 129_280 * 7_168 * 2
    with_head, without = weights(dp_lm_head=True), weights()
    assert with_head.weights_bytes - without.weights_bytes == head - head // 8
    assert "--enable-dp-lm-head" in with_head.command
    # without attention DP SGLang refuses it
    q = make_query(load_model("deepseek-v3"), gpu="8xh200", engine="sglang",
                   settings=EngineSettings(dp_lm_head=True))
    with pytest.raises(kvcore.InputError) as exc:
        engine_plan("sglang", q)
    assert exc.value.field == "enable_dp_lm_head"
    # nor does another engine read it
    with pytest.raises(kvcore.InputError, match="setting of SGLang"):
        make_query(load_model("deepseek-v3"), gpu="8xh200", engine="vllm",
                   settings=EngineSettings(dp_lm_head=True))


def test_deepep_sets_memory_aside():
    # reserve_for_graph_mb: 1 GiB more with the breakable prefill graph (before the 10 GiB
    # floor); reserve_for_deepep_a2a_mb: 2 GiB with a decode graph (after it)
    base = 512 + 8192 * 1.5 + 1 / 8 * 1024 + 4 * 2 + prefill_graph_sizes(8192) * 8
    mib = H200 / MiB
    assert auto_mem_fraction(H200, 1, 1, running=4, deepep=True) == \
        round((mib - (max(base + 1024, 10 * 1024) + 2048)) / mib, 3)
    assert auto_mem_fraction(H200, 1, 1, running=4, deepep=True, decode_graph=False,
                             prefill_graph=False) == frac(base - 4 * 2 - prefill_graph_sizes(8192) * 8)
    got = read_command("python -m sglang.launch_server --model-path x "
                       "--moe-a2a-backend deepep").settings
    assert got["moe_a2a_backend"] == "deepep"
    q = make_query(load_model("qwen3-30b-a3b"), gpu="8xh200", engine="sglang",
                   settings=EngineSettings(moe_a2a_backend="deepep"))
    assert "--moe-a2a-backend deepep" in engine_plan("sglang", q).command
    with pytest.raises(kvcore.InputError, match="kvplan sizes none and deepep"):
        read_command("python -m sglang.launch_server --model-path x --moe-a2a-backend pplx")
    with pytest.raises(kvcore.InputError) as exc:
        EngineSettings(moe_a2a_backend="mooncake")
    assert exc.value.field == "moe_a2a_backend"


def test_hicache_and_graph_batch_lists_are_read():
    got = read_command("python -m sglang.launch_server --model-path x "
                       "--enable-hierarchical-cache --hicache-size 64 "
                       "--cuda-graph-bs-decode 1 2 4 48").settings
    assert got["offload"] == "64GiB" and got["cuda_graph_max_bs_decode"] == 48


def test_swa_full_tokens_ratio_sizes_the_window_pool():
    from kvcore.kv import kv_row_bytes
    from kvcore.model import LayerKind

    spec = load_model("gpt-oss-120b")

    def pools(ratio=None):
        q = make_query(spec, gpu="h200", engine="sglang", context="32k", sequences=8,
                       settings=EngineSettings(swa_full_tokens_ratio=ratio))
        r = engine_plan("sglang", q)
        return r.kv_tokens, r.extra["swa_tokens"], r.command
    full8, swa8, _ = pools()
    full5, swa5, cmd = pools(0.5)
    assert swa8 == int(full8 * 0.8) and swa5 == int(full5 * 0.5)
    # the same bytes, shared out by the ratio: full × (full row + ratio × window row)
    f = sum(kv_row_bytes(spec, get_f16(), get_f16(), (LayerKind.FULL,)))
    s = sum(kv_row_bytes(spec, get_f16(), get_f16(), (LayerKind.SLIDING,)))
    assert full5 * (f + 0.5 * s) == pytest.approx(full8 * (f + 0.8 * s), rel=1e-5)
    assert "--swa-full-tokens-ratio 0.5" in cmd
    got = read_command("python -m sglang.launch_server --model-path x "
                       "--swa-full-tokens-ratio 0.25").settings
    assert got["swa_full_tokens_ratio"] == 0.25


def get_f16():
    from kvcore.formats import get_format
    return get_format("f16")


def test_mamba_ratio_and_slots_size_the_state_pool():
    def hybrid(**kw):
        q = make_query(load_model("qwen3.5-27b"), gpu="h200", engine="sglang", context="32k",
                       sequences=4, settings=EngineSettings(**kw))
        return engine_plan("sglang", q)
    auto, half = hybrid(), hybrid(mamba_full_memory_ratio=0.5)
    # the state pool takes ratio / (1 + ratio) of what the weights leave, less a padding
    # slot: (slots + 1) in proportion to the share
    want = (0.5 / 1.5) / (0.9 / 1.9)
    got = (half.extra["mamba_slots"] + 1) / (auto.extra["mamba_slots"] + 1)
    assert got == pytest.approx(want, rel=2 / auto.extra["mamba_slots"])
    assert half.kv_tokens > auto.kv_tokens
    # slots as given: the KV pool takes the rest
    fixed = hybrid(max_mamba_cache_size=40)
    assert fixed.extra["mamba_slots"] == 40
    assert fixed.kv_tokens > auto.kv_tokens
    assert "--max-mamba-cache-size 40" in fixed.command
    assert "--mamba-full-memory-ratio 0.5" in half.command
    got = read_command("python -m sglang.launch_server --model-path x --max-mamba-cache-size 64 "
                       "--mamba-full-memory-ratio 0.7").settings
    assert got["max_mamba_cache_size"] == 64 and got["mamba_full_memory_ratio"] == 0.7


def test_radix_cache_off_gives_a_hybrid_model_a_state_slot_a_running_request():
    def hybrid(seqs, **kw):
        q = make_query(load_model("qwen3.5-27b"), gpu="h200", engine="sglang", context="32k",
                       sequences=seqs, settings=EngineSettings(mem_fraction_static=0.85, **kw))
        return engine_plan("sglang", q)
    off = hybrid(4, radix_cache=False)
    assert off.extra["mamba_slots"] == 4 and "--disable-radix-cache" in off.command
    # the pool holds far more tokens than beside the radix cache's ratio-sized state pool
    assert off.kv_tokens > 1.5 * hybrid(4).kv_tokens
    # the most sequences: that many fit, one more does not (each brings its slot)
    most = off.max_sequences
    assert most > 4 and hybrid(most, radix_cache=False).fits
    assert not hybrid(most + 1, radix_cache=False).fits
    assert read_command("python -m sglang.launch_server --model-path x "
                        "--disable-radix-cache").settings["disable_radix_cache"] is True


def test_radix_cache_off_sizes_the_window_pool_from_the_requests():
    from kvcore.kv import kv_row_bytes
    from kvcore.model import LayerKind

    # gpt-oss-120b on an H200 (chunk 8192), 8 requests: each a window of 127 (SGLang's
    # exclusive window), 128 tokens between evictions and two 1-token pages; two chunks in
    # flight with the overlap scheduler; a page more
    spec = load_model("gpt-oss-120b")
    q = make_query(spec, gpu="h200", engine="sglang", context="32k", sequences=8,
                   settings=EngineSettings(radix_cache=False, mem_fraction_static=0.85))
    r = engine_plan("sglang", q)
    want = (127 + 128 + 1 + 1) * 8 + 2 * 8192 + 1
    assert r.extra["swa_tokens"] == want
    # the full pool takes what the window pool leaves
    full = sum(kv_row_bytes(spec, get_f16(), get_f16(), (LayerKind.FULL,)))
    window = sum(kv_row_bytes(spec, get_f16(), get_f16(), (LayerKind.SLIDING,)))
    assert r.kv_tokens == (r.kv_pool_bytes - want * window) // full
    assert "--disable-radix-cache" in r.command
    assert any("the window pool holds 18,441 tokens" in n for n in r.notes)
    # with the radix cache the ratio's pool is far larger and the full pool smaller
    q = make_query(spec, gpu="h200", engine="sglang", context="32k", sequences=8,
                   settings=EngineSettings(mem_fraction_static=0.85))
    assert engine_plan("sglang", q).kv_tokens < r.kv_tokens


def test_radix_cache_off_is_refused_where_its_window_pool_is_not_sized():
    q = make_query(load_model("deepseek-v4-flash"), gpu="8xh200", engine="sglang",
                   settings=EngineSettings(radix_cache=False))
    with pytest.raises(kvcore.InputError, match="--disable-radix-cache"):
        engine_plan("sglang", q)


def test_to_fit_names_the_state_slots_the_sequences_need():
    from app.common import answered, to_fit_text

    # Qwen3.5-27B with the radix cache's extra buffer holds 5 state slots a request: 4
    # sequences need 20, which the change names, and with them the plan fits
    q = make_query(load_model("qwen3.5-27b"), gpu="h200", engine="sglang", context="32k",
                   sequences=4, settings=EngineSettings(max_mamba_cache_size=5))
    data = answered(q)
    assert data["fits"] is False
    per = data["engine_report"]["extra"]["mamba_slots_per_request"]
    fix = data["to_fit"]
    assert fix["max_mamba_cache_size"] == 4 * per
    assert to_fit_text(fix).startswith(f"--max-mamba-cache-size {4 * per} fits")
    fixed = answered(make_query(load_model("qwen3.5-27b"), gpu="h200", engine="sglang",
                                context="32k", sequences=4,
                                settings=EngineSettings(max_mamba_cache_size=4 * per)))
    assert fixed["fits"] and fixed["max_context"] == fix["max_context"]
