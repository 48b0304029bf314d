import json
import re
import subprocess
import sys

import pytest

import kvcore
from app.cli import main


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def error_line(capsys, *args):
    """The one line of a refused command, without its "kvplan: error: " (exit 2, nothing on
    stdout)."""
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith("kvplan: error: ") and err.count("\n") == 1 and err.endswith("\n")
    return err.removeprefix("kvplan: error: ").removesuffix("\n")


def test_human_output_has_table_and_verdict(capsys):
    code, out, _ = run(capsys, "qwen3.5-27b", "--ctx", "262144", "--kv", "tbq4",
                       "--weights", "q4_k_m", "--gpu", "4090")
    assert code == 0
    assert "K (full)" in out and "state (linear)" in out and "weights" in out
    verdict = next(line for line in out.splitlines() if line.startswith("fits:"))
    assert "262,144 tokens × 1 sequence" in verdict and "of 24.0 GiB" in verdict
    assert "max context" in verdict


def test_json_contract(capsys):
    code, out, _ = run(capsys, "qwen3.5-27b", "--ctx", "256k", "--seqs", "2", "--kv-k", "q8_0",
                       "--kv-v", "tbq4", "--gpu", "h100", "--json")
    assert code == 0
    data = json.loads(out)
    for key in ("kv_bytes", "state_bytes", "weights_bytes", "total_bytes", "fits", "max_context",
                "max_sequences", "breakdown"):
        assert key in data
    assert data["kv_k"] == "q8_0" and data["kv_v"] == "tbq4"
    # 2 sequences × 262,144 tokens × 16 layers × 4 heads × (q8_0 272 B + tbq4 132 B)
    assert data["kv_bytes"] == 2 * 262_144 * 16 * 4 * (8 * 34 + 2 * 66)
    assert data["total_bytes"] == (data["kv_bytes"] + data["state_bytes"] + data["weights_bytes"]
                                   + data["overhead_bytes"])


def test_json_without_gpu(capsys):
    code, out, _ = run(capsys, "llama-3.1-8b", "--json")
    data = json.loads(out)
    assert code == 0 and data["fits"] is None and data["gpu"] is None


@pytest.mark.parametrize("cmd", ["models", "gpus", "formats", "weights"])
def test_lists(capsys, cmd):
    code, out, _ = run(capsys, cmd)
    assert code == 0 and len(out.splitlines()) > 15
    code, out, _ = run(capsys, cmd, "--json")
    assert code == 0 and len(json.loads(out)) > 15


def test_the_gpu_list_keeps_a_vendors_cards_with_enough_memory(capsys):
    code, out, _ = run(capsys, "gpus", "--vendor", "AMD", "--min-memory", "24GiB", "--json")
    items = json.loads(out)
    assert code == 0 and items
    assert all(i["vendor"] == "amd" and i["memory_bytes"] >= 24 << 30 for i in items)
    # the memory as sold: a 24 GB card whose driver shows a little less stays in
    ids = {i["id"] for i in items}
    assert "rx-7900-xtx" in ids and "rx-7900-xt" not in ids and "rx-9070" not in ids
    every = json.loads(run(capsys, "gpus", "--json")[1])
    assert ids == {i["id"] for i in every if i["vendor"] == "amd"
                   and i["memory_bytes"] >= 24 << 30}
    nvidia = json.loads(run(capsys, "gpus", "--min-memory", "24GiB", "--vendor", "nvidia",
                            "--json")[1])
    assert "rtx-4090" in {i["id"] for i in nvidia}
    table = run(capsys, "gpus", "--vendor", "amd", "--min-memory", "24GiB")[1].splitlines()
    assert table[0].split()[:2] == ["id", "name"] and len(table) == len(items) + 1
    assert run(capsys, "gpus", "--vendor", "apple", "--min-memory", "1TiB")[1].strip() == (
        "no catalog GPU of apple with at least 1TiB")


def test_the_gpu_list_and_find_gpu_keep_one_kind_of_card(capsys):
    from kvcore import find_gpu

    every = json.loads(run(capsys, "gpus", "--json")[1])
    laptops = json.loads(run(capsys, "gpus", "--segment", "Laptop", "--json")[1])
    assert [i["id"] for i in laptops] == [i["id"] for i in every if i["segment"] == "laptop"]
    assert "rtx-4090-laptop" in {i["id"] for i in laptops} and "rtx-4090" not in {
        i["id"] for i in laptops}
    assert run(capsys, "gpus", "--segment", "laptop", "--vendor", "amd")[1].strip() == (
        "no catalog laptop GPU of amd")
    args = ("qwen3-8b", "--ctx", "32k", "--weights", "q4_k_m", "--find-gpu")
    rows = json.loads(run(capsys, *args, "--segment", "laptop", "--json")[1])
    assert rows and all(find_gpu(r["gpu"]).segment == "laptop" and r["count"] == 1
                        for r in rows)
    # the same rows as the whole catalog's search has for laptop GPUs, in its order
    whole = json.loads(run(capsys, *args, "--json")[1])
    first = [r["gpu"] for r in whole if find_gpu(r["gpu"]).segment == "laptop"]
    assert [r["gpu"] for r in rows][:len(first)] == first
    assert error_line(capsys, *args, "--segment", "laptop", "--vendor", "amd") == (
        "the catalog has no laptop card of amd")


def test_the_gpu_list_keeps_the_cards_an_engine_runs_on(capsys):
    every = json.loads(run(capsys, "gpus", "--json")[1])
    for engine in ("vllm", "sglang", "trtllm", "llama.cpp"):
        kept = json.loads(run(capsys, "gpus", "--engine", engine, "--json")[1])
        assert [i["id"] for i in kept] == [i["id"] for i in every if engine in i["engines"]]
    sglang_amd = json.loads(run(capsys, "gpus", "--engine", "SGLang", "--vendor", "amd",
                                "--json")[1])
    assert {i["id"] for i in sglang_amd} == {"mi300x", "mi325x", "mi350x", "mi355x"}
    assert len(json.loads(run(capsys, "gpus", "--engine", "raw", "--json")[1])) == len(every)
    assert run(capsys, "gpus", "--engine", "trtllm", "--vendor", "apple")[1].strip() == (
        "no catalog GPU of apple that TensorRT-LLM runs on")


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "tgi"], "'tgi' is not a known engine; expected one of raw, vllm, llama.cpp, "
     "ollama, sglang, trtllm"),
    (["--vendor", "matrox"], "--vendor must be one of nvidia, amd, intel, apple; got 'matrox'"),
    (["--min-memory", "24"], "--min-memory needs its unit: 24GiB or 24GB, got '24'"),
    (["--min-memory", "-3GiB"], "--min-memory must be larger than zero, got '-3GiB'"),
    (["--segment", "desktop"], "--segment must be one of consumer, laptop, workstation, "
     "datacenter, apple; got 'desktop'"),
])
def test_a_bad_gpu_list_filter_is_one_line(capsys, args, message):
    assert error_line(capsys, "gpus", *args) == message


def test_find_gpu_keeps_to_one_makers_cards(capsys):
    from kvcore import find_gpu

    args = ("qwen3-32b", "--ctx", "32k", "--seqs", "4", "--weights", "q4_k_m", "--find-gpu")
    code, out, _ = run(capsys, *args, "--vendor", "amd", "--json")
    rows = json.loads(out)
    assert code == 0 and rows
    assert all(find_gpu(r["gpu"]).vendor == "amd" for r in rows)
    # the same rows as the whole catalog's search has for AMD's cards, in its order
    every = json.loads(run(capsys, *args, "--json")[1])
    first = [r["gpu"] for r in every if find_gpu(r["gpu"]).vendor == "amd"]
    assert [r["gpu"] for r in rows][:len(first)] == first
    text = run(capsys, *args, "--vendor", "amd")[1]
    assert f"smallest: {rows[0]['count']} × {rows[0]['name']}" in text
    # none of a maker's cards fits: said with the maker
    code, out, _ = run(capsys, "deepseek-v3", "--ctx", "128k", "--seqs", "64", "--find-gpu",
                       "--vendor", "apple")
    assert code == 0 and out.startswith("no catalog apple GPU fits 131,072 tokens × 64")


@pytest.mark.parametrize(("args", "message"), [
    (["--find-gpu", "--vendor", "via"],
     "--vendor must be one of nvidia, amd, intel, apple; got 'via'"),
    (["--vendor", "amd"], "--vendor chooses among the cards --find-gpu tries; give it with "
                          "--find-gpu (kvplan gpus --vendor lists a maker's cards)"),
    (["--segment", "laptop"], "--segment chooses among the cards --find-gpu tries; give it "
                              "with --find-gpu (kvplan gpus --segment lists one kind of card)"),
    (["--find-gpu", "--segment", "phone"], "--segment must be one of consumer, laptop, "
     "workstation, datacenter, apple; got 'phone'"),
])
def test_a_misplaced_or_unknown_find_gpu_vendor_is_one_line(capsys, args, message):
    assert error_line(capsys, "qwen3-8b", *args) == message


def test_the_formats_list_gives_k_and_v_of_a_128_wide_head(capsys):
    # vLLM's TurboQuant 4-bit preset: 64 bytes of indices + a 2-byte norm for K, 64 bytes of
    # codes + a 2-byte scale and a 2-byte zero for V; q8_0: 4 blocks of 34 bytes each
    items = {i["name"]: i for i in json.loads(run(capsys, "formats", "--json")[1])}
    assert (items["tq_4bit"]["k_row_bytes_128"], items["tq_4bit"]["v_row_bytes_128"]) == (66, 68)
    assert (items["q8_0"]["k_row_bytes_128"], items["q8_0"]["v_row_bytes_128"]) == (136, 136)
    line = next(x for x in run(capsys, "formats")[1].splitlines() if x.startswith("tq_4bit "))
    assert "66 + 68 B" in line


def test_the_formats_list_names_the_engines_and_their_flag_values(capsys):
    items = {i["name"]: i for i in json.loads(run(capsys, "formats", "--json")[1])}
    assert items["fp8_e4m3"]["engines"] == {"vllm": "fp8", "sglang": "fp8_e4m3",
                                            "trtllm": "fp8"}
    assert items["fp4_mx16"]["engines"] == {"sglang": "fp4_mx_block16"}
    assert items["uq_4bit"]["engines"] == {"vllm": "ultraquant_4bit"}
    assert items["q8_0"]["engines"] == {"llama.cpp": "q8_0", "ollama": "q8_0"}
    assert items["kivi2"]["engines"] == {}
    lines = {x.split()[0]: x for x in run(capsys, "formats")[1].splitlines()}
    assert " vllm,sglang,trtllm " in lines["nvfp4"] and " – " in lines["tbq4"]


def test_the_weight_formats_list_says_which_are_llama_quantize_mixes(capsys):
    from kvcore.gguf_mix import MIXES

    items = json.loads(run(capsys, "weights", "--json")[1])
    assert {i["name"] for i in items if i["gguf_mix"]} == set(MIXES)
    assert next(i for i in items if i["name"] == "q4_k_m")["aliases"] == ["q4_k"]
    line = next(x for x in run(capsys, "weights")[1].splitlines() if x.startswith("iq2_xs "))
    assert line.split()[:3] == ["iq2_xs", "2.40", "yes"]


@pytest.mark.parametrize(("args", "needle"), [
    (["nosuchmodel"], "not a known model"),
    (["llama-3.1-8b", "--gpu", "4091"], "did you mean"),
    (["llama-3.1-8b", "--kv", "q3"], "KV format"),
    (["llama-3.1-8b", "--ctx", "12x"], "context"),
    (["llama-3.1-8b", "--ctx", "0"], "context"),
    (["llama-3.1-8b", "--seqs", "-1"], "sequences"),
    (["llama-3.1-8b", "--weights", "q4_k_x"], "weight format"),
    (["llama-3.1-8b", "--engine", "tgi"], "engine"),
    (["llama-3.1-8b", "--hot", "f16"], "--hot"),
    (["llama-3.1-8b", "--keep", "abc"], "--keep"),
    (["llama-3.1-8b", "--nope"], "kvplan has no flag '--nope'; kvplan -h lists"),
    (["llama-3.1-8b", "--contxt", "8k"], "no flag '--contxt' (did you mean --context?)"),
    (["llama-3.1-8b", "--gpu", "rtx-4090", "32k"], "'32k' is one argument too many: kvplan "
     "takes one MODEL"),
    (["gpus", "amd"], "kvplan gpus takes no argument but its flags, not 'amd'"),
    (["gpus", "--vendr", "amd"], "(did you mean --vendor?)"),
    (["measure", "llama-3.1-8b", "x"], "'x' is one argument too many: kvplan measure"),
    (["{not json"], "not valid JSON"),
    ([], "required"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, needle):
    assert needle in error_line(capsys, *args)


@pytest.mark.parametrize(("args", "needle", "field"), [
    (["nosuchmodel", "--json"], "not a known model", "model"),
    (["llama-3.1-8b", "--kv", "q3", "--json"], "KV format", "kv_k"),
    (["llama-3.1-8b", "--json", "--ctx", "12x"], "context", None),
    (["models", "--json", "--nope"], "no flag '--nope'", None),
    (["llama-3.1-8b", "--json", "--gpus", "4090:x"], "", "gpus"),
])
def test_json_asked_errors_come_as_one_object_on_stdout_too(capsys, args, needle, field):
    code, out, err = run(capsys, *args)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("kvplan: error:")
    data = json.loads(out)
    assert data == {"ok": False, "error": err.strip().removeprefix("kvplan: error: "),
                    "exit_code": 2, "field": data["field"]}
    assert needle in data["error"]
    if field is not None:
        assert data["field"] == field


@pytest.mark.parametrize(("args", "needle"), [
    # argparse took vLLM's --kv-cache-dtype as --kv-cache-dtype-skip-layers abbreviated
    (["--kv-cache-dtype", "fp8"], "--kv-cache-dtype is a flag of vLLM and SGLang; kvplan's is "
     "--kv (or plan the whole launch line: --command 'vllm serve …')"),
    (["--max-model-len=8k"], "--max-model-len is a flag of vLLM; kvplan's is --ctx"),
    (["-c", "8192"], "-c is a flag of llama.cpp; kvplan's is --ctx (or plan the whole launch "
     "line: --command 'llama-server …')"),
    (["-np", "4"], "kvplan's is --seqs"),
    (["--max_batch_size", "8"], "--max_batch_size is a flag of TensorRT-LLM; kvplan's is --seqs"),
    (["--tp-size", "2"], "a flag of SGLang and TensorRT-LLM; kvplan's is --tp"),
])
def test_an_engines_flag_is_answered_with_kvplans(capsys, args, needle):
    assert needle in error_line(capsys, "llama-3.1-8b", "--gpu", "rtx-4090", *args)


def test_an_engines_flag_under_measure_names_measures_own(capsys):
    assert error_line(capsys, "measure", "llama-3.1-8b", "-c", "8k") == (
        "-c is a flag of llama.cpp; kvplan measure's is --ctx")


def test_kvplans_own_flags_are_no_engines(capsys):
    # --kv-cache-dtype-skip-layers is vLLM's too, and kvplan's: no hint stops it
    code, out, _ = run(capsys, "llama-3.1-8b", "--engine", "vllm", "--kv", "fp8",
                       "--kv-cache-dtype-skip-layers", "0", "--json")
    assert code == 0 and json.loads(out)["model"]


def test_plan_is_the_default_commands_name(capsys):
    named = run(capsys, "plan", "llama-3.1-8b", "--gpu", "rtx-4090", "--json")
    plain = run(capsys, "llama-3.1-8b", "--gpu", "rtx-4090", "--json")
    assert named[0] == 0 and named == plain


def test_json_after_a_double_dash_is_no_flag(capsys):
    code, out, err = run(capsys, "--", "--json")
    assert code == 2 and out == "" and "--json" in err


def test_console_script_exit_code_and_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "app.cli", "llama-3.1-8b", "--ctx", "-3"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("kvplan: error:")


def test_local_config_file(tmp_path, capsys):
    from kvcore import model_catalog
    entry = next(e for e in model_catalog() if e.id == "qwen3-8b")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(entry.config()))
    code, out, _ = run(capsys, str(tmp_path), "--json")
    assert code == 0 and json.loads(out)["bytes_per_token"] == 36 * 8 * 256 * 2


def test_engine_output(capsys):
    code, out, _ = run(capsys, "llama-3.1-70b", "--ctx", "32k", "--seqs", "8", "--gpus", "2",
                       "--gpu", "h100", "--engine", "vllm")
    assert code == 0
    assert "engine vllm, tp 2 × pp 1 × dp 1" in out
    assert "vllm would print:" in out and "Available KV cache memory:" in out
    assert "command: vllm serve meta-llama/Llama-3.1-70B" in out
    assert "--tensor-parallel-size 2" in out


def test_engine_json_top_level_follows_engine(capsys):
    code, out, _ = run(capsys, "qwen3-8b", "--ctx", "32k", "--gpu", "4090", "--engine", "sglang",
                       "--json")
    data = json.loads(out)
    assert code == 0 and data["engine"] == "sglang"
    assert data["fits"] == data["engine_report"]["fits"]
    assert data["max_context"] == data["engine_report"]["max_context"]


def test_sglang_max_total_tokens_from_the_cli_and_the_api(capsys):
    code, out, _ = run(capsys, "qwen3-8b", "--ctx", "8k", "--gpu", "h100", "--engine", "sglang",
                       "--max-total-tokens", "20000", "--json")
    data = json.loads(out)
    assert code == 0 and data["engine_report"]["kv_tokens"] == 20000
    assert data["max_sequences"] == 2
    assert "--max-total-tokens 20000" in data["engine_report"]["command"]
    from fastapi.testclient import TestClient

    from app.web import create_app

    c = TestClient(create_app())
    body = {"model": "qwen3-8b", "context": 8192, "gpu": "h100", "engine": "sglang",
            "max_total_tokens": 20000}
    assert c.post("/api/v1/plan", json=body).json()["engine_report"]["kv_tokens"] == 20000
    r = c.post("/api/v1/plan", json={**body, "max_total_tokens": 0})
    assert r.status_code == 422 and "max_total_tokens" in r.text
    # another engine does not read it: an error, not a setting dropped without a word
    code, _, err = run(capsys, "qwen3-8b", "--gpu", "4090", "--engine", "vllm",
                       "--max-total-tokens", "20000")
    assert code == 2 and "max_total_tokens" in err and len(err.strip().splitlines()) == 1


def test_kv_budget(capsys):
    code, out, _ = run(capsys, "qwen3-235b-a22b", "--tp", "4", "--engine", "vllm",
                       "--kv-budget", "8.11GiB", "--ctx", "40960")
    assert code == 0 and "GPU KV cache size: 180,928 tokens" in out


def test_find_gpu_and_format(capsys):
    code, out, _ = run(capsys, "llama-3.1-8b", "--ctx", "128k", "--seqs", "4", "--find-gpu")
    assert code == 0 and "\nsmallest: 1 × " in out
    code, out, _ = run(capsys, "qwen3.5-27b", "--ctx", "256k", "--gpu", "4090", "--weights",
                       "q4_k_m", "--engine", "llama.cpp", "--find-format")
    assert code == 0 and ("best format that fits 262,144 tokens × 1 sequence on NVIDIA GeForce "
                          "RTX 4090 under llama.cpp, weights q4_k_m: q5_1") in out
    # each format with the decode estimate its own plan gives: fewer bytes, more tokens/s
    ask = ("qwen3.5-27b", "--ctx", "256k", "--gpu", "4090", "--weights", "q4_k_m", "--engine",
           "llama.cpp")
    rows = json.loads(run(capsys, *ask, "--find-format", "--json")[1])
    q4 = next(r for r in rows if r["format"] == "q4_0")
    plan = json.loads(run(capsys, *ask, "--kv", "q4_0", "--json")[1])
    assert q4["tokens_per_s_per_sequence"] == plan["decode"]["tokens_per_s_per_sequence"]
    f16 = next(r for r in rows if r["format"] == "f16")
    assert f16["tokens_per_s_per_sequence"] < q4["tokens_per_s_per_sequence"]


def test_find_weights_table(capsys):
    ask = ("llama-3.1-70b-instruct", "--ctx", "16k", "--gpu", "4090", "--kv", "q8_0",
           "--engine", "llama.cpp")
    code, out, _ = run(capsys, *ask, "--find-weights")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["weights", "bits/weight", "size", "fits", "max", "context",
                                "tok/s/seq", "in", "host", "+PPL"]
    assert ("largest weights that fit 16,384 tokens × 1 sequence on NVIDIA GeForce RTX 4090 "
            "under llama.cpp, KV q8_0: iq2_xs (19.7 GiB)") in out
    # a row that does not fit gives the rate llama-server's --fit reaches, and what it keeps
    # in host memory; a row that fits, its own rate and none there
    q4 = next(line for line in lines if line.startswith("q4_k_m "))
    assert "(--fit)" in q4 and q4.split()[-1] == "+0.1754" and q4.split()[4] == "no"
    iq2 = next(line for line in lines if line.startswith("iq2_xs "))
    assert "(--fit)" not in iq2 and iq2.split()[4] == "yes" and iq2.split()[-2:] == ["–", "–"]
    # each row is the plan under those weights: its decode rate is the plan's
    rows = json.loads(run(capsys, *ask, "--find-weights", "--json")[1])
    row = next(r for r in rows if r["weights"] == "iq2_xxs")
    plan = json.loads(run(capsys, *ask, "--weights", "iq2_xxs", "--json")[1])
    assert row["tokens_per_s_per_sequence"] == plan["decode"]["tokens_per_s_per_sequence"]
    assert row["weights_bytes"] == plan["weights_bytes"] and row["fits"] is plan["fits"]


def test_vllm_cpu_offload(capsys):
    ask = ("llama-3.1-8b", "--engine", "vllm", "--gpu", "3060", "--ctx", "12k")
    code, out, _ = run(capsys, *ask)
    assert code == 0 and "does not fit under vllm" in out
    code, out, _ = run(capsys, *ask, "--cpu-offload-gb", "7")
    assert code == 0 and "\nfits under vllm: 12,288 tokens × 1 sequence;" in out
    assert "--cpu-offload-gb 7\n" in out
    row = next(line for line in out.splitlines()
               if line.startswith("weights in host (--cpu-offload-gb)"))
    assert row.split()[-2:] == ["7.2", "GiB"]
    assert ("note: --cpu-offload-gb 7: 7.2 GiB of the weights (layers 0–17, whole parameters "
            "from the first on) in pinned host memory") in out
    decode = next(line for line in out.splitlines() if line.startswith("decode ≈"))
    assert ("of --cpu-offload-gb weights from host memory over its PCIe 4.0 x16 at 25.4 GB/s "
            "(81% of the link's rate, as an H200 measured)") in decode
    code, _, err = run(capsys, "llama-3.1-8b", "--engine", "llama.cpp", "--cpu-offload-gb", "6")
    assert code == 2 and "cpu_offload_gb is a setting of vLLM" in err
    code, _, err = run(capsys, *ask, "--cpu-offload-gb", "-1")
    assert code == 2 and err.startswith("kvplan: error: cpu_offload_gb must be GiB from 0")


def test_find_gpu_names_the_flag_that_plans_its_answer(capsys):
    # the smallest rig, spelled as --gpu takes it (4xh200), plans as fitting
    ask = ("qwen3-235b-a22b", "--ctx", "32k", "--seqs", "8", "--engine", "vllm")
    code, out, _ = run(capsys, *ask, "--find-gpu")
    m = re.search(r"^smallest: (\d+) × .* \(--gpu (\S+)\) for ", out, re.M)
    assert code == 0 and m is not None
    count, flag = int(m.group(1)), m.group(2)
    assert count > 1 and flag.startswith(f"{count}x")
    code, out, _ = run(capsys, *ask, "--gpu", flag, "--json")
    data = json.loads(out)
    assert code == 0 and data["fits"] and data["parallel"]["gpus"] == count
    # each rig with the decode estimate its plan gives
    code, out, _ = run(capsys, *ask, "--find-gpu", "--json")
    rows = json.loads(out)
    first = rows[0]
    assert first["tokens_per_s_per_sequence"] == pytest.approx(
        data["decode"]["tokens_per_s_per_sequence"])
    assert "query" not in first


def test_cards_given_as_sizes_are_named_as_typed(capsys):
    code, out, _ = run(capsys, "llama-3.1-70b", "--ctx", "32k", "--gpus", "4090,48GiB",
                       "--engine", "llama.cpp")
    assert code == 0 and "engine llama.cpp, tp 1 × pp 2 × dp 1 on rtx-4090, custom 48GiB\n" in out
    code, out, _ = run(capsys, "llama-3.1-70b", "--ctx", "32k", "--gpu", "2x24GB", "--json")
    data = json.loads(out)
    assert data["gpus"] == ["custom-24000000000"] and data["gpu_names"] == ["custom 24GB"]


def test_a_mac_in_its_memory_size_plans_on_what_metal_may_wire(capsys):
    code, out, _ = run(capsys, "qwen3-8b", "--gpu", "m3 max 36gb", "--engine", "llama.cpp",
                       "--json")
    data = json.loads(out)
    assert code == 0 and data["gpu"]["id"] == "m3-max-36gb"
    assert data["gpu"]["usable_bytes"] == 27 << 30
    assert any("may use 75% of unified memory" in n for n in data["notes"])


def test_find_model_lists_what_fits_largest_first_and_each_plans_as_listed(capsys):
    ask = ("--gpu", "4090", "--ctx", "32k", "--weights", "q4_k_m", "--engine", "llama.cpp")
    code, out, _ = run(capsys, "--find-model", *ask, "--json")
    found = json.loads(out)
    assert code == 0 and set(found) == {"fits", "untrained", "shorter", "too_big", "refused"}
    # every catalog model but the EAGLE heads, which draft for a target
    models = [e for e in kvcore.model_catalog() if not e.head_of]
    assert sum(len(v) for v in found.values()) == len(models) == len(kvcore.model_catalog()) - 2
    fits = found["fits"]
    assert fits and [r["params"] for r in fits] == sorted((r["params"] for r in fits), reverse=True)
    # every row is the plan of that model: it fits, and its max context is the plan's
    for row in (fits[0], fits[-1], *found["shorter"][:1], *found["too_big"][:1]):
        code, out, _ = run(capsys, row["model"], *ask, "--json")
        plan = json.loads(out)
        assert (plan["fits"], plan["max_context"]) == (row["fits"], row["max_context"]), row
        # and its speed the plan's decode estimate
        assert row["tokens_per_s_per_sequence"] == plan["decode"]["tokens_per_s_per_sequence"]
    # trained for fewer positions than asked: listed apart, not among those that fit
    assert all(r["trained_positions"] < 32768 for r in found["untrained"])
    assert all(not r["trained_positions"] or r["trained_positions"] >= 32768 for r in fits)
    assert {r["model"] for r in found["refused"]} >= {"llama-3.2-11b-vision-instruct"}
    code, out, _ = run(capsys, "--find-model", *ask)
    lines = out.strip().splitlines()
    assert lines[0].split()[:2] == ["model", "params"] and lines[1].split()[0] == fits[0]["model"]
    assert lines[0].split()[-1] == "tok/s/seq"
    assert lines[1].split()[-1] == f"{fits[0]['tokens_per_s_per_sequence']:,.1f}"
    # the positions each was trained for beside its max context
    assert "max context  trained for" in lines[0]
    assert lines[1].split()[-3:-1] == [f"{fits[0]['max_context']:,}",
                                       f"{fits[0]['trained_positions']:,}"]
    assert (f"{len(fits)} of {len(models)} catalog models fit 32,768 tokens × 1 "
            "sequence on NVIDIA GeForce RTX 4090 under llama.cpp, weights q4_k_m, KV f16") in out


def test_a_plan_laid_over_cards_without_a_card_names_the_smallest_in_that_layout(capsys):
    # --tp 2 --pp 2 without a card used to name a card count of its own (one card, tensor
    # parallel), which the given layout contradicts
    ask = ("llama-3.1-8b", "--ctx", "1M", "--engine", "vllm", "--tp", "2", "--pp", "2")
    code, out, _ = run(capsys, *ask)
    found = [t for t in out.splitlines() if t.startswith("smallest card that fits it as ")]
    assert code == 0 and len(found) == 1, out
    line = found[0]
    assert line.startswith("smallest card that fits it as tp 2 × pp 2: 4 × ")
    card = line.rsplit("(--gpu ", 1)[1].rstrip(")")
    # that card fits in that layout, and it is the smallest of those that do
    code, out, _ = run(capsys, *ask, "--gpu", card, "--json")
    assert code == 0 and json.loads(out)["fits"] is True
    assert json.loads(out)["parallel"] == {"tp": 2, "pp": 2, "dp": 1, "attn_dp": 1, "gpus": 4}
    size = kvcore.find_gpu(card).memory_bytes
    for gpu in kvcore.gpu_catalog():
        if gpu.memory_bytes < size and gpu.max_cards >= 4:
            code, out, _ = run(capsys, *ask, "--gpu", gpu.id, "--json")
            assert code != 0 or json.loads(out)["fits"] is False, gpu.id
    # a layout no card fits says so with its card count
    code, out, _ = run(capsys, "llama-3.1-405b", "--ctx", "128k", "--engine", "vllm", "--tp", "2")
    assert "no catalog card fits it as tp 2 × pp 1 (2 cards of one kind)" in out


def test_plan_without_a_card_names_the_smallest_that_fits(capsys):
    ask = ("deepseek-v3", "--ctx", "128k", "--seqs", "4", "--engine", "vllm", "--kv", "fp8")
    code, out, _ = run(capsys, *ask, "--find-gpu", "--json")
    best = json.loads(out)[0]
    code, out, _ = run(capsys, *ask)
    flag = f"{best['count']}x{best['gpu']}" if best["count"] > 1 else best["gpu"]
    line = (f"smallest card that fits: {best['count']} × {best['name']} (--gpu {flag}); "
            "--find-gpu lists more")
    lines = out.rstrip().splitlines()
    # after the verdict and the estimates, before the notes
    assert code == 0 and line in lines
    assert lines.index(line) == max(i for i, t in enumerate(lines)
                                    if not t.startswith("note: ")), lines
    # and the plan on that card fits
    code, out, _ = run(capsys, *ask, "--gpu", flag, "--json")
    assert code == 0 and json.loads(out)["fits"] is True
    # --json stays one object; too large for any card says so
    code, out, _ = run(capsys, *ask, "--json")
    assert json.loads(out)["gpu"] is None
    code, out, _ = run(capsys, "kimi-k2-instruct", "--ctx", "1M", "--seqs", "64")
    assert "\nno catalog card fits it, up to 8 of one kind\nnote: " in out
    # a plan on several cards names none (it was given them) and says what makes it fit
    code, out, _ = run(capsys, "deepseek-v3", "--gpu", "2xh200", "--ctx", "128k", "--seqs", "4",
                       "--weights", "fp8")
    assert "smallest card" not in out and "no catalog card" not in out
    assert "\nto fit: --weights q2_k_s fits (max context 132,172" in out
    lines = out.splitlines()  # right after the engine's verdict
    at = next(i for i, line in enumerate(lines) if line.startswith("to fit: "))
    assert lines[at - 1].startswith("does not fit under raw: 131,072 tokens × 4 sequences")


def test_find_model_names_the_cards_it_fitted_on(capsys):
    code, out, _ = run(capsys, "--find-model", "--gpus", "2x4090,3090", "--engine", "llama.cpp",
                       "--weights", "q4_k_m")
    assert code == 0 and ("on 2 × NVIDIA GeForce RTX 4090 + NVIDIA GeForce RTX 3090 under "
                          "llama.cpp") in out
    code, out, _ = run(capsys, "--find-model", "--gpu", "m3 max 36gb", "--engine", "llama.cpp")
    assert code == 0 and "on Apple M3 Max (36GB, 30-core GPU) under llama.cpp" in out


def test_find_model_with_words_tries_the_models_they_name(capsys):
    ask = ("--find-model", "--gpu", "4090", "--ctx", "32k", "--engine", "llama.cpp",
           "--weights", "q4_k_m")
    code, out, _ = run(capsys, "gemma 3", *ask, "--json")
    found = json.loads(out)
    assert code == 0 and sorted(r["model"] for rows in found.values() for r in rows) == [
        "gemma-3-1b-it", "gemma-3-27b-it", "gemma-3-4b-it"]
    code, out, _ = run(capsys, "gemma 3", *ask)
    assert (f"{len(found['fits'])} of 3 catalog models matching 'gemma 3' fit 32,768 tokens × 1 "
            "sequence on NVIDIA GeForce RTX 4090 under llama.cpp") in out


@pytest.mark.parametrize(("flags", "words"), [
    (["no-such-model", "--find-model", "--gpu", "4090"],
     "no catalog model matches 'no-such-model': 'such' is in no model's name; 'model' is in "
     "no model's name; --find-model takes words of the models' names"),
    # a word in no model's name is named with the nearest word that is
    (["deepsek", "--find-model", "--gpu", "4090"], "no catalog model matches 'deepsek': "
     "'deepsek' is in no model's name (did you mean deepseek?); --find-model takes words"),
    (["--find-model"], "--find-model needs a GPU (--gpu) or a KV budget"),
    (["--find-model", "--gpus", "2"], "--find-model needs a GPU (--gpu) or a KV budget"),
    (["--find-model", "--find-gpu", "--gpu", "4090"], "ask different questions; give one"),
    (["--find-model", "--gpu", "4099"], "'4099' is not a known GPU"),
    (["--find-model", "--gpu", "4090", "--engine", "llama.cpp", "--kv", "nvfp4"],
     "llama.cpp has no nvfp4 KV cache"),
    ([], "a model is required"),
])
def test_find_model_refuses_what_it_cannot_ask(capsys, flags, words):
    assert words in error_line(capsys, *flags)


def test_find_tables_say_what_they_assumed_and_note_the_trained_context(capsys):
    # find-gpu named neither the weights nor the KV format it sized, nor said that 1M is past
    # what qwen3-8b was trained for
    code, out, _ = run(capsys, "qwen3-8b", "--ctx", "1M", "--kv", "q8_0", "--find-gpu")
    lines = out.strip().splitlines()
    assert code == 0 and lines[-2].startswith("smallest: 1 × ")
    assert lines[-2].endswith("for 1,048,576 tokens × 1 sequence under raw, weights bf16 (the "
                              "checkpoint's), KV q8_0")
    assert lines[-1] == ("note: 1,048,576 tokens is past the 40,960 positions the model was "
                         "trained for")
    code, out, _ = run(capsys, "qwen3-8b", "--ctx", "1M", "--gpu", "h100", "--find-format")
    assert code == 0 and out.strip().splitlines()[-1] == lines[-1]
    code, out, _ = run(capsys, "qwen3-8b", "--ctx", "1M", "--find-gpu", "--json")
    assert json.loads(out)[0]["notes"] == [lines[-1].removeprefix("note: ")]


@pytest.mark.parametrize(("flags", "named"), [
    (["--kv", "q8_0"], "--kv"), (["--kv-k", "q8_0", "--kv-v", "q4_0"], "--kv-k, --kv-v")])
def test_find_format_refuses_a_kv_format_it_would_drop(capsys, flags, named):
    # --kv beside --find-format was dropped without a word
    assert error_line(capsys, "qwen3-8b", "--gpu", "4090", *flags, "--find-format") == (
        f"--find-format tries every KV format for K and V; leave out {named}")


@pytest.mark.parametrize(("args", "needle"), [
    (["qwen3-8b", "--gpus", "4090,3090,3060", "--tp", "2"], "tp × pp"),
    (["qwen3-8b", "--engine", "vllm", "--gpu", "h100", "--kv", "tbq4"], "vllm has no tbq4"),
    (["qwen3-8b", "--engine", "llama.cpp", "--gpu", "4090", "--weights", "awq"], "GGUF"),
    (["qwen3-8b", "--tp", "0"], "tp"),
    (["qwen3-8b", "--find-format"], "needs a GPU"),
    (["qwen3-8b", "--find-weights"], "needs a GPU"),
    (["qwen3-8b", "--find-weights", "--kv-budget", "8GiB"], "a KV budget is the cache"),
    (["qwen3-8b", "--find-weights", "--gpu", "4090", "--kv-budget", "8GiB"],
     "leave out the KV budget"),
    (["qwen3-8b", "--find-weights", "--gpu", "4090", "--weights", "q4_k_m"],
     "--find-weights tries every weight format; leave out --weights"),
    (["qwen3-8b", "--find-weights", "--find-format", "--gpu", "4090"],
     "--find-format and --find-weights ask different questions; give one"),
])
def test_engine_errors(capsys, args, needle):
    assert needle in error_line(capsys, *args)


@pytest.mark.parametrize(("arg", "needle"), [
    ("[" * 5000, "nested too deeply"),
    ("a" * 5000, "not a known model"),
    ("ab/" * 3000, "not a known model"),
    ("[]", "must be a JSON object"),
    ('"qwen3-8b"', "must be a JSON object"),
])
def test_model_argument_that_is_no_path_is_one_line(capsys, arg, needle):
    assert needle in error_line(capsys, arg)


def test_unreadable_config_file_is_one_line(tmp_path, capsys, monkeypatch):
    from pathlib import Path

    path = tmp_path / "config.json"
    path.write_text("{}")

    def refuse(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", refuse)
    assert error_line(capsys, str(path)) == f"cannot read '{path}': Permission denied"


@pytest.mark.parametrize(("args", "line"), [
    (["qwen3-8b", "--engine", "x"],
     "'x' is not a known engine; expected one of raw, vllm, llama.cpp, ollama, sglang, trtllm"),
    (["qwen3-8b", "--weights", "q9"],
     "'q9' is not a known weight format; expected one of auto, f32, f16, bf16, fp8, int8, int4, "
     "nf4, nf4_dq, int3, int2, nvfp4, mxfp4, mxfp4_moe, fp8_mxfp4_moe, q8_0, q6_k, q5_k_m, q5_k_s, q5_1, q5_0, q4_1, "
     "q4_k_m, q4_k_s, q4_0, iq4_nl, iq4_xs, q3_k_l, q3_k_m, iq3_m, q3_k_s, iq3_s, iq3_xs, "
     "iq3_xxs, q2_k, q2_k_s, iq2_m, iq2_s, iq2_xs, iq2_xxs, iq1_m, iq1_s"),
    # suggestions are names the user can type back, each card or model once
    (["qwen3-8b", "--gpu", "h100-94"],
     "'h100-94' is not a known GPU; did you mean 'h100-nvl' or 'h100-sxm' or 'a100-40gb'?"),
    (["qwen3-8b", "--gpu", "24XB"], "'24XB' is no memory size: its unit must be one of B, KB, "
     "MB, GB, TB, KiB, MiB, GiB or TiB, like 24GiB (a catalog GPU is a name, like 4090 or h100)"),
    (["https://huggingface.co/datasets/Qwen/Qwen3-8B"],
     "'https://huggingface.co/datasets/Qwen/Qwen3-8B' is the Hub address of a dataset, not of a "
     "model (a model is https://huggingface.co/OWNER/NAME or OWNER/NAME)"),
])
def test_unknown_names_point_at_real_names(capsys, args, line):
    assert error_line(capsys, *args) == line


@pytest.mark.parametrize("tokens", ["-1", "65"])
def test_speculative_tokens_out_of_range(capsys, tokens):
    # -1 used to be taken, and planned fewer state pages than no speculation at all
    assert error_line(capsys, "qwen3.5-27b", "--engine", "vllm", "--gpu", "h100",
                      "--speculative-tokens", tokens) == (
        f"speculative_tokens must be between 0 and 64, got {tokens}")


@pytest.mark.parametrize("extra", [[], ["--find-gpu"]])
@pytest.mark.parametrize(("args", "line"), [
    (["qwen3-8b", "--engine", "vllm", "--kv", "q8_0"],
     "vllm has no q8_0 KV cache; its formats are bf16, f16, fp8_e4m3, fp8_e5m2, fp8_pth, "
     "int4_pth, int8_pth, nvfp4, nvfp4_4over6, tq_3bit, tq_4bit, tq_k3v4, tq_k8v4, uq_4bit"),
    (["llama-3.2-11b-vision-instruct", "--engine", "llama.cpp"],
     "llama.cpp does not run cross-attention (Mllama) models"),
    # vLLM's registry lists these as previously supported; SGLang has no lightning attention
    (["llama-3.2-11b-vision-instruct", "--engine", "vllm"],
     "vLLM does not run MllamaForConditionalGeneration: removed after vLLM 0.10.2; SGLang "
     "runs it, or pin vllm==0.10.2"),
    (["minimax-m1-80k", "--engine", "vllm"],
     "vLLM does not run MiniMaxM1ForCausalLM: removed after vLLM 0.23.0; llama.cpp runs it, "
     "or pin vllm==0.23.0"),
    (["minimax-m1-80k", "--engine", "sglang"],
     "SGLang does not run MiniMaxM1ForCausalLM: no SGLang model implements lightning "
     "attention; vllm==0.23.0 or llama.cpp runs it"),
])
def test_engine_refusal_without_a_card(capsys, args, line, extra):
    # no --gpu: the plan used to drop the engine's rules; --find-gpu said no GPU fits
    assert error_line(capsys, *args, *extra) == line


@pytest.mark.parametrize(("args", "line"), [
    (["--find-gpu", "--find-format", "--gpu", "4090"], "--find-gpu and --find-format ask different questions; give one"),
    (["--find-gpu", "--gpu", "4090"],
     "--find-gpu chooses the card, how many and their layout, and sizes the KV pool on each; "
     "leave out --gpu"),
    (["--find-gpu", "--gpus", "2", "--tp", "2"],
     "--find-gpu chooses the card, how many and their layout, and sizes the KV pool on each; "
     "leave out --gpus, --tp"),
    # a budget an engine printed on some card: every card used to show the same max context,
    # even those too small for the weights
    (["--find-gpu", "--kv-budget", "8GiB"],
     "--find-gpu chooses the card, how many and their layout, and sizes the KV pool on each; "
     "leave out --kv-budget"),
    # data-parallel replicas were dropped: the cards found held one replica
    (["--find-gpu", "--dp", "2"],
     "--find-gpu chooses the card, how many and their layout, and sizes the KV pool on each; "
     "leave out --dp"),
])
def test_find_gpu_conflicts(capsys, args, line):
    # each of these was dropped without a word: the answer ignored what was asked
    assert error_line(capsys, "qwen3-8b", *args) == line


@pytest.mark.parametrize("flag", ["--kv", "--kv-k", "--kv-v", "--weights", "--gpu", "--gpus",
                                  "--tp", "--pp", "--kv-budget", "--overhead", "--offload",
                                  "--hot", "--keep", "--ctx"])
def test_an_empty_value_is_refused_not_defaulted(capsys, flag):
    # `--gpu "$GPU"` with GPU unset used to plan with no card at all
    assert error_line(capsys, "qwen3-8b", flag, "") == (
        f"{flag} needs a value, got an empty string")


@pytest.mark.parametrize(("kv", "expected"), [
    (5, "'num_key_value_heads' must divide num_attention_heads (32) evenly"),
    (64, "'num_key_value_heads' must be at most num_attention_heads (32), got 64"),
])
def test_config_with_kv_heads_that_do_not_group_is_refused(capsys, tmp_path, kv, expected):
    from kvcore import model_catalog

    cfg = next(e for e in model_catalog() if e.id == "llama-3.1-8b").config()
    cfg["num_key_value_heads"] = kv
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    for ref in (str(path), json.dumps(cfg)):
        line = error_line(capsys, ref, "--gpu", "4090")
        assert line.startswith("config.json field ") and expected in line


def test_counts_are_grouped_and_agree_in_number(capsys):
    cfg = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64,
           "num_attention_heads": 1, "num_key_value_heads": 1, "vocab_size": 10}
    code, out, _ = run(capsys, json.dumps(cfg), "--ctx", "1", "--seqs", "1000000",
                       "--gpu", "h200")
    assert code == 0
    assert out.startswith("config (llama, 1 layer: 1 full)\n")
    assert "1 full layer × 1 KV head × 64; 1 token each" in out
    assert "fits: 1 token × 1,000,000 sequences uses " in out
    assert "max sequences at 1 token 1,000,000" in out
    decode = next(line for line in out.splitlines() if line.startswith("decode"))
    per_seq, total = (float(x.replace(",", "")) for x in
                      re.findall(r"≈ ([\d,.]+) tokens/s per sequence \(([\d,.]+) total\)", decode)[0])
    assert total > 1e9 and f"({total:,.1f} total)" in decode and f"{per_seq:,.1f}" in decode
    code, out, _ = run(capsys, "llama-3.1-8b", "--ctx", "1", "--gpu", "4090", "--engine", "vllm")
    # the max context is vLLM's at that --max-model-len (its batched-token default, and so its
    # activation peak, follows the context), not at 1 token's: at 1 token 888 blocks of 64
    # tokens, each a request of one block
    assert "fits under vllm: 1 token × 1 sequence; max context 55,232, concurrency 888.00 at " \
           "1 token" in out


@pytest.mark.parametrize(("context", "sequences", "line"), [
    (4096, 2, "gpt-oss-20b · K tbq4 / V tbq4 · 4,096 tokens × 2 sequences on cpu"),
    (1, 1, "gpt-oss-20b · K tbq4 / V tbq4 · 1 token × 1 sequence on cpu"),
])
def test_measurement_line_names_its_counts(context, sequences, line):
    from app.cli import render_measurement

    d = {"model": "gpt-oss-20b", "kv_k": "tbq4", "kv_v": "tbq4", "context": context,
         "sequences": sequences, "device": "cpu", "predicted_bytes": 1 << 20,
         "allocated_bytes": 1 << 20, "layers_measured": 24, "layers_total": 24,
         "allocator_bytes": None, "decode": {}}
    assert render_measurement(d).splitlines()[0] == line


def test_gpu_given_as_a_bare_number_asks_for_a_unit(capsys):
    assert error_line(capsys, "llama-3.1-8b", "--gpu", "24") == (
        "'24' has no unit; a memory size needs one, like 24GiB or 24GB (a catalog GPU is a "
        "name, like 4090 or h100)")


@pytest.mark.parametrize(("args", "expected"), [
    (['{"model_type": "llama", "num_hidden_layers": 1e308, "hidden_size": 64, '
      '"num_attention_heads": 1, "vocab_size": 10}'],
     "config.json field 'num_hidden_layers' must be between 1 and 4,096, got 1e+308"),
    (["llama-3.1-8b", "--engine", "vllm", "--block-size", "9" * 300],
     "block_size must be a whole number from 1 to 16,777,216, got 9.99e+299"),
    (["llama-3.1-8b", "--gpu", "x" * 5000],
     "'" + "x" * 100 + "'… (5,000 characters) is not a known GPU (see `kvplan gpus` for the list)"),
    (["llama-3.1-8b", "--hot", "q" * 5000],
     "--hot must look like f16:4096, got '" + "q" * 40 + "'… (5,000 characters)"),
])
def test_huge_values_are_shown_short_in_errors(capsys, args, expected):
    assert error_line(capsys, *args) == expected


def test_help_names_every_subcommand(capsys):
    from app.cli import SUBCOMMANDS

    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    epilog = " ".join(out.split("Other commands:")[1].split())
    for cmd in SUBCOMMANDS:
        assert f"kvplan {cmd}" in epilog or f"|{cmd}" in epilog or f"{cmd}|" in epilog, cmd
    assert "kvplan measure MODEL" in epilog


@pytest.mark.parametrize(("args", "expected"), [
    (["--gpu", "-24GiB"], "a GPU's memory must be larger than zero, got '-24GiB'"),
    (["--gpu", "-24"], "a GPU's memory must be larger than zero, got '-24'"),
    (["--gpus", "4090,-24GiB"], "a GPU's memory must be larger than zero, got '-24GiB'"),
    (["--ctx", "-8k"], "context must be at least 1, got -8,192"),
    (["--context", "-8k"], "context must be at least 1, got -8,192"),
    (["--seqs", "-2"], "sequences must be between 1 and 1,000,000, got -2"),
    (["--gpus", "-2"], "gpus must be between 1 and 1,024, got -2"),
    (["--tp", "-2", "--gpu", "h100"], "tp must be between 1 and 1,024, got -2"),
    (["--kv-budget", "-8GiB"], "kv_budget must be larger than zero, got '-8GiB'"),
    (["--engine", "vllm", "--offload", "-1GiB"], "offload must be larger than zero, got '-1GiB'"),
    (["--overhead", "-1.5GiB"], "overhead must be 0 or more, got '-1.5GiB'"),
    (["--hot", "f16:-4k"], "hot must be at least 1, got -4,096"),
    (["--keep-first", "-1"], "keep_first must be between 0 and 1,000,000, got -1"),
])
def test_dash_leading_values_get_their_own_error(capsys, args, expected):
    assert error_line(capsys, "llama-3.1-8b", *args) == expected


@pytest.mark.parametrize(("args", "expected"), [
    (["--block-size", "abc"], "--block-size takes a whole number, not 'abc'"),
    (["--block-size", "-1e3"], "--block-size takes a whole number, not '-1e3'"),
    (["--gpu-memory-utilization", "x9"], "--gpu-memory-utilization takes a number, not 'x9'"),
    (["--ubatch", "x" * 500], "--ubatch takes a whole number, not 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
])
def test_typed_flags_say_what_they_take(capsys, args, expected):
    assert error_line(capsys, "llama-3.1-8b", *args).startswith(expected)


@pytest.mark.parametrize("args", [["--gpu"], ["--gpu", "--json"], ["--gpu", "-h"]])
def test_a_flag_with_no_value_is_still_argparse_s_error(capsys, args):
    # an option after a flag is an option, not the flag's value
    code, _, err = run(capsys, "llama-3.1-8b", *args)
    assert code == 2 and err == "kvplan: error: argument --gpu: expected one argument\n"


def test_dash_leading_values_reach_serve_and_measure(capsys):
    code, _, err = run(capsys, "serve", "--port", "-80")
    assert code == 2 and err == "kvplan: error: port must be between 1 and 65,535, got -80\n"
    pytest.importorskip("torch")
    code, _, err = run(capsys, "measure", "qwen3-0.6b", "--device", "cpu", "--ctx", "-1k")
    assert code == 2 and err == "kvplan: error: context must be at least 1, got -1,024\n"


def test_verified_line_only_for_the_measured_cache(capsys):
    # the bundled H200 run measured Qwen3.5-27B in tbq4 at 128k × 2 with the default options;
    # eviction, a hot/cold mix, MTP layers or another state dtype hold other bytes
    base = ("qwen3.5-27b", "--ctx", "128k", "--seqs", "2", "--kv", "tbq4")
    code, out, _ = run(capsys, *base)
    assert code == 0 and "verified on NVIDIA H200" in out
    for extra in (["--keep", "0.25"], ["--hot", "f16:64k"], ["--mtp"], ["--state-dtype", "f16"]):
        code, out, _ = run(capsys, *base, *extra)
        assert code == 0 and "verified on" not in out, extra


@pytest.mark.parametrize(("flags", "words"), [
    (["--gpus", "2", "--tp", "4"], "gpus is 2 but tp × pp × dp is 4"),
    (["--gpus", "8", "--tp", "2"], "gpus is 8 but tp × pp × dp is 2"),
    (["--gpus", "2", "--dp", "3"], "card count must be a multiple of dp"),
])
def test_a_card_count_that_contradicts_the_layout_is_refused(capsys, flags, words):
    assert words in error_line(capsys, "qwen3-8b", "--gpu", "h100", *flags)


@pytest.mark.parametrize(("flags", "parallel", "cards"), [
    (["--gpu", "2x4090"], {"tp": 2, "pp": 1, "dp": 1, "gpus": 2}, ["rtx-4090"]),
    (["--gpu", "4×h100", "--dp", "2"], {"tp": 2, "pp": 1, "dp": 2, "attn_dp": 1, "gpus": 4}, ["h100-sxm"]),
    (["--gpu", "2x4090", "--gpus", "2"], {"tp": 2, "pp": 1, "dp": 1, "gpus": 2}, ["rtx-4090"]),
    (["--gpus", "2x4090,3090", "--engine", "llama.cpp"], {"tp": 1, "pp": 3, "dp": 1, "gpus": 3},
     ["rtx-4090", "rtx-4090", "rtx-3090"]),
])
def test_a_rig_spelled_with_its_count(capsys, flags, parallel, cards):
    # 2x4090 is --gpu 4090 --gpus 2, as a rig is written
    code, out, _ = run(capsys, "qwen3-8b", *flags, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["parallel"] == {**parallel, "attn_dp": 1} and data["gpus"] == cards


@pytest.mark.parametrize(("flags", "words"), [
    (["--gpu", "2x4090", "--gpus", "4"], "gpu '2x4090' is 2 cards but gpus is 4"),
    (["--gpu", "2x4090", "--tp", "4"], "gpu '2x4090' is 2 cards but tp × pp × dp is 4"),
    (["--gpu", "2x4090", "--dp", "4"], "card count must be a multiple of dp"),
    (["--gpu", "0x4090"], "card count in '0x4090' must be between 1 and 1,024"),
    (["--gpu", "2xfoo"], "'2xfoo' is not a known GPU"),
    (["--gpu", "2x4090", "--gpus", "4090,4090"], "not both"),
])
def test_a_rig_that_contradicts_itself_is_refused(capsys, flags, words):
    assert words in error_line(capsys, "qwen3-8b", *flags)


def test_a_card_count_that_matches_the_layout_is_taken(capsys):
    code, out, _ = run(capsys, "qwen3-8b", "--gpu", "h100", "--gpus", "4", "--dp", "2", "--json")
    assert code == 0
    assert json.loads(out)["parallel"] == {"tp": 2, "pp": 1, "dp": 2, "attn_dp": 1, "gpus": 4}


def test_a_kv_budget_the_card_cannot_hold_is_refused(capsys):
    # 200 GiB of KV on a 24 GB card used to "fit"
    assert error_line(capsys, "qwen3-8b", "--kv-budget", "200GiB", "--gpu", "4090",
                      "--engine", "vllm") == (
        "a KV budget of 200 GiB beside 15.26 GiB of weights exceeds the NVIDIA GeForce RTX "
        "4090's 23.99 GiB: give the budget an engine printed on this card")
    code, out, _ = run(capsys, "qwen3-8b", "--kv-budget", "8GiB", "--gpu", "4090",
                       "--engine", "vllm")
    assert code == 0 and "fits under vllm" in out


def test_find_format_says_why_the_engine_refuses_the_plan(capsys):
    # an option the engine lacks used to give an empty table and "no KV format fits", exit 0
    assert error_line(capsys, "qwen3-8b", "--gpu", "h100", "--engine", "vllm", "--hot",
                      "f16:100", "--find-format") == "vLLM has no hot/cold mix or token eviction"


def test_sliding_window_models_quote_the_rate_past_the_windows(capsys):
    # 10 full + 52 sliding layers: a further token at 128k adds only the full layers' rows
    code, out, _ = run(capsys, "gemma-3-27b-it", "--ctx", "128k", "--seqs", "2", "--kv", "q8_0")
    total = next(line for line in out.splitlines() if line.startswith("total"))
    assert code == 0
    assert total.endswith("KV 11.06 GiB (q8_0), 42.5 KiB/token past the windows "
                          "(263.5 KiB within)")
    code, out, _ = run(capsys, "qwen3-8b")
    assert next(line for line in out.splitlines() if line.startswith("total")).endswith(
        "KV 1.12 GiB (f16), 144 KiB/token")


@pytest.mark.parametrize("size", ["-5", "true", "\"12\"", "0"])
def test_a_local_safetensors_index_with_no_byte_count_is_refused(tmp_path, capsys, size):
    from pathlib import Path

    import kvcore

    src = Path(kvcore.__file__).parent / "data" / "models" / "llama-3.1-8b.json"
    (tmp_path / "config.json").write_text(src.read_text())
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": json.loads(size)}, "weight_map": {}}))
    # it used to print "weights -5 B" (or "weights True B") and a fit
    code, out, err = run(capsys, str(tmp_path), "--gpu", "4090")
    assert code == 2 and out == ""
    assert "metadata.total_size must be the weights' bytes, a whole number above 0" in err
    (tmp_path / "model.safetensors.index.json").write_text(
        '{"metadata": {"total_size": 16060522496}, "weight_map": {}}')
    code, out, _ = run(capsys, str(tmp_path), "--gpu", "4090")
    assert code == 0 and "safetensors index" in out


@pytest.mark.parametrize(("flags", "line"), [
    (["--engine", "llama.cpp", "--gpu-memory-utilization", "0.5"],
     "gpu_memory_utilization is a setting of vLLM, not of llama.cpp: choose that engine "
     "(--engine vllm) or leave out gpu_memory_utilization"),
    (["--engine", "vllm", "--swa-full"],
     "swa_full is a setting of llama.cpp and Ollama, not of vLLM: choose one of them (--engine "
     "llama.cpp) or leave out swa_full"),
    (["--engine", "sglang", "--ubatch", "256"],
     "ubatch is a setting of llama.cpp and Ollama, not of SGLang: choose one of them (--engine "
     "llama.cpp) or leave out ubatch"),
    (["--offload", "64GiB"],
     "offload is a setting of vLLM, SGLang and TensorRT-LLM, not of raw: choose one "
     "of them (--engine vllm) or leave out offload"),
])
def test_a_setting_the_engine_does_not_read_is_refused(capsys, flags, line):
    # each was dropped without a word
    assert error_line(capsys, "qwen3-8b", "--gpu", "4090", *flags) == line


def test_llama_cpp_without_flash_attention_refuses_a_quantized_v_cache(capsys):
    # it used to report a fit, its log lines and a command, with a note that it would not start
    code, out, err = run(capsys, "qwen3-8b", "--gpu", "4090", "--engine", "llama.cpp",
                         "--no-flash-attn", "--kv", "q8_0")
    assert code == 2 and out == ""
    assert err.strip() == ("kvplan: error: llama.cpp refuses to start with a quantized V cache "
                           "(q8_0) and flash attention off (-fa off): turn it on (leave out "
                           "no_flash_attn) or keep V in f16 or bf16")
    # quantized keys alone run without it, and the flash-attention note goes
    code, out, _ = run(capsys, "qwen3-8b", "--gpu", "4090", "--engine", "llama.cpp",
                       "--no-flash-attn", "--kv-k", "q8_0")
    assert code == 0 and "-fa off" in out and "CUDA flash attention" not in out


def test_several_cards_get_a_decode_estimate(capsys):
    # two H100s, tensor parallel: each card reads half the weights and half the KV heads
    code, out, _ = run(capsys, "llama-3.1-70b", "--gpu", "h100", "--tp", "2", "--ctx", "32k",
                       "--seqs", "4", "--kv", "fp8", "--json")
    data = json.loads(out)
    assert code == 0 and data["fits"]
    card = (data["weights"]["active_bytes"] + data["kv_bytes"]) / 2
    bandwidth = 3.35e12
    d = data["decode"]
    assert d["seconds_per_step"] == pytest.approx(card / bandwidth, rel=1e-3)
    assert d["tokens_per_s_total"] == pytest.approx(4 / d["seconds_per_step"])
    assert d["bytes_per_step"] == pytest.approx(2 * card, rel=1e-6)
    # pipeline stages read in turn: two stages of half the layers take as long as one card
    code, out, _ = run(capsys, "llama-3.1-70b", "--gpu", "h100", "--pp", "2", "--ctx", "32k",
                       "--seqs", "4", "--kv", "fp8", "--json")
    pp = json.loads(out)["decode"]
    assert pp["seconds_per_step"] == pytest.approx(2 * d["seconds_per_step"], rel=2e-3)
    code, out, _ = run(capsys, "llama-3.1-70b", "--gpu", "h100", "--tp", "2", "--ctx", "32k",
                       "--seqs", "4", "--kv", "fp8")
    assert "\n\n\n" not in out and "model  detail" in out.splitlines()[1]
    assert "bandwidth-bound on 2 cards (interconnect not counted)" in out


def test_a_prompt_over_several_cards_splits_its_flops(capsys):
    # Llama-3.1-70B's 32k prompt: the same FLOPs over two H100s in tensor parallel, each
    # computing half; two pipeline stages compute theirs in turn
    ask = ("llama-3.1-70b", "--gpu", "h100", "--ctx", "32k", "--kv", "fp8", "--json")
    one = json.loads(run(capsys, *ask)[1])["prefill"]
    tp = json.loads(run(capsys, *ask, "--tp", "2")[1])["prefill"]
    pp = json.loads(run(capsys, *ask, "--pp", "2")[1])["prefill"]
    assert one["bound"] == tp["bound"] == pp["bound"] == "compute"
    assert tp["flops"] == pytest.approx(one["flops"], rel=1e-6)
    assert tp["seconds"] == pytest.approx(one["seconds"] / 2, rel=1e-3)
    assert pp["seconds"] == pytest.approx(one["seconds"], rel=1e-3)
    code, out, _ = run(capsys, *ask[:-1], "--tp", "2")
    assert (f"prefill ≈ {tp['seconds']:,.1f} s for a prompt of 32,768 tokens "
            f"({tp['tokens_per_s']:,.1f} tokens/s), compute-bound on 2 cards") in out
    code, out, _ = run(capsys, *ask[:-1])
    assert "compute-bound at 989.5 TFLOPS (its dense FP16/BF16 peak)" in out


@pytest.mark.parametrize("model", ["deepseek-v3.2", "deepseek-v4-flash"])
def test_a_prefill_says_the_indexers_scores_are_not_counted(capsys, model):
    code, out, _ = run(capsys, model, "--gpu", "h200", "--ctx", "32k")
    line = next(x for x in out.splitlines() if x.startswith("prefill "))
    assert "(the indexer's scores not counted)" in line
    code, out, _ = run(capsys, "deepseek-v3", "--gpu", "h200", "--ctx", "32k")
    assert "indexer" not in next(x for x in out.splitlines() if x.startswith("prefill "))


def test_several_cards_read_the_experts_a_step_routes_to(capsys):
    # Qwen3-30B-A3B over two H100s: 16 sequences' tokens route to 1 - (120/128)^16 of the
    # experts; each card reads half of what the step reads
    code, out, _ = run(capsys, "qwen3-30b-a3b", "--gpu", "h100", "--tp", "2", "--ctx", "8k",
                       "--seqs", "16", "--json")
    data = json.loads(out)
    d = data["decode"]
    share = 1 - (120 / 128) ** 16
    assert code == 0 and d["expert_share"] == pytest.approx(share)
    w = kvcore.weights_for(kvcore.load_model("qwen3-30b-a3b"))
    assert w.active_bytes == data["weights"]["active_bytes"]
    assert d["bytes_per_step"] == pytest.approx(w.step_bytes(16) + data["kv_bytes"], rel=1e-6)
    assert d["seconds_per_step"] == pytest.approx(d["bytes_per_step"] / 2 / 3.35e12, rel=1e-3)
    code, out, _ = run(capsys, "qwen3-30b-a3b", "--gpu", "h100", "--tp", "2", "--ctx", "8k",
                       "--seqs", "16")
    assert f"the 16 sequences' tokens route to ≈ {share:.0%} of the routed experts" in out
    # one sequence reads its top-k: nothing to say
    code, out, _ = run(capsys, "qwen3-30b-a3b", "--gpu", "h100", "--ctx", "8k")
    assert code == 0 and "route to" not in out


def test_a_context_past_the_trained_positions_is_noted_without_a_card(capsys):
    code, out, _ = run(capsys, "qwen3-8b", "--ctx", "1M")
    assert code == 0
    assert out.splitlines()[-1] == ("note: 1,048,576 tokens is past the 40,960 positions the "
                                    "model was trained for")
    code, out, _ = run(capsys, "qwen3-8b", "--ctx", "32k", "--json")
    assert json.loads(out)["notes"] == []


@pytest.mark.parametrize(("args", "line"), [
    (["qwen3-8b", "--gpu", "1e30GiB"],
     "'1e30GiB' is no memory size: write it without an exponent, like 24GiB or 80GB (a catalog "
     "GPU is a name, like 4090 or h100)"),
    (["qwen3-8b", "--gpus", ",,"],
     "gpus must be a card count (4) or the cards, one per rank (4090,3090 or 2x4090); got ',,'"),
    (["/nonexistent/config.json"],
     "no such file or folder: '/nonexistent/config.json' (a model is a catalog id, a Hub repo "
     "id, a config.json or GGUF path or JSON)"),
])
def test_inputs_that_read_as_something_else_say_what_they_are(capsys, args, line):
    # these said "did you mean 'a30'", "gpus lists 0 cards" and "is not a known model"
    assert error_line(capsys, *args) == line


def test_an_overhead_of_zero_is_an_override(capsys):
    code, out, _ = run(capsys, "qwen3-8b", "--overhead", "0", "--json")
    data = json.loads(out)
    assert code == 0 and data["overhead_bytes"] == 0
    assert data["total_bytes"] == data["weights_bytes"] + data["kv_bytes"]


def test_header_counts_cacheless_and_mtp_layers(capsys):
    # Nemotron-H's 118 blocks: 10 attention, 54 Mamba, 54 MLP-only (no cache)
    code, out, _ = run(capsys, "nemotron-h-56b-base-8k")
    assert code == 0 and out.splitlines()[0].endswith(
        "(nemotron_h, 64 layers: 10 full, 54 mamba; 54 more with no cache, MLP or MoE only)")
    code, out, _ = run(capsys, "deepseek-v3", "--mtp")
    lines = out.splitlines()
    assert code == 0 and lines[0].endswith("(deepseek_v3, 61 layers: 61 mla; 1 MTP layer counted)")
    assert any(line.startswith("K (mla, MTP)") for line in lines)


def test_engine_setting_out_of_range_is_named_as_given(capsys):
    # the flag is --ubatch and the API field ubatch: n_ubatch was the profile's own name
    code, _, err = run(capsys, "llama-3.1-8b", "--engine", "llama.cpp", "--gpu", "4090",
                       "--ubatch", "0")
    assert code == 2
    assert err == "kvplan: error: ubatch must be a whole number from 1 to 16,777,216, got 0\n"


def test_engine_verdict_line_and_binding_are_the_engines(capsys):
    # weights + cache + runtime estimate fit in 24 GiB, vLLM's pool does not: the line
    # said "does not fit: ... uses 23.1 of 24.0 GiB" and "binding: weights (weights is the
    # largest share of the card)"
    code, out, _ = run(capsys, "llama-3.1-8b", "--gpu", "4090", "--engine", "vllm",
                       "--ctx", "60000")
    assert code == 0
    assert ("does not fit under vllm: 60,000 tokens × 1 sequence on NVIDIA GeForce RTX 4090 "
            "(the table's total is 23.1 of 24.0 GiB; vllm's budget below); max context 55,232"
            in out)
    # the plan's max context is the length vLLM's own start-up error estimates
    assert "the estimated maximum model length is 55232." in out
    assert "binding: kv (the KV cache for this context and sequence count exceeds the " \
           "6.77 GiB pool vllm leaves)" in out
    code, out, _ = run(capsys, "llama-3.1-8b", "--gpu", "4090", "--engine", "vllm",
                       "--ctx", "60000", "--json")
    data = json.loads(out)
    assert not data["fits"] and data["binding"] == "kv"


@pytest.mark.parametrize(("engine", "start"), [
    ("vllm", "vllm serve {}"), ("sglang", "python -m sglang.launch_server --model-path {}"),
    ("trtllm", "trtllm-serve {}"),
])
def test_serve_command_of_a_local_checkpoint_loads_its_folder(capsys, tmp_path, engine, start):
    # `vllm serve Qwen3-8B` (the folder's name) would look for a Hub repo of that name
    from kvcore import model_catalog

    folder = tmp_path / "Qwen3-8B"
    folder.mkdir()
    config = next(e for e in model_catalog() if e.id == "qwen3-8b").config()
    (folder / "config.json").write_text(json.dumps(config))
    for ref in (folder, folder / "config.json"):
        code, out, _ = run(capsys, str(ref), "--gpu", "h100", "--engine", engine)
        assert code == 0
        assert f"command: {start.format(folder)} " in out


@pytest.mark.parametrize("hot", [":4096", "f16:", " :4k"])
def test_hot_missing_a_part_says_what_it_takes(capsys, hot):
    # ':4096' answered "'' is not a known KV format"
    code, _, err = run(capsys, "llama-3.1-8b", "--hot", hot)
    assert code == 2
    assert err.startswith("kvplan: error: hot must look like f16:4096 (a KV format, a colon, "
                          "a token count), got ")


def test_gpu_listing_lines_numbers_up(capsys):
    # memory and bandwidth were left-aligned: 1,008 GB/s started where 936 GB/s did
    code, out, _ = run(capsys, "gpus")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].endswith("memory          plans with   bandwidth  FP16 matrix")
    row = next(line for line in lines if line.startswith("rtx-3090 "))
    assert row.endswith("24 GiB              24 GiB    936 GB/s  71.0 TFLOPS")
    assert len(row) == len(lines[0])
    h100 = next(line for line in lines if line.startswith("h100-sxm "))
    assert h100.endswith("3,350 GB/s  989.5 TFLOPS")


def test_vllm_language_model_only_from_the_cli_and_the_api(capsys):
    args = ("qwen2.5-vl-7b-instruct", "--ctx", "32k", "--gpu", "4090", "--engine", "vllm",
            "--json")
    full = json.loads(run(capsys, *args)[1])
    code, out, _ = run(capsys, *args, "--language-model-only")
    text = json.loads(out)
    assert code == 0 and text["engine_report"]["command"].endswith("--language-model-only")
    # the table and the engine both leave the vision tower out, by the same bytes
    saved = full["weights_bytes"] - text["weights_bytes"]
    assert saved > 1 << 30
    assert (full["engine_report"]["weights_bytes"] - text["engine_report"]["weights_bytes"]
            == saved)
    assert text["max_context"] > full["max_context"]
    from fastapi.testclient import TestClient

    from app.web import create_app

    c = TestClient(create_app())
    body = {"model": "qwen2.5-vl-7b-instruct", "context": 32768, "gpu": "4090",
            "engine": "vllm", "language_model_only": True}
    api = c.post("/api/v1/plan", json=body).json()
    assert api["weights_bytes"] == text["weights_bytes"]
    assert api["max_context"] == text["max_context"]
    r = c.post("/api/v1/plan", json={**body, "engine": "llama.cpp"})
    assert r.status_code == 422 and "language_model_only" in r.text
    code, _, err = run(capsys, "qwen3-8b", "--gpu", "4090", "--engine", "sglang",
                       "--language-model-only")
    assert code == 2 and "language_model_only" in err and len(err.strip().splitlines()) == 1


def test_the_models_list_names_each_twin_and_its_entry(capsys):
    code, out, _ = run(capsys, "models")
    # (the EAGLE heads' line follows the twins)
    twins = out.split("not read:\n")[1].split("\n\n")[0].splitlines()
    assert code == 0 and len(twins) == sum(len(e.aliases) for e in kvcore.model_catalog())
    assert any(re.fullmatch(r"meta-llama/Llama-3\.3-70B-Instruct +  = llama-3\.1-70b-instruct",
                            line) for line in twins)
    code, out, _ = run(capsys, "models", "--json")
    entry = next(i for i in json.loads(out) if i["id"] == "llama-3.1-70b-instruct")
    assert entry["aliases"] == ["meta-llama/Llama-3.3-70B-Instruct"]


def test_the_models_list_keeps_the_models_its_words_name(capsys):
    code, out, _ = run(capsys, "models", "qwen3", "coder")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["id", "params", "layers", "KV/token", "f16",
                                              "past", "windows", "trained", "for", "repo"]
    assert [line.split()[0] for line in lines[1:]] == ["qwen3-coder-30b-a3b-instruct"]
    # a word found in a repository that shares an entry's config lists that entry and the twin
    code, out, _ = run(capsys, "models", "llama", "3.3", "70b", "--json")
    assert [i["id"] for i in json.loads(out)] == ["llama-3.1-70b-instruct"]
    code, out, _ = run(capsys, "models", "no-such-model")
    assert code == 0 and out == ("no catalog model matches 'no-such-model': 'such' is in no "
                                 "model's name; 'model' is in no model's name; kvplan models "
                                 "lists them all, and a Hub repo id plans one the catalog "
                                 "lacks\n")
    # words that each name models but no model all of them are told so
    code, out, _ = run(capsys, "models", "qwen3", "llama")
    assert code == 0 and out.startswith("no catalog model matches 'qwen3 llama' (each word "
                                        "names models, none all of them); kvplan models")
    code, out, _ = run(capsys, "models", "mistrall", "small")
    assert out.startswith("no catalog model matches 'mistrall small': 'mistrall' is in no "
                          "model's name (did you mean mistral?); ")
    assert error_line(capsys, "models", ":") == (
        "the search must hold a word of a model's name, like qwen3 or llama 3.1; got ':'")


def test_the_models_list_gives_each_models_size_and_kv_bytes_a_token(capsys):
    code, out, _ = run(capsys, "models", "gemma-3-27b-it", "--json")
    [item] = json.loads(out)
    spec = kvcore.load_model("gemma-3-27b-it")
    assert item["params"] == spec.params.total and item["layers"] == 62
    # 62 layers × 16 KV heads of 128, K and V in f16 within the 1,024-token windows; past
    # them only the 10 full layers' rows grow
    assert item["bytes_per_token_f16"] == 62 * 2 * 16 * 128 * 2 == 507_904
    assert item["marginal_bytes_per_token_f16"] == 10 * 2 * 16 * 128 * 2
    assert item["max_position_embeddings"] == 131_072
    code, out, _ = run(capsys, "models", "gemma-3-27b-it")
    row = out.splitlines()[1].split()
    assert row[:7] == ["gemma-3-27b-it", "27.4B", "62", "496", "KiB", "80", "KiB"]
    assert row[7:] == ["131,072", "google/gemma-3-27b-it"]


def test_state_rows_say_their_width_and_the_decode_line_counts_the_state(capsys):
    code, out, _ = run(capsys, "qwen3.5-27b", "--ctx", "32k", "--seqs", "3", "--gpu", "h200")
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("state (linear)"))
    assert row.endswith("per layer, × 3 sequences, f32")
    total = next(line for line in out.splitlines() if line.startswith("total"))
    data = kvcore.plan_to_dict(kvcore.plan(kvcore.PlanRequest(
        spec=kvcore.load_model("qwen3.5-27b"), context=32768, sequences=3)))
    state = kvcore.format_bytes(data["state_bytes"], 2)
    assert f"+ state {state}," in total
    assert "KV and state are" in out and "KV is" not in out
    code, out, _ = run(capsys, "qwen3.5-27b", "--ctx", "32k", "--state-dtype", "bf16")
    assert ", × 1 sequence, 16-bit" in out
    # under an engine, whose own table sizes the state in its widths, the row names none
    code, out, _ = run(capsys, "qwen3.5-27b", "--ctx", "32k", "--engine", "vllm", "--gpu", "h200")
    row = next(line for line in out.splitlines() if line.startswith("state (linear)"))
    assert row.endswith("per layer, × 1 sequence")
    # a model of attention alone keeps its words
    code, out, _ = run(capsys, "llama-3.1-8b", "--ctx", "32k", "--gpu", "h200")
    assert "KV is" in out and "state" not in out


def test_the_model_line_says_when_a_layer_holds_two_kinds(capsys):
    code, out, _ = run(capsys, "deepseek-v4-flash", "--gpu", "h200", "--gpus", "8")
    assert "; a layer holds more than one" in out.splitlines()[0]
    code, out, _ = run(capsys, "qwen3.5-27b", "--gpu", "h200")
    assert "more than one" not in out.splitlines()[0]


def test_find_format_says_what_fits_when_nothing_does(capsys):
    # Qwen3-32B's bf16 weights alone pass a 24 GB card: no cache of any format fits beside them
    code, out, _ = run(capsys, "qwen3-32b", "--gpu", "4090", "--ctx", "32k", "--seqs", "4",
                       "--engine", "llama.cpp", "--find-format")
    assert code == 0
    assert out.strip().splitlines()[-1].endswith(
        "the weights and runtime leave no room for a cache; see --find-weights or --find-gpu")
    # at q4_k_m they fit, and the widest row says how long four sequences may be
    code, out, _ = run(capsys, "qwen3-32b", "--gpu", "4090", "--ctx", "32k", "--seqs", "4",
                       "--engine", "llama.cpp", "--find-format", "--weights", "q4_k_m")
    q4 = next(line for line in out.splitlines() if line.startswith("q4_0 "))
    longest = q4.split()[3]
    assert out.strip().splitlines()[-1].endswith(
        f"the longest context 4 sequences fit: {longest} tokens in q4_0; see --find-weights "
        "or --find-gpu")


@pytest.mark.parametrize(("engine", "said"), [
    ("LM Studio", "kvplan has no LM Studio engine: it runs GGUF models with llama.cpp"),
    ("lmstudio", "so --engine llama.cpp plans them"),
])
def test_a_server_kvplan_has_no_engine_of_is_pointed_to_the_nearest(capsys, engine, said):
    # "'lmstudio' is not a known engine; did you mean 'llama.cpp' or 'vllm' or 'trtllm'?"
    code, out, err = run(capsys, "qwen3-8b", "--engine", engine)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert said in err
    from fastapi.testclient import TestClient

    from app.web import create_app

    r = TestClient(create_app()).get("/api/v1/plan", params={"model": "qwen3-8b",
                                                              "engine": engine})
    assert r.status_code == 422 and r.json()["field"] == "engine" and said in r.json()["error"]


def test_find_format_says_why_each_format_it_leaves_out_is_refused(capsys):
    # Gemma 3 with its vision tower: vLLM's TurboQuant backend runs no image-prefix attention;
    # served text-only the same formats are offered
    args = ["gemma-3-27b-it", "--engine", "vllm", "--gpu", "4090", "--ctx", "32k",
            "--weights", "int4", "--find-format"]
    code, out, _ = run(capsys, *args)
    lines = out.splitlines()
    assert code == 0 and not any(x.startswith("tq_4bit ") for x in lines)
    why = next(x for x in lines if x.startswith("not offered here: tq_4bit: "))
    assert "image-prefix" in why and "--language-model-only" in why
    code, out, _ = run(capsys, *args, "--language-model-only")
    assert code == 0 and any(x.startswith("tq_4bit ") for x in out.splitlines())
    assert "not offered here: tq_4bit" not in out


def test_find_format_json_lists_the_refused_formats_after_the_offered_ones(capsys):
    # the table names them under it; a script reading --json must see them too
    args = ["gemma-3-27b-it", "--engine", "vllm", "--gpu", "4090", "--ctx", "32k",
            "--weights", "int4", "--find-format"]
    text = run(capsys, *args)[1]
    rows = json.loads(run(capsys, *args, "--json")[1])
    offered = [r for r in rows if r["offered"]]
    refused = [r for r in rows if not r["offered"]]
    assert rows == offered + refused and offered and refused
    named = [x.split(": ", 2)[1] for x in text.splitlines() if x.startswith("not offered here: ")]
    assert [r["format"] for r in refused] == named
    tq = next(r for r in refused if r["format"] == "tq_4bit")
    assert "image-prefix" in tq["refused"] and tq["refused"] in text
    assert tq["max_context"] == 0 and not tq["fits"] and tq["tokens_per_s_per_sequence"] is None
    assert tq["bits_per_value"] == 4
    # every offered row is a table row, in the table's order
    lines = text.splitlines()
    table = [x.split()[0] for x in lines[1:lines.index("")]]
    assert [r["format"] for r in offered] == table
