"""KIVI's append on a GPU: the append kernel's bytes against the token-by-token torch append
(random fp16 rows, and rows on a coarse grid, whose quotients fall exactly on the rounding
midpoints; in one launch, and in two with the ring-writing programs first), and its throughput
(16,384 new tokens a call, as bench/decode.py times it; in one launch, in two, and with the
ring slots written by torch indexing after the launch).

    python bench/probes/kivi_append.py [--out DIR] [--warps 1,2,8]

Writes kivi-append.json (with --old MODULE: kivi-append-NAME.json, NAME the module's last part).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import HKV, D, kivi_append_time, kivi_appended, write_json  # noqa: E402

from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def identical(fmt: str, grid: bool, writers_first: bool = False) -> dict[str, float]:
    """Share of each plane's elements the kernel's append writes as the torch append does."""
    g = torch.Generator(device="cuda").manual_seed(1)
    lens = [1000, 1, 777]
    k = torch.randn(len(lens), max(lens), HKV, D, device="cuda", generator=g)
    v = torch.randn(len(lens), max(lens), HKV, D, device="cuda", generator=g)
    if grid:
        k, v = torch.round(k * 4) / 4, torch.round(v * 4) / 4
    return kivi_appended(fmt, k.half(), v.half(), lens, writers_first=writers_first)[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--old", help="a module holding an earlier kivi_flush_kernel (of the same "
                    "arguments) to time instead")
    ap.add_argument("--warps", default="", help="flush warps to time besides the default, "
                    "comma-separated")
    ap.add_argument("--registers", default="", help="flush register caps to time besides the "
                    "default, comma-separated")
    args = ap.parse_args()
    if args.old:
        import importlib

        from kvcore.kernels import kivi_triton

        old = importlib.import_module(args.old).kivi_flush_kernel

        class Launch:
            # HW goes through to a kernel that takes it (its GPU path), is dropped for one
            # that does not
            def __getitem__(self, grid):
                if "HW" in old.arg_names:
                    return old[grid]
                return lambda *a, HW=None, **kw: old[grid](*a, **kw)

        kivi_triton.kivi_flush_kernel = Launch()
    bw = measure_bandwidth(torch)["read_bytes_per_s"]
    result: dict = {"env": environment("cuda", torch), "read_bytes_per_s": bw, "rows": []}
    for fmt in ("kivi2", "kivi4"):
        row = {"format": fmt, "identical_random": identical(fmt, False),
               "identical_grid": identical(fmt, True),
               "identical_grid_two_launches": identical(fmt, True, writers_first=True)}
        for batch, tokens in ((8, 32768), (1, 4096)):
            # the default launch, the same in two launches (the ring-writing programs first),
            # the ring slots by torch indexing, then each register cap and warp count asked for
            runs = [("", {}), ("_two_launches", {"writers_first": True}),
                    ("_torch_ring", {"ring_kernel": False})]
            runs += [(f"_r{r}", {"max_registers": int(r)}) for r in args.registers.split(",") if r]
            runs += [(f"_w{w}", {"num_warps": int(w)}) for w in args.warps.split(",") if w]
            for suffix, launch in runs:
                s, moved = kivi_append_time(fmt, batch, tokens, **launch)
                row[f"append_b{batch}_{tokens}{suffix}"] = {"seconds": s, "bytes": moved,
                                                            "fraction_of_read_bw": moved / s / bw}
        result["rows"].append(row)
        print(row, flush=True)
    write_json(args.out, f"kivi-append{'-' + args.old.split('.')[-1] if args.old else ''}.json",
               result)


if __name__ == "__main__":
    main()
