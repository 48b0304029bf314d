"""Timing on the card for the bench scripts: CUDA events around one call, the best of a few."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def timed(fn: Callable[[], Any], repeats: int = 5) -> float:
    """Seconds of ``fn`` on the card, the best of ``repeats`` runs after one warm-up."""
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3)
    return best
