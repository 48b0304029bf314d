"""Bit packers for 4-bit and 3-bit indices (torch), each with its exact inverse.

- ``pack4_halves``: ggml's q4_0 layout, 32 values per 16 bytes, byte j = value j (low
  nibble) | value j + 16 (high nibble).
- ``pack4_pairs``: byte i = value 2i (low nibble) | value 2i + 1 (high nibble).
- ``pack3``: 8 values per 3 bytes as a 24-bit little-endian lane, value j at bits 3j..3j+2.
  Shifts are only ever left by 3j < 24 into a 32-bit lane, then bytes are taken by right
  shifts of 0, 8 and 16: no shift amount can go negative.
"""

from __future__ import annotations

from typing import Any

__all__ = ["pack3", "pack4_halves", "pack4_pairs", "unpack3", "unpack4_halves", "unpack4_pairs"]


def _torch() -> Any:
    from . import require_torch

    return require_torch()


def pack4_halves(q: Any) -> Any:
    """[..., 32] values 0..15 → [..., 16] bytes (q4_0 order)."""
    if q.shape[-1] % 32:
        raise ValueError("pack4_halves needs whole blocks of 32")
    q = q.reshape(*q.shape[:-1], -1, 32)
    lo, hi = q[..., :16], q[..., 16:]
    return (lo | (hi << 4)).reshape(*q.shape[:-2], -1)


def unpack4_halves(b: Any) -> Any:
    torch = _torch()
    b = b.reshape(*b.shape[:-1], -1, 16)
    out = torch.cat([b & 0xF, b >> 4], dim=-1)
    return out.reshape(*b.shape[:-2], -1)


def pack4_pairs(q: Any) -> Any:
    """[..., 2n] values 0..15 → [..., n] bytes (low nibble first)."""
    if q.shape[-1] % 2:
        raise ValueError("pack4_pairs needs an even count")
    return q[..., 0::2] | (q[..., 1::2] << 4)


def unpack4_pairs(b: Any) -> Any:
    torch = _torch()
    return torch.stack([b & 0xF, b >> 4], dim=-1).reshape(*b.shape[:-1], -1)


def pack3(q: Any) -> Any:
    """[..., 8n] values 0..7 → [..., 3n] bytes."""
    torch = _torch()
    if q.shape[-1] % 8:
        raise ValueError("pack3 needs whole groups of 8")
    g = q.reshape(*q.shape[:-1], -1, 8).to(torch.int32)
    shifts = torch.arange(0, 24, 3, dtype=torch.int32, device=q.device)
    lane = (g << shifts).sum(dim=-1)
    parts = torch.stack([(lane >> s) & 0xFF for s in (0, 8, 16)], dim=-1)
    return parts.to(torch.uint8).reshape(*q.shape[:-1], -1)


def unpack3(b: Any) -> Any:
    torch = _torch()
    g = b.reshape(*b.shape[:-1], -1, 3).to(torch.int32)
    lane = g[..., 0] | (g[..., 1] << 8) | (g[..., 2] << 16)
    shifts = torch.arange(0, 24, 3, dtype=torch.int32, device=b.device)
    vals = (lane.unsqueeze(-1) >> shifts) & 7
    return vals.to(torch.uint8).reshape(*b.shape[:-1], -1)
