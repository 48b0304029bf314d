"""Every catalog model in every kernel format on a GPU: ``kvcore.measure`` on a short context
(the first layers of each model), which builds each layer kind's cache, appends to it and runs
its decode with the model's own query heads under the default launch. Catches a shape or
launch the compiler cannot lay out, or a resource limit, before a user meets it; checks the
tensors' bytes against the prediction.

    python bench/catalog_check.py [--out DIR] [--workers 16] [--context 256] [--layers 6]
        [--models a,b] [--formats f16,q4_0,…] [--device cpu] [--per-process 1]

Work is spread over worker processes (each on one GPU, round robin), so that the kernels'
compiles run side by side. Writes catalog.json: one row per (model, format) with "exact"
(tensor bytes equal the prediction) or the error, and the environment.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _init(gpus: int) -> None:
    """A worker takes one GPU (round robin by worker number), before torch."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str((mp.current_process()._identity[0] - 1) % gpus)


def gpu_pool(workers: int, gpus: int, per_process: int = 1):
    """A pool of ``workers`` spawned processes spread over ``gpus`` GPUs, each replaced by a
    fresh one after ``per_process`` runs: a fault (an illegal address) poisons its process's
    CUDA context, so with 1 no run fails for another's fault."""
    return mp.get_context("spawn").Pool(workers, initializer=_init, initargs=(max(1, gpus),),
                                        maxtasksperchild=per_process)


def _run(job: tuple[str, str, int, int, str]) -> dict:
    model, fmt, context, layers, device = job
    from kvcore import KvplanError, load_model
    from kvcore.measure import measure

    t0 = time.perf_counter()
    row: dict = {"model": model, "format": fmt}
    try:
        m = measure(load_model(model), context=context, sequences=2, kv_k=fmt, device=device,
                    steps=2, max_layers=layers, progress=None)
        row.update(exact=m.allocated_bytes == m.predicted_bytes,
                   allocator_exact=m.allocator_bytes == m.predicted_allocator_bytes,
                   query_heads=m.decode.get("query_heads"),
                   step_ms=m.decode.get("seconds_per_step", 0) * 1e3)
    except KvplanError as exc:
        row["refused"] = str(exc)
    except Exception as exc:  # noqa: BLE001 (a failure to record, whatever it is)
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    row["seconds"] = time.perf_counter() - t0
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--models")
    ap.add_argument("--formats")
    ap.add_argument("--device", default="cuda", help="cpu: the reference path (a smoke test)")
    ap.add_argument("--per-process", type=int, default=1,
                    help="runs a worker process takes before a fresh one replaces it")
    args = ap.parse_args()
    import torch

    from kvcore.catalog import model_catalog
    from kvcore.kernels.cache import PAGED
    from kvcore.measure import environment

    gpus = torch.cuda.device_count() if args.device == "cuda" else 1
    env = environment(args.device, torch)
    models = args.models.split(",") if args.models else [e.id for e in model_catalog()]
    formats = args.formats.split(",") if args.formats else [*PAGED, "kivi2", "kivi4"]
    jobs = [(m, f, args.context, args.layers, args.device) for m in models for f in formats]
    rows = []
    with gpu_pool(args.workers, gpus, args.per_process) as pool:
        for row in pool.imap_unordered(_run, jobs):
            rows.append(row)
            bad = row.get("error") or (not row.get("exact", True) and "bytes differ")
            if bad:
                print(row["model"], row["format"], bad, flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows.sort(key=lambda r: (r["model"], r["format"]))
    (out / "catalog.json").write_text(json.dumps({"env": env, "context": args.context,
                                                  "layers": args.layers, "rows": rows},
                                                 indent=1))
    errors = [r for r in rows if "error" in r]
    wrong = [r for r in rows if r.get("exact") is False]
    print(f"{len(rows)} runs: {len(rows) - len(errors) - len(wrong)} ok "
          f"({sum('refused' in r for r in rows)} refused with a reason), {len(errors)} errors, "
          f"{len(wrong)} with other bytes than predicted")


if __name__ == "__main__":
    main()
