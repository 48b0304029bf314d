"""A probe: KIVI decode by the Gluon kernel (kernels/gluon_kivi.py) on a GPU.

    python bench/probes/gluon_kivi.py [--out DIR] [--shapes BxT,…] [--launches 12c168,16c128]
        [--rounds 2] [--no-check] [--format kivi2|kivi4]

First a check: sequences of 1,000, 1, 777, 64 and 159 tokens (every mix of quantized groups
and residual ring, groups in a shuffled slot order) at 1, 4 and 8 query heads a KV head: the
Gluon kernel's output against KiviCache.decode (the Triton kernel) and decode_ref (float64).
Then, at each shape (GQA 32/8, head_dim 128), the Triton decode (gluon=False), decode as it
launches by default, and the Gluon kernel at each launch (programs a multiprocessor, c and a
cap of registers a thread, u uncapped; s and a digit for STAGES; launched as a programmatic
dependent, as decode launches it on a Hopper GPU), timed in turns from CUDA graphs (the order reversed every other round),
fp16 SDPA once, and the largest difference of the Gluon output from the Triton kernel's.
Writes gluon-kivi (kivi4: gluon-kivi4) after every row.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import decode  # noqa: E402
from decode import graph_time, kivi_copies, kivi_fill, sdpa_time, write_json  # noqa: E402

from kvcore.kernels import gluon_kivi  # noqa: E402
from kvcore.kernels.kivi import KiviCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def parse_launch(name: str) -> dict:
    """"12c168": 12 programs a multiprocessor capped at 168 registers; "8u": 8, uncapped;
    "12c168s4": four stages; then k: K_AFTER, a: not K_AFTER (else the kernel's default);
    then p: PAIRS (two groups a step, four stages); v: V_AFTER (the values' scales on the
    weights), n: not V_AFTER; z: K_SUB (the keys' codes as subnormals), y: not K_SUB (each
    else decode's choice); a trailing t and a number: splits of that many tokens (else one
    wave of the programs a multiprocessor)."""
    m = re.fullmatch(r"(\d+)(?:c(\d+)|u)(?:s(\d))?([ka]?)(p?)([vn]?)([zy]?)(?:t(\d+))?", name)
    assert m, name
    out: dict = {"per_sm": int(m.group(1)), "max_registers": int(m.group(2) or 0),
                 "pdl": True}
    if m.group(3):
        out["STAGES"] = int(m.group(3))
    if m.group(4):
        out["K_AFTER"] = m.group(4) == "k"
    if m.group(5):
        out.update(PAIRS=True, STAGES=4)
    if m.group(6):
        out["V_AFTER"] = m.group(6) == "v"
    if m.group(7):
        out["K_SUB"] = m.group(7) == "z"
    if m.group(8):
        out["split_tokens"] = int(m.group(8))
    return out


def check(fmt: str, groups: tuple[int, ...] = (1, 4, 8), dim: int = 128) -> dict:
    """Largest differences of the Gluon output from the Triton kernel's and from decode_ref."""
    torch.manual_seed(1)
    lens = [1000, 1, 777, 64, 159]
    heads = 8
    cache = KiviCache(fmt, len(lens), heads, dim, 1024, device="cuda",
                      slot_order=torch.randperm(len(lens) * (1024 // 32 - 4)).tolist())
    for s, n in enumerate(lens):
        # keys with outlier channels, as KIVI expects them
        k = torch.randn(n, heads, dim, device="cuda") * (1 + 4 * (torch.arange(dim,
                                                                             device="cuda") % 17 == 0))
        cache.append_triton(s, k.half(), torch.randn(n, heads, dim, device="cuda").half())
    res = {"lens": lens, "n_quant": list(cache.n_quant), "n_resid": list(cache.n_resid)}
    for group in groups:
        q = torch.randn(len(lens), heads * group, dim, device="cuda", dtype=torch.float16)
        ref = cache.decode_ref(q).float()
        tri = cache.decode(q, gluon=False)
        if group > 8:  # the 16-column form
            launches: tuple[str, ...] = ("8c232", "8u", "8c232v", "8c232vz")
        elif dim != 128:
            launches = ("12c168n", "12c168v", "12c168vz")
        elif fmt == "kivi2":
            launches = ("12c168an", "12c168k", "12c168p", "12c168v", "12c168vz")
        else:
            launches = ("12c168n", "8un", "11c168p", "12c168v", "12c168vz")
        for launch in launches:
            out = torch.full_like(tri, float("nan"))
            gluon_kivi.decode_kivi_gluon(cache, q, out, **parse_launch(launch))
            res[f"group{group}_{launch}"] = {
                "max_abs_vs_triton": (out - tri).abs().max().item(),
                "max_abs_vs_ref": (out - ref).abs().max().item(),
                "triton_max_abs_vs_ref": (tri - ref).abs().max().item(),
                "nan": bool(out.isnan().any().item())}
        # splits of one tile: every program's start and end inside the ring and the groups
        out = torch.full_like(tri, float("nan"))
        gluon_kivi.decode_kivi_gluon(cache, q, out, split_tokens=32, V_AFTER=False)
        res[f"group{group}_split32"] = {"max_abs_vs_triton": (out - tri).abs().max().item(),
                                        "nan": bool(out.isnan().any().item())}
        out = torch.full_like(tri, float("nan"))
        gluon_kivi.decode_kivi_gluon(cache, q, out, split_tokens=32, V_AFTER=True)
        res[f"group{group}_split32v"] = {"max_abs_vs_triton": (out - tri).abs().max().item(),
                                         "nan": bool(out.isnan().any().item())}
        out = torch.full_like(tri, float("nan"))
        gluon_kivi.decode_kivi_gluon(cache, q, out, split_tokens=32, V_AFTER=True, K_SUB=True)
        res[f"group{group}_split32vz"] = {"max_abs_vs_triton": (out - tri).abs().max().item(),
                                          "nan": bool(out.isnan().any().item())}
    # values of a small spread about a large offset (scales near 1e-3, minimums near 2): the
    # V_AFTER weights times scales run into float16's subnormals
    small = KiviCache(fmt, len(lens), heads, dim, 1024, device="cuda")
    for s, n in enumerate(lens):
        small.append_triton(s, torch.randn(n, heads, dim, device="cuda").half(),
                            (2 + 1e-3 * torch.randn(n, heads, dim, device="cuda")).half())
    q = torch.randn(len(lens), heads * 4, dim, device="cuda", dtype=torch.float16)
    ref = small.decode_ref(q).float()
    tri = small.decode(q, gluon=False)
    for launch in ("12c168n", "12c168v", "12c168vz"):
        out = torch.full_like(tri, float("nan"))
        gluon_kivi.decode_kivi_gluon(small, q, out, **parse_launch(launch))
        res[f"small_values_{launch}"] = {"max_abs_vs_triton": (out - tri).abs().max().item(),
                                         "max_abs_vs_ref": (out - ref).abs().max().item(),
                                         "triton_max_abs_vs_ref": (tri - ref).abs().max().item()}
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="1x131072,8x131072,8x32768,1x32768")
    ap.add_argument("--launches", default="12c168,16c128,8u")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--format", default="kivi2", choices=("kivi2", "kivi4"))
    ap.add_argument("--heads", help="query heads/KV heads/head_dim of the timed caches "
                    "(32/8/128 by default)")
    ap.add_argument("--groups", default="1,4,8", help="the check's query heads a KV head (its "
                    "heads as wide as --heads')")
    args = ap.parse_args()
    if args.heads:
        decode.set_heads(args.heads)
    out_name = "gluon-kivi" if args.format == "kivi2" else f"gluon-{args.format}"
    result: dict = {"env": environment("cuda", torch), "check": None, "rows": []}
    if not args.no_check:
        result["check"] = check(args.format, tuple(int(g) for g in args.groups.split(",")),
                                decode.D)
        print("check", result["check"], flush=True)
        write_json(args.out, out_name, result)
    for shape in args.shapes.split(","):
        batch, tokens = (int(x) for x in shape.split("x"))
        cache = kivi_fill(args.format, batch, tokens)
        caches = kivi_copies(cache)
        q = torch.randn(batch, decode.HQ, decode.D, device="cuda", dtype=torch.float16)
        tri_out = torch.empty(batch, decode.HQ, decode.D, device="cuda", dtype=torch.float32)
        ref = cache.decode(q, gluon=False)
        variants = {"triton": [partial(c.decode, q, out=tri_out, gluon=False) for c in caches],
                    "decode": [partial(c.decode, q, out=tri_out) for c in caches]}
        diffs = {}
        for name in args.launches.split(","):
            kw = parse_launch(name)
            out = torch.empty_like(tri_out)
            variants[name] = [partial(gluon_kivi.decode_kivi_gluon, c, q, out, **kw)
                              for c in caches]
            check_out = torch.full_like(tri_out, float("nan"))
            gluon_kivi.decode_kivi_gluon(cache, q, check_out, **kw)
            diffs[name] = (check_out - ref).abs().max().item()
        times: dict = {k: [] for k in variants}
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(variants)[::-1]
            for name in order:
                times[name].append(graph_time(variants[name]) * 1e6)
        row = {"batch": batch, "tokens": tokens, "us": times, "max_abs_vs_triton": diffs,
               "cache_bytes": cache.nbytes, "sdpa_f16_us": sdpa_time(batch, tokens) * 1e6}
        print(row, flush=True)
        result["rows"].append(row)
        write_json(args.out, out_name, result)
        del cache, caches, variants
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
