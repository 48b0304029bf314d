"""A probe: what the rotated formats' rotations cost a decode step. tbq4 and tbq3 (and q4_0
beside them) at B=1 and B=8 over 4k, 32k and 128k tokens (GQA 32/8 × 128), timed as
bench/decode.py times a step (CUDA graph over cache copies, the output given): by default
(the split kernel rotates its query and partial outputs itself, decode_split_kernel's ROT_Q
and ROT_V), with the rotations in their own launches (rotate_in_kernel=False), and with those
launches replaced by ones that do nothing (the query not rotated, the merged output not
rotated back: the outputs are wrong, only the time counts).

    python bench/probes/rotation_cost.py [--out DIR]

Writes rotation-cost.json.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from decode import filled_copies, time_steps, write_json  # noqa: E402

from kvcore.kernels import triton_ops  # noqa: E402
from kvcore.measure import environment  # noqa: E402

SHAPES = [(1, 4096), (1, 32768), (1, 131072), (8, 4096), (8, 131072)]


class _Skip:
    """Stands for rotate_kernel: every launch does nothing."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    result: dict = {"env": environment("cuda", torch), "rows": []}
    real = triton_ops.rotate_kernel
    for fmt in ("q4_0", "tbq4", "tbq3"):
        for batch, tokens in SHAPES:
            caches = filled_copies(fmt, batch, tokens)
            row = {"format": fmt, "batch": batch, "tokens": tokens,
                   "seconds": time_steps(caches, batch, tokens)}
            if fmt != "q4_0":
                row["seconds_rotations_apart"] = time_steps(caches, batch, tokens,
                                                            rotate_in_kernel=False)
                triton_ops.rotate_kernel = _Skip()
                try:
                    row["seconds_without_rotations"] = time_steps(caches, batch, tokens,
                                                                  rotate_in_kernel=False)
                finally:
                    triton_ops.rotate_kernel = real
            result["rows"].append(row)
            print(fmt, batch, tokens, {k: round(v * 1e6, 1) for k, v in row.items()
                                       if k.startswith("seconds")}, flush=True)
            del caches
            torch.cuda.empty_cache()
    write_json(args.out, "rotation-cost.json", result)


if __name__ == "__main__":
    main()
