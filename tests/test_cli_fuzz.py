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
         "4090,3090", "", " ", "models", "gpus", "formats", "weights"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=0, max_size=8))
def test_random_command_lines(argv):
    out_buf, err_buf = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
        code = main(argv)
    err = err_buf.getvalue()
    assert code in (0, 2), (argv, code)
    if code == 2:
        assert err.startswith("kvplan: error: ") and len(err.strip().splitlines()) == 1, argv
    assert "Traceback" not in err
