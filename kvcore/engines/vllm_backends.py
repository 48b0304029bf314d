"""vLLM 0.34.0's attention backend selection, as far as it sets the KV-cache block size.

Sources (the v0.34.0 release package): ``vllm/platforms/cuda.py`` (``_get_backend_priorities``:
the order backends are tried in per compute capability; ``get_attn_backend_cls``: the first
whose ``validate_configuration`` returns no reason wins, a ``--block-size`` a higher backend
refuses only moves selection down the list, none left → "No valid attention backend found"),
``vllm/platforms/interface.py`` (``update_block_size_for_backend``,
``_preferred_block_size_for_backends``: without ``--block-size`` the block is the backends'
``get_preferred_block_size(64)``, one size for every KV cache group; 0.34.0 raised
``CacheConfig.DEFAULT_BLOCK_SIZE`` from 16 to 64),
``vllm/v1/attention/backend.py`` (``AttentionBackend.supports_block_size``: a multiple of one
of the kernel sizes; ``get_preferred_block_size``: the default if taken, else the smallest
kernel size), ``vllm/model_executor/models/config.py`` (``Gemma4Config.verify_and_update_config``),
``vllm/v1/attention/backends/fa_utils.py`` and the backends' own files (named below).

Only what changes the block is modeled: for other models every backend vLLM could pick takes
64-token blocks (multiples of 16, or FlashInfer's 16/32/64), and kvplan keeps 64. An nvfp4 cache is the exception: only FlashInfer stores
it, and where FlashInfer refuses the model or card vLLM finds no backend at all, which kvplan
refuses in one line (``_nvfp4_refusal``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..formats import KVFormat
from ..gpus import GPU
from ..hf import GEMMA4_TYPES
from ..model import LayerKind, ModelSpec
from .vllm_tq import KERNEL_BLOCKS

#: vLLM's default block (config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE: 64 from 0.34.0, 16
#: before)
DEFAULT_BLOCK = 64
#: MLACommonBackend.get_supported_head_sizes (model_executor/layers/attention/mla_attention.py):
#: the latent widths (kv_lora_rank + qk_rope_head_dim) every MLA backend but TRITON_MLA takes
MLA_HEADS = frozenset({320, 512, 576})
#: FlashInferMLABackend.supports_combination (mla/flashinfer_mla.py): "FlashInfer MLA kernel
#: requires qk_nope_head_dim in [64, 128, 192]"
FLASHINFER_MLA_NOPE = frozenset({64, 128, 192})
#: FlashInferBackend.get_supported_head_sizes (backends/flashinfer.py)
FLASHINFER_HEADS = frozenset({64, 128, 256, 512})
#: kvplan format → vLLM --kv-cache-dtype family the backends' lists name
_16BIT = frozenset({"f16", "bf16"})


@dataclass(frozen=True)
class Backend:
    """One attention backend: its name and the kernel block sizes it takes (a block size is
    taken when it is a multiple of one of them)."""

    name: str
    sizes: tuple[int, ...]

    def takes(self, block: int) -> bool:
        return any(block % s == 0 for s in self.sizes)

    def preferred(self) -> int:
        return DEFAULT_BLOCK if self.takes(DEFAULT_BLOCK) else min(self.sizes)


TRITON_MLA = Backend("TRITON_MLA", (16,))
FLASH_ATTN_MLA = Backend("FLASH_ATTN_MLA", (16,))
FLASHMLA = Backend("FLASHMLA", (64,))
FLASHINFER_MLA = Backend("FLASHINFER_MLA", (32, 64))
CUTLASS_MLA = Backend("CUTLASS_MLA", (128,))
TOKENSPEED_MLA = Backend("TOKENSPEED_MLA", (32, 64))
TRITON_ATTN = Backend("TRITON_ATTN", (16,))
FLASHINFER = Backend("FLASHINFER", (16, 32, 64))
#: TRITON_FLASHINFER (backends/triton_flashinfer.py): Triton for image-prefix batches,
#: FlashInfer for the rest, kernel_block_sizes (64,), head sizes 256 and 512, SM10x only
TRITON_FLASHINFER = Backend("TRITON_FLASHINFER", (64,))
#: TurboQuant's own backend (turboquant_attn.py): 16/32/64/128-token kernel blocks
TURBOQUANT = Backend("TURBOQUANT", KERNEL_BLOCKS)


def _mla_reasons(spec: ModelSpec, family: int, kv: str, name: str,
                 skipped: bool = False) -> list[str]:
    """Why the dense MLA backend ``name`` refuses the model's latent, a ``kv`` cache (and, with
    ``skipped``, layers kept at the model's dtype) on a card of ``family``: vLLM's reason
    strings, none where it takes them (block size aside)."""
    width = next(g.head_dim_k for g in spec.groups if g.kind is LayerKind.MLA)
    kv16, fp8 = kv in _16BIT, kv == "fp8_e4m3"
    nope = spec.qk_nope_head_dim
    why = []
    # every MLA backend but triton_mla.py takes the latent widths of MLACommonBackend only
    if name != TRITON_MLA.name and width not in MLA_HEADS:
        why.append("head_size not supported")
    if name == TOKENSPEED_MLA.name:
        # tokenspeed_mla.py (the tokenspeed-mla package is a dependency of the release's
        # wheel): SM10x, an fp8 cache only, DeepSeek-R1's dimensions (qk_nope 128, qk_rope 64,
        # v 128; a 576-wide latent here, v_head_dim not checked)
        if not fp8 or skipped:
            why.append("kv_cache_dtype not supported")
        if width != 576 or nope not in (0, 128):
            why.append("TokenSpeed MLA takes DeepSeek-R1's dimensions only")
    elif not (kv16 or (fp8 and name != FLASH_ATTN_MLA.name)):
        # auto/fp16/bf16, and fp8 but on flashattn_mla.py (16-bit caches only)
        why.append("kv_cache_dtype not supported")
    if name in (FLASHMLA.name, FLASH_ATTN_MLA.name) and family != 9:
        # flashattn_mla.py: SM90 with FlashAttention 3 (flash_attn_supports_mla); flashmla.py:
        # SM9x/SM10x, but dense FlashMLA on Hopper only (ops/flashmla.py
        # is_flashmla_dense_supported)
        why.append("compute capability not supported" if name == FLASH_ATTN_MLA.name
                   or family != 10 else "FlashMLA Dense is only supported on Hopper devices.")
    if name in (FLASHINFER_MLA.name, CUTLASS_MLA.name, TOKENSPEED_MLA.name) and family != 10:
        why.append("compute capability not supported")
    if name == FLASHINFER_MLA.name and nope and nope not in FLASHINFER_MLA_NOPE:
        # flashinfer_mla.py; 0 = a config kvplan read no qk_nope_head_dim from (GGUF), taken
        # as accepted
        why.append("FlashInfer MLA kernel requires qk_nope_head_dim in [64, 128, 192]")
    return why


def _mla_candidates(spec: ModelSpec, family: int, kv: str) -> list[tuple[Backend, bool]]:
    """The dense MLA backends in 0.33.0's priority order for ``family``, each with whether it
    accepts the model, card and KV dtype (block size aside: _mla_reasons). TOKENSPEED_MLA
    takes FLASHINFER_MLA's kernel sizes [32, 64]: whatever it takes FLASHINFER_MLA takes
    first, so it never decides a block, but a --block-size both refuse names it in vLLM's
    warning; CUTLASS_MLA's kernel block is [128]."""
    def ok(b: Backend) -> bool:
        return not _mla_reasons(spec, family, kv, b.name)

    if family == 10:
        return [(FLASHINFER_MLA, ok(FLASHINFER_MLA)), (TOKENSPEED_MLA, ok(TOKENSPEED_MLA)),
                (CUTLASS_MLA, ok(CUTLASS_MLA)), (FLASH_ATTN_MLA, False), (FLASHMLA, False),
                (TRITON_MLA, ok(TRITON_MLA))]
    if family == 12:
        return [(TRITON_MLA, ok(TRITON_MLA))]
    return [(FLASH_ATTN_MLA, ok(FLASH_ATTN_MLA)), (FLASHMLA, ok(FLASHMLA)),
            (FLASHINFER_MLA, False), (TRITON_MLA, ok(TRITON_MLA))]


def _attention_heads(spec: ModelSpec) -> set[int]:
    return {g.head_dim_k for g in spec.groups
            if g.kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED)}


def _dense_candidates(spec: ModelSpec, family: int, kv: str) -> list[tuple[Backend, bool]]:
    """Backends for standard (non-MLA) attention whose kernel blocks differ from the others'
    (what a --block-size each refuses decides); empty where every backend vLLM could pick
    takes any multiple of 16 and so the default 64."""
    heads = _attention_heads(spec)
    if not heads:
        return []
    widest = max(heads)
    kv16, fp8 = kv in _16BIT, kv == "fp8_e4m3"
    # flash_attn_interface.py _is_fa4_supported: compute capability 9.x, 10.x or 11.x (the
    # release ships FlashAttention 4's CuTe sources)
    fa4 = family in (9, 10, 11)
    if spec.model_type in GEMMA4_TYPES and len(heads) > 1 and not (fa4 and widest <= 512):
        # Gemma4Config.verify_and_update_config: heterogeneous head sizes without FA4 force
        # TRITON_ATTN (multiples of 16)
        return [(TRITON_ATTN, True)]
    if family == 9 and widest == 512 and fp8:
        # FlashAttentionBackend._get_sm90_fa4_fp8_kv_block_size: on SM90 with an fp8 cache
        # and a model head size (the widest layer's) of 512, FA3 upgrades to FA4, whose
        # fp8-dequant kernel reads 64-token pages: get_preferred_block_size → 64. With image
        # prefixes TRITON_FLASH_ATTN (Triton for image batches, this FlashAttention for the
        # rest, head sizes 256/512) is tried first; it intersects to the same [64]
        # FLASH_ATTN itself refuses an fp8 cache with image prefixes on SM90
        # (FlashAttentionBackend.supports_combination: "requires Triton")
        fa = Backend("FLASH_ATTN", (64,))
        out = [(fa, not spec.mm_prefix),
               (FLASHINFER, not spec.mm_prefix and heads <= FLASHINFER_HEADS),
               (TRITON_ATTN, True)]
        if spec.mm_prefix and heads <= {256, 512}:
            out.insert(0, (Backend("TRITON_FLASH_ATTN", (64,)), True))
        return out
    if family == 10 and spec.mm_prefix and heads <= {256, 512}:
        # _get_backend_priorities puts TRITON_FLASHINFER first on SM10x for image-prefix
        # models; FLASHINFER itself refuses an image-prefix mask (supports_mm_prefix False)
        ok = kv16 or fp8 or kv == "fp8_e5m2"
        return [(TRITON_FLASHINFER, ok), (TRITON_ATTN, True)]
    return []


#: the card families whose FlashInfer stores an nvfp4 cache (flashinfer.py
#: FlashInferBackend.supports_kv_cache_dtype: the FA2 writer on SM8x, SM90 and SM12x, the
#: trtllm-gen kernels on SM10x; FlashInfer's compute-capability floor is SM80)
NVFP4_FAMILIES = frozenset({8, 9, 10, 12})
#: kvplan's formats in vLLM's NVFP4 layout: nvfp4, and nvfp4_4over6 (its scale search, which
#: only the trtllm-gen kernels of SM10x write: flashinfer.py supports_kv_cache_dtype)
NVFP4 = frozenset({"nvfp4", "nvfp4_4over6"})


def _nvfp4_refusal(spec: ModelSpec, family: int, name: str = "nvfp4") -> str | None:
    """Why vLLM 0.34.0 finds no attention backend for an nvfp4 cache of this (non-MLA)
    model on a card of ``family`` (None: FLASHINFER takes it, 64-token blocks). FLASHINFER is
    the only backend whose supported_kv_cache_dtypes hold nvfp4: FLASH_ATTN, TRITON_ATTN,
    FLEX_ATTENTION and TURBOQUANT list none, and the image-prefix composites
    (TRITON_FLASHINFER, TRITON_FLASH_ATTN) need both halves to take it (composite.py
    supports_kv_cache_dtype)."""
    heads = _attention_heads(spec)
    gemma4_triton = (spec.model_type in GEMMA4_TYPES and len(heads) > 1
                     and not (family in (9, 10, 11) and max(heads) <= 512))
    if gemma4_triton:
        # Gemma4Config.verify_and_update_config sets the backend to TRITON_ATTN, and
        # get_attn_backend_cls raises on a selected backend that refuses the dtype
        return "Gemma 4's heterogeneous heads force TRITON_ATTN there, which stores no nvfp4"
    if family not in NVFP4_FAMILIES:
        return "FLASHINFER, the only backend that stores nvfp4, takes it on SM8x, SM90, SM10x and SM12x only"
    if name != "nvfp4" and family != 10:
        return (f"FLASHINFER stores {name} on SM10x only (its trtllm-gen kernels; the FA2 "
                "writer of SM8x, SM90 and SM12x has no scale search)")
    if spec.mm_prefix:
        # FlashInferBackend keeps AttentionBackend.supports_mm_prefix → False
        return ("FLASHINFER, the only backend that stores nvfp4, refuses the image-prefix "
                "(bidirectional vision) attention of this model")
    if not heads <= FLASHINFER_HEADS:
        return (f"FLASHINFER, the only backend that stores nvfp4, takes head sizes "
                f"{'/'.join(map(str, sorted(FLASHINFER_HEADS)))}, not {max(heads - FLASHINFER_HEADS)}")
    if family != 10 and 64 in heads:
        # FlashInferBackend.supports_combination on SM8x/9x/12x
        return "FLASHINFER's FA2 prefill misreads an nvfp4 cache at head size 64 on this card"
    return None


def check_nvfp4(spec: ModelSpec, gpu: GPU | None, kv: KVFormat) -> None:
    """Refuse, in one line, an NVFP4-layout cache of a model with standard attention layers
    where vLLM finds no backend for it: off NVIDIA (FlashInfer alone stores it; no ROCm backend
    lists it), and where _nvfp4_refusal says why on an NVIDIA card."""
    if kv.name not in NVFP4 or gpu is None or not _attention_heads(spec):
        return
    family = gpu.cuda_family
    why = ("only FlashInfer stores it, on NVIDIA cards" if family is None
           else _nvfp4_refusal(spec, family, kv.name))
    if why is not None:
        raise InputError(f"vLLM finds no attention backend for an {kv.name} KV cache of this "
                         f"model on {gpu.name}: {why} (\"No valid attention backend found\")",
                         field="kv_k")


def check_rocm_only(gpus: tuple[GPU | None, ...], name: str) -> None:
    """UltraQuant's backend is in ROCm's backend list alone (platforms/rocm.py; CUDA's lists
    TURBOQUANT but not ULTRAQUANT): refused on any other card."""
    other = next((g for g in gpus if g is not None and g.vendor != "amd"), None)
    if other is not None:
        raise InputError(f"vLLM stores {name} (ultraquant_4bit) on ROCm only, with its "
                         f"ULTRAQUANT backend; {other.name} has none (\"No valid attention "
                         "backend found\")", field="kv_k")


@dataclass(frozen=True)
class Choice:
    """The backend vLLM picks, and the higher-priority ones only the block size ruled out."""

    backend: Backend
    passed_over: tuple[str, ...] = ()


def select(spec: ModelSpec, gpu: GPU | None, kv: KVFormat,
           block_size: int | None = None) -> Choice | None:
    """The backend vLLM 0.34.0 picks for ``spec`` on ``gpu`` where the block depends on it
    (None: 64-token blocks by default, any multiple of 16 taken). With ``block_size`` given, a
    backend that refuses it gives way to the next; none left is a one-line refusal."""
    if gpu is None or gpu.cuda_family is None:
        check_nvfp4(spec, gpu, kv)
        return None
    if any(g.kind is LayerKind.INDEXER for g in spec.groups):
        return None  # DeepSeek Sparse Attention: vllm.py's DSA rules
    family = gpu.cuda_family
    if any(g.kind is LayerKind.MLA for g in spec.groups):
        candidates = _mla_candidates(spec, family, kv.name)
    elif kv.name in NVFP4 and _attention_heads(spec):
        check_nvfp4(spec, gpu, kv)
        # FLASHINFER: 64 by preference (16/32/64 kernels), any multiple of 16 taken (the
        # None case)
        return None
    else:
        candidates = _dense_candidates(spec, family, kv.name)
    valid = [b for b, ok in candidates if ok]
    if not valid and any(g.kind is LayerKind.MLA for g in spec.groups):
        # every dense MLA backend lists auto/float16/bfloat16 (and all but FLASH_ATTN_MLA
        # fp8 / fp8_e4m3) in supported_kv_cache_dtypes; none lists fp8_e5m2, nvfp4 or
        # fp8_per_token_head, so get_attn_backend_cls finds none
        raise InputError(f"vLLM finds no MLA attention backend for the {kv.name} KV cache on "
                         f"{gpu.name}: its MLA backends store 16-bit or fp8 (e4m3) caches only "
                         "(\"No valid attention backend found\"); use --kv f16, bf16 or "
                         "fp8_e4m3", field="kv_k")
    if not valid:
        return None
    if block_size is None:
        return Choice(valid[0])
    for i, b in enumerate(valid):
        if b.takes(block_size):
            return Choice(b, tuple(x.name for x in valid[:i]))
    names = ", ".join(f"{b.name} {'/'.join(map(str, b.sizes))}" for b in valid)
    raise InputError(f"no vLLM attention backend for this model on {gpu.name} takes "
                     f"--block-size {block_size} (kernel blocks: {names})", field="block_size")


def default_block(spec: ModelSpec, gpu: GPU | None, kv: KVFormat) -> int:
    """The block vLLM settles on without --block-size: the chosen backend's preference."""
    c = select(spec, gpu, kv)
    return c.backend.preferred() if c is not None else DEFAULT_BLOCK


# --attention-backend: a backend the user names (AttentionConfig.backend). vLLM 0.34.0 reads
# the name upper-cased (config/attention.py validate_backend_before: "auto" is its own choice,
# any other name AttentionBackendEnum[name.upper()], an unknown one a ValueError listing the
# members); platforms/cuda.py get_attn_backend_cls then validates that backend alone for every
# attention layer (v1/attention/backend.py validate_configuration) and stops at start-up with
# "Selected backend ... is not valid for this configuration" where a reason is left: no
# falling back down the priority list. Without --block-size the block is the backend's
# get_preferred_block_size(64) (platforms/interface.py update_block_size_for_backend).

#: every member of 0.34.0's AttentionBackendEnum (v1/attention/backends/registry.py)
VLLM_BACKENDS = (
    "FLASH_ATTN", "FLASH_ATTN_DIFFKV", "TRITON_ATTN", "TRITON_ATTN_DIFFKV", "TRITON_FLASH_ATTN",
    "ROCM_ATTN", "ROCM_SEGMENTED_ATTN", "ROCM_AITER_MLA", "ROCM_AITER_TRITON_MLA",
    "ROCM_AITER_FA", "ROCM_AITER_MLA_SPARSE", "XPU_MLA_SPARSE", "TORCH_SDPA", "FLASHINFER",
    "FLASHINFER_TS", "TRITON_FLASHINFER", "FLASHINFER_MLA", "TOKENSPEED_MLA",
    "FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120", "FLASHINFER_MLA_SPARSE_SM90",
    "TRITON_MLA", "CUTLASS_MLA", "FLASHMLA", "FLASHMLA_SPARSE", "FLASHMLA_SPARSE_DSV4",
    "FLASHINFER_MLA_SPARSE_DSV4", "ROCM_FLASHMLA_SPARSE_DSV4", "FLASHMLA_SPARSE_DSV41",
    "FLASHINFER_MLA_SPARSE_DSV41", "ROCM_FLASHMLA_SPARSE_DSV41", "FLASHMLA_MEGA_ATTN_DSV41",
    "B12X", "FLASH_ATTN_MLA", "FLASH_ATTN_MLA_SPARSE", "FLASH_ATTN_MLA_SPARSE_FA4",
    "MINIMAX_M3_SPARSE", "CUTLASS_MSA", "TRITON_MSA", "STEP5_DSA", "KIMI_K3_KV_BALANCED_MLA",
    "NO_ATTENTION", "FLEX_ATTENTION", "HPC_ATTN", "ROCM_AITER_UNIFIED_ATTN", "CPU_ATTN",
    "CPU_MLA", "AMX_MLA", "TURBOQUANT", "ROCM_OCTAVE", "ULTRAQUANT", "CUSTOM")
#: the NVIDIA backends kvplan checks a model against when named (the others are left to
#: vLLM: the plan is its own pick's, with a note)
FORCED_DENSE = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT")
FORCED_MLA = ("FLASHMLA", "FLASH_ATTN_MLA", "FLASHINFER_MLA", "CUTLASS_MLA", "TRITON_MLA",
              "TOKENSPEED_MLA")
#: MiniMax-M3's decode-kernel names (config/attention.py __post_init__: they set
#: minimax_m3_msa_decode_backend and leave the backend to vLLM)
MSA_KERNELS = ("CUTLASS_MSA", "TRITON_MSA")
#: models whose attention kvplan does not check a named backend against: attention sinks
#: (gpt_oss.py, mimo_v2.py, laguna.py: per backend, by card and FlashInfer's kernels) and
#: model hooks that replace or wrap the backend (models/config.py Gemma4Config: per-layer FA
#: versions; mimo_v2.py: its DiffKV backends)
UNCHECKED_TYPES = frozenset({"gpt_oss", "mimo_v2", "mimo_v2_flash", "mimo_v2_omni", "laguna",
                             "granite", "granitemoe"}) | GEMMA4_TYPES
#: attention logit soft-capping (gemma2.py attn_logit_softcapping): FlexAttentionImpl raises
#: "FlexAttention does not support logits soft cap yet."
SOFTCAP_TYPES = frozenset({"gemma2"})
#: kvplan format → how the backends' supported_kv_cache_dtypes name it
_FP8 = frozenset({"fp8_e4m3"})
_PTH = frozenset({"fp8_pth", "int8_pth", "int4_pth"})


def backend_name(text: str | None) -> str | None:
    """The AttentionBackendEnum member ``text`` names (None: auto, vLLM's own pick); an
    unknown name is refused in one line with the members, as vLLM refuses it."""
    if text is None or not text.strip() or text.strip().lower() == "auto":
        return None
    name = text.strip().upper()
    if name not in VLLM_BACKENDS:
        raise InputError(f"vLLM has no attention backend {text.strip()!r} (\"Unknown attention "
                         f"backend\"); it takes auto or one of "
                         f"{', '.join(n for n in VLLM_BACKENDS if n not in ('TORCH_SDPA', 'CUSTOM', 'NO_ATTENTION'))}",
                         field="attention_backend")
    return name


def _fa_reasons(family: int, cc: tuple[int, int], heads: set[int], kv: str, spec: ModelSpec
                ) -> tuple[list[str], str | None]:
    """FLASH_ATTN's reasons, and what kvplan leaves unchecked (a head past 256 on SM10x/11x,
    where FlashAttention's version falls back under FA4's TMEM rule; head 256 on SM10x/11x,
    whose FA4 kernel pages 128 tokens where nothing sends it back to FA2; an image-prefix
    mask, which needs FA4 to resolve)."""
    fa4 = family in (9, 10, 11)
    out = []
    if cc < (8, 0):
        out.append("compute capability not supported")
    if any(h % 8 or h > (512 if fa4 else 256) for h in heads):
        out.append("head_size not supported")
    if family in (10, 11) and any(h >= 256 for h in heads):
        return out, "FlashAttention's version and page for a head of 256 or more on SM10x/SM11x"
    if spec.mm_prefix:
        return out, "FlashAttention 4's image-prefix mask"
    if kv in _FP8:
        # fa_utils.py flash_attn_supports_kv_cache_dtype: FA3 on SM90, FA4 on SM10x (heads of
        # 128 or less there: the TMEM rule sends wider ones to FA2)
        if not (family == 9 or (family == 10 and max(heads) <= 128)):
            out.append("FP8 KV requires FA3 (SM90), equal-d512 FA4 (SM90), or FA4 (SM100).")
    elif kv not in _16BIT:
        out.append("kv_cache_dtype not supported")
    return out, None


def forced(spec: ModelSpec, gpus: tuple[GPU | None, ...], kv: KVFormat, name: str,
           block_size: int | None, *, skipped: bool) -> tuple[Choice | None, str | None]:
    """vLLM 0.34.0 with ``--attention-backend name``: the backend and its kernel blocks
    (Choice), or, where kvplan does not check this backend or model, None and a note saying
    what is left to vLLM (the plan is then vLLM's own pick's). Refused in one line where vLLM
    stops at start-up: the backend refuses a layer (head size, KV dtype, card, MLA or not,
    sparse or not, sliding window, image-prefix mask), the layers kept at the model's dtype
    (``skipped``: --kv-cache-dtype-skip-layers, TurboQuant's boundary layers) have no 16-bit
    path in it, or it takes no --block-size given."""
    if name in MSA_KERNELS:
        if spec.model_type == "minimax_m3":
            return None, (f"--attention-backend {name}: MiniMax-M3's MSA decode kernel "
                          "(minimax_m3_msa_decode_backend); the plan is vLLM's own pick's")
        return None, (f"--attention-backend {name} names MiniMax-M3's decode kernel; the plan "
                      "is vLLM's own pick's")
    mla = any(g.kind is LayerKind.MLA for g in spec.groups)
    sparse = any(g.kind in (LayerKind.INDEXER, LayerKind.INDEX, LayerKind.COMPRESSED)
                 for g in spec.groups)
    heads = _attention_heads(spec)
    cards = [g for g in dict.fromkeys(gpus) if g is not None]
    left = f"--attention-backend {name}: kvplan does not check "
    if name not in FORCED_DENSE + FORCED_MLA:
        return None, (f"{left}this backend against the model and card; the plan is vLLM's "
                      "own pick's (the same blocks where the backend takes 64 tokens)")
    if any(g.cuda_family is None for g in cards):
        return None, (f"{left}a CUDA backend on a card of another vendor (ROCm has its own "
                      "list); the plan is vLLM's own pick's")
    if spec.model_type in UNCHECKED_TYPES or sparse or spec.model_type == "minimax_m3":
        return None, (f"{left}{name} against {spec.model_type}'s attention (sinks, sparse "
                      "attention or a model hook of its own); the plan is vLLM's own pick's")
    if any(g.kind is LayerKind.CROSS for g in spec.groups):
        return None, f"{left}{name} against cross-attention layers; the plan is vLLM's own pick's"
    if mla and heads:
        return None, f"{left}{name} against a model of MLA and standard attention layers"
    reasons: list[str] = []
    unchecked: str | None = None
    kvn = kv.name
    sliding = any(g.kind is LayerKind.SLIDING for g in spec.groups)
    backend: Backend
    for card in cards:
        family = card.cuda_family or 0
        major, minor = card.compute_capability.split(".")[:2]
        cc = (int(major), int(minor))
        why: list[str] = []
        if mla != (name in FORCED_MLA):
            why.append("MLA not supported" if mla else "non-MLA not supported")
        elif mla:
            why = _mla_reasons(spec, family, kvn, name, skipped)
            if sliding and name != TRITON_MLA.name:
                why.append("sliding window not supported")
        elif name == "FLASH_ATTN":
            why, unchecked = _fa_reasons(family, cc, heads, kvn, spec)
        elif name == "FLASHINFER":
            if not (8, 0) <= cc <= (12, 1):
                why.append("compute capability not supported")
            if not heads <= FLASHINFER_HEADS:
                why.append("head_size not supported")
            if spec.mm_prefix:
                why.append("partial multimodal token full attention not supported")
            if kvn in NVFP4:
                nv = _nvfp4_refusal(spec, family, kvn)
                if nv is not None:
                    why.append(nv)
            elif not (kvn in _16BIT or kvn in _FP8 or kvn == "fp8_e5m2"):
                why.append("kv_cache_dtype not supported")
        elif name == "TRITON_ATTN":
            if any(h < 32 for h in heads):
                why.append("head_size not supported")
            if not (kvn in _16BIT or kvn in _FP8 or kvn in ("fp8_e5m2", *_PTH)):
                why.append("kv_cache_dtype not supported")
            elif kvn in ("fp8_e4m3", "fp8_e5m2", "fp8_pth") and cc < (8, 9):
                # triton_attn.py TritonAttentionImpl: native FP8 needs SM89+
                why.append("FP8 KV cache is not supported by the Triton attention backend "
                           "on this card (native FP8 requires SM89+)")
        elif name == "FLEX_ATTENTION":
            if kvn not in _16BIT:
                why.append("kv_cache_dtype not supported")
            if spec.model_type in SOFTCAP_TYPES:
                why.append("FlexAttention does not support logits soft cap yet.")
        elif name == "TURBOQUANT":
            if not kvn.startswith("tq_"):
                why.append("kv_cache_dtype not supported")
            elif skipped:
                # the boundary layers (and --kv-cache-dtype-skip-layers) are selected with
                # kv_cache_dtype auto, which TurboQuantBackend.supports_kv_cache_dtype refuses
                why.append("kv_cache_dtype not supported (the layers kept at the model's "
                           "dtype: TurboQuant's boundary layers or --kv-cache-dtype-skip-layers)")
            if sliding:
                why.append("sliding window not supported")
            if spec.mm_prefix:
                why.append("partial multimodal token full attention not supported")
        if name != "TURBOQUANT" and kvn.startswith("tq_"):
            why.append("kv_cache_dtype not supported (TurboQuant caches run on TURBOQUANT "
                       "only)")
        if why:
            reasons = list(dict.fromkeys(why))
            raise InputError(f"vLLM stops at start-up with --attention-backend {name} on "
                             f"{card.name}: \"Selected backend {name} is not valid for this "
                             f"configuration. Reason: {reasons}\"", field="attention_backend")
    if unchecked is not None:
        return None, f"{left}{unchecked}; the plan is vLLM's own pick's"
    backend = {b.name: b for b in (FLASHINFER, TRITON_ATTN, FLASHMLA, FLASH_ATTN_MLA,
                                    FLASHINFER_MLA, CUTLASS_MLA, TRITON_MLA, TOKENSPEED_MLA,
                                    TURBOQUANT)}.get(name, Backend(name, (16,)))
    if block_size is not None and not backend.takes(block_size):
        raise InputError(f"vLLM stops at start-up with --attention-backend {name}: it takes "
                         f"--block-size in multiples of {'/'.join(map(str, backend.sizes))}, "
                         f"not {block_size} (\"block_size not supported\")", field="block_size")
    return Choice(backend), None
