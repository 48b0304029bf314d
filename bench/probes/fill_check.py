"""fp8_pth and nvfp4 decode on the GPU at the split counts fullest_waves gives over many rows:
the default against the reference (LayerCache.decode_ref) and against the count the rule
before it took (one wave of 16 rounded down). Between counts only the order of the float32
sums and the float16 rounding of the weights, taken against each split's own running max,
may differ.

    python bench/probes/fill_check.py [--out DIR]

Writes fill_check.json.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import HKV, D, fill, rel, step_inputs, write_json  # noqa: E402

from kvcore.kernels.cache import (  # noqa: E402
    SMS,
    WHOLE_RESIDENT,
    LayerCache,
    fullest_waves,
    wave_splits,
)
from kvcore.measure import environment  # noqa: E402

SHAPES = ((48, 32768), (36, 32768), (68, 32768), (16, 131072))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    rows = []
    for fmt in ("fp8_pth", "nvfp4"):
        for batch, tokens in SHAPES:
            cache = LayerCache(fmt, fmt, batch, tokens, HKV, D, device="cuda")
            fill(cache, batch, tokens, torch.float16)
            table, seq, q = step_inputs(batch, tokens)
            got = cache.decode(q, table, seq, max_len=tokens)
            most = min(tokens // 2048, 64)
            old = min(wave_splits(batch * HKV, 16), most)
            before = cache.decode(q, table, seq, max_len=tokens,
                                  split_tokens=math.ceil(tokens / old))
            ref = cache.decode_ref(q.float(), table, seq)
            row = {"format": fmt, "batch": batch, "tokens": tokens, "sms": SMS,
                   "splits": fullest_waves(batch * HKV, WHOLE_RESIDENT, tokens, most),
                   "old_splits": old, "rel_vs_ref": rel(got, ref),
                   "rel_vs_old_count": rel(got, before), "nan": bool(torch.isnan(got).any())}
            rows.append(row)
            print(row, flush=True)
            del cache, ref, got, before
            torch.cuda.empty_cache()
    write_json(args.out, "fill_check.json", {"env": environment("cuda", torch), "rows": rows})


if __name__ == "__main__":
    main()
