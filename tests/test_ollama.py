"""Ollama: the llama-server it starts (engines/ollama.py), planned by llama.cpp's rules."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.common import make_query
from kvcore import CacheOptions, InputError, find_gpu, load_model
from kvcore.engines import CPU_MOE, EngineRequest, EngineSettings, engine_plan, ollama
from kvcore.formats import get_format
from kvcore.parallel import Parallel
from kvcore.query import answer
from kvcore.weights import weights_for

GiB, MiB = 1 << 30, 1 << 20


def req(model="llama-3.1-8b", ctx=8192, seqs=1, gpu="4090", weights="q4_k_m", kv="f16",
        n=1, **settings):
    return EngineRequest(spec=load_model(model), context=ctx, sequences=seqs,
                         cache=CacheOptions(kv_k=get_format(kv), kv_v=get_format(kv)),
                         gpus=(find_gpu(gpu),) * n, parallel=Parallel(pp=n), weights=weights,
                         settings=EngineSettings(**settings))


def batch(r):
    return r.extra["ollama"]["num_batch"]


def compute(r):
    return dict(r.overheads)["compute buffers"]


def test_ollama_s_own_estimate_is_the_file_and_an_f16_cache_at_the_fewest_kv_heads():
    # Llama-3.1-8B: 32 blocks, 8 KV heads, a head of 4096 / 32 = 128
    q = req(ctx=32768)
    w = weights_for(q.spec, "q4_k_m").bytes
    assert ollama.estimate_bytes(q, 32768) == w + 2 * 32 * 8 * 128 * 32768 * 2
    # Nemotron-H's GGUF lists head_count_kv by layer, 0 for its Mamba layers: the fewest, 0,
    # is taken as 1; Qwen3.5's writes one count (4)
    for model, kv_heads in (("nemotron-3-nano-30b-a3b", 1), ("qwen3.5-9b", 4)):
        h = req(model, ctx=4096)
        spec = h.spec
        assert {g.n_kv_heads for g in spec.groups if g.kind.is_attention} != {1}
        assert ollama.estimate_bytes(h, 4096) - weights_for(spec, "q4_k_m").bytes == (
            2 * spec.decoder_layers * kv_heads * (spec.hidden_size // spec.num_attention_heads)
            * 4096 * 2)


def test_num_batch_rises_with_the_context_and_falls_as_the_estimate_nears_the_card():
    q = req()
    free = find_gpu("4090").usable_bytes
    assert [ollama.auto_batch(q, n) for n in (4096, 4097, 32768, 32769)] == [512, 1024, 1024,
                                                                             2048]
    # at 128k the estimate (≈ 20.6 GiB) passes 80% of the card's 24 GiB: back to 512
    assert ollama.estimate_bytes(q, 131072) > free * 80 // 100
    assert ollama.auto_batch(q, 131072) == 512
    # between: 2,048 while the estimate is at most 60% of the free memory and leaves 2 GiB
    # below 80%; 1,024 while at most 75% and 768 MiB below 80%
    steps = [(n, ollama.auto_batch(q, n)) for n in range(32769, 131073, 1024)]
    for n, b in steps:
        need = ollama.estimate_bytes(q, n)
        if b == 2048:
            assert need <= free * 60 // 100 and need + 2 * GiB <= free * 80 // 100
        elif b == 1024:
            assert need <= free * 75 // 100 and need + 768 * MiB <= free * 80 // 100
            assert not (need <= free * 60 // 100 and need + 2 * GiB <= free * 80 // 100)
    assert [b for _, b in steps] == sorted((b for _, b in steps), reverse=True)
    assert {b for _, b in steps} == {2048, 1024, 512}
    # on an 80 GB card 128k keeps 2,048
    assert ollama.auto_batch(req(gpu="h100"), 131072) == 2048


def test_flash_attention_off_on_a_small_cuda_card_takes_256_past_4096_tokens():
    small = req(gpu="4060", flash_attn=False)
    assert find_gpu("4060").usable_bytes <= 8 * GiB
    assert ollama.auto_batch(small, 4096) == 512 and ollama.auto_batch(small, 4097) == 256
    assert ollama.auto_batch(req(flash_attn=False), 131072) == 512


def test_the_plan_is_llama_cpp_s_at_ollama_s_flags():
    q = req(ctx=65536)
    r = engine_plan("ollama", q)
    assert batch(r) == 2048
    same = engine_plan("llama.cpp", replace(q, settings=EngineSettings(n_ubatch=2048)))
    assert r.log_lines == same.log_lines and r.kv_pool_bytes == same.kv_pool_bytes
    assert r.weights_bytes == same.weights_bytes and r.fits == same.fits
    # llama.cpp's compute buffers hold one ubatch: four times the 512-token estimate
    at512 = engine_plan("llama.cpp", replace(q, settings=EngineSettings()))
    assert compute(r) == 4 * compute(at512)
    assert r.extra["ollama"]["llama_server"] == (
        "llama-server -c 65536 -np 1 --flash-attn auto -b 2048 -ub 2048")
    assert r.command == "OLLAMA_CONTEXT_LENGTH=65536 ollama serve"


def test_parallel_requests_share_one_context_of_num_ctx_times_num_parallel():
    r = engine_plan("ollama", req(ctx=16384, seqs=4, kv="q8_0"))
    assert r.extra["n_ctx"] == 65536 and r.extra["streams"] == 4
    assert r.command == ("OLLAMA_CONTEXT_LENGTH=16384 OLLAMA_NUM_PARALLEL=4 "
                         "OLLAMA_KV_CACHE_TYPE=q8_0 ollama serve")
    assert "-c 65536 -np 4 --cache-type-k q8_0 --cache-type-v q8_0" in (
        r.extra["ollama"]["llama_server"])


@pytest.mark.parametrize("model,ctx,seqs,gpu", [
    ("llama-3.1-8b", 65536, 1, "4090"),
    ("llama-3.1-8b", 8192, 4, "4090"),
    ("qwen3-8b", 32768, 2, "4070"),
    ("gpt-oss-20b", 65536, 2, "4090"),
    ("gemma-3-27b-it", 16384, 1, "4090"),
])
def test_max_context_and_sequences_are_the_largest_that_fit_at_ollama_s_batch(model, ctx, seqs,
                                                                               gpu):
    def plan(c, s):
        return answer(make_query(load_model(model), context=c, sequences=s, weights="q4_k_m",
                                 gpu=gpu, engine="ollama"))

    out = plan(ctx, seqs)
    top, most = out["max_context"], out["max_sequences"]
    trained = load_model(model).max_position_embeddings
    assert top and plan(top, seqs)["fits"]
    if top < trained:
        assert not plan(top + 1, seqs)["fits"]
    assert most and plan(ctx, most)["fits"]
    if most < 256:
        assert not plan(ctx, most + 1)["fits"]


def test_max_context_and_sequences_are_at_the_batch_ollama_takes_there():
    # Llama-3.1-8B, 2 × 32k on a 24 GiB card: 2,048-token batches at 64k of -c; near the most
    # that fits Ollama's estimate nears the card and it takes 512-token batches, whose smaller
    # compute buffers leave room for more than 2,048-token ones would
    q = req(ctx=32768, seqs=2)
    r = engine_plan("ollama", q)
    at = {b: engine_plan("llama.cpp", replace(q, settings=EngineSettings(n_ubatch=b)))
          for b in (512, 1024, 2048)}
    assert batch(r) == 2048
    assert ollama.auto_batch(q, 2 * r.max_context) == 512
    assert r.max_context == at[512].max_context > at[2048].max_context
    # the runs of one batch over the contexts: 512, 1,024, 2,048, then down again
    assert [b for _, _, b in ollama.runs(q, 2, at[512].max_context)] == [512, 1024, 2048, 1024,
                                                                          512]
    # Qwen3-8B, 16k a sequence: 8 sequences (131,072 tokens of -c, 512-token batches) fit
    # where 1,024-token batches would fit 7
    q = req("qwen3-8b", ctx=16384, seqs=2)
    r = engine_plan("ollama", q)
    seven = engine_plan("llama.cpp", replace(q, settings=EngineSettings(n_ubatch=1024)))
    assert batch(r) == 1024 and seven.max_sequences == 7 and r.max_sequences == 8


@pytest.mark.parametrize("kw,field,said", [
    (dict(model="qwen3.5-9b", seqs=2), "sequences",
     "Ollama serves qwen3_5_text models one request at a time"),
    (dict(model="qwen3-8b", ctx=65536), "context",
     "Ollama lowers num_ctx to the model's trained context, 40,960 tokens"),
    (dict(model="gemma-3-27b-it", ctx=1024), "context",
     "Ollama gives a vision model at least 2,048 tokens of num_ctx"),
    (dict(model="llama-3.2-1b-instruct", n=2), "gpus",
     "Ollama would load this model on one card"),
])
def test_what_ollama_would_change_is_refused_in_one_line(kw, field, said):
    with pytest.raises(InputError) as e:
        engine_plan("ollama", req(**kw))
    assert e.value.field == field and said in str(e.value) and "\n" not in str(e.value)


def test_one_type_for_k_and_v_and_no_switch_for_the_projector():
    q = req()
    with pytest.raises(InputError, match="Ollama sets one type for K and V"):
        engine_plan("ollama", replace(q, cache=CacheOptions(kv_k=get_format("q8_0"),
                                                            kv_v=get_format("f16"))))
    g = req("gemma-3-27b-it")
    with pytest.raises(InputError, match="leave out no_mmproj"):
        engine_plan("ollama", replace(g, cache=replace(g.cache, encoder=False)))
    # a setting llama-server has and Ollama passes no way


def test_settings_through_the_environment_and_the_modelfile():
    r = engine_plan("ollama", req("gpt-oss-120b", ctx=32768, weights=None, n_cpu_moe=24,
                                  fit_margin_bytes=512 * MiB, cache_ram_mib=0, n_ubatch=1024,
                                  flash_attn=True, n_gpu_layers=99))
    assert r.command == ("OLLAMA_CONTEXT_LENGTH=32768 OLLAMA_FLASH_ATTENTION=1 "
                         "LLAMA_ARG_FIT_TARGET=512 LLAMA_ARG_N_CPU_MOE=24 LLAMA_ARG_CACHE_RAM=0 "
                         "ollama serve")
    assert batch(r) == 1024
    assert r.extra["ollama"]["llama_server"].endswith("--flash-attn on -b 1024 -ub 1024 -ngl 99")
    assert any("set num_batch 1024 and num_gpu 99 in the Modelfile" in n for n in r.notes)
    # the blocks LLAMA_ARG_N_CPU_MOE keeps in host memory are llama.cpp's placement
    assert r.extra["placement"]["host_held"]
    every = engine_plan("ollama", req("qwen3-30b-a3b", weights="q8_0", n_cpu_moe=CPU_MOE))
    assert every.command == "OLLAMA_CONTEXT_LENGTH=8192 LLAMA_ARG_CPU_MOE=1 ollama serve"
    # --swa-full, --kv-unified and -ts, which Ollama does not pass, through their variables:
    # the plan is llama.cpp's with them
    g = req("gemma-3-27b-it", ctx=32768, gpu="3090", n=2, swa_full=True, kv_unified=True,
            tensor_split=(3.0, 1.0))
    r = engine_plan("ollama", g)
    assert r.command == ("OLLAMA_CONTEXT_LENGTH=32768 LLAMA_ARG_SWA_FULL=1 "
                         "LLAMA_ARG_KV_UNIFIED=1 LLAMA_ARG_TENSOR_SPLIT=3,1 ollama serve")
    same = engine_plan("llama.cpp", replace(g, settings=replace(g.settings,
                                                                n_ubatch=batch(r))))
    assert r.log_lines == same.log_lines and r.kv_pool_bytes == same.kv_pool_bytes
    with pytest.raises(InputError, match="override_tensor is a setting of llama.cpp, not of "
                                         "Ollama"):
        make_query(load_model("qwen3-30b-a3b"), engine="ollama",
                   settings=EngineSettings(override_tensor=("exps=CPU",)))


def test_the_default_context_by_the_cards_memory():
    assert [ollama.default_context(find_gpu(g).total_bytes) for g in ("4060", "4090", "h100")] \
        == [4096, 32768, 262144]
    r = engine_plan("ollama", req(ctx=8192))
    assert ("32,768 tokens is Ollama's num_ctx with 24.0 GiB of cards where "
            "OLLAMA_CONTEXT_LENGTH and the request's num_ctx are not set; "
            "OLLAMA_CONTEXT_LENGTH=8192 sets this plan's") in r.notes
    # left out, the context is Ollama's own for the cards, no more than the trained context
    from app.cli import _plan_parser, build_query

    def planned(*argv):
        return build_query(_plan_parser().parse_args(["qwen3-8b", "--engine", *argv])).context

    assert planned("ollama", "--gpu", "4090") == 32768
    assert planned("ollama", "--gpu", "2x4060") == 4096
    assert planned("ollama", "--gpus", "4060,4070") == 4096
    assert planned("ollama", "--gpu", "2x4070") == 32768
    assert planned("ollama", "--gpu", "h100") == 40960
    # a Mac counts what Metal lets the GPU wire (ggml's total there): 36 GiB of a 48 GB M4 Pro
    # is below 47 GiB, 48 of a 64 GB M4 Max is not
    assert planned("ollama", "--gpu", "m4-pro-48gb") == 32768
    assert planned("ollama", "--gpu", "m4-max-64gb") == 40960
    assert planned("ollama") == planned("vllm", "--gpu", "h100") == 8192
    from fastapi.testclient import TestClient

    from app.web import create_app

    api = TestClient(create_app()).get("/api/v1/plan", params={"model": "llama-3.1-8b",
                                                              "engine": "ollama", "gpu": "h100"})
    assert api.json()["context"] == 131072


def test_the_api_and_the_cli_plan_ollama(capsys):
    from fastapi.testclient import TestClient

    from app.cli import main
    from app.web import create_app

    r = TestClient(create_app()).get("/api/v1/plan", params={
        "model": "qwen3-8b", "engine": "ollama", "gpu": "4090", "context": "32k",
        "weights": "q4_k_m", "kv": "q8_0"})
    assert r.status_code == 200
    data = r.json()
    assert data["engine"] == "ollama"
    assert data["engine_report"]["extra"]["ollama"]["num_batch"] == 1024
    assert data["engine_report"]["command"] == ("OLLAMA_CONTEXT_LENGTH=32768 "
                                                "OLLAMA_KV_CACHE_TYPE=q8_0 ollama serve")
    bad = TestClient(create_app()).get("/api/v1/plan", params={
        "model": "qwen3-8b", "engine": "ollama", "gpu": "4090", "context": "64k"})
    assert bad.status_code == 422 and bad.json()["field"] == "context"
    assert main(["qwen3-8b", "--engine", "ollama", "--gpu", "4090", "--ctx", "32k",
                 "--weights", "q4_k_m"]) == 0
    out = capsys.readouterr().out
    assert "command: OLLAMA_CONTEXT_LENGTH=32768 ollama serve" in out
    assert "Ollama starts llama-server -c 32768 -np 1 --flash-attn auto -b 1024 -ub 1024" in out


def test_ollama_s_environment_is_read_as_its_fields():
    from kvcore.command import read_command

    launch = read_command("OLLAMA_CONTEXT_LENGTH=16384 OLLAMA_NUM_PARALLEL=3 "
                          "OLLAMA_KV_CACHE_TYPE=Q8_0 OLLAMA_FLASH_ATTENTION=false "
                          "OLLAMA_KEEP_ALIVE=24h LLAMA_ARG_N_CPU_MOE=8 LLAMA_ARG_FIT_TARGET=512 "
                          "LLAMA_ARG_CTX_SIZE=2048 LLAMA_ARG_SWA_FULL=on "
                          "LLAMA_ARG_TENSOR_SPLIT=1,1 ollama run hf.co/Qwen/Qwen3-8B-GGUF:Q4_K_M "
                          "--verbose --keepalive 5m why is the sky blue")
    assert launch.engine == "ollama" and launch.model == "Qwen/Qwen3-8B-GGUF:Q4_K_M"
    assert launch.settings == {"context": 16384, "sequences": 3, "kv": "q8_0",
                               "no_flash_attn": True, "n_cpu_moe": 8, "fit_target": 512,
                               "swa_full": True, "tensor_split": "1,1", "gpus": 2}
    assert launch.unread == ["OLLAMA_KEEP_ALIVE=24h", "LLAMA_ARG_CTX_SIZE=2048", "--verbose",
                             "--keepalive 5m", "the prompt"]
    assert not launch.auto_ctx
    # docker's -e NAME=VALUE before the image, whose command is serve
    docker = read_command("docker run -d --gpus=all -e OLLAMA_NUM_PARALLEL=2 -v ollama:/root/"
                          ".ollama -p 11434:11434 ollama/ollama:0.13.0")
    assert docker.engine == "ollama" and docker.settings == {"sequences": 2}
    assert docker.auto_ctx and docker.model is None
    # a container named ollama (Ollama's own docker lines) is not the program
    named = read_command("docker run -d --gpus=all -v ollama:/root/.ollama -p 11434:11434 "
                         "--name ollama ollama/ollama")
    assert named.engine == "ollama" and not named.unknown and named.model is None
    inside = read_command("docker exec -it ollama ollama run qwen3-8b")
    assert inside.model == "qwen3-8b" and not inside.unread


def test_a_command_without_a_context_plans_ollama_s_by_the_cards(capsys):
    from app.cli import main

    assert main(["qwen3-8b", "--weights", "q4_k_m", "--gpu", "4060", "--command",
                 "OLLAMA_NUM_PARALLEL=2 ollama serve", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["context"] == 4096 and out["sequences"] == 2
    assert out["engine_report"]["extra"]["n_ctx"] == 8192
    # a context given beside the command wins over Ollama's default
    assert main(["qwen3-8b", "--weights", "q4_k_m", "--gpu", "4060", "--ctx", "8k",
                 "--command", "ollama serve", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["context"] == 8192
    # OLLAMA_GPU_OVERHEAD comes off each card before the default is chosen: 24 GiB less 2 GiB
    # is below 23 GiB
    assert main(["qwen3-8b", "--weights", "q4_k_m", "--gpu", "3090", "--command",
                 "OLLAMA_GPU_OVERHEAD=2147483648 ollama serve", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["context"] == 4096
    # the default stops at the trained context: Qwen3-8B's 40,960 on an 80 GB card
    assert main(["qwen3-8b", "--weights", "q4_k_m", "--gpu", "h100", "--command",
                 "ollama serve"]) == 0
    text = capsys.readouterr().out
    assert ("OLLAMA_CONTEXT_LENGTH not set: Ollama takes num_ctx 40,960 with 79.6 GiB of cards "
            "(the model's trained context); planned at that") in text


def test_what_ollama_changes_is_planned_as_it_changes_it_with_a_note():
    from fastapi.testclient import TestClient

    from app.web import create_app

    c = TestClient(create_app())
    r = c.post("/api/v1/command", json={
        "command": "OLLAMA_CONTEXT_LENGTH=131072 OLLAMA_NUM_PARALLEL=4 ollama run qwen3.5-9b",
        "gpu": "4090", "weights": "q4_k_m"})
    assert r.status_code == 200
    data = r.json()
    assert data["context"] == 131072 and data["sequences"] == 1
    assert ("OLLAMA_NUM_PARALLEL=4: Ollama serves qwen3_5_text models one request at a time"
            in data["command"]["notes"])
    r = c.post("/api/v1/command", json={"command": "OLLAMA_CONTEXT_LENGTH=100000 ollama run "
                                                   "qwen3-8b", "gpu": "4090"})
    assert r.json()["context"] == 40960
    assert any("lowers num_ctx to the model's trained context, 40,960" in n
               for n in r.json()["command"]["notes"])
    # a library name the catalog spells, whose tag names no quantization: --weights gives it
    bad = c.post("/api/v1/command", json={"command": "ollama run qwen3:8b", "gpu": "4090"})
    assert bad.status_code == 422 and bad.json()["field"] == "weights" and bad.json()["error"] == (
        "'ollama run qwen3:8b': the quantization Ollama's 'qwen3:8b' holds is not one its name "
        "gives: give --weights (`ollama show qwen3:8b` prints it; most of Ollama's tags hold "
        "Q4_K_M) or a tag that names it (qwen3:8b-q4_K_M)")
    given = c.post("/api/v1/command", json={"command": "ollama run qwen3:8b", "gpu": "4090",
                                            "weights": "q4_k_m"})
    tagged = c.post("/api/v1/command", json={"command": "ollama run qwen3:8b-q4_K_M",
                                             "gpu": "4090"})
    assert given.status_code == tagged.status_code == 200
    assert given.json()["weights"] == tagged.json()["weights"]
    assert given.json()["weights"]["format"] == "q4_k_m"
    assert tagged.json()["command"]["read_as"].startswith("kvplan qwen3:8b-q4_K_M --engine ollama")
    # the plan page reads the name alike and says how
    page = c.get("/", params={"model": "qwen3:8b-q4_K_M", "gpu": "4090", "engine": "ollama"})
    assert page.status_code == 200 and "q4_k_m, config, llama-quantize" in page.text
    assert "as Ollama spells it, is read as the catalog&#39;s qwen3-8b in Q4_K_M" in page.text
    # a checkpoint stored quantized is planned as stored, without --weights
    stored = c.post("/api/v1/command", json={"command": "ollama run gpt-oss:20b", "gpu": "4090"})
    assert stored.status_code == 200 and stored.json()["weights"]["format"] == "mxfp4_moe"
    # the same name as the plan's model
    planned = c.post("/api/v1/plan", json={"model": "qwen3:8b-q4_K_M", "gpu": "4090",
                                          "engine": "ollama"})
    assert planned.status_code == 200
    assert planned.json()["weights"] == tagged.json()["weights"]
    bad = c.post("/api/v1/command", json={"command": "ollama run qwen3:8b-q9_9", "gpu": "4090"})
    assert bad.status_code == 422 and "(qwen3:8b-q4_K_M)" in bad.json()["error"]
    # the catalog models the library name most likely means are named
    for name, likely in (("gemma3:27b-it-qat", "(the catalog has 'gemma-3-27b-it'), and --weights"),
                         ("deepseek-r1:7b", "the catalog has 'deepseek-r1-distill-qwen-7b')"),
                         ("foo:1b", "a catalog id or Hub repo id, and --weights")):
        bad = c.post("/api/v1/command", json={"command": f"ollama run {name}", "gpu": "4090"})
        assert bad.status_code == 422 and likely in bad.json()["error"], name


def test_the_command_page_fills_the_form_with_the_context_ollama_takes():
    import re

    from fastapi.testclient import TestClient

    from app.web import create_app

    c = TestClient(create_app())
    page = c.get("/", params={"gpu": "4060", "command": "OLLAMA_NUM_PARALLEL=2 ollama run "
                                                        "hf.co/Qwen/Qwen3-8B-GGUF:Q4_K_M"})
    assert page.status_code == 200
    sent = dict(re.findall(r'name="(\w+)"[^>]*value="([^"]*)"', page.text))
    assert sent["context"] == "4096" and sent["sequences"] == "2"
    assert "Ollama starts llama-server -c 8192 -np 2" in page.text


def test_the_projector_stays_in_host_memory_where_ollama_keeps_it_there():
    # num_gpu below the layers (and the output layer): --no-mmproj-offload, so the card holds
    # the text layers only, as llama.cpp's plan without the projector
    q = req("gemma-3-27b-it", ctx=8192, n_gpu_layers=40)
    r = engine_plan("ollama", q)
    text_only = engine_plan("llama.cpp", replace(
        q, cache=replace(q.cache, encoder=False),
        settings=EngineSettings(n_gpu_layers=40, n_ubatch=batch(r))))
    on_card = engine_plan("llama.cpp", replace(q, settings=EngineSettings(n_gpu_layers=40,
                                                                          n_ubatch=batch(r))))
    assert r.weights_bytes == text_only.weights_bytes < on_card.weights_bytes
    assert any("keeps the projector in host memory (--no-mmproj-offload): num_gpu 40" in n
               for n in r.notes)
    # every layer on the card: the projector with them
    whole = engine_plan("ollama", replace(q, settings=EngineSettings()))
    assert not any("--no-mmproj-offload" in n for n in whole.notes)
    # a card with less free memory than the projector and 1 GiB
    small = engine_plan("ollama", req("gemma-3-27b-it", ctx=8192, gpu="1.5GiB"))
    assert any("a card has less free memory than the projector and 1 GiB" in n
               for n in small.notes)


def test_an_mtp_draft_is_ollama_s_draft_num_predict():
    q = req("glm-4.5", ctx=8192, gpu="h200", n=8, weights="q4_k_m")
    r = engine_plan("ollama", replace(q, cache=replace(q.cache, mtp=True)))
    assert "--spec-type draft-mtp --spec-draft-n-max 4 --spec-draft-backend-sampling" in (
        r.extra["ollama"]["llama_server"])
    assert any("draft_num_predict 4 in the Modelfile" in n for n in r.notes)
    # the MTP layer's cache is llama.cpp's
    same = engine_plan("llama.cpp", replace(q, cache=replace(q.cache, mtp=True),
                                            settings=EngineSettings(n_ubatch=batch(r))))
    assert r.log_lines == same.log_lines
    plain = engine_plan("ollama", q)
    assert "--spec-type" not in plain.extra["ollama"]["llama_server"]


@pytest.mark.parametrize(("model", "gpu", "per", "flash"), [
    ("llama-3.1-8b", "4090", 1, None), ("llama-3.1-8b", "4090", 3, None),
    ("qwen3-32b", "4090", 2, None), ("gpt-oss-20b", "4060", 1, False),
    ("qwen3-8b", "h100", 4, None), ("gemma-3-27b-it", "3090", 1, None),
])
def test_the_batch_runs_cover_every_context_with_one_batch_each(model, gpu, per, flash):
    q = req(model, gpu=gpu, flash_attn=flash)
    top = 70000
    runs = ollama.runs(q, per, top)
    # contiguous from 1 to top, each run one batch (checked at its ends and through it)
    assert runs[0][0] == 1 and runs[-1][1] == top
    assert all(a[1] + 1 == b[0] for a, b in zip(runs[:-1], runs[1:], strict=True))
    for first, last, b in runs:
        assert first <= last
        step = max(1, (last - first) // 50)
        assert {ollama.auto_batch(q, x * per) for x in range(first, last + 1, step)} | {
            ollama.auto_batch(q, last * per)} == {b}


def test_find_gpu_without_a_context_tries_each_card_at_ollama_s_num_ctx(capsys):
    from app.cli import main
    from kvcore.query import find_gpu_for

    q = make_query(load_model("qwen3-8b"), context=None, weights="q4_k_m", engine="ollama")
    assert q.auto_context and q.context == 8192
    rows = {r["gpu"]: r for r in find_gpu_for(q, limit=1000)}
    assert rows["rtx-4060"]["context"] == 4096
    assert rows["rtx-4090"]["context"] == 32768
    assert rows["h100-sxm"]["context"] == 40960       # the trained context
    # each row's speed is the plan at that context on that card
    at = answer(make_query(load_model("qwen3-8b"), context=4096, weights="q4_k_m",
                           engine="ollama", gpu="4060"))
    assert rows["rtx-4060"]["tokens_per_s_per_sequence"] == at["decode"][
        "tokens_per_s_per_sequence"]
    # a context asked is every card's
    fixed = make_query(load_model("qwen3-8b"), context="8k", weights="q4_k_m", engine="ollama")
    assert not fixed.auto_context
    assert {r["context"] for r in find_gpu_for(fixed, limit=1000)} == {8192}
    assert main(["qwen3-8b", "--engine", "ollama", "--weights", "q4_k_m", "--find-gpu"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[4:6] == ["num_ctx", "max"]
    assert "(Ollama's num_ctx there) × 1 sequence under ollama" in out
    # without a card a plan is sized at 8k, and the smallest card named for it fits that
    assert main(["qwen3-8b", "--engine", "ollama", "--weights", "q4_k_m"]) == 0
    out = capsys.readouterr().out
    assert "needs 6.7 GiB for 8,192 tokens × 1 sequence" in out


def test_sched_spread_runs_the_model_over_every_card():
    # Llama-3.2-1B fits one 4090 with room to spare: Ollama puts it on one card unless
    # OLLAMA_SCHED_SPREAD is on, when llama-server gets both cards and splits the layers
    q = req("llama-3.2-1b-instruct", n=2)
    with pytest.raises(InputError, match="OLLAMA_SCHED_SPREAD=1"):
        engine_plan("ollama", q)
    r = engine_plan("ollama", replace(q, settings=EngineSettings(sched_spread=True)))
    assert r.fits and r.command.startswith("OLLAMA_CONTEXT_LENGTH=8192 OLLAMA_SCHED_SPREAD=1 ")
    one = engine_plan("ollama", replace(q, parallel=Parallel(), gpus=q.gpus[:1]))
    # half the layers a card: less weight on each card than on the one card alone
    assert r.weights_bytes < one.weights_bytes
    # on one card the switch changes nothing and is not passed
    solo = engine_plan("ollama", replace(q, parallel=Parallel(), gpus=q.gpus[:1],
                                         settings=EngineSettings(sched_spread=True)))
    assert "SCHED_SPREAD" not in solo.command and solo.max_context == one.max_context


def test_sched_spread_through_the_command_cli_and_api(capsys):
    from fastapi.testclient import TestClient

    from app.cli import main
    from app.web import create_app
    from kvcore.command import read_command

    on = read_command("OLLAMA_SCHED_SPREAD=true OLLAMA_CONTEXT_LENGTH=8192 ollama serve")
    assert on.settings.get("sched_spread") is True
    off = read_command("OLLAMA_SCHED_SPREAD=0 OLLAMA_CONTEXT_LENGTH=8192 ollama serve")
    assert "sched_spread" not in off.settings and not off.unread
    with pytest.raises(InputError):
        read_command("OLLAMA_SCHED_SPREAD=maybe ollama serve")
    assert main(["llama-3.2-1b-instruct", "--engine", "ollama", "--gpu", "4090", "--gpus", "2",
                 "--pp", "2", "--weights", "q4_k_m", "--ctx", "8k", "--sched-spread"]) == 0
    assert "OLLAMA_SCHED_SPREAD=1 ollama serve" in capsys.readouterr().out
    assert main(["llama-3.2-1b-instruct", "--engine", "vllm", "--gpu", "4090",
                 "--sched-spread"]) == 2
    assert "sched_spread is a setting of Ollama" in capsys.readouterr().err
    client = TestClient(create_app())
    got = client.post("/api/v1/plan", json={
        "model": "llama-3.2-1b-instruct", "engine": "ollama", "gpu": "4090", "gpus": 2,
        "pp": 2, "weights": "q4_k_m", "context": 8192, "sched_spread": True})
    assert got.status_code == 200, got.text
    assert "OLLAMA_SCHED_SPREAD=1" in got.json()["engine_report"]["command"]
