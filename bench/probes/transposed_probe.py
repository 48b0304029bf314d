"""Probe: the transposed q4_0 decode (bench/probes/transposed.py) against kvplan's decode kernel
on a GPU, B=1/8 at 32k and 128k tokens (GQA 32/8, head_dim 128), timed from CUDA graphs like
bench/decode.py, after checking it against a torch reference. Writes transposed-probe.json.

    python bench/probes/transposed_probe.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from functools import partial
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE)]

import transposed  # noqa: E402
from decode import HKV, HQ, D, copies, copies_for, fill, graph_time, sdpa_time, time_steps  # noqa: E402

from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.kernels.cache import (  # noqa: E402
    LONG_SPLIT,
    MAX_SPLITS,
    SHORT_SPLIT,
    SMS,
    WAVE_PER_SM,
    WAVES_PER_SM,
    LayerCache,
)
from kvcore.kernels.triton_ops import reduce_splits  # noqa: E402
from kvcore.measure import environment  # noqa: E402

G = HQ // HKV
LOG2E = 1.4426950408889634


def splits(bsz: int, max_len: int, bn: int) -> tuple[int, int]:
    """The decode kernel's split rule: (tokens per split, splits)."""
    bh = bsz * HKV
    several = min(math.ceil(WAVES_PER_SM * SMS / bh), max_len // LONG_SPLIT, MAX_SPLITS)
    one_wave = min(math.ceil(WAVE_PER_SM * SMS / bh), max_len // SHORT_SPLIT)
    st = max_len / max(1, several, one_wave)
    st = max(bn, math.ceil(st / bn) * bn)
    return st, max(1, math.ceil(max_len / st))


class Raw:
    """Random q4_0 planes: K token-major, V token-minor within each (sequence, head) page."""

    def __init__(self, bsz: int, tokens: int, empty: bool = False) -> None:
        rows = bsz * HKV * tokens
        if empty:
            return
        self.k0 = torch.randint(0, 256, (rows, 64), dtype=torch.uint8, device="cuda")
        self.k1 = (torch.rand(rows, 4, device="cuda") * 0.02 + 0.01).half()
        self.v0 = torch.randint(0, 256, (rows * 64,), dtype=torch.uint8, device="cuda")
        self.v1 = (torch.rand(rows * 4, device="cuda") * 0.02 + 0.01).half()

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.k0, self.k1, self.v0, self.v1))

    def clone(self) -> Raw:
        o = Raw(0, 0, empty=True)
        o.k0, o.k1, o.v0, o.v1 = (t.clone() for t in (self.k0, self.k1, self.v0, self.v1))
        return o


def run(raw, q, table, seq, out, acc, ml, bsz, tokens, bn, nw, ns, st, nsp):
    transposed.kern[(bsz, HKV, nsp)](
        q, acc, ml, raw.k0, raw.k1, raw.v0, raw.v1, table, seq, table.stride(0), nsp,
        LOG2E / math.sqrt(D), tokens, st, H_KV=HKV, GROUP=G, QPAD=16, D=D, DPOW=D, X0=64, X1=4,
        BLOCK_N=bn, ASM=True, num_warps=nw, num_stages=ns)
    reduce_splits(acc, ml, out, nsp, bsz, HKV, G, D)
    return out


def reference(raw: Raw, q, bsz: int, tokens: int):
    b = raw.k0.view(bsz, HKV, tokens, 64).long()
    kd = torch.stack([((b & 15) - 8).view(bsz, HKV, tokens, 4, 16),
                      ((b >> 4) - 8).view(bsz, HKV, tokens, 4, 16)], dim=4)
    k = (kd.float() * raw.k1.view(bsz, HKV, tokens, 4, 1, 1).float()).reshape(bsz, HKV, tokens, D)
    vb = raw.v0.view(bsz, HKV, 64, tokens).long()
    vd = torch.stack([((vb & 15) - 8).view(bsz, HKV, 4, 16, tokens),
                      ((vb >> 4) - 8).view(bsz, HKV, 4, 16, tokens)], dim=3)
    v = (vd.float() * raw.v1.view(bsz, HKV, 4, 1, 1, tokens).float())
    v = v.reshape(bsz, HKV, D, tokens).transpose(2, 3)
    s = q.float().view(bsz, HKV, G, D) @ k.transpose(2, 3) / math.sqrt(D)
    return (torch.softmax(s, -1) @ v).reshape(bsz, HQ, D)


def setup(bsz: int, tokens: int):
    q = torch.randn(bsz, HQ, D, device="cuda", dtype=torch.float16)
    table = torch.arange(bsz, device="cuda", dtype=torch.int32).reshape(bsz, 1)
    seq = torch.full((bsz,), tokens, device="cuda", dtype=torch.int32)
    return q, table, seq


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    res: dict = {"env": environment("cuda", torch), "bandwidth": measure_bandwidth(torch),
                 "errors": {}, "rows": []}
    bw = res["bandwidth"]["read_bytes_per_s"]
    for bsz, tokens in [(2, 4096), (1, 8192)]:
        raw = Raw(bsz, tokens)
        q, table, seq = setup(bsz, tokens)
        for bn, nw, ns in [(64, 4, 3), (128, 4, 2), (128, 8, 2)]:
            st, nsp = splits(bsz, tokens, bn)
            acc = torch.empty(bsz * HQ * nsp * D, device="cuda")
            ml = torch.empty(bsz * HQ * nsp * 2, device="cuda")
            out = torch.full((bsz, HQ, D), float("nan"), device="cuda")
            run(raw, q, table, seq, out, acc, ml, bsz, tokens, bn, nw, ns, st, nsp)
            ex = reference(raw, q, bsz, tokens)
            res["errors"][f"B{bsz}_T{tokens}_{bn}_{nw}_{ns}"] = float((out - ex).norm() / ex.norm())
    print(res["errors"], flush=True)
    for bsz, tokens in [(1, 131072), (8, 131072), (8, 32768), (1, 32768)]:
        cache = LayerCache("q4_0", "q4_0", bsz, tokens, HKV, D, device="cuda")
        fill(cache, bsz, tokens, torch.float16)
        caches = copies(cache, bsz, tokens)
        t_kernel = min(time_steps(caches, bsz, tokens, torch.float16, block_n=bn, num_warps=nw,
                                  num_stages=ns) for bn, nw, ns in [(64, 4, 3), (32, 2, 2), (64, 4, 2)])
        del caches, cache
        torch.cuda.empty_cache()
        raw = Raw(bsz, tokens)
        raws = [raw] + [raw.clone() for _ in range(copies_for(raw.nbytes) - 1)]
        q, table, seq = setup(bsz, tokens)
        out = torch.empty(bsz, HQ, D, device="cuda")
        best = None
        for bn, nw, ns in [(64, 4, 2), (64, 4, 3), (128, 4, 2), (128, 4, 3), (128, 8, 2)]:
            st, nsp = splits(bsz, tokens, bn)
            acc = torch.empty(bsz * HQ * nsp * D, device="cuda")
            ml = torch.empty(bsz * HQ * nsp * 2, device="cuda")
            t = graph_time([partial(run, r, q, table, seq, out, acc, ml, bsz, tokens, bn, nw, ns,
                                    st, nsp) for r in raws])
            if best is None or t < best[0]:
                best = (t, bn, nw, ns)
        nbytes = raw.nbytes
        del raws, raw
        torch.cuda.empty_cache()
        t_sdpa = sdpa_time(bsz, tokens)
        row = {"batch": bsz, "tokens": tokens, "kernel_seconds": t_kernel,
               "transposed_seconds": best[0], "transposed_config": best[1:],
               "kernel_fraction_of_read_bw": nbytes / t_kernel / bw,
               "transposed_fraction_of_read_bw": nbytes / best[0] / bw,
               "sdpa_f16_seconds": t_sdpa}
        print(row, flush=True)
        res["rows"].append(row)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "transposed-probe.json").write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
