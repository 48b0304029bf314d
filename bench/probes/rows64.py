"""q4_0's 64-row launch on a 576-wide MLA latent (64 query heads over one latent: 32 tokens,
8 warps, 2 stages, 64 query rows a program), the launch GROUP_LAUNCH leaves out because it
faulted on an H200 (launch-h200.json). Run it under compute-sanitizer to see where:

    compute-sanitizer --tool memcheck python bench/probes/rows64.py [--fmt q4_0] [--rows 64]

Prints the relative error against the torch reference for each paged layout of
launch_check.py, or the error the launch raised.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kvcore.kernels.cache import LayerCache  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fmt", default="q4_0")
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--launch", default="32/8/2", help="block_n/warps/stages")
    args = ap.parse_args()
    bn, nw, ns = (int(x) for x in args.launch.split("/"))
    g = torch.Generator(device="cuda").manual_seed(5)
    for lens, page in (((300, 151), 16), ((5000, 2049), 5000), ((40, 1), 32)):
        pages = [math.ceil(n / page) for n in lens]
        cache = LayerCache(args.fmt, args.fmt, sum(pages), page, 1, 576, device="cuda",
                           values=False)
        table = torch.zeros(len(lens), max(pages), dtype=torch.int32, device="cuda")
        first = 0
        for s, n in enumerate(lens):
            table[s, :pages[s]] = (torch.randperm(pages[s], device="cuda", generator=g)
                                   + first).to(torch.int32)
            first += pages[s]
            t = torch.arange(n, device="cuda")
            k = torch.randn(n, 1, 576, device="cuda", generator=g).half()
            cache.append(k, k, table[s, t // page].long(), t % page)
        seq = torch.tensor(lens, dtype=torch.int32, device="cuda")
        q = torch.randn(len(lens), args.heads, 576, device="cuda", generator=g).half()
        try:
            out = cache.decode(q, table, seq, block_n=bn, num_warps=nw, num_stages=ns,
                               query_rows=args.rows)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 (the fault is what this probe reports)
            print(lens, page, "error:", str(exc).splitlines()[0][:200], flush=True)
            return
        ref = cache.decode_ref(q.float(), table, seq)
        err = float((out.double() - ref.double()).norm() / ref.double().norm())
        print(lens, page, f"rel {err:.2e}", flush=True)


if __name__ == "__main__":
    main()
