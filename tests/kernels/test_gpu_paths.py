"""The GPU-only paths of the append kernels, compiled for sm_90 without a GPU (the triton
wheel's own compiler; the interpreter cannot run inline PTX): q4_0's reciprocal and product
rounded as the reference rounds them, KIVI's scale times a constant reciprocal of its levels,
its codes from the correctly rounded reciprocal of the scale, rounded by an add of 2**23 (no
float-to-integer conversion), tbq3's codes stored as
whole words, the rotated formats' FMA search by saturated fused multiply-adds, KIVI's decode unpacking its codes by their bits (tests/kernels/sm90.py compiles
them)."""

from __future__ import annotations

import re
import textwrap

import pytest

pytest.importorskip("triton")

from kvcore.kernels import codebook  # noqa: E402

from .sm90 import compiled_ptx  # noqa: E402

SCRIPT = textwrap.dedent("""
    import json
    import sass_count

    out = {}
    for fmt, rows, warps in (("q4_0", 8, 1), ("tbq4", 64, 4), ("tbq3", 64, 4)):
        out[fmt] = sass_count.compile_append(fmt, rows, warps)[0].asm["ptx"]
    for fmt in ("tbq4", "tbq3"):
        out[fmt + "-selects"] = sass_count.compile_append(fmt, 64, 4, fma=False)[0].asm["ptx"]
        out[fmt + "-biased"] = sass_count.compile_append(fmt, 64, 4, bias=0.25)[0].asm["ptx"]
        out[fmt + "-lookup"] = sass_count.compile_append(fmt, 64, 4, lookup=True)[0].asm["ptx"]
    for bits in (2, 4):
        out[f"kivi{bits}"] = sass_count.compile_kivi_flush(bits)[0].asm["ptx"]
        out[f"kivi{bits}-batched"] = sass_count.compile_kivi_flush(bits, batched=True)[0].asm["ptx"]
        out[f"kivi{bits}-decode"] = sass_count.compile_kivi_decode(bits)[0].asm["ptx"]
        out[f"kivi{bits}-decode-unswapped"] = sass_count.compile_kivi_decode(
            bits, swap=False)[0].asm["ptx"]
    out["kivi4-decode-b1"] = sass_count.compile_kivi_decode(4, rows=8)[0].asm["ptx"]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def ptx() -> dict[str, str]:
    return compiled_ptx(SCRIPT)


def test_q4_0_rounds_its_reciprocal_and_product_as_the_reference(ptx: dict[str, str]) -> None:
    # a correctly rounded reciprocal of each block's scale, and the product rounded on its
    # own (an explicitly rounded multiply is never fused into the add of 8.5)
    assert "div.rn.f32" in ptx["q4_0"]
    assert "mul.rn.f32" in ptx["q4_0"]


@pytest.mark.parametrize("bits", [2, 4])
@pytest.mark.parametrize("batched", ["", "-batched"])  # several sequences' appends a launch
def test_kivi_flush_rounds_without_conversions(ptx: dict[str, str], bits: int,
                                               batched: str) -> None:
    text = ptx[f"kivi{bits}{batched}"]
    # the scales' reciprocals correctly rounded, and nothing else divided: (hi - lo) / levels
    # compiles to an approximate reciprocal of the levels, which the reference does not have
    assert "div.rn.f32" in text
    assert "div.approx" not in text and "div.full" not in text
    # rounding and conversion in one add that cannot be fused with the product before it
    assert "add.rn.f32" in text and "fma.rn.f32" not in text
    assert "cvt.rni" not in text and "cvt.rmi" not in text and "cvt.rzi" not in text


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


@pytest.mark.parametrize("bits", [2, 4])
def test_kivi_decode_unpacks_codes_by_their_bits(ptx: dict[str, str], bits: int) -> None:
    # each code masked into a float16 mantissa, the power of two subtracted, then c·s + m in
    # one fused multiply-add a pair of values: a step of 64 tokens (K and V, 128 wide) gives
    # the one warp of the compiled launch 512 values a thread, so 256 of each, none twice
    text = ptx[f"kivi{bits}-decode"]
    assert text.count("fma.rn.f16x2") == text.count("sub.rn.f16x2") == 256
    # no integer-to-float conversion of a code, and no float64 (the interpreter's path)
    assert not re.search(r"cvt\.rn\.f(16|32)\.[su](8|16|32)", text)
    assert ".f64" not in text


@pytest.mark.parametrize("bits", [2, 4])
def test_kivi_decode_swaps_its_products(ptx: dict[str, str], bits: int) -> None:
    # decode's default form: the cache tile the first operand and the 4 query rows padded to
    # 8 columns, not 16 rows, so half the tensor-core products of the unswapped form (a step
    # of 64 tokens, K and V 128 wide, the ring's 32-token step: kivi4 32 + 32 + 16 + 16)
    swapped = ptx[f"kivi{bits}-decode"].count("mma.sync.aligned.m16n8k16")
    plain = ptx[f"kivi{bits}-decode-unswapped"].count("mma.sync.aligned.m16n8k16")
    assert swapped == plain // 2 == 96
    # kivi2's swapped launch caps its registers (KIVI_SWAP_REGS, 12 programs a
    # multiprocessor); kivi4's only over at most 8 sequence-head rows (B=1 here, B=8 above);
    # the unswapped one is uncapped
    assert (".maxnreg 168" in ptx[f"kivi{bits}-decode"]) == (bits == 2)
    assert ".maxnreg 168" in ptx["kivi4-decode-b1"]
    assert ".maxnreg" not in ptx[f"kivi{bits}-decode-unswapped"]


INT_KEYS_SCRIPT = textwrap.dedent("""
    import json
    import sass_count

    out = {}
    for name, extra in (("int", ["--int-keys"]), ("plain", [])):
        args = sass_count.parser().parse_args(["q8_0", "--v-fmt", "f16", "--warps", "1",
                                               "--stages", "3", "--pad-rows", "4", *extra])
        out[name] = sass_count.compile_decode(args)[0].asm["ptx"]
    print(json.dumps(out))
""")


def test_q8_0_keys_reach_the_tensor_cores_as_int8_codes() -> None:
    """The integer key path multiplies the stored int8 codes on the tensor cores (an s8 × s8
    product into int32) and unpacks no key to float16; the float16 path does the opposite."""
    ptx = compiled_ptx(INT_KEYS_SCRIPT)
    integer = re.compile(r"mma\.sync\.aligned\.m16n8k32\.row\.col(\.satfinite)?\.s32\.s8\.s8\.s32")
    # Q8_0_ASM's bias word: the key bytes laid into float16 mantissas
    magic = "0x64806480"
    assert integer.search(ptx["int"]) and magic not in ptx["int"]
    assert not integer.search(ptx["plain"]) and magic in ptx["plain"]


@pytest.mark.parametrize(("fmt", "steps"), [("tbq4", 7), ("tbq3", 3)])
def test_rotated_append_fma_search_climbs_without_selects(ptx: dict[str, str], fmt: str,
                                                          steps: int) -> None:
    # the FMA form: one saturated fused multiply-add a threshold a value, on |y| (64 values
    # a thread, K and V in one program body), one sign mask a value, and no select of a
    # centroid or threshold
    text = ptx[fmt]
    assert text.count("fma.rn.sat.f32") == text.count("abs.f32 a, ") == 64 * steps
    assert text.count("set.le.s32.f32") == 64
    assert text.count("selp.f32") == 0 < ptx[fmt + "-selects"].count("selp.f32")
    # the present codebook's staircase is exact unbiased: no bias added to a centroid, or
    # taken off each value for the norm, as where the bias is 0.25
    assert codebook.staircase_bias(2 * steps + 2) == 0.0
    assert "0f3E800000" not in text and "0fBE800000" not in text
    assert ptx[fmt + "-biased"].count("0fBE800000") == 64


@pytest.mark.parametrize("fmt", ["tbq4", "tbq3"])
def test_rotated_append_lookup_compares_once_a_value(ptx: dict[str, str], fmt: str) -> None:
    # the FMA form by lookup: one fused multiply-add onto 2²³ finds a value's cell, one
    # 16-byte read its row (threshold, lowest centroid, step), one saturated fused
    # multiply-add compares: 64 values a thread, no select, no byte or word read of a row
    text = ptx[fmt + "-lookup"]
    assert text.count("fma.rn.sat.f32") == text.count("ld.global.nc.v4.b32") == 64
    assert len(re.findall(r"abs\.f32 a, %r\d+; fma\.rn\.f32 %r\d+, a, %r\d+, %r\d+;",
                          text)) == 64
    assert "mov.b32 \t%r" in text and "1258291200;" in text  # 2²³'s bits
    assert text.count("selp.f32") == 0
