"""The raw fit: totals, max context / sequences at their exact edges, binding term, decode."""

import pytest

from kvcore import (
    CacheOptions,
    InputError,
    PlanRequest,
    cache_size,
    find_gpu,
    load_model,
    plan,
    plan_to_dict,
    weights_for,
)
from kvcore.plan import _causal_pairs, attention_flops, prefill_attention_flops, step_flops

GiB = 2**30


def request(model="qwen3.5-27b", ctx=262_144, seqs=1, kv="q8_0", gpu="4090", weights="q4_k_m"):
    return PlanRequest(spec=load_model(model), context=ctx, sequences=seqs,
                       cache=CacheOptions(kv_k=kv, kv_v=kv), weights=weights,
                       gpu=find_gpu(gpu) if gpu else None)


def test_total_is_the_sum_of_terms():
    p = plan(request())
    assert p.total_bytes == p.weights.bytes + p.kv_bytes + p.state_bytes + p.overhead.bytes


@pytest.mark.parametrize("kv", ["f16", "q8_0", "q4_0", "tbq4"])
def test_max_context_is_the_exact_edge(kv):
    req = request(kv=kv)
    p = plan(req)
    budget = p.budget_bytes
    edge = p.max_context
    base = p.weights.bytes + p.overhead.bytes
    assert base + cache_size(req.spec, edge, 1, req.cache).total_bytes <= budget
    assert base + cache_size(req.spec, edge + 1, 1, req.cache).total_bytes > budget


def test_four_bit_cache_fits_262k_on_24gb_where_f16_does_not():
    assert plan(request(kv="tbq4")).fits
    assert not plan(request(kv="f16")).fits
    # the seed: about 110K tokens in f16 and about 210K in q8_0 beside ~17 GB of weights
    f16 = plan(request(kv="f16"))
    q8 = plan(request(kv="q8_0"))
    assert f16.max_context < q8.max_context < plan(request(kv="tbq4")).max_context


def test_max_sequences_exact_edge():
    req = request(ctx=32_768, kv="q8_0")
    p = plan(req)
    n = p.max_sequences
    base = p.weights.bytes + p.overhead.bytes
    assert n >= 1
    assert base + cache_size(req.spec, 32_768, n, req.cache).total_bytes <= p.budget_bytes
    assert base + cache_size(req.spec, 32_768, n + 1, req.cache).total_bytes > p.budget_bytes


def test_weights_bind_when_the_model_is_too_big():
    p = plan(request(model="llama-3.1-70b", weights="bf16", ctx=4096))
    assert not p.fits and p.binding == "weights"
    assert p.max_context == 0 and p.max_sequences == 0


def test_kv_binds_when_context_is_too_long():
    p = plan(request(kv="f16"))
    assert not p.fits and p.binding == "kv"


def test_no_gpu_gives_totals_only():
    p = plan(request(gpu=None))
    assert p.fits is None and p.max_context is None and p.decode is None
    assert p.total_bytes > 0


def test_decode_estimate_reads_weights_and_cache():
    p = plan(request(kv="tbq4"))
    gpu = find_gpu("4090")
    expected = p.weights.active_bytes + p.kv_bytes + 2 * p.state_bytes
    assert p.decode.bytes_per_step == expected
    assert p.decode.tokens_per_s_per_sequence == pytest.approx(gpu.bandwidth_bytes_per_s / expected)


def test_sparse_attention_decode_reads_the_selected_rows_only():
    # DeepSeek-V3.2 (raw, f16, 131,072 tokens): 61 MLA layers hold every latent row of
    # 576 × 2 = 1,152 B but a step reads the index_topk 2,048 the indexer selects; the
    # indexer keys (128 × 2 = 256 B a token a layer) are all read
    spec = load_model("deepseek-v3.2")
    size = cache_size(spec, 131_072, 1, CacheOptions(kv_k="f16", kv_v="f16"))
    assert size.kv_bytes == 61 * 131_072 * (1152 + 256)
    assert size.read_bytes == 61 * 2048 * 1152 + 61 * 131_072 * 256
    p = plan(PlanRequest(spec=spec, context=131_072, cache=CacheOptions(kv_k="f16", kv_v="f16"),
                         weights="fp8", gpu=find_gpu("h200")))
    assert p.decode.bytes_per_step == p.weights.active_bytes + size.read_bytes
    assert p.decode.sparse and plan_to_dict(p)["decode"]["sparse_read"] is True
    # below the top-k every row is read
    short = cache_size(spec, 1000, 2, CacheOptions(kv_k="f16", kv_v="f16"))
    assert short.read_bytes == short.kv_bytes
    # DeepSeek-V4-Flash: the 21 ratio-4 layers hold 32,768 compressed entries of 512 × 2 B and
    # a step reads index_topk 512 of them; the ratio-128 layers (1,024 entries), the index
    # keys (32,768 × 256 B) and the 128-token windows are read whole
    v4 = cache_size(load_model("deepseek-v4-flash"), 131_072, 1,
                    CacheOptions(kv_k="f16", kv_v="f16"))
    assert v4.read_bytes == (21 * 512 * 1024 + 20 * 1024 * 1024 + 21 * 32_768 * 256
                             + 43 * 128 * 1024)
    assert v4.kv_bytes - v4.read_bytes == 21 * (32_768 - 512) * 1024
    # a dense model reads all it holds
    dense = plan(request(kv="tbq4"))
    assert not dense.decode.sparse


def test_moe_decode_reads_active_experts_only():
    w = weights_for(load_model("qwen3-30b-a3b"), "bf16")
    assert w.active_bytes < w.bytes / 5


def test_a_moe_step_reads_the_experts_its_tokens_route_to():
    # Qwen3-30B-A3B: 8 of 128 experts a token. A step of n tokens reads each expert that any
    # of them routes to, once: with routing uniform, 1 - (120/128)^n of the experts' bytes
    spec = load_model("qwen3-30b-a3b")
    w = weights_for(spec, "bf16")
    assert w.expert_bytes == 2 * spec.params.experts
    assert w.active_expert_bytes == 2 * spec.params.active_experts
    assert w.expert_bytes * 8 == w.active_expert_bytes * 128
    dense = w.active_bytes - w.active_expert_bytes
    assert w.step_bytes(1) == w.active_bytes
    for n in (2, 32, 256):
        assert w.step_bytes(n) == dense + round(w.expert_bytes * (1 - (120 / 128) ** n))
        assert w.expert_share(n) == pytest.approx(1 - (120 / 128) ** n)
    assert w.step_bytes(32) > 2.5 * w.active_bytes  # 87% of the experts, not 6%
    assert w.step_bytes(1_000_000) == dense + w.expert_bytes < w.bytes
    p = plan(request("qwen3-30b-a3b", ctx=4096, seqs=32, kv="f16", gpu="h100", weights="bf16"))
    assert p.decode.bytes_per_step == w.step_bytes(32) + p.kv_bytes
    assert p.decode.expert_share == pytest.approx(0.8732, abs=1e-4)
    assert plan_to_dict(p)["decode"]["expert_share"] == p.decode.expert_share
    # a dense model reads its weights whole whatever the batch, and has no expert share
    d = weights_for(load_model("qwen3-8b"), "bf16")
    assert d.expert_bytes == 0 and d.step_bytes(64) == d.active_bytes
    assert d.expert_share(64) is None
    assert plan(request(seqs=4)).decode.expert_share is None


def test_custom_size_gpu_has_no_decode():
    p = plan(request(gpu="24GiB"))
    assert p.fits is not None and p.decode is None


def test_weights_source_is_reported():
    assert plan(request(weights="int4")).weights.source == "config estimate"
    # a vision-language model's tower in float16, as its projector file
    assert plan(request(weights="q4_k_m")).weights.source == \
        "config, llama-quantize's tensor types, vision tower in f16 (mmproj)"
    assert plan(request(model="qwen3-8b", weights="q4_k_m")).weights.source == \
        "config, llama-quantize's tensor types"
    mm = plan(request(model="minimax-m1-80k", weights=None, gpu="h200"))
    assert mm.weights.source == "safetensors index"
    assert mm.weights.bytes == 912_210_767_872


@pytest.mark.parametrize(("fmt", "bits"), [("bf16", 16), ("f16", 16), ("f32", 32)])
def test_weight_formats_scale_with_bits(fmt, bits):
    spec = load_model("llama-3.1-8b")
    assert weights_for(spec, fmt).bytes == int(spec.params.total * bits / 8)


def test_q8_0_is_q8_0_but_for_its_float32_vectors():
    # llama-quantize's Q8_0: every matrix 34 bytes a 32-value block, the norms float32
    spec = load_model("llama-3.1-8b")
    matrices = sum(m.params for m in spec.params.modules if m.matrices or m.role == "embed")
    vectors = spec.params.total - matrices
    assert weights_for(spec, "q8_0").bytes == matrices // 32 * 34 + vectors * 4


def test_hf_quantization_keeps_embeddings_16bit():
    spec = load_model("llama-3.1-8b")
    w = weights_for(spec, "int4")
    embed = spec.params.embedding
    assert w.bytes == int((spec.params.total - embed) * (4 + 20 / 128) / 8) + 2 * embed


def test_parameter_counts_match_published_sizes():
    published = {"llama-3.1-8b": 8.03e9, "llama-3.1-70b": 70.6e9, "mixtral-8x7b-v0.1": 46.7e9,
                 "deepseek-v3": 671e9, "qwen3-8b": 8.2e9, "gpt-oss-120b": 117e9,
                 "qwen3-235b-a22b": 235e9, "qwen2.5-vl-7b-instruct": 8.29e9}
    for model, size in published.items():
        assert load_model(model).params.total == pytest.approx(size, rel=0.02), model


def test_bad_request_values():
    with pytest.raises(InputError):
        request(ctx=0)
    with pytest.raises(InputError):
        request(seqs=0)


def test_dict_has_contract_keys():
    d = plan_to_dict(plan(request()))
    for key in ("kv_bytes", "state_bytes", "weights_bytes", "total_bytes", "fits", "max_context",
                "max_sequences", "breakdown", "binding", "decode"):
        assert key in d
    assert d["kv_bytes"] == sum(g["k_bytes"] + g["v_bytes"] + g["scale_bytes"] for g in d["breakdown"])
    assert d["state_bytes"] == sum(g["state_bytes"] for g in d["breakdown"])


def test_auto_weights_follow_quantization_config():
    oss = load_model("gpt-oss-120b")
    w = weights_for(oss)
    assert w.format == "mxfp4_moe"
    p = oss.params
    assert w.bytes == int(p.experts * 4.25 / 8) + (p.total - p.experts) * 2
    assert weights_for(load_model("deepseek-v3")).format == "fp8"
    assert weights_for(load_model("qwen3-8b")).format == "bf16"


@pytest.mark.parametrize(("gpu", "runtime"), [
    ("4090", "CUDA context"), ("mi300x", "HIP runtime"), ("m4 max", "Metal runtime"),
    ("arc a770", "Level Zero runtime"), ("24GiB", "CUDA context"), (None, "CUDA context"),
])
def test_the_runtime_reserve_is_named_for_the_cards_maker(gpu, runtime):
    # the same bytes on every card; the line names the runtime that holds them
    p = plan(request(gpu=gpu))
    assert p.overhead.detail.startswith(f"{runtime} 512 MiB + compute buffers")
    assert p.overhead.bytes == plan(request(gpu="4090")).overhead.bytes


def test_decode_is_compute_bound_where_the_flops_take_longer():
    # Qwen3-8B (36 layers, 32 query heads of 128 over 8 KV heads) at 512 tokens × 16 on an
    # M4 Max 36 GB, the 32-core bin: 2 FLOPs a weight a token, and each query head's scores
    # and weighted sum over 512 entries of 128 + 128 values
    spec = load_model("qwen3-8b")
    p = plan(request("qwen3-8b", ctx=512, seqs=16, kv="f16", gpu="m4 max 36gb"))
    attention = 2 * 32 * 256 * 512 * 36 * 16
    assert attention_flops(spec, p.cache) == attention
    assert p.decode.flops_per_step == 2 * spec.params.active * 16 + attention
    peak = find_gpu("m4 max").matmul_flops_per_s * 32 // 40
    assert find_gpu("m4 max 36gb").matmul_flops_per_s == peak
    assert p.decode.compute_seconds == pytest.approx(p.decode.flops_per_step / peak)
    assert p.decode.bandwidth_seconds == pytest.approx(p.decode.bytes_per_step / 410e9)
    assert p.decode.bound == "compute" and p.decode.compute_seconds > p.decode.bandwidth_seconds
    assert p.decode.seconds_per_step == p.decode.compute_seconds
    d = plan_to_dict(p)["decode"]
    assert d["bound"] == "compute" and d["flops_per_step"] == p.decode.flops_per_step
    # one sequence at a long context reads far more than it computes
    one = plan(request("qwen3-8b", ctx=32_768, seqs=1, kv="f16", gpu="m4 max 36gb"))
    assert one.decode.bound == "bandwidth"
    assert one.decode.seconds_per_step == one.decode.bandwidth_seconds


def test_attention_flops_follow_what_each_layer_reads():
    # DeepSeek-V3: 61 MLA layers, 128 heads over one 576-wide latent read as K and as V
    v3 = load_model("deepseek-v3")
    size = cache_size(v3, 131_072, 1, CacheOptions(kv_k="f16", kv_v="f16"))
    assert attention_flops(v3, size) == 2 * 128 * 1152 * 131_072 * 61
    assert attention_flops(v3, size, tp=8) == 2 * 128 * 1152 * 131_072 * 61 // 8
    # DeepSeek-V3.2's sparse layers attend over the indexer's 2,048 selected rows; the
    # indexer's own scores are not counted
    v32 = load_model("deepseek-v3.2")
    size = cache_size(v32, 131_072, 2, CacheOptions(kv_k="f16", kv_v="f16"))
    assert attention_flops(v32, size) == 2 * 128 * 1152 * 2048 * 61 * 2
    # gpt-oss-20b: 12 full layers over every token, 12 sliding ones over their 128 (64 heads
    # of 64)
    oss = load_model("gpt-oss-20b")
    size = cache_size(oss, 4096, 3, CacheOptions())
    assert attention_flops(oss, size) == 2 * 64 * 128 * (12 * 4096 + 12 * 128) * 3
    # a step's FLOPs: the weights' and attention's, for each sequence
    assert step_flops(oss, size) == 2 * oss.params.active * 3 + attention_flops(oss, size)


def test_causal_pairs_count_what_each_token_attends_to():
    assert [_causal_pairs(n) for n in (0, 1, 2, 5)] == [0, 1, 3, 15]
    # at most `limit` entries a token: 1 + 2 + 3 + 3 + 3
    assert _causal_pairs(5, 3) == 12 == sum(min(i, 3) for i in range(1, 6))
    assert _causal_pairs(3, 8) == 6


def test_prefill_attention_follows_each_layers_mask():
    f16 = CacheOptions(kv_k="f16", kv_v="f16")
    # Qwen3-8B, 36 full layers of 32 query heads of 128 (K) + 128 (V)
    q3 = load_model("qwen3-8b")
    n = 10_000
    assert prefill_attention_flops(q3, cache_size(q3, n, 1, f16)) == \
        2 * 32 * 256 * (n * (n + 1) // 2) * 36
    # Llama 4 Scout: 12 full layers, 36 chunked ones attending within chunks of 8,192
    # (40 query heads); 20,000 tokens are two whole chunks and 3,616 more
    scout = load_model("llama-4-scout-17b-16e-instruct")
    n = 20_000
    chunked = 2 * _causal_pairs(8192) + _causal_pairs(n - 2 * 8192)
    assert prefill_attention_flops(scout, cache_size(scout, n, 1, f16)) == \
        2 * 40 * 256 * (12 * _causal_pairs(n) + 36 * chunked)
    # gpt-oss-20b: 12 sliding layers over 128 tokens, 12 full (64 heads of 64 + 64)
    oss = load_model("gpt-oss-20b")
    assert prefill_attention_flops(oss, cache_size(oss, 4096, 2, f16)) == \
        2 * 64 * 128 * (12 * _causal_pairs(4096) + 12 * _causal_pairs(4096, 128)) * 2
    # an MLA prefill computes its heads unabsorbed: DeepSeek-V3's 128 heads of 192 + 128;
    # V3.2's sparse layers attend to at most the indexer's 2,048 selected rows
    v3 = load_model("deepseek-v3")
    assert (v3.mla_qk_head_dim, v3.mla_v_head_dim) == (192, 128)
    assert prefill_attention_flops(v3, cache_size(v3, 8192, 1, f16)) == \
        2 * 128 * 320 * _causal_pairs(8192) * 61
    v32 = load_model("deepseek-v3.2")
    assert prefill_attention_flops(v32, cache_size(v32, 8192, 1, f16)) == \
        2 * 128 * 320 * _causal_pairs(8192, 2048) * 61
    # cross-attention layers attend from every prompt token to the image's tokens
    mllama = load_model("llama-3.2-11b-vision-instruct")
    size = cache_size(mllama, 1000, 1, f16)
    image = next(g.tokens for g in size.groups if g.group.kind.value == "cross")
    assert prefill_attention_flops(mllama, size) == \
        2 * 32 * 256 * (32 * _causal_pairs(1000) + 8 * 1000 * image)


def test_attention_counts_each_layers_own_query_heads():
    # Laguna XS.2: its 10 full layers have 48 query heads, its 30 sliding layers 64
    # (num_attention_heads_per_layer); num_attention_heads alone (48) would undercount them
    spec = load_model("laguna-xs.2")
    full, sliding = spec.groups
    assert (full.count, sliding.count) == (10, 30)
    assert {spec.q_heads(i) for i in full.layers} == {48}
    assert {spec.q_heads(i) for i in sliding.layers} == {64}
    size = cache_size(spec, 65_536, 1, CacheOptions(kv_k="f16", kv_v="f16"))
    w_full = full.head_dim_k + full.head_dim_v
    w_sliding = sliding.head_dim_k + sliding.head_dim_v
    assert attention_flops(spec, size) == 2 * (10 * 48 * w_full * 65_536
                                                + 30 * 64 * w_sliding * sliding.window)
    assert prefill_attention_flops(spec, size) == 2 * (
        10 * 48 * w_full * _causal_pairs(65_536)
        + 30 * 64 * w_sliding * _causal_pairs(65_536, sliding.window))


def test_prefill_estimate_at_the_cards_peak():
    # Qwen3-8B's 32,768-token prompt on a 4090: 2 FLOPs a weight a token and the attention,
    # at 165.2 TFLOPS; a 64-token prompt is bound by reading the weights once
    p = plan(request("qwen3-8b", ctx=32_768, kv="f16", weights="bf16"))
    spec = load_model("qwen3-8b")
    attention = prefill_attention_flops(spec, cache_size(spec, 32_768, 1))
    assert p.prefill.attention_flops == attention
    head = spec.vocab_size * spec.hidden_size  # the lm_head: the last token's logits only
    assert p.prefill.flops == 2 * (spec.params.active - head) * 32_768 + 2 * head + attention
    assert p.prefill.seconds == pytest.approx(p.prefill.flops / 165.2e12)
    assert p.prefill.bound == "compute"
    assert p.prefill.tokens_per_s == pytest.approx(32_768 / p.prefill.seconds)
    d = plan_to_dict(p)["prefill"]
    assert (d["tokens"], d["bound"], d["flops"]) == (32_768, "compute", p.prefill.flops)
    short = plan(request("qwen3-8b", ctx=64, kv="f16", weights="bf16"))
    assert short.prefill.bound == "bandwidth"
    assert short.prefill.seconds == pytest.approx(short.weights.bytes / 1008e9)
    # a card of a bare size has no peak and no prefill
    assert plan(request(gpu="24GiB")).prefill is None
