"""SGLang's LoRA pool: --max-loras-per-batch slots at --max-lora-rank for the target modules,
in every layer, off the KV pool; launch commands' LoRA flags; what kvplan refuses to guess."""

import json

import pytest
from fastapi.testclient import TestClient

import kvcore
from app.api import to_query
from app.cli import main
from app.common import make_query
from app.schemas import PlanIn
from app.web import create_app
from kvcore.command import read_command, resolve
from kvcore.engines import EngineSettings
from kvcore.engines.lora import LoRA
from kvcore.engines.sglang_lora import for_sglang, sglang_lora_bytes
from kvcore.errors import InputError
from kvcore.parallel import Parallel
from kvcore.query import answer

# Qwen3-8B: hidden 4096, 32 query heads and 8 KV heads of 128, MLP 12288, 36 layers,
# vocab 151936
H, Q, KV, FF, L, VOCAB = 4096, 32 * 128, 8 * 128, 12288, 36, 151936


def pool(model, lora, tp=1):
    spec = kvcore.load_model(model)
    p = Parallel(tp=tp)
    return sglang_lora_bytes(spec, for_sglang(lora, spec, p), p)


def test_attention_slots_are_sglangs_buffer_shapes():
    # qkv_proj: A (4, 3 × 64, 4096), B (4, (4096 + 2 × 1024) / 2, 64); o_proj: A (4, 64,
    # 4096 / 2), B (4, 4096, 64); 36 layers, 2 bytes a value
    per_layer = 3 * H + (Q + 2 * KV) // 2 + Q // 2 + H
    got = pool("qwen3-8b", LoRA(4, 64, targets=("q_proj", "k_proj", "v_proj", "o_proj")), tp=2)
    assert got == L * per_layer * 64 * 4 * 2 == 396_361_728


def test_all_modules_add_the_mlp_the_embedding_and_the_lm_head():
    layers = L * (3 * H + Q + 2 * KV + Q + H + 2 * H + 2 * FF + FF + H)
    # one rank: the lm_head's B over the whole vocabulary
    assert pool("qwen3-8b", LoRA(rank=16, targets=("all",))) == \
        (layers + (VOCAB + H) + (H + VOCAB)) * 16 * 8 * 2
    # two ranks: the embedding whole, the lm_head's B over half the vocabulary padded to 64
    split = L * (3 * H + (Q + 2 * KV) // 2 + Q // 2 + H + 2 * H + 2 * FF // 2 + FF // 2 + H)
    shard = -(-VOCAB // 64) * 64 // 2
    assert pool("qwen3-8b", LoRA(rank=16, targets=("all",)), tp=2) == \
        (split + (VOCAB + H) + (H + shard)) * 16 * 8 * 2


def test_more_kv_heads_ranks_than_heads_keep_one_head_a_rank():
    # Llama-3.1-8B's 8 KV heads over 16 ranks: K and V each 128 wide on a rank
    got = pool("llama-3.1-8b", LoRA(1, 8, targets=("qkv_proj",)), tp=16)
    assert got == 32 * (3 * 4096 + 4096 // 16 + 2 * 128) * 8 * 1 * 2


def test_the_kv_pool_shrinks_by_the_lora_pool():
    spec = kvcore.load_model("qwen3-8b")

    def report(lora):
        q = make_query(spec, context="16k", engine="sglang", gpu="h100",
                       settings=EngineSettings(mem_fraction_static=0.85, lora=lora))
        return answer(q)["engine_report"]

    plain = report(None)
    adapted = report(LoRA(8, 64, targets=("all",)))
    slots = adapted["extra"]["lora"]["bytes_per_card"]
    assert slots == pool("qwen3-8b", LoRA(8, 64, targets=("all",)))
    assert plain["kv_pool_bytes"] - adapted["kv_pool_bytes"] == slots
    assert adapted["weights_bytes"] == plain["weights_bytes"]
    assert {"name": "LoRA pool (8 × rank 64)", "bytes": slots} in adapted["overheads"]
    assert ("--enable-lora --max-loras-per-batch 8 --max-lora-rank 64 --lora-target-modules all"
            in adapted["command"])


@pytest.mark.parametrize(("model", "lora", "tp", "field"), [
    ("qwen3-8b", LoRA(targets=("all",)), 1, "max_lora_rank"),  # SGLang reads the adapters'
    ("qwen3-8b", LoRA(rank=16), 1, "lora_target_modules"),
    ("qwen3-8b", LoRA(rank=16, targets=("out_proj",)), 1, "lora_target_modules"),
    ("qwen3-8b", LoRA(rank=16, targets=("all",), fully_sharded=True), 1, "fully_sharded_loras"),
    ("qwen3-30b-a3b", LoRA(rank=16, targets=("all",)), 1, "enable_lora"),  # routed experts
    ("qwen3-next-80b-a3b-instruct", LoRA(rank=16, targets=("o_proj",)), 1, "enable_lora"),
    ("deepseek-v2-lite-chat", LoRA(rank=16, targets=("o_proj",)), 1, "enable_lora"),
])
def test_what_kvplan_cannot_size_is_refused(model, lora, tp, field):
    spec = kvcore.load_model(model)
    with pytest.raises(InputError) as exc:
        for_sglang(lora, spec, Parallel(tp=tp))
    assert exc.value.field == field


def test_pipeline_stages_are_refused():
    spec = kvcore.load_model("qwen3-8b")
    with pytest.raises(InputError, match="pipeline"):
        for_sglang(LoRA(rank=16, targets=("all",)), spec, Parallel(pp=2))


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_launch_command_reads_the_lora_flags(capsys):
    code, out, _ = run(capsys, "--cmd", "python -m sglang.launch_server --model-path "
                       "Qwen/Qwen3-8B --context-length 32768 --tp 2 --enable-lora "
                       "--max-lora-rank 64 --lora-target-modules q_proj k_proj v_proj o_proj "
                       "--max-loras-per-batch 4 --lora-paths a=/srv/a b=/srv/b",
                       "--gpu", "4090", "--json")
    assert code == 0
    data = json.loads(out)
    lora = data["engine_report"]["extra"]["lora"]
    assert (lora["max_loras"], lora["max_lora_rank"], lora["bytes_per_card"]) == \
        (4, 64, 396_361_728)
    assert lora["lora_target_modules"] == ["qkv_proj", "o_proj"]
    assert any(n.startswith("--lora-paths: SGLang takes the pool's rank")
               for n in data["command"]["notes"])


def test_lora_paths_alone_turn_lora_on_and_ask_for_the_rank(capsys):
    code, _, err = run(capsys, "--cmd", "python -m sglang.launch_server --model-path "
                       "Qwen/Qwen3-8B --lora-paths a=/srv/a", "--gpu", "4090")
    assert code == 2 and "give --max-lora-rank" in err and len(err.strip().splitlines()) == 1


def test_lora_flags_without_lora_leave_it_off(capsys):
    code, out, _ = run(capsys, "--cmd", "python -m sglang.launch_server --model-path "
                       "Qwen/Qwen3-8B --max-lora-rank 64", "--gpu", "4090", "--json")
    data = json.loads(out)
    assert code == 0 and "lora" not in data["engine_report"]["extra"]
    assert any("LoRA is off without --enable-lora" in n for n in data["command"]["notes"])


def test_the_printed_command_reads_back_to_the_same_plan():
    spec = kvcore.load_model("qwen3-8b")
    q = make_query(spec, context="16k", sequences=4, engine="sglang", gpu="h100", tp=2,
                   settings=EngineSettings(lora=LoRA(4, 32, targets=("qkv_proj", "o_proj"))))
    before = answer(q)
    printed = before["engine_report"]["command"]
    spec2, fields = resolve(read_command(printed), "qwen3-8b")
    fields["gpu"] = "h100"
    again = answer(to_query(PlanIn.model_validate(fields), spec2))
    assert again["engine_report"]["command"] == printed
    assert again["engine_report"]["extra"]["lora"] == before["engine_report"]["extra"]["lora"]
    assert again["max_context"] == before["max_context"]


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def test_api_plans_the_pool_and_refuses_what_it_cannot_size(client):
    body = {"model": "qwen3-8b", "engine": "sglang", "gpu": "4090", "tp": 2, "context": "32k",
            "enable_lora": True, "max_loras": 4, "max_lora_rank": 64,
            "lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}
    r = client.post("/api/v1/plan", json=body)
    assert r.status_code == 200
    assert r.json()["engine_report"]["extra"]["lora"]["bytes_per_card"] == 396_361_728
    bad = client.post("/api/v1/plan", json={**body, "lora_target_modules": None})
    assert bad.status_code == 422 and bad.json()["field"] == "lora_target_modules"


def test_the_form_plans_sglangs_pool_and_asks_for_its_modules(client):
    form = {"model": "qwen3-8b", "gpu": "4090", "context": "32k", "engine": "sglang",
            "max_lora_rank": "64"}
    r = client.get("/", params={**form, "lora_target_modules": "all"})
    assert r.status_code == 200 and "LoRA pool (8 × rank 64)" in r.text
    missing = client.get("/", params=form)
    assert missing.status_code == 422
    shown = missing.text.split('id="err-lora_target_modules">', 1)[1].split("<", 1)[0]
    assert "give --lora-target-modules" in shown


def test_a_command_fills_the_forms_lora_fields_as_given(client):
    r = client.get("/", params={"command": "python -m sglang.launch_server --model-path "
                                "Qwen/Qwen3-8B --enable-lora --max-lora-rank 64 "
                                "--lora-target-modules q_proj o_proj", "gpu": "4090"})
    assert r.status_code == 200
    assert 'name="lora_target_modules" value="q_proj,o_proj"' in r.text
    # SGLang's own slot count, not a vLLM default written in
    assert 'name="max_loras" value=""' in r.text
