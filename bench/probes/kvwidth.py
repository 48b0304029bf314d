"""K and V of different widths on a GPU: MiMo-V2-Flash's layers (K 192, V 128; the full
layers' 4 KV heads under 64 query heads, the sliding layers' 8, read from the catalog) in
every paged format and in KIVI, the default decode launch (PTX unpacking, word reads) against
the torch reference over the same bytes and against exact float64 attention over the rows
before quantization. Needs only torch and triton.

    python bench/probes/kvwidth.py [--formats f16,q4_0,…] [--workers 10] [--out DIR]

A process a case, several at a time (the kernels compile in parallel). Prints per case the
output's shape, the relative and the largest absolute error against the reference, against
exact attention, and its NaNs; writes kvwidth.json (with the run's environment) under --out
when given. Exits 1 if any case has a NaN, a wrong shape, a relative error above 3e-3
against the reference, or fails. On an H200 the 20 cases (10 formats × MiMo's two layer
kinds, 3 shapes each) took 40 s; every relative error against the reference was at most
2.1e-3 (bf16; 5.4e-4 for the other formats), no NaN.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

FORMATS = ["f16", "bf16", "fp8_pth", "q8_0", "q4_0", "tbq4", "tbq3", "nvfp4", "kivi2", "kivi4"]
#: (sequence lengths, page size): several splits over shuffled pages smaller than a tile, a
#: batch of 16 (MANY_ROWS of (sequence, KV head) rows for the full layers' 4 heads), one
#: sequence long enough for the default split's waves
SHAPES = [((3000, 517, 1), 16), ((300,) * 16, 64), ((20000,), 20000)]
#: relative error against the reference over the same bytes
TOL = 3e-3


def _group(kind: str) -> tuple[int, int, int, int]:
    """(query heads, KV heads, K width, V width) of MiMo-V2-Flash's ``kind`` layers."""
    from kvcore import load_model

    spec = load_model("mimo-v2-flash")
    group = next(g for g in spec.groups if g.kind.value == kind)
    from kvcore.measure import query_heads

    return query_heads(spec.num_attention_heads, group), group.n_kv_heads, group.head_dim_k, \
        group.head_dim_v


def _rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def _case(job: tuple[str, str]) -> dict:
    fmt, kind = job
    import torch

    from kvcore.kernels.cache import LayerCache
    from kvcore.kernels.kivi import KiviCache
    from kvcore.kernels.ref import attention_ref

    hq, hkv, dk, dv = _group(kind)
    row: dict = {"format": fmt, "layers": kind, "heads": f"{hq}/{hkv}", "k": dk, "v": dv,
                 "runs": []}
    try:
        g = torch.Generator(device="cuda").manual_seed(5)
        for lens, page in SHAPES:
            if fmt.startswith("kivi"):
                cache = KiviCache(fmt, len(lens), hkv, dk, max(lens), device="cuda",
                                  head_dim_v=dv)
            else:
                pages = [math.ceil(n / page) for n in lens]
                cache = LayerCache(fmt, fmt, sum(pages), page, hkv, dk, device="cuda",
                                   head_dim_v=dv)
                table = torch.zeros(len(lens), max(pages), dtype=torch.int32, device="cuda")
            ks, vs, first = [], [], 0
            for s, n in enumerate(lens):
                k = torch.randn(n, hkv, dk, device="cuda", generator=g).half()
                v = torch.randn(n, hkv, dv, device="cuda", generator=g).half()
                ks.append(k)
                vs.append(v)
                if fmt.startswith("kivi"):
                    cache.append_triton(s, k, v)
                    continue
                order = torch.randperm(pages[s], device="cuda", generator=g) + first
                table[s, :pages[s]] = order.to(torch.int32)
                first += pages[s]
                t = torch.arange(n, device="cuda")
                cache.append(k, v, table[s, t // page].long(), t % page)
            seq = torch.tensor(lens, dtype=torch.int32, device="cuda")
            q = torch.randn(len(lens), hq, dk, device="cuda", generator=g).half()
            if fmt.startswith("kivi"):
                out = cache.decode(q)
                torch.cuda.synchronize()
                ref = cache.decode_ref(q.float())
            else:
                out = cache.decode(q, table, seq)
                torch.cuda.synchronize()
                ref = cache.decode_ref(q.float(), table, seq)
            exact = torch.cat([attention_ref(q[s:s + 1].float(), ks[s].permute(1, 0, 2)[None],
                                             vs[s].permute(1, 0, 2)[None], seq[s:s + 1].cpu())
                               for s in range(len(lens))])
            row["runs"].append({
                "lens": list(lens) if len(set(lens)) > 1 else f"{len(lens)}x{lens[0]}",
                "page": page, "shape": list(out.shape),
                "shape_ok": tuple(out.shape) == (len(lens), hq, dv),
                "nan": int(torch.isnan(out).sum()), "rel": _rel(out, ref),
                "max_abs": float((out.double() - ref.double()).abs().max()),
                "rel_exact": _rel(out, exact)})
    except Exception as exc:  # noqa: BLE001 (a failure to record)
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    return row


def _bad(row: dict) -> bool:
    return bool(row.get("error")) or any(
        r["nan"] or not r["shape_ok"] or not r["rel"] < TOL for r in row["runs"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--layers", default="full,sliding", help="MiMo-V2-Flash's layer kinds")
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument("--out")
    args = ap.parse_args()
    jobs = [(f, kind) for kind in args.layers.split(",") for f in args.formats.split(",")]
    rows = []
    with mp.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
        for row in pool.imap_unordered(_case, jobs):
            rows.append(row)
            print(f"{row['format']:8s} {row['layers']:8s} {row['heads']:6s} K {row['k']} "
                  f"V {row['v']}" + ("  FAILED" if _bad(row) else ""), flush=True)
            if row.get("error"):
                print(f"    {row['error']}", flush=True)
            for r in row["runs"]:
                print(f"    {str(r['lens'])[:18]:18s} page {r['page']:5d} out {r['shape']} "
                      f"rel {r['rel']:.1e} max abs {r['max_abs']:.1e} nan {r['nan']} "
                      f"(exact: rel {r['rel_exact']:.3f})", flush=True)
    failed = [r for r in rows if _bad(r)]
    print(f"{len(rows)} cases, {len(failed)} failed")
    if args.out:
        import torch

        from kvcore.measure import environment

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        rows.sort(key=lambda r: (r["layers"], r["format"]))
        (out / "kvwidth.json").write_text(json.dumps(
            {"env": environment("cuda", torch), "rows": rows}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
