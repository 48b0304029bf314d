"""The GPU-only paths of the append kernels, compiled for sm_90 without a GPU (the triton
wheel's own compiler; the interpreter cannot run inline PTX): q4_0's reciprocal and product
rounded as the reference rounds them, KIVI's quotient from the correctly rounded reciprocal
and its floor by an add rounded down (no float-to-integer conversion), tbq3's codes stored as
whole words.

The compiling runs in a child process without TRITON_INTERPRET."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(0, sys.argv[1] + "/bench")
    import sass_count
    from kvcore.kernels import kivi_triton, triton_ops

    out = {}
    for fmt, rows, warps in (("q4_0", 8, 1), ("tbq4", 64, 4), ("tbq3", 64, 4)):
        f = triton_ops.FMT_CODES[fmt]
        sig = {"X": "*fp16", "PAGES": "*i64", "OFFSETS": "*i64",
               "P0": sass_count.DATA.get(f, "*u8"), "P1": sass_count.SIDE.get(f, "*u8"),
               "GS": "*fp32", "ROT": "*fp16", "TH": "*fp32", "CENT": "*fp32", "n_rows": "i32",
               "PAGE": "i32"}
        x0, x1 = sass_count._row_widths(fmt, 128)
        consts = dict(H_KV=8, FMT=f, D=128, DP=128, DPOW=128, X0=x0, X1=x1,
                      LEVELS=8 if f == 5 else 16, ROWS=rows, HW=True)
        kernel = triton_ops.rotated_append_kernel if f in (4, 5) else triton_ops.append_kernel
        k, _, _ = sass_count._compile(kernel, sig, consts, ("PAGE",), {"num_warps": warps})
        out[fmt] = k.asm["ptx"]
    sig = {"KR": "*fp16", "VR": "*fp16", "XK": "*fp16", "XV": "*fp16", "KQ": "*u8",
           "KS": "*fp16", "KM": "*fp16", "VQ": "*u8", "VS": "*fp16", "VM": "*fp16",
           "GT": "*i32", "s": "i32", "stride_gt": "i32", "g0": "i32", "live": "i32",
           "RING": "i32"}
    for bits in (2, 4):
        consts = dict(H=8, D=128, DP=128, G=32, BITS=bits, PER=8 // bits,
                      LEVELS=(1 << bits) - 1, HAS_V=True, HW=True)
        k, _, _ = sass_count._compile(kivi_triton.kivi_flush_kernel, sig, consts, ("RING",),
                                      {"num_warps": 4})
        out[f"kivi{bits}"] = k.asm["ptx"]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def ptx() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT)], capture_output=True,
                         text=True, env=env, timeout=600)
    if run.returncode != 0 and "ptxas" in run.stderr and "No such file" in run.stderr:
        pytest.skip("this triton wheel ships no ptxas")
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_q4_0_rounds_its_reciprocal_and_product_as_the_reference(ptx: dict[str, str]) -> None:
    # a correctly rounded reciprocal of each block's scale, and the product rounded on its
    # own (an explicitly rounded multiply is never fused into the add of 8.5)
    assert "div.rn.f32" in ptx["q4_0"]
    assert "mul.rn.f32" in ptx["q4_0"]


@pytest.mark.parametrize("bits", [2, 4])
def test_kivi_flush_rounds_without_conversions(ptx: dict[str, str], bits: int) -> None:
    text = ptx[f"kivi{bits}"]
    assert "div.rn.f32" in text and "fma.rn.f32" in text  # reciprocal, then the correction
    assert "add.rm.f32" in text  # floor and conversion in one add
    assert "cvt.rmi" not in text and "cvt.rzi" not in text


def test_tbq3_stores_whole_words(ptx: dict[str, str]) -> None:
    text = ptx["tbq3"]
    assert "st.global.b32" in text or "st.global.v" in text
    assert "st.global.b8" not in text and "st.global.u8" not in text


@pytest.mark.parametrize("fmt", ["tbq4", "tbq3"])
def test_rotated_append_multiplies_float16_rows_as_they_are(ptx: dict[str, str],
                                                             fmt: str) -> None:
    # float16 rows go into the product as loaded: the only float32-to-float16 conversions
    # left are the stored norms (two rows a thread), not the values (the former split of the
    # normalised rows into two float16 parts made 66)
    text = ptx[fmt]
    assert "mma" in text and ".f16.f16" in text
    assert text.count("cvt.rn.f16.f32") + text.count("cvt.rn.f16x2.f32") <= 4
