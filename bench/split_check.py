"""Context split of the decode kernel: one exact wave of long programs against several waves.

    python bench/split_check.py [--out DIR]

For f16, q4_0 and tbq4 at (B=8, 128k), (B=1, 1M) and (B=64, 32k) tokens: the step time with
splits = ⌊4 · SMs / (B · KV heads)⌋ (one wave of programs, none left over) and with
LayerCache.decode's default split. Writes split.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode import HKV, D, copies, fill, time_steps  # noqa: E402

from kvcore.kernels.cache import SMS, LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    rows = []
    for batch, tokens in ((8, 131072), (1, 1 << 20), (64, 32768)):
        for fmt in ("f16", "q4_0", "tbq4"):
            cache = LayerCache(fmt, fmt, batch, tokens, HKV, D, device="cuda")
            fill(cache, batch, tokens, torch.float16)
            caches = copies(cache, batch, tokens)
            one = max(1, 4 * SMS // (batch * HKV))
            row = {"format": fmt, "batch": batch, "tokens": tokens, "one_wave_splits": one}
            for name, split in (("one_wave", math.ceil(tokens / one)), ("default", None)):
                row[name] = time_steps(caches, batch, tokens, split_tokens=split)
            rows.append(row)
            print(row, flush=True)
            del cache, caches
            torch.cuda.empty_cache()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "split.json").write_text(json.dumps(
        {"env": environment("cuda", torch), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
