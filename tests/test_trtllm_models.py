"""TensorRT-LLM (PyTorch backend) on the newer architectures: Kimi-K3 and Kimi-Linear sized by
the hybrid cache path, Gemma 4 and DeepSeek-V4 refused with the reason, MiMo-V2-Flash and
Step-3.7-Flash refused for a missing model class. Expected figures are worked by hand from the
formulas docs/ENGINES.md (§4 T0/T1) cites."""

import pytest

from app.cli import main
from kvcore import CacheOptions, InputError, find_gpu, load_model
from kvcore.engines import EngineRequest, engine_plan, trtllm
from kvcore.parallel import Parallel, rank_spec

GiB = 1 << 30


def req(model, ctx=32768, seqs=64, gpu="h200", **kw):
    return EngineRequest(spec=load_model(model), context=ctx, sequences=seqs,
                         cache=CacheOptions(kv_k="f16", kv_v="f16"),
                         gpus=(find_gpu(gpu),) if gpu else (), **kw)


# --- Kimi-K3 / Kimi-Linear: the hybrid path, KDA state in float32 -------------------------

def test_kimi_k3_kda_state_per_slot_is_float32_on_every_rank_share():
    # config_utils.py @00679c66 extract_mamba_kv_cache_params (is_kimi_linear): conv_dim =
    # head_dim × heads + 2 × heads × head_dim = 3 × 96 × 128, (short_conv_kernel_size 4 − 1)
    # columns in bf16; the delta-rule state heads × 128 × 128 forced to float32.
    # get_states_bytes_per_layer divides both by tp. 69 KDA layers.
    tp1 = 69 * (3 * 96 * 128 * 3 * 2 + 96 * 128 * 128 * 4)
    assert tp1 == 449_372_160
    assert trtllm.state_bytes_per_slot(load_model("kimi-k3")) == tp1
    tp8 = 69 * (3 * 12 * 128 * 3 * 2 + 12 * 128 * 128 * 4)
    assert tp8 == 56_171_520
    assert trtllm.state_bytes_per_slot(rank_spec(load_model("kimi-k3"), Parallel(tp=8))) == tp8


def test_kimi_linear_state_follows_the_same_float32_rule():
    # the bf16 checkpoint's state was priced at 2 B a value before (21.4 MiB a slot);
    # 20 KDA layers × (3 × 32 × 128 × 3 × 2 + 32 × 128 × 128 × 4) = 43,417,600 B
    spec = load_model("kimi-linear-48b-a3b-instruct")
    assert trtllm.state_bytes_per_slot(spec) == 43_417_600


def test_kimi_k3_tokens_on_a_20_gib_rank_budget():
    # tp 8, 64 sequences: 64 × pp 1 + 1 dummy = 65 slots of 56,171,520 B off the budget, then
    # the 24 MLA layers' latent (512 + 64 values, kv_factor 1, 2 B, whole on every rank) =
    # 27,648 B a token: (21,474,836,480 − 3,651,148,800) // 27,648 = 644,664 tokens, the
    # primary pool rounded up to whole 32-token blocks: 644,672
    r = engine_plan("trtllm", req("kimi-k3", gpu=None, kv_budget_bytes=20 * GiB,
                                  parallel=Parallel(tp=8)))
    assert r.extra["bytes_per_token"] == 27_648
    assert r.extra["state_slots"] == 65
    assert r.extra["state_bytes"] == 65 * 56_171_520 == 3_651_148_800
    assert r.blocks == 20_146 and r.block_tokens == 32
    assert r.kv_tokens == 644_672
    assert r.log_lines[1] == ("[MemUsageChange] Allocated 16.60 GiB for max tokens in paged KV "
                              "cache (644672).")
    assert "--tp_size 8" in r.command and "--max_batch_size 64" in r.command


def test_kimi_k3_cli_plans_it_with_a_budget(capsys):
    assert main(["kimi-k3", "--engine", "trtllm", "--tp", "8", "--kv-budget", "20GiB",
                 "--context", "32768", "--sequences", "64"]) == 0
    out = capsys.readouterr().out
    assert "(644672)" in out and "65 slots" in out


# --- refusals, one line each ---------------------------------------------------------------

@pytest.mark.parametrize("model", ["gemma-4-31b-it", "gemma-4-26b-a4b"])
def test_gemma4_refused_for_the_v2_pool_split(model):
    with pytest.raises(InputError, match=r"KVCacheManagerV2 .*@0004396.*2,049-token") as err:
        engine_plan("trtllm", req(model))
    assert err.value.field == "engine" and "\n" not in str(err.value)


@pytest.mark.parametrize(("model", "what"), [
    ("deepseek-v4-flash", "DeepseekV4CacheManager .*@10ce7685"),
    ("deepseek-v4-pro", "DeepseekV4CacheManager .*@10ce7685"),
    ("mimo-v2-flash", "no MiMoV2FlashForCausalLM model"),
    ("step-3.7-flash", "no Step3p7FlashForCausalLM model"),
])
def test_other_newer_models_refused_with_the_reason(model, what):
    with pytest.raises(InputError, match=what) as err:
        engine_plan("trtllm", req(model))
    assert err.value.field == "engine"


def test_gemma4_cli_exits_2_in_one_line(capsys):
    assert main(["gemma-4-31b-it", "--engine", "trtllm", "--gpu", "h100"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "KVCacheManagerV2" in err


def test_mtp_is_refused_in_one_line(capsys):
    # --mtp used to plan the target alone (no draft layers in the pool, no speculative flags)
    code = main(["deepseek-v3", "--ctx", "8k", "--engine", "trtllm", "--gpu", "8xh200",
                 "--tp", "8", "--mtp"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "MTP speculative decoding" in err and "leave out --mtp" in err
    with pytest.raises(InputError, match="MTP"):
        engine_plan("trtllm", EngineRequest(
            spec=load_model("deepseek-v3"), context=8192, sequences=1,
            cache=CacheOptions(kv_k="f16", kv_v="f16", mtp=True), gpus=(find_gpu("h200"),) * 8,
            parallel=Parallel(tp=8)))


def test_max_num_tokens_sizes_the_activation_estimate():
    from app.common import make_query
    from kvcore.catalog import load_model
    from kvcore.command import read_command
    from kvcore.engines import engine_plan
    from kvcore.engines.base import EngineSettings

    def act(**kw):
        q = make_query(load_model("llama-3.1-8b"), gpu="h100", engine="trtllm", context="32k",
                       settings=EngineSettings(**kw))
        r = engine_plan("trtllm", q)
        return dict(r.overheads)["activation peak"], r
    # 2 × tokens × (hidden + intermediate) × 2 bytes: Llama-3.1-8B's 4096 + 14336
    base, _ = act()
    assert base == 2 * 8192 * (4096 + 14336) * 2
    small, r = act(max_num_tokens=2048)
    assert small == base // 4 and "--max_num_tokens 2048" in r.command
    assert read_command("trtllm-serve x --max_num_tokens 2048").settings["max_num_tokens"] == 2048


@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-v3.2"])
def test_deepseek_keeps_its_embedding_whole_on_every_rank(model):
    # modeling_deepseekv3.py builds embed_tokens with no mapping: each of the 8 ranks holds
    # the 129,280 × 7,168 bf16 table whole, not an eighth of it
    from kvcore.engines.base import rank_weights

    r = EngineRequest(spec=load_model(model), context=32768, sequences=8,
                      cache=CacheOptions(kv_k="fp8_e4m3", kv_v="fp8_e4m3"),
                      gpus=(find_gpu("h200"),) * 8, parallel=Parallel(tp=8))
    report = engine_plan("trtllm", r)
    _, split = rank_weights(r, trtllm.STAGE_SPLIT)
    table = 129_280 * 7_168 * 2
    # and MLA's k_b_proj_trans, 16 heads × 512 × 128 in fp8 and its scales, a layer
    k_b = 61 * (16 * 512 * 128 + 16 * 4 * 1 * 4)
    assert abs(report.weights_bytes - split[0].weights_bytes - (table - table // 8)
               - k_b) <= 1


# --- attention data parallelism (enable_attention_dp) -------------------------------------

def _adp(model="deepseek-v3", attn_dp=8, **kw):
    from app.common import make_query
    from kvcore.query import answer

    kw = {"gpu": "8xh200", "context": "32k", "sequences": 64, "kv": "fp8", "tp": 8, **kw}
    q = make_query(load_model(model), engine="trtllm", attn_dp=attn_dp, **kw)
    return q, answer(q)


def test_attention_dp_holds_attention_dense_mlp_shared_experts_and_lm_head_whole():
    # DeepSeek-V3 in fp8 (a 32-bit scale a 128 × 128 block): each layer's q_b (1536 × 24576),
    # kv_b (512 × 32768) and o_proj (16384 × 7168), the 3 dense MLPs (3 × 7168 × 18432) and
    # 58 shared experts (3 × 7168 × 2048) whole on each of 8 ranks instead of an eighth, and
    # the bf16 lm_head (129,280 × 7,168) likewise; the routed experts split as before
    attn = 61 * (1536 * 24576 + 512 * 32768 + 16384 * 7168)
    dense = 3 * 3 * 7168 * 18432
    shared = 58 * 3 * 7168 * 2048
    whole = int((attn + dense + shared) * (8 + 32 / (128 * 128)) / 8)
    head = 129_280 * 7_168 * 2
    _, tp = _adp(attn_dp=1)
    _, dp = _adp()
    more = dp["engine_report"]["weights_bytes"] - tp["engine_report"]["weights_bytes"]
    # and MLA's k_b_proj_trans for all 128 heads instead of 16 (fp8, a scale per 128 × 128)
    k_b = 61 * (128 - 16) * (512 * 128 + 4 * 1 * 4)
    assert abs(more - ((whole - whole // 8) + (head - head // 8)) - k_b) <= 4096
    assert 13.4 * GiB < more < 13.6 * GiB


@pytest.mark.parametrize(("gpu", "weights", "per_head"), [
    # fp8 block-scaled on Hopper: the transposed key half in fp8 and its fp32 scales
    ("h200", None, 512 * 128 + 4 * 1 * 4),
    # on Blackwell both halves also dequantized to bf16 (k_b_proj_trans_dequant, v_b_proj_dequant)
    ("b200", None, 512 * 128 + 4 * 1 * 4 + 512 * (128 + 128) * 2),
    # bf16 weights: the copy in bf16, no scales, nothing more on Blackwell
    ("b200", "bf16", 512 * 128 * 2),
])
def test_mla_keeps_a_transposed_copy_of_kv_b_proj_s_key_half(gpu, weights, per_head):
    # modules/attention.py MLA.create_weights: k_b_proj_trans (heads × kv_lora_rank ×
    # qk_nope_head_dim) in kv_b_proj's dtype; v_b_proj views kv_b_proj (modeling_deepseekv3.py)
    spec = load_model("deepseek-v3")
    assert trtllm.mla_copies(spec, weights or "fp8", find_gpu(gpu), 16) == 61 * 16 * per_head
    r = EngineRequest(spec=spec, context=32768, sequences=8, weights=weights,
                      cache=CacheOptions(kv_k="fp8_e4m3", kv_v="fp8_e4m3"),
                      gpus=(find_gpu(gpu),) * 8, parallel=Parallel(tp=8))
    report = engine_plan("trtllm", r)
    said = next(n for n in report.notes if n.startswith("MLA: each rank keeps k_b_proj_trans"))
    assert ("dequantized to bfloat16" in said) == (gpu == "b200" and weights is None)
    # a model without MLA keeps none
    assert trtllm.mla_copies(load_model("qwen3-8b"), "fp8", find_gpu("b200"), 32) == 0


def test_attention_dp_pools_serve_each_ranks_own_requests():
    _, tp = _adp(attn_dp=1)
    _, dp = _adp()
    r, t = dp["engine_report"], tp["engine_report"]
    # the latent row is a rank's either way (576 fp8 values a layer); each rank's pool holds
    # its own 8 of the 64 sequences, so its tokens go 8 times as far
    assert r["extra"]["bytes_per_token"] == t["extra"]["bytes_per_token"] == 61 * 576
    pool = r["kv_tokens"] // 8
    assert r["max_context"] == pool // 8 and r["fits"] and not t["fits"]
    assert "--max_batch_size 8 " in r["command"] and "--tp_size 8" in r["command"]
    assert any("enable_attention_dp: true" in n for n in r["notes"])
    gathered = dict((o["name"], o["bytes"]) for o in r["overheads"])["MoE token all-gather"]
    assert gathered == 8 * 8192 * 7168 * 2
    # without it, the suggestion names it
    from kvcore.query import to_fit
    q, data = _adp(attn_dp=1)
    fix = to_fit(q, data)
    alt = fix.get("or") or fix
    assert alt["attn_dp"] == 8 and alt["max_context"] == r["max_context"]


@pytest.mark.parametrize(("kw", "needle"), [
    ({"attn_dp": 4}, "give attn_dp 8"),
    ({"model": "llama-3.1-70b", "kv": "fp8"}, "LlamaForCausalLM is not established"),
    ({"pp": 2, "tp": 4, "attn_dp": 4}, "tensor parallelism alone"),
])
def test_attention_dp_refusals(kw, needle):
    with pytest.raises(InputError, match=needle):
        _adp(**kw)


def test_attention_dp_through_the_api_and_the_card_search():
    from fastapi.testclient import TestClient

    from app.web import create_app
    from kvcore.query import find_gpu_for

    _, dp = _adp()
    body = {"model": "deepseek-v3", "gpu": "8xh200", "engine": "trtllm", "context": "32k",
            "sequences": 64, "kv": "fp8", "tp": 8, "attn_dp": 8}
    data = TestClient(create_app()).post("/api/v1/plan", json=body).json()
    assert data["engine_report"]["max_context"] == dp["engine_report"]["max_context"]
    q, _ = _adp(attn_dp=1, gpu=None, tp=None)
    rows = find_gpu_for(q)
    h200 = next(r for r in rows if r["gpu"] == "h200")
    assert h200["count"] == 8 and h200["attn_dp"] == 8


@pytest.mark.parametrize(("model", "gpu", "tp"), [("qwen3-235b-a22b", "8xh100", 8),
                                                  ("qwen3-30b-a3b", "2xh100", 2)])
def test_qwen3_moe_attention_dp_holds_attention_embedding_and_lm_head_whole(model, gpu, tp):
    # modeling_qwen3_moe.py under attention DP: the attention (tp_size 1) and the embedding
    # (no mapping) whole, the lm_head whole (LMHead drops its split), the experts split; bf16.
    # Its cache holds all 4 KV heads of a layer for a rank's own requests
    spec = load_model(model)
    attn = 2 * sum(m.params for m in spec.params.modules
                   if m.role == "" and ".self_attn." in m.names[0])
    table = 2 * spec.vocab_size * spec.hidden_size
    _, t = _adp(model, attn_dp=1, gpu=gpu, tp=tp, kv=None, sequences=16)
    _, d = _adp(model, attn_dp=tp, gpu=gpu, tp=tp, kv=None, sequences=16)
    more = d["engine_report"]["weights_bytes"] - t["engine_report"]["weights_bytes"]
    assert abs(more - (attn - attn // tp + 2 * (table - table // tp))) <= 8
    layers = spec.decoder_layers
    assert d["engine_report"]["extra"]["bytes_per_token"] == layers * 4 * 128 * 2 * 2
    assert t["engine_report"]["extra"]["bytes_per_token"] == layers * -(-4 // tp) * 128 * 2 * 2


def test_gpt_oss_refuses_pipeline_parallelism_under_trtllm():
    from app.common import make_query

    with pytest.raises(InputError, match="asserts pp_size == 1"):
        from kvcore.query import answer
        answer(make_query(load_model("gpt-oss-120b"), engine="trtllm", gpu="2xh100", pp=2))


def test_glm_4_5_keeps_its_embedding_whole_and_under_attention_dp_its_dense_layers_too():
    # modeling_glm.py: Glm4Model builds embed_tokens with no mapping (whole under tensor
    # parallelism too); under attention DP the attention, the 3 dense MLPs
    # (_compute_mlp_tp_size) and the shared experts (_compute_shared_expert_tp_size) whole,
    # the lm_head whole, the routed experts split. bf16 on 8 × H200
    from kvcore.engines.base import rank_weights

    spec = load_model("glm-4.5")
    table = 2 * spec.vocab_size * spec.hidden_size
    r = EngineRequest(spec=spec, context=32768, sequences=16,
                      cache=CacheOptions(kv_k="f16", kv_v="f16"),
                      gpus=(find_gpu("h200"),) * 8, parallel=Parallel(tp=8))
    report = engine_plan("trtllm", r)
    _, split = rank_weights(r, trtllm.STAGE_SPLIT)
    assert abs(report.weights_bytes - split[0].weights_bytes - (table - table // 8)) <= 1
    whole = 2 * sum(m.params for m in spec.params.modules
                    if m.role == "" and m.names[0].startswith("layers."))
    dense = 2 * 3 * 3 * 5120 * 12288
    assert whole > dense
    _, t = _adp("glm-4.5", attn_dp=1, kv=None, sequences=16)
    _, d = _adp("glm-4.5", kv=None, sequences=16)
    more = d["engine_report"]["weights_bytes"] - t["engine_report"]["weights_bytes"]
    assert abs(more - ((whole - whole // 8) + (table - table // 8))) <= 8


def test_llama_4_holds_its_vision_tower_whole_on_every_rank():
    # modeling_llama.py's Llama4VisionEncoder wraps the Hugging Face vision modules, which
    # no rank splits: the tower whole on each of 4 ranks, not a quarter of it
    from kvcore.engines.base import encoder_bytes, rank_weights

    r = EngineRequest(spec=load_model("llama-4-scout-17b-16e-instruct"), context=32768,
                      sequences=8, cache=CacheOptions(kv_k="f16", kv_v="f16"),
                      gpus=(find_gpu("h100"),) * 4, parallel=Parallel(tp=4))
    report = engine_plan("trtllm", r)
    _, split = rank_weights(r, trtllm.STAGE_SPLIT)
    enc = encoder_bytes(r)
    assert enc > GiB
    assert abs(report.weights_bytes - split[0].weights_bytes - (enc - enc // 4)) <= 1


def test_qwen3_next_and_qwen3_5_attention_dp_hold_every_linear_head_and_the_tower_whole():
    # gdn_mixer.py and mamba_cache_manager.py take tp_size 1 under attention DP: each rank
    # holds the Gated DeltaNet projections whole and the state of all the linear heads, for
    # its own requests (max_batch_size × pp + 1 slots of them); Qwen3.5-MoE's vision tower
    # whole too
    from kvcore.engines.base import encoder_bytes

    _, t = _adp("qwen3-next-80b-a3b-instruct", attn_dp=1, gpu="4xh100", tp=4, kv=None,
                sequences=8)
    _, d = _adp("qwen3-next-80b-a3b-instruct", attn_dp=4, gpu="4xh100", tp=4, kv=None,
                sequences=8)
    te, de = t["engine_report"]["extra"], d["engine_report"]["extra"]
    assert (te["state_slots"], de["state_slots"]) == (8 + 1, 2 + 1)
    assert de["state_bytes"] // 3 == 4 * (te["state_bytes"] // 9)
    spec = load_model("qwen3.5-122b-a10b")
    q, t = _adp("qwen3.5-122b-a10b", attn_dp=1, gpu="4xh100", tp=4, kv=None, sequences=8)
    _, d = _adp("qwen3.5-122b-a10b", attn_dp=4, gpu="4xh100", tp=4, kv=None, sequences=8)
    whole = 2 * sum(m.params for m in spec.params.modules
                    if m.role == "" and m.names[0].startswith("layers."))
    table = 2 * spec.vocab_size * spec.hidden_size
    enc = encoder_bytes(q)
    # an lm_head of its own beside the embedding (weights_for: lm_head_separate)
    from kvcore.weights import weights_for
    heads = 2 if weights_for(spec, None).lm_head_separate else 1
    more = d["engine_report"]["weights_bytes"] - t["engine_report"]["weights_bytes"]
    assert abs(more - ((whole - whole // 4) + heads * (table - table // 4)
                       + (enc - enc // 4))) <= 16


def test_max_tokens_caps_the_pool_and_the_options_file_sets_it(capsys):
    # kv_cache_config.max_tokens: the smaller of it and what the fraction gives, rounded up
    # to whole blocks; qwen3-8b's f16 row is 36 × 8 × 128 × 2 × 2 = 147,456 bytes
    from app.common import make_query
    from kvcore.command import read_command
    from kvcore.engines import EngineSettings
    from kvcore.query import answer

    spec = load_model("qwen3-8b")
    free = answer(make_query(spec, engine="trtllm", gpu="h100", context="32k", sequences=4))
    capped = answer(make_query(spec, engine="trtllm", gpu="h100", context="32k", sequences=4,
                               settings=EngineSettings(max_total_tokens=100_000)))
    r = capped["engine_report"]
    assert free["fits"] and not capped["fits"]
    assert r["kv_tokens"] == 100_000 == -(-100_000 // 32) * 32
    assert r["max_context"] == 25_000 and r["kv_pool_bytes"] == 100_000 * 147_456
    assert "[MemUsageChange] Allocated 13.73 GiB for max tokens in paged KV cache (100000)." \
        in r["log_lines"]
    launch = read_command("trtllm-serve Qwen/Qwen3-8B --config o.yml",
                          "kv_cache_config:\n  max_tokens: 100000\n")
    assert launch.settings["max_total_tokens"] == 100_000
    # a cap above what memory gives changes nothing
    big = answer(make_query(spec, engine="trtllm", gpu="h100", context="32k", sequences=4,
                            settings=EngineSettings(max_total_tokens=10**9)))
    assert big["engine_report"]["kv_tokens"] == free["engine_report"]["kv_tokens"]
