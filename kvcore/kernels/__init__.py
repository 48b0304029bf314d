"""Real quantized KV caches on a GPU (or the CPU): layouts, append and fused decode attention.

Needs torch and triton: ``pip install 'kvplan[gpu]'``. Each format has a plain torch reference
(``ref``) beside its Triton kernels (``triton_ops``); tests compare the two, and both against
exact attention in float64. Set ``TRITON_INTERPRET=1`` before importing to run the kernels on
CPU tensors.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["KERNEL_FORMATS", "LayerCache", "KiviCache", "require_torch"]

#: formats with a cache layout and kernels
KERNEL_FORMATS = ("f16", "bf16", "fp8_pth", "q8_0", "q4_0", "tbq4", "tbq3", "nvfp4", "kivi2")


def require_torch() -> Any:
    try:
        return import_module("torch")
    except ImportError:  # pragma: no cover - exercised where torch is absent
        raise ImportError("kvplan's GPU kernels need torch and triton: "
                          "pip install 'kvplan[gpu]'") from None


def __getattr__(name: str) -> Any:
    if name == "LayerCache":
        require_torch()
        from .cache import LayerCache

        return LayerCache
    if name == "KiviCache":
        require_torch()
        from .kivi import KiviCache

        return KiviCache
    raise AttributeError(name)
