"""vLLM's LoRA slots: the adapter buffers --enable-lora allocates on every card, sized from the
model's linear layers, taken off the KV pool, and read from launch commands."""

import json

import pytest
from fastapi.testclient import TestClient

import kvcore
from app.cli import main
from app.common import make_query
from app.web import create_app
from kvcore.engines import EngineSettings
from kvcore.engines.lora import LoRA, lora_from
from kvcore.engines.vllm_lora import for_vllm, lora_bytes
from kvcore.errors import InputError
from kvcore.parallel import Parallel
from kvcore.query import answer
from kvcore.weights import weights_for

GiB = 1 << 30

# Llama-3.1-8B's config: hidden 4096, MLP 14336, 32 heads and 8 KV heads of 128, 32 layers,
# vocab 128256
H, FF, Q, KV, L, VOCAB = 4096, 14336, 32 * 128, 8 * 128, 32, 128256


def llama_values(tp: int) -> int:
    """Values of one slot of rank 1 on a rank, from vLLM's buffer shapes written out."""
    # A: one rank × hidden a slice; B: the rank's outputs, its K and V at least one head of
    # 128 each (8 KV heads over 16 ranks: each head on two)
    qkv = 3 * H + Q // tp + 2 * max(KV // tp, 128)
    o = Q // tp + H  # row-parallel: A over the rank's inputs, B over every output
    gate_up = 2 * H + 2 * FF // tp
    down = FF // tp + H
    embed = VOCAB + H  # A vocab × rank, B hidden × rank, whole on every rank
    head = H + VOCAB
    return L * (qkv + o + gate_up + down) + embed + head


@pytest.mark.parametrize("tp", [1, 2, 4, 16])
def test_llama_slots_are_the_buffers_vllm_allocates(tp):
    spec = kvcore.load_model("llama-3.1-8b")
    got = lora_bytes(spec, LoRA(4, 64), Parallel(tp=tp))
    assert got == [llama_values(tp) * 4 * 64 * 2]


def test_llama_4_slots_of_rank_64_take_1_38_gib():
    # the figure a user sees: 4 adapters of rank 64 on Llama-3.1-8B
    assert lora_bytes(kvcore.load_model("llama-3.1-8b"), LoRA(4, 64), Parallel()) \
        == [1_477_705_728]


def test_qwen3_moe_matches_vllm_model_loading_figures():
    """vLLM PR #28761 (fully sharded MoE LoRA) logged `vllm serve Qwen3-Coder-30B-A3B-Instruct
    -tp 4 --enable-lora --max-loras 16 --max-lora-rank 32 --fully-sharded-loras`: "Model
    loading took 53.9761 GiB" before the experts' slots were sharded too, 26.9761 GiB after."""
    spec = kvcore.load_model("qwen3-30b-a3b")
    p = Parallel(tp=4)
    weights = weights_for(spec, None).bytes / 4
    # the log predates vLLM PR #29816 (2025-12-01), which gave Qwen3's embedding and lm_head
    # slots (whole on every rank): left out to compare
    embed = 2 * (spec.vocab_size + spec.hidden_size) * 32 * 16 * 2
    after = lora_bytes(spec, LoRA(16, 32, True), p)[0] - embed
    assert abs((weights + after) / GiB - 26.9761) < 0.1
    # before: the experts' slots whole over tensor parallelism (the rest fully sharded)
    experts = lora_bytes(spec, LoRA(16, 32, False, ("experts",)), p)[0]
    experts_sharded = lora_bytes(spec, LoRA(16, 32, True, ("experts",)), p)[0]
    assert abs((experts - experts_sharded) / GiB - (53.9761 - 26.9761)) < 0.05


def test_pipeline_stages_split_the_slots_by_their_layers():
    spec = kvcore.load_model("llama-3.1-8b")
    one = lora_bytes(spec, LoRA(2, 16), Parallel())[0]
    stages = lora_bytes(spec, LoRA(2, 16), Parallel(pp=2))
    assert sum(stages) == one
    # the first stage holds the embedding's slots, the last the lm_head's: equal, and 16
    # layers each
    assert stages[0] == stages[1]


def test_target_modules_wrap_the_merged_module_whole():
    spec = kvcore.load_model("llama-3.1-8b")
    p = Parallel()
    qkv = lora_bytes(spec, LoRA(1, 16, targets=("qkv_proj",)), p)[0]
    assert qkv == L * (3 * H + Q + 2 * KV) * 16 * 2
    # naming one of q, k, v wraps vLLM's qkv_proj, all three slices
    assert lora_bytes(spec, LoRA(1, 16, targets=("k_proj",)), p)[0] == qkv
    o = lora_bytes(spec, LoRA(1, 16, targets=("o_proj",)), p)[0]
    both = lora_bytes(spec, LoRA(1, 16, targets=("o_proj", "qkv_proj")), p)[0]
    assert both == qkv + o


LINEAR = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


@pytest.mark.parametrize(("model", "pieces"), [
    # qwen3.py declares embed_tokens and lm_head in embedding_modules: two slots of
    # (vocab + hidden) × rank
    ("qwen3-8b", 2),
    # MistralForCausalLM sets embedding_modules to {}: the linear layers only
    ("mistral-7b-instruct-v0.3", 0),
    # OLMo 3 runs on the Transformers backend, whose embedding_modules is the input
    # embedding alone
    ("olmo-3.1-32b-instruct", 1),
])
def test_embedding_slots_follow_the_class_s_embedding_modules(model, pieces):
    spec = kvcore.load_model(model)
    every = lora_bytes(spec, LoRA(1, 16), Parallel())[0]
    layers = lora_bytes(spec, LoRA(1, 16, targets=LINEAR), Parallel())[0]
    assert every - layers == pieces * (spec.vocab_size + spec.hidden_size) * 16 * 2


def test_the_kv_pool_shrinks_by_the_slots():
    spec = kvcore.load_model("llama-3.1-8b")

    def report(lora):
        q = make_query(spec, context="32k", sequences=1, engine="vllm", gpu="4090",
                       settings=EngineSettings(lora=lora))
        return answer(q)["engine_report"]

    plain, adapted = report(None), report(LoRA(4, 64))
    slots = adapted["extra"]["lora"]["bytes_per_card"]
    assert slots == 1_477_705_728
    assert plain["kv_pool_bytes"] - adapted["kv_pool_bytes"] == slots
    assert {"name": "LoRA slots (4 × rank 64)", "bytes": slots} in adapted["overheads"]
    assert adapted["max_context"] < plain["max_context"]
    assert "--enable-lora --max-loras 4 --max-lora-rank 64" in adapted["command"]


def test_slots_that_leave_no_room_do_not_fit():
    # 16 slots of rank 512 on Llama-3.1-8B: 44 GiB of buffers beside 15 GiB of weights
    spec = kvcore.load_model("llama-3.1-8b")
    q = make_query(spec, context="8k", sequences=1, engine="vllm", gpu="4090",
                   settings=EngineSettings(lora=LoRA(16, 512)))
    out = answer(q)
    assert out["engine_report"]["fits"] is False


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"enable": True, "max_lora_rank": 24}, "max_lora_rank"),  # not one of vLLM's ranks
    ({"enable": True, "max_lora_rank": 0}, "max_lora_rank"),
    ({"enable": True, "max_loras": 0}, "max_loras"),
    ({"enable": False, "max_loras": 4}, "max_loras"),
    ({"enable": False, "targets": "o_proj"}, "lora_target_modules"),
    ({"enable": True, "targets": "o_proj,q/proj"}, "lora_target_modules"),
    ({"enable": True, "targets": "all"}, "lora_target_modules"),  # vLLM takes names
])
def test_bad_lora_settings_are_refused(kwargs, field):
    with pytest.raises(InputError) as exc:
        for_vllm(lora_from(**kwargs))
    assert exc.value.field == field


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_shows_the_slots_in_the_budget(capsys):
    code, out, _ = run(capsys, "llama-3.1-8b", "--engine", "vllm", "--gpu", "4090", "--ctx",
                       "32k", "--enable-lora", "--max-loras", "4", "--max-lora-rank", "64")
    assert code == 0
    assert "LoRA slots (4 × rank 64)                          1.38 GiB" in out
    assert "note: --enable-lora: 4 adapter slots of rank 64" in out


@pytest.mark.parametrize("args", [
    ("--enable-lora",),  # the raw engine has no adapters
    ("--engine", "llama.cpp", "--gpu", "4090", "--enable-lora"),
    ("--engine", "vllm", "--gpu", "4090", "--max-lora-rank", "64"),
    ("--engine", "vllm", "--gpu", "4090", "--enable-lora", "--max-lora-rank", "48"),
])
def test_cli_refuses_bad_lora_flags_in_one_line(capsys, args):
    code, out, err = run(capsys, "llama-3.1-8b", *args)
    assert code == 2
    assert out == "" and len(err.strip().splitlines()) == 1


def test_a_deepseek_v4_plan_refuses_lora(capsys):
    code, _, err = run(capsys, "deepseek-v4-flash", "--engine", "vllm", "--gpu", "8xh200",
                       "--enable-lora")
    assert code == 2 and "DeepSeek-V4" in err


def test_vllm_command_reads_the_lora_flags(capsys):
    code, out, _ = run(capsys, "--cmd", "vllm serve Qwen/Qwen3-30B-A3B -tp 4 --enable-lora "
                       "--max-loras 16 --max-lora-rank 32 --fully-sharded-loras "
                       "--lora-target-modules qkv_proj experts --lora-modules a=/a b=/b",
                       "--gpu", "h100", "--json")
    data = json.loads(out)
    assert code == 0
    lora = data["engine_report"]["extra"]["lora"]
    assert (lora["max_loras"], lora["max_lora_rank"], lora["fully_sharded_loras"]) == (16, 32, True)
    assert lora["lora_target_modules"] == ["qkv_proj", "experts"]
    assert lora["bytes_per_card"] == lora_bytes(
        kvcore.load_model("qwen3-30b-a3b"), LoRA(16, 32, True, ("qkv_proj", "experts")),
        Parallel(tp=4))[0]
    assert not any("lora" in u for u in data["command"]["unread"])


def test_lora_flags_without_enable_lora_leave_lora_off(capsys):
    code, out, _ = run(capsys, "--cmd", "vllm serve meta-llama/Llama-3.1-8B --max-loras 4 "
                       "--max-lora-rank 64", "--gpu", "4090", "--json")
    data = json.loads(out)
    assert code == 0
    assert "lora" not in data["engine_report"]["extra"]
    assert any("LoRA is off without --enable-lora" in n for n in data["command"]["notes"])


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def test_api_plans_lora_slots(client):
    body = {"model": "llama-3.1-8b", "engine": "vllm", "gpu": "4090", "context": "32k",
            "enable_lora": True, "max_loras": 4, "max_lora_rank": 64}
    r = client.post("/api/v1/plan", json=body)
    assert r.status_code == 200
    assert r.json()["engine_report"]["extra"]["lora"]["bytes_per_card"] == 1_477_705_728
    g = client.get("/api/v1/plan", params={**body, "lora_target_modules": "o_proj,qkv_proj"})
    assert g.status_code == 200
    assert g.json()["engine_report"]["extra"]["lora"]["lora_target_modules"] == [
        "o_proj", "qkv_proj"]


@pytest.mark.parametrize("extra", [{"enable_lora": True, "max_lora_rank": 20},
                                   {"max_loras": 2}, {"engine": "sglang", "enable_lora": True}])
def test_api_refuses_bad_lora_fields_as_json(client, extra):
    body = {"model": "llama-3.1-8b", "engine": "vllm", "gpu": "h100", "context": "8k", **extra}
    r = client.post("/api/v1/plan", json=body)
    assert r.status_code == 422
    assert "detail" in r.json() or "error" in r.json()


def lora_page(client, slots, rank):
    """The page of Llama-3.1-8B's vLLM command with LoRA on a 24 GB card."""
    r = client.get("/", params={"command": "vllm serve meta-llama/Llama-3.1-8B --max-model-len "
                                f"32768 --enable-lora --max-loras {slots} --max-lora-rank "
                                f"{rank}", "gpu": "4090"})
    assert r.status_code == 200
    return r.text


def test_the_page_of_a_lora_command_shows_the_slots(client):
    page = lora_page(client, 4, 64)
    assert "LoRA slots (4 × rank 64)" in page
    assert "--enable-lora --max-loras 4 --max-lora-rank 64" in page


def test_to_fit_names_the_most_slots_that_fit():
    from dataclasses import replace

    from kvcore.query import to_fit

    spec = kvcore.load_model("llama-3.1-8b")
    q = make_query(spec, context="32k", sequences=1, engine="vllm", gpu="4090",
                   settings=EngineSettings(lora=LoRA(16, 128)))
    data = answer(q)
    assert data["fits"] is False
    fix = to_fit(q, data)
    k = fix["max_loras"]
    assert 1 <= k < 16

    def with_slots(n):
        return answer(replace(q, settings=replace(q.settings, lora=LoRA(n, 128))))

    assert with_slots(k)["fits"] is True
    assert with_slots(k)["max_context"] == fix["max_context"]
    assert with_slots(k + 1)["fits"] is False


def test_cli_prints_the_slots_to_fit(capsys):
    code, out, _ = run(capsys, "llama-3.1-8b", "--engine", "vllm", "--gpu", "4090", "--ctx",
                       "32k", "--enable-lora", "--max-loras", "16", "--max-lora-rank", "256")
    assert code == 0
    assert "to fit: --max-loras 1 fits (max context 43,968" in out


def test_the_page_says_how_many_slots_fit(client):
    page = lora_page(client, 16, 256)
    line = page.split('id="to-fit">', 1)[1].split("</p>", 1)[0]
    assert "To fit: --max-loras 1 fits" in line
    # the command's LoRA settings are the form's, so the line links to the plan with one slot
    assert "max_loras=1&amp;max_lora_rank=256" in line


def test_fused_expert_checkpoints_share_one_a_for_w1_and_w3():
    # gpt-oss-20b (is_3d_moe_weight): 24 layers of 32 experts, hidden and expert width 2880.
    # FusedMoE3DWithLoRA an expert: w13 A rank × 2880 (one slice), B 5760 × rank; w2 A rank ×
    # 2880, B 2880 × rank
    spec = kvcore.load_model("gpt-oss-20b")
    got = lora_bytes(spec, LoRA(1, 16, targets=("experts",)), Parallel())[0]
    assert got == 24 * 32 * (2880 + 5760 + 2880 + 2880) * 16 * 2
    # a 2D checkpoint of the same shapes (Qwen3-30B-A3B: w1 and w3 apart) holds two As:
    # 48 layers of 128 experts, hidden 2048, expert width 768
    spec = kvcore.load_model("qwen3-30b-a3b")
    got = lora_bytes(spec, LoRA(1, 16, targets=("experts",)), Parallel())[0]
    assert got == 48 * 128 * (2 * (2048 + 768) + (768 + 2048)) * 16 * 2


def test_expert_parallel_lora_says_how_its_slots_are_planned(capsys):
    code, out, _ = run(capsys, "--cmd", "vllm serve Qwen/Qwen3-30B-A3B -tp 2 "
                       "--enable-expert-parallel --enable-lora", "--gpu", "h100")
    assert code == 0
    assert "--enable-expert-parallel with --enable-lora: the experts' LoRA slots" in out


def test_the_form_plans_lora_slots_and_links_the_slots_that_fit(client):
    form = {"model": "llama-3.1-8b", "gpu": "4090", "context": "32k", "engine": "vllm",
            "max_loras": "16", "max_lora_rank": "256"}
    r = client.get("/", params=form)
    assert r.status_code == 200
    assert "LoRA slots (16 × rank 256)" in r.text
    # the to-fit line links to the same plan with one slot, which fits
    assert ('href="/?model=llama-3.1-8b&amp;gpu=4090&amp;context=32k&amp;engine=vllm&amp;'
            'max_loras=1&amp;max_lora_rank=256">To fit: --max-loras 1 fits') in r.text
    again = client.get("/", params={**form, "max_loras": "1"})
    assert "LoRA slots (1 × rank 256)" in again.text and 'id="to-fit"' not in again.text
    # the API link asks the same question
    assert "max_loras=16&amp;max_lora_rank=256&amp;enable_lora=true" in r.text


def test_the_slots_that_fit_keep_the_plans_target_modules(client):
    form = {"model": "llama-3.1-8b", "gpu": "4090", "context": "32k", "engine": "vllm",
            "max_loras": "16", "max_lora_rank": "256", "lora_target_modules": "qkv_proj,o_proj"}
    r = client.get("/", params=form)
    assert r.status_code == 200
    line = r.text.split('id="to-fit">', 1)[1].split("</p>", 1)[0]
    assert "To fit: --max-loras" in line
    href = line.split('href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    assert "lora_target_modules=qkv_proj%2Co_proj" in href
    k = int(href.split("max_loras=", 1)[1].split("&", 1)[0])
    # the linked plan is the one the line names: the same targets, k slots, and it fits
    again = client.get(href)
    assert f"LoRA slots ({k} × rank 256)" in again.text and 'id="to-fit"' not in again.text
    wider = client.get("/", params={**form, "lora_target_modules": "", "max_loras": str(k)})
    assert wider.text.count("LoRA slots") and 'id="to-fit"' in wider.text


@pytest.mark.parametrize(("fields", "field", "text"), [
    ({"engine": "vllm", "max_lora_rank": "24"}, "max_lora_rank", "one of vLLM&#39;s ranks"),
    ({"engine": "vllm", "max_loras": "two"}, "max_loras", "whole number"),
    ({"engine": "raw", "max_loras": "2"}, "max_loras", "setting of vLLM"),
])
def test_the_form_shows_a_bad_lora_field_beside_it(client, fields, field, text):
    r = client.get("/", params={"model": "llama-3.1-8b", "gpu": "4090", **fields})
    assert r.status_code == 422
    shown = r.text.split(f'id="err-{field}">', 1)[1].split("<", 1)[0]
    assert text in shown


def test_a_lora_command_fills_the_form(client):
    page = lora_page(client, 4, 64)
    assert 'name="max_loras" value="4"' in page and 'name="max_lora_rank" value="64"' in page


def test_the_note_gives_what_each_adapter_reads_a_step(capsys):
    code, out, _ = run(capsys, "llama-3.1-8b", "--engine", "vllm", "--gpu", "4090", "--ctx",
                       "32k", "--enable-lora", "--max-loras", "4", "--max-lora-rank", "64")
    assert code == 0
    # one slot of four: 1,477,705,728 / 4 bytes, against 16,060,514,304 bytes of weights
    assert ("reads an adapter's slot for each sequence, up to the slots (each sequence its own "
            "adapter): 352.3 MiB (2.3% of the weights a card)") in out
    # one sequence: one slot read
    assert "LoRA is 2% (1 of 4 adapter slots, one a sequence)" in out


def test_one_slot_is_named_a_slot_not_llama_cpps_adapters(capsys):
    code, out, _ = run(capsys, "qwen3-8b", "--engine", "vllm", "--gpu", "h100", "--ctx", "8k",
                       "--seqs", "4", "--enable-lora")
    assert code == 0
    assert "(1 of 1 adapter slot, one a sequence)" in out and "--lora adapters" not in out


@pytest.mark.parametrize("sequences", [1, 3, 8])
def test_a_decode_step_reads_one_slot_a_sequence_up_to_the_slots(sequences):
    spec = kvcore.load_model("qwen3-8b")

    def decode(lora):
        q = make_query(spec, context="8k", sequences=sequences, engine="vllm", gpu="h100",
                       settings=EngineSettings(lora=lora))
        return answer(q)

    plain, adapted = decode(None)["decode"], decode(LoRA(4, 64))
    d = adapted["decode"]
    slots = adapted["engine_report"]["extra"]["lora"]["bytes_per_card"]
    used = min(sequences, 4)
    assert d["lora_adapters_read"] == used and d["lora_slots"] == 4
    assert d["lora_bytes_per_step"] == slots * used // 4
    assert d["bytes_per_step"] == plain["bytes_per_step"] + d["lora_bytes_per_step"]
    # bandwidth-bound: the step takes the extra bytes at the card's 3.35 TB/s
    assert d["seconds_per_step"] == pytest.approx(
        plain["seconds_per_step"] + d["lora_bytes_per_step"] / 3.35e12, rel=1e-9)


def test_a_moe_adapter_reads_its_routed_experts_share():
    spec = kvcore.load_model("qwen3-30b-a3b")
    q = make_query(spec, context="8k", sequences=2, engine="vllm", gpu="h100",
                   settings=EngineSettings(lora=LoRA(4, 32)))
    data = answer(q)
    lora, d = data["engine_report"]["extra"]["lora"], data["decode"]
    (held,), (experts,) = lora["bytes_per_stage"], lora["expert_bytes_per_stage"]
    assert 0 < experts < held
    share = d["expert_share"]
    assert 0 < share < 1
    assert d["lora_bytes_per_step"] == int((held - experts) * 2 // 4
                                           + experts * 2 // 4 * share)
