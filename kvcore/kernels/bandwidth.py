"""The device's streaming read and copy bandwidth, measured (needs a CUDA device).

Read: the fastest of Triton grid-stride sums (one load or four independent loads in flight per
thread and step, several grid sizes and warp counts) and torch's own float32 reduction over a
2 GiB fp16 buffer (far larger than L2). Copy: a device-to-device copy of the
same buffer, counting bytes read plus bytes written.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

__all__ = ["measure_bandwidth"]


@triton.jit
def _read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(pid * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc))


@triton.jit
def _read4_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Four independent unmasked loads per step (the last partial stretch masked)."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK * 4
    acc = tl.zeros([BLOCK], tl.float32)
    full = n // step * step
    for start in range(pid * BLOCK * 4, full, step):
        offs = start + tl.arange(0, BLOCK)
        a = tl.load(x_ptr + offs)
        b = tl.load(x_ptr + offs + BLOCK)
        c = tl.load(x_ptr + offs + 2 * BLOCK)
        d = tl.load(x_ptr + offs + 3 * BLOCK)
        acc += (a.to(tl.float32) + b.to(tl.float32)) + (c.to(tl.float32) + d.to(tl.float32))
    for start in range(full + pid * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc))


_MEASURED: dict[int, dict[str, float]] = {}


def measure_bandwidth(torch: Any, nbytes: int = 2 << 30) -> dict[str, float]:
    """{"read_bytes_per_s", "copy_bytes_per_s"} of the current CUDA device, measured once per
    process. When the card is nearly full the buffer shrinks (down to 256 MiB, still far
    larger than L2)."""
    dev = torch.cuda.current_device()
    if dev not in _MEASURED:
        while True:
            try:
                _MEASURED[dev] = _measure(torch, nbytes)
                break
            except torch.cuda.OutOfMemoryError:
                if nbytes <= 256 << 20:
                    raise
                nbytes //= 2
                torch.cuda.empty_cache()
    return _MEASURED[dev]


def _measure(torch: Any, nbytes: int) -> dict[str, float]:
    x = torch.randn(nbytes // 2, dtype=torch.float16, device="cuda")
    n = x.numel()
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count

    def bench(fn: Any) -> float:
        return float(triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median")) / 1e3

    times = []
    for programs in (sms * 4, sms * 8, sms * 16):
        out = torch.empty(programs, device="cuda")
        times.append(bench(lambda o=out, p=programs: _read_kernel[(p,)](x, o, n, BLOCK=8192)))
        for warps in (4, 8):
            times.append(bench(lambda o=out, p=programs, w=warps:
                               _read4_kernel[(p,)](x, o, n, BLOCK=2048, num_warps=w)))
    times.append(bench(lambda: x.sum(dtype=torch.float32)))
    y = torch.empty_like(x)
    t_copy = bench(lambda: y.copy_(x))
    return {"read_bytes_per_s": n * 2 / min(times), "copy_bytes_per_s": 2 * n * 2 / t_copy}
