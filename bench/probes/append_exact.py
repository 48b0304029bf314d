"""The plain formats' append kernel against the torch reference on many rows: how many bytes of
each plane differ, where the agreement check of bench/append_sweep.py (3,000 tokens) would miss
a rare difference (a quotient rounded otherwise near a rounding boundary of the stored code).

    python bench/probes/append_exact.py [--formats fp8_pth,q8_0,q4_0,nvfp4] [--tokens 65536]
        [--base .base/triton_ops.py] [--out DIR]

Rows: 8 KV heads of 128, fp16 and bf16, of three kinds: normal values times 3; values times a
power of two spread over 2⁻⁸…2⁸ a row; and each format's own dequantized values of the first
kind (requantized: its codes' ties and exact block maxima). Appended in chunks of 32,768 tokens
by the kernel and by the reference into two caches. Writes append-exact.json into --out: per
format, dtype and kind the differing bytes of each plane and the bytes compared, and the first
few differing rows' input block, both codes and both scales. With --base (an earlier commit's
kvcore/kernels/triton_ops.py, as bench/probes/append_base.py takes it), that kernel's bytes
against the same reference too (keys ending " base"). First, on a GPU, the appends' fast
division (triton_ops._div_rn with FAST) against torch's division on 2²⁶ operand pairs a round,
dividends of magnitude 2⁻³⁰…2³⁰ and divisors 2⁻⁶⁹…2⁶⁹ (key "division": the quotients that
differ).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from kvcore.kernels import ref, triton_ops  # noqa: E402
from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402

HKV, D, CHUNK = 8, 128, 32768
#: where the rows and caches live (--device cpu: the interpreter, a smoke test)
DEV = "cuda"


def division_check(rounds: int = 4) -> dict:
    """_div_rn's fast path against torch's a / b (rounded to nearest) on random operands."""
    import triton
    import triton.language as tl

    @triton.jit
    def divide(A, B, Q, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        a = tl.load(A + i, mask=m, other=1.0)
        b = tl.load(B + i, mask=m, other=1.0)
        tl.store(Q + i, triton_ops._div_rn(a, b, True, True), mask=m)

    g = torch.Generator(device="cuda").manual_seed(11)
    n, differing = 1 << 26, 0
    for _ in range(rounds):
        a, b = (torch.exp2(torch.rand(n, device="cuda", generator=g) * 2 * span - span)
                * (1 + torch.rand(n, device="cuda", generator=g)) for span in (30, 69))
        q = torch.empty_like(a)
        divide[(triton.cdiv(n, 1024),)](a, b, q, n, BLOCK=1024)
        differing += int((q != a / b).sum())
    return {"pairs": rounds * n, "differing": differing}


def rows(kind: str, fmt: str, n: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator(device=DEV).manual_seed(seed)
    x = torch.randn(n, HKV, D, device=DEV, generator=g) * 3
    if kind == "spread":
        e = torch.randint(-8, 9, (n, HKV, 1), device=DEV, generator=g).float()
        x = x * torch.exp2(e)
    elif kind == "requantized":
        flat = x.reshape(-1, D)
        gs = ref.nvfp4_global_scale(flat) if fmt == "nvfp4" else 1.0
        planes = ref.quantize(fmt, flat, global_scale=gs)
        x = ref.dequantize(fmt, planes, D, global_scale=gs).reshape(n, HKV, D)
    return x.to(dtype)


def compare(fmt: str, x: torch.Tensor) -> dict:
    n = x.shape[0]
    kern = LayerCache(fmt, fmt, 1, n, HKV, D, device=DEV)
    refc = LayerCache(fmt, fmt, 1, n, HKV, D, device=DEV)
    for a in range(0, n, CHUNK):
        b = min(n, a + CHUNK)
        t = torch.arange(a, b, device=DEV)
        kern.append(x[a:b], x[a:b], torch.zeros_like(t), t)
        refc.append_ref(x[a:b], x[a:b], torch.zeros_like(t), t)
    if DEV == "cuda":
        torch.cuda.synchronize()
    out: dict = {"planes": {}, "examples": []}
    for name, p in kern.k.planes.items():
        # each plane as rows of its last dimension's bytes (a head's row of one token)
        width = p.shape[-1] * p.element_size()
        a = p.view(torch.uint8).reshape(-1, width)
        b = refc.k.planes[name].view(torch.uint8).reshape(-1, width)
        diff = a != b
        out["planes"][name] = {"differing_bytes": int(diff.sum()), "bytes": diff.numel()}
        if int(diff.sum()) and len(out["examples"]) < 4:
            for i in diff.any(dim=1).nonzero()[:2, 0].tolist():
                out["examples"].append({"plane": name, "row": i, "kernel": a[i].tolist(),
                                        "reference": b[i].tolist()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default="fp8_pth,q8_0,q4_0,nvfp4")
    ap.add_argument("--tokens", type=int, default=65536)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--base", help="an earlier triton_ops.py whose append to compare too")
    ap.add_argument("--division-rounds", type=int, default=4,
                    help="rounds of 2^26 pairs of the division check (0: skip it)")
    args = ap.parse_args()
    global DEV
    DEV = args.device
    result: dict = {"env": environment(DEV, torch), "tokens": args.tokens, "heads": HKV,
                    "head_dim": D, "rows": {}}
    path = Path(args.out) / "append-exact.json"
    path.write_text(json.dumps(result, indent=1))
    if DEV == "cuda" and args.division_rounds > 0:
        result["division"] = division_check(args.division_rounds)
        path.write_text(json.dumps(result, indent=1))
        print("fast division against torch's:", result["division"], flush=True)
    kernels = [("", triton_ops.append_kernel)]
    if args.base:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from append_base import load_base
        kernels.append((" base", load_base(args.base).append_kernel))
    for fmt in args.formats.split(","):
        for dtype in (torch.float16, torch.bfloat16):
            for seed, kind in enumerate(("normal", "spread", "requantized")):
                x = rows(kind, fmt, args.tokens, dtype, seed)
                key = f"{fmt} {str(dtype).split('.')[-1]} {kind}"
                for name, kernel in kernels:
                    triton_ops.append_kernel = kernel
                    got = compare(fmt, x)
                    result["rows"][key + name] = got
                    path.write_text(json.dumps(result, indent=1))
                    print(key + name, {k: v["differing_bytes"] for k, v in got["planes"].items()},
                          flush=True)
                triton_ops.append_kernel = kernels[0][1]
                del x
                if DEV == "cuda":
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
