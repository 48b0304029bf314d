"""Quality of every KV format on synthetic, structured K, V and queries (torch, CPU).

    python bench/quality.py [--write]

Stores one layer's f16 K and V in each format of ``kvcore.formats``, dequantizes, and compares
decode attention with the f16 cache's. Prints a markdown table and, on its last line, one JSON
document; ``--write`` also (over)writes docs/FORMATS.md.
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
from kvcore.kernels.cache import INT_KEYS  # noqa: E402
from kvcore.kernels.kivi import KiviCache  # noqa: E402

SEED, DRAWS, T, HKV, HQ, D, THETA, TOPK = 1234, 5, 4096, 8, 32, 128, 10000.0, 32
OUTLIER_PAIRS = (60, 63)  # rotate-half pairs (i, i + 64): low RoPE frequency, 4 channels
IQ4NL = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)


def rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE: channel i pairs with i + D/2, angle pos · theta^(-2i/D)."""
    half = x.shape[-1] // 2
    freq = THETA ** (-torch.arange(half, dtype=torch.float64) * 2 / x.shape[-1])
    ang = (pos.to(torch.float64)[:, None] * freq).view(len(pos), *[1] * (x.dim() - 2), half)
    cos, sin = ang.cos().float(), ang.sin().float()
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def make_data(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    pos = torch.arange(T)
    # keys before RoPE: channel means and scales, a rank-16 latent shared by tokens, noise;
    # the outlier channels get means of ±10–20
    sigma = torch.exp(0.3 * rn(HKV, D))
    mu = 0.3 * rn(HKV, D)
    out_ch = [c for i in OUTLIER_PAIRS for c in (i, i + D // 2)]
    mag = 10 + 10 * torch.rand(HKV, len(out_ch), generator=g)
    sign = torch.where(torch.rand(HKV, len(out_ch), generator=g) < 0.5, -1.0, 1.0)
    mu[:, out_ch] = mag * sign
    sigma[:, out_ch] = 2.0
    latent = torch.einsum("thr,hrd->thd", rn(T, HKV, 16), rn(HKV, 16, D) / 4)  # unit variance
    centred = sigma * (0.6 * latent + 0.8 * rn(T, HKV, D))
    k = rope(mu + centred, pos) + 0.05 * rn(T, HKV, D)
    # values: log-normal scale per token, 1% of tokens 5× larger
    big = torch.where(torch.rand(T, 1, 1, generator=g) < 0.01, 5.0, 1.0)
    v = torch.exp(0.4 * rn(T, 1, 1)) * big * rn(T, HKV, D)
    # queries: centred keys (token 0, one of the last 512, two anywhere) seen from T − 1
    q_pre = torch.empty(HQ, D)
    for h in range(HQ):
        kv = h // (HQ // HKV)
        picks = [0, int(torch.randint(T - 512, T, (1,), generator=g))]
        picks += torch.randint(1, T - 512, (2,), generator=g).tolist()
        sel = rope(centred[picks, kv], torch.tensor(picks) - (T - 1))
        q_pre[h] = 0.6 * sel.sum(0) + 0.5 * rn(D)
    q = rope(q_pre[None], torch.tensor([T - 1]))[0]
    return {"q": q[None], "k16": k.transpose(0, 1)[None].half(),
            "v16": v.transpose(0, 1)[None].half()}


def _blocks(x: torch.Tensor, n: int = 32) -> torch.Tensor:
    return x.float().reshape(*x.shape[:-1], x.shape[-1] // n, n)


def _inv(d: torch.Tensor) -> torch.Tensor:
    return torch.where(d != 0, 1 / torch.where(d != 0, d, 1), 0)


def _signed_max(b: torch.Tensor) -> torch.Tensor:
    """Per block, the value of largest magnitude, sign kept."""
    return torch.gather(b, -1, b.abs().argmax(-1, keepdim=True))


def sym_round(x: torch.Tensor, bits: int) -> torch.Tensor:
    """q4_0 / q5_0: the signed value of largest magnitude maps to −2^(bits−1)."""
    b = _blocks(x)
    half = 1 << (bits - 1)
    d = (_signed_max(b) / -half).half().float()
    q = torch.clamp(torch.floor(b * _inv(d) + half + 0.5), 0, 2 * half - 1)
    return ((q - half) * d).flatten(-2)


def asym_round(x: torch.Tensor, bits: int) -> torch.Tensor:
    """q4_1 / q5_1: d = (max − min) / (2^bits − 1), q = round((x − min) / d); fp16 d and m."""
    b = _blocks(x)
    lo, hi = b.amin(-1, keepdim=True), b.amax(-1, keepdim=True)
    d = (hi - lo) / ((1 << bits) - 1)
    q = torch.clamp(torch.floor((b - lo) * _inv(d) + 0.5), 0, (1 << bits) - 1)
    return (q * d.half().float() + lo.half().float()).flatten(-2)


def iq4_nl(x: torch.Tensor) -> torch.Tensor:
    """|d| = max|x| / 127 (signed so the largest-magnitude value maps to −127), nearest entry."""
    b = _blocks(x)
    d = (_signed_max(b) / -127).half().float()
    table = torch.tensor(IQ4NL, dtype=torch.float32)
    idx = ((b * _inv(d)).unsqueeze(-1) - table).abs().argmin(-1)
    return (table[idx] * d).flatten(-2)


def mxfp4(x: torch.Tensor) -> torch.Tensor:
    """OCP MX: scale 2^(floor(log2 amax) − 2) per 32 (e8m0), e2m1 elements, nearest value."""
    b = _blocks(x)
    amax = b.abs().amax(-1, keepdim=True)
    e = torch.floor(torch.log2(torch.where(amax > 0, amax, 1))) - 2
    scale = torch.where(amax > 0, torch.exp2(e.clamp(-127, 127)), 1)
    grid = torch.tensor(ref.E2M1)
    mag = grid[((b / scale).abs().unsqueeze(-1) - grid).abs().argmin(-1)]
    return (torch.where(b < 0, -mag, mag) * scale).flatten(-2)


def nvfp4_4over6(x: torch.Tensor) -> torch.Tensor:
    """vLLM's nvfp4_4over6: nvfp4's blocks of 16 under its per-tensor scale amax / (448 · 6);
    each block's e4m3 scale from amax / 6 or amax / 4 (clamped to e4m3's 448), the one whose
    nearest-value e2m1 reconstruction has the smaller squared error."""
    gs = ref.nvfp4_global_scale(x.float())
    b = _blocks(x, 16)
    amax = b.abs().amax(-1, keepdim=True)
    grid = torch.tensor(ref.E2M1)
    best, least = b, torch.full_like(amax, float("inf"))
    for div in (6.0, 4.0):
        s = ref.e4m3_value(ref.e4m3_bits((amax / div / gs).clamp(max=448.0))) * gs
        scaled = b * _inv(s)
        mag = grid[(scaled.abs().clamp(max=6.0).unsqueeze(-1) - grid).abs().argmin(-1)]
        y = torch.where(scaled < 0, -mag, mag) * s
        err = ((y - b) ** 2).sum(-1, keepdim=True)
        best = torch.where(err < least, y, best)
        least = torch.minimum(err, least)
    return best.flatten(-2)


def _uq_groups(x: torch.Tensor) -> torch.Tensor:
    """UltraQuant's e2m1 codes of groups of 32 with the e8m0 scale 2^round(log2(0.156 ·
    amax)), values past ±6 scales clipped, dequantized."""
    b = _blocks(x)
    amax = b.abs().amax(-1, keepdim=True)
    scale = torch.where(amax > 0, torch.exp2(torch.round(torch.log2(
        torch.clamp(0.156 * amax, min=2.0 ** -126)))), 1)
    grid = torch.tensor(ref.E2M1)
    mag = grid[((b / scale).abs().clamp(max=6.0).unsqueeze(-1) - grid).abs().argmin(-1)]
    return (torch.where(b < 0, -mag, mag) * scale).flatten(-2)


def ultraquant(k16: torch.Tensor, v16: torch.Tensor) -> tuple:
    """vLLM's ultraquant_4bit: keys rotated by the Hadamard matrix before their groups are
    quantized (and rotated back, as attention with an equally rotated query reads them),
    values as they are."""
    h = _hadamard(k16.shape[-1])
    return _uq_groups(k16.float() @ h.T) @ h, _uq_groups(v16)


def fp4_mx16(x: torch.Tensor) -> torch.Tensor:
    """SGLang's fp4_mx_block16: scale 2^ceil(log2(amax / 6)) per 16 (a uint8 exponent), e2m1
    elements, nearest value."""
    b = _blocks(x, 16)
    amax = b.abs().amax(-1, keepdim=True)
    scale = torch.exp2(torch.ceil(torch.log2(torch.clamp(amax / 6.0, min=1e-10))))
    grid = torch.tensor(ref.E2M1)
    mag = grid[((b / scale).abs().unsqueeze(-1) - grid).abs().argmin(-1)]
    return (torch.where(b < 0, -mag, mag) * scale).flatten(-2)


def mxfp8(x: torch.Tensor) -> torch.Tensor:
    """SGLang's mxfp8 store: scale 2^ceil(log2(amax / 448)) per 32 (an e8m0 exponent), e4m3
    elements (clamped to ±448, rounded by torch's cast)."""
    b = _blocks(x)
    amax = b.abs().amax(-1, keepdim=True)
    scale = torch.exp2(torch.ceil(torch.log2(torch.clamp(amax / 448.0, min=2.0 ** -127))))
    q = torch.clamp(b / scale, -448.0, 448.0).to(torch.float8_e4m3fn).float()
    return (q * scale).flatten(-2)


def _hadamard(n: int) -> torch.Tensor:
    """The orthonormal Sylvester Hadamard matrix of size ``n`` (a power of two)."""
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / math.sqrt(n)


def tq_keys(x: torch.Tensor, bits: int) -> torch.Tensor:
    """vLLM's TurboQuant MSE keys: the head rotated by the Hadamard matrix, its unit vector
    quantized coordinate by coordinate to the Lloyd-Max centroids of N(0, 1/D), the centroid
    vector renormalized (norm correction) and scaled back by the stored fp16 norm."""
    d = x.shape[-1]
    h = _hadamard(d)
    xf = x.float()
    norm = xf.norm(dim=-1, keepdim=True)
    unit = (xf / torch.where(norm > 0, norm, 1)) @ h.T
    grid = ref.centroids(1 << bits)
    c = grid[(unit.unsqueeze(-1) - grid).abs().argmin(-1)]
    c = c / c.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (c @ h) * norm.half().float()


def tq_values(x: torch.Tensor, bits: int) -> torch.Tensor:
    """vLLM's TurboQuant values: uniform asymmetric codes over a head with an fp16 scale and
    zero (min) a head and token."""
    xf = x.float()
    lo, hi = xf.amin(-1, keepdim=True), xf.amax(-1, keepdim=True)
    levels = (1 << bits) - 1
    scale = ((hi - lo) / levels).half().float()
    zero = lo.half().float()
    q = torch.clamp(torch.round((xf - zero) * _inv(scale)), 0, levels)
    return q * scale + zero


def int8_pth(x: torch.Tensor) -> torch.Tensor:
    """vLLM's int8_per_token_head: symmetric int8 with one fp32 scale (amax / 127) a head and
    token, rounded half away from zero."""
    xf = x.float()
    scale = xf.abs().amax(-1, keepdim=True) / 127
    q = torch.clamp(torch.sign(xf) * torch.floor(xf.abs() * _inv(scale) + 0.5), -127, 127)
    return q * scale


def int4_pth(x: torch.Tensor) -> torch.Tensor:
    """vLLM's int4_per_token_head: the head rotated by a randomized Hadamard transform, 4-bit
    asymmetric codes with an fp32 scale and a 4-bit zero point a head and token, rotated back."""
    r = ref.rotation()
    xr = x.float() @ r.T
    lo, hi = xr.amin(-1, keepdim=True), xr.amax(-1, keepdim=True)
    scale = (hi - lo) / 15
    zero = torch.clamp(torch.round(-lo * _inv(scale)), 0, 15)
    q = torch.clamp(torch.round(xr * _inv(scale)) + zero, 0, 15)
    return ((q - zero) * scale) @ r


#: vLLM's presets: key bits (8: fp8 keys as they are), value bits
TQ_PRESETS = {"tq_k8v4": (8, 4), "tq_4bit": (4, 4), "tq_k3v4": (3, 4), "tq_3bit": (3, 3)}


def turboquant(name: str, k16: torch.Tensor, v16: torch.Tensor) -> tuple:
    kb, vb = TQ_PRESETS[name]
    keys = (k16.to(torch.float8_e4m3fn).float() if kb == 8 else tq_keys(k16, kb))
    return keys, tq_values(v16, vb)


def fp8_tensor(x: torch.Tensor, dtype: torch.dtype, fmax: float) -> torch.Tensor:
    """One fp32 scale amax / fmax for the whole tensor (a layer's K or V)."""
    s = float(x.float().abs().max()) / fmax or 1.0
    return (x.float() / s).to(dtype).float() * s


def roundtrip(name: str, k16: torch.Tensor, v16: torch.Tensor) -> tuple:
    """Dequantized (K, V) float32 [1, H, T, D] after storing the f16 cache in ``name``."""
    if name.startswith("kivi"):
        cache = KiviCache(name, 1, HKV, D, T)
        cache.append(0, k16[0].transpose(0, 1), v16[0].transpose(0, 1))
        return tuple(x[None] for x in cache.dequantize(0))
    local = {"f32": lambda x: x.float(), "iq4_nl": iq4_nl, "mxfp4": mxfp4, "mxfp8": mxfp8,
             "int8_pth": int8_pth, "int4_pth": int4_pth,
             "fp4_mx16": fp4_mx16, "nvfp4_4over6": nvfp4_4over6,
             "fp8_e4m3": lambda x: fp8_tensor(x, torch.float8_e4m3fn, 448.0),
             "fp8_e5m2": lambda x: fp8_tensor(x, torch.float8_e5m2, 57344.0),
             "q4_1": lambda x: asym_round(x, 4), "q5_0": lambda x: sym_round(x, 5),
             "q5_1": lambda x: asym_round(x, 5)}
    if name in local:
        return local[name](k16), local[name](v16)
    if name in TQ_PRESETS:
        return turboquant(name, k16, v16)
    if name == "uq_4bit":
        return ultraquant(k16, v16)

    def kernel_ref(x: torch.Tensor) -> torch.Tensor:
        gs = ref.nvfp4_global_scale(x.float()) if name == "nvfp4" else 1.0
        return ref.dequantize(name, ref.quantize(name, x, global_scale=gs), D, global_scale=gs)

    return kernel_ref(k16), kernel_ref(v16)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Attention logits [Hq, T] in float64 (softmax is monotone: same top tokens as weights)."""
    kk = k[0].double().repeat_interleave(HQ // HKV, dim=0)
    return torch.einsum("hd,htd->ht", q[0].double(), kk) / math.sqrt(D)


def measure_draw(data: dict) -> tuple[dict, dict]:
    """Metrics per format for one draw of synthetic data, and how peaked its f16 attention is."""
    q, k16, v16 = data["q"], data["k16"], data["v16"]
    lens = torch.tensor([T])
    kb, vb = k16.float(), v16.float()
    o16 = ref.attention_ref(q, kb, vb, lens)[0]
    w = torch.softmax(scores(q, kb), dim=-1)
    top16 = w.topk(TOPK, dim=-1).indices
    info = {"top32_mass": float(w.gather(-1, top16).sum(-1).mean()),
            "max_weight": float(w.max(-1).values.mean())}
    out = {}
    for f in FORMATS:
        kq, vq = roundtrip(f.name, k16, v16)
        o = ref.attention_ref(q, kq, vq, lens)[0]
        top = scores(q, kq).topk(TOPK, dim=-1).indices
        agree = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(top, top16, strict=True))
        out[f.name] = {
            "out_rel_err": rel(o, o16),
            "out_cosine": float(torch.nn.functional.cosine_similarity(o, o16, dim=-1).mean()),
            "top32_agreement": agree / (HQ * TOPK), "k_rel_err": rel(kq, kb),
            "v_rel_err": rel(vq, vb)}
        if f.name in INT_KEYS:
            # as the decode kernel computes it: the query rounded to int8 per 32-value block
            oi = ref.attention_ref(ref.int8_query(q), kq, vq, lens)[0]
            out[f.name]["kernel_out_rel_err"] = rel(oi, o16)
    return out, info


def measure() -> tuple[list[dict], dict]:
    """Mean of every metric over DRAWS independent draws (seeds SEED, SEED + 1, ...)."""
    draws = [measure_draw(make_data(SEED + i)) for i in range(DRAWS)]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    info = {k: mean([d[1][k] for d in draws]) for k in draws[0][1]}
    rows = []
    for f in FORMATS:
        per = [d[0][f.name] for d in draws]
        row = {"format": f.name, "bits_per_value": f.bits_per_value,
               "block_values": f.block_values, "block_bytes": f.block_bytes,
               "effective_bits": (f.bytes_for(T, D, "k") + f.bytes_for(T, D, "v")) * 8
               / (2 * T * D), "layout": f.layout}
        row.update({k: mean([p[k] for p in per]) for k in per[0]})
        row["out_rel_err_draws"] = [p["out_rel_err"] for p in per]
        rows.append(row)
    rows.sort(key=lambda r: (-r["bits_per_value"], -r["effective_bits"], r["out_rel_err"]))
    return rows, info


def table(rows: list[dict], layout: bool) -> str:
    head = ["format", "bits/value", "eff. bits", "block values", "bytes/block"]
    head += ["layout"] if layout else []
    head += ["attn out rel. err", "(min–max)", "attn out cosine", "top-32 agree", "K rel. err",
             "V rel. err"]
    lines = ["| " + " | ".join(head) + " |",
             "|---|" + "---:|" * 4 + ("---|" if layout else "") + "---:|" * 6]
    for r in rows:
        cells = [f"`{r['format']}`", f"{r['bits_per_value']:g}", f"{r['effective_bits']:.3f}",
                 str(r["block_values"]), str(r["block_bytes"])]
        cells += [r["layout"]] if layout else []
        d = r["out_rel_err_draws"]
        cells += [f"{r['out_rel_err']:.2%}", f"{min(d):.2%}–{max(d):.2%}",
                  f"{r['out_cosine']:.5f}", f"{r['top32_agreement']:.3f}",
                  f"{r['k_rel_err']:.2%}", f"{r['v_rel_err']:.2%}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def facts(rows: list[dict]) -> str:
    """Plain statements derived from the measured rows."""
    by = {r["format"]: r for r in rows}
    names = lambda rs: ", ".join(f"`{r['format']}`" for r in rs) or "none"  # noqa: E731
    quant = [r for r in rows if r["bits_per_value"] < 16]
    err = lambda lo, hi: [r for r in quant if lo <= r["out_rel_err"] < hi]  # noqa: E731
    exact = [r for r in rows if r["out_rel_err"] == 0 and r["format"] != "f16"]
    out = [
        f"Stored without loss from the f16 cache (output error 0): {names(exact)}; `bf16` "
        f"moves the output by {by['bf16']['out_rel_err']:.2%}.",
        f"Below 16 bits, attention output within 1% of f16: {names(err(0, 0.01))}; 1–5%: "
        f"{names(err(0.01, 0.05))}; 5–10%: {names(err(0.05, 0.1))}; 10–20%: "
        f"{names(err(0.1, 0.2))}; 20% or more: {names(err(0.2, math.inf))}.",
        f"Top-32 agreement of 0.9 or more: "
        f"{names([r for r in quant if r['top32_agreement'] >= 0.9])}.",
        f"K error above V error: {names([r for r in quant if r['k_rel_err'] > r['v_rel_err']])}"
        f"; the others have V error above K error.",
        "Among formats of 4 to 4.5 bits/value, from lowest output error: " + ", ".join(
            f"`{r['format']}` ({r['out_rel_err']:.1%})" for r in sorted(
                (r for r in quant if 4 <= r["bits_per_value"] <= 4.5),
                key=lambda r: r["out_rel_err"])) + ".",
    ]
    for r in quant:
        if "kernel_out_rel_err" in r:
            out.append(f"`{r['format']}` as kvplan's decode kernel computes its scores (the "
                       f"query rounded to int8 per 32-value block, an integer product with the "
                       f"stored codes): output error {r['kernel_out_rel_err']:.2%}, against "
                       f"{r['out_rel_err']:.2%} with the query as it is.")
    for lim in (0.05, 0.1, 0.2):
        ok = [r for r in quant if r["out_rel_err"] < lim]
        if ok:
            r = min(ok, key=lambda r: (r["effective_bits"], r["out_rel_err"]))
            out.append(f"Fewest bits with output error under {lim:.0%}: `{r['format']}` "
                       f"({r['bits_per_value']:g} bits/value, {r['effective_bits']:.2f} "
                       f"effective, {r['out_rel_err']:.2%}).")
    for a, b in (("tbq4", "tbq3"), ("kivi4", "kivi2"), ("q4_0", "q4_1"), ("q4_0", "iq4_nl"),
                 ("nvfp4", "mxfp4"), ("nvfp4_4over6", "nvfp4"), ("uq_4bit", "mxfp4"),
                 ("fp8_e4m3", "fp8_e5m2"),
                 ("fp8_pth", "fp8_e4m3")):
        pct = lambda k, a=a, b=b: f"{by[a][k]:.2%} vs {by[b][k]:.2%}"  # noqa: E731
        out.append(f"`{a}` vs `{b}`: output error {pct('out_rel_err')}, K error "
                   f"{pct('k_rel_err')}, V error {pct('v_rel_err')}.")
    return "\n".join(f"- {s}" for s in out)


def document(rows: list[dict], info: dict) -> str:
    pairs = ", ".join(f"{i}/{i + D // 2}" for i in OUTLIER_PAIRS)
    return f"""# KV formats: size and measured quality

How far decode attention over each format's dequantized cache moves from attention over the
f16 cache. Reproduce with `python bench/quality.py --write` (torch on the CPU, under a minute;
fixed seeds, so a rerun on the same torch build gives the same numbers).

## Data and method

One layer, one sequence: {HKV} KV heads, {HQ} query heads (GQA {HQ // HKV}), head_dim {D}, {T}
tokens, made in float32 and cast to float16 (the cache input and the baseline). Every metric
is the mean over {DRAWS} independent draws (seeds {SEED}–{SEED + DRAWS - 1}).

- **Keys**: per-head channel means, log-normal channel scales, a rank-16 latent shared by
  tokens, Gaussian noise; {2 * len(OUTLIER_PAIRS)} outlier channels (rotate-half pairs {pairs},
  low RoPE frequency) with means of ±10–20 and twice the usual spread; RoPE (theta
  {THETA:g}) by position, then a little noise.
- **Values**: Gaussian across channels, log-normal scale per token, 1% of tokens 5× larger.
- **Queries**: per query head, four centred keys of its KV head (token 0, one of the last
  512, two anywhere) rotated relative to position {T - 1}, summed, plus noise, then RoPE at
  {T - 1}. In the f16 baseline the top-32 tokens hold {info['top32_mass']:.0%} of the
  attention weight; the largest weight per head averages {info['max_weight']:.2f}.

Block formats quantize each row (token × head); `fp8_e4m3` / `fp8_e5m2` use one fp32 scale
for the whole K (or V), amax / 448 and amax / 57344, and `nvfp4` its per-tensor scale from
`nvfp4_global_scale`; KIVI runs through `kvcore.kernels.kivi.KiviCache`. `f16`, `bf16`,
`fp8_pth`, `q8_0`, `q4_0`, `tbq4`, `tbq3`, `nvfp4` use `kvcore.kernels.ref`; the others are
small functions in the script with the DOMAIN.md §2 layouts (`iq4_nl`: |d| = max|x| / 127 and
the nearest table entry, without llama.cpp's scale search; `mxfp4`: scale
2^(⌊log2 amax⌋ − 2), values saturate at 6; `nvfp4_4over6`: nvfp4's per-tensor scale, each
16's e4m3 scale amax / 6 or amax / 4 by the smaller squared error, an emulation of the rule
vLLM's documentation states, its CUDA kernel not read; `uq_4bit`: vLLM's UltraQuant
store rule, keys through a Sylvester Hadamard rotation, each 32's scale 2^round(log2(0.156 ·
amax)), values past ±6 clipped).

## Columns

- **bits/value**, **block values**, **bytes/block**, **layout**: from `kvcore.formats`.
- **eff. bits**: `bytes_for({T} tokens)` of one head, K and V averaged, × 8 / values: adds
  `fp8_pth`'s per-token-head scale and KIVI's f16 window (128–159 tokens).
- **attn out rel. err** (mean, then min–max over draws): ‖o − o_f16‖ / ‖o_f16‖ over all query
  heads, attention in float64 (`attention_ref`) with K and V both in the format.
- **attn out cosine**: cosine of o and o_f16 per query head, mean over heads.
- **top-32 agree**: share of each query head's 32 highest-weight f16 tokens that are also
  among the format's top 32, mean over heads.
- **K rel. err**, **V rel. err**: ‖x̂ − x‖ / ‖x‖ of the dequantized cache against the f16 one.

## Results

Sorted by bits/value, highest first.

{table(rows, layout=True)}

## Reading the numbers

{facts(rows)}

The data are synthetic: the numbers rank formats on the structure above (outlier key
channels, per-token value scales, peaked attention); they are not perplexities.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="(over)write docs/FORMATS.md")
    args = ap.parse_args()
    rows, info = measure()
    print(table(rows, layout=False))
    config = {"seed": SEED, "draws": DRAWS, "tokens": T, "kv_heads": HKV, "q_heads": HQ,
              "head_dim": D, "topk": TOPK, **info}
    if args.write:
        (ROOT / "docs" / "FORMATS.md").write_text(document(rows, info), encoding="utf-8")
        # the planner's quality notes read these measured figures
        measured = {r["format"]: {k: r[k] for k in ("out_rel_err", "out_cosine",
                                                      "top32_agreement")} for r in rows}
        (ROOT / "kvcore" / "data" / "quality.json").write_text(
            json.dumps({"source": "bench/quality.py (docs/FORMATS.md)", "formats": measured},
                       indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"config": config, "formats": rows}))


if __name__ == "__main__":
    main()
