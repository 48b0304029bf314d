"""Compile-only probe (no GPU): what q4_0's value product costs in the swapped decode loop, and
whether keeping two tokens' values of one head dimension in one byte would make it cheaper.

The product Oᵀ = Vᵀ·Pᵀ (decode_split_kernel with SWAP) takes the tokens as its inner
dimension, and the tensor cores want two consecutive tokens of a head dimension in one register,
while the cache keeps a token's bytes together. ``stored`` is the loop as the kernel runs it: a
[BLOCK_N, 64] tile of packed bytes, split into the low and high nibbles' float16 halves,
transposed into the first operand. ``pairs`` lays the bytes out as token pairs (a byte's low
nibble token 2p, its high one token 2p + 1, the same head dimension), so that unpacking a byte
gives the two tokens a register pairs, and joins the halves back into [head dim, BLOCK_N] for
one product. ``fixed`` is ``stored`` with an unpacking Triton may not move (is_pure=False), so
that the layout conversion falls on the unpacked float16 values instead of the bytes. The
values are not checked: this counts the loop's instructions by opcode,
compiled for sm_90 with the tools in the installed triton wheel.

    python bench/probes/v_operand.py [--block-n 32] [--dump DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kvcore.kernels.triton_ops import Q4_0_ASM, q4_0_nibbles  # noqa: E402


@triton.jit
def value_product(V, VS, P, OUT, n_tokens, BN: tl.constexpr, QP: tl.constexpr,
                  PAIRS: tl.constexpr, FIXED: tl.constexpr):
    acc_a = tl.zeros([64, QP], tl.float32)
    acc_b = tl.zeros([64, QP], tl.float32)
    acc = tl.zeros([128, QP], tl.float32)
    rows = tl.arange(0, BN)
    nb = tl.arange(0, 4)[None, :, None]
    for n0 in range(0, n_tokens, BN):
        # the weights' rows, [BLOCK_N, QP] (the product's second operand, Pᵀ)
        p = tl.load(P + (n0 + rows)[:, None] * QP + tl.arange(0, QP)[None, :])
        if PAIRS:
            # [BLOCK_N / 2, 4 blocks, 32 bytes]: token pair p, head dims 32 b … 32 b + 31;
            # the even and the odd tokens' block scales in two planes
            pr = (n0 // 2 + tl.arange(0, BN // 2))[:, None, None]
            byte = tl.load(V + pr * 128 + nb * 32 + tl.arange(0, 32)[None, None, :])
            even, _ = q4_0_nibbles(byte, tl.load(VS + pr * 8 + nb), True)
            _, odd = q4_0_nibbles(byte, tl.load(VS + pr * 8 + 4 + nb), True)
            v = tl.reshape(tl.permute(tl.join(tl.reshape(even, (BN // 2, 128)),
                                              tl.reshape(odd, (BN // 2, 128))), (1, 0, 2)),
                           (128, BN))
            acc = tl.dot(v, p, acc)
        else:
            # [BLOCK_N, 4 blocks, 16 bytes] as q4_0 stores a token: 4 blocks, its scales beside
            r3 = (n0 + rows)[:, None, None]
            byte = tl.load(V + r3 * 64 + nb * 16 + tl.arange(0, 16)[None, None, :])
            ds = tl.load(VS + r3 * 4 + nb)
            if FIXED:
                lo, hi = tl.inline_asm_elementwise(Q4_0_ASM, "=r,=r,=r,=r,r,r,r", [byte, ds],
                                                   dtype=(tl.float16, tl.float16),
                                                   is_pure=False, pack=4)
            else:
                lo, hi = q4_0_nibbles(byte, ds, True)
            acc_a = tl.dot(tl.trans(tl.reshape(lo, (BN, 64))), p, acc_a)
            acc_b = tl.dot(tl.trans(tl.reshape(hi, (BN, 64))), p, acc_b)
    d = tl.arange(0, 64)[:, None] * QP + tl.arange(0, QP)[None, :]
    if PAIRS:
        tl.store(OUT + tl.arange(0, 128)[:, None] * QP + tl.arange(0, QP)[None, :], acc)
    else:
        tl.store(OUT + d, acc_a)
        tl.store(OUT + 64 * QP + d, acc_b)


def main() -> None:
    import sass_count  # bench/sass_count.py, beside this folder

    ap = argparse.ArgumentParser()
    ap.add_argument("--block-n", type=int, default=32)
    ap.add_argument("--dump")
    args = ap.parse_args()
    sig = {"V": "*u8", "VS": "*fp16", "P": "*fp16", "OUT": "*fp32", "n_tokens": "i32"}
    for name, pairs, fixed in (("stored", False, False), ("pairs", True, False),
                               ("fixed", False, True)):
        print(sass_count.probe_line(name, value_product, sig,
                                    {"BN": args.block_n, "QP": 8, "PAIRS": pairs,
                                     "FIXED": fixed}, dump=args.dump))

if __name__ == "__main__":
    main()
