"""Random command lines: kvplan answers (exit 0) or says what is wrong in one line (exit 2);
never a traceback."""

import contextlib
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main

WORDS = ["qwen3-8b", "deepseek-v3", "gpt-oss-20b", "nosuch", "{", "--ctx", "--seqs", "--kv",
         "--kv-k", "--kv-v", "--gpu", "--gpus", "--tp", "--pp", "--dp", "--engine", "--weights",
         "--hot", "--keep", "--images", "--json", "--find-format", "--find-weights", "--kv-budget",
         "4090", "h100", "iq2_xs", "q4_k_s",
         "24GiB", "-1", "0", "1", "128k", "1M", "9e99", "nan", "q8_0", "tbq4", "kivi2", "fp8",
         "vllm", "llama.cpp", "sglang", "trtllm", "q4_k_m", "int4", "f16:4096", "0.5", "3,4",
         "4090,3090", "", " ", "models", "gpus", "formats", "weights", "--draft", "qwen3-0.6b",
         "--draft-weights", "--draft-kv", "--acceptance", "--mtp", "--speculative-tokens",
         "--draft-method", "eagle3", "eagle", "llama-3.1-8b", "eagle3-llama3.1-instruct-8b",
         "--find-draft"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=0, max_size=8))
def test_random_command_lines(argv):
    _answers_or_one_line(argv)


def _answers_or_one_line(argv: list[str]) -> None:
    """kvplan answers ``argv`` (exit 0) or says what is wrong in one line (exit 2)."""
    out_buf, err_buf = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
        code = main(argv)
    err = err_buf.getvalue()
    assert code in (0, 2), (argv, code)
    if code == 2:
        assert err.startswith("kvplan: error: ") and len(err.strip().splitlines()) == 1, argv
    assert "Traceback" not in err


PROGRAMS = ["llama-server -m /x/Qwen3-8B-Q4_K_M.gguf", "llama-cli -hf x/y-GGUF:Q4_K_M",
            "vllm serve Qwen/Qwen3-8B", "python -m sglang.launch_server --model-path qwen3-8b",
            "trtllm-serve qwen3-8b", "docker run vllm/vllm-openai --model qwen3-8b", "ollama run"]
LAUNCH_WORDS = ["-c", "-np", "-ctk", "-ctv", "-ngl", "-ts", "-sm", "-dev", "-ub", "-b", "-fa",
                "--swa-full", "-kvu", "-cmoe", "--n-cpu-moe", "-ot", "--mmproj", "--no-mmproj",
                "--max-model-len", "--max-num-seqs", "--kv-cache-dtype", "-tp", "-pp", "-dp",
                "--gpu-memory-utilization", "--cpu-offload-gb", "--quantization",
                "--speculative-config", "--context-length", "--max-running-requests",
                "--mem-fraction-static", "--page-size", "--max_seq_len", "--enable-dp-attention",
                "0", "1", "-1", "-2", "8192", "32k", "32K", "1.5", "nan", "q8_0", "fp8", "auto",
                "all", "off", "x.gguf", "3,1", "exps=CPU", "(=CPU", "{}", "'", "\\", "C:\\x", "=",
                "-md", "-hfd", "Qwen3-0.6B-Q8_0.gguf", "-ctkd", "-ctvd", "--spec-draft-n-max",
                "--speculative-algorithm", "STANDALONE", "EAGLE",
                "--speculative-draft-model-path", "Qwen/Qwen3-0.6B", "EAGLE3",
                "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "--spec-type", "draft-eagle3",
                "--speculative-draft-kv-cache-dtype", "fp8_e4m3"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PROGRAMS), st.lists(st.sampled_from(LAUNCH_WORDS), max_size=8),
       st.lists(st.sampled_from(["--gpu", "4090", "--ctx", "8k", "--json", "--find-format"]),
                max_size=3))
def test_random_launch_commands(program, words, beside):
    """--command with any flags and values: a plan or one line, exit 2."""
    _answers_or_one_line(["--command", " ".join([program, *words]), *beside])
