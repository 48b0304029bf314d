"""vLLM 0.34.0's TurboQuant KV caches (``--kv-cache-dtype turboquant_k8v4``, ``_4bit_nc``,
``_k3v4_nc``, ``_3bit_nc``; kvplan's ``tq_k8v4``, ``tq_4bit``, ``tq_k3v4``, ``tq_3bit``).

Sources (the v0.34.0 release package):
``model_executor/layers/quantization/turboquant/config.py`` (TQ_PRESETS; a head's key is
head_dim fp8 bytes, or ceil(head_dim × bits / 8) bytes of Lloyd-Max indices and an fp16 norm;
its value ceil(head_dim × bits / 8) bytes and an fp16 scale and zero; one slot for both,
rounded up to an even size; ``get_boundary_skip_layers``: a model without Mamba or
linear-attention layers keeps its first two and last two layers unquantized),
``v1/attention/backends/turboquant_attn.py`` (``customize_spec``: the slot is the page's
content a head and token; kernel blocks 16, 32, 64 and 128; the Hadamard rotation is built
for a power-of-two head size), ``engine/arg_utils.py`` (the boundary layers join
``kv_cache_dtype_skip_layers``, which ``model_executor/layers/attention/attention.py`` serves
at the model's dtype), ``platforms/interface.py`` (``_align_heterogeneous_kv_block_size``, run
with the first layer's backend, a native one that prices the packed dtype as a byte a value:
the block grows to the kernel-aligned size whose page holds 16 tokens of a skipped layer,
32 where --block-size 16 is asked), ``v1/kv_cache_interface.py``
(``UniformTypeKVCacheSpecs``: the quantized and skipped full-attention layers of one block
size share one group whose block is the sum of their pages).
"""

from __future__ import annotations

from ..errors import InputError
from ..model import LayerKind, ModelSpec

__all__ = ["FORMATS", "PACKED", "aligned_block", "check", "skip_layers", "slot_bytes"]

#: kvplan's names for vLLM's presets
FORMATS = {"tq_k8v4": "turboquant_k8v4", "tq_4bit": "turboquant_4bit_nc",
           "tq_k3v4": "turboquant_k3v4_nc", "tq_3bit": "turboquant_3bit_nc"}
#: the caches vLLM packs the TurboQuant way (a head's K and V in one slot, the boundary layers
#: at the model's dtype: engine/arg_utils.py uses_packed_kv_backend): TurboQuant's presets and
#: UltraQuant (kvplan's uq_4bit: backends/ultraquant_attn.py, a ROCm backend; e2m1 codes and
#: an e8m0 scale a 32 for K and V, ops/ultraquant/format.py slot_size)
PACKED = {**FORMATS, "uq_4bit": "ultraquant_4bit"}
#: vLLM's --dtype auto serves a float16 checkpoint in float16 (a float32 one in the
#: platform's first dtype, bfloat16: config/model.py _resolve_auto_dtype), which UltraQuant's
#: backend does not take (supported_dtypes: bfloat16 only)
FP16_SERVED = frozenset({"float16"})
#: model types with attention sinks (gpt-oss), which UltraQuant's backend refuses
#: (supports_sink False)
SINK_TYPES = frozenset({"gpt_oss"})
#: hybrid model types whose vLLM config class gives none of the layer lists
#: _get_full_attention_layer_indices reads (transformers_utils/configs/kimi_linear.py)
NO_LAYER_LIST = frozenset({"kimi_linear", "kimi_k3"})
#: the first and last layers get_boundary_skip_layers keeps at the model's dtype
BOUNDARY = 2
#: the smallest kernel block of the native backends the skipped layers run on (FlashAttention,
#: FlashInfer and Triton: 16)
NATIVE_KERNEL_BLOCK = 16
#: TurboQuant's own kernel blocks (get_supported_kernel_block_sizes)
KERNEL_BLOCKS = (16, 32, 64, 128)


def slot_bytes(name: str, head_dim: int) -> int:
    """One head's K and V slot a token under preset ``name`` (kvplan's)."""
    from ..formats import get_format

    fmt = get_format(name)
    return fmt.row_bytes(head_dim, "k") + fmt.row_bytes(head_dim, "v")


def check(spec: ModelSpec, name: str) -> None:
    """Refuse, in one line, what vLLM's TurboQuant cache does not run or kvplan does not size
    here."""
    flag = f"--kv-cache-dtype {PACKED[name]}"
    if name == "uq_4bit":
        if spec.dtype in FP16_SERVED:
            raise InputError(f"{flag}: vLLM serves this {spec.dtype} checkpoint in float16, "
                             "and UltraQuant's backend takes bfloat16 models only (pass "
                             "--dtype bfloat16 to vLLM, which kvplan does not plan)",
                             field="kv_k")
        if spec.model_type in SINK_TYPES:
            raise InputError(f"{flag}: UltraQuant's backend refuses attention sinks "
                             "(supports_sink False), which this model has", field="kv_k")
    family = "UltraQuant" if name == "uq_4bit" else "TurboQuant"
    if spec.mm_prefix:
        raise InputError(f"{flag}: the {family} backend does not run this model's image-prefix "
                         "(bidirectional) attention (supports_mm_prefix False), so vLLM finds "
                         "no attention backend while images are served; with "
                         "--language-model-only it does", field="kv_k")
    kinds = {g.kind for g in spec.groups if not g.kind.is_recurrent}
    if kinds & {LayerKind.MLA, LayerKind.INDEXER, LayerKind.COMPRESSED, LayerKind.INDEX}:
        raise InputError(f"{flag}: no MLA attention backend of vLLM 0.34.0 stores a "
                         f"{family} cache (none lists it among its KV cache dtypes), so it "
                         "finds no valid attention backend at start-up; an MLA model plans "
                         "with --kv f16, bf16 or fp8_e4m3", field="kv_k")
    recurrent = any(g.kind.is_recurrent for g in spec.groups)
    allowed = {LayerKind.FULL} if recurrent else {LayerKind.FULL, LayerKind.SLIDING}
    if kinds - allowed:
        other = ", ".join(sorted(k.name.lower() for k in kinds - allowed))
        raise InputError(f"{flag}: the {family} pages of {other} layers"
                         + (" in a hybrid recurrent model" if recurrent else "")
                         + " are not sized here; full-attention, sliding-window and hybrid "
                         "models of full attention and recurrent layers are", field="kv_k")
    dims = {(g.head_dim_k, g.head_dim_v) for g in spec.groups
            if g.kind in (LayerKind.FULL, LayerKind.SLIDING)}
    if not dims:
        raise InputError(f"{flag}: this model has no attention layer to quantize", field="kv_k")
    if spec.model_type in NO_LAYER_LIST and any(g.kind.is_recurrent for g in spec.groups):
        raise InputError(f"{flag}: vLLM finds no list of full-attention layers in this hybrid "
                         "model's config (KimiLinearConfig names no layer_types, "
                         "layers_block_type or attn_type_list), so TurboQuant raises "
                         "NotImplementedError at start-up", field="kv_k")
    if len(dims) != 1 or any(k != v for k, v in dims):
        raise InputError(f"{flag}: vLLM packs a head's key and value of one head size in one "
                         f"slot; this model's heads are {sorted(dims)}", field="kv_k")
    (dim, _), = dims
    if name == "uq_4bit" and dim % 32:
        raise InputError(f"{flag}: its e8m0 scales cover 32 values; this model's heads are "
                         f"{dim} wide", field="kv_k")
    if name != "tq_k8v4" and dim & (dim - 1):
        raise InputError(f"{flag}: its Hadamard rotation is built for power-of-two head sizes; "
                         f"this model's is {dim} (turboquant_k8v4 keeps fp8 keys unrotated)",
                         field="kv_k")


def skip_layers(spec: ModelSpec, name: str) -> frozenset[int]:
    """The layers vLLM keeps at the model's dtype under preset ``name``: the first and last two
    of a model without recurrent layers (get_boundary_skip_layers), none for a hybrid one."""
    if name not in PACKED or any(g.kind.is_recurrent for g in spec.groups):
        return frozenset()
    layers = spec.decoder_layers
    n = min(BOUNDARY, layers // 2)
    return frozenset(range(n)) | frozenset(range(layers - n, layers))


def aligned_block(block: int, skipped_bytes: int, primary_bytes: int) -> int:
    """The block _align_heterogeneous_kv_block_size leaves where skipped layers share the pool:
    large enough, in multiples of the block asked (at least the native kernel block), that a
    block of the quantized dtype, ``primary_bytes`` a token as the first layer's backend prices
    it, holds ``NATIVE_KERNEL_BLOCK`` tokens of a skipped layer (``skipped_bytes`` a token)."""
    align = max(NATIVE_KERNEL_BLOCK, block)
    need = skipped_bytes * NATIVE_KERNEL_BLOCK
    return max(block, align * -(-need // (align * primary_bytes)))
