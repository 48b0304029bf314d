"""The decode benchmark's B=1 4k append for one format, run a few times so that Nsight Compute
can profile one of its launches (bench/probes/ncu_short_append_run.sh): kivi2 and kivi4 append
4,096 new tokens to an empty sequence of a KIVI cache (one launch of kivi_flush_kernel each),
the other formats 4,096 tokens into a cache of one 4k sequence (one launch of append_kernel).

    python bench/probes/short_append_profile.py FORMAT [--calls 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.kernels.kivi import KiviCache  # noqa: E402

HKV, D, TOKENS = 8, 128, 4096


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("format")
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    x = torch.randn(TOKENS, HKV, D, device="cuda", dtype=torch.float16)
    if args.format.startswith("kivi"):
        for _ in range(args.calls):
            # a fresh cache a call, so that every call flushes its 128 groups a head
            cache = KiviCache(args.format, 1, HKV, D, TOKENS, device="cuda")
            cache.append_triton(0, x, x)
            torch.cuda.synchronize()
    else:
        cache = LayerCache(args.format, args.format, 1, TOKENS, HKV, D, device="cuda")
        t = torch.arange(TOKENS, device="cuda")
        for _ in range(args.calls):
            cache.append(x, x, t // TOKENS, t % TOKENS)
        torch.cuda.synchronize()
    print(args.format, "appended", args.calls, flush=True)


if __name__ == "__main__":
    main()
