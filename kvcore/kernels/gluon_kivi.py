"""KIVI decode attention by a split kernel that states its layouts (Triton's Gluon dialect), for
K and V in kivi2 or kivi4 (BITS; groups of 32 tokens, heads of 128 or 64 lanes (D), at most 16
query heads a KV head: 8 columns for up to 8, 16 for 9-16), on an sm_80+ GPU. KiviCache.decode
takes it there (_takes_gluon; on heads of 64 lanes up to 8 query heads a KV head, where it was
timed).

A program (sequence, KV head, split) walks its split's quantized groups, one group a 32-token
tile copied into shared memory two ahead (cp.async: the key codes, scales and minimums, the
value codes, scales and minimums; 3 KB a kivi2 tile, 5 KB a kivi4 one), then the split's part
of the float16 residual ring. Both products are swapped, as in kernels/gluon_q4_0.py: the cache
tile is the tensor cores' first operand and the query rows (padded to 8) the narrow second
one, so that the partial output [128, 8] stays in 32 registers a thread.

Each lane reads its bytes where the operands want them, so that no code moves between lanes:

- Keys: kivi2's lane (g, t) reads byte row g of channels 32 t … 32 t + 31 (byte j of a channel
  holds tokens 4 j + k) and unpacks code k of each byte (CODES2: the code masked into a float16
  mantissa, one exact subtraction, c·s + m in one fused multiply-add, the values of
  kivi_triton's decode) into score row 16 k1 + 8 k0 + g (k = k0 + 2 k1); kivi4's reads byte
  rows g and g + 8 (two tokens a byte) into rows 16 h + 8 k + g (key_token). The columns are
  the channels relabelled (key_channel); the query is gathered in that order once a program.
- Values: a byte row c holds channels PER·c + k of a token. Lane (g, t) reads its byte rows of
  tokens 8 t … 8 t + 7 into the output rows value_channel gives; the columns are the tokens
  relabelled (token 8 t + 4 κ + 2 f + e at column 16 κ + 8 f + 2 t + e), which the weights
  reach through one layout conversion, and the output is stored back in head order. V_AFTER
  (decode's, since it was timed faster in every form): the value codes unpacked as float16
  subnormals c · 2^(BITS·k − 24) by one AND a pair, a channel group's product taking the
  weights times its token scales, the rows' powers of two and the minimums (a product of their
  own) applied once a program (_value_after, _values_after_end); else the codes scaled as
  unpacked (CODES2/CODES4).
- K_SUB (decode's for kivi2's 8-column forms, where it was timed faster): the key
  codes unpacked as subnormals too, the query times the group's channel scales as the second
  operand, the score rows times 2^(24 − BITS·k) and the minimums' term (a product of its own)
  added after (_scores).
- The ring's float16 rows are loaded straight into the same operand orders.

Options measured and not taken by decode (docs/KERNELS.md): K_AFTER (kivi2's keys scaled after
their product) and PAIRS (two groups a step), neither with V_AFTER or K_SUB.

Gluon has no interpreter: CI compiles this kernel for sm_90 (tests/kernels/test_gluon_kivi.py),
and bench/probes/gluon_kivi.py checks its output on a GPU against KiviCache's Triton decode and
decode_ref.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as _cp

from .cache import tiled_splits, wave_splits
from .gluon_q4_0 import ASYNC_LOAD, BARRIER, MMA, OPA, OPB, next_max
from .kivi_triton import _codes_asm

#: four bytes of 2-bit (4-bit) codes, their scales and minimums → code k of each byte as c·s + m
CODES2 = gl.constexpr(_codes_asm(2))
CODES4 = gl.constexpr(_codes_asm(4))
#: the same codes unscaled: code k of each byte as 2^(10 − 2k) + c (K_AFTER's keys)
UNITS2 = gl.constexpr(_codes_asm(2, scaled=False))


def _subnormal_asm(bits: int) -> str:
    """PTX for four bytes of BITS-bit codes → code k of each byte as the float16 c · 2^(BITS·k −
    24), pairs ordered as _codes_asm orders them: the bytes spread into the low halves of two
    words, code k masked in place, under a zero exponent (a subnormal, exact) by one AND a
    pair. V_AFTER's values: their scales go on the weights, 2^(24 − BITS·k) on the output's
    rows, the minimums into a product of their own."""
    src = 2 * (8 // bits)
    body = [".reg .b32 t0, t1, z;", "mov.b32 z, 0;",
            f"prmt.b32 t0, ${src}, z, 0x4140;", f"prmt.b32 t1, ${src}, z, 0x4342;"]
    for k in range(8 // bits):
        mask = (((1 << bits) - 1) << (bits * k)) * 0x10001
        body += [f"and.b32 ${2 * k + h}, t{h}, 0x{mask:08X};" for h in (0, 1)]
    return "{\n" + "\n".join(body) + "\n}"


SUBNORMAL2 = gl.constexpr(_subnormal_asm(2))
SUBNORMAL4 = gl.constexpr(_subnormal_asm(4))
#: programs a multiprocessor and the cap of registers a thread (12 one-warp programs fit 168)
KIVI_GLUON_PER_SM = 12
KIVI_GLUON_REGISTERS = 168
#: the same for 9-16 query heads a KV head (16 columns: 231 registers unspilled, 8 programs;
#: 168 spilled 208 bytes and was slower: gluon-kivi2-group16-h200.json, GQA 64/4, B=1 128k
#: 39.8-40.1 µs against 46.1)
KIVI_GLUON_PER_SM_16 = 8
KIVI_GLUON_REGISTERS_16 = 232

# key codes [8 byte rows, 128 channels]: lane (g, t) holds row g, channels 32 t … 32 t + 31
KL = gl.constexpr(gl.BlockedLayout([1, 32], [8, 4], [1, 1], [1, 0]))
# (kivi4's [16 byte rows, 128]: rows g and g + 8)
# value codes [4 channel groups q, 8, 32 tokens] (byte row 8 q + g): lane (g, t) holds rows g of
# every group, tokens 8 t … 8 t + 7
VL = gl.constexpr(gl.BlockedLayout([1, 1, 8], [1, 8, 4], [1, 1, 1], [2, 1, 0]))
# kivi4's [4 groups q, 2, 8, 32 tokens] (byte row 16 q + 8 i + g): rows g of each half group
VL4 = gl.constexpr(gl.BlockedLayout([1, 1, 1, 8], [1, 1, 8, 4], [1, 1, 1, 1], [3, 2, 1, 0]))
# V_AFTER: a channel group's value codes [8 byte rows, 32 tokens] (kivi4 [2, 8, 32]) as VL's
VLQ = gl.constexpr(gl.BlockedLayout([1, 8], [8, 4], [1, 1], [1, 0]))
# the tokens' scales [groups, 32 tokens]: lane (g, t) holds tokens 8 t … 8 t + 7 of every group,
# the weights' order (SliceLayout(1, OPB)) once the tokens are relabelled as columns
SVS = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [0, 4], [1, 0], [2, 0]],
    lane_bases=[[0, 8], [0, 16], [0, 0], [0, 0], [0, 0]], warp_bases=[], block_bases=[],
    shape=[4, 32]))
SVS64 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [0, 4], [1, 0]],
    lane_bases=[[0, 8], [0, 16], [0, 0], [0, 0], [0, 0]], warp_bases=[], block_bases=[],
    shape=[2, 32]))
# K_SUB: a group's key scales or minimums [D channels]: lane (g, t) holds channels D/4 · t …
# D/4 · t + D/4 − 1, the query operand's rows (SliceLayout(1, OPB)) once relabelled
SKS = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[1], [2], [4], [8], [16]], lane_bases=[[32], [64], [0], [0], [0]], warp_bases=[],
    block_bases=[], shape=[128]))
SKS64 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[1], [2], [4], [8]], lane_bases=[[16], [32], [0], [0], [0]], warp_bases=[],
    block_bases=[], shape=[64]))
# the minimums [8 rows (a group each, the rest zero), 32 tokens]: lane (g, t) holds row g,
# tokens 8 t … 8 t + 7 (the first operand's order once relabelled)
SVM = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [0, 4]], lane_bases=[[0, 8], [0, 16], [1, 0], [2, 0], [4, 0]],
    warp_bases=[], block_bases=[], shape=[8, 32]))
# copies, 16 bytes (codes) or 8 bytes (scales, minimums) a lane
CPK = gl.constexpr(gl.BlockedLayout([1, 16], [4, 8], [1, 1], [1, 0]))    # [8 or 16, 128] bytes
CPS = gl.constexpr(gl.BlockedLayout([4], [32], [1], [0]))                # [128] float16
CPV = gl.constexpr(gl.BlockedLayout([1, 16], [16, 2], [1, 1], [1, 0]))   # [32 or 64, 32] bytes
CPVS = gl.constexpr(gl.BlockedLayout([1, 4], [4, 8], [1, 1], [1, 0]))    # [4, 32] float16
# the ring's key rows [32 tokens, 128] as the quantized keys lie: lane (g, t) holds tokens g,
# g + 8, g + 16, g + 24, channels 32 t … 32 t + 31
RK = gl.constexpr(gl.BlockedLayout([1, 32], [8, 4], [1, 1], [1, 0]))
# its value rows [32 tokens, 128] as the value product wants them: lane (g, t) holds tokens
# 8 t … 8 t + 7, channels 32 q + 4 g … 32 q + 4 g + 3 of each group q
RV = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [1, 0], [2, 0], [4, 0], [0, 32], [0, 64]],
    lane_bases=[[8, 0], [16, 0], [0, 4], [0, 8], [0, 16]], warp_bases=[],
    block_bases=[], shape=[32, 128]))
# kivi4's: channels 32 q + 16 i + 2 g, + 1 of each group q and half i
RV4 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [1, 0], [2, 0], [4, 0], [0, 16], [0, 32], [0, 64]],
    lane_bases=[[8, 0], [16, 0], [0, 2], [0, 4], [0, 8]], warp_bases=[],
    block_bases=[], shape=[32, 128]))
# 64-lane heads: key codes [8 or 16, 64] (lane (g, t): channels 16 t … 16 t + 15), their copies
# and ring rows, and the value rows of the ring (channels 32 q + 4 g … and 32 q + 16 i + 2 g …)
KL64 = gl.constexpr(gl.BlockedLayout([1, 16], [8, 4], [1, 1], [1, 0]))
CPK64 = gl.constexpr(gl.BlockedLayout([1, 16], [8, 4], [1, 1], [1, 0]))   # [8 or 16, 64] bytes
CPS64 = gl.constexpr(gl.BlockedLayout([2], [32], [1], [0]))               # [64] float16
CPVS64 = gl.constexpr(gl.BlockedLayout([1, 2], [2, 16], [1, 1], [1, 0]))  # [2, 32] float16
RV64 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [1, 0], [2, 0], [4, 0], [0, 32]],
    lane_bases=[[8, 0], [16, 0], [0, 4], [0, 8], [0, 16]], warp_bases=[],
    block_bases=[], shape=[32, 64]))
RV4_64 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [1, 0], [2, 0], [4, 0], [0, 16], [0, 32]],
    lane_bases=[[8, 0], [16, 0], [0, 2], [0, 4], [0, 8]], warp_bases=[],
    block_bases=[], shape=[32, 64]))
# key rows of 128 bytes, each 16-byte chunk xor'ed with the row (8 rows, 32 banks)
SHK = gl.constexpr(gl.SwizzledSharedLayout(vec=16, per_phase=1, max_phase=8, order=[1, 0]))
SH1 = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[0]))
SH2 = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))


# The operands' orders, used by the kernel on index tensors; their plain functions (``.fn``)
# take ints, as the tests call them.


@gluon.jit
def key_token(r, BITS: gl.constexpr = 2):
    """The token (of a 32-token tile) score row r holds: kivi2's row 16 k1 + 8 k0 + g holds
    token 4 g + k0 + 2 k1 (code k of byte row g); kivi4's row 16 h + 8 k + g token
    16 h + 2 g + k (code k of byte row 8 h + g)."""
    if BITS == 2:  # noqa: SIM108 (a compile-time branch)
        t = 4 * (r & 7) + (r >> 3)
    else:
        t = 16 * (r >> 4) + 2 * (r & 7) + ((r >> 3) & 1)
    return t


@gluon.jit
def key_channel(k, D: gl.constexpr = 128):
    """The channel column k of the score product's first operand holds (k = 16 J + 8 f + 2 t +
    e: lane t's columns are its channels D/4 · t + 4 J + 2 f + e)."""
    return (D // 4) * ((k >> 1) & 3) + 4 * (k >> 4) + 2 * ((k >> 3) & 1) + (k & 1)


@gluon.jit
def value_channel(r, BITS: gl.constexpr = 2):
    """The channel row r of the value product's first operand (and of the partial output)
    holds: kivi2's row 32 q + 16 k1 + 8 k0 + g channel 32 q + 4 g + 2 k1 + k0 (code k of byte
    row 8 q + g); kivi4's row 32 q + 16 i + 8 k + g channel 32 q + 16 i + 2 g + k (code k of
    byte row 16 q + 8 i + g)."""
    if BITS == 2:  # noqa: SIM108 (a compile-time branch)
        c = 32 * (r >> 5) + 4 * (r & 7) + 2 * ((r >> 4) & 1) + ((r >> 3) & 1)
    else:
        c = 32 * (r >> 5) + 16 * ((r >> 4) & 1) + 2 * (r & 7) + ((r >> 3) & 1)
    return c


@gluon.jit
def _ring_rows(ring0, first, i, RING):
    """The ring rows of a tile's tokens n0 + i, n0 mod RING being ``first``: wrapped once (the
    ring holds every token from nq to the end, so a tile's tokens before the end span at most
    RING rows)."""
    at = first + i
    return ring0 + gl.where(at >= RING, at - RING, at)


@gluon.jit
def _copy(kbuf, ksbuf, kmbuf, vbuf, vsbuf, vmbuf, st, KQ, KS, KM, VQ, VS, VM, row,
          BITS: gl.constexpr, D: gl.constexpr):
    """Start copying the group whose planes are at ``row`` (slot · H + head) into stage st."""
    KB: gl.constexpr = 4 * BITS  # byte rows of a group's key codes
    VB: gl.constexpr = D * BITS // 8  # 32-byte rows of its value codes
    if D == 128:
        CK: gl.constexpr = CPK
        CS: gl.constexpr = CPS
        CVS: gl.constexpr = CPVS
    else:
        CK: gl.constexpr = CPK64
        CS: gl.constexpr = CPS64
        CVS: gl.constexpr = CPVS64
    j = gl.arange(0, KB, layout=gl.SliceLayout(1, CK))
    ch = gl.arange(0, D, layout=gl.SliceLayout(0, CK))
    ASYNC_LOAD(kbuf.index(st), KQ + row * (KB * D) + j[:, None] * D + ch[None, :])
    cs = gl.arange(0, D, layout=CS)
    ASYNC_LOAD(ksbuf.index(st), KS + row * D + cs)
    ASYNC_LOAD(kmbuf.index(st), KM + row * D + cs)
    c = gl.arange(0, VB, layout=gl.SliceLayout(1, CPV))
    tok = gl.arange(0, 32, layout=gl.SliceLayout(0, CPV))
    ASYNC_LOAD(vbuf.index(st), VQ + row * (VB * 32) + c[:, None] * 32 + tok[None, :])
    q = gl.arange(0, D // 32, layout=gl.SliceLayout(1, CVS))
    vt = gl.arange(0, 32, layout=gl.SliceLayout(0, CVS))
    ASYNC_LOAD(vsbuf.index(st), VS + row * D + q[:, None] * 32 + vt[None, :])
    # (V_AFTER's buffer has 8 rows, those past the groups zero)
    ASYNC_LOAD(vmbuf.index(st).slice(0, D // 32), VM + row * D + q[:, None] * 32 + vt[None, :])


@gluon.jit
def _issue(kbuf, ksbuf, kmbuf, vbuf, vsbuf, vmbuf, st, KQ, KS, KM, VQ, VS, VM, GT, gt0, h,
           n0, qend, H: gl.constexpr, BITS: gl.constexpr, D: gl.constexpr):
    """The copies of the group at token n0 into stage st (none past qend), one commit group."""
    if n0 < qend:
        slot = gl.load(GT + gt0 + n0 // 32).to(gl.int64)
        _copy(kbuf, ksbuf, kmbuf, vbuf, vsbuf, vmbuf, st, KQ, KS, KM, VQ, VS, VM, slot * H + h,
              BITS, D)
    _cp.commit_group()


@gluon.jit
def _key_operand(kbuf, ksbuf, kmbuf, st, BITS: gl.constexpr, D: gl.constexpr = 128,
                 SUB: gl.constexpr = False):
    """Stage st's keys → the score product's first operand [32, 128]: row r holds token
    key_token(r) (kivi2: row 16 k1 + 8 k0 + g, token 4 g + k0 + 2 k1; kivi4: row 16 h + 8 k +
    g, token 16 h + 2 g + k), column k channel key_channel(k, D)."""
    if D == 128:
        L: gl.constexpr = KL
    else:
        L: gl.constexpr = KL64
    kb = kbuf.index(st).load(L)
    if not SUB:  # each code's channel scale and minimum
        ks = gl.broadcast(gl.expand_dims(ksbuf.index(st).load(gl.SliceLayout(0, L)), 0), kb)[0]
        km = gl.broadcast(gl.expand_dims(kmbuf.index(st).load(gl.SliceLayout(0, L)), 0), kb)[0]
    if BITS == 2:
        if SUB:
            o0, o1, o2, o3 = gl.inline_asm_elementwise(
                SUBNORMAL2, "=r,=r,=r,=r,=r,=r,=r,=r,r", [kb],
                dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=4)
        else:
            o0, o1, o2, o3 = gl.inline_asm_elementwise(
                CODES2, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r", [kb, ks, km],
                dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=4)
        x = gl.join(gl.join(o0, o1), gl.join(o2, o3))  # [g, ch, k0, k1]
        x = gl.reshape(x, [8, 4, D // 16, 2, 2, 2, 2])  # g | t J f e | k0 k1
        x = gl.permute(x, [6, 5, 0, 2, 3, 1, 4])  # k1 k0 g | J f t e
    else:
        if SUB:
            o0, o1 = gl.inline_asm_elementwise(
                SUBNORMAL4, "=r,=r,=r,=r,r", [kb], dtype=(gl.float16, gl.float16),
                is_pure=True, pack=4)
        else:
            o0, o1 = gl.inline_asm_elementwise(
                CODES4, "=r,=r,=r,=r,r,r,r,r,r", [kb, ks, km], dtype=(gl.float16, gl.float16),
                is_pure=True, pack=4)
        x = gl.join(o0, o1)  # [h g, ch, k]
        x = gl.reshape(x, [2, 8, 4, D // 16, 2, 2, 2])  # h g | t J f e | k
        x = gl.permute(x, [0, 6, 1, 3, 4, 2, 5])  # h k g | J f t e
    return gl.convert_layout(gl.reshape(x, [32, D]), OPA)


@gluon.jit
def _by_column(x):
    """A group's per-channel plane [D] (channel D/4 · t + 4 J + 2 f + e) in the score product's
    column order (16 J + 8 f + 2 t + e: key_channel's inverse)."""
    D: gl.constexpr = x.shape[0]
    x = gl.reshape(x, [4, D // 16, 2, 2])  # t J f e
    return gl.reshape(gl.permute(x, [1, 2, 0, 3]), [D])


@gluon.jit
def _by_token_column(x):
    """Per-token planes [R, 32] (token 8 t + 4 κ + 2 f + e) in the value product's column order
    (16 κ + 8 f + 2 t + e)."""
    R: gl.constexpr = x.shape[0]
    x = gl.reshape(x, [R, 4, 2, 2, 2])  # r | t κ f e
    return gl.reshape(gl.permute(x, [0, 2, 3, 1, 4]), [R, 32])


@gluon.jit
def _scores(kbuf, ksbuf, kmbuf, st, qb, BITS: gl.constexpr, D: gl.constexpr,
            K_SUB: gl.constexpr):
    """A quantized tile's scores [32, QN] (rows in key_token's order). K_SUB: the key codes as
    subnormals c · 2^(BITS·k − 24) (as V_AFTER's values), the query times the group's channel
    scales as the second operand, each row times 2^(24 − BITS·k) after, and the minimums' term
    Σ q·m from a product of its own (every row of its first operand the minimums, so every row
    of its result the term) added after, its products independent of the scores'."""
    QN: gl.constexpr = qb.shape[1]
    if K_SUB:
        if D == 128:
            SL: gl.constexpr = SKS
        else:
            SL: gl.constexpr = SKS64
        sc = _by_column(ksbuf.index(st).load(SL))
        mn = _by_column(kmbuf.index(st).load(SL))
        qs = qb * gl.expand_dims(gl.convert_layout(sc, gl.SliceLayout(1, OPB)), 1)
        mrows = gl.expand_dims(gl.convert_layout(mn, gl.SliceLayout(0, OPA)), 0)
        mrows = gl.broadcast(mrows, gl.zeros([16, D], gl.float16, layout=OPA))[0]
        bias = gl.nvidia.ampere.mma_v2(mrows, qb, gl.zeros([16, QN], gl.float32, layout=MMA))
        s = gl.nvidia.ampere.mma_v2(_key_operand(kbuf, ksbuf, kmbuf, st, BITS, D, True), qs,
                                    gl.zeros([32, QN], gl.float32, layout=MMA))
        r = gl.arange(0, 32, layout=gl.SliceLayout(1, MMA))
        rs = gl.exp2((24 - BITS * ((r >> 3) & (8 // BITS - 1))).to(gl.float32))
        bias = gl.convert_layout(gl.reshape(gl.permute(gl.join(bias, bias), [2, 0, 1]),
                                            [32, QN]), MMA)
        s = s * rs[:, None] + bias
    else:
        s = gl.nvidia.ampere.mma_v2(_key_operand(kbuf, ksbuf, kmbuf, st, BITS, D), qb,
                                    gl.zeros([32, QN], gl.float32, layout=MMA))
    return s


@gluon.jit
def _key_rows(kbuf, ksbuf, kmbuf, st, qb):
    """K_AFTER: stage st's keys as raw codes (UNITS2: 2^(10 − 2k) + c) → the two first operands
    [16, 128] of the score product (rows 8 k0 + g of product k1: token 4 g + k0 + 2 k1, columns
    in key_channel's order), the second operand qs = the query times the channels' scales, and
    the two products' initial accumulators [16, 8]: Σ q·m − 2^(10 − 2k) Σ qs, so that a
    product's scores are Σ q·(c·s + m) (the sums by products whose first operand is
    constant rows of ones)."""
    kb = kbuf.index(st).load(KL)
    o0, o1, o2, o3 = gl.inline_asm_elementwise(
        UNITS2, "=r,=r,=r,=r,=r,=r,=r,=r,r", [kb],
        dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=4)
    ks = gl.broadcast(gl.expand_dims(ksbuf.index(st).load(gl.SliceLayout(0, KL)), 0), kb)[0]
    km = gl.broadcast(gl.expand_dims(kmbuf.index(st).load(gl.SliceLayout(0, KL)), 0), kb)[0]
    # the scales and minimums [g, ch] as second operands [128, 8] (lane (g, t) holds column g,
    # its channels): the query times each
    sk = gl.permute(gl.reshape(ks, [8, 4, 8, 2, 2]), [2, 3, 1, 4, 0])  # J f t e | g
    qs = qb * gl.convert_layout(gl.reshape(sk, [128, 8]), OPB)
    mk = gl.permute(gl.reshape(km, [8, 4, 8, 2, 2]), [2, 3, 1, 4, 0])
    qm = qb * gl.convert_layout(gl.reshape(mk, [128, 8]), OPB)
    # rows of ones sum them (every row of a product the same sums)
    ones = gl.full([16, 128], 1.0, gl.float16, layout=OPA)
    zero = gl.zeros([16, 8], gl.float32, layout=MMA)
    sm = gl.nvidia.ampere.mma_v2(ones, qm, zero)
    sq = gl.nvidia.ampere.mma_v2(ones, qs, zero)
    r = gl.arange(0, 16, layout=gl.SliceLayout(1, MMA))
    u = gl.where(r < 8, 1024.0, 256.0)[:, None]  # the units of codes 0 and 1 (rows 8 k0 + g)
    c0 = sm - u * sq
    c1 = sm - (u * 0.0625) * sq  # codes 2 and 3: 64 and 16
    return (_half_rows(o0, o1), _half_rows(o2, o3), qs, c0, c1)


@gluon.jit
def _half_rows(a, b):
    """Two codes' tiles [g, ch] (code k0 = 0, 1 of a product) → its first operand [16, 128]: row
    8 k0 + g, columns in key_channel's order."""
    x = gl.permute(gl.join(a, b), [2, 0, 1])  # k0 | g ch
    x = gl.permute(gl.reshape(x, [2, 8, 4, 8, 2, 2]), [0, 1, 3, 4, 2, 5])  # k0 g | J f t e
    return gl.convert_layout(gl.reshape(x, [16, 128]), OPA)


@gluon.jit
def _weights_after(p0, p1):
    """K_AFTER: a tile's weights from its two products [16, 8] (row 8 k0 + g of product k1:
    token 4 g + k0 + 2 k1) → the value product's second operand in its token order."""
    x = gl.join(p0.to(gl.float16), p1.to(gl.float16))  # [k0 t κ, n, k1]
    x = gl.reshape(x, [2, 4, 2, 8, 2])  # k0 (e) t κ | n | k1 (f)
    x = gl.permute(x, [2, 4, 1, 0, 3])  # κ f t e | n
    return gl.convert_layout(gl.reshape(x, [32, 8]), OPB)


@gluon.jit
def _value_operand(vbuf, vsbuf, vmbuf, st, BITS: gl.constexpr, D: gl.constexpr = 128):
    """Stage st's values → the value product's first operand [128, 32]: row r holds channel
    value_channel(r), column 16 κ + 8 f + 2 t + e token 8 t + 4 κ + 2 f + e."""
    if BITS == 2:
        vb = vbuf.index(st).reshape([D // 32, 8, 32]).load(VL)
        SL: gl.constexpr = gl.SliceLayout(1, VL)
        vs = gl.broadcast(gl.expand_dims(vsbuf.index(st).load(SL), 1), vb)[0]
        vm = gl.broadcast(gl.expand_dims(vmbuf.index(st).load(SL), 1), vb)[0]
        o0, o1, o2, o3 = gl.inline_asm_elementwise(
            CODES2, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r", [vb, vs, vm],
            dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=4)
        x = gl.join(gl.join(o0, o1), gl.join(o2, o3))  # [q, g, tok, k0, k1]
        x = gl.reshape(x, [D // 32, 8, 4, 2, 2, 2, 2, 2])  # q g | t κ f e | k0 k1
        x = gl.permute(x, [0, 7, 6, 1, 3, 4, 2, 5])  # q k1 k0 g | κ f t e
    else:
        vb = vbuf.index(st).reshape([D // 32, 2, 8, 32]).load(VL4)
        SL4: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, VL4))
        vs = gl.broadcast(gl.expand_dims(gl.expand_dims(vsbuf.index(st).load(SL4), 1), 2),
                          vb)[0]
        vm = gl.broadcast(gl.expand_dims(gl.expand_dims(vmbuf.index(st).load(SL4), 1), 2),
                          vb)[0]
        o0, o1 = gl.inline_asm_elementwise(
            CODES4, "=r,=r,=r,=r,r,r,r,r,r", [vb, vs, vm], dtype=(gl.float16, gl.float16),
            is_pure=True, pack=4)
        x = gl.join(o0, o1)  # [q, i, g, tok, k]
        x = gl.reshape(x, [D // 32, 2, 8, 4, 2, 2, 2, 2])  # q i g | t κ f e | k
        x = gl.permute(x, [0, 1, 7, 2, 4, 5, 3, 6])  # q i k g | κ f t e
    return gl.convert_layout(gl.reshape(x, [D, 32]), OPA)


@gluon.jit
def _weights_operand(p, BITS: gl.constexpr, QN: gl.constexpr = 8):
    """A tile's weights [32 score rows, QN] (row r: token key_token(r)) → the value product's
    second operand in its token order (_value_operand)."""
    if BITS == 2:
        x = gl.reshape(p.to(gl.float16), [2, 2, 4, 2, QN])  # k1 (f) k0 (e) | t κ (g) | n
        x = gl.permute(x, [3, 0, 2, 1, 4])  # κ f t e | n
    else:  # row 16 h + 8 k + g, token 16 h + 2 g + k: t = 2 h + g2, κ = g1, f = g0, e = k
        x = gl.reshape(p.to(gl.float16), [2, 2, 2, 2, 2, QN])  # h k | g2 g1 g0 | n
        x = gl.permute(x, [3, 4, 0, 2, 1, 5])  # κ f t1 t0 e | n
    return gl.convert_layout(gl.reshape(x, [32, QN]), OPB)


@gluon.jit
def _value_codes(vbuf, st, q: gl.constexpr, BITS: gl.constexpr, D: gl.constexpr):
    """V_AFTER: stage st's value codes of channel group q → [32, 32], the first operand of the
    group's rows (_value_operand's rows 32 q …, its columns), each code c as the subnormal
    c · 2^(BITS·k − 24) (SUBNORMAL*)."""
    if BITS == 2:
        vb = vbuf.index(st).slice(8 * q, 8).load(VLQ)
        o0, o1, o2, o3 = gl.inline_asm_elementwise(
            SUBNORMAL2, "=r,=r,=r,=r,=r,=r,=r,=r,r", [vb],
            dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=4)
        x = gl.join(gl.join(o0, o1), gl.join(o2, o3))  # [g, tok, k0, k1]
        x = gl.reshape(x, [8, 4, 2, 2, 2, 2, 2])  # g | t κ f e | k0 k1
        x = gl.permute(x, [6, 5, 0, 2, 3, 1, 4])  # k1 k0 g | κ f t e
    else:
        vb = vbuf.index(st).reshape([D // 16, 8, 32]).slice(2 * q, 2).load(VL)
        o0, o1 = gl.inline_asm_elementwise(
            SUBNORMAL4, "=r,=r,=r,=r,r", [vb], dtype=(gl.float16, gl.float16), is_pure=True,
            pack=4)
        x = gl.join(o0, o1)  # [i, g, tok, k]
        x = gl.reshape(x, [2, 8, 4, 2, 2, 2, 2])  # i g | t κ f e | k
        x = gl.permute(x, [0, 6, 1, 3, 4, 2, 5])  # i k g | κ f t e
    return gl.convert_layout(gl.reshape(x, [32, 32]), OPA)


@gluon.jit
def _group_parts(x, D: gl.constexpr):
    """[D, QN] in 32-row groups → its D // 32 groups [32, QN] (with D 64, the last two zero
    and unused)."""
    QN: gl.constexpr = x.shape[1]
    if D == 128:
        y = gl.permute(gl.reshape(x, [2, 2, 32, QN]), [2, 3, 0, 1])  # r n | a b (q = 2 a + b)
        y0, y1 = gl.split(y)
        x0, x2 = gl.split(y0)
        x1, x3 = gl.split(y1)
    else:
        x0, x1 = gl.split(gl.permute(gl.reshape(x, [2, 32, QN]), [1, 2, 0]))
        x2 = gl.zeros_like(x0)
        x3 = gl.zeros_like(x0)
    return (gl.convert_layout(x0, MMA), gl.convert_layout(x1, MMA), gl.convert_layout(x2, MMA),
            gl.convert_layout(x3, MMA))


@gluon.jit
def _groups_joined(x0, x1, x2, x3, D: gl.constexpr):
    """_group_parts undone."""
    QN: gl.constexpr = x0.shape[1]
    if D == 128:
        y = gl.join(gl.join(x0, x2), gl.join(x1, x3))  # r n | a b
        y = gl.reshape(gl.permute(y, [2, 3, 0, 1]), [D, QN])
    else:
        y = gl.reshape(gl.permute(gl.join(x0, x1), [2, 0, 1]), [D, QN])
    return gl.convert_layout(y, MMA)


@gluon.jit
def _scaled_weights(pt, s):
    """The weights pt [32, QN] (OPB) times one group's token scales s [32] (in pt's row order)."""
    return pt * gl.expand_dims(gl.convert_layout(s, gl.SliceLayout(1, OPB)), 1)


@gluon.jit
def _value_after(vbuf, vsbuf, vmbuf, st, pt, acc, am, BITS: gl.constexpr, D: gl.constexpr):
    """V_AFTER: a tile's value product from its codes alone. Each channel group's rows of acc
    take its codes (_value_codes) times the weights pt scaled by the group's token scales (the
    values' c·s, each row short of 2^(24 − BITS·k): _values_after_end); am's row q takes the
    weights times group q's token minimums (a product whose first operand is the minimums'
    rows, zero past the groups)."""
    SL: gl.constexpr = SVS if D == 128 else SVS64
    sc = _by_token_column(vsbuf.index(st).load(SL))  # [groups q, pt's rows]
    a0, a1, a2, a3 = _group_parts(acc, D)
    if D == 128:
        y0, y1 = gl.split(gl.reshape(gl.permute(sc, [1, 0]), [32, 2, 2]))  # k a | b
        s0, s2 = gl.split(y0)
        s1, s3 = gl.split(y1)
        a2 = gl.nvidia.ampere.mma_v2(_value_codes(vbuf, st, 2, BITS, D),
                                     _scaled_weights(pt, s2), a2)
        a3 = gl.nvidia.ampere.mma_v2(_value_codes(vbuf, st, 3, BITS, D),
                                     _scaled_weights(pt, s3), a3)
    else:
        s0, s1 = gl.split(gl.permute(sc, [1, 0]))
    a0 = gl.nvidia.ampere.mma_v2(_value_codes(vbuf, st, 0, BITS, D), _scaled_weights(pt, s0),
                                 a0)
    a1 = gl.nvidia.ampere.mma_v2(_value_codes(vbuf, st, 1, BITS, D), _scaled_weights(pt, s1),
                                 a1)
    mn = _by_token_column(vmbuf.index(st).load(SVM))  # [8 rows, the value columns]
    mn = gl.reshape(gl.permute(gl.join(mn, gl.zeros_like(mn)), [2, 0, 1]), [16, 32])
    am = gl.nvidia.ampere.mma_v2(gl.convert_layout(mn, OPA), pt, am)
    return _groups_joined(a0, a1, a2, a3, D), am


@gluon.jit
def _values_after_end(acc, am, BITS: gl.constexpr, D: gl.constexpr):
    """V_AFTER's partial output as the values' would be: each row times 2^(24 − BITS·k) (its
    codes' place k in a byte), plus its group's row of am."""
    r = gl.arange(0, D, layout=gl.SliceLayout(1, MMA))
    # kivi2's row 32 q + 16 k1 + 8 k0 + g holds code k0 + 2 k1, kivi4's 32 q + 16 i + 8 k + g k
    k = (r >> 3) & (8 // BITS - 1)
    acc = acc * gl.exp2((24 - BITS * k).to(gl.float32))[:, None]
    a0, a1, a2, a3 = _group_parts(acc, D)
    ra = gl.arange(0, 16, layout=gl.SliceLayout(1, MMA))
    a0 = a0 + gl.sum(gl.where((ra == 0)[:, None], am, 0.0), axis=0)[None, :]
    a1 = a1 + gl.sum(gl.where((ra == 1)[:, None], am, 0.0), axis=0)[None, :]
    if D == 128:
        a2 = a2 + gl.sum(gl.where((ra == 2)[:, None], am, 0.0), axis=0)[None, :]
        a3 = a3 + gl.sum(gl.where((ra == 3)[:, None], am, 0.0), axis=0)[None, :]
    return _groups_joined(a0, a1, a2, a3, D)


@gluon.jit
def _rescaled(acc, alpha, m_new, m_i, LAZY: gl.constexpr):
    """The partial output under the new running max (LAZY: only where it rose)."""
    if LAZY:
        if gl.max(m_new - m_i, axis=0) > 0:
            acc = acc * alpha[None, :]
    else:
        acc = acc * alpha[None, :]
    return acc


@gluon.jit
def _softmax(s, m_i, l_i, acc, LAZY: gl.constexpr):
    """The online softmax of a tile's scores s [32, 8]: (weights, max, sum, rescaled output)."""
    m_new, alpha = next_max(gl.max(s, axis=0), m_i, LAZY)
    p = gl.exp2(s - m_new[None, :])
    return p, m_new, l_i * alpha + gl.sum(p, axis=0), _rescaled(acc, alpha, m_new, m_i, LAZY)


@gluon.jit
def _softmax_m(s, m_i, l_i, acc, am, LAZY: gl.constexpr):
    """_softmax, V_AFTER's minimums' product am rescaled with the output."""
    m_new, alpha = next_max(gl.max(s, axis=0), m_i, LAZY)
    p = gl.exp2(s - m_new[None, :])
    if LAZY:
        if gl.max(m_new - m_i, axis=0) > 0:
            acc = acc * alpha[None, :]
            am = am * alpha[None, :]
    else:
        acc = acc * alpha[None, :]
        am = am * alpha[None, :]
    return p, m_new, l_i * alpha + gl.sum(p, axis=0), acc, am


@gluon.jit
def _softmax2(s0, s1, m_i, l_i, acc, LAZY: gl.constexpr):
    """_softmax over the scores of two halves of a tile, or of two tiles, [16 or 32, 8] each."""
    m_new, alpha = next_max(gl.max(gl.maximum(s0, s1), axis=0), m_i, LAZY)
    p0 = gl.exp2(s0 - m_new[None, :])
    p1 = gl.exp2(s1 - m_new[None, :])
    return (p0, p1, m_new, l_i * alpha + gl.sum(p0 + p1, axis=0),
            _rescaled(acc, alpha, m_new, m_i, LAZY))


@gluon.jit
def kivi2_swapped_kernel(Q, ACC, ML, KQ, KS, KM, VQ, VS, VM, KR, VR, NQ, NR, GT, stride_gt, RING,
                         n_splits, qk_scale, SPLIT, H: gl.constexpr, GROUP: gl.constexpr,
                         STAGES: gl.constexpr = 3, LAZY: gl.constexpr = True,
                         PDL: gl.constexpr = False, K_AFTER: gl.constexpr = False,
                         BITS: gl.constexpr = 2, PAIRS: gl.constexpr = False,
                         QN: gl.constexpr = 8, D: gl.constexpr = 128,
                         V_AFTER: gl.constexpr = False, K_SUB: gl.constexpr = False):
    """One (sequence, KV head, split) program over SPLIT tokens (a multiple of 32) of a kivi2
    cache, or with BITS 4 of a kivi4 one (its own row and column orders: key_token,
    value_channel; the kernel keeps the name of its first format), KiviCache's planes with
    128-lane heads and G = 32: partial output, running max and sum to ACC and ML as
    kivi_decode_kernel writes them (reduce_splits merges them). LAZY: the running output is
    rescaled only when a tile raises the max by more than 2⁸. PDL: launched as a programmatic
    dependent. K_AFTER: the keys' scales and minimums after the unpacking (_key_rows), not in
    it (kivi2 only). PAIRS: two groups a step (four stages, the next two copied while a step
    computes), one softmax over both. QN: the query rows' columns, 8 for up to 8 query heads a
    KV head, 16 for 9-16. D: the heads' lanes, 128 or 64. V_AFTER: the values' scales on the
    weights and their minimums in a product of their own (_value_after), not in the
    unpacking. K_SUB: the keys' likewise (_scores)."""
    gl.static_assert(BITS == 2 or not K_AFTER, "K_AFTER: kivi2 only")
    gl.static_assert(not PAIRS or (STAGES == 4 and not K_AFTER), "PAIRS: four stages")
    gl.static_assert(QN == 8 or not K_AFTER, "K_AFTER: 8 columns")
    gl.static_assert(D == 128 or (D == 64 and not K_AFTER), "heads of 128 or 64 lanes")
    gl.static_assert(not (V_AFTER and (PAIRS or K_AFTER)), "V_AFTER: one group a step")
    gl.static_assert(not (K_SUB and (PAIRS or K_AFTER)), "K_SUB: one group a step")
    b = gl.program_id(0)
    h = gl.program_id(1)
    sp = gl.program_id(2)
    if PDL:
        gl.inline_asm_elementwise("griddepcontrol.wait; // $0 $1", "=r,r", [sp],
                                  dtype=gl.int32, is_pure=False, pack=1)
        gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0 $1", "=r,r", [sp],
                                  dtype=gl.int32, is_pure=False, pack=1)
    nq = gl.load(NQ + b)
    n = nq + gl.load(NR + b)
    start = sp * SPLIT
    end = gl.minimum(start + SPLIT, n)
    qend = gl.minimum(end, nq)
    row0 = (b * H + h) * GROUP
    # the query rows as the score product's second operand [D, QN], in key_channel's order
    QL: gl.constexpr = gl.BlockedLayout([4, 1], [4, 8], [1, 1], [0, 1])
    kk = gl.arange(0, D, layout=gl.SliceLayout(1, QL))
    qi = gl.arange(0, QN, layout=gl.SliceLayout(0, QL))
    qv = gl.load(Q + (row0 + qi)[None, :] * D + key_channel(kk, D)[:, None],
                 mask=(qi < GROUP)[None, :],
                 other=0.0).to(gl.float32)
    qb = gl.convert_layout((qv * qk_scale).to(gl.float16), OPB)
    if D == 128:
        kbuf = gl.allocate_shared_memory(gl.uint8, [STAGES, 4 * BITS, D], SHK)
    else:  # 64-byte rows: the lanes' 16-byte reads fall in different banks as they lie
        kbuf = gl.allocate_shared_memory(gl.uint8, [STAGES, 4 * BITS, D], SH2)
    ksbuf = gl.allocate_shared_memory(gl.float16, [STAGES, D], SH1)
    kmbuf = gl.allocate_shared_memory(gl.float16, [STAGES, D], SH1)
    vbuf = gl.allocate_shared_memory(gl.uint8, [STAGES, D * BITS // 8, 32], SH2)
    vsbuf = gl.allocate_shared_memory(gl.float16, [STAGES, D // 32, 32], SH2)
    if V_AFTER:  # 8 rows, those past the groups zero (the minimums' product's first operand)
        vmbuf = gl.allocate_shared_memory(gl.float16, [STAGES, 8, 32], SH2)
        for i in gl.static_range(STAGES):
            vmbuf.index(i).store(gl.zeros([8, 32], gl.float16, layout=SVM))
        BARRIER()
    else:
        vmbuf = gl.allocate_shared_memory(gl.float16, [STAGES, D // 32, 32], SH2)
    gt0 = b * stride_gt
    AHEAD: gl.constexpr = 2 if PAIRS else STAGES - 1  # groups copied before the loop
    for i in gl.static_range(AHEAD):
        _issue(kbuf, ksbuf, kmbuf, vbuf, vsbuf, vmbuf, i, KQ, KS, KM, VQ, VS, VM, GT, gt0, h,
               start + i * 32, qend, H, BITS, D)
    m_i = gl.full([QN], float("-inf"), gl.float32, layout=gl.SliceLayout(0, MMA))
    l_i = gl.zeros([QN], gl.float32, layout=gl.SliceLayout(0, MMA))
    acc = gl.zeros([D, QN], gl.float32, layout=MMA)
    am = gl.zeros([16, QN], gl.float32, layout=MMA)  # V_AFTER's minimums' product
    it = 0
    if PAIRS:
        for n0 in range(start, qend - 32, 64):  # both groups of the step quantized
            sa = (2 * it) % STAGES
            sb = (2 * it + 1) % STAGES
            BARRIER()  # every lane is done with the stages the next copies fill
            _issue(kbuf, ksbuf, kmbuf, vbuf, vsbuf, vmbuf, (sa + 2) % STAGES, KQ, KS, KM, VQ, VS,
                   VM, GT, gt0, h, n0 + 64, qend, H, BITS, D)
            _issue(kbuf, ksbuf, kmbuf, vbuf, vsbuf, vmbuf, (sa + 3) % STAGES, KQ, KS, KM, VQ, VS,
                   VM, GT, gt0, h, n0 + 96, qend, H, BITS, D)
            _cp.wait_group(2)
            BARRIER()
            s0 = gl.nvidia.ampere.mma_v2(_key_operand(kbuf, ksbuf, kmbuf, sa, BITS, D), qb,
                                         gl.zeros([32, QN], gl.float32, layout=MMA))
            s1 = gl.nvidia.ampere.mma_v2(_key_operand(kbuf, ksbuf, kmbuf, sb, BITS, D), qb,
                                         gl.zeros([32, QN], gl.float32, layout=MMA))
            p0, p1, m_i, l_i, acc = _softmax2(s0, s1, m_i, l_i, acc, LAZY)
            acc = gl.nvidia.ampere.mma_v2(_value_operand(vbuf, vsbuf, vmbuf, sa, BITS, D),
                                          _weights_operand(p0, BITS, QN), acc)
            acc = gl.nvidia.ampere.mma_v2(_value_operand(vbuf, vsbuf, vmbuf, sb, BITS, D),
                                          _weights_operand(p1, BITS, QN), acc)
            it += 1
        if start + 64 * it < qend:  # one group left
            _cp.wait_group(0)
            BARRIER()
            sa = (2 * it) % STAGES
            s = gl.nvidia.ampere.mma_v2(_key_operand(kbuf, ksbuf, kmbuf, sa, BITS, D), qb,
                                        gl.zeros([32, QN], gl.float32, layout=MMA))
            p, m_i, l_i, acc = _softmax(s, m_i, l_i, acc, LAZY)
            acc = gl.nvidia.ampere.mma_v2(_value_operand(vbuf, vsbuf, vmbuf, sa, BITS, D),
                                          _weights_operand(p, BITS, QN), acc)
    for n0 in range(start, qend if not PAIRS else start, 32):
        st = it % STAGES
        BARRIER()  # every lane is done with the stage the next copy fills
        _issue(kbuf, ksbuf, kmbuf, vbuf, vsbuf, vmbuf, (it + STAGES - 1) % STAGES, KQ, KS, KM,
               VQ, VS, VM, GT, gt0, h, n0 + (STAGES - 1) * 32, qend, H, BITS, D)
        _cp.wait_group(STAGES - 1)
        BARRIER()
        if K_AFTER:
            ka, kb2, qs, c0, c1 = _key_rows(kbuf, ksbuf, kmbuf, st, qb)
            s0 = gl.nvidia.ampere.mma_v2(ka, qs, c0)
            s1 = gl.nvidia.ampere.mma_v2(kb2, qs, c1)
            p0, p1, m_i, l_i, acc = _softmax2(s0, s1, m_i, l_i, acc, LAZY)
            pt = _weights_after(p0, p1)
        elif V_AFTER:
            s = _scores(kbuf, ksbuf, kmbuf, st, qb, BITS, D, K_SUB)
            p, m_i, l_i, acc, am = _softmax_m(s, m_i, l_i, acc, am, LAZY)
            pt = _weights_operand(p, BITS, QN)
        else:
            s = _scores(kbuf, ksbuf, kmbuf, st, qb, BITS, D, K_SUB)
            p, m_i, l_i, acc = _softmax(s, m_i, l_i, acc, LAZY)
            pt = _weights_operand(p, BITS, QN)
        if V_AFTER:
            acc, am = _value_after(vbuf, vsbuf, vmbuf, st, pt, acc, am, BITS, D)
        else:
            acc = gl.nvidia.ampere.mma_v2(_value_operand(vbuf, vsbuf, vmbuf, st, BITS, D), pt,
                                          acc)
        it += 1  # noqa: SIM113 (a Gluon loop: no enumerate)
    _cp.wait_group(0)
    if V_AFTER:
        acc = _values_after_end(acc, am, BITS, D)
    # the residual ring: float16 rows, token i at ring row i mod RING, in the quantized
    # tiles' operand orders
    ring0 = (b * H + h).to(gl.int64) * RING
    if D == 128:
        RKL: gl.constexpr = RK
        if BITS == 2:
            RVL: gl.constexpr = RV
        else:
            RVL: gl.constexpr = RV4
    else:
        RKL: gl.constexpr = KL64
        if BITS == 2:
            RVL: gl.constexpr = RV64
        else:
            RVL: gl.constexpr = RV4_64
    kt = gl.arange(0, 32, layout=gl.SliceLayout(1, RKL))
    kc = gl.arange(0, D, layout=gl.SliceLayout(0, RKL))
    vt = gl.arange(0, 32, layout=gl.SliceLayout(1, RVL))
    vc = gl.arange(0, D, layout=gl.SliceLayout(0, RVL))
    stok = gl.arange(0, 32, layout=gl.SliceLayout(1, MMA))
    for n0 in range(gl.maximum(start, nq), end, 32):
        first = n0 % RING
        # keys: score row r is token n0 + key_token(r), as a quantized tile's
        ktok = key_token(kt, BITS)
        krow = _ring_rows(ring0, first, ktok, RING)
        kr = gl.load(KR + krow[:, None] * D + kc[None, :], mask=(n0 + ktok < end)[:, None],
                     other=0.0)
        kx = gl.reshape(kr, [4, 8, 4, D // 16, 2, 2])  # row | t J f e
        kx = gl.reshape(gl.permute(kx, [0, 1, 3, 4, 2, 5]), [32, D])  # row | J f t e
        s = gl.nvidia.ampere.mma_v2(gl.convert_layout(kx, OPA), qb,
                                    gl.zeros([32, QN], gl.float32, layout=MMA))
        s = gl.where((n0 + key_token(stok, BITS) < end)[:, None], s, float("-inf"))
        p, m_i, l_i, acc = _softmax(s, m_i, l_i, acc, LAZY)
        vrow = _ring_rows(ring0, first, vt, RING)
        vr = gl.load(VR + vrow[:, None] * D + vc[None, :], mask=(n0 + vt < end)[:, None],
                     other=0.0)
        # [tok, ch] → rows in value_channel's order, columns in the quantized tiles' token
        # order
        if BITS == 2:  # row 32 q + 16 k1 + 8 k0 + g: channel 32 q + 4 g + 2 k1 + k0
            vx = gl.reshape(vr, [4, 2, 2, 2, D // 32, 8, 2, 2])  # t κ f e | q g k1 k0
            vx = gl.permute(vx, [4, 6, 7, 5, 1, 2, 0, 3])  # q k1 k0 g | κ f t e
        else:  # row 32 q + 16 i + 8 k + g: channel 32 q + 16 i + 2 g + k
            vx = gl.reshape(vr, [4, 2, 2, 2, D // 32, 2, 8, 2])  # t κ f e | q i g k
            vx = gl.permute(vx, [4, 5, 7, 6, 1, 2, 0, 3])  # q i k g | κ f t e
        acc = gl.nvidia.ampere.mma_v2(gl.convert_layout(gl.reshape(vx, [D, 32]), OPA),
                                      _weights_operand(p, BITS, QN), acc)
    oc = gl.arange(0, D, layout=gl.SliceLayout(1, MMA))
    oi = gl.arange(0, QN, layout=gl.SliceLayout(0, MMA))
    dcol = value_channel(oc, BITS)
    base = ((b * H + h) * GROUP + oi).to(gl.int64) * n_splits + sp
    om = (oi < GROUP)[None, :]
    gl.store(ACC + base[None, :] * D + dcol[:, None], acc, mask=om)
    gl.store(ML + base * 2, m_i, mask=oi < GROUP)
    gl.store(ML + base * 2 + 1, l_i, mask=oi < GROUP)


class Launch(NamedTuple):
    """How decode launches the kernel for a head shape (launch_for)."""

    per_sm: int  # programs a multiprocessor
    registers: int  # the cap of registers a thread
    qn: int  # query columns QN
    v_after: bool  # V_AFTER
    k_sub: bool  # K_SUB

    def forms(self, k_after: bool = False, pairs: bool = False) -> dict[str, bool]:
        """The kernel's V_AFTER and K_SUB for this launch: none beside K_AFTER or PAIRS, which
        they cannot join (the kernel's defaults, off, stand)."""
        if k_after or pairs:
            return {}
        return {"V_AFTER": self.v_after, "K_SUB": self.k_sub}


def launch_for(group: int, lanes: int = 128, bits: int = 2) -> Launch:
    """The launch of the kernel for ``group`` query heads a KV head on heads of ``lanes`` (128
    or 64) in kivi``bits``: 8 columns up to 8, else the 16-column form's launch; V_AFTER in
    every form, each timed faster with it (gluon-kivi*-vafter-h200.json, -group16-vafter,
    -lanes64-vafter); K_SUB where it was timed faster, kivi2's 8 columns on 128 or 64 lanes
    (gluon-kivi2-ksub-h200.json, gluon-kivi2-lanes64-ksub-h200.json; kivi4 within 1.5% either
    way, gluon-kivi4-ksub-h200.json; the 16-column form 1-2% slower,
    gluon-kivi2-group16-ksub-h200.json)."""
    if lanes not in (64, 128):
        raise ValueError(f"heads of 128 or 64 lanes, not {lanes}")
    if group > 8:
        return Launch(KIVI_GLUON_PER_SM_16, KIVI_GLUON_REGISTERS_16, 16, True, False)
    return Launch(KIVI_GLUON_PER_SM, KIVI_GLUON_REGISTERS, 8, True, bits == 2)


def decode_kivi_gluon(cache: Any, q: Any, out: Any, per_sm: int | None = None,
                      max_registers: int | None = None, pdl: bool = False,
                      split_tokens: int | None = None, lazy: bool = True,
                      **consts: Any) -> Any:
    """One decode step of q [B, Hq, D] over ``cache`` (a kivi2 or kivi4 KiviCache) into
    ``out`` [B, Hq, D] float32 (KiviCache._takes_gluon says where it applies):
    kivi2_swapped_kernel over one wave of ``per_sm`` programs a
    multiprocessor (or splits of ``split_tokens``), then reduce_splits; ``per_sm``,
    ``max_registers``, V_AFTER and K_SUB (unless K_AFTER or PAIRS is asked) by default
    launch_for's. ``lazy``: the kernel's LAZY; ``consts`` go to the kernel (STAGES, K_AFTER,
    PAIRS, V_AFTER, K_SUB)."""
    import torch

    from .cache import LOG2E
    from .triton_ops import reduce_splits

    seqs, hq, d = q.shape
    group = hq // cache.heads
    launch = launch_for(group, d, cache.bits)
    for name, on in launch.forms(consts.get("K_AFTER", False),
                                 consts.get("PAIRS", False)).items():
        consts.setdefault(name, on)
    if per_sm is None:
        per_sm = launch.per_sm
    if max_registers is None:
        max_registers = launch.registers
    total = max(a + b for a, b in zip(cache.n_quant, cache.n_resid, strict=True))
    if split_tokens is None:
        split, n_splits = tiled_splits(total, wave_splits(seqs * cache.heads, per_sm))
    else:
        split = max(32, -(-split_tokens // 32) * 32)
        n_splits = max(1, -(-total // split))
    acc = torch.empty(seqs * hq * n_splits * d, dtype=torch.float32, device=q.device)
    ml = torch.empty(seqs * hq * n_splits * 2, dtype=torch.float32, device=q.device)
    nq, nr = cache.device_lengths(q.device)
    kivi2_swapped_kernel[(seqs, cache.heads, n_splits)](
        q.contiguous(), acc, ml, cache.kq, cache.ks, cache.km, cache.vq, cache.vs, cache.vm,
        cache.kr, cache.vr, nq, nr, cache.group_table, cache.group_table.stride(0), cache.ring,
        n_splits, LOG2E / math.sqrt(d), split, H=cache.heads, GROUP=group, LAZY=bool(lazy),
        BITS=cache.bits, QN=launch.qn, D=d, num_warps=1,
        **consts, **({"PDL": True, "launch_pdl": True} if pdl else {}),
        **({"maxnreg": max_registers} if max_registers else {}))
    reduce_splits(acc, ml, out, n_splits, seqs, cache.heads, group, d, pdl=pdl)
    return out
