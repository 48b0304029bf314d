"""vLLM 0.34.0's ``--kv-cache-dtype-skip-layers``: layers kept at the model's dtype beside a
quantized cache, and what sharing one block pool does to the pages.

Sources (the v0.34.0 release package): ``config/cache.py`` (``kv_cache_dtype_skip_layers``:
layer indices or the attention type ``sliding_window``), ``model_executor/layers/attention/
attention.py`` (a layer whose index is listed, or a sliding-window layer where
``sliding_window`` is, runs with ``kv_cache_dtype`` auto; ``get_kv_cache_spec``: every
sliding-window layer's page is padded to ``skip_page_size_padded`` wherever that is set, its
block the largest kernel block whose page fits it, ``_largest_kernel_block_within``),
``platforms/interface.py`` (``_align_heterogeneous_kv_block_size``, run whenever the list is not
empty and the cache is not the model's dtype: the block grows until a page of the quantized
dtype, priced a byte a value by the first layer's native backend, holds 16 tokens of a
skipped layer; that page is ``skip_page_size_padded``), ``v1/core/kv_cache_planning.py``
(``unify_kv_cache_spec_page_size``: a smaller page is scaled by a whole ratio or padded to the
largest; a padded page keeps its padding, so a sliding-window page padded to the shared page
cannot be scaled to a larger full-attention page).
"""

from __future__ import annotations

import re

from ..errors import InputError, shown
from ..model import LayerKind, ModelSpec
from . import vllm_tq
from .vllm_backends import NVFP4

__all__ = ["FORMATS", "SLIDING", "check", "padded", "page_bytes", "parse", "skipped",
           "sliding_block"]

#: the attention type vLLM's list may name
SLIDING = "sliding_window"
#: the caches whose pages kvplan sizes beside skipped layers: fp8 (a byte a value, as the
#: native backend prices them), TurboQuant's and UltraQuant's packed slots, and the NVFP4
#: caches (FlashInfer's customize_spec packs them: e2m1 pairs and an fp8 scale a 16, K and V
#: in slots of their own; FLASH_ATTN prices the same uint8 dtype a byte a value)
FORMATS = frozenset({"fp8_e4m3", "fp8_e5m2", *vllm_tq.PACKED, *NVFP4})
#: the model's own dtype: the list changes nothing
NATIVE = frozenset({"f16", "bf16"})


def parse(text: str | None) -> tuple[str, ...]:
    """The list as given (commas or spaces between entries): layer indices and
    ``sliding_window``; a one-line error for anything else."""
    if not text:
        return ()
    out: list[str] = []
    for word in text.replace(",", " ").split():
        # vLLM matches str(layer index) and the word sliding_window as they are
        if word != SLIDING and not re.fullmatch(r"0|[1-9][0-9]*", word):
            raise InputError("kv_cache_dtype_skip_layers takes layer indices as vLLM matches "
                             "them (0, 1, 31: no sign or leading zero) and sliding_window, got "
                             f"{shown(word)}", field="kv_cache_dtype_skip_layers")
        if word not in out:
            out.append(word)
    return tuple(out)


def skipped(spec: ModelSpec, name: str, patterns: tuple[str, ...]) -> frozenset[int]:
    """The layers vLLM keeps at the model's dtype: those listed, every sliding-window layer
    where ``sliding_window`` is, and TurboQuant's boundary layers."""
    if name in NATIVE:
        return frozenset()
    out = set(vllm_tq.skip_layers(spec, name))
    out |= {int(p) for p in patterns if p != SLIDING}
    if SLIDING in patterns:
        out |= {i for g in spec.groups if g.kind is LayerKind.SLIDING and not g.mtp
                for i in g.layers}
    return frozenset(out)


def padded(spec: ModelSpec, name: str, patterns: tuple[str, ...]) -> bool:
    """Whether vLLM pads pages to one shared page (skip_page_size_padded): a skip list, given
    or TurboQuant's own, beside a cache that is not the model's dtype."""
    return name not in NATIVE and bool(patterns or vllm_tq.skip_layers(spec, name))


def check(spec: ModelSpec, name: str, patterns: tuple[str, ...]) -> None:
    """Refuse, in one line, a list vLLM does not take for this model or kvplan does not size
    (TurboQuant's own limits are vllm_tq.check's)."""
    if name in NATIVE:
        return
    if patterns:
        _check_list(spec, name, patterns)
    sliding = any(g.kind is LayerKind.SLIDING for g in spec.groups)
    heads = {(g.n_kv_heads, g.head_dim_k, g.head_dim_v) for g in spec.groups if not g.mtp}
    if sliding and padded(spec, name, patterns) and len(heads) != 1:
        raise InputError("skipped layers beside sliding-window layers: vLLM pads every page "
                         "to one sized by the model's KV heads and head size; this model's "
                         f"layers differ ({sorted(heads)}), which kvplan does not size",
                         field="kv_cache_dtype_skip_layers" if patterns else "kv_k")
    sliding_check(spec, name, patterns)


def _check_list(spec: ModelSpec, name: str, patterns: tuple[str, ...]) -> None:
    field = "kv_cache_dtype_skip_layers"
    if name not in FORMATS:
        raise InputError(f"--kv-cache-dtype-skip-layers beside {name}: kvplan sizes the skipped "
                         "layers' pages beside fp8_e4m3, fp8_e5m2, nvfp4 and the TurboQuant and "
                         "UltraQuant caches",
                         field=field)
    layers = spec.decoder_layers
    for p in patterns:
        if p != SLIDING and int(p) >= layers:
            raise InputError(f"--kv-cache-dtype-skip-layers {p}: this model's layers are 0 to "
                             f"{layers - 1}", field=field)
    kinds = {g.kind for g in spec.groups if not g.mtp}
    if any(k.is_recurrent for k in kinds):
        raise InputError("--kv-cache-dtype-skip-layers in a hybrid recurrent model: the state "
                         "pages' padding beside skipped layers is not sized here", field=field)
    if name in NVFP4 and LayerKind.SLIDING in kinds:
        raise InputError(f"--kv-cache-dtype-skip-layers beside {name} in a sliding-window "
                         "model: the shared page the sliding-window pages pad to is priced by "
                         "the first layer's backend, which kvplan does not size there",
                         field=field)
    if kinds - {LayerKind.FULL, LayerKind.SLIDING}:
        other = ", ".join(sorted(k.name.lower() for k in kinds
                                 - {LayerKind.FULL, LayerKind.SLIDING}))
        raise InputError(f"--kv-cache-dtype-skip-layers beside {other} layers: not sized here "
                         "(full-attention and sliding-window models are)", field=field)


def page_bytes(spec: ModelSpec, name: str, skipped: frozenset[int],
               family: int | None) -> tuple[int, int]:
    """(a skipped layer's bytes, the quantized dtype's bytes) a token and KV head, as
    _align_heterogeneous_kv_block_size prices them: the skipped layer at the model's 16 bits,
    the quantized dtype through the first layer's backend's customize_spec, a byte a value but
    for NVFP4 under FlashInfer (packed: the first layer is quantized, so FlashInfer runs it, or
    skipped on SM100, where FlashInfer is the first backend vLLM tries for 16-bit layers;
    elsewhere FLASH_ATTN)."""
    g = next(g for g in spec.groups if g.kind in (LayerKind.FULL, LayerKind.SLIDING))
    width = g.head_dim_k + g.head_dim_v
    primary = width
    if name in NVFP4 and (0 not in skipped or family == 10):
        primary = 2 * (g.head_dim_k // 2 + g.head_dim_k // 16)
    return 2 * width, primary


def sliding_check(spec: ModelSpec, name: str, patterns: tuple[str, ...]) -> None:
    """A full-attention layer kept at the model's dtype in a model with sliding-window layers
    has a page twice the shared one, to which the padded sliding-window pages cannot be
    scaled: refused."""
    if not any(g.kind is LayerKind.SLIDING for g in spec.groups):
        return
    kept = skipped(spec, name, patterns)
    full = sorted(i for g in spec.groups if g.kind is LayerKind.FULL and not g.mtp
                  for i in g.layers if i in kept)
    if full:
        which = ", ".join(map(str, full))
        raise InputError(f"layers {which} (full attention) kept at the model's dtype beside "
                         "sliding-window layers: their pages are twice the shared page that "
                         "vLLM pads the sliding-window pages to, and a padded page cannot be "
                         "scaled to them; kvplan does not size it", field=(
                             "kv_k" if name in vllm_tq.PACKED and not patterns
                             else "kv_cache_dtype_skip_layers"))


def sliding_block(per_token: int, page: int, kernel_blocks: tuple[int, ...] | None) -> int:
    """The block of a sliding-window layer padded to ``page``: the largest kernel block whose
    page fits (``kernel_blocks``: the backend's fixed sizes; None: any multiple of 16)."""
    most = page // per_token
    if kernel_blocks is None:
        return max(16, most // 16 * 16)
    fitting = [b for b in kernel_blocks if b <= most]
    return max(fitting) if fitting else min(kernel_blocks)
