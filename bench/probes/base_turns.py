"""A probe: the Gluon decode kernel (kvcore/kernels/gluon_q4_0.py) of this tree against the same
file from an earlier commit (the base), in turns on one card, for each format it decodes.

    git show COMMIT:kvcore/kernels/gluon_q4_0.py > .base/gluon_q4_0.py
    python bench/probes/base_turns.py --base .base/gluon_q4_0.py [--formats q4_0,q8_0,…]
        [--shapes 1x131072,8x131072,…] [--rounds 3] [--out DIR]
        [--launches "NAME:SETTING,…;NAME:…"]

The base file is loaded as a module of kvcore.kernels beside this tree's (its relative imports
are this tree's cache and ops: only the kernel file differs). First a check on small paged
caches (pages of 32, 64 and 96 tokens, a shuffled block table, lengths that end mid-tile,
groups of 4, 8 and 16), each tree's kernel launched directly at 1 and 8 programs a
multiprocessor (long splits over many pages, short ones): its output against
LayerCache.decode_ref and against the other tree's (a change to how tiles are addressed
leaves the arithmetic as it was: the two outputs should be equal). Then per format and shape each round times decode under the base kernel and
under this tree's in turns (the order reversed every other round), as bench/decode.py times a
step (CUDA graph over cache copies); a shape where no launch takes the Gluon kernel is
skipped (a launch may widen where it applies: ``cache.GLUON_LEAST_WORK=0`` against decode's
split kernel there). Writes base-turns.json after every row. Needs a GPU.

``--launches`` names launches of this tree's kernel to time in the same turns (default: one,
``new``, as decode launches it). A setting is ``cache.ATTR=N``, ``gluon.ATTR=N`` or
``ops.ATTR=N`` (a constant of kvcore.kernels.cache, of this tree's gluon_q4_0 or of
kvcore.kernels.triton_ops, set while the launch runs: programs a multiprocessor, register
caps, the merge's forms) or ``consts.NAME=N`` (a compile-time argument added to
launch_consts'), e.g. ``p12:cache.GLUON_PER_SM_Q4=12,gluon.Q4_PIPE_PER_SM=12,
gluon.Q4_PIPE_REGISTERS=168``. The check runs each launch too, at its GLUON_PER_SM_* setting
where it has one.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import math
import os
import sys
from pathlib import Path
from typing import Any

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
CONSTS = gluon_q4_0.launch_consts


def parse_launches(text: str) -> dict[str, list[tuple[str, str, Any]]]:
    """``NAME:SETTING,…;…`` → name → [(scope, attribute, value)]; scope cache, gluon or
    consts; a value of several integers joined by ``/`` is a tuple (cache.GLUON_FEW_FP4=16/32768/4)."""
    out: dict[str, list[tuple[str, str, Any]]] = {}
    for part in filter(None, text.split(";")):
        name, _, settings = part.partition(":")
        out[name] = []
        for item in filter(None, settings.split(",")):
            key, _, value = item.partition("=")
            scope, _, attr = key.partition(".")
            if scope not in ("cache", "gluon", "ops", "consts") or not attr or not value:
                raise SystemExit(f"--launches: expected cache.ATTR=N, gluon.ATTR=N, "
                                 f"ops.ATTR=N or consts.NAME=N, got {item!r}")
            parts = [int(v) for v in value.split("/")]
            out[name].append((scope, attr, tuple(parts) if len(parts) > 1 else parts[0]))
    return out


@contextlib.contextmanager
def launched(settings: list[tuple[str, str, Any]]):
    """This tree's kernel under ``settings`` (parse_launches'), restored after."""
    from kvcore.kernels import cache as cache_module
    from kvcore.kernels import triton_ops

    modules = {"cache": cache_module, "gluon": gluon_q4_0, "ops": triton_ops}
    saved = [(modules[s], a, getattr(modules[s], a)) for s, a, _ in settings if s != "consts"]
    extra = {a: v for s, a, v in settings if s == "consts"}
    for s, a, v in settings:
        if s != "consts":
            setattr(modules[s], a, v)
    if extra:
        gluon_q4_0.launch_consts = lambda fmt, group, per_sm=0, rows=0: {
            **CONSTS(fmt, group, per_sm, rows), **extra}
    try:
        yield
    finally:
        for module, a, v in saved:
            setattr(module, a, v)
        gluon_q4_0.launch_consts = CONSTS


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


def run(decode, case: tuple, per_sm: int) -> torch.Tensor:
    """``decode`` (a decode_gluon) over ``case`` (cache, query, block table, lengths, longest)
    at ``per_sm`` programs a multiprocessor, into an output filled with NaN first."""
    cache, q, table, seq, longest = case
    bsz, hq, d = q.shape
    n = gluon_q4_0.splits_for(bsz * cache.kv_heads, longest, per_sm)[1]
    acc = torch.empty(bsz * hq * n * d, device="cuda")
    ml = torch.empty(bsz * hq * n * 2, device="cuda")
    out = torch.full((bsz, hq, d), float("nan"), device="cuda")
    return decode(cache, q, table, seq, out, longest, per_sm, acc, ml).float()


def check(fmt: str, base, launches: dict[str, list[tuple[str, str, int]]]) -> dict:
    """Per paged case: each tree's largest difference from decode_ref over the reference's
    largest magnitude (the base at 1 and 8 programs a multiprocessor, each launch of this tree
    at its own count where it sets one, else at both), and the largest difference between the
    two trees' outputs at the same count."""
    res = {}
    for ps, group, lens, rising in ((32, 4, [37, 200, 129, 1], False),
                                    (64, 8, [300, 64, 65], False),
                                    (96, 4, [2000, 97, 33], False), (32, 16, [95, 33], False),
                                    (64, 4, [4096, 1000], False), (32, 4, [4096, 700], True)):
        if fmt == "q8_0" and group > 8:
            continue  # q8_0's forms take groups of up to 8
        torch.manual_seed(ps + group)
        hkv, d = 2, 128
        bsz, per = len(lens), max(math.ceil(n / ps) for n in lens)
        cache = LayerCache(fmt, fmt, bsz * per, ps, hkv, d, device="cuda")
        table = torch.randperm(bsz * per, device="cuda").view(bsz, per).to(torch.int32)
        k, v = (torch.randn(bsz, max(lens), hkv, d, device="cuda", dtype=torch.float16)
                for _ in range(2))
        if rising:  # keys growing along the sequence, with spikes: the scores' max keeps
            # rising within a split, past any headroom a kernel keeps
            t = torch.arange(max(lens), device="cuda")
            grow = 1 + 6 * t / max(lens) + 8 * (t % 97 == 50)
            k = (k.float() * grow[None, :, None, None]).half()
        fill_paged(cache, table, k, v, lens)
        for i, n in enumerate(lens):  # the table's columns past a sequence hold no page
            table[i, math.ceil(n / ps):] = 2**30
        seq = torch.tensor(lens, device="cuda", dtype=torch.int32)
        q = torch.randn(bsz, hkv * group, d, device="cuda", dtype=torch.float16)
        ref = cache.decode_ref(q, table, seq, int_query=False).float()

        case = (cache, q, table, seq, max(lens))
        outs = {f"base-per_sm{p}": run(base.decode_gluon, case, p) for p in (1, 8)}
        for lname, settings in launches.items():
            counts = [v for _, a, v in settings if a.startswith("GLUON_PER_SM")] or [1, 8]
            with launched(settings):
                for p in counts:
                    outs[f"{lname}-per_sm{p}"] = run(NEW, case, p)
        scale = ref.abs().max()
        name = (f"page{ps}-group{group}-lens{'/'.join(map(str, lens))}"
                f"{'-rising' if rising else ''}")
        res[name] = {f"{t}_vs_ref": float((o - ref).abs().max() / scale)
                     for t, o in outs.items()}
        for t, o in outs.items():
            p = t.rsplit("-", 1)[1]
            if not t.startswith("base") and f"base-{p}" in outs:
                res[name][f"{t}_vs_base"] = float((o - outs[f"base-{p}"]).abs().max())
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
    ap.add_argument("--launches", default="new:")
    args = ap.parse_args()
    launches = parse_launches(args.launches)
    base = load_base(args.base)
    doc: dict = {"env": environment("cuda", torch), "base": args.base, "checks": {},
                 "rows": []}
    for fmt in args.formats.split(","):
        doc["checks"][fmt] = check(fmt, base, launches)
        write_json(args.out, "base-turns.json", doc)
    for fmt in args.formats.split(","):
        for shape in args.shapes.split(","):
            batch, tokens = (int(x) for x in shape.split("x"))
            caches = filled_copies(fmt, batch, tokens)
            table, seq, q = step_inputs(batch, tokens)
            takes = []
            for settings in launches.values():
                with launched(settings):
                    takes.append(caches[0].takes_gluon(q, seq, tokens))
            if not any(takes):
                print(fmt, shape, "not the Gluon kernel's launch: skipped", flush=True)
                continue
            row: dict = {"format": fmt, "batch": batch, "tokens": tokens, "base": [],
                         **{name: [] for name in launches}}
            for r in range(args.rounds):
                order = ["base", *launches]
                for tree in (order if r % 2 == 0 else order[::-1]):
                    if tree == "base":
                        use(base.decode_gluon)
                        try:
                            row[tree].append(time_steps(caches, batch, tokens))
                        finally:
                            use(NEW)
                    else:
                        with launched(launches[tree]):
                            row[tree].append(time_steps(caches, batch, tokens))
            doc["rows"].append(row)
            print(fmt, shape, *(f"{k} {' '.join(f'{t * 1e6:.1f}' for t in row[k])}"
                                for k in ("base", *launches)), flush=True)
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
