"""SGLang's attention data parallelism (--attn-dp-size): weights, pools, reserve, command."""

import json

import pytest
from fastapi.testclient import TestClient

import kvcore
from app.cli import main
from app.common import make_query
from app.web import create_app
from kvcore.catalog import load_model
from kvcore.command import read_command
from kvcore.engines import engine_plan
from kvcore.engines.sglang import auto_mem_fraction
from kvcore.kv import cache_size
from kvcore.query import answer

GiB = 1024**3
MiB = 1024**2


def plan(model="deepseek-v3", attn_dp=1, gpu="8xh200", **kw):
    kw = {"context": "32k", "sequences": 64, **kw}
    q = make_query(load_model(model), gpu=gpu, engine="sglang", attn_dp=attn_dp, **kw)
    return q, answer(q)


def test_attention_weights_and_embedding_split_over_the_group_only():
    # DeepSeek-V3 in fp8 (config estimate): each layer's q_b (1536 × 128 × 192), kv_b
    # (512 × 128 × 256) and o_proj (128 × 128 × 7168) at 8 bits + an fp32 scale per 128²,
    # and the 16-bit input embedding (129,280 × 7,168), whole on every card with 8 groups
    # of one card instead of an eighth of them
    per_layer = 1536 * 128 * 192 + 512 * 128 * 256 + 128 * 128 * 7168
    attn = int(61 * per_layer * (8 + 32 / (128 * 128)) / 8)
    embed = 129_280 * 7_168 * 2
    _, tp = plan(attn_dp=1)
    _, dp = plan(attn_dp=8)
    more = dp["engine_report"]["weights_bytes"] - tp["engine_report"]["weights_bytes"]
    assert more == (attn - attn // 8) + (embed - embed // 8)
    # two groups of four: a quarter of them
    _, dp2 = plan(attn_dp=2)
    more2 = dp2["engine_report"]["weights_bytes"] - tp["engine_report"]["weights_bytes"]
    assert more2 == (attn // 4 - attn // 8) + (embed // 4 - embed // 8)


def test_each_group_has_its_own_pool_for_its_share_of_the_sequences():
    from kvcore.engines.base import EngineSettings

    # a fixed fraction: the pool does not change with the running requests
    _, d = plan(attn_dp=8, sequences=13, settings=EngineSettings(mem_fraction_static=0.85))
    r = d["engine_report"]
    per_pool = r["kv_tokens"] // 8
    assert r["kv_tokens"] == 8 * per_pool
    # 13 sequences over 8 groups: 2 in the busiest, so the context is its pool's half
    assert d["max_context"] == per_pool // 2
    assert d["max_sequences"] == 8 * (per_pool // 32768)
    # SGLang's own fraction reserves more decode graph as the running requests grow: the
    # most sequences are found with the pool each count gets, fewer than the first pool holds
    _, auto = plan(attn_dp=8, sequences=13)
    first = auto["engine_report"]["kv_tokens"] // 8
    assert auto["max_sequences"] % 8 == 0 and auto["max_sequences"] < 8 * (first // 32768)
    assert r["max_concurrency"] == pytest.approx(per_pool * 8 / 32768)
    assert "--max-running-requests 16" in r["command"]
    assert "--tp 8 --attn-dp-size 8" in r["command"]
    # an MLA latent is whole on every card either way: the same cell a token
    _, t = plan(attn_dp=1, sequences=13)
    assert r["extra"]["cell_bytes"] == t["engine_report"]["extra"]["cell_bytes"]


def test_gqa_heads_are_split_over_the_group():
    # Qwen3-235B-A22B: 4 KV heads. tp 8 replicates them (one a card); groups of 4 hold one
    # each too, groups of one card hold all four
    cells = {ad: plan("qwen3-235b-a22b", attn_dp=ad, gpu="8xh100", context="8k",
                      sequences=8)[1]["engine_report"]["extra"]["cell_bytes"] for ad in (1, 2, 8)}
    assert cells[1] == cells[2] == 94 * 2 * 128 * 2
    assert cells[8] == 4 * cells[1]


def test_reserve_grows_with_the_groups():
    # memory_hook.reserve_for_graph_mb: 3 MiB × decode max_bs × attn_dp more, and 1.5 more
    # past a max_bs of 300 (a 141 GB card, tp 8: max_bs 512 unless the running cap is lower)
    card = 143_771 * MiB
    mib = card / MiB
    for running, groups in ((64, 8), (512, 8), (512, 2)):
        bs = min(512, running)
        base = 512 + 8192 * 1.5 + 8 / 8 * 1024 + bs * 2 + 1536
        extra = bs * groups * 3 + (bs * groups * 1.5 if bs > 300 else 0)
        want = round((mib - max(base + extra, 10 * 1024)) / mib, 3)
        assert auto_mem_fraction(card, 8, 1, running=running, mla=True,
                                 attn_dp=groups) == want
    assert auto_mem_fraction(card, 8, 1, running=64, mla=True, attn_dp=8) < \
        auto_mem_fraction(card, 8, 1, running=64, mla=True)


def test_a_card_caches_its_groups_heads_for_its_groups_sequences():
    from kvcore.query import card_cache

    q, _ = plan("qwen3-235b-a22b", attn_dp=2, gpu="8xh100", sequences=13)
    spec, seqs = card_cache(q, 0)
    assert seqs == 7
    assert {g.n_kv_heads for g in spec.groups} == {1}
    q, _ = plan("qwen3-235b-a22b", attn_dp=8, gpu="8xh100", sequences=13)
    spec, seqs = card_cache(q, 0)
    assert seqs == 2 and {g.n_kv_heads for g in spec.groups} == {4}
    # the page's bar of one card: the KV of its group's two sequences
    page = TestClient(create_app()).get("/", params={
        "model": "qwen3-235b-a22b", "gpu": "8xh100", "engine": "sglang", "attn_dp": "8",
        "context": "8k", "sequences": "13", "kv_k": "f16", "kv_v": "f16", "weights": "auto"})
    kv = cache_size(spec, 8192, 2, q.cache).kv_bytes
    from kvcore.units import format_bytes
    assert page.status_code == 200 and format_bytes(kv, 1) in page.text


def test_decode_reads_the_groups_cache_and_whole_attention():
    # a card reads its attention projections split over its group (whole here) and the
    # latent cache of its group's 8 sequences, not all 64
    q1, tp = plan(attn_dp=1)
    q8, dp = plan(attn_dp=8)
    per_layer = 1536 * 128 * 192 + 512 * 128 * 256 + 128 * 128 * 7168
    attn = int(61 * per_layer * (8 + 32 / (128 * 128)) / 8)
    spec = load_model("deepseek-v3")
    mine = cache_size(spec, 32768, 8, q8.cache).read_bytes
    every = cache_size(spec, 32768, 64, q1.cache).read_bytes
    step = dp["decode"]["bytes_per_step"] - tp["decode"]["bytes_per_step"]
    assert step == 8 * ((attn - attn // 8) + mine - every)
    assert dp["decode"]["tokens_per_s_total"] > tp["decode"]["tokens_per_s_total"]


@pytest.mark.parametrize(("kw", "needle"), [
    ({"model": "llama-3.1-70b", "attn_dp": 4}, "LlamaForCausalLM is not established"),
    ({"attn_dp": 3}, "attn_dp must divide tp"),
    ({"attn_dp": 4, "dp": 2}, "SGLang refuses --dp-size 2 beside --attn-dp-size 4"),
])
def test_what_sglang_does_not_run_is_refused(kw, needle):
    model = kw.pop("model", "deepseek-v3")
    with pytest.raises(kvcore.InputError) as exc:
        plan(model, **kw)
    assert needle in str(exc.value)
    assert exc.value.field == "attn_dp"


def test_other_engines_refuse_attn_dp():
    with pytest.raises(kvcore.InputError) as exc:
        make_query(load_model("deepseek-v3"), gpu="8xh200", engine="vllm", attn_dp=8)
    assert "SGLang's attention data parallelism" in str(exc.value)
    assert exc.value.field == "attn_dp"


def test_lora_is_refused_beside_it():
    from kvcore.engines.base import EngineSettings
    from kvcore.engines.lora import LoRA

    q = make_query(load_model("qwen3-30b-a3b"), gpu="8xh100", engine="sglang", attn_dp=8,
                   settings=EngineSettings(lora=LoRA()))
    with pytest.raises(kvcore.InputError, match="--enable-lora with --attn-dp-size"):
        engine_plan("sglang", q)


@pytest.mark.parametrize(("command", "attn_dp", "dp"), [
    ("python -m sglang.launch_server --model-path x --tp 8 --dp 8 --enable-dp-attention", 8, None),
    ("python -m sglang.launch_server --model-path x --tp 8 --attn-dp-size 4", 4, None),
    ("python -m sglang.launch_server --model-path x --tp 8 --enable-dp-attention", None, None),
    ("python -m sglang.launch_server --model-path x --tp 8 --dp 2", None, 2),
])
def test_launch_commands_read_both_spellings(command, attn_dp, dp):
    fields = read_command(command).settings
    assert fields.get("attn_dp") == attn_dp
    assert fields.get("dp") == dp


def test_cli_and_api_take_it(capsys):
    code = main(["deepseek-v3", "--gpu", "8xh200", "--engine", "sglang", "--attn-dp", "8",
                 "--ctx", "32k", "--seqs", "64"])
    out = capsys.readouterr().out
    assert code == 0
    assert "tp 8 × pp 1 × dp 1 (attention dp 8) on" in out
    assert "attention runs as 8 groups of 1 card" in out
    code = main(["deepseek-v3", "--gpu", "8xh200", "--engine", "sglang", "--attn-dp", "8",
                 "--json"])
    assert json.loads(capsys.readouterr().out)["parallel"]["attn_dp"] == 8
    c = TestClient(create_app())
    r = c.get("/api/v1/plan", params={"model": "deepseek-v3", "gpu": "8xh200",
                                      "engine": "sglang", "attn_dp": 8})
    assert r.status_code == 200 and "--attn-dp-size 8" in r.json()["engine_report"]["command"]
    r = c.get("/api/v1/plan", params={"model": "deepseek-v3", "gpu": "8xh200",
                                      "engine": "vllm", "attn_dp": 8})
    assert r.status_code == 422 and r.json()["field"] == "attn_dp"
    r = c.post("/api/v1/find-gpu", json={"model": "deepseek-v3", "engine": "sglang",
                                         "attn_dp": 4})
    assert r.status_code == 422 and "leave out attn_dp" in r.json()["error"]


def test_web_form_field():
    c = TestClient(create_app())
    page = c.get("/", params={"model": "deepseek-v3", "gpu": "8xh200", "engine": "sglang",
                              "attn_dp": "8", "context": "32k", "sequences": "64"})
    assert page.status_code == 200
    assert 'name="attn_dp" value="8"' in page.text
    assert "--attn-dp-size 8" in page.text
    bad = c.get("/", params={"model": "deepseek-v3", "gpu": "8xh200", "engine": "sglang",
                             "attn_dp": "3"})
    assert bad.status_code == 422
    start = bad.text.index('id="err-attn_dp"')
    assert "attn_dp must divide tp" in bad.text[start:start + 200]
    # a launch command with the deprecated spelling fills the field
    cmd = c.get("/", params={"command": "python -m sglang.launch_server --model-path "
                             "deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention",
                             "gpu": "h200"})
    assert cmd.status_code == 200
    assert 'name="attn_dp" value="8"' in cmd.text


def test_the_mtp_drafts_attention_is_split_over_the_group_too():
    # DeepSeek-V3's NextN draft is a decoder layer of its own: its attention projections,
    # like the decoder's, whole on each card of groups of one card
    per_layer = int((1536 * 128 * 192 + 512 * 128 * 256 + 128 * 128 * 7168)
                    * (8 + 32 / (128 * 128)) / 8)

    def more(mtp):
        _, tp = plan(attn_dp=1, mtp=mtp)
        _, dp = plan(attn_dp=8, mtp=mtp)
        return dp["engine_report"]["weights_bytes"] - tp["engine_report"]["weights_bytes"]
    assert more(True) - more(False) == per_layer - per_layer // 8


def test_to_fit_names_the_fewest_attention_groups_that_fit():
    from app.common import answered

    # tensor parallel alone repeats DeepSeek-V3's latent pool on every card: no KV format
    # (fp4_mx_block16's latent included) fits 64 × 48k, the fewest attention groups that do
    # are named (same cards, same format)
    q, _ = plan(attn_dp=1, context="48k")
    data = answered(q)
    fix = data["to_fit"]
    assert set(fix) >= {"attn_dp", "max_context"} and "kv" not in fix
    _, fixed = plan(attn_dp=fix["attn_dp"], context="48k")
    assert fixed["fits"] and fixed["max_context"] == fix["max_context"]
    # fewer groups do not fit
    if fix["attn_dp"] > 2:
        assert not plan(attn_dp=fix["attn_dp"] // 2, context="48k")[1]["fits"]
    # where a format fits too, the groups come as the other change
    q, _ = plan(attn_dp=1, context="16k")
    fix = answered(q)["to_fit"]
    assert "kv" in fix and fix["or"]["attn_dp"] >= 2
    _, fixed = plan(attn_dp=fix["or"]["attn_dp"], context="16k")
    assert fixed["fits"] and fixed["max_context"] == fix["or"]["max_context"]
    # the page links both changes
    page = TestClient(create_app()).get("/", params={
        "model": "deepseek-v3", "gpu": "8xh200", "engine": "sglang", "context": "16k",
        "sequences": "64", "kv_k": "f16", "kv_v": "f16", "weights": "auto"})
    assert f"attn_dp={fix['or']['attn_dp']}" in page.text
    assert f"--attn-dp {fix['or']['attn_dp']} fits" in page.text


def test_find_gpu_tries_attention_groups_where_tensor_parallel_does_not_fit():
    from app.cli import smallest_card_line
    from kvcore.query import find_gpu_for

    q = make_query(load_model("deepseek-v3"), engine="sglang", context="32k", sequences=64)
    rows = find_gpu_for(q)
    grouped = [r for r in rows if r["attn_dp"] > 1]
    assert grouped, rows
    # each such row fits on its cards with its groups, with the max context it names, and
    # not by tensor parallelism alone
    for r in grouped[:2]:
        gpu = f"{r['count']}x{r['gpu']}"
        _, there = plan(attn_dp=r["attn_dp"], gpu=gpu)
        assert there["fits"] and there["max_context"] == r["max_context"]
        assert not plan(attn_dp=1, gpu=gpu)[1]["fits"]
    best = rows[0]
    flags = f"--gpu {best['count']}x{best['gpu']}" + (
        f" --attn-dp {best['attn_dp']}" if best["attn_dp"] > 1 else "")
    assert flags in smallest_card_line(q)
    # the page's list of cards links each with its groups
    page = TestClient(create_app()).get("/", params={
        "model": "deepseek-v3", "engine": "sglang", "context": "32k", "sequences": "64",
        "gpu": "", "kv_k": "f16", "kv_v": "f16", "weights": "auto"})
    assert f"attn_dp={grouped[0]['attn_dp']}" in page.text


def test_to_fit_by_more_cards_names_the_groups_those_cards_need():
    from app.common import answered, to_fit_text

    # four H200 hold neither DeepSeek-V3's 64 × 32k by tensor parallelism nor by groups:
    # eight do, with four groups, which the change says
    q, _ = plan(attn_dp=1, gpu="4xh200")
    fix = answered(q)["to_fit"]
    if "gpus" not in fix:
        pytest.skip(f"another change fits: {fix}")
    assert fix["attn_dp"] > 1
    assert f"--attn-dp {fix['attn_dp']} fits" in to_fit_text(fix)
    _, there = plan(attn_dp=fix["attn_dp"], gpu=f"{fix['gpus']}x{fix['gpu']}")
    assert there["fits"] and there["max_context"] == fix["max_context"]


def test_qwen3_next_splits_its_gated_deltanet_layers_over_the_group_too():
    # qwen3_next.py builds the linear-attention projections (in_proj_qkvz, in_proj_ba, conv1d,
    # out_proj) on the attention-TP group as it does the full attention's: in bf16 (config
    # estimate), both and the embedding whole on each card of groups of one card
    spec = load_model("qwen3-next-80b-a3b-instruct")
    attn = 2 * sum(m.params for m in spec.params.modules if m.role == ""
                   and (".self_attn." in m.names[0] or ".linear_attn." in m.names[0]))
    embed = 2 * spec.vocab_size * spec.hidden_size
    _, tp = plan("qwen3-next-80b-a3b-instruct", gpu="4xh100", context="32k", sequences=8)
    _, dp = plan("qwen3-next-80b-a3b-instruct", attn_dp=4, gpu="4xh100", context="32k",
                 sequences=8)
    more = dp["engine_report"]["weights_bytes"] - tp["engine_report"]["weights_bytes"]
    assert more == (attn - attn // 4) + (embed - embed // 4)
    # a group's card holds all the linear layers' state heads for its requests
    from kvcore.query import card_cache
    q, _ = plan("qwen3-next-80b-a3b-instruct", attn_dp=4, gpu="4xh100", sequences=8)
    mine, seqs = card_cache(q, 0)
    whole = cache_size(spec, 32768, 2, q.cache).state_bytes
    assert seqs == 2 and cache_size(mine, 32768, 2, q.cache).state_bytes == whole


def test_qwen3_5_keeps_its_embedding_whole_and_splits_its_vision_tower_over_the_group():
    # qwen3_5.py builds the input embedding with enable_tp off under attention DP (whole on
    # every card) and qwen3_vl.py the vision tower over the attention group; attention and
    # Gated DeltaNet over the group as Qwen3-Next's. bf16 (config estimate), groups of two
    spec = load_model("qwen3.5-27b")
    attn = 2 * sum(m.params for m in spec.params.modules if m.role == ""
                   and (".self_attn." in m.names[0] or ".linear_attn." in m.names[0]))
    embed = 2 * spec.vocab_size * spec.hidden_size
    tower = 2 * spec.params.encoder
    _, tp = plan("qwen3.5-27b", gpu="4xh100", context="32k", sequences=8)
    _, dp = plan("qwen3.5-27b", attn_dp=2, gpu="4xh100", context="32k", sequences=8)
    more = dp["engine_report"]["weights_bytes"] - tp["engine_report"]["weights_bytes"]
    assert more == (attn // 2 - attn // 4) + (embed - embed // 4) + (tower // 2 - tower // 4)
    assert any("input embedding whole on every card" in n for n in dp["engine_report"]["notes"])


def test_a_tied_qwen3_5_head_is_read_whole_under_attention_dp():
    import json
    from pathlib import Path

    # a Qwen3.5 with tied embeddings (its smaller sizes): the lm_head is the embedding, which
    # every card holds whole under attention DP, so a decode step reads all of it on each
    # card; untied, a card reads its 1/tp of the head
    root = Path(__file__).resolve().parent.parent / "kvcore" / "data" / "models"
    config = json.loads((root / "qwen3.5-9b.json").read_text())
    steps = {}
    for tied in (False, True):
        spec = load_model(json.dumps({**config, "tie_word_embeddings": tied}))
        for groups in (1, 2):
            q = make_query(spec, gpu="2xh100", engine="sglang", context="8k", sequences=2,
                           attn_dp=groups)
            steps[tied, groups] = answer(q)["decode"]["bytes_per_step"]
    head = 2 * config["text_config"]["vocab_size"] * config["text_config"]["hidden_size"]
    # from one group of two cards to two groups of one: the tied head goes from half a card's
    # read to a whole one on each of the two cards (the rest moves alike, tied or not)
    moved_tied = steps[True, 2] - steps[True, 1]
    moved_untied = steps[False, 2] - steps[False, 1]
    assert moved_tied - moved_untied == 2 * (head - head // 2)


def test_the_layout_is_said_one_way_in_every_face(capsys):
    # the engine header, the cardless line, the card search's table and the page say the
    # groups alike: "attention dp N"
    assert main(["deepseek-v3", "--engine", "sglang", "--ctx", "32k", "--seqs", "64",
                 "--gpus", "8", "--tp", "8", "--attn-dp", "8"]) == 0
    out = capsys.readouterr().out
    assert "smallest card that fits it as tp 8 × pp 1 (attention dp 8): 8 × " in out
    assert main(["deepseek-v3", "--engine", "sglang", "--ctx", "32k", "--seqs", "64",
                 "--find-gpu"]) == 0
    out = capsys.readouterr().out
    assert "8 (attention dp 4)" in out and "attn dp" not in out
    page = TestClient(create_app()).get("/", params={
        "model": "deepseek-v3", "engine": "sglang", "context": "32k", "sequences": "64",
        "kv_k": "bf16", "kv_v": "bf16", "weights": "auto"})
    assert "(attention dp 4)" in page.text and "attn dp" not in page.text


@pytest.mark.parametrize("groups", [2, 4])
def test_llama_4_splits_attention_and_embedding_over_the_group(groups):
    # llama4.py builds qkv_proj and o_proj on "attn_tp" and the input embedding on the
    # attention-TP group under DP attention; the experts, the shared expert, the lm_head and
    # (mllama4.py) the vision tower stay over all tp. bf16, 4 × H100
    model = "llama-4-scout-17b-16e-instruct"
    spec = load_model(model)
    attn = 2 * sum(m.params for m in spec.params.modules
                   if m.role == "" and ".self_attn." in m.names[0])
    assert attn == 48 * 2 * (5120 * 40 * 128 * 2 + 5120 * 8 * 128 * 2)
    embed = 2 * spec.vocab_size * spec.hidden_size
    _, tp = plan(model, gpu="4xh100", context="32k", sequences=8)
    _, dp = plan(model, attn_dp=groups, gpu="4xh100", context="32k", sequences=8)
    more = dp["engine_report"]["weights_bytes"] - tp["engine_report"]["weights_bytes"]
    cards = 4 // groups
    assert more == (attn // cards - attn // 4) + (embed // cards - embed // 4)
    assert f"--tp 4 --attn-dp-size {groups}" in dp["engine_report"]["command"]
    # its 8 KV heads over groups of 4 / groups cards, for a group's 8 / groups sequences
    from kvcore.query import card_cache
    q, _ = plan(model, attn_dp=groups, gpu="4xh100", context="32k", sequences=8)
    mine, seqs = card_cache(q, 0)
    assert seqs == 8 // groups and {g.n_kv_heads for g in mine.groups} == {8 // cards}


@pytest.mark.parametrize(("model", "gpu", "groups", "weights"), [
    ("laguna-s-2.1", "4xh100", 2, "auto"), ("laguna-s-2.1", "4xh100", 4, "auto"),
    ("mimo-v2-flash", "8xh100", 2, "bf16"), ("mimo-v2-flash", "8xh100", 8, "bf16")])
def test_laguna_and_mimo_v2_split_attention_and_embedding_over_the_group(model, gpu, groups,
                                                                         weights):
    # laguna.py: qkv_proj, o_proj and the attention gate g_proj on "attn_tp"; mimo_v2.py:
    # qkv_proj and o_proj; both build the embedding on the attention-TP group and keep the
    # dense MLP, the experts and the lm_head over all tp. In 16 bits
    spec = load_model(model)
    attn = 2 * sum(m.params for m in spec.params.modules
                   if m.role == "" and ".self_attn." in m.names[0])
    embed = 2 * spec.vocab_size * spec.hidden_size
    tp = int(gpu[0])
    _, whole = plan(model, gpu=gpu, context="32k", sequences=8, weights=weights)
    _, dp = plan(model, attn_dp=groups, gpu=gpu, context="32k", sequences=8, weights=weights)
    more = dp["engine_report"]["weights_bytes"] - whole["engine_report"]["weights_bytes"]
    cards = tp // groups
    assert more == (attn // cards - attn // tp) + (embed // cards - embed // tp)
    assert f"--attn-dp-size {groups}" in dp["engine_report"]["command"]


def test_deepseek_v4_modules_keep_the_down_projections_whole():
    # DeepSeek-V4-Flash, a ratio-4 layer: the heads' projections wq_b (1024 × 64·512), wo_a
    # (64·512/8 × 8·1024) and wo_b (8·1024 × 4096) and 64 sinks split over the attention group;
    # wq_a (4096 × 1024 + norm), wkv (4096 × 512 + norm), the compressor (2 × 4096 × 1024 +
    # 4 × 1024 + 512) and the indexer (1024 × 64·128 + 4096 × 64 + its compressor 2 × 4096 ×
    # 256 + 4 × 256 + 128) whole on every card
    spec = load_model("deepseek-v4-flash")
    layer = 2  # compress_ratios [0, 0, 4, 128, 4, 128, ...]
    mods = [m for m in spec.params.modules
            if m.names[0] == f"layers.{layer}.attn"
            or m.names[0].startswith(f"layers.{layer}.attn.")]
    split = [m for m in mods if m.role == ""]
    whole = [m for m in mods if m.role == "replicated"]
    assert [m.params for m in split] == [3 * 33_554_432 + 64]
    assert sorted(m.params for m in whole) == sorted(
        [4_195_328, 2_097_664, 8_393_216, 8_388_608 + 262_144 + 2_098_304])


def test_deepseek_v4_attention_groups():
    spec = load_model("deepseek-v4-flash")
    kw = {"spec": spec, "context": 131072,
          "gpus": (kvcore.find_gpu("h200"),) * 8}
    from kvcore.engines import EngineRequest
    from kvcore.parallel import Parallel

    tp = engine_plan("sglang", EngineRequest(sequences=64, parallel=Parallel(tp=8), **kw))
    dp = engine_plan("sglang", EngineRequest(sequences=64, parallel=Parallel(tp=8, attn_dp=8),
                                             **kw))
    # the heads' projections in fp8 with an e8m0 scale a 128 × 128 block, 43 layers of
    # 100,663,360 + 6,144 bytes, over 1 card instead of 8; the bf16 embedding (129,280 ×
    # 4,096 × 2 bytes) whole instead of an eighth
    attn = 43 * (100_663_360 + 6_144)
    embed = 129_280 * 4_096 * 2
    assert dp.weights_bytes - tp.weights_bytes == (attn - attn // 8) + (embed - embed // 8)
    assert "--attn-dp-size 8" in dp.command
    assert any("8 groups of 1 card" in n for n in dp.notes)
    # with the pools' bytes given, a group's pool for its 8 running requests is the pool
    # tensor parallelism alone sizes for 8: eight of them
    budget = 60 * GiB
    one = engine_plan("sglang", EngineRequest(sequences=8, parallel=Parallel(tp=8),
                                              kv_budget_bytes=budget, **kw))
    eight = engine_plan("sglang", EngineRequest(sequences=64, kv_budget_bytes=budget,
                                                parallel=Parallel(tp=8, attn_dp=8), **kw))
    assert eight.kv_tokens == 8 * one.kv_tokens
    assert eight.max_sequences == 8 * one.max_sequences
    assert eight.fits == one.fits


def test_minimax_m3_attention_groups():
    # MiniMax-M3 (bf16 text model, 60 layers): q and o 6,144 × 8,192, k and v 6,144 × 512 in
    # every layer, the index projection 6,144 × (4 × 128 + 128) in the 57 sparse ones, over 1
    # card instead of 8; the embedding (200,064 × 6,144) over the group too
    from pathlib import Path

    from kvcore import spec_from_config
    from kvcore.engines import EngineRequest
    from kvcore.parallel import Parallel

    vl = json.loads((Path(__file__).parent / "data" / "configs" / "minimax-m3-vl.json")
                    .read_text())
    config = dict(vl["text_config"], torch_dtype="bfloat16", model_type="minimax_m3",
                  architectures=["MiniMaxM3SparseForCausalLM"])
    spec = spec_from_config(config, name="MiniMaxAI/MiniMax-M3", source="test")
    kw = {"spec": spec, "context": 65536, "gpus": (kvcore.find_gpu("b200"),) * 8}
    tp = engine_plan("sglang", EngineRequest(sequences=16, parallel=Parallel(tp=8), **kw))
    dp = engine_plan("sglang", EngineRequest(sequences=16, parallel=Parallel(tp=8, attn_dp=8),
                                             **kw))
    attn = 2 * (60 * 2 * (6_144 * 8_192 + 6_144 * 512) + 57 * 6_144 * 640)
    embed = 2 * 200_064 * 6_144
    assert dp.weights_bytes - tp.weights_bytes == (attn - attn // 8) + (embed - embed // 8)
    assert dp.kv_tokens > tp.kv_tokens and "--attn-dp-size 8" in dp.command
