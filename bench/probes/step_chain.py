"""How a whole model's decode step is chained: ``kvplan measure``'s plan timed with each
layer's kernel writing into its own output or filling a new one with NaN first (a launch
between layers), each with and without programmatic dependent launches.

    python bench/probes/step_chain.py [--out DIR] [--plans MODEL:K:CTX:SEQS,...] [--given-only]

Prints the step and each layer kind's share per variant, writes step_chain.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import kvcore.measure as m  # noqa: E402
from kvcore import load_model  # noqa: E402

PLANS = "gpt-oss-120b:q4_0:131072:4,llama-3.1-8b:q4_0:131072:1,qwen3-8b:tbq4:131072:4"


def variant_step(given_out: bool, pdl: bool):
    """A decode_step whose kernel calls take ``out`` (or not) and ``pdl``."""
    def step(cache, sequences, hq, head_dim, tokens, device, torch_, *, kernel):
        q = torch_.randn(sequences, hq, head_dim, device=device).half()
        out = (torch_.empty(sequences, hq, cache.head_dim_v, dtype=torch_.float32,
                            device=device) if given_out else None)
        if hasattr(cache, "n_quant"):
            return lambda: cache.decode(q, out=out, pdl=pdl)
        table = torch_.arange(sequences, device=device, dtype=torch_.int32).reshape(-1, 1)
        lens = torch_.full((sequences,), tokens, device=device, dtype=torch_.int32)
        return lambda: cache.decode(q, table, lens, max_len=tokens, out=out, pdl=pdl)
    return step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--plans", default=PLANS)
    ap.add_argument("--given-only", action="store_true",
                    help="only the variants whose kernels write into a given output")
    args = ap.parse_args()
    rows = []
    for plan in args.plans.split(","):
        name, fmt, ctx, seqs = plan.split(":")
        spec = load_model(name)
        for given_out in (True,) if args.given_only else (True, False):
            for pdl in (True, False):
                m.decode_step = variant_step(given_out, pdl)
                r = m.measure(spec, context=int(ctx), sequences=int(seqs), kv_k=fmt,
                              device="cuda", progress=None)
                d = r.decode
                rows.append({"model": name, "kv": fmt, "context": int(ctx),
                             "sequences": int(seqs), "out_given": given_out, "pdl": pdl,
                             "seconds_per_step": d["seconds_per_step"],
                             "per_kind_seconds": d["per_kind_seconds"]})
                kinds = " ".join(f"{k} {v * 1e3:.3f}" for k, v in d["per_kind_seconds"].items())
                print(f"{name} {fmt} {ctx}x{seqs} out={given_out!s:5} pdl={pdl!s:5} "
                      f"step {d['seconds_per_step'] * 1e3:.3f} ms ({kinds})", flush=True)
                del r
                torch.cuda.empty_cache()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "step_chain.json").write_text(json.dumps(
        {"env": m.environment("cuda", torch), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
