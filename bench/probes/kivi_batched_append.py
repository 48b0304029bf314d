"""KIVI appends of several sequences: one launch for all (KiviCache.write_appends, kernel v77)
against a launch a sequence (before v77), and a group's channel blocks shared among 2 or 4
programs and as many as the default rule (kivi.flush_parts) takes, in turns, on the decode benchmark's shape (8 KV heads of 128) and its bytes moved;
the bytes of one launch and of a launch a sequence checked equal first.

    python bench/probes/kivi_batched_append.py [--rounds 3] [--out DIR]

Writes kivi-batched-append.json into --out: per format and (sequences × tokens) the seconds
of each path in every round and the read-bandwidth fraction of the best.
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

from decode import HKV, D, kivi_append_time, kivi_same_bytes  # noqa: E402
from turns import in_turns, turns_row  # noqa: E402

from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.kernels.kivi import KiviCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402

#: (batch, tokens) as the decode benchmark's rows: min(16,384, batch · tokens) new tokens
#: over the first sequences, each up to ``tokens``
SHAPES = ((64, 4096), (16, 1024), (1, 4096), (1, 32768))

#: the launches timed: (name, a launch a sequence, programs sharing a group's channel blocks;
#: None: the default, flush_parts' rule)
VARIANTS = (("per_sequence", True, 1), ("one_launch", False, 1), ("parts_2", False, 2),
            ("parts_4", False, 4), ("default", False, None))


def same_bytes(fmt: str) -> bool:
    """Four sequences' appends of uneven lengths, in rounds: one launch a round against a launch
    a sequence."""
    g = torch.Generator(device="cuda").manual_seed(5)
    lens = [3000, 1, 1500, 700]
    k = torch.randn(4, 3000, HKV, D, device="cuda", generator=g).half()
    v = torch.randn(4, 3000, HKV, D, device="cuda", generator=g).half()
    one = KiviCache(fmt, 4, HKV, D, 3000, device="cuda")
    many = KiviCache(fmt, 4, HKV, D, 3000, device="cuda")
    a = 0
    for c in (700, 1, 159, 33, 1000, 1107):
        seqs = [s for s, n in enumerate(lens) if a < n]
        ks = [k[s, a:min(lens[s], a + c)] for s in seqs]
        vs = [v[s, a:min(lens[s], a + c)] for s in seqs]
        for s, kx, vx in zip(seqs, ks, vs, strict=True):
            one.append_triton(s, kx, vx)
        many.append_many(seqs, ks, vs)
        a += c
    torch.cuda.synchronize()
    return kivi_same_bytes(one, many)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    bw = measure_bandwidth(torch)
    out: dict = {"env": environment("cuda", torch), "bandwidth": bw, "rows": []}
    for fmt in ("kivi2", "kivi4"):
        out[f"{fmt}_identical"] = same_bytes(fmt)
        print(fmt, "one launch writes the bytes of a launch a sequence:", out[f"{fmt}_identical"])
        for batch, tokens in SHAPES:
            times, moved = in_turns(args.rounds, {
                name: partial(kivi_append_time, fmt, batch, tokens, per_sequence=per_sequence,
                              parts=parts) for name, per_sequence, parts in VARIANTS})
            out["rows"].append(turns_row(fmt, batch, tokens, moved, times,
                                         bw["read_bytes_per_s"]))
    Path(args.out, "kivi-batched-append.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
