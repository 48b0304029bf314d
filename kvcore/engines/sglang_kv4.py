"""SGLang's block-scaled KV caches: ``--kv-cache-dtype nvfp4``, ``fp4_mx_block16`` (kvplan's
``fp4_mx16``) and ``mxfp8``, as SGLang 0.5.23 allocates and checks them.

- nvfp4 (layers/quantization/fp4_kv_cache_quant_method.py NVFP4KVCacheMethod): e2m1 pairs and
  one fp8 scale a 16 values for K and V of every layer, on Blackwell SM100 and SM120 only
  (arg_groups/kv_cache_hook.py handle_kv4_compatibility). Decode always runs trtllm_mha
  (handle_nvfp4_prefill_kv_dequant_dtype), which pages the cache in 16, 32, 64 or 128 tokens (64
  where another size is asked: arg_groups/overrides.py). On SM100 prefill reads the packed
  cache too, and the scales are kept once, in the layout trtllm-gen's kernels read (head_dim
  a multiple of 64). On SM120 prefill runs FlashInfer over an fp8 copy: the pool keeps the
  scales token by token and a dequant workspace of one layer's K and V in fp8 a token
  (compute_cell_size: head_num × head_dim × 2, not multiplied by the layers).
- fp4_mx_block16 (FP4MXBlock16KVCacheMethod): the same bytes with a power-of-two (uint8
  exponent) scale a 16 values, on any NVIDIA card; attention dequantizes what it reads. MHA
  attention takes triton, torch_native, flex_attention or trtllm_mha (SGLang's default on
  SM100), MLA attention flashinfer or trtllm_mla; the MLA pool is MLATokenToKVPoolFP4, whose
  logged size leaves out its scales.
- mxfp8 (mem_cache/memory_pool.py MHATokenToKVPoolMXFP8): float8 e4m3 values and an e8m0 scale
  a 32 (head dims multiples of 32), on Blackwell (SM100+) through the FA4 backend, which pages
  an MHA cache in 128 tokens on SM100 (overrides.py _fa4_page_constraint).

SGLang's sliding-window pool (SWAKVPool) is built without the FP4 recipe, its MTP KV sharding,
HiCache's host pools and the DeepSeek/MiniMax sparse pools are not sized here: each is refused
in one line.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..gpus import GPU
from ..model import LayerGroup, LayerKind, ModelSpec
from .sglang_page import page_for

__all__ = ["BLOCK_SCALED", "Layout", "layout", "scale_rows", "workspace"]

#: kvplan's formats SGLang stores with block scales: its --kv-cache-dtype names
BLOCK_SCALED = {"nvfp4": "nvfp4", "fp4_mx16": "fp4_mx_block16", "mxfp8": "mxfp8"}
#: the backends that read fp4_mx_block16: an MHA cache, an MLA latent
FP4_MHA_READERS = ("triton", "torch_native", "flex_attention", "trtllm_mha")
FP4_MLA_READERS = ("flashinfer", "trtllm_mla")


@dataclass(frozen=True)
class Layout:
    """How SGLang lays a block-scaled cache out on the card the plan runs on."""

    #: the page SGLang runs (its backend's), or None for the one asked
    page: int | None
    #: the --attention-backend the plan's command passes (None: SGLang's default takes it)
    backend: str | None
    #: nvfp4 with FlashInfer's prefill: a token holds one layer's K and V in fp8 beside the
    #: layers' rows (``workspace`` gives the bytes)
    workspace: bool
    #: the logged pool size leaves out the scales (MLATokenToKVPoolFP4)
    log_without_scales: bool
    notes: tuple[str, ...]
    #: nvfp4 on SM100 with an fp8 prefill: the scales kept twice, token by token for
    #: FlashInfer and in trtllm-gen's layout for decode (``scale_rows`` gives the second's bytes)
    second_scales: bool = False


def _attention(spec: ModelSpec) -> list[LayerGroup]:
    return [g for g in spec.groups
            if g.kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.MLA)]


def workspace(spec: ModelSpec) -> int:
    """nvfp4's fp8 dequant workspace a token for K (and as much for V) over ``spec``'s heads
    (a rank's): head_num × head_dim bytes, the layer with the most."""
    return max(g.n_kv_heads * g.head_dim_k for g in _attention(spec))


def scale_rows(spec: ModelSpec) -> tuple[int, int]:
    """Bytes a token of one more layout of nvfp4's scales over ``spec``'s attention layers (a
    rank's heads), K and V: an fp8 scale a 16 values."""
    groups = _attention(spec)
    return (sum(g.count * g.n_kv_heads * (g.head_dim_k // 16) for g in groups),
            sum(g.count * g.n_kv_heads * (g.head_dim_v // 16) for g in groups))


def _refuse(msg: str, field: str = "kv_k") -> InputError:
    return InputError(msg, field=field)


def _given(flag: str, given: str, readers: tuple[str, ...]) -> InputError:
    return _refuse(f"{flag} with --attention-backend {given}: kvplan sizes this cache as "
                   f"{' or '.join(readers)} reads it", field="attention_backend")


def layout(name: str, spec: ModelSpec, gpu: GPU | None, *, page_asked: int | None,
           sliding: bool, special: str | None, mtp: bool, hicache: bool,
           prefill: str | None = None, default: str | None = "trtllm_mha",
           given: str | None = None) -> Layout | None:
    """The layout of kvplan's format ``name`` in SGLang for ``spec`` on ``gpu`` (None: a plan
    without a card, sized as SM100 lays it out), or None where ``name`` is not block-scaled; a
    one-line InputError for what SGLang refuses or kvplan does not size. ``special``: the pool
    family that takes no block-scaled cache (a sparse pool); ``prefill``: nvfp4's
    --prefill-kv-cache-dequant-dtype (None or auto: by the card); ``default``: the backend
    SGLang picks itself on this SM100 card (sglang_page), which fp4_mx_block16 keeps where it
    reads FP4 caches; ``given``: the --attention-backend the command names (checked), which
    must be one that reads the format."""
    prefill = None if prefill == "auto" else prefill
    if prefill is not None and name != "nvfp4":
        raise _refuse(f"--prefill-kv-cache-dequant-dtype applies only with --kv-cache-dtype "
                      f"nvfp4 (SGLang raises at start-up), not {name}",
                      field="prefill_kv_cache_dequant_dtype")
    if name not in BLOCK_SCALED:
        return None
    flag = f"--kv-cache-dtype {BLOCK_SCALED[name]}"
    if special:
        raise _refuse(f"{flag}: SGLang's {special} keeps its own layout; kvplan sizes it in "
                      "the formats that pool takes (fp8_e4m3 or bf16)")
    if mtp:
        raise _refuse(f"{flag} with --mtp: the draft worker's block-scaled pool is not sized; "
                      "plan one of them", field="mtp")
    if hicache:
        raise _refuse(f"{flag} with a HiCache host tier: the host pool's copy of the block "
                      "scales is not sized; plan one of them", field="offload")
    family = gpu.cuda_family if gpu is not None else 10
    if family is None:
        raise _refuse(f"{flag}: SGLang runs block-scaled KV caches on NVIDIA cards only, not "
                      f"on {gpu.name if gpu else 'this card'}", field="gpu")
    attention = _attention(spec)
    mla = any(g.kind is LayerKind.MLA for g in attention)
    recurrent = any(g.kind.is_recurrent for g in spec.groups)
    card = gpu.name if gpu is not None else "this card"
    if name == "mxfp8":
        if family not in (10, 11, 12):
            raise _refuse(f"{flag} needs a Blackwell card (SM100 or newer: the FA4 backend's "
                          f"block-scaled operands), not {card}", field="gpu")
        if mla:
            raise _refuse(f"{flag}: SGLang's MXFP8 pool is an MHA pool; an MLA model's latent "
                          "cache takes fp8_e4m3, bf16 or fp4_mx16")
        for g in attention:
            if g.head_dim_k % 32 or g.head_dim_v % 32:
                raise _refuse(f"{flag} needs head dims that are multiples of 32; this model's "
                              f"are {g.head_dim_k} and {g.head_dim_v}")
        if given not in (None, "fa4"):
            raise _given(flag, given, ("fa4",))
        page = 128 if family == 10 else None
        notes = ["mxfp8: float8 e4m3 values and an e8m0 scale a 32 (MHATokenToKVPoolMXFP8), "
                 "read by the FA4 backend (--attention-backend fa4)"
                 + (", which pages the cache in 128 tokens on SM100" if page else "")]
        return Layout(page, "fa4", False, False, tuple(notes))
    if sliding:
        raise _refuse(f"{flag}: SGLang builds this model's sliding-window pools (SWAKVPool) "
                      "without the FP4 recipe (no block scales, a byte a value); mxfp8 or "
                      "fp8_e4m3 are sized")
    if mla and recurrent:
        raise _refuse(f"{flag}: SGLang's hybrid linear pool keeps an MLA model's latents "
                      "without the FP4 recipe")
    for g in attention:
        if g.head_dim_k % 16 or (g.head_dim_v and g.head_dim_v % 16):
            raise _refuse(f"{flag} quantizes blocks of 16 values; this model's head dims are "
                          f"{g.head_dim_k} and {g.head_dim_v}")
    if name == "fp4_mx16":
        readers = FP4_MLA_READERS if mla else FP4_MHA_READERS
        if given is not None and given not in readers:
            raise _given(flag, given, readers)
        if given is not None:
            page = (page_for(spec, gpu, given, page_asked or 1)
                    if given in ("trtllm_mha", "trtllm_mla") else None)
            return Layout(page, None, False, mla, (
                f"fp4_mx_block16: e2m1 with a power-of-two scale a 16 values, dequantized as "
                f"{given} reads it" + (f", in pages of {page} tokens" if page else ""),))
        if mla:
            return Layout(None, "flashinfer", False, True, (
                "fp4_mx_block16: the MLA latent in e2m1 with a power-of-two scale a 16 values "
                "(MLATokenToKVPoolFP4; its logged size leaves the scales out), read through "
                "FlashInfer's MLA backend (--attention-backend flashinfer)",))
        equal = all(g.head_dim_k == g.head_dim_v for g in attention)
        if family == 10 and default == "triton":
            return Layout(1, None, False, False, (
                "fp4_mx_block16: e2m1 with a power-of-two scale a 16 values, dequantized as "
                "attention reads it; SGLang's default backend for this model on SM100 is "
                "triton, in pages of 1 token (its Qwen3-Next/Qwen3.5 override)",))
        if family == 10 and equal and default == "trtllm_mha":
            page = page_for(spec, gpu, "trtllm_mha", page_asked or 1)
            return Layout(page, None, False, False, (
                f"fp4_mx_block16: e2m1 with a power-of-two scale a 16 values, dequantized as "
                f"attention reads it; SGLang's default trtllm_mha backend on SM100 pages the "
                f"cache in {page} tokens",))
        return Layout(None, "triton", False, False, (
            "fp4_mx_block16: e2m1 with a power-of-two scale a 16 values, dequantized as "
            "attention reads it; the plan passes --attention-backend triton (this card's "
            "default backend does not read FP4 caches)",))
    # nvfp4
    if given not in (None, "trtllm_mha"):
        raise _given(flag, given, ("trtllm_mha",))
    if family not in (10, 12):
        raise _refuse(f"{flag} needs a Blackwell SM100 or SM120 card (B200, B300, RTX 50, RTX "
                      f"PRO 6000), not {card}; fp4_mx16 (fp4_mx_block16) is the same size on "
                      "any NVIDIA card", field="gpu")
    if mla:
        raise _refuse(f"{flag}: SGLang decodes nvfp4 with trtllm_mha, an MHA backend; an MLA "
                      "model's latent cache takes fp4_mx16 (fp4_mx_block16)")
    if any(g.head_dim_k != g.head_dim_v for g in attention):
        raise _refuse(f"{flag}: trtllm_mha, which decodes nvfp4, takes equal K and V head dims")
    page = page_for(spec, gpu, "trtllm_mha", page_asked or 1)
    if prefill == "nvfp4" and family != 10:
        raise _refuse("--prefill-kv-cache-dequant-dtype nvfp4 (trtllm_mha's native FP4 "
                      f"prefill) needs SM100, not {card}; fp8_e4m3 is SM120's",
                      field="prefill_kv_cache_dequant_dtype")
    if family == 10:
        for g in attention:
            if g.head_dim_k % 64:
                raise _refuse(f"{flag} on SM100 keeps trtllm-gen's scale layout, which takes "
                              f"head dims that are multiples of 64; this model's is "
                              f"{g.head_dim_k}")
        if prefill == "fp8_e4m3":
            # FlashInfer's prefill reads token-linear scales, trtllm_mha's decode its own
            return Layout(page, None, True, False, (
                f"nvfp4 on SM100 with --prefill-kv-cache-dequant-dtype fp8_e4m3: e2m1, its fp8 "
                f"scales twice (token by token for FlashInfer's prefill, in trtllm-gen's layout "
                f"for trtllm_mha's decode) and an fp8 dequant workspace of one layer's K and V "
                f"a token, logged with the K and V buffers; pages of {page} tokens",),
                second_scales=True)
        notes = [f"nvfp4 on SM100: e2m1 and an fp8 scale a 16 values, prefill and decode on "
                 f"trtllm_mha (the scales in trtllm-gen's layout), pages of {page} tokens"]
        if gpu is None:
            notes.append("sized as SM100 (B200, B300) lays it out; on SM120 cards (RTX 50, RTX "
                         "PRO 6000) FlashInfer's prefill adds an fp8 copy of one layer's K and V "
                         "a token")
        return Layout(page, None, False, False, tuple(notes))
    # SM120: FlashInfer prefill over an fp8 copy of one layer, scales token by token
    return Layout(page, None, True, False, (
        f"nvfp4 on SM120: e2m1 and an fp8 scale a 16 values, decode on trtllm_mha (pages of "
        f"{page} tokens), prefill on FlashInfer over an fp8 dequant workspace of one layer's K "
        f"and V a token (logged with the K and V buffers)",))
