"""TensorRT-LLM (PyTorch backend) allocation rules.

Sources read (NVIDIA/TensorRT-LLM): ``tensorrt_llm/_torch/pyexecutor/_util.py``
(``KvCacheCreator``: available = (total − peak) × ``free_gpu_memory_fraction`` (0.9) after a
profiling pass), ``tensorrt_llm/_torch/pyexecutor/resource_manager.py``
(``get_cache_size_per_token``: 2 × layers × head_dim × KV heads // tp × dtype bytes, MLA one
latent; ``tokens_per_block`` 32), ``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``
(``[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N).``, N a whole number of
blocks), ``tensorrt_llm/_torch/pyexecutor/mamba_cache_manager.py``
(``_estimate_mamba_hybrid_cache_cost``: a hybrid model's recurrent state is a fixed cost of
max_batch_size × pp + 1 slots, taken from the KV budget before it is divided by the bytes per
token), ``tensorrt_llm/_torch/pyexecutor/config_utils.py`` @00679c66 (``is_kimi_linear``: Kimi-K3
and Kimi-Linear take that hybrid path; ``extract_mamba_kv_cache_params``: their KDA state in
float32 whatever the checkpoint dtype), ``tensorrt_llm/_torch/models/_arch_index.py`` (the architectures the PyTorch backend
registers; any other stops with "Unknown architecture for AutoModelForCausalLM"),
``tensorrt_llm/_torch/attention_backend/sparse/dsa/cache_manager.py`` (``DSACacheManager``:
a DeepSeek Sparse Attention model's token costs its MLA latent at the KV dtype plus an fp8
indexer key of ``index_head_dim + index_head_dim // 128 × 4`` bytes in each layer that runs an
indexer) and ``tensorrt_llm/llmapi/llm_args.py`` (``DeepSeekSparseAttentionConfig``: which
layers those are).
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import InputError
from ..formats import get_format
from ..gpus import GPU
from ..kv import kv_row_bytes
from ..model import LayerKind, ModelSpec, Module
from ..parallel import Parallel, rank_spec, trtllm_stage_layers
from ..plan import MAX_SEQUENCES, largest
from ..units import format_bytes
from ..weights import Weights, module_bytes
from .base import (
    EngineReport,
    EngineRequest,
    GiB,
    MiB,
    RankShare,
    encoder_bytes,
    fp8_kv_checkpoint,
    has_kind,
    model_ref,
    need_gpu,
    parallel_flags,
    rank_weights,
    refuse_layout,
    refuse_nas_layout,
    single_format,
    stage_part,
)

NAME = "trtllm"
#: --pp: the remainder of the layers goes to the first stages (mapping.py Mapping.pp_layers)
STAGE_SPLIT = trtllm_stage_layers
FRACTION = 0.9
TOKENS_PER_BLOCK = 32
FORMATS = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8", "nvfp4": "nvfp4"}
#: CUDA context, cuBLAS and runtime buffers outside the KV pool (rough)
RUNTIME = int(1.0 * GiB)
#: model types of catalog architectures the PyTorch backend registers no model class for
#: (models/_arch_index.py MODEL_ARCH_TO_MODULE): DeepSeek-V2 (only V3/V3.2 are there), PhiMoE,
#: OLMo 3, LFM2 and LFM2-MoE, MiniMax-M1 (lightning attention), Gemma 2 (only Gemma 3/4 are
#: there), ChatGLM / GLM-4 (only the GLM-4.5 MoE is there), ERNIE-4.5, Apertus, Muse-Glimmer
#: and MiMo-V2-Flash (no MiMo class at all)
UNSUPPORTED_TYPES = {"deepseek_v2": "DeepseekV2ForCausalLM", "phimoe": "PhiMoEForCausalLM",
                     "gemma2": "Gemma2ForCausalLM", "chatglm": "ChatGLMModel",
                     "olmo3": "Olmo3ForCausalLM", "lfm2": "Lfm2ForCausalLM",
                     "lfm2_vl": "Lfm2VlForConditionalGeneration",
                     "minimax_m1": "MiniMaxM1ForCausalLM", "lfm2_moe": "Lfm2MoeForCausalLM",
                     "ernie4_5_moe": "Ernie4_5_MoeForCausalLM", "apertus": "ApertusForCausalLM",
                     "muse_glimmer_text": "MuseGlimmerForConditionalGeneration",
                     "mimo_v2_flash": "MiMoV2FlashForCausalLM",
                     # no Zamba2, RWKV or LongCat-Flash class in the index either
                     "zamba2": "Zamba2ForCausalLM", "rwkv7": "RWKV7ForCausalLM",
                     "longcat_flash": "LongcatFlashForCausalLM",
                     "longcat_flash_ngram": "LongcatFlashNgramForCausalLM",
                     "ouro": "OuroForCausalLM",
                     # nor LFM3 (LFM2's classes are missing too)
                     "lfm3": "Lfm3ForCausalLM"}
#: by config architecture, where the model_type is a text model's the backend has (Voxtral's
#: text_config is a llama): no Voxtral class is registered in models/_arch_index.py. Step-3.7's
#: text decoder (modeling_step3p7.py) registers as Step3p5ForCausalLM and its VLM wrapper as
#: Step3p7ForConditionalGeneration; Step-3.7-Flash's config names Step3p7FlashForCausalLM,
#: which neither the index nor AutoModelForCausalLM._resolve_class (an Eagle3 rename only) maps
UNSUPPORTED_ARCHS = {"VoxtralForConditionalGeneration": "voxtral",
                     "Step3p7FlashForCausalLM": "step3p7"}
#: models whose KV layout in TensorRT-LLM's PyTorch backend was not read from its source:
#: Step-3.7's per-kind KV heads under its registered architectures, and Gemma-3n (no model
#: class for it was read)
LAYOUT_UNKNOWN = {
    "step3p7": "Step-3.7's sliding-window cache",
    "gemma3n": "a cache for Gemma-3n (KV-shared layers, AltUp, per-layer embeddings)",
    "gemma3n_text": "a cache for Gemma-3n (KV-shared layers, AltUp, per-layer embeddings)",
}
LAYOUT_UNKNOWN_ARCH = {
    # Devstral 2's text-only architecture is not in _arch_index.py MODEL_ARCH_TO_MODULE;
    # whether AutoModelForCausalLM rewrites it to a registered Mistral class was not read
    "Ministral3ForCausalLM": "whether the PyTorch backend builds Ministral3ForCausalLM (it is "
                             "not in models/_arch_index.py)",
}
#: Gemma 4 (31B, 26B-A4B): _util.py sends a config with two head widths
#: (config_utils.is_gemma4_hybrid) to KVCacheManagerV2, which gives each attention window a
#: pool group of its own (kv_cache/kv_cache_manager_v2.py @0004396, _build_base_config) and
#: lets the runtime storage manager split the device quota between them; kvplan does not
#: model that split (docs/ENGINES.md T0)
VSWA_V2_TYPES = frozenset({"gemma4", "gemma4_text"})
VSWA_V2_REASON = (
    "TensorRT-LLM sizes Gemma 4's cache with KVCacheManagerV2 "
    "(_torch/pyexecutor/kv_cache/kv_cache_manager_v2.py @0004396): one pool group for the "
    "sliding layers (256-wide heads), one for the full layers (512-wide), and the device quota "
    "split between them by its storage manager from a sample batch (kv_cache_config."
    "avg_seq_len, else one 2,049-token sequence), rounded to the pools' granularity and "
    "rebalanced while serving; kvplan does not model that split, so it does not size this "
    "model there; choose another engine")
#: model types whose recurrent state is Kimi Delta Attention: config_utils.py @00679c66
#: (extract_mamba_kv_cache_params) keeps it in float32 whatever the checkpoint or
#: mamba_ssm_cache_dtype says
KDA_TYPES = frozenset({"kimi_linear", "kimi_k3"})
KDA_STATE_BYTES = 4
#: recurrent-state slots beyond max_batch_size × pp: the one dummy request CUDA-graph padding
#: uses (mamba_cache_manager.py: num_reserved_dummy_slots=1)
DUMMY_SLOTS = 1
#: KV dtypes the DSA cache manager prices (dsa/cache_manager.py get_cache_size_per_token: the
#: latent at 2 bytes a value, 1 where the quant config has an fp8 KV cache); its nvfp4 and
#: SM120-only fp8_ds_mla layouts are not modeled
DSA_FORMATS = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8"}
#: the indexer key cache: fp8 values with one fp32 scale per 128 (indexer_k_dtype "fp8", the
#: default ModelConfig.from_pretrained sets for DeepseekV32ForCausalLM and GlmMoeDsaForCausalLM)
INDEXER_QUANT_BLOCK = 128
#: the indexer keys share the cache's tokens_per_block, and DeepGEMM's paged MQA-logits
#: kernel the indexer reads them with takes 64-token pages on sm90 and 32 or 64 on sm100
#: (csrc/apis/attention.hpp); NVIDIA's DSA recipes set 64
DSA_TOKENS_PER_BLOCK = 64
DSA_BLOCKS = {9: (64,), 10: (32, 64)}
#: the tokens a forward pass takes unless --max_num_tokens says otherwise (its activations are
#: estimated from them)
MAX_NUM_TOKENS = 8192
#: architectures whose input embedding every rank holds whole under tensor parallelism:
#: modeling_deepseekv3.py DeepseekV3Model builds embed_tokens as Embedding(vocab, hidden) with
#: no mapping (DeepSeek-V3/R1, Kimi-K2, and DeepSeek-V3.2, which subclasses it), and
#: modeling_glm.py Glm4Model likewise (GLM-4.5)
WHOLE_EMBEDDING = frozenset({"DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                             "Glm4MoeForCausalLM"})
#: architectures kvplan plans attention data parallelism (enable_attention_dp) for, whose model
#: files were read for it: under it each rank builds the attention with tp_size 1
#: (modules/attention.py, modules/mla.py) and embedding.py's LMHead drops its split (the
#: embedding and the lm_head whole); modeling_deepseekv3.py and modeling_glm.py build the dense
#: MLP layers and the shared experts whole too (_compute_mlp_tp_size and
#: _compute_shared_expert_tp_size return 1); modeling_qwen3_moe.py and modeling_gpt_oss.py have
#: neither. The routed experts stay split over the tp ranks (docs/ENGINES.md T1)
ADP_ARCHITECTURES = WHOLE_EMBEDDING | {
    "Qwen3MoeForCausalLM", "GptOssForCausalLM",
    # modeling_qwen3_next.py and modules/mamba/gdn_mixer.py (Qwen3_5MoeForCausalLM wraps it):
    # the Gated DeltaNet projections and conv1d whole too, the recurrent state of all the
    # linear heads a rank (mamba_cache_manager.py, config_utils.py: tp_size 1); the vision
    # tower whole (modeling_qwen3vl.py, overridden_tp_size 1). modeling_llama.py: Llama 4's
    # shared expert and dense feed-forward layers whole (overridden_tp_size 1)
    "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
    "Llama4ForConditionalGeneration"}
#: vision towers every rank holds whole: Llama 4's (modeling_llama.py Llama4VisionEncoder wraps
#: the Hugging Face modules, never split), and under attention DP only, Qwen3.5's
ENCODER_WHOLE = frozenset({"Llama4ForConditionalGeneration"})
ENCODER_WHOLE_ADP = frozenset({"Qwen3_5MoeForConditionalGeneration"})


def indexer_row_bytes(width: int) -> int:
    """Bytes one token's indexer key takes in one layer (cache_manager.py
    _get_indexer_k_cache_bytes_per_token, fp8)."""
    return width + width // INDEXER_QUANT_BLOCK * 4


def dsa_bytes_per_token(spec: ModelSpec, latent_bytes: int) -> int:
    """Bytes one token costs a rank holding ``spec`` of a DeepSeek Sparse Attention model: the
    MLA latent at ``latent_bytes`` a value in every attention layer, and the indexer key in the
    layers that run an indexer (shared-indexer layers own no row)."""
    total = 0
    for g in spec.groups_for(mtp=False):
        if g.kind is LayerKind.MLA:
            total += g.count * g.head_dim_k * latent_bytes
        elif g.kind is LayerKind.INDEXER:
            total += g.count * indexer_row_bytes(g.head_dim_k)
    return total


def dsa_block(gpu: GPU | None, asked: int | None) -> int:
    """tokens_per_block for a DeepSeek Sparse Attention model on ``gpu`` (64 unless asked),
    or a one-line refusal of a card or block size its DSA kernels do not take."""
    family = gpu.cuda_family if gpu is not None else None
    if gpu is not None and family not in DSA_BLOCKS:
        raise InputError(f"TensorRT-LLM's DSA kernels (FlashMLA sparse MLA, DeepGEMM indexer) "
                         f"are sized here on Hopper (sm90) and Blackwell (sm100), not on "
                         f"{gpu.name}", field="gpu")
    block = asked or DSA_TOKENS_PER_BLOCK
    allowed = DSA_BLOCKS[family] if family is not None else (32, 64)
    if block not in allowed:
        raise InputError(f"TensorRT-LLM's DSA indexer reads its keys with DeepGEMM's paged "
                         f"kernel, which takes {' or '.join(map(str, allowed))}-token blocks "
                         f"here, not {block}", field="tokens_per_block")
    return block


def check_dsa(spec: ModelSpec, fmt_name: str) -> str:
    """TensorRT-LLM's name for the KV dtype of a DeepSeek Sparse Attention model, or a one-line
    refusal of what its DSA cache manager is not sized for here."""
    name = DSA_FORMATS.get(fmt_name)
    if name is None:
        raise InputError(f"TensorRT-LLM's DSA cache is sized here for a bf16 (auto) or fp8 "
                         f"latent, not {fmt_name}", field="kv_k")
    if name == "auto" and spec.dtype not in ("bfloat16", "float16"):
        raise InputError(f"TensorRT-LLM's DSA cache manager prices an auto latent at 2 bytes a "
                         f"value; a {spec.dtype} checkpoint's is not established: choose "
                         "--kv fp8", field="kv_k")
    owners = {i for g in spec.groups if g.kind is LayerKind.INDEXER for i in g.layers}
    if 0 not in owners:
        # llm_args.py _is_full_indexer_layer forces layer 0 to run an indexer whatever the
        # config says; kvplan's layer kinds follow vLLM, which does not
        raise InputError("TensorRT-LLM gives layer 0 of a DSA model an indexer even where the "
                         "config shares it; this config's layout is not sized", field="engine")
    return name


def state_bytes_per_slot(spec: ModelSpec) -> int:
    """Recurrent state one sequence holds on a rank (``spec``: the rank's share): conv and SSM
    state both in the model's dtype, as the hybrid cache manager allocates them unless the
    config names a ``mamba_ssm_cache_dtype`` (config_utils.py get_states_bytes_per_layer; a
    checkpoint's ``mamba_ssm_dtype`` is deliberately not honoured for the cache); a KDA state
    (Kimi-Linear, Kimi-K3) in float32 always."""
    ssm = spec.ssm_cache_dtype_bytes or spec.dtype_bytes
    if spec.model_type in KDA_TYPES:
        ssm = KDA_STATE_BYTES
    return sum(g.count * (g.conv_state_values * spec.dtype_bytes
                          + (g.state_values - g.conv_state_values) * ssm)
               for g in spec.groups if g.kind.is_recurrent and not g.mtp)


def check_attention_dp(req: EngineRequest) -> None:
    """Refuse, in one line, an attention-DP plan kvplan does not size under TensorRT-LLM."""
    p, spec = req.parallel, req.spec
    if p.attn_dp != p.tp:
        raise InputError(f"TensorRT-LLM's attention DP (enable_attention_dp) makes each of the "
                         f"{p.tp} tensor-parallel ranks an attention group of its own: give "
                         f"attn_dp {p.tp}, or leave it out", field="attn_dp")
    if p.pp > 1 or p.dp > 1:
        raise InputError("TensorRT-LLM's attention DP is sized here over tensor parallelism "
                         "alone (no pp or dp)", field="attn_dp")
    if spec.architecture not in ADP_ARCHITECTURES:
        raise InputError(f"TensorRT-LLM's attention DP for {spec.architecture or 'this model'} "
                         "is not established (which of its modules each rank holds whole was "
                         "read for DeepSeek-V3 and V3.2, GLM-4.5, Qwen3-MoE, Qwen3-Next, "
                         "Qwen3.5-MoE, Llama 4 and gpt-oss only): plan it with tp alone",
                         field="attn_dp")


def whole_modules(spec: ModelSpec) -> list[Module]:
    """The decoder modules each rank holds whole under attention DP that tensor parallelism
    splits: every layer's but the routed experts (attention, dense MLP, shared experts)."""
    return [m for m in spec.params.modules
            if m.role == "" and m.names[0].startswith("layers.")]


def whole_weights(req: EngineRequest) -> tuple[int, int]:
    """(parameters, bytes) of whole_modules in the plan's weight format."""
    mods = whole_modules(req.spec)
    size = module_bytes(req.spec, req.weights, mods)
    if size is None:
        raise InputError("the weights of a GGUF checkpoint are not priced module by module, so "
                         "their split under attention DP is not known", field="attn_dp")
    return sum(m.params for m in mods), size


def whole_shares(req: EngineRequest, weights: Weights,
                 parts: list[RankShare]) -> tuple[Weights, list[RankShare]]:
    """The weights and each stage's share under tensor parallelism, with what every rank holds
    whole instead of a 1/tp share: WHOLE_EMBEDDING's input embedding on the first stage,
    ENCODER_WHOLE's vision tower spread over the stages with the body."""
    p, arch = req.parallel, req.spec.architecture
    if p.tp == 1 or req.weights_bytes is not None:
        return weights, parts
    enc = encoder_bytes(req) if arch in ENCODER_WHOLE else 0
    out = []
    for sh in parts:
        whole = [stage_part(enc, req, STAGE_SPLIT, sh.stage)]
        if sh.stage == 0 and arch in WHOLE_EMBEDDING:
            whole.append(weights.input_bytes)
        out.append(replace(sh, weights_bytes=sh.weights_bytes
                           + sum(x - x // p.tp for x in whole)))
    return weights, out


def adp_shares(req: EngineRequest, weights: Weights, parts: list[RankShare]) -> list[RankShare]:
    """Each rank's share under attention DP: the whole modules and the lm_head whole instead
    of a 1/tp share, and a cache of all KV heads (for the rank's own requests)."""
    p, spec = req.parallel, req.spec
    _, size = whole_weights(req)
    extra = size - size // p.tp
    if weights.lm_head_separate:
        extra += weights.head_bytes - weights.head_bytes // p.tp
    if spec.architecture not in WHOLE_EMBEDDING:
        # the embedding whole too (WHOLE_EMBEDDING's is whole without attention DP already);
        # a tied lm_head is this table
        extra += weights.input_bytes - weights.input_bytes // p.tp
    if spec.architecture in ENCODER_WHOLE_ADP:
        enc = encoder_bytes(req)
        extra += enc - enc // p.tp
    if req.weights_bytes is not None:
        extra = 0
    return [replace(sh, weights_bytes=sh.weights_bytes + extra,
                    spec=rank_spec(spec, Parallel(), sh.stage)) for sh in parts]


def sm100(gpu: GPU | None) -> bool:
    """Whether ``gpu`` is of the SM100 family (compute capability 10.x: B200, B300)."""
    return gpu is not None and gpu.compute_capability.split(".")[0] == "10"


def mla_copies(spec: ModelSpec, weight_format: str, gpu: GPU | None, heads: int) -> int:
    """Bytes a rank holds beside an MLA checkpoint's own weights, for ``heads`` query heads a
    layer (modules/attention.py MLA.create_weights; modeling_deepseekv3.py load_weights):
    ``k_b_proj_trans``, the key half of kv_b_proj transposed (heads × kv_lora_rank ×
    qk_nope_head_dim), copied in kv_b_proj's dtype: float8 with an fp32 scale per 128 × 128
    block where the checkpoint is block-scaled fp8, else the model's dtype; ``v_b_proj`` views
    kv_b_proj. With block-scaled fp8 on a card of the SM100 family (compute capability 10.x)
    both halves are also kept dequantized in bfloat16 (``k_b_proj_trans_dequant``,
    ``v_b_proj_dequant``, the cute-DSL BMM being off by default)."""
    layers = sum(len(g.layers) for g in spec.groups if g.kind is LayerKind.MLA and not g.mtp)
    mla = next((g for g in spec.groups if g.kind is LayerKind.MLA), None)
    nope, v = spec.qk_nope_head_dim, spec.mla_v_head_dim
    if not layers or mla is None or not nope or not spec.mla_qk_head_dim:
        return 0
    lora = mla.head_dim_k - (spec.mla_qk_head_dim - nope)
    fp8 = weight_format == "fp8"
    per = heads * lora * nope * (1 if fp8 else spec.dtype_bytes)
    if fp8:
        per += heads * (lora // 128) * (nope // 128) * 4
        if sm100(gpu):
            per += heads * lora * (nope + v) * 2
    return layers * per


def check_supported(spec: ModelSpec) -> None:
    refuse_nas_layout("TensorRT-LLM", spec, always="its per-layer KV head counts for no-op "
                      "blocks are not established")
    # a missing model class comes first: TensorRT-LLM stops there, before any cache exists
    arch = UNSUPPORTED_TYPES.get(spec.model_type)
    if spec.architecture in UNSUPPORTED_ARCHS:
        arch, mt = spec.architecture, UNSUPPORTED_ARCHS[spec.architecture]
        raise InputError(f"TensorRT-LLM's PyTorch backend has no {arch} model ({mt}); choose "
                         "another engine", field="engine")
    if arch is not None:
        raise InputError(f"TensorRT-LLM's PyTorch backend has no {arch} model "
                         f"({spec.model_type}); choose another engine", field="engine")
    refuse_layout("TensorRT-LLM", spec, LAYOUT_UNKNOWN, LAYOUT_UNKNOWN_ARCH)
    if spec.model_type in VSWA_V2_TYPES:
        raise InputError(VSWA_V2_REASON, field="engine")
    if spec.checkpoint is not None:
        raise InputError("TensorRT-LLM loads Hugging Face checkpoints, not GGUF files: plan the "
                         "model's config.json or Hub id with it, or this file with llama.cpp",
                         field="engine")


def plan(req: EngineRequest) -> EngineReport:
    s, opts = req.settings, req.cache
    check_supported(req.spec)
    if opts.mtp:
        # an MTP run adds the draft layers to the KV cache manager and extra KV tokens a
        # request (speculative_config), which kvplan does not model for TensorRT-LLM
        raise InputError("kvplan does not size TensorRT-LLM's MTP speculative decoding (the "
                         "draft layers in its KV cache manager, the extra KV tokens a request): "
                         "leave out --mtp, or choose --engine sglang or vllm", field="mtp")
    dsa = has_kind(req.spec, LayerKind.INDEXER)
    if dsa:
        single_format(NAME, opts, FORMATS)
        name = check_dsa(req.spec, opts.kv_k.name)
    else:
        name = single_format(NAME, opts, FORMATS)
    if name == "auto" and fp8_kv_checkpoint(req.spec):
        # ModelConfig.from_pretrained reads hf_quant_config's kv_cache_quant_algo into the
        # quant config, and kv_cache_config.dtype auto leaves it (TorchLlmArgs
        # sync_quant_config_with_kv_cache_config_dtype syncs fp8 only): the cache is fp8
        raise InputError("TensorRT-LLM keeps this checkpoint's KV cache in fp8 (its ModelOpt "
                         "kv_cache_quant_algo FP8 stays under kv_cache_config.dtype auto, and "
                         "no 16-bit dtype overrides it): plan it with --kv fp8", field="kv_k")
    frac = s.free_gpu_memory_fraction or FRACTION
    tpb = (dsa_block(req.gpus[0] if req.gpus else None, s.tokens_per_block) if dsa
           else s.tokens_per_block or TOKENS_PER_BLOCK)
    p = req.parallel
    if req.spec.model_type == "gpt_oss" and p.pp > 1:
        raise InputError("TensorRT-LLM's GptOssForCausalLM does not run pipeline parallelism "
                         "(modeling_gpt_oss.py asserts pp_size == 1): give tp alone",
                         field="pp")
    adp = p.attn_dp > 1
    if adp:
        check_attention_dp(req)
    weights, shares = whole_shares(req, *rank_weights(req, STAGE_SPLIT))
    if adp:
        shares = adp_shares(req, weights, shares)
    # MLA's k_b_proj_trans (and its dequantized copies on Blackwell) beside the checkpoint's
    # weights; under attention DP a rank holds every head's
    heads = req.spec.num_attention_heads // (1 if adp else p.tp)
    copies = [0 if req.weights_bytes is not None else
              mla_copies(sh.spec, weights.format, sh.gpu, heads) for sh in shares]
    shares = [replace(sh, weights_bytes=sh.weights_bytes + c)
              for sh, c in zip(shares, copies, strict=True)]
    # the sequences one rank's cache serves: under attention DP each rank takes its own
    # requests, max_batch_size of them (executor_request_queue.py: tp × max_num_active_requests
    # in flight)
    groups = p.attn_dp
    per_rank = -(-req.sequences // groups)
    tokens_in = s.max_num_tokens or MAX_NUM_TOKENS
    # the profiling pass's activations; under attention DP a rank's dense MLP is whole
    act = 2 * tokens_in * (req.spec.hidden_size
                           + req.spec.intermediate_size // (1 if adp else p.tp)) * 2
    # and the MoE layers gather every rank's tokens (communication_factory.py: an all-gather
    # where the experts are split by tensor parallelism, the default; moe_max_num_tokens is
    # max_num_tokens × dp_size)
    gathered = p.tp * tokens_in * req.spec.hidden_size * 2 if adp else 0
    # each rank sizes its own pool (its weights, its layers' bytes per token); the
    # executor keeps the smallest token count over the ranks
    # with kv_cache_config.dtype auto the pool takes the model's dtype, and the PyTorch backend
    # builds a float32 checkpoint in float32 (ModelConfig.torch_dtype is the config's dtype;
    # no 16-bit cast as vLLM and SGLang make), so its cache is float32 too
    kv_k, kv_v = opts.kv_k, opts.kv_v
    f32_cache = name == "auto" and req.spec.dtype == "float32"
    if f32_cache:
        kv_k = kv_v = get_format("f32")
    if dsa:
        latent = 1 if name == "fp8" else 2
        per_tokens = [max(1, dsa_bytes_per_token(sh.spec, latent)) for sh in shares]
    else:
        per_tokens = [max(1, sum(kv_row_bytes(sh.spec, kv_k, kv_v))) for sh in shares]
    if req.kv_budget_bytes is not None:
        availables = [req.kv_budget_bytes] * len(shares)
    elif any(sh.gpu is None for sh in shares):
        raise need_gpu()
    else:
        # the free memory's fraction: on a unified memory the GPU's share, or what the user
        # saw free there (gpu_limit); the card's total elsewhere
        availables = [int((sh.gpu.usable_bytes - (sh.weights_bytes + act + gathered + RUNTIME))
                          * frac) for sh in shares if sh.gpu is not None]
    # a hybrid model's state slots (max_batch_size × pp + 1 of them, the command's
    # --max_batch_size being the plan's sequences) come off each rank's budget first
    per_slot = [state_bytes_per_slot(sh.spec) for sh in shares]

    def stage_tokens(n_seq: int) -> list[int]:
        slots = n_seq * p.pp + DUMMY_SLOTS if any(per_slot) else 0
        return [max(0, a - slots * st) // t
                for a, st, t in zip(availables, per_slot, per_tokens, strict=True)]

    def pool_tokens(n_seq: int) -> int:
        # kv_cache_config.max_tokens caps the tokens memory gives (the smaller is used:
        # "Both free_gpu_memory_fraction and max_tokens are set"); the primary pool rounds up
        # to whole blocks (calculateMaxNumBlocks)
        tokens = min(stage_tokens(n_seq))
        if s.max_total_tokens is not None:
            tokens = min(tokens, s.max_total_tokens)
        return -(-tokens // tpb) * tpb

    per_stage = stage_tokens(per_rank)
    binding = min(range(len(shares)), key=per_stage.__getitem__)
    per_token, available = per_tokens[binding], availables[binding]
    slots = per_rank * p.pp + DUMMY_SLOTS if any(per_slot) else 0
    state = slots * per_slot[binding]
    gpu = shares[binding].gpu
    budget = gpu.usable_bytes if req.kv_budget_bytes is None and gpu is not None else None
    tokens = pool_tokens(per_rank)
    blocks = tokens // tpb
    max_ctx = largest(lambda n: n == 0 or tokens >= n * per_rank, 1 << 31)
    # more sequences need more state slots, so the pool shrinks as they grow; under
    # attention DP each rank serves as many
    max_seqs = groups * largest(lambda n: n == 0 or pool_tokens(n) >= n * req.context,
                                MAX_SEQUENCES // groups)
    lines = [f"Number of tokens per block: {tpb}."]
    if not dsa:
        # a DSA model's indexer keys sit in pools of their own, whose share of this line was
        # not established
        lines.append(f"[MemUsageChange] Allocated {tokens * per_token / GiB:.2f} GiB for max "
                     f"tokens in paged KV cache ({tokens}).")
    cmd = [f"trtllm-serve {model_ref(req.spec)}", f"--max_seq_len {req.context}",
           f"--max_batch_size {per_rank}", f"--kv_cache_free_gpu_memory_fraction {frac:g}"]
    cmd += parallel_flags(p, "--tp_size", "--pp_size", None)
    if s.max_num_tokens:
        cmd.append(f"--max_num_tokens {s.max_num_tokens}")
    notes = []
    if copies[binding]:
        notes.append(f"MLA: each rank keeps k_b_proj_trans, kv_b_proj's key half transposed, "
                     f"beside the checkpoint's weights ({format_bytes(copies[binding], 2)} a "
                     "rank, counted with them"
                     + (", both halves also dequantized to bfloat16 on this Blackwell card"
                        if weights.format == "fp8" and sm100(shares[binding].gpu) else "")
                     + ")")
    if s.max_total_tokens is not None:
        notes.append(f"set kv_cache_config.max_tokens: {s.max_total_tokens} in the extra LLM "
                     "API options file: the pool holds the smaller of it and what "
                     "free_gpu_memory_fraction gives")
    if adp:
        notes.append(
            f"set enable_attention_dp: true in the extra LLM API options file (--config): each "
            f"of the {p.tp} ranks runs attention for its own requests, --max_batch_size "
            f"{per_rank} of them ({per_rank * groups:,} in flight), with all the attention "
            "heads, the dense MLP layers, the shared experts, the embedding and the lm_head "
            f"whole and the routed experts split over the {p.tp}; the MoE layers gather "
            f"every rank's tokens ({gathered / GiB:.2f} GiB counted beside the activations; an "
            "all-to-all backend's workspace, where expert parallelism is set, is not)")
    if state:
        notes.append(f"recurrent state: {slots:,} slots (max_batch_size × pp + 1) of "
                     f"{per_slot[binding] / MiB:.1f} MiB = {state / GiB:.2f} GiB taken from "
                     "the KV budget")
    offload_tokens = 0
    if s.offload_bytes:
        offload_tokens = s.offload_bytes // per_token
        notes.append(f"host cache (kv_cache_config.host_cache_size) holds about "
                     f"{offload_tokens:,} more tokens per rank")
    if name != "auto":
        notes.append(f"set kv_cache_config.dtype: {name} in the extra LLM API options file")
    if dsa and not s.tokens_per_block:
        notes.append(f"set kv_cache_config.tokens_per_block: {tpb} in the extra LLM API "
                     "options file (DeepGEMM's paged indexer kernel needs 64-token blocks on "
                     "sm90)")
    if dsa:
        notes.append(f"DSA cache: {per_token:,} bytes a token per rank: the MLA latent at "
                     f"{latent} B a value in every layer, an fp8 indexer key (+ one fp32 scale "
                     "per 128 values) in each layer that runs an indexer")
    if f32_cache:
        notes.append("the checkpoint is float32: TensorRT-LLM keeps its weights and its KV "
                     "cache (dtype auto) in float32, 4 bytes a value")
    return EngineReport(
        engine=NAME,
        budget_bytes=budget,
        weights_bytes=shares[binding].weights_bytes,
        overheads=(("activation peak", act),
                   *([("MoE token all-gather", gathered)] if gathered else []),
                   ("runtime buffers", RUNTIME)),
        # the pool a cap (max_tokens) leaves smaller than the budget: its blocks and the state
        kv_pool_bytes=(max(0, available) if s.max_total_tokens is None
                       else min(max(0, available), tokens * per_token + state)),
        kv_tokens=tokens * p.dp * groups,
        blocks=blocks,
        block_tokens=tpb,
        max_concurrency=groups * tokens / max(1, req.context),
        max_sequences=max_seqs,
        max_context=max_ctx,
        fits=tokens >= req.context * per_rank,
        log_lines=tuple(lines),
        command=" ".join(cmd),
        notes=tuple(notes),
        binding_stage=binding,
        offload_tokens=offload_tokens,
        extra={"bytes_per_token": per_token, "weights": weights.format,
               "state_bytes": state, "state_slots": slots},
    )
