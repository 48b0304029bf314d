"""A probe: q8_0's decode step at one shape (default B=1, 128k) against torch's fp16 SDPA on
the same shape, timed in turns, several rounds, as bench/decode.py times them.

    python bench/probes/q8_0_b1.py [--out DIR] [--shape BxT] [--rounds 3] [--format q8_0]

Writes q8_0-b1.json. Needs a GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import filled_copies, sdpa_time, time_steps, write_json  # noqa: E402

from kvcore.measure import environment  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shape", default="1x131072")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--format", default="q8_0")
    args = ap.parse_args()
    batch, tokens = (int(x) for x in args.shape.split("x"))
    caches = filled_copies(args.format, batch, tokens)
    rounds = []
    for _ in range(args.rounds):
        step = time_steps(caches, batch, tokens)
        sdpa = sdpa_time(batch, tokens)
        rounds.append({"seconds": step, "sdpa_f16_seconds": sdpa, "speedup_vs_sdpa": sdpa / step})
        print(f"{args.format} B={batch} T={tokens}: {step * 1e6:.2f} us, SDPA {sdpa * 1e6:.2f} us, "
              f"{sdpa / step:.4f}x", flush=True)
        write_json(args.out, "q8_0-b1.json", {"env": environment("cuda", torch),
                                             "format": args.format, "batch": batch,
                                             "tokens": tokens, "rounds": rounds})


if __name__ == "__main__":
    main()
