"""The decode kernel's PTX unpackers, run on the CPU by a small emulator of the instructions they
use, against the plain Triton path's arithmetic: every byte value in every position of a word.

The interpreter cannot run inline assembly, so without this a wrong selector or constant would
only show on a GPU. The emulator follows the PTX ISA: prmt in its default mode (a selector
nibble with bit 3 set replicates the sign of the byte it picks), lop3's truth table indexed by
(a, b, c) bits, logical shr, and float16x2 arithmetic rounded to nearest even.
"""

import re

import numpy as np
import pytest

pytest.importorskip("triton")

from kvcore.kernels import codebook, ref  # noqa: E402
from kvcore.kernels.triton_ops import (  # noqa: E402
    FP8_ASM,
    NVFP4_ASM,
    Q4_0_ASM,
    Q8_0_ASM,
    TBQ3_ASM,
    TBQ3_RAW_ASM,
    TBQ4_ASM,
    TBQ4_RAW_ASM,
    TBQ4_WORD_ASM,
    TBQ4_WORD_RAW_ASM,
    _tbq4_asm,
    tbq4_tables,
)

M32 = 0xFFFFFFFF


def _halves(x: int) -> np.ndarray:
    return np.array([x & 0xFFFF, x >> 16], dtype=np.uint16).view(np.float16)


def _word(h: np.ndarray) -> int:
    u = h.astype(np.float16).view(np.uint16)
    return int(u[0]) | (int(u[1]) << 16)


def _prmt(a: int, b: int, c: int) -> int:
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = 0
    for k in range(4):
        sel = (c >> (4 * k)) & 0xF
        byte = src[sel & 7]
        if sel & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * k)
    return out


def _lop3(a: int, b: int, c: int, lut: int) -> int:
    out = 0
    for bit in range(32):
        idx = (((a >> bit) & 1) << 2) | (((b >> bit) & 1) << 1) | ((c >> bit) & 1)
        out |= ((lut >> idx) & 1) << bit
    return out


def run_ptx(asm: str, regs: dict[str, int]) -> dict[str, int]:
    """Execute the block on ``regs`` ($N operands and locals, 32-bit ints); returns them all."""
    regs = dict(regs)

    def val(tok: str) -> int:
        tok = tok.strip()
        if tok in regs:
            return regs[tok]
        return int(tok, 0) & M32

    body = asm.strip().strip("{}")
    for line in body.split(";"):
        line = line.strip()
        if not line or line.startswith(".reg"):
            continue
        op, rest = line.split(None, 1)
        if op == "mov.b32" and rest.startswith("{"):
            # unpack a 32-bit register into two 16-bit ones: {lo, hi}
            names, src = rest.split("}")
            lo, hi = (t.strip() for t in names.strip("{").split(","))
            w = val(src.strip(" ,"))
            regs[lo], regs[hi] = w & 0xFFFF, w >> 16
            continue
        args = [t.strip() for t in rest.split(",")]
        d, srcs = args[0], [val(t) for t in args[1:]]
        if op == "mov.b32":
            r = srcs[0]
        elif op == "prmt.b32":
            r = _prmt(*srcs)
        elif op == "lop3.b32":
            r = _lop3(*srcs)
        elif op == "shr.b32":
            r = srcs[0] >> min(srcs[1], 32)
        elif op == "shl.b32":
            r = srcs[0] << srcs[1]
        elif op == "shf.r.clamp.b32":
            # the 64-bit (b:a) shifted right by at most 32, its low word
            r = ((srcs[1] << 32) | srcs[0]) >> min(srcs[2], 32)
        elif op == "mul.lo.u32":
            r = (srcs[0] * srcs[1]) & M32
        elif op == "or.b32":
            r = srcs[0] | srcs[1]
        elif op == "and.b32":
            r = srcs[0] & srcs[1]
        elif op == "xor.b32":
            r = srcs[0] ^ srcs[1]
        elif op == "cvt.rn.f16x2.e4m3x2":
            # two e4m3 bytes of a 16-bit register → float16 pair, the low byte in the low half
            pair = np.array([srcs[0] & 0xFF, srcs[0] >> 8], dtype=np.uint8)
            r = _word(ref.e4m3_value(_torch().from_numpy(pair)).numpy().astype(np.float16))
        elif op in ("sub.rn.f16x2", "mul.rn.f16x2"):
            x, y = _halves(srcs[0]).astype(np.float32), _halves(srcs[1]).astype(np.float32)
            # float16 × float16 and float16 − float16 are exact in float32: one rounding
            r = _word((x - y if op.startswith("sub") else x * y).astype(np.float16))
        else:
            raise AssertionError(f"the emulator does not know {op}")
        regs[d] = r & M32
    return regs


def _torch():
    return pytest.importorskip("torch")


def _words() -> list[int]:
    """Every byte value in every byte position of a word, with varied neighbours."""
    rng = np.random.default_rng(0)
    out = []
    for pos in range(4):
        for v in range(256):
            w = int(rng.integers(0, 1 << 32))
            out.append((w & ~(0xFF << (8 * pos)) | (v << (8 * pos))) & M32)
    return out


def _bytes(w: int) -> list[int]:
    return [(w >> (8 * i)) & 0xFF for i in range(4)]


def _out(regs: dict[str, int], *names: str) -> np.ndarray:
    return np.concatenate([_halves(regs[n]) for n in names])


SCALES = (np.float16(0.0137), np.float16(-3.25), np.float16(1.0))


def _scale_regs(s: np.float16) -> dict[str, int]:
    # the same block scale for the four elements, as _planes broadcasts it
    w = _word(np.array([s, s], dtype=np.float16))
    return {"$5": w, "$6": w}


@pytest.mark.parametrize("scale", SCALES)
def test_q4_0_unpacker_matches_the_plain_path(scale):
    for w in _words():
        regs = run_ptx(Q4_0_ASM.value, {"$4": w, **_scale_regs(scale)})
        b = np.array(_bytes(w))
        lo = ((b & 15).astype(np.float16) - np.float16(8)) * scale
        hi = ((b >> 4).astype(np.float16) - np.float16(8)) * scale
        assert np.array_equal(_out(regs, "$0", "$1").view(np.uint16),
                              lo.astype(np.float16).view(np.uint16)), hex(w)
        assert np.array_equal(_out(regs, "$2", "$3").view(np.uint16),
                              hi.astype(np.float16).view(np.uint16)), hex(w)


@pytest.mark.parametrize("scale", SCALES)
def test_q8_0_unpacker_matches_the_plain_path(scale):
    sr = _scale_regs(scale)
    for w in _words():
        regs = run_ptx(Q8_0_ASM.value, {"$2": w, "$3": sr["$5"], "$4": sr["$6"]})
        b = np.array(_bytes(w), dtype=np.uint8).view(np.int8)
        expect = (b.astype(np.float16) * scale).astype(np.float16)
        assert np.array_equal(_out(regs, "$0", "$1").view(np.uint16), expect.view(np.uint16))


def test_fp8_unpacker_matches_the_e4m3_table():
    # every e4m3 byte in every position: the word is split into its two byte pairs, each
    # converted (low byte to the low half; the emulator's conversion is torch's e4m3 table)
    torch = _torch()
    for w in _words():
        regs = run_ptx(FP8_ASM.value, {"$2": w})
        b = torch.tensor(_bytes(w), dtype=torch.uint8)
        expect = ref.e4m3_value(b).numpy().astype(np.float16)
        assert np.array_equal(_out(regs, "$0", "$1").view(np.uint16), expect.view(np.uint16)), \
            hex(w)


def test_tbq4_codebook_is_exactly_symmetric():
    # the unpacker reads one half of the codebook and takes the sign from the index
    for levels in (8, 16):
        c = np.array(codebook.lloyd_max(levels))
        assert np.array_equal(c, -c[::-1])
        h = c.astype(np.float16)
        assert np.array_equal(h, -h[::-1])


def _coded32(c: float, code: int, mask: int) -> np.float32:
    bits = np.array([c], dtype=np.float32).view(np.uint32)
    return ((bits & np.uint32(~mask & 0xFFFFFFFF)) | np.uint32(code)).view(np.float32)[0]


def _staircase_numpy(cent) -> bool:
    cent = np.asarray(cent, dtype=np.float32)
    return bool(np.array_equal(cent[:-1] + (cent[1:] - cent[:-1]), cent[1:]))


def test_fma_search_staircase_needs_no_bias_for_the_codebooks():
    # the append's FMA search climbs the coded positive centroids in float32 steps; for the
    # codebooks in use each step lands exactly on the next (checked here in numpy float32),
    # so no bias is added; a pair whose rounded step misses its target takes the bias 0.25,
    # after which every step lands
    for levels in (8, 16):
        half = levels // 2
        cent = [_coded32(c, half + j, levels - 1)
                for j, c in enumerate(codebook.lloyd_max(levels)[half:])]
        assert _staircase_numpy(cent)
        assert codebook.staircase_exact([float(c) for c in cent])
        assert codebook.staircase_bias(levels) == 0.0
    a, b = float.fromhex("0x1.0dbf24p-5"), float.fromhex("0x1.6e549ep-3")
    assert not _staircase_numpy([a, b]) and not codebook.staircase_exact([a, b])
    biased = [float(np.float32(a) + np.float32(0.25)), float(np.float32(b) + np.float32(0.25))]
    assert _staircase_numpy(biased) and codebook.staircase_exact(biased)


@pytest.mark.parametrize("levels", [16, 8])
@pytest.mark.parametrize("bias", [0.0, 0.25])
def test_lookup_cells_give_the_staircase_centroid_for_every_coordinate(levels, bias):
    # the append's search by lookup (codebook.cells): a coordinate v of a unit vector goes to
    # cell round(v · inv), found in float32 as the kernel finds it (v · inv + 2²³, its low
    # bits masked), and the cell's row gives its lowest coded centroid plus 1 or 0 times the
    # step, by one comparison with the cell's threshold. For v on a dense grid over [0, 1],
    # on each threshold, one float either side of it, and on and either side of each cell's
    # edges, that must be the staircase's coded centroid, bit for bit: the one that counts
    # the thresholds strictly below v
    half, mask = levels // 2, levels - 1
    inv, rows = codebook.cells(levels, bias)
    n = len(rows)
    assert n & (n - 1) == 0 and round(inv) + 2 <= n
    words = np.array(rows, dtype=np.uint64)
    neg_t = (words[:, 0] & np.uint64(M32)).astype(np.uint32).view(np.float32)
    low = (words[:, 0] >> np.uint64(32)).astype(np.uint32).view(np.float32)
    step = (words[:, 1] & np.uint64(M32)).astype(np.uint32).view(np.float32)
    th = np.array(codebook.thresholds(levels)[half:], dtype=np.float32)
    cent = np.array([_coded32(np.float32(np.float32(c) + np.float32(bias)), half + j, mask)
                     for j, c in enumerate(codebook.lloyd_max(levels)[half:])], np.float32)
    edges = ((np.arange(n) + 0.5) / inv).astype(np.float32)
    near = np.concatenate([th, edges])
    v = np.concatenate([np.linspace(0, 1, 200_001, dtype=np.float32), near,
                        np.nextafter(near, np.float32(2)), np.nextafter(near, np.float32(0))])
    v = v[v <= 1]
    with np.errstate(over="ignore"):
        at = (v * np.float32(inv) + np.float32(2 ** 23)).view(np.uint32) & np.uint32(n - 1)
    above = (v > -neg_t[at]).astype(np.float32)
    got = low[at] + above * step[at]
    want = cent[(v[:, None] > th[None, :]).sum(1)]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # each threshold lies in a cell of its own, well inside it (a float32 rounding of v ·
    # inv is about 10⁻⁵ of a cell)
    cells = np.rint(th.astype(np.float64) * inv)
    assert len(set(cells)) == len(th)
    assert float(np.abs(th * inv - cells).max()) < 0.5 - 0.2


@pytest.mark.parametrize("norm", (np.float16(0.75), np.float16(13.5)))
def test_tbq4_unpacker_matches_the_table_lookup(norm):
    # the decode path's table: torch's float16 rounding of the codebook; the kernel's block
    # takes two words (eight bytes) a call, with a different norm for each half of them
    assert TBQ4_ASM.value == _tbq4_asm(2)
    cent = ref.centroids(16).half().numpy()
    other = np.float16(-2.5)
    ws = _words()
    for w0, w1 in zip(ws, ws[::-1], strict=True):
        na, nb = _scale_regs(norm)["$5"], _scale_regs(other)["$5"]
        regs = run_ptx(TBQ4_ASM.value, {"$8": w0, "$9": w1, "$10": na, "$11": nb, "$12": nb,
                                        "$13": na})
        b = np.array(_bytes(w0) + _bytes(w1))
        scale = np.array([norm] * 2 + [other] * 4 + [norm] * 2, dtype=np.float32)
        lo = (cent[b & 15].astype(np.float32) * scale).astype(np.float16)
        hi = (cent[b >> 4].astype(np.float32) * scale).astype(np.float16)
        assert np.array_equal(_out(regs, "$0", "$1", "$2", "$3").view(np.uint16),
                              lo.view(np.uint16)), hex(w0)
        assert np.array_equal(_out(regs, "$4", "$5", "$6", "$7").view(np.uint16),
                              hi.view(np.uint16)), hex(w0)


def test_rotated_unpackers_without_the_norm_give_the_centroids():
    # where a head is one 128-value block the norm is the row's scale: the blocks without it
    # return the codebook's float16 entries, and take no norm operand
    c16, c8 = ref.centroids(16).half().numpy(), ref.centroids(8).half().numpy()
    ws = _words()
    for w0, w1 in zip(ws, ws[::-1], strict=True):
        regs = run_ptx(TBQ4_RAW_ASM.value, {"$8": w0, "$9": w1})
        b = np.array(_bytes(w0) + _bytes(w1))
        assert np.array_equal(_out(regs, "$0", "$1", "$2", "$3").view(np.uint16),
                              c16[b & 15].view(np.uint16)), hex(w0)
        assert np.array_equal(_out(regs, "$4", "$5", "$6", "$7").view(np.uint16),
                              c16[b >> 4].view(np.uint16)), hex(w0)
        regs = run_ptx(TBQ4_WORD_RAW_ASM.value, {"$4": w0})
        b = np.array(_bytes(w0))
        assert np.array_equal(_out(regs, "$0", "$1").view(np.uint16), c16[b & 15].view(np.uint16))
        assert np.array_equal(_out(regs, "$2", "$3").view(np.uint16), c16[b >> 4].view(np.uint16))
        regs = run_ptx(TBQ3_RAW_ASM.value, {"$4": w0})
        idx = np.array([(w0 >> (3 * k)) & 7 for k in range(8)])
        assert np.array_equal(_out(regs, "$0", "$1").view(np.uint16), c8[idx[0::2]].view(np.uint16))
        assert np.array_equal(_out(regs, "$2", "$3").view(np.uint16), c8[idx[1::2]].view(np.uint16))
    for asm, last in ((TBQ4_RAW_ASM.value, 9), (TBQ4_WORD_RAW_ASM.value, 4),
                      (TBQ3_RAW_ASM.value, 4)):
        # no float16 multiply, and no operand past the outputs and the packed words
        assert "mul.rn" not in asm
        assert max(int(n) for n in re.findall(r"\$(\d+)", asm)) == last


@pytest.mark.parametrize("norm", (np.float16(0.75), np.float16(-13.5)))
def test_tbq4_one_word_unpacker_matches_the_table_lookup(norm):
    # the word-wise read's block: one word (four bytes) a call, the norm pair twice
    assert TBQ4_WORD_ASM.value == _tbq4_asm(1)
    cent = ref.centroids(16).half().numpy()
    for w in _words():
        regs = run_ptx(TBQ4_WORD_ASM.value, {"$4": w, **_scale_regs(norm)})
        b = np.array(_bytes(w))
        lo = (cent[b & 15].astype(np.float32) * np.float32(norm)).astype(np.float16)
        hi = (cent[b >> 4].astype(np.float32) * np.float32(norm)).astype(np.float16)
        assert np.array_equal(_out(regs, "$0", "$1").view(np.uint16), lo.view(np.uint16))
        assert np.array_equal(_out(regs, "$2", "$3").view(np.uint16), hi.view(np.uint16))


def _e2m1_table() -> np.ndarray:
    mags = np.array(ref.E2M1, dtype=np.float64)
    return np.concatenate([mags, -mags])  # code 8 is −0


@pytest.mark.parametrize("scale", SCALES)
def test_nvfp4_unpacker_matches_the_e2m1_table(scale):
    # the values come out times 2⁻¹⁴ (the caller's scale carries 2⁷, the row scale the rest)
    table = _e2m1_table() * 2.0 ** -14
    for w in _words():
        regs = run_ptx(NVFP4_ASM.value, {"$4": w, **_scale_regs(scale)})
        b = np.array(_bytes(w))
        for got, codes in ((_out(regs, "$0", "$1"), b & 15), (_out(regs, "$2", "$3"), b >> 4)):
            expect = (table[codes] * np.float64(scale)).astype(np.float16)
            assert np.array_equal(got.view(np.uint16), expect.view(np.uint16)), hex(w)


def test_nvfp4_values_are_exact_for_every_e4m3_scale():
    # the kernel passes each block scale times 2⁷: (e2m1 × 2⁻¹⁴) × (scale × 2⁷) must be
    # e2m1 × scale × 2⁻⁷ with no rounding, for every finite e4m3 scale (subnormals included)
    torch = _torch()
    scales = ref.e4m3_value(torch.arange(0, 127, dtype=torch.uint8)).double().numpy()
    table = _e2m1_table()
    # every code in both nibbles: byte i holds codes i (low) and 7i + 3 mod 16 (high)
    b16 = [i | ((7 * i + 3) % 16) << 4 for i in range(16)]
    words = [sum(b16[4 * k + j] << (8 * j) for j in range(4)) for k in range(4)]
    for sc in scales:
        s128 = np.float16(sc * 128)
        assert float(s128) == sc * 128
        for w in words:
            regs = run_ptx(NVFP4_ASM.value, {"$4": w, **_scale_regs(s128)})
            b = np.array(_bytes(w))
            for got, codes in ((_out(regs, "$0", "$1"), b & 15),
                               (_out(regs, "$2", "$3"), b >> 4)):
                assert np.array_equal(got.astype(np.float64), table[codes] * sc / 128), sc


@pytest.mark.parametrize("norm", (np.float16(0.75), np.float16(-13.5)))
def test_tbq3_unpacker_matches_the_table_lookup(norm):
    # one group a call: eight 3-bit indices in the low 24 bits (the rest ignored); $0, $1 the
    # even values, $2, $3 the odd ones
    cent = ref.centroids(8).half().numpy()
    for w in _words():
        regs = run_ptx(TBQ3_ASM.value, {"$4": w, "$5": _scale_regs(norm)["$5"]})
        idx = np.array([(w >> (3 * k)) & 7 for k in range(8)])
        expect = (cent[idx].astype(np.float32) * np.float32(norm)).astype(np.float16)
        assert np.array_equal(_out(regs, "$0", "$1").view(np.uint16),
                              expect[0::2].view(np.uint16)), hex(w)
        assert np.array_equal(_out(regs, "$2", "$3").view(np.uint16),
                              expect[1::2].view(np.uint16)), hex(w)


def test_the_emulator_knows_every_instruction_used():
    ops = set()
    for asm in (Q4_0_ASM.value, Q8_0_ASM.value, TBQ4_ASM.value, TBQ3_ASM.value,
                NVFP4_ASM.value, FP8_ASM.value, TBQ4_WORD_ASM.value, TBQ4_RAW_ASM.value,
                TBQ4_WORD_RAW_ASM.value, TBQ3_RAW_ASM.value):
        ops |= {m.group(1) for m in re.finditer(r"^\s*([a-z][\w.]*)\s", asm, re.M)}
    assert ops - {".reg"} <= {"mov.b32", "prmt.b32", "lop3.b32", "shr.b32", "shl.b32", "mul.lo.u32",
                              "or.b32", "and.b32", "xor.b32", "sub.rn.f16x2", "mul.rn.f16x2",
                              "cvt.rn.f16x2.e4m3x2"}


def _gluon():
    pytest.importorskip("triton.experimental.gluon")
    from kvcore.kernels import gluon_q4_0

    return gluon_q4_0


def _assert_token_pairs(asm: str, scale_regs: dict[str, int], a_value, b_value,
                        seed: int) -> None:
    """A value unpacker of two tokens' words a ($8), b ($9): every byte in every position of
    one word, the other random, both ways round; for each byte k, $k must hold the pair
    (a_value(a's code), b_value(b's code)) of its low nibble and $(4 + k) of its high nibble,
    as float16 to the bit."""
    rng = np.random.default_rng(seed)
    for wa in _words():
        wb = int(rng.integers(0, 1 << 32))
        for x, y in ((wa, wb), (wb, wa)):
            regs = run_ptx(asm, {"$8": x, "$9": y, **scale_regs})
            bx, by = np.array(_bytes(x)), np.array(_bytes(y))
            for k in range(4):
                for reg, shift in ((f"${k}", 0), (f"${4 + k}", 4)):
                    expect = np.array([a_value((bx[k] >> shift) & 15),
                                       b_value((by[k] >> shift) & 15)]).astype(np.float16)
                    assert np.array_equal(_halves(regs[reg]).view(np.uint16),
                                          expect.view(np.uint16)), hex(x)


@pytest.mark.parametrize("scale", SCALES)
def test_gluon_nvfp4_key_unpacker_matches_the_e2m1_table_in_k_asm_order(scale):
    # the Gluon kernel's nvfp4 keys: four bytes of one block, in the element order of the
    # q4_0 form's K_ASM (bytes 0, 2 then 1, 3), the low nibbles' values, then the high ones'
    g = _gluon()
    table = _e2m1_table() * 2.0 ** -14
    for w in _words():
        regs = run_ptx(g.FP4_K_ASM.value, {"$4": w, **_scale_regs(scale)})
        b = np.array(_bytes(w))[[0, 2, 1, 3]]
        for got, codes in ((_out(regs, "$0", "$1"), b & 15), (_out(regs, "$2", "$3"), b >> 4)):
            expect = (table[codes] * np.float64(scale)).astype(np.float16)
            assert np.array_equal(got.view(np.uint16), expect.view(np.uint16)), hex(w)


@pytest.mark.parametrize(("sa", "sb"), [(SCALES[0], SCALES[1]), (SCALES[2], np.float16(448.0))])
def test_gluon_nvfp4_value_unpacker_pairs_two_tokens_each_by_its_scale(sa, sb):
    # two tokens' words a, b of one block → for each byte k, the pair (a's value, b's value)
    # of its low nibble ($k) and of its high nibble ($4 + k), each times its token's scale
    g = _gluon()
    table = _e2m1_table() * 2.0 ** -14
    ra, rb = _scale_regs(sa)["$5"], _scale_regs(sb)["$5"]
    _assert_token_pairs(g.FP4_V_ASM.value, {"$10": ra, "$11": ra, "$12": rb, "$13": rb},
                        lambda c: table[c] * np.float64(sa), lambda c: table[c] * np.float64(sb),
                        seed=1)


def test_the_emulator_knows_every_instruction_of_the_gluon_kernel():
    g = _gluon()
    ops = set()
    for asm in (g.FP4_K_ASM.value, g.FP4_V_ASM.value, g.K8_RAW_ASM.value, g.V8_RAW_ASM.value,
                g.V_ASM.value, g.TBQ4_K_ASM.value, g.TBQ4_V_ASM.value, g.TBQ3_K_ASM.value,
                g.TBQ3_V_ASM.value):
        ops |= {m.group(1) for m in re.finditer(r"^\s*([a-z][\w.]*)\s", asm, re.M)}
    assert ops <= {"mov.b32", "prmt.b32", "lop3.b32", "shr.b32", "shl.b32", "and.b32",
                   "xor.b32", "or.b32", "mul.lo.u32", "sub.rn.f16x2", "mul.rn.f16x2",
                   "shf.r.clamp.b32"}


def test_gluon_tbq4_value_unpacker_pairs_two_tokens_centroids():
    # two tokens' words a, b → for each byte k, the pair (a's centroid, b's centroid) of its
    # low nibble ($k) and of its high nibble ($4 + k), as the kernel's value operand takes them
    g = _gluon()
    cent = ref.centroids(16).half().numpy()
    tables = dict(zip(("$10", "$14", "$18", "$22"), tbq4_tables(), strict=True))
    _assert_token_pairs(g.TBQ4_V_ASM.value, tables, cent.__getitem__, cent.__getitem__, seed=2)


def test_gluon_tbq4_key_unpacker_gives_centroids_in_byte_order():
    g = _gluon()
    cent = ref.centroids(16).half().numpy()
    for w in _words():
        regs = run_ptx(g.TBQ4_K_ASM.value,
                       {"$4": w, **dict(zip(("$5", "$9", "$13", "$17"), tbq4_tables(),
                                            strict=True))})
        b = np.array(_bytes(w))
        assert np.array_equal(_out(regs, "$0", "$1").view(np.uint16),
                              cent[b & 15].view(np.uint16)), hex(w)
        assert np.array_equal(_out(regs, "$2", "$3").view(np.uint16),
                              cent[b >> 4].view(np.uint16)), hex(w)


def _tbq3_group(rng) -> tuple[int, list[int]]:
    """A random tbq3 group of 32 codes: its 96-bit string (code k at bits 3k) and its words."""
    s = int(rng.integers(0, 1 << 48)) | int(rng.integers(0, 1 << 48)) << 48
    return s, [(s >> (32 * i)) & M32 for i in range(3)]


def _tbq3_table_regs(*names: str) -> dict[str, int]:
    return dict(zip(names, _gluon().tbq3_tables(), strict=True))


def test_gluon_tbq3_key_unpacker_gives_each_registers_two_centroids():
    # one token's group (w0, w1, w1, w2) → register 4 q + 2 u + v holds the centroids of the
    # codes at nibbles 4 u + 2 v and + 1 of selector q (TBQ3_K_CODES), every code of 32 once
    g = _gluon()
    cent = ref.centroids(8).half().numpy()
    codes = [k for sel in g.TBQ3_K_CODES for k in sel]
    assert sorted(codes) == list(range(32))
    rng = np.random.default_rng(3)
    tables = _tbq3_table_regs("$20", "$24", "$28", "$32")
    for patterned in range(520):
        s, w = _tbq3_group(rng)
        if patterned < 256:  # every code value in every position, by a repeated byte
            s = int.from_bytes(bytes([patterned]) * 12, "little")
            w = [(s >> (32 * i)) & M32 for i in range(3)]
        regs = run_ptx(g.TBQ3_K_ASM.value,
                       {"$16": w[0], "$17": w[1], "$18": w[1], "$19": w[2], **tables})
        for q in range(4):
            for r in range(4):
                pair = g.TBQ3_K_CODES[q][2 * r: 2 * r + 2]
                expect = cent[[(s >> (3 * k)) & 7 for k in pair]]
                assert np.array_equal(_halves(regs[f"${4 * q + r}"]).view(np.uint16),
                                      expect.view(np.uint16)), (hex(s), q, r)


def test_gluon_tbq3_value_unpacker_pairs_two_tokens_centroids_per_window_half():
    # two tokens' two words (w0 w1 at shift 0: codes 0-15; w1 w2 at shift 16: codes 16-31) →
    # $k holds (a's centroid, b's centroid) of the window's code k
    g = _gluon()
    cent = ref.centroids(8).half().numpy()
    rng = np.random.default_rng(4)
    tables = _tbq3_table_regs("$24", "$28", "$32", "$36")
    for patterned in range(300):
        sa, wa = _tbq3_group(rng)
        sb, wb = _tbq3_group(rng)
        if patterned < 256:
            sa = int.from_bytes(bytes([patterned]) * 12, "little")
            wa = [(sa >> (32 * i)) & M32 for i in range(3)]
        for half in (0, 1):
            regs = run_ptx(g.TBQ3_V_ASM.value,
                           {"$16": wa[half], "$17": wa[half + 1], "$18": wb[half],
                            "$19": wb[half + 1], "$20": 16 * half, **tables})
            for k in range(16):
                code = 16 * half + k
                expect = cent[[(sa >> (3 * code)) & 7, (sb >> (3 * code)) & 7]]
                assert np.array_equal(_halves(regs[f"${k}"]).view(np.uint16),
                                      expect.view(np.uint16)), (hex(sa), half, k)


def test_gluon_tbq3_query_order_is_each_lane_groups_codes_once():
    # the key operand's column k = 16 p + 8 j1 + 2 t + j0 holds half j0 of the key unpacker's
    # register 2 p + j1 of lane t's group (codes 32 t …): a permutation of the 128 dimensions
    g = _gluon()
    order = g.tbq3_query_order()
    assert sorted(order) == list(range(128))
    for k, dim in enumerate(order):
        assert dim // 32 == (k >> 1) & 3
    # the first columns: lane 0's register 0 (selector 0's nibbles 0, 1: codes 0, 1), lane 1's
    assert order[:4] == [0, 1, 32, 33]


def test_nibble_gatherer_shares_one_shift_per_register_and_offset():
    # codes of one register whose bit − 4 · nibble agree take one shift and one merge
    g = _gluon()
    lines = g._nibble_lines("s", [("x", 0, 0), ("x", 12, 3), ("x", 3, 1), ("x", 15, 4),
                                  ("y", 5, 2)])
    assert lines == ["and.b32 s, x, 0x7007;", "shl.b32 t, x, 1;",
                     "lop3.b32 s, s, t, 0x70070, 0xf8;", "shl.b32 t, y, 3;",
                     "lop3.b32 s, s, t, 0x700, 0xf8;"]
    for x in (0x12345678, 0xFFFFFFFF, 0):
        y = 0xDEADBEEF
        got = run_ptx("{" + ";".join(lines) + ";}", {"x": x, "y": y})["s"]
        expect = ((x & 7) | ((x >> 3) & 7) << 4 | ((y >> 5) & 7) << 8 | ((x >> 12) & 7) << 12
                  | ((x >> 15) & 7) << 16)
        assert got == expect
