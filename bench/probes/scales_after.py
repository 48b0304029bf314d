"""Compile-only probe (no GPU): q4_0's block scales and its −8 offset applied after the
tensor-core product instead of to every unpacked value, in the swapped key product.

``now`` is the loop as the kernel runs it: each byte's nibbles become float16 (n − 8) · d
(a subtraction and a multiplication a pair of values) before the product. The other two
unpack the nibbles to 1024 + n and 64 + n only (one lop3 a pair) and correct afterwards: a
token's score is Σ_b d_b (M_b − O_b), M_b the product of block b's codes with the query's
block, O_b the query block's sums times the offsets (1032 for the low nibbles, 72 for the
high), which a decode step computes once. ``after`` takes each block's 16 columns out of the
tile for a product of its own; ``batched`` runs the four blocks as one batched product
[4, BLOCK_N, 16] × [4, 16, QP]. Counts the loop's instructions by opcode, compiled for sm_90
with the tools in the installed triton wheel (the values are not checked).

    python bench/probes/scales_after.py [--block-n 32]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kvcore.kernels.triton_ops import q4_0_nibbles  # noqa: E402

#: four bytes → the low nibbles as float16 1024 + n, the high ones as 64 + n (no offset, no
#: scale)
RAW = tl.constexpr("""{
.reg .b32 z, t0, t1;
mov.b32 z, 0;
prmt.b32 t0, $4, z, 0x4140;
prmt.b32 t1, $4, z, 0x4342;
lop3.b32 $0, t0, 0x000F000F, 0x64006400, 0xea;
lop3.b32 $1, t1, 0x000F000F, 0x64006400, 0xea;
lop3.b32 $2, t0, 0x00F000F0, 0x54005400, 0xea;
lop3.b32 $3, t1, 0x00F000F0, 0x54005400, 0xea;
}""")


@triton.jit
def _block_query(Q, b: tl.constexpr, half: tl.constexpr, QP: tl.constexpr):
    d = tl.arange(0, 16)
    return tl.load(Q + (half * 64 + b * 16 + d)[:, None] * QP + tl.arange(0, QP)[None, :])


@triton.jit
def _block_score(lo, hi, KS, Q, r, b: tl.constexpr, QP: tl.constexpr):
    """Block b's part of the scores: its scale times its codes' product with the query's block
    less the query block's offsets."""
    m = tl.dot(hi, _block_query(Q, b, 1, QP), tl.dot(lo, _block_query(Q, b, 0, QP)))
    offset = tl.load(Q + 128 * QP + b * QP + tl.arange(0, QP))
    return tl.load(KS + r * 4 + b).to(tl.float32)[:, None] * (m - offset[None, :])


@triton.jit
def key_product(K, KS, Q, S, n_tokens, BN: tl.constexpr, QP: tl.constexpr,
                MODE: tl.constexpr):
    acc = tl.zeros([BN, QP], tl.float32)
    rows = tl.arange(0, BN)
    nb = tl.arange(0, 4)[None, :, None]
    j = tl.arange(0, 16)[None, None, :]
    dq = tl.arange(0, 64)
    qa = tl.load(Q + dq[:, None] * QP + tl.arange(0, QP)[None, :])
    qb = tl.load(Q + 64 * QP + dq[:, None] * QP + tl.arange(0, QP)[None, :])
    b4 = tl.arange(0, 4)[:, None, None]
    d16 = tl.arange(0, 16)[None, :, None]
    qq = tl.arange(0, QP)[None, None, :]
    qa3 = tl.load(Q + (b4 * 16 + d16) * QP + qq)
    qb3 = tl.load(Q + (64 + b4 * 16 + d16) * QP + qq)
    o3 = tl.load(Q + 128 * QP + tl.arange(0, 4)[:, None] * QP + tl.arange(0, QP)[None, :])
    for n0 in range(0, n_tokens, BN):
        r3 = (n0 + rows)[:, None, None]
        raw = tl.load(K + r3 * 64 + nb * 16 + j)
        if MODE == 0:
            lo, hi = q4_0_nibbles(raw, tl.load(KS + r3 * 4 + nb), True)
            acc = tl.dot(tl.reshape(hi, (BN, 64)), qb, tl.dot(tl.reshape(lo, (BN, 64)), qa, acc))
        else:
            lo, hi = tl.inline_asm_elementwise(RAW, "=r,=r,=r,=r,r", [raw],
                                               dtype=(tl.float16, tl.float16), is_pure=True,
                                               pack=4)
            if MODE == 1:
                r = n0 + rows
                l01, l23 = tl.split(tl.reshape(tl.permute(lo, (0, 2, 1)), (BN, 16, 2, 2)))
                h01, h23 = tl.split(tl.reshape(tl.permute(hi, (0, 2, 1)), (BN, 16, 2, 2)))
                l0, l1 = tl.split(l01)
                l2, l3 = tl.split(l23)
                h0, h1 = tl.split(h01)
                h2, h3 = tl.split(h23)
                acc += _block_score(l0, h0, KS, Q, r, 0, QP)
                acc += _block_score(l1, h1, KS, Q, r, 1, QP)
                acc += _block_score(l2, h2, KS, Q, r, 2, QP)
                acc += _block_score(l3, h3, KS, Q, r, 3, QP)
            else:
                m = tl.dot(tl.permute(hi, (1, 0, 2)), qb3, tl.dot(tl.permute(lo, (1, 0, 2)), qa3))
                ds = tl.permute(tl.load(KS + r3 * 4 + nb), (1, 0, 2)).to(tl.float32)
                acc += tl.sum(ds * (m - o3[:, None, :]), axis=0)
    tl.store(S + rows[:, None] * QP + tl.arange(0, QP)[None, :], acc)


def main() -> None:
    import sass_count  # bench/sass_count.py, beside this folder

    ap = argparse.ArgumentParser()
    ap.add_argument("--block-n", type=int, default=32)
    args = ap.parse_args()
    sig = {"K": "*u8", "KS": "*fp16", "Q": "*fp16", "S": "*fp32", "n_tokens": "i32"}
    for mode, name in enumerate(("now", "after", "batched")):
        print(sass_count.probe_line(name, key_product, sig,
                                    {"BN": args.block_n, "QP": 8, "MODE": mode}))

if __name__ == "__main__":
    main()
