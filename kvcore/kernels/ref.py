"""Plain torch references: quantize rows into a format's planes, dequantize them, attention.

A row is one token's K or V for one head (``D`` values). ``quantize(fmt, x)`` returns the
format's planes for rows ``x[..., D]`` (the same tensors a cache stores); ``dequantize`` turns
planes back into float32. Block layouts follow DOMAIN.md §2.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from ..formats import get_format
from . import codebook
from .packing import pack3, pack4_halves, pack4_pairs, unpack3, unpack4_halves, unpack4_pairs

__all__ = ["E2M1", "attention_ref", "dequantize", "plane_widths", "quantize", "rotation"]

#: magnitudes of the e2m1 (fp4) code points 0..7
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
FP8_MAX = 448.0
#: 1/448 and 1/127 rounded to float32: fp8_pth's and q8_0's scales are amax times these, in
#: the reference and the kernels alike (torch's CUDA kernels divide by a scalar as a product
#: with its rounded reciprocal, its CPU kernels divide: the product is the same on both)
INV_FP8_MAX = float.fromhex("0x1.24924ap-9")
INV_127 = float.fromhex("0x1.020408p-7")


def _torch() -> Any:
    from . import require_torch

    return require_torch()


def padded(fmt_name: str, d: int) -> int:
    block = get_format(fmt_name).block_values
    return -(-d // block) * block


def plane_widths(fmt_name: str, d: int) -> dict[str, tuple[int, str]]:
    """Per plane: (values per row, torch dtype name). Bytes per row equal the format's row."""
    dp = padded(fmt_name, d)
    nb = dp // get_format(fmt_name).block_values
    return {
        "f16": {"data": (d, "float16")},
        "bf16": {"data": (d, "bfloat16")},
        "fp8_pth": {"data": (d, "uint8"), "scale": (1, "float32")},
        "q8_0": {"qs": (dp, "int8"), "d": (nb, "float16")},
        "q4_0": {"qs": (nb * 16, "uint8"), "d": (nb, "float16")},
        "tbq4": {"qs": (nb * 64, "uint8"), "norm": (nb, "float16")},
        "tbq3": {"qs": (nb * 48, "uint8"), "norm": (nb, "float16")},
        "nvfp4": {"qs": (dp // 2, "uint8"), "sc": (nb, "uint8")},
    }[fmt_name]


@cache
def rotation(device: str = "cpu") -> Any:
    torch = _torch()
    return torch.tensor(codebook.rotation_matrix(), dtype=torch.float32, device=device)


@cache
def centroids(levels: int, device: str = "cpu") -> Any:
    torch = _torch()
    return torch.tensor(codebook.lloyd_max(levels), dtype=torch.float32, device=device)


def _blocks(x: Any, dp: int, block: int) -> Any:
    torch = _torch()
    d = x.shape[-1]
    if dp != d:
        x = torch.nn.functional.pad(x, (0, dp - d))
    return x.reshape(*x.shape[:-1], dp // block, block)


def e4m3_bits(x: Any) -> Any:
    torch = _torch()
    return x.to(torch.float8_e4m3fn).view(torch.uint8)


def e4m3_value(bits: Any) -> Any:
    torch = _torch()
    return bits.view(torch.float8_e4m3fn).to(torch.float32)


def nvfp4_global_scale(x: Any) -> float:
    """Per-tensor scale so block scales fit e4m3: amax / (448 · 6)."""
    amax = float(x.abs().max()) if x.numel() else 0.0
    return amax / (FP8_MAX * 6) if amax > 0 else 1.0


def quantize(fmt_name: str, x: Any, *, global_scale: float = 1.0) -> dict[str, Any]:
    """Planes of ``fmt_name`` for rows ``x[..., D]`` (any float dtype)."""
    torch = _torch()
    x = x.to(torch.float32)
    d = x.shape[-1]
    dp = padded(fmt_name, d)
    if fmt_name == "f16":
        return {"data": x.to(torch.float16)}
    if fmt_name == "bf16":
        return {"data": x.to(torch.bfloat16)}
    if fmt_name == "fp8_pth":
        scale = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) * INV_FP8_MAX
        # times the scale's reciprocal (one division a row, as the kernel)
        return {"data": e4m3_bits(x * (1 / scale)), "scale": scale}
    if fmt_name == "q8_0":
        b = _blocks(x, dp, 32)
        dscale = (b.abs().amax(dim=-1) * INV_127).to(torch.float16)
        inv = torch.where(dscale.float() > 0, 1 / dscale.float(), torch.zeros_like(dscale.float()))
        v = b * inv.unsqueeze(-1)
        # round half away from zero, as ggml's roundf
        q = (torch.sign(v) * torch.floor(v.abs() + 0.5)).clamp(-127, 127).to(torch.int8)
        return {"qs": q.reshape(*x.shape[:-1], dp), "d": dscale}
    if fmt_name == "q4_0":
        b = _blocks(x, dp, 32)
        # the signed value of largest magnitude maps to -8
        idx = b.abs().argmax(dim=-1, keepdim=True)
        vmax = torch.gather(b, -1, idx).squeeze(-1)
        dscale = (vmax / -8).to(torch.float16)
        inv = torch.where(dscale.float() != 0, 1 / dscale.float(), torch.zeros_like(dscale.float()))
        q = torch.clamp(torch.floor(b * inv.unsqueeze(-1) + 8.5), 0, 15).to(torch.uint8)
        return {"qs": pack4_halves(q).reshape(*x.shape[:-1], -1), "d": dscale}
    if fmt_name in ("tbq4", "tbq3"):
        levels = 16 if fmt_name == "tbq4" else 8
        b = _blocks(x, dp, 128)
        n = b.norm(dim=-1)
        u = b / n.clamp_min(1e-30).unsqueeze(-1)
        y = u @ rotation(str(x.device)).T
        th = torch.tensor(codebook.thresholds(levels), dtype=torch.float32, device=x.device)
        idx = torch.bucketize(y.contiguous(), th).to(torch.uint8)
        c = centroids(levels, str(x.device))[idx.long()]
        norm = (n / c.norm(dim=-1).clamp_min(1e-30)).to(torch.float16)
        packed = pack4_pairs(idx) if levels == 16 else pack3(idx)
        return {"qs": packed.reshape(*x.shape[:-1], -1), "norm": norm}
    if fmt_name == "nvfp4":
        b = _blocks(x, dp, 16)
        amax = b.abs().amax(dim=-1)
        # the block scale: amax times the reciprocal of 6 · global_scale, each rounded to
        # float32 (one division a tensor, as the kernel)
        gs = torch.tensor(global_scale, dtype=torch.float32, device=x.device)
        sc_bits = e4m3_bits(amax * (1 / (6 * gs)))
        eff = e4m3_value(sc_bits) * global_scale
        # times the reciprocal of the block scale (one division a block, as the kernel)
        scaled = b * (1 / torch.where(eff > 0, eff, torch.ones_like(eff))).unsqueeze(-1)
        grid = torch.tensor(E2M1, device=x.device)
        mag = (scaled.abs().unsqueeze(-1) - grid).abs().argmin(dim=-1).to(torch.uint8)
        code = mag | ((scaled < 0).to(torch.uint8) << 3)
        return {"qs": pack4_pairs(code).reshape(*x.shape[:-1], -1), "sc": sc_bits}
    raise ValueError(f"no reference for {fmt_name}")


def dequantize(fmt_name: str, planes: dict[str, Any], d: int, *, global_scale: float = 1.0) -> Any:
    """Float32 rows ``[..., d]`` from ``fmt_name`` planes."""
    torch = _torch()
    dp = padded(fmt_name, d)
    if fmt_name in ("f16", "bf16"):
        return planes["data"].to(torch.float32)
    if fmt_name == "fp8_pth":
        return e4m3_value(planes["data"]) * planes["scale"]
    if fmt_name == "q8_0":
        q = planes["qs"].to(torch.float32).reshape(*planes["qs"].shape[:-1], dp // 32, 32)
        out = q * planes["d"].to(torch.float32).unsqueeze(-1)
    elif fmt_name == "q4_0":
        q = unpack4_halves(planes["qs"].reshape(*planes["qs"].shape[:-1], dp // 32, 16))
        out = (q.to(torch.float32) - 8) * planes["d"].to(torch.float32).unsqueeze(-1)
    elif fmt_name in ("tbq4", "tbq3"):
        levels = 16 if fmt_name == "tbq4" else 8
        width = 64 if levels == 16 else 48
        qs = planes["qs"].reshape(*planes["qs"].shape[:-1], dp // 128, width)
        idx = unpack4_pairs(qs) if levels == 16 else unpack3(qs)
        y = centroids(levels, str(qs.device))[idx.long()]
        y = y * planes["norm"].to(torch.float32).unsqueeze(-1)
        out = y @ rotation(str(qs.device))
    elif fmt_name == "nvfp4":
        qs = planes["qs"].reshape(*planes["qs"].shape[:-1], dp // 16, 8)
        code = unpack4_pairs(qs)
        grid = torch.tensor(E2M1, device=qs.device)
        mag = grid[(code & 7).long()]
        val = torch.where((code >> 3) == 1, -mag, mag)
        out = val * (e4m3_value(planes["sc"]) * global_scale).unsqueeze(-1)
    else:
        raise ValueError(f"no reference for {fmt_name}")
    return out.reshape(*out.shape[:-2], dp)[..., :d]


def int8_query(q: Any, block: int = 32) -> Any:
    """The query as the integer-key decode multiplies it (decode(int_keys=…)): each row's
    ``block``-value blocks quantized to int8 codes with scale amax / 127 (q8_0's rule, the scale
    kept in float32 precision and ties rounded to even rather than away from zero), and
    returned dequantized in float64 ([..., D])."""
    torch = _torch()
    d = q.shape[-1]
    dp = -(-d // block) * block
    x = torch.nn.functional.pad(q.to(torch.float64), (0, dp - d))
    x = x.reshape(*q.shape[:-1], dp // block, block)
    scale = x.abs().amax(dim=-1, keepdim=True) / 127
    codes = torch.round(x / torch.where(scale > 0, scale, torch.ones_like(scale)))
    return (codes * scale).reshape(*q.shape[:-1], dp)[..., :d]


def attention_ref(q: Any, k: Any, v: Any, lens: Any, scale: float | None = None) -> Any:
    """Exact decode attention in float64. q [B, Hq, D]; k, v [B, Hkv, T, D]; lens [B]."""
    torch = _torch()
    b, hq, d = q.shape
    hkv = k.shape[1]
    group = hq // hkv
    scale = scale or 1 / math.sqrt(d)
    out = torch.empty(b, hq, v.shape[-1], dtype=torch.float64, device=q.device)
    for i in range(b):
        n = int(lens[i])
        kk = k[i, :, :n].to(torch.float64).repeat_interleave(group, dim=0)
        vv = v[i, :, :n].to(torch.float64).repeat_interleave(group, dim=0)
        s = torch.einsum("hd,htd->ht", q[i].to(torch.float64), kk) * scale
        out[i] = torch.einsum("ht,htd->hd", torch.softmax(s, dim=-1), vv)
    return out
