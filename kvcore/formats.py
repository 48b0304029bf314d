"""KV-cache formats with their exact block arithmetic.

One frozen dataclass per format and one registry tuple. A row of ``width`` values (one head of
K or V for one token) takes ``ceil(width / block_values) * block_bytes`` bytes: rows whose width
is not a multiple of the block are padded to whole blocks, as every engine does.

Special cases, each a field of its own:
- ``tensor_scale_bytes``: a scale per layer for the whole K (and V) tensor (fp8, nvfp4).
- ``token_head_scale_bytes``: a scale per token per head (vLLM's per-token-head modes).
- KIVI: keys get a scale and minimum per channel over groups of ``token_group`` tokens, values
  per token over groups of channels; the most recent ``residual_tokens`` stay in f16 and older
  tokens are quantized in whole groups.
- Asymmetric K/V layouts (vLLM's TurboQuant presets): ``v_block_values``, ``v_block_bytes`` and
  ``v_token_head_scale_bytes`` give V's own layout, and ``pair_even`` pads V's row by a byte
  where a head's K and V rows together are odd (vLLM packs them in one even-sized slot).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from .errors import UnknownNameError

__all__ = ["FORMATS", "KVFormat", "Role", "describe", "format_names", "get_format",
           "quality_note"]

Role = Literal["k", "v"]

F16_BYTES = 2


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KVFormat:
    """A KV-cache storage format; all sizes in bytes."""

    name: str
    block_values: int
    block_bytes: int
    layout: str
    quality: str
    aliases: tuple[str, ...] = ()
    tensor_scale_bytes: int = 0
    token_head_scale_bytes: int = 0
    token_group: int = 1
    residual_tokens: int = 0
    channel_grouped_keys: bool = False
    #: V's own layout where it differs from K's (0: the same as K's)
    v_block_values: int = 0
    v_block_bytes: int = 0
    v_token_head_scale_bytes: int = 0
    #: K and V of a head share one slot rounded up to an even number of bytes
    pair_even: bool = False

    @property
    def bits_per_value(self) -> float:
        """Storage bits per cached value, block scales included (residual window excluded; the
        mean of K's and V's where their layouts differ)."""
        k = self.block_bytes * 8 / self.block_values
        if not self.v_block_values:
            return k
        return (k + self.v_block_bytes * 8 / self.v_block_values) / 2

    @property
    def is_quantized(self) -> bool:
        return self.bits_per_value < 16

    def row_bytes(self, width: int, role: Role = "k") -> int:
        """Bytes of one token's row of ``width`` values for one head, as K or V."""
        k = _ceil_div(width, self.block_values) * self.block_bytes + self.token_head_scale_bytes
        if role == "k" or not self.v_block_values:
            return k
        v = (_ceil_div(width, self.v_block_values) * self.v_block_bytes
             + self.v_token_head_scale_bytes)
        return v + ((k + v) % 2 if self.pair_even else 0)

    def quantized_tokens(self, tokens: int) -> int:
        """Of a cache holding ``tokens`` tokens, how many are stored quantized.

        The f16 residual window keeps at least ``residual_tokens`` recent tokens and flushes
        whole groups of ``token_group`` tokens, so it holds between R and R + G − 1 tokens.
        """
        if self.residual_tokens == 0 and self.token_group == 1:
            return tokens
        cold = max(0, tokens - self.residual_tokens)
        return cold // self.token_group * self.token_group

    def residual_capacity(self, tokens: int) -> int:
        """f16 slots a cache of capacity ``tokens`` allocates for its residual window: the
        most it ever holds while growing to ``tokens`` (R + G − 1, or fewer)."""
        if self.residual_tokens == 0:
            return 0
        return min(tokens, self.residual_tokens + self.token_group - 1)

    def bytes_for(self, tokens: int, width: int, role: Role) -> int:
        """Bytes of a cache of capacity ``tokens`` × one head of ``width`` values (K or V).

        Per-layer tensor scales are not included (see ``tensor_scale_bytes``). With a residual
        window (KIVI) the allocation is the window's peak plus the quantized groups, so it never
        shrinks as the context grows.
        """
        if tokens <= 0 or width <= 0:
            return 0
        if self.residual_tokens == 0 and self.token_group == 1:
            return tokens * self.row_bytes(width, role)
        cold = self.quantized_tokens(tokens)
        hot = self.residual_capacity(tokens)
        if role == "k" and self.channel_grouped_keys:
            cold_bytes = (cold // self.token_group) * width * self.block_bytes
        else:
            cold_bytes = cold * self.row_bytes(width, role)
        return cold_bytes + hot * width * F16_BYTES


def _kivi(bits: int) -> KVFormat:
    group = 32
    return KVFormat(
        name=f"kivi{bits}",
        block_values=group,
        # G values of `bits` bits + an fp16 scale and an fp16 minimum
        block_bytes=group * bits // 8 + 4,
        layout=(
            f"{bits}-bit asymmetric; keys per channel over groups of {group} tokens, values per "
            f"token over groups of {group} channels; fp16 scale + min per group; the most recent "
            "128 tokens stay f16"
        ),
        quality=(
            "near f16 on LongBench (KIVI paper)" if bits == 4 else "small loss on long-context tasks"
        ),
        token_group=group,
        residual_tokens=128,
        channel_grouped_keys=True,
    )


def _packed(bits: int) -> tuple[int, int]:
    """(values, bytes) of a block of ``bits``-bit codes packed into whole bytes."""
    return {8: (1, 1), 4: (2, 1), 3: (8, 3), 2: (4, 1)}[bits]


def _turboquant(name: str, preset: str, k_bits: int, v_bits: int) -> KVFormat:
    kv, kb = _packed(k_bits)
    vv, vb = _packed(v_bits)
    keys = ("float8 keys" if k_bits == 8 else
            f"{k_bits}-bit Lloyd-Max keys after a Hadamard rotation + fp16 norm a head")
    quality = {"k8v4": "+1.2% PPL (vLLM's figure, Qwen3-4B)",
               "4bit_nc": "+2.7% PPL (vLLM's figure, Qwen3-4B)",
               "k3v4_nc": "+10.6% PPL (vLLM's figure, Qwen3-4B)",
               "3bit_nc": "+20.6% PPL (vLLM's figure, Qwen3-4B); validate before use"}[preset]
    return KVFormat(
        name, kv, kb,
        f"{keys}; {v_bits}-bit uniform values + fp16 scale and zero a head; one even slot "
        "a head (vLLM turboquant_" + preset + ")",
        quality,
        aliases=(f"turboquant_{preset}",),
        token_head_scale_bytes=0 if k_bits == 8 else 2,
        v_block_values=vv, v_block_bytes=vb, v_token_head_scale_bytes=4, pair_even=True,
    )


FORMATS: tuple[KVFormat, ...] = (
    KVFormat("f32", 1, 4, "IEEE float32", "reference", aliases=("fp32", "float32")),
    KVFormat("f16", 1, 2, "IEEE float16", "baseline", aliases=("fp16", "float16", "half")),
    KVFormat("bf16", 1, 2, "bfloat16", "baseline", aliases=("bfloat16",)),
    KVFormat(
        "fp8_e4m3",
        1,
        1,
        "float8 e4m3 + one fp32 scale per layer for K and for V",
        "near f16 with calibrated scales; a 1.0 default scale can hurt",
        aliases=("fp8", "float8", "fp8_e4m3fn", "e4m3"),
        tensor_scale_bytes=4,
    ),
    KVFormat(
        "fp8_e5m2",
        1,
        1,
        "float8 e5m2 + one fp32 scale per layer for K and for V",
        "coarser mantissa than e4m3",
        aliases=("e5m2",),
        tensor_scale_bytes=4,
    ),
    KVFormat(
        "fp8_pth",
        1,
        1,
        "float8 e4m3 + one fp32 scale per token per head for K and for V",
        "near f16, no calibration needed",
        aliases=("fp8_per_token_head",),
        token_head_scale_bytes=4,
    ),
    KVFormat(
        "mxfp8",
        32,
        33,
        "e8m0 (power-of-two) scale + 32 float8 e4m3 values",
        "no calibration needed; SGLang's FA4 cache on Blackwell",
    ),
    KVFormat(
        "int8_pth",
        1,
        1,
        "int8 + one fp32 scale per token per head for K and for V",
        "symmetric, no calibration needed; vLLM's int8_per_token_head",
        aliases=("int8_per_token_head",),
        token_head_scale_bytes=4,
    ),
    KVFormat("q8_0", 32, 34, "fp16 d + int8[32]", "indistinguishable from f16 (+0.04% PPL)"),
    KVFormat(
        "q4_0",
        32,
        18,
        "fp16 d + 16 bytes; byte j holds value j (low nibble) and j+16 (high)",
        "+0.5 to +2.4% PPL; keys suffer most",
    ),
    KVFormat(
        "int4_pth",
        2,
        1,
        "int4 pairs after a randomized Hadamard rotation + one fp32 scale (a 4-bit zero point in "
        "its low mantissa bits) per token per head for K and for V",
        "asymmetric; vLLM's int4_per_token_head",
        aliases=("int4_per_token_head",),
        token_head_scale_bytes=4,
    ),
    KVFormat("q4_1", 32, 20, "fp16 d, fp16 m + 16 bytes of nibbles", "slightly better than q4_0"),
    KVFormat("q5_0", 32, 22, "fp16 d + qh[4] + qs[16]", "between q4_1 and q8_0"),
    KVFormat("q5_1", 32, 24, "fp16 d, fp16 m + qh[4] + qs[16]", "between q5_0 and q8_0"),
    KVFormat(
        "iq4_nl",
        32,
        18,
        "fp16 d + 16 bytes of indices into a non-linear 16-entry table",
        "about q4_1 quality at q4_0 size",
    ),
    KVFormat(
        "tbq4",
        128,
        66,
        "fp16 norm + 64 bytes of 4-bit Lloyd-Max indices after a randomized Walsh-Hadamard rotation",
        "+0.2 to +1.2% PPL; rotation tames outlier channels",
    ),
    KVFormat(
        "tbq3",
        128,
        50,
        "fp16 norm + 48 bytes of 3-bit indices (8 per 3 bytes) after the same rotation",
        "+1 to +13% PPL; model-dependent, prefer for V only",
    ),
    KVFormat(
        "nvfp4",
        16,
        9,
        "e2m1 pairs + one fp8 e4m3 scale per 16 values + fp32 per-tensor scale",
        "<1% loss reported by NVIDIA; storage-only before Blackwell",
        tensor_scale_bytes=4,
    ),
    KVFormat(
        "nvfp4_4over6",
        16,
        9,
        "nvfp4's layout; each 16's fp8 scale from amax / 6 or amax / 4, whichever reconstructs "
        "the 16 better",
        "nvfp4's size with a scale search; vLLM's nvfp4_4over6 (SM100)",
        tensor_scale_bytes=4,
    ),
    KVFormat(
        "fp4_mx16",
        16,
        9,
        "e8m0 (power-of-two) scale + 8 bytes of e2m1 pairs per 16 values",
        "nvfp4's size with a power-of-two scale; SGLang's fp4_mx_block16",
        aliases=("fp4_mx_block16",),
    ),
    KVFormat("mxfp4", 32, 17, "e8m0 scale + 16 bytes of e2m1 pairs", "coarser scale than nvfp4"),
    KVFormat(
        "uq_4bit",
        32,
        17,
        "e2m1 pairs + one e8m0 scale 2^round(log2(0.156 · amax)) per 32 values, keys after a "
        "Hadamard rotation; K and V in one slot a head (vLLM ultraquant_4bit)",
        "mxfp4's size with an MSE-fitted scale and rotated keys; vLLM's ultraquant_4bit (ROCm)",
        aliases=("ultraquant_4bit",),
    ),
    # vLLM's TurboQuant presets (--kv-cache-dtype turboquant_*): keys fp8, or Lloyd-Max indices
    # after a Hadamard rotation with an fp16 norm a head; values uniform with an fp16 scale
    # and zero a head; K and V in one even slot
    _turboquant("tq_k8v4", "k8v4", 8, 4),
    _turboquant("tq_4bit", "4bit_nc", 4, 4),
    _turboquant("tq_k3v4", "k3v4_nc", 3, 4),
    _turboquant("tq_3bit", "3bit_nc", 3, 3),
    _kivi(2),
    _kivi(4),
)

_BY_NAME: dict[str, KVFormat] = {}
for _fmt in FORMATS:
    for _key in (_fmt.name, *_fmt.aliases):
        _BY_NAME[_key] = _fmt


@cache
def _measured() -> dict[str, dict[str, float]]:
    text = resources.files("kvcore").joinpath("data/quality.json").read_text("utf-8")
    data = json.loads(text)["formats"]
    assert isinstance(data, dict)
    return data


def measured_error(fmt: KVFormat) -> str | None:
    """The format's measured attention-output error against f16, as the notes say it; None
    where it has none (f16 and f32 are the reference)."""
    measured = _measured().get(fmt.name)
    if not measured or fmt.name in ("f16", "f32"):
        return None
    return f"{measured['out_rel_err'] * 100:.1f}% attention-output error vs f16 (measured)"


def quality_note(fmt: KVFormat) -> str:
    """The format's quality note with its measured attention-output error against f16."""
    err = measured_error(fmt)
    return f"{err}; {fmt.quality}" if err else fmt.quality


def describe(fmt: KVFormat) -> dict[str, object]:
    """A format as the CLI's and the API's lists give it: names, block, bits a value, the bytes
    a 128-wide head's K and V rows take (scales included; they differ where the format lays V
    out its own way), layout and quality note, and the engines that store it with the value
    each one's KV-cache flag takes (``engines``; kvplan's raw plan and kernels take every
    format)."""
    from .engines import engine_flags

    return {"name": fmt.name, "aliases": list(fmt.aliases), "block_values": fmt.block_values,
            "block_bytes": fmt.block_bytes, "bits_per_value": fmt.bits_per_value,
            "k_row_bytes_128": fmt.row_bytes(128, "k"), "v_row_bytes_128": fmt.row_bytes(128, "v"),
            "layout": fmt.layout, "quality": quality_note(fmt), "engines": engine_flags(fmt.name)}


def format_names() -> list[str]:
    """Canonical names, in registry order."""
    return [f.name for f in FORMATS]


def get_format(name: str, *, field: str = "kv") -> KVFormat:
    """The format called ``name`` (canonical or alias, any case)."""
    if isinstance(name, KVFormat):
        return name
    key = str(name).strip().lower().replace("-", "_")
    try:
        return _BY_NAME[key]
    except KeyError:
        raise UnknownNameError("KV format", str(name), _BY_NAME.keys(), field=field) from None
