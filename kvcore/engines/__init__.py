"""Engine profiles: what vLLM, llama.cpp, Ollama, SGLang and TensorRT-LLM would allocate and
print.

``engine_plan(request)`` answers for one engine; ``ENGINES`` lists them. ``raw`` is physics
only (weights + exact cache + a runtime estimate against each card), for any parallel layout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from ..errors import InputError, UnknownNameError
from ..gpus import GPU
from ..hf import GLM5_NEXT_TYPES, QWEN4_EXP_TYPES
from ..model import LayerKind, ModelSpec
from ..parallel import Split, stage_layers
from . import llamacpp, ollama, raw, registry, sglang, trtllm, vllm
from .base import (
    CPU_MOE,
    EngineReport,
    EngineRequest,
    EngineSettings,
    UnsupportedFormat,
    has_kind,
    parse_tensor_split,
)

__all__ = ["CPU_MOE", "ENGINES", "ENGINE_TITLES", "GGML_ENGINES", "EngineReport", "EngineRequest", "EngineSettings", "UnsupportedFormat",
           "engine_plan", "engine_names", "engines_on", "parse_tensor_split", "platform_refusal", "stage_split", "supported_formats"]

ENGINES: dict[str, Callable[[EngineRequest], EngineReport]] = {
    "raw": raw.plan,
    "vllm": vllm.plan,
    "llama.cpp": llamacpp.plan,
    # Ollama's llama-server, planned by llama.cpp's rules through engine_plan
    "ollama": lambda req: ollama.plan(req, lambda r: engine_plan("llama.cpp", r)),
    "sglang": sglang.plan,
    "trtllm": trtllm.plan,
}
#: each engine as its project spells it, for messages
ENGINE_TITLES = {"raw": "raw", "vllm": "vLLM", "llama.cpp": "llama.cpp", "ollama": "Ollama",
                 "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
#: engines that run llama.cpp: its layer split over cards, its GGUF weights and formats
GGML_ENGINES = ("llama.cpp", "ollama")
_ALIASES = {"llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "llama_cpp": "llama.cpp",
            "llama-server": "llama.cpp", "tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm",
            "trt-llm": "trtllm", "trt": "trtllm"}
_FORMATS = {"raw": None, "vllm": vllm.FORMATS, "llama.cpp": llamacpp.FORMATS,
            "ollama": llamacpp.FORMATS,
            "sglang": sglang.FORMATS, "trtllm": trtllm.FORMATS}


def engine_names() -> list[str]:
    return list(ENGINES)


#: servers kvplan has no engine of, and what is nearest (the message for each)
_OTHER_SERVERS = {
    **dict.fromkeys(("lmstudio", "lm-studio", "lm_studio", "lm studio"),
                    "kvplan has no LM Studio engine: it runs GGUF models with llama.cpp, so "
                    "--engine llama.cpp plans them (its context length is --ctx; its MLX "
                    "models on a Mac are not planned)"),
}


def canonical(name: str) -> str:
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key in _OTHER_SERVERS:
        raise InputError(_OTHER_SERVERS[key], field="engine")
    if key not in ENGINES:
        raise UnknownNameError("engine", str(name), {**{e: e for e in ENGINES}, **_ALIASES},
                              field="engine", choices=engine_names())
    return key


def engine_flags(fmt: str) -> dict[str, str]:
    """The engines that store kvplan's format ``fmt``, each with the value its KV-cache flag
    takes for it (vLLM's and SGLang's --kv-cache-dtype, llama.cpp's --cache-type-k/-v,
    Ollama's OLLAMA_KV_CACHE_TYPE, TensorRT-LLM's kv_cache_config dtype)."""
    return {engine: table[fmt] for engine, table in _FORMATS.items()
            if table is not None and fmt in table}


def supported_formats(engine: str) -> list[str] | None:
    """kvplan format names an engine can store (None: every format)."""
    table = _FORMATS[canonical(engine)]
    return None if table is None else sorted(table)


def stage_split(engine: str) -> Split:
    """How ``engine`` splits the decoder's layers over pipeline stages (vLLM's rule unless the
    engine has its own: llama.cpp, SGLang and TensorRT-LLM each place the remainder
    differently)."""
    return {"llama.cpp": llamacpp.STAGE_SPLIT, "ollama": llamacpp.STAGE_SPLIT,
            "sglang": sglang.STAGE_SPLIT,
            "trtllm": trtllm.STAGE_SPLIT}.get(canonical(engine), stage_layers)


#: kinds whose allocation an engine profile may not model: it refuses them, raw sizes them
_UNMODELLED = (LayerKind.COMPRESSED, LayerKind.INDEX, LayerKind.COMPRESSOR)


#: what keeps an engine that runs DeepSeek-V4 from being sized: one clause each, cited in
#: docs/ENGINES.md §7
_DSV4_MISSING = {
    "trtllm": ("TensorRT-LLM runs it with DeepseekV4CacheManager "
               "(attention_backend/sparse/deepseek_v4/cache_manager.py @10ce7685), a "
               "KVCacheManagerV2 whose per-role pools share the device quota by that "
               "manager's storage solver over a typical step (one context request and "
               "max_batch_size - 1 generation requests) and warm-up constraints, rebalanced "
               "while serving (kv_cache_manager_v2.py @0004396), which kvplan does not model"),
}


#: what keeps an engine that runs MiniMax-M3 from being sized (docs/ENGINES.md L8)
_MINIMAX_M3_MISSING = {
    "llama.cpp": ("llama.cpp runs it as LLM_ARCH_MINIMAX_M3 and keeps the indexer keys as an "
                  "extra f32 row a cell in the main KV cache (hparams.indexer_kv, "
                  "src/models/minimax-m3.cpp @1ded4cd3), but n_embd_k_idx(il), which sets "
                  "that row's width and layers, was not found in a revision to cite"),
}


#: the GPU makers whose cards each engine's GPU build runs on (llama.cpp and raw: any; a card
#: given as a size has no maker and is taken as it is): vLLM on CUDA, ROCm and Intel XPU (on
#: macOS it builds for the CPU only), SGLang on CUDA, ROCm and Intel XPU, TensorRT-LLM on CUDA
_VENDORS = {"vllm": ("nvidia", "amd", "intel"), "sglang": ("nvidia", "amd", "intel"),
            "trtllm": ("nvidia",)}
_MAKERS = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel", "apple": "Apple silicon"}
#: how the engine does run there, where it does at all
_ELSEWHERE = {("vllm", "apple"): " (on a Mac it runs on the CPU, or through the vllm-metal "
                                 "plugin on MLX, whose memory rules kvplan does not model)"}


#: the lowest CUDA compute capability each engine's CUDA build has kernels for (the others:
#: any a card of the catalog has): vLLM's wheels, built with CUDA 12.8 and later, from 7.5
#: (CMakeLists.txt CUDA_SUPPORTED_ARCHS; its install guide: "compute capability 7.5 or
#: higher"), SGLang's sgl-kernel for sm_80, sm_89, sm_90 and later only
#: (sgl-kernel/CMakeLists.txt), TensorRT-LLM from SM80 (cuda_configuration.cmake stops at
#: "Unsupported CUDA architecture" below it); docs/ENGINES.md gives the revisions
_CUDA_FLOOR = {"vllm": "7.5", "sglang": "8.0", "trtllm": "8.0"}
#: what each of those builds is, for the refusal
_CUDA_BUILD = {"vllm": "its CUDA wheels have kernels", "sglang": "its kernels (sgl-kernel) are "
               "built", "trtllm": "it builds"}
#: the AMD chips (LLVM targets) each engine's ROCm build runs on: vLLM's ROCm images
#: (docker/Dockerfile.rocm_base PYTORCH_ROCM_ARCH, the targets its install guide lists),
#: SGLang's sgl-kernel (setup_rocm.py and CMakeLists_rocm.txt accept gfx942 and gfx950 only)
_ROCM_TARGETS = {"vllm": ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1150",
                          "gfx1151", "gfx1200", "gfx1201"),
                 "sglang": ("gfx942", "gfx950")}


#: the engines that do not run on Intel's Gaudi accelerators themselves (an HPU, not one of
#: Intel's XPU GPUs): vLLM only through the vllm-gaudi plugin, llama.cpp not at all
_ON_GAUDI = {
    "vllm": ("itself: Gaudi runs it through the vllm-gaudi plugin (vllm_gaudi/platform.py "
             "HpuPlatform: 128-token blocks, HPU graphs, fp8_inc caches only), whose memory "
             "rules kvplan does not model"),
    "llama.cpp": ("(ggml has no Gaudi backend: its builds are for CUDA, HIP, SYCL, Vulkan, "
                  "Metal and the CPU)"),
}


def _gaudi(gpu: GPU) -> bool:
    return gpu.architecture.startswith("Gaudi")


def _capability(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


def platform_refusal(engine: str, gpu: GPU) -> str | None:
    """Why ``engine``'s GPU build does not run on ``gpu`` (its maker's cards are not among
    those it builds for, its CUDA build has no kernels for the card's compute capability,
    its ROCm build not for the card's chip, it has no build for Intel's Gaudi), None where it
    runs there or the catalog cannot tell (a card given as a size)."""
    name = canonical(engine)
    # Ollama's server is llama.cpp's
    server = "llama.cpp" if name == "ollama" else name
    if _gaudi(gpu) and server in _ON_GAUDI:
        return f"{ENGINE_TITLES[name]} does not run on {gpu.name} {_ON_GAUDI[server]}"
    makers = _VENDORS.get(name, ())
    if makers and gpu.vendor not in (*makers, "custom", ""):
        runs = " and ".join(", ".join(_MAKERS[m] for m in makers).rsplit(", ", 1))
        aside = _ELSEWHERE.get((name, gpu.vendor), "")
        return (f"{ENGINE_TITLES[name]} does not run on {gpu.name}: its GPU build runs on "
                f"{runs} cards{aside}")
    floor = _CUDA_FLOOR.get(name)
    if (floor and gpu.vendor == "nvidia" and gpu.compute_capability
            and _capability(gpu.compute_capability) < _capability(floor)):
        return (f"{ENGINE_TITLES[name]} does not run on {gpu.name} (compute capability "
                f"{gpu.compute_capability}): {_CUDA_BUILD[name]} for compute capability "
                f"{floor} and up")
    targets = _ROCM_TARGETS.get(name)
    if targets and gpu.vendor == "amd" and gpu.llvm_target and gpu.llvm_target not in targets:
        chips = " and ".join(", ".join(targets).rsplit(", ", 1))
        return (f"{ENGINE_TITLES[name]} does not run on {gpu.name} ({gpu.llvm_target}): its "
                f"ROCm build runs on {chips} only")
    return None


def engines_on(gpu: GPU) -> list[str]:
    """The engines (not raw, which sizes any card) whose GPU builds run on ``gpu``."""
    return [e for e in ENGINES if e != "raw" and platform_refusal(e, gpu) is None]


def check_platform(name: str, gpus: tuple[GPU, ...]) -> None:
    """Refuse a plan for an engine on a card its GPU build does not run on: its rules would
    size a pool it cannot allocate."""
    for gpu in gpus:
        why = platform_refusal(name, gpu)
        if why is not None:
            # llama.cpp runs on every GPU but Gaudi's
            other = "raw" if _gaudi(gpu) else "llama.cpp or raw"
            raise InputError(f"{why}; plan it with --engine {other}", field="engine")


#: what keeps the engines that run Qwen4-Exp (Qwen3.8-Flash-Next) from being sized: each
#: keeps QSA's three caches a layer (K/V, pooled index keys, the unpooled keys of the block
#: not yet complete) beside the Gated DeltaNet and PLE states, in pools kvplan has not read
_QWEN4_EXP_MISSING = {
    "vllm": ("vLLM runs it (vllm/models/qwen4_exp) with a FullAttentionSpec, an "
             "MLAAttentionSpec of one index key per 4 tokens and a CircularBufferSpec ring a "
             "QSA layer beside two MambaSpecs, whose pages its hybrid allocator unifies"),
    "sglang": "SGLang runs it (models/qwen4_exp.py, layers/attention/qsa)",
    "llama.cpp": "llama.cpp runs it (src/models/qwen4exp.cpp)",
    "trtllm": "TensorRT-LLM runs it (_torch/models/modeling_qwen4_exp.py)",
}


#: what keeps the engines that run GLM-5.3-Flash (Glm5NextForConditionalGeneration) from
#: being sized: beside the NoPE MLA latent, its indexer keeps one key a pool of index_kpool
#: tokens and the pool not yet complete, next to the Kimi Delta Attention states
_GLM5_NEXT_MISSING = {
    "vllm": ("vLLM 0.34 runs it (vllm/models/glm5next) with a Glm5NextIndexerCache of one "
             "132-byte row a pool, a Glm5NextTailCache ring a request and KDA MambaSpecs, "
             "whose pages its hybrid allocator aligns to one block size and packs "
             "(v1/core/kv_cache_planning.py), which kvplan has not followed to the block"),
    "llama.cpp": ("the llama.cpp converter table kvplan reads (@00bdaa10) registers no "
                  "GLM-5.3-Flash class"),
    "trtllm": ("TensorRT-LLM's model index kvplan reads (@065ff9e9) registers no "
               "GLM-5.3-Flash class"),
}


#: architectures kvplan sizes raw only: an engine that runs them, if any does, keeps a state
#: whose allocation was not read (model_type: what it is)
_RAW_ONLY = {"zaya": "ZAYA's Compressed Convolutional Attention state (its q/k convolution "
                     "and delayed V) beside the KV cache",
             **dict.fromkeys(("mistral_large4", "mistral_large4_text"),
                             "Mistral-Large-4's MLA with NoPE layers and the lightning indexer "
                             "(its engines' pools were not read)"),
             "axk2": "A.X-K2's MLA with the lightning indexer and its gated queries and norms "
                     "(its engines' pools were not read)",
             "hy_v4": "Hy4's MLA with indexers shared between layers and its hyper-connections "
                      "(its engines' pools were not read)",
             **dict.fromkeys(("bailing_hybrid", "bailing_moe_linear"),
                             "the Bailing hybrids' linear-attention state (Kimi Delta Attention "
                             "or lightning) beside their MLA or grouped-query layers (their "
                             "engines' pools were not read)"),
             **dict.fromkeys(("inkling2", "inkling2_text"),
                             "Inkling-2's short-convolution state (its K, V and residual "
                             "convolutions) beside the KV cache")}


def _raw_only(name: str, spec: ModelSpec) -> str | None:
    """What keeps engine ``name`` from sizing a model kvplan sizes raw only, or None where it sizes
    it. llama.cpp runs Ling-3.0 (its Kimi Delta Attention hybrid) as bailingmoe3, a hybrid
    memory of K-only MLA latents and f32 KDA states like Kimi-Linear's
    (src/models/bailingmoe3.cpp build_inp_mem_hybrid_k), and so does vLLM
    (BailingMoeV3ForCausalLM), which runs Ling-2.5/2.6 too, and ZAYA, and SGLang (Ling-2.5/2.6
    and 3.0); llama.cpp runs Hy4 as
    hy_v4, a DSA cache like GLM-5's: the K-only latent in every layer, the indexer keys
    (-ctk type) in the layers indexer_types lists "full" (src/llama-model.cpp create_memory,
    filter_lid is_indexer_full), its MTP layers dropped by the converter."""
    what = _RAW_ONLY.get(spec.model_type)
    if name == "sglang" and spec.model_type == "zaya":
        # SGLang 0.5.23 registers its own ZayaConfig over transformers' (configs/zaya.py
        # register_zaya_config) and models/zaya.py builds attention on the even layers and MoE
        # blocks on the odd (_layer_class), its CCA state a prev_hs of hidden_size
        return (f"{what}: SGLang 0.5.23 builds Zyphra's ZAYA1-base layout (configs/zaya.py, "
                "models/zaya.py: Compressed Convolutional Attention on the even layers, MoE "
                "blocks on the odd, a state of the previous hidden state), not this config's "
                "layers of attention and experts each")
    ling3 = spec.model_type == "bailing_hybrid" and spec.kda
    if name == "llama.cpp" and (ling3 or spec.model_type in ("hy_v4", "axk2")):
        # and A.X-K2 as axk2 (src/models/axk2.cpp @04fbdf3a: build_attn_inp_k_dsa, an indexer
        # in every layer), GLM-5's DSA cache
        return None
    if (name == "sglang" and spec.model_type == "bailing_hybrid" and not spec.kda
            and spec.architecture == "BailingMoeV2_5ForCausalLM"):
        # SGLang 0.5.23's BailingHybridConfig without use_kda: a lightning Mamba2StateShape
        # (heads × head_dim², no convolution, f32) beside the MLA pool of the full layers,
        # extra_buffer slots (_MAMBA_EXTRA_BUFFER_ARCHS); its breakable prefill graph stays
        # (uses_kda_attention is false)
        return None
    if name == "sglang" and ling3 and spec.architecture == "BailingMoeV3ForCausalLM":
        # and with use_kda (short_conv_kernel_size set): Kimi-Linear's KimiLinearStateShape
        # (num_attention_heads × head_dim, three convolutions of kernel − 1 columns in bf16, a
        # heads × head_dim² state in f32) in KimiLinearCacheParams, the MLA pool of the full
        # layers at kv_lora_rank + qk_rope_head_dim (model_config.py), extra_buffer slots
        # (_MAMBA_RADIX_CACHE_ARCHS and _MAMBA_EXTRA_BUFFER_ARCHS list it); the breakable
        # prefill graph is dropped only where the config names its KDA layers
        # (ModelSpec.kda_declared)
        return None
    if name == "sglang" and spec.model_type == "hy_v4":
        # SGLang 0.5.23 models/hunyuan_v4.py: HYV4Attention is a DeepseekV2AttentionMLA, and
        # HYV4ForCausalLM is on configs/model_config.py's DSA list: GLM-5.2's DSA pool (the
        # latent in every layer, the indexer key in those indexer_types marks "full"; its
        # NextN draft is refused, _DRAFT_UNREAD)
        return None
    if name == "vllm" and spec.model_type == "hy_v4":
        # HYV4ForCausalLM (vLLM 0.34.0 models/hy_v4): the MLA latent through a sink-capable
        # FLASHMLA_SPARSE subclass and DeepseekV32IndexerCache rows in the layers whose
        # indexer_types say "full", GLM-5.2's layout (its MTP draft refused, _DRAFT_UNREAD)
        return None
    if name == "vllm" and spec.model_type == "zaya":
        # ZayaForCausalLM (vLLM 0.34.0 models/zaya.py): each layer's KV cache beside a
        # SHORT_CONV MambaSpec of the CCA state, both whole on every rank (vllm.py)
        return None
    if name == "vllm" and (ling3 or spec.architecture == "BailingMoeV2_5ForCausalLM"):
        # BailingMoeV3ForCausalLM (models/bailing_moe_v3.py): MLA layers and KDA states from
        # kda_state_shape / kda_state_dtype, Kimi-Linear's; BailingMoeV25ForCausalLM
        # (bailing_moe_linear.py): MLA layers and a lightning state of heads/tp × head_dim ×
        # head_dim in the model dtype (linear_attention_state_shape / _dtype)
        return None
    return what


#: (engine, model_type) whose MTP draft's cache kvplan has not read, with the draft's class:
#: vLLM 0.34's models/hy_v4/nvidia/mtp.py (how its block's indexer keys are cached) and
#: SGLang 0.5.23's models/hunyuan_v4_nextn.py (how its draft is pooled)
_DRAFT_UNREAD = {("vllm", "hy_v4"): "HYV4MTP", ("sglang", "hy_v4"): "HYV4ForCausalLMNextN",
                 **dict.fromkeys((("sglang", t) for t in GLM5_NEXT_TYPES),
                                 "Glm5NextForConditionalGenerationNextN")}


def _refuse_unread_draft(name: str, request: EngineRequest) -> None:
    """Refuse, in one line, speculative decoding with a draft whose cache was not read."""
    draft = _DRAFT_UNREAD.get((name, request.spec.model_type))
    if draft is None or not (request.cache.mtp or request.settings.speculative_tokens):
        return
    raise InputError(f"kvplan has not read how {ENGINE_TITLES[name]} caches this model's draft "
                     f"({draft}): plan it without --mtp",
                     field="mtp" if request.cache.mtp else "speculative_tokens")


class _Scheme(NamedTuple):
    """A model family whose _UNMODELLED caches only some engines size: what the caches are,
    the engines that size them and, for the others, what keeps them from being sized."""

    caches: str
    sized_by: frozenset[str]
    missing: dict[str, str]


def _scheme(spec: ModelSpec) -> _Scheme:
    if spec.model_type.startswith("minimax"):
        # SGLang's MiniMaxSparseKVPool (sglang.py), vLLM's uniform-type group (vllm.py)
        return _Scheme("MiniMax-M3's block-sparse attention index cache "
                       "(sparse_attention_config)", frozenset({"sglang", "vllm"}),
                       _MINIMAX_M3_MISSING)
    if spec.model_type in QWEN4_EXP_TYPES:
        return _Scheme("Qwen4-Exp's QSA caches (pooled index keys, the unpooled keys' ring) "
                       "and PLE state", frozenset(), _QWEN4_EXP_MISSING)
    if spec.model_type in GLM5_NEXT_TYPES:
        # SGLang's DSA pool with pooled index keys (sglang.py)
        return _Scheme("GLM-5.3-Flash's pooled DSA index keys (a key a pool of tokens, the "
                       "unpooled tail) beside Kimi Delta Attention states",
                       frozenset({"sglang"}), _GLM5_NEXT_MISSING)
    # DeepSeek-V4: SGLang's DSV4PoolConfigurator, vLLM's packed KV cache groups, llama.cpp's
    # llama_kv_cache_dsv4
    return _Scheme("DeepSeek-V4's compressed sparse attention (compressed and indexer pools, "
                   "compressor state)", frozenset({"sglang", "vllm", "llama.cpp"}),
                   _DSV4_MISSING)


def engine_plan(engine: str, request: EngineRequest) -> EngineReport:
    name = canonical(engine)
    if name == "ollama":
        # llama.cpp's refusals and notes come with the server Ollama starts
        return ENGINES[name](request)
    check_platform(name, request.gpus)
    raw_only = _raw_only(name, request.spec)
    if name != "raw" and raw_only is not None:
        raise InputError(f"kvplan does not size {name}'s allocation of {raw_only}; --engine "
                         "raw sizes the cache itself", field="engine")
    scheme = _scheme(request.spec)
    if (name != "raw" and has_kind(request.spec, *_UNMODELLED)
            and name not in scheme.sized_by):
        why = f": {scheme.missing[name]}" if name in scheme.missing else ""
        raise InputError(f"kvplan does not model {name}'s allocation of {scheme.caches} yet"
                         f"{why}; --engine raw sizes the cache itself", field="engine")
    _refuse_unread_draft(name, request)
    report = ENGINES[name](request)
    # the engine's own refusals, more specific, come first; then whether it loads the class
    how, notes = _load_notes(name, request.spec)
    if how is registry.Load.REMOTE_CODE and report.command:
        # the checkpoint's own modeling code loads only when the launch trusts it
        report = replace(report, command=f"{report.command} --trust-remote-code")
    return replace(report, notes=(*notes, *report.notes)) if notes else report


def _load_notes(name: str, spec: ModelSpec) -> tuple[registry.Load | None, list[str]]:
    """Refuse a model whose architecture engine ``name`` cannot load (registry.require); else
    how it loads it (None: not looked up) and the notes on how it loads one it has no class
    of its own for. vLLM and SGLang fall back to their Transformers backend (the only load
    from remote code); TensorRT-LLM's PyTorch backend has none; llama.cpp's converter table
    trails its master, so a class missing there is noted, not refused. A class vLLM removed
    has its own note (vllm.PREVIOUSLY_SUPPORTED)."""
    if name == "raw" or (name == "vllm" and spec.architecture in vllm.PREVIOUSLY_SUPPORTED):
        return None, []
    label = "TensorRT-LLM's PyTorch backend" if name == "trtllm" else ENGINE_TITLES[name]
    return registry.require(name, label, spec, fallback=name in ("vllm", "sglang"),
                            strict=name != "llama.cpp")
