"""A probe: the Gluon decode kernel (kvcore/kernels/gluon_q4_0.py) of this tree against the same
file from an earlier commit (the base), in turns on one card, for each format it decodes.

    git show COMMIT:kvcore/kernels/gluon_q4_0.py > .base/gluon_q4_0.py
    python bench/probes/base_turns.py --base .base/gluon_q4_0.py [--formats q4_0,q8_0,…]
        [--shapes 1x131072,8x131072,…] [--rounds 3] [--out DIR]

The base file is loaded as a module of kvcore.kernels beside this tree's (its relative imports
are this tree's cache and ops: only the kernel file differs). First a check on small paged
caches (pages of 32, 64 and 96 tokens, a shuffled block table, lengths that end mid-tile,
groups of 4, 8 and 16), each tree's kernel launched directly at 1 and 8 programs a
multiprocessor (long splits over many pages, short ones): its output against
LayerCache.decode_ref and against the other tree's (a change to how tiles are addressed leaves the arithmetic as it was: the two outputs
should be equal). Then per format and shape each round times decode under the base kernel and
under this tree's in turns (the order reversed every other round), as bench/decode.py times a
step (CUDA graph over cache copies). Writes base-turns.json after every row. Needs a GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import math
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import (  # noqa: E402
    compiled,
    fill_paged,
    filled_copies,
    step_inputs,
    time_steps,
    write_json,
)

from kvcore.kernels import gluon_q4_0  # noqa: E402
from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402

NEW = gluon_q4_0.decode_gluon


def load_base(path: str):
    """The kernel file at ``path`` as the module kvcore.kernels._base_gluon_q4_0."""
    name = "kvcore.kernels._base_gluon_q4_0"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--base: not a Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def use(decode) -> None:
    """Route LayerCache.decode's Gluon path through ``decode`` (a decode_gluon)."""
    gluon_q4_0.decode_gluon = decode


def check(fmt: str, base) -> dict:
    """Per paged case: each tree's largest difference from decode_ref over the reference's
    largest magnitude, and the largest difference between the two trees' outputs."""
    res = {}
    for ps, group, lens in ((32, 4, [37, 200, 129, 1]), (64, 8, [300, 64, 65]),
                            (96, 4, [2000, 97, 33]), (32, 16, [95, 33]),
                            (64, 4, [4096, 1000])):
        if fmt == "q8_0" and group > 8:
            continue  # q8_0's forms take groups of up to 8
        torch.manual_seed(ps + group)
        hkv, d = 2, 128
        bsz, per = len(lens), max(math.ceil(n / ps) for n in lens)
        cache = LayerCache(fmt, fmt, bsz * per, ps, hkv, d, device="cuda")
        table = torch.randperm(bsz * per, device="cuda").view(bsz, per).to(torch.int32)
        k, v = (torch.randn(bsz, max(lens), hkv, d, device="cuda", dtype=torch.float16)
                for _ in range(2))
        fill_paged(cache, table, k, v, lens)
        seq = torch.tensor(lens, device="cuda", dtype=torch.int32)
        q = torch.randn(bsz, hkv * group, d, device="cuda", dtype=torch.float16)
        ref = cache.decode_ref(q, table, seq, int_query=False).float()
        outs = {}
        for (tree, module), per_sm in itertools.product(
                (("base", base), ("new", gluon_q4_0)), (1, 8)):
            n = module.splits_for(bsz * hkv, max(lens), per_sm)[1]
            acc = torch.empty(bsz * hkv * group * n * d, device="cuda")
            ml = torch.empty(bsz * hkv * group * n * 2, device="cuda")
            out = torch.full((bsz, hkv * group, d), float("nan"), device="cuda")
            decode = module.decode_gluon if module is base else NEW
            outs[f"{tree}-per_sm{per_sm}"] = decode(cache, q, table, seq, out, max(lens), per_sm,
                                                   acc, ml).float()
        scale = ref.abs().max()
        name = f"page{ps}-group{group}-lens{'/'.join(map(str, lens))}"
        res[name] = {f"{t}_vs_ref": float((o - ref).abs().max() / scale)
                     for t, o in outs.items()}
        for per_sm in (1, 8):
            res[name][f"new_vs_base-per_sm{per_sm}"] = float(
                (outs[f"new-per_sm{per_sm}"] - outs[f"base-per_sm{per_sm}"]).abs().max())
        res[name]["nan"] = any(bool(torch.isnan(o).any()) for o in outs.values())
        print(fmt, name, res[name], flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--formats", default="q4_0,q8_0,nvfp4,tbq4,tbq3")
    ap.add_argument("--shapes", default="1x131072,8x131072,1x32768,8x32768,64x32768")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    base = load_base(args.base)
    doc: dict = {"env": environment("cuda", torch), "base": args.base, "checks": {},
                 "rows": []}
    for fmt in args.formats.split(","):
        doc["checks"][fmt] = check(fmt, base)
        write_json(args.out, "base-turns.json", doc)
    for fmt in args.formats.split(","):
        for shape in args.shapes.split(","):
            batch, tokens = (int(x) for x in shape.split("x"))
            caches = filled_copies(fmt, batch, tokens)
            table, seq, q = step_inputs(batch, tokens)
            if not caches[0].takes_gluon(q, seq, tokens):
                print(fmt, shape, "not the Gluon kernel's launch: skipped", flush=True)
                continue
            row: dict = {"format": fmt, "batch": batch, "tokens": tokens, "base": [],
                         "new": []}
            for r in range(args.rounds):
                for tree in (("base", "new") if r % 2 == 0 else ("new", "base")):
                    use(base.decode_gluon if tree == "base" else NEW)
                    try:
                        row[tree].append(time_steps(caches, batch, tokens))
                    finally:
                        use(NEW)
            doc["rows"].append(row)
            print(fmt, shape, "base", [f"{t * 1e6:.1f}" for t in row["base"]], "new",
                  [f"{t * 1e6:.1f}" for t in row["new"]], flush=True)
            write_json(args.out, "base-turns.json", doc)
            del caches
            torch.cuda.empty_cache()
    doc["compiled"] = {
        "base": list(compiled(base.q4_0_swapped_kernel).values()),
        "new": list(compiled(gluon_q4_0.q4_0_swapped_kernel).values())}
    write_json(args.out, "base-turns.json", doc)
    print("compiled [registers, spilled bytes, warps, shared]", doc["compiled"])


if __name__ == "__main__":
    main()
