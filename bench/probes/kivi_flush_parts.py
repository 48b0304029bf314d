"""KIVI's append split into its two launches on a GPU: the whole append (the flush, then the
ring slots from kivi_ring_kernel) against the flush alone (the ring launch left out), each at
16,384 new tokens a call into empty sequences (B=8, 32k, as bench/decode.py times it), and the
whole append with the flush's registers capped at each of --registers.

    python bench/probes/kivi_flush_parts.py [--out DIR] [--registers 120,112,104]

Writes kivi-flush-parts.json.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import kivi_append_time, write_json  # noqa: E402

from kvcore.kernels import kivi_triton  # noqa: E402
from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.measure import environment  # noqa: E402


class _NoLaunch:
    """Stands in for kivi_ring_kernel: a launch that does nothing."""

    def __getitem__(self, grid):
        return lambda *a, **kw: None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--registers", default="120,112,104")
    args = ap.parse_args()
    bw = measure_bandwidth(torch)["read_bytes_per_s"]
    result: dict = {"env": environment("cuda", torch), "read_bytes_per_s": bw, "rows": []}
    ring = kivi_triton.kivi_ring_kernel
    for fmt in ("kivi2", "kivi4"):
        row: dict = {"format": fmt}
        s, moved = kivi_append_time(fmt, 8, 32768)
        row["whole"] = {"seconds": s, "bytes": moved, "fraction_of_read_bw": moved / s / bw}
        kivi_triton.kivi_ring_kernel = _NoLaunch()
        try:
            row["flush_only_seconds"] = kivi_append_time(fmt, 8, 32768)[0]
        finally:
            kivi_triton.kivi_ring_kernel = ring
        for r in (int(x) for x in args.registers.split(",") if x):
            s, _ = kivi_append_time(fmt, 8, 32768, max_registers=r)
            row[f"whole_r{r}"] = {"seconds": s, "fraction_of_read_bw": moved / s / bw}
        result["rows"].append(row)
        print(row, flush=True)
    write_json(args.out, "kivi-flush-parts.json", result)


if __name__ == "__main__":
    main()
