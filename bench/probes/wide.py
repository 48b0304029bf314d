"""The lazy decode's range check on a GPU (decode's ``wide``): after bfloat16 rows an fp8_pth
cache checks each tile's V row scales against WIDE_SCALE. Checks that rows of large magnitude
(up to about 10^6) give finite outputs that agree with the eager step, and times the check
against no check on rows of ordinary magnitude (GQA 32/8 × 128).

    python bench/probes/wide.py [--out DIR] [--shapes 1x131072,8x131072]

Writes wide.json.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import HKV, HQ, D, filled_copies, rel, time_steps, write_json  # noqa: E402

from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def large_rows(fmt: str) -> dict:
    """Two sequences of 4,096 bfloat16 rows, values up to about 10^6, keys growing along the
    sequence (some tiles keep the running max): lazy with the check, without it, and eager."""
    g = torch.Generator(device="cuda").manual_seed(3)
    tokens = 4096
    cache = LayerCache(fmt, fmt, 2, tokens, HKV, D, device="cuda")
    grow = (0.25 + torch.arange(tokens, device="cuda") / 1500.0)[:, None, None]
    for b in range(2):
        k = (torch.randn(tokens, HKV, D, device="cuda", generator=g) * grow).bfloat16()
        v = (torch.randn(tokens, HKV, D, device="cuda", generator=g) * 3e5).bfloat16()
        t = torch.arange(tokens, device="cuda")
        cache.append(k, v, torch.full_like(t, b), t)
    table = torch.arange(2, device="cuda", dtype=torch.int32).reshape(2, 1)
    lens = torch.full((2,), tokens, device="cuda", dtype=torch.int32)
    q = torch.randn(2, HQ, D, device="cuda", generator=g).bfloat16()
    eager = cache.decode(q, table, lens, lazy=False)
    checked = cache.decode(q, table, lens, lazy=True)
    unchecked = cache.decode(q, table, lens, lazy=True, wide=False)
    exact = cache.decode_ref(q.float(), table, lens)
    return {"format": fmt, "wide": cache.v.wide,
            "checked_finite": bool(torch.isfinite(checked).all()),
            "checked_rel_to_eager": rel(checked, eager),
            "checked_rel_to_reference": rel(checked, exact),
            "unchecked_finite": bool(torch.isfinite(unchecked).all())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="1x131072,8x131072")
    args = ap.parse_args()
    result: dict = {"env": environment("cuda", torch), "large_rows": [], "timing": []}
    for fmt in ("fp8_pth", "nvfp4"):
        row = large_rows(fmt)
        result["large_rows"].append(row)
        print(row, flush=True)
    for shape in args.shapes.split(","):
        batch, tokens = (int(x) for x in shape.split("x"))
        caches = filled_copies("fp8_pth", batch, tokens, torch.bfloat16)
        cache = caches[0]
        row = {"format": "fp8_pth", "batch": batch, "tokens": tokens, "wide": cache.v.wide}
        for wide in (False, True):
            row[f"seconds_wide_{wide}"] = time_steps(caches, batch, tokens, torch.bfloat16,
                                                     wide=wide)
        row["cost"] = row["seconds_wide_True"] / row["seconds_wide_False"] - 1
        result["timing"].append(row)
        print(row, flush=True)
        del cache, caches
        torch.cuda.empty_cache()
    write_json(args.out, "wide.json", result)


if __name__ == "__main__":
    main()
