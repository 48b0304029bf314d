"""The append kernel of this tree against an earlier commit's (its kvcore/kernels/triton_ops.py,
carried as a file: `mkdir -p .base && git show COMMIT:kvcore/kernels/triton_ops.py >
.base/triton_ops.py`), in turns, on the decode benchmark's append shapes (8 KV heads of 128,
fp16 rows, K and V in one launch, min(16,384, batch · tokens) new tokens a call into a filled
cache); the bytes of both checked against the torch reference first.

    python bench/probes/append_base.py --base .base/triton_ops.py [--formats q4_0,nvfp4]
        [--shapes 1x4096,8x32768] [--rounds 3] [--floor-add] [--out DIR]

--floor-add: also this tree's kernel with kvcore.kernels.cache.APPEND_Q4_FLOOR_ADD on.

Writes append-base.json into --out: per format and shape the seconds of each kernel in every
round and the read-bandwidth fraction of the best.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import HKV, D, append_time  # noqa: E402
from turns import in_turns, turns_row  # noqa: E402

from kvcore.kernels import cache as cache_module  # noqa: E402
from kvcore.kernels import triton_ops  # noqa: E402
from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def load_base(path: str):
    """The earlier triton_ops module, imported beside this tree's (its relative imports resolve
    in kvcore.kernels)."""
    spec = importlib.util.spec_from_file_location("kvcore.kernels._base_triton_ops", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def identical(fmt: str) -> bool:
    """The kernel in use writes the torch reference's bytes for random rows and for rows of a
    few repeated magnitudes (ties of both signs)."""
    g = torch.Generator(device="cuda").manual_seed(3)
    rows = [torch.randn(3000, HKV, D, device="cuda", generator=g).half() * 3,
            (torch.randint(-3, 4, (3000, HKV, D), device="cuda", generator=g) * 0.5).half()]
    same = True
    for x in rows:
        kern = LayerCache(fmt, fmt, 1, 4096, HKV, D, device="cuda")
        refc = LayerCache(fmt, fmt, 1, 4096, HKV, D, device="cuda")
        t = torch.arange(3000, device="cuda")
        kern.append(x, x, torch.zeros_like(t), t)
        refc.append_ref(x, x, torch.zeros_like(t), t)
        same &= all(torch.equal(p.view(torch.uint8), refc.k.planes[n].view(torch.uint8))
                    for n, p in kern.k.planes.items())
    return same


def use(variant: tuple) -> None:
    """A variant (append kernel, cache.APPEND_Q4_FLOOR_ADD) in use."""
    triton_ops.append_kernel, cache_module.APPEND_Q4_FLOOR_ADD = variant


def timed_with(variant: tuple, cache: LayerCache, batch: int, tokens: int
               ) -> tuple[float, int]:
    """decode.append_time's figures with ``variant`` in use."""
    use(variant)
    return append_time(cache, batch, tokens, torch.float16)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="an earlier kvcore/kernels/triton_ops.py")
    ap.add_argument("--formats", default="q4_0")
    ap.add_argument("--shapes", default="1x4096,8x32768")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--floor-add", action="store_true",
                    help="also this tree's kernel with APPEND_Q4_FLOOR_ADD on (q4_0)")
    args = ap.parse_args()
    new = triton_ops.append_kernel
    kernels = {"base": (load_base(args.base).append_kernel, False), "new": (new, False)}
    if args.floor_add:
        kernels["new_floor_add"] = (new, True)
    bw = measure_bandwidth(torch)
    out: dict = {"env": environment("cuda", torch), "bandwidth": bw, "base": args.base,
                 "rows": [], "identical": {}}
    for fmt in args.formats.split(","):
        for name, variant in kernels.items():
            use(variant)
            out["identical"][f"{fmt} {name}"] = identical(fmt)
        print(fmt, "bytes equal to the reference:", out["identical"])
        for shape in args.shapes.split(","):
            batch, tokens = (int(v) for v in shape.split("x"))
            cache = LayerCache(fmt, fmt, batch, tokens, HKV, D, device="cuda")
            times, moved = in_turns(args.rounds, {
                name: partial(timed_with, variant, cache, batch, tokens)
                for name, variant in kernels.items()})
            del cache
            out["rows"].append(turns_row(fmt, batch, tokens, moved, times,
                                         bw["read_bytes_per_s"]))
            # after each row, so that a run cut short keeps what it timed
            Path(args.out, "append-base.json").write_text(json.dumps(out, indent=1))
    use(kernels["new"])


if __name__ == "__main__":
    main()
