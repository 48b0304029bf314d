"""Programmatic dependent launches: the decode kernels compiled for sm_90 (no GPU needed; the
triton wheel's own compiler) wait for the kernel before them before they read anything, and
compile without the wait when the launch is a plain one.

tests/kernels/sm90.py compiles them."""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("triton")

from .sm90 import compiled_ptx  # noqa: E402

SCRIPT = textwrap.dedent("""
    import json
    import sass_count
    from kvcore.kernels.triton_ops import reduce_kernel, rotate_kernel

    out = {}
    for fmt in ("f16", "q4_0"):
        for pdl in (True, False):
            args = sass_count.parser().parse_args([fmt] + (["--pdl"] if pdl else []))
            kernel, _, _ = sass_count.compile_decode(args)
            out[f"decode {fmt} {pdl}"] = kernel.asm["ptx"]
    sig = {"ACC": "*fp32", "ML": "*fp32", "OUT": "*fp32", "n_splits": "i32"}
    for pdl in (True, False):
        for one, name in ((True, "reduce"), (False, "reduce chunks")):
            consts = dict(GROUP=4, D=128, DPOW=128, DB=32, CM=64, CH=64, PDL=pdl, ONE=one)
            kernel, _, _ = sass_count._compile(reduce_kernel, sig, consts, (),
                                               {"num_warps": 4})
            out[f"{name} {pdl}"] = kernel.asm["ptx"]
    sig = {"X": "*fp16", "Y": "*fp32", "ROT": "*fp16", "n_rows": "i32"}
    for pdl in (True, False):
        consts = dict(DIN=128, DOUT=128, DPOW=128, BACK=False, PDL=pdl)
        kernel, _, _ = sass_count._compile(rotate_kernel, sig, consts, (), {"num_warps": 4})
        out[f"rotate {pdl}"] = kernel.asm["ptx"]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def ptx() -> dict[str, str]:
    return compiled_ptx(SCRIPT)


def _first_read(text: str) -> int:
    """Where the first read of global memory (a load or an asynchronous copy) is in PTX."""
    spots = [text.find(op) for op in ("ld.global", "cp.async.")]
    spots = [s for s in spots if s >= 0]
    assert spots, "no global read found"
    return min(spots)


@pytest.mark.parametrize("kernel", ["decode f16", "decode q4_0", "reduce", "reduce chunks",
                                    "rotate"])
def test_programmatic_launch_waits_before_the_first_read(ptx: dict[str, str],
                                                         kernel: str) -> None:
    text = ptx[f"{kernel} True"]
    wait = text.find("griddepcontrol.wait")
    assert wait >= 0
    assert wait < _first_read(text)
    # the next kernel may be scheduled once this one has waited, not before
    assert wait < text.find("griddepcontrol.launch_dependents")


@pytest.mark.parametrize("kernel", ["decode f16", "decode q4_0", "reduce", "reduce chunks",
                                    "rotate"])
def test_plain_launch_compiles_no_grid_dependency(ptx: dict[str, str], kernel: str) -> None:
    assert "griddepcontrol" not in ptx[f"{kernel} False"]


@pytest.mark.parametrize("kernel", ["reduce", "reduce chunks", "rotate"])
def test_a_kernel_before_a_split_kernel_lets_it_in_after_its_last_store(
        ptx: dict[str, str], kernel: str) -> None:
    # the merge and the rotations precede a split kernel (the next layer's, or their own
    # layer's): let in at their start, its programs were placed while they ran, unevenly
    # (bench/results/step-chain-h200.json)
    text = ptx[f"{kernel} True"]
    assert text.rfind("st.global") < text.find("griddepcontrol.launch_dependents")


@pytest.mark.parametrize("fmt", ["f16", "q4_0"])
def test_the_split_kernel_lets_its_merge_in_at_its_start(ptx: dict[str, str], fmt: str) -> None:
    # the merge's programs are small and the split's are all placed by then
    text = ptx[f"decode {fmt} True"]
    assert text.find("griddepcontrol.launch_dependents") < _first_read(text)


def test_programmatic_launch_only_on_hopper_cuda() -> None:
    from kvcore.kernels.cache import programmatic_launch
    from kvcore.kernels.triton_ops import pdl_launch

    assert programmatic_launch("cpu") is False
    assert pdl_launch(False) == {}
    assert pdl_launch(True) == {"PDL": True, "launch_pdl": True}
