"""KIVI's flush with each lane row of its one-warp tile holding consecutive tokens
(kivi.FLUSH_LANE_TOKENS, kivi_flush_kernel's LANE_TOKENS: a key byte's codes packed in one
thread) against the tile in token order, in turns, on the decode benchmark's append shapes;
first the bytes of both against each other on the GPU.

    python bench/probes/kivi_lane_tokens.py [--shapes 1x4096,64x4096,8x32768] [--rounds 3]
        [--out DIR]

Writes kivi-lane-tokens.json into --out: whether the bytes agree, then per format and shape
the seconds of each variant in every round and the read-bandwidth fraction of its best.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import kivi_append_time  # noqa: E402
from turns import in_turns, turns_row  # noqa: E402

from kvcore.kernels import kivi  # noqa: E402
from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.kernels.kivi import KiviCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def timed(on: bool, fmt: str, batch: int, tokens: int) -> tuple[float, int]:
    kivi.FLUSH_LANE_TOKENS = on
    return kivi_append_time(fmt, batch, tokens)


def same_bytes(fmt: str) -> bool:
    """Two appends (4,000 tokens, then 1,000 more) to 3 sequences of 8 heads of 128, one
    cache per variant: every plane equal."""
    g = torch.Generator(device="cuda").manual_seed(5)
    caches = []
    for on in (False, True):
        kivi.FLUSH_LANE_TOKENS = on
        cache = KiviCache(fmt, 3, 8, 128, 8192, device="cuda")
        g.manual_seed(5)
        for n in (4000, 1000):
            ks = [torch.randn(n, 8, 128, device="cuda", generator=g).half() for _ in range(3)]
            vs = [torch.randn(n, 8, 128, device="cuda", generator=g).half() for _ in range(3)]
            cache.append_many([0, 1, 2], ks, vs)
        caches.append(cache)
    torch.cuda.synchronize()
    return all(torch.equal(a, b) for a, b in zip(caches[0].tensors(), caches[1].tensors(),
                                                  strict=True))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="kivi2,kivi4")
    ap.add_argument("--shapes", default="1x4096,64x4096,8x32768")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    bw = measure_bandwidth(torch)
    out: dict = {"env": environment("cuda", torch), "bandwidth": bw, "same_bytes": {},
                 "rows": []}
    for fmt in args.formats.split(","):
        out["same_bytes"][fmt] = same_bytes(fmt)
        print(f"{fmt} bytes identical: {out['same_bytes'][fmt]}")
    for fmt in args.formats.split(","):
        for shape in args.shapes.split(","):
            batch, tokens = (int(v) for v in shape.split("x"))
            times, moved = in_turns(args.rounds, {
                name: (lambda on=on, b=batch, t=tokens, f=fmt: timed(on, f, b, t))
                for name, on in (("token_order", False), ("lane_tokens", True))})
            out["rows"].append(turns_row(fmt, batch, tokens, moved, times,
                                         bw["read_bytes_per_s"]))
    Path(args.out, "kivi-lane-tokens.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
