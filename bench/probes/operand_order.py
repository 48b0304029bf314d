"""Compile-only probe (no GPU): does storing q4_0's K bytes in the order the tensor-core operand
takes them remove the in-register rearranging of the loaded bytes?

A minimal swapped key product like the decode's (decode_split_kernel with SWAP): each step
loads a [BLOCK_N, 64] tile of packed bytes, splits low and high nibbles into float16 halves
and multiplies them, as the first operand, with the query's halves. ``plain`` loads the tile
row-contiguous, as the cache stores it now; ``operand`` loads each row as [4, 8, 2] bytes (the
two bytes a lane's column pair takes, eight such pairs, four lanes a row) and permutes them
back into logical column order, so that one 16-byte load a lane holds the lane's operand
columns. The bytes read are the same; only their order in memory differs (the values are not
checked: this counts instructions). Prints the loop's instruction counts by opcode for both,
compiled for sm_90 with the tools in the installed triton wheel.

    python bench/probes/operand_order.py [--block-n 32] [--dump DIR]
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


@triton.jit
def key_product(K, KS, Q, S, n_tokens, BN: tl.constexpr, QP: tl.constexpr,
                OPERAND: tl.constexpr):
    dq = tl.arange(0, 64)
    qa = tl.load(Q + dq[:, None] * QP + tl.arange(0, QP)[None, :])
    qb = tl.load(Q + 64 * QP + dq[:, None] * QP + tl.arange(0, QP)[None, :])
    acc = tl.zeros([BN, QP], tl.float32)
    rows = tl.arange(0, BN)
    nb = tl.arange(0, 4)[None, :, None]
    j = tl.arange(0, 16)[None, None, :]
    for n0 in range(0, n_tokens, BN):
        r3 = (n0 + rows)[:, None, None]
        # 4 q4_0 blocks a row: 16 bytes each, its scale beside
        raw = tl.load(K + r3 * 64 + nb * 16 + j)
        ds = tl.load(KS + r3 * 4 + nb)
        if OPERAND:
            # memory (lane, pair, byte) holds logical column 8 * pair + 2 * lane + byte
            byte = tl.reshape(tl.permute(tl.reshape(raw, (BN, 4, 8, 2)), (0, 2, 1, 3)),
                              (BN, 4, 16))
        else:
            byte = raw
        lo, hi = q4_0_nibbles(byte, ds, True)
        acc = tl.dot(tl.reshape(hi, (BN, 64)), qb, tl.dot(tl.reshape(lo, (BN, 64)), qa, acc))
    tl.store(S + rows[:, None] * QP + tl.arange(0, QP)[None, :], acc)


def main() -> None:
    import sass_count  # bench/sass_count.py, beside this folder

    ap = argparse.ArgumentParser()
    ap.add_argument("--block-n", type=int, default=32)
    ap.add_argument("--dump")
    args = ap.parse_args()
    sig = {"K": "*u8", "KS": "*fp16", "Q": "*fp16", "S": "*fp32", "n_tokens": "i32"}
    for operand in (False, True):
        print(sass_count.probe_line("operand" if operand else "plain", key_product, sig,
                                    {"BN": args.block_n, "QP": 8, "OPERAND": operand},
                                    dump=args.dump))

if __name__ == "__main__":
    main()
