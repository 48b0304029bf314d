"""Decode reading the packed planes as bytes (decode(words=False)) against reading them as
int32 words and against the torch reference, on a GPU, under several launches: pages of 16
under a shuffled block table, lengths 3000, 517, 1 and 40, GQA 32/8 × 128. Written after
tbq3's byte reads in 16-token tiles came out wrong on an H200 (relative error 1.65, its word
reads 3·10⁻⁴).

    python bench/probes/byte_reads.py [--formats tbq3,tbq4,q4_0,nvfp4]
        [--configs BN/W/S/PAD,…] [--mixed K/V,…] [--out DIR]

Writes byte-reads.json: per format and launch the relative error of each read against the
reference, and whether the two reads' outputs are identical; with decode's own choice of read
(words left to the default: SHORT_TILE_WRONG's sides take the other read) as "default_vs_ref"
where decode accepts the launch. --mixed: caches of two formats (K/V) with heads of 256 lanes
(GQA 24/4, Qwen3.5's full layers), whose default launch is 16-token tiles, under decode's
defaults against the reference.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from decode import fill_paged, rel  # noqa: E402

from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="tbq3,tbq4,q4_0,nvfp4")
    ap.add_argument("--configs", default="16/1/3/4,16/1/2/4,16/2/2/4,16/4/2/16,16/1/3/16,"
                                         "32/1/3/4,64/1/2/4")
    ap.add_argument("--mixed", default="q8_0/nvfp4,tbq4/nvfp4,nvfp4/tbq3,tbq3/nvfp4,q8_0/tbq3")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    res: dict = {"env": environment("cuda", torch), "rows": []}
    g = torch.Generator(device="cuda").manual_seed(0)
    lens, page, hkv, hq, d = [3000, 517, 1, 40], 16, 8, 32, 128
    per = max(math.ceil(n / page) for n in lens)
    table = torch.randperm(len(lens) * per, device="cuda", generator=g).reshape(
        len(lens), per).to(torch.int32)
    seq = torch.tensor(lens, dtype=torch.int32, device="cuda")
    k = torch.randn(len(lens), max(lens), hkv, d, device="cuda", generator=g).half()
    v = torch.randn(len(lens), max(lens), hkv, d, device="cuda", generator=g).half()
    q = torch.randn(len(lens), hq, d, device="cuda", generator=g).half()
    for fmt in a.formats.split(","):
        cache = LayerCache(fmt, fmt, len(lens) * per, page, hkv, d, device="cuda")
        fill_paged(cache, table, k, v, lens)
        want = cache.decode_ref(q.float(), table, seq)
        for c in a.configs.split(","):
            bn, nw, ns, pad = (int(x) for x in c.split("/"))
            launch = dict(block_n=bn, num_warps=nw, num_stages=ns, pad_rows=pad, swap=False)
            row = {"format": fmt, "config": c}
            for name, words in (("bytes", False), ("words", True), ("default", None)):
                try:
                    out = cache.decode(q, table, seq, words=words, **launch)
                    row[f"{name}_vs_ref"] = rel(out, want)
                    row[f"{name}_nan"] = int(torch.isnan(out).sum())
                except ValueError as e:  # decode refuses a read known to be wrong
                    row[f"{name}_refused"] = str(e)[:300]
            print(row, flush=True)
            res["rows"].append(row)
    hq, hkv, d = 24, 4, 256
    k = torch.randn(len(lens), max(lens), hkv, d, device="cuda", generator=g).half()
    v = torch.randn(len(lens), max(lens), hkv, d, device="cuda", generator=g).half()
    q = torch.randn(len(lens), hq, d, device="cuda", generator=g).half()
    for pair in filter(None, a.mixed.split(",")):
        fk, fv = pair.split("/")
        cache = LayerCache(fk, fv, len(lens) * per, page, hkv, d, device="cuda")
        fill_paged(cache, table, k, v, lens)
        out = cache.decode(q, table, seq)
        row = {"format": pair, "heads": [hq, hkv, d], "config": "default",
               "default_vs_ref": rel(out, cache.decode_ref(q.float(), table, seq)),
               "default_nan": int(torch.isnan(out).sum())}
        print(row, flush=True)
        res["rows"].append(row)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "byte-reads.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
