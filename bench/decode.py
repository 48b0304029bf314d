"""Decode attention over real quantized caches on a GPU: time, bytes read per second against
the card's measured read bandwidth, speed-up over torch's fp16 SDPA, and append throughput.

    python bench/decode.py [--quick] [--formats f16,q4_0,…] [--out DIR]
    python bench/decode.py --render decode.json

Prints a table and, on its last line, one JSON document; writes decode.json into --out.
One layer is measured (GQA 32 query / 8 KV heads, head_dim 128); a model's decode step is this
times its attention layers. Steps are replayed from a CUDA graph (the GPU's time, without
Python's launch overhead) over enough copies of the cache that none is read from L2; torch's
fp16 SDPA is timed the same way, and so is append: one call writes 16,384 new tokens into a
filled cache (KIVI: into empty sequences, so that the residual window flushes whole groups as
it does in a prefill). First it checks every format on the GPU against the torch reference, the PTX
unpacking against the plain Triton path, and three page sizes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvcore.kernels import ref  # noqa: E402
from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.kernels.cache import (  # noqa: E402
    INT_KEYS,
    INT_KEYS_LAUNCH,
    LAUNCH,
    LAUNCH_MANY,
    MANY_ROWS,
    LayerCache,
)
from kvcore.kernels.kivi import KiviCache  # noqa: E402
from kvcore.kv import geometry_bytes  # noqa: E402
from kvcore.measure import environment  # noqa: E402

HQ, HKV, D = 32, 8, 128


def set_heads(spec: str) -> bool:
    """Set HQ, HKV and D from "query heads/KV heads/head_dim[/k]" (the --heads of the
    scripts beside this one); False for a trailing /k: a K-only cache (an MLA latent, V = the
    keys)."""
    global HQ, HKV, D
    hq, hkv, d, *konly = spec.split("/")
    HQ, HKV, D = int(hq), int(hkv), int(d)
    return konly != ["k"]
FORMATS = ["f16", "bf16", "fp8_pth", "q8_0", "q4_0", "tbq4", "tbq3", "nvfp4"]
#: the KIVI formats (their own cache, kvcore.kernels.kivi), timed after the others
KIVI_FORMATS = ["kivi2", "kivi4"]
#: decode kernel launch configurations tried per shape (block_n, num_warps, num_stages), besides
#: the format's default (kvcore.kernels.cache.LAUNCH or LAUNCH_MANY; INT_KEYS_LAUNCH for a format
#: whose scores are an integer product)
CONFIGS = [(64, 4, 2), (128, 4, 2)]


def check_correctness() -> dict[str, dict[str, float]]:
    """Each format on the GPU against the torch reference and exact attention (small shapes),
    the PTX unpacking against the plain Triton path, and pages of 16 (several to a tile), 64
    (several tiles to a page) and 50 (tiles straddle pages) against each other; the KIVI
    formats against their reference (the fraction of each plane's elements the kernel's
    append writes as the token-by-token torch append does, decode against attention over the
    dequantized cache) and exact attention."""
    errs = {}
    for fmt in FORMATS:
        errs[fmt] = _check(fmt, 16)
        for page in (64, 50):
            errs[fmt][f"page_{page}_vs_reference"] = _check(fmt, page)["vs_reference"]
    for page in (32, 64):
        # q4_0, q8_0, nvfp4, tbq4 and tbq3 by the Gluon kernel (decode's default past
        # GLUON_LEAST_WORK): forced, q8_0 against the reference with the float16 query, which
        # its form multiplies
        for fmt in ("q4_0", "q8_0", "nvfp4", "tbq4", "tbq3"):
            errs[fmt][f"gluon_page_{page}_vs_reference"] = _check(
                fmt, page, gluon=True)["vs_reference"]
    for fmt in KIVI_FORMATS:
        errs[fmt] = _check_kivi(fmt)
    return errs


def kivi_appended(fmt: str, k: torch.Tensor, v: torch.Tensor, lens: list[int],
                  writers_first: bool = False) -> tuple[KiviCache, dict[str, float]]:
    """A KIVI cache of sequences k, v [S, T, HKV, D] (lens[s] tokens of sequence s) filled by
    the Triton append in chunks of CHUNKS' sizes in turn (each after the first flushes tokens
    from the ring while its newest go into the ring), and the share of each plane's elements
    that it writes as the token-by-token torch append does. ``writers_first``: each append's
    launch in two, the ring-writing programs first (KiviCache.write_append)."""
    cache = KiviCache(fmt, len(lens), HKV, D, max(lens), device=k.device)
    one = KiviCache(fmt, len(lens), HKV, D, max(lens), device=k.device)
    for s, n in enumerate(lens):
        append_in_chunks(cache, s, k[s, :n], v[s, :n], writers_first)
        one.append(s, k[s, :n], v[s, :n])
    return cache, {n: float((getattr(cache, n) == getattr(one, n)).double().mean())
                   for n in ("kq", "ks", "km", "vq", "vs", "vm", "kr", "vr")}


#: sizes of the appends kivi_appended makes, in turn
CHUNKS = (300, 37, 159, 1, 200)


def append_in_chunks(cache: KiviCache, s: int, k: torch.Tensor, v: torch.Tensor,
                     writers_first: bool = False) -> None:
    """Tokens k, v [n, heads, width] appended to sequence ``s`` of ``cache`` by the Triton
    append in chunks of CHUNKS' sizes in turn. ``writers_first``: KiviCache.write_append's."""
    a, n = 0, k.shape[0]
    for c in itertools.cycle(CHUNKS):
        if a >= n:
            break
        b = min(n, a + c)
        cache.write_append(s, k[a:b], v[a:b], *cache.plan_append(s, b - a),
                           writers_first=writers_first)
        a = b


def _check_kivi(fmt: str) -> dict[str, float]:
    """A KIVI cache of three sequences (1000, 1 and 777 tokens) on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(0)
    lens = [1000, 1, 777]
    k = torch.randn(len(lens), max(lens), HKV, D, device="cuda", generator=g).half()
    v = torch.randn(len(lens), max(lens), HKV, D, device="cuda", generator=g).half()
    cache, agree = kivi_appended(fmt, k, v, lens)
    same = {f"append_identical_{n}": x for n, x in agree.items()}
    # the three sequences' appends in one launch a chunk (write_appends), against the same
    # chunks a launch each: every sequence's groups and ring alike (their slots were taken
    # in another order)
    many = KiviCache(fmt, len(lens), HKV, D, max(lens), device="cuda")
    a = 0
    for c in CHUNKS * 4:
        seqs = [s for s, n in enumerate(lens) if a < n]
        if not seqs:
            break
        many.append_many(seqs, [k[s, a:min(lens[s], a + c)] for s in seqs],
                         [v[s, a:min(lens[s], a + c)] for s in seqs])
        a += c
    same["one_launch_identical"] = float(kivi_same_bytes(many, cache))
    q = torch.randn(len(lens), HQ, D, device="cuda", generator=g).half()
    out = cache.decode(q)
    assert not torch.isnan(out).any(), fmt
    expect = cache.decode_ref(q.double())
    exact = ref.attention_ref(q.double(), k.permute(0, 2, 1, 3).double(),
                              v.permute(0, 2, 1, 3).double(),
                              torch.tensor(lens, device="cuda"))
    return {"vs_reference": float((out.double() - expect).norm() / expect.norm()),
            "vs_exact": float((out.double() - exact).norm() / exact.norm()),
            **same}


def kivi_same_bytes(a: KiviCache, b: KiviCache) -> bool:
    """Whether two KIVI caches of one shape hold the same bytes for every sequence: its
    lengths, each quantized group's planes (in the slot each table gives it) and its ring."""
    if (a.n_quant, a.n_resid) != (b.n_quant, b.n_resid):
        return False
    for s, nq in enumerate(a.n_quant):
        sa = a.group_table[s, :nq // a.group].long()
        sb = b.group_table[s, :nq // b.group].long()
        planes = ("kq", "ks", "km", "vq", "vs", "vm")
        if not all(torch.equal(getattr(a, p)[sa], getattr(b, p)[sb]) for p in planes):
            return False
        if not (torch.equal(a.kr[s], b.kr[s]) and torch.equal(a.vr[s], b.vr[s])):
            return False
    return True


def _check(fmt: str, page: int, **launch: object) -> dict[str, float]:
    """One format with pages of ``page`` tokens under a shuffled block table (``launch`` goes
    to the decode checked)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    lens = [1000, 1, 777]
    pages_per = math.ceil(max(lens) / page)
    table = torch.randperm(len(lens) * pages_per, device="cuda").reshape(len(lens), -1)
    table = table.to(torch.int32)
    cache = LayerCache(fmt, fmt, table.numel(), page, HKV, D, device="cuda")
    dtype = torch.bfloat16 if fmt == "bf16" else torch.float16
    k = torch.randn(len(lens), max(lens), HKV, D, device="cuda", generator=g).to(dtype)
    v = torch.randn(len(lens), max(lens), HKV, D, device="cuda", generator=g).to(dtype)
    fill_paged(cache, table, k, v, lens)
    q = torch.randn(len(lens), HQ, D, device="cuda", generator=g).to(dtype)
    seq = torch.tensor(lens, device="cuda", dtype=torch.int32)
    out = cache.decode(q, table, seq, **launch)
    assert not torch.isnan(out).any(), fmt
    plain = cache.decode(q, table, seq, asm=False)
    expect = cache.decode_ref(q.float(), table, seq,
                              **({"int_query": False} if launch.get("gluon") else {}))
    exact = ref.attention_ref(q.float(), k.permute(0, 2, 1, 3).float(),
                              v.permute(0, 2, 1, 3).float(), seq)
    return {
        "vs_reference": float((out.double() - expect).norm() / expect.norm()),
        "vs_exact": float((out.double() - exact).norm() / exact.norm()),
        "ptx_vs_plain": float((out.double() - plain.double()).norm() / plain.norm()),
    }


def fill_paged(cache: LayerCache, table: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               lens: list[int]) -> None:
    """Append the first lens[b] rows of k[b] and v[b] ([B, T, H_KV, D]) into the pages that row
    b of the block table names, cache.page_size tokens each."""
    page = cache.page_size
    for b, n in enumerate(lens):
        t = torch.arange(n, device=k.device)
        cache.append(k[b, :n], v[b, :n], table[b, t // page].long(), t % page)


def fill(cache: LayerCache, batch: int, tokens: int, dtype: torch.dtype) -> None:
    """Append `tokens` per sequence in chunks (random data)."""
    chunk = 1 << 16
    for b in range(batch):
        for start in range(0, tokens, chunk):
            n = min(chunk, tokens - start)
            t = torch.arange(start, start + n, device="cuda")
            kx = torch.randn(n, HKV, D, device="cuda", dtype=dtype)
            vx = torch.randn(n, HKV, D, device="cuda", dtype=dtype)
            cache.append(kx, vx, torch.full_like(t, b), t)


#: tokens (of all KV heads) one timed append writes: a prefill chunk's worth
APPEND_TOKENS = 16384


def append_time(cache: LayerCache, batch: int, tokens: int, dtype: torch.dtype,
                **launch: object) -> tuple[float, int]:
    """Seconds per append call of min(APPEND_TOKENS, batch · tokens) new tokens into a filled
    cache (K and V, or K alone in a K-only cache; fp16 or bf16 in), replayed from a CUDA graph
    over input copies too large for L2, and the bytes each call moves: the input read plus the
    cache bytes written.
    ``launch`` goes to LayerCache.append."""
    n = min(APPEND_TOKENS, batch * tokens)
    sides = 2 if cache.has_v else 1
    moved = sides * n * HKV * D * dtype.itemsize + cache.nbytes * n // (batch * tokens)
    t = torch.arange(n, device="cuda")
    b, off = t // tokens, t % tokens
    inputs = [(torch.randn(n, HKV, D, device="cuda", dtype=dtype),
               torch.randn(n, HKV, D, device="cuda", dtype=dtype))
              for _ in range(copies_for(moved))]
    return graph_time([partial(cache.append, kx, vx, b, off, **launch)
                       for kx, vx in inputs]), moved


#: bytes a timed sequence of calls reads, at least: four times the H200's 50 MiB L2, so that no
#: call finds its cache in L2 left there by the one before
STREAM_BYTES = 4 * 50 * 2**20


def graph_time(fns: list, rep_ms: float = 100.0) -> float:
    """Seconds per call of the callables ``fns`` (each one decode step, over caches of their
    own), replayed from a CUDA graph as a serving engine replays its decode step: the GPU's time
    without the Python launch overhead. Median of ten replays."""
    stream = torch.cuda.Stream()
    # the side stream starts after the work queued so far (the inputs' initialisation)
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for f in fns:
            f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for f in fns:
            f()
        torch.cuda.synchronize()
        rounds = max(1, min(200, int(rep_ms / 1e3 / max(time.perf_counter() - t0, 1e-6))))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(rounds):
                for f in fns:
                    f()
        graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            graph.replay()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) / 1e3 / (rounds * len(fns)))
    return sorted(times)[len(times) // 2]


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖a − b‖ / ‖b‖ in float64."""
    return float((a.double() - b.double()).norm() / b.double().norm())


def write_json(out: str | Path, name: str, result: object) -> None:
    """``result`` as OUT/NAME, the folder made first. The benchmarks write after every row, so
    that a run stopped at its time limit keeps what it finished."""
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / name).write_text(json.dumps(result, indent=2))


def compiled(kernel: Any) -> dict[object, list[int]]:
    """Each variant of the Triton ``kernel`` compiled so far in this process → [registers,
    spilled bytes, warps, shared-memory bytes] (empty where this triton keeps its compiled
    kernels elsewhere)."""
    out: dict[object, list[int]] = {}
    try:
        for device, binder in kernel.device_caches.items():
            for key, k in binder[0].items():
                out[(device, key)] = [int(getattr(k, "n_regs", -1)),
                                      int(getattr(k, "n_spills", -1)),
                                      int(k.metadata.num_warps),
                                      int(getattr(k.metadata, "shared", -1))]
    except (AttributeError, IndexError, TypeError):
        return {}
    return out


def copies_for(nbytes: int) -> int:
    """How many copies of a cache of ``nbytes`` a timed sequence cycles through."""
    return max(1, min(16, math.ceil(STREAM_BYTES / max(1, nbytes))))


def copies(cache: LayerCache, batch: int, tokens: int) -> list[LayerCache]:
    """The cache and enough clones of it that a timed sequence of steps never reads from L2."""
    return [cache] + [clone(cache, batch, tokens) for _ in range(copies_for(cache.nbytes) - 1)]


def filled_copies(fmt: str, batch: int, tokens: int, dtype: torch.dtype = torch.float16,
                  fmt_v: str | None = None) -> list[LayerCache]:
    """A cache of K in ``fmt`` and V in ``fmt_v`` (``fmt`` if not given), ``batch`` sequences of
    ``tokens`` random ``dtype`` rows, and its copies (copies)."""
    cache = LayerCache(fmt, fmt_v or fmt, batch, tokens, HKV, D, device="cuda")
    fill(cache, batch, tokens, dtype)
    return copies(cache, batch, tokens)


def step_inputs(batch: int, tokens: int, dtype: torch.dtype = torch.float16
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A decode step's block table (one page per sequence), lengths (``tokens`` each) and
    random query [batch, HQ, D]."""
    table = torch.arange(batch, device="cuda", dtype=torch.int32).reshape(batch, 1)
    seq = torch.full((batch,), tokens, device="cuda", dtype=torch.int32)
    return table, seq, torch.randn(batch, HQ, D, device="cuda", dtype=dtype)


def time_steps(caches: list[LayerCache], batch: int, tokens: int,
               dtype: torch.dtype = torch.float16, **launch: object) -> float:
    """Seconds per decode step over ``caches`` (one page per sequence, every sequence holding
    ``tokens``), cycling through them; ``launch`` goes to LayerCache.decode."""
    table, seq, q = step_inputs(batch, tokens, dtype)
    out = torch.empty(batch, HQ, D, device="cuda", dtype=torch.float32)
    return graph_time([partial(c.decode, q, table, seq, max_len=tokens, out=out, **launch)
                       for c in caches])


def sdpa_time(batch: int, tokens: int) -> float:
    """torch's fp16 scaled_dot_product_attention for one decode step (GQA by enable_gqa)."""
    n = copies_for(2 * batch * HKV * tokens * D * 2)
    qkv = [(torch.randn(batch, HQ, 1, D, device="cuda", dtype=torch.float16),
            torch.randn(batch, HKV, tokens, D, device="cuda", dtype=torch.float16),
            torch.randn(batch, HKV, tokens, D, device="cuda", dtype=torch.float16))
           for _ in range(n)]
    fns = [partial(torch.nn.functional.scaled_dot_product_attention, q, k, v, enable_gqa=True)
           for q, k, v in qkv]
    return graph_time(fns)


def clone(cache: LayerCache, batch: int, tokens: int) -> LayerCache:
    """Another cache of the same formats and shape holding the same bytes."""
    other = LayerCache(cache.k.fmt, cache.v.fmt, batch, tokens, HKV, D, device="cuda",
                       values=cache.has_v)
    for a, b in zip(other.tensors(), cache.tensors(), strict=True):
        a.copy_(b)
    for mine, theirs in ((other.k, cache.k), (other.v, cache.v)):
        mine.global_scale_host, mine.wide = theirs.global_scale_host, theirs.wide
    return other


def kivi_fill(fmt: str, batch: int, tokens: int) -> KiviCache:
    """A KIVI cache holding ``tokens`` random fp16 tokens per sequence."""
    cache = KiviCache(fmt, batch, HKV, D, tokens, device="cuda")
    for s in range(batch):
        cache.append_triton(s, torch.randn(tokens, HKV, D, device="cuda", dtype=torch.float16),
                            torch.randn(tokens, HKV, D, device="cuda", dtype=torch.float16))
    return cache


def kivi_copies(cache: KiviCache) -> list[KiviCache]:
    """The cache and enough copies of it (bytes, group table and lengths) that a timed
    sequence of steps never reads from L2."""
    out = [cache]
    for _ in range(copies_for(cache.nbytes) - 1):
        other = KiviCache(cache.fmt, cache.seqs, cache.heads, cache.head_dim, cache.capacity,
                          device="cuda", values=cache.has_v)
        for a, b in zip(other.allocations(), cache.allocations(), strict=True):
            a.copy_(b)
        other.n_quant, other.n_resid = list(cache.n_quant), list(cache.n_resid)
        other._free = list(cache._free)
        out.append(other)
    return out


def kivi_append_time(fmt: str, batch: int, tokens: int, num_warps: int | None = None,
                     ring_kernel: bool = True, max_registers: int | None = None,
                     writers_first: bool = False, per_sequence: bool = False,
                     parts: int | None = None) -> tuple[float, int]:
    """Seconds per append of min(APPEND_TOKENS, batch · tokens) new tokens into empty
    sequences of a KIVI cache (whole sequences, the first ones), replayed from a CUDA graph
    over input copies too large for L2, and the bytes each append moves: the input read, the
    quantized groups it flushes and the residual-ring slots it writes. Several sequences' appends
    are one launch (KiviCache.write_appends); ``per_sequence``: a launch each, as before kernel
    v77, as also where ``ring_kernel`` is off or ``writers_first`` on (a launch's options).
    ``num_warps``, ``max_registers``, ``parts``: the launch's, as KiviCache.write_append takes
    them."""
    n = min(APPEND_TOKENS, batch * tokens)
    cache = KiviCache(fmt, batch, HKV, D, tokens, device="cuda")
    counts = [(s, min(tokens, n - s * tokens)) for s in range(batch) if n > s * tokens]
    if len(counts) > 1 and not per_sequence and ring_kernel and not writers_first:
        return kivi_batched_append_time(cache, counts, num_warps, max_registers, parts)
    plans = []
    for s, m in counts:
        plans.append((s, m, cache.plan_append(s, m)))
    slot = kivi_slot_bytes(cache)
    moved = (2 * n * HKV * D * 2 + sum(p[2] for _, _, p in plans) * slot
             + sum(min(m, cache.ring) for _, m, _ in plans) * 2 * HKV * D * 2)

    def step(xs: list) -> None:
        for (s, _, plan), (kx, vx) in zip(plans, xs, strict=True):
            cache.write_append(s, kx, vx, *plan, num_warps=num_warps, ring_kernel=ring_kernel,
                               max_registers=max_registers, writers_first=writers_first,
                               parts=parts)

    inputs = [[(torch.randn(m, HKV, D, device="cuda", dtype=torch.float16),
                torch.randn(m, HKV, D, device="cuda", dtype=torch.float16)) for _, m, _ in plans]
              for _ in range(copies_for(moved))]
    return graph_time([partial(step, xs) for xs in inputs]), moved


def kivi_batched_append_time(cache: KiviCache, counts: list[tuple[int, int]],
                             num_warps: int | None = None, max_registers: int | None = None,
                             parts: int | None = None) -> tuple[float, int]:
    """kivi_append_time's figures for the appends of ``counts`` [(sequence, tokens), …] to the
    empty sequences of ``cache`` in one launch (KiviCache.write_appends)."""
    plans, programs = cache.plan_appends(counts)
    flushed = int(plans[:, 2].sum())
    n = sum(m for _, m in counts)
    moved = (2 * n * HKV * D * 2 + flushed * kivi_slot_bytes(cache)
             + sum(min(m, cache.ring) for _, m in counts) * 2 * HKV * D * 2)
    inputs = [(torch.randn(n, HKV, D, device="cuda", dtype=torch.float16),
               torch.randn(n, HKV, D, device="cuda", dtype=torch.float16))
              for _ in range(copies_for(moved))]
    return graph_time([partial(cache.write_appends, plans, programs, kx, vx,
                               num_warps=num_warps, max_registers=max_registers,
                               parts=parts)
                       for kx, vx in inputs]), moved


def kivi_slot_bytes(cache: KiviCache) -> int:
    """The bytes of one quantized group of a KIVI cache, over its KV heads: codes, scales and
    minimums of K and V."""
    return sum(t[0].numel() * t.element_size()
               for t in (cache.kq, cache.ks, cache.km, cache.vq, cache.vs, cache.vm))


def kivi_row(fmt: str, batch: int, tokens: int, t_sdpa: float | None, read_bw: float) -> dict:
    """One results row of a KIVI format: decode over a full cache, then append."""
    cache = kivi_fill(fmt, batch, tokens)
    nbytes = geometry_bytes(fmt, fmt, layers=1, sequences=batch, kv_heads=HKV, head_dim=D,
                            tokens=tokens)
    assert cache.nbytes == nbytes
    caches = kivi_copies(cache)
    q = torch.randn(batch, HQ, D, device="cuda", dtype=torch.float16)
    # the output given, as time_steps gives it (no fill of a new one each step)
    out = torch.empty(batch, HQ, D, device="cuda", dtype=torch.float32)
    t = graph_time([partial(c.decode, q, out=out) for c in caches])
    # the kernel decode took: KIVI's Gluon kernel where it applies, else the Triton one
    gluon = cache._takes_gluon(q, False, False)
    kernel = "kivi2_swapped_kernel" if gluon else "kivi_decode_kernel"
    config: dict = {"kernel": kernel, "split": "default"}
    if gluon:  # and whether in its V_AFTER and K_SUB forms
        from kvcore.kernels.gluon_kivi import launch_for
        launch = launch_for(HQ // HKV, D, cache.bits)
        config.update(v_after=launch.v_after, k_sub=launch.k_sub)
    del cache, caches
    append_s, append_bytes = kivi_append_time(fmt, batch, tokens)
    return {"format": fmt, "batch": batch, "tokens": tokens, "seconds": t,
            "config": config, "cache_bytes": nbytes, "read_bytes_per_s": nbytes / t,
            "fraction_of_read_bw": nbytes / t / read_bw, "sdpa_f16_seconds": t_sdpa,
            "speedup_vs_sdpa": (t_sdpa / t) if t_sdpa else None,
            "append_seconds": append_s, "append_bytes": append_bytes,
            "append_bytes_per_s": append_bytes / append_s,
            "append_fraction_of_bw": append_bytes / append_s / read_bw}


def render(result: dict) -> str:
    """The results table of a decode.json, in markdown."""
    env, bw = result["env"], result["bandwidth"]
    lines = [f"GPU {env['gpu']} ({env['sms']} SMs), driver {str(env.get('driver') or 'unknown').splitlines()[0]}, "
             f"torch {env['torch']}, triton {env['triton']}, Python {env['python']}, "
             f"{env['date']}.", "",
             f"Measured in the same run: streaming read {bw['read_bytes_per_s'] / 1e12:.2f} TB/s,"
             f" device-to-device copy {bw['copy_bytes_per_s'] / 1e12:.2f} TB/s (read + write).",
             "", "| format | batch | tokens | decode µs | cache read TB/s | % of read bandwidth | "
             "vs fp16 SDPA | append TB/s | append % of read bandwidth |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        sp = f"{r['speedup_vs_sdpa']:.2f}×" if r["speedup_vs_sdpa"] else "–"
        lines.append(f"| {r['format']} | {r['batch']} | {r['tokens']:,} | "
                     f"{r['seconds'] * 1e6:.1f} | {r['read_bytes_per_s'] / 1e12:.2f} | "
                     f"{r['fraction_of_read_bw']:.1%} | {sp} | "
                     f"{r['append_bytes_per_s'] / 1e12:.2f} | "
                     f"{r['append_fraction_of_bw']:.1%} |")
    return "\n".join(lines)


def report(row: dict) -> None:
    """One results row, printed."""
    sp = f"{row['speedup_vs_sdpa']:.2f}x" if row["speedup_vs_sdpa"] else "  -  "
    print(f"{row['format']:8s} B={row['batch']:<3d} T={row['tokens']:<8d} "
          f"{row['seconds'] * 1e6:9.1f} us {row['read_bytes_per_s'] / 1e12:5.2f} TB/s "
          f"({row['fraction_of_read_bw']:5.1%}) vs SDPA {sp}  "
          f"append {row['append_bytes_per_s'] / 1e12:5.2f} TB/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--formats", default=",".join(FORMATS + KIVI_FORMATS))
    ap.add_argument("--render", metavar="JSON", help="print the table of a decode.json and stop")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return
    formats = args.formats.split(",")
    env = environment("cuda", torch)
    print(env, flush=True)
    bw = measure_bandwidth(torch)
    print({k: f"{v / 1e12:.2f} TB/s" for k, v in bw.items()}, flush=True)
    errs = check_correctness()
    print("correctness:", {k: {n: f"{e:.2e}" for n, e in v.items()} for k, v in errs.items()},
          flush=True)
    shapes = [(1, 4096), (1, 32768), (1, 131072), (8, 32768), (8, 131072), (64, 4096),
              (1, 1 << 20), (64, 32768)]
    if args.quick:
        shapes = [(1, 32768), (8, 131072)]
    rows = []
    for batch, tokens in shapes:
        t_sdpa = sdpa_time(batch, tokens) if batch * tokens <= 8 * 131072 * 8 else None
        for fmt in formats:
            if fmt in KIVI_FORMATS:
                row = kivi_row(fmt, batch, tokens, t_sdpa, bw["read_bytes_per_s"])
                rows.append(row)
                write_json(args.out, "decode.json",
                           {"env": env, "bandwidth": bw, "correctness": errs, "rows": rows})
                report(row)
                torch.cuda.empty_cache()
                continue
            dtype = torch.bfloat16 if fmt == "bf16" else torch.float16
            cache = LayerCache(fmt, fmt, batch, tokens, HKV, D, device="cuda")
            fill(cache, batch, tokens, dtype)
            append_s, append_bytes = append_time(cache, batch, tokens, dtype)
            caches = copies(cache, batch, tokens)
            best = None
            default = (INT_KEYS_LAUNCH if fmt in INT_KEYS else
                       (LAUNCH_MANY if batch * HKV >= MANY_ROWS else LAUNCH)[fmt])
            # decode's own choice first (no launch given: ROTATED_TILES where they apply), then
            # the table's launch given explicitly, then CONFIGS
            for launch in dict.fromkeys([None, default, *CONFIGS]):
                kw = {} if launch is None else dict(zip(("block_n", "num_warps", "num_stages"),
                                                        launch, strict=True))
                try:
                    t_c = time_steps(caches, batch, tokens, dtype, **kw)
                except triton.runtime.errors.OutOfResources:
                    continue
                if best is None or t_c < best[0]:
                    best = (t_c, *(launch or ("default", "default", "default")))
            del caches
            t, block_n, warps, stages = best
            nbytes = geometry_bytes(fmt, fmt, layers=1, sequences=batch, kv_heads=HKV,
                                    head_dim=D, tokens=tokens)
            assert cache.nbytes == nbytes
            row = {"format": fmt, "batch": batch, "tokens": tokens, "seconds": t,
                   "config": {"block_n": block_n, "num_warps": warps, "num_stages": stages},
                   "cache_bytes": nbytes, "read_bytes_per_s": nbytes / t,
                   "fraction_of_read_bw": nbytes / t / bw["read_bytes_per_s"],
                   "sdpa_f16_seconds": t_sdpa,
                   "speedup_vs_sdpa": (t_sdpa / t) if t_sdpa else None,
                   "append_seconds": append_s, "append_bytes": append_bytes,
                   "append_bytes_per_s": append_bytes / append_s,
                   "append_fraction_of_bw": append_bytes / append_s / bw["read_bytes_per_s"]}
            rows.append(row)
            write_json(args.out, "decode.json",
                       {"env": env, "bandwidth": bw, "correctness": errs, "rows": rows})
            report(row)
            del cache
            torch.cuda.empty_cache()
    write_json(args.out, "decode.json",
               {"env": env, "bandwidth": bw, "correctness": errs, "rows": rows})
    print(json.dumps({"env": env, "bandwidth": bw, "rows": len(rows)}))


if __name__ == "__main__":
    main()
