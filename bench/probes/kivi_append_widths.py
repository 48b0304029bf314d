"""KIVI's append on a GPU at the widths the decode benchmark does not append: a K-only cache
(an MLA latent of 576 and of 512 lanes), K and V of different widths (192 and 128) and a narrow
head (64), kivi2 and kivi4: the share of each plane's elements that the Triton append writes as
the token-by-token torch append does, over appends in chunks that flush ring tokens while new
tokens take their slots (bench/decode.py append_in_chunks), in one launch and with the ring-writing
programs first.

    python bench/probes/kivi_append_widths.py [--out DIR]

Writes kivi-append-widths.json.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import append_in_chunks, write_json  # noqa: E402

from kvcore.kernels.kivi import KiviCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402

#: (K width, V width, with values)
WIDTHS = ((576, 576, False), (512, 512, False), (192, 128, True), (64, 64, True))


def agreement(fmt: str, d: int, dv: int, values: bool, writers_first: bool) -> dict[str, float]:
    g = torch.Generator(device="cuda").manual_seed(3)
    n, heads = 900, 2
    k = torch.randn(n, heads, d, device="cuda", generator=g).half()
    v = torch.randn(n, heads, dv, device="cuda", generator=g).half() if values else k
    caches = [KiviCache(fmt, 1, heads, d, n, head_dim_v=dv, values=values, device="cuda")
              for _ in range(2)]
    bulk, one = caches
    append_in_chunks(bulk, 0, k, v, writers_first)
    one.append(0, k, v)
    assert bulk.n_quant == one.n_quant and bulk.n_quant[0] > 0
    # the cache's tensors in its own order (KiviCache.tensors), each's share of equal elements
    return {str(i): float((x == y).double().mean())
            for i, (x, y) in enumerate(zip(bulk.tensors(), one.tensors(), strict=True))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    result: dict = {"env": environment("cuda", torch), "rows": []}
    for fmt in ("kivi2", "kivi4"):
        for d, dv, values in WIDTHS:
            for first in (False, True):
                agree = agreement(fmt, d, dv, values, first)
                row = {"format": fmt, "head_dim": d, "head_dim_v": dv, "values": values,
                       "writers_first": first, "identical": agree,
                       "all_identical": all(x == 1.0 for x in agree.values())}
                result["rows"].append(row)
                print(row, flush=True)
    write_json(args.out, "kivi-append-widths.json", result)


if __name__ == "__main__":
    main()
