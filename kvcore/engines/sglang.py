"""SGLang allocation rules.

Sources read (sgl-project/sglang): ``python/sglang/srt/arg_groups/memory_hook.py`` of release
0.5.23 (``handle_gpu_memory_settings``: ``mem_fraction_static`` from reserved memory, at least
10 GiB reserved on cards over 60 GB, the decode and prefill CUDA-graph reserves; upstream main
@031ed82d has the same rule less 0.5.22's decode cap) with ``arg_groups/cuda_graph_hook.py``,
``python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py``
(``profile_max_num_token``: rest = free after weights − free before loading × (1 −
mem_fraction_static); tokens = rest // cell size, rounded down to the page; cell = KV heads per
attention-TP rank × (K + V head dims) × layers × dtype bytes, MLA one latent), and
``mem_cache/memory_pool.py`` (each K and V buffer holds tokens + page_size rows; sizes printed in
GB of 2^30 bytes). DeepSeek Sparse Attention: ``NSATokenToKVPool`` / ``DSATokenToKVPool`` (an
MLA pool plus a 132-byte fp8 indexer key a token in every layer, 64-token pages),
``calculate_mla_kv_cache_dim`` (the latent row) and the DSA defaults of ``server_args.py`` /
``arg_groups/overrides.py`` (page 64, ``auto`` → bfloat16 below SM100).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, NamedTuple

from ..draft import draft_row_bytes
from ..errors import InputError
from ..formats import KVFormat
from ..gpus import GPU
from ..hf import GLM5_NEXT_TYPES, MINIMAX_M3_TYPES
from ..kv import CacheOptions, in_format, kv_row_bytes
from ..model import LayerKind, ModelSpec, Module
from ..parallel import sglang_stage_layers
from ..plan import largest
from ..weights import module_bytes
from . import sglang_attn_dp as attn_dp
from .base import (
    EngineReport,
    EngineRequest,
    GiB,
    MiB,
    RankShare,
    check_budget,
    fp8_kv_checkpoint,
    has_kind,
    kind_layers,
    model_ref,
    need_gpu,
    own_draft_format,
    parallel_flags,
    past_derived,
    rank_weights,
    refuse_architecture,
    refuse_layout,
    refuse_nas_layout,
    single_format,
)
from .sglang_kv4 import BLOCK_SCALED
from .sglang_kv4 import layout as kv4_layout
from .sglang_kv4 import scale_rows as kv4_scales
from .sglang_kv4 import workspace as kv4_workspace
from .sglang_lora import for_sglang, sglang_lora_bytes
from .sglang_mtp import draft_line as mtp_draft_line
from .sglang_mtp import notes as mtp_notes
from .sglang_mtp import pool_line
from .sglang_mtp import resolve as mtp_resolve
from .sglang_mtp import target_cell as mtp_cell
from .sglang_page import check as check_backend
from .sglang_page import check_default as check_default_backend
from .sglang_page import resolve as resolve_page
from .vllm_offload import offload_extra, offload_note, offload_shares, refuse_compressed

NAME = "sglang"
#: architectures SGLang cannot load, by model_type: no module in python/sglang/srt/models
#: registers them as an EntryClass (the MiniMax-Text-01/M1 ports, PRs #8124 and #11466, were
#: closed unmerged), and their remote code's lightning attention is not one the Transformers
#: fallback can page
UNSUPPORTED = {
    "minimax_m1": ("MiniMaxM1ForCausalLM",
                   "no SGLang model implements lightning attention; vllm==0.23.0 or llama.cpp "
                   "runs it"),
    "minimax_text_01": ("MiniMaxText01ForCausalLM",
                        "no SGLang model implements lightning attention; vllm==0.23.0 or "
                        "llama.cpp runs it"),
    # python/sglang/srt/models has no zamba2.py
    "zamba2": ("Zamba2ForCausalLM", "no SGLang model implements Zamba2; vLLM runs it"),
    "rwkv7": ("RWKV7ForCausalLM", "no SGLang model implements RWKV; llama.cpp runs it"),
    # nor ouro.py
    "ouro": ("OuroForCausalLM", "no SGLang model implements Ouro's looped layers; "
                                "vllm==0.26.0 runs it"),
}
#: models whose pool layout in SGLang could not be read from its source, by model_type.
#: Gemma 4 is sized only as Gemma4ForConditionalGeneration (GEMMA4_ARCH): SGLang's config loader
#: (utils/hf_transformers/config.py get_config @9b6f8f1f) rewrites a ``gemma4`` config's
#: text_config so the full-attention pool reads global_head_dim × num_global_key_value_heads
#: and the swa_* fields the sliding geometry; a bare ``gemma4_text`` config is not rewritten
#: there, and the model (models/gemma4_causal.py) builds its full layers from head_dim, so
#: what it would load is not established. Step-3.7 as Step3p7ForConditionalGeneration (the
#: VLM wrapper of models/step3p7.py, hybrid SWA in configs/model_config.py
#: is_hybrid_swa_model): its Step3p7Config builds the decoder from text_config and falls back
#: to Step3p5Config's defaults where a config has none, which kvplan does not reproduce
LAYOUT_UNKNOWN = {
    # no module of python/sglang/srt/models registers LongcatFlashNgramForCausalLM in the
    # source read; its remote code would go to the Transformers fallback
    "longcat_flash_ngram": "LongCat-Flash-Lite's two MLA attentions a layer and n-gram "
                           "embedding (no SGLang model of its own was found in the source "
                           "read)",
    "step3p7": "Step-3.7's decoder geometry under Step3p7ForConditionalGeneration "
               "(configs/step3p7.py Step3p7Config reads it from text_config, defaulting to "
               "Step3p5Config)",
    # python/sglang/srt/models of 0.5.23 has lfm2.py, lfm2_moe.py, lfm2_vl.py, no lfm3
    "lfm3": "LFM3's convolution and sliding layers (no SGLang model of its own in 0.5.23; "
            "vLLM 0.34 runs it)",
}
#: by architecture: KimiK3LinearForCausalLM (the text-only entry of models/kimi_k3.py) is on
#: neither arg_groups/overrides.py list, _MAMBA_RADIX_CACHE_ARCHS nor
#: _MAMBA_EXTRA_BUFFER_ARCHS, so its mamba_radix_cache_strategy is left unresolved there
LAYOUT_UNKNOWN_ARCH = {
    "KimiK3LinearForCausalLM": "how many KDA state slots SGLang 0.5.23 gives a "
                               "KimiK3LinearForCausalLM request (arg_groups/overrides.py "
                               "lists only KimiK3ForConditionalGeneration for extra_buffer)",
}
#: architectures SGLang 0.5.23 cannot load, by config architecture: no module in
#: python/sglang/srt/models registers them as an EntryClass, and without an auto_map the
#: Transformers fallback (model_loader/utils.py resolve_transformers_arch) raises
UNREGISTERED_ARCHS = {
    "Step3p7FlashForCausalLM": ("models/step3p7.py registers Step3p7ForConditionalGeneration "
                                "only (and models/step3p5.py Step3p5ForCausalLM); no module "
                                "of sglang 0.5.23 registers Step3p7FlashForCausalLM, and with "
                                "no auto_map in the config model_loader/utils.py "
                                "resolve_transformers_arch raises 'Cannot find model module'"),
    "MiniMaxM3ForCausalLM": ("models/minimax_m3.py registers MiniMaxM3SparseForCausalLM and "
                             "models/minimax_m3_vl.py MiniMaxM3SparseForConditionalGeneration; "
                             "nothing registers MiniMaxM3ForCausalLM, and with no auto_map in "
                             "the config model_loader/utils.py resolve_transformers_arch raises "
                             "'Cannot find model module' (a config naming "
                             "MiniMaxM3SparseForCausalLM is sized)"),
}
#: --pp: the remainder of the layers goes to the last stages (distributed/utils.py get_pp_indices)
STAGE_SPLIT = sglang_stage_layers
FORMATS = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2",
           **BLOCK_SCALED}
#: the torch dtype of the KV pools for each --kv-cache-dtype kvplan passes other than auto
#: (mem_cache/kv_cache_dtype.py configure_kv_cache_dtype)
FLAG_DTYPES = {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "bf16": "bfloat16",
               "bfloat16": "bfloat16", "nvfp4": "float4_e2m1fn_x2",
               "fp4_mx_block16": "float4_e2m1fn_x2", "mxfp8": "float8_e4m3fn"}
#: MiniMax-M3's page on CUDA: model_overrides/minimax_m3.py picks fa3 on Hopper and fa4 or
#: trtllm_mha on SM100, each with pages of 128 tokens, the sparse attention's block
MINIMAX_PAGE = 128
#: CUDA context and NCCL before weights load (seen: 22.49 GiB L4 → 21.63 GiB free)
PRELOAD = int(0.86 * GiB)


#: the SGLang release whose automatic ``mem_fraction_static`` kvplan computes
#: (``arg_groups/memory_hook.py · handle_gpu_memory_settings``; the rule of upstream main
#: @031ed82d, which 0.5.20 shipped, plus 0.5.22's cap of the decode graphs at
#: ``--max-running-requests``)
DEFAULT_RULE = "0.5.23"
#: first ``architectures`` entries SGLang serves as multimodal (configs/model_config.py
#: multimodal_model_archs; MiMoV2ForCausalLM only with vision and audio configs)
MULTIMODAL_ARCHS = frozenset({
    "CLIPModel", "Cohere2VisionForConditionalGeneration", "Cosmos3EdgeForConditionalGeneration",
    "DeepseekVL2ForCausalLM", "Ernie4_5_VLMoeForConditionalGeneration",
    "MiniMaxM3SparseForConditionalGeneration", "Gemma3ForConditionalGeneration",
    "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration", "EmbeddingGemma2Model",
    "Gemma4UnifiedForConditionalGeneration", "DiffusionGemmaForBlockDiffusion",
    "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "GlmOcrForConditionalGeneration",
    "GlmAsrForConditionalGeneration", "GlmImageForConditionalGeneration", "Grok1VForCausalLM",
    "Grok1AForCausalLM", "LlavaLlamaForCausalLM", "Llama4ForConditionalGeneration",
    "LlavaMistralForCausalLM", "LlavaQwenForCausalLM", "LlavaForConditionalGeneration",
    "LlavaVidForCausalLM", "Lfm2VlForConditionalGeneration", "LightOnOCRForConditionalGeneration",
    "MiMoV2ASRForCausalLM", "MiniCPMO", "MiniCPMV", "Mistral3ForConditionalGeneration",
    "MultiModalityCausalLM", "MllamaForConditionalGeneration", "MossVLForConditionalGeneration",
    "NemotronH_Nano_VL_V2", "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3",
    "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration",
    "PixtralForConditionalGeneration", "Qwen2AudioForConditionalGeneration",
    "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
    "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
    "InternS2MobiusForConditionalGeneration", "Qwen3ASRForConditionalGeneration",
    "Qwen3OmniMoeForConditionalGeneration", "KimiVLForConditionalGeneration",
    "LocateAnythingForConditionalGeneration", "InternVLChatModel",
    "InternS1ForConditionalGeneration", "InternS1ProForConditionalGeneration", "Phi4MMForCausalLM",
    "VoxtralForConditionalGeneration", "WhisperForConditionalGeneration",
    "Step3VLForConditionalGeneration", "POINTSV15ChatModel", "DotsVLMForCausalLM",
    "Dots3NoteForCausalLM", "DotsOCRForCausalLM", "Sarashina2VisionForCausalLM",
    "NVILAForConditionalGeneration", "NVILALiteForConditionalGeneration",
    "DeepseekOCRForCausalLM", "UnlimitedOCRForCausalLM", "JetVLMForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration", "MiDashengLMModel", "StepVLForConditionalGeneration",
    "Step3p7ForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "BailingMMNativeForConditionalGeneration", "BailingMM2NativeForConditionalGeneration",
    "BailingMoeV3VLForConditionalGeneration",
})
#: architectures off multimodal_model_archs that 0.5.23's ModelConfig still makes multimodal:
#: the config nests its decoder (hf_text_config is not hf_config, has_multimodal_subconfig in
#: configs/model_config.py ModelConfig.__init__) and enable_multimodal defaults to True; EXAONE
#: 4.5, which SGLang loads through its Transformers backend, likewise (get_hf_text_config
#: returns its text_config)
SUBCONFIG_MULTIMODAL_ARCHS = frozenset({"KimiK3ForConditionalGeneration",
                                        "Exaone4_5_ForConditionalGeneration"})
#: multimodal architectures SGLang serves text-only unless --enable-multimodal is given
#: (ModelConfig: enable_multimodal defaults to False for these)
TEXT_ONLY_ARCHS = frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
                             "Step3VLForConditionalGeneration",
                             "InklingForConditionalGeneration"})
#: multimodal architectures whose language-model prefill keeps the breakable prefill CUDA
#: graph (configs/model_config.py multimodal_breakable_cuda_graph_supported_model_archs;
#: the piecewise allow-list is a subset of it); every other multimodal model loses it
#: (cuda_graph_hook.py disable_breakable_cudagraph_if_incompatible)
BREAKABLE_MULTIMODAL_ARCHS = frozenset({
    "MiniMaxM3SparseForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
    "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "MiniMaxM3SparseForCausalLM",
})
#: architectures whose decode CUDA graphs grow to --max-running-requests (at most 512) on a
#: Hopper card of 60 GiB or more (model_overrides/qwen3_vl.py
#: expand_multimodal_decode_graph_to_running_limit: config model_type qwen3_vl or
#: qwen3_vl_moe, the types of these two architectures)
HOPPER_EXPANDED_ARCHS = frozenset({"Qwen3VLForConditionalGeneration",
                                   "Qwen3VLMoeForConditionalGeneration"})


def _table(gpu_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode CUDA-graph max_bs) defaults by card size
    (memory_hook.py handle_gpu_memory_settings; 0.5.20 raised the 20-35 GiB tier from
    2048 / 24 (80 at tp ≥ 4) to 4096 / 48 (160))."""
    big_tp = tp >= 4
    if gpu_mib < 20 * 1024:
        return 2048, 8
    if gpu_mib < 35 * 1024:
        return 4096, 160 if big_tp else 48
    if gpu_mib < 60 * 1024:
        return 4096, 160 if big_tp else 32
    if gpu_mib < 160 * 1024:
        return 8192, 512 if big_tp else 256
    return 16384, 512


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many token counts SGLang captures prefill CUDA graphs for up to ``max_tokens``
    (cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes: 4-32 by 4, 48-256 by 16,
    288-512 by 32, 576-1024 by 64, 1280-4096 by 256, then from 4608 by 512)."""
    ladders = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256),
               (4608, max(max_tokens, 4608), 512))
    return sum(len(range(lo, min(hi, max_tokens) + 1, step)) for lo, hi, step in ladders)


def vision_factor(layers: int, hidden: int) -> float:
    """What SGLang multiplies an automatic mem_fraction_static by for a model with a vision
    encoder (server_args adjust_mem_fraction_for_vlm): 0.95, times 1 − 0.1 per doubling of
    the encoder's layers × hidden² over ViT-L/14's (24 × 1024²), kept within 0.8-1.05."""
    ratio = layers * hidden ** 2 / (24 * 1024 ** 2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def prefill_chunk(gpu_bytes: int, tp: int, chunked: int | None) -> int:
    """--chunked-prefill-size: the one given, else the default for the card's size (_table)."""
    return chunked or _table(gpu_bytes / MiB, tp)[0]


def auto_mem_fraction(gpu_bytes: int, tp: int, pp: int, chunked: int | None = None, *,
                      running: int | None = None, mla: bool = False,
                      prefill_graph: bool = True, llama2: bool = False,
                      expand_to_running: bool = False, attn_dp: int = 1,
                      decode_bs: int | None = None, decode_graph: bool = True,
                      prefill_bs: int | None = None, max_total: int | None = None,
                      deepep: bool = False) -> float:
    """SGLang's automatic mem_fraction_static on a CUDA card of ``gpu_bytes`` (before any
    vision-encoder factor), as ``memory_hook.py handle_gpu_memory_settings`` computes it
    with post-capture KV sizing off (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, the default),
    no DeepEP or PD disaggregation. In MiB:

    reserved = 512 + 1.5 × max(chunked_prefill_size, 2048) + tp × pp / 8 × 1024
               + 2 × decode graph max_bs
               (+ 3 × max_bs × attn_dp with attention DP, and 1.5 × max_bs × attn_dp more
               past a max_bs of 300)
               + the prefill graphs: 1536 with an MLA model, else 8 per captured size;
    at least 10 GiB on a card over 60 GiB; fraction = round((card − reserved) / card, 3).

    ``running``: --max-running-requests, which caps a default decode max_bs (0.5.22);
    ``expand_to_running``: Qwen3-VL on a large Hopper card, whose decode graphs grow to it
    instead (up to 512); ``prefill_graph``: whether the default breakable prefill graph
    survives (it is off with --pp > 1 and for some models); ``llama2``: a model path naming
    Llama-2, whose prefill graphs stop at 4096 tokens.

    ``decode_bs``: --cuda-graph-max-bs-decode, which neither the running cap nor the Qwen3-VL
    growth change; ``decode_graph``: False with the decode graph disabled
    (--disable-decode-cuda-graph), which drops its 2 MiB a batch slot (DP attention's padding
    stays); ``prefill_bs``: --cuda-graph-max-bs-prefill, the largest prefill graph (default the
    chunk, at most --max-total-tokens ``max_total``); ``deepep``: --moe-a2a-backend deepep,
    1024 more with the breakable prefill graph (before the 10 GiB floor) and 2048 with a decode
    graph (after it: reserve_for_deepep_a2a_mb)."""
    gpu_mib = gpu_bytes / MiB
    _, graph_bs = _table(gpu_mib, tp)
    chunk = prefill_chunk(gpu_bytes, tp, chunked)
    if decode_bs is not None:
        graph_bs = decode_bs
    else:
        if running is not None and graph_bs > running:
            graph_bs = running
        if (expand_to_running and gpu_mib >= 60 * 1024 and running is not None
                and running <= 512 and graph_bs < running):
            graph_bs = running
    reserved = 512 + max(chunk, 2048) * 1.5 + tp * pp / 8 * 1024
    if decode_graph:
        reserved += graph_bs * 2
    if attn_dp > 1:
        # DP attention pads some buffers to every group's batch (reserve_for_graph_mb)
        reserved += graph_bs * attn_dp * 3 + (graph_bs * attn_dp * 1.5 if graph_bs > 300 else 0)
    if prefill_graph:
        if mla:
            reserved += 1.5 * 1024
        else:
            top = prefill_bs
            if top is None:
                top = min(chunk, 4096) if llama2 else chunk
                if max_total is not None:
                    top = min(top, max_total)
            reserved += prefill_graph_sizes(top) * 8
        if deepep:
            reserved += 1024
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if deepep and decode_graph:
        reserved += 2048
    return round((gpu_mib - reserved) / gpu_mib, 3)


def is_multimodal(spec: ModelSpec) -> bool:
    """Whether SGLang serves the model as multimodal by default (ModelConfig.is_multimodal):
    its architecture is a multimodal one and not one served text-only by default. A vision
    encoder under another architecture is refused: whether SGLang then treats the model as
    multimodal (it may, from a text sub-config) is not established."""
    arch = spec.architecture
    if arch in TEXT_ONLY_ARCHS:
        return False
    if arch in MULTIMODAL_ARCHS or arch in SUBCONFIG_MULTIMODAL_ARCHS:
        return True
    if spec.vision_encoder is not None:
        raise InputError(f"whether SGLang serves {arch or 'this architecture'} as multimodal "
                         "(its memory reserve and prefill graphs) is not established; give "
                         "--mem-fraction-static", field="mem_fraction_static")
    return False


def default_fraction(req: EngineRequest, gpu: GPU, running: int) -> float:
    """The mem_fraction_static SGLang picks itself for this request (rule of SGLang
    ``DEFAULT_RULE``): the reserve of ``auto_mem_fraction`` with the prefill graph kept or
    dropped as the CUDA-graph hooks decide before the memory hook runs, then the vision
    encoder's factor for a multimodal model."""
    spec, p = req.spec, req.parallel
    if gpu.vendor not in ("nvidia", "custom"):
        raise InputError(f"SGLang's automatic --mem-fraction-static is sized here for CUDA "
                         f"cards, not {gpu.name}; give --mem-fraction-static",
                         field="mem_fraction_static")
    multimodal = is_multimodal(spec)
    # the breakable prefill graph (the CUDA default) is dropped with --pp > 1, for Kimi Delta
    # Attention where the config names its layers (uses_kda_attention: Kimi-Linear and Kimi-K3,
    # not Ling-3.0's layer_group_size form) and DeepSeek-V4, and for a multimodal model off
    # the allow-list (cuda_graph_hook.py apply_cuda_graph_compatibility)
    s = req.settings
    prefill_graph = (s.prefill_cuda_graph and p.pp == 1 and not spec.kda_declared
                     and not has_kind(spec, LayerKind.COMPRESSED)
                     and not (multimodal and spec.architecture not in BREAKABLE_MULTIMODAL_ARCHS))
    expand = multimodal and spec.architecture in HOPPER_EXPANDED_ARCHS
    if expand and gpu.cuda_family is None and gpu.total_bytes >= 60 * GiB:
        raise InputError(f"SGLang grows Qwen3-VL's decode CUDA graphs on Hopper cards only; "
                         f"{gpu.name} names no compute capability: give --mem-fraction-static "
                         "or a catalog card", field="gpu")
    frac = auto_mem_fraction(
        gpu.total_bytes, p.tp, p.pp, req.settings.chunked_prefill_size, running=running,
        mla=has_kind(spec, LayerKind.MLA), prefill_graph=prefill_graph,
        llama2="llama-2" in model_ref(spec).lower(),
        expand_to_running=expand and gpu.cuda_family == 9, attn_dp=p.attn_dp,
        decode_bs=s.cuda_graph_max_bs_decode, decode_graph=s.decode_cuda_graph,
        prefill_bs=s.cuda_graph_max_bs_prefill, max_total=s.max_total_tokens,
        deepep=s.moe_a2a_backend == "deepep")
    if multimodal and spec.vision_encoder:
        frac *= vision_factor(*spec.vision_encoder)
    return frac


#: share of full-layer tokens the sliding-window pool holds (server_args swa_full_tokens_ratio)
SWA_RATIO = 0.8
#: model types SGLang gives a separate sliding-window pool (configs/model_config.py
#: is_hybrid_swa_model: Llama4, GptOss, MiMoV2, Step3p5, Gemma4, Laguna); every other model with
#: sliding or chunked layers (Gemma 2 and 3, Mistral, Phi-3, ...) gets one pool in which every
#: layer holds every token
HYBRID_SWA_TYPES = frozenset({"llama4", "llama4_text", "gpt_oss", "mimo_v2_flash", "step3p5",
                              "gemma4", "gemma4_text", "laguna"})
#: Mamba pool : KV pool memory ratio (server_args mamba_full_memory_ratio)
MAMBA_RATIO = 0.9
#: SSM state dtype bytes where the config names no mamba_ssm_dtype (configs/mamba_utils.py
#: mamba2_state_dtype: the config's mamba_ssm_dtype, else float32)
MAMBA_SSM_BYTES = 4
#: model types whose mamba_radix_cache_strategy "auto" resolves to "extra_buffer" with the
#: default overlap scheduler and triton linear-attention backend (arg_groups/overrides.py
#: _mamba_radix_cache_resolution, _MAMBA_EXTRA_BUFFER_ARCHS); the rest get "no_buffer"
EXTRA_BUFFER_TYPES = frozenset({"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe",
                                "qwen3_5_moe_text", "kimi_linear", "nemotron_h", "falcon_h1",
                                "granitemoehybrid", "bailing_hybrid", *GLM5_NEXT_TYPES})
#: (Kimi-K3's decoder is a kimi_linear text_config: KimiK3ForConditionalGeneration is on
#: 0.5.23's _MAMBA_EXTRA_BUFFER_ARCHS too; KimiK3LinearForCausalLM is refused,
#: LAYOUT_UNKNOWN_ARCH)
#: Mamba slots a running request may hold: 3, plus the track slots of extra_buffer: two
#: (ping-pong) with the overlap scheduler, one without it (kv_cache_configurator
#: _calculate_mamba_ratio, allocation_sizing get_mamba_tracking_slots)
SLOTS_PER_REQUEST = 3
EXTRA_BUFFER_SLOTS = 2
EXTRA_BUFFER_SLOTS_NO_OVERLAP = 1


#: DeepSeek Sparse Attention: the NSA/DSA pool asserts 64-token pages on CUDA and server_args
#: forces them, whatever --page-size says
DSA_PAGE = 64
#: the latent the pool's fp8 layout is written for (kv_lora_rank 512 + qk_rope_head_dim 64)
DSA_LATENT = 576
#: of which the non-rotary part (kv_lora_rank), which an fp8 row quantizes
DSA_KV_LORA = 512
#: the indexer key the pool asserts (index_head_dim 128), stored as uint8 fp8 values plus one
#: fp32 scale per 128: index_head_dim + index_head_dim // 128 × 4 bytes a token and layer
DSA_INDEX_WIDTH = 128
DSA_INDEX_ROW = DSA_INDEX_WIDTH + DSA_INDEX_WIDTH // 128 * 4


def dsa_dtype(spec: ModelSpec, gpu: GPU | None, opts: CacheOptions) -> tuple[str | None, int]:
    """For a DeepSeek Sparse Attention model: the --kv-cache-dtype kvplan passes (None: auto)
    and the bytes of the dtype SGLang then runs, or a one-line refusal of what is not sized.

    ``--kv f16`` stands for SGLang's auto, which a DSA model resolves by the card: bfloat16
    below SM100, fp8_e4m3 from it. An fp8 latent is sized on Hopper only: there the default
    backends (flashmla_kv) keep FlashMLA's 656-byte row, while on Blackwell older releases
    chose flashmla too and newer ones trtllm, which keeps a plain 576-byte row."""
    width = next(g.head_dim_k for g in spec.groups if g.kind is LayerKind.MLA)
    index = next(g.head_dim_k for g in spec.groups
                 if g.kind in (LayerKind.INDEXER, LayerKind.INDEX))
    latent = dsa_latent(spec)
    if width != latent or index != DSA_INDEX_WIDTH:
        raise InputError(f"SGLang's DSA pool takes a {latent}-value latent and a "
                         f"{DSA_INDEX_WIDTH}-value indexer key; this model's are {width} and "
                         f"{index}", field="engine")
    name = opts.kv_k.name
    if name not in ("f16", "bf16", "fp8_e4m3"):
        raise InputError(f"SGLang runs DeepSeek Sparse Attention with --kv-cache-dtype auto, "
                         f"bfloat16 or fp8_e4m3, not {name}", field="kv_k")
    family = gpu.cuda_family if gpu is not None else None
    if gpu is not None and family not in (9, 10):
        raise InputError(f"SGLang's DSA pool is sized here on Hopper (sm90) and Blackwell "
                         f"(sm100) cards, not on {gpu.name}", field="gpu")
    if name == "bf16":
        return "bfloat16", 2
    if family is None:
        raise InputError("SGLang picks a DSA model's KV dtype and fp8 layout by the card: give "
                         "a --gpu, or --kv bf16 with a KV budget", field="gpu")
    if name == "f16" and family == 9:
        return None, 2
    if family == 9:
        return "fp8_e4m3", 1
    raise InputError("SGLang's fp8 DSA latent on Blackwell is 656 bytes a token and layer "
                     "(FlashMLA) in older releases and 576 (trtllm, the newer default): not "
                     "sized; choose --kv bf16", field="kv_k")


def dsa_latent(spec: ModelSpec) -> int:
    """The latent SGLang's DSA pool takes: kv_lora_rank 512 + qk_rope_head_dim 64, or 512
    alone for GLM-5.3-Flash (no rotary part)."""
    return DSA_KV_LORA if spec.model_type in GLM5_NEXT_TYPES else DSA_LATENT


def dsa_row(dsa_bytes: int, latent: int = DSA_LATENT) -> int:
    """Bytes of a DSA layer's latent row a token in SGLang's cell and pool
    (calculate_mla_kv_cache_dim times the dtype's size): the latent's values in bfloat16;
    in fp8_e4m3 (the Hopper default backend, flashmla_kv) FlashMLA's row: 512 fp8 values, a
    float32 scale per 128 (quant_block_size) and the rotary part in bfloat16
    (rope_storage_dtype): 656 bytes, 528 without a rotary part."""
    if dsa_bytes != 1:
        return latent * dsa_bytes
    return DSA_KV_LORA + DSA_KV_LORA // 128 * 4 + (latent - DSA_KV_LORA) * 2


def dsa_index_pool(spec: ModelSpec) -> int:
    """Tokens a DSA index key stands for: GLM-5.3-Flash's index_kpool (its INDEX layers'
    ratio), 1 for DeepSeek-V3.2 and GLM-5."""
    return next((g.ratio for g in spec.groups if g.kind is LayerKind.INDEX), 1)


def dsa_index_kind(spec: ModelSpec) -> LayerKind:
    """The layer kind holding a DSA model's index keys in kvplan's spec."""
    return LayerKind.INDEX if spec.model_type in GLM5_NEXT_TYPES else LayerKind.INDEXER


def dsa_pool_bytes(tokens: int, layers: int, row: int, indexer_layers: int | None = None,
                   kpool: int = 1) -> int:
    """Bytes SGLang's DSA pool allocates for ``tokens`` (a multiple of the page) over
    ``layers`` layers with a latent row of ``row`` bytes: tokens + one page of latent rows in
    each layer and (tokens + page + 1) // page indexer pages of page / ``kpool`` × 132 bytes
    (a row a pool of ``kpool`` tokens, index_key_cache.py _buffer_shape) in each of the
    ``indexer_layers`` (every layer if not given) that run their own indexer: a layer that
    reuses another's top-k gets a 0-row index buffer (mem_cache/index_key_cache.py
    _layer_num_pages, skip_topk_layers). The page is 64 × ``kpool`` tokens."""
    page = DSA_PAGE * kpool
    latent = (tokens + page) * row
    index = (tokens + page + 1) // page * (page // kpool) * DSA_INDEX_ROW
    return layers * latent + (layers if indexer_layers is None else indexer_layers) * index


class Pools(NamedTuple):
    """What SGLang's memory profile gives one launch: bytes left for the pools (``total``
    before the Mamba state pool, ``rest`` after it), the weights + KV budget and fraction,
    full-pool tokens, window-pool tokens and Mamba state slots (None where the model has no
    such pool), and the full-pool tokens the profile gave before --max-total-tokens."""

    total: int
    rest: int
    budget: int | None
    frac: float | None
    tokens: int
    swa: int | None
    slots: int | None
    profiled: int


#: architectures whose model module gives SGLang's sliding_window_size itself, as the
#: config's inclusive window less one (models/gpt_oss.py, gemma4_mm.py, gemma4_causal.py
#: get_attention_sliding_window_size); the others (Llama 4, MiMo-V2, Step-3.5, Laguna) take
#: the config's sliding_window_size / sliding_window / window_size, else attention_chunk_size
#: (model_runner_components/load_model_utils.py resolve_sliding_window_size)
EXCLUSIVE_WINDOW_TYPES = frozenset({"gpt_oss", "gemma4", "gemma4_text"})


def swa_pool_tokens(full: int, page: int, ratio: float = SWA_RATIO) -> int:
    """The window layers' pool for ``full`` tokens in the full layers' pool: swa_full_tokens_ratio
    as many, to the page (HybridSWAPoolConfigurator._solve_pool_sizes)."""
    return int(full * ratio) // page * page


#: requests' decode steps between window evictions (SGLANG_SWA_EVICTION_INTERVAL)
SWA_EVICTION_INTERVAL = 128


def swa_request_cap(window: int, page: int, running: int, chunk: int, *,
                    overlap: bool = True) -> int:
    """The window pool SGLang sizes with the radix cache off (pool_configurator
    compute_swa_request_cap, no speculative decoding): each of a group's ``running`` requests
    holds its window, an eviction interval of tokens, a page of padding and a page for its next
    decode step; the prefill chunks in flight (two with the overlap scheduler, one without it,
    as under --pp) and a page more; aligned up to the page."""
    per_request = window + SWA_EVICTION_INTERVAL + page + page
    cap = per_request * max(1, running) + (2 if overlap else 1) * chunk + page
    return -(-cap // page) * page


def swa_window(spec: ModelSpec) -> int | None:
    """The sliding_window_size SGLang's hybrid pools check the window pool against."""
    window = spec.widest_window
    if not window:
        return None
    return window - 1 if spec.model_type in EXCLUSIVE_WINDOW_TYPES else window


def mamba_slots_for(rest: int, per_req: int, *, draft_tokens: int = 0, per_running: int = 1,
                    running: int = 1, ratio: float = MAMBA_RATIO,
                    fixed: int | None = None) -> tuple[int, int]:
    """(max_mamba_cache_size, intermediate-state bytes) from ``rest`` bytes
    (kv_cache_configurator _handle_max_mamba_cache): the Mamba share of rest holds K slots,
    the pool's padding slot and, with D = ``draft_tokens`` (speculative decoding), the
    states of D draft tokens for (1 + K / slots a request) requests:
    K = int((share − per_req (1 + D)) // (per_req (1 + D / slots a request))), zero or less
    when nothing is left; the states take per_req × (min(running, K // slots a request) + 1)
    × D (0 without a draft). ``ratio``: --mamba-full-memory-ratio; ``fixed``: a group's
    --max-mamba-cache-size (its share over the attention-DP groups), K as given."""
    d = draft_tokens
    if fixed is not None:
        slots = fixed
    else:
        share = rest * ratio / (1 + ratio)
        slots = math.floor((share - per_req * (1 + d)) // (per_req * (1 + d / per_running)))
    capped = min(max(1, running), slots // per_running)
    return slots, per_req * (capped + 1) * d


def startup_error(pl: Pools, *, per_req: int, per_running: int, window: int | None,
                  page: int, weights_bytes: tuple[int, int] | None) -> str | None:
    """The exception SGLang 0.5.23 raises while sizing these pools (None: none), in the order
    it checks: the Mamba state pool (_handle_max_mamba_cache), memory left after the
    weights (_profile_available_bytes; ``weights_bytes`` the free memory before and after
    loading, None under a given KV budget), the window pool's admission floor
    (MemoryPoolConfigurator.validate_swa_pool_size), an empty pool (MemoryPoolConfig), and
    no request the Mamba slots can serve (resolve_max_num_reqs)."""
    if pl.slots is not None and pl.slots <= 0:
        return (f"RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state "
                f"cache. Computed max_mamba_cache_size={pl.slots} (total_rest_memory="
                f"{pl.total / GiB:.2f} GB, mamba_cache_per_req={per_req / MiB:.2f} MB). Try: "
                "(1) reduce --max-running-requests, (2) increase --mem-fraction-static, (3) "
                "reduce --speculative-num-draft-tokens, or (4) use GPUs with more memory.")
    if pl.rest <= 0 and weights_bytes is not None:
        before, after = weights_bytes
        least = 1 - after / before
        return (f"ValueError: Loaded weights leave no GPU memory for the KV cache under "
                f"--mem-fraction-static={pl.frac}. Raise --mem-fraction-static above "
                f"{math.ceil(least * 1000) / 1000:.3f} (minimum viable = 1 - available/pre = "
                f"{least:.4f}). If using speculative decoding, draft weights are now counted.")
    if pl.swa is not None and window is not None and window + page >= pl.swa:
        return (f"ValueError: SWA pool ({pl.swa} tokens) cannot hold even one request: the "
                f"prefill admission floor is sliding_window_size ({window}) + page_size "
                f"({page}). Increase --swa-full-tokens-ratio or the total KV budget.")
    if pl.tokens <= 0:
        return "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    served = min(pl.tokens // 2, pl.slots // per_running) if pl.slots is not None else 1
    if served <= 0:
        return (f"RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to "
                f"serve any requests. max_mamba_cache_size={pl.slots}, mamba_ratio="
                f"{per_running}, resulting max_num_reqs={served}. Try: (1) "
                "reduce --max-running-requests, (2) increase --mem-fraction-static, or (3) use "
                "GPUs with more memory.")
    return None


def short_pool_line(tokens: int, context: int) -> str:
    """The warning tp_worker get_worker_info logs once the pools are built, where they hold
    fewer tokens than --context-length."""
    return (f"KV pool holds {tokens} tokens, fewer than --context-length {context}. One "
            "full-length request cannot fit, so long requests will be refused or truncated at "
            "serving time. Lower --context-length, raise --mem-fraction-static, or free memory "
            "taken before the pool is sized.")


def startup_reason(error: str) -> str:
    """A start-up error's sentence for a note: its first sentence, without the class."""
    text = error.split(": ", 1)[1]
    cut = text.find(". ")
    return text if cut < 0 else text[:cut]


def running_cap_warning(running: int, tokens: int, slots: int | None,
                        per_running: int) -> str | None:
    """resolve_max_num_reqs's warning when the Mamba slots cap --max-running-requests."""
    if slots is None or slots <= 0:
        return None
    cap = slots // per_running
    if cap >= min(running, tokens // 2):
        return None
    return (f"max_running_requests is capped to {cap} by the mamba state cache "
            f"(max_mamba_cache_size={slots}, {per_running} state slots per request). To raise "
            "it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the "
            "state size with --mamba-ssm-dtype bfloat16.")


#: model types whose SGLang model code builds the MoE router (the gate's weight, and Laguna's
#: score-correction bias beside it) in float32 whatever the checkpoint's dtype or
#: quantization: an nn.Parameter made with dtype=torch.float32, which the loader copies into
#: (models/laguna.py LagunaMoEGate, models/glm4_moe.py Glm4MoeGate); DeepSeek's MoEGate
#: keeps the gate in the model dtype unless the config sets router_fp32
FP32_ROUTER_TYPES = {"laguna": "models/laguna.py LagunaMoEGate",
                     "glm4_moe": "models/glm4_moe.py Glm4MoeGate"}
#: the router's modules, by the name's end (layers.<i>.mlp.gate, Laguna's bias)
ROUTER_MODULES = (".mlp.gate", ".mlp.experts.e_score_correction_bias")


def router_fp32_bytes(req: EngineRequest, stage: int) -> int:
    """Bytes SGLang holds for the routers of pipeline stage ``stage`` beyond what kvplan's
    weight estimate counts for them: 4 bytes a weight less the estimate's (the gate is
    replicated, so every tensor-parallel rank of the stage holds it whole). 0 for models whose
    router SGLang keeps in the model dtype, or weights given as printed."""
    spec = req.spec
    if spec.model_type not in FP32_ROUTER_TYPES or req.weights_bytes is not None:
        return 0
    layers = STAGE_SPLIT(spec.decoder_layers, req.parallel.pp, stage)

    def on_stage(m: Module) -> bool:
        parts = m.names[0].split(".")
        return (len(parts) > 1 and parts[0] == "layers" and parts[1].isdigit()
                and int(parts[1]) in layers)

    mods = [m for m in spec.params.modules
            if m.names[0].endswith(ROUTER_MODULES) and on_stage(m)]
    fmt = req.weights
    if ((fmt is None or str(fmt).lower() in ("auto", "")) and spec.dtype == "float32"
            and spec.checkpoint_weights is None):
        fmt = "bf16"   # rank_weights' f32_as: --dtype auto serves it in 16 bits
    counted = module_bytes(spec, fmt, mods, mtp=req.cache.mtp)
    if counted is None:
        return 0
    return max(0, 4 * sum(m.params for m in mods) - counted)


def slots_per_request(model_type: str, pp: int = 1) -> int:
    """Mamba state slots SGLang reserves per running request for this model. The strategy
    resolves to extra_buffer inside handle_model_specific_adjustments, while the overlap
    scheduler is still on; --pp > 1 turns it off later (_pipeline_parallel_overlap_disable),
    which leaves extra_buffer in place with one track slot instead of two."""
    if model_type not in EXTRA_BUFFER_TYPES:
        return SLOTS_PER_REQUEST
    return SLOTS_PER_REQUEST + (EXTRA_BUFFER_SLOTS if pp == 1 else EXTRA_BUFFER_SLOTS_NO_OVERLAP)


def kv_budget(req: EngineRequest, shares: list[RankShare],
              running: int | None = None) -> tuple[int, int | None, float | None]:
    """(bytes left for the KV pools, weights + KV budget, mem_fraction_static) of the most
    loaded rank: rest = free after weights − free before loading × (1 − mem_fraction_static)
    (model_runner_kv_cache_mixin profile_max_num_token). ``running`` is the
    --max-running-requests the automatic fraction is worked out for (default: the
    request's sequences, which kvplan's command passes)."""
    frac = req.settings.mem_fraction_static
    gpu = shares[0].gpu
    if req.kv_budget_bytes is not None:
        return req.kv_budget_bytes, None, frac
    if gpu is None:
        raise need_gpu()
    if frac is None:
        frac = default_fraction(req, gpu, attn_dp.max_running(req)
                                if running is None else running)
    before, after = free_memory(req, shares)
    # a multimodal model's embedding cache, allocated after the pools are sized, comes off
    # their share (kv_cache_configurator.py _profile_available_bytes, mm_runtime_reservation_gb)
    reserve = VLM_CACHE_BYTES if multimodal_reserve(req.spec) else 0
    return int(after - before * (1 - frac)) - reserve, int(before * frac), frac


#: what SGLang 0.5.23 reserves of a multimodal model's KV budget for its embedding cache
#: (SGLANG_VLM_CACHE_SIZE_MB, 100 MiB; the GPU feature-transport pools' 1 GiB only with
#: --mm-feature-transport cuda_ipc or cuda_vmm, which kvplan does not pass)
VLM_CACHE_BYTES = 100 * MiB


def multimodal_reserve(spec: ModelSpec) -> bool:
    """Whether SGLang takes VLM_CACHE_BYTES off the pools' share for this model: it serves it
    as multimodal (is_multimodal); False where that is not established (a vision encoder under
    an architecture kvplan has no rule for, planned with --mem-fraction-static)."""
    try:
        return is_multimodal(spec)
    except InputError:
        return False


def free_memory(req: EngineRequest, shares: list[RankShare]) -> tuple[int, int]:
    """(free memory before the weights load, free memory after) on the most loaded rank, the
    two readings profile_max_num_token / _profile_available_bytes work from."""
    gpu = shares[0].gpu
    if gpu is None:
        raise need_gpu()
    # free: the card's total, or on a unified memory the GPU's share or what the user saw free
    # there (gpu_limit)
    before = (gpu.usable_bytes - PRELOAD
              - (int(0.3 * GiB) if req.parallel.ranks_per_replica > 1 else 0))
    return before, before - max(sh.weights_bytes for sh in shares)


def rule_note(req: EngineRequest, frac: float | None) -> str:
    """The note naming the SGLang release whose automatic fraction was used ("" if none)."""
    if frac is None or req.kv_budget_bytes is not None or req.settings.mem_fraction_static:
        return ""
    cap = (f" with 0.5.22's decode-graph cap at --max-running-requests "
           f"{attn_dp.max_running(req)}"
           if fraction_depends_on_running(req) else "")
    return (f"mem_fraction_static {frac:.3f} is what SGLang {DEFAULT_RULE} picks itself "
            f"(arg_groups/memory_hook.py, the rule since 0.5.20{cap}); other releases pick "
            "otherwise: pass --mem-fraction-static to pin it")


def fraction_depends_on_running(req: EngineRequest) -> bool:
    """Whether the pool changes with --max-running-requests: only through SGLang's own
    mem_fraction_static, whose decode-graph reserve follows it (not where
    --cuda-graph-max-bs-decode fixes the graph's batch, nor with the decode graph disabled
    and no DP attention padding to the batch)."""
    s = req.settings
    return (req.kv_budget_bytes is None and s.mem_fraction_static is None
            and s.cuda_graph_max_bs_decode is None
            and (s.decode_cuda_graph or req.parallel.attn_dp > 1))



def long_context_note(req: EngineRequest) -> str | None:
    """Past the context length SGLang derives from the config (hf.sglang_context_len), its
    ModelConfig raises a ValueError unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set:
    the note saying so (the command sets it), else None. A draft model's or EAGLE head's worker
    is built with the target's context length (eagle_worker_v2.py), so its config's counts
    too."""
    own = past_derived("SGLang", "--context-length", req.context, req.spec.sglang_context_len,
                       "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")
    if own is not None or req.spec.draft is None or not req.cache.mtp:
        return own
    d = req.spec.draft.spec
    limit = d.sglang_context_len or d.max_position_embeddings
    if limit is None or req.context <= limit:
        return None
    return (f"SGLang builds the draft {d.name}'s worker with --context-length {req.context}, "
            f"above the {limit:,} it derives from the draft's config (a ValueError at start-up) "
            "unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, which the command sets")


#: --speculative-draft-kv-cache-dtype's choices besides auto (arg_groups/fields/spec.py)
DRAFT_FORMATS = ("bf16", "fp8_e4m3", "fp8_e5m2")


def draft_format(req: EngineRequest) -> KVFormat | None:
    """The draft's own KV dtype (kvplan's draft_kv: --speculative-draft-kv-cache-dtype; None:
    the target's --kv-cache-dtype), or a one-line refusal."""
    return own_draft_format(req, "SGLang's --speculative-draft-kv-cache-dtype", DRAFT_FORMATS,
                            " (or auto, the target's)")


def head_borrowed(req: EngineRequest) -> int:
    """The bytes a rank holds for an EAGLE head beyond its kept weights while the target's pool
    is sized: the head's own token embedding (VocabParallelEmbedding, split over the ranks) and
    EAGLE-1's full lm_head, less its token map, not yet on the card; 0 without a head."""
    d = req.spec.draft
    if d is None or d.method == "draft_model" or not req.cache.mtp:
        return 0
    return (d.borrowed_bytes - d.map_bytes) // req.parallel.tp


def pool_dtype(spec: ModelSpec, flag: str) -> str:
    """The dtype SGLang's KV pools log ("torch.bfloat16") under --kv-cache-dtype ``flag``.

    A named dtype is its torch dtype; auto is the dtype the model is served in
    (model_config.py _get_and_verify_dtype over the text config, which takes the outer
    config's dtype where it names none): the config's bfloat16 or float16, and float16 for a
    float32 config or one naming none (bfloat16 for Gemma's model types); gpt-oss's MXFP4
    checkpoints are served in bfloat16 (model_overrides/gpt_oss.py) and the LLaVA
    ``*ForCausalLM`` classes in float16 (hf_transformers get_hf_text_config)."""
    if flag != "auto":
        return f"torch.{FLAG_DTYPES[flag]}"
    if fp8_kv_checkpoint(spec):
        return "torch.float8_e4m3fn"
    arch = spec.architecture
    if spec.model_type == "gpt_oss" and spec.checkpoint_weights == "mxfp4_moe":
        return "torch.bfloat16"
    if arch.startswith("Llava") and arch.endswith("ForCausalLM"):
        return "torch.float16"
    name = {"half": "float16"}.get(spec.config_dtype, spec.config_dtype)
    if name in ("bfloat16", "float16"):
        return f"torch.{name}"
    return "torch.bfloat16" if spec.model_type.startswith("gemma") else "torch.float16"


def launch_command(req: EngineRequest, k_name: str, frac: float | None) -> list[str]:
    """The launch_server command line of a plan: the flags it sets (a fraction only where the
    plan gives one; the rest left to SGLang's defaults)."""
    s = req.settings
    allow = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 " if long_context_note(req) else ""
    cmd = [f"{allow}python -m sglang.launch_server --model-path {model_ref(req.spec)}",
           f"--context-length {req.context}",
           f"--max-running-requests {attn_dp.max_running(req)}"]
    if k_name != "auto":
        cmd.append(f"--kv-cache-dtype {k_name}")
    cmd += parallel_flags(req.parallel, "--tp", "--pp", "--dp")
    if req.parallel.attn_dp > 1:
        cmd.append(f"--attn-dp-size {req.parallel.attn_dp}")
    if s.chunked_prefill_size:
        cmd.append(f"--chunked-prefill-size {s.chunked_prefill_size}")
    if s.attention_backend:
        cmd.append(f"--attention-backend {s.attention_backend}")
    if s.page_size:
        cmd.append(f"--page-size {s.page_size}")
    if s.max_total_tokens:
        cmd.append(f"--max-total-tokens {s.max_total_tokens}")
    if s.mem_fraction_static:
        cmd.append(f"--mem-fraction-static {frac}")
    if s.cuda_graph_max_bs_decode:
        cmd.append(f"--cuda-graph-max-bs-decode {s.cuda_graph_max_bs_decode}")
    if s.cuda_graph_max_bs_prefill:
        cmd.append(f"--cuda-graph-max-bs-prefill {s.cuda_graph_max_bs_prefill}")
    if not s.decode_cuda_graph:
        cmd.append("--disable-decode-cuda-graph")
    if not s.prefill_cuda_graph:
        cmd.append("--disable-prefill-cuda-graph")
    if s.dp_lm_head:
        cmd.append("--enable-dp-lm-head")
    if s.moe_a2a_backend == "deepep":
        cmd.append("--moe-a2a-backend deepep")
    if s.prefill_kv_cache_dequant_dtype not in (None, "auto"):
        cmd.append(f"--prefill-kv-cache-dequant-dtype {s.prefill_kv_cache_dequant_dtype}")
    if s.swa_full_tokens_ratio is not None:
        cmd.append(f"--swa-full-tokens-ratio {s.swa_full_tokens_ratio:g}")
    if s.mamba_full_memory_ratio is not None:
        cmd.append(f"--mamba-full-memory-ratio {s.mamba_full_memory_ratio:g}")
    if s.max_mamba_cache_size is not None:
        cmd.append(f"--max-mamba-cache-size {s.max_mamba_cache_size}")
    if not s.radix_cache:
        cmd.append("--disable-radix-cache")
    if s.lora is not None:
        cmd += s.lora.flags("--max-loras-per-batch")
    return cmd


#: the Gemma 4 architecture whose ``gemma4`` config SGLang's loader rewrites for its pools
GEMMA4_ARCH = "Gemma4ForConditionalGeneration"


def refuse_gemma4(spec: ModelSpec) -> None:
    """Refuse the Gemma 4 configs whose SGLang pools are not established: a text-only
    config (Gemma4ForCausalLM, model_type gemma4_text), which the loader does not rewrite.
    (KV-shared layers are sized: ``with_kv_shared_rows``.)"""
    if spec.architecture != GEMMA4_ARCH:
        what = (f"Gemma 4's full-attention pool for {spec.architecture or 'a text-only config'} "
                f"(SGLang rewrites global_head_dim and num_global_key_value_heads into it only "
                f"for a {GEMMA4_ARCH} config)")
    else:
        return
    raise InputError(f"SGLang: kvplan could not establish {what} from the engine's source, so "
                     "it does not size this model there; choose another engine", field="engine")


def refuse_glm5_next(spec: ModelSpec) -> None:
    """What of GLM-5.3-Flash SGLang 0.5.23 is sized: its Glm5NextForConditionalGeneration
    (models/glm5_next.py, the only class it registers) with an index key in every MLA layer:
    its dsa_layer_skips_topk reads the top-level config, where Glm5NextConfig copies the
    index_topk pattern fields but not ``indexer_types``."""
    if spec.architecture != "Glm5NextForConditionalGeneration":
        raise InputError("SGLang 0.5.23 runs GLM-5.3-Flash as Glm5NextForConditionalGeneration "
                         f"only (models/glm5_next.py); this config names "
                         f"{spec.architecture or 'no architecture'}", field="engine")
    mla = {i for g in spec.groups_for(mtp=False) if g.kind is LayerKind.MLA for i in g.layers}
    index = {i for g in spec.groups_for(mtp=False) if g.kind is LayerKind.INDEX
             for i in g.layers}
    if index != mla:
        raise InputError("this GLM-5.3-Flash config marks some MLA layers' indexers shared; "
                         "which of them SGLang gives index keys (its dsa_layer_skips_topk reads "
                         "the top-level config, where indexer_types is not copied) was not "
                         "established", field="engine")


def minimax_index_bytes(req: EngineRequest, k_name: str) -> int:
    """Bytes of a value in MiniMax-M3's index cache under SGLang, or a one-line refusal of what
    is not sized: fp8 with an fp8_e4m3 KV cache, the model's dtype otherwise
    (mem_cache/memory_pool.py get_minimax_sparse_index_dtype: on Hopper an fp8_e4m3 cache
    keeps the index keys in fp8 too; on SM100 the fp8 attention GEMMs that trtllm_mha, the
    backend the overrides pick for fp8_e4m3, turns on do the same). The native NVFP4 stack
    (its packed pool) and cards other than Hopper and SM100 are refused."""
    spec, s = req.spec, req.settings
    family = req.gpus[0].cuda_family if req.gpus else None
    if req.gpus and family not in (9, 10):
        raise InputError(f"SGLang's MiniMax-M3 pool is sized here on Hopper (sm90, fa3) and "
                         f"SM100 (fa4 / trtllm_mha) cards, whose 128-token pages its overrides "
                         f"set; not on {req.gpus[0].name}", field="gpu")
    if s.page_size and s.page_size != MINIMAX_PAGE:
        raise InputError(f"SGLang's MiniMax-M3 overrides set 128-token pages, the sparse "
                         f"attention's block; --page-size {s.page_size} is not sized",
                         field="page_size")
    weights = f"{spec.checkpoint_weights or ''} {spec.quant.label if spec.quant else ''}"
    unread = any(n.startswith(("quantization_config (", "hf_quant_config.json ("))
                 for n in spec.weight_notes)
    if "fp4" in weights.lower() or unread:
        # SGLang picks the pool by the quantization: minimax_m3_nvfp4 (mxfp8 with NVFP4
        # experts) on Blackwell builds MiniMaxM3Nvfp4KVPool's packed page rows
        raise InputError("SGLang builds MiniMax-M3's pool by the checkpoint's quantization (its "
                         "NVFP4 checkpoints' native stack packs the pool, "
                         "minimax_m3_nvfp4_pool.py); kvplan sizes the bf16 and MXFP8 "
                         "checkpoints' pool only", field="engine")
    return 1 if k_name == "fp8_e4m3" else 2


def minimax_index_pools(spec: ModelSpec) -> tuple[tuple[int, int], tuple[int, int]]:
    """K and V values a token in MiniMax-M3's two index pools over ``spec``'s sparse layers
    (MiniMaxSparseKVPool): the layers that keep index values (MHATokenToKVPool), then those
    that keep keys only (MHATokenToKOnlyPool); one head whatever the tensor parallelism."""
    groups = [g for g in spec.groups_for(mtp=False) if g.kind is LayerKind.INDEX]
    with_v = [g for g in groups if g.head_dim_v]
    return ((sum(g.count * g.head_dim_k for g in with_v),
             sum(g.count * g.head_dim_v for g in with_v)),
            (sum(g.count * g.head_dim_k for g in groups if not g.head_dim_v), 0))


def refuse_unregistered(spec: ModelSpec) -> None:
    """Refuse, in one line, a config whose architecture SGLang 0.5.23 registers nowhere
    (UNREGISTERED_ARCHS), naming what was searched and what is missing."""
    why = UNREGISTERED_ARCHS.get(spec.architecture or "")
    if why is not None:
        raise InputError(f"SGLang does not run {spec.architecture}: {why}", field="engine")


def with_kv_shared_rows(spec: ModelSpec) -> ModelSpec:
    """The spec as SGLang's token pools see it: a KV-shared layer (Gemma-3n, Gemma 4's E
    series) writes no cache and reads its source's (models/gemma3n_causal.py,
    gemma4_causal.py: the attention's layer_id is the source's, save_kv_cache off), yet the
    pools allocate a row for it as for any layer: the single pool spans
    max(num_hidden_layers, num_attention_layers) layers (model_runner_components/
    layer_setup.py _compute_model_num_layers), and the hybrid SWA pools every layer that
    layer_types names sliding or full (configs/model_config.py get_hybrid_layer_ids). Each
    shared layer joins its source's group, with that group's geometry."""
    if not spec.kv_shared_sources:
        return spec
    source_of = dict(spec.kv_shared_sources)
    groups = []
    for g in spec.groups:
        extra = [layer for layer, src in source_of.items() if not g.mtp and src in g.layers]
        groups.append(replace(g, layers=tuple(sorted(g.layers + tuple(extra)))) if extra else g)
    added = sum(len(g.layers) for g in groups) - sum(len(g.layers) for g in spec.groups)
    return replace(spec, groups=tuple(groups), kv_shared_layers=0, kv_shared_sources=(),
                   cacheless_layers=spec.cacheless_layers - added)


def with_nas_rows(spec: ModelSpec) -> ModelSpec:
    """The spec as SGLang's token pool sees a Nemotron-NAS (DeciLM) model: its
    DeciLMForCausalLM builds every decoder layer with make_pp_layers, so the pool spans them
    all (layer_setup.py: num_effective_layers = end_layer − start_layer), a block whose
    attention is a no-op included, each with the KV heads ModelConfig.get_total_num_kv_heads
    gives every layer (the one value of num_attention_heads // n_heads_in_group over the
    attention blocks). The no-op layers join the attention group."""
    if spec.model_type != "nemotron-nas":
        return spec
    held = {i for g in spec.groups if not g.mtp for i in g.layers}
    extra = tuple(i for i in range(spec.decoder_layers) if i not in held)
    attention = [g for g in spec.groups if g.kind.is_attention and not g.mtp]
    if not extra or len(attention) != 1:
        return spec
    groups = tuple(replace(g, layers=tuple(sorted(g.layers + extra))) if g is attention[0]
                   else g for g in spec.groups)
    return replace(spec, groups=groups, cacheless_layers=spec.cacheless_layers - len(extra))


def plan(req: EngineRequest) -> EngineReport:
    refuse_architecture("SGLang", req.spec, UNSUPPORTED)
    refuse_unregistered(req.spec)
    # DeciLMForCausalLM: no replace_with_linear blocks (its LlamaAttention needs
    # n_heads_in_group), and one KV head count over the attention blocks
    # (get_total_num_kv_heads raises "Variable GQA (VGQA) is not yet supported")
    refuse_nas_layout("SGLang", req.spec)
    refuse_layout("SGLang", req.spec, LAYOUT_UNKNOWN, LAYOUT_UNKNOWN_ARCH)
    if req.spec.model_type in ("gemma4", "gemma4_text"):
        refuse_gemma4(req.spec)
    shared_rows = req.spec.kv_shared_layers
    req = replace(req, spec=with_kv_shared_rows(req.spec))
    cacheless = req.spec.cacheless_layers
    req = replace(req, spec=with_nas_rows(req.spec))
    # the decoder layers whose rows the pool holds though they write nothing
    nas_rows = cacheless - req.spec.cacheless_layers
    attn_dp.check(req)
    gpu0 = req.gpus[0] if req.gpus else None
    # DeepSeek Sparse Attention: DeepSeek-V3.2 and GLM-5 (an index key a token), GLM-5.3-Flash
    # (one a pool of index_kpool tokens); MiniMax-M3's sparse pool
    dsa = has_kind(req.spec, LayerKind.INDEXER) or req.spec.model_type in GLM5_NEXT_TYPES
    minimax = req.spec.model_type in MINIMAX_M3_TYPES
    if req.settings.attention_backend is not None:
        # --attention-backend as SGLang reads it (its aliases), refused where SGLang refuses it
        # or where a sparse pool is sized with its own backend
        sparse = ("dsv4" if has_kind(req.spec, LayerKind.COMPRESSED) else "dsa" if dsa
                  else "minimax" if minimax else None)
        word = check_backend(req.spec, gpu0, req.settings.attention_backend,
                             draft=bool(req.cache.mtp), sparse=sparse)
        req = replace(req, settings=replace(req.settings, attention_backend=word))
    else:
        check_default_backend(req.spec, gpu0)
    if has_kind(req.spec, LayerKind.COMPRESSED):
        refuse_compressed(req, "SGLang")
        from .sglang_dsv4 import plan as dsv4_plan
        return dsv4_plan(req)
    s, opts = req.settings, req.cache
    k_name = single_format(NAME, opts, FORMATS)
    if req.spec.model_type in GLM5_NEXT_TYPES:
        refuse_glm5_next(req.spec)
    kpool, index_kind = dsa_index_pool(req.spec), dsa_index_kind(req.spec)
    # an index key's bytes a token: 132 / index_kpool, rounded up
    index_token = -(-DSA_INDEX_ROW // kpool)
    latent = dsa_latent(req.spec)
    dsa_flag: str | None = None
    dsa_bytes = 0
    if dsa:
        dsa_flag, dsa_bytes = dsa_dtype(req.spec, gpu0, opts)
        k_name = dsa_flag or "auto"
    sliding = (req.spec.model_type in HYBRID_SWA_TYPES
               and any(g.kind in (LayerKind.SLIDING, LayerKind.CHUNKED) for g in req.spec.groups))
    # the backend SGLang picks itself and the page it runs (sglang_page: SM100's backends
    # page the cache themselves)
    default = resolve_page(req.spec, gpu0, s.page_size, draft=bool(req.cache.mtp),
                           radix_cache=s.radix_cache, backend=s.attention_backend)
    # nvfp4, fp4_mx_block16, mxfp8: the layout the card gives them (sglang_kv4)
    kv4 = kv4_layout(opts.kv_k.name, req.spec, gpu0,
                     page_asked=s.page_size, sliding=sliding, mtp=req.cache.mtp,
                     hicache=bool(s.offload_bytes), prefill=s.prefill_kv_cache_dequant_dtype,
                     special="MiniMax-M3 sparse pool" if minimax else None,
                     default=default.backend or "trtllm_mha", given=s.attention_backend)
    index_bytes = minimax_index_bytes(req, k_name) if minimax else 0
    # a ModelOpt checkpoint calibrated for an FP8 KV cache turns auto into fp8_e4m3 (a DSA
    # model's auto is resolved by the card first): a 16-bit plan names its dtype, bf16
    pinned_16 = not dsa and k_name == "auto" and fp8_kv_checkpoint(req.spec)
    if pinned_16:
        k_name = "bf16"
    # the dtype the KV pools log (a DSA model's auto is bfloat16 below SM100)
    logged = pool_dtype(req.spec, "bfloat16" if dsa and k_name == "auto" else k_name)
    # EAGLE/NEXTN with the model's MTP head (sglang_mtp): None without --mtp
    sp = mtp_resolve(req, sliding=sliding)
    draft_kv = draft_format(req)
    note_hybrid = ""
    p = req.parallel
    # a logical page owns whole pools of index keys: 64 × index_kpool tokens
    # (a block-scaled cache's backend sets its page below, kv4.page)
    page = (DSA_PAGE * kpool if dsa else MINIMAX_PAGE if minimax
            else default.page if kv4 is None else (s.page_size or 1))
    # --dtype auto serves a float32 checkpoint in 16 bits (FP16 for FP32 models; Gemma-2 and
    # Gemma-3, which overflow in FP16, in BF16): 2 bytes a weight either way
    weights, shares = rank_weights(req, STAGE_SPLIT, f32_as="bf16")
    # --attn-dp-size: attention and the input embedding over the attention group, a cache of
    # its heads for its own requests; each group sees `per` of the sequences
    tp_shares = shares
    shares = attn_dp.shares(req, weights, shares, STAGE_SPLIT)
    check_budget(req, shares)
    attn_more = max(a.weights_bytes - b.weights_bytes
                    for a, b in zip(shares, tp_shares, strict=True))
    groups, per = p.attn_dp, attn_dp.per_group(req)
    # a float32 router where the model code builds one (FP32_ROUTER_TYPES)
    router_extra = [router_fp32_bytes(req, sh.stage) for sh in shares]
    shares = [replace(sh, weights_bytes=sh.weights_bytes + x)
              for sh, x in zip(shares, router_extra, strict=True)]
    # --enable-lora: the pool of adapter slots, allocated after the weights and before the
    # KV cache is profiled (so it lowers the free memory the profile reads, as weights do)
    lora = for_sglang(s.lora, req.spec, p) if s.lora is not None else None
    adapters = sglang_lora_bytes(req.spec, lora, p) if lora is not None else 0
    shares = [replace(sh, weights_bytes=sh.weights_bytes + adapters) for sh in shares]
    # an EAGLE head's own embedding (and EAGLE-1's lm_head) are resident until the draft
    # worker borrows the target's, after the target's pool is sized; its token map is still
    # in host memory then (eagle_worker_v2.py init_lm_head)
    borrowed = head_borrowed(req)
    shares = [replace(sh, weights_bytes=sh.weights_bytes + borrowed) for sh in shares]
    # --cpu-offload-gb: OffloaderV1 walks each stage's decoder layers as vLLM's UVA offloader
    # does (vllm_offload), and what it moves leaves the card
    moved, shares = offload_shares(req, weights, shares, STAGE_SPLIT)
    # every rank sizes its pool from the free memory of the most loaded rank (a world-group
    # minimum) over its own layers' cell; the pipeline keeps the smallest pool, the stage
    # with the most KV layers (model_runner_kv_cache_mixin profile_max_num_token)
    if dsa:
        # the profiler's cell (model_executor/pool_configurator.py _compute_cell_size): the
        # latent row calculate_mla_kv_cache_dim gives (576 values, or FlashMLA's 656-byte fp8
        # row) at the dtype's bytes in every layer of the stage, and the 132-byte
        # indexer key in the layers that run their own indexer (_compute_dsa_indexer_cell_size:
        # a layer dsa_layer_skips_topk marks shared, reusing another's top-k, gets no index-K
        # where _should_elide_dsa_index_k, the default; the pool allocates likewise)
        rows = [(kind_layers(sh.spec, LayerKind.MLA) * dsa_row(dsa_bytes, latent)
                 + kind_layers(sh.spec, index_kind) * index_token, 0) for sh in shares]
    elif minimax:
        # MiniMaxSparseKVPool (pool_configurator.py _compute_cell_size, its minimax branch):
        # K and V of every layer in the main pool, and in each sparse layer one index head of
        # keys (and values where sparse_disable_index_value is 0) in the index dtype; the
        # index pools keep one head whatever the tensor parallelism
        main = [kv_row_bytes(sh.spec, opts.kv_k, opts.kv_v, (LayerKind.FULL,)) for sh in shares]
        index_rows = [sum(map(sum, minimax_index_pools(sh.spec))) * index_bytes
                      for sh in shares]
        rows = [(k + i, v) for (k, v), i in zip(main, index_rows, strict=True)]
    else:
        rows = [kv_row_bytes(sh.spec, opts.kv_k, opts.kv_v) for sh in shares]
    if kv4 is not None and kv4.workspace:
        # nvfp4 with FlashInfer's prefill: the fp8 dequant workspace, one layer's K and V a
        # token, logged with the K and V buffers (and on SM100 the scales' second layout)
        ws = [kv4_workspace(sh.spec) for sh in shares]
        rows = [(k + w, v + w) for (k, v), w in zip(rows, ws, strict=True)]
        if kv4.second_scales:
            more = [kv4_scales(sh.spec) for sh in shares]
            rows = [(k + a, v + b) for (k, v), (a, b) in zip(rows, more, strict=True)]
    binding = max(range(len(shares)), key=lambda i: sum(rows[i]))
    kb, vb = rows[binding]
    cell = max(1, kb + vb)
    stage = shares[binding].spec
    if kv4 is not None and kv4.page:
        page = kv4.page
    base_cell = cell
    if sp is not None:
        # the pool's attention layers (model_config num_attention_layers): a layer once, or
        # as often as it holds caches (LongCat-Flash's two attentions: num_hidden_layers × 2);
        # a DSA layer's indexer keys ride on its latent's layer
        attention_layers = sum(g.count for g in stage.groups
                               if not g.mtp and not g.kind.is_recurrent
                               and g.kind is not LayerKind.INDEXER)
        cell = mtp_cell(cell, attention_layers, sp, indexer_row=DSA_INDEX_ROW if dsa else 0,
                        indexer_layers=kind_layers(stage, index_kind) if dsa else None)
    # (GLM-5.3-Flash's open pools of index keys live beside the DSA pool, not in its slots)
    recurrent = [g for g in stage.groups if g.kind.is_recurrent and not g.mtp
                 and g.kind is not LayerKind.COMPRESSOR]
    # with the radix cache off a request holds one state slot (_calculate_mamba_ratio)
    per_running = 1 if not s.radix_cache else slots_per_request(req.spec.model_type,
                                                                req.parallel.pp)
    ssm_bytes = req.spec.ssm_pinned_bytes or MAMBA_SSM_BYTES
    conv_req = sum(g.count * g.conv_state_values * req.spec.dtype_bytes for g in recurrent)
    per_req = conv_req + sum(g.count * (g.state_values - g.conv_state_values) * ssm_bytes
                             for g in recurrent)
    draft_full = 0
    if sliding:
        fk, fv = kv_row_bytes(stage, opts.kv_k, opts.kv_v, (LayerKind.FULL, LayerKind.MLA))
        sk, sv = kv_row_bytes(stage, opts.kv_k, opts.kv_v,
                              (LayerKind.SLIDING, LayerKind.CHUNKED))
        if sp is not None and sp.cell_layers:
            # HybridSWAPoolConfigurator: a draft of full attention (a draft model's or head's
            # own path, eagle_draft_swa_num_layers None) adds its layers to the full side at
            # the target's bytes a full layer (_full_per_token × draft layers)
            full_layers = sum(g.count for g in stage.groups
                              if not g.mtp and g.kind in (LayerKind.FULL, LayerKind.MLA))
            draft_full = (fk + fv) // max(1, full_layers) * sp.cell_layers
            base_cell, cell = fk + fv, fk + fv + draft_full

    window = swa_window(stage) if sliding else None
    # --disable-radix-cache with --max-running-requests (which the command always passes):
    # the window pool is sized from the requests (SWARequestCapPoolConfigurator)
    capped_swa = sliding and not s.radix_cache
    chunk = 0
    if capped_swa:
        if sp is not None:
            raise InputError("--disable-radix-cache with --mtp: the window pool SGLang then "
                             "sizes from the requests reserves draft tokens kvplan does not "
                             "size; plan one of them", field="disable_radix_cache")
        gpu0 = shares[0].gpu
        if gpu0 is None and not s.chunked_prefill_size:
            raise InputError("--disable-radix-cache: the window pool SGLang then sizes holds two "
                             "prefill chunks, whose size follows the card: give --gpu or "
                             "--chunked-prefill-size", field="gpu")
        # the chunk a group prefills: the card's default or the one given, divided among the
        # attention groups (_handle_data_parallelism)
        chunk = (prefill_chunk(gpu0.total_bytes, p.tp, s.chunked_prefill_size)
                 if gpu0 is not None else s.chunked_prefill_size or 0) // groups

    def swa_of(full: int, running: int, profiled: bool = True) -> int:
        """The window pool beside ``full`` full-layer tokens: swa_full_tokens_ratio of them,
        or with the radix cache off the request cap, aligned to the page (from a
        --max-total-tokens count, no more than it)."""
        if not capped_swa:
            return swa_pool_tokens(full, page, swa_ratio)
        cap = swa_request_cap(window or 0, page, running, chunk, overlap=p.pp == 1)
        return cap if profiled else min(cap, s.max_total_tokens or cap)
    # --swa-full-tokens-ratio: the window pool's tokens a full-layer token
    swa_ratio = s.swa_full_tokens_ratio if s.swa_full_tokens_ratio is not None else SWA_RATIO

    def pools(running: int) -> Pools:
        """The pools SGLang sizes with ``running`` requests an attention group
        (--max-running-requests ``running`` × attn_dp)."""
        rest, budget, frac = kv_budget(req, shares, running * groups)
        slots = swa = None
        total = rest
        if recurrent:
            # the Mamba state pool takes ratio / (1 + ratio) of what is left, less the pool's
            # padding slot; KV gets what the slots and the padding slot leave
            # (kv_cache_configurator _handle_max_mamba_cache)
            # the draft tokens' intermediate states (--mtp) come out of the Mamba share too
            slots, states = mamba_slots_for(
                rest, per_req, draft_tokens=sp.draft_tokens if sp is not None else 0,
                per_running=per_running, running=running,
                ratio=(MAMBA_RATIO if s.mamba_full_memory_ratio is None
                       else s.mamba_full_memory_ratio),
                fixed=(s.max_mamba_cache_size // groups if s.max_mamba_cache_size is not None
                       # radix cache off: a slot a running request of the group
                       else max(1, running) if not s.radix_cache else None))
            rest -= states
            total = rest
            if slots > 0:
                rest -= (slots + 1) * per_req
        if capped_swa:
            # the window pool fixed by the requests, the full pool from what it leaves
            # (SWARequestCapPoolConfigurator.calculate_pool_sizes)
            n = int((max(0, rest) - swa_of(0, running) * (sk + sv)) // (fk + fv)) // page * page
            n = max(0, n)
        elif sliding:
            # one pool for full layers and one for window layers, sized so the window pool
            # holds swa_full_tokens_ratio as many tokens (pool_configurator
            # HybridSWAPoolConfigurator)
            n = int(max(0, rest) / ((fk + fv) + draft_full + swa_ratio * (sk + sv)))
            n = n // page * page
        else:
            n = max(0, rest) // cell // page * page
        profiled = n
        if s.max_total_tokens is not None and s.max_total_tokens < n:
            # --max-total-tokens lowers the profiled count, never raises it; the pools are
            # then sized again from it, to the page (_apply_token_constraints,
            # calculate_pool_sizes_from_max_tokens)
            n = s.max_total_tokens // page * page
        if sliding:
            swa = swa_of(n, running, profiled=n == profiled)
        return Pools(total, rest, budget, frac, n, swa, slots, profiled)

    def refusal(pl: Pools) -> str | None:
        """What SGLang raises at start-up with these pools (None: it starts)."""
        return startup_error(pl, per_req=per_req, per_running=per_running, window=window,
                             page=page, weights_bytes=free_memory(req, shares)
                             if pl.budget is not None else None)

    pl = pools(per)
    rest, budget, frac, tokens, swa_tokens, mamba_slots = (pl.rest, pl.budget, pl.frac, pl.tokens,
                                                           pl.swa, pl.slots)
    refused = refusal(pl)
    if mamba_slots is not None and mamba_slots > 0:
        note_hybrid = (f"Mamba state pool: {mamba_slots:,} slots of {per_req / MiB:.1f} MiB "
                       f"and a padding slot; max_running_requests ≤ "
                       f"{mamba_slots // per_running:,} ({per_running} slots a request)")

    slots_ok = mamba_slots is None or mamba_slots // per_running >= per

    def fits_len(length: int) -> bool:
        return length == 0 or (refused is None and tokens >= length * per and slots_ok)

    max_ctx = largest(fits_len, 1 << 31)
    # a request of the context holds its tokens in the pool and, on a hybrid model, 3 slots
    # of the Mamba state pool (5 with the extra buffer)
    max_seqs = 0 if refused else tokens // req.context
    if mamba_slots is not None:
        max_seqs = min(max_seqs, max(0, mamba_slots) // per_running)
    if fraction_depends_on_running(req) or (recurrent and not s.radix_cache):
        # SGLang's own fraction reserves 2 MiB a decode graph up to --max-running-requests
        # (kvplan passes the sequences), and with the radix cache off the Mamba slots are one
        # a running request, so the pool shrinks as the sequences grow: the most that fit is
        # searched with the pool each count would get
        def seqs_fit(n: int) -> bool:
            got = pools(n)
            return (got.tokens >= n * req.context and refusal(got) is None
                    and (got.slots is None or got.slots // per_running >= n))

        one = pools(1)
        top = one.tokens // req.context if refusal(one) is None else 0
        if one.slots is not None and (s.radix_cache or s.max_mamba_cache_size is not None):
            # (slots that follow the running requests do not bound them)
            top = min(top, max(0, one.slots) // per_running)
        max_seqs = largest(seqs_fit, top)
    mla = any(g.kind == LayerKind.MLA for g in req.spec.groups)

    def allocated(n: int, k_row: int, v_row: int, label: str = "") -> str:
        # each pool holds its tokens and one more page (memory_pool.py); the MLA pool holds
        # one latent per token and prints one figure
        k_gb, v_gb = (n + page) * k_row / GiB, (n + page) * v_row / GiB
        return pool_line(logged, n, k_gb + v_gb if mla else k_gb, None if mla else v_gb,
                         label=label)

    if dsa:
        # the pool (NSATokenToKVPool / DSATokenToKVPool): tokens + page latent rows of
        # calculate_mla_kv_cache_dim (656 bytes for fp8 under FlashMLA, 576 values × 2 for
        # bfloat16) and (tokens + page + 1) // page pages of page × 132 indexer bytes, in
        # every layer (the indexer pages in those that run their own indexer); the log's
        # figure sums both
        layers = kind_layers(stage, LayerKind.MLA)
        indexers = kind_layers(stage, index_kind)
        row = dsa_row(dsa_bytes, latent)
        pool_bytes = dsa_pool_bytes(tokens, layers, row, indexers, kpool)
        lines = [pool_line(logged, tokens, pool_bytes / GiB)]
    elif minimax:
        # the main pool, then the index pools of the sparse layers that keep index values and
        # of those that keep keys only (a K-only pool logs a V size of 0), each of tokens + a
        # page rows
        mk, mv = main[binding]
        lines = [allocated(tokens, mk, mv)]
        idx_dtype = "torch.float8_e4m3fn" if index_bytes == 1 else pool_dtype(req.spec, "auto")
        for ik, iv in minimax_index_pools(stage):
            if ik:
                lines.append(pool_line(idx_dtype, tokens, (tokens + page) * ik * index_bytes / GiB,
                                       (tokens + page) * iv * index_bytes / GiB))
    elif swa_tokens is not None:
        # the full layers' pool first, then the window layers' (swa_memory_pool.SWAKVPool)
        used = ((swa_tokens + page) * (sk + sv) + (tokens + page) * (fk + fv)) / GiB
        lines = [f"Use sliding window memory pool. full_layer_tokens={tokens}, "
                 f"swa_layer_tokens={swa_tokens}", allocated(tokens, fk, fv, "Full"),
                 allocated(swa_tokens, sk, sv, "SWA"),
                 f"SWAKVPool mem usage: {used:.2f} GB, swa size: {swa_tokens}, full size: "
                 f"{tokens}"]
    elif kv4 is not None and kv4.log_without_scales:
        # MLATokenToKVPoolFP4 logs its e2m1 latents, not their scales
        lines = [allocated(tokens, sum(g.count * g.n_kv_heads * g.head_dim_k // 2
                                       for g in stage.groups if g.kind is LayerKind.MLA), 0)]
    else:
        lines = [allocated(tokens, kb, vb)]
    if mamba_slots is not None and mamba_slots > 0 and sp is None:
        # the Mamba state pool is built (with the request pool) before the KV pools: its
        # slots and a padding slot of conv states in the model's dtype and SSM states
        # (memory_pool.py MambaPool; a draft's intermediate states change the line)
        held = mamba_slots + 1
        lines.insert(1 if swa_tokens is not None else 0,
                     f"Mamba Cache is allocated. max_mamba_cache_size: {mamba_slots}, "
                     f"conv_state size: {held * conv_req / GiB:.2f}GB, ssm_state size: "
                     f"{held * (per_req - conv_req) / GiB:.2f}GB")
    if sp is not None and sp.cell_layers and not recurrent:
        # the draft worker's pool: the same token count over the draft's layers
        draft_bytes = dsa_pool_bytes(tokens, sp.draft_layers, row) if dsa else None
        # a draft model's or head's worker serves --kv-cache-dtype auto in its own dtype
        # (kv_cache_dtype.py: the draft runner's model dtype)
        own = (pool_dtype(req.spec.draft.spec, k_name)
               if req.spec.draft is not None and k_name == "auto" else logged)
        d_opts = opts
        if draft_kv is not None:
            own, d_opts = f"torch.{FLAG_DTYPES[draft_kv.name]}", in_format(opts, draft_kv)
        lines.append(mtp_draft_line(stage, d_opts, tokens, page, own, pool_bytes=draft_bytes))
    capped = running_cap_warning(per, tokens, mamba_slots, per_running)
    if refused:
        # it raises before the pools are built: nothing of theirs is logged
        lines = [refused]
    else:
        at = 1 if swa_tokens is not None else 0
        cap = s.max_total_tokens
        if cap is not None and cap > pl.profiled:
            # _apply_token_constraints warns and keeps the profiled count
            lines.insert(at, f"max_total_tokens={cap} is larger than the profiled value "
                             f"{pl.profiled}. Use the profiled value instead.")
            at += 1
        elif swa_tokens is not None and tokens < pl.profiled:
            # the pools were split once from the profile, then again from the cap
            lines.insert(0, f"Use sliding window memory pool. full_layer_tokens={pl.profiled}, "
                            f"swa_layer_tokens={swa_of(pl.profiled, per)}")
            at += 1
        if capped:
            # resolve_max_num_reqs warns before the pools are built
            lines.insert(at, capped)
        if budget is not None and multimodal_reserve(req.spec):
            # logged while the budget is profiled, before the pools are sized
            lines.insert(0, f"Reserving {VLM_CACHE_BYTES / MiB / 1024:.2f} GB of the KV budget "
                            "for post-sizing multimodal allocations (feature-transport pools + "
                            "embedding cache).")
        if tokens < req.context:
            lines.append(short_pool_line(tokens, req.context))
    if frac is not None:
        lines.insert(0, f"mem_fraction_static={frac}")
    cmd = launch_command(req, k_name, frac)
    notes = [n for n in (note_hybrid, rule_note(req, frac), long_context_note(req)) if n]
    if default.note and not (dsa or minimax) and kv4 is None:
        notes.append(default.note)
    if kv4 is not None:
        if kv4.backend and not s.attention_backend:
            cmd.append(f"--attention-backend {kv4.backend}")
        notes += kv4.notes
        if kv4.page and s.page_size and s.page_size != kv4.page:
            notes.append(f"SGLang replaces --page-size {s.page_size} with that backend's "
                         f"{kv4.page}-token pages (a warning at start-up)")
        if kv4.workspace:
            notes.append(f"nvfp4's fp8 prefill workspace: {2 * kv4_workspace(stage):,} bytes a "
                         f"token a rank of the {cell:,}-byte cell")
    if lora is not None:
        from ..units import format_bytes

        notes.append(f"--enable-lora: a pool of {lora.slots} adapter slots of rank {lora.rank} "
                     f"in 16 bits for {', '.join(lora.targets)} in every layer, "
                     f"{format_bytes(adapters)} a card, allocated before the KV cache is "
                     "profiled (--max-loras-per-batch, --max-lora-rank and "
                     "--lora-target-modules size it; the adapters themselves wait in host "
                     "memory, up to --max-loaded-loras)")
    # what --max-total-tokens leaves unallocated of the budget the profile gave the pools
    unused = 0
    if not refused and tokens < pl.profiled:
        if swa_tokens is not None:
            unused = ((pl.profiled - tokens) * (fk + fv)
                      + (swa_of(pl.profiled, per) - swa_tokens) * (sk + sv))
        else:
            unused = (pl.profiled - tokens) * cell
        notes.append(f"--max-total-tokens {s.max_total_tokens:,} caps the KV pool at "
                     f"{tokens:,} tokens of the {pl.profiled:,} its budget holds: "
                     f"{unused / GiB:.2f} GiB a rank stays free")
    if sp is not None:
        cmd += sp.flags()
        notes += mtp_notes(sp, hybrid=bool(recurrent), cell=cell, base_cell=base_cell)
        if req.spec.draft is not None:
            # the cell reserved the target's bytes a layer for each draft layer; the draft's
            # worker allocates its own geometry (kv_cache_configurator.py: "assumes the draft
            # shares the target's per-layer KV size")
            actual = sum(draft_row_bytes(req.spec, draft_kv or opts.kv_k,
                                         draft_kv or opts.kv_v, p.tp))
            reserved = cell - base_cell
            if actual > reserved:
                notes.append(f"the draft's pool takes {actual:,} bytes a token per rank where "
                             f"the cell reserved {reserved:,} (the target's bytes a layer): "
                             f"the rest, {(tokens + page) * (actual - reserved) / GiB:.2f} GiB, "
                             "comes out of the memory mem_fraction_static leaves")
        if draft_kv is not None:
            cmd.append(f"--speculative-draft-kv-cache-dtype {draft_kv.name}")
            notes.append(f"the draft's pool in {draft_kv.name} "
                         "(--speculative-draft-kv-cache-dtype); the cell still reserves the "
                         "target's bytes a layer for it, so what it saves is free memory "
                         "(raise --mem-fraction-static to turn it into KV capacity)")
    if minimax:
        mk, mv = main[binding]
        kept = "fp8 (as the fp8_e4m3 cache)" if index_bytes == 1 else "the model's dtype"
        notes.append(f"MiniMax sparse pool: {cell:,} bytes a token per rank, {mk + mv:,} of them "
                     f"K and V of every layer and {cell - mk - mv:,} the sparse layers' index "
                     f"head in {kept}, which every rank keeps whole; pages of {page} tokens, "
                     "the sparse attention's block")
    if pinned_16:
        notes.append("the checkpoint's kv_cache_quant_algo FP8 makes SGLang's --kv-cache-dtype "
                     "auto an fp8 cache: this 16-bit plan passes --kv-cache-dtype bf16 (plan "
                     "--kv fp8 for what auto gives)")
    if groups > 1:
        notes.append(attn_dp.note(req, attn_more, tokens, per))
    if capped_swa and swa_tokens is not None:
        notes.append(f"--disable-radix-cache: the window pool holds {swa_tokens:,} tokens, what "
                     f"{per:,} running request{'s' if per > 1 else ''} (a window of {window:,}, "
                     f"{SWA_EVICTION_INTERVAL} tokens between evictions and two pages each) "
                     f"and {2 if p.pp == 1 else 1} prefill chunk{'s' if p.pp == 1 else ''} of "
                     f"{chunk:,} need (SWARequestCapPoolConfigurator); the full pool takes the "
                     "rest")
    if refused:
        notes.insert(0, f"SGLang refuses to start: {startup_reason(refused)}")
    if nas_rows:
        notes.append(f"SGLang's token pool holds K and V rows for the {nas_rows} decoder layers "
                     "whose attention is a no-op too (never written: DeciLMForCausalLM builds "
                     "every layer, and the pool spans them)")
    if shared_rows:
        notes.append(f"SGLang's pools hold rows for the {shared_rows} KV-shared layers too "
                     "(never written: they read an earlier layer's cache)")
    if any(router_extra):
        notes.append(f"SGLang keeps this model's MoE router in float32 "
                     f"({FP32_ROUTER_TYPES[req.spec.model_type]}): "
                     f"{max(router_extra) / MiB:,.1f} MiB a rank more than the weight estimate's "
                     "router")
    if dsa:
        if s.page_size and s.page_size != page:
            notes.append(f"SGLang forces {page}-token pages for DeepSeek Sparse Attention; "
                         f"--page-size {s.page_size} is ignored")
        where = (f"all {layers} layers" if indexers == layers else
                 f"the {indexers} of {layers} layers that run their own indexer")
        keys = ("132-byte indexer keys" if kpool == 1 else
                f"a 132-byte index key a pool of {kpool} tokens "
                f"({index_token} B a token)")
        rope = latent - DSA_KV_LORA
        fp8 = (f" (FlashMLA's fp8 layout: 512 values, 4 scales"
               f"{f', the rotary {rope} in bf16' if rope else ''})")
        notes.append(f"DSA pool: {kb:,} bytes a token per rank in the profiler's cell (a "
                     f"{row:,}-byte latent row{fp8 if dsa_bytes == 1 else ''} in all {layers} "
                     f"layers + {keys} in {where})")
        if req.spec.index_tail:
            # index_kpool_compress: the pool keeps each request slot's open pool, raw keys
            # and gate scores in bfloat16, after it is sized (memory_pool.py
            # _init_kpool_compress_tail_buffers)
            per_slot = 2 * kpool * DSA_INDEX_WIDTH * 2 * indexers
            notes.append(f"index_kpool_compress: {per_slot / 1024:,.0f} KiB a request slot "
                         "beside the DSA pool (each open pool's raw index keys and gate scores "
                         "in bfloat16), outside the profiler's cell")
        if dsa_flag is None:
            notes.append("--kv-cache-dtype auto: SGLang runs a DSA model in bfloat16 on this "
                         "card (fp8_e4m3 from SM100)")
    extra: dict[str, Any] = {}
    if s.cpu_offload_bytes:
        cmd.append(f"--cpu-offload-gb {s.cpu_offload_bytes / GiB:g}")
        gpu0 = shares[0].gpu
        chunk = (prefill_chunk(gpu0.total_bytes, p.tp, s.chunked_prefill_size)
                 if gpu0 is not None else s.chunked_prefill_size or 8192)
        # OffloaderV1 copies a layer's moved parameters to the card whole in each forward
        # pass, the experts no step routes to as well
        extra["cpu_offload"] = offload_extra(req, moved, shares, chunk, whole=True)
        notes.append(offload_note(s.cpu_offload_bytes, moved, p.tp * p.dp, copies=True))
    offload_tokens = 0
    if s.offload_bytes:
        offload_tokens = s.offload_bytes // cell
        cmd.append(f"--enable-hierarchical-cache --hicache-size {s.offload_bytes / GiB:g}")
        notes.append(f"HiCache host tier holds about {offload_tokens:,} more tokens per rank")
    return EngineReport(
        engine=NAME,
        budget_bytes=budget,
        weights_bytes=max(sh.weights_bytes for sh in shares) - adapters - borrowed,
        overheads=(("CUDA context before load", PRELOAD),
                   *([("EAGLE head's own embedding while the pool is sized", borrowed)]
                     if borrowed else []),
                   *([(f"LoRA pool ({lora.slots} × rank {lora.rank})", adapters)]
                     if lora is not None else [])),
        kv_pool_bytes=max(0, rest) - unused,
        kv_tokens=tokens * groups * p.dp,
        blocks=tokens // page,
        block_tokens=page,
        max_concurrency=0.0 if refused else tokens * groups / max(1, req.context),
        max_sequences=max_seqs * groups,
        max_context=max_ctx,
        fits=refused is None and tokens >= req.context * per and slots_ok,
        refusal=startup_reason(refused) if refused else "",
        log_lines=tuple(lines),
        command=" ".join(cmd),
        notes=tuple(notes),
        binding_stage=binding,
        offload_tokens=offload_tokens,
        extra={"mem_fraction_static": frac, "swa_tokens": swa_tokens, "mamba_slots": mamba_slots,
               "mamba_slots_per_request": per_running if mamba_slots is not None else None,
               "cell_bytes": cell, "weights": weights.format, **extra,
               **({"lora": {"max_loras": lora.slots, "max_lora_rank": lora.rank,
                            "lora_target_modules": list(lora.targets),
                            "bytes_per_card": adapters}} if lora is not None else {})},
    )
