"""SGLang 0.5.23 with EAGLE / NEXTN and the model's own MTP head (``--mtp``): figures worked by
hand from the source's formulas (docs/ENGINES.md S2a; kvcore/engines/sglang_mtp.py)."""

import pytest
from fastapi.testclient import TestClient

from kvcore import CacheOptions, InputError, find_gpu, load_model
from kvcore.engines import EngineRequest, EngineSettings, engine_plan
from kvcore.parallel import Parallel

GiB = 1024**3
MiB = 1024**2
SPEC_FLAGS = ("--speculative-algorithm EAGLE --speculative-num-steps 3 "
              "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4")


def req(model, ctx=8192, seqs=8, mtp=True, kv="f16", **kw):
    return EngineRequest(spec=load_model(model), context=ctx, sequences=seqs,
                         cache=CacheOptions(kv_k=kv, kv_v=kv, mtp=mtp), **kw)


def test_deepseek_v3_draft_layer_joins_the_cell():
    # DefaultPoolConfigurator: cell 61 layers × (512 + 64) × 2 B = 70,272; the NEXTN draft has
    # num_nextn_predict_layers = 1, so cell += int(70,272 × 1 / 61) = 1,152 → 71,424.
    # 40 GiB = 42,949,672,960 bytes // 71,424 = 601,333 tokens (611,191 without the draft)
    budget = 40 * GiB
    r = engine_plan("sglang", req("deepseek-v3", kv_budget_bytes=budget,
                                  parallel=Parallel(tp=8)))
    assert r.extra["cell_bytes"] == 71424
    assert r.kv_tokens == 601333
    # target pool: (N + 1) × 70,272 = 39.35 GiB; the draft worker's pool, same token count over
    # one 1,152-byte layer: 0.65 GiB
    # (both pools in the target's dtype)
    assert r.log_lines == (
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 601333, KV size: 39.35 GB",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 601333, KV size: 0.65 GB")
    assert r.command.endswith(SPEC_FLAGS)
    plain = engine_plan("sglang", req("deepseek-v3", mtp=False, kv_budget_bytes=budget,
                                      parallel=Parallel(tp=8)))
    assert plain.kv_tokens == 611191 and "speculative" not in plain.command


def test_deepseek_v3_on_eight_h200s():
    # the memory hook adds nothing for speculative decoding (it runs before the speculative
    # hook): 512 + 12,288 + 1,024 + 2 × 8 + 1,536 = 15,376 MiB of 143,771 → 0.893, as without
    h200 = find_gpu("h200")
    r = engine_plan("sglang", req("deepseek-v3", ctx=32768, seqs=16, gpus=(h200,),
                                  parallel=Parallel(tp=8)))
    assert r.extra["mem_fraction_static"] == 0.893
    assert r.log_lines[0] == "mem_fraction_static=0.893"
    assert r.extra["cell_bytes"] == 71424
    # tokens = rest // 71,424 (page 1), the draft's line the same count over 1,152 bytes
    n = r.kv_pool_bytes // 71424
    assert r.kv_tokens == n
    assert r.log_lines[2] == f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {n}, " \
                             f"KV size: {(n + 1) * 1152 / GiB:.2f} GB"
    assert "--tp 8 " + SPEC_FLAGS in r.command
    plain = engine_plan("sglang", req("deepseek-v3", ctx=32768, seqs=16, mtp=False,
                                      gpus=(h200,), parallel=Parallel(tp=8)))
    # the draft's weights are loaded before the pool is profiled: less rest as well
    assert r.weights_bytes > plain.weights_bytes and r.kv_pool_bytes < plain.kv_pool_bytes


def test_dsa_draft_adds_its_latent_share_and_its_own_indexer_keys():
    # DeepSeek-V3.2 in bfloat16: cell 61 × (1,152 + 132) = 78,324; draft: int(61 × 1,152 × 1
    # / 61) = 1,152 of latent plus 132 of indexer keys (allocate_all_layers) → 79,608.
    # 40 GiB // 79,608 = 539,518 → 539,456 on 64-token pages. Draft pool (one layer):
    # (N + 64) × 1,152 + (N + 65) // 64 × 64 × 132 = 0.65 GiB; the target's 61 layers 39.36
    r = engine_plan("sglang", req("deepseek-v3.2", kv="bf16", kv_budget_bytes=40 * GiB,
                                  parallel=Parallel(tp=8)))
    assert r.extra["cell_bytes"] == 79608 and r.kv_tokens == 539456
    assert r.log_lines == (
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 539456, KV size: 39.36 GB",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 539456, KV size: 0.65 GB")


def test_dsa_draft_share_leaves_out_only_the_layers_that_hold_index_keys():
    # GLM-5.2 in bfloat16: cell 78 × 1,152 + 21 × 132 = 92,628 (the 57 "shared" layers hold
    # no index keys); the draft's share is that cell less its 21 layers' keys, over 78 layers
    # (_compute_dsa_indexer_cell_size of the target's layers): 89,856 / 78 = 1,152, plus 132
    # for the draft's own keys → 93,912
    r = engine_plan("sglang", req("glm-5.2", kv="bf16", kv_budget_bytes=40 * GiB,
                                  parallel=Parallel(tp=8)))
    assert r.extra["cell_bytes"] == 92628 + 1152 + 132


def test_qwen35_intermediate_states_are_solved_with_the_slots():
    # Qwen3.5-27B: 48 Gated DeltaNet layers × (3 × 10,240 conv values × 2 B + 48 × 128 × 128
    # float32 SSM values × 4 B) = 153,944,064 bytes a slot; 16 full layers × 4 KV heads ×
    # (256 + 256) × 2 B = 65,536 a token. Its config names mtp_num_hidden_layers, which SGLang
    # does not read, so the cell gets no draft layer. _handle_max_mamba_cache with D = 4 draft
    # tokens and 5 slots a request (extra_buffer): share = 40 GiB × 0.9 / 1.9;
    # K = int((share − 153,944,064 × 5) // (153,944,064 × 1.8)) = 70; the states of
    # min(8, 70 // 5) + 1 = 9 requests × 4 tokens = 5,541,986,304 bytes; KV gets
    # 42,949,672,960 − 5,541,986,304 − 71 × 153,944,064 = 26,477,658,112 → 404,017 tokens
    r = engine_plan("sglang", req("qwen3.5-27b", kv_budget_bytes=40 * GiB))
    assert r.extra["mamba_slots"] == 70
    assert r.extra["cell_bytes"] == 65536
    assert r.kv_tokens == 404017
    assert r.kv_pool_bytes == 26477658112
    # (N + 1) × 16 × 4 × 256 × 2 = 12.33 GiB each for K and V; no draft pool line, and no
    # Mamba line (a draft's intermediate states change it; not sized here)
    assert r.log_lines == ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 404017, "
                           "K size: 12.33 GB, V size: 12.33 GB",)
    assert r.command.endswith(SPEC_FLAGS)
    # without the draft: K = int((share − slot) // slot) = 131 slots, 345,292 tokens
    plain = engine_plan("sglang", req("qwen3.5-27b", mtp=False, kv_budget_bytes=40 * GiB))
    assert plain.extra["mamba_slots"] == 131 and plain.kv_tokens == 345292


def test_speculative_tokens_set_the_draft_tokens():
    # 3 draft tokens, top-k 1: 2 steps; K = int((share − slot × 4) // (slot × 1.6)) = 80,
    # states of min(8, 16) + 1 = 9 requests × 3 tokens → 401,668 tokens
    r = engine_plan("sglang", req("qwen3.5-27b", kv_budget_bytes=40 * GiB,
                                  settings=EngineSettings(speculative_tokens=3)))
    assert r.extra["mamba_slots"] == 80 and r.kv_tokens == 401668
    assert r.command.endswith("--speculative-algorithm EAGLE --speculative-num-steps 2 "
                              "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3")


@pytest.mark.parametrize(("model", "kw", "match"), [
    ("qwen3-8b", {}, "no MTP / next-n layers"),
    ("deepseek-v3", {"parallel": Parallel(tp=4, pp=2)}, "last pipeline stage"),
    ("qwen3.5-27b", {"settings": EngineSettings(speculative_tokens=1)}, "at least 2"),
])
def test_refusals_are_one_line(model, kw, match):
    with pytest.raises(InputError, match=match) as e:
        engine_plan("sglang", req(model, kv_budget_bytes=40 * GiB, **kw))
    assert "\n" not in str(e.value)


def test_speculative_tokens_without_mtp_still_refused(capsys):
    from app.cli import main

    with pytest.raises(InputError, match="add --mtp"):
        engine_plan("sglang", req("qwen3.5-27b", mtp=False, kv_budget_bytes=40 * GiB,
                                  settings=EngineSettings(speculative_tokens=3)))
    code = main(["qwen3.5-27b", "--gpu", "h200", "--engine", "sglang", "--mtp",
                 "--speculative-tokens", "3"])
    assert code == 0
    out = capsys.readouterr().out
    assert "--speculative-num-steps 2" in out and "--speculative-num-draft-tokens 3" in out
    code = main(["qwen3.5-27b", "--gpu", "h200", "--engine", "sglang", "--mtp",
                 "--speculative-tokens", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "at least 2" in err[0]


def test_api_takes_speculative_tokens_with_mtp():
    from app.web import create_app

    client = TestClient(create_app())
    body = {"model": "deepseek-v3", "gpu": "h200", "tp": 8, "engine": "sglang", "mtp": True,
            "speculative_tokens": 2}
    data = client.post("/api/v1/plan", json=body).json()
    assert data["engine_report"]["command"].endswith(
        "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2")
    r = client.post("/api/v1/plan", json={**body, "mtp": False})
    assert 400 <= r.status_code < 500 and r.json()["field"] == "speculative_tokens"
