"""Build the cache a plan predicts with kvplan's own kernels, and measure it.

For every attention layer the real quantized cache (``kvcore.kernels``) and for every recurrent
layer its f32 state are allocated and filled through ``append`` with structured random data.
Then three readings are compared with kvcore's predictions:

- tensor bytes (``numel × element_size`` of every tensor) — equal to kvcore's figure, exactly;
- the CUDA caching allocator's ``memory_allocated`` / ``memory_reserved`` deltas — equal to
  kvcore's model of the allocator: each block rounded up to 512 bytes; requests of at most
  1 MiB packed into 2 MiB segments, up to 10 MiB into 20 MiB segments, larger ones rounded up
  to 2 MiB on their own;
- the driver's ``mem_get_info`` delta — within one segment of the reserved figure.

Decode steps are timed over the whole cache (CUDA events, warm-up, median), with the device's
read bandwidth measured in the same run. ``device="cpu"`` runs the same with the reference
path: allocation is checked exactly, timings are reported but never compared with a GPU.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError
from .formats import get_format
from .kv import CacheOptions, cache_size
from .model import LayerGroup, ModelSpec

__all__ = ["Measurement", "allocator_prediction", "environment", "measure", "token_time",
           "tp_record"]

SMALL = 1 << 20
LARGE = 10 << 20
ROUND = 512
SMALL_SEGMENT = 2 << 20
LARGE_SEGMENT = 20 << 20
GRANULE = 2 << 20


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise InputError("kvplan measure needs torch and triton: pip install 'kvplan[gpu]'",
                         field="device") from None
    return torch


def allocator_prediction(sizes: list[int], free_small: Sequence[int] = (),
                         free_large: Sequence[int] = ()) -> tuple[int, int]:
    """Growth of (memory_allocated, memory_reserved) the CUDA caching allocator reports for
    tensors of ``sizes`` bytes allocated in order, starting from the free blocks it already
    holds (``free_small`` / ``free_large``: the inactive blocks of segments still in use; none
    in a fresh process).

    Each request is rounded up to 512 bytes and served best-fit from the free blocks of its
    pool, else from a new segment: requests of at most 1 MiB from 2 MiB segments, larger ones
    below 10 MiB from 20 MiB segments, the rest from a segment of their own size rounded up to
    2 MiB. A small-pool block is always split; a large-pool block only when more than 1 MiB
    would be left, otherwise the request takes (and is counted as) the whole block.
    """
    allocated = reserved = 0
    free: dict[bool, list[int]] = {True: list(free_small), False: list(free_large)}
    for size in sizes:
        if size <= 0:
            continue
        r = -(-size // ROUND) * ROUND
        small = r <= SMALL
        pool = free[small]
        fits = [i for i, room in enumerate(pool) if room >= r]
        if fits:
            block = pool.pop(min(fits, key=lambda i: pool[i]))
        else:
            block = (SMALL_SEGMENT if small else LARGE_SEGMENT if r < LARGE
                     else -(-r // GRANULE) * GRANULE)
            reserved += block
        left = block - r
        if left >= ROUND if small else left > SMALL:
            pool.append(left)
            allocated += r
        else:
            allocated += block
    return allocated, reserved


@dataclass
class Measurement:
    model: str
    kv_k: str
    kv_v: str
    context: int
    sequences: int
    device: str
    predicted_bytes: int
    allocated_bytes: int
    allocator_bytes: int | None
    allocator_reserved_bytes: int | None
    predicted_allocator_bytes: int | None
    predicted_reserved_bytes: int | None
    driver_bytes: int | None
    layers_measured: int
    layers_total: int
    scale: float
    decode: dict[str, Any] = field(default_factory=dict)
    #: why only some layers were measured (None: all, or as many as asked)
    subset_reason: str | None = None
    env: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _layer_tokens(group: LayerGroup, spec: ModelSpec, context: int, opts: CacheOptions) -> int:
    size = cache_size(spec.__class__(**{**spec.__dict__, "groups": (group,)}), context, 1, opts)
    return size.groups[0].tokens


def _progress(done: int, total: int, label: str, stream: Any) -> None:
    if stream is None:
        return
    width = 30
    filled = width * done // max(1, total)
    stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<24}")
    stream.flush()
    if done >= total:
        stream.write("\n")


def measure(spec: ModelSpec, *, context: int, sequences: int = 1, kv_k: str = "f16",
            kv_v: str | None = None, device: str = "cuda", steps: int = 20,
            max_layers: int | None = None, progress: Any = sys.stderr,
            mtp: bool = False) -> Measurement:
    """Allocate, fill and time the cache of ``spec`` at ``context`` × ``sequences``."""
    torch = _torch()
    from .kernels.cache import PAGED, LayerCache
    from .kernels.kivi import KiviCache

    kv_v = kv_v or kv_k
    fk, fv = get_format(kv_k), get_format(kv_v)
    opts = CacheOptions(kv_k=fk, kv_v=fv, mtp=mtp)
    kivi = fk.residual_tokens or fv.residual_tokens
    if kivi and fk.name != fv.name:
        raise InputError("KIVI caches keep K and V in the same format", field="kv_v")
    for f in (fk, fv):
        if not f.residual_tokens and f.name not in PAGED:
            raise InputError(f"no kernel for {f.name}; measurable formats: "
                             f"{', '.join(PAGED)}, kivi2, kivi4", field="kv")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("no CUDA device here; use --device cpu", field="device")
    groups = spec.groups_for(mtp=mtp)
    # in the model's own layer order, so that a subset keeps a hybrid's mix of layer kinds
    layers = sorted(((g, i) for g in groups for i in range(g.count)),
                    key=lambda gi: gi[0].layers[gi[1]])
    total_layers = len(layers)
    if max_layers is not None:
        layers = layers[:max_layers]
    layers, subset_reason = _fit_layers(layers, spec, context, sequences, opts, device, torch)

    def build(group: LayerGroup, tiny: bool = False) -> tuple[Any, int]:
        if group.kind.holds_state:
            return [torch.zeros(sequences, group.state_values, dtype=torch.float32,
                                device=device)], 0
        tokens = 16 if tiny else _layer_tokens(group, spec, context, opts)
        # V's rows of their own width where a model's differ (MiMo-V2: K 192, V 128); none in
        # a K-only layer (an MLA latent)
        width_v = group.head_dim_v or None
        if kivi:
            return KiviCache(fk.name, sequences, group.n_kv_heads, group.head_dim_k, tokens,
                             device=device, values=group.head_dim_v > 0,
                             head_dim_v=width_v), tokens
        return LayerCache(fk.name, fv.name, sequences, tokens, group.n_kv_heads,
                          group.head_dim_k, device=device, values=group.head_dim_v > 0,
                          head_dim_v=width_v), tokens

    # a format the kernels cannot lay out for one of the model's layer shapes is bad input: say
    # so before anything is allocated at full size
    for group in {id(g): g for g, _ in layers}.values():
        try:
            build(group, tiny=True)
        except ValueError as exc:
            raise InputError(f"cannot measure {fk.name}/{fv.name} on {spec.name}'s "
                             f"{group.kind.value} layers ({group.head_dim_k}-wide heads): {exc}",
                             field="kv") from None
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        _warm_up(layers, build, sequences, device, torch)
        sync()
        torch.cuda.empty_cache()
        free_small, free_large = _free_blocks(torch)
        base_alloc = torch.cuda.memory_allocated()
        base_res = torch.cuda.memory_reserved()
        base_free = torch.cuda.mem_get_info()[0]
    caches: list[tuple[LayerGroup, Any, int]] = []
    sizes: list[int] = []
    # every allocation in order, bookkeeping tables too: what the allocator model replays
    blocks: list[int] = []
    for n, (group, _i) in enumerate(layers):
        cache, tokens = build(group)
        caches.append((group, cache, tokens))
        tensors = cache if isinstance(cache, list) else cache.tensors()
        sizes += [int(t.numel()) * int(t.element_size()) for t in tensors]
        allocs = cache if isinstance(cache, list) else cache.allocations()
        blocks += [int(t.numel()) * int(t.element_size()) for t in allocs]
        _progress(n + 1, len(layers), "allocating", progress)
    sync()
    reading: dict[str, int | None] = {"alloc": None, "res": None, "driver": None}
    if device == "cuda":
        reading["alloc"] = torch.cuda.memory_allocated() - base_alloc
        reading["res"] = torch.cuda.memory_reserved() - base_res
        reading["driver"] = base_free - torch.cuda.mem_get_info()[0]
    allocated = sum(sizes)
    measured_groups = _as_spec(spec, [g for g, _ in layers])
    predicted = cache_size(measured_groups, context, sequences, opts).total_bytes
    full = cache_size(spec, context, sequences, opts).total_bytes
    pred_alloc, pred_res = (allocator_prediction(blocks, free_small, free_large)
                            if device == "cuda" else (0, 0))

    # fill through append, chunk by chunk, with unit-scale random data
    gen = torch.Generator(device=device).manual_seed(0)
    for n, (group, cache, tokens) in enumerate(caches):
        if not isinstance(cache, list):
            _fill(cache, group, tokens, sequences, device, gen, torch)
        _progress(n + 1, len(caches), "filling", progress)
    decode = _time_decode(caches, sequences, context, device, steps, torch, progress,
                          spec.num_attention_heads)
    decode.update(token_time(spec, decode, full / predicted if predicted else 1.0, mtp=mtp))
    return Measurement(
        model=spec.name, kv_k=fk.name, kv_v=fv.name, context=context, sequences=sequences,
        device=_device_name(device, torch), predicted_bytes=predicted, allocated_bytes=allocated,
        allocator_bytes=reading["alloc"], allocator_reserved_bytes=reading["res"],
        predicted_allocator_bytes=pred_alloc if device == "cuda" else None,
        predicted_reserved_bytes=pred_res if device == "cuda" else None,
        driver_bytes=reading["driver"], layers_measured=len(layers),
        layers_total=total_layers, scale=full / predicted if predicted else 1.0,
        decode=decode, env=environment(device, torch), subset_reason=subset_reason)


#: memory kept free beside the cache: the fp16 SDPA baseline's K of one layer comes on top
HEADROOM = 1 << 30


def free_memory(device: str, torch: Any) -> int | None:
    """Bytes the cache may take on ``device`` now: the driver's free memory on a GPU, the
    kernel's MemAvailable on the CPU (None where it cannot be read)."""
    if device == "cuda":
        return int(torch.cuda.mem_get_info()[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _fit_layers(layers: list[tuple[LayerGroup, int]], spec: ModelSpec, context: int,
                sequences: int, opts: CacheOptions, device: str,
                torch: Any) -> tuple[list[tuple[LayerGroup, int]], str | None]:
    """The longest run of ``layers`` (from the first) whose exact cache, plus the timing's
    own buffers, fits in the memory free now; and why, when that is not all of them."""
    free = free_memory(device, torch)
    if free is None:
        return layers, None
    one: dict[int, int] = {}
    baseline = 0
    for g, _i in layers:
        if id(g) not in one:
            one[id(g)] = cache_size(_as_spec(spec, [g]), context, sequences, opts).total_bytes
            tokens = _layer_tokens(g, spec, context, opts) if g.kind.is_attention else 0
            baseline = max(baseline, sequences * g.n_kv_heads * tokens * g.head_dim_k * 2)
    budget = free - baseline - HEADROOM
    need = 0
    for n, (g, _i) in enumerate(layers):
        if need + one[id(g)] > budget:
            whole = sum(one[id(g)] for g, _i in layers)
            if n == 0:
                raise InputError(
                    f"one layer of this cache needs {one[id(g)] / 2**30:.2f} GiB (and "
                    f"{(baseline + HEADROOM) / 2**30:.2f} GiB beside it to time it); "
                    f"{free / 2**30:.2f} GiB is free on {device}", field="context")
            return layers[:n], (f"the cache of these {len(layers)} layers, "
                                f"{whole / 2**30:.2f} GiB, does not fit in the "
                                f"{free / 2**30:.2f} GiB free on {device}")
        need += one[id(g)]
    return layers, None


def token_time(spec: ModelSpec, decode: dict[str, Any], scale: float, *,
               mtp: bool = False) -> dict[str, Any]:
    """Where a generated token's time goes, from a measured decode step: the attention over the
    whole cache (the measured step × ``scale``, the whole model's cache over the measured part)
    and the weights read once per token at the read bandwidth measured in the same run (the
    checkpoint's active weights). Empty without a measured bandwidth (CPU runs)."""
    from .weights import weights_for

    bw = decode.get("read_bandwidth_bytes_per_s")
    step = decode.get("seconds_per_step")
    if not bw or not step:
        return {}
    weights = weights_for(spec, mtp=mtp)
    attention = step * scale
    reading = weights.active_bytes / bw
    return {"attention_seconds_per_token": attention,
            "weights_seconds_per_token": reading,
            "weights_active_bytes": weights.active_bytes,
            "attention_share": attention / (attention + reading)}


def _warm_up(layers: list[tuple[LayerGroup, int]], build: Callable[..., Any], sequences: int,
             device: str, torch: Any) -> None:
    """Run everything measure() runs before its readings once on a tiny cache of each layer
    group, so that the CUDA libraries' lazily loaded code is not counted as cache memory."""
    seen: set[int] = set()
    for group, _i in layers:
        if id(group) in seen:
            continue
        seen.add(id(group))
        cache, _tokens = build(group, tiny=True)
        gen = torch.Generator(device=device).manual_seed(0)
        if not isinstance(cache, list):
            _fill(cache, group, 16, min(sequences, 1), device, gen, torch)
        del cache


def _free_blocks(torch: Any) -> tuple[list[int], list[int]]:
    """Sizes of the free blocks the caching allocator holds in segments still in use
    (small pool, large pool), from its memory snapshot."""
    small: list[int] = []
    large: list[int] = []
    dev = torch.cuda.current_device()
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device", dev) != dev:
            continue
        pool = small if seg.get("segment_type") == "small" else large
        pool += [int(b["size"]) for b in seg.get("blocks", []) if b.get("state") == "inactive"]
    return small, large


def _as_spec(spec: ModelSpec, groups: list[LayerGroup]) -> ModelSpec:
    """``spec`` restricted to one layer per entry of ``groups`` (the measured subset)."""
    merged: dict[int, list[int]] = {}
    order: list[LayerGroup] = []
    for g in groups:
        if id(g) not in merged:
            merged[id(g)] = []
            order.append(g)
        merged[id(g)].append(g.layers[len(merged[id(g)])])
    from dataclasses import replace

    return replace(spec, groups=tuple(replace(g, layers=tuple(merged[id(g)])) for g in order))


def _fill(cache: Any, group: LayerGroup, tokens: int, sequences: int, device: str, gen: Any,
          torch: Any) -> None:
    chunk = 4096
    heads, dim = group.n_kv_heads, group.head_dim_k
    # V's rows at their own width (a K-only layer's V rows are not stored: K's width)
    dim_v = group.head_dim_v or dim
    use_triton = device == "cuda"
    for s in range(sequences):
        for start in range(0, tokens, chunk):
            n = min(chunk, tokens - start)
            k = torch.randn(n, heads, dim, device=device, generator=gen).half()
            v = torch.randn(n, heads, dim_v, device=device, generator=gen).half()
            if hasattr(cache, "n_quant"):
                (cache.append_triton if use_triton else cache.append)(s, k, v)
                continue
            t = torch.arange(start, start + n, device=device)
            pages = torch.full_like(t, s)
            (cache.append if use_triton else cache.append_ref)(k, v, pages, t)


#: bytes the fp16 SDPA baseline reads a timed call, at least: four times an H200's 50 MiB L2
SDPA_STREAM_BYTES = 4 * 50 * 2**20


def _graph(fn: Callable[[], Any], torch: Any) -> Any:
    """``fn`` captured in a CUDA graph, warmed up on the capturing stream first."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        fn()
    torch.cuda.synchronize()
    return graph


def _time(fn: Callable[[], Any], device: str, steps: int, torch: Any) -> float:
    """Median seconds of ``fn``; on a GPU, of its replay from a CUDA graph (as an engine
    replays a decode step: no Python launch overhead). Off a GPU the torch reference runs,
    whose time is a check that it runs, not a speed: one warm-up and a tenth of the steps."""
    for _ in range(3 if device == "cuda" else 1):
        fn()
    times = []
    if device == "cuda":
        run = _graph(fn, torch).replay
        for _ in range(steps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            run()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
    else:
        for _ in range(max(1, steps // 10)):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return float(statistics.median(times))


def query_heads(heads: int, group: LayerGroup) -> int:
    """Query heads a decode step over ``group``'s layers attends with: the model's ``heads``
    (num_attention_heads, a rank's share under tensor parallelism) where its KV heads divide
    them (an MLA latent serves them all), else four a KV head."""
    kv = max(group.n_kv_heads, 1)
    return heads if heads >= kv and heads % kv == 0 else 4 * kv


def decode_step(cache: Any, sequences: int, hq: int, head_dim: int, tokens: int, device: str,
                torch: Any, *, kernel: bool) -> Callable[[], Any]:
    """One layer's decode over ``cache`` (every sequence ``tokens`` long, ``hq`` query heads
    of ``head_dim`` lanes), as a function of no arguments. ``kernel``: the fused kernel,
    writing into one output allocated here, as an engine's step writes into its own buffers
    (without it every call would fill a new output with NaN first, a launch a step does not
    have); else the torch reference."""
    q = torch.randn(sequences, hq, head_dim, device=device).half()
    out = (torch.empty(sequences, hq, cache.head_dim_v, dtype=torch.float32, device=device)
           if kernel else None)
    if hasattr(cache, "n_quant"):  # KIVI: its lengths are its own
        if not kernel:
            return lambda: cache.decode_ref(q.float())
        return lambda: cache.decode(q, out=out)
    table = torch.arange(sequences, device=device, dtype=torch.int32).reshape(-1, 1)
    lens = torch.full((sequences,), tokens, device=device, dtype=torch.int32)
    if not kernel:
        return lambda: cache.decode_ref(q.float(), table, lens)
    return lambda: cache.decode(q, table, lens, max_len=tokens, out=out)


def _time_decode(caches: list[tuple[LayerGroup, Any, int]], sequences: int, context: int,
                 device: str, steps: int, torch: Any, progress: Any,
                 heads: int = 0) -> dict[str, Any]:
    """Median seconds of one decode step over every measured attention layer, the layers run
    back to back as a model runs them (and each layer kind's share timed the same way); fp16
    SDPA timed on one layer of each group and counted once per layer of it. On a GPU the step
    is replayed from a CUDA graph, as serving engines run decode. ``heads``: the model's query
    heads (query_heads)."""
    # a compressed layer shorter than one block holds no entry yet: nothing to read
    timed = [(g, c, t) for g, c, t in caches if not isinstance(c, list) and t > 0]
    steps_fns = [(group, decode_step(cache, sequences, query_heads(heads, group),
                                     group.head_dim_k, tokens, device, torch,
                                     kernel=device == "cuda"))
                 for group, cache, tokens in timed]

    def back_to_back(fns: list[Callable[[], Any]]) -> Callable[[], None]:
        def run() -> None:
            for fn in fns:
                fn()
        return run

    # the layers of each kind back to back, for the split between kinds, then the whole step
    kinds: dict[str, list[Callable[[], Any]]] = {}
    for group, fn in steps_fns:
        kinds.setdefault(group.kind.value, []).append(fn)
    per_group: dict[str, float] = {}
    for n, (kind, fns) in enumerate(kinds.items()):
        per_group[kind] = _time(back_to_back(fns), device, max(3, steps // 4), torch)
        _progress(n + 1, len(kinds) + 1, "timing decode", progress)
    total = (_time(back_to_back([fn for _g, fn in steps_fns]), device, steps, torch)
             if steps_fns else 0.0)
    _progress(len(kinds) + 1, len(kinds) + 1, "timing decode", progress)
    cache_bytes = sum(c.nbytes for _g, c, _t in timed)
    out: dict[str, Any] = {"seconds_per_step": total, "cache_bytes": cache_bytes,
                           "per_kind_seconds": per_group,
                           "query_heads": {g.kind.value: query_heads(heads, g)
                                           for g, _c, _t in timed},
                           # off a GPU the torch reference is what runs: no kernel timing
                           "timing": "cuda_graph" if device == "cuda" else "reference"}
    if total > 0:
        out["cache_bytes_per_s"] = cache_bytes / total
    if device == "cuda":
        sdpa: float | None = 0.0
        seen: dict[int, float | None] = {}
        for group, _cache, tokens in timed:
            if not group.head_dim_v:
                continue
            if id(group) not in seen:
                seen[id(group)] = _time_sdpa(group, sequences, tokens, device, steps, torch,
                                             query_heads(heads, group))
            t = seen[id(group)]
            sdpa = None if sdpa is None or t is None else sdpa + t
        from .kernels.bandwidth import measure_bandwidth

        bw = measure_bandwidth(torch)["read_bytes_per_s"]
        out["read_bandwidth_bytes_per_s"] = bw
        out["fraction_of_read_bandwidth"] = cache_bytes / total / bw if total else None
        out["speedup_vs_f16_sdpa"] = sdpa / total if total and sdpa else None
    return out


def _time_sdpa(group: LayerGroup, sequences: int, tokens: int, device: str, steps: int,
               torch: Any, hq: int) -> float | None:
    """torch's fp16 SDPA over one layer of ``group``'s shape with ``hq`` query heads (None if
    it does not fit)."""
    qq = torch.randn(sequences, hq, 1, group.head_dim_k, device=device).half()
    # K and V apart (with one tensor for both, V's tiles would come from L2, where K's just
    # were), and enough copies that no call finds its layer in L2 (the step it is compared
    # with reads every layer once)
    shape = (sequences, group.n_kv_heads, tokens, group.head_dim_k)
    # V at its own width (MiMo-V2: K 192, V 128)
    shape_v = (*shape[:3], group.head_dim_v)
    layer = 2 * sequences * group.n_kv_heads * tokens * (group.head_dim_k + group.head_dim_v)
    kv = []
    try:
        for _ in range(max(1, min(16, -(-SDPA_STREAM_BYTES // max(1, layer))))):
            kv.append((torch.empty(shape, device=device, dtype=torch.float16).normal_(),
                       torch.empty(shape_v, device=device, dtype=torch.float16).normal_()))
    except torch.cuda.OutOfMemoryError:
        if not kv:
            return None

    def base() -> None:
        for k, v in kv:
            torch.nn.functional.scaled_dot_product_attention(qq, k, v, enable_gqa=True)
    return _time(base, device, steps, torch) / len(kv)


def _device_name(device: str, torch: Any) -> str:
    if device == "cuda":
        return str(torch.cuda.get_device_name(0))
    return "cpu"


def environment(device: str, torch: Any) -> dict[str, Any]:
    """What a measurement ran on: versions and date, and on a GPU the card (name, SMs,
    memory), the CUDA runtime torch was built with and the driver nvidia-smi reports."""
    import datetime
    import platform
    import subprocess

    env: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(),
                           "date": datetime.datetime.now(datetime.UTC).isoformat(
                               timespec="seconds")}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(gpu=props.name, sms=props.multi_processor_count,
                   memory_bytes=props.total_memory, cuda=torch.version.cuda)
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=30).stdout.split()
            env["driver"] = out[0] if out else None
        except (OSError, subprocess.SubprocessError):
            env["driver"] = None
    return env


def tp_record(data: dict[str, Any]) -> dict[str, Any]:
    """One stored measurement for a tensor-parallel run: the whole cache (the ranks' sums)
    on "N × card", with every rank's own figures kept under ``ranks``."""
    ranks = data["ranks"]
    first = ranks[0]

    def total(key: str) -> int | None:
        vals = [r.get(key) for r in ranks]
        return None if any(v is None for v in vals) else sum(v for v in vals if v is not None)
    return {**{k: first[k] for k in ("model", "kv_k", "kv_v", "context", "sequences",
                                      "layers_measured", "layers_total", "scale", "env")},
            "device": f"{data['tp']} × {first['device']}", "tp": data["tp"],
            "predicted_bytes": data["predicted_bytes"], "allocated_bytes": data["allocated_bytes"],
            "allocator_bytes": total("allocator_bytes"),
            "predicted_allocator_bytes": total("predicted_allocator_bytes"),
            "allocator_reserved_bytes": total("allocator_reserved_bytes"),
            "predicted_reserved_bytes": total("predicted_reserved_bytes"),
            "driver_bytes": total("driver_bytes"),
            "decode": {"seconds_per_step": max(r["decode"].get("seconds_per_step", 0)
                                               for r in ranks)},
            "ranks": ranks}


def _rank_worker(rank: int, world: int, port: int, spec: ModelSpec, kwargs: dict[str, Any],
                 queue: Any) -> None:
    """One process per rank: build this rank's shard of the cache and report its figures."""
    import os

    torch = _torch()
    device = kwargs["device"]
    # NVLink multicast stays off on shared hosts
    for var, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                       ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(var, value)
    import torch.distributed as dist

    backend = "nccl" if device == "cuda" else "gloo"
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        from .parallel import Parallel, rank_spec

        shard = rank_spec(spec, Parallel(tp=world))
        m = measure(shard, **{**kwargs, "device": device})
        data = m.to_dict()
        data["rank"] = rank
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, data)
        if rank == 0:
            queue.put(gathered)
    finally:
        dist.destroy_process_group()


def measure_parallel(spec: ModelSpec, tp: int, *, context: int, sequences: int = 1,
                     kv_k: str = "f16", kv_v: str | None = None, device: str = "cuda",
                     steps: int = 5, max_layers: int | None = None,
                     mtp: bool = False) -> list[dict[str, Any]]:
    """Spread the cache over ``tp`` tensor-parallel ranks (one process each: NCCL on GPUs,
    gloo on the CPU); every rank's shard is measured against kvcore's prediction for that rank
    (``kvcore.parallel.rank_spec``)."""
    import multiprocessing as mp
    import socket

    torch = _torch()
    if tp < 2:
        raise InputError("--tp needs at least 2 ranks", field="tp")
    if device == "cuda" and torch.cuda.device_count() < tp:
        raise InputError(f"--tp {tp} needs {tp} GPUs; this machine has "
                         f"{torch.cuda.device_count()}", field="tp")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    kwargs = {"context": context, "sequences": sequences, "kv_k": kv_k, "kv_v": kv_v,
              "device": device, "steps": steps, "max_layers": max_layers, "progress": None,
              "mtp": mtp}
    procs = [ctx.Process(target=_rank_worker, args=(r, tp, port, spec, kwargs, queue))
             for r in range(tp)]
    for p in procs:
        p.start()
    try:
        ranks = queue.get(timeout=3600)
    finally:
        for p in procs:
            p.join(timeout=60)
    if any(p.exitcode not in (0, None) for p in procs):
        raise InputError("a rank failed while measuring", field="tp")
    return list(ranks)
