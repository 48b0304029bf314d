"""A separate draft model for speculative decoding (kvcore/draft.py): its weights and cache
beside the target's, as vLLM 0.34 (one pool), SGLang 0.5.23 (STANDALONE: the target's cell
pays for the draft's layers, the draft gets a pool of the same token count) and llama.cpp (-md:
a context of its own) allocate them. Figures worked by hand from the configs: Qwen3-8B has 36
layers of 8 KV heads × 128, Qwen3-0.6B 28 of the same, so a token is 147,456 bytes of the
target's cache in f16 and 114,688 of the draft's."""

import json

import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.web import create_app
from kvcore import CacheOptions, InputError, load_model
from kvcore.command import read_command, resolve
from kvcore.draft import attach, draft_row_bytes
from kvcore.engines import EngineRequest, EngineSettings, engine_plan
from kvcore.formats import get_format
from kvcore.kv import bytes_per_token
from kvcore.parallel import Parallel
from kvcore.weights import weights_for

GiB = 1024**3
TARGET, DRAFT = 147_456, 114_688


@pytest.fixture(scope="module")
def pair():
    return attach(load_model("qwen3-8b"), load_model("qwen3-0.6b"))


def req(spec, ctx=8192, seqs=4, kv="f16", mtp=True, **kw):
    return EngineRequest(spec=spec, context=ctx, sequences=seqs,
                         cache=CacheOptions(kv_k=kv, kv_v=kv, mtp=mtp), **kw)


def test_attach_counts_the_drafts_layers_and_weights(pair):
    assert bytes_per_token(pair, CacheOptions(mtp=True)) == TARGET + DRAFT
    assert bytes_per_token(pair) == TARGET
    assert pair.mtp_layers == 28 and pair.num_layers == 36 and pair.decoder_layers == 36
    own = weights_for(load_model("qwen3-8b"))
    draft = weights_for(load_model("qwen3-0.6b"))
    both = weights_for(pair, mtp=True)
    assert both.bytes == own.bytes + draft.bytes
    assert weights_for(pair).bytes == own.bytes
    # the draft's layers follow the target's in number
    assert min(i for g in pair.groups if g.mtp for i in g.layers) == 36


def test_draft_weights_priced_in_their_own_format():
    spec = attach(load_model("qwen3-8b"), load_model("qwen3-0.6b"), "q8_0")
    assert spec.draft.weight_format == "q8_0"
    assert spec.draft.weight_bytes == weights_for(load_model("qwen3-0.6b"), "q8_0").bytes
    with pytest.raises(InputError) as e:
        attach(load_model("qwen3-8b"), load_model("qwen3-0.6b"), "q9_z")
    assert e.value.field == "draft_weights"


def test_vllm_puts_the_draft_in_the_targets_blocks(pair):
    # one uniform group: a 64-token block holds 64 × 262,144 bytes = 16 MiB, so 8 GiB is 512
    # blocks, 32,768 tokens: 4.00x concurrency at 8,192 (the target alone: 910 blocks)
    r = engine_plan("vllm", req(pair, kv_budget_bytes=8 * GiB))
    assert (r.blocks, r.block_tokens, r.kv_tokens) == (512, 64, 32768)
    assert r.log_lines[-1] == ("GPU KV cache size: 32,768 tokens, Maximum concurrency for 8,192 "
                               "tokens per request: 4.00x")
    assert ("--speculative-config '{\"model\": \"Qwen/Qwen3-0.6B\", "
            "\"num_speculative_tokens\": 3}'") in r.command
    assert any("114,688 bytes a token per rank" in n for n in r.notes)
    plain = engine_plan("vllm", req(load_model("qwen3-8b"), mtp=False, kv_budget_bytes=8 * GiB))
    assert plain.blocks == 910


def test_draft_heads_per_rank_under_tensor_parallelism():
    # Llama-3.2-1B's 16 layers of 8 KV heads × 64 under tp 4: 2 heads a rank, 16 × 2 × 64 × 2
    # B for K and as much for V = 8,192 bytes a token (the 70B target's 81,920 beside it)
    spec = attach(load_model("llama-3.1-70b-instruct"), load_model("llama-3.2-1b-instruct"))
    f16 = get_format("f16")
    assert sum(draft_row_bytes(spec, f16, f16, 4)) == 8192
    # 8 heads over 16 ranks: a head replicated on two, one a rank
    assert sum(draft_row_bytes(spec, f16, f16, 16)) == 16 * 2 * 64 * 2
    # vLLM's one group of mixed pages: 81,920 + 8,192 = 90,112 bytes a token a rank, so 8 GiB
    # holds 8 GiB // (64 × 90,112) = 1,489 blocks of 64 tokens
    r = engine_plan("vllm", req(spec, kv_budget_bytes=8 * GiB, parallel=Parallel(tp=4)))
    assert (r.blocks, r.block_tokens) == (1489, 64)
    # SGLang under tp 2: the cell per rank 73,728 + int(73,728 × 28 / 36) = 131,072 bytes
    pair = attach(load_model("qwen3-8b"), load_model("qwen3-0.6b"))
    r = engine_plan("sglang", req(pair, kv_budget_bytes=8 * GiB, parallel=Parallel(tp=2)))
    assert (r.extra["cell_bytes"], r.kv_tokens) == (131072, 65536)


def test_vllm_refuses_another_vocabulary_and_a_longer_context():
    spec = attach(load_model("qwen3-8b"), load_model("llama-3.2-1b-instruct"))
    with pytest.raises(InputError, match="vocab_size to equal") as e:
        engine_plan("vllm", req(spec, kv_budget_bytes=8 * GiB))
    assert e.value.field == "draft"
    # Qwen3-0.6B serves 40,960 positions: vLLM lowers max_model_len to it
    long = attach(load_model("llama-3.1-8b-instruct"), load_model("llama-3.2-1b-instruct"))
    engine_plan("vllm", req(long, ctx=131072, seqs=1, kv_budget_bytes=40 * GiB))
    short = attach(load_model("qwen3-8b"), load_model("qwen3-0.6b"))
    with pytest.raises(InputError, match="lowers max_model_len to the draft's"):
        engine_plan("vllm", req(short, ctx=65536, seqs=1, kv_budget_bytes=40 * GiB))


def test_sglang_standalone_cell_and_draft_pool(pair):
    # cell 147,456 + int(147,456 × 28 / 36) = 262,144; 8 GiB // 262,144 = 32,768 tokens; the
    # draft's pool (N + 1) × 57,344 bytes for K = 1.75 GiB
    r = engine_plan("sglang", req(pair, kv_budget_bytes=8 * GiB))
    assert r.extra["cell_bytes"] == TARGET + DRAFT
    assert r.kv_tokens == 32768
    assert r.log_lines[1] == ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 32768, "
                              f"K size: {32769 * 57344 / GiB:.2f} GB, V size: "
                              f"{32769 * 57344 / GiB:.2f} GB")
    assert r.command.endswith(
        "--speculative-algorithm STANDALONE --speculative-draft-model-path Qwen/Qwen3-0.6B "
        "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4")
    with pytest.raises(InputError, match="STANDALONE") as e:
        engine_plan("sglang", req(pair, kv_budget_bytes=8 * GiB,
                                  parallel=Parallel(tp=2, attn_dp=2)))
    assert e.value.field == "draft"


def test_llamacpp_gives_the_draft_a_context_of_its_own(pair):
    # the draft's cache: the target's cells (4 streams of 8,192) over its 28 layers in f16
    # (-ctkd/-ctvd's default), whatever -ctk/-ctv are: 4 × 8,192 × 114,688 = 3.5 GiB
    r = engine_plan("llama.cpp", req(pair, kv="q8_0", kv_budget_bytes=12 * GiB))
    assert r.extra["draft"]["kv_bytes"] == 4 * 8192 * DRAFT
    assert r.log_lines[-1] == ("llama_kv_cache: size = 3584.00 MiB (  8192 cells,  28 layers,  "
                               "4/4 seqs), K (f16): 1792.00 MiB, V (f16): 1792.00 MiB")
    # its compute buffers: f32 activations of a 512-token ubatch (2 × 1,024 + 2 × 3,072
    # values a token) and f32 logits of one row a sequence (4 × 151,936)
    assert r.extra["draft"]["compute_bytes"] == 4 * (512 * 8192 + 4 * 151936)
    # a tied embedding is the output layer on the card: all of the draft's weights there
    assert r.extra["draft"]["weights_bytes"] == pair.draft.weight_bytes
    assert "-md qwen3-0.6b-BF16.gguf --spec-type draft-simple" in r.command
    # with the draft, 12 GiB holds what the target's q8_0 cells and the draft's f16 ones need
    alone = engine_plan("llama.cpp", req(load_model("qwen3-8b"), kv="q8_0", mtp=False,
                                         kv_budget_bytes=12 * GiB))
    assert r.max_context < alone.max_context
    with pytest.raises(InputError, match="GGUF draft") as e:
        engine_plan("llama.cpp", req(attach(load_model("qwen3-8b"), load_model("qwen3-0.6b"),
                                            "fp8"), kv_budget_bytes=12 * GiB))
    assert e.value.field == "draft_weights"


@pytest.mark.parametrize(("args", "field_text"), [
    (["--engine", "ollama"], "Ollama loads no draft model"),
    (["--engine", "trtllm"], "TensorRT-LLM"),
    (["--mtp"], "give one of them"),
    (["--engine", "vllm", "--gpus", "2", "--pp", "2"], "pipeline parallelism"),
])
def test_cli_refusals(capsys, args, field_text):
    assert main(["qwen3-8b", "--draft", "qwen3-0.6b", "--gpu", "4090", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert field_text in err and len(err.splitlines()) == 1


def test_cli_unknown_draft_and_weights_without_draft(capsys):
    assert main(["qwen3-8b", "--draft", "qwen3-0.6bb", "--gpu", "4090"]) == 2
    assert "draft: 'qwen3-0.6bb' is not a known model; did you mean 'qwen3-0.6b'" in \
        capsys.readouterr().err
    assert main(["qwen3-8b", "--draft-weights", "q8_0", "--gpu", "4090"]) == 2
    assert "give the draft model too" in capsys.readouterr().err


def test_to_fit_and_find_gpu_keep_a_draft_on_one_card(capsys):
    # llama.cpp's more cards are pipeline stages, which a draft is not planned over: to_fit
    # names no card count and --find-gpu lists single cards
    assert main(["qwen3-32b", "--draft", "qwen3-0.6b", "--gpu", "4090", "--engine",
                 "llama.cpp", "--ctx", "32k", "--weights", "q4_k_m", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is False and data["to_fit"] and "gpus" not in data["to_fit"]
    assert main(["qwen3-32b", "--draft", "qwen3-0.6b", "--find-gpu", "--engine", "llama.cpp",
                 "--ctx", "32k", "--weights", "q4_k_m", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["count"] == 1 for r in rows)


def test_find_model_takes_no_draft(capsys):
    assert main(["--find-model", "--draft", "qwen3-0.6b", "--gpu", "4090"]) == 2
    assert "leave out --draft" in capsys.readouterr().err
    r = TestClient(create_app()).post("/api/v1/find-model",
                                      json={"gpu": "4090", "draft": "qwen3-0.6b"})
    assert r.status_code == 422 and r.json()["field"] == "draft"


def test_cli_json_names_the_draft(capsys):
    assert main(["qwen3-8b", "--draft", "qwen3-0.6b", "--gpu", "h100", "--ctx", "32k",
                 "--engine", "sglang", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["draft"]["name"] == "qwen3-0.6b" and data["draft"]["layers"] == 28
    assert data["bytes_per_token"] == TARGET + DRAFT
    assert [g["draft"] for g in data["breakdown"]] == [False, True]


def test_launch_commands_name_the_draft():
    spec, fields = resolve(read_command(
        "llama-server -m Qwen3-8B-Q4_K_M.gguf -md Qwen3-0.6B-Q8_0.gguf -c 16384 -np 1 "
        "--spec-type draft-simple"))
    assert (fields["draft"], fields["draft_weights"]) == ("Qwen3-0.6B", "q8_0")
    _, fields = resolve(read_command(
        "vllm serve Qwen/Qwen3-8B --speculative-config "
        "'{\"model\": \"Qwen/Qwen3-0.6B\", \"num_speculative_tokens\": 5}'"))
    assert fields["draft"] == "Qwen/Qwen3-0.6B" and fields["speculative_tokens"] == 5
    _, fields = resolve(read_command(
        "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm "
        "STANDALONE --speculative-draft-model-path Qwen/Qwen3-0.6B"))
    assert fields["draft"] == "Qwen/Qwen3-0.6B"
    # an EAGLE head is planned as one: EAGLE3 names it, and EAGLE a head other than the model
    launch = read_command("python -m sglang.launch_server --model-path meta-llama/"
                          "Llama-3.1-8B-Instruct --speculative-algorithm EAGLE3 "
                          "--speculative-draft-model-path yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    _, fields = resolve(launch)
    assert (fields["draft"], fields["draft_method"]) == ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                                                         "eagle3")
    _, fields = resolve(read_command(
        "python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B-Instruct "
        "--speculative-algorithm EAGLE --speculative-draft-model-path "
        "lmzheng/sglang-EAGLE-LLaMA3-Instruct-8B"))
    assert fields["draft_method"] == "eagle"
    _, fields = resolve(read_command(
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config '{\"method\": "
        "\"eagle3\", \"model\": \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", "
        "\"num_speculative_tokens\": 4}'"))
    assert (fields["draft_method"], fields["speculative_tokens"]) == ("eagle3", 4)
    launch = read_command("llama-server -m Llama-3.1-8B-Q4_K_M.gguf -md "
                          "eagle3-llama3.1-instruct-8b-F16.gguf --spec-type draft-eagle3")
    _, fields = resolve(launch)
    assert (fields["draft"], fields["draft_method"]) == ("eagle3-llama3.1-instruct-8b",
                                                         "eagle3")
    # the draft's own KV dtype: vLLM's speculative kv_cache_dtype, SGLang's flag
    _, fields = resolve(read_command(
        "vllm serve Qwen/Qwen3-8B --speculative-config '{\"model\": \"Qwen/Qwen3-0.6B\", "
        "\"num_speculative_tokens\": 5, \"kv_cache_dtype\": \"fp8\"}'"))
    assert fields["draft_kv"] == "fp8_e4m3"
    _, fields = resolve(read_command(
        "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm "
        "STANDALONE --speculative-draft-model-path Qwen/Qwen3-0.6B "
        "--speculative-draft-kv-cache-dtype bfloat16"))
    assert fields["draft_kv"] == "bf16"
    # with the model's own MTP head (its own path, or none) the flag is noted, not planned
    for path in ("--speculative-draft-model-path deepseek-ai/DeepSeek-V3 ", ""):
        launch = read_command("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
                              f"--speculative-algorithm EAGLE {path}"
                              "--speculative-draft-kv-cache-dtype fp8_e4m3")
        _, fields = resolve(launch)
        assert "draft_kv" not in fields
        assert any("--speculative-draft-kv-cache-dtype fp8_e4m3" in n for n in launch.notes)
    launch = read_command("llama-server -m Qwen3-8B-Q4_K_M.gguf -md elsewhere-Q8_0.gguf")
    _, fields = resolve(launch)
    assert "draft" not in fields and any("not counted" in n for n in launch.notes)


def test_api_plan_with_a_draft():
    c = TestClient(create_app())
    r = c.post("/api/v1/plan", json={"model": "qwen3-8b", "draft": "qwen3-0.6b",
                                     "gpu": "4090", "context": "16k", "engine": "vllm"})
    assert r.status_code == 200
    assert r.json()["draft"]["weights_bytes"] == weights_for(load_model("qwen3-0.6b")).bytes
    r = c.post("/api/v1/plan", json={"model": "qwen3-8b", "draft": "nope-0.6b", "gpu": "4090"})
    assert r.status_code == 422 and r.json()["field"] == "draft"
    r = c.get("/api/v1/plan?model=qwen3-8b&draft=qwen3-0.6b&gpu=4090&engine=ollama")
    assert r.status_code == 422 and "Ollama loads no draft model" in r.json()["error"]
    page = c.get("/?model=qwen3-8b&draft=qwen3-0.6b&gpu=h100&engine=sglang")
    assert page.status_code == 200 and "STANDALONE" in page.text


def test_llamacpp_draft_cache_type(pair):
    # -ctkd/-ctvd q8_0: 34 bytes a 32 values, 28 layers × 8 heads × 128 × 2 × 34 / 32 = 60,928
    # bytes a cell, 16,384 cells: 952 MiB
    from kvcore.engines import EngineSettings

    r = engine_plan("llama.cpp", req(pair, ctx=16384, seqs=1, kv_budget_bytes=12 * GiB,
                                     settings=EngineSettings(draft_kv="q8_0")))
    assert r.extra["draft"]["kv_bytes"] == 16384 * 60928
    assert r.log_lines[-1].endswith("K (q8_0):  476.00 MiB, V (q8_0):  476.00 MiB")
    assert "-ctkd q8_0 -ctvd q8_0" in r.command
    with pytest.raises(InputError, match="flash attention off") as e:
        engine_plan("llama.cpp", req(pair, kv_budget_bytes=12 * GiB,
                                     settings=EngineSettings(draft_kv="q8_0", flash_attn=False)))
    assert e.value.field == "draft_kv"
    with pytest.raises(InputError, match="give the draft model too"):
        engine_plan("llama.cpp", req(load_model("qwen3-8b"), mtp=False,
                                     kv_budget_bytes=12 * GiB,
                                     settings=EngineSettings(draft_kv="q8_0")))
    _, fields = resolve(read_command("llama-server -m Qwen3-8B-Q4_K_M.gguf -md "
                                     "Qwen3-0.6B-Q8_0.gguf -ctkd q8_0 -ctvd q8_0"))
    assert fields["draft_kv"] == "q8_0"
    launch = read_command("llama-server -m Qwen3-8B-Q4_K_M.gguf -md Qwen3-0.6B-Q8_0.gguf "
                          "-ctkd q8_0")
    _, fields = resolve(launch)
    assert "draft_kv" not in fields and any("two types" in n for n in launch.notes)


def test_sglang_draft_beside_a_target_of_other_kinds():
    # DeepSeek-V2-Lite's MLA latent beside a draft: SGLang's MLA configurator's draft term was
    # not read, so the plan is refused in one line naming the draft
    spec = attach(load_model("deepseek-v2-lite-chat"), load_model("qwen3-0.6b"))
    with pytest.raises(InputError, match="mla layers beside a draft") as e:
        engine_plan("sglang", req(spec, kv_budget_bytes=8 * GiB))
    assert e.value.field == "draft"


def test_llamacpp_plan_table_prices_the_draft_in_its_own_type(capsys):
    # the plan's table (not only llama.cpp's report) keeps the draft's rows in f16 beside a
    # q8_0 target: 16,384 × 57,344 bytes for K = 896 MiB, and 252 MiB with --draft-kv q4_0
    # (18 bytes a 32 values)
    base = ["qwen3-32b", "--draft", "qwen3-0.6b", "--gpu", "4090", "--ctx", "16k", "--engine",
            "llama.cpp", "--weights", "q4_k_m", "--kv", "q8_0", "--json"]
    for extra, k_bytes in (([], 16384 * 57344), (["--draft-kv", "q4_0"], 16384 * 57344 * 18 // 64)):
        assert main(base + extra) == 0
        data = json.loads(capsys.readouterr().out)
        draft = [g for g in data["breakdown"] if g["draft"]][0]
        assert draft["k_bytes"] == k_bytes and draft["stored"].startswith("in ")
        target = [g for g in data["breakdown"] if not g["draft"]][0]
        assert target["k_bytes"] == 16384 * 64 * 8 * 128 * 34 // 32
    # vLLM keeps the draft in the target's dtype
    assert main(base[:8] + ["vllm", "--kv", "fp8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [g["k_bytes"] for g in data["breakdown"]] == [16384 * 64 * 8 * 128,
                                                         16384 * 28 * 8 * 128]


def test_speculative_decode_estimate(capsys):
    # a round: 3 draft steps and one verify step of the target; at acceptance 0.7 it yields
    # (1 - 0.7^4) / 0.3 = 2.533 tokens. Bandwidth-bound at one sequence, the verify step reads
    # what a plain step of the target reads and a draft step what the draft alone reads
    args = ["--gpu", "4090", "--ctx", "8k", "--engine", "vllm", "--json"]
    assert main(["qwen3-8b", "--draft", "qwen3-0.6b", "--acceptance", "0.7", *args]) == 0
    sp = json.loads(capsys.readouterr().out)["decode"]["speculative"]
    assert main(["qwen3-8b", *args]) == 0
    target = json.loads(capsys.readouterr().out)["decode"]
    assert main(["qwen3-0.6b", *args]) == 0
    draft = json.loads(capsys.readouterr().out)["decode"]
    assert sp["draft_tokens"] == 3
    assert sp["tokens_per_round"] == pytest.approx((1 - 0.7**4) / 0.3)
    assert sp["verify_seconds"] == pytest.approx(target["seconds_per_step"])
    assert sp["draft_step_seconds"] == pytest.approx(draft["seconds_per_step"])
    assert sp["tokens_per_s_per_sequence"] == pytest.approx(
        sp["tokens_per_round"] / (target["seconds_per_step"] + 3 * draft["seconds_per_step"]))
    assert sp["speedup"] == pytest.approx(
        sp["tokens_per_s_per_sequence"] / target["tokens_per_s_per_sequence"])
    # SGLang's --speculative-tokens counts the verified token: 5 is 4 draft steps
    assert main(["qwen3-8b", "--draft", "qwen3-0.6b", "--acceptance", "0.5",
                 "--speculative-tokens", "5", "--gpu", "h100", "--engine", "sglang",
                 "--json"]) == 0
    sp = json.loads(capsys.readouterr().out)["decode"]["speculative"]
    assert sp["draft_tokens"] == 4 and sp["tokens_per_round"] == pytest.approx(
        (1 - 0.5**5) / 0.5)
    assert main(["qwen3-8b", "--acceptance", "0.7", "--gpu", "4090"]) == 2
    assert "give the draft model too" in capsys.readouterr().err
    r = TestClient(create_app()).post("/api/v1/plan", json={
        "model": "qwen3-8b", "draft": "qwen3-0.6b", "gpu": "4090", "acceptance": 1.5})
    assert r.status_code == 422 and r.json()["field"] == "acceptance"


def test_llamacpp_draft_tokens_a_round(capsys):
    # --spec-draft-n-max is kvplan's speculative_tokens under llama.cpp with a draft: on the
    # command, in the speculative estimate's rounds, read from a launch line
    assert main(["qwen3-8b", "--draft", "qwen3-0.6b", "--engine", "llama.cpp", "--gpu", "4090",
                 "--speculative-tokens", "8", "--acceptance", "0.8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "--spec-draft-n-max 8" in data["engine_report"]["command"]
    assert data["decode"]["speculative"]["draft_tokens"] == 8
    _, fields = resolve(read_command("llama-server -m Qwen3-8B-Q4_K_M.gguf -md "
                                     "Qwen3-0.6B-Q8_0.gguf --spec-draft-n-max 8"))
    assert fields["speculative_tokens"] == 8
    _, fields = resolve(read_command("llama-server -m Qwen3-8B-Q4_K_M.gguf --spec-draft-n-max 8"))
    assert "speculative_tokens" not in fields
    assert main(["qwen3-8b", "--engine", "llama.cpp", "--gpu", "4090",
                 "--speculative-tokens", "8"]) == 2
    assert "give the draft model too" in capsys.readouterr().err


def test_find_draft_lists_the_catalogs_drafts(capsys):
    # Qwen3-32B's vocabulary is 151,936: the catalog's Qwen3 and Qwen2.5 models of that size and
    # at most a quarter of its 32.8B parameters, its own family first
    assert main(["qwen3-32b", "--find-draft", "--gpu", "h100", "--engine", "vllm", "--weights",
                 "fp8", "--ctx", "32k", "--acceptance", "0.7", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    names = [r["draft"] for r in found["drafts"]]
    assert names[0] == "qwen3-0.6b" and "qwen2.5-0.5b" in names
    assert names.index("qwen2.5-0.5b") > max(i for i, r in enumerate(found["drafts"])
                                              if r["same_family"])
    target = load_model("qwen3-32b")
    for r in found["drafts"]:
        d = load_model(r["draft"])
        assert d.vocab_size == target.vocab_size == 151936
        assert d.params.total <= target.params.total / 4
    # each row is the plan with that draft, as --draft gives it
    row = found["drafts"][0]
    assert main(["qwen3-32b", "--draft", "qwen3-0.6b", "--gpu", "h100", "--engine", "vllm",
                 "--weights", "fp8", "--ctx", "32k", "--acceptance", "0.7", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert row["max_context"] == data["max_context"] and row["fits"] == data["fits"]
    assert row["speedup"] == pytest.approx(data["decode"]["speculative"]["speedup"])
    # the table
    assert main(["qwen3-32b", "--find-draft", "--gpu", "4090", "--engine", "llama.cpp",
                 "--weights", "q4_k_m", "--draft-weights", "q8_0", "--ctx", "8k"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["draft", "family", "params"]
    assert "drafts that fit beside qwen3-32b" in out and "q8_0" in out
    assert main(["qwen3-32b", "--find-draft", "--draft", "qwen3-0.6b", "--gpu", "4090"]) == 2
    assert main(["qwen3-32b", "--find-draft", "--engine", "ollama", "--gpu", "4090"]) == 2
    assert "Ollama loads no draft model" in capsys.readouterr().err
    r = TestClient(create_app()).post("/api/v1/find-draft", json={
        "model": "llama-3.1-70b-instruct", "gpu": "h100", "gpus": 2, "engine": "vllm",
        "weights": "fp8", "context": "32k"})
    assert r.status_code == 200
    assert "llama-3.2-1b-instruct" in [d["draft"] for d in r.json()["drafts"]]
    # Llama 3 (8,192 positions) is refused: vLLM lowers max_model_len to the draft's
    assert [d["draft"] for d in r.json()["refused"]] == ["llama-3-8b-instruct"]


def test_find_draft_with_a_wrong_setting_is_one_error(capsys):
    # a draft cache type llama.cpp lacks is the question's fault, not each draft's
    assert main(["qwen3-32b", "--find-draft", "--gpu", "4090", "--engine", "llama.cpp",
                 "--weights", "q4_k_m", "--draft-kv", "q9_9"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "q9_9" in err


def test_draft_kv_under_vllm_and_sglang(pair):
    # vLLM's speculative kv_cache_dtype fp8: the draft's 28 layers at 8 × 128 × 2 bytes a token
    # = 57,344 beside the target's 147,456 in f16: 64-token blocks of 13,107,200 bytes
    fp8 = EngineSettings(draft_kv="fp8_e4m3")
    r = engine_plan("vllm", req(pair, kv_budget_bytes=8 * GiB, settings=fp8))
    assert r.blocks == 8 * GiB // (64 * (TARGET + DRAFT // 2)) == 655
    assert "\"num_speculative_tokens\": 3, \"kv_cache_dtype\": \"fp8\"}'" in r.command
    # SGLang's --speculative-draft-kv-cache-dtype: the cell still reserves 262,144 bytes, the
    # draft's pool is allocated in fp8, (N + 1) × 28,672 bytes for K
    r = engine_plan("sglang", req(pair, kv_budget_bytes=8 * GiB, settings=fp8))
    assert (r.extra["cell_bytes"], r.kv_tokens) == (TARGET + DRAFT, 32768)
    assert r.log_lines[1] == ("KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: "
                              f"32768, K size: {32769 * 28672 / GiB:.2f} GB, V size: "
                              f"{32769 * 28672 / GiB:.2f} GB")
    assert r.command.endswith("--speculative-draft-kv-cache-dtype fp8_e4m3")
    with pytest.raises(InputError, match="sized here for bf16, fp8_e4m3, fp8_e5m2") as e:
        engine_plan("sglang", req(pair, kv_budget_bytes=8 * GiB,
                                  settings=EngineSettings(draft_kv="q8_0")))
    assert e.value.field == "draft_kv"
    with pytest.raises(InputError, match="give the draft too") as e:
        engine_plan("vllm", req(load_model("qwen3-8b"), mtp=False, kv_budget_bytes=8 * GiB,
                                settings=fp8))
    assert e.value.field == "draft_kv"


def test_find_draft_needs_a_card_or_a_budget(capsys):
    # without either no draft fits or not: one line, not a crash over an absent max context
    assert main(["--find-draft", "qwen3-8b"]) == 2
    err = capsys.readouterr().err.strip()
    assert "find-draft needs a GPU (--gpu) or a KV budget" in err and len(err.splitlines()) == 1
    r = TestClient(create_app()).post("/api/v1/find-draft", json={"model": "qwen3-8b"})
    assert r.status_code == 422 and r.json()["field"] == "gpu"
    assert main(["--find-draft", "qwen3-8b", "--kv-budget", "8GiB"]) == 0
    assert "qwen3-0.6b" in capsys.readouterr().out


def test_sglang_refuses_another_vocabulary():
    # standalone_worker_v2.py _validate_vocab_compatibility: STANDALONE raises unless the
    # vocab sizes are equal, as vLLM does
    spec = attach(load_model("gpt-oss-20b"), load_model("qwen3-0.6b"))
    with pytest.raises(InputError, match="SGLang needs the draft's vocab_size to equal the "
                                         "target's: qwen3-0.6b has 151,936") as e:
        engine_plan("sglang", req(spec, kv_budget_bytes=8 * GiB))
    assert e.value.field == "draft"
    pair = attach(load_model("qwen3-8b"), load_model("qwen3-0.6b"))
    assert engine_plan("sglang", req(pair, kv_budget_bytes=8 * GiB)).kv_tokens == 32768
