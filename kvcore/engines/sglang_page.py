"""The attention backend SGLang 0.5.23 picks itself where the command names none, and the KV
page it then runs, read from its argument pipeline (``srt/arg_groups``):

1. the architecture's own overrides (``model_overrides/*.py``, applied in
   handle_model_specific_adjustments) set a backend for some models;
2. where none did, ``model_override_base.get_default_attn_backend``: on SM100 (B200, B300,
   GB200) trtllm_mha for an MHA model, fa4 where K and V rows differ in width
   (``has_asymmetric_kv``), FlashInfer for an MLA model; on Hopper fa3; elsewhere FlashInfer,
   Triton or aiter;
3. the backends' page rules (``overrides.py`` _mla_backend_page_constraints,
   _fa4_page_constraint): trtllm_mha keeps a --page-size of 16, 32, 64 or 128 and takes 64
   otherwise, trtllm_mla keeps 32 or 64 and takes 64 otherwise, fa4 pages an MHA cache in 128
   tokens on SM100 whatever is asked;
4. only then a page of 1 where none was set (``_page_size_default``), so a default plan on
   SM100 runs the backend's page, not 1.

Only SM100's backends change the page; on Hopper, SM120, Ampere/Ada and AMD the default
backends (fa3, FlashInfer, Triton, aiter) run the page asked, 1 by default. The pool rounds
its tokens down to the page and holds one page more (memory_pool.py), and a sliding-window
pool's request cap counts pages, so the page is part of the plan's arithmetic.

DeepSeek Sparse Attention, DeepSeek-V4, MiniMax-M3's sparse pool and the block-scaled caches
(sglang_kv4) fix their own pages and are not resolved here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..gpus import GPU
from ..model import LayerKind, ModelSpec

__all__ = ["BACKENDS", "Resolved", "page_for", "resolve"]

#: the pages trtllm_mha and trtllm_mla take (other sizes become 64)
TRTLLM_MHA_PAGES = (16, 32, 64, 128)
TRTLLM_MLA_PAGES = (32, 64)
#: the page fa4 runs an MHA cache in on SM100
FA4_PAGE = 128
TRTLLM_PAGE = 64

#: model_overrides/deepseek_v2.py: trtllm_mla on SM100 where no backend is given (its
#: non-DSA architectures; DeepseekV2ForCausalLM is not among them)
TRTLLM_MLA_ARCHS = frozenset({
    "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "LongcatFlashForCausalLM", "Dots3NoteForCausalLM",
    # model_overrides/kimi_k3.py: trtllm_mla for prefill and decode on SM100/SM103
    "KimiK3ForConditionalGeneration"})
#: overrides that pick trtllm_mha on SM100 whatever the heads: gpt_oss.py, gemma4.py,
#: llama4.py, exaone.py (whenever the config has a sliding_window_pattern, which transformers
#: fills), olmo2.py (Olmo3 is renamed Olmo2), nemotron_h.py
TRTLLM_MHA_ARCHS = frozenset({
    "GptOssForCausalLM", "Gemma4ForConditionalGeneration", "Gemma4ForCausalLM",
    "Llama4ForConditionalGeneration", "Exaone4ForCausalLM", "ExaoneMoEForCausalLM",
    "ExaoneMoeForCausalLM", "Olmo2ForCausalLM", "Olmo3ForCausalLM", "NemotronHForCausalLM"})
#: overrides that pick fa4 on SM100: mimo_v2.py, and the Step-3.5 names overrides.py tests
FA4_ARCHS = frozenset({"MiMoV2FlashForCausalLM", "Step3p5ForCausalLM",
                       "Step3p7ForConditionalGeneration"})
#: model_overrides/qwen3_5.py: on SM100 it asks get_default_attn_backend and keeps trtllm_mha
#: only where the Mamba state needs no extra buffer or a draft runs; it reads the Mamba cache
#: strategy before it is resolved ("auto"), so with the radix cache on and no draft it picks
#: Triton, and it declares the page itself (64 with trtllm_mha, else 1), over any --page-size
QWEN_HYBRID_ARCHS = frozenset({"Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration",
                               "Qwen3_5MoeForConditionalGeneration"})
#: overrides that pick fa3 on any CUDA card of SM80 or newer off SM100 (exaone.py, for a config
#: with a sliding_window_pattern, which transformers fills; olmo2.py): fa3's factory asserts
#: SM8x or SM90, so SGLang stops at start-up on SM110/SM120 cards without --attention-backend
FA3_OVERRIDE_ARCHS = frozenset({"Exaone4ForCausalLM", "ExaoneMoEForCausalLM",
                                "ExaoneMoeForCausalLM", "Olmo2ForCausalLM", "Olmo3ForCausalLM"})
#: model_overrides/lfm2.py: FlashInfer on SM100
FLASHINFER_ARCHS = frozenset({"Lfm2ForCausalLM", "Lfm2MoeForCausalLM"})

#: --attention-backend's values (arg_groups/choices.py); the aliases, read as SGLang reads them
ALIASES = {"nsa": "dsa", "compressed": "dsv4", "tokenspeed_mla": "cutedsl_mla"}
#: backends for any model on NVIDIA and AMD cards
PORTABLE = frozenset({"triton", "torch_native", "flex_attention"})
#: NVIDIA's (CUDA kernels: FlashAttention, FlashInfer, FlashMLA, TensorRT-LLM's, HPC-Ops)
NVIDIA = frozenset({"fa3", "fa4", "flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla",
                    "trtllm_mha", "hpc_ops"})
AMD = frozenset({"aiter", "wave"})
#: the sparse-attention models' own backends, by the pool kvplan sizes them with
SPARSE = {"dsa": "DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5)", "dsv4": "DeepSeek-V4",
          "qsa": "Qwen sparse attention (Qwen4-exp)"}
#: other platforms' and one model family's backends
ELSEWHERE = frozenset({"ascend", "intel_amx", "intel_xpu", "minicpm_flashattn",
                       "minicpm_flashinfer", "llada2_cfg_flashinfer"})
BACKENDS = frozenset({*PORTABLE, *NVIDIA, *AMD, *SPARSE, *ELSEWHERE, *ALIASES})
#: attention_registry.py: the backends that raise for a model without (or with) MLA
MLA_ONLY = frozenset({"trtllm_mla", "cutedsl_mla", "flashmla"})
MHA_ONLY = frozenset({"trtllm_mha", "hpc_ops"})


@dataclass(frozen=True)
class Resolved:
    """SGLang's default backend on the plan's card and the page it runs."""

    #: the backend SGLang picks (None: not worked out, the card unknown or not SM100)
    backend: str | None
    #: the page the KV pools run
    page: int
    #: why the page is not the one asked (None where it is)
    note: str | None = None


def _asymmetric(spec: ModelSpec) -> bool:
    return any(g.head_dim_k != g.head_dim_v for g in spec.groups
               if g.kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED))


def _mla(spec: ModelSpec) -> bool:
    return any(g.kind is LayerKind.MLA for g in spec.groups)


def _sm100_backend(spec: ModelSpec, page_asked: int | None, *, draft: bool,
                   radix_cache: bool) -> str:
    """The backend SGLang picks on SM100 for ``spec`` where the command names none. ``draft``:
    an EAGLE/NEXTN draft with --speculative-eagle-topk 1 given (kvplan's --mtp command), which
    keeps the trtllm branch only while the page is unset or 1 (is_no_spec_infer_or_topk_one);
    past it FlashInfer."""
    arch = spec.architecture
    if arch in TRTLLM_MLA_ARCHS:
        return "trtllm_mla"
    if arch in TRTLLM_MHA_ARCHS:
        return "trtllm_mha"
    if arch in FA4_ARCHS:
        return "fa4"
    if arch in FLASHINFER_ARCHS:
        return "flashinfer"
    if _mla(spec):
        return "flashinfer"
    if draft and page_asked not in (None, 1):
        generic = "flashinfer"
    else:
        generic = "fa4" if _asymmetric(spec) else "trtllm_mha"
    if arch in QWEN_HYBRID_ARCHS:
        return "trtllm_mha" if generic == "trtllm_mha" and (draft or not radix_cache) else "triton"
    return generic


def _refuse(msg: str) -> InputError:
    return InputError(msg, field="attention_backend")


def check(spec: ModelSpec, gpu: GPU | None, backend: str, *, draft: bool = False,
          sparse: str | None = None) -> str:
    """``backend`` (--attention-backend) as SGLang reads it, or a one-line InputError where
    SGLang refuses it for ``spec`` on ``gpu`` or kvplan does not size it. ``sparse``: the
    sparse pool the plan sizes (dsa, dsv4, minimax), whose backend is its own."""
    word = backend.strip().lower()
    if word not in BACKENDS:
        raise _refuse(f"--attention-backend takes one of SGLang 0.5.23's backends "
                      f"({', '.join(sorted(BACKENDS - set(ALIASES)))}), got {backend!r}")
    word = ALIASES.get(word, word)
    flag = f"--attention-backend {word}"
    if sparse == "minimax":
        raise _refuse(f"{flag}: kvplan sizes MiniMax-M3's sparse pool with the backend its "
                      "override picks (fa3 on Hopper, trtllm_mha on SM100); leave the flag out")
    if sparse in SPARSE and word != sparse:
        raise _refuse(f"{flag}: kvplan sizes {SPARSE[sparse]} with its own backend, {sparse}")
    if word in SPARSE and word != sparse:
        raise _refuse(f"{flag} is the backend of {SPARSE[word]} models, not of this one")
    if word in ELSEWHERE:
        raise _refuse(f"{flag} is another platform's or model family's backend; kvplan plans "
                      "SGLang on NVIDIA and AMD cards with triton, torch_native, "
                      "flex_attention, NVIDIA's or AMD's backends")
    mla = _mla(spec)
    if word in MLA_ONLY and not mla:
        raise _refuse(f"{flag} can only be used with MLA models (SGLang raises at start-up)")
    if word in MHA_ONLY and mla:
        raise _refuse(f"{flag} can only be used with non-MLA models (SGLang raises at "
                      "start-up)")
    if gpu is not None:
        family = gpu.cuda_family if gpu.vendor == "nvidia" else None
        if word in NVIDIA and gpu.vendor != "nvidia":
            raise _refuse(f"{flag} runs on NVIDIA cards, not on {gpu.name}")
        if word in AMD and gpu.vendor != "amd":
            raise _refuse(f"{flag} runs on AMD cards (ROCm), not on {gpu.name}")
        if word == "fa3" and not (family == 9 or (family == 8 and not mla)):
            raise _refuse(f"{flag} runs on SM8x (MHA models) and SM90 cards, not on {gpu.name} "
                          "(SGLang asserts it at start-up)")
        if word == "trtllm_mha" and family not in (9, 10, 12):
            raise _refuse(f"{flag} needs Hopper (SM90), Blackwell SM100 or SM120, not "
                          f"{gpu.name} (SGLang raises at start-up)")
        if word == "hpc_ops" and family != 9:
            raise _refuse(f"{flag} runs on Hopper (SM90) only, not on {gpu.name}")
    if word == "hpc_ops" and draft:
        raise _refuse(f"{flag} does not run speculative decoding (SGLang raises at start-up)")
    return word


def check_default(spec: ModelSpec, gpu: GPU | None) -> None:
    """Refuse, in one line, a plan whose default backend SGLang cannot start on ``gpu``."""
    if (spec.architecture in FA3_OVERRIDE_ARCHS and gpu is not None and gpu.vendor == "nvidia"
            and (gpu.cuda_family or 0) > 10):
        raise InputError(f"SGLang's {spec.architecture} override picks fa3 on {gpu.name} (any "
                         "CUDA card of SM80 or newer but SM100), whose factory asserts SM8x or "
                         "SM90 at start-up: give --attention-backend flashinfer or triton",
                         field="attention_backend")


def page_for(spec: ModelSpec, gpu: GPU | None, backend: str, asked: int) -> int:
    """The page ``backend`` runs with --page-size ``asked`` (1 where not given): the page rules
    of overrides.py, which apply to a backend given as to one SGLang picks."""
    if backend == "trtllm_mha":
        return asked if asked in TRTLLM_MHA_PAGES else TRTLLM_PAGE
    if backend in ("trtllm_mla", "cutedsl_mla"):
        return asked if asked in TRTLLM_MLA_PAGES else TRTLLM_PAGE
    if backend in ("flashmla", "hpc_ops"):
        return TRTLLM_PAGE
    if backend == "fa4" and not _mla(spec) and gpu is not None and gpu.cuda_family == 10:
        return FA4_PAGE
    return asked


def _takes(backend: str) -> str:
    return {"trtllm_mha": "16, 32, 64 or 128 tokens", "trtllm_mla": "32 or 64 tokens",
            "cutedsl_mla": "32 or 64 tokens", "flashmla": "64 tokens", "hpc_ops": "64 tokens",
            "fa4": "128 tokens for an MHA cache on SM100"}.get(backend, "the size asked")


def _resolved(backend: str, page: int, page_asked: int | None, lead: str) -> Resolved:
    """``backend`` at ``page``, with a note (``lead`` saying why the page) where the page is
    not the one asked."""
    if page == (page_asked or 1):
        return Resolved(backend, page)
    given = (f"--page-size {page_asked} becomes {page}" if page_asked
             else f"pages of {page} tokens, not 1")
    return Resolved(backend, page, f"{lead}: {given}; the pool rounds its tokens down to the "
                    "page and holds one page more")


def resolve(spec: ModelSpec, gpu: GPU | None, page_asked: int | None, *, draft: bool = False,
            radix_cache: bool = True, backend: str | None = None) -> Resolved:
    """The page SGLang runs ``spec``'s KV pools in on ``gpu`` with --page-size ``page_asked``
    (None: not given) and --attention-backend ``backend`` (None: not given; else checked)."""
    asked = page_asked or 1
    if backend is not None:
        return _resolved(backend, page_for(spec, gpu, backend, asked), page_asked,
                         f"SGLang's {backend} backend runs pages of {_takes(backend)}")
    if gpu is None or gpu.cuda_family != 10:
        return Resolved(None, asked)
    backend = _sm100_backend(spec, page_asked, draft=draft, radix_cache=radix_cache)
    if spec.architecture in QWEN_HYBRID_ARCHS:
        # the override declares the page with the backend, over any --page-size
        page = TRTLLM_PAGE if backend == "trtllm_mha" else 1
    else:
        page = page_for(spec, gpu, backend, asked)
    why = ("with the page its Qwen3-Next/Qwen3.5 override declares" if backend == "triton"
           else f"which runs pages of {_takes(backend)}")
    return _resolved(backend, page, page_asked, f"SGLang's default attention backend for this "
                     f"model on SM100 is {backend}, {why}")
