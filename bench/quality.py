"""Quality of every KV format on synthetic but structured K, V and queries (CPU, torch).

    python bench/quality.py [--write]

Quantizes K and V of one layer (8 KV heads, 32 query heads, head_dim 128, 4096 tokens) per
row in each format of ``kvcore.formats``, dequantizes, and compares decode attention against
the f16 cache. Prints a markdown table and, on its last line, one JSON document; ``--write``
also (over)writes docs/FORMATS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvcore.formats import FORMATS  # noqa: E402
from kvcore.kernels import ref  # noqa: E402
from kvcore.kernels.kivi import KiviCache  # noqa: E402

SEED, T, HKV, HQ, D, THETA, TOPK = 1234, 4096, 8, 32, 128, 10000.0, 32
OUTLIER_PAIRS = (60, 63)  # rotate-half pairs (i, i + 64): low RoPE frequency, 4 channels
IQ4NL = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)


# ---------------------------------------------------------------- synthetic data
def rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE: channel i pairs with i + D/2, angle pos · theta^(-2i/D)."""
    half = x.shape[-1] // 2
    freq = THETA ** (-torch.arange(half, dtype=torch.float64) * 2 / x.shape[-1])
    ang = pos.to(torch.float64)[:, None] * freq
    while ang.dim() < x.dim():
        ang = ang.unsqueeze(1)  # broadcast over heads
    cos, sin = ang.cos().float(), ang.sin().float()
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def make_data() -> dict:
    g = torch.Generator().manual_seed(SEED)
    rn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    pos = torch.arange(T)
    # keys before RoPE: per-head channel means, per-channel scales, a rank-16 latent shared by
    # tokens (so tokens resemble each other), plus noise; 4 outlier channels 10–20× larger
    sigma = torch.exp(0.3 * rn(HKV, D))
    mu = 0.3 * rn(HKV, D)
    out_ch = [c for i in OUTLIER_PAIRS for c in (i, i + D // 2)]
    mag = 10 + 10 * torch.rand(HKV, len(out_ch), generator=g)
    sign = torch.where(torch.rand(HKV, len(out_ch), generator=g) < 0.5, -1.0, 1.0)
    mu[:, out_ch] = mag * sign
    sigma[:, out_ch] = 2.0
    latent = torch.einsum("thr,hrd->thd", rn(T, HKV, 16), rn(HKV, 16, D) / 4)  # [T, H, D], unit variance per channel
    centred = sigma * (0.6 * latent + 0.8 * rn(T, HKV, D))
    k = rope(mu + centred, pos) + 0.05 * rn(T, HKV, D)
    # values: per-token scale (log-normal, 1% of tokens 5× larger), Gaussian across channels
    tok = torch.exp(0.4 * rn(T, 1, 1)) * torch.where(torch.rand(T, 1, 1, generator=g) < 0.01,
                                                      5.0, 1.0)
    v = tok * rn(T, HKV, D)
    # queries: per query head, the sum of a few centred keys (the sink token 0, one of the
    # last 512, two anywhere) seen from the last position, + noise, then RoPE at T − 1
    q_pre = torch.empty(HQ, D)
    for h in range(HQ):
        kv = h // (HQ // HKV)
        picks = [0, int(torch.randint(T - 512, T, (1,), generator=g))]
        picks += torch.randint(1, T - 512, (2,), generator=g).tolist()
        rel = torch.tensor(picks) - (T - 1)
        sel = rope(centred[picks, kv], rel)
        q_pre[h] = 0.6 * sel.sum(0) + 0.5 * rn(D)
    q = rope(q_pre[None], torch.tensor([T - 1]))[0]
    # cache layout [B=1, H, T, D]; the cache input is f16
    k16 = k.permute(1, 0, 2)[None].half()
    v16 = v.permute(1, 0, 2)[None].half()
    return {"q": q[None], "k16": k16, "v16": v16}


# ---------------------------------------------------------------- formats not in the kernels
def _blocks(x: torch.Tensor, n: int = 32) -> torch.Tensor:
    return x.float().reshape(*x.shape[:-1], x.shape[-1] // n, n)


def _unblock(b: torch.Tensor) -> torch.Tensor:
    return b.reshape(*b.shape[:-2], -1)


def _inv(d: torch.Tensor) -> torch.Tensor:
    return torch.where(d != 0, 1 / torch.where(d != 0, d, 1), 0)


def sym_round(x: torch.Tensor, bits: int) -> torch.Tensor:
    """q4_0 / q5_0: the signed value of largest magnitude maps to −2^(bits−1)."""
    b = _blocks(x)
    half = 1 << (bits - 1)
    vmax = torch.gather(b, -1, b.abs().argmax(-1, keepdim=True))
    d = (vmax / -half).half().float()
    q = torch.clamp(torch.floor(b * _inv(d) + half + 0.5), 0, 2 * half - 1)
    return _unblock((q - half) * d)


def asym_round(x: torch.Tensor, bits: int) -> torch.Tensor:
    """q4_1 / q5_1: d = (max − min) / (2^bits − 1), q = round((x − min) / d); fp16 d and m."""
    b = _blocks(x)
    lo, hi = b.amin(-1, keepdim=True), b.amax(-1, keepdim=True)
    d = (hi - lo) / ((1 << bits) - 1)
    q = torch.clamp(torch.floor((b - lo) * _inv(d) + 0.5), 0, (1 << bits) - 1)
    return _unblock(q * d.half().float() + lo.half().float())


def iq4_nl(x: torch.Tensor) -> torch.Tensor:
    """|d| = max|x| / 127 (signed so the largest-magnitude value maps to −127), nearest entry."""
    b = _blocks(x)
    vmax = torch.gather(b, -1, b.abs().argmax(-1, keepdim=True))
    d = (vmax / -127).half().float()
    table = torch.tensor(IQ4NL, dtype=torch.float32)
    idx = ((b * _inv(d)).unsqueeze(-1) - table).abs().argmin(-1)
    return _unblock(table[idx] * d)


def mxfp4(x: torch.Tensor) -> torch.Tensor:
    """OCP MX: scale 2^(floor(log2 amax) − 2) per 32 (e8m0), e2m1 elements, nearest value."""
    b = _blocks(x)
    amax = b.abs().amax(-1, keepdim=True)
    e = torch.floor(torch.log2(torch.where(amax > 0, amax, 1))) - 2
    scale = torch.where(amax > 0, torch.exp2(e.clamp(-127, 127)), 1)
    grid = torch.tensor(ref.E2M1)
    mag = grid[((b / scale).abs().unsqueeze(-1) - grid).abs().argmin(-1)]
    return _unblock(torch.where(b < 0, -mag, mag) * scale)


def fp8_tensor(x: torch.Tensor, dtype: torch.dtype, fmax: float) -> torch.Tensor:
    """One fp32 scale amax / fmax for the whole tensor (a layer's K or V)."""
    s = float(x.float().abs().max()) / fmax or 1.0
    return (x.float() / s).to(dtype).float() * s


def kivi(name: str, k16: torch.Tensor, v16: torch.Tensor) -> tuple:
    cache = KiviCache(name, 1, HKV, D, T)
    cache.append(0, k16[0].permute(1, 0, 2), v16[0].permute(1, 0, 2))
    k, v = cache.dequantize(0)
    return k[None], v[None]


def roundtrip(name: str, k16: torch.Tensor, v16: torch.Tensor) -> tuple:
    """Dequantized (K, V) float32 [1, H, T, D] after storing the f16 cache in ``name``."""
    if name.startswith("kivi"):
        return kivi(name, k16, v16)
    local = {
        "f32": lambda x: x.float(),
        "fp8_e4m3": lambda x: fp8_tensor(x, torch.float8_e4m3fn, 448.0),
        "fp8_e5m2": lambda x: fp8_tensor(x, torch.float8_e5m2, 57344.0),
        "q4_1": lambda x: asym_round(x, 4), "q5_0": lambda x: sym_round(x, 5),
        "q5_1": lambda x: asym_round(x, 5), "iq4_nl": iq4_nl, "mxfp4": mxfp4,
    }
    if name in local:
        return local[name](k16), local[name](v16)

    def kernel_ref(x: torch.Tensor) -> torch.Tensor:
        gs = ref.nvfp4_global_scale(x.float()) if name == "nvfp4" else 1.0
        return ref.dequantize(name, ref.quantize(name, x, global_scale=gs), D, global_scale=gs)

    return kernel_ref(k16), kernel_ref(v16)


# ---------------------------------------------------------------- metrics
def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def top_tokens(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Indices of the TOPK highest attention weights per query head (softmax is monotone)."""
    kk = k[0].double().repeat_interleave(HQ // HKV, dim=0)
    s = torch.einsum("hd,htd->ht", q[0].double(), kk)
    return s.topk(TOPK, dim=-1).indices


def measure(data: dict) -> tuple[list[dict], dict]:
    q, k16, v16 = data["q"], data["k16"], data["v16"]
    lens = torch.tensor([T])
    kb, vb = k16.float(), v16.float()
    o16 = ref.attention_ref(q, kb, vb, lens)[0]
    top16 = top_tokens(q, kb)
    # how peaked the baseline is: share of weight on its own top-32 tokens
    kk = kb[0].double().repeat_interleave(HQ // HKV, dim=0)
    w = torch.softmax(torch.einsum("hd,htd->ht", q[0].double(), kk) / math.sqrt(D), dim=-1)
    info = {"top32_mass": float(w.gather(-1, top16).sum(-1).mean()),
            "max_weight": float(w.max(-1).values.mean())}
    rows = []
    for f in FORMATS:
        kq, vq = roundtrip(f.name, k16, v16)
        o = ref.attention_ref(q, kq, vq, lens)[0]
        cos = torch.nn.functional.cosine_similarity(o, o16, dim=-1).mean()
        top = top_tokens(q, kq)
        agree = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(top, top16))
        eff = (f.bytes_for(T, D, "k") + f.bytes_for(T, D, "v")) * 8 / (2 * T * D)
        rows.append({
            "format": f.name, "bits_per_value": f.bits_per_value, "block_values": f.block_values,
            "block_bytes": f.block_bytes, "effective_bits": eff, "layout": f.layout,
            "out_rel_err": rel(o, o16), "out_cosine": float(cos),
            "top32_agreement": agree / (HQ * TOPK), "k_rel_err": rel(kq, kb),
            "v_rel_err": rel(vq, vb)})
    rows.sort(key=lambda r: (-r["bits_per_value"], -r["effective_bits"], r["out_rel_err"]))
    return rows, info


# ---------------------------------------------------------------- output
def table(rows: list[dict], layout: bool) -> str:
    head = ["format", "bits/value", "eff. bits", "block values", "bytes/block"]
    head += ["layout"] if layout else []
    head += ["attn out rel. err", "attn out cosine", "top-32 agree", "K rel. err", "V rel. err"]
    lines = ["| " + " | ".join(head) + " |",
             "|---|" + "---:|" * 4 + ("---|" if layout else "") + "---:|" * 5]
    for r in rows:
        cells = [f"`{r['format']}`", f"{r['bits_per_value']:g}", f"{r['effective_bits']:.3f}",
                 str(r["block_values"]), str(r["block_bytes"])]
        cells += [r["layout"]] if layout else []
        cells += [f"{r['out_rel_err']:.2e}", f"{r['out_cosine']:.6f}",
                  f"{r['top32_agreement']:.3f}", f"{r['k_rel_err']:.2e}", f"{r['v_rel_err']:.2e}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def facts(rows: list[dict]) -> str:
    """Plain statements derived from the measured rows."""
    by = {r["format"]: r for r in rows}
    names = lambda rs: ", ".join(f"`{r['format']}`" for r in rs) or "none"  # noqa: E731
    quant = [r for r in rows if r["bits_per_value"] < 16]
    within = [r for r in quant if r["out_rel_err"] < 0.01]
    mid = [r for r in quant if 0.01 <= r["out_rel_err"] < 0.05]
    worse = [r for r in quant if r["out_rel_err"] >= 0.05]
    exact = [r for r in rows if r["out_rel_err"] == 0 and r["format"] != "f16"]
    best4 = min((r for r in quant if 4 <= r["bits_per_value"] <= 5),
                key=lambda r: r["out_rel_err"])
    k_worse = [r for r in quant if r["k_rel_err"] > r["v_rel_err"]]
    full_top = [r for r in quant if r["top32_agreement"] == 1.0]
    out = [
        f"Formats that store the f16 values exactly (output error 0): {names(exact)}.",
        f"Below 16 bits, attention output within 1% of f16: {names(within)}; "
        f"between 1% and 5%: {names(mid)}; 5% or more: {names(worse)}.",
        f"Among the 4–5 bit formats the lowest output error is `{best4['format']}` "
        f"({best4['out_rel_err']:.2%}).",
        f"Quantized formats whose top-32 tokens match f16 for every query head: {names(full_top)}.",
        f"Key error exceeds value error for {len(k_worse)} of {len(quant)} quantized formats "
        f"({names(k_worse)}): the outlier channels set the scale of every block they share.",
    ]
    for a, b in (("tbq4", "tbq3"), ("kivi4", "kivi2"), ("q4_0", "q4_1"), ("q4_0", "iq4_nl"),
                 ("nvfp4", "mxfp4"), ("fp8_e4m3", "fp8_e5m2"), ("fp8_pth", "fp8_e4m3")):
        if a in by and b in by:
            ra, rb = by[a], by[b]
            out.append(f"`{a}` vs `{b}`: output error {ra['out_rel_err']:.2%} vs "
                       f"{rb['out_rel_err']:.2%}, K error {ra['k_rel_err']:.2%} vs "
                       f"{rb['k_rel_err']:.2%}.")
    return "\n".join(f"- {s}" for s in out)


def document(rows: list[dict], info: dict) -> str:
    return f"""# KV formats: size and measured quality

Generated by `python bench/quality.py --write` (torch on the CPU, fixed seed {SEED}, about a
minute). Every format of `kvcore.formats` stores the same K and V; the numbers say how far
decode attention over the dequantized cache moves from attention over the f16 cache.

## Data

One layer, one sequence: {HKV} KV heads, {HQ} query heads (GQA {HQ // HKV}), head_dim {D},
{T} tokens, float32 generated then cast to float16 (the cache input and the baseline).

- **Keys**: per-head channel means, per-channel scales (log-normal), a rank-16 latent shared
  by tokens, Gaussian noise; {2 * len(OUTLIER_PAIRS)} outlier channels (RoPE pairs
  {", ".join(f"{i}/{i + D // 2}" for i in OUTLIER_PAIRS)}, low frequency) with a mean of
  ±10–20 and a spread 2× the typical channel. RoPE (theta {THETA:g}, rotate-half) is applied
  by position, then a little noise.
- **Values**: Gaussian across channels with a per-token log-normal scale; 1% of tokens 5×
  larger. No outlier channels.
- **Queries**: per query head, the sum of four centred keys of its KV head (token 0, one of
  the last 512, two anywhere) rotated to the last position, plus noise, RoPE at position
  {T - 1}. Attention is peaked: in the f16 baseline the top-32 tokens hold
  {info['top32_mass']:.0%} of the weight and the largest single weight averages
  {info['max_weight']:.2f}.

## Columns

- **bits/value**, **block values**, **bytes/block**, **layout**: from `kvcore.formats`
  (block scales included; per-layer and per-token-head scales and KIVI's f16 window not).
- **eff. bits**: bytes the format allocates for {T} tokens × head_dim {D} (K and V averaged),
  × 8 / values: adds per-token-head scales (`fp8_pth`) and KIVI's f16 window of 128–159 tokens.
- **attn out rel. err**: ‖o − o_f16‖ / ‖o_f16‖ over all query heads, decode attention in
  float64 (`kvcore.kernels.ref.attention_ref`) with K and V both in the format.
- **attn out cosine**: cosine similarity of o and o_f16 per query head, mean over heads.
- **top-32 agree**: of the 32 tokens with the highest f16 attention weights per query head,
  the share also in the format's top 32 (mean over heads).
- **K rel. err**, **V rel. err**: ‖x̂ − x‖ / ‖x‖ of the dequantized cache against the f16 one.

Quantization is per row (one token × one head) for the block formats, per tensor (the whole
layer's K or V) for `fp8_e4m3`, `fp8_e5m2` and `nvfp4`'s fp32 scale, and KIVI's own grouping
(`kvcore.kernels.kivi`). `f16`, `bf16`, `fp8_pth`, `q8_0`, `q4_0`, `tbq4`, `tbq3`, `nvfp4`
use the kernel references (`kvcore.kernels.ref`); `q4_1`, `q5_0`, `q5_1`, `iq4_nl`, `mxfp4`
and the per-tensor fp8 formats are quantized by small functions in `bench/quality.py`
following DOMAIN.md §2 (`iq4_nl` with |d| = max|x| / 127 and the nearest table entry, no
scale search as llama.cpp does, so llama.cpp's own `iq4_nl` can be slightly better).

## Results

Sorted by bits/value, highest first.

{table(rows, layout=True)}

## Reading the numbers

{facts(rows)}

Synthetic data: the ranking follows from the structure described above (outlier key
channels, per-token value scales, peaked attention), not from a model's perplexity.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="(over)write docs/FORMATS.md")
    args = ap.parse_args()
    torch.manual_seed(SEED)
    rows, info = measure(make_data())
    print(table(rows, layout=False))
    if args.write:
        (ROOT / "docs" / "FORMATS.md").write_text(document(rows, info), encoding="utf-8")
    config = {"seed": SEED, "tokens": T, "kv_heads": HKV, "q_heads": HQ, "head_dim": D,
              "topk": TOPK, **info}
    print(json.dumps({"config": config, "formats": rows}))


if __name__ == "__main__":
    main()
