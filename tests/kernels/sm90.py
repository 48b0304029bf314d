"""Kernels compiled for sm_90 without a GPU, with the triton wheel's own compiler: a script
run in a child process without TRITON_INTERPRET (the interpreter cannot compile), printing a
JSON object of PTX texts as its last line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def compiled_ptx(script: str) -> dict[str, str]:
    """The JSON object ``script`` prints last, the repository root and its bench folder on its
    path; skips where the wheel ships no ptxas."""
    prelude = f"import sys\nsys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'bench')!r}]\n"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", prelude + script], capture_output=True,
                         text=True, env=env, timeout=600)
    if run.returncode != 0 and "ptxas" in run.stderr and "No such file" in run.stderr:
        pytest.skip("this triton wheel ships no ptxas")
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def usage_value(text: str, key: str) -> int:
    """A value of cuobjdump's resource usage line (``REG``, ``STACK``, ``LOCAL``, …)."""
    import re

    m = re.search(rf"{key}:(\d+)", text)
    assert m, text
    return int(m.group(1))
