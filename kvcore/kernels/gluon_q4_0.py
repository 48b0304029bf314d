"""q4_0 decode attention by a split kernel that states its layouts (Triton's Gluon dialect),
for K and V in q4_0 (or both in q8_0, nvfp4, tbq4 or tbq3: the compile-time format code FMT),
heads of 128 lanes, groups of at most 16 query heads and pages of a multiple of 32 tokens, on
an sm_80+ GPU.

Tiles of 32 tokens are copied into shared memory two ahead (cp.async), each tile's page found
by a cursor moved a tile at a time (no division in the loop). The products are swapped
(the cache tile the first operand, the query rows the narrow second one), so that the partial
output [128, 8 or 16] stays in 168 registers. Two forms of each side:

- AFTER (K_AFTER, V_AFTER; decode's for groups of up to 8): PTX unpacks each code to 1024 + n
  (low nibbles) or 64 + n (high) with one lop3 a pair, and the −8 offset and the block scale
  come after the tensor-core products. Keys: each block is a product of its own, whose initial
  accumulator is −(the offsets times the query block's sums), and its scale multiplies the
  block's scores. Values: the weights times a block's scales are that block's second operand,
  and a second product by a constant operand subtracts the offsets. The words reach the
  operands' registers by matrix loads (ldmatrix, transposed for the values: a token pair a
  register). About 16 instructions a cached token (compiled for sm_90; 18.5 before the page
  cursor and the sums by place).
- q8_0: the AFTER forms for K and V in q8_0 (each byte, offset by 128, the low mantissa byte
  of 1024: 1152 + b, one prmt a pair; a block's halves take the nibbles' places), decode's for
  q8_0 with groups of up to 8. Decode launches it with PIPE: each tile's scores are computed
  beside the softmax and value product of the tile before, in three stages. q4_0 takes PIPE
  too where decode runs 8 programs a multiprocessor, its registers capped at 232, its running
  sums kept by place (SUM_LANES); over 64 (sequence, KV head) rows and more q4_0 takes PAIRS
  instead: two whole tiles a step, one softmax over both, in four stages.
- Scaled as unpacked (the 16-column form, which the AFTER forms make spill): each lane loads
  whole q4_0 blocks, and PTX applies the offset and the scale in float16 as it unpacks them
  straight into the operands' registers (about 26 instructions a token); decode's for groups
  of 9-16 in q4_0 (and the other formats' 16-column forms), 8 programs a multiprocessor past
  cache.GLUON_LEAST_WORK_16.
- nvfp4: the scaled forms for K and V in nvfp4 (whose 16-value blocks no 16-column product's
  columns share), decode's for nvfp4 with groups of up to 8, with PIPE: e2m1 codes become
  float16 by byte, times their block's e4m3 scale (FP4_K_ASM, FP4_V_ASM); the global scales go
  to the query and to the output.
- tbq4: the same forms for K and V in tbq4, unscaled: the centroids looked up from byte tables
  (TBQ4_K_ASM, TBQ4_V_ASM), each token's norm on its scores and its weights, the query rotated
  before the kernel and the output after the merge; decode's for tbq4 with groups of up to 8.
- tbq3: its own form: each row's 48 bytes copied as four groups of three words, the 3-bit
  codes gathered into byte-permute selectors (_nibble_lines) and looked up in the centroids'
  byte tables (TBQ3_K_ASM, TBQ3_V_ASM), the norms, rotations and merge as tbq4's (the query in
  the keys' column order, tbq3_query_order); decode's for tbq3 with groups of up to 8.

The operands' head-dimension orders are the ones the nibbles fall into: the query is gathered
and the output stored in those orders. bench/results/gluon-q4_0-after-h200.json and
gluon-q4_0-swapped-h200.json measured the forms; docs/KERNELS.md says how they work.

Gluon has no interpreter: CI compiles this kernel for sm_90 (tests/kernels/test_gluon.py), and
bench/probes/gluon_q4_0.py checks its output on a GPU against LayerCache.decode_ref.
"""

from __future__ import annotations

import math
from typing import Any

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as _cp

from .cache import tiled_splits, wave_splits
from .triton_ops import (
    _nvfp4_asm,
    _q4_0_asm,
    _tbq4_asm,
    e2m1_high_bytes,
    tbq3_tables,
    tbq4_tables,
)

#: the cp.async copy: ``async_copy_global_to_shared`` in triton 3.6, ``async_load`` by 3.9
ASYNC_LOAD = getattr(_cp, "async_load", None) or _cp.async_copy_global_to_shared
#: the barrier of a program's threads: ``thread_barrier`` in triton 3.6, ``barrier`` by 3.9
BARRIER = getattr(gl, "thread_barrier", None) or gl.barrier
#: whether a shared-memory view's other type is ``reinterpret`` (by 3.9) or ``_reinterpret``
REINTERPRET = gl.constexpr(hasattr(gl.shared_memory_descriptor, "reinterpret"))
#: q4_0's PIPE form where at most this many programs a multiprocessor run (decode's 8 over short
#: splits, two a scheduler), its registers capped at Q4_PIPE_REGISTERS: 204 under triton 3.6,
#: no spill, and 8 reside at up to 256. At 12 a multiprocessor it had to fit 168 and spilled
#: (gluon-q4_0-pipe-h200.json: slower); at 8, 4–6% faster at every shape that takes 8
#: (q4_0-pipe8-h200.json, three rounds in turns: B=1 128k 45.8–46.6 → 44.1–44.4 µs, B=1 64k
#: 26.3–26.6 → 25.1–25.3, B=4 32k 46.5–46.7 → 44.7–45.0, B=2 32k 26.6–26.8 → 25.1–25.2), the
#: outputs the same to the bit.
Q4_PIPE_PER_SM = 8
Q4_PIPE_REGISTERS = 232
#: q4_0 over at least this many (sequence, KV head) rows takes the PAIRS form (two whole tiles a
#: step, one softmax over both) in place of PIPE, at the same 8 a multiprocessor and cap (230
#: registers under triton 3.6, no spill): in three rounds in turns (gluon-pairs-h200.json) B=8
#: 128k 323.7–336.7 → 318.7–325.2 µs, B=8 32k 84.7–85.8 → 83.3–84.5, B=64 32k 648–694 →
#: 632–673; over fewer rows level or slower (B=1 128k 42.9–44.2 against 43.4–43.9, B=4 32k
#: 44.1–44.3 against 44.6–44.8). At 12 a multiprocessor (168 registers) its four stages' 18.5
#: KiB a program do not fit 12 and it ran 1.3× slower.
Q4_PAIRS_ROWS = 64
#: nvfp4's 8-column form capped at the 168 registers of 12 programs a multiprocessor: 167
#: uncapped under triton 3.6, but 190 under 3.9's ptxas (166 capped, no spill there either);
#: its 16-column form (216 registers) is not capped
FP4_REGISTERS = 168
#: tbq4's 8-column form, at 8 programs a multiprocessor, capped at 232 (213 under triton 3.6):
#: capped at 168 it was 3-5% slower (gluon-tbq4-h200.json)
TBQ4_REGISTERS = 232
#: tbq3's 8-column form, capped likewise
TBQ3_REGISTERS = 232

MMA = gl.constexpr(gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[1, 1], instr_shape=[16, 8]))
OPA = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=MMA.value, k_width=2))
OPB = gl.constexpr(gl.DotOperandLayout(operand_index=1, parent=MMA.value, k_width=2))
# K bytes [32 tokens, 4 blocks, 16 bytes]: lane (g, t) holds tokens g, g+8, g+16, g+24, block t
KB = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 0, 1], [0, 0, 2], [0, 0, 4], [0, 0, 8], [8, 0, 0], [16, 0, 0]],
    lane_bases=[[0, 1, 0], [0, 2, 0], [1, 0, 0], [2, 0, 0], [4, 0, 0]], warp_bases=[],
    block_bases=[], shape=[32, 4, 16]))
# V bytes of the even (or odd) tokens [16 token pairs, 8 chunks, 8 bytes]: lane (g, t) holds pairs t, t+4
# (tokens 2t, 2t+8: lanes t0 t1 → pair bits 0,1), pair bits 2,3 in registers, bytes 8 g … 8 g + 7
VB = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 0, 1], [0, 0, 2], [0, 0, 4], [4, 0, 0], [8, 0, 0]],
    lane_bases=[[1, 0, 0], [2, 0, 0], [0, 1, 0], [0, 2, 0], [0, 4, 0]], warp_bases=[],
    block_bases=[], shape=[16, 8, 8]))

#: a q4_0 word's nibbles as float16 pairs of bytes (0, 2) and (1, 3): element i of four holds
#: byte [0, 2, 1, 3][i], which the query's gathered columns follow
K_ASM = gl.constexpr(_q4_0_asm(shifted=True))
#: the same nibbles as 1024 + n (low) and 64 + n (high) alone: the kernel's K_AFTER form
#: subtracts the offsets and applies the block scales after the product
K_RAW_ASM = gl.constexpr(_q4_0_asm(shifted=True, scaled=False))

# K_AFTER: K bytes [32 tokens, 64]: lane (g, t) holds word t (bytes 4t … 4t + 3) of each of the
# four blocks of tokens g, g+8, g+16, g+24, so that a product's 16 columns are one block's
KW = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [0, 16], [0, 32], [8, 0], [16, 0]],
    lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]], warp_bases=[],
    block_bases=[], shape=[32, 64]))
# its copies, 16 bytes a lane, into rows whose 16-byte blocks are xor'ed with bits 1-2 of the
# token, so that the word reads of the 32 lanes fall in 32 banks
KWC = gl.constexpr(gl.BlockedLayout([1, 16], [8, 4], [1, 1], [1, 0]))
SHK = gl.constexpr(gl.SwizzledSharedLayout(vec=16, per_phase=2, max_phase=4, order=[1, 0]))
# the K scales [32 tokens, 4 blocks] in the score accumulator's rows (lanes of a row alike)
KS4 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [8, 0], [16, 0]],
    lane_bases=[[0, 0], [0, 0], [1, 0], [2, 0], [4, 0]], warp_bases=[],
    block_bases=[], shape=[32, 4]))
# V_AFTER: V bytes as 16-bit words [32 tokens, 32]: lane (g, t) holds word g (bytes 2g, 2g + 1)
# of each block of the token pairs (2t, 2t + 1), +8, +16, +24, a pair in one register (the
# layout of a transposing matrix load)
VW = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[1, 0], [8, 0], [16, 0], [0, 8], [0, 16]],
    lane_bases=[[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]], warp_bases=[],
    block_bases=[], shape=[32, 32]))
VWC = gl.constexpr(gl.BlockedLayout([1, 8], [8, 4], [1, 1], [1, 0]))
SHV = gl.constexpr(gl.SwizzledSharedLayout(vec=8, per_phase=2, max_phase=4, order=[1, 0]))

# the V scales [32 tokens, 4 blocks] in the weight operand's token order (lanes of a token alike)
VS4 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [1, 0], [8, 0], [16, 0]],
    lane_bases=[[2, 0], [4, 0], [0, 0], [0, 0], [0, 0]], warp_bases=[],
    block_bases=[], shape=[32, 4]))
# Q8 (q8_0, AFTER forms): K bytes [32 tokens, 128]: lane (g, t) holds word t of each 16-byte
# chunk (half a block) of tokens g, g+8, g+16, g+24 (a matrix load)
KW8 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [0, 16], [0, 32], [0, 64], [8, 0], [16, 0]],
    lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]], warp_bases=[],
    block_bases=[], shape=[32, 128]))
KWC8 = gl.constexpr(gl.BlockedLayout([1, 16], [4, 8], [1, 1], [1, 0]))
# rows of 128 bytes: each 16-byte chunk xor'ed with the token's low 3 bits (8 rows, 32 banks)
SHK8 = gl.constexpr(gl.SwizzledSharedLayout(vec=16, per_phase=1, max_phase=8, order=[1, 0]))
# V as 16-bit words [32 tokens, 64]: lane (g, t) holds word g of each chunk of the token pairs
# (2t, 2t + 1), +8, +16, +24 (a transposing matrix load)
VW8 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[1, 0], [8, 0], [16, 0], [0, 8], [0, 16], [0, 32]],
    lane_bases=[[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]], warp_bases=[],
    block_bases=[], shape=[32, 64]))
VWC8 = gl.constexpr(gl.BlockedLayout([1, 8], [4, 8], [1, 1], [1, 0]))
SHV8 = gl.constexpr(gl.SwizzledSharedLayout(vec=8, per_phase=1, max_phase=8, order=[1, 0]))
#: four q8_0 bytes → float16 1152 + b, in order: the byte, offset by 128, is the low mantissa
#: byte of 1024 (Q8_0_ASM without its subtraction and scaling)
K8_RAW_ASM = gl.constexpr("""{
.reg .b32 x, t;
xor.b32 x, $2, 0x80808080;
mov.b32 t, 0x64646464;
prmt.b32 $0, x, t, 0x5140;
prmt.b32 $1, x, t, 0x7362;
}""")
#: a V word pair (two tokens' bytes 2g, 2g + 1) → the tokens' pairs of byte 2g ($0) and of
#: byte 2g + 1 ($1), as 1152 + b
V8_RAW_ASM = gl.constexpr("""{
.reg .b32 x, t;
xor.b32 x, $2, 0x80808080;
mov.b32 t, 0x64646464;
prmt.b32 $0, x, t, 0x5240;
prmt.b32 $1, x, t, 0x5341;
}""")
#: the offset of q8_0's raw codes
Q8_OFFSET = gl.constexpr(1152.0)
#: the offsets of the raw codes: 1024 + 8 (low nibbles), 64 + 8 (high)
LOW_OFFSET = gl.constexpr(1032.0)
HIGH_OFFSET = gl.constexpr(72.0)

# two tokens' four bytes a, b → (a_i, b_i) pairs: $0 $1 low nibbles of bytes 0, 1; $2 $3 of
# bytes 2, 3; $4 … $7 the high nibbles likewise. $8 a, $9 b, $10 $11 a's scale, $12 $13 b's
V_ASM = gl.constexpr("""{
.reg .b32 x, y, u, v, s, m, n;
prmt.b32 x, $8, $9, 0x5410;
prmt.b32 u, $8, $9, 0x7632;
shr.b32 y, x, 8;
shr.b32 v, u, 8;
prmt.b32 s, $10, $12, 0x5410;
mov.b32 m, 0x64086408;
mov.b32 n, 0x54805480;
lop3.b32 $0, x, 0x000F000F, 0x64006400, 0xea;
lop3.b32 $1, y, 0x000F000F, 0x64006400, 0xea;
lop3.b32 $2, u, 0x000F000F, 0x64006400, 0xea;
lop3.b32 $3, v, 0x000F000F, 0x64006400, 0xea;
lop3.b32 $4, x, 0x00F000F0, 0x54005400, 0xea;
lop3.b32 $5, y, 0x00F000F0, 0x54005400, 0xea;
lop3.b32 $6, u, 0x00F000F0, 0x54005400, 0xea;
lop3.b32 $7, v, 0x00F000F0, 0x54005400, 0xea;
sub.rn.f16x2 $0, $0, m;
sub.rn.f16x2 $1, $1, m;
sub.rn.f16x2 $2, $2, m;
sub.rn.f16x2 $3, $3, m;
sub.rn.f16x2 $4, $4, n;
sub.rn.f16x2 $5, $5, n;
sub.rn.f16x2 $6, $6, n;
sub.rn.f16x2 $7, $7, n;
mul.rn.f16x2 $0, $0, s;
mul.rn.f16x2 $1, $1, s;
mul.rn.f16x2 $2, $2, s;
mul.rn.f16x2 $3, $3, s;
mul.rn.f16x2 $4, $4, s;
mul.rn.f16x2 $5, $5, s;
mul.rn.f16x2 $6, $6, s;
mul.rn.f16x2 $7, $7, s;
}""")


# V's bytes [16 pairs, 4 blocks, 2, 8]: VB with a pair's 8-byte chunk g split as (g >> 1, g & 1)
VB4 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 0, 4], [4, 0, 0, 0], [8, 0, 0, 0]],
    lane_bases=[[1, 0, 0, 0], [2, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 2, 0, 0]],
    warp_bases=[], block_bases=[], shape=[16, 4, 2, 8]))
# copies: K's scales 8 bytes a token, V's bytes 8 at a time, V's scales 8 bytes a token
KSC = gl.constexpr(gl.BlockedLayout([1, 4], [32, 1], [1, 1], [1, 0]))
VC = gl.constexpr(gl.BlockedLayout([1, 1, 8], [2, 16, 1], [1, 1, 1], [2, 1, 0]))
VSC = gl.constexpr(gl.BlockedLayout([1, 4], [16, 2], [1, 1], [1, 0]))  # 8 bytes a pair
# unswizzled: each read below takes the fewest wavefronts as it is
SH2 = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
SH3 = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[2, 1, 0]))

# FP4 (nvfp4 K and V, the scaled forms): a code's magnitude bits laid in float16's bits 9-11 and
# its sign in bit 15 read as its e2m1 value times 2⁻¹⁴ (codes 0 and 1 as subnormals), so each
# nibble becomes a float16 high byte within its byte of the word (the magnitude in bits 1-3,
# the sign in bit 7) and one permute lays two such bytes over zero low bytes; the block scale,
# e4m3 × 2⁷ in float16, brings the values to e2m1 × scale × 2⁻⁷ (exact in float16), and the
# global scale times 2⁷ goes to the query and to the output.
#: four nvfp4 bytes of one 16-value block and their scale pair ($5) → float16 pairs in K_ASM's
#: element order: $0 (byte 0, byte 2) and $1 (1, 3) of the low nibbles (values 2j), $2 $3 of the
#: high ones (values 2j + 1)
FP4_K_ASM = gl.constexpr(_nvfp4_asm(("0x2404", "0x3414"), ("$5", "$5")))
#: two tokens' four nvfp4 bytes a ($8), b ($9) of one block, a's scales ($10 $11) and b's ($12
#: $13) → V_ASM's outputs: the (a, b) pairs of bytes 0 … 3's low nibbles ($0 … $3), then of
#: their high nibbles ($4 … $7), times the tokens' scales
FP4_V_ASM = gl.constexpr("{\n" + "\n".join([
    ".reg .b32 x, u, sc, z, s, a, b, c, xl, xh, ul, uh;",
    "prmt.b32 x, $8, $9, 0x5410;", "prmt.b32 u, $8, $9, 0x7632;",
    "prmt.b32 sc, $10, $12, 0x5410;", "mov.b32 z, 0;",
    *e2m1_high_bytes("x", "xl", "xh"), *e2m1_high_bytes("u", "ul", "uh"),
    *(f"prmt.b32 ${k}, {y}, z, {sel};" for k, (y, sel) in enumerate(
        (y, sel) for y in ("xl", "ul", "xh", "uh") for sel in ("0x2404", "0x3414"))),
    *(f"mul.rn.f16x2 ${k}, ${k}, sc;" for k in range(8))]) + "\n}")
#: e4m3 block scales are taken times 2⁷ (FP4_K_ASM's note)
FP4_UNIT = gl.constexpr(128.0)


def _tbq4_pairs_asm() -> str:
    """PTX for two tokens' four tbq4 bytes a ($8), b ($9) → V_ASM's outputs, the centroids
    alone (the norms go to the weights): the (a, b) pairs of bytes 0 … 3's low nibbles ($0 …
    $3), then of their high nibbles ($4 … $7). The words are interleaved by byte pairs, each
    half's four codes looked up as _tbq4_asm looks them up (magnitude from two byte tables, the
    sign from bit 3), the values paired per token, then the two tokens' pairs interleaved. The
    byte tables (tbq4_tables) are operands $10, $14, $18, $22 (each packed four times), loaded
    by the kernel: as constants in the text, each lookup copied them into registers anew."""
    a0, a1, b0, b1 = "$10", "$14", "$18", "$22"
    body = [".reg .b32 w, f, m, mh, l0, h0, l1, h1, n0, n1, s0, s1, p, q, r, t;"]
    for sel, lo, hi in (("0x5410", ("$0", "$1"), ("$4", "$5")),
                        ("0x7632", ("$2", "$3"), ("$6", "$7"))):
        body += [
            f"prmt.b32 w, $8, $9, {sel};",  # bytes k, k + 1 of a, then of b
            "shr.b32 f, w, 3;", "lop3.b32 f, f, 0x11111111, 0, 0x0c;", "mul.lo.u32 f, f, 7;",
            "lop3.b32 m, w, f, 0x77777777, 0x28;", "shr.b32 mh, m, 16;",
            f"prmt.b32 l0, {a0}, {a1}, m;", f"prmt.b32 h0, {b0}, {b1}, m;",
            f"prmt.b32 l1, {a0}, {a1}, mh;", f"prmt.b32 h1, {b0}, {b1}, mh;",
            "or.b32 n0, h0, 0x80808080;", "or.b32 n1, h1, 0x80808080;",
            "shr.b32 s0, w, 1;", "shr.b32 s1, w, 17;",
            "lop3.b32 s0, s0, 0x4444, 0x3210, 0xae;", "lop3.b32 s1, s1, 0x4444, 0x3210, 0xae;",
            "prmt.b32 h0, h0, n0, s0;", "prmt.b32 h1, h1, n1, s1;",
            # a's values (byte k low, high), (byte k + 1 low, high); b's likewise
            "prmt.b32 p, l0, h0, 0x5140;", "prmt.b32 q, l0, h0, 0x7362;",
            "prmt.b32 r, l1, h1, 0x5140;", "prmt.b32 t, l1, h1, 0x7362;",
            f"prmt.b32 {lo[0]}, p, r, 0x5410;", f"prmt.b32 {hi[0]}, p, r, 0x7632;",
            f"prmt.b32 {lo[1]}, q, t, 0x5410;", f"prmt.b32 {hi[1]}, q, t, 0x7632;"]
    return "{\n" + "\n".join(body) + "\n}"


def _nibble_lines(dst: str, picks: list[tuple[str, int, int]]) -> list[str]:
    """PTX lines that gather 3-bit codes into the nibbles of ``dst`` (bits 0-2 of each, bit 3
    clear, as prmt selectors): ``picks`` (register, bit, nibble) puts the code at bits
    bit … bit + 2 of the register into that nibble. The codes of one register at one shift
    (bit − 4 · nibble) take one shift and one masked merge together (the caller declares t)."""
    groups: dict[tuple[str, int], int] = {}
    for reg, bit, nib in picks:
        groups[reg, bit - 4 * nib] = groups.get((reg, bit - 4 * nib), 0) | 7 << 4 * nib
    lines: list[str] = []
    for n, ((reg, shift), mask) in enumerate(sorted(groups.items(), key=lambda g: g[0][1] != 0)):
        src = reg
        if shift:
            lines.append(f"{'shr' if shift > 0 else 'shl'}.b32 t, {reg}, {abs(shift)};")
            src = "t"
        # the first: the masked bits alone; then dst | (src & mask)
        lines.append(f"and.b32 {dst}, {src}, {mask:#x};" if n == 0
                     else f"lop3.b32 {dst}, {dst}, {src}, {mask:#x}, 0xf8;")
    return lines


#: the codes of a tbq3 group of 32 (three words, code k at bits 3k … 3k + 2) gathered into four
#: selectors of 8 nibbles, the code each nibble holds: three from 32-bit windows at bits 0, 30
#: and 60 (ten codes each, eight of them in three shifts: k, k + 4 and k + 8 share one), the
#: fourth the eight left, each from the word that holds it whole (_tbq3_k_picks)
TBQ3_K_CODES = ([0, 1, 2, 4, 5, 6, 8, 9], [10, 11, 12, 14, 15, 16, 18, 19],
                [20, 21, 22, 24, 25, 26, 28, 29], [3, 23, 13, 7, 27, 17, 30, 31])


def _tbq3_k_picks(q: int) -> list[tuple[str, int, int]]:
    """Selector q's (register, bit, nibble) picks (_nibble_lines) of TBQ3_K_CODES[q]: the
    windows at bits 0, 30 and 60 ($16, f30, f60) for the first three, the group's words ($16,
    $17, $19) for the fourth."""
    codes = TBQ3_K_CODES[q]
    if q < 3:
        return [(("$16", "f30", "f60")[q], 3 * k - 30 * q, n) for n, k in enumerate(codes)]
    assert all(3 * k % 32 <= 29 for k in codes), "a code of the fourth selector straddles words"
    return [(("$16", "$17", "$19")[3 * k // 32], 3 * k % 32, n) for n, k in enumerate(codes)]


def _tbq3_k_asm() -> str:
    """PTX for one token's tbq3 group of 32 codes (words $16, $17, $19; $18 a copy of $17) and
    the byte tables (tbq3_tables: $20, $24, $28, $32, each operand packed four times) → 16
    float16 pairs of centroids, $0 … $15: register 4 q + 2 u + v holds the codes of nibbles
    4 u + 2 v and 4 u + 2 v + 1 of selector q (TBQ3_K_CODES). Each half selector's four codes
    are looked up in the low-byte and the high-byte tables (one prmt each) and the bytes
    paired by two more. The tables come as operands, loaded by the kernel: as constants in
    the text, each lookup copied them into registers anew."""
    a0, a1, b0, b1 = "$20", "$24", "$28", "$32"
    body = [".reg .b32 t, s, u, l, h, f30, f60;",
            "shf.r.clamp.b32 f30, $16, $17, 30;", "shf.r.clamp.b32 f60, $17, $19, 28;"]
    for q in range(4):
        body += _nibble_lines("s", _tbq3_k_picks(q))
        for u, sel in ((0, "s"), (1, "u")):
            if u:
                body.append("shr.b32 u, s, 16;")
            body += [f"prmt.b32 l, {a0}, {a1}, {sel};", f"prmt.b32 h, {b0}, {b1}, {sel};",
                     f"prmt.b32 ${4 * q + 2 * u}, l, h, 0x5140;",
                     f"prmt.b32 ${4 * q + 2 * u + 1}, l, h, 0x7362;"]
    return "{\n" + "\n".join(body) + "\n}"


#: a token's 16 codes of a value window (bits 0-47 of lo, hi): the first selector's eight codes
#: in three shifts of lo, the second's eight from lo and the window at bit 30
TBQ3_V_CODES = ([0, 1, 2, 4, 5, 6, 8, 9], [10, 11, 3, 14, 15, 7, 12, 13])


def _tbq3_v_asm() -> str:
    """PTX for two tokens' tbq3 value windows → 16 float16 pairs (token a's centroid, token
    b's), $κ for code κ of the window. Each token's two words ($16 $17: a; $18 $19: b) hold
    its window at bit $20 (0 or 16: a lane's half of the group): 48 bits, 16 codes; the byte
    tables are $24, $28, $32, $36 (as _tbq3_k_asm's, each operand packed four times). Each
    token's codes are gathered into two selectors (TBQ3_V_CODES) and looked up by halves; the
    two tokens' bytes are then paired, low bytes with low bytes, high with high, and each
    code's (low, high) bytes of a and of b joined."""
    a0, a1, b0, b1 = "$24", "$28", "$32", "$36"
    body = [".reg .b32 t, s, u, l0, h0, l1, h1, x, y, lo, hi, f30;",
            ".reg .b32 sa0, sa1, sb0, sb1;"]
    sels = {}
    for tok, (w0, w1) in (("a", ("$16", "$17")), ("b", ("$18", "$19"))):
        body += [f"shf.r.clamp.b32 lo, {w0}, {w1}, $20;", f"shr.b32 hi, {w1}, $20;",
                 "shf.r.clamp.b32 f30, lo, hi, 30;"]
        for q, codes in enumerate(TBQ3_V_CODES):
            picks = [("lo", 3 * k, n) if 3 * k + 3 <= 32 else ("f30", 3 * k - 30, n)
                     for n, k in enumerate(codes)]
            body += _nibble_lines(f"s{tok}{q}", picks)
            sels[tok, q] = f"s{tok}{q}"
    for q, codes in enumerate(TBQ3_V_CODES):
        for u in (0, 1):
            sa, sb = sels["a", q], sels["b", q]
            if u:
                body += [f"shr.b32 {sa}, {sa}, 16;", f"shr.b32 {sb}, {sb}, 16;"]
            body += [f"prmt.b32 l0, {a0}, {a1}, {sa};", f"prmt.b32 h0, {b0}, {b1}, {sa};",
                     f"prmt.b32 l1, {a0}, {a1}, {sb};", f"prmt.b32 h1, {b0}, {b1}, {sb};"]
            for half, sel in ((0, "0x5140"), (1, "0x7362")):
                # x: (a, b) low bytes of two codes, y: their high bytes → (a, b) pairs
                body += [f"prmt.b32 x, l0, l1, {sel};", f"prmt.b32 y, h0, h1, {sel};"]
                k0 = codes[4 * u + 2 * half]
                k1 = codes[4 * u + 2 * half + 1]
                body += [f"prmt.b32 ${k0}, x, y, 0x5140;", f"prmt.b32 ${k1}, x, y, 0x7362;"]
    return "{\n" + "\n".join(body) + "\n}"


def tbq3_query_order() -> list[int]:
    """The (rotated) head dimension of each column k of the tbq3 form's key operand
    (_k3_rows: k = 16 p + 8 j1 + 2 t + j0 holds half j0 of TBQ3_K_ASM's register 2 p + j1 of
    lane t's group): the order decode rotates the query into."""
    out = []
    for k in range(128):
        reg, t, half = 2 * (k >> 4) + ((k >> 3) & 1), (k >> 1) & 3, k & 1
        out.append(32 * t + TBQ3_K_CODES[reg >> 2][4 * ((reg >> 1) & 1) + 2 * (reg & 1) + half])
    return out


#: what decode passes each step, made once: tbq3's query order and the rotated forms' byte tables
TBQ3_QUERY_ORDER = tuple(tbq3_query_order())
BYTE_TABLES = {"tbq3": tbq3_tables(), "tbq4": tbq4_tables()}


# TBQ4 (tbq4 K and V, the scaled forms without scales: a row's norm multiplies its scores and
# its weights)
#: four tbq4 bytes → their low nibbles' centroids ($0 $1, bytes 0 … 3 in order) and their high
#: nibbles' ($2 $3); the byte tables (tbq4_tables) operands $5, $9, $13, $17, loaded by the
#: kernel (each packed four times)
TBQ4_K_ASM = gl.constexpr(_tbq4_asm(1, scaled=False, tables=("$5", "$9", "$13", "$17")))
#: two tokens' bytes → the pairs of their centroids (_tbq4_pairs_asm)
TBQ4_V_ASM = gl.constexpr(_tbq4_pairs_asm())
# TBQ3 (tbq3 K and V, unscaled as TBQ4): a row's 12 words in four groups of three (32 codes
# each), copied into 16 words: group m's w0, w1, w1, w2 at words 4 m … 4 m + 3
#: a token's group (w0, w1, w1, w2) → its 32 centroids as 16 float16 pairs (_tbq3_k_asm)
TBQ3_K_ASM = gl.constexpr(_tbq3_k_asm())
#: two tokens' value windows → the (a, b) pairs of their 16 centroids (_tbq3_v_asm)
TBQ3_V_ASM = gl.constexpr(_tbq3_v_asm())
# their operands: 16 outputs; the keys' words and four tables, the values' words, window
# shifts and four tables, each packed four times
TBQ3_K_OPERANDS = gl.constexpr(",".join(["=r"] * 16 + ["r"] * 20))
# tbq4's: four outputs and a word (keys) or eight and two words (values), and four tables
TBQ4_K_OPERANDS = gl.constexpr(",".join(["=r"] * 4 + ["r"] * 17))
TBQ4_V_OPERANDS = gl.constexpr(",".join(["=r"] * 8 + ["r"] * 18))
TBQ3_V_OPERANDS = gl.constexpr(",".join(["=r"] * 16 + ["r"] * 24))
# the copies: 16 words a row, one word a copy
CT3 = gl.constexpr(gl.BlockedLayout([1, 4], [8, 4], [1, 1], [1, 0]))
# rows of 64 bytes, each 16-byte group xor'ed with bits 1-2 of the token: a key read (two
# rows of four groups a quarter warp) and a value read (four even or odd rows of two groups a
# half warp, two ways at most) take the fewest wavefronts
SHT3 = gl.constexpr(gl.SwizzledSharedLayout(vec=4, per_phase=2, max_phase=4, order=[1, 0]))
# keys [32 tokens, 16 words]: lane (g, t) holds group t (4 words) of tokens g, g+8, g+16, g+24
KT3 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [8, 0], [16, 0]],
    lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]], warp_bases=[],
    block_bases=[], shape=[32, 16]))
# values [32 tokens, 16 words]: lane (g, t) holds the two words of half g & 1 of group g >> 1
# (words 0, 1 of the group or words 2, 3: w0 w1 or w1 w2) of the token pairs (2t, 2t + 1),
# +8, +16, +24: a lane's 16 codes are the window of bits 48 (g & 1) … of its group
VT3 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [1, 0], [8, 0], [16, 0]],
    lane_bases=[[2, 0], [4, 0], [0, 2], [0, 4], [0, 8]], warp_bases=[],
    block_bases=[], shape=[32, 16]))
# a tile's 32 norms (float16) copied as 16 words (lanes 16-31 repeat lanes 0-15)
NC = gl.constexpr(gl.BlockedLayout([1], [32], [1], [0]))
NH = gl.constexpr(gl.BlockedLayout([2], [32], [1], [0]))
SH1 = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[0]))
# FP4: K bytes as KB with each span's 16 bytes split (8-byte block, byte): lane (g, t) holds
# the two blocks of span t
KB4 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 0, 4], [0, 0, 1, 0], [8, 0, 0, 0],
               [16, 0, 0, 0]],
    lane_bases=[[0, 1, 0, 0], [0, 2, 0, 0], [1, 0, 0, 0], [2, 0, 0, 0], [4, 0, 0, 0]],
    warp_bases=[], block_bases=[], shape=[32, 4, 2, 8]))
# FP4 copies: K's 8 scale bytes a token [32, 8]; V's [16 pairs, 8 blocks] of one parity
KSC4 = gl.constexpr(gl.BlockedLayout([1, 8], [32, 1], [1, 1], [1, 0]))
VSC8 = gl.constexpr(gl.BlockedLayout([1, 4], [16, 2], [1, 1], [1, 0]))


@gluon.jit
def _wide_copy(buf, st, P0, first, left, MASKED: gl.constexpr, LAYOUT: gl.constexpr,
               WIDTH: gl.constexpr):
    """The copy of a tile's 32 rows of WIDTH elements (the AFTER forms' codes) into ``buf``
    [STAGES, 32, WIDTH], 16 bytes a copy. Each lane's offsets are 64-bit from the start
    (_lane_offsets), so that its four copies share one address and their rows' distances are
    immediates."""
    tok = gl.arange(0, 32, layout=gl.SliceLayout(1, LAYOUT))
    ptr = (P0 + first * WIDTH) + _lane_offsets(
        tok, gl.arange(0, WIDTH, layout=gl.SliceLayout(0, LAYOUT)), WIDTH)
    if MASKED:
        ASYNC_LOAD(buf.index(st), ptr, mask=(tok < left)[:, None])
    else:
        ASYNC_LOAD(buf.index(st), ptr)


@gluon.jit
def _lane_offsets(tok, col, ROW: gl.constexpr):
    """[32, columns] offsets ``tok`` · ROW + ``col`` (``col`` [columns], or [chunks, bytes] for
    [32, chunks, bytes]), in 64 bits from the start: a lane's rows differ by constants then,
    which the compiler folds into its copies' addresses (in 32 bits each row's sum is widened
    on its own)."""
    if len(col.shape) == 2:
        offsets = tok.to(gl.int64)[:, None, None] * ROW + col.to(gl.int64)[None, :, :]
    else:
        offsets = tok.to(gl.int64)[:, None] * ROW + col.to(gl.int64)[None, :]
    return offsets


@gluon.jit
def _scales_copy(buf, st, P1, first, left, MASKED: gl.constexpr):
    """The copy of a tile's 32 rows of 4 block scales into ``buf`` [STAGES, 32, 4]."""
    stok = gl.arange(0, 32, layout=gl.SliceLayout(1, KSC))
    ptr = (P1 + first * 4 + stok[:, None] * 4
           + gl.arange(0, 4, layout=gl.SliceLayout(0, KSC))[None, :])
    if MASKED:
        ASYNC_LOAD(buf.index(st), ptr, mask=(stok < left)[:, None])
    else:
        ASYNC_LOAD(buf.index(st), ptr)


@gluon.jit
def _fp4_scales_copy(buf, st, P1, first, left, MASKED: gl.constexpr):
    """FP4: the copy of a tile's 32 rows of 8 nvfp4 block scales into ``buf`` [STAGES, 32, 8],
    8 bytes a lane."""
    stok = gl.arange(0, 32, layout=gl.SliceLayout(1, KSC4))
    ptr = (P1 + first * 8) + _lane_offsets(stok, gl.arange(0, 8, layout=gl.SliceLayout(0, KSC4)),
                                           8)
    if MASKED:
        ASYNC_LOAD(buf.index(st), ptr, mask=(stok < left)[:, None])
    else:
        ASYNC_LOAD(buf.index(st), ptr)


@gluon.jit
def _norms_copy(buf, st, P1, first, left, MASKED: gl.constexpr):
    """TBQ4: the copy of a tile's 32 row norms (float16) into ``buf`` [STAGES, 16] (words), a
    pair of norms a copy; MASKED (a split's last tile): loaded and stored, the norms past
    ``left`` zero (a copy of two norms cannot mask one), seen after the barrier before the
    tile is read."""
    row = P1 + gl.multiple_of(first, 32)  # a tile's first row: a multiple of 32
    if MASKED:
        tok = gl.arange(0, 32, layout=NH)
        _norms_view(buf, st).store(gl.load(row + tok, mask=tok < left, other=0.0))
    else:
        ASYNC_LOAD(buf.index(st),
                   row.to(gl.pointer_type(gl.int32)) + gl.arange(0, 16, layout=NC))


@gluon.jit
def _norms_view(buf, st):
    """TBQ4: stage ``st`` of a norms buffer (words) as its 32 float16 norms."""
    if REINTERPRET:
        view = buf.index(st).reinterpret(gl.float16, [32], SH1)
    else:
        view = buf.index(st)._reinterpret(gl.float16, [32], SH1)
    return view


@gluon.jit
def _byte_tables(TAB):
    """tbq4 and tbq3: the four words of their centroids' byte tables (tbq4_tables,
    tbq3_tables), loaded once a program."""
    return gl.load(TAB), gl.load(TAB + 1), gl.load(TAB + 2), gl.load(TAB + 3)


@gluon.jit
def _tbq3_copy(buf, st, P0, first, left, MASKED: gl.constexpr):
    """TBQ3: the copy of a tile's 32 rows of 12 words (48 bytes) into ``buf`` [STAGES, 32, 16]
    (words), group m's w0, w1, w1, w2 at words 4 m … 4 m + 3, a word a copy."""
    tok = gl.arange(0, 32, layout=gl.SliceLayout(1, CT3))
    c = gl.arange(0, 16, layout=gl.SliceLayout(0, CT3))
    word = 3 * (c >> 2) + (((c & 3) + 1) >> 1)
    ptr = (P0.to(gl.pointer_type(gl.int32)) + first * 12) + _lane_offsets(tok, word, 12)
    if MASKED:
        ASYNC_LOAD(buf.index(st), ptr, mask=(tok < left)[:, None])
    else:
        ASYNC_LOAD(buf.index(st), ptr)


@gluon.jit
def _copies(kbuf, ksbuf, vbuf, vsbuf, st, K0, K1, V0, V1, first, left, MASKED: gl.constexpr,
            K_AFTER: gl.constexpr, V_AFTER: gl.constexpr, FMT: gl.constexpr):
    """The copies of one tile whose rows start at ``first`` into stage ``st``; MASKED: only its
    first ``left`` tokens (the others zero-filled), else all 32. nvfp4: its scales (8 bytes a
    token) in place of q4_0's; tbq4: its norms (one a token); tbq3: its codes (_tbq3_copy) and
    norms."""
    if FMT == "tbq3":
        _tbq3_copy(kbuf, st, K0, first, left, MASKED)
        _norms_copy(ksbuf, st, K1, first, left, MASKED)
        _tbq3_copy(vbuf, st, V0, first, left, MASKED)
        _norms_copy(vsbuf, st, V1, first, left, MASKED)
    else:
        if K_AFTER and FMT == "q8_0":
            _wide_copy(kbuf, st, K0, first, left, MASKED, KWC8, 128)
        elif K_AFTER:
            _wide_copy(kbuf, st, K0, first, left, MASKED, KWC, 64)
        else:
            KC: gl.constexpr = gl.SliceLayout(0, KB)
            tok = gl.arange(0, 32, layout=gl.SliceLayout(1, gl.SliceLayout(2, KB)))
            col = (gl.arange(0, 4, layout=gl.SliceLayout(1, KC))[:, None] * 16
                   + gl.arange(0, 16, layout=gl.SliceLayout(0, KC))[None, :])
            kp = (K0 + first * 64) + _lane_offsets(tok, col, 64)
            if MASKED:
                ASYNC_LOAD(kbuf.index(st), kp, mask=(tok < left)[:, None, None])
            else:
                ASYNC_LOAD(kbuf.index(st), kp)
        if FMT == "nvfp4":
            _fp4_scales_copy(ksbuf, st, K1, first, left, MASKED)
        elif FMT == "tbq4":
            _norms_copy(ksbuf, st, K1, first, left, MASKED)
        else:
            _scales_copy(ksbuf, st, K1, first, left, MASKED)
        if V_AFTER:
            vw = V0.to(gl.pointer_type(gl.int16))
            if FMT == "q8_0":
                _wide_copy(vbuf, st, vw, first, left, MASKED, VWC8, 64)
            else:
                _wide_copy(vbuf, st, vw, first, left, MASKED, VWC, 32)
            _scales_copy(vsbuf, st, V1, first, left, MASKED)
        else:
            VL: gl.constexpr = gl.SliceLayout(0, VC)
            pair = gl.arange(0, 16, layout=gl.SliceLayout(1, gl.SliceLayout(2, VC)))
            chunk = gl.arange(0, 16, layout=gl.SliceLayout(1, VL))
            vcol = chunk[:, None] * 8 + gl.arange(0, 8, layout=gl.SliceLayout(0, VL))[None, :]
            vp = (V0 + first * 64) + _lane_offsets(pair, vcol, 128)
            if FMT == "tbq4":
                _norms_copy(vsbuf, st, V1, first, left, MASKED)
            elif FMT == "nvfp4":  # a pair's 16 scale bytes, 8 a token
                spair = gl.arange(0, 16, layout=gl.SliceLayout(1, VSC8))
                vsp = (V1 + first * 8) + _lane_offsets(
                    spair, gl.arange(0, 8, layout=gl.SliceLayout(0, VSC8)), 16)
                odd: gl.constexpr = 8
            else:
                spair = gl.arange(0, 16, layout=gl.SliceLayout(1, VSC))
                vblk = gl.arange(0, 4, layout=gl.SliceLayout(0, VSC))
                vsp = (V1 + first * 4) + _lane_offsets(spair, vblk, 8)
                odd: gl.constexpr = 4
            if MASKED:
                chunk2 = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(2, VC)))
                vtok = 2 * pair[:, None] + (chunk2 >> 3)[None, :]
                ASYNC_LOAD(vbuf.index(st), vp, mask=(vtok < left)[:, :, None])
                if FMT != "tbq4":
                    ASYNC_LOAD(vsbuf.index(2 * st), vsp, mask=(2 * spair < left)[:, None])
                    ASYNC_LOAD(vsbuf.index(2 * st + 1), vsp + odd,
                               mask=(2 * spair + 1 < left)[:, None])
            else:
                ASYNC_LOAD(vbuf.index(st), vp)
                if FMT != "tbq4":
                    ASYNC_LOAD(vsbuf.index(2 * st), vsp)
                    ASYNC_LOAD(vsbuf.index(2 * st + 1), vsp + odd)


@gluon.jit
def _cursor(BT, bt0, n0, end, PAGE):
    """The page cursor of the tile at token n0 (a split's first): the tile's page index in the
    block table, its first row within the page, the page and the block table's next page
    (each 0 past the end). _next_tile moves it a tile on with no division."""
    pg = n0 // PAGE
    page = gl.load(BT + bt0 + pg, mask=n0 < end, other=0)
    nxt = gl.load(BT + bt0 + pg + 1, mask=(pg + 1) * PAGE < end, other=0)
    return pg, n0 - pg * PAGE, page, nxt


@gluon.jit
def _next_tile(pg, off, page, nxt, BT, bt0, end, PAGE):
    """The cursor of the tile after (pg, off, page, nxt): within the page, or at the next one's
    first row (pages hold whole tiles: a multiple of 32 tokens), the page after that read from
    the block table then, a tile or more before it is needed."""
    off = off + 32
    wrap = off == PAGE
    pg = gl.where(wrap, pg + 1, pg)
    page = gl.where(wrap, nxt, page)
    nxt = gl.load(BT + bt0 + pg + 1, mask=wrap & ((pg + 1) * PAGE < end), other=nxt)
    return pg, gl.where(wrap, 0, off), page, nxt


@gluon.jit
def _issue(kbuf, ksbuf, vbuf, vsbuf, st, K0, K1, V0, V1, page, off, h, n0, end, PAGE,
           H_KV: gl.constexpr, K_AFTER: gl.constexpr, V_AFTER: gl.constexpr,
           FMT: gl.constexpr):
    """Start copying the tile of tokens n0 … n0 + 32, at row ``off`` of ``page``, into stage
    ``st`` of the buffers (a tile past the end copies nothing and zero-fills), as one commit
    group; a whole tile unmasked."""
    left = end - n0
    first = (page.to(gl.int64) * H_KV + h) * PAGE + off
    if left >= 32:
        _copies(kbuf, ksbuf, vbuf, vsbuf, st, K0, K1, V0, V1, first, left, False, K_AFTER,
                V_AFTER, FMT)
    else:
        _copies(kbuf, ksbuf, vbuf, vsbuf, st, K0, K1, V0, V1, first, left, True, K_AFTER,
                V_AFTER, FMT)
    _cp.commit_group()


@gluon.jit
def _advance(kbuf, ksbuf, vbuf, vsbuf, it, K0, K1, V0, V1, BT, bt0, cur, h, n0, end, PAGE,
             H_KV: gl.constexpr, K_AFTER: gl.constexpr, V_AFTER: gl.constexpr, FMT: gl.constexpr,
             STAGES: gl.constexpr,
             PENDING: gl.constexpr):
    """Iteration ``it`` (its tile at n0) of the loop: once every lane is done with the stage the
    next copy fills, start copying the tile STAGES − 1 ahead (at the page cursor ``cur``) into
    it, then wait until at most PENDING copies are still in flight and every lane sees the
    arrived ones; the cursor of the tile after."""
    pg, off, page, nxt = cur
    BARRIER()
    _issue(kbuf, ksbuf, vbuf, vsbuf, (it + STAGES - 1) % STAGES, K0, K1, V0, V1, page, off, h,
           n0 + (STAGES - 1) * 32, end, PAGE, H_KV, K_AFTER, V_AFTER, FMT)
    _cp.wait_group(PENDING)
    BARRIER()
    return _next_tile(pg, off, page, nxt, BT, bt0, end, PAGE)


@gluon.jit
def _v_scales(vsbuf, st, half: gl.constexpr, va):
    """The scales of the even (half 0) or odd (half 1) tokens' V bytes of stage ``st``,
    broadcast to va's shape and layout."""
    s4 = vsbuf.index(2 * st + half).load(gl.SliceLayout(2, gl.SliceLayout(3, VB4)))
    s4 = gl.expand_dims(gl.expand_dims(s4, 2), 3)
    s4 = gl.broadcast(s4, gl.reshape(va, [16, 4, 2, 8]))[0]
    return gl.convert_layout(gl.reshape(s4, [16, 8, 8]), VB, assert_trivial=True)


@gluon.jit
def _fp4_scales(raw):
    """FP4: e4m3 scale bytes → float16 scales times 2⁷ (FP4_UNIT)."""
    return raw.to(gl.float8e4nv, bitcast=True).to(gl.float16) * FP4_UNIT


@gluon.jit
def _fp4_v_scales(vsbuf, st, half: gl.constexpr, va):
    """FP4: the scales of the even (half 0) or odd (half 1) tokens' V bytes of stage ``st``
    (chunk g of a token is its block g), broadcast to va's shape and layout."""
    s8 = _fp4_scales(vsbuf.index(2 * st + half).load(gl.SliceLayout(2, VB)))
    return gl.broadcast(gl.expand_dims(s8, 2), va)[0]


@gluon.jit
def _fp4_k_scales(ksbuf, st, kb):
    """FP4: the K scales of stage ``st`` (each lane's two blocks of a 16-byte span), broadcast
    to kb's shape and layout (KB)."""
    s = _fp4_scales(ksbuf.index(st).reshape([32, 4, 2]).load(gl.SliceLayout(3, KB4)))
    s = gl.broadcast(gl.expand_dims(s, 3), gl.reshape(kb, [32, 4, 2, 8]))[0]
    return gl.convert_layout(gl.reshape(s, [32, 4, 16]), KB, assert_trivial=True)


@gluon.jit
def _k_rows(x):
    """A K half [32 tokens, 4 blocks, 16] (K_ASM's element order) → the first operand [32, 64]
    of the swapped score product: the same registers relabelled, column
    k = r0 + 2 blk0 + 4 blk1 + 8 r1 + 16 r2 + 32 r3 (r = K_ASM's element index in a block), the
    head dimension the query's gathered column k holds."""
    x = gl.reshape(x, [32, 2, 2, 2, 2, 2, 2])  # tok, blk1, blk0, r3, r2, r1, r0
    x = gl.permute(x, [0, 3, 4, 5, 1, 2, 6])
    return gl.convert_layout(gl.reshape(x, [32, 64]), OPA)


@gluon.jit
def _four_blocks(x, LAYOUT: gl.constexpr):
    """x [..., 2 (b1), 2 (b0)] → its four blocks b = 2 b1 + b0 in order, each relabelled to
    LAYOUT (registers only)."""
    e, o = gl.split(x)
    x0, x2 = gl.split(e)
    x1, x3 = gl.split(o)
    return (gl.convert_layout(x0, LAYOUT, assert_trivial=True),
            gl.convert_layout(x1, LAYOUT, assert_trivial=True),
            gl.convert_layout(x2, LAYOUT, assert_trivial=True),
            gl.convert_layout(x3, LAYOUT, assert_trivial=True))


@gluon.jit
def _k_blocks(x):
    """K_AFTER: a K half [32 tokens, 64] (KW, K_RAW_ASM's element order) → the four blocks'
    first operands [32, 16] of the score product, registers relabelled: column
    k = i0 + 2 t + 8 i1 of block b holds the element 2 i1 + i0 of lane t's word (_q_block)."""
    x = gl.reshape(x, [32, 2, 2, 4, 2, 2])  # tok, b1, b0, t, i1, i0
    x = gl.permute(x, [0, 4, 3, 5, 1, 2])
    x = gl.reshape(x, [32, 16, 2, 2])
    return _four_blocks(x, OPA)


@gluon.jit
def _k_scales(ks):
    """K_AFTER: the K scales [32 tokens, 4 blocks] (KS4) → four float32 columns in the score
    accumulator's row layout."""
    return _four_blocks(gl.reshape(ks.to(gl.float32), [32, 2, 2]), gl.SliceLayout(1, MMA))


@gluon.jit
def _q_block(Q, row0, GROUP: gl.constexpr, qk_scale, b: gl.constexpr, D: gl.constexpr,
             QN: gl.constexpr, FMT: gl.constexpr, OFF_LO: gl.constexpr, OFF_HI: gl.constexpr):
    """K_AFTER: the query's second operands [16, QN] of block ``b`` (its low nibbles' and its
    high nibbles' head dimensions, in _k_blocks' column order), and −(the codes' offsets times
    those columns' sums) [QN] as the product's initial accumulator wants it: a token's score
    is then the block's product times its scale."""
    QL: gl.constexpr = gl.BlockedLayout([4, 1], [4, 8], [1, 1], [0, 1])
    kk = gl.arange(0, 16, layout=gl.SliceLayout(1, QL))
    qi = gl.arange(0, QN, layout=gl.SliceLayout(0, QL))
    if FMT == "q8_0":  # a block's halves (16 bytes each), _k8_blocks' column order
        dim = 32 * b + 4 * ((kk >> 1) & 3) + (kk & 1) + 2 * (kk >> 3)
    else:  # its low and high nibbles, _k_blocks' column order
        dim = 32 * b + 4 * ((kk >> 1) & 3) + (kk >> 3) + 2 * (kk & 1)
    ptr = Q + (row0 + qi)[None, :] * D + dim[:, None]
    qm = (qi < GROUP)[None, :]
    lo = (gl.load(ptr, mask=qm, other=0.0).to(gl.float32) * qk_scale).to(gl.float16)
    hi = (gl.load(ptr + 16, mask=qm, other=0.0).to(gl.float32) * qk_scale).to(gl.float16)
    if OFF_LO == OFF_HI:  # q8_0's: the two halves summed first
        off = (gl.sum(lo.to(gl.float32), axis=0) + gl.sum(hi.to(gl.float32), axis=0)) * OFF_LO
    else:
        off = (gl.sum(lo.to(gl.float32), axis=0) * OFF_LO
               + gl.sum(hi.to(gl.float32), axis=0) * OFF_HI)
    c = gl.zeros([32, QN], gl.float32, layout=MMA) - gl.convert_layout(
        off, gl.SliceLayout(0, MMA))[None, :]
    return gl.convert_layout(lo, OPB), gl.convert_layout(hi, OPB), c


@gluon.jit
def _v_blocks(l0, l1, h0, h1):
    """V_AFTER: a V tile's raw codes (VW loaded, through K_RAW_ASM, which takes a register's
    two words, two tokens' bytes 2g, 2g + 1, to the tokens' pairs of byte 2g's low nibbles,
    byte 2g + 1's, then their high nibbles) → the four blocks' first operands [32 rows,
    32 tokens] of the value product: row g + 8 j + 16 h of block b holds byte 2g + j of the
    block, its low (h 0) or high (h 1) nibble, head dimension 32 b + 2g + j + 16 h."""
    x = gl.join(gl.join(l0, h0), gl.join(l1, h1))  # [32 tokens, 32 words, h, j]
    x = gl.reshape(x, [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2])  # k4 k3 t1 t0 e | b1 b0 g2 g1 g0 | h j
    x = gl.permute(x, [10, 11, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6])  # h j g | k4 k3 t e | b1 b0
    x = gl.reshape(x, [32, 32, 2, 2])
    return _four_blocks(x, OPA)


@gluon.jit
def _k8_blocks(x):
    """Q8: K's raw codes [32 tokens, 128] (KW8, in byte order) → the four blocks' first
    operands [32, 16] of the score product, low and high half: column k of chunk c holds
    byte 16 c + 4 t + i of the row, k = 2 t + i0 + 8 i1 (i = 2 i1 + i0; _q_block)."""
    x = gl.reshape(x, [32, 2, 2, 2, 4, 2, 2])  # tok, c2, c1, c0, t, i1, i0
    x = gl.permute(x, [0, 5, 4, 6, 1, 2, 3])  # tok, i1, t, i0 | c2 c1 c0
    x = gl.reshape(x, [32, 16, 2, 2, 2])
    lo, hi = gl.split(x)  # c0: a block's first or second half
    b0l, b1l, b2l, b3l = _four_blocks(lo, OPA)
    b0h, b1h, b2h, b3h = _four_blocks(hi, OPA)
    return b0l, b0h, b1l, b1h, b2l, b2h, b3l, b3h


@gluon.jit
def _v8_blocks(l0, l1):
    """Q8: V's raw codes (VW8 loaded, through V8_RAW_ASM: the token pairs of each word's byte 0
    and byte 1) → the four blocks' first operands [32 rows, 32 tokens] of the value product:
    row g + 8 j + 16 c0 of block b holds byte 2g + j of the block's half c0, head dimension
    32 b + 16 c0 + 2g + j (as the q4_0 form's rows, the half in place of the nibble)."""
    x = gl.join(l0, l1)  # [32 tokens, 64 words, j]
    x = gl.reshape(x, [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2])  # k4 k3 t1 t0 e | c2 c1 c0 g2 g1 g0 | j
    x = gl.permute(x, [7, 11, 8, 9, 10, 0, 1, 2, 3, 4, 5, 6])  # c0 j g | k4 k3 t e | c2 c1
    x = gl.reshape(x, [32, 32, 2, 2])
    return _four_blocks(x, OPA)


@gluon.jit
def _v_weights(pt, vs):
    """V_AFTER: the weights operand pt [32 tokens, QN] times each block's V scales (VS4) →
    the four blocks' second operands of the value product."""
    s0, s1, s2, s3 = _four_blocks(gl.reshape(vs, [32, 2, 2]), gl.SliceLayout(1, OPB))
    return pt * s0[:, None], pt * s1[:, None], pt * s2[:, None], pt * s3[:, None]


@gluon.jit
def _v_split_product(vbuf, vsbuf, st, pt, acc0, acc1, acc2, acc3, FMT: gl.constexpr,
                     tables):
    """The value product of stage ``st`` with the V codes scaled as they are unpacked
    (V_ASM; nvfp4: FP4_V_ASM; tbq4: TBQ4_V_ASM, unscaled, the norms in ``pt``, ``tables`` its
    byte tables): the partial outputs after it."""
    vt = vbuf.index(st)
    va = vt.slice(0, 8, dim=1).load(VB)
    vb = vt.slice(8, 8, dim=1).load(VB)
    if FMT == "tbq4":
        ta, tb, tc, td = tables
        o0, o1, o2, o3 = gl.inline_asm_elementwise(
            TBQ4_V_ASM, TBQ4_V_OPERANDS,
            [va, vb, gl.full([16, 8, 8], ta, gl.int32, layout=VB),
             gl.full([16, 8, 8], tb, gl.int32, layout=VB),
             gl.full([16, 8, 8], tc, gl.int32, layout=VB),
             gl.full([16, 8, 8], td, gl.int32, layout=VB)],
            dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=4)
    else:
        if FMT == "nvfp4":
            sa = _fp4_v_scales(vsbuf, st, 0, va)
            sb = _fp4_v_scales(vsbuf, st, 1, va)
            text: gl.constexpr = FP4_V_ASM
        else:
            sa = _v_scales(vsbuf, st, 0, va)
            sb = _v_scales(vsbuf, st, 1, va)
            text: gl.constexpr = V_ASM
        o0, o1, o2, o3 = gl.inline_asm_elementwise(
            text, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r", [va, vb, sa, sb],
            dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=4)
    acc0 = gl.nvidia.ampere.mma_v2(_v_rows(o0), pt, acc0)
    acc1 = gl.nvidia.ampere.mma_v2(_v_rows(o1), pt, acc1)
    acc2 = gl.nvidia.ampere.mma_v2(_v_rows(o2), pt, acc2)
    acc3 = gl.nvidia.ampere.mma_v2(_v_rows(o3), pt, acc3)
    return acc0, acc1, acc2, acc3


@gluon.jit
def _eight(o0, o1, o2, o3, o4, o5, o6, o7):
    """Eight tensors of one shape joined along three new last axes: [..., p0, p1, p2] holds
    o_p, p = p0 + 2 p1 + 4 p2."""
    return gl.join(gl.join(gl.join(o0, o1), gl.join(o2, o3)),
                   gl.join(gl.join(o4, o5), gl.join(o6, o7)))


@gluon.jit
def _k3_rows(o0, o1, o2, o3, o4, o5, o6, o7):
    """TBQ3: TBQ3_K_ASM's outputs (register 2 p + j1 of output p, half j0, of lane t's group)
    → the first operand [32 tokens, 128] of the swapped score product, registers relabelled:
    column k = 16 p + 8 j1 + 2 t + j0 (tbq3_query_order gives its head dimension)."""
    x = gl.reshape(_eight(o0, o1, o2, o3, o4, o5, o6, o7),
                   [32, 2, 2, 2, 2, 2, 2, 2])  # tok, t1 t0 j1 j0, p0 p1 p2
    x = gl.permute(x, [0, 7, 6, 5, 3, 1, 2, 4])  # tok | p2 p1 p0 j1 t1 t0 j0
    return gl.convert_layout(gl.reshape(x, [32, 128]), OPA, assert_trivial=True)


@gluon.jit
def _v3_block(oa, ob):
    """TBQ3: two of TBQ3_V_ASM's outputs (p = 2 blk + mt, register e holds code 2 p + e of
    lane g's window, the token pair's (a, b) halves) → block blk's first operand [32 rows,
    32 tokens] of the value product: row 16 mt + 8 e + g holds head dimension
    16 g + 4 blk + 2 mt + e (the stores map it back), token 8 i + 2 t + j0."""
    x = gl.reshape(gl.join(oa, ob), [2, 2, 2, 2, 2, 2, 2, 2, 2, 2])  # i1 i0 t1 t0 e | m1 m0 h j0 | mt
    x = gl.permute(x, [9, 4, 5, 6, 7, 0, 1, 2, 3, 8])  # mt e m1 m0 h | i1 i0 t1 t0 j0
    return gl.convert_layout(gl.reshape(x, [32, 32]), OPA, assert_trivial=True)


@gluon.jit
def _v3_product(vbuf, st, pt, acc0, acc1, acc2, acc3, tables):
    """TBQ3: the value product of stage ``st`` (TBQ3_V_ASM, the centroids unscaled, the norms
    in ``pt``; ``tables`` the four byte tables): the partial outputs after it."""
    vw = vbuf.index(st).load(VT3)
    # each lane's window: bit 0 of its group's words 0, 1, or bit 16 of words 2, 3 (w1 w2)
    word = gl.arange(0, 16, layout=gl.SliceLayout(0, VT3))
    sh = gl.broadcast((((word >> 1) & 1) * 16)[None, :], vw)[0]
    ta, tb, tc, td = tables
    o0, o1, o2, o3, o4, o5, o6, o7 = gl.inline_asm_elementwise(
        TBQ3_V_ASM, TBQ3_V_OPERANDS,
        [vw, sh, gl.full([32, 16], ta, gl.int32, layout=VT3),
         gl.full([32, 16], tb, gl.int32, layout=VT3), gl.full([32, 16], tc, gl.int32, layout=VT3),
         gl.full([32, 16], td, gl.int32, layout=VT3)],
        dtype=(gl.float16, gl.float16, gl.float16, gl.float16, gl.float16, gl.float16,
               gl.float16, gl.float16), is_pure=True, pack=4)
    acc0 = gl.nvidia.ampere.mma_v2(_v3_block(o0, o1), pt, acc0)
    acc1 = gl.nvidia.ampere.mma_v2(_v3_block(o2, o3), pt, acc1)
    acc2 = gl.nvidia.ampere.mma_v2(_v3_block(o4, o5), pt, acc2)
    acc3 = gl.nvidia.ampere.mma_v2(_v3_block(o6, o7), pt, acc3)
    return acc0, acc1, acc2, acc3


@gluon.jit
def _v_rows(x):
    """A V output of V_ASM [16 pairs, 8 chunks g, 8] → the first operand [32 rows, 32 tokens]
    of the swapped value product: token 2 pair + i0, row 16 q + 8 i1 + g for V_ASM's element
    4 q + 2 i1 + i0 of a chunk (the stores map the rows back to head dimensions)."""
    x = gl.reshape(x, [2, 2, 2, 2, 8, 2, 2, 2])  # p3 p2 p1 p0 g q i1 i0
    x = gl.permute(x, [5, 6, 4, 0, 1, 2, 3, 7])  # column (q, i1, g); token (p, i0)
    return gl.convert_layout(gl.reshape(x, [32, 32]), OPA)


@gluon.jit
def _tile_scores(kbuf, ksbuf, st, qops, K_AFTER: gl.constexpr, QN: gl.constexpr,
                 FMT: gl.constexpr):
    """The scores Sᵀ [32 tokens, QN] of stage ``st``'s keys; ``qops``: the query rows' operands
    (qa, qb in the scaled form; q0l, q0h, c0, … q3l, q3h, c3 with the products' initial
    accumulators in the AFTER forms)."""
    if K_AFTER:
        q0l, q0h, c0, q1l, q1h, c1, q2l, q2h, c2, q3l, q3h, c3 = qops
        if FMT == "q8_0":
            kb = kbuf.index(st).load(KW8)
            kx = gl.inline_asm_elementwise(K8_RAW_ASM, "=r,=r,r", [kb], dtype=gl.float16,
                                           is_pure=True, pack=4)
            l0, h0, l1, h1, l2, h2, l3, h3 = _k8_blocks(kx)
        else:
            kb = kbuf.index(st).load(KW)
            klo, khi = gl.inline_asm_elementwise(K_RAW_ASM, "=r,=r,=r,=r,r", [kb],
                                                 dtype=(gl.float16, gl.float16),
                                                 is_pure=True, pack=4)
            l0, l1, l2, l3 = _k_blocks(klo)
            h0, h1, h2, h3 = _k_blocks(khi)
        k0, k1, k2, k3 = _k_scales(ksbuf.index(st).load(KS4))
        d = gl.nvidia.ampere.mma_v2(l0, q0l, c0)
        s = k0[:, None] * gl.nvidia.ampere.mma_v2(h0, q0h, d)
        d = gl.nvidia.ampere.mma_v2(l1, q1l, c1)
        s += k1[:, None] * gl.nvidia.ampere.mma_v2(h1, q1h, d)
        d = gl.nvidia.ampere.mma_v2(l2, q2l, c2)
        s += k2[:, None] * gl.nvidia.ampere.mma_v2(h2, q2h, d)
        d = gl.nvidia.ampere.mma_v2(l3, q3l, c3)
        s += k3[:, None] * gl.nvidia.ampere.mma_v2(h3, q3h, d)
    elif FMT == "tbq3":  # the centroids' product, then each token's norm
        q3, tables = qops
        ta, tb, tc, td = tables
        kw = kbuf.index(st).load(KT3)
        o0, o1, o2, o3, o4, o5, o6, o7 = gl.inline_asm_elementwise(
            TBQ3_K_ASM, TBQ3_K_OPERANDS,
            [kw, gl.full([32, 16], ta, gl.int32, layout=KT3),
             gl.full([32, 16], tb, gl.int32, layout=KT3),
             gl.full([32, 16], tc, gl.int32, layout=KT3),
             gl.full([32, 16], td, gl.int32, layout=KT3)],
            dtype=(gl.float16, gl.float16, gl.float16, gl.float16, gl.float16, gl.float16,
                   gl.float16, gl.float16), is_pure=True, pack=4)
        s = gl.nvidia.ampere.mma_v2(_k3_rows(o0, o1, o2, o3, o4, o5, o6, o7), q3,
                                    gl.zeros([32, QN], gl.float32, layout=MMA))
        kn = _norms_view(ksbuf, st).load(gl.SliceLayout(1, MMA)).to(gl.float32)
        s = s * kn[:, None]
    elif FMT == "tbq4":  # the centroids' products, then each token's norm
        qa, qb, tables = qops
        ta, tb, tc, td = tables
        kb = kbuf.index(st).load(KB)
        klo, khi = gl.inline_asm_elementwise(
            TBQ4_K_ASM, TBQ4_K_OPERANDS,
            [kb, gl.full([32, 4, 16], ta, gl.int32, layout=KB),
             gl.full([32, 4, 16], tb, gl.int32, layout=KB),
             gl.full([32, 4, 16], tc, gl.int32, layout=KB),
             gl.full([32, 4, 16], td, gl.int32, layout=KB)],
            dtype=(gl.float16, gl.float16), is_pure=True, pack=4)
        s = gl.zeros([32, QN], gl.float32, layout=MMA)
        s = gl.nvidia.ampere.mma_v2(_k_rows(klo), qa, s)
        s = gl.nvidia.ampere.mma_v2(_k_rows(khi), qb, s)
        kn = _norms_view(ksbuf, st).load(gl.SliceLayout(1, MMA)).to(gl.float32)
        s = s * kn[:, None]
    else:
        qa, qb = qops
        kb = kbuf.index(st).load(KB)
        if FMT == "nvfp4":
            ks = _fp4_k_scales(ksbuf, st, kb)
            text: gl.constexpr = FP4_K_ASM
        else:
            ks = ksbuf.index(st).load(gl.SliceLayout(2, KB))
            ks = gl.broadcast(gl.expand_dims(ks, 2), kb)[0]
            text: gl.constexpr = K_ASM
        klo, khi = gl.inline_asm_elementwise(text, "=r,=r,=r,=r,r,r,r", [kb, ks],
                                             dtype=(gl.float16, gl.float16), is_pure=True,
                                             pack=4)
        s = gl.zeros([32, QN], gl.float32, layout=MMA)
        s = gl.nvidia.ampere.mma_v2(_k_rows(klo), qa, s)
        s = gl.nvidia.ampere.mma_v2(_k_rows(khi), qb, s)
    return s


@gluon.jit
def next_max(m_t, m_i, LAZY: gl.constexpr):
    """The running max after a tile whose max is m_t (LAZY: raised only when the tile passes
    the current one by more than 2⁸) and the factor that rescales what was summed under the
    one before."""
    if LAZY:  # noqa: SIM108 (a compile-time branch)
        m_new = gl.where(m_t > m_i + 8.0, m_t, m_i)
    else:
        m_new = gl.maximum(m_i, m_t)
    return m_new, gl.exp2(m_i - m_new)


@gluon.jit
def _tile_values(p, acc0, acc1, acc2, acc3, vbuf, vsbuf, st, vops, V_AFTER: gl.constexpr,
                 FMT: gl.constexpr):
    """The partial outputs after one tile's weights ``p`` [32 tokens, QN] times its values
    (stage ``st``)."""
    if FMT == "tbq4" or FMT == "tbq3":  # each token's V norm joins its weight
        vn = _norms_view(vsbuf, st).load(gl.SliceLayout(1, MMA)).to(gl.float32)
        pt = gl.convert_layout((p * vn[:, None]).to(gl.float16), OPB)
    else:
        pt = gl.convert_layout(p.to(gl.float16), OPB)
    if V_AFTER:
        if FMT == "q8_0":
            vw = vbuf.index(st).load(VW8)
            x0, x1 = gl.inline_asm_elementwise(V8_RAW_ASM, "=r,=r,r", [vw], is_pure=True,
                                               pack=2, dtype=(gl.float16, gl.float16))
            a0, a1, a2, a3 = _v8_blocks(x0, x1)
        else:
            vw = vbuf.index(st).load(VW)
            x0, x1, y0, y1 = gl.inline_asm_elementwise(
                K_RAW_ASM, "=r,=r,=r,=r,r", [vw], is_pure=True, pack=2,
                dtype=(gl.float16, gl.float16, gl.float16, gl.float16))
            a0, a1, a2, a3 = _v_blocks(x0, x1, y0, y1)
        w0, w1, w2, w3 = _v_weights(pt, vsbuf.index(st).load(VS4))
        acc0 = gl.nvidia.ampere.mma_v2(vops, w0, gl.nvidia.ampere.mma_v2(a0, w0, acc0))
        acc1 = gl.nvidia.ampere.mma_v2(vops, w1, gl.nvidia.ampere.mma_v2(a1, w1, acc1))
        acc2 = gl.nvidia.ampere.mma_v2(vops, w2, gl.nvidia.ampere.mma_v2(a2, w2, acc2))
        acc3 = gl.nvidia.ampere.mma_v2(vops, w3, gl.nvidia.ampere.mma_v2(a3, w3, acc3))
    elif FMT == "tbq3":
        acc0, acc1, acc2, acc3 = _v3_product(vbuf, st, pt, acc0, acc1, acc2, acc3, vops)
    else:
        acc0, acc1, acc2, acc3 = _v_split_product(vbuf, vsbuf, st, pt, acc0, acc1, acc2, acc3,
                                                  FMT, vops)
    return acc0, acc1, acc2, acc3


@gluon.jit
def _summed(l_i, alpha, p, SUM_LANES: gl.constexpr):
    """The running sum ``l_i`` rescaled by ``alpha`` with a tile's weights ``p`` added: by place
    (SUM_LANES: ``l_i`` the weights' shape) or summed over the tile's tokens."""
    if SUM_LANES:  # noqa: SIM108 (a compile-time branch)
        l_i = l_i * alpha[None, :] + p
    else:
        l_i = l_i * alpha + gl.sum(p, axis=0)
    return l_i


@gluon.jit
def _rescaled(acc0, acc1, acc2, acc3, alpha):
    """The partial outputs' four blocks rescaled by ``alpha`` (a factor a query column)."""
    return (acc0 * alpha[None, :], acc1 * alpha[None, :], acc2 * alpha[None, :],
            acc3 * alpha[None, :])


@gluon.jit
def _tile_attend(s, left, MASKED: gl.constexpr, m_i, l_i, acc0, acc1, acc2, acc3, vbuf, vsbuf,
                 st, vops, LAZY: gl.constexpr, V_AFTER: gl.constexpr, FMT: gl.constexpr,
                 SUM_LANES: gl.constexpr = False):
    """The online softmax of one tile's scores ``s`` (MASKED: only its first ``left`` tokens
    count) and its value product from stage ``st``: the running max, sum and partial outputs
    after it. SUM_LANES: the running sum ``l_i`` is the scores' shape, each element the sum of
    its own place's weights (summed over the tokens once, after the loop: no shuffle a tile)."""
    if MASKED:  # noqa: SIM102 (a compile-time branch around a run-time one)
        if left < 32:
            stok = gl.arange(0, 32, layout=gl.SliceLayout(1, MMA))
            s = gl.where((stok < left)[:, None], s, float("-inf"))
    m_new, alpha = next_max(gl.max(s, axis=0), m_i, LAZY)
    p = gl.exp2(s - m_new[None, :])
    l_i = _summed(l_i, alpha, p, SUM_LANES)
    if LAZY:
        if gl.max(m_new - m_i, axis=0) > 0:
            acc0, acc1, acc2, acc3 = _rescaled(acc0, acc1, acc2, acc3, alpha)
    else:
        acc0, acc1, acc2, acc3 = _rescaled(acc0, acc1, acc2, acc3, alpha)
    acc0, acc1, acc2, acc3 = _tile_values(p, acc0, acc1, acc2, acc3, vbuf, vsbuf, st, vops,
                                          V_AFTER, FMT)
    return m_new, l_i, acc0, acc1, acc2, acc3


@gluon.jit
def _pair_attend(s0, s1, m_i, l_i, acc0, acc1, acc2, acc3, vbuf, vsbuf, st0, st1, vops,
                 V_AFTER: gl.constexpr, FMT: gl.constexpr, SUM_LANES: gl.constexpr):
    """PAIRS: the online softmax of two whole tiles' scores ``s0`` and ``s1`` at once (one max,
    one rescaling) and their value products from stages ``st0`` and ``st1``."""
    m_new, alpha = next_max(gl.maximum(gl.max(s0, axis=0), gl.max(s1, axis=0)), m_i, False)
    p0 = gl.exp2(s0 - m_new[None, :])
    p1 = gl.exp2(s1 - m_new[None, :])
    l_i = _summed(l_i, alpha, p0 + p1, SUM_LANES)
    acc0, acc1, acc2, acc3 = _rescaled(acc0, acc1, acc2, acc3, alpha)
    acc0, acc1, acc2, acc3 = _tile_values(p0, acc0, acc1, acc2, acc3, vbuf, vsbuf, st0, vops,
                                          V_AFTER, FMT)
    acc0, acc1, acc2, acc3 = _tile_values(p1, acc0, acc1, acc2, acc3, vbuf, vsbuf, st1, vops,
                                          V_AFTER, FMT)
    return m_new, l_i, acc0, acc1, acc2, acc3


@gluon.jit
def q4_0_swapped_kernel(Q, ACC, ML, K0, K1, V0, V1, GSK, GSV, TAB, BLOCK_TABLE, SEQ_LENS,
                        stride_bt, n_splits, qk_scale, PAGE, SPLIT, H_KV: gl.constexpr,
                        GROUP: gl.constexpr, D: gl.constexpr, STAGES: gl.constexpr = 3,
                        LAZY: gl.constexpr = False, QN: gl.constexpr = 8,
                        K_AFTER: gl.constexpr = False, V_AFTER: gl.constexpr = False,
                        PDL: gl.constexpr = False, PIPE: gl.constexpr = False,
                        FMT: gl.constexpr = "q4_0", SUM_LANES: gl.constexpr = False,
                        PAIRS: gl.constexpr = False):
    """One (sequence, KV head, split) program over SPLIT tokens (a multiple of 32) of a q4_0
    cache: partial output, running max and sum to ACC and ML as decode_split_kernel writes
    them (reduce_splits merges them). Tiles of 32 tokens are copied STAGES − 1 ahead. The
    products are swapped, Sᵀ = K·Qᵀ and Oᵀ = Vᵀ·Pᵀ, the cache tiles the first operand and the
    QN query rows (8 or 16) the narrow second one, so that the partial output [128, QN] takes
    half the registers of [16, 128]; the weights reach the value product through one layout
    conversion (a transpose of [32, QN]). LAZY: the running output is rescaled only when a
    tile raises the max by more than 2⁸. K_AFTER, V_AFTER: each side's offsets and scales
    after its products (QN 8); PDL: launched as a programmatic dependent (as pdl_enter). PIPE:
    each tile's softmax and value product beside the next tile's scores (two stages read at
    once: STAGES of at least 3, copies STAGES − 2 ahead of the scores), so that the two chains
    overlap; the last tile after the loop. FMT, the format of K and V: "q4_0"; "q8_0" (with
    both AFTER forms); "nvfp4" (the scaled forms, FP4_K_ASM and FP4_V_ASM; the global scales
    read from GSK and GSV, unread otherwise); "tbq4", Q the rotated query (the output is
    rotated back after the merge), the centroids unscaled (TBQ4_K_ASM, TBQ4_V_ASM), each
    token's K norm on its scores and its V norm on its weights; "tbq3" likewise (TBQ3_K_ASM,
    TBQ3_V_ASM), Q rotated into the key operand's column order (tbq3_query_order). tbq4 and
    tbq3 read their centroids' byte tables from TAB (four int32, tbq4_tables or tbq3_tables;
    unread otherwise). SUM_LANES: the running sum kept by place (_summed), summed over the
    tokens after the loop. PAIRS (STAGES 4, not with PIPE or LAZY): two whole tiles a step,
    copied two tiles ahead, one softmax over both (_pair_attend); the tile or two left after
    the loop one at a time."""
    BN: gl.constexpr = 32
    gl.static_assert(not PIPE or STAGES >= 3, "PIPE reads two stages while a third fills")
    gl.static_assert(not PAIRS or (STAGES == 4 and not PIPE and not LAZY),
                     "PAIRS reads two stages while two fill, without PIPE or LAZY")
    b = gl.program_id(0)
    h = gl.program_id(1)
    sp = gl.program_id(2)
    if PDL:  # as pdl_enter: the step before may still read ACC; then let the merge be placed
        gl.inline_asm_elementwise("griddepcontrol.wait; // $0 $1", "=r,r", [sp],
                                  dtype=gl.int32, is_pure=False, pack=1)
        gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0 $1", "=r,r", [sp],
                                  dtype=gl.int32, is_pure=False, pack=1)
    seq_len = gl.load(SEQ_LENS + b)
    start = sp * SPLIT
    end = gl.minimum(start + SPLIT, seq_len)
    row0 = (b * H_KV + h) * GROUP
    # the raw codes' offsets on a block's first and second 16 columns (rows of the values)
    if FMT == "q8_0":
        OFF_LO: gl.constexpr = Q8_OFFSET
        OFF_HI: gl.constexpr = Q8_OFFSET
    else:
        OFF_LO: gl.constexpr = LOW_OFFSET
        OFF_HI: gl.constexpr = HIGH_OFFSET
    if K_AFTER:
        q0l, q0h, c0 = _q_block(Q, row0, GROUP, qk_scale, 0, D, QN, FMT, OFF_LO, OFF_HI)
        q1l, q1h, c1 = _q_block(Q, row0, GROUP, qk_scale, 1, D, QN, FMT, OFF_LO, OFF_HI)
        q2l, q2h, c2 = _q_block(Q, row0, GROUP, qk_scale, 2, D, QN, FMT, OFF_LO, OFF_HI)
        q3l, q3h, c3 = _q_block(Q, row0, GROUP, qk_scale, 3, D, QN, FMT, OFF_LO, OFF_HI)
        qops = (q0l, q0h, c0, q1l, q1h, c1, q2l, q2h, c2, q3l, q3h, c3)
        if FMT == "q8_0":
            kbuf = gl.allocate_shared_memory(gl.uint8, [STAGES, 32, 128], SHK8)
        else:
            kbuf = gl.allocate_shared_memory(gl.uint8, [STAGES, 32, 64], SHK)
    elif FMT == "tbq3":  # the query comes in the keys' column order (tbq3_query_order)
        QL3: gl.constexpr = gl.BlockedLayout([4, 1], [4, 8], [1, 1], [0, 1])
        kk = gl.arange(0, 128, layout=gl.SliceLayout(1, QL3))
        qi = gl.arange(0, QN, layout=gl.SliceLayout(0, QL3))
        q3 = gl.load(Q + (row0 + qi)[None, :] * D + kk[:, None], mask=(qi < GROUP)[None, :],
                     other=0.0).to(gl.float32)
        tables = _byte_tables(TAB)  # with the centroids' byte tables
        qops = (gl.convert_layout((q3 * qk_scale).to(gl.float16), OPB), tables)
        kbuf = gl.allocate_shared_memory(gl.int32, [STAGES, 32, 16], SHT3)
    else:  # the query gathered in K_ASM's column order, for the scaled keys
        QL: gl.constexpr = gl.BlockedLayout([4, 1], [4, 8], [1, 1], [0, 1])
        kk = gl.arange(0, 64, layout=gl.SliceLayout(1, QL))
        qi = gl.arange(0, QN, layout=gl.SliceLayout(0, QL))
        if FMT == "nvfp4":  # byte j of a span holds values 2j (low nibble) and 2j + 1; its
            # global scale on the query
            byte = ((kk >> 3) & 1) + 2 * (kk & 1) + 4 * (kk >> 4)
            dlo = 32 * ((kk >> 1) & 3) + 2 * byte
            HI: gl.constexpr = 1
            q_scale = qk_scale * gl.load(GSK) * FP4_UNIT
        elif FMT == "tbq4":  # the same pairs, TBQ4_K_ASM's bytes in order
            byte = (kk & 1) + 2 * ((kk >> 3) & 1) + 4 * (kk >> 4)
            dlo = 32 * ((kk >> 1) & 3) + 2 * byte
            HI: gl.constexpr = 1
            q_scale = qk_scale
        else:  # byte j of a block holds values j and j + 16
            dlo = 32 * ((kk >> 1) & 3) + ((kk >> 3) & 1) + 2 * (kk & 1) + 4 * (kk >> 4)
            HI: gl.constexpr = 16
            q_scale = qk_scale
        qp = Q + (row0 + qi)[None, :] * D + dlo[:, None]
        qm = (qi < GROUP)[None, :]
        qlo = gl.load(qp, mask=qm, other=0.0).to(gl.float32)
        qhi = gl.load(qp + HI, mask=qm, other=0.0).to(gl.float32)
        qa = gl.convert_layout((qlo * q_scale).to(gl.float16), OPB)
        qb = gl.convert_layout((qhi * q_scale).to(gl.float16), OPB)
        if FMT == "tbq4":  # noqa: SIM108 (a compile-time branch): with the byte tables
            qops = (qa, qb, _byte_tables(TAB))
        else:
            qops = (qa, qb)
        kbuf = gl.allocate_shared_memory(gl.uint8, [STAGES, 32, 4, 16], SH3)
    if FMT == "nvfp4":
        ksbuf = gl.allocate_shared_memory(gl.uint8, [STAGES, 32, 8], SH2)
    elif FMT == "tbq4" or FMT == "tbq3":
        ksbuf = gl.allocate_shared_memory(gl.int32, [STAGES, 16], SH1)
    else:
        ksbuf = gl.allocate_shared_memory(gl.float16, [STAGES, 32, 4], SH2)
    if V_AFTER:
        if FMT == "q8_0":
            vbuf = gl.allocate_shared_memory(gl.int16, [STAGES, 32, 64], SHV8)
        else:
            vbuf = gl.allocate_shared_memory(gl.int16, [STAGES, 32, 32], SHV)
        vsbuf = gl.allocate_shared_memory(gl.float16, [STAGES, 32, 4], SH2)
        # the value product's constant operand (vops: the AFTER form's offsets; the rotated
        # forms' byte tables): −1032 on the low nibbles' rows, −72 on the high ones' (q8_0:
        # −1152 on every row)
        AR: gl.constexpr = gl.BlockedLayout([1, 32], [32, 1], [1, 1], [1, 0])
        arow = gl.arange(0, 32, layout=gl.SliceLayout(1, AR))
        vops = gl.where(arow < 16, -OFF_LO, -OFF_HI)
        vops = gl.convert_layout(
            (gl.zeros([32, 32], gl.float32, layout=AR) + vops[:, None]).to(gl.float16), OPA)
    else:
        if FMT == "tbq3":
            vbuf = gl.allocate_shared_memory(gl.int32, [STAGES, 32, 16], SHT3)
        else:
            vbuf = gl.allocate_shared_memory(gl.uint8, [STAGES, 16, 16, 8], SH3)
        if FMT == "nvfp4":
            vsbuf = gl.allocate_shared_memory(gl.uint8, [2 * STAGES, 16, 8], SH2)
        elif FMT == "tbq4" or FMT == "tbq3":
            vsbuf = gl.allocate_shared_memory(gl.int32, [STAGES, 16], SH1)
        else:
            vsbuf = gl.allocate_shared_memory(gl.float16, [2 * STAGES, 16, 4], SH2)
        if FMT == "tbq4" or FMT == "tbq3":  # noqa: SIM108 (a compile-time branch)
            vops = qops[len(qops) - 1]  # the byte tables, the query operands' last
        else:
            vops = 0.0  # unused
    bt0 = b * stride_bt
    pg, off, page, nxt = _cursor(BLOCK_TABLE, bt0, start, end, PAGE)
    AHEAD: gl.constexpr = 2 if PAIRS else STAGES - 1  # tiles copied before the loop
    for i in gl.static_range(AHEAD):
        _issue(kbuf, ksbuf, vbuf, vsbuf, i, K0, K1, V0, V1, page, off, h, start + i * BN, end,
               PAGE, H_KV, K_AFTER, V_AFTER, FMT)
        pg, off, page, nxt = _next_tile(pg, off, page, nxt, BLOCK_TABLE, bt0, end, PAGE)
    m_i = gl.full([QN], float("-inf"), gl.float32, layout=gl.SliceLayout(0, MMA))
    if SUM_LANES:  # noqa: SIM108 (a compile-time branch)
        l_i = gl.zeros([32, QN], gl.float32, layout=MMA)
    else:
        l_i = gl.zeros([QN], gl.float32, layout=gl.SliceLayout(0, MMA))
    acc0 = gl.zeros([32, QN], gl.float32, layout=MMA)
    acc1 = gl.zeros([32, QN], gl.float32, layout=MMA)
    acc2 = gl.zeros([32, QN], gl.float32, layout=MMA)
    acc3 = gl.zeros([32, QN], gl.float32, layout=MMA)
    it = 0
    if PAIRS:  # two whole tiles a step, one softmax over both; the tile or two left (the last
        # maybe partial) one at a time after the loop
        for n0 in range(start, end - 63, 64):
            sa = (2 * it) % STAGES
            BARRIER()  # every lane is done with the stages the next copies fill
            for j in gl.static_range(2):  # the next pair, into the stages of the one before
                _issue(kbuf, ksbuf, vbuf, vsbuf, (sa + 2 + j) % STAGES, K0, K1, V0, V1, page,
                       off, h, n0 + 64 + 32 * j, end, PAGE, H_KV, K_AFTER, V_AFTER, FMT)
                pg, off, page, nxt = _next_tile(pg, off, page, nxt, BLOCK_TABLE, bt0, end, PAGE)
            _cp.wait_group(2)
            BARRIER()
            s0 = _tile_scores(kbuf, ksbuf, sa, qops, K_AFTER, QN, FMT)
            s1 = _tile_scores(kbuf, ksbuf, sa + 1, qops, K_AFTER, QN, FMT)
            m_i, l_i, acc0, acc1, acc2, acc3 = _pair_attend(
                s0, s1, m_i, l_i, acc0, acc1, acc2, acc3, vbuf, vsbuf, sa, sa + 1, vops,
                V_AFTER, FMT, SUM_LANES)
            it += 1  # noqa: SIM113 (a Gluon loop: no enumerate)
        _cp.wait_group(0)
        BARRIER()
        k = 2 * it
        for n0 in range(start + 64 * it, end, BN):
            s = _tile_scores(kbuf, ksbuf, k % STAGES, qops, K_AFTER, QN, FMT)
            m_i, l_i, acc0, acc1, acc2, acc3 = _tile_attend(
                s, end - n0, True, m_i, l_i, acc0, acc1, acc2, acc3, vbuf, vsbuf, k % STAGES,
                vops, LAZY, V_AFTER, FMT, SUM_LANES)
            k += 1
    elif PIPE:  # tile 0's scores first; then each tile's softmax and value product beside the
        # next tile's scores, the last tile (which alone can be partial) after the loop
        _cp.wait_group(STAGES - 2)
        BARRIER()
        s = _tile_scores(kbuf, ksbuf, 0, qops, K_AFTER, QN, FMT)
        for n0 in range(start, end - BN, BN):
            st = it % STAGES
            pg, off, page, nxt = _advance(
                kbuf, ksbuf, vbuf, vsbuf, it, K0, K1, V0, V1, BLOCK_TABLE, bt0,
                (pg, off, page, nxt), h, n0, end, PAGE, H_KV, K_AFTER, V_AFTER, FMT, STAGES,
                STAGES - 2)
            s_next = _tile_scores(kbuf, ksbuf, (it + 1) % STAGES, qops, K_AFTER, QN, FMT)
            m_i, l_i, acc0, acc1, acc2, acc3 = _tile_attend(
                s, BN, False, m_i, l_i, acc0, acc1, acc2, acc3, vbuf, vsbuf, st, vops, LAZY,
                V_AFTER, FMT, SUM_LANES)
            s = s_next
            it += 1  # noqa: SIM113 (a Gluon loop: no enumerate)
        if end > start:
            m_i, l_i, acc0, acc1, acc2, acc3 = _tile_attend(
                s, end - start - it * BN, True, m_i, l_i, acc0, acc1, acc2, acc3, vbuf, vsbuf,
                it % STAGES, vops, LAZY, V_AFTER, FMT, SUM_LANES)
    else:
        for n0 in range(start, end, BN):
            st = it % STAGES
            pg, off, page, nxt = _advance(
                kbuf, ksbuf, vbuf, vsbuf, it, K0, K1, V0, V1, BLOCK_TABLE, bt0,
                (pg, off, page, nxt), h, n0, end, PAGE, H_KV, K_AFTER, V_AFTER, FMT, STAGES,
                STAGES - 1)
            s = _tile_scores(kbuf, ksbuf, st, qops, K_AFTER, QN, FMT)
            m_i, l_i, acc0, acc1, acc2, acc3 = _tile_attend(
                s, end - n0, True, m_i, l_i, acc0, acc1, acc2, acc3, vbuf, vsbuf, st, vops,
                LAZY, V_AFTER, FMT, SUM_LANES)
            it += 1  # noqa: SIM113 (a Gluon loop: no enumerate)
    _cp.wait_group(0)
    if SUM_LANES:
        l_i = gl.sum(l_i, axis=0)
    oc = gl.arange(0, 32, layout=gl.SliceLayout(1, MMA))
    oi = gl.arange(0, QN, layout=gl.SliceLayout(0, MMA))
    g = oc & 7
    orow = (b * H_KV + h) * GROUP + oi
    base = orow.to(gl.int64) * n_splits + sp
    om = (oi < GROUP)[None, :]
    if V_AFTER:
        dcol = 2 * g + ((oc >> 3) & 1) + 16 * (oc >> 4)
        dst = ACC + base[None, :] * D + dcol[:, None]
        gl.store(dst, acc0, mask=om)
        gl.store(dst + 32, acc1, mask=om)
        gl.store(dst + 64, acc2, mask=om)
        gl.store(dst + 96, acc3, mask=om)
    elif FMT == "tbq3":  # block b's row 16 mt + 8 e + g: 16 g + 4 b + 2 mt + e (_v3_block)
        dcol = 16 * g + 2 * (oc >> 4) + ((oc >> 3) & 1)
        dst = ACC + base[None, :] * D + dcol[:, None]
        gl.store(dst, acc0, mask=om)
        gl.store(dst + 4, acc1, mask=om)
        gl.store(dst + 8, acc2, mask=om)
        gl.store(dst + 12, acc3, mask=om)
    elif FMT == "nvfp4" or FMT == "tbq4":  # the rows' head dimensions (byte j of chunk g:
        # 16 g + 2 j, + 1 high)
        dcol = 16 * g + 8 * (oc >> 4) + 2 * ((oc >> 3) & 1)
        dst = ACC + base[None, :] * D + dcol[:, None]
        vgs = gl.load(GSV) * FP4_UNIT if FMT == "nvfp4" else 1.0  # nvfp4's global scale
        gl.store(dst, acc0 * vgs, mask=om)
        gl.store(dst + 4, acc1 * vgs, mask=om)
        gl.store(dst + 1, acc2 * vgs, mask=om)
        gl.store(dst + 5, acc3 * vgs, mask=om)
    else:
        dcol = 32 * (g >> 1) + 8 * (g & 1) + 4 * (oc >> 4) + ((oc >> 3) & 1)
        dst = ACC + base[None, :] * D + dcol[:, None]
        gl.store(dst, acc0, mask=om)
        gl.store(dst + 2, acc1, mask=om)
        gl.store(dst + 16, acc2, mask=om)
        gl.store(dst + 18, acc3, mask=om)
    gl.store(ML + base * 2, m_i, mask=oi < GROUP)
    gl.store(ML + base * 2 + 1, l_i, mask=oi < GROUP)


def decode_gluon(cache: Any, q: Any, block_table: Any, seq_lens: Any, out: Any, max_len: int,
                per_sm: int, acc: Any, ml: Any, pdl: bool = False, max_registers: int = 0,
                merge: bool = True, **consts: Any) -> Any:
    """One decode step of q [B, Hq, 128] over ``cache`` (a LayerCache in q4_0, nvfp4 or tbq4, or
    in q8_0 with groups of up to 8; pages of a multiple of 32 tokens) into ``out`` [B, Hq, 128]
    float32: q4_0_swapped_kernel over per_sm programs a multiprocessor (tbq4: after
    rotate_kernel), then reduce_splits (tbq4: rotating back). ``acc`` and ``ml``: float32
    scratch of at least B · Hq · splits · 128 and B · Hq · splits · 2 elements (splits_for).
    ``max_registers`` caps the kernel's registers a thread (q4_0's PIPE form: Q4_PIPE_REGISTERS
    if not given); ``merge`` false leaves the partial results in ``acc`` and ``ml`` unmerged;
    ``consts`` go to the kernel (STAGES, LAZY, the forms)."""
    from .cache import LOG2E

    bsz, hq, d = q.shape
    hkv = cache.kv_heads
    split, n_splits = splits_for(bsz * hkv, max_len, per_sm)
    k0, k1, _, _ = cache.k.operands()
    v0, v1, _, _ = cache.v.operands()
    gsk = k0 if cache.k.global_scale is None else cache.k.global_scale
    gsv = v0 if cache.v.global_scale is None else cache.v.global_scale
    tables = BYTE_TABLES.get(cache.k.fmt)
    tab = cache.byte_tables(tables) if tables else k0
    group = hq // hkv
    consts = {**launch_consts(cache.k.fmt, group, per_sm, bsz * hkv), **consts}
    max_registers = max_registers or launch_registers(cache.k.fmt, consts)
    rotated = consts["FMT"] in ("tbq4", "tbq3")
    if rotated:  # the query rotated first (float32; tbq3's in its key operand's column order)
        q = cache.rotated_query(q, d, d, pdl,
                                order=TBQ3_QUERY_ORDER if consts["FMT"] == "tbq3" else None)
    q4_0_swapped_kernel[(bsz, hkv, n_splits)](
        q, acc, ml, k0, k1, v0, v1, gsk, gsv, tab, block_table, seq_lens, block_table.stride(0),
        n_splits,
        LOG2E / math.sqrt(d), cache.page_size, split, H_KV=hkv, GROUP=group, D=d, num_warps=1,
        **consts,
        **({"PDL": True, "launch_pdl": True} if pdl else {}),
        **({"maxnreg": max_registers} if max_registers else {}))
    if merge:
        cache.merge(acc, ml, out, n_splits, d, rotated, pdl)
    return out


def launch_consts(fmt: str, group: int, per_sm: int = 0, rows: int = 0) -> dict[str, Any]:
    """The kernel's compile-time arguments decode launches it with for K and V in ``fmt``
    (q4_0, q8_0, nvfp4 or tbq4), ``group`` query heads a KV head and ``per_sm`` programs a
    multiprocessor (0: not given): the offsets and scales after the products where the query
    rows fit 8 columns (at 16 the AFTER forms spill; q8_0 has only them); each tile's scores
    beside the value product of the tile before (PIPE, in three stages) for q8_0, and for q4_0
    where at most Q4_PIPE_PER_SM programs a multiprocessor run (its registers past 168, up to
    Q4_PIPE_REGISTERS). nvfp4: the scaled forms (its scale a 16-value block, which no 16-column
    product's columns share), with PIPE for groups of up to 8 at any count (167 registers under
    triton 3.6, no spill: gluon-nvfp4-pipe-h200.json, B=1 128k 53.6–54.1 → 52.7–53.1 µs, B=1 32k
    21.7 → 21.0). tbq4: the same forms unscaled (TBQ4), its norms on the scores and weights;
    tbq3: its own (TBQ3), likewise. q4_0's PIPE form keeps its running sums by place
    (SUM_LANES: 199 registers, 8 fewer instructions a tile; 0–2.5% faster in turns,
    gluon-sum-lanes-h200.json); the other formats' did not gain by it (tbq4 2% slower, at 232
    registers instead of 223; q8_0 and nvfp4 within 1%, tbq3 within 0.5%). Over at least
    Q4_PAIRS_ROWS ``rows`` (sequence, KV head) q4_0 takes the PAIRS form in PIPE's place."""
    if fmt in ("nvfp4", "tbq4", "tbq3"):
        return {"K_AFTER": False, "V_AFTER": False, "FMT": fmt, "STAGES": 3,
                "QN": 8 if group <= 8 else 16, "PIPE": group <= 8, "SUM_LANES": False,
                "PAIRS": False}
    q8 = fmt == "q8_0"
    if q8 and group > 8:
        raise ValueError(f"the Gluon kernel's q8_0 form takes at most 8 query heads a KV head, "
                         f"got {group}")
    pipe = q8 or (group <= 8 and 0 < per_sm <= Q4_PIPE_PER_SM)
    pairs = pipe and not q8 and rows >= Q4_PAIRS_ROWS
    return {"K_AFTER": group <= 8, "V_AFTER": group <= 8, "FMT": fmt,
            "STAGES": 4 if pairs else 3, "QN": 8 if group <= 8 else 16, "PIPE": pipe and not pairs,
            "SUM_LANES": pipe and not q8, "PAIRS": pairs}


def launch_registers(fmt: str, consts: dict[str, Any]) -> int:
    """The cap on registers a thread decode launches the kernel with for K and V in ``fmt``
    under ``consts`` (launch_consts'): Q4_PIPE_REGISTERS for q4_0's PIPE and PAIRS forms,
    FP4_REGISTERS for nvfp4's 8-column form, TBQ4_REGISTERS for tbq4's, TBQ3_REGISTERS for
    tbq3's, else none (0)."""
    if fmt in ("tbq4", "tbq3"):
        cap = TBQ4_REGISTERS if fmt == "tbq4" else TBQ3_REGISTERS
        return cap if consts.get("QN") == 8 else 0
    if fmt == "nvfp4":
        return FP4_REGISTERS if consts.get("QN") == 8 else 0
    paired = consts.get("PIPE") or consts.get("PAIRS")
    return Q4_PIPE_REGISTERS if fmt == "q4_0" and paired else 0


def splits_for(rows: int, max_len: int, per_sm: int) -> tuple[int, int]:
    """(tokens a split, splits) for ``rows`` (sequence, KV head) rows of up to ``max_len``
    tokens at ``per_sm`` programs a multiprocessor: one wave with no program past it, in whole
    32-token tiles."""
    return tiled_splits(max_len, wave_splits(rows, per_sm))
