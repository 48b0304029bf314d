"""KIVI decode launches: warps a program, pipeline stages and tokens a program (the split),
against the default.

    python bench/kivi_check.py [--out DIR] [--configs W/S/SPLIT[/M[/L]],…]

kivi2 and kivi4, 8 KV heads, head_dim 128, GQA 4: (1 sequence, 32k), (1, 128k), (8, 32k); each
step replayed from a CUDA graph over enough caches that none is read from L2. SPLIT 0: the
default split; M 1: codes to float16 by their bits (decode(magic=True)); L 1: the lazy rescale
(decode(lazy=True)). Writes kivi.json.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode import HQ, graph_time, kivi_copies, kivi_fill, write_json  # noqa: E402

from kvcore.kernels.kivi import KIVI_STAGES, KIVI_WARPS  # noqa: E402
from kvcore.measure import environment  # noqa: E402

D = 128


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--configs", default="1/2/0/1,2/2/0/1,1/2/256,1/2/256/1,2/2/512,4/3/512")
    args = ap.parse_args()
    configs = [(KIVI_WARPS, KIVI_STAGES, 0, 0, 0)] + [
        (*(int(x) for x in c.split("/")), 0, 0)[:5] for c in args.configs.split(",")]
    env = environment("cuda", torch)
    rows = []
    for fmt in ("kivi2", "kivi4"):
        for seqs, tokens in ((1, 32768), (1, 131072), (8, 32768)):
            caches = kivi_copies(kivi_fill(fmt, seqs, tokens))
            q = torch.randn(seqs, HQ, D, device="cuda").half()
            row = {"format": fmt, "sequences": seqs, "tokens": tokens,
                   "bytes": caches[0].nbytes, "seconds": {}}
            for w, st, split, magic, lazy in dict.fromkeys(configs):
                row["seconds"][f"{w}/{st}/{split}/{magic}/{lazy}"] = graph_time(
                    [partial(c.decode, q, split or None, num_warps=w, num_stages=st,
                             magic=bool(magic), lazy=bool(lazy)) for c in caches])
            rows.append(row)
            print(fmt, seqs, tokens, {k: f"{v * 1e6:.1f} us" for k, v in row["seconds"].items()},
                  flush=True)
            del caches
            torch.cuda.empty_cache()
    write_json(args.out, "kivi.json", {"env": env, "note": "configs: warps/stages/split/magic/"
                                       "lazy (split 0: the default)", "rows": rows})


if __name__ == "__main__":
    main()
