"""Properties of the arithmetic that must hold for every model, format and size."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kvcore import (
    FORMATS,
    CacheOptions,
    PlanRequest,
    cache_size,
    find_gpu,
    get_format,
    load_model,
    model_catalog,
    plan,
    spec_from_config,
)
from kvcore.engines import EngineSettings

MODELS = [e.id for e in model_catalog()]
NAMES = [f.name for f in FORMATS]
models = st.sampled_from(MODELS)
formats = st.sampled_from(NAMES)
contexts = st.integers(min_value=1, max_value=1 << 21)


@settings(max_examples=150, deadline=None)
@given(models, formats, formats, contexts, st.integers(1, 64))
def test_kv_linear_in_sequences(model, k, v, ctx, n):
    spec = load_model(model)
    opts = CacheOptions(kv_k=k, kv_v=v)
    one = cache_size(spec, ctx, 1, opts)
    many = cache_size(spec, ctx, n, opts)
    scales = sum(g.scale_bytes for g in one.groups)
    assert many.kv_bytes - scales == n * (one.kv_bytes - scales)
    assert many.state_bytes == n * one.state_bytes


@settings(max_examples=150, deadline=None)
@given(models, formats, contexts, st.integers(1, 4096))
def test_non_decreasing_in_context(model, fmt, ctx, step):
    spec = load_model(model)
    opts = CacheOptions(kv_k=fmt, kv_v=fmt)
    assert cache_size(spec, ctx, 1, opts).total_bytes <= cache_size(spec, ctx + step, 1, opts).total_bytes


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["llama-3.1-8b", "qwen3-8b", "mistral-7b-instruct-v0.3", "gemma-2-9b",
                        "qwen2.5-72b", "gpt-oss-20b"]), formats, contexts)
def test_gqa_not_larger_than_mha(model, fmt, ctx):
    config = next(e for e in model_catalog() if e.id == model).config()
    gqa = spec_from_config(config, name="gqa", source="t")
    mha_cfg = dict(config, num_key_value_heads=config["num_attention_heads"])
    mha = spec_from_config(mha_cfg, name="mha", source="t")
    opts = CacheOptions(kv_k=fmt, kv_v=fmt)
    assert cache_size(gqa, ctx, 1, opts).kv_bytes <= cache_size(mha, ctx, 1, opts).kv_bytes


@settings(max_examples=150, deadline=None)
@given(models, formats, contexts)
def test_quantized_not_larger_than_f16(model, fmt, ctx):
    spec = load_model(model)
    dims = [g.head_dim_k for g in spec.groups if g.kind.is_attention]
    if dims and min(dims) < 64:
        return
    window = get_format(fmt)
    if window.residual_tokens and ctx < window.residual_tokens + 2 * window.token_group:
        # an f16 residual window of up to R + G - 1 tokens plus the first quantized group can
        # exceed f16 just past R; from R + 2G on the quantized groups pay for it
        ctx += window.residual_tokens + 2 * window.token_group
    f16 = cache_size(spec, ctx, 1, CacheOptions()).kv_bytes
    q = cache_size(spec, ctx, 1, CacheOptions(kv_k=fmt, kv_v=fmt))
    if fmt != "f32":
        assert q.kv_bytes - sum(g.scale_bytes for g in q.groups) <= f16


@settings(max_examples=60, deadline=None)
@given(models, formats, st.integers(1, 16), st.sampled_from(["4090", "a100", "h200", "3060", "m3 max"]),
       st.sampled_from(["q4_k_m", "int4", "fp8", "bf16"]))
def test_max_context_fits_and_one_more_does_not(model, fmt, seqs, gpu, weights):
    req = PlanRequest(spec=load_model(model), context=4096, sequences=seqs,
                      cache=CacheOptions(kv_k=fmt, kv_v=fmt), weights=weights, gpu=find_gpu(gpu))
    p = plan(req)
    base = p.weights.bytes + p.overhead.bytes
    if p.max_context == 0:
        assert base + cache_size(req.spec, 1, seqs, req.cache).total_bytes > p.budget_bytes
        return
    assert base + cache_size(req.spec, p.max_context, seqs, req.cache).total_bytes <= p.budget_bytes
    if p.max_context < 2**31:
        assert base + cache_size(req.spec, p.max_context + 1, seqs, req.cache).total_bytes > p.budget_bytes


def _limits_replan(ask, ctx, seqs, engine):
    """The plan ``ask()`` gives (ask(context=…) or ask(sequences=…) another): its max context
    and max sequences fit when asked for, one more does not, and its verdict agrees."""
    from kvcore import KvplanError

    try:
        data = ask()
    except KvplanError:
        return
    top_ctx, top_seqs = data["max_context"], data["max_sequences"]
    assert data["fits"] == (ctx <= top_ctx and seqs <= top_seqs)
    if 0 < top_ctx < 2**31:
        assert ask(context=top_ctx)["fits"] and not ask(context=top_ctx + 1)["fits"]
    if 0 < top_seqs < 10**6:
        assert ask(sequences=top_seqs)["fits"]
        try:
            assert not ask(sequences=top_seqs + 1)["fits"]
        except KvplanError as exc:
            # llama.cpp serves at most 256 sequences (LLAMA_MAX_SEQ)
            assert engine == "llama.cpp" and top_seqs == 256, exc


@settings(max_examples=40, deadline=None)
@given(models, st.sampled_from(["raw", "vllm", "llama.cpp", "sglang", "trtllm"]),
       st.sampled_from(["f16", "bf16", "q8_0", "fp8"]),
       st.sampled_from(["4090", "l4", "h100", "m3 max"]), st.sampled_from([1000, 4096, 32768]),
       st.sampled_from([1, 3]), st.sampled_from([{}, {"gpus": "2"}, {"gpus": "4", "dp": 2}]))
def test_engine_limits_replan(model, engine, fmt, gpu, ctx, seqs, layout):
    """Under every engine, the max context and max sequences a plan reports fit when asked
    for, and one more does not; its verdict agrees with them."""
    from app.common import make_query
    from kvcore.query import answer

    spec = load_model(model)

    def ask(**kw):
        args = dict(context=ctx, sequences=seqs, kv=fmt, gpu=gpu, engine=engine,
                    weights="q4_k_m" if engine == "llama.cpp" else "int4", **layout)
        return answer(make_query(spec, **{**args, **kw}))

    _limits_replan(ask, ctx, seqs, engine)


@settings(max_examples=30, deadline=None)
@given(models, st.sampled_from([("vllm", "tq_k8v4"), ("vllm", "tq_4bit"), ("vllm", "tq_3bit"),
                                ("vllm", "int8_pth"), ("vllm", "int4_pth"),
                                ("vllm", "nvfp4_4over6"), ("vllm", "uq_4bit"),
                                ("vllm", "fp8_e4m3+sliding_window"), ("vllm", "nvfp4+0"),
                                ("vllm", "fp8_e4m3+0"),
                                ("sglang", "nvfp4"), ("sglang", "fp4_mx16"),
                                ("sglang", "mxfp8")]),
       st.sampled_from(["rtx-5090", "b200", "h100", "mi300x"]), st.sampled_from([4096, 32768]),
       st.sampled_from([1, 3]))
def test_new_cache_formats_limits_replan(model, engine_fmt, gpu, ctx, seqs):
    """vLLM's TurboQuant, per-token-head and nvfp4_4over6 caches, its layers kept at the
    model's dtype (fmt+skip list), and SGLang's block-scaled caches: the max context and max
    sequences a plan reports fit when asked for, and one more does not."""
    from app.common import make_query
    from kvcore.query import answer

    engine, fmt = engine_fmt
    fmt, _, skip = fmt.partition("+")
    spec = load_model(model)
    kept = EngineSettings(kv_cache_dtype_skip_layers=skip) if skip else None

    def ask(**kw):
        args = dict(context=ctx, sequences=seqs, kv=fmt, gpu=gpu, engine=engine, settings=kept)
        return answer(make_query(spec, **{**args, **kw}))

    _limits_replan(ask, ctx, seqs, engine)
