"""What kvplan knows about a model: its layers grouped by kind, and its parameter counts.

A ``ModelSpec`` is built from a config.json by :mod:`kvcore.hf`; everything downstream
(sizing, weights, engines) reads only this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from .units import format_quantity

if TYPE_CHECKING:
    from .engines.llamacpp_offload import Block
    from .quant import QuantScheme

__all__ = ["DraftModel", "HeadConfig", "LayerGroup", "LayerKind", "ModelSpec", "Module",
           "ParamCount", "cla_followers", "cla_source"]


class LayerKind(StrEnum):
    """How a layer keeps its past."""

    #: K and V of every token (MHA, GQA, MQA)
    FULL = "full"
    #: K and V of the last ``window`` tokens
    SLIDING = "sliding"
    #: K and V of the current chunk of ``window`` tokens (Llama-4 local layers)
    CHUNKED = "chunked"
    #: one latent "head" of kv_lora_rank + qk_rope_head_dim values per token, no V (DeepSeek)
    MLA = "mla"
    #: the lightning indexer of DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): one key
    #: of ``index_head_dim`` values per token in each layer that runs an indexer, no V
    INDEXER = "indexer"
    #: K and V of the encoder's tokens (images), not of the text
    CROSS = "cross"
    #: a constant recurrent state per sequence (Gated DeltaNet, lightning attention)
    LINEAR = "linear"
    #: a constant SSM + conv state per sequence (Mamba, Mamba2)
    MAMBA = "mamba"
    #: a constant short-convolution state per sequence (LFM2's gated conv layers)
    CONV = "conv"
    #: one latent entry per ``ratio`` tokens, no separate V (DeepSeek-V4's compressed
    #: attention: ratio 4 with an indexer, ratio 128 without)
    COMPRESSED = "compressed"
    #: the index keys (and values) a sparse-attention selector reads to pick blocks or
    #: entries: one entry per ``ratio`` tokens (DeepSeek-V4's lightning indexer over the
    #: 4x-compressed entries; MiniMax-M3's index heads, one per token)
    INDEX = "index"
    #: a constant per-sequence state: the tokens of the block a compressor has not yet
    #: folded into an entry (DeepSeek-V4's kv and score rows, kept in float32)
    COMPRESSOR = "compressor"

    @property
    def is_attention(self) -> bool:
        return self in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.MLA,
                        LayerKind.INDEXER, LayerKind.CROSS, LayerKind.COMPRESSED,
                        LayerKind.INDEX)

    @property
    def is_latent(self) -> bool:
        """One row per token, not split into KV heads (the MLA latent, the DSA indexer's key,
        DeepSeek-V4's compressed latent and index keys): no head width to read from the
        config."""
        return self in (LayerKind.MLA, LayerKind.INDEXER, LayerKind.COMPRESSED, LayerKind.INDEX)

    @property
    def is_replicated(self) -> bool:
        """Kinds every tensor-parallel rank holds whole (one latent or index head)."""
        return self in (LayerKind.MLA, LayerKind.INDEXER, LayerKind.COMPRESSED, LayerKind.INDEX,
                        LayerKind.COMPRESSOR)

    @property
    def is_recurrent(self) -> bool:
        return self in (LayerKind.LINEAR, LayerKind.MAMBA, LayerKind.CONV)

    @property
    def holds_state(self) -> bool:
        """A constant per-sequence state instead of tokens: the recurrent kinds and
        DeepSeek-V4's compressor (the unfinished block's rows)."""
        return self.is_recurrent or self is LayerKind.COMPRESSOR


@dataclass(frozen=True)
class LayerGroup:
    """Layers of one kind with identical cache geometry.

    For attention kinds: ``n_kv_heads`` heads of ``head_dim_k`` key values and ``head_dim_v``
    value values per token (``head_dim_v`` is 0 for MLA, which caches one latent only).
    For recurrent kinds: ``state_values`` values per sequence per layer, held in
    ``state_dtype_bytes`` bytes each unless a plan overrides the state dtype.
    """

    kind: LayerKind
    layers: tuple[int, ...]
    n_kv_heads: int = 0
    head_dim_k: int = 0
    head_dim_v: int = 0
    #: sliding window or chunk size in tokens; None for unbounded kinds
    window: int | None = None
    state_values: int = 0
    #: of ``state_values``, the convolution part (llama.cpp's R; the rest is its S)
    conv_state_values: int = 0
    #: how the state is made up, for people ("ssm 48×128×128 + conv 3×10240")
    state_detail: str = ""
    #: multi-token-prediction / draft layers (counted only when asked)
    mtp: bool = False
    #: recurrent layers: the head (or channel) counts tensor parallelism splits; each must be
    #: a multiple of tp
    split_counts: tuple[int, ...] = ()
    #: of ``conv_state_values``, the part every TP rank holds whole (a Mamba2 model with one
    #: B/C group replicates that group on every rank)
    replicated_conv_values: int = 0
    #: tokens per cached entry (compressed and index kinds: 4, 128; 1 for every other kind)
    ratio: int = 1
    #: sparse attention: the most entries a decode step reads per sequence and layer (the
    #: top-k an indexer selects: DeepSeek-V3.2's latent rows, DeepSeek-V4's ratio-4
    #: compressed entries); None: every entry held
    read_limit: int | None = None
    #: a sliding-window or chunked group an engine keeps whole (llama.cpp: an architecture it
    #: runs without the window, or --swa-full): its own kind and window, now FULL
    dropped_kind: str = ""
    dropped_window: int | None = None

    @property
    def count(self) -> int:
        return len(self.layers)

    @property
    def values_per_token(self) -> int:
        """Cached values per token for one layer (K + V, all KV heads)."""
        return self.n_kv_heads * (self.head_dim_k + self.head_dim_v)

    def describe(self) -> str:
        layers = format_quantity(self.count, f"{self.kind.value} layer")
        if self.kind is LayerKind.MLA:
            return f"{format_quantity(self.count, 'MLA layer')}, latent {self.head_dim_k}"
        if self.kind is LayerKind.INDEXER:
            return f"{format_quantity(self.count, 'indexer layer')}, key {self.head_dim_k}"
        if self.kind is LayerKind.COMPRESSED:
            return (f"{format_quantity(self.count, 'compressed layer')}, latent "
                    f"{self.head_dim_k}, one entry per {self.ratio} tokens")
        if self.kind is LayerKind.INDEX:
            dims = (f"K {self.head_dim_k}" if not self.head_dim_v
                    else f"K {self.head_dim_k} + V {self.head_dim_v}")
            every = "" if self.ratio == 1 else f", one entry per {self.ratio} tokens"
            return (f"{format_quantity(self.count, 'index layer')} × "
                    f"{format_quantity(self.n_kv_heads, 'index head')} × {dims}{every}")
        if self.kind is LayerKind.COMPRESSOR:
            return f"{format_quantity(self.count, 'compressor')}, state {self.state_detail}"
        if self.kind is LayerKind.SLIDING and not self.head_dim_v:
            return (f"{layers} × latent {self.head_dim_k} (K = V)"
                    + (f", window {self.window:,}" if self.window is not None else ""))
        if self.kind.is_recurrent:
            return f"{layers}, state {self.state_detail}"
        dims = (
            f"{self.head_dim_k}" if self.head_dim_k == self.head_dim_v
            else f"{self.head_dim_k}/{self.head_dim_v}"
        )
        if self.dropped_kind:
            layers = format_quantity(self.count, f"{self.dropped_kind} layer")
            if not self.head_dim_v:
                dims = f"latent {self.head_dim_k} (K = V)"
        text = f"{layers} × {format_quantity(self.n_kv_heads, 'KV head')} × {dims}"
        if self.window is not None:
            text += f", window {self.window:,}"
        if self.dropped_window is not None:
            text += f", window {self.dropped_window:,} kept whole"
        return text


def cla_source(layer: int, factor: int) -> int:
    """The layer whose K and V a layer of HunYuan's cross-layer attention reads: the first of
    its group of ``factor`` (cla_share_factor), i − i % factor (vLLM hunyuan_v1.py)."""
    return layer - layer % factor if factor > 1 else layer


def cla_followers(n_layers: int, factor: int) -> frozenset[int]:
    """The layers of a cross-layer-attention group after its first, which project no K or V
    of their own (HunYuanCrossAttention: q_proj only)."""
    return frozenset(i for i in range(n_layers) if cla_source(i, factor) != i)


@dataclass(frozen=True)
class Module:
    """Weights of one kind in one layer, as a checkpoint names them (for quantization lists).

    ``names`` are the module paths below the model's root, without the root's own prefix
    (``model.``, ``model.language_model.``, ``backbone.`` ...): ``layers.3.self_attn.q_proj``;
    several where architectures spell the same module differently (``mlp.experts`` and
    ``block_sparse_moe.experts``)."""

    names: tuple[str, ...]
    #: weights (all experts for a routed-expert module)
    params: int
    #: of ``params``, those read per generated token (the top-k experts' share)
    active: int
    #: output rows summed over the module's matrices (per-channel scales count one per row)
    rows: int = 0
    #: weight matrices in the module (per-tensor scales count one per matrix); 0: not a
    #: linear layer (norms, convolutions, embeddings), never quantized by ModelOpt or
    #: compressed-tensors' ``Linear`` targets
    matrices: int = 0
    #: "embed", "head", "encoder", "experts", "replicated" or "" (a decoder weight)
    role: str = ""
    #: for a module of several matrices that do not share one input width (an MLP block, the
    #: routed experts): the sum over its matrices of input plus output width, and of the
    #: widths tensor parallelism splits (the gate and up projections' outputs, the down
    #: projection's input); (0, 0) where ``params // rows`` is every matrix's input width
    lora_dims: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class ParamCount:
    """Parameter counts from a config (estimated, not read from weights)."""

    total: int
    #: parameters read per generated token (MoE: shared + top-k experts)
    active: int
    #: embeddings and lm_head (kept in 16 bits by most weight-quantization schemes)
    embedding: int
    #: vision/audio encoder and projector
    encoder: int = 0
    #: per-layer embedding tables (Gemma-3n, Gemma 4 E2B/E4B: vocab × layers × width), part
    #: of ``total``, not of ``embedding``
    per_layer_embedding: int = 0
    #: multi-token-prediction modules (in the checkpoint, loaded only for speculative decoding)
    mtp: int = 0
    #: routed-expert weights (all experts), part of ``total``
    experts: int = 0
    #: routed-expert weights read per token (top-k), part of ``active``
    active_experts: int = 0
    #: decoder weights every tensor-parallel rank holds whole, part of ``total``: the MLA
    #: down-projections and their norms, the MoE router, the layer norms
    replicated: int = 0
    #: ``total`` (MTP modules apart) by module, where the architecture's module names are
    #: known; empty otherwise
    modules: tuple[Module, ...] = ()


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's exact bytes, read from its tensors."""

    total_bytes: int
    #: the input embedding (token_embd)
    input_bytes: int
    #: the lm_head (output; the input embedding where tied)
    head_bytes: int
    #: routed experts, all of them
    expert_bytes: int
    #: routed experts read per token (the top-k share)
    active_expert_bytes: int
    #: the mix, as llama-quantize names it (q4_k_m)
    format: str
    source: str
    #: the lm_head is a tensor of its own
    head_separate: bool = True
    #: bytes by ggml type, largest first: (("Q4_K", n), ("Q6_K", m), ...)
    types: tuple[tuple[str, int], ...] = ()
    #: llama-server's arguments that load it (-m PATH of the first part, -hf REPO:TAG)
    load: str = ""
    #: draft (MTP) blocks, not part of ``total_bytes``
    draft_bytes: int = 0
    #: files of a split model
    parts: int = 1
    #: each decoder block's bytes by the tensor patterns llama.cpp places by
    #: (kvcore.engines.llamacpp_offload.Block)
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True)
class HeadConfig:
    """What an EAGLE draft head's config holds beyond a decoder's (read from every config;
    whether a model is such a head is decided where it is attached as a draft)."""

    #: "eagle3" or "eagle" where an ``architectures`` entry names the head
    #: (LlamaForCausalLMEagle3, LlamaForCausalLMEagle); "" otherwise
    declared: str = ""
    #: rows of an EAGLE-3 head's own lm_head (``draft_vocab_size``); 0 where none is given
    #: (the head then drafts with the target's lm_head)
    draft_vocab_size: int = 0
    #: the target's hidden size the head's fc reads (``target_hidden_size``); 0: its own
    target_hidden_size: int = 0
    #: the head's fc has a bias (``bias``)
    bias: bool = False
    #: the head norms the target's hidden states before its fc (``norm_before_fc``: one
    #: norm over all of them)
    norm_before_fc: bool = False
    #: the target layers whose hidden states an EAGLE-3 head takes
    #: (``eagle_config.eagle_aux_hidden_state_layer_ids``); 0: the engines' three
    aux_layers: int = 0
    #: the head's rotary embedding is of a kind vLLM stretches to the target's context
    #: (none, default, linear, llama3, ntk, proportional: speculative.py), so the head does
    #: not cap max_model_len
    rope_stretches: bool = True


@dataclass(frozen=True)
class DraftModel:
    """A separate draft model a speculative run loads beside the target (vLLM's
    speculative_config model, SGLang's STANDALONE draft path, llama.cpp's -md): the draft's own
    spec, and its weights as priced (their bytes, format and basis)."""

    spec: ModelSpec
    weight_bytes: int
    weight_format: str
    weight_source: str
    #: of ``weight_bytes``, the input embedding a GGUF runtime keeps in host memory (llama.cpp
    #: keeps the token embedding there; a tied lm_head is a copy of it on the card)
    input_bytes: int = 0
    #: the weight format asked for (None: its checkpoint's), as weights_for takes it
    weights_asked: str | None = None
    #: how it drafts: "draft_model" (a model of its own), "eagle" or "eagle3" (an EAGLE head
    #: over the target's hidden states, kvcore.draft.head_method)
    method: str = "draft_model"
    #: of an EAGLE head, what an engine allocates beside ``weight_bytes`` before it borrows the
    #: target's: the head's own token embedding, and EAGLE-1's full-vocabulary lm_head (SGLang
    #: holds them while the target's pool is sized); 0 for a draft model
    borrowed_bytes: int = 0
    #: of ``weight_bytes``, an EAGLE-3 head's map from its draft vocabulary to the target's
    #: tokens (int64 a row; SGLang moves it to the card after the pools are sized)
    map_bytes: int = 0

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class ModelSpec:
    """A model as far as memory planning goes."""

    name: str
    model_type: str
    groups: tuple[LayerGroup, ...]
    params: ParamCount
    #: where the config came from ("catalog qwen3.5-27b", "file ./config.json", "hub Qwen/...")
    source: str
    hub_repo: str | None = None
    hidden_size: int = 0
    vocab_size: int = 0
    intermediate_size: int = 0
    num_attention_heads: int = 0
    max_position_embeddings: int | None = None
    #: the max_model_len vLLM derives from the config (hf.vllm_max_len; None: not known)
    vllm_max_len: int | None = None
    #: the context length SGLang derives from the config (hf.sglang_context_len)
    sglang_context_len: int | None = None
    #: bytes per weight of the checkpoint's own dtype (2 for bf16)
    dtype_bytes: int = 2
    dtype: str = "bfloat16"
    #: the dtype the text model's config names (torch_dtype or dtype, else the outer
    #: config's); "" where it names none (SGLang's --dtype auto then serves float16)
    config_dtype: str = ""
    #: bytes per SSM/delta-state value where the checkpoint pins it (``mamba_ssm_dtype``) or
    #: the architecture does (Kimi Delta Attention: float32)
    ssm_dtype_bytes: int = 2
    #: bytes per SSM value the config's own ``mamba_ssm_dtype`` names; 0 where it names none
    #: (SGLang then keeps the state in float32)
    ssm_pinned_bytes: int = 0
    #: bytes per SSM value the config's ``mamba_ssm_cache_dtype`` names (read by vLLM for
    #: Nemotron-H and by TensorRT-LLM); 0 where it names none
    ssm_cache_dtype_bytes: int = 0
    #: encoder tokens cached per image by each cross-attention layer
    cross_tokens_per_image: int = 0
    #: the Mamba2 scan's chunk of tokens (``chunk_size``/``mamba_chunk_size``); 0: not given
    mamba_chunk_size: int = 0
    #: ``linear_key_head_dim`` of Qwen's Gated DeltaNet layers (Qwen3-Next, Qwen3.5); 0 for
    #: other models
    gdn_key_head_dim: int = 0
    #: exact checkpoint size from model.safetensors.index.json, when known
    safetensors_total_bytes: int | None = None
    #: a checkpoint's exact bytes by part, read from its tensors (a GGUF file)
    checkpoint: Checkpoint | None = None
    #: weight format the checkpoint ships in, from ``quantization_config`` (None: ``dtype``)
    checkpoint_weights: str | None = None
    #: a per-module quantization (ModelOpt, compressed-tensors) read from ``quantization_config``
    #: or ``hf_quant_config.json``
    quant: QuantScheme | None = None
    #: what a plan should say about the weights' quantization (an FP8 KV cache the checkpoint
    #: was calibrated for, exclusions naming modules kvplan does not count)
    weight_notes: tuple[str, ...] = ()
    #: fields filled from the architecture's documented defaults (not present in the config)
    defaulted: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    #: layers that hold no cache at all (Nemotron-H's MLP and MoE blocks)
    cacheless_layers: int = 0
    #: of those, the layers that attend over an earlier layer's cache (Gemma 4 / Gemma-3n
    #: ``num_kv_shared_layers``)
    kv_shared_layers: int = 0
    #: each KV-shared layer with the earlier layer whose cache it reads, (layer, source): the
    #: source is the last layer before the shared tail of the same attention type
    kv_shared_sources: tuple[tuple[int, int], ...] = ()
    #: HunYuan's cross-layer attention (``use_cla``): consecutive layers sharing one K/V, the
    #: first of each group holding it (1: none)
    cla_share_factor: int = 1
    #: Nemotron-NAS layers whose attention is replaced by one hidden × hidden projection
    #: (``replace_with_linear``): no cache, and not every engine builds them
    linear_attention_layers: int = 0
    #: the vision encoder's (layers, hidden size) as a server reads them from
    #: ``vision_config`` (24 and 1024 where absent); None: no vision encoder
    vision_encoder: tuple[int, int] | None = None
    #: the modalities each vision/audio tower serves, as vLLM marks its towers
    #: (``_mark_tower_model``): ("image",) or ("image", "video") for a vision tower, ("audio",)
    #: for an audio tower; () where the model has none
    towers: tuple[tuple[str, ...], ...] = ()
    #: the decoder's layers as the config counts them (``num_hidden_layers``), those without a
    #: cache included; 0: as many as the groups' layer numbers reach
    hidden_layers: int = 0
    #: the config's first ``architectures`` entry (the class an engine's registry looks up)
    architecture: str = ""
    #: every ``architectures`` entry, in order (vLLM and SGLang load a model by any one they
    #: register; the others look the first up)
    architectures: tuple[str, ...] = ()
    #: the first ``architectures`` entry of its ``text_config``, where it names one (llama.cpp's
    #: converter looks the text model up by it)
    text_architecture: str = ""
    #: the config's ``auto_map`` names an ``AutoModel…`` class: the checkpoint ships its own
    #: modeling code (what an engine's Transformers backend loads with --trust-remote-code)
    remote_code: bool = False
    #: the linear layers are Kimi Delta Attention (``linear_attn_config`` lists ``kda_layers``)
    kda: bool = False
    #: the config itself names its KDA layers (``linear_attn_config.kda_layers``, or
    #: ``layer_types`` with ``linear_num_heads`` and ``linear_head_dim``), as SGLang's
    #: uses_kda_attention reads it; Ling-3.0's published form (``layer_group_size``) does not
    kda_declared: bool = False
    #: GLM-5.3-Flash's index_kpool_compress: SGLang keeps each running request's open pool
    #: (its raw index keys and gate scores) in buffers beside the DSA pool
    index_tail: bool = False
    #: ``qk_nope_head_dim`` of an MLA model (the non-rotary part of a query/key head); 0 where
    #: the config has none
    qk_nope_head_dim: int = 0
    #: an MLA model's query/key head (``qk_nope_head_dim + qk_rope_head_dim``) and value head
    #: (``v_head_dim``) as a prefill computes them, before the latent is absorbed; 0 where
    #: the config has none
    mla_qk_head_dim: int = 0
    mla_v_head_dim: int = 0
    #: query heads of each decoder layer where they differ between layers (Laguna's
    #: num_attention_heads_per_layer, MiMo-V2's sliding layers); empty where every layer has
    #: num_attention_heads
    q_heads_per_layer: tuple[int, ...] = ()
    #: image tokens attend to each other both ways (Gemma 4's ``use_bidirectional_attention``
    #: "vision" in a multimodal architecture): engines route image prefills to kernels that
    #: take such a mask
    mm_prefix: bool = False
    #: a separate draft model for speculative decoding (kvcore.draft.attach): its layers are
    #: this spec's ``mtp`` groups, its weights counted with them
    draft: DraftModel | None = None
    #: what the config says of an EAGLE draft head (kvcore.draft reads it)
    head: HeadConfig = field(default_factory=HeadConfig)

    @property
    def num_layers(self) -> int:
        """Decoder layers that hold a cache, each once (a DeepSeek-V4 layer has a window, a
        compressed part and a compressor: three groups, one layer)."""
        return len({i for g in self.groups if not g.mtp for i in g.layers})

    @property
    def decoder_layers(self) -> int:
        """The decoder's layers as an engine numbers them, those without a cache included:
        pipeline stages split these (Nemotron-H's 118 blocks, not its 64 cached layers)."""
        if self.hidden_layers:
            return self.hidden_layers
        numbers = [i for g in self.groups if not g.mtp for i in g.layers]
        return max(numbers) + 1 if numbers else 0

    def q_heads(self, layer: int) -> int:
        """Query heads of decoder layer ``layer`` (num_attention_heads where not given)."""
        heads = self.q_heads_per_layer
        return heads[layer] if layer < len(heads) else self.num_attention_heads

    def cache_readers(self) -> dict[int, int]:
        """Layers that attend over another layer's cache, counted by that layer: Gemma 4's
        and Gemma-3n's KV-shared layers (kv_shared_sources), and HunYuan's cross-layer
        attention, where layer i reads layer i - i % cla_share_factor's. A decode step reads
        such a cache once for its own layer and once for each of these."""
        readers: dict[int, int] = {}
        for _, source in self.kv_shared_sources:
            readers[source] = readers.get(source, 0) + 1
        for i in cla_followers(self.decoder_layers, self.cla_share_factor):
            source = cla_source(i, self.cla_share_factor)
            readers[source] = readers.get(source, 0) + 1
        return readers

    def groups_for(self, *, mtp: bool = False) -> tuple[LayerGroup, ...]:
        """The layer groups a plan counts (MTP/draft layers only when asked)."""
        return tuple(g for g in self.groups if mtp or not g.mtp)

    @property
    def mtp_layers(self) -> int:
        """The MTP / next-n layers the config names, each once whatever caches it holds."""
        return len({i for g in self.groups if g.mtp for i in g.layers})

    @property
    def has_mtp(self) -> bool:
        return any(g.mtp for g in self.groups)

    @property
    def widest_window(self) -> int:
        """The widest window of its sliding-window and chunked layers (0: it has none)."""
        return max((g.window or 0 for g in self.groups
                    if g.kind in (LayerKind.SLIDING, LayerKind.CHUNKED)), default=0)

    @property
    def kinds(self) -> tuple[LayerKind, ...]:
        seen: list[LayerKind] = []
        for g in self.groups:
            if g.kind not in seen:
                seen.append(g.kind)
        return tuple(seen)
