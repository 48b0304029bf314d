"""Triton kernels: quantize-and-append new K/V rows, fused split-K decode attention, and the
split reduction. One kernel per job; the format is a compile-time constant, so each format gets
its own specialised code with the dequantisation fused into the attention loop.

Format codes: 0 f16/bf16, 1 fp8_pth, 2 q8_0, 3 q4_0, 4 tbq4, 5 tbq3, 6 nvfp4.
Row addresses are int64; token positions and the offsets within a tile int32. On a GPU the
decode kernel unpacks q8_0, q4_0, tbq4, tbq3 and nvfp4 with inline PTX (the blocks below,
checked on the CPU by tests/kernels/test_ptx.py); the interpreter runs the plain Triton path,
which gives the same float16 values. Inline assembly is elementwise: a block reads only the
elements it is given, however the compiler packs them.
"""

from __future__ import annotations

import struct

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from .codebook import lloyd_max

FMT_CODES = {"f16": 0, "bf16": 0, "fp8_pth": 1, "q8_0": 2, "q4_0": 3, "tbq4": 4, "tbq3": 5,
             "nvfp4": 6}


@triton.jit
def pdl_enter(PDL: tl.constexpr):
    """With PDL (a kernel launched as a programmatic dependent of the one before it in the
    stream, on Hopper or later): wait until that kernel has finished and its writes are
    visible, then let the next kernel be launched, so that its programs are scheduled while
    this one runs instead of after it. Nothing is read before the wait."""
    pdl_wait(PDL)
    pdl_release(PDL)


@triton.jit
def pdl_wait(PDL: tl.constexpr):
    """With PDL: wait until the kernel before this one has finished and its writes are
    visible; the next kernel is let in by pdl_release at the end (a kernel whose dependent is
    a split kernel: see pdl_release)."""
    if PDL:
        gdc_wait()


@triton.jit
def pdl_release(PDL: tl.constexpr):
    """With PDL: let the next kernel be launched, after this program's last store. A merge or
    a rotation that let its dependent in at its start (pdl_enter) had the next layer's split
    kernel placed while it ran: its programs went where slots were free, up to the most a
    multiprocessor holds instead of the number its split was sized for, and the work was
    uneven (gpt-oss-120b q4_0 128k × 4, a model's whole step: 3.32 → 4.73 ms)."""
    if PDL:
        gdc_launch_dependents()


@triton.jit
def e4m3_decode(bits):
    """uint8 e4m3fn bit patterns → float32."""
    b = bits.to(tl.int32)
    e = (b >> 3) & 15
    m = b & 7
    normal = (((e + 120) << 23) | (m << 20)).to(tl.float32, bitcast=True)
    sub = m.to(tl.float32) * (1.0 / 512.0)
    v = tl.where(e == 0, sub, normal)
    return tl.where(((b >> 7) & 1) == 1, -v, v)


@triton.jit
def _round_half_even(x):
    """Round non-negative floats to the nearest integer, ties to even (as float)."""
    f = tl.floor(x)
    r = x - f
    odd = (f - 2.0 * tl.floor(f * 0.5)) == 1.0
    up = (r > 0.5) | ((r == 0.5) & odd)
    return tl.where(up, f + 1.0, f)


@triton.jit
def e4m3_encode(x):
    """float32 → uint8 e4m3fn bit pattern, round to nearest even, |x| ≤ 448 assumed."""
    # the sign bit itself, so that -0.0 keeps its sign
    neg = (x.to(tl.int32, bitcast=True) >> 31) & 1
    a = tl.minimum(tl.abs(x), 448.0)
    bits = a.to(tl.int32, bitcast=True)
    exp = ((bits >> 23) & 255) - 127 + 7
    mant = bits & 0x7FFFFF
    m3 = mant >> 20
    rem = mant & 0xFFFFF
    up = (rem > 0x80000) | ((rem == 0x80000) & ((m3 & 1) == 1))
    normal = (exp << 3) + m3 + up.to(tl.int32)
    sub = _round_half_even(a * 512.0).to(tl.int32)
    code = tl.where(exp >= 1, normal, sub)
    code = tl.minimum(code, 126)
    return (code | (neg << 7)).to(tl.uint8)


@triton.jit
def _e4m3(x, HW: tl.constexpr):
    """float32 → uint8 e4m3fn bit pattern, round to nearest even: the hardware conversion on a
    GPU (HW; it saturates at ±448), e4m3_encode in the interpreter (whose own float8 conversion
    does not round ties to even). Both give torch's bits."""
    if HW:
        return x.to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    else:
        return e4m3_encode(x)


@triton.jit
def _fp8(bits):
    """uint8 e4m3fn bit patterns → float16 (a hardware conversion on Hopper)."""
    return bits.to(tl.float8e4nv, bitcast=True).to(tl.float16)


#: PTX for four q4_0 bytes → their four low and four high nibbles as float16, minus 8, times the
#: block scale: each nibble is laid into the mantissa of 1024 (low) or 64 (high, 16× finer), and
#: one subtraction per pair removes the bias. Two values per instruction, no integer-to-float
#: conversion.
def _q4_0_asm(shifted: bool = False, scaled: bool = True) -> str:
    """The q4_0 block: operands $0, $1 the low nibbles' float16 pairs, $2, $3 the high ones',
    $4 the four bytes, $5, $6 the scale pairs. The pairs are bytes (0, 1) and (2, 3), spread
    by byte permutes; ``shifted``: bytes (0, 2) and (1, 3), which are 16 bits apart already
    and after one shift (no permute; the Gluon kernel's query columns follow that order).
    Not ``scaled``: the codes as 1024 + n (low nibbles) and 64 + n (high) only, no scale
    operands; the kernel subtracts the offsets and applies the scale after its product."""
    if shifted:
        body = [".reg .b32 t1, m;", "shr.b32 t1, $4, 8;"]
        src = ("$4", "t1")
    else:
        body = [".reg .b32 z, t0, t1, m;", "mov.b32 z, 0;",
                "prmt.b32 t0, $4, z, 0x4140;", "prmt.b32 t1, $4, z, 0x4342;"]
        src = ("t0", "t1")
    # (mask, magic, magic + 8): a low nibble in 1024's units, a high one in 64's (1/16 steps)
    for out, (mask, magic, bias) in ((0, (0x000F000F, 0x64006400, 0x64086408)),
                                     (2, (0x00F000F0, 0x54005400, 0x54805480))):
        if scaled:
            body.append(f"mov.b32 m, 0x{bias:08X};")
        body += [f"lop3.b32 ${out + k}, {src[k]}, 0x{mask:08X}, 0x{magic:08X}, 0xea;"
                 for k in (0, 1)]
        if scaled:
            body += [f"sub.rn.f16x2 ${out + k}, ${out + k}, m;" for k in (0, 1)]
            body += [f"mul.rn.f16x2 ${out + k}, ${out + k}, ${5 + k};" for k in (0, 1)]
    return "{\n" + "\n".join(body) + "\n}"


Q4_0_ASM = tl.constexpr(_q4_0_asm())

#: PTX for four q8_0 bytes → float16 times the block scale: the byte, offset by 128, becomes the
#: low mantissa byte of 1024; subtracting 1152 leaves the signed value.
Q8_0_ASM = tl.constexpr("""{
.reg .b32 x, t, m;
xor.b32 x, $2, 0x80808080;
mov.b32 t, 0x64646464;
mov.b32 m, 0x64806480;
prmt.b32 $0, x, t, 0x5140;
prmt.b32 $1, x, t, 0x7362;
sub.rn.f16x2 $0, $0, m;
sub.rn.f16x2 $1, $1, m;
mul.rn.f16x2 $0, $0, $3;
mul.rn.f16x2 $1, $1, $4;
}""")

#: PTX for four fp8 (e4m3) bytes → float16, two hardware conversions of a byte pair each.
FP8_ASM = tl.constexpr("""{
.reg .b16 lo, hi;
mov.b32 {lo, hi}, $2;
cvt.rn.f16x2.e4m3x2 $0, lo;
cvt.rn.f16x2.e4m3x2 $1, hi;
}""")


def byte_tables(values: list[float]) -> tuple[int, int, int, int]:
    """Eight float16 values as four prmt tables: their low bytes (two words) and their high
    bytes (two words), entry k in byte k % 4 of word k // 4."""
    bits = [struct.unpack("<H", struct.pack("<e", v))[0] for v in values]
    words = []
    for part in ([b & 0xFF for b in bits], [b >> 8 for b in bits]):
        for q in (0, 4):
            words.append(sum(part[q + i] << (8 * i) for i in range(4)))
    return words[0], words[1], words[2], words[3]


def _tbq4_asm(words: int = 2, scaled: bool = True,
              tables: tuple[str, str, str, str] | None = None) -> str:
    """PTX for 4 × ``words`` tbq4 bytes → their low and high nibbles' centroids (float16) times
    the block norm (without ``scaled``: the centroids alone, no norm operands), looked up with
    byte permutes. The indices are sorted centroid ranks and the
    codebook is symmetric (c[i] = −c[15 − i]), so rank i reads magnitude (i & 7) ^ (7 if i < 8)
    from two 8-entry byte tables (the low and high bytes of c[8..15], built here from kvplan's
    codebook) and takes the sign from bit 3: eight values in 25 instructions, no memory. The
    tables are set once per call; a call takes several words so that they are set seldom.
    Operands: outputs low halves $0…, high halves next, then the words, then the norms.
    ``tables``: the operands that hold the four tables (tbq4_tables), not set here."""
    lo = [f"${2 * w}" for w in range(words)], [f"${2 * w + 1}" for w in range(words)]
    hi = ([f"${2 * words + 2 * w}" for w in range(words)],
          [f"${2 * words + 2 * w + 1}" for w in range(words)])
    data = [f"${4 * words + w}" for w in range(words)]
    norm = [(f"${5 * words + 2 * w}", f"${5 * words + 2 * w + 1}") for w in range(words)]
    body = [".reg .b32 f, m, mh, l0, h0, l1, h1, n0, n1, s0, s1;"]
    if tables:
        a0, a1, b0, b1 = tables
    else:
        a0, a1, b0, b1 = "a0", "a1", "b0", "b1"
        tl0, tl1, th0, th1 = tbq4_tables()
        body += [".reg .b32 a0, a1, b0, b1;", f"mov.b32 a0, {tl0:#x};",
                 f"mov.b32 a1, {tl1:#x};", f"mov.b32 b0, {th0:#x};", f"mov.b32 b1, {th1:#x};"]
    for w in range(words):
        x, (na, nb) = data[w], norm[w]
        body += [
            f"shr.b32 f, {x}, 3;",
            "lop3.b32 f, f, 0x11111111, 0, 0x0c;",
            "mul.lo.u32 f, f, 7;",
            f"lop3.b32 m, {x}, f, 0x77777777, 0x28;",
            "shr.b32 mh, m, 16;",
            f"prmt.b32 l0, {a0}, {a1}, m;", f"prmt.b32 h0, {b0}, {b1}, m;",
            f"prmt.b32 l1, {a0}, {a1}, mh;", f"prmt.b32 h1, {b0}, {b1}, mh;",
            "or.b32 n0, h0, 0x80808080;", "or.b32 n1, h1, 0x80808080;",
            f"shr.b32 s0, {x}, 1;", f"shr.b32 s1, {x}, 17;",
            "lop3.b32 s0, s0, 0x4444, 0x3210, 0xae;", "lop3.b32 s1, s1, 0x4444, 0x3210, 0xae;",
            "prmt.b32 h0, h0, n0, s0;", "prmt.b32 h1, h1, n1, s1;",
            f"prmt.b32 {lo[0][w]}, l0, h0, 0x6240;", f"prmt.b32 {lo[1][w]}, l1, h1, 0x6240;",
            f"prmt.b32 {hi[0][w]}, l0, h0, 0x7351;", f"prmt.b32 {hi[1][w]}, l1, h1, 0x7351;"]
        if scaled:
            body += [f"mul.rn.f16x2 {lo[0][w]}, {lo[0][w]}, {na};",
                     f"mul.rn.f16x2 {lo[1][w]}, {lo[1][w]}, {nb};",
                     f"mul.rn.f16x2 {hi[0][w]}, {hi[0][w]}, {na};",
                     f"mul.rn.f16x2 {hi[1][w]}, {hi[1][w]}, {nb};"]
    return "{\n" + "\n".join(body) + "\n}"


def tbq4_tables() -> tuple[int, int, int, int]:
    """The byte tables of tbq4's eight positive centroids (float16), as _tbq4_asm takes them:
    low bytes (two words), then high bytes (two words)."""
    return byte_tables(list(lloyd_max(16)[8:]))


def tbq3_tables() -> tuple[int, int, int, int]:
    """The byte tables of tbq3's eight centroids (float16), as _tbq3_asm and the Gluon kernel's
    tbq3 form take them: low bytes (two words), then high bytes (two words)."""
    return byte_tables(list(lloyd_max(8)))


def e2m1_high_bytes(src: str, lo: str, hi: str) -> list[str]:
    """PTX lines that make each e2m1 nibble of word ``src`` a float16 high byte within its own
    byte (sign in bit 7, magnitude in bits 1-3): the low nibbles' bytes in ``lo``, the high
    nibbles' in ``hi`` (the caller declares s, a, b and c)."""
    sel = "0x0E0E0E0E"  # each byte's bits 1-3 from the first operand, the others from the second
    return [f"and.b32 s, {src}, 0x88888888;", f"shr.b32 a, {src}, 3;",
            f"lop3.b32 {hi}, a, s, {sel}, 0xe4;", f"shl.b32 b, {src}, 1;", "shl.b32 c, s, 4;",
            f"lop3.b32 {lo}, b, c, {sel}, 0xe4;"]


def _nvfp4_asm(pairs: tuple[str, str] = ("0x1404", "0x3424"),
               scales: tuple[str, str] = ("$5", "$6")) -> str:
    """PTX for four nvfp4 bytes → their low and high nibbles' e2m1 values times 2⁻¹⁴ (float16)
    times the block scale. An e2m1 code's magnitude bits laid in float16's bits 9-11 (its two
    exponent bits in the exponent's lowest two, its mantissa bit in the mantissa's highest)
    read as the value times 2⁻¹⁴, codes 0 and 1 as subnormals included, so no table is needed:
    each nibble becomes a float16 high byte (sign in bit 7, magnitude in bits 1-3) within its
    byte of the word (e2m1_high_bytes), and one permute a pair lays two such bytes over zero
    low bytes. Eight values in 14 instructions. The caller's scale carries 2⁷ (the values come
    out as e2m1 × scale × 2⁻⁷, exact in float16 for every e4m3 scale) and the row scale the
    rest. ``pairs``: the permutes' selectors, bytes (0, 1) and (2, 3) by default; ``scales``:
    the operands that scale them."""
    body = [".reg .b32 s, a, b, c, yl, yh, z;", "mov.b32 z, 0;",
            *e2m1_high_bytes("$4", "yl", "yh")]
    for out, (y, sel) in enumerate([("yl", pairs[0]), ("yl", pairs[1]), ("yh", pairs[0]),
                                    ("yh", pairs[1])]):
        body.append(f"prmt.b32 ${out}, {y}, z, {sel};")
    body += [f"mul.rn.f16x2 ${out}, ${out}, {scales[out % 2]};" for out in range(4)]
    return "{\n" + "\n".join(body) + "\n}"


def _tbq3_asm(scaled: bool = True) -> str:
    """PTX for one tbq3 group, elementwise: $4 holds its eight 3-bit centroid indices i0…i7 at
    bits 3k (bits above 24 ignored), $5 the block norm as a float16 pair (none without
    ``scaled``). Out come the values as float16 pairs times the norm (without ``scaled``: the
    centroids alone): $0 = (i0, i2), $1 = (i4, i6), $2 = (i1, i3), $3 = (i5, i7). The even and the odd indices are gathered into the nibbles of two prmt
    selectors (bits 0-3 of the selector from bits 0-3 of the word, 4-7 from the word shifted
    right by 2, …; then bit 3 of each nibble cleared), which pick the low and the high bytes
    of the eight centroids from two 8-entry byte tables."""
    tl0, tl1, th0, th1 = tbq3_tables()
    body = [".reg .b32 v, e, o, t, l, h, a0, a1, b0, b1;",
            f"mov.b32 a0, {tl0:#x};", f"mov.b32 a1, {tl1:#x};",
            f"mov.b32 b0, {th0:#x};", f"mov.b32 b1, {th1:#x};", "shr.b32 v, $4, 3;"]
    for sel, src in (("e", "$4"), ("o", "v")):
        body.append(f"mov.b32 {sel}, {src};")
        for shift, keep in ((2, 0xF), (4, 0xFF), (6, 0xFFF)):
            # bits under `keep` from the selector so far, the rest from the shifted word
            body += [f"shr.b32 t, {src}, {shift};", f"lop3.b32 {sel}, {sel}, t, {keep:#x}, 0xe4;"]
        body.append(f"and.b32 {sel}, {sel}, 0x7777;")
    for sel, out in (("e", 0), ("o", 2)):
        body += [f"prmt.b32 l, a0, a1, {sel};", f"prmt.b32 h, b0, b1, {sel};",
                 f"prmt.b32 ${out}, l, h, 0x5140;", f"prmt.b32 ${out + 1}, l, h, 0x7362;"]
        if scaled:
            body += [f"mul.rn.f16x2 ${out}, ${out}, $5;",
                     f"mul.rn.f16x2 ${out + 1}, ${out + 1}, $5;"]
    return "{\n" + "\n".join(body) + "\n}"


TBQ4_ASM = tl.constexpr(_tbq4_asm(2))
TBQ4_WORD_ASM = tl.constexpr(_tbq4_asm(1))
TBQ3_ASM = tl.constexpr(_tbq3_asm())
#: the same without the norm: where a head is one 128-value block, its norm is the row's scale,
#: applied to the scores and the weights instead of to every value (decode_split_kernel's NK, NV)
TBQ4_RAW_ASM = tl.constexpr(_tbq4_asm(2, scaled=False))
TBQ4_WORD_RAW_ASM = tl.constexpr(_tbq4_asm(1, scaled=False))
TBQ3_RAW_ASM = tl.constexpr(_tbq3_asm(scaled=False))
NVFP4_ASM = tl.constexpr(_nvfp4_asm())


@triton.jit
def _tile_dims(FMT: tl.constexpr, DPOW: tl.constexpr, PART: tl.constexpr):
    """Head dimension held at each position of a tile as _tile or _halves returns it. Whole
    tiles (PART 0) are in natural order; the 4-bit formats come as two half tiles of a byte's
    low (PART 1) and high (PART 2) nibbles: q4_0's byte j of a 32-block holds values j and
    j + 16, tbq4's and nvfp4's byte j values 2j and 2j + 1."""
    if PART == 0:
        return tl.arange(0, DPOW)
    else:
        j = tl.arange(0, DPOW // 2)
        if FMT == 3:
            return (j // 16) * 32 + (j % 16) + (PART - 1) * 16
        else:
            return 2 * j + (PART - 1)


#: nvfp4's unpacked values are e2m1 × block scale × 2⁻⁷ (NVFP4_ASM, _e2m1); its row scale
#: carries the 2⁷ back
NVFP4_UNIT = tl.constexpr(128.0)


@triton.jit
def _e2m1(code):
    """4-bit e2m1 codes (sign, 2 exponent bits, 1 mantissa bit) → their value times 2⁻¹⁴ as
    float16, as NVFP4_ASM lays them: the code's magnitude bits in bits 9-11, its sign in bit
    15. Magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (times 2⁻¹⁴)."""
    bits = ((code & 7) << 9) | ((code & 8) << 12)
    return bits.to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def _planes(P0, P1, r, rmask, NB: tl.constexpr, BB: tl.constexpr, NBV: tl.constexpr,
            X0: tl.constexpr, X1: tl.constexpr):
    """Packed bytes as [BN, NB, BB] (BB bytes per scale block) and the block scales as
    [BN, NB, 1]; NBV of the NB blocks hold data. Masked rows and blocks read bytes 0 with
    scale 0, so their values are 0 in every format."""
    nb = tl.arange(0, NB)[None, :, None]
    j = tl.arange(0, BB)[None, None, :]
    r3 = r[:, None, None]
    m3 = rmask[:, None, None] & (nb < NBV)
    byte = tl.load(P0 + r3 * X0 + nb * BB + j, mask=m3, other=0)
    scale = tl.load(P1 + r3 * X1 + nb, mask=m3, other=0.0)
    return byte, scale


@triton.jit
def _tile(FMT: tl.constexpr, P0, P1, GS, CENT, r, rmask, BN: tl.constexpr,
          DPOW: tl.constexpr, DP: tl.constexpr, X0: tl.constexpr, X1: tl.constexpr,
          ASM: tl.constexpr, WORDS: tl.constexpr):
    """A whole K or V tile (f16, fp8_pth, q8_0) for ``BN`` cache rows ``r`` of the
    planes P0 and P1, read straight from the packed bytes: ([BN, DPOW] values with every
    per-block scale applied, [BN] float32 per-row scale, 0 on masked rows)."""
    rm = rmask[:, None]
    if FMT == 0:
        w = tl.arange(0, DPOW)[None, :]
        if DP == DPOW:
            tile = tl.load(P0 + r[:, None] * X0 + w, mask=rm, other=0.0)
        else:
            tile = tl.load(P0 + r[:, None] * X0 + w, mask=rm & (w < DP), other=0.0)
        scale = tl.where(rmask, 1.0, 0.0)
    elif FMT == 1:
        if WORDS:
            w = tl.arange(0, DPOW // 4)[None, :]
            word = tl.load(P0.to(tl.pointer_type(tl.int32)) + r[:, None] * (X0 // 4) + w,
                           mask=rm & (w < DP // 4), other=0)
            # fp8_pth has no block scales (its row scale comes below): the scale slot unused
            w01, w23 = _unpack_words(1, word, word, CENT, ASM)
            tile = tl.reshape(_pairs(w01, w23), (BN, DPOW))
        else:
            w = tl.arange(0, DPOW)[None, :]
            tile = _fp8(tl.load(P0 + r[:, None] * X0 + w, mask=rm & (w < DP), other=0))
        scale = tl.load(P1 + r, mask=rmask, other=0.0)
    elif WORDS:
        # q8_0, read as words
        word, ds = _word_planes(P0, P1, r, rmask, DPOW // 32, 8, DP // 32, X0, X1)
        w01, w23 = _unpack_words(2, word, ds, CENT, ASM)
        tile = tl.reshape(_pairs(w01, w23), (BN, DPOW))
        scale = tl.where(rmask, 1.0, 0.0)
    else:
        # q8_0
        raw, ds = _planes(P0, P1, r, rmask, DPOW // 32, 32, DP // 32, X0, X1)
        if ASM:
            val = tl.inline_asm_elementwise(Q8_0_ASM, "=r,=r,r,r,r", [raw, ds],
                                            dtype=tl.float16, is_pure=True, pack=4)
        else:
            val = raw.to(tl.float16) * ds
        tile = tl.reshape(val, (BN, DPOW))
        scale = tl.where(rmask, 1.0, 0.0)
    return tile, scale


@triton.jit
def _bits(x):
    """float16 → its bit pattern in the low half of an int32."""
    return x.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF


@triton.jit
def _tbq3_word(lane, S0: tl.constexpr, S1: tl.constexpr, CENT, norm):
    """The centroids of the 3-bit indices at bits S0 and S1 of ``lane``, times ``norm``, as a
    float16 pair in an int32 (as TBQ3_ASM returns them)."""
    a = tl.load(CENT + ((lane >> S0) & 7)) * norm
    b = tl.load(CENT + ((lane >> S1) & 7)) * norm
    return _bits(a) | (_bits(b) << 16)


@triton.jit
def _f16(w, HIGH: tl.constexpr):
    """The low or the high float16 of int32 words."""
    if HIGH:
        w = w >> 16
    return (w & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def _pairs(w01, w23):
    """Float16 pairs (w01 = (v0, v1), w23 = (v2, v3)) of [R, G] words → [R, G, 4] values."""
    return tl.join(tl.join(_f16(w01, False), _f16(w23, False)),
                   tl.join(_f16(w01, True), _f16(w23, True)))


@triton.jit
def _pair(a, b):
    """Two float16 tensors → int32 words holding the pairs (a, b), a in the low half."""
    return _bits(a) | (_bits(b) << 16)


@triton.jit
def _word_planes(P0, P1, r, rmask, NB: tl.constexpr, WB: tl.constexpr, NBV: tl.constexpr,
                 X0: tl.constexpr, X1: tl.constexpr):
    """Packed bytes read as int32 words, [BN, NB, WB] (WB words per scale block), and the block
    scales as [BN, NB, 1]; NBV of the NB blocks hold data. Masked rows and blocks read words 0
    with scale 0."""
    nb = tl.arange(0, NB)[None, :, None]
    j = tl.arange(0, WB)[None, None, :]
    r3 = r[:, None, None]
    m3 = rmask[:, None, None] & (nb < NBV)
    word = tl.load(P0.to(tl.pointer_type(tl.int32)) + r3 * (X0 // 4) + nb * WB + j, mask=m3,
                   other=0)
    scale = tl.load(P1 + r3 * X1 + nb, mask=m3, other=0.0)
    return word, scale


@triton.jit
def _byte(word, K: tl.constexpr):
    """Byte K of int32 words, as int32 0…255."""
    return (word >> (8 * K)) & 255


@triton.jit
def _unpack_words(FMT: tl.constexpr, word, sc, CENT, ASM: tl.constexpr,
                  RAW: tl.constexpr = False):
    """Int32 words of packed bytes and their block scale (float16, the same shape) → float16
    pairs as int32 words: (w01, w23) for the 8-bit formats (the word's four values), and
    (l01, l23, h01, h23) for the 4-bit ones (the four low nibbles' values, then the four high
    nibbles'). With ASM the PTX blocks, else the same words from plain arithmetic. RAW (tbq4):
    the centroids without their norm (the plain path is then given a scale of 1)."""
    if ASM:
        if FMT == 4 and RAW:
            return tl.inline_asm_elementwise(
                TBQ4_WORD_RAW_ASM, "=r,=r,=r,=r,r", [word],
                dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True, pack=1)
        elif FMT == 1:
            return tl.inline_asm_elementwise(FP8_ASM, "=r,=r,r", [word],
                                             dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        else:
            sb = _bits(sc)
            pair = sb | (sb << 16)
            if FMT == 2:
                return tl.inline_asm_elementwise(Q8_0_ASM, "=r,=r,r,r,r", [word, pair, pair],
                                                 dtype=(tl.int32, tl.int32), is_pure=True,
                                                 pack=1)
            else:
                if FMT == 3:
                    text: tl.constexpr = Q4_0_ASM
                elif FMT == 4:
                    text: tl.constexpr = TBQ4_WORD_ASM
                else:
                    text: tl.constexpr = NVFP4_ASM
                return tl.inline_asm_elementwise(
                    text, "=r,=r,=r,=r,r,r,r", [word, pair, pair],
                    dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True, pack=1)
    else:
        if FMT == 1:
            v0 = _fp8(_byte(word, 0).to(tl.uint8))
            v1 = _fp8(_byte(word, 1).to(tl.uint8))
            v2 = _fp8(_byte(word, 2).to(tl.uint8))
            v3 = _fp8(_byte(word, 3).to(tl.uint8))
            return _pair(v0, v1), _pair(v2, v3)
        elif FMT == 2:
            # the bytes as signed values: shifted to the top, then arithmetic shifts down
            v0 = ((word << 24) >> 24).to(tl.float16) * sc
            v1 = ((word << 16) >> 24).to(tl.float16) * sc
            v2 = ((word << 8) >> 24).to(tl.float16) * sc
            v3 = (word >> 24).to(tl.float16) * sc
            return _pair(v0, v1), _pair(v2, v3)
        else:
            lo0, hi0 = _nibbles(FMT, _byte(word, 0), sc, CENT)
            lo1, hi1 = _nibbles(FMT, _byte(word, 1), sc, CENT)
            lo2, hi2 = _nibbles(FMT, _byte(word, 2), sc, CENT)
            lo3, hi3 = _nibbles(FMT, _byte(word, 3), sc, CENT)
            return _pair(lo0, lo1), _pair(lo2, lo3), _pair(hi0, hi1), _pair(hi2, hi3)


@triton.jit
def _nibbles(FMT: tl.constexpr, b, sc, CENT):
    """Bytes (int32 0…255) of a 4-bit format → the values of their low and high nibbles times
    the block scale, float16 (the plain path)."""
    if FMT == 3:
        return q4_0_nibbles(b, sc, False)
    elif FMT == 4:
        return tl.load(CENT + (b & 15)) * sc, tl.load(CENT + (b >> 4)) * sc
    else:
        return _e2m1(b & 15) * sc, _e2m1(b >> 4) * sc


@triton.jit
def q4_0_nibbles(byte, ds, ASM: tl.constexpr):
    """q4_0 bytes → their low and their high nibbles minus 8, times the block scale ``ds``
    (float16, elementwise)."""
    if ASM:
        return tl.inline_asm_elementwise(Q4_0_ASM, "=r,=r,=r,=r,r,r,r", [byte, ds],
                                         dtype=(tl.float16, tl.float16), is_pure=True, pack=4)
    else:
        b = byte.to(tl.int32)
        return ((b & 15).to(tl.float16) - 8.0) * ds, ((b >> 4).to(tl.float16) - 8.0) * ds


@triton.jit
def _halves(FMT: tl.constexpr, P0, P1, GS, CENT, r, rmask, BN: tl.constexpr,
            DPOW: tl.constexpr, DP: tl.constexpr, X0: tl.constexpr, X1: tl.constexpr,
            ASM: tl.constexpr, WORDS: tl.constexpr, ROWNORM: tl.constexpr = False):
    """A K or V tile read as two [BN, DPOW // 2] halves, block scales applied, and the [BN]
    float32 per-row scale. The 4-bit formats (q4_0, tbq4, nvfp4): the low and the high nibbles
    of each byte; tbq3: the even and the odd values of each group (_tile_dims gives the halves'
    head dimensions). No value moves between lanes: each half is an elementwise unpacking of
    the loaded bytes. WORDS: the packed bytes read as int32 words (tbq3: three words hold four
    groups). ROWNORM (tbq4, tbq3 at DPOW 128: one norm a row): the centroids alone, the norm
    returned as the row scale (decode_split_kernel's NK, NV)."""
    if WORDS and FMT != 5:
        if FMT == 3:
            word, sc = _word_planes(P0, P1, r, rmask, DPOW // 32, 4, DP // 32, X0, X1)
            scale = tl.where(rmask, 1.0, 0.0)
        elif FMT == 4:
            word, sc = _word_planes(P0, P1, r, rmask, DPOW // 128, 16, DP // 128, X0, X1)
            if ROWNORM:
                scale = tl.reshape(sc, (BN,)).to(tl.float32)
                sc = tl.full(sc.shape, 1.0, tl.float16)
            else:
                scale = tl.where(rmask, 1.0, 0.0)
        else:
            word, e4 = _word_planes(P0, P1, r, rmask, DPOW // 16, 2, DP // 16, X0, X1)
            sc = (_fp8(e4) * NVFP4_UNIT).to(tl.float16)
            scale = tl.where(rmask, tl.load(GS) * NVFP4_UNIT, 0.0)
        l01, l23, h01, h23 = _unpack_words(FMT, word, sc, CENT, ASM, ROWNORM)
        lo = _pairs(l01, l23)
        hi = _pairs(h01, h23)
    elif FMT == 3:
        byte, ds = _planes(P0, P1, r, rmask, DPOW // 32, 16, DP // 32, X0, X1)
        lo, hi = q4_0_nibbles(byte, ds, ASM)
        scale = tl.where(rmask, 1.0, 0.0)
    elif FMT == 4:
        byte, norm = _planes(P0, P1, r, rmask, DPOW // 128, 64, DP // 128, X0, X1)
        if ROWNORM:
            scale = tl.reshape(norm, (BN,)).to(tl.float32)
            norm = tl.full(norm.shape, 1.0, tl.float16)
        else:
            scale = tl.where(rmask, 1.0, 0.0)
        if ASM and ROWNORM:
            lo, hi = tl.inline_asm_elementwise(TBQ4_RAW_ASM, "=r,=r,=r,=r,=r,=r,=r,=r,r,r",
                                               [byte], dtype=(tl.float16, tl.float16),
                                               is_pure=True, pack=8)
        elif ASM:
            lo, hi = tl.inline_asm_elementwise(TBQ4_ASM, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r",
                                               [byte, norm], dtype=(tl.float16, tl.float16),
                                               is_pure=True, pack=8)
        else:
            b = byte.to(tl.int32)
            lo = tl.load(CENT + (b & 15)) * norm
            hi = tl.load(CENT + (b >> 4)) * norm
    elif FMT == 5:
        # a group is three bytes: eight 3-bit indices; lo holds its even values, hi its odd
        g = tl.arange(0, DPOW // 8)[None, :]
        gm = rmask[:, None] & (g < DP // 8)
        if WORDS:
            # three words hold four groups (32 values): the groups are cut out of them
            qd = tl.arange(0, DPOW // 32)[None, :]
            qm = rmask[:, None] & (qd < DP // 32)
            wb = P0.to(tl.pointer_type(tl.int32)) + r[:, None] * (X0 // 4) + qd * 3
            w0 = tl.load(wb, mask=qm, other=0)
            w1 = tl.load(wb + 1, mask=qm, other=0)
            w2 = tl.load(wb + 2, mask=qm, other=0)
            g0 = w0 & 0xFFFFFF
            g1 = ((w0 >> 24) & 0xFF) | ((w1 & 0xFFFF) << 8)
            g2 = ((w1 >> 16) & 0xFFFF) | ((w2 & 0xFF) << 16)
            g3 = (w2 >> 8) & 0xFFFFFF
            lane = tl.reshape(tl.join(tl.join(g0, g2), tl.join(g1, g3)), (BN, DPOW // 8))
        else:
            base = P0 + r[:, None] * X0 + g * 3
            lane = (tl.load(base, mask=gm, other=0).to(tl.int32)
                    | (tl.load(base + 1, mask=gm, other=0).to(tl.int32) << 8)
                    | (tl.load(base + 2, mask=gm, other=0).to(tl.int32) << 16))
        if ROWNORM:
            scale = tl.load(P1 + r * X1, mask=rmask, other=0.0).to(tl.float32)
            norm = tl.full([BN, DPOW // 8], 1.0, tl.float16)
        else:
            norm = tl.load(P1 + r[:, None] * X1 + g // 16, mask=gm, other=0.0)
            scale = tl.where(rmask, 1.0, 0.0)
        if ASM and ROWNORM:
            e01, e23, o01, o23 = tl.inline_asm_elementwise(
                TBQ3_RAW_ASM, "=r,=r,=r,=r,r", [lane],
                dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True, pack=1)
        elif ASM:
            nb = _bits(norm)
            e01, e23, o01, o23 = tl.inline_asm_elementwise(
                TBQ3_ASM, "=r,=r,=r,=r,r,r", [lane, nb | (nb << 16)],
                dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True, pack=1)
        else:
            # the same words from a table lookup, so that the interpreter runs the rest
            e01 = _tbq3_word(lane, 0, 6, CENT, norm)
            e23 = _tbq3_word(lane, 12, 18, CENT, norm)
            o01 = _tbq3_word(lane, 3, 9, CENT, norm)
            o23 = _tbq3_word(lane, 15, 21, CENT, norm)
        lo = _pairs(e01, e23)
        hi = _pairs(o01, o23)
    else:
        byte, sc = _planes(P0, P1, r, rmask, DPOW // 16, 8, DP // 16, X0, X1)
        s = (_fp8(sc) * NVFP4_UNIT).to(tl.float16)
        if ASM:
            lo, hi = tl.inline_asm_elementwise(NVFP4_ASM, "=r,=r,=r,=r,r,r,r", [byte, s],
                                               dtype=(tl.float16, tl.float16), is_pure=True,
                                               pack=4)
        else:
            b = byte.to(tl.int32)
            lo = _e2m1(b & 15) * s
            hi = _e2m1(b >> 4) * s
        scale = tl.where(rmask, tl.load(GS) * NVFP4_UNIT, 0.0)
    return tl.reshape(lo, (BN, DPOW // 2)), tl.reshape(hi, (BN, DPOW // 2)), scale


@triton.jit
def rotate_rows(x, ROT, ROWS: tl.constexpr, DPOW: tl.constexpr, BACK: tl.constexpr):
    """Each 128-block of the rows of x [ROWS, DPOW] (float32, ROWS ≥ 16) times Rᵀ, or times R
    with BACK (the inverse), for the rotation R = ROT / √128, ROT the ±1 matrix in float16. The
    rows are scaled into [-1, 1] for _rotate_blocks and back."""
    r128 = tl.arange(0, 128)
    if BACK:
        rot = tl.load(ROT + r128[:, None] * 128 + r128[None, :])
    else:
        rot = tl.load(ROT + r128[None, :] * 128 + r128[:, None])
    amax = tl.max(tl.abs(x), axis=1)
    s = tl.where(amax > 0, amax, 1.0)
    u = tl.reshape(x * (1.0 / s)[:, None], (ROWS * (DPOW // 128), 128))
    return tl.reshape(_rotate_blocks(u, rot), (ROWS, DPOW)) * s[:, None]


@triton.jit
def _rotate_blocks(u, rot, SCALED: tl.constexpr = True):
    """u [M, 128] (float32, |u| ≤ 1) times ``rot`` (the ±1 matrix in float16, oriented by the
    caller) / √128 (without SCALED: times √128 the rotation). u goes in as two float16 parts
    (u = hi + lo to 2⁻²² of |u|), so two float16 products accumulated in float32 give the
    float32 rotation (the ±1 entries are exact)."""
    hi = u.to(tl.float16)
    lo = (u - hi.to(tl.float32)).to(tl.float16)
    y = tl.dot(lo, rot, tl.dot(hi, rot))
    if SCALED:
        y = y * 0.08838834764831845  # 1 / √128
    return y


@triton.jit
def rotate_kernel(X, Y, ROT, n_rows, DIN: tl.constexpr, DOUT: tl.constexpr,
                  DPOW: tl.constexpr, BACK: tl.constexpr, PDL: tl.constexpr = False):
    """Y [n_rows, DOUT] float32 = the rows of X [n_rows, DIN], zero-padded to DPOW, rotated
    blockwise (a rotated K format's query: DIN = D, DOUT = DPOW), or rotated back with BACK
    (a rotated V format's merged output: DIN = DPOW, DOUT = D), 16 rows a program. PDL:
    pdl_wait, and pdl_release after its store."""
    pdl_wait(PDL)
    ri = tl.program_id(0).to(tl.int64) * 16 + tl.arange(0, 16)
    d = tl.arange(0, DPOW)
    x = tl.load(X + ri[:, None] * DIN + d[None, :],
                mask=(ri[:, None] < n_rows) & (d[None, :] < DIN), other=0.0).to(tl.float32)
    tl.store(Y + ri[:, None] * DOUT + d[None, :], rotate_rows(x, ROT, 16, DPOW, BACK),
             mask=(ri[:, None] < n_rows) & (d[None, :] < DOUT))
    pdl_release(PDL)


@triton.jit
def _hadamard128(x, ROWS: tl.constexpr):
    """x [ROWS, 128] float32 times the Sylvester Hadamard matrix of order 128
    (H[i][j] = (-1)^popcount(i & j), unnormalized) along its rows: seven butterfly stages,
    the pairs (i, i + h) of each block of 2h summed and differenced."""
    for k in tl.static_range(7):
        y = tl.permute(tl.reshape(x, (ROWS, 64 >> k, 2, 1 << k)), (0, 1, 3, 2))
        a, b = tl.split(y)
        x = tl.reshape(tl.permute(tl.join(a + b, a - b), (0, 1, 3, 2)), (ROWS, 128))
    return x


@triton.jit
def hadamard_rotate(x, SIGNS, ROWS: tl.constexpr, BACK: tl.constexpr):
    """Rows of x [ROWS, 128] (float32) rotated by R = diag(s2) H diag(s1) / √128 (the rotated
    formats' rotation, SIGNS holding s1 then s2 as float32), or by Rᵀ with BACK: the rotation
    without its matrix, so a decode program can rotate its query and its partial output
    itself."""
    d = tl.arange(0, 128)
    s1 = tl.load(SIGNS + d)
    s2 = tl.load(SIGNS + 128 + d)
    first = s2 if BACK else s1
    last = s1 if BACK else s2
    return _hadamard128(x * first[None, :], ROWS) * (last * 0.08838834764831845)[None, :]


@triton.jit
def softmax_step(scores, valid, m_i, l_i):
    """One block of the online softmax in base 2: masked ``scores`` [R, N] against the running
    max ``m_i`` and sum ``l_i`` [R]. Returns (p, alpha, m_new, l_new); the caller rescales its
    accumulator by alpha and adds p · V."""
    scores = tl.where(valid[None, :], scores, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(scores, axis=1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(scores - m_new[:, None])
    return p, alpha, m_new, l_i * alpha + tl.sum(p, axis=1)


#: how far (in base-2 exponent) the running max may fall behind a tile's max before a lazy
#: softmax rescales: the weights stay at most 2^8 (float16 holds them, float32 sums them)
LAZY_MARGIN = tl.constexpr(8.0)
#: the largest V row scale (fp8_pth) whose weighted scale stays finite in float16 when the
#: weights reach 2^LAZY_MARGIN: 65,504 / 256, rounded down
WIDE_SCALE = tl.constexpr(255.0)


@triton.jit
def softmax_lazy(scores, valid, m_i, l_i, force):
    """softmax_step that keeps the running max where a tile's max exceeds it by no more than
    LAZY_MARGIN in every row, so that the accumulator needs no rescaling then: the weights are
    taken against the kept max (at most 2^LAZY_MARGIN). Returns (p, alpha, m_new, l_new, grow):
    the caller rescales its accumulator by alpha only where ``grow`` (a scalar, the same for the
    whole program) holds; otherwise alpha is 1. The first tile always grows (m_i = -inf), and
    so does a tile where ``force`` (a scalar) holds: its weights are then at most 1."""
    scores = tl.where(valid[None, :], scores, float("-inf"))
    m_tile = tl.maximum(m_i, tl.max(scores, axis=1))
    grow = (tl.max(m_tile - m_i, axis=0) > LAZY_MARGIN) | force
    m_new = tl.where(grow, m_tile, m_i)
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(scores - m_new[:, None])
    return p, alpha, m_new, l_i * alpha + tl.sum(p, axis=1), grow


@triton.jit
def softmax_next(scores, valid, m_i, l_i, LAZY: tl.constexpr, force=False):
    """softmax_lazy with LAZY (``force``: this tile grows), else softmax_step: (p, alpha, m_i,
    l_i, grow), grow always true for the eager step (the running output is rescaled every
    tile)."""
    if LAZY:
        p, alpha, m_i, l_i, grow = softmax_lazy(scores, valid, m_i, l_i, force)
    else:
        p, alpha, m_i, l_i = softmax_step(scores, valid, m_i, l_i)
        grow = True
    return p, alpha, m_i, l_i, grow


@triton.jit
def _rows(BLOCK_TABLE, b, stride_bt, h, n0, end, PAGE, pg, off, H_KV: tl.constexpr,
          BLOCK_N: tl.constexpr, PAGE_MODE: tl.constexpr, PAGE_C: tl.constexpr,
          OPAQUE: tl.constexpr):
    """Rows of the tile of tokens n0 … n0 + BLOCK_N (token positions are int32): (first row,
    [BLOCK_N] row offsets from it, [BLOCK_N] mask). PAGE_MODE 0: a tile never crosses a page
    (PAGE is a multiple of BLOCK_N): the tile is rows off … off + BLOCK_N of block-table entry
    pg, so the offsets are loop-invariant. 1: PAGE_C (compile-time) divides BLOCK_N. 2: any
    PAGE. OPAQUE (a GPU): the looked-up rows pass through an identity the compiler cannot see
    into. Without it, on an H200, the compiler took every row of a page-crossing tile for a
    multiple of 16 and read a row's block scales with one vector load, which is misaligned
    where a row's scales are not (96-wide heads in q8_0, q4_0 and nvfp4; the MLA latent's 18
    q8_0 scales a row): bench/results/launch-h200.json."""
    i = tl.arange(0, BLOCK_N)
    rmask = n0 + i < end
    if PAGE_MODE == 0:
        page = tl.load(BLOCK_TABLE + b * stride_bt + pg).to(tl.int64)
        first = (page * H_KV + h) * PAGE + off
        return first, i, rmask
    else:
        t = n0 + i
        if PAGE_MODE == 1:
            page = tl.load(BLOCK_TABLE + b * stride_bt + t // PAGE_C, mask=rmask, other=0)
            row = (page.to(tl.int64) * H_KV + h) * PAGE_C + t % PAGE_C
        else:
            page = tl.load(BLOCK_TABLE + b * stride_bt + t // PAGE, mask=rmask, other=0)
            row = (page.to(tl.int64) * H_KV + h) * PAGE + t % PAGE
        if OPAQUE:
            row = tl.inline_asm_elementwise("mov.b64 $0, $1;", "=l,l", [row], dtype=tl.int64,
                                            is_pure=True, pack=1)
        return 0, row, rmask


@triton.jit
def _q(Q, qrow, qmask_rows, qk_scale, FMT: tl.constexpr, DPOW: tl.constexpr, D: tl.constexpr,
       PART: tl.constexpr, DT: tl.constexpr, C0: tl.constexpr):
    """The query rows at the head dimensions of a tile part (of a head part starting at head
    dimension C0), scaled, in the tile's dtype."""
    kd = _tile_dims(FMT, DPOW, PART) + C0
    q = tl.load(Q + qrow[:, None] * D + kd[None, :], mask=qmask_rows[:, None] & (kd[None, :] < D),
                other=0.0).to(tl.float32)
    return (q * qk_scale).to(DT)


@triton.jit
def _int_query(Q, qrow, qmask_rows, qk_scale, NBK: tl.constexpr, D: tl.constexpr):
    """The query rows, scaled, quantized to int8 per 32-value block with q8_0's scale rule,
    amax / 127, the scale kept in float32 and ties rounded to even (ref.int8_query): ([NBK,
    QPAD, 32] int8 codes, [NBK, QPAD, 1] float32 block scales)."""
    dim = tl.arange(0, NBK)[:, None, None] * 32 + tl.arange(0, 32)[None, None, :]
    q = tl.load(Q + qrow[None, :, None] * D + dim, mask=qmask_rows[None, :, None] & (dim < D),
                other=0.0).to(tl.float32) * qk_scale
    amax = tl.max(tl.abs(q), axis=2, keep_dims=True)
    qs = amax * (1.0 / 127.0)
    x = q / tl.where(amax > 0, qs, 1.0)
    code = tl.where(x < 0, -_round_half_even(-x), _round_half_even(x))
    return code.to(tl.int8), qs


@triton.jit
def _int_keys(P0, P1, r, rmask, NBK: tl.constexpr, NBV: tl.constexpr, X0: tl.constexpr,
              X1: tl.constexpr):
    """A q8_0 key tile as the int8 operand of an integer product, read as stored: ([NBK, 32,
    BN] codes, a 32-block's values along axis 1; [NBK, 1, BN] float32 block scales, 0 on
    masked rows and blocks)."""
    nb = tl.arange(0, NBK)[:, None, None]
    # loaded [NBK, BN, 32] (a row's bytes the minor dimension), then transposed
    codes = tl.load(P0 + r[None, :, None] * X0 + nb * 32 + tl.arange(0, 32)[None, None, :],
                    mask=rmask[None, :, None] & (nb < NBV), other=0)
    codes = tl.permute(codes, (0, 2, 1))
    scale = tl.load(P1 + r[None, None, :] * X1 + nb, mask=rmask[None, None, :] & (nb < NBV),
                    other=0.0).to(tl.float32)
    return codes, scale


@triton.jit
def decode_split_kernel(
    Q, ACC, ML,
    K0, K1, KGS, V0, V1, VGS, CENT_K, CENT_V,
    BLOCK_TABLE, SEQ_LENS, stride_bt, n_splits, qk_scale, PAGE, SPLIT,
    H_KV: tl.constexpr, GROUP: tl.constexpr, QPAD: tl.constexpr,
    D: tl.constexpr, DPOW: tl.constexpr, DPK: tl.constexpr, DPV: tl.constexpr,
    FMT_K: tl.constexpr, FMT_V: tl.constexpr,
    XK0: tl.constexpr, XK1: tl.constexpr, XV0: tl.constexpr, XV1: tl.constexpr,
    BLOCK_N: tl.constexpr, PAGE_MODE: tl.constexpr, PAGE_C: tl.constexpr, ASM: tl.constexpr,
    WORDS: tl.constexpr, SAME_KV: tl.constexpr = False,
    DT: tl.constexpr = 0, DKT: tl.constexpr = 0, DVT: tl.constexpr = 0,
    OK0: tl.constexpr = 0, OK1: tl.constexpr = 0, OV0: tl.constexpr = 0, OV1: tl.constexpr = 0,
    QB: tl.constexpr = 1, GPU: tl.constexpr = False, WORDS_V: tl.constexpr = False,
    PDL: tl.constexpr = False, LAZY: tl.constexpr = False, WIDE: tl.constexpr = False,
    IK: tl.constexpr = False, SWAP: tl.constexpr = False, SIGNS=None,
    ROT_Q: tl.constexpr = False, ROT_V: tl.constexpr = False,
):
    """One (sequence, KV head, split) program: the GROUP query heads that share the KV head
    (or QPAD of them, below) attend over SPLIT tokens (a multiple of BLOCK_N); partial output,
    running max and sum go to ACC and ML (base-2 exponents: qk_scale carries log2 e). Q is
    already rotated for a rotated K format (rotate_kernel), or with ROT_Q (a head of 128 lanes
    in one part) the program rotates it (hadamard_rotate, SIGNS); the output of a rotated V
    format stays rotated until the reduction, or with ROT_V the program rotates its partial
    output back before it stores it (the merge is linear), so that neither takes a launch.
    PAGE and SPLIT are run-time values, so a new context length compiles nothing. The 4-bit
    formats are read as two half tiles (low and high nibbles), each with its own product: no
    nibble is moved between lanes. ASM: unpack with PTX (a GPU; the interpreter takes the plain
    path, which gives the same float16 values). WORDS: read the packed planes as int32 words
    (the same values). SAME_KV: V is K (a K-only MLA latent; K and V planes the same): the
    key tile unpacked once serves both products.

    A head is held in two parts where that saves lanes: head dimensions 0 … DPOW (DPK and DPV
    of them packed in K and V) and a tail of DT lanes (a power of two, 0: none) from DPOW on,
    DKT and DVT of them packed, its bytes OK0 and OK1 (OV0, OV1) elements into a row of the
    K (V) planes. DeepSeek's 576-wide latent is 512 + 64 lanes instead of 1,024. The partial
    outputs are DPOW + DT wide. K and V may differ in width (MiMo-V2: K 192 as 128 + 64, V
    128): the lanes are the wider one's, the narrower side's DPK or DPV masks its part, and a
    side with no tail (DKT or DVT 0) reads none (its tail of the partial output stays 0).

    A group of more query heads than a program holds (QPAD rows) is spread over QB programs
    of a KV head (program id 1: KV head · QB + query block). GPU: compiled for a GPU, not run
    by the interpreter (_rows). WORDS reads K's planes as words, WORDS_V V's. PDL:
    pdl_enter (the previous step's merge may still be reading ACC when this kernel starts).
    LAZY: softmax_lazy (the partial outputs rescaled only when the running max grows by more
    than LAZY_MARGIN; the stored max is the one they are relative to, as the merge needs).
    WIDE (with LAZY): V's row scales may exceed WIDE_SCALE; a tile where one does rescales
    eagerly, so that no weight times its scale leaves float16's range. IK (q8_0 K held in one
    part, with a V side of its own): the scores are an integer product, the query quantized to int8
    per 32-value block once (_int_query) and each key tile's stored codes its other operand
    (_int_keys); each block's int32 sums times the two block scales make the scores.
    SWAP (a 4-bit format on both sides, a head in one part): the products swapped, the cache
    tile their first operand and the query rows the narrow second one (Sᵀ = K·Qᵀ,
    Oᵀ = Vᵀ·Pᵀ), so that the rows pad to the tensor cores' 8 columns, not their 16 rows: the
    partial output [DPOW, QPAD] takes half the registers (bench/results/swapped-h200.json)."""
    pdl_enter(PDL)
    b = tl.program_id(0)
    h = tl.program_id(1) // QB
    sp = tl.program_id(2)
    seq_len = tl.load(SEQ_LENS + b)
    start = sp * SPLIT
    end = tl.minimum(start + SPLIT, seq_len)
    rows = (tl.program_id(1) % QB) * QPAD + tl.arange(0, QPAD)
    qrow = (b * H_KV + h) * GROUP + rows
    qmask = rows < GROUP
    # q4_0, tbq4, tbq3 and nvfp4 (codes 3-6) are read in halves
    HK: tl.constexpr = FMT_K >= 3
    HV: tl.constexpr = FMT_V >= 3
    # fp8_pth and nvfp4 (codes 1, 6) carry a scale a row; the others' row scale is only the
    # row mask, which the softmax applies already. nvfp4's is the same for every row of a
    # cache: V's multiplies the output once, at the end, not the weights of every tile
    # tbq4's and tbq3's norm (one a 128-value block) is a row scale too where a head is one
    # block: tbq4's scores and both formats' weights take it instead of every value (tbq3's
    # keys keep it on their values, which was faster: decode-h200-v29-rownorm.md; never with
    # a lazy rescale, whose weights up to 2^8 times a norm could leave float16's range)
    NK: tl.constexpr = (FMT_K == 4 and DPOW == 128 and DT == 0 and not IK
                        and not (SAME_KV and LAZY))
    NV: tl.constexpr = (SAME_KV and NK) or (not SAME_KV and (FMT_V == 4 or FMT_V == 5)
                                            and DPOW == 128 and DT == 0 and not LAZY)
    RK: tl.constexpr = FMT_K == 1 or FMT_K == 6 or NK
    RV: tl.constexpr = FMT_V == 1 or NV
    DW: tl.constexpr = DPOW + DT
    if FMT_K == 0:  # noqa: SIM108 (a compile-time branch)
        KT = K0.dtype.element_ty
    else:
        KT = tl.float16
    NBK: tl.constexpr = DPOW // 32
    if IK:
        qi, qis = _int_query(Q, qrow, qmask, qk_scale, NBK, D)
    elif HK:
        if ROT_Q:
            # the rotated formats' halves are the even and the odd head dimensions
            dq = tl.arange(0, DPOW)
            qr = hadamard_rotate(tl.load(Q + qrow[:, None] * D + dq[None, :],
                                         mask=qmask[:, None] & (dq[None, :] < D),
                                         other=0.0).to(tl.float32), SIGNS, QPAD, False)
            qa, qb = tl.split(tl.reshape(qr * qk_scale, (QPAD, DPOW // 2, 2)))
            qa = qa.to(KT)
            qb = qb.to(KT)
        else:
            qa = _q(Q, qrow, qmask, qk_scale, FMT_K, DPOW, D, 1, KT, 0)
            qb = _q(Q, qrow, qmask, qk_scale, FMT_K, DPOW, D, 2, KT, 0)
        if SWAP:
            qa = tl.trans(qa)
            qb = tl.trans(qb)
        if DKT > 0:
            qta = _q(Q, qrow, qmask, qk_scale, FMT_K, DT, D, 1, KT, DPOW)
            qtb = _q(Q, qrow, qmask, qk_scale, FMT_K, DT, D, 2, KT, DPOW)
    else:
        qa = _q(Q, qrow, qmask, qk_scale, FMT_K, DPOW, D, 0, KT, 0)
        qb = qa
        if DKT > 0:
            qta = _q(Q, qrow, qmask, qk_scale, FMT_K, DT, D, 0, KT, DPOW)
    m_i = tl.full([QPAD], float("-inf"), tl.float32)
    l_i = tl.zeros([QPAD], tl.float32)
    if SWAP:
        acc_a = tl.zeros([DPOW // 2, QPAD], tl.float32)
        acc_b = tl.zeros([DPOW // 2, QPAD], tl.float32)
    elif HV:
        acc_a = tl.zeros([QPAD, DPOW // 2], tl.float32)
        acc_b = tl.zeros([QPAD, DPOW // 2], tl.float32)
        if DT > 0:
            acc_ta = tl.zeros([QPAD, DT // 2], tl.float32)
            acc_tb = tl.zeros([QPAD, DT // 2], tl.float32)
    else:
        acc_a = tl.zeros([QPAD, DPOW], tl.float32)
        acc_b = acc_a
        if DT > 0:
            acc_ta = tl.zeros([QPAD, DT], tl.float32)
    hh = h.to(tl.int64)
    # block-table entry and row within the page of the current tile (PAGE_MODE 0), advanced
    # without a division per tile
    pg = start // PAGE
    off = start - pg * PAGE
    for n0 in range(start, end, BLOCK_N):
        first, r, nmask = _rows(BLOCK_TABLE, b, stride_bt, hh, n0, end, PAGE, pg, off, H_KV,
                                BLOCK_N, PAGE_MODE, PAGE_C, GPU)
        off += BLOCK_N
        wrap = off >= PAGE
        pg += wrap.to(tl.int32)
        off -= wrap.to(tl.int32) * PAGE
        k0 = K0 + first * XK0
        k1 = K1 + first * XK1
        if IK:
            kc, kd = _int_keys(k0, k1, r, nmask, NBK, DPK // 32, XK0, XK1)
            # [NBK, QPAD, BN] int32 block products, each times its query and key scales
            s = tl.sum(tl.dot(qi, kc).to(tl.float32) * qis * kd, axis=0)
        elif HK:
            ka, kb, ks = _halves(FMT_K, k0, k1, KGS, CENT_K, r, nmask, BLOCK_N, DPOW, DPK, XK0,
                                 XK1, ASM, WORDS, NK)
            if SWAP:
                s = tl.trans(tl.dot(kb, qb, tl.dot(ka, qa)))
            else:
                s = tl.dot(qb, tl.trans(kb), tl.dot(qa, tl.trans(ka)))
            if DKT > 0:
                # the tail's row scale is the head's (fp8_pth, nvfp4): not needed again
                ta, tb, _ = _halves(FMT_K, k0 + OK0, k1 + OK1, KGS, CENT_K, r, nmask, BLOCK_N,
                                    DT, DKT, XK0, XK1, ASM, WORDS)
                s = tl.dot(qtb, tl.trans(tb), tl.dot(qta, tl.trans(ta), s))
        else:
            k, ks = _tile(FMT_K, k0, k1, KGS, CENT_K, r, nmask, BLOCK_N, DPOW, DPK, XK0, XK1,
                          ASM, WORDS)
            s = tl.dot(qa, tl.trans(k))
            if DKT > 0:
                kt, _ = _tile(FMT_K, k0 + OK0, k1 + OK1, KGS, CENT_K, r, nmask, BLOCK_N, DT,
                              DKT, XK0, XK1, ASM, WORDS)
                s = tl.dot(qta, tl.trans(kt), s)
        if RK:
            s = s * ks[None, :]
        if WIDE and FMT_V == 1:
            # fp8_pth's weights are multiplied by their V row's scale and rounded to float16:
            # a tile holding a scale above WIDE_SCALE (a row's largest magnitude above about
            # 114,000, which only bfloat16 or float32 rows reach) takes the eager step, its
            # weights then at most 1 (finite for rows up to about 29 million)
            if SAME_KV:  # noqa: SIM108 (a compile-time branch)
                vrs = ks
            else:
                vrs = tl.load(V1 + first * XV1 + r, mask=nmask, other=0.0)
            wide = tl.max(vrs, axis=0) > WIDE_SCALE
        else:
            # WIDE for another format: every tile
            wide = WIDE
        p, alpha, m_i, l_i, grow = softmax_next(s, nmask, m_i, l_i, LAZY, wide)
        if SWAP:
            if grow:
                acc_a = acc_a * alpha[None, :]
                acc_b = acc_b * alpha[None, :]
        elif grow:
            acc_a = acc_a * alpha[:, None]
            if HV:
                acc_b = acc_b * alpha[:, None]
            if DT > 0:
                acc_ta = acc_ta * alpha[:, None]
                if HV:
                    acc_tb = acc_tb * alpha[:, None]
        v0 = V0 + first * XV0
        v1 = V1 + first * XV1
        if HV:
            if SAME_KV:
                va, vb, vs = ka, kb, ks
            else:
                va, vb, vs = _halves(FMT_V, v0, v1, VGS, CENT_V, r, nmask, BLOCK_N, DPOW, DPV,
                                     XV0, XV1, ASM, WORDS_V, NV)
            pv = (p * vs[None, :] if RV else p).to(va.dtype)
            if SWAP:
                acc_a = tl.dot(tl.trans(va), tl.trans(pv), acc_a)
                acc_b = tl.dot(tl.trans(vb), tl.trans(pv), acc_b)
            else:
                acc_a = tl.dot(pv, va, acc_a)
                acc_b = tl.dot(pv, vb, acc_b)
            if DVT > 0:
                if SAME_KV:
                    wa, wb = ta, tb
                else:
                    wa, wb, _ = _halves(FMT_V, v0 + OV0, v1 + OV1, VGS, CENT_V, r, nmask,
                                        BLOCK_N, DT, DVT, XV0, XV1, ASM, WORDS_V)
                acc_ta = tl.dot(pv, wa, acc_ta)
                acc_tb = tl.dot(pv, wb, acc_tb)
        else:
            if SAME_KV:
                v, vs = k, ks
            else:
                v, vs = _tile(FMT_V, v0, v1, VGS, CENT_V, r, nmask, BLOCK_N, DPOW, DPV, XV0,
                              XV1, ASM, WORDS_V)
            pv = (p * vs[None, :] if RV else p).to(v.dtype)
            acc_a = tl.dot(pv, v, acc_a)
            if DVT > 0:
                if SAME_KV:
                    vt = kt
                else:
                    vt, _ = _tile(FMT_V, v0 + OV0, v1 + OV1, VGS, CENT_V, r, nmask, BLOCK_N,
                                  DT, DVT, XV0, XV1, ASM, WORDS_V)
                acc_ta = tl.dot(pv, vt, acc_ta)
    if FMT_V == 6:
        vgs = tl.load(VGS) * NVFP4_UNIT
        acc_a = acc_a * vgs
        acc_b = acc_b * vgs
        if DT > 0:
            acc_ta = acc_ta * vgs
            acc_tb = acc_tb * vgs
    base = qrow.to(tl.int64) * n_splits + sp
    dst = ACC + base[:, None] * DW
    if ROT_V:
        # the halves (even and odd head dimensions) back in order, rotated back
        if SWAP:  # noqa: SIM108 (a compile-time branch)
            pairs = tl.permute(tl.join(acc_a, acc_b), (1, 0, 2))
        else:
            pairs = tl.join(acc_a, acc_b)
        tl.store(dst + tl.arange(0, DPOW)[None, :],
                 hadamard_rotate(tl.reshape(pairs, (QPAD, DPOW)), SIGNS, QPAD, True),
                 mask=qmask[:, None])
    elif SWAP:
        dst = ACC + base[None, :] * DW
        tl.store(dst + _tile_dims(FMT_V, DPOW, 1)[:, None], acc_a, mask=qmask[None, :])
        tl.store(dst + _tile_dims(FMT_V, DPOW, 2)[:, None], acc_b, mask=qmask[None, :])
    elif HV:
        tl.store(dst + _tile_dims(FMT_V, DPOW, 1)[None, :], acc_a, mask=qmask[:, None])
        tl.store(dst + _tile_dims(FMT_V, DPOW, 2)[None, :], acc_b, mask=qmask[:, None])
        if DT > 0:
            tl.store(dst + DPOW + _tile_dims(FMT_V, DT, 1)[None, :], acc_ta,
                     mask=qmask[:, None])
            tl.store(dst + DPOW + _tile_dims(FMT_V, DT, 2)[None, :], acc_tb,
                     mask=qmask[:, None])
    else:
        tl.store(dst + tl.arange(0, DPOW)[None, :], acc_a, mask=qmask[:, None])
        if DT > 0:
            tl.store(dst + DPOW + tl.arange(0, DT)[None, :], acc_ta, mask=qmask[:, None])
    tl.store(ML + base * 2, m_i, mask=qmask)
    tl.store(ML + base * 2 + 1, l_i, mask=qmask)


@triton.jit
def _splits_chunk(ACC, ML, row, n_splits, s0, dq, CH: tl.constexpr, DPOW: tl.constexpr):
    """The maxima, sums and partial outputs at head dimensions ``dq`` of splits s0 … s0 + CH of
    merge row ``row`` (those past n_splits: max −inf, sum and output 0), loaded together."""
    sc = s0 + tl.arange(0, CH)
    base = row * n_splits + sc
    cm = sc < n_splits
    m_s = tl.load(ML + base * 2, mask=cm, other=float("-inf"))
    l_s = tl.load(ML + base * 2 + 1, mask=cm, other=0.0)
    a = tl.load(ACC + base[:, None] * DPOW + dq[None, :], mask=cm[:, None], other=0.0)
    return m_s, l_s, a


@triton.jit
def _weighted(m_s, l_s, a, big):
    """Σ w_s l_s and Σ w_s a_s over a chunk of splits, w_s = 2^(m_s − big) (0 for an empty
    split)."""
    w = tl.where(m_s == float("-inf"), 0.0, tl.exp2(m_s - big))
    return tl.sum(w * l_s, axis=0), tl.sum(w[:, None] * a, axis=0)


@triton.jit
def reduce_kernel(ACC, ML, OUT, n_splits, GROUP: tl.constexpr, D: tl.constexpr,
                  DPOW: tl.constexpr, DB: tl.constexpr, CM: tl.constexpr, CH: tl.constexpr,
                  PDL: tl.constexpr = False, ONE: tl.constexpr = False):
    """Merge the splits of one query row at DB of the head dimensions (of the DPOW a partial
    output holds): OUT = Σ w_s acc_s / Σ w_s l_s, with w_s = 2^(m_s − max m). Program ids:
    (sequence · H_KV + KV head, query row of its GROUP, block of DB dimensions). The splits are
    read CM (maxima) and CH (partial outputs) at a time, each chunk one load, so that the merge
    takes a few round trips to memory however many splits there are; rows and dimensions are
    spread over programs, so that one sequence's merge is not left to a few programs (a rotated
    V format's merged rows are rotated back by rotate_kernel after it). PDL: pdl_wait, and
    pdl_release after its store. ONE (every split in one chunk of CH): the maxima, sums and
    partial outputs are loaded together, one round trip instead of one for the maxima and one
    for the rest."""
    pdl_wait(PDL)
    row = tl.program_id(0).to(tl.int64) * GROUP + tl.program_id(1)
    dq = tl.program_id(2) * DB + tl.arange(0, DB)
    if ONE:
        m_s, l_s, a = _splits_chunk(ACC, ML, row, n_splits, 0, dq, CH, DPOW)
        total, acc = _weighted(m_s, l_s, a, tl.max(m_s, axis=0))
    else:
        big = tl.full([], float("-inf"), tl.float32)
        for s0 in range(0, n_splits, CM):
            sm = s0 + tl.arange(0, CM)
            m_s = tl.load(ML + (row * n_splits + sm) * 2, mask=sm < n_splits,
                          other=float("-inf"))
            big = tl.maximum(big, tl.max(m_s, axis=0))
        total = tl.zeros([], tl.float32)
        acc = tl.zeros([DB], tl.float32)
        for s0 in range(0, n_splits, CH):
            m_s, l_s, a = _splits_chunk(ACC, ML, row, n_splits, s0, dq, CH, DPOW)
            t, x = _weighted(m_s, l_s, a, big)
            total += t
            acc += x
    out = acc / tl.where(total > 0, total, 1.0)
    tl.store(OUT + row * D + dq, out, mask=dq < D)
    pdl_release(PDL)


#: head dimensions a merge program takes
REDUCE_DIMS = 32
#: whether a merge whose splits fit one chunk loads them in one round trip (reduce_kernel's ONE)
MERGE_ONE_PASS = True


def pdl_launch(pdl: bool) -> dict:
    """The launch arguments of a kernel that starts with pdl_enter: launched as a
    programmatic dependent of the kernel before it (``pdl``), or as usual."""
    return {"PDL": True, "launch_pdl": True} if pdl else {}


def reduce_splits(acc, ml, out, n_splits: int, seqs: int, kv_heads: int, group: int,
                  width: int, rot=None, scratch=None,
                  chunks: tuple[int, int] | None = None, pdl: bool = False) -> None:
    """Launch reduce_kernel, merging ``n_splits`` partial results of the ``group`` query rows
    [width] of each (sequence, KV head) into ``out`` [seqs, kv_heads · group, D]: a program per
    query row and REDUCE_DIMS head dimensions (``width`` a multiple of them, or a power of two
    below). With ``rot`` (the ±1 rotation, float16) the merged rows go to ``scratch`` (float32,
    seqs · kv_heads · group · width values) and rotate_kernel rotates them back into ``out``.
    ``chunks``: the splits read at a time (maxima, partial outputs), powers of two, if not the
    largest that keep a program's loads near 8K values; where one chunk holds every split
    (and MERGE_ONE_PASS), they are loaded in one round trip. ``pdl``: launch the kernels as
    programmatic dependents of the kernel before them (a GPU of compute capability 9 or
    later; pdl_enter)."""
    splits = 1 << (n_splits - 1).bit_length()
    db = min(width, REDUCE_DIMS)
    cm, ch = chunks or (max(2, min(splits, 2048)), max(2, min(splits, 8192 // db)))
    rows = seqs * kv_heads * group
    merged = out if rot is None else scratch[:rows * width].view(rows, width)
    reduce_kernel[(seqs * kv_heads, group, width // db)](
        acc, ml, merged, n_splits, GROUP=group, D=merged.shape[-1], DPOW=width, DB=db, CM=cm,
        CH=ch, ONE=MERGE_ONE_PASS and ch >= n_splits, **pdl_launch(pdl))
    if rot is not None:
        rotate_kernel[(triton.cdiv(rows, 16),)](merged, out, rot, rows, DIN=width,
                                                DOUT=out.shape[-1],
                                                DPOW=1 << (width - 1).bit_length(), BACK=True,
                                                **pdl_launch(pdl))


@triton.jit
def _destination(PAGES, OFFSETS, ri, rmask, H_KV: tl.constexpr, PAGE):
    """The cache row of each token-head row ``ri``: token i goes to (page PAGES[i], row
    OFFSETS[i]) of each head's PAGE rows."""
    tok = ri // H_KV
    page = tl.load(PAGES + tok, mask=rmask, other=0).to(tl.int64)
    return (page * H_KV + ri % H_KV) * PAGE + tl.load(OFFSETS + tok, mask=rmask, other=0)


def lane_order() -> list[int]:
    """The code each column of a rotated tbq3 block holds (_store_codes): column
    32 i + 8 j + 2 q + b holds code 32 q + 8 i + 2 j + b (a permutation of 0…127), so
    rotated_append_kernel's tbq3 rotation takes the rows of R in this order."""
    return [32 * (p // 2 % 4) + 8 * (p // 32) + 2 * (p // 8 % 4) + p % 2 for p in range(128)]


@triton.jit
def _threshold(TH, k: tl.constexpr, H: tl.constexpr):
    """Positive threshold k, TH[H + k] (past the last, H - 2, the last: tbq3's search reads
    three)."""
    return tl.load(TH + H + (k if k < H - 1 else H - 2))


@triton.jit
def _coded(CENT, k: tl.constexpr, H: tl.constexpr, M: tl.constexpr, BIAS: tl.constexpr = 0.0):
    """Positive centroid k, CENT[H + k] (past the last, H - 1, the last), plus BIAS, with its
    code in the low bits of its mantissa (a change of at most M units in the last place, 2⁻¹⁹
    of its value; with BIAS 0.25, M · 2⁻²⁵), so the search that selects it also gives the
    code. BIAS 0.25 puts every centroid (all below 0.25) in the binade [0.25, 0.5), where the
    difference of any two is a float32: a centroid plus 1.0 or 0.0 times the step to the next
    is then exactly one of them (_search's FMA form)."""
    j: tl.constexpr = k if k < H else H - 1
    cent = tl.load(CENT + H + j)
    if BIAS != 0.0:
        cent = cent + BIAS
    bits = cent.to(tl.int32, bitcast=True)
    return ((bits & ~M) | (H + j)).to(tl.float32, bitcast=True)


@triton.jit
def _sat_above(y, k, pk, HW: tl.constexpr):
    """1.0 where |y| > p, else 0.0, for p > 0 given as k and pk = p · k, k being a power of
    two that makes a step of p's float grid at least 1 (and keeps |y| · k finite): |y| · k −
    pk, exact but for one rounding, is then ≥ 1 or ≤ 0, clamped to [0, 1] (on a GPU one
    fma.rn.sat on the FMA pipes, the absolute value an operand's modifier)."""
    return _abs_fma(y, k, -pk, True, HW)


@triton.jit
def _abs_fma(y, a, b, SAT: tl.constexpr, HW: tl.constexpr):
    """|y| · a + b rounded once (on a GPU one fma.rn, the absolute value an operand's
    modifier), clamped to [0, 1] with SAT (fma.rn.sat)."""
    a = tl.broadcast_to(a, y.shape)
    b = tl.broadcast_to(b, y.shape)
    if HW:
        if SAT:
            text: tl.constexpr = "{ .reg .f32 a; abs.f32 a, $1; fma.rn.sat.f32 $0, a, $2, $3; }"
        else:
            text: tl.constexpr = "{ .reg .f32 a; abs.f32 a, $1; fma.rn.f32 $0, a, $2, $3; }"
        return tl.inline_asm_elementwise(text, "=r,r,r,r", [y, a, b], dtype=tl.float32,
                                         is_pure=True, pack=1)
    elif SAT:
        return tl.minimum(tl.maximum(tl.abs(y) * a + b, 0.0), 1.0)
    else:
        return tl.abs(y) * a + b


@triton.jit
def _sign_mask(y, HW: tl.constexpr):
    """-1 (all ones) where y ≤ 0, else 0 (on a GPU one set.le, no predicate)."""
    if HW:
        return tl.inline_asm_elementwise("set.le.s32.f32 $0, $1, 0f00000000;", "=r,r", [y],
                                         dtype=tl.int32, is_pure=True, pack=1)
    else:
        return tl.where(y > 0, 0, -1)


@triton.jit
def _grid_scale(p0):
    """k, the power of two that scales a step of the float grid at the smallest threshold p0
    (and so at every larger one) to 1: 2^(23 − e) for p0 in [2^e, 2^(e + 1))."""
    return ((277 - ((p0.to(tl.int32, bitcast=True) >> 23) & 0xFF)) << 23).to(
        tl.float32, bitcast=True)


@triton.jit
def _search(y, s, t0, t1, t2, t3, t4, t5, t6, e0, e1, e2, e3, e4, e5, e6, e7,
            LEVELS: tl.constexpr, FMA: tl.constexpr = False, HW: tl.constexpr = False):
    """The coded centroid (_coded) of each rotated value y [R, C] of a block whose length is
    s [R, 1] (the thresholds t0 < t1 < … are those of its unit vector: y / s), and the mask
    that mirrors its code where y ≤ 0 (all ones, or none). FMA: no selects but a staircase on
    the FMA pipes: the smallest centroid plus, for each threshold below |y| (each comparison
    a saturated fused multiply-add, _sat_above: 1.0 or 0.0), the step to the next centroid,
    over coded centroids (biased where needed: rotated_append_kernel's BIAS) whose every
    partial sum is exactly a coded centroid (returned with its bias); |y| on a threshold
    counts as below it on either side (torch.bucketize counts it on the negative side
    only)."""
    if FMA:
        flip = _sign_mask(y, HW)
        p0 = t0 * s
        k = _grid_scale(p0)
        c = e0 + _sat_above(y, k, p0 * k, HW) * (e1 - e0)
        c = c + _sat_above(y, k, (t1 * s) * k, HW) * (e2 - e1)
        c = c + _sat_above(y, k, (t2 * s) * k, HW) * (e3 - e2)
        if LEVELS == 16:
            c = c + _sat_above(y, k, (t3 * s) * k, HW) * (e4 - e3)
            c = c + _sat_above(y, k, (t4 * s) * k, HW) * (e5 - e4)
            c = c + _sat_above(y, k, (t5 * s) * k, HW) * (e6 - e5)
            c = c + _sat_above(y, k, (t6 * s) * k, HW) * (e7 - e6)
    else:
        c, flip = _binary_search(y, s, t0, t1, t2, t3, t4, t5, t6, e0, e1, e2, e3, e4, e5,
                                 e6, e7, LEVELS)
    return c, flip


@triton.jit
def _lookup(y, s, t0, CELLS, INV: tl.constexpr, MASK: tl.constexpr, HW: tl.constexpr):
    """_search's FMA form with one comparison a value (codebook.cells): |y| / s falls in cell
    round(|y| · INV / s) (one fused multiply-add onto 2²³, whose low bits are then the
    cell), whose row of CELLS gives the one threshold that can lie on either side of |y|
    (negated), the cell's lowest coded centroid and the step to the next: the coded centroid
    _search gives, bit for bit, and the mask that mirrors its code where y ≤ 0."""
    flip = _sign_mask(y, HW)
    k = _grid_scale(t0 * s)
    sk = s * k  # exact (k a power of two): (t · s) · k = t · sk for every threshold t
    at = _abs_fma(y, INV / s, tl.full(y.shape, 8388608.0, tl.float32), False, HW).to(
        tl.int32, bitcast=True)
    if HW:  # one 16-byte read a value in y's layout (a load would be laid out anew), its
        # address one wide multiply-add of the masked cell
        neg_t, low, step = tl.inline_asm_elementwise(
            "{ .reg .b32 pad, c; .reg .b64 a; and.b32 c, $3, $4; mad.wide.u32 a, c, 16, $5; "
            "ld.global.nc.v4.b32 {$0, $1, $2, pad}, [a]; }", "=r,=r,=r,r,r,l",
            [at, tl.full(y.shape, MASK, tl.int32), tl.broadcast_to(CELLS, y.shape)],
            dtype=(tl.float32, tl.float32, tl.float32), is_pure=True, pack=1)
    else:
        row = CELLS + 2 * (at & MASK)
        te = tl.load(row)
        neg_t = te.to(tl.int32).to(tl.float32, bitcast=True)
        low = (te >> 32).to(tl.int32).to(tl.float32, bitcast=True)
        step = tl.load(row + 1).to(tl.int32).to(tl.float32, bitcast=True)
    return low + _abs_fma(y, k, neg_t * sk, True, HW) * step, flip


@triton.jit
def _binary_search(y, s, t0, t1, t2, t3, t4, t5, t6, e0, e1, e2, e3, e4, e5, e6, e7,
                   LEVELS: tl.constexpr):
    """_search by selects (on the logic pipe), with torch.bucketize's ties."""
    # torch.bucketize counts the thresholds below y: for y > 0 those below |y|, for y ≤ 0
    # those at or below |y|, which are those below the next float above |y|
    flip = tl.where(y > 0, 0, -1)
    key = ((y.to(tl.int32, bitcast=True) & 0x7FFFFFFF) - flip).to(tl.float32, bitcast=True)
    # binary search for the centroid of |y|, and with it the code H + (thresholds below)
    if LEVELS == 16:
        c4 = key > t3 * s
        c2 = key > tl.where(c4, t5 * s, t1 * s)
        # the last threshold and the two centroids around it, chosen before the last
        # comparison (the earlier ones are then no longer needed)
        last = tl.where(c4, tl.where(c2, t6 * s, t4 * s), tl.where(c2, t2 * s, t0 * s))
        even = tl.where(c4, tl.where(c2, e6, e4), tl.where(c2, e2, e0))
        odd = tl.where(c4, tl.where(c2, e7, e5), tl.where(c2, e3, e1))
        c = tl.where(key > last, odd, even)
    else:
        c2 = key > t1 * s
        c = tl.where(key > tl.where(c2, t2 * s, t0 * s), tl.where(c2, e3, e1),
                     tl.where(c2, e2, e0))
    return c, flip


@triton.jit
def _store_codes(P0, r, rmask, idx, R: tl.constexpr, C: tl.constexpr, FMT: tl.constexpr,
                 NBYTES: tl.constexpr):
    """Pack the codes idx [R, C] (C a multiple of 128) of R rows and store them at the
    destination rows' offsets ``r`` [R, 1] in P0, the first NBYTES bytes of a row only. tbq4:
    two codes a byte, the first in the low nibble. tbq3: eight 3-bit codes a 24-bit lane, the
    first in the lowest bits, lanes in order, its rows rotated in lane_order: column
    32 i + 8 j + 2 q + b of a 128-block holds code 32 q + 8 i + 2 j + b, so that a thread of a
    matrix-product tile, which holds columns 2 q and 2 q + 1 of every 8, holds whole lanes
    (lanes 4 q … 4 q + 3 of the block, bytes 12 q … 12 q + 11) and stores them as three
    words."""
    if FMT == 4:
        even, odd = tl.split(tl.reshape(idx, (R, C // 2, 2)))
        dd = tl.arange(0, C // 2)
        tl.store(P0 + r + dd[None, :], (even | (odd << 4)).to(tl.uint8),
                 mask=rmask[:, None] & (dd[None, :] < NBYTES))
    else:
        g = tl.reshape(idx, (R, C // 32, 4, 4, 2))  # [rows, i, j, q, b]
        sh = tl.arange(0, 4)[:, None, None] * 6 + tl.arange(0, 2)[None, None, :] * 3
        lane = tl.sum(tl.sum(g << sh[None, None, :, :, :], axis=4), axis=2)  # [rows, i, q]
        l02, l13 = tl.split(tl.reshape(tl.permute(tl.reshape(lane, (R, C // 128, 4, 4)),
                                                  (0, 1, 3, 2)), (R, C // 128, 4, 2, 2)))
        l0, l2 = tl.split(l02)
        l1, l3 = tl.split(l13)
        at = tl.arange(0, C // 128)[None, :, None] * 48 + tl.arange(0, 4)[None, None, :] * 12
        m = rmask[:, None, None]
        if C // 8 * 3 > NBYTES:  # padded columns
            m = m & (at < NBYTES)
        w = (P0 + r[:, :, None] + at).to(tl.pointer_type(tl.int32))
        tl.store(w, l0 | (l1 << 24), mask=m)
        tl.store(w + 1, (l1 >> 8) | (l2 << 16), mask=m)
        tl.store(w + 2, (l2 >> 16) | (l3 << 8), mask=m)


@triton.jit
def _side(it, blocks, X, XV, P0, P0V, P1, P1V, GS, GSV, SIDES: tl.constexpr):
    """Row block ``it`` of an append launch over SIDES sides of ``blocks`` blocks each: its
    rows, planes, global scale and block within its side; with SIDES 2, V's (XV, P0V, P1V,
    GSV) past K's blocks."""
    if SIDES == 2:
        second = it >= blocks
        return (tl.where(second, XV, X), tl.where(second, P0V, P0), tl.where(second, P1V, P1),
                tl.where(second, GSV, GS), tl.where(second, it - blocks, it))
    else:
        return X, P0, P1, GS, it


@triton.jit
def _block_rows(it, blocks, X, XV, n_rows, d, D: tl.constexpr, ROWS: tl.constexpr,
                SIDES: tl.constexpr):
    """The input rows [ROWS, DPOW] of row block ``it`` (_side's numbering; zero past the last
    block and past each row's D lanes)."""
    xs, _, _, _, blk = _side(it, blocks, X, XV, X, XV, X, XV, X, XV, SIDES)
    ri = tl.arange(0, ROWS).to(tl.int64) + blk * ROWS
    m = ri < tl.where(it < blocks * SIDES, n_rows, 0)
    return tl.load(xs + ri[:, None] * D + d[None, :], mask=m[:, None] & (d[None, :] < D),
                   other=0.0)


@triton.jit
def rotated_append_kernel(X, XV, PAGES, OFFSETS, P0, P1, P0V, P1V, ROT, TH, CENT, CELLS, n_rows,
                          PAGE, H_KV: tl.constexpr, FMT: tl.constexpr, D: tl.constexpr,
                          DP: tl.constexpr, DPOW: tl.constexpr, X0: tl.constexpr,
                          X1: tl.constexpr, LEVELS: tl.constexpr, ROWS: tl.constexpr,
                          SIDES: tl.constexpr = 1, FMA: tl.constexpr = False,
                          BIAS: tl.constexpr = 0.25, HW: tl.constexpr = False,
                          PREFETCH: tl.constexpr = False, CELL_INV: tl.constexpr = 0.0,
                          CELL_MASK: tl.constexpr = 0):
    """append_kernel for the rotated formats (tbq4: FMT 4, tbq3: 5), persistent: each program
    loads the rotation (ROT, the 128 × 128 ±1 matrix, times √128; tbq3: its rows in
    lane_order) once and then quantizes every num_programs-th block of ROWS rows. SIDES 2:
    K's rows X into planes P0, P1 and V's rows XV (the same tokens, format and widths) into
    P0V, P1V in one launch, V's blocks numbered after K's, so that the programs share out
    both sides' blocks (SIDES 1: X into P0, P1 only; XV, P0V, P1V unread). FMA: _search's
    FMA form (HW: its comparisons by fma.rn.sat on a GPU) over the centroids plus BIAS (0.25
    makes every step exact; 0.0 where codebook.staircase_bias found them exact as they are,
    one add a value fewer). Each
    128-block of a row is rotated and coded by the Lloyd–Max thresholds TH (centroids CENT)
    of its unit vector; its stored norm is the block's norm over the norm of its centroids,
    so the reconstruction keeps the length. ROT is float16 or bfloat16: input of its type is
    rotated as it is (one product, exact but for the float32 sums); other input (float32) by
    _rotate_blocks, as its blocks' unit vectors. PREFETCH: each program loads its next block's
    rows into registers before it codes the block it holds (launched in one stage, so that the
    compiler's own pipelining, which issues the next copy at the loop's end, is not added).
    CELL_MASK > 0 (with FMA): the FMA form by lookup (_lookup) in CELLS, codebook.cells's
    rows for LEVELS and BIAS (CELL_INV its inv, CELL_MASK its rows less one); else CELLS is
    not read."""
    r128 = tl.arange(0, 128)
    rot = tl.trans(tl.load(ROT + r128[:, None] * 128 + r128[None, :]))
    H: tl.constexpr = LEVELS // 2
    M: tl.constexpr = LEVELS - 1
    B: tl.constexpr = BIAS if FMA else 0.0
    # the codebook and its thresholds are symmetric: the positive thresholds and centroids
    t0 = _threshold(TH, 0, H)
    t1 = _threshold(TH, 1, H)
    t2 = _threshold(TH, 2, H)
    t3 = _threshold(TH, 3, H)
    t4 = _threshold(TH, 4, H)
    t5 = _threshold(TH, 5, H)
    t6 = _threshold(TH, 6, H)
    e0 = _coded(CENT, 0, H, M, B)
    e1 = _coded(CENT, 1, H, M, B)
    e2 = _coded(CENT, 2, H, M, B)
    e3 = _coded(CENT, 3, H, M, B)
    e4 = _coded(CENT, 4, H, M, B)
    e5 = _coded(CENT, 5, H, M, B)
    e6 = _coded(CENT, 6, H, M, B)
    e7 = _coded(CENT, 7, H, M, B)
    d = tl.arange(0, DPOW)
    nb = tl.arange(0, DPOW // 128)
    blocks = tl.cdiv(n_rows, ROWS)
    if PREFETCH:  # the first block's rows
        x_next = _block_rows(tl.program_id(0), blocks, X, XV, n_rows, d, D, ROWS, SIDES)
    for it in range(tl.program_id(0), blocks * SIDES, tl.num_programs(0)):
        xs, q0, q1, _, blk = _side(it, blocks, X, XV, P0, P0V, P1, P1V, P0, P0V, SIDES)
        ri = tl.arange(0, ROWS).to(tl.int64) + blk * ROWS
        rmask = ri < n_rows
        r = _destination(PAGES, OFFSETS, ri, rmask, H_KV, PAGE)[:, None]
        if PREFETCH:  # this block's rows, loaded a block ago; the next block's now
            x = x_next
            x_next = _block_rows(it + tl.num_programs(0), blocks, X, XV, n_rows, d, D, ROWS,
                                 SIDES)
        else:
            x = tl.load(xs + ri[:, None] * D + d[None, :],
                        mask=rmask[:, None] & (d[None, :] < D), other=0.0)
        # y: each block rotated; the rotation keeps the length, so y / |y| is its rotated
        # unit vector, whose coordinates the thresholds code: compare |y| with the thresholds
        # times s = |y| (at least 10⁻²⁰, so that a zero block compares as zero and the FMA
        # form's scale of the smallest threshold stays a float32; a block that small stores
        # the norm 0 in float16 whatever its codes)
        if X.dtype.element_ty == ROT.dtype.element_ty:
            y = tl.reshape(tl.dot(tl.reshape(x, (ROWS * (DPOW // 128), 128)), rot),
                           (ROWS, DPOW // 128, 128))
            s = tl.sqrt(tl.sum(y * y, axis=2))
            n = s * 0.08838834764831845  # the block's norm, |y| / √128
            s = tl.maximum(s, 1e-20)[:, :, None]
        else:
            xb = tl.reshape(x.to(tl.float32), (ROWS, DPOW // 128, 128))
            n = tl.sqrt(tl.sum(xb * xb, axis=2))
            u = tl.reshape(xb * (1.0 / tl.maximum(n, 1e-30))[:, :, None],
                           (ROWS * (DPOW // 128), 128))
            y = tl.reshape(_rotate_blocks(u, rot, SCALED=False), (ROWS, DPOW // 128, 128))
            s = tl.full((ROWS, DPOW // 128, 1), 11.313708498984761, tl.float32)  # √128
        if FMA and CELL_MASK > 0:
            c, flip = _lookup(y, s, t0, CELLS, CELL_INV, CELL_MASK, HW)
        else:
            c, flip = _search(y, s, t0, t1, t2, t3, t4, t5, t6, e0, e1, e2, e3, e4, e5, e6,
                              e7, LEVELS, FMA, HW)
        # y ≤ 0 takes the mirrored code, M minus the positive one (its complement)
        _store_codes(q0, r * X0, rmask,
                     tl.reshape((c.to(tl.int32, bitcast=True) ^ flip) & M, (ROWS, DPOW)),
                     ROWS, DPOW, FMT, DP * (4 if FMT == 4 else 3) // 8)
        u = c
        if B != 0.0:
            u = c - B  # the centroid (exact: B and c share a binade)
        norm = (n / tl.maximum(tl.sqrt(tl.sum(u * u, axis=2)), 1e-30)).to(tl.float16)
        tl.store(q1 + r * X1 + nb[None, :], norm, mask=rmask[:, None] & (nb[None, :] < DP // 128))


#: 2⁻¹²⁶, float32's smallest normal, as a PTX float literal
MIN_NORMAL_PTX = tl.constexpr("0f00800000")


@triton.jit
def e2m1_magnitude(v, HW: tl.constexpr):
    """The e2m1 magnitude code (0…7: 0, 0.5, 1, 1.5, 2, 3, 4, 6) nearest to each v ≥ 0, ties to
    the smaller. Times 2⁻¹²⁶, v below 1 lies among float32's subnormals, whose units are
    2⁻²³ of v, and from 1 on the exponent counts binades from 1: bits ≫ 22 of the product is
    2v below 2, then one mantissa bit a binade, the e2m1 grid's codes. Adding just under half a
    unit (2²¹ − 1) before the shift rounds to the nearest, ties down. The product rounds up
    (mul.rp; float64 then the next float32 up in the interpreter): a v past a tie by less than
    a subnormal unit stays past it, and a tie, a multiple of the unit, stays exact."""
    if HW:
        u = tl.inline_asm_elementwise(f"mul.rp.f32 $0, $1, {MIN_NORMAL_PTX};", "=r,r", [v],
                                      dtype=tl.float32, is_pure=True, pack=1)
    else:
        exact = v.to(tl.float64) * 1.1754943508222875e-38
        u = exact.to(tl.float32)
        u = tl.where(u.to(tl.float64) < exact,
                     (u.to(tl.int32, bitcast=True) + 1).to(tl.float32, bitcast=True), u)
    return tl.minimum((u.to(tl.int32, bitcast=True) + 0x1FFFFF) >> 22, 7)


@triton.jit
def _mul_rn(a, b, HW: tl.constexpr):
    """a · b rounded to float32 on its own (on a GPU, an explicitly rounded multiply, which the
    compiler does not fuse into a following add)."""
    b = tl.broadcast_to(b, a.shape)
    if HW:
        return tl.inline_asm_elementwise("mul.rn.f32 $0, $1, $2;", "=r,r,r", [a, b],
                                         dtype=tl.float32, is_pure=True, pack=1)
    else:
        return a * b


@triton.jit
def _div_rn(a, b, FAST: tl.constexpr, HW: tl.constexpr):
    """a / b rounded to nearest. FAST (on a GPU, for operands the caller keeps in range: b
    and the quotient far inside float32's exponents, as the division's range check FCHK
    passes them): the path div.rn.f32 takes before that check, inline (the reciprocal's
    estimate, one Newton step, the quotient and its remainder's correction: five operations,
    no branch to the slow path); else the division itself."""
    if FAST and HW:
        return tl.inline_asm_elementwise(
            "{ .reg .f32 r, e, n, q; rcp.approx.ftz.f32 r, $2; neg.f32 n, $2; "
            "fma.rn.f32 e, n, r, 0f3F800000; fma.rn.f32 r, r, e, r; mul.rn.f32 q, $1, r; "
            "fma.rn.f32 e, n, q, $1; fma.rn.f32 $0, r, e, q; }",
            "=r,r,r", [a, tl.broadcast_to(b, a.shape)], dtype=tl.float32, is_pure=True,
            pack=1)
    else:
        return tl.math.div_rn(a, b)


@triton.jit
def append_kernel(X, XV, PAGES, OFFSETS, P0, P1, P0V, P1V, GS, GSV, n_rows, PAGE,
                  H_KV: tl.constexpr, FMT: tl.constexpr, D: tl.constexpr, DP: tl.constexpr,
                  DPOW: tl.constexpr, X0: tl.constexpr, X1: tl.constexpr,
                  ROWS: tl.constexpr, HW: tl.constexpr, SIDES: tl.constexpr = 1,
                  Q4_FLOOR_ADD: tl.constexpr = False):
    """Quantize ``n_rows`` rows of X [n_rows, D] (token-major, H_KV heads a token) into the
    planes of a format that is not rotated (those have rotated_append_kernel): token i goes
    to (page PAGES[i], row OFFSETS[i]) of each head's PAGE rows. GS: nvfp4's global scale.
    HW: float8 conversions in hardware (a GPU). SIDES 2: K's rows X into P0, P1 (global
    scale GS) and V's rows XV (the same tokens, format and widths) into P0V, P1V (GSV) in one
    launch, V's blocks after K's (SIDES 1: XV, P0V, P1V and GSV unread). Q4_FLOOR_ADD (q4_0
    on a GPU): each code's floor from an add of 2²³ rounded toward −∞ (the code in the
    sum's low bits) instead of a float floor, clamps and a conversion."""
    xs, q0, q1, gsp, blk = _side(tl.program_id(0), tl.cdiv(n_rows, ROWS), X, XV, P0, P0V,
                                 P1, P1V, GS, GSV, SIDES)
    ri = blk.to(tl.int64) * ROWS + tl.arange(0, ROWS)
    rmask = ri < n_rows
    dst = _destination(PAGES, OFFSETS, ri, rmask, H_KV, PAGE)
    d = tl.arange(0, DPOW)
    m = rmask[:, None] & (d[None, :] < D)
    x = tl.load(xs + ri[:, None] * D + d[None, :], mask=m, other=0.0).to(tl.float32)
    r = dst[:, None]
    wm = rmask[:, None] & (d[None, :] < DP)
    if FMT == 0:
        tl.store(q0 + r * X0 + d[None, :], x.to(q0.dtype.element_ty), mask=m)
    elif FMT == 1:
        amax = tl.max(tl.abs(x), axis=1)
        # as the reference: the scale amax times 1/448 rounded to float32 (ref.INV_FP8_MAX),
        # the values times its reciprocal rounded to nearest (one division a row; Triton's
        # float32 "/" is div.full.f32, up to two units off, whose quotient near an e4m3
        # rounding boundary could take the next code), on the fast path for float16 rows
        # (their scales within 2⁻⁵⁰…2⁸)
        scale = tl.maximum(amax, 1e-12) * 0.0022321429569274187
        inv = _div_rn(tl.full(scale.shape, 1.0, tl.float32), scale,
                      X.dtype.element_ty == tl.float16, HW)
        tl.store(q0 + r * X0 + d[None, :], _e4m3(x * inv[:, None], HW), mask=m)
        tl.store(q1 + dst, scale, mask=rmask)
    elif FMT == 2:
        xb = tl.reshape(x, (ROWS, DPOW // 32, 32))
        amax = tl.max(tl.abs(xb), axis=2)
        # the block scale amax times 1/127 rounded to float32 (ref.INV_127), its reciprocal
        # rounded to nearest ("/" would be div.full.f32) on the fast path (a float16 scale,
        # or 1 in place of 0)
        ds = (amax * 0.007874015718698502).to(tl.float16)
        dsf = ds.to(tl.float32)
        inv = tl.where(dsf > 0, _div_rn(tl.full(dsf.shape, 1.0, tl.float32),
                                        tl.where(dsf > 0, dsf, 1.0), True, HW), 0.0)
        v = xb * inv[:, :, None]
        q = tl.where(v >= 0, tl.floor(v + 0.5), -tl.floor(-v + 0.5))
        q = tl.reshape(tl.minimum(tl.maximum(q, -127.0), 127.0), (ROWS, DPOW))
        tl.store(q0 + r * X0 + d[None, :], q.to(tl.int8), mask=wm)
        nb = tl.arange(0, DPOW // 32)
        tl.store(q1 + r * X1 + nb[None, :], ds, mask=rmask[:, None] & (nb[None, :] < DP // 32))
    elif FMT == 3:
        xb = tl.reshape(x, (ROWS, DPOW // 32, 32))
        # the value of largest magnitude with its sign, the first of them on a tie (as ggml)
        j = tl.arange(0, 32)[None, None, :]
        if X.dtype.element_ty == tl.float32:
            amax = tl.max(tl.abs(xb), axis=2)
            first = tl.min(tl.where(tl.abs(xb) == amax[:, :, None], j, 32), axis=2)
            # the others -inf: a block of negative zeros keeps its sign (a sum would not)
            vmax = tl.max(tl.where(j == first[:, :, None], xb, float("-inf")), axis=2)
        else:
            # rows of 16 bits: their float32 bits end in 13 zero bits (bfloat16's in 16), which
            # take 31 − j and the sign: one integer max finds the magnitude, the first of it
            # and its sign at once
            bits = xb.to(tl.uint32, bitcast=True)
            key = tl.max(((bits << 1) | (bits >> 31)) | ((31 - j) << 1).to(tl.uint32), axis=2)
            key = key & 0xFFFFFFC1
            vmax = ((key >> 1) | (key << 31)).to(tl.float32, bitcast=True)
        ds = (vmax / -8.0).to(tl.float16)
        # the reciprocal rounded and the product rounded before the 8.5 is added (not fused),
        # as the reference computes them
        inv = tl.where(ds.to(tl.float32) != 0, tl.math.div_rn(1.0, ds.to(tl.float32)), 0.0)
        y = _mul_rn(xb, inv[:, :, None], HW) + 8.5
        if Q4_FLOOR_ADD and HW:
            # |x · inv| ≤ 8 (1 + 2⁻¹⁰) (the scale rounded to float16), so y ≥ 0.49: y + 2²³
            # rounded toward −∞ is 2²³ + floor(y), floor(y) ≤ 16 in its low bits; clamped
            # there to 15, the bits above stay (2²³'s), which the byte packing below shifts
            # past its eight bits
            t = tl.inline_asm_elementwise("add.rm.f32 $0, $1, 0f4B000000;", "=r,r", [y],
                                          dtype=tl.int32, is_pure=True, pack=1)
            q = tl.minimum(t, 0x4B00000F)
        else:
            q = tl.minimum(tl.maximum(tl.floor(y), 0.0), 15.0).to(tl.int32)
        q4 = tl.permute(tl.reshape(q, (ROWS, DPOW // 32, 2, 16)), (0, 1, 3, 2))
        lo, hi = tl.split(q4)
        packed = tl.reshape((lo | (hi << 4)).to(tl.uint8), (ROWS, DPOW // 2))
        dd = tl.arange(0, DPOW // 2)
        tl.store(q0 + r * X0 + dd[None, :], packed, mask=rmask[:, None] & (dd[None, :] < DP // 2))
        nb = tl.arange(0, DPOW // 32)
        tl.store(q1 + r * X1 + nb[None, :], ds, mask=rmask[:, None] & (nb[None, :] < DP // 32))
    else:
        gs = tl.load(gsp)
        xb = tl.reshape(x, (ROWS, DPOW // 16, 16))
        amax = tl.max(tl.abs(xb), axis=2)
        # the block scales (one per 16 values): amax times the rounded reciprocal of 6 · GS
        # (one division a program), as the reference, converted in software (in hardware,
        # these [ROWS, blocks] tensors came out with other bits than torch's on the H200,
        # triton 3.6)
        sc = e4m3_encode(amax * tl.math.div_rn(1.0, 6.0 * gs))
        eff = e4m3_decode(sc) * gs
        # times the block's reciprocal (one division a block, rounded to nearest), as the
        # reference; eff = e4m3 value × GS, within 2⁻⁶⁹…2⁶⁹ (the fast path's range) where GS
        # is within 2⁻⁶⁰…2⁶⁰; any other GS (a tensor whose largest magnitude is below 2⁻⁴⁸ or
        # above 2⁷¹) takes the division
        one = tl.full(eff.shape, 1.0, tl.float32)
        den = tl.where(eff > 0, eff, one)
        if (gs > 8.673617379884035e-19) & (gs < 1.152921504606847e18):
            inv = _div_rn(one, den, True, HW)
        else:
            inv = _div_rn(one, den, False, HW)
        v = tl.abs(xb) * inv[:, :, None]
        mag = e2m1_magnitude(v, HW)
        code = tl.reshape(mag | ((xb < 0).to(tl.int32) << 3), (ROWS, DPOW))
        even, odd = tl.split(tl.reshape(code, (ROWS, DPOW // 2, 2)))
        dd = tl.arange(0, DPOW // 2)
        tl.store(q0 + r * X0 + dd[None, :], (even | (odd << 4)).to(tl.uint8),
                 mask=rmask[:, None] & (dd[None, :] < DP // 2))
        nb = tl.arange(0, DPOW // 16)
        tl.store(q1 + r * X1 + nb[None, :], sc, mask=rmask[:, None] & (nb[None, :] < DP // 16))
