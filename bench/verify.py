"""Measure many plans on this machine's GPU and write docs/VERIFIED.md.

    python bench/verify.py [--out DIR] [--quick]

Dense, GQA, MLA, sliding-window and hybrid models, every kernel format, contexts from 4k to
the largest that fits, several sequence counts. Each row: predicted bytes against the tensors,
the allocator and the driver, and the decode figures. Results are also stored in the
measurement database and written as JSON next to the markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvcore import load_model  # noqa: E402
from kvcore.measure import measure, token_time  # noqa: E402
from kvcore.units import format_bytes  # noqa: E402

# (model, K format, V format, context, sequences, layers to measure or None for all)
PLANS = [
    ("llama-3.1-8b", "f16", "f16", 4096, 8, None),
    ("llama-3.1-8b", "q8_0", "q8_0", 32768, 4, None),
    ("llama-3.1-8b", "q4_0", "q4_0", 131072, 1, None),
    ("llama-2-7b-hf", "bf16", "bf16", 8192, 2, None),
    ("qwen3-8b", "fp8_pth", "fp8_pth", 65536, 2, None),
    ("qwen3-8b", "tbq4", "tbq4", 131072, 4, None),
    ("qwen3-8b", "q8_0", "tbq3", 131072, 1, None),
    ("qwen3-32b", "nvfp4", "nvfp4", 32768, 4, None),
    ("qwen3.5-27b", "tbq4", "tbq4", 262144, 1, None),
    ("qwen3.5-27b", "q8_0", "q8_0", 262144, 1, None),
    ("qwen3.5-27b", "f16", "f16", 65536, 4, None),
    ("qwen3-next-80b-a3b-instruct", "fp8_pth", "fp8_pth", 262144, 1, None),
    ("deepseek-v2-lite-chat", "f16", "f16", 32768, 4, None),
    ("deepseek-v3", "q8_0", "q8_0", 131072, 1, 8),
    ("gpt-oss-20b", "f16", "f16", 131072, 8, None),
    ("gpt-oss-120b", "q4_0", "q4_0", 131072, 4, None),
    ("gemma-3-27b-it", "q8_0", "q8_0", 131072, 2, None),
    ("gemma-2-9b", "tbq3", "tbq3", 8192, 16, None),
    ("mistral-7b-v0.1", "f16", "f16", 32768, 8, None),
    ("llama-3.1-70b", "kivi2", "kivi2", 8192, 1, 4),
    ("qwen3-8b", "kivi4", "kivi4", 4096, 2, 8),
    ("nemotron-h-56b-base-8k", "q8_0", "q8_0", 65536, 2, None),
    ("llama-4-scout-17b-16e-instruct", "tbq4", "tbq4", 1048576, 1, None),
    # MLA latents in the rotated and the KIVI formats (K only), heads 96 wide: added after the
    # v12 run (docs/VERIFIED.md shows the 23 plans above until the next run)
    ("deepseek-v2-lite-chat", "tbq4", "tbq4", 32768, 2, None),
    ("deepseek-v2-lite-chat", "kivi2", "kivi2", 8192, 1, 4),
    ("phi-3-mini-4k-instruct", "kivi4", "kivi4", 4096, 2, 8),
]


def row_md(d: dict) -> str:
    dec = d["decode"]
    alloc = d["allocator_bytes"]
    pa = d["predicted_allocator_bytes"]
    drv = d["driver_bytes"]
    res = d["allocator_reserved_bytes"]
    frac = dec.get("fraction_of_read_bandwidth")
    sp = dec.get("speedup_vs_f16_sdpa")
    rr = d["allocator_reserved_bytes"] - d["predicted_reserved_bytes"]
    layers = (f"{d['layers_measured']}/{d['layers_total']}"
              if d["layers_measured"] < d["layers_total"] else "all")
    share = dec.get("attention_share")
    if share is None and "read_bandwidth_bytes_per_s" in dec:
        share = token_time(load_model(d["model"]), dec, d["scale"]).get("attention_share")
    return (f"| {d['model']} | {d['kv_k']}/{d['kv_v']} | {d['context']:,} × {d['sequences']} | "
            f"{layers} | {format_bytes(d['predicted_bytes'], 4)} | "
            f"{d['allocated_bytes'] - d['predicted_bytes']:+,} B | "
            f"{(alloc - pa) if alloc is not None else '–':+} B | {rr / 2**20:+.0f} MiB | "
            f"{(drv - res) / 2**20 if drv is not None else 0:+.1f} MiB | "
            f"{dec.get('seconds_per_step', 0) * 1e3:.3f} | "
            f"{frac * 100 if frac else 0:.0f}% | " + (f"{sp:.2f}× |" if sp else "– |")
            + (f" {share:.0%} |" if share is not None else " – |"))


def headline(rows: list[dict]) -> list[str]:
    """Counts over the measured plans, computed from the rows."""
    ok = [r for r in rows if "error" not in r]
    n = len(ok)
    tensors = sum(r["allocated_bytes"] == r["predicted_bytes"] for r in ok)
    alloc = sum(r["allocator_bytes"] == r["predicted_allocator_bytes"] for r in ok)
    res_exact = sum(r["allocator_reserved_bytes"] == r["predicted_reserved_bytes"] for r in ok)
    res_seg = sum(abs(r["allocator_reserved_bytes"] - r["predicted_reserved_bytes"]) <= 2 << 20
                  for r in ok)
    drv = sum(r["driver_bytes"] == r["allocator_reserved_bytes"] for r in ok)
    total = sum(r["predicted_bytes"] for r in ok)
    formats = sorted({f for r in ok for f in (r["kv_k"], r["kv_v"])})
    return [
        f"**{n} of {len(rows)} plans measured** ({format_bytes(total, 2)} of cache in all; "
        f"formats {', '.join(formats)}):",
        "",
        f"- tensor bytes equal to kvplan's prediction, to the byte: **{tensors} of {n}**;",
        f"- the caching allocator's `memory_allocated` equal to kvplan's allocator model: "
        f"**{alloc} of {n}**;",
        f"- `memory_reserved` equal to the model in {res_exact} of {n}, within one 2 MiB "
        f"small-block segment in {res_seg} of {n};",
        f"- the driver's `mem_get_info` delta equal to the reserved memory in {drv} of {n}.",
    ]


NOTES = """Notes on the columns:

- *allocated / reserved − model*: kvplan's model of the CUDA caching allocator (512-byte
  rounding, 2 MiB and 20 MiB segments, best fit, a block taken whole when no more than 1 MiB
  would be left) starts from the free blocks the allocator already holds (its memory
  snapshot), since plans run one after another in one process.
- *driver − reserved*: before its readings each measurement runs the same code once on a tiny
  cache, so the CUDA libraries' lazily loaded code is not counted as cache memory.
- *decode step*: every measured attention layer in turn, with the model's own query heads
  (DeepSeek-V3: 128 over its latent; runs before v15 used four a KV head), the whole step
  replayed from a CUDA graph as serving engines run decode, each layer's kernel writing into
  an output of its own (runs before 2026-12-01T17:00 filled a new output with NaN in every
  layer, a launch more, and gave steps up to 8% longer: Qwen3-8B's q8_0/tbq3 3.978 ms then,
  3.694 now; without that launch between layers, a merge that let the next layer's split
  kernel in at its start had it placed unevenly, until the merge let it in after its last
  store: gpt-oss-120b's q4_0 3.901 → 3.283 ms, `bench/results/step-chain-h200.json`); *of
  read bw* is cache bytes over that time against the
  read bandwidth measured in the same process; *vs fp16 SDPA* compares with torch's
  `scaled_dot_product_attention` over an fp16 cache of the same shape, timed the same way (–
  for MLA, which has no separate V). Kernel speed alone is in
  `bench/results/decode-h200-v33.md` and `decode-h200-v34-stages.md` (GQA 32/8 × 128, the
  same kernel and launches). An earlier run of the
  same plans with decode kernel v5 (`bench/results/verify-h200.json`) launched every step from
  Python and gave SDPA one tensor for K and V (V's tiles then came from L2, so the baseline read
  half the bytes): its *vs fp16 SDPA* figures were too low by up to half.
- This run is kernel v35: q4_0, nvfp4 and tbq3 swapped in one-stage programs since v34
  (Llama-3.1-8B's q4_0 2.407 → 2.151 ms, Qwen3-32B's nvfp4 5.556 → 5.328 against v33's run),
  and one stage on heads wider than 128 lanes where it was faster
  (`bench/results/decode-sweep-wide-v35-h200.json`, -v35b-, -v35c-: Qwen3.5-27B's tbq4 at
  262k 4.375 → 3.857 ms, its q8_0 3.801 → 3.647; DeepSeek-V2-Lite's tbq4 2.670 → 2.439;
  DeepSeek-V3's q8_0 over 128 query heads 4.753 → 4.676).
- *attention share of a token*: the whole model's attention time (the measured step scaled by
  the whole cache over the measured part) against that plus the checkpoint's active weights
  read once at the measured bandwidth: how much of a generated token's time the cache costs.
"""


def render_tp(path: Path) -> list[str]:
    d = json.loads(path.read_text())
    r0 = d["ranks"][0]
    lines = [f"**{r0['model']}**, {r0['kv_k']}/{r0['kv_v']}, {r0['context']:,} tokens × "
             f"{r0['sequences']}, tp {d['tp']} on {d['device']}, "
             f"{r0.get('env', {}).get('date', 'date not recorded')}:", ""]
    for r in d["ranks"]:
        same = "equal" if r["allocated_bytes"] == r["predicted_bytes"] else "DIFFERENT"
        alloc = ("equal" if r["allocator_bytes"] == r["predicted_allocator_bytes"]
                 else f"{r['allocator_bytes'] - r['predicted_allocator_bytes']:+,} B")
        lines.append(f"- rank {r['rank']}: predicted shard {format_bytes(r['predicted_bytes'], 4)}"
                     f", tensors {format_bytes(r['allocated_bytes'], 4)} ({same}); allocator "
                     f"{alloc}; decode step {r['decode']['seconds_per_step'] * 1e3:.2f} ms")
    return lines + [""]


def remeasured(rows: list[dict]) -> list[str]:
    """A paragraph naming the rows measured again after the run the page is from (a row's
    ``remeasured`` key says why; its ``env`` gives the date), or nothing."""
    again = [r for r in rows if r.get("remeasured")]
    if not again:
        return []
    return ["Measured again after that run: " + "; ".join(
        f"{r['model']} {r['kv_k']}/{r['kv_v']} {r['context']:,} × {r['sequences']} on "
        f"{r['env']['date']} ({r['remeasured']})" for r in again) + ".", ""]


def render(rows: list[dict], tp_files: list[Path] | None = None) -> str:
    env = next((r["env"] for r in rows if "env" in r), {})
    device = next((r["device"] for r in rows if "device" in r), "unknown")
    md = ["# Verified on real hardware", "",
          f"{device}; torch {env.get('torch')}, triton {env.get('triton')}, "
          f"Python {env.get('python')}, {env.get('date')}. Reproduce: `python bench/verify.py` "
          "on a CUDA machine (`bash bench/gpu_verify.sh` runs them all in one call, shared "
          "between two GPUs where the machine has them; "
          "`bench/gpu_run.sh` runs it beside the tensor-parallel check).",
          "", *headline(rows), "", *remeasured(rows),
          "Tensor bytes must equal the prediction exactly; the allocator's `memory_allocated`"
          " must equal kvplan's allocator model; the driver's delta is shown against the "
          "reserved memory.", "",
          "| model | K/V | context × seqs | layers | predicted | tensors − predicted | "
          "allocated − model | reserved − model | driver − reserved | decode step ms | "
          "of read bw | vs fp16 SDPA | attention share of a token |",
          "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            md.append(f"| {r['model']} | {r['kv_k']}/{r['kv_v']} | {r['context']:,} × "
                      f"{r['sequences']} | failed: {r['error']} |||||||||")
        else:
            md.append(row_md(r))
    md += ["", NOTES]
    if tp_files:
        md += ["## Tensor parallel: one process per GPU", "",
               "`kvplan measure MODEL --tp 2` spreads the cache over two GPUs (NCCL, one process "
               "each); each rank's shard is compared with the per-GPU figure of the tensor-"
               "parallel plan.", ""]
        for f in tp_files:
            md += render_tp(f)
    return "\n".join(md).rstrip() + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--start", type=int, default=0, help="first plan (0-based)")
    ap.add_argument("--stop", type=int, default=None, help="stop before this plan (with "
                    "--start: a share of the plans, e.g. one per GPU)")
    ap.add_argument("--db", default=None)
    ap.add_argument("--render", metavar="JSON", help="write VERIFIED.md from a verify.json")
    ap.add_argument("--tp-json", nargs="*", default=[], help="kvplan measure --tp --json "
                    "outputs to add (with --render)")
    args = ap.parse_args()
    if args.render:
        rows = json.loads(Path(args.render).read_text())
        print(render(rows, [Path(p) for p in args.tp_json]), end="")
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    plans = (PLANS[:4] if args.quick else PLANS)[args.start:args.stop]
    for model, kk, kv, ctx, seqs, layers in plans:
        print(f"{model} {kk}/{kv} {ctx}×{seqs}", flush=True)
        try:
            m = measure(load_model(model), context=ctx, sequences=seqs, kv_k=kk, kv_v=kv,
                        device="cuda", steps=20, max_layers=layers, progress=None)
        except Exception as exc:  # record the failure and go on with the next plan
            print(f"  failed: {exc}", flush=True)
            rows.append({"model": model, "kv_k": kk, "kv_v": kv, "context": ctx,
                         "sequences": seqs, "error": str(exc)})
            continue
        d = m.to_dict()
        rows.append(d)
        print("  " + row_md(d), flush=True)
        (out / "verify.json").write_text(json.dumps(rows, indent=2))
        import torch

        torch.cuda.empty_cache()
    (out / "VERIFIED.md").write_text(render(rows))
    print(render(rows))

if __name__ == "__main__":
    main()
