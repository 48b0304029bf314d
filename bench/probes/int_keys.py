"""q8_0 scores as an integer product on a GPU: the query quantized to int8 per
32-value block (q8_0's scale rule, amax / 127) and multiplied with the cache's int8 codes on the
tensor cores (decode(int_keys=True)), against the float16 unpacking of the default path
(int_keys=False). GQA 32/8 × 128 (or --heads), the shapes of decode.py; each launch replayed from a CUDA
graph over enough cache copies that no step reads from L2 (decode.time_steps).

    python bench/probes/int_keys.py [--formats q8_0] [--shapes 1x32768,…]
        [--base int_keys=0] [--variant int_keys=1] [--heads 24/4/256]
        [--configs BN/W/S/PAD[/REGS[/PER_SM]],…] [--out DIR]

First a check on small shapes (pages of 16, a shuffled block table, several splits): both
paths against the torch reference and against exact attention, NaN counted. Then per format
and shape: the default path's time, the integer path under the default launch and under each
of --configs (block_n / warps / stages / query rows padded to, then optionally a cap on registers
a thread and programs a multiprocessor, 0 for the default), the fraction of the read bandwidth measured in the same
run and the speed-up over torch's fp16 scaled_dot_product_attention. Writes int-keys.json.
--base and --variant (decode keyword arguments, 0 and 1 for False and True) compare other
paths the same way; a format K/V (q8_0/f16) times a cache of two formats (no check).
bench/results/int-values-h200.json is this probe's --values (commit 2975a21): q8_0's V block
scales folded into the weights and its codes converted to float16 as they are, against the
default; slower under the default launch (B=1 32k 32.2 → 37.9 µs, B=8 32k 193 → 251), 2-3%
faster at B=8 and B=64 under 64-token programs, 2% slower at B=1 128k; removed since, with the
option. bench/results/int-keys-h200.json also holds q4_0, whose nibbles the kernel then fed the same
product (commit 1431c2f; 13-40% slower than its float16 path, removed since: int_keys no
longer changes a q4_0 decode). bench/results/int-keys-q4-h200.json is that q4_0 branch again
with the nibbles masked out four to a register by PTX and the block kept in its own order
(commit b9b2530; its loop 8-10% fewer instructions compiled for sm_90, yet 25-40% slower on
the H200: B=1 128k 84.6 → 117.4 µs; removed again). bench/results/v-minor-h200.json: q8_0's V
planes laid token-minor within their page (decode(v_minor=True) at commit af9110f, with
bench/probes/v_minor_run.sh), its 32-token loop 18% fewer instructions and no shared-memory
stores, against the default: within ±3% (B=8 128k 761 → 747 µs, B=1 128k 104 → 107); removed.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE.parent))

import decode  # noqa: E402  (bench/decode.py)
from decode import fill, fill_paged, filled_copies, rel, sdpa_time, time_steps, write_json  # noqa: E402

from kvcore.kernels import ref  # noqa: E402
from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402

SHAPES = [(1, 32768), (1, 131072), (8, 131072), (8, 32768), (64, 4096)]
#: decode's keyword for each field of a --configs entry, in order
LAUNCH_FIELDS = ("block_n", "num_warps", "num_stages", "pad_rows", "max_registers",
                 "programs_per_sm")
CONFIGS = [(bn, 1, st, pad) for bn, st in ((32, 3), (64, 2), (32, 2)) for pad in (4, 8, 16)]


def kwargs(text: str) -> dict[str, bool]:
    """"a=1,b=0" → {"a": True, "b": False} (decode's switches)."""
    return {k: bool(int(v)) for k, v in (kv.split("=") for kv in text.split(",") if kv)}


def registers() -> list[list[int]]:
    """[registers, spilled bytes, warps] of the decode kernel compiled last in this process
    (empty where this triton keeps its compiled kernels elsewhere)."""
    from kvcore.kernels.triton_ops import decode_split_kernel

    return [v[:3] for v in decode.compiled(decode_split_kernel).values()][-1:]


def check(fmt: str, fmt_v: str, base: dict, var: dict) -> dict[str, float]:
    """Both paths on pages of 16 under a shuffled table, against the reference and exact."""
    g = torch.Generator(device="cuda").manual_seed(0)
    lens = [3000, 517, 1, 40]
    page, hkv, d, hq = 16, decode.HKV, decode.D, decode.HQ
    per = max(math.ceil(n / page) for n in lens)
    order = torch.randperm(len(lens) * per, device="cuda", generator=g)
    table = order.reshape(len(lens), per).to(torch.int32)
    cache = LayerCache(fmt, fmt_v, len(lens) * per, page, hkv, d, device="cuda")
    n = max(lens)
    k = torch.randn(len(lens), n, hkv, d, device="cuda", generator=g).half()
    v = torch.randn(len(lens), n, hkv, d, device="cuda", generator=g).half()
    fill_paged(cache, table, k, v, lens)
    seq = torch.tensor(lens, dtype=torch.int32, device="cuda")
    q = torch.randn(len(lens), hq, d, device="cuda", generator=g).half()
    plain = cache.decode(q, table, seq, **base)
    ints = cache.decode(q, table, seq, **var)
    # each path against the reference of its own arithmetic (the query rounded to int8 where
    # that path takes the integer product)
    want_base = cache.decode_ref(q.float(), table, seq,
                                 int_query=cache.uses_int_keys(base.get("int_keys")))
    want = cache.decode_ref(q.float(), table, seq,
                            int_query=cache.uses_int_keys(var.get("int_keys")))
    exact = ref.attention_ref(q.float(), k.permute(0, 2, 1, 3).float(),
                              v.permute(0, 2, 1, 3).float(), seq)
    return {"plain_vs_ref": rel(plain, want_base), "int_vs_ref": rel(ints, want),
            "plain_vs_exact": rel(plain, exact), "int_vs_exact": rel(ints, exact),
            "int_vs_plain": rel(ints, plain), "identical": bool(torch.equal(ints, plain)),
            "nan": int(torch.isnan(ints).sum() + torch.isnan(plain).sum())}


def long_check(fmt: str, batch: int, tokens: int) -> dict[str, float]:
    """The default launch over a long context (where FEW_ROWS_LONG may cap its registers)
    against the torch reference and against the uncapped launch of 8 programs a
    multiprocessor."""
    cache = LayerCache(fmt, fmt, batch, tokens, decode.HKV, decode.D, device="cuda")
    fill(cache, batch, tokens, torch.float16)
    table = torch.arange(batch, device="cuda", dtype=torch.int32).reshape(batch, 1)
    seq = torch.full((batch,), tokens, device="cuda", dtype=torch.int32)
    seq[-1] = tokens - 77  # a shorter last sequence: a partial tile and a partial split
    q = torch.randn(batch, decode.HQ, decode.D, device="cuda", dtype=torch.float16)
    out = cache.decode(q, table, seq)
    old = cache.decode(q, table, seq, programs_per_sm=8)
    want = cache.decode_ref(q.float(), table, seq)
    return {"vs_ref": rel(out, want), "uncapped_vs_ref": rel(old, want),
            "nan": int(torch.isnan(out).sum())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="q8_0")
    ap.add_argument("--shapes", default=",".join(f"{b}x{t}" for b, t in SHAPES))
    ap.add_argument("--configs", default=",".join("/".join(map(str, c)) for c in CONFIGS))
    ap.add_argument("--heads", help="query heads/KV heads/head_dim (default 32/8/128)")
    ap.add_argument("--base", default="int_keys=0")
    ap.add_argument("--variant", default="int_keys=1")
    ap.add_argument("--out", default=None)
    ap.add_argument("--long-check", default="",
                    help="BxTOKENS,…: long_check for each format at these shapes first")
    a = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",") if s]
    configs = [tuple(int(x) for x in c.split("/")) for c in a.configs.split(",") if c]
    if a.heads:
        decode.set_heads(a.heads)
    base, var = kwargs(a.base), kwargs(a.variant)
    result: dict = {"base": base, "variant": var, "heads": [decode.HQ, decode.HKV, decode.D],
                    "env": environment("cuda", torch), "note": __doc__.split("\n\n")[0], "checks": {},
                    "rows": []}
    bw = result["read_bw"] = measure_bandwidth(torch)["read_bytes_per_s"]
    print("read bandwidth", bw, flush=True)
    for fmt in a.formats.split(","):
        if "/" in fmt:
            continue
        for fv in (fmt, "f16"):
            try:
                result["checks"][f"{fmt}/{fv}"] = check(fmt, fv, base, var)
            except Exception as e:  # noqa: BLE001 (a probe records what failed)
                result["checks"][f"{fmt}/{fv}"] = {"error": repr(e)[:2000]}
            print("check", fmt, fv, result["checks"][f"{fmt}/{fv}"], flush=True)
    for spec in filter(None, a.long_check.split(",")):
        batch, tokens = (int(x) for x in spec.split("x"))
        for fmt in a.formats.split(","):
            key = f"long {fmt} {spec}"
            try:
                result["checks"][key] = long_check(fmt, batch, tokens)
            except Exception as e:  # noqa: BLE001 (a probe records what failed)
                result["checks"][key] = {"error": repr(e)[:2000]}
            print("check", key, result["checks"][key], flush=True)
            torch.cuda.empty_cache()
    sdpa = {}
    for batch, tokens in shapes:
        sdpa[(batch, tokens)] = sdpa_time(batch, tokens)
    for fmt in a.formats.split(","):
        for batch, tokens in shapes:
            t0 = time.time()
            fk, fv = (fmt.split("/") * 2)[:2]
            caches = filled_copies(fk, batch, tokens, fmt_v=fv)
            cache = caches[0]
            row = {"format": fmt, "batch": batch, "tokens": tokens,
                   "sdpa_us": sdpa[(batch, tokens)] * 1e6, "bytes": cache.nbytes}
            row["plain_us"] = time_steps(caches, batch, tokens, **base) * 1e6
            times = {"default": time_steps(caches, batch, tokens, **var) * 1e6}
            for c in configs:
                try:
                    # a 0 field (or one left out): decode's default
                    extra = {key: val for key, val in zip(LAUNCH_FIELDS, c, strict=False)
                             if val}
                    times["/".join(map(str, c))] = time_steps(
                        caches, batch, tokens, **var, **extra) * 1e6
                    row.setdefault("registers", {})["/".join(map(str, c))] = registers()
                except Exception as e:  # noqa: BLE001
                    times["/".join(map(str, c))] = repr(e)[:300]
            row["int_us"] = times
            best = min(v for v in times.values() if isinstance(v, float))
            row["best_int_us"] = best
            for key, us in (("plain", row["plain_us"]), ("int", best)):
                row[f"{key}_vs_sdpa"] = row["sdpa_us"] / us
                if bw:
                    row[f"{key}_bw_frac"] = cache.nbytes / (us * 1e-6) / bw
            result["rows"].append(row)
            print(f"{fmt} B={batch} T={tokens}: plain {row['plain_us']:.1f} µs "
                  f"({row['plain_vs_sdpa']:.2f}×), int best {best:.1f} µs "
                  f"({row['int_vs_sdpa']:.2f}×) {time.time() - t0:.0f}s "
                  + " ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}=ERR"
                             for k, v in times.items()), flush=True)
            if a.out:
                write_json(a.out, "int-keys.json", result)
            del caches, cache
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
