"""KIVI decode on DeepSeek-V2-Lite's MLA latent (one 576-wide K-only head, 16 query heads) on
a GPU: time a step at 8k and 32k tokens (one sequence) under 4, 8 and 16 warps a program, and
the output against exact attention over the dequantized cache.

    python bench/probes/kivi_mla.py [--out DIR]

Writes kivi-mla.json.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import graph_time, kivi_copies, write_json  # noqa: E402

from kvcore.kernels.kivi import KiviCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402

D, HQ = 576, 16


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    rows = []
    for fmt in ("kivi2", "kivi4"):
        for tokens in (8192, 32768):
            cache = KiviCache(fmt, 1, 1, D, tokens, device="cuda", values=False)
            k = torch.randn(tokens, 1, D, device="cuda", dtype=torch.float16)
            cache.append_triton(0, k, k)
            q = torch.randn(1, HQ, D, device="cuda", dtype=torch.float16)
            out = cache.decode(q)
            ref = cache.decode_ref(q.float())
            err = float((out.double() - ref.double()).norm() / ref.double().norm())
            caches = kivi_copies(cache)
            row = {"format": fmt, "tokens": tokens, "rel_err_vs_exact": err, "seconds": {}}
            for warps in (4, 8, 16):
                row["seconds"][str(warps)] = graph_time(
                    [partial(c.decode, q, num_warps=warps) for c in caches])
            print(fmt, tokens, f"err {err:.2e}",
                  {w: f"{t * 1e6:.1f} us" for w, t in row["seconds"].items()}, flush=True)
            rows.append(row)
    write_json(args.out, "kivi-mla.json", {"env": environment("cuda", torch), "rows": rows})


if __name__ == "__main__":
    main()
