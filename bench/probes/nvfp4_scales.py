"""A probe: nvfp4 decode where the block scales are small, against LayerCache.decode_ref.

The decode kernel unpacks an nvfp4 value as its e2m1 code times 2⁻¹⁴ (the code's bits laid in
float16's) times the block scale times 2⁷, the rest of the scale in the row scale: exact in
float16 for every e4m3 scale, but for blocks whose scale is near e4m3's subnormal range the
values it hands the tensor cores are float16 subnormals. This checks that the products take them
as they are: the cache's first rows set a large global scale (largest magnitude ``--big``), the
rest are blocks of magnitudes spread over ``--decades`` powers of ten below 1, so that their e4m3
scales run down through the subnormals, and the attention output over those rows is compared
with the reference, which dequantizes the same bytes in float32 (largest difference over the
output's largest magnitude). Values the products flushed to zero would show as differences of
the order of the values themselves.

    python bench/probes/nvfp4_scales.py [--big 1000] [--decades 4] [--out DIR]

Runs decode's default launch, the swapped one, words and bytes in 32-token tiles, 16-token tiles,
and the plain Triton path (asm=False), at batch 3 with lengths 300, 77 and 512 over pages of
16 tokens (GQA 8/2 × 128). Also prints the share of the small rows' blocks whose e4m3 scale is
subnormal. Writes nvfp4-scales.json. In the interpreter (TRITON_INTERPRET=1) it runs on the CPU
with the plain path only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE)]

#: (name, decode keyword arguments)
LAUNCHES = [("default", {}), ("swap", {"swap": True}),
            ("words32", {"swap": False, "block_n": 32, "words": True}),
            ("bytes32", {"swap": False, "block_n": 32, "words": False}),
            ("tiles16", {"swap": False, "block_n": 16, "num_warps": 1}),
            ("plain", {"asm": False})]


def build(device: str, big: float, decades: int):
    """A paged nvfp4 cache whose first 8 rows of each sequence have magnitudes up to ``big`` and
    whose other rows are 16-value blocks of magnitudes 10^-u, u uniform in [0, decades]."""
    import torch
    from decode import fill_paged

    from kvcore.kernels.cache import LayerCache

    g = torch.Generator(device="cpu").manual_seed(3)
    bsz, hkv, hq, d, ps = 3, 2, 8, 128, 16
    lens = [300, 77, 512]
    per = max(math.ceil(n / ps) for n in lens)
    cache = LayerCache("nvfp4", "nvfp4", bsz * per, ps, hkv, d, device=device)
    table = torch.randperm(bsz * per, generator=g).view(bsz, per).to(torch.int32).to(device)
    k, v = (torch.zeros(bsz, max(lens), hkv, d) for _ in range(2))
    small = []
    for b, n in enumerate(lens):
        for side in (k, v):
            x = torch.randn(n, hkv, d, generator=g)
            mag = 10.0 ** (-decades * torch.rand(n, hkv, d // 16, 1, generator=g))
            x = (x.view(n, hkv, d // 16, 16) * mag).view(n, hkv, d)
            x[:8] *= big / float(x[:8].abs().max())
            side[b, :n] = x
            small.append(x[8:])
    # the first append (the big rows of the first sequence) sets the global scale
    fill_paged(cache, table, k.half().to(device), v.half().to(device), lens)
    seq = torch.tensor(lens, device=device, dtype=torch.int32)
    q = (torch.randn(bsz, hq, d, generator=g) * 30).half().to(device)
    return cache, table, seq, q, torch.cat([s.reshape(-1, 16) for s in small])


def subnormal_share(cache, small) -> float:
    """The share of the small rows' 16-value blocks whose e4m3 scale (amax / 6 / global scale,
    rounded as the append rounds it) is below e4m3's smallest normal, 2⁻⁶."""
    from kvcore.kernels import ref

    gs = cache.k.global_scale_host
    scale = ref.e4m3_value(ref.e4m3_bits(small.abs().amax(-1).float() / 6 / gs))
    return float(((scale < 2.0 ** -6) & (scale > 0)).float().mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", type=float, default=1000.0)
    ap.add_argument("--decades", type=int, default=4)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    import torch

    cpu = os.environ.get("TRITON_INTERPRET") == "1"
    device = "cpu" if cpu else "cuda"
    cache, table, seq, q, small = build(device, args.big, args.decades)
    ref_out = cache.decode_ref(q, table, seq).float()
    res: dict = {"big": args.big, "decades": args.decades,
                 "global_scale": cache.k.global_scale_host,
                 "subnormal_scale_share": subnormal_share(cache, small), "launches": {}}
    if not cpu:
        from kvcore.measure import environment

        res["env"] = environment("cuda", torch)
    for name, kw in LAUNCHES if not cpu else [("plain", {"asm": False})]:
        out = torch.full(ref_out.shape, float("nan"), device=device)
        try:
            cache.decode(q, table, seq, out=out, split_tokens=64, **kw)
        except ValueError as e:
            res["launches"][name] = str(e)
            continue
        err = float((out - ref_out).abs().max() / ref_out.abs().max())
        res["launches"][name] = err if not torch.isnan(out).any() else float("nan")
    print(json.dumps(res), flush=True)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "nvfp4-scales.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
