"""llama.cpp's LoRA adapters (--lora FILE): read from their GGUF, each tensor pair placed with
the tensor it adapts (the card's blocks, the host's), off the card's KV pool."""

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from ggufmake import F32, write_gguf

import kvcore
from app.cli import main
from app.web import create_app
from kvcore.engines.llamacpp_lora import adapter_blocks, read_adapter
from kvcore.errors import InputError

META = {"general.type": "adapter", "general.architecture": "llama", "adapter.type": "lora",
        "adapter.lora.alpha": F32(32.0)}
RANK, HIDDEN, KV, VOCAB, BLOCKS = 16, 4096, 1024, 128256, 32
#: one block's pairs (F16): attn_q (4096 → 4096) and attn_v (4096 → 1024) at rank 16
PER_BLOCK = 2 * (HIDDEN * RANK + RANK * HIDDEN + HIDDEN * RANK + RANK * KV)
#: the output layer's pair (4096 → 128256)
OUTPUT = 2 * (HIDDEN * RANK + RANK * VOCAB)


def adapter_tensors(blocks=BLOCKS, output=True, extra=()):
    t = []
    for i in range(blocks):
        t += [(f"blk.{i}.attn_q.weight.lora_a", (HIDDEN, RANK), 1),
              (f"blk.{i}.attn_q.weight.lora_b", (RANK, HIDDEN), 1),
              (f"blk.{i}.attn_v.weight.lora_a", (HIDDEN, RANK), 1),
              (f"blk.{i}.attn_v.weight.lora_b", (RANK, KV), 1)]
    if output:
        t += [("output.weight.lora_a", (HIDDEN, RANK), 1),
              ("output.weight.lora_b", (RANK, VOCAB), 1)]
    return t + list(extra)


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    path = tmp_path_factory.mktemp("lora") / "llama-lora.gguf"
    written = write_gguf(path, META, adapter_tensors())
    assert written == BLOCKS * PER_BLOCK + OUTPUT
    return path


def test_the_adapter_reads_as_its_tensor_pairs(adapter):
    a = read_adapter(adapter)
    assert a.total == BLOCKS * PER_BLOCK + OUTPUT
    blocks, out, inp = adapter_blocks((a,), BLOCKS)
    assert [b.total for b in blocks] == [PER_BLOCK] * BLOCKS
    assert (out, inp) == (OUTPUT, 0)
    # an adapter of a deeper model is refused
    with pytest.raises(InputError, match="adapts block 31"):
        adapter_blocks((a,), 28)


@pytest.mark.parametrize(("meta", "tensors", "text"), [
    ({**META, "general.type": "model"}, adapter_tensors(2), "is not a LoRA adapter"),
    (META, adapter_tensors(2, extra=[("blk.0.attn_q.weight", (HIDDEN, HIDDEN), 1)]),
     "neither a lora_a nor a lora_b"),
])
def test_files_that_are_not_lora_adapters_are_refused(tmp_path, meta, tensors, text):
    path = tmp_path / "x.gguf"
    write_gguf(path, meta, tensors)
    with pytest.raises(InputError, match=text) as exc:
        read_adapter(path)
    assert exc.value.field == "lora"


def test_norm_tensors_are_skipped_as_llama_cpp_skips_them(tmp_path):
    path = tmp_path / "n.gguf"
    write_gguf(path, META, adapter_tensors(2, False, [("blk.0.attn_norm.weight", (HIDDEN,), 0)]))
    assert read_adapter(path).total == 2 * PER_BLOCK


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def plan(capsys, *args):
    code, out, err = run(capsys, "llama-3.1-8b", "--engine", "llama.cpp", "--gpu", "4090",
                         "--ctx", "32k", "--json", *args)
    assert code == 0, err
    return json.loads(out)["engine_report"]


def test_the_card_holds_the_adapter_off_its_kv_pool(capsys, adapter):
    plain = plan(capsys)
    adapted = plan(capsys, "--lora", str(adapter))
    total = BLOCKS * PER_BLOCK + OUTPUT
    assert plain["kv_pool_bytes"] - adapted["kv_pool_bytes"] == total
    assert adapted["weights_bytes"] == plain["weights_bytes"]
    assert {"name": "LoRA adapters", "bytes": total} in adapted["overheads"]
    assert adapted["extra"]["lora_adapters"] == {"files": ["llama-lora.gguf"], "bytes": total,
                                                 "card_bytes": [total]}
    assert adapted["command"].endswith("--lora llama-lora.gguf")


def test_layers_in_host_memory_keep_their_pairs_there(capsys, adapter):
    # -ngl 17: the output layer and the last 16 blocks on the card
    got = plan(capsys, "--ngl", "17", "--lora", str(adapter))
    on_card = 16 * PER_BLOCK + OUTPUT
    assert got["extra"]["lora_adapters"]["card_bytes"] == [on_card]
    assert any("in host memory" in n and "--lora" in n for n in got["notes"])


def test_the_launch_command_reads_its_adapters(capsys, adapter):
    code, out, _ = run(capsys, "--cmd", f"llama-server -m Llama-3.1-8B-BF16.gguf -c 32768 "
                       f"--lora {adapter} --lora-scaled {adapter}:0.5", "--gpu", "4090",
                       "--json")
    assert code == 0
    data = json.loads(out)
    assert data["engine_report"]["extra"]["lora_adapters"]["bytes"] == \
        2 * (BLOCKS * PER_BLOCK + OUTPUT)
    assert not data["command"]["unread"]


def test_the_older_lora_scaled_form_takes_the_file_not_the_scale(capsys, adapter):
    code, out, _ = run(capsys, "--cmd", f"llama-server -m Llama-3.1-8B-BF16.gguf "
                       f"--lora-scaled {adapter} 0.5", "--gpu", "4090", "--json")
    assert code == 0
    assert json.loads(out)["engine_report"]["extra"]["lora_adapters"]["files"] == \
        ["llama-lora.gguf"]


@pytest.mark.parametrize("args", [
    ("--lora", "/nonexistent/a.gguf"),
    ("--engine", "vllm", "--lora", "{adapter}"),  # llama.cpp's flag
])
def test_bad_lora_files_are_refused_in_one_line(capsys, adapter, args):
    args = [a.replace("{adapter}", str(adapter)) for a in args]
    base = [] if "--engine" in args else ["--engine", "llama.cpp"]
    code, out, err = run(capsys, "llama-3.1-8b", "--gpu", "4090", *base, *args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_the_server_counts_no_local_adapter_and_says_so(adapter):
    client = TestClient(create_app())
    r = client.post("/api/v1/command", json={
        "command": f"llama-server -m Llama-3.1-8B-BF16.gguf -c 8192 --lora {adapter}",
        "gpu": "4090"})
    assert r.status_code == 200
    data = r.json()
    assert "lora_adapters" not in data["engine_report"]["extra"]
    assert any(n.startswith(f"--lora {adapter}: the adapter's tensors are not counted")
               for n in data["command"]["notes"])


def test_a_real_size_adapter_is_small_beside_the_model(adapter):
    # what the planner's numbers rest on: 17 MiB of pairs beside 15 GiB of weights
    spec = kvcore.load_model("llama-3.1-8b")
    assert read_adapter(Path(adapter)).total < spec.params.total * 2 / 500


def decode(capsys, *args):
    code, out, err = run(capsys, "llama-3.1-8b", "--engine", "llama.cpp", "--gpu", "4090",
                         "--ctx", "32k", "--json", *args)
    assert code == 0, err
    return json.loads(out)["decode"]


def test_every_adapter_on_the_card_is_read_each_decode_step(capsys, adapter):
    plain = decode(capsys, "--seqs", "4")
    adapted = decode(capsys, "--seqs", "4", "--lora", str(adapter))
    total = BLOCKS * PER_BLOCK + OUTPUT
    # llama.cpp applies the adapter to every token: the whole of it, whatever the sequences
    assert adapted["lora_bytes_per_step"] == total and adapted["lora_adapters_read"] == 1
    # llama.cpp has no adapter slots
    assert adapted["lora_slots"] is None
    assert adapted["bytes_per_step"] == plain["bytes_per_step"] + total
    assert adapted["seconds_per_step"] > plain["seconds_per_step"]


def test_a_placement_in_host_memory_keeps_its_host_time_beside_the_adapter_reads(capsys,
                                                                                   adapter):
    plain = decode(capsys, "--ngl", "17")
    adapted = decode(capsys, "--ngl", "17", "--lora", str(adapter))
    # the card's 16 blocks and output layer hold their pairs; the host's time is unchanged
    assert adapted["lora_bytes_per_step"] == 16 * PER_BLOCK + OUTPUT
    assert adapted["host_seconds_per_step"] == pytest.approx(plain["host_seconds_per_step"],
                                                             rel=1e-3)
    assert adapted["seconds_per_step"] > plain["seconds_per_step"]
    assert adapted["bound"] == plain["bound"] == "host"


def test_ollama_passes_the_modelfile_s_adapters_as_lora(adapter):
    # Ollama's ADAPTER lines reach llama-server as --lora: the same tensors on the card
    from kvcore import CacheOptions, find_gpu, load_model
    from kvcore.engines import EngineRequest, EngineSettings, engine_plan

    a = read_adapter(adapter)
    req = EngineRequest(spec=load_model("llama-3.1-8b"), context=8192, cache=CacheOptions(),
                        gpus=(find_gpu("4090"),), weights="q4_k_m",
                        settings=EngineSettings(lora_adapters=(a,)))
    r = engine_plan("ollama", req)
    same = engine_plan("llama.cpp", EngineRequest(
        spec=req.spec, context=8192, cache=CacheOptions(), gpus=req.gpus, weights="q4_k_m",
        settings=EngineSettings(lora_adapters=(a,), n_ubatch=r.extra["ollama"]["num_batch"])))
    assert r.extra["lora_adapters"] == same.extra["lora_adapters"]
    assert r.kv_pool_bytes == same.kv_pool_bytes
    assert f"--lora {a.name}" in r.extra["ollama"]["llama_server"]
    assert any(f"ADAPTER {a.name}" in n for n in r.notes)
