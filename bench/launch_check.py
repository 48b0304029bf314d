"""The decode's default launch against the torch reference on a GPU, for every format and head
shape whose launch comes from a table (GQA 32/8 × 128 few and many rows, 96- and 80-wide heads
in two parts, 256- and 512-wide heads, a 288-wide latent, the MLA latent with 16, 64 and 128
query heads), on short and paged contexts (pages smaller than a tile, several splits). The
interpreter in CI checks the kernel's arithmetic; this checks what the GPU compiler makes of
each launch.

    python bench/launch_check.py [--out DIR] [--workers 16] [--formats f16,q4_0,…]
        [--heads 32/8/128,16/1/576/k,…] [--launches 16/2/1,32/2/1,…]

--launches checks the given launches (block_n/warps/stages) instead of the tables', each case
once a launch: a launch can be checked on the GPU in the same call that times it.

A process a case (a fault poisons its CUDA context, not the next case). Writes launch.json:
per case the relative error against the reference, NaNs, or the error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog_check import gpu_pool  # noqa: E402  (bench/catalog_check.py, beside this file)

HEADS = ["32/8/128", "64/8/128", "32/32/96", "32/8/80", "24/4/256", "8/2/512", "16/1/288/k",
         "16/1/576/k", "64/1/576/k", "128/1/576/k"]
#: (sequence lengths, page size)
SHAPES = [((300, 151), 16), ((5000, 2049), 5000), ((40, 1), 32)]


def _case(job: tuple[str, str, str]) -> dict:
    fmt, heads, launch = job
    import math

    import torch

    from kvcore.kernels.cache import LayerCache

    hq, hkv, d, *konly = heads.split("/")
    hq, hkv, d = int(hq), int(hkv), int(d)
    row: dict = {"format": fmt, "heads": heads, "errors": []}
    given = {}
    if launch:
        row["launch"] = launch
        given = dict(zip(("block_n", "num_warps", "num_stages"),
                         (int(x) for x in launch.split("/")), strict=True))
    try:
        g = torch.Generator(device="cuda").manual_seed(5)
        for lens, page in SHAPES:
            pages = [math.ceil(n / page) for n in lens]
            cache = LayerCache(fmt, fmt, sum(pages), page, hkv, d, device="cuda",
                               values=not konly)
            table = torch.zeros(len(lens), max(pages), dtype=torch.int32, device="cuda")
            first = 0
            for s, n in enumerate(lens):
                order = torch.randperm(pages[s], device="cuda", generator=g) + first
                table[s, :pages[s]] = order.to(torch.int32)
                first += pages[s]
                t = torch.arange(n, device="cuda")
                k = torch.randn(n, hkv, d, device="cuda", generator=g).half()
                v = k if konly else torch.randn(n, hkv, d, device="cuda", generator=g).half()
                cache.append(k, v, table[s, t // page].long(), t % page)
            seq = torch.tensor(lens, dtype=torch.int32, device="cuda")
            q = torch.randn(len(lens), hq, d, device="cuda", generator=g).half()
            out = cache.decode(q, table, seq, **given)
            torch.cuda.synchronize()
            ref = cache.decode_ref(q.float(), table, seq)
            err = float((out.double() - ref.double()).norm() / ref.double().norm())
            row["errors"].append({"lens": list(lens), "page": page, "rel": err,
                                  "nan": bool(torch.isnan(out).any())})
    except Exception as exc:  # noqa: BLE001 (a failure to record)
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--formats")
    ap.add_argument("--heads", default=",".join(HEADS))
    ap.add_argument("--launches", help="block_n/warps/stages,… to check instead of the tables'")
    args = ap.parse_args()
    import torch

    from kvcore.kernels.cache import PAGED
    from kvcore.measure import environment

    env = environment("cuda", torch)
    formats = args.formats.split(",") if args.formats else PAGED
    launches = args.launches.split(",") if args.launches else [""]
    jobs = [(f, h, la) for la in launches for h in args.heads.split(",") for f in formats]
    rows = []
    with gpu_pool(args.workers, torch.cuda.device_count()) as pool:
        for row in pool.imap_unordered(_case, jobs):
            rows.append(row)
            worst = max((e["rel"] for e in row["errors"]), default=float("nan"))
            bad = row.get("error") or any(e["nan"] for e in row["errors"]) or worst > 3e-3
            print(f"{row['format']:8s} {row['heads']:12s} {row.get('launch', ''):8s} "
                  f"worst {worst:.1e}"
                  + (f"  FAILED {row.get('error', '')}" if bad else ""), flush=True)
    rows.sort(key=lambda r: (r.get("launch", ""), r["heads"], r["format"]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "launch.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    failed = [r for r in rows if r.get("error") or any(e["nan"] or e["rel"] > 3e-3
                                                       for e in r["errors"])]
    print(f"{len(rows)} cases, {len(failed)} failed")


if __name__ == "__main__":
    main()
