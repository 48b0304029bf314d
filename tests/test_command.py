"""A launch command read as a plan: each engine's flags as the engine reads them, the
commands kvplan itself prints read back to the same plan, and bad commands refused in one
line."""

import json

import pytest
from fastapi.testclient import TestClient

import kvcore
import kvcore.catalog
from app.api import to_query
from app.cli import main
from app.common import make_query
from app.schemas import PlanIn
from app.web import create_app
from kvcore.command import cli_line, gguf_file_model, human_int, read_command, resolve
from kvcore.engines import EngineSettings
from kvcore.engines.lora import LoRA
from kvcore.hub import HubUnavailable
from kvcore.query import answer


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- llama-server ---------------------------------------------------------------------------

def test_llama_server_context_is_all_slots_together():
    launch = read_command("llama-server -m qwen3-8b.gguf -c 32768 -np 4 -ctk q8_0 -ctv q4_0 "
                          "-fa on -ub 1024 --port 8080 --temp 0.7 --jinja")
    assert launch.engine == "llama.cpp"
    assert launch.settings == {"context": 8192, "sequences": 4, "kv_k": "q8_0", "kv_v": "q4_0",
                               "ubatch": 1024}
    # an explicit -np is four streams of their own, not one unified cache
    assert "kv_unified" not in launch.settings
    assert launch.unread == ["--port 8080", "--temp 0.7", "--jinja"]


def test_a_context_that_does_not_divide_pads_as_llama_cpp_pads_it():
    """-c 10241 -np 2: llama.cpp pads n_ctx to 10,496, each stream's 5,248 cells to 5,376,
    10,752 in all. A sequence of 5,121 tokens (the share rounded up) pads the same; 5,120
    would give 10,240."""
    launch = read_command("llama-server -m x.gguf -c 10241 -np 2")
    assert launch.settings["context"] == 5121
    spec = kvcore.load_model("qwen3-8b")
    for ctx, cells in ((5121, 10752), (5120, 10240)):
        query = make_query(spec, context=ctx, sequences=2, engine="llama.cpp",
                           weights="q4_k_m", gpu="4090")
        assert f" -c {cells} -np 2 " in answer(query)["engine_report"]["command"]


def test_llama_server_without_np_is_four_slots_sharing_one_unified_cache():
    launch = read_command("llama-server -m qwen3-8b.gguf -c 16384")
    assert launch.settings["sequences"] == 4
    assert launch.settings["kv_unified"] is True
    assert launch.settings["context"] == 4096
    # -np 1 given is one slot and no unified cache; -kvu turns it on again
    assert "kv_unified" not in read_command("llama-server -m x.gguf -np 1").settings
    assert read_command("llama-server -m x.gguf -np 2 -kvu").settings["kv_unified"] is True


def test_llama_server_without_c_takes_the_trained_context_a_stream():
    """With -c left out (or 0), --fit sets n_ctx to the trained context a stream: slots that
    share a unified cache share it, slots with caches of their own get it each; with --fit off,
    llama_context gives the trained context in all."""
    spec = kvcore.load_model("qwen3-30b-a3b")
    trained = spec.max_position_embeddings
    launch = read_command("llama-server -m Qwen3-30B-A3B-Q4_K_M.gguf -np 2")
    assert launch.fields(trained)["context"] == trained
    assert read_command("llama-server -m x.gguf -np 2 -kvu").fields(trained)["context"] == \
        trained // 2
    assert read_command("llama-server -m x.gguf").fields(trained)["context"] == trained // 4
    assert read_command("llama-server -m x.gguf -np 2 -fit off").fields(trained)["context"] == \
        trained // 2
    # --fit may shorten a context left unset, not one of -c 0
    assert launch.fit_streams == 2
    zero = read_command("llama-server -m Qwen3-30B-A3B-Q4_K_M.gguf -c 0 -np 1")
    assert zero.fields(40960)["context"] == 40960
    assert zero.fit_streams == 0
    with pytest.raises(kvcore.InputError, match="no max_position_embeddings"):
        zero.fields(None)


@pytest.mark.parametrize(("flags", "settings"), [
    ("-ngl 20", {"ngl": 20}), ("-ngl all", {"ngl": 999}), ("-ngl -2", {"ngl": 999}),
    ("-ngl auto", {}), ("-ngl -1", {}),
    ("-fa off", {"no_flash_attn": True}), ("-fa", {}), ("--flash-attn auto", {}),
    ("--swa-full", {"swa_full": True}), ("-cmoe", {"cpu_moe": True}),
    ("--n-cpu-moe 12", {"n_cpu_moe": 12}), ("-ts 3,1", {"tensor_split": "3,1", "gpus": 2}),
    ("-dev CUDA0,CUDA1,CUDA2 -ts 2,1,1", {"tensor_split": "2,1,1", "gpus": 3}),
    ("-ot .ffn_.*_exps.=CPU", {"override_tensor": [".ffn_.*_exps.=CPU"]}),
    ("-ot a=CPU,b=CPU -ot c=CPU", {"override_tensor": ["a=CPU", "b=CPU", "c=CPU"]}),
    ("-dev CUDA0,CUDA1", {"gpus": 2}), ("-sm none", {"gpus": 1}),
])
def test_llama_server_placement_flags(flags, settings):
    got = read_command(f"llama-server -m x.gguf -c 4096 -np 1 {flags}").settings
    assert {k: v for k, v in got.items() if k not in ("context", "sequences")} == settings


@pytest.mark.parametrize(("command", "needle"), [
    ("llama-server -m x.gguf -sm row", "splits each matrix's rows"),
    ("llama-server -m x.gguf -ctk q3_k", "one of llama.cpp's cache types"),
    ("llama-server -m x.gguf -c 32k", "-c takes a whole number"),
    ("llama-server -m x.gguf -np 0", "-np must be at least 1"),
    ("llama-server -m x.gguf -c", "-c needs a value"),
    ("llama-server -m x.gguf -fa maybe", "on, off or auto"),
    ("llama-server -m x.gguf -nkvo", "host memory is not planned"),
    ("ollama pull llama3", "expected ollama serve or ollama run MODEL"),
    ("OLLAMA_HOST=0.0.0.0 ollama run", "ollama run needs a model name"),
    ("OLLAMA_KV_CACHE_TYPE=q3_k ollama serve", "OLLAMA_KV_CACHE_TYPE takes one of llama.cpp's"),
    ("OLLAMA_FLASH_ATTENTION=maybe ollama serve", "takes true or false"),
    ("OLLAMA_NUM_PARALLEL=two ollama serve", "OLLAMA_NUM_PARALLEL takes a whole number"),
    ("docker run --gpus all lmcache/vllm-openai:x", "expected a launch command of llama-server"),
    ("llama-server -m 'x.gguf", "could not be split into words"),
    ("", "must be a launch command line"),
    ("vllm serve x --max-model-len 3.5K", "no decimals with a binary suffix"),
    ("vllm serve x --gpu-memory-utilization nan", "takes a number"),
    ("vllm serve x --max-num-seqs lots", "takes a whole number"),
    ("vllm serve x --kv-cache-dtype q4_0", "kvplan's vLLM formats"),
    ("vllm serve x --quantization bitsandbytes", "bitsandbytes"),
    ("vllm serve x --speculative-config notjson", "takes a JSON object"),
    ("vllm serve x --swa-full=1 --enable-prefix-caching=yes", "takes no value"),
    ("python -m sglang.launch_server --model-path x --kv-cache-dtype fp8", "kvplan's SGLang"),
])
def test_bad_commands_are_refused_naming_what_was_expected(command, needle):
    with pytest.raises(kvcore.InputError, match=None) as exc:
        read_command(command)
    assert needle in str(exc.value)
    assert exc.value.field == "command"


# --- vLLM, SGLang, TensorRT-LLM -----------------------------------------------------------

@pytest.mark.parametrize(("text", "tokens"), [
    ("32768", 32768), ("32k", 32000), ("32K", 32768), ("25.6k", 25600), ("1M", 1 << 20),
    ("1m", 10**6), ("1.0005k", 1000),
])
def test_vllm_reads_token_counts_as_its_human_readable_int(text, tokens):
    assert human_int("--max-model-len", text) == tokens


def test_vllm_serve_flags():
    launch = read_command(
        "CUDA_VISIBLE_DEVICES=0,1 vllm serve meta-llama/Llama-3.1-70B-Instruct "
        "--tensor-parallel-size 2 --max_model_len 32K --kv-cache-dtype fp8 "
        "--gpu-memory-utilization 0.95 --max-num-seqs 16 --no-enable-prefix-caching "
        "--block-size 32 --cpu-offload-gb 4 --port 8000 "
        "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 2}'")
    assert launch.engine == "vllm"
    assert launch.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert launch.settings == {
        "tp": 2, "context": 32768, "kv": "fp8_e4m3", "gpu_memory_utilization": 0.95,
        "sequences": 16, "no_prefix_caching": True, "block_size": 32, "cpu_offload_gb": 4.0,
        "speculative_tokens": 2, "mtp": True}
    assert launch.unread == ["--port 8000"]


@pytest.mark.parametrize("server", ["vllm serve", "python -m sglang.launch_server --model-path"])
def test_a_load_format_is_where_weights_are_read_from_unless_it_loads_other_weights(server):
    # Mistral's own launch line: params.json and consolidated.safetensors, the same model
    launch = read_command(f"{server} mistralai/Mistral-Small-3.1-24B-Instruct-2503 "
                          "--tokenizer-mode mistral --load-format mistral")
    assert "--load-format mistral" in launch.unread and not launch.unknown
    assert not any("--load-format" in n for n in launch.notes)
    launch = read_command(f"{server} Qwen/Qwen3-8B --load-format bitsandbytes")
    assert not launch.unread and not launch.unknown
    assert launch.notes[0] == ("--load-format bitsandbytes: weights in another format than the "
                               "checkpoint's (plan them with --weights); not planned (the plan "
                               "is without it)")


def _engine_flag_cases():
    from app.common import ENGINE_FLAGS

    return [(flag, engine, ours) for flag, (engines, ours) in ENGINE_FLAGS.items()
            for engine in engines]


@pytest.mark.parametrize(("flag", "engine", "ours"), _engine_flag_cases())
def test_each_engine_flag_kvplan_names_is_read_so_from_a_launch_line(flag, engine, ours):
    # the CLI answers `kvplan MODEL -c 8192` with --ctx: the launch-line reader must read
    # llama-server's -c as the same setting, or the hint names the wrong flag
    head = {"vLLM": "vllm serve Qwen/Qwen3-8B", "llama.cpp": "llama-server -m qwen3-8b.gguf",
            "SGLang": "python -m sglang.launch_server --model-path Qwen/Qwen3-8B",
            "TensorRT-LLM": "trtllm-serve Qwen/Qwen3-8B"}[engine]
    value = {"--ctx": "8192", "--seqs": "4", "--tp": "2", "--pp": "2", "--dp": "2",
             "--weights": "fp8", "--ngl": "10", "--tensor-split": "1,1", "--ubatch": "256",
             "--free-gpu-memory-fraction": "0.8", "--kv-k": "q8_0", "--kv-v": "q8_0",
             "--kv": "q8_0" if engine == "llama.cpp" else "fp8_e4m3", "--kv-unified": "",
             "--draft": "Qwen3-0.6B-Q8_0.gguf"}[ours]
    launch = read_command(f"{head} {flag} {value}".rstrip())
    setting = {"--ctx": "context", "--seqs": "sequences"}.get(ours, ours[2:].replace("-", "_"))
    assert setting in launch.settings and not launch.unknown and not launch.unread


def test_vllms_config_format_is_read_as_the_same_model():
    launch = read_command("vllm serve mistralai/Mistral-Small-3.1-24B-Instruct-2503 "
                          "--config-format mistral")
    assert launch.unread == ["--config-format mistral"] and not launch.unknown


def test_vllm_without_length_or_sequences_plans_one_request_at_the_models_maximum():
    launch = read_command("python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B")
    spec, fields = resolve(launch)
    assert fields["context"] == spec.max_position_embeddings == 40960
    assert fields["sequences"] == 1
    assert any("the request vLLM checks at start-up" in n for n in launch.notes)


def test_docker_images_and_line_continuations():
    vllm = read_command("docker run --gpus all -p 8000:8000 vllm/vllm-openai:latest \\\n"
                        "  --model Qwen/Qwen3-8B \\\n  --max-model-len 16k")
    assert (vllm.engine, vllm.model, vllm.settings["context"]) == ("vllm", "Qwen/Qwen3-8B",
                                                                   16000)
    llama = read_command("docker run --gpus all ghcr.io/ggml-org/llama.cpp:server-cuda "
                         "-hf unsloth/Qwen3-8B-GGUF -c 8192 -np 1")
    assert llama.engine == "llama.cpp"
    assert llama.fields(None)["context"] == 8192


def test_sglang_and_trtllm_flags():
    sg = read_command("python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
                      "--tp 8 --context-length 65536 --max-running-requests 32 "
                      "--mem-fraction-static 0.85 --kv-cache-dtype fp8_e4m3 "
                      "--speculative-algorithm NEXTN --speculative-num-draft-tokens 4 "
                      "--chunked-prefill-size 8192 --page-size 32 --max-total-tokens 500000 "
                      "--host 0.0.0.0")
    assert (sg.engine, sg.model) == ("sglang", "deepseek-ai/DeepSeek-V3")
    assert sg.settings == {"tp": 8, "context": 65536, "sequences": 32,
                           "mem_fraction_static": 0.85, "kv": "fp8_e4m3",
                           "speculative_tokens": 4, "chunked_prefill_size": 8192,
                           "page_size": 32, "max_total_tokens": 500000, "mtp": True}
    trt = read_command("trtllm-serve meta-llama/Llama-3.1-8B-Instruct --max_batch_size 8 "
                       "--max_seq_len 8192 --tp_size 1 --kv_cache_free_gpu_memory_fraction 0.8")
    assert trt.settings == {"sequences": 8, "context": 8192, "tp": 1,
                            "free_gpu_memory_fraction": 0.8}


# --- the model a command loads --------------------------------------------------------------

@pytest.mark.parametrize(("path", "name", "weights"), [
    ("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "Meta-Llama-3.1-8B-Instruct", "q4_k_m"),
    ("/models/Qwen3-235B-A22B-Q4_K_M-00001-of-00003.gguf", "Qwen3-235B-A22B", "q4_k_m"),
    ("gpt-oss-20b-mxfp4.gguf", "gpt-oss-20b", "mxfp4"),
    ("Qwen3-8B.IQ4_XS.gguf", "Qwen3-8B", "iq4_xs"),
    ("C:\\models\\Qwen3-8B-BF16.gguf", "Qwen3-8B", "bf16"),
    ("Qwen3-8B-UD-Q4_K_XL.gguf", "Qwen3-8B", "ud-q4_k_xl"),
    ("qwen3-8b.gguf", "qwen3-8b", None),
])
def test_gguf_file_names(path, name, weights):
    assert gguf_file_model(path) == (name, weights)


def test_a_gguf_file_not_here_is_read_by_its_name_and_type():
    spec, fields = resolve(read_command("llama-server -m /srv/Qwen3-8B-Q5_K_M.gguf -c 8192 -np 1"))
    assert spec.name == kvcore.load_model("qwen3-8b").name
    assert (fields["model"], fields["weights"]) == ("Qwen3-8B", "q5_k_m")
    with pytest.raises(kvcore.InputError, match="none of llama-quantize's types") as exc:
        resolve(read_command("llama-server -m Qwen3-8B-UD-Q4_K_XL.gguf"))
    assert exc.value.field == "weights"
    with pytest.raises(kvcore.InputError, match="is no catalog model: give the model beside"):
        resolve(read_command("llama-server -m /srv/my-finetune-Q4_K_M.gguf"))
    # the model given beside the command stands for the file, whose name still gives its type
    spec, fields = resolve(read_command("llama-server -m /srv/my-finetune-Q4_K_M.gguf"),
                           "qwen3-8b")
    assert (fields["model"], fields["weights"]) == ("qwen3-8b", "q4_k_m")


def test_a_hub_gguf_offline_is_read_as_the_catalog_model_it_holds(monkeypatch):
    real = kvcore.catalog.load_model

    def offline(ref, **kw):
        if ":" in str(ref):
            raise HubUnavailable("the Hub could not be reached", field="model")
        return real(ref, **kw)

    monkeypatch.setattr(kvcore.catalog, "load_model", offline)
    launch = read_command("llama-server -hf unsloth/Qwen3-8B-GGUF:Q4_K_M -c 8192 -np 1")
    spec, fields = resolve(launch)
    assert (fields["model"], fields["weights"]) == ("qwen3-8b", "q4_k_m")
    assert any("not from the file's header" in n for n in launch.notes)
    # a quantizer's OWNER_ prefix (bartowski's) and a twin's repository are read alike
    for repo, held in (("bartowski/Qwen_Qwen3-8B-GGUF", "qwen3-8b"),
                       ("bartowski/meta-llama_Llama-3.3-70B-Instruct-GGUF",
                        "Llama-3.3-70B-Instruct")):
        launch = read_command(f"llama-server -hf {repo}:Q4_K_M -c 8192")
        spec, fields = resolve(launch)
        assert (fields["model"], fields["weights"]) == (held, "q4_k_m")
        assert spec.hub_repo == real(held).hub_repo
    with pytest.raises(HubUnavailable, match="no catalog model"):
        resolve(read_command("llama-server -hf someone/private-model-GGUF:Q4_K_M"))


# --- the commands kvplan prints read back to the same plan ----------------------------------

ROUND_TRIPS = [
    ("qwen3-8b", "llama.cpp", "8k", 4, {"kv": "q8_0", "weights": "q4_k_m"}, {}),
    ("qwen3-8b", "llama.cpp", "16k", 1, {"weights": "q4_k_m"}, {"kv_unified": True}),
    ("qwen3-30b-a3b", "llama.cpp", "32k", 2, {"kv": "q4_0", "weights": "q4_k_m"},
     {"n_ubatch": 1024, "swa_full": False}),
    ("llama-3.1-8b", "vllm", "32k", 8, {"kv": "fp8_e4m3"}, {"gpu_memory_utilization": 0.85}),
    ("qwen3-32b", "vllm", "16k", 4, {}, {"prefix_caching": False}),
    ("qwen3-32b", "sglang", "32k", 16, {"kv": "fp8_e5m2"}, {}),
    ("qwen3-32b", "sglang", "16k", 8, {}, {"page_size": 64, "chunked_prefill_size": 4096,
                                          "mem_fraction_static": 0.8}),
    ("qwen3-32b", "sglang", "16k", 4, {}, {"max_total_tokens": 200_000}),
    ("llama-3.1-8b", "vllm", "32k", 4, {}, {"lora": LoRA(4, 64)}),
    ("qwen3-30b-a3b", "vllm", "16k", 2, {}, {"lora": LoRA(8, 32, True, ("qkv_proj", "experts"))}),
    ("deepseek-v2-lite-chat", "vllm", "32k", 4, {}, {"attention_backend": "TRITON_MLA"}),
    ("llama-3.1-8b", "vllm", "32k", 4, {"kv": "fp8_e4m3"}, {"attention_backend": "flashinfer"}),
]


@pytest.mark.parametrize(("model", "engine", "ctx", "seqs", "kv", "settings"), ROUND_TRIPS)
def test_the_command_a_plan_prints_reads_back_to_the_same_plan(model, engine, ctx, seqs, kv,
                                                                settings):
    query = make_query(kvcore.load_model(model), context=ctx, sequences=seqs, engine=engine,
                       gpu="4090" if engine == "llama.cpp" else "h100",
                       tp=2 if engine != "llama.cpp" else None,
                       settings=EngineSettings(**settings), **kv)
    before = answer(query)
    printed = before["engine_report"]["command"]
    spec, fields = resolve(read_command(printed), model)
    # planned as the API plans the fields
    fields["gpu"] = "4090" if engine == "llama.cpp" else "h100"
    again = answer(to_query(PlanIn.model_validate(fields), spec))
    assert again["engine_report"]["command"] == printed
    for key in ("context", "sequences", "kv_bytes", "fits", "max_context", "max_sequences"):
        assert again[key] == before[key], key


# --- the CLI and the API --------------------------------------------------------------------

def test_cli_plans_a_command_and_says_how_it_read_it(capsys):
    code, out, _ = run(capsys, "--command", "llama-server -m /srv/Qwen3-8B-Q4_K_M.gguf -c 32768 "
                       "-np 4 -ctk q8_0 -ctv q8_0 --port 8080", "--gpu", "4090")
    assert code == 0
    assert out.splitlines()[0] == ("command (llama.cpp) read as: kvplan Qwen3-8B --engine "
                                   "llama.cpp --ctx 8192 --seqs 4 --kv-k q8_0 --kv-v q8_0 "
                                   "--weights q4_k_m")
    assert "not read (no memory kvplan plans): --port 8080" in out
    assert "llama-server -m qwen3-8b-Q4_K_M.gguf -c 32768 -np 4 -ctk q8_0 -ctv q8_0" in out


def test_cli_flags_beside_the_command_win(capsys):
    code, out, _ = run(capsys, "--cmd", "vllm serve Qwen/Qwen3-8B --max-model-len 32768",
                       "--ctx", "8k", "--kv", "fp8_e4m3", "--gpu", "4090", "--json")
    data = json.loads(out)
    assert code == 0
    assert (data["context"], data["engine"]) == (8192, "vllm")
    assert data["kv_k"] == data["kv_v"] == "fp8_e4m3"
    assert data["command"]["read_as"].startswith("kvplan Qwen/Qwen3-8B --engine vllm --ctx 8k")
    # the note about the model's own maximum is moot once --ctx is given
    assert not any("max-model-len" in n for n in data["command"]["notes"])


@pytest.mark.parametrize(("args", "needle"), [
    (("--command", "python train.py --epochs 3"), "expected a launch command"),
    (("--command", "llama-server -m /srv/unknown-model-Q4_K_M.gguf"), "no catalog model"),
    (("--command", "vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 1.5", "--gpu", "4090"),
     "gpu_memory_utilization must be in (0, 1]"),
    (("--command", "vllm serve Qwen/Qwen3-8B", "--find-model", "--gpu", "4090"),
     "--command names a model and --find-model lists models"),
])
def test_cli_bad_commands_are_one_line_exit_2(capsys, args, needle):
    code, out, err = run(capsys, *args)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert needle in err


def test_api_plans_a_command():
    c = TestClient(create_app())
    r = c.post("/api/v1/command", json={
        "command": "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 2 "
                   "--context-length 32768 --max-running-requests 4", "gpu": "h100"})
    assert r.status_code == 200
    data = r.json()
    assert (data["engine"], data["context"], data["sequences"]) == ("sglang", 32768, 4)
    assert data["command"]["read_as"] == ("kvplan Qwen/Qwen3-32B --engine sglang --ctx 32768 "
                                          "--seqs 4 --tp 2 --gpu h100")
    same = c.post("/api/v1/plan", json={"model": "Qwen/Qwen3-32B", "engine": "sglang",
                                        "context": 32768, "sequences": 4, "tp": 2,
                                        "gpu": "h100"}).json()
    assert data["kv_bytes"] == same["kv_bytes"]
    assert data["max_context"] == same["max_context"]


@pytest.mark.parametrize(("body", "field", "needle"), [
    ({"command": "python train.py"}, "command", "expected a launch command"),
    ({"command": "vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 1.5"}, "command",
     "gpu_memory_utilization read from the command"),
    ({"command": "llama-server -m ./local-Q4_K_M.gguf"}, "model", "no catalog model"),
    ({"command": "vllm serve Qwen/Qwen3-8B", "gpu": "nope"}, "gpu", "nope"),
    ({}, "command", "command"),
])
def test_api_bad_commands_are_json_4xx(body, field, needle):
    r = TestClient(create_app()).post("/api/v1/command", json=body)
    assert 400 <= r.status_code < 500
    data = r.json()
    assert data["field"] == field
    assert needle in data["error"]


def test_api_fields_beside_the_command_win():
    r = TestClient(create_app()).post("/api/v1/command", json={
        "command": "vllm serve Qwen/Qwen3-8B --max-model-len 32768 --max-num-seqs 64",
        "sequences": 2, "gpu": "4090"})
    data = r.json()
    assert (data["context"], data["sequences"]) == (32768, 2)
    assert cli_line({"model": "m", "engine": "vllm", "context": 1, "no_prefix_caching": True,
                     "gpu_memory_utilization": 0.9}) == (
        "kvplan m --engine vllm --ctx 1 --gpu-memory-utilization 0.9 --no-prefix-caching")


# --- the commands of real engine logs read as their logs' replays ---------------------------

LOGGED = ["llamacpp-glm52-dsa-131072-4gpu", "llamacpp-gptoss-20b-iswa-131072-metal",
          "llamacpp-gptoss-20b-iswa-4seq-unified-metal",
          "llamacpp-gptoss-20b-iswa-hexagon-q8kv-ub128", "vllm-gemma3-27b-rocm-4096-padding"]


@pytest.mark.parametrize("name", LOGGED)
def test_logged_commands_read_as_the_settings_their_logs_printed(name):
    """Each log's command line (its flags, the annotation after them left out) read as the
    replay tests/test_engine_logs.py checks against the log's printed cache: the context a
    sequence, the sequences, the unified cache, the KV format, n_ubatch and TP."""
    import re
    import tomllib
    from pathlib import Path

    log = tomllib.loads((Path(__file__).parent / "data" / "engine_logs" / f"{name}.toml")
                        .read_text())
    command = re.split(r"\s{2,}\(| \(non-default", log["flags"])[0]
    replay = log["replay"]
    launch = read_command(command)
    fields = launch.fields(kvcore.load_model(replay["model"]).max_position_embeddings)
    kv = fields.get("kv") or fields.get("kv_k") or "f16"
    got = {"context": fields["context"], "sequences": fields["sequences"],
           "kv_unified": fields.get("kv_unified", False), "kv": kv,
           "n_ubatch": fields.get("ubatch", 512), "tp": fields.get("tp", 1)}
    for key in got:
        if key in replay:
            assert got[key] == replay[key], key


# --- the web page ---------------------------------------------------------------------------

def test_the_page_plans_a_launch_command_and_fills_its_form():
    c = TestClient(create_app())
    r = c.get("/", params={"command": "llama-server -m /srv/Qwen3-8B-Q4_K_M.gguf -c 32768 "
                                      "-np 4 -ctk q8_0 -ctv q8_0 --port 8080", "gpu": "4090"})
    assert r.status_code == 200
    assert ("Read as <code>kvplan Qwen3-8B --engine llama.cpp --ctx 8192 --seqs 4 --kv-k q8_0 "
            "--kv-v q8_0 --weights q4_k_m --gpu 4090</code>") in r.text
    assert "Not read (no memory kvplan plans): --port 8080" in r.text
    assert 'id="context" name="context" value="8192"' in r.text
    # the same plan as the page's own form gives for those fields
    same = c.get("/", params={"model": "Qwen3-8B", "engine": "llama.cpp", "context": "8192",
                              "sequences": "4", "kv": "q8_0", "weights": "q4_k_m",
                              "gpu": "4090"})
    verdict = 'id="verdict">'
    assert r.text.split(verdict)[1].split("<")[0] == same.text.split(verdict)[1].split("<")[0]


def test_the_page_shows_a_bad_command_as_an_error_not_a_plan():
    c = TestClient(create_app())
    r = c.get("/", params={"command": "python train.py", "gpu": "4090"})
    assert r.status_code == 422
    assert "expected a launch command of llama-server" in r.text
    partial = c.get("/", params={"command": "python train.py"}, headers={"HX-Request": "true"})
    assert partial.status_code == 200
    assert 'class="verdict error"' in partial.text


def test_a_find_question_lists_what_the_command_chose(capsys):
    """--find-format beside a command that sets -ctk/-ctv lists every format (the command's
    choice gives way), --find-weights every weight format, --find-gpu every card count."""
    command = "llama-server -m /x/Qwen3-30B-A3B-Q4_K_M.gguf -c 65536 -np 2 -ctk q8_0 -ctv q8_0"
    code, out, _ = run(capsys, "--command", command, "--gpu", "4090", "--find-format", "--json")
    rows = json.loads(out)
    assert code == 0
    assert {"f16", "q8_0", "q4_0"} <= {r["format"] for r in rows}
    # planned at the command's 2 × 32,768 tokens: f16 does not fit the card, q8_0 does
    fits = {r["format"]: r["fits"] for r in rows}
    assert (fits["f16"], fits["q8_0"]) == (False, True)
    code, out, _ = run(capsys, "--command", command, "--gpu", "4090", "--find-weights", "--json")
    assert code == 0
    assert {"bf16", "q4_k_m", "iq2_xs"} <= {r["weights"] for r in json.loads(out)}
    code, out, _ = run(capsys, "--command", "vllm serve Qwen/Qwen3-32B -tp 2 --max-model-len "
                       "32k", "--find-gpu", "--json")
    rows = json.loads(out)
    assert code == 0
    # the smallest rigs for one 32,000-token sequence of the 64 GiB checkpoint
    assert rows and all(r["max_context"] >= 32000 for r in rows)
    assert min(r["count"] * r["total_memory_bytes"] for r in rows) > 64 * 2**30


@pytest.mark.parametrize(("flags", "tower"), [
    ("-m /x/Qwen3.5-27B-Q4_K_M.gguf", False),
    ("-m /x/Qwen3.5-27B-Q4_K_M.gguf --mmproj /x/mmproj-F16.gguf", True),
    ("-m /x/Qwen3.5-27B-Q4_K_M.gguf --mmproj /x/mmproj-F16.gguf --no-mmproj-offload", False),
])
def test_llama_server_counts_the_vision_tower_only_where_it_loads_a_projector(flags, tower):
    spec, fields = resolve(read_command(f"llama-server {flags} -c 8192 -np 1"))
    assert fields.get("no_mmproj", False) is not tower
    query = make_query(spec, **{k: v for k, v in fields.items() if k != "model"}, gpu="4090")
    with_tower = make_query(spec, engine="llama.cpp", context=8192, weights="q4_k_m",
                            gpu="4090")
    got, full = answer(query)["weights_bytes"], answer(with_tower)["weights_bytes"]
    # Qwen3.5-27B's vision tower in f16: 0.46B parameters
    assert (full - got) == (0 if tower else 2 * spec.params.encoder)


def test_the_vision_tower_is_llama_cpps_to_leave_out(capsys):
    code, _, err = run(capsys, "qwen3.5-27b", "--engine", "vllm", "--no-mmproj")
    assert code == 2
    assert "no_mmproj is llama.cpp's" in err
    code, out, _ = run(capsys, "qwen3.5-27b", "--engine", "llama.cpp", "--weights", "q4_k_m",
                       "--gpu", "4090")
    assert "--mmproj qwen3.5-27b-mmproj-F16.gguf" in out
    code, out, _ = run(capsys, "qwen3.5-27b", "--engine", "llama.cpp", "--weights", "q4_k_m",
                       "--no-mmproj", "--gpu", "4090")
    assert "--mmproj" not in out
    assert "vision tower" not in out


def test_api_plans_tensor_overrides_and_names_a_bad_one():
    c = TestClient(create_app())
    body = {"model": "qwen3-30b-a3b", "engine": "llama.cpp", "weights": "q4_k_m", "gpu": "4090",
            "override_tensor": [r"blk\.(1[0-9]|2[0-9])\.ffn_.*_exps\.=CPU"]}
    r = c.post("/api/v1/plan", json=body)
    assert r.status_code == 200
    assert r.json()["engine_report"]["extra"]["placement"]["host_holds"] == \
        "the routed experts of blocks 10–29"
    r = c.post("/api/v1/plan", json={**body, "override_tensor": [".ffn_.*=CPU"]})
    assert r.status_code == 422
    assert r.json()["field"] == "override_tensor"
    # a launch command's -ot reaches the plan the same way
    r = c.post("/api/v1/command", json={"command": "llama-server -m /x/Qwen3-30B-A3B-Q4_K_M.gguf "
                                        "-np 1 -c 8192 -ot 'blk\\.(1[0-9]|2[0-9])\\.ffn_.*_exps"
                                        "\\.=CPU'", "gpu": "4090"})
    assert r.status_code == 200
    assert r.json()["engine_report"]["extra"]["placement"]["host_holds"] == \
        "the routed experts of blocks 10–29"


def test_a_windows_command_line_keeps_its_backslashes():
    launch = read_command('llama-server.exe -m "C:\\My Models\\Qwen3-8B-Q4_K_M.gguf" -c 8192 ^\n'
                          " -np 2 -ctk q8_0")
    assert launch.model == "C:\\My Models\\Qwen3-8B-Q4_K_M.gguf"
    assert launch.settings == {"kv_k": "q8_0", "sequences": 2, "context": 4096}
    spec, fields = resolve(launch)
    assert (fields["model"], fields["weights"]) == ("Qwen3-8B", "q4_k_m")


def test_the_page_plans_an_override_and_its_api_link_the_same():
    import html
    import re

    c = TestClient(create_app())
    params = {"model": "qwen3-30b-a3b", "engine": "llama.cpp", "weights": "q4_k_m",
              "gpu": "4090", "override_tensor": r"blk\.(1[0-9]|2[0-9])\.ffn_.*_exps\.=CPU"}
    page = c.get("/", params=params)
    assert "keeps the routed experts of blocks 10–29 in host memory" in page.text
    link = html.unescape(re.search(r'href="(/api/v1/plan\?[^"]*)"', page.text).group(1))
    placed = c.get(link).json()["engine_report"]["extra"]["placement"]
    assert placed["host_holds"] == "the routed experts of blocks 10–29"
    bad = c.get("/", params={**params, "override_tensor": ".ffn_.*=CPU"})
    assert bad.status_code == 422
    assert re.search(r'id="err-override_tensor">override_tensor &#39;.ffn_.\*=CPU&#39; moves',
                     bad.text)


def test_llama_arg_variables_are_read_and_flags_after_the_program_win():
    launch = read_command("LLAMA_ARG_CTX_SIZE=16384 LLAMA_ARG_N_PARALLEL=2 "
                          "LLAMA_ARG_CACHE_TYPE_K=q8_0 LLAMA_ARG_SWA_FULL=0 "
                          "llama-server -m x.gguf -c 8192")
    assert launch.settings == {"kv_k": "q8_0", "sequences": 2, "context": 4096}
    docker = read_command("docker run --gpus all -e LLAMA_ARG_CTX_SIZE=32768 "
                          "-e LLAMA_ARG_N_PARALLEL=1 -e LLAMA_ARG_KV_UNIFIED=true "
                          "-e LLAMA_ARG_HF_REPO=unsloth/Qwen3-8B-GGUF:Q4_K_M "
                          "ghcr.io/ggml-org/llama.cpp:server-cuda --port 8080")
    assert docker.model == "unsloth/Qwen3-8B-GGUF:Q4_K_M"
    assert docker.settings == {"sequences": 1, "kv_unified": True, "context": 32768}


def _command_plan(command, **beside):
    from kvcore.command import fit_shortened

    launch = read_command(command)
    spec, fields = resolve(launch)
    fields.update(beside)
    launch.given(set(beside))
    query = fit_shortened(launch, to_query(PlanIn.model_validate(fields), spec))
    return launch, query, answer(query)


def test_without_c_llamas_fit_shortens_the_context_before_moving_layers():
    """llama-server with -c left out starts at the trained context; where that does not fit
    the card, --fit shortens it (to the largest total that fits, a multiple of 256) before
    it moves any layer to host memory."""
    launch, query, data = _command_plan("llama-server -m /x/Qwen3.5-27B-Q4_K_M.gguf",
                                        gpu="4090")
    total = query.context * query.sequences
    assert data["fits"] is True
    assert total % 256 == 0 and 4096 <= total < 262144
    # the next 256 tokens would not fit
    _, _, longer = _command_plan("llama-server -m /x/Qwen3.5-27B-Q4_K_M.gguf", gpu="4090",
                                 context=(total + 256) // 4)
    assert longer["fits"] is False
    assert any(n.startswith(f"-c not set: llama.cpp's --fit shortens the context from 262,144 "
                            f"to {total:,} tokens (4 × {total // 4:,}) to fit the card")
               for n in launch.notes)


@pytest.mark.parametrize("flags", ["-c 0", "--fit off", "-c 262144"])
def test_a_context_set_or_the_fit_off_is_kept(flags):
    launch, query, data = _command_plan(f"llama-server -m /x/Qwen3.5-27B-Q4_K_M.gguf {flags}",
                                        gpu="4090")
    assert query.context * query.sequences == 262144
    assert data["fits"] is False
    assert not any("--fit shortens" in n for n in launch.notes)


def test_where_not_even_the_least_fits_the_fit_keeps_the_least_and_moves_layers():
    launch, query, data = _command_plan("llama-server -m /x/Llama-3.1-70B-Instruct-Q4_K_M.gguf",
                                        gpu="4090")
    assert (query.context, query.sequences) == (1024, 4)
    assert any("to 4,096 tokens (4 × 1,024), its least, and then moves layers" in n
               for n in launch.notes)
    assert data["engine_report"]["extra"]["fit"]["host_weights_bytes"] > 0
    # a context given beside the command is the plan's
    _, query, _ = _command_plan("llama-server -m /x/Llama-3.1-70B-Instruct-Q4_K_M.gguf",
                                gpu="4090", context=8192)
    assert query.context == 8192


def test_fit_ctx_sets_the_least_context_the_fit_shortens_to():
    # --fit-ctx 16384 (common.h fit_params_min_ctx, 4,096 by default): the least is 16,384
    # tokens a stream, the four unified slots' one stream here
    launch, query, _ = _command_plan("llama-server -m /x/Llama-3.1-70B-Instruct-Q4_K_M.gguf "
                                     "--fit-ctx 16384", gpu="4090")
    assert launch.fit_min_ctx == 16384 and (query.context, query.sequences) == (4096, 4)
    # as LLAMA_ARG_* variables (common/arg.cpp set_env), with --fit-target's
    env = read_command("LLAMA_ARG_FIT_CTX=16384 LLAMA_ARG_FIT_TARGET=2048 llama-server -m x.gguf")
    assert env.fit_min_ctx == 16384 and env.settings["fit_target"] == 2048
    assert any("to 16,384 tokens (4 × 4,096), its least, and then moves layers" in n
               for n in launch.notes)
    assert not launch.unread and not launch.unknown


def test_vllm_expert_parallel_under_data_parallel_is_planned_as_its_dp():
    # -dp without EP slices every expert over the tp × dp ranks (FusedMoE flattens its TP
    # group across DP), with EP each rank holds whole experts: the same bytes a rank
    launch = read_command("vllm serve x -dp 8 --enable-expert-parallel")
    assert launch.settings["dp"] == 8
    assert any("spread over the tp × dp ranks whole" in n for n in launch.notes)


@pytest.mark.parametrize(("flags", "setting"), [
    ("--enable-extensible-kv-cache --kv-cache-memory-bytes 10G", "kv_cache_memory_bytes"),
    ("--num-gpu-blocks-override 100 --enable-extensible-kv-cache", "num_gpu_blocks_override"),
])
def test_vllm_extensible_cache_asked_for_beside_a_pinned_pool_is_refused(capsys, flags,
                                                                          setting):
    # config/vllm.py _resolve_extensible_kv_cache raises where it is asked for and a pinned
    # pool overrides its measured sizing; left to vLLM's default it is off there
    assert main(["--command", f"vllm serve Qwen/Qwen3-8B {flags}", "--gpu", "h100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vLLM stops at start-up" in err[0]
    assert f"which {setting} overrides" in err[0]
    launch = read_command(f"vllm serve x {flags.replace('--enable-extensible-kv-cache', '')}")
    assert "no_extensible_kv_cache" not in launch.settings
    last_on = read_command(
        "vllm serve x --no-enable-extensible-kv-cache --enable-extensible-kv-cache").settings
    assert "no_extensible_kv_cache" not in last_on and last_on["enable_extensible_kv_cache"]
    last_off = read_command(
        "vllm serve x --enable-extensible-kv-cache --no-enable-extensible-kv-cache").settings
    assert last_off["no_extensible_kv_cache"] and "enable_extensible_kv_cache" not in last_off


@pytest.mark.parametrize(("args", "message"), [
    (["--gpu", "h100"], "which num_gpu_blocks_override overrides"),
    (["--gpu", "arc pro b60"], "it is only supported on CUDA and ROCm"),
    (["--gpu", "h100", "--kv-budget", "10GiB"], "which kv_cache_memory_bytes overrides"),
    (["--kv-budget", "10GiB"], "which kv_cache_memory_bytes overrides"),
])
def test_vllm_extensible_cache_beside_a_block_count_is_refused_in_vllm_s_order(capsys, args,
                                                                             message):
    # _resolve_extensible_kv_cache checks the platform, then a pinned pool, then the block
    # count: with --num-gpu-blocks-override in the command, an Intel card or a KV budget
    # gives vLLM's earlier reason, each once
    cmd = "vllm serve Qwen/Qwen3-8B --enable-extensible-kv-cache --num-gpu-blocks-override 100"
    assert main(["--command", cmd, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].count("overrides") <= 1
    body = {"command": cmd, "gpu": args[1]} if args[0] == "--gpu" else {"command": cmd}
    if "--kv-budget" in args:
        body["kv_budget"] = "10GiB"
    r = TestClient(create_app()).post("/api/v1/command", json=body)
    assert r.status_code == 422 and message in r.json()["error"]


@pytest.mark.parametrize(("args", "message"), [
    (["--gpu", "arc pro b60"], "it is only supported on CUDA and ROCm"),
    (["--gpu", "h100", "--kv-budget", "10GiB"], "which kv_cache_memory_bytes overrides"),
    (["--gpu", "h100", "--no-extensible-kv-cache"], "contradict each other"),
])
def test_vllm_extensible_cache_asked_for_where_vllm_cannot_have_it_is_refused(
        capsys, args, message):
    # asked for, vLLM stops at start-up where its default would leave it off
    assert main(["qwen3-8b", "--engine", "vllm", "--enable-extensible-kv-cache", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    # on a CUDA card it is the default, said in the command
    assert main(["qwen3-8b", "--engine", "vllm", "--gpu", "h100",
                 "--enable-extensible-kv-cache"]) == 0
    out = capsys.readouterr().out
    assert "--enable-extensible-kv-cache" in out.split("command: vllm serve", 1)[1].split("\n")[0]
    client = TestClient(create_app())
    body = {"model": "qwen3-8b", "engine": "vllm", "gpu": "arc pro b60",
            "enable_extensible_kv_cache": True}
    r = client.post("/api/v1/plan", json=body)
    assert r.status_code == 422 and "only supported on CUDA and ROCm" in r.text


SGLANG = "python -m sglang.launch_server --model-path x"


@pytest.mark.parametrize(("command", "words"), [
    ("vllm serve x --num-gpu-blocks-override 1000", "the pool's block count"),
    ("vllm serve x --disable-hybrid-kv-cache-manager", "without the hybrid manager"),
    ("vllm serve x --mamba-ssm-cache-dtype float32", "recurrent state's dtype"),
    ("vllm serve x --dtype float32", "weights in 32 bits"),
    ("trtllm-serve x --extra_llm_api_options cfg.yaml", "the file is not on this machine"),
    (f"{SGLANG} --moe-dense-tp-size 1", "dense MLP layers"),
    (f"{SGLANG} --enable-hierarchical-cache", "--hicache-ratio"),
])
def test_flags_that_change_memory_kvplan_does_not_plan_are_said(command, words):
    # in a note each, not left among the flags that change no memory
    launch = read_command(command)
    assert not launch.unread
    assert any(words in n for n in launch.notes), launch.notes


def test_vllm_kv_offloading_size_is_the_offload_of_every_rank():
    # vLLM's --kv-offloading-size is over all tensor-parallel ranks, kvplan's --offload a rank
    launch = read_command("vllm serve x -tp 4 --kv-offloading-size 64 --dtype bfloat16")
    assert launch.settings["offload"] == "16GiB"
    assert not launch.unread and not any("--dtype" in n for n in launch.notes)


# --- flags known to change nothing, and flags kvplan does not know -------------------------

@pytest.mark.parametrize(("command", "unread", "unknown"), [
    ("llama-server -m x.gguf --no-mmap --log-colors on -t 8 --mystery 3 stray",
     ["--no-mmap", "--log-colors on", "-t 8"], ["--mystery 3", "stray"]),
    ("vllm serve Qwen/Qwen3-8B --no-trust-remote-code --api-key a b --served-model-name q "
     "--weird", ["--no-trust-remote-code", "--api-key a b", "--served-model-name q"],
     ["--weird"]),
    ("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --enable-metrics "
     "--port 3000 --tool-call-parser qwen --mystery 4",
     ["--enable-metrics", "--port 3000", "--tool-call-parser qwen"], ["--mystery 4"]),
    ("trtllm-serve Qwen/Qwen3-8B --log_level info --trust_remote_code --max_beam_width 1 "
     "--odd x", ["--log_level info", "--trust_remote_code", "--max_beam_width 1"],
     ["--odd x"]),
])
def test_flags_known_to_change_nothing_are_told_apart_from_unknown_ones(command, unread,
                                                                        unknown):
    launch = read_command(command)
    assert launch.unread == unread
    assert launch.unknown == unknown


def test_a_known_switch_does_not_take_the_word_after_it():
    # vllm serve's model may follow a switch (argparse's positional); a switch kvplan did not
    # know used to take it as its value
    launch = read_command("vllm serve --trust-remote-code Qwen/Qwen3-8B --port 8000")
    assert launch.model == "Qwen/Qwen3-8B"
    assert launch.unread == ["--trust-remote-code", "--port 8000"] and not launch.unknown


def test_cli_and_api_say_unknown_flags_apart(capsys):
    cmd = "llama-server -m qwen3-8b-Q4_K_M.gguf -c 8192 -np 1 --port 8080 --frobnicate 2"
    code, out, _ = run(capsys, "--command", cmd, "--gpu", "4090")
    assert code == 0
    assert "not read (no memory kvplan plans): --port 8080\n" in out
    assert "not known to kvplan (the plan is without them): --frobnicate 2\n" in out
    data = TestClient(create_app()).post("/api/v1/command",
                                         json={"command": cmd, "gpu": "4090"}).json()
    assert data["command"]["unread"] == ["--port 8080"]
    assert data["command"]["unknown"] == ["--frobnicate 2"]


@pytest.mark.parametrize(("command", "said"), [
    ("trtllm-serve Qwen/Qwen3-8B --backend trt", "--backend trt: kvplan plans the PyTorch"),
    ("trtllm-serve Qwen/Qwen3-8B --max_beam_width 4", "--max_beam_width 4: each request's"),
    ("trtllm-serve Qwen/Qwen3-8B --cp_size 2", "--cp_size 2: a sequence's cache split"),
    ("trtllm-serve Qwen/Qwen3-8B --ep_size 8", "--ep_size 8: the experts placed"),
])
def test_flags_that_change_memory_unplanned_are_noted(command, said):
    launch = read_command(command)
    assert any(n.startswith(said) and n.endswith("not planned (the plan is without it)")
               for n in launch.notes)
    assert not launch.unread and not launch.unknown


def test_trtllm_serve_long_names_are_read_as_their_aliases():
    launch = read_command("trtllm-serve Qwen/Qwen3-8B --tensor_parallel_size 2 "
                          "--pipeline_parallel_size 2 --free_gpu_memory_fraction 0.8")
    assert launch.settings["tp"] == 2 and launch.settings["pp"] == 2
    assert launch.settings["free_gpu_memory_fraction"] == 0.8


@pytest.mark.parametrize("command", [
    "trtllm-serve Qwen/Qwen3-8B --config extra.yml",
    "vllm serve Qwen/Qwen3-8B --config serve.yaml",
    "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --config s.yaml"])
def test_an_options_file_not_given_is_said_so(command):
    launch = read_command(command)
    flag = command.split("--config ")[1]
    assert any(n.startswith(f"--config {flag}: the file is not on this machine")
               and n.endswith("not planned (the plan is without them)") for n in launch.notes)
    assert launch.options_path == flag and not launch.unread and not launch.unknown


@pytest.mark.parametrize(("command", "backend"), [
    ("vllm serve x --attention-backend flashinfer", "flashinfer"),
    ("vllm serve x --attention-config '{\"backend\": \"CUTLASS_MLA\"}'", "CUTLASS_MLA"),
    ("vllm serve x -ac.backend=TRITON_ATTN", "TRITON_ATTN"),
    ("vllm serve x --attention-config.backend FLASH_ATTN", "FLASH_ATTN"),
    ("vllm serve x -ac '{\"backend\": null}'", "auto"),
])
def test_vllm_backend_named_by_flag_or_attention_config(command, backend):
    launch = read_command(command)
    assert launch.settings["attention_backend"] == backend
    assert not launch.unknown and not launch.unread


def test_vllm_attention_config_keys_kvplan_does_not_plan_are_said_and_both_forms_refused():
    launch = read_command("vllm serve x -ac '{\"backend_per_kind\": {\"sliding_window\": "
                          "\"TRITON_ATTN\"}, \"flash_attn_version\": 3}'")
    assert "attention_backend" not in launch.settings
    assert any("backend_per_kind" in n and "not planned" in n for n in launch.notes)
    assert any("flash_attn_version 3" in n for n in launch.notes)
    # create_engine_config: the two are mutually exclusive, "auto" included, in either order
    for command in ("vllm serve x --attention-backend FLASHINFER -ac.backend=auto",
                    "vllm serve x -ac.backend=FLASHINFER --attention-backend auto"):
        with pytest.raises(kvcore.InputError, match="mutually exclusive"):
            read_command(command)
    with pytest.raises(kvcore.InputError, match="takes a JSON object"):
        read_command("vllm serve x --attention-config 3")
