"""A probe: q4_0's Gluon kernel where v55 runs 8 programs a multiprocessor (short splits),
without PIPE (168 registers; decode's launch until v56) against its PIPE form (each tile's
scores beside the tile before's value product), which needs more than 168 registers without
spilling and may take up to 256 where only 8 reside (``maxnreg`` 232: 204 registers, no
stack, under triton 3.6).

    python bench/probes/q4_0_pipe8.py [--out DIR] [--shapes BxT,…] [--rounds 3]

Each round times the default and the PIPE form in turns (the order reversed every other
round), records the largest difference of the PIPE form's output from the default's and each
compiled variant's registers and spilled bytes. Writes q4_0-pipe8.json after every row. Needs a
GPU.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import compiled, filled_copies, step_inputs, time_steps, write_json  # noqa: E402

from kvcore.kernels import gluon_q4_0  # noqa: E402
from kvcore.measure import environment  # noqa: E402

PLAIN = (gluon_q4_0.decode_gluon, gluon_q4_0.launch_consts)


def pipe(on: bool | None, regs: int) -> None:
    """Decode's q4_0 Gluon launch with PIPE and ``regs`` registers at most (on), without PIPE
    (off: v55's launch), or as decode launches it (None)."""
    gluon_q4_0.decode_gluon, gluon_q4_0.launch_consts = PLAIN
    if on is None:
        return

    def consts(fmt: str, group: int, per_sm: int = 0) -> dict:
        return {**PLAIN[1](fmt, group, per_sm), "PIPE": on}

    gluon_q4_0.launch_consts = consts
    if on:
        gluon_q4_0.decode_gluon = functools.partial(PLAIN[0], max_registers=regs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="1x65536,1x131072,4x32768,2x32768")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--registers", type=int, default=232)
    args = ap.parse_args()
    doc: dict = {"env": environment("cuda", torch), "registers_cap": args.registers, "rows": []}
    for shape in args.shapes.split(","):
        batch, tokens = (int(x) for x in shape.split("x"))
        caches = filled_copies("q4_0", batch, tokens)
        table, seq, q = step_inputs(batch, tokens)
        assert caches[0].takes_gluon(q, seq, tokens), "not the Gluon kernel's launch"
        pipe(False, 0)
        base = caches[0].decode(q, table, seq, max_len=tokens).clone()
        pipe(None, 0)
        row: dict = {"format": "q4_0", "batch": batch, "tokens": tokens, "default": [],
                     "pipe": []}
        for r in range(args.rounds):
            for on in ((False, True) if r % 2 == 0 else (True, False)):
                pipe(on, args.registers)
                try:
                    if on:
                        out = caches[0].decode(q, table, seq, max_len=tokens)
                        row["max_abs"] = float((out - base).abs().max())
                    row["pipe" if on else "default"].append(time_steps(caches, batch, tokens))
                finally:
                    pipe(None, 0)
        doc["rows"].append(row)
        doc["compiled"] = list(compiled(gluon_q4_0.q4_0_swapped_kernel).values())
        print(batch, tokens, "default", [f"{t * 1e6:.1f}" for t in row["default"]], "pipe",
              [f"{t * 1e6:.1f}" for t in row["pipe"]], f"max_abs {row['max_abs']:.2e}",
              flush=True)
        write_json(args.out, "q4_0-pipe8.json", doc)
        del caches
        torch.cuda.empty_cache()
    print("compiled [registers, spilled bytes, warps, shared]", doc["compiled"])


if __name__ == "__main__":
    main()
