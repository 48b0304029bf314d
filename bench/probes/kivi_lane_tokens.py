"""KIVI's flush with each lane row of its one-warp tile holding consecutive tokens
(kivi.FLUSH_LANE_TOKENS, kivi_flush_kernel's LANE_TOKENS: a key byte's codes packed in one
thread), and with that its scales' reciprocals by one Newton step (FLUSH_RCP_FMA) and its
ranges two float16 values a word (FLUSH_PACKED_RANGE), against
the tile in token order, in turns, on the decode benchmark's append shapes. First, on the GPU:
the Newton step against the correctly rounded division for every positive float16 scale (as
the kernel adjusts those below float16's normal range), and the bytes of each variant against
token order's.

    python bench/probes/kivi_lane_tokens.py [--shapes 1x4096,64x4096,8x32768] [--rounds 3]
        [--out DIR]

Writes kivi-lane-tokens.json into --out: the scales whose reciprocals differ, whether the
bytes agree, then per format and shape the seconds of each variant in every round and the
read-bandwidth fraction of its best.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import kivi_append_time  # noqa: E402
from turns import in_turns, turns_row  # noqa: E402

from kvcore.kernels import kivi  # noqa: E402
from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.kernels.kivi import KiviCache  # noqa: E402
from kvcore.kernels.kivi_triton import _divisor, _reciprocal  # noqa: E402
from kvcore.measure import environment  # noqa: E402

#: variant → (FLUSH_LANE_TOKENS, FLUSH_RCP_FMA, FLUSH_PACKED_RANGE)
VARIANTS = {"token_order": (False, False, False), "lane_tokens": (True, False, False),
            "lane_tokens_rcp_fma": (True, True, False),
            "lane_tokens_rcp_fma_packed": (True, True, True)}


def use(variant: str) -> None:
    kivi.FLUSH_LANE_TOKENS, kivi.FLUSH_RCP_FMA, kivi.FLUSH_PACKED_RANGE = VARIANTS[variant]


def timed(variant: str, fmt: str, batch: int, tokens: int) -> tuple[float, int]:
    use(variant)
    return kivi_append_time(fmt, batch, tokens)


@triton.jit
def _reciprocals(X, OUT, n, RCP_FMA: tl.constexpr):
    i = tl.program_id(0) * 1024 + tl.arange(0, 1024)
    m = i < n
    scf = tl.load(X + i, mask=m, other=1.0).to(tl.float32)
    tl.store(OUT + i, _reciprocal(_divisor(scf), RCP_FMA), mask=m)


def reciprocal_misses() -> list[int]:
    """The float16 bit patterns of the positive finite scales whose reciprocal by the Newton
    step differs from the correctly rounded division's (as the flush kernel takes them)."""
    bits = torch.arange(1, 0x7C00, dtype=torch.int32, device="cuda")
    x = bits.to(torch.int16).view(torch.float16)
    out = [torch.empty(x.numel(), dtype=torch.float32, device="cuda") for _ in range(2)]
    for fast, o in zip((False, True), out, strict=True):
        _reciprocals[(triton.cdiv(x.numel(), 1024),)](x, o, x.numel(), RCP_FMA=fast)
    differ = out[0].view(torch.int32) != out[1].view(torch.int32)
    return bits[differ].tolist()


def same_bytes(fmt: str) -> bool:
    """Two appends (4,000 tokens, then 1,000 more) to 3 sequences of 8 heads of 128, one
    cache per variant: every plane equal to token order's."""
    g = torch.Generator(device="cuda").manual_seed(5)
    caches = []
    for variant in VARIANTS:
        use(variant)
        cache = KiviCache(fmt, 3, 8, 128, 8192, device="cuda")
        g.manual_seed(5)
        for n in (4000, 1000):
            ks = [torch.randn(n, 8, 128, device="cuda", generator=g).half() for _ in range(3)]
            vs = [torch.randn(n, 8, 128, device="cuda", generator=g).half() for _ in range(3)]
            cache.append_many([0, 1, 2], ks, vs)
        caches.append(cache)
    torch.cuda.synchronize()
    return all(torch.equal(a, b) for other in caches[1:]
               for a, b in zip(caches[0].tensors(), other.tensors(), strict=True))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="kivi2,kivi4")
    ap.add_argument("--shapes", default="1x4096,64x4096,8x32768")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    bw = measure_bandwidth(torch)
    misses = reciprocal_misses()
    print(f"Newton reciprocals unlike the division's: {len(misses)} of 31,743 scales")
    out: dict = {"env": environment("cuda", torch), "bandwidth": bw,
                 "reciprocal_misses": misses, "same_bytes": {}, "rows": []}
    for fmt in args.formats.split(","):
        out["same_bytes"][fmt] = same_bytes(fmt)
        print(f"{fmt} bytes identical: {out['same_bytes'][fmt]}")
    for fmt in args.formats.split(","):
        for shape in args.shapes.split(","):
            batch, tokens = (int(v) for v in shape.split("x"))
            times, moved = in_turns(args.rounds, {
                name: (lambda n=name, b=batch, t=tokens, f=fmt: timed(n, f, b, t))
                for name in VARIANTS})
            out["rows"].append(turns_row(fmt, batch, tokens, moved, times,
                                         bw["read_bytes_per_s"]))
            # after each row, so that a run cut short keeps what it timed
            Path(args.out, "kivi-lane-tokens.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
