"""KIVI decode: a fixed split of 1,024 tokens a program against one wave of programs (at least
256 tokens each); the default takes the shorter of the two.

    python bench/kivi_check.py [--out DIR]

kivi2 and kivi4, 8 KV heads, head_dim 128, GQA 4: (1 sequence, 8k), (1, 32k), (4, 32k); each
step replayed from a CUDA graph over enough caches that none is read from L2. Writes kivi.json.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode import copies_for, graph_time, write_json  # noqa: E402

from kvcore.kernels.cache import one_wave_splits  # noqa: E402
from kvcore.kernels.kivi import KiviCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402

HKV, D = 8, 128


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    env = environment("cuda", torch)
    rows = []
    for fmt in ("kivi2", "kivi4"):
        for seqs, tokens in ((1, 8192), (1, 32768), (4, 32768)):
            x = torch.randn(tokens, HKV, D, device="cuda").half()
            caches = []
            for _ in range(copies_for(KiviCache(fmt, seqs, HKV, D, tokens).nbytes)):
                c = KiviCache(fmt, seqs, HKV, D, tokens, device="cuda")
                for s in range(seqs):
                    c.append_triton(s, x, x)
                caches.append(c)
            q = torch.randn(seqs, 4 * HKV, D, device="cuda").half()
            row = {"format": fmt, "sequences": seqs, "tokens": tokens,
                   "bytes": caches[0].nbytes}
            one_wave = -(-tokens // max(1, one_wave_splits(seqs * HKV, tokens)))
            for name, split in (("split_1024", 1024), ("one_wave", one_wave)):
                row[name] = graph_time([partial(c.decode, q, split) for c in caches])
            rows.append(row)
            print({k: (f"{v * 1e6:.1f} us" if isinstance(v, float) else v)
                   for k, v in row.items()}, flush=True)
            del caches
            torch.cuda.empty_cache()
    write_json(args.out, "kivi.json", {"env": env, "rows": rows})


if __name__ == "__main__":
    main()
