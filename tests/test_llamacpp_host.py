"""What llama-server keeps in host memory beside the model: its prompt cache (--cache-ram) and
its slots' context checkpoints (--ctx-checkpoints), sized as its logs print them."""

import json

import pytest
from fastapi.testclient import TestClient

import kvcore
from app.cli import main
from app.common import make_query
from app.web import create_app
from kvcore.command import read_command
from kvcore.engines import EngineSettings
from kvcore.query import answer

MiB = 2**20
GiB = 2**30


def host(model, **kw):
    settings = EngineSettings(**kw.pop("settings", {}))
    q = make_query(kvcore.load_model(model), engine="llama.cpp", gpu=kw.pop("gpu", "h200"),
                   settings=settings, **kw)
    data = answer(q)
    return data["engine_report"]["extra"]["server_host"], data


@pytest.mark.parametrize(("model", "logged"), [
    # "created context checkpoint … size = X MiB", as public llama-server logs print it for
    # models of these geometries: one sequence's recurrent state, whatever the context
    ("qwen3.5-9b", "50.251"),
    ("qwen3.5-35b-a3b", "62.813"),
    ("qwen3-next-80b-a3b-instruct", "75.376"),
    ("qwen3.5-27b", "149.626"),
])
def test_a_recurrent_checkpoint_is_one_sequence_s_state(model, logged):
    for ctx in (8192, 65536):
        h, _ = host(model, context=ctx)
        assert f"{h['checkpoint_bytes'] / MiB:.3f}" == logged
        assert h["checkpoint_holds"] == "the recurrent state"
        assert h["checkpoints_per_slot"] == 32


def test_a_window_checkpoint_holds_the_cells_the_sequence_keeps_in_the_window_cache():
    # Gemma 4 31B under -np 4 with one unified cache: its window cache holds 1,024 × 4 + 512
    # cells, all of which a long sequence keeps; a public log printed "created context
    # checkpoint 4 of 32 (pos_min = 13703, pos_max = 18310, n_tokens = 18311, size =
    # 3600.054 MiB)": 4,608 cells × (50 layers × 16 heads × 256 × 2 × 2 B + 12 B)
    h, _ = host("gemma-4-31b-it", context=65536, sequences=4, settings={"kv_unified": True})
    assert h["checkpoint_holds"] == "4,608 cells of the window layers"
    assert f"{h['checkpoint_bytes'] / MiB:.3f}" == "3600.054"
    assert h["checkpoints_bytes"] == 4 * 32 * h["checkpoint_bytes"]
    # one stream a sequence: the window and a micro-batch, padded to 256
    h, _ = host("gemma-3-27b-it", context=32768)
    assert h["checkpoint_holds"] == "1,536 cells of the window layers"
    per_cell = 52 * 16 * 128 * 2 * 2
    assert h["checkpoint_bytes"] == 16 + 1536 * (per_cell + 12) + 2 * 52 * 12
    # a context shorter than the window cache: its own tokens
    h, _ = host("gemma-3-27b-it", context=1024)
    assert h["checkpoint_holds"] == "1,024 cells of the window layers"
    # --swa-full keeps the window layers whole: no checkpoint is taken
    h, data = host("gemma-3-27b-it", context=32768, settings={"swa_full": True})
    assert h["checkpoints_bytes"] == 0 and h["checkpoint_holds"] == ""
    # a quantized cache's rows are its blocks
    h, _ = host("gemma-3-27b-it", context=32768, kv="q8_0")
    assert h["checkpoint_bytes"] == 16 + 1536 * (52 * 16 * 128 // 32 * 34 * 2 + 12) + 2 * 52 * 12


def test_the_public_gemma_4_log_s_command_plans_its_checkpoint(capsys):
    # kyuz0/amd-strix-halo-toolboxes issue 89 (build b9124): this command, "n_parallel is set
    # to auto, using n_parallel = 4 and kv_unified = true", then "created context checkpoint
    # 4 of 32 (pos_min = 13703, pos_max = 18310, n_tokens = 18311, size = 3600.054 MiB)"
    command = ("llama-server -m models/gemma-4-31B-it/gemma-4-31B-it-UD-Q8_K_XL.gguf "
               "-c 262144 -ngl 999 -fa 1 --no-mmap --temp 0.6 --top-p 0.95 --top-k 20 "
               "--min-p 0.0 --log-file llama-server.log")
    assert main(["--cmd", command, "--weights", "q8_0", "--gpu", "h200", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "--ctx 65536 --seqs 4 --kv-unified" in data["command"]["read_as"]
    h = data["engine_report"]["extra"]["server_host"]
    assert f"{h['checkpoint_bytes'] / MiB:.3f}" == "3600.054"
    assert 18310 - 13703 + 1 == 4608 == int(h["checkpoint_holds"].split()[0].replace(",", ""))


def test_full_attention_takes_no_checkpoint_and_the_prompt_cache_is_its_limit():
    h, data = host("qwen3-8b", context=32768, sequences=2)
    assert h["checkpoints_bytes"] == 0
    assert h["prompt_cache_bytes"] == 8192 * MiB and h["cache_ram_mib"] == 8192
    note = next(n for n in data["engine_report"]["notes"] if "beside the model" in n)
    assert "a prompt cache of up to 8 GiB (--cache-ram 8192; 0 turns it off)" in note
    assert "checkpoints" not in note
    # --cache-ram 0: none, and no note
    h, data = host("qwen3-8b", context=32768, settings={"cache_ram_mib": 0})
    assert h["total_bytes"] == 0
    assert not any("beside the model" in n for n in data["engine_report"]["notes"])
    assert "--cache-ram 0" in data["engine_report"]["command"]
    # --cache-ram -1: no byte limit, the total context of saved prompts bounds it
    h, _ = host("qwen3-8b", context=32768, settings={"cache_ram_mib": -1})
    assert h["prompt_cache_bytes"] == 32768 * 36 * 8 * 128 * 2 * 2


def test_ctx_checkpoints_sets_how_many_a_slot_keeps():
    h, data = host("qwen3.5-27b", context=32768, sequences=2, settings={"ctx_checkpoints": 4})
    assert h["checkpoints_per_slot"] == 4 and h["slots"] == 2
    assert h["checkpoints_bytes"] == 8 * h["checkpoint_bytes"]
    assert "--ctx-checkpoints 4" in data["engine_report"]["command"]
    note = next(n for n in data["engine_report"]["notes"] if "beside the model" in n)
    assert "up to 4 context checkpoints a slot of 149.63 MiB each (the recurrent state)" in note
    assert "1.17 GiB for 2 slots" in note
    h, _ = host("qwen3.5-27b", context=32768, settings={"ctx_checkpoints": 0})
    assert h["checkpoints_bytes"] == 0


def test_the_host_memory_given_holds_them_too():
    # Qwen3.5-27B under -ngl 24, most of its blocks in host memory: the prompt cache and 32
    # checkpoints of 149.6 MiB are host memory as much as the blocks are
    _, data = host("qwen3.5-27b", context=32768, gpu="4090", weights="q4_k_m",
                   settings={"n_gpu_layers": 24})
    placed = data["engine_report"]["extra"]["placement"]
    assert "host_bytes" not in placed
    own = placed["host_weights_bytes"] + placed["host_cache_bytes"]
    h = data["engine_report"]["extra"]["server_host"]
    _, data = host("qwen3.5-27b", context=32768, gpu="4090", weights="q4_k_m",
                   settings={"n_gpu_layers": 24, "host_memory_bytes": own + h["total_bytes"]})
    assert data["engine_report"]["extra"]["placement"]["host_bytes"] == own + h["total_bytes"]
    assert data["fits"] is True
    _, data = host("qwen3.5-27b", context=32768, gpu="4090", weights="q4_k_m",
                   settings={"n_gpu_layers": 24, "host_memory_bytes": own + h["total_bytes"] - 1})
    assert data["fits"] is False and data["binding"] == "host"
    note = next(n for n in data["engine_report"]["notes"] if n.startswith("host memory:"))
    assert "too little once the prompt cache and checkpoints fill" in note


def test_launch_commands_cli_and_api_take_them(capsys):
    launch = read_command("llama-server -m qwen3-8b-Q4_K_M.gguf -c 8192 -cram 2048 -ctxcp 8")
    assert launch.settings["cache_ram"] == 2048 and launch.settings["ctx_checkpoints"] == 8
    launch = read_command("LLAMA_ARG_CACHE_RAM=0 LLAMA_ARG_CTX_CHECKPOINTS=2 llama-server "
                          "-m qwen3-8b-Q4_K_M.gguf --swa-checkpoints 3")
    assert launch.settings["cache_ram"] == 0 and launch.settings["ctx_checkpoints"] == 3
    assert main(["qwen3.5-27b", "--gpu", "4090", "--engine", "llama.cpp", "--weights", "q4_k_m",
                 "--cache-ram", "1024", "--ctx-checkpoints", "2", "--json"]) == 0
    h = json.loads(capsys.readouterr().out)["engine_report"]["extra"]["server_host"]
    assert h["prompt_cache_bytes"] == GiB and h["checkpoints_per_slot"] == 2
    for bad in (["--cache-ram", "-2"], ["--ctx-checkpoints", "-1"]):
        assert main(["qwen3-8b", "--gpu", "4090", "--engine", "llama.cpp", *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and ("cache_ram" in err[0] or "ctx_checkpoints" in err[0])
    assert main(["qwen3-8b", "--gpu", "4090", "--engine", "vllm", "--cache-ram", "0"]) == 2
    assert "cache_ram is a setting of llama.cpp" in capsys.readouterr().err
    c = TestClient(create_app())
    body = {"model": "qwen3.5-27b", "gpu": "4090", "engine": "llama.cpp", "weights": "q4_k_m",
            "context": 16384, "cache_ram": 0, "ctx_checkpoints": 1}
    h = c.post("/api/v1/plan", json=body).json()["engine_report"]["extra"]["server_host"]
    assert h["prompt_cache_bytes"] == 0 and h["checkpoints_per_slot"] == 1
    r = c.post("/api/v1/plan", json={**body, "cache_ram": -5})
    assert r.status_code == 422 and "cache_ram" in r.text


def test_on_a_mac_the_note_says_they_share_the_unified_memory():
    # M4 Max 36 GB: the GPU may take 75% of it, 9 GiB left beside it
    h, data = host("qwen3-32b", gpu="m4 max 36gb", weights="q4_k_m", context=16384)
    note = next(n for n in data["engine_report"]["notes"]
                if n.startswith("llama-server keeps in host memory"))
    assert h["prompt_cache_bytes"] == 8 * GiB
    assert "the GPU may take 27 GiB, which leaves 9 GiB for macOS" in note
    assert "too little" not in note
    # an unbounded prompt cache over a long context outgrows what the GPU leaves
    h, data = host("qwen3-32b", gpu="m4 max 36gb", weights="q4_k_m", context=65536,
                   settings={"cache_ram_mib": -1})
    note = next(n for n in data["engine_report"]["notes"]
                if n.startswith("llama-server keeps in host memory"))
    assert h["prompt_cache_bytes"] > 9 * GiB and note.endswith("the system would swap")
    # a discrete card's host memory is its own: nothing to add
    _, data = host("qwen3-32b", gpu="4090", weights="q4_k_m", context=16384)
    assert not any("unified memory" in n for n in data["engine_report"]["notes"])
    # Strix Halo under Linux's default GTT limit: half for the GPU, half beside it
    _, data = host("qwen3-32b", gpu="strix halo", weights="q4_k_m", context=16384)
    note = next(n for n in data["engine_report"]["notes"]
                if n.startswith("llama-server keeps in host memory"))
    assert ("on AMD Ryzen AI Max+ 395 that is the same unified memory as the GPU's: of its "
            "128 GiB the GPU may take 64 GiB, which leaves 64 GiB for the system") in note
    # DGX Spark's budget is the whole memory: what the server keeps comes out of it too
    _, data = host("qwen3-32b", gpu="dgx spark", weights="q4_k_m", context=16384)
    note = next(n for n in data["engine_report"]["notes"]
                if n.startswith("llama-server keeps in host memory"))
    assert "the plan's budget is all 121.69 GiB of it, so these and the system take" in note


def test_llama_cpp_fit_target_is_the_margin_fit_leaves_on_each_card(capsys):
    # --fit-target 4096: 3,072 MiB more left free than the default 1,024 MiB, the KV budget
    # that much smaller; the command carries it and reads back to the same plan
    spec = kvcore.load_model("qwen3-8b")
    base = make_query(spec, context=32768, engine="llama.cpp", weights="q4_k_m", gpu="4090")
    wide = make_query(spec, context=32768, engine="llama.cpp", weights="q4_k_m", gpu="4090",
                      settings=EngineSettings(fit_margin_bytes=4096 * 2**20))
    a, b = answer(base)["engine_report"], answer(wide)["engine_report"]
    margin = dict((o["name"], o["bytes"]) for o in b["overheads"])["--fit margin"]
    assert margin == 4096 * 2**20
    assert a["budget_bytes"] - b["budget_bytes"] == 3072 * 2**20
    # f16 K and V of 36 layers × 8 heads × 128: 147,456 bytes a token; llama.cpp's cells a
    # multiple of 256
    per_token = 36 * 8 * 128 * 2 * 2
    assert b["max_context"] < a["max_context"]
    assert a["max_context"] - b["max_context"] <= 3072 * 2**20 // per_token + 256
    assert b["command"].endswith("--fit-target 4096") or " --fit-target 4096 " in b["command"]
    launch = read_command(b["command"])
    assert launch.settings["fit_target"] == 4096
    assert main(["qwen3-8b", "--engine", "llama.cpp", "--gpu", "4090", "--ctx", "32k",
                 "--weights", "q4_k_m", "--fit-target", "4096", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["engine_report"]["max_context"] == b["max_context"]


def test_fit_target_several_values_plan_the_largest_and_other_engines_refuse_it(capsys):
    launch = read_command("llama-server -m x.gguf -c 8192 -np 1 --fit-target 2048,3000")
    assert launch.settings["fit_target"] == 3000
    assert any("planned with the largest, 3,000 MiB" in n for n in launch.notes)
    assert main(["qwen3-8b", "--engine", "vllm", "--gpu", "4090", "--fit-target", "2048"]) == 2
    err = capsys.readouterr().err
    assert "fit_target is a setting of llama.cpp" in err and len(err.strip().splitlines()) == 1
    client = TestClient(create_app())
    r = client.post("/api/v1/plan", json={"model": "qwen3-8b", "gpu": "4090",
                                          "engine": "llama.cpp", "fit_target": -1})
    assert r.status_code == 422 and "fit_target" in r.text
    page = client.get("/", params={"model": "qwen3-8b", "gpu": "4090", "engine": "llama.cpp",
                                   "context": "32k", "weights": "q4_k_m", "kv_k": "f16",
                                   "kv_v": "f16", "fit_target": "4096"})
    assert page.status_code == 200 and "--fit-target 4096" in page.text
