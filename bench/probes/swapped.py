"""A probe, not part of kvplan: decode attention with the products swapped, the cache tile the
first operand and the query heads the narrow second one (Sᵀ = K·Qᵀ, Oᵀ = Vᵀ·Pᵀ), read from
kvplan's own caches (K and V token-major, as LayerCache lays them out) with the decode kernel's
own building blocks (_rows, _q, _tile, _halves). The decode kernel holds a group of 4 query
heads as rows padded to the tensor cores' 16 (its partial output [16, 128] float32, 64
registers a thread of a one-warp program); swapped, the heads are the product's narrow side,
padded to 8, so that the partial output takes half the registers and more programs fit a
multiprocessor. The question: is that faster at the launches the decode kernel uses now?

    python bench/probes/swapped.py [--formats q4_0,q8_0,nvfp4,fp8_pth,tbq4,tbq3]
        [--shapes 1x131072,8x131072,1x32768] [--configs BN/W/S/QPAD/REGS/PER_SM,…] [--out DIR]

First a check on a small paged cache (pages of 16 tokens, a shuffled block table, sequences
of different lengths) against LayerCache.decode_ref. Then per format and shape: decode's own
launch (time, registers), and the swapped kernel under each config (block_n / warps / stages /
query heads padded to / register cap, 0 none / programs a multiprocessor; --words: the planes
read as int32 words, else as bytes), its registers and spills, its largest difference from
decode's output on the same cache, its time (CUDA graph over cache copies, as
bench/decode.py times). Writes swapped.json. One format for K and V, heads of 128 lanes; a
rotated format's query is rotated first and its merged output rotated back, as decode does.
In the interpreter (TRITON_INTERPRET=1, no GPU) only the check runs, on the CPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from functools import partial
from pathlib import Path

import triton
import triton.language as tl

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from kvcore.kernels.cache import ROTATED  # noqa: E402
from kvcore.kernels.triton_ops import (  # noqa: E402
    FMT_CODES,
    _halves,
    _q,
    _rows,
    _tile,
    _tile_dims,
    reduce_splits,
    rotate_kernel,
)

LOG2E = 1.4426950408889634


@triton.jit
def swapped_kernel(Q, ACC, ML, K0, K1, KGS, V0, V1, VGS, CENT,
                   BLOCK_TABLE, SEQ_LENS, stride_bt, n_splits, qk_scale, PAGE, SPLIT,
                   H_KV: tl.constexpr, GROUP: tl.constexpr, QPAD: tl.constexpr,
                   D: tl.constexpr, DPOW: tl.constexpr, DP: tl.constexpr, FMT: tl.constexpr,
                   X0: tl.constexpr, X1: tl.constexpr, BLOCK_N: tl.constexpr,
                   PAGE_MODE: tl.constexpr, PAGE_C: tl.constexpr, ASM: tl.constexpr,
                   WORDS: tl.constexpr, GPU: tl.constexpr):
    """One (sequence, KV head, split) program, as decode_split_kernel's, with the products
    swapped: the scores are [BLOCK_N, QPAD] and the partial output [head dims, QPAD]; it
    writes ACC and ML in the decode kernel's layout, so reduce_splits merges them."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    sp = tl.program_id(2)
    seq_len = tl.load(SEQ_LENS + b)
    start = sp * SPLIT
    end = tl.minimum(start + SPLIT, seq_len)
    rows = tl.arange(0, QPAD)
    qrow = (b * H_KV + h) * GROUP + rows
    qmask = rows < GROUP
    HALF: tl.constexpr = FMT >= 3
    RS: tl.constexpr = FMT == 1 or FMT == 6
    if FMT == 0:  # noqa: SIM108 (a compile-time branch)
        KT = K0.dtype.element_ty
    else:
        KT = tl.float16
    if HALF:
        qa = tl.trans(_q(Q, qrow, qmask, qk_scale, FMT, DPOW, D, 1, KT, 0))
        qb = tl.trans(_q(Q, qrow, qmask, qk_scale, FMT, DPOW, D, 2, KT, 0))
        acc_a = tl.zeros([DPOW // 2, QPAD], tl.float32)
        acc_b = tl.zeros([DPOW // 2, QPAD], tl.float32)
    else:
        qa = tl.trans(_q(Q, qrow, qmask, qk_scale, FMT, DPOW, D, 0, KT, 0))
        qb = qa
        acc_a = tl.zeros([DPOW, QPAD], tl.float32)
        acc_b = acc_a
    m_i = tl.full([QPAD], float("-inf"), tl.float32)
    l_i = tl.zeros([QPAD], tl.float32)
    hh = h.to(tl.int64)
    pg = start // PAGE
    off = start - pg * PAGE
    for n0 in range(start, end, BLOCK_N):
        first, r, nmask = _rows(BLOCK_TABLE, b, stride_bt, hh, n0, end, PAGE, pg, off, H_KV,
                                BLOCK_N, PAGE_MODE, PAGE_C, GPU)
        off += BLOCK_N
        wrap = off >= PAGE
        pg += wrap.to(tl.int32)
        off -= wrap.to(tl.int32) * PAGE
        k0 = K0 + first * X0
        k1 = K1 + first * X1
        if HALF:
            ka, kb, ks = _halves(FMT, k0, k1, KGS, CENT, r, nmask, BLOCK_N, DPOW, DP, X0, X1,
                                 ASM, WORDS)
            st = tl.dot(kb, qb, tl.dot(ka, qa))
        else:
            k, ks = _tile(FMT, k0, k1, KGS, CENT, r, nmask, BLOCK_N, DPOW, DP, X0, X1, ASM,
                          WORDS)
            st = tl.dot(k, qa)
        if RS:
            st = st * ks[:, None]
        st = tl.where(nmask[:, None], st, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(st, axis=0))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(st - m_new[None, :])
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new
        v0 = V0 + first * X0
        v1 = V1 + first * X1
        if HALF:
            va, vb, vs = _halves(FMT, v0, v1, VGS, CENT, r, nmask, BLOCK_N, DPOW, DP, X0, X1,
                                 ASM, WORDS)
            pv = (p * vs[:, None] if RS else p).to(va.dtype)
            acc_a = tl.dot(tl.trans(va), pv, acc_a * alpha[None, :])
            acc_b = tl.dot(tl.trans(vb), pv, acc_b * alpha[None, :])
        else:
            v, vs = _tile(FMT, v0, v1, VGS, CENT, r, nmask, BLOCK_N, DPOW, DP, X0, X1, ASM,
                          WORDS)
            pv = (p * vs[:, None] if RS else p).to(v.dtype)
            acc_a = tl.dot(tl.trans(v), pv, acc_a * alpha[None, :])
    base = qrow.to(tl.int64) * n_splits + sp
    dst = ACC + base[None, :] * DPOW
    if HALF:
        tl.store(dst + _tile_dims(FMT, DPOW, 1)[:, None], acc_a, mask=qmask[None, :])
        tl.store(dst + _tile_dims(FMT, DPOW, 2)[:, None], acc_b, mask=qmask[None, :])
    else:
        tl.store(dst + tl.arange(0, DPOW)[:, None], acc_a, mask=qmask[None, :])
    tl.store(ML + base * 2, m_i, mask=qmask)
    tl.store(ML + base * 2 + 1, l_i, mask=qmask)


def launch(cache, q, table, seq, out, max_len: int, *, block_n: int = 32, num_warps: int = 1,
           num_stages: int = 3, qpad: int = 8, max_registers: int = 0, per_sm: int = 12,
           sms: int = 132, words: bool = False):
    """One swapped decode step over ``cache`` (a LayerCache) into ``out``: the split kernel
    (its compiled kernel returned) and the decode kernel's merge."""
    import torch

    bsz, hq, d = q.shape
    hkv = cache.kv_heads
    want = math.ceil(per_sm * sms / (bsz * hkv))
    split = max(block_n, math.ceil(max_len / want / block_n) * block_n)
    nsp = math.ceil(max_len / split)
    acc = cache._workspace("swapped_acc", bsz * hq * nsp * d, torch.float32, q.device)
    ml = cache._workspace("swapped_ml", bsz * hq * nsp * 2, torch.float32, q.device)
    rot = cache._tables()["rot_pm1"] if cache.k.fmt in ROTATED else None
    if rot is not None:
        # the query rotated once, as decode does (rotate_kernel)
        rows = bsz * hq
        q_rot = cache._workspace("swapped_q", rows * d, torch.float32, q.device)
        rotate_kernel[(math.ceil(rows / 16),)](q, q_rot, rot, rows, DIN=d, DOUT=d, DPOW=d,
                                               BACK=False)
        q = q_rot.view(bsz, hq, d)
    k0, k1, x0, x1 = cache.k.operands()
    v0, v1, _, _ = cache.v.operands()
    ps = cache.page_size
    page_mode = 0 if ps % block_n == 0 else 1 if block_n % ps == 0 else 2
    fmt = cache.k.fmt
    gpu = q.device.type == "cuda"
    kern = swapped_kernel[(bsz, hkv, nsp)](
        q, acc, ml, k0, k1, cache.k.global_scale if cache.k.global_scale is not None else k0,
        v0, v1, cache.v.global_scale if cache.v.global_scale is not None else v0,
        cache._cent(fmt, half=True), table, seq, table.stride(0), nsp,
        LOG2E / math.sqrt(d), ps, split, H_KV=hkv, GROUP=hq // hkv, QPAD=qpad, D=d, DPOW=d,
        DP=cache.k.padded_dim, FMT=FMT_CODES[fmt], X0=x0, X1=x1, BLOCK_N=block_n,
        PAGE_MODE=page_mode, PAGE_C=ps if page_mode == 1 else 1, ASM=gpu,
        WORDS=words, GPU=gpu, num_warps=num_warps, num_stages=num_stages,
        **({"maxnreg": max_registers} if max_registers else {}))
    scratch = (cache._workspace("swapped_merged", bsz * hq * d, torch.float32, q.device)
               if rot is not None else None)
    reduce_splits(acc, ml, out, nsp, bsz, hkv, hq // hkv, d, rot=rot, scratch=scratch)
    return kern


def check(fmt: str, device: str, configs: list[tuple[int, ...]],
          words: bool = False) -> dict[str, float]:
    """The swapped kernel against LayerCache.decode_ref on a small paged cache (pages of 16,
    a shuffled block table, lengths 37, 200 and 129; GQA 8/2 × 128): the largest difference
    over the output's largest magnitude, per config; NaN fails."""
    import torch

    from kvcore.kernels.cache import LayerCache

    torch.manual_seed(0)
    bsz, hkv, hq, d, ps = 3, 2, 8, 128, 16
    lens = [37, 200, 129]
    per = max(math.ceil(n / ps) for n in lens)
    cache = LayerCache(fmt, fmt, bsz * per, ps, hkv, d, device=device)
    perm = torch.randperm(bsz * per, device=device)
    table = perm.view(bsz, per).to(torch.int32)
    for b, n in enumerate(lens):
        t = torch.arange(n, device=device)
        k = torch.randn(n, hkv, d, device=device, dtype=torch.float16)
        v = torch.randn(n, hkv, d, device=device, dtype=torch.float16)
        cache.append(k, v, table[b, t // ps].long(), t % ps)
    seq = torch.tensor(lens, device=device, dtype=torch.int32)
    q = torch.randn(bsz, hq, d, device=device, dtype=torch.float16)
    ref = cache.decode_ref(q, table, seq, int_query=False).float()
    res = {}
    for c in configs:
        out = torch.full((bsz, hq, d), float("nan"), device=device)
        bn, nw, ns, qpad = c[:4]
        launch(cache, q, table, seq, out, max(lens), block_n=bn, num_warps=nw, num_stages=ns,
               qpad=qpad, per_sm=1, sms=4, words=words)
        err = float((out - ref).abs().max() / ref.abs().max())
        res["/".join(map(str, c))] = err if not torch.isnan(out).any() else float("nan")
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="q4_0,q8_0,nvfp4,fp8_pth")
    ap.add_argument("--shapes", default="1x131072,8x131072,1x32768")
    ap.add_argument("--configs", default="32/1/3/8/0/12,32/1/3/8/128/16,32/1/3/8/0/16,"
                                         "16/1/3/8/0/16,16/1/3/8/128/16,32/1/3/16/0/12")
    ap.add_argument("--words", action="store_true",
                    help="read the packed planes as int32 words (decode's words=True)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    configs = [tuple(int(x) for x in c.split("/")) for c in args.configs.split(",")]
    formats = args.formats.split(",")
    if os.environ.get("TRITON_INTERPRET") == "1":
        for fmt in formats:
            print(fmt, check(fmt, "cpu", [c for c in configs if c[0] <= 32][:2], args.words),
                  flush=True)
        return

    import torch
    from decode import HKV, HQ, D, copies, fill, graph_time, sdpa_time, time_steps

    from kvcore.kernels.bandwidth import measure_bandwidth
    from kvcore.kernels.cache import SMS, LayerCache
    from kvcore.measure import environment

    res: dict = {"env": environment("cuda", torch), "bandwidth": measure_bandwidth(torch),
                 "configs": args.configs, "words": args.words, "check": {}, "rows": []}
    bw = res["bandwidth"]["read_bytes_per_s"]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for fmt in formats:
        res["check"][fmt] = check(fmt, "cuda", configs, args.words)
        print(fmt, res["check"][fmt], flush=True)
    for spec in args.shapes.split(","):
        bsz, tokens = (int(x) for x in spec.split("x"))
        t_sdpa = sdpa_time(bsz, tokens)
        for fmt in formats:
            cache = LayerCache(fmt, fmt, bsz, tokens, HKV, D, device="cuda")
            fill(cache, bsz, tokens, torch.float16)
            caches = copies(cache, bsz, tokens)
            table = torch.arange(bsz, device="cuda", dtype=torch.int32).reshape(bsz, 1)
            seq = torch.full((bsz,), tokens, device="cuda", dtype=torch.int32)
            q = torch.randn(bsz, HQ, D, device="cuda", dtype=torch.float16)
            # the swapped kernel takes the float16 key product: compared against decode's
            ref = cache.decode(q, table, seq, max_len=tokens, int_keys=False)
            t_dec = time_steps(caches, bsz, tokens, torch.float16)
            row = {"format": fmt, "batch": bsz, "tokens": tokens, "sdpa_f16_seconds": t_sdpa,
                   "decode_seconds": t_dec,
                   "decode_fraction_of_read_bw": cache.nbytes / t_dec / bw, "configs": []}
            for c in configs:
                bn, nw, ns, qpad, regs, per_sm = c
                out = torch.empty(bsz, HQ, D, device="cuda")
                try:
                    kern = launch(cache, q, table, seq, out, tokens, block_n=bn, num_warps=nw,
                                  num_stages=ns, qpad=qpad, max_registers=regs, per_sm=per_sm,
                                  sms=SMS, words=args.words)
                    torch.cuda.synchronize()
                except Exception as exc:  # a launch the compiler cannot lay out
                    row["configs"].append({"config": "/".join(map(str, c)),
                                           "error": f"{type(exc).__name__}: {exc}"[:300]})
                    continue
                diff = float((out - ref).abs().max() / ref.abs().max())
                outs = [torch.empty_like(out) for _ in caches]
                t = graph_time([partial(launch, cc, q, table, seq, o, tokens, block_n=bn,
                                        num_warps=nw, num_stages=ns, qpad=qpad,
                                        max_registers=regs, per_sm=per_sm, sms=SMS,
                                        words=args.words)
                                for cc, o in zip(caches, outs, strict=True)])
                row["configs"].append({"config": "/".join(map(str, c)), "seconds": t,
                                       "registers": kern.n_regs, "spills": kern.n_spills,
                                       "diff_vs_decode": diff,
                                       "vs_decode": t_dec / t, "vs_sdpa": t_sdpa / t,
                                       "fraction_of_read_bw": cache.nbytes / t / bw})
            best = min((x for x in row["configs"] if "seconds" in x),
                       key=lambda x: x["seconds"], default=None)
            print(f"{fmt} B={bsz} T={tokens}: decode {t_dec * 1e6:.1f} us "
                  f"({t_sdpa / t_dec:.2f}x sdpa); best swapped "
                  + (f"{best['config']} {best['seconds'] * 1e6:.1f} us ({best['vs_sdpa']:.2f}x, "
                     f"{best['registers']} regs, diff {best['diff_vs_decode']:.1e})"
                     if best else "none"), flush=True)
            res["rows"].append(row)
            (out_dir / "swapped.json").write_text(json.dumps(res, indent=1))
            del caches, cache
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
