"""EAGLE draft heads (kvcore/draft.py): a head of one decoder layer over the target's hidden
states, its weights and cache beside the target's as vLLM 0.34, SGLang 0.5.23 and llama.cpp
keep them. Figures worked by hand from the catalog's configs: the EAGLE-3 head for
Llama-3.1-8B has hidden 4,096, 32 query and 8 KV heads of 128, intermediate 14,336, a vocabulary
of 128,256 and a draft vocabulary of 32,000; the target 32 layers of 8 KV heads × 128."""

import json

import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.web import create_app
from kvcore import CacheOptions, InputError, load_model
from kvcore.catalog import model_catalog
from kvcore.draft import attach, head_method
from kvcore.engines import EngineRequest, engine_plan
from kvcore.hf import spec_from_config
from kvcore.parallel import Parallel
from kvcore.query import find_draft

GiB = 1024**3
H, INTER, V, DV = 4096, 14336, 128256, 32000
# the target's f16 cache a token (32 layers × 8 heads × 128 × 2 × 2 bytes) and the head's
TARGET, HEAD = 131_072, 4_096
# EAGLE-3: fc over three hidden states, q/k/v over the embedding and the fused hidden state
# (2 × 4,096 inputs), o, the MLP, four norms and the lm_head of the draft vocabulary
EAGLE3_PARAMS = (3 * H * H + 2 * H * (32 + 16) * 128 + 32 * 128 * H + 3 * H * INTER + 4 * H
                 + DV * H)
# EAGLE-1: fc over the embedding and the hidden state, a plain layer without its input norm,
# no final norm and no lm_head
EAGLE1_PARAMS = 2 * H * H + H * (32 + 16) * 128 + 32 * 128 * H + 3 * H * INTER + H


@pytest.fixture(scope="module")
def eagle3():
    return attach(load_model("llama-3.1-8b"), load_model("eagle3-llama3.1-instruct-8b"))


def req(spec, ctx=8192, seqs=4, kv="f16", **kw):
    return EngineRequest(spec=spec, context=ctx, sequences=seqs,
                         cache=CacheOptions(kv_k=kv, kv_v=kv, mtp=True), **kw)


def _head(name="my-head", **fields):
    """The catalog's EAGLE-3 config with ``fields`` changed, under another name."""
    entry = next(e for e in model_catalog() if e.id == "eagle3-llama3.1-instruct-8b")
    return spec_from_config({**entry.config(), **fields}, name=name, source="test")


def test_head_params_and_bytes(eagle3):
    assert EAGLE3_PARAMS == 424_689_664
    d = eagle3.draft
    assert (d.method, d.spec.params.total) == ("eagle3", EAGLE3_PARAMS)
    # 2 bytes a weight and the int64 map of 32,000 draft tokens to the target's
    assert d.weight_bytes == 2 * EAGLE3_PARAMS + 8 * DV == 849_635_328
    # SGLang builds the head's own embedding until it borrows the target's
    assert d.borrowed_bytes == 2 * V * H
    one = attach(load_model("llama-3-8b-instruct"), load_model("eagle-llama3-instruct-8b"))
    assert (one.draft.method, one.draft.weight_bytes) == ("eagle", 2 * EAGLE1_PARAMS)
    assert one.draft.weight_bytes == 503_324_672
    # EAGLE-1 builds its own embedding and a full lm_head there
    assert one.draft.borrowed_bytes == 2 * 2 * V * H


def test_method_from_config_and_name():
    head = load_model("eagle3-llama3.1-instruct-8b")
    # its config's architecture is LlamaForCausalLM: draft_vocab_size tells it apart
    assert head.architecture == "LlamaForCausalLM" and head_method(head) == "eagle3"
    assert head_method(load_model("eagle-llama3-instruct-8b")) == "eagle"
    assert head_method(load_model("qwen3-0.6b")) == "draft_model"
    renamed = _head(architectures=["LlamaForCausalLMEagle3"], name="plain-name")
    assert renamed.head.declared == "eagle3" and head_method(renamed) == "eagle3"
    with pytest.raises(InputError, match="does not load it") as e:
        head_method(renamed, "draft_model")
    assert e.value.field == "draft_method"
    with pytest.raises(InputError, match="draft_method must be one of") as e:
        head_method(renamed, "medusa")
    assert e.value.field == "draft_method"
    gpt_oss = _head(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 17, 33]},
                    rope_scaling={"rope_type": "yarn", "factor": 32.0})
    assert gpt_oss.head.aux_layers == 3 and gpt_oss.head.rope_stretches is False


def test_a_head_drafts_for_its_own_target():
    with pytest.raises(InputError, match="4,096 values; llama-3.1-70b-instruct's are "
                                         "8,192") as e:
        attach(load_model("llama-3.1-70b-instruct"), load_model("eagle3-llama3.1-instruct-8b"))
    assert e.value.field == "draft"
    # target_hidden_size: the width the fc reads
    wide = _head(target_hidden_size=8192)
    attach(load_model("llama-3.1-70b-instruct"), wide)
    with pytest.raises(InputError, match="vocabulary of 128,256"):
        attach(load_model("qwen3-8b"), _head(hidden_size=4096))


def test_vllm_head_in_the_targets_blocks(eagle3):
    # one group: 64 × (131,072 + 4,096) bytes a block, 8 GiB holds 992 blocks
    r = engine_plan("vllm", req(eagle3, kv_budget_bytes=8 * GiB))
    assert (r.blocks, r.block_tokens) == (8 * GiB // (64 * (TARGET + HEAD)), 64) == (992, 64)
    assert ("--speculative-config '{\"method\": \"eagle3\", \"model\": "
            "\"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", \"num_speculative_tokens\": 3}'"
            in r.command)
    # its head is stretched to the target's context (a default rotary embedding): 128k is
    # served though the head's config says 2,048
    engine_plan("vllm", req(eagle3, ctx=131072, seqs=1, kv_budget_bytes=40 * GiB))
    yarn = attach(load_model("llama-3.1-8b"),
                  _head(rope_scaling={"rope_type": "yarn", "factor": 2.0}))
    with pytest.raises(InputError, match="lowers max_model_len"):
        engine_plan("vllm", req(yarn, ctx=131072, seqs=1, kv_budget_bytes=40 * GiB))


def test_vllm_keeps_the_heads_hidden_states(eagle3):
    # max_num_batched_tokens rows of the head's 4,096 values in 16 bits, off the budget
    r = engine_plan("vllm", req(eagle3, gpus=(_gpu("h100"),), ctx=32768, seqs=4))
    # (vLLM's default 8,192 batched tokens on an H100)
    assert dict(r.overheads)["EAGLE head's hidden-state buffer"] == 8192 * H * 2
    # a draft model keeps no such buffer
    plain = attach(load_model("llama-3.1-8b"), load_model("llama-3.2-1b-instruct"))
    r = engine_plan("vllm", req(plain, gpus=(_gpu("h100"),), ctx=32768, seqs=4))
    assert not any("EAGLE" in name for name, _ in r.overheads)


def _gpu(name):
    from kvcore.gpus import find_gpu
    return find_gpu(name)


def test_sglang_eagle3_cell_pool_and_embedding(eagle3):
    # the cell: 131,072 + int(131,072 × 1 / 32) = 135,168; 8 GiB // 135,168 = 63,550 tokens
    r = engine_plan("sglang", req(eagle3, kv_budget_bytes=8 * GiB))
    assert r.extra["cell_bytes"] == TARGET + HEAD
    assert r.kv_tokens == 8 * GiB // (TARGET + HEAD)
    # the head's pool: (N + 1) × 2,048 bytes for K, as many for V
    n = r.kv_tokens
    assert r.log_lines[1].endswith(f"#tokens: {n}, K size: {(n + 1) * 2048 / GiB:.2f} GB, "
                                   f"V size: {(n + 1) * 2048 / GiB:.2f} GB")
    assert ("--speculative-algorithm EAGLE3 --speculative-draft-model-path "
            "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B --speculative-num-steps 3 "
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4") in r.command
    # on a card: the head's own embedding is held while the pool is sized, its token map not
    # yet on the card
    on_card = engine_plan("sglang", req(eagle3, gpus=(_gpu("h100"),), ctx=1024, seqs=1))
    held = dict(on_card.overheads)["EAGLE head's own embedding while the pool is sized"]
    assert held == 2 * V * H - 8 * DV
    # the head's worker takes the target's context: past its 2,048 SGLang wants the variable
    assert not on_card.command.startswith("SGLANG_ALLOW")
    long = engine_plan("sglang", req(eagle3, gpus=(_gpu("h100"),), ctx=4096, seqs=1))
    assert long.command.startswith("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 ")


def test_llamacpp_runs_eagle3_heads_only(eagle3):
    r = engine_plan("llama.cpp", req(eagle3, seqs=1, kv_budget_bytes=12 * GiB))
    assert "-md eagle3-llama3.1-instruct-8b-F16.gguf --spec-type draft-eagle3" in r.command
    # its one layer's cache in f16: 8,192 cells × 4,096 bytes
    assert r.extra["draft"]["kv_bytes"] == 8192 * HEAD
    # f32 activations of a 512-token ubatch (2 × 4,096 + 2 × 14,336 values a token), logits of
    # every token over the draft's and the target's vocabularies, backend sampling's 3 bytes a
    # token and target token, and the target's three layer inputs a token
    width = 2 * H + 2 * INTER
    assert r.extra["draft"]["compute_bytes"] == (4 * 512 * (width + DV + V) + 3 * 512 * V
                                                 + 4 * 3 * H * 512)
    one = attach(load_model("llama-3-8b-instruct"), load_model("eagle-llama3-instruct-8b"))
    with pytest.raises(InputError, match="EAGLE-3 heads") as e:
        engine_plan("llama.cpp", req(one, kv_budget_bytes=12 * GiB))
    assert e.value.field == "draft"


def test_a_head_is_no_model_to_serve(capsys):
    assert main(["eagle3-llama3.1-instruct-8b", "--gpu", "4090"]) == 2
    err = capsys.readouterr().err.strip()
    assert "is an EAGLE-3 draft head (it was trained for llama-3.1-8b)" in err
    assert len(err.splitlines()) == 1
    c = TestClient(create_app())
    r = c.get("/api/v1/plan?model=eagle-llama3-instruct-8b&gpu=4090")
    assert r.status_code == 422 and r.json()["field"] == "model"
    # --find-model leaves the heads out
    assert main(["--find-model", "--gpu", "h200", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    named = {row["model"] for rows in found.values() if isinstance(rows, list) for row in rows}
    assert named and not any(m.startswith(("eagle-", "eagle3-")) for m in named)


def test_find_draft_lists_the_targets_heads():
    from app.common import make_query

    q = make_query(load_model("llama-3.1-8b"), context="8k", gpu="4090", engine="vllm")
    rows = {r["draft"]: r for r in find_draft(q)["drafts"]}
    assert rows["eagle3-llama3.1-instruct-8b"]["method"] == "eagle3"
    assert rows["llama-3.2-1b-instruct"]["method"] == "draft_model"
    q = make_query(load_model("qwen3-8b"), context="8k", gpu="4090", engine="vllm")
    assert not any(r["draft"].startswith("eagle") for r in find_draft(q)["drafts"])


def test_api_and_cli_take_the_draft_method(capsys):
    c = TestClient(create_app())
    r = c.post("/api/v1/plan", json={"model": "llama-3.1-8b", "gpu": "h100", "engine": "vllm",
                                     "draft": "eagle3-llama3.1-instruct-8b",
                                     "draft_method": "eagle3", "acceptance": 0.7})
    assert r.status_code == 200
    data = r.json()
    assert data["draft"]["method"] == "eagle3" and data["draft"]["params"] == EAGLE3_PARAMS
    assert data["decode"]["speculative"]["speedup"] > 1
    r = c.post("/api/v1/plan", json={"model": "llama-3.1-8b", "gpu": "h100",
                                     "draft_method": "eagle3"})
    assert r.status_code == 422 and r.json()["field"] == "draft_method"
    assert main(["llama-3.1-8b", "--gpu", "h100", "--draft", "eagle3-llama3.1-instruct-8b",
                 "--draft-method", "draft_model"]) == 2
    assert "does not load it" in capsys.readouterr().err


def test_sglang_names_the_class_it_loads_a_head_by(eagle3):
    # the yuhuili config names LlamaForCausalLM: SGLang would load a plain Llama
    r = engine_plan("sglang", req(eagle3, kv_budget_bytes=8 * GiB))
    assert any("names LlamaForCausalLMEagle3" in n for n in r.notes)
    renamed = attach(load_model("llama-3.1-8b"),
                     _head(architectures=["LlamaForCausalLMEagle3"]))
    r = engine_plan("sglang", req(renamed, kv_budget_bytes=8 * GiB))
    assert not any("names LlamaForCausalLMEagle3" in n for n in r.notes)
    # a head of Qwen3-8B's width and vocabulary under attention data parallelism
    qwen = attach(load_model("qwen3-8b"), _head(vocab_size=151936))
    with pytest.raises(InputError, match="attention group") as e:
        engine_plan("sglang", req(qwen, kv_budget_bytes=8 * GiB,
                                  parallel=Parallel(tp=2, attn_dp=2)))
    assert e.value.field == "draft"


def test_vllm_head_beside_a_hybrid_target():
    # gpt-oss: full and sliding-window layers of 8 KV heads × 64. A head of that shape joins the
    # full layers' bucket (gpt-oss-20b: 12 sliding + 13 full, padded to groups of 13); one of
    # another shape (head_dim 128) is refused
    def head(head_dim=64):
        return _head(hidden_size=2880, vocab_size=201088, num_attention_heads=64,
                     num_key_value_heads=8, head_dim=head_dim, intermediate_size=17280)
    spec = attach(load_model("gpt-oss-20b"), head())
    r = engine_plan("vllm", req(spec, kv_budget_bytes=8 * GiB))
    plain = engine_plan("vllm", EngineRequest(spec=load_model("gpt-oss-20b"), context=8192,
                                              sequences=4, kv_budget_bytes=8 * GiB))
    # a page: 64 tokens × 8 heads × 64 × 2 (K, V) × 2 bytes = 131,072; a block number spans
    # the group's 13 layers where the target alone has 12
    page = 64 * 8 * 64 * 2 * 2
    assert (r.blocks, plain.blocks) == (8 * GiB // (13 * page), 8 * GiB // (12 * page))
    wide = attach(load_model("gpt-oss-20b"), head(head_dim=128))
    with pytest.raises(InputError, match="shaped unlike the target's") as e:
        engine_plan("vllm", req(wide, kv_budget_bytes=8 * GiB))
    assert e.value.field == "draft"


def test_sglang_head_beside_a_sliding_window_target():
    # gpt-oss-20b: 12 full and 12 sliding layers of 8 KV heads × 64, 2,048 bytes a layer and
    # token in bf16. HybridSWAPoolConfigurator's full side pays for the head's layer at that:
    # tokens = budget / (12 × 2,048 + 2,048 + 0.8 × 12 × 2,048)
    def head(head_dim=64):
        return _head(hidden_size=2880, vocab_size=201088, num_attention_heads=64,
                     num_key_value_heads=8, head_dim=head_dim, intermediate_size=17280,
                     architectures=["LlamaForCausalLMEagle3"])
    r = engine_plan("sglang", req(attach(load_model("gpt-oss-20b"), head()),
                                  kv_budget_bytes=8 * GiB))
    page = r.block_tokens
    full = int(8 * GiB / (12 * 2048 + 2048 + 0.8 * 12 * 2048)) // page * page
    assert r.kv_tokens == full
    assert r.log_lines[0].startswith(f"Use sliding window memory pool. full_layer_tokens={full}")
    # the head's pool: the full side's token count in its own geometry
    assert r.log_lines[-1].endswith(f"#tokens: {full}, K size: {(full + page) * 1024 / GiB:.2f} "
                                    f"GB, V size: {(full + page) * 1024 / GiB:.2f} GB")
    assert not any("pool takes" in n for n in r.notes)
    # a head of head_dim 128 allocates twice what the cell reserved for it
    r = engine_plan("sglang", req(attach(load_model("gpt-oss-20b"), head(128)),
                                  kv_budget_bytes=8 * GiB))
    assert r.kv_tokens == full
    assert any("takes 4,096 bytes a token per rank where the cell reserved 2,048" in n
               for n in r.notes)


def test_the_catalog_lists_heads_with_their_own_parameters(capsys):
    assert main(["models", "eagle"]) == 0
    out = capsys.readouterr().out
    assert "eagle3-llama3.1-instruct-8b    0.4B" in out
    assert ("EAGLE draft heads, planned as their target's --draft: eagle3-llama3.1-instruct-8b "
            "(eagle3) for llama-3.1-8b; eagle-llama3-instruct-8b (eagle) for "
            "llama-3-8b-instruct") in out
    rows = TestClient(create_app()).get("/api/v1/models?q=eagle").json()
    head = next(r for r in rows if r["id"] == "eagle3-llama3.1-instruct-8b")
    assert (head["params"], head["head_of"], head["draft_method"]) == (
        EAGLE3_PARAMS, "llama-3.1-8b", "eagle3")
    plain = next(r for r in TestClient(create_app()).get("/api/v1/models?q=qwen3-8b").json()
                 if r["id"] == "qwen3-8b")
    assert "head_of" not in plain


def test_a_speculators_format_head():
    # the speculators library's layout (RedHatAI's heads): the decoder layer's config under
    # transformer_layer_config, the head's own fields beside it
    layer = {key: value for key, value in next(
        e for e in model_catalog() if e.id == "eagle3-llama3.1-instruct-8b").config().items()
        if key not in ("architectures", "draft_vocab_size")}
    config = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
              "draft_vocab_size": DV, "eagle_aux_hidden_state_layer_ids": [2, 16, 29],
              "target_hidden_size": None, "norm_before_fc": True,
              "speculators_config": {"algorithm": "eagle3"},
              "transformer_layer_config": layer}
    head = spec_from_config(config, name="speculator", source="test")
    assert (head.head.declared, head.head.draft_vocab_size, head.head.aux_layers) == (
        "eagle3", DV, 3)
    spec = attach(load_model("llama-3.1-8b"), head)
    # norm_before_fc: one norm over the three hidden states the fc reads
    assert spec.draft.spec.params.total == EAGLE3_PARAMS + 3 * H
    assert spec.draft.method == "eagle3" and spec.mtp_layers == 1


def test_the_model_page_and_summary_of_a_head():
    c = TestClient(create_app())
    assert c.get("/api/v1/models/eagle3-llama3.1-instruct-8b").json()["params"] == EAGLE3_PARAMS
    page = c.get("/models/eagle3-llama3.1-instruct-8b")
    assert page.status_code == 200
    assert "EAGLE-3 draft head for llama-3.1-8b" in page.text and "0.42B parameters" in page.text
    assert "/?model=llama-3.1-8b&amp;draft=eagle3-llama3.1-instruct-8b" in page.text
    plain = c.get("/models/qwen3-8b")
    assert "draft head" not in plain.text and "Plan it" in plain.text
