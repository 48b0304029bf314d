"""KIVI's append where the launch has fewer programs than a wave holds (one sequence, 4,096
new tokens: 1,032 one-warp programs on 8 KV heads of 128): warps a program against parts (a
group's channel blocks shared among programs), in turns, with the default launch
(FLUSH_LAUNCH's warps, flush_parts' parts) among them; the decode benchmark's bytes moved.

    python bench/probes/kivi_short_append.py [--shapes 1x4096,2x4096] [--configs 1/1,2/1,…]
        [--rounds 3] [--out DIR]

A config is warps/parts[/registers[/stages]] ("d" for the default of any; registers: the
cap of a thread's, 0 none; stages: the channel blocks in flight, kivi.FLUSH_STAGES and
FLUSH_ONE_BLOCK's). Writes kivi-short-append.json into
--out: per format and shape the seconds of each config in every round and the read-bandwidth
fraction of the best.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import kivi_append_time  # noqa: E402
from turns import in_turns, turns_row  # noqa: E402

from kvcore.kernels import kivi  # noqa: E402
from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.measure import environment  # noqa: E402

CONFIGS = "d/d,1/1,1/2,1/4,2/1,2/2,2/4,4/1,4/2"


def parse(config: str) -> tuple[int | None, ...]:
    """(warps, parts, registers, stages), None for a default."""
    fields = (config.split("/") + ["d", "d"])[:4]
    return tuple(None if f == "d" else int(f) for f in fields)


def timed(fmt: str, batch: int, tokens: int, config: str) -> tuple[float, int]:
    warps, parts, registers, stages = parse(config)
    default, one = kivi.FLUSH_STAGES, kivi.FLUSH_ONE_BLOCK
    if stages is not None:
        kivi.FLUSH_STAGES, kivi.FLUSH_ONE_BLOCK = stages, (one[0], stages)
    try:
        return kivi_append_time(fmt, batch, tokens, num_warps=warps, parts=parts,
                                max_registers=registers)
    finally:
        kivi.FLUSH_STAGES, kivi.FLUSH_ONE_BLOCK = default, one


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="kivi2,kivi4")
    ap.add_argument("--shapes", default="1x4096,2x4096")
    ap.add_argument("--configs", default=CONFIGS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    configs = args.configs.split(",")
    bw = measure_bandwidth(torch)
    out: dict = {"env": environment("cuda", torch), "bandwidth": bw, "rows": []}
    for fmt in args.formats.split(","):
        for shape in args.shapes.split(","):
            batch, tokens = (int(v) for v in shape.split("x"))
            times, moved = in_turns(args.rounds, {
                c: partial(timed, fmt, batch, tokens, c) for c in configs})
            out["rows"].append(turns_row(fmt, batch, tokens, moved, times,
                                         bw["read_bytes_per_s"]))
    Path(args.out, "kivi-short-append.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
