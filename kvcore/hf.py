"""config.json (a dict) -> ModelSpec.

All field-name dialects live in one alias table (``_ALIASES``); multimodal nesting
(``text_config`` and friends) is resolved in one place (``language_config``). Fields a config
leaves out are filled only from the architecture's documented defaults (``_DEFAULTS``, the
values of the transformers config classes), and every such fill is recorded in
``ModelSpec.defaulted``. A field kvplan needs and cannot find is a ``ConfigError`` naming it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from .errors import ConfigError, shown
from .model import HeadConfig, LayerGroup, LayerKind, ModelSpec, Module, ParamCount, cla_followers
from .quant import QuantScheme, parse_quant, quant_notes

__all__ = ["language_config", "spec_from_config"]

# (``transformer_layer_config``: the decoder layer of a speculators-format draft head, whose
# own fields, draft_vocab_size and the like, sit beside it)
_NESTED = ("text_config", "llm_config", "language_config", "text_model_config",
           "transformer_layer_config")

# canonical name -> names used by other dialects, in order of preference
_ALIASES: dict[str, tuple[str, ...]] = {
    "num_hidden_layers": ("num_hidden_layers", "num_layers", "n_layer", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads",
                            "attention_heads"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "n_kv_heads",
                            "num_attention_groups"),
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "head_dim": ("head_dim", "kv_channels", "attention_head_dim"),
    # Ergo's dense layers (its first num_dense_blocks): first_dense_intermediate_size
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim",
                          "first_dense_intermediate_size", "dff", "dim_ff"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "max_position_embeddings": (
        "max_position_embeddings", "seq_length", "max_sequence_length", "n_positions",
        "max_seq_len",
    ),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "experts_per_token": (
        "num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k", "moe_top_k",
        "top_k_experts", "moe_k",
    ),
}

# Documented defaults of the transformers config classes, per model_type, for fields that
# published configs sometimes omit.
_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
        "sliding_window": 4096, "sliding_window_pattern": 6, "vocab_size": 262_208,
        "max_position_embeddings": 131_072, "tie_word_embeddings": True,
    },
    # Gemma-3n ties its lm_head to the token embedding (vLLM gemma3n.py builds no lm_head;
    # llama.cpp gemma3n.cpp duplicates token_embd as the output)
    "gemma3n_text": {"tie_word_embeddings": True},
    "gemma2": {"sliding_window": 4096, "tie_word_embeddings": True},
    "gemma": {"tie_word_embeddings": True},
    "cohere2": {"sliding_window_pattern": 4, "tie_word_embeddings": True},
    "cohere": {"tie_word_embeddings": True},
    "qwen3_next": {"full_attention_interval": 4},
    "llama4_text": {"attention_chunk_size": 8192, "no_rope_layer_interval": 4},
    # classes that tie the head to the embedding unless the config says otherwise (SmolLM3's
    # published configs leave the key out)
    **{t: {"tie_word_embeddings": True} for t in (
        "smollm3", "mpt", "gpt2", "gpt_bigcode", "bloom", "falcon", "opt", "starcoder2",
        "ctrl", "cpmant", "gpt_neox_japanese")},
    # Lfm3Config (vLLM 0.34 transformers_utils/configs/lfm3.py): its window, convolution and
    # heads where a config leaves them out; _layer_kinds fills in its default layer pattern
    "lfm3": {"sliding_window": 256, "conv_L_cache": 7, "head_dim": 128,
             "tie_word_embeddings": True},
    "jamba": {"attn_layer_period": 8, "attn_layer_offset": 4, "expert_layer_period": 2,
              "expert_layer_offset": 1, "mamba_d_state": 16, "mamba_d_conv": 4,
              "mamba_expand": 2},
}

# model types whose MLP has no gate (two matrices, not three); Apertus: up_proj, xIELU,
# down_proj (vLLM apertus.py ApertusMLP); Arcee (AFM): up_proj, relu², down_proj (ArceeMLP);
# GPT-J, CodeGen, GPT-Neo, GPT-1: fc_in/c_fc, fc_out/c_proj; Persimmon and Fuyu: relu²
# dense_h_to_4h, dense_4h_to_h; BioGPT fc1, fc2 (each as transformers builds them)
_UNGATED_MLP = {
    "gpt2", "gpt_bigcode", "falcon", "phi", "starcoder2", "gpt_neox", "mpt", "bloom", "opt",
    "nemotron", "nemotron_h", "apertus", "arcee", "gptj", "codegen", "gpt_neo", "openai-gpt",
    "persimmon", "fuyu", "biogpt", "jais2", "nanochat", "apertus1p5", "apertus1p5_text", "xglm",
    "ergo", "cosmos3_edge", "cosmos3_edge_text", "ctrl", "gpt_neox_japanese",
}

#: architectures whose layers hold a cache or state kvplan does not size (each with what it
#: has): refused by name rather than planned as a decoder of full-attention layers, which
#: their configs' head and layer fields would otherwise read as
_UNMODELED = {
    "zamba": "Mamba layers with a shared attention block applied every few layers",
    "xlstm": "mLSTM blocks, whose state is a fixed matrix a head",
    "rwkv": "RWKV time-mixing state a layer",
    "rwkv5": "RWKV-5 time-mixing state a layer",
    "rwkv6": "RWKV-6 time-mixing state a layer",
    "phi4flash": "SambaY: Mamba and sliding-window layers, gated memory units reading one "
                 "full-attention layer's cache",
    "recurrent_gemma": "RG-LRU recurrent blocks beside local-attention layers",
    "plamo2": "Mamba-2 and attention layers in its own pattern",
    "hymba": "attention and Mamba heads in parallel in each layer, with meta tokens",
    "hrm_text": "two stacks of layers applied H_cycles × (L_cycles + 1) times, which "
                "num_hidden_layers counts",
    # architectures transformers 5.25 added whose caches no engine rule of kvplan's covers:
    # their configs would otherwise be read by their head and layer fields alone (a legacy
    # dots3 config names its DSA layers "full_attention")
    **dict.fromkeys(("dots3_note", "dots3_note_text"),
                    "sliding-window layers beside MLA layers with a DSA indexer, each kind's "
                    "geometry in per_layer_config"),
    "kolibri1_1": "sliding-window layers beside indexed layers over a compressed index pool, "
                  "with K/V shared between layers (kv_source_layers)",
}

_LAYER_TYPE_KINDS: dict[str, LayerKind] = {
    "full_attention": LayerKind.FULL,
    "attention": LayerKind.FULL,
    "global_attention": LayerKind.FULL,
    "global": LayerKind.FULL,
    "sliding_attention": LayerKind.SLIDING,
    "sliding_window_attention": LayerKind.SLIDING,
    "local_attention": LayerKind.SLIDING,
    "local": LayerKind.SLIDING,
    "chunked_attention": LayerKind.CHUNKED,
    # GLM-5.2's layer_types (some checkpoints' configs): MLA whose indexer index_topk decides
    "deepseek_sparse_attention": LayerKind.MLA,
    "linear_attention": LayerKind.LINEAR,
    "mamba": LayerKind.MAMBA,
    "mamba2": LayerKind.MAMBA,
    "conv": LayerKind.CONV,
}

_MLA_TYPES = ("kv_lora_rank",)

#: Gemma 4: full-attention layers of their own width and KV head count, KV-shared tail layers
GEMMA4_TYPES = frozenset({"gemma4", "gemma4_text"})
#: Gemma 4 architectures that take images (vLLM's registry: multimodal), so a config with
#: use_bidirectional_attention "vision" runs image-prefix attention
GEMMA4_MULTIMODAL = frozenset({"Gemma4ForConditionalGeneration",
                               "Gemma4UnifiedForConditionalGeneration"})
#: multimodal model types whose image tokens attend both ways, by the outer config's
#: model_type (vLLM's model_arch_config_convertor.py is_mm_prefix_lm list: Gemma 3 with its
#: vision tower, not gemma3_text)
MM_PREFIX_TYPES = frozenset({"gemma3", "paligemma", "molmo2", "moondream3", "bagel"})
#: Gemma-3n: KV-shared tail layers, per-layer MLP widths, AltUp, LAuReL, per-layer embeddings
GEMMA3N_TYPES = frozenset({"gemma3n", "gemma3n_text"})
#: MiMo-V2: sliding-window and full layers of different KV heads and K/V widths
MIMO_V2_TYPES = frozenset({"mimo_v2_flash", "mimo_v2"})
#: Inkling-2: sliding and full layers of their own geometries (swa_* fields), short
#: convolutions on K, V and the residual stream
INKLING2_TYPES = frozenset({"inkling2", "inkling2_text"})
#: inclusionAI's Bailing hybrids: linear-attention layers with a full-attention layer closing
#: each group of layer_group_size (Ring-linear-2.0: lightning and GQA; Ling-2.5/2.6: lightning
#: and MLA; Ling-3.0: Kimi Delta Attention and MLA)
BAILING_TYPES = frozenset({"bailing_hybrid", "bailing_moe_linear"})
#: Ouro (ByteDance's looped language model): its layers run total_ut_steps times a token,
#: each run with a KV cache of its own (vLLM ouro.py: an Attention a run and layer)
OURO_TYPES = frozenset({"ouro"})
#: LongCat-Flash: two MLA attentions and two dense MLPs a layer beside its MoE; -Lite
#: (longcat_flash_ngram) adds hashed n-gram embedding tables to the token embedding
LONGCAT_TYPES = frozenset({"longcat_flash", "longcat_flash_ngram"})
#: Mistral-Large-4: MLA with no query low-rank, its NoPE layers (no_rope_layers 0) without the
#: rotary part of the latent, the indexer's queries from the hidden state
MISTRAL4_TYPES = frozenset({"mistral_large4", "mistral_large4_text"})
#: Step-3.5/3.7: ``attention_other_setting`` gives the layers of one type other heads
STEP3P5_TYPES = frozenset({"step3p5", "step3p7"})
#: Laguna: query heads per layer, a softplus output gate (g_proj), dense/sparse MLP per layer
LAGUNA_TYPES = frozenset({"laguna"})
#: Muse-Glimmer: a sigmoid output gate of one value a channel (gate_proj), four norms a layer
MUSE_GLIMMER_TYPES = frozenset({"muse_glimmer", "muse_glimmer_text"})
#: Tencent HunYuan (A13B, Large, dense 0.5B-7B): per-layer MoE lists (moe_topk,
#: moe_intermediate_size, num_shared_expert), q/k norms, cross-layer attention (use_cla)
HUNYUAN_TYPES = frozenset({"hunyuan", "hunyuan_v1_moe", "hunyuan_v1_dense"})
#: Qwen4-Exp (Qwen3.8-Flash-Next): Gated DeltaNet layers and attention layers with a QSA
#: indexer, hyper-connections around every block, and a per-layer n-gram embedding (PLE)
QWEN4_EXP_TYPES = frozenset({"qwen4_exp", "qwen4_exp_text"})
#: MiniMax-M3's model types: the text config's, and the published multimodal config's, whose
#: text_config names none
MINIMAX_M3_TYPES = frozenset({"minimax_m3", "minimax_m3_vl"})
#: GLM-5.3-Flash (transformers' Glm5NextTextConfig): Kimi Delta Attention layers beside
#: NoPE MLA layers whose DSA indexer pools each index_kpool tokens' keys into one
GLM5_NEXT_TYPES = frozenset({"glm5_next", "glm5_next_text"})

#: config fields that give a model structure kvplan reads for the named architectures only:
#: elsewhere they are refused rather than left out of a plan read from the head and layer
#: fields (field: (the model types that read it, what it adds))
_STRUCTURE_FIELDS: dict[str, tuple[frozenset[str], str]] = {
    "zero_expert_num": (LONGCAT_TYPES, "zero-computation experts beside the routed ones"),
    "ngram_vocab_size_ratio": (frozenset({"longcat_flash_ngram"}), "n-gram embedding tables"),
    "ngram_vocab_size_base": (QWEN4_EXP_TYPES, "an n-gram embedding table"),
    "hc_mult": (frozenset({"hy_v4"}) | GLM5_NEXT_TYPES, "hyper-connections over several "
                                                          "copies of the hidden state"),
    "hc_count": (QWEN4_EXP_TYPES, "hyper-connections over several copies of the hidden state"),
    # Kimi-K3.1 (kimi_k31): K3's layers plus an indexer cache on its dsa_layers (vLLM
    # models/kimi_k3 common/dsa_cache.py), which kvplan does not size
    "dsa_config": (frozenset(), "a sparse-attention indexer cache on some layers"),
}


#: config fields that give one kind of attention layer a geometry of its own (heads, widths,
#: which layers): kvplan reads them for the named architectures only, and a config of another
#: architecture that sets them is refused rather than sized with the top-level heads for
#: every layer (Baichuan-M1's sliding_window_layers and num_swa_* fields, for one)
_KIND_GEOMETRY_FIELDS: dict[str, frozenset[str]] = {
    **dict.fromkeys(("swa_num_key_value_heads", "swa_head_dim", "swa_num_attention_heads",
                     "swa_v_head_dim"), MIMO_V2_TYPES | INKLING2_TYPES),
    **dict.fromkeys(("num_global_key_value_heads", "global_head_dim"), GEMMA4_TYPES),
    **dict.fromkeys(("num_swa_key_value_heads", "num_swa_attention_heads",
                     "sliding_window_layers"), frozenset()),
}


def _check_structure_fields(lm: Mapping[str, Any], model_type: str) -> None:
    """Refuse a config whose structure fields kvplan reads for other architectures only."""
    for name, (types, what) in _STRUCTURE_FIELDS.items():
        value = lm.get(name)
        if model_type in types or value in (None, False, 0, 1):
            continue
        sizes = f"sizes for {', '.join(sorted(types))} only" if types else "does not size"
        raise ConfigError(f"config.json '{name}' gives this model {what}, which kvplan {sizes} "
                          f"(model_type '{model_type}')", field=name)
    for name, types in _KIND_GEOMETRY_FIELDS.items():
        if model_type in types or lm.get(name) is None:
            continue
        readers = f"reads for {', '.join(sorted(types))} only" if types else "does not read"
        raise ConfigError(f"config.json '{name}' gives some layers a geometry of their own, "
                          f"which kvplan {readers} (model_type '{model_type}')", field=name)


#: attention whose q_proj also projects a sigmoid output gate where the config says nothing
_GATED_Q_TYPES = frozenset({"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe",
                            "qwen3_5_moe_text"}) | QWEN4_EXP_TYPES


def language_config(config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The language model's fields, and the vision encoder's config if any.

    Multimodal configs nest the language model (``text_config`` for Gemma-3, Llama-4,
    Mllama, Qwen3-VL, Qwen3.5; ``llm_config`` for InternVL; ``language_config`` for
    DeepSeek-VL2). The nested fields win; top-level fields fill what the nested one leaves
    out (``torch_dtype``, ``tie_word_embeddings``). Qwen-Omni nests its text-writing model
    (the thinker, which engines serve) one level further, in ``thinker_config``.
    """
    thinker = config.get("thinker_config")
    if isinstance(thinker, Mapping) and thinker:
        config = {**{k: v for k, v in config.items() if k != "thinker_config"}, **thinker}
    merged = {k: v for k, v in config.items() if k not in _NESTED}
    for key in _NESTED:
        nested = config.get(key)
        if isinstance(nested, Mapping) and nested:
            merged.update(nested)
            break
    vision = config.get("vision_config")
    return merged, dict(vision) if isinstance(vision, Mapping) else None


class _Reader:
    """Typed, alias-aware access to one config dict, recording documented defaults used."""

    def __init__(self, cfg: dict[str, Any], model_type: str) -> None:
        self.cfg = cfg
        self.model_type = model_type
        self.defaulted: list[str] = []

    def raw(self, name: str) -> Any:
        for alias in _ALIASES.get(name, (name,)):
            value = self.cfg.get(alias)
            if value is not None:
                return value
        defaults = _DEFAULTS.get(self.model_type, {})
        if name in defaults:
            self.defaulted.append(name)
            return defaults[name]
        return None

    def has(self, name: str) -> bool:
        return self.raw(name) is not None

    def key(self, name: str) -> str:
        """The spelling of ``name`` this config uses (an alias), else the canonical name."""
        return next((a for a in _ALIASES.get(name, (name,)) if self.cfg.get(a) is not None), name)

    def get_int(self, name: str, *, minimum: int = 1, maximum: int = 2**40) -> int:
        value = self.raw(name)
        if value is None:
            raise ConfigError(
                f"config.json has no '{name}', which kvplan needs to size this model "
                f"(model_type '{self.model_type}')",
                field=name,
            )
        # a bad value is named as the config spells it (moe_topk, not experts_per_token)
        return _check_int(self.key(name), value, minimum, maximum)

    def opt_int(self, name: str, default: int | None = None, *, minimum: int = 0,
                maximum: int = 2**40) -> int | None:
        value = self.raw(name)
        if value is None:
            return default
        return _check_int(self.key(name), value, minimum, maximum)

    def get_bool(self, name: str, default: bool) -> bool:
        value = self.raw(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(f"config.json field '{name}' must be true or false, got {shown(value)}",
                              field=name)
        return value


def _check_int(name: str, value: Any, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"config.json field '{name}' must be an integer, got {shown(value)}",
                          field=name)
    if isinstance(value, float) and not math.isfinite(value):
        # JSON's Infinity / NaN, which configs may hold (read as Python's json reads them)
        raise ConfigError(f"config.json field '{name}' must be a finite integer, got "
                          f"{_json_constant(value)}", field=name)
    if isinstance(value, float) and value != int(value):
        raise ConfigError(f"config.json field '{name}' must be an integer, got {shown(value)}",
                          field=name)
    if not minimum <= value <= maximum:
        # the value as the config wrote it (1e308 stays 1e+308, not 309 digits)
        raise ConfigError(
            f"config.json field '{name}' must be between {minimum:,} and {maximum:,}, "
            f"got {shown(value)}",
            field=name,
        )
    return int(value)


def _json_constant(value: float) -> str:
    """A non-finite float as JSON text spells it (``Infinity``, ``-Infinity``, ``NaN``)."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


# ---------------------------------------------------------------------------------------------
# layer kinds

#: Nemotron-H block names (transformers' NemotronHConfig layers_block_type, with the legacy
#: names remap_legacy_layer_types maps) -> the letters of hybrid_override_pattern
_NEMOTRON_H_BLOCKS = {"mamba": "M", "linear_attention": "M", "attention": "*",
                      "full_attention": "*", "moe": "E", "mlp": "-"}


def _nemotron_h_letters(cfg: Mapping[str, Any], list_key: str, pattern_key: str,
                        default: str | None) -> str:
    """A Nemotron-H block layout as pattern letters, read as transformers' NemotronHConfig
    reads it: the ``list_key`` list (``layers_block_type``, or its alias ``layer_types``) wins;
    else the legacy ``pattern_key`` string; else ``default``."""
    blocks = cfg.get(list_key)
    if blocks is None and list_key == "layers_block_type":
        blocks = cfg.get("layer_types")
    if blocks is not None:
        if not isinstance(blocks, list) or not blocks:
            raise ConfigError(f"config.json '{list_key}' must be a list of block types "
                              "(mamba, attention, moe or mlp)", field=list_key)
        letters = []
        for i, name in enumerate(blocks):
            letter = _NEMOTRON_H_BLOCKS.get(name) if isinstance(name, str) else None
            if letter is None:
                raise ConfigError(f"{list_key}[{i}] is {shown(name)}; expected one of "
                                  f"{', '.join(sorted(_NEMOTRON_H_BLOCKS))}", field=list_key)
            letters.append(letter)
        return "".join(letters)
    pattern = cfg.get(pattern_key)
    if pattern is None and default is not None:
        return default
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"a nemotron_h config needs '{list_key}' (a list of block types) or "
                          f"'{pattern_key}' (a string of one letter per layer)", field=list_key)
    for i, ch in enumerate(pattern):
        if ch not in "M*-E":
            raise ConfigError(f"{pattern_key}[{i}] is '{ch}'; expected M, *, - or E",
                              field=pattern_key)
    return pattern


def nemotron_h_pattern(cfg: Mapping[str, Any]) -> str:
    """The decoder's blocks of a Nemotron-H config, one letter per layer (M Mamba-2, * attention,
    E MoE, - MLP). The layer count is the pattern's length; a ``num_hidden_layers`` beside it
    must agree (transformers derives the count from the list and only warns)."""
    pattern = _nemotron_h_letters(cfg, "layers_block_type", "hybrid_override_pattern", None)
    if len(pattern) > 4096:
        raise ConfigError(f"a nemotron_h config lists {len(pattern):,} layers; at most 4,096",
                          field="layers_block_type")
    stated = cfg.get("num_hidden_layers")
    if stated is not None:
        stated = _check_int("num_hidden_layers", stated, 1, 4096)
        if stated != len(pattern):
            field = ("hybrid_override_pattern" if cfg.get("layers_block_type") is None
                     and cfg.get("layer_types") is None else "layers_block_type")
            raise ConfigError(f"config.json '{field}' lists {len(pattern)} layers but "
                              f"num_hidden_layers is {stated}", field=field)
    return pattern


def nemotron_h_mtp_pattern(cfg: Mapping[str, Any]) -> str:
    """The blocks of one Nemotron-H MTP step: ``mtp_layers_block_type``, else the legacy
    ``mtp_hybrid_override_pattern``, else transformers' default (attention, then MoE)."""
    return _nemotron_h_letters(cfg, "mtp_layers_block_type", "mtp_hybrid_override_pattern", "*E")



def _layer_kinds(r: _Reader, n_layers: int) -> list[set[LayerKind]]:
    """For each layer, the cache-holding kinds it has (Falcon-H1 layers have two)."""
    cfg, mt = r.cfg, r.model_type
    if mt in MIMO_V2_TYPES and ("hybrid_layer_pattern" in cfg or "layer_types" not in cfg):
        return _mimo_kinds(cfg, n_layers)
    if mt == "zaya":
        return _hybrid_kinds(cfg, n_layers, "ZAYA", full_every=1)
    if mt in INKLING2_TYPES:
        return _hybrid_kinds(cfg, n_layers, "Inkling-2", full_every=6)
    layer_types = cfg.get("layer_types")
    if layer_types is None and mt == "lfm3":
        # Lfm3Config's default: full attention every 4th layer from layer 2, sliding every 4th
        # from layer 4, the gated short convolution elsewhere
        layer_types = ["full_attention" if i % 4 == 2 else "sliding_attention"
                       if i % 4 == 0 and i > 0 else "conv" for i in range(n_layers)]
    if layer_types is not None and mt != "nemotron_h":
        n_mtp = r.opt_int("num_nextn_predict_layers", 0, maximum=64) or 0
        if isinstance(layer_types, list) and n_mtp and len(layer_types) == n_layers + n_mtp:
            # Step-3.5/3.7 list the draft (MTP) layers' types after the decoder's
            layer_types = layer_types[:n_layers]
        return _from_layer_types(layer_types, n_layers, mt, mla=r.has("kv_lora_rank"))

    if isinstance(cfg.get("linear_attn_config"), dict):
        return _kimi_linear_kinds(cfg["linear_attn_config"], n_layers)
    if r.has("kv_lora_rank"):
        return [{LayerKind.MLA} for _ in range(n_layers)]
    if mt in ("mllama", "mllama_text_model") or "cross_attention_layers" in cfg:
        cross = cfg.get("cross_attention_layers")
        if not isinstance(cross, list) or not all(isinstance(i, int) for i in cross):
            raise ConfigError("config.json 'cross_attention_layers' must be a list of layer "
                              "indices for an mllama model", field="cross_attention_layers")
        return [{LayerKind.CROSS} if i in cross else {LayerKind.FULL} for i in range(n_layers)]
    if mt == "qwen3_next":
        interval = r.get_int("full_attention_interval")
        return [{LayerKind.FULL} if (i + 1) % interval == 0 else {LayerKind.LINEAR}
                for i in range(n_layers)]
    if mt == "jamba":
        period, offset = r.get_int("attn_layer_period"), r.get_int("attn_layer_offset", minimum=0)
        return [{LayerKind.FULL} if i % period == offset else {LayerKind.MAMBA}
                for i in range(n_layers)]
    if mt == "nemotron_h":
        # Mamba-2 and attention layers hold a cache; MoE and MLP layers none
        letter_kinds = {"M": {LayerKind.MAMBA}, "*": {LayerKind.FULL}}
        return [set(letter_kinds.get(ch, set())) for ch in nemotron_h_pattern(cfg)]
    if mt == "falcon_h1":
        return [{LayerKind.FULL, LayerKind.MAMBA} for _ in range(n_layers)]
    if mt == "bamba":
        attn = cfg.get("attn_layer_indices") or []  # BambaConfig's None: Mamba layers alone
        if not isinstance(attn, list) or not all(isinstance(i, int) for i in attn):
            raise ConfigError("config.json 'attn_layer_indices' must list the attention "
                              "layers of a Bamba model", field="attn_layer_indices")
        return [{LayerKind.FULL} if i in attn else {LayerKind.MAMBA} for i in range(n_layers)]
    if mt in ("minimax", "minimax_text_01", "minimax_m1"):
        types = cfg.get("attn_type_list")
        if isinstance(types, list) and len(types) == n_layers:
            return [{LayerKind.FULL} if t == 1 else {LayerKind.LINEAR} for t in types]
        if types is not None:
            raise ConfigError(f"config.json 'attn_type_list' must list {n_layers} layers of 0 or 1",
                              field="attn_type_list")
        return [{LayerKind.FULL} for _ in range(n_layers)]
    if mt in ("mamba", "falcon_mamba", "mamba2"):
        return [{LayerKind.MAMBA} for _ in range(n_layers)]
    if mt == "rwkv7":
        return [{LayerKind.LINEAR} for _ in range(n_layers)]
    if mt == "zamba2":
        return [{LayerKind.MAMBA, LayerKind.FULL} if hybrid else {LayerKind.MAMBA}
                for hybrid in _zamba2_hybrid(cfg, n_layers)]
    if mt in ("llama4_text", "llama4"):
        return _llama4_kinds(r, n_layers)
    if mt == "gemma2":
        return [{LayerKind.SLIDING} if i % 2 == 0 else {LayerKind.FULL} for i in range(n_layers)]
    if mt == "plamo3":
        # PLaMo 3 (its Plamo3Config, vLLM plamo3.py): every sliding_window_pattern-th layer full
        pattern = r.get_int("sliding_window_pattern")
        return [{LayerKind.FULL} if (i + 1) % pattern == 0 else {LayerKind.SLIDING}
                for i in range(n_layers)]
    if mt in ("gemma3_text", "gemma3", "cohere2"):
        pattern = r.get_int("sliding_window_pattern")
        return [{LayerKind.SLIDING} if (i + 1) % pattern else {LayerKind.FULL}
                for i in range(n_layers)]

    window = cfg.get("sliding_window")
    uses_window = cfg.get("use_sliding_window")
    if window is not None and uses_window is not False and window:
        if uses_window is True and "max_window_layers" in cfg:
            first = r.get_int("max_window_layers", minimum=0)
            return [{LayerKind.SLIDING} if i >= first else {LayerKind.FULL}
                    for i in range(n_layers)]
        return [{LayerKind.SLIDING} for _ in range(n_layers)]
    return [{LayerKind.FULL} for _ in range(n_layers)]


#: config fields that only recurrent (Mamba, RWKV, linear-attention) layers have, and the
#: fields that place such layers among the attention ones
_RECURRENT_FIELDS = ("mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_n_heads",
                     "mamba_num_heads", "mamba_headdim", "mamba_d_head", "ssm_state_size",
                     "ssm_cfg", "layers_block_type", "block_types", "attn_layer_indices",
                     "attn_layer_period", "hybrid_override_pattern", "linear_attn_config",
                     "time_mix_extra_dim", "rescale_every",
                     # Bailing's linear-attention hybrids (a full layer closing each group),
                     # Apriel-H's per-layer mixer list
                     "layer_group_size", "hybrid_block_layout")


def _check_recurrent_found(lm: Mapping[str, Any], model_type: str,
                           kinds: list[set[LayerKind]]) -> None:
    """Refuse a config that describes recurrent layers where kvplan found none: an
    architecture whose layer pattern it does not know, which would otherwise be planned as
    attention alone."""
    if any(k.is_recurrent for ks in kinds for k in ks):
        return
    fields = [f for f in _RECURRENT_FIELDS if f in lm]
    if fields:
        raise ConfigError(f"config.json has fields of recurrent layers ({', '.join(fields)}) "
                          f"but kvplan does not know which layers of model_type '{model_type}' "
                          "hold them: its cache cannot be sized from this config",
                          field="model_type")


def _zamba2_hybrid(cfg: Mapping[str, Any], n_layers: int) -> list[bool]:
    """Which Zamba2 layers are hybrid: a shared attention block (its own K/V at each such
    layer) before the layer's Mamba-2 mixer. ``layers_block_type`` names each layer "hybrid" or
    "mamba" ("linear_attention" where transformers 5 saved it); ``hybrid_layer_ids`` lists the
    hybrid ones where no block types are given."""
    types = cfg.get("layers_block_type")
    if types is not None:
        if (not isinstance(types, list) or len(types) != n_layers
                or not all(t in ("hybrid", "mamba", "linear_attention") for t in types)):
            raise ConfigError(f"config.json 'layers_block_type' must name each of the "
                              f"{n_layers} layers of a Zamba2 model 'hybrid' or 'mamba'",
                              field="layers_block_type")
        return [t == "hybrid" for t in types]
    ids = cfg.get("hybrid_layer_ids")
    if (not isinstance(ids, list) or not ids
            or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n_layers
                       for i in ids)):
        raise ConfigError("config.json has no 'layers_block_type' (nor 'hybrid_layer_ids' "
                          "listing layers below num_hidden_layers): kvplan cannot tell which "
                          "Zamba2 layers apply the shared attention", field="layers_block_type")
    return [i in ids for i in range(n_layers)]


#: transformers 5 saves DeepSeek-V3.2's and GLM-5's layers as "indexed_attention"
#: (DeepseekV32Config, GlmMoeDsaConfig): MLA with the lightning indexer. Other architectures
#: use the name for other attention (grouped-query heads under an indexer), refused by name
_INDEXED_MLA_TYPES = frozenset({"deepseek_v32", "glm_moe_dsa", "hy_v4", "axk2"}) | MISTRAL4_TYPES

#: hybrids whose recurrent layers are Mamba mixers (a "linear_attention" layer type is one)
_MAMBA_HYBRIDS = frozenset({"granitemoehybrid", "bamba", "falcon_h1", "jamba", "nemotron_h"})


def _from_layer_types(layer_types: Any, n_layers: int, model_type: str, *,
                      mla: bool = False) -> list[set[LayerKind]]:
    """Each layer's kinds from ``layer_types``; ``mla``: the config has a ``kv_lora_rank``,
    and its global layers are MLA whatever their name (transformers 5 writes Kimi-Linear's
    "full_attention", legacy dots3 configs name their DSA layers so)."""
    if not isinstance(layer_types, list) or len(layer_types) != n_layers:
        count = len(layer_types) if isinstance(layer_types, list) else "not a list"
        raise ConfigError(
            f"config.json 'layer_types' must list one type per layer ({n_layers}), got {count}",
            field="layer_types",
        )
    kinds: list[set[LayerKind]] = []
    for i, name in enumerate(layer_types):
        kind = _LAYER_TYPE_KINDS.get(name) if isinstance(name, str) else None
        if name == "indexed_attention" and model_type in _INDEXED_MLA_TYPES:
            kind = LayerKind.MLA
        elif name == "indexed_attention" and model_type in QWEN4_EXP_TYPES:
            # Qwen4ExpTextConfig renames the checkpoint's "full_attention": grouped-query
            # attention under the QSA indexer (_qsa_groups adds the indexer's caches)
            kind = LayerKind.FULL
        if kind is LayerKind.FULL and mla:
            kind = LayerKind.MLA
        if kind is LayerKind.LINEAR and model_type in _MAMBA_HYBRIDS:
            # transformers 5 saves a Mamba hybrid's Mamba layers as "linear_attention"
            kind = LayerKind.MAMBA
        if kind is None:
            known = ", ".join(sorted(_LAYER_TYPE_KINDS))
            raise ConfigError(
                f"layer_types[{i}] is {shown(name)}, a layer type kvplan cannot size (known: {known})",
                field="layer_types",
            )
        kinds.append({kind})
    return kinds


def _layer_flags(value: Any, n_layers: int) -> list[bool] | None:
    """A config's per-layer 0/1 list as flags; None unless it is a list of ``n_layers`` of
    them (booleans refused: configs write the integers)."""
    if (not isinstance(value, list) or len(value) != n_layers
            or not all(x in (0, 1) and not isinstance(x, bool) for x in value)):
        return None
    return [x == 1 for x in value]


def _mimo_kinds(cfg: dict[str, Any], n_layers: int) -> list[set[LayerKind]]:
    # MiMo-V2: hybrid_layer_pattern[i] is 1 for a sliding-window layer, 0 for full attention
    # (vLLM mimo_v2_flash.py is_compressed_softmax_layer; SGLang get_hybrid_layer_ids)
    sliding = _layer_flags(cfg.get("hybrid_layer_pattern"), n_layers)
    if sliding is None:
        raise ConfigError(f"config.json 'hybrid_layer_pattern' must list {n_layers} layers of 0 "
                          "(full attention) or 1 (sliding window)", field="hybrid_layer_pattern")
    return [{LayerKind.SLIDING} if s else {LayerKind.FULL} for s in sliding]


def _kimi_linear_kinds(lac: dict[str, Any], n_layers: int) -> list[set[LayerKind]]:
    # Kimi Linear numbers its layers from 1 in full_attn_layers / kda_layers
    full, kda = lac.get("full_attn_layers"), lac.get("kda_layers")
    if not isinstance(full, list) or not isinstance(kda, list):
        raise ConfigError("linear_attn_config needs 'full_attn_layers' and 'kda_layers' lists",
                          field="linear_attn_config")
    if sorted([*full, *kda]) != list(range(1, n_layers + 1)):
        raise ConfigError(f"linear_attn_config's full_attn_layers and kda_layers must cover "
                          f"layers 1..{n_layers} once each", field="linear_attn_config")
    return [{LayerKind.MLA} if i + 1 in full else {LayerKind.LINEAR} for i in range(n_layers)]


def _kda_state(lac: dict[str, Any]) -> tuple[int, int, str]:
    """Kimi Delta Attention: a head_dim × head_dim matrix per head + short convs on q, k, v."""
    values = {}
    for name in ("num_heads", "head_dim", "short_conv_kernel_size"):
        values[name] = _check_int(f"linear_attn_config.{name}", lac.get(name), 1, 1 << 16)
    heads, dim, kernel = values["num_heads"], values["head_dim"], values["short_conv_kernel_size"]
    conv = 3 * heads * dim
    return (heads * dim * dim + (kernel - 1) * conv, (kernel - 1) * conv,
            f"delta {heads}×{dim}×{dim} + conv {kernel - 1}×{conv}")


def _llama4_kinds(r: _Reader, n_layers: int) -> list[set[LayerKind]]:
    # Llama-4: layers that use RoPE attend within chunks of attention_chunk_size tokens; the
    # NoPE layers (every 4th by default) attend globally.
    if r.cfg.get("attention_chunk_size") is None and "attention_chunk_size" in r.cfg:
        return [{LayerKind.FULL} for _ in range(n_layers)]
    no_rope = r.cfg.get("no_rope_layers")
    if isinstance(no_rope, list) and no_rope:
        if len(no_rope) != n_layers:
            raise ConfigError(f"config.json 'no_rope_layers' must list {n_layers} layers",
                              field="no_rope_layers")
        return [{LayerKind.CHUNKED} if flag else {LayerKind.FULL} for flag in no_rope]
    interval = r.get_int("no_rope_layer_interval")
    return [{LayerKind.FULL} if (i + 1) % interval == 0 else {LayerKind.CHUNKED}
            for i in range(n_layers)]


# ---------------------------------------------------------------------------------------------
# Nemotron-NAS (DeciLM): every layer has its own attention and FFN in ``block_configs``


@dataclass(frozen=True)
class _NasBlock:
    """One Nemotron-NAS layer: attention "gqa" (``kv_heads`` KV heads), "linear" (a
    hidden x hidden projection, no cache) or "none" (no-op); FFN width (0: none, -1: linear)."""

    attention: str
    kv_heads: int
    ffn_width: int


def _nas_field(block: Mapping[str, Any], part: str, name: str, i: int) -> Any:
    sub = block.get(part)
    return sub.get(name) if isinstance(sub, Mapping) else None


def _nas_blocks(cfg: Mapping[str, Any], n_layers: int, n_heads: int,
                hidden: int) -> list[_NasBlock]:
    """The layers of a Nemotron-NAS config as vLLM's and SGLang's nemotron_nas.py build them:
    KV heads = num_attention_heads // n_heads_in_group, FFN width = 2·ffn_mult·hidden/3
    (truncated) rounded up to a multiple of 256 (DeciLM's _ffn_mult_to_intermediate_size)."""
    blocks = cfg.get("block_configs")
    if not isinstance(blocks, list) or len(blocks) != n_layers:
        count = len(blocks) if isinstance(blocks, list) else "none"
        raise ConfigError(f"a nemotron-nas config needs 'block_configs', one per layer "
                          f"({n_layers}), got {count}", field="block_configs")
    out = []
    for i, block in enumerate(blocks):
        if not isinstance(block, Mapping) or not all(
                isinstance(block.get(p), Mapping) for p in ("attention", "ffn")):
            raise ConfigError(f"block_configs[{i}] must hold an 'attention' and an 'ffn' object",
                              field="block_configs")
        for name in ("window_length", "num_sink_tokens", "sparsify"):
            if _nas_field(block, "attention", name, i) is not None:
                raise ConfigError(f"block_configs[{i}].attention.{name} is set: windowed, sink "
                                  "or sparsified NAS attention is not supported",
                                  field="block_configs")
        if _nas_field(block, "attention", "no_op", i):
            attention, kv = "none", 0
        elif _nas_field(block, "attention", "replace_with_linear", i):
            attention, kv = "linear", 0
        else:
            group = _check_int(f"block_configs[{i}].attention.n_heads_in_group",
                               _nas_field(block, "attention", "n_heads_in_group", i), 1, 1 << 16)
            if n_heads % group:
                raise ConfigError(f"block_configs[{i}].attention.n_heads_in_group ({group}) "
                                  f"must divide num_attention_heads ({n_heads})",
                                  field="block_configs")
            attention, kv = "gqa", n_heads // group
        if _nas_field(block, "ffn", "no_op", i):
            width = 0
        elif _nas_field(block, "ffn", "replace_with_linear", i):
            width = -1
        elif _nas_field(block, "ffn", "intermediate_size", i) is not None:
            width = _check_int(f"block_configs[{i}].ffn.intermediate_size",
                               _nas_field(block, "ffn", "intermediate_size", i), 1, 1 << 24)
        else:
            mult = _nas_field(block, "ffn", "ffn_mult", i)
            name = f"block_configs[{i}].ffn.ffn_mult"
            if isinstance(mult, bool) or not isinstance(mult, int | float):
                raise ConfigError(f"config.json field '{name}' must be a number, got "
                                  f"{shown(mult)}", field="block_configs")
            if isinstance(mult, float) and not math.isfinite(mult):
                raise ConfigError(f"config.json field '{name}' must be a finite number, got "
                                  f"{_json_constant(mult)}", field="block_configs")
            if not 0 < mult <= 1000:
                raise ConfigError(f"config.json field '{name}' must be a positive number up "
                                  f"to 1,000, got {shown(mult)}", field="block_configs")
            width = -(-int(2 * mult * hidden / 3) // 256) * 256
        out.append(_NasBlock(attention, kv, width))
    return out


def _nas_params(blocks: list[_NasBlock], *, hidden: int, n_heads: int, head_dim: int,
                vocab: int, tied: bool) -> ParamCount:
    """Weights of a Nemotron-NAS decoder: per layer its attention (q, k, v, o; or one
    hidden x hidden linear) and norm, its gated FFN (or one linear) and norm."""
    total = replicated = 0
    for b in blocks:
        if b.attention == "gqa":
            total += 2 * hidden * n_heads * head_dim + 2 * hidden * b.kv_heads * head_dim + hidden
            replicated += hidden
        elif b.attention == "linear":
            total += hidden * hidden + hidden
            replicated += hidden
        if b.ffn_width > 0:
            total += 3 * hidden * b.ffn_width + hidden
            replicated += hidden
        elif b.ffn_width < 0:
            total += hidden * hidden + hidden
            replicated += hidden
    # the final norm
    total += hidden
    replicated += hidden
    embedding = vocab * hidden * (1 if tied else 2)
    return ParamCount(total=total + embedding, active=total + vocab * hidden,
                      embedding=embedding, replicated=replicated)


# ---------------------------------------------------------------------------------------------
# geometry


def _chatglm_heads(r: _Reader) -> bool:
    """Whether the config counts its KV heads in ChatGLM's dialect (multi_query_group_num)."""
    return r.model_type == "chatglm" or "multi_query_group_num" in r.cfg


def _kv_heads(r: _Reader, n_heads: int) -> int | list[int]:
    cfg = r.cfg
    if _chatglm_heads(r):
        if cfg.get("multi_query_attention"):
            return r.get_int("multi_query_group_num")
        return n_heads
    if r.model_type == "gpt_bigcode":
        return 1 if cfg.get("multi_query", True) else n_heads
    if r.model_type == "falcon" and not cfg.get("new_decoder_architecture"):
        return 1 if cfg.get("multi_query") else n_heads
    value = r.raw("num_key_value_heads")
    if value is None:
        # transformers' documented default: as many KV heads as attention heads (MHA)
        r.defaulted.append("num_key_value_heads")
        return n_heads
    if isinstance(value, list):
        return [_check_int("num_key_value_heads", v, 1, 1 << 16) for v in value]
    return _check_int("num_key_value_heads", value, 1, 1 << 16)


#: kinds whose layers cache ``num_key_value_heads`` K and V heads shared by groups of query heads
_GQA_KINDS = (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.CROSS)


def _indexer_layers(r: _Reader, n_layers: int) -> list[bool]:
    """Which decoder layers of a DeepSeek Sparse Attention model run a lightning indexer (and
    so keep its key cache); the others reuse the top-k of an earlier layer.

    The rule is vLLM's (model_executor/models/deepseek_v2.py, DeepseekV2MLAAttention): a
    layer i skips its own top-k where ``max(i − index_skip_topk_offset + 1, 0)`` is not a
    multiple of ``index_topk_freq`` (defaults 2 and 1: every layer has an indexer), or, where
    the config gives ``index_topk_pattern``, where its letter for i is "S". A config that also
    lists ``indexer_types`` ("full" / "shared", GLM-5.2) must agree with it.
    """
    freq = r.opt_int("index_topk_freq", 1, minimum=1, maximum=4096) or 1
    offset = r.opt_int("index_skip_topk_offset", 2, minimum=0, maximum=4096)
    assert offset is not None
    pattern = r.cfg.get("index_topk_pattern")
    if pattern is not None and (
            not isinstance(pattern, str | list)
            or not all(isinstance(c, str) for c in pattern)):
        raise ConfigError("config.json 'index_topk_pattern' must be a string or a list of "
                          f"letters, got {shown(pattern)}", field="index_topk_pattern")
    has: list[bool] = []
    for i in range(n_layers):
        if pattern is None:
            skip = max(i - offset + 1, 0) % freq != 0
        else:
            skip = i < len(pattern) and pattern[i] == "S"
        has.append(not skip)
    types = r.cfg.get("indexer_types")
    if types is not None:
        if (not isinstance(types, list) or len(types) != n_layers
                or not all(t in ("full", "shared") for t in types)):
            raise ConfigError(f"config.json 'indexer_types' must list 'full' or 'shared' for "
                              f"each of the {n_layers} layers", field="indexer_types")
        listed = [t == "full" for t in types]
        if r.model_type == "hy_v4" or r.model_type in GLM5_NEXT_TYPES:
            # Hy4's and GLM-5.3-Flash's layers follow their list (HYV4Attention,
            # Glm5NextTextAttention: an indexer where "full")
            return listed
        if listed != has:
            first = next(i for i in range(n_layers) if listed[i] != has[i])
            raise ConfigError(
                f"config.json 'indexer_types' says layer {first} is '{types[first]}', but "
                f"index_topk_freq {freq} / index_skip_topk_offset {offset} give it "
                f"{'an' if has[first] else 'no'} indexer; kvplan cannot tell which one an "
                "engine follows", field="indexer_types")
    return has


def _check_kv_groups(r: _Reader, kinds: list[set[LayerKind]], n_heads: int,
                     kv: int | list[int]) -> None:
    """Grouped-query attention shares each KV head among n_heads / kv query heads: the KV
    head count must divide the attention head count (and so be at most it).

    Checked only where these uniform fields apply: a single KV head count read from the
    config and layers that cache those heads. MLA caches a latent instead, linear and
    recurrent layers a state; per-layer lists pair with per-layer query counts kvplan does
    not read.
    """
    if isinstance(kv, list) or not n_heads:
        return
    if not any(k in _GQA_KINDS for ks in kinds for k in ks):
        return
    # the field _kv_heads read (ChatGLM's dialect, else the alias this config spells)
    chatglm = _chatglm_heads(r)
    field = "multi_query_group_num" if chatglm else "num_key_value_heads"
    name = field if chatglm else r.key(field)
    heads = r.key("num_attention_heads")
    if kv > n_heads:
        raise ConfigError(
            f"config.json field '{name}' must be at most {heads} ({n_heads:,}), got {kv:,}",
            field=field)
    if n_heads % kv:
        raise ConfigError(
            f"config.json field '{name}' must divide {heads} ({n_heads:,}) evenly for "
            f"grouped-query attention, got {kv:,}", field=field)


def _head_dim(r: _Reader, hidden: int, n_heads: int) -> int:
    if r.model_type == "zamba2":
        # the shared attention reads the hidden state beside the input embeddings: 2 × hidden
        # wide, split over the heads (Zamba2Config.attention_head_dim)
        explicit = r.opt_int("attention_head_dim", minimum=1, maximum=1 << 16)
        if explicit is None and 2 * hidden % n_heads:
            raise ConfigError(f"config.json has no 'attention_head_dim' and 2 × hidden_size "
                              f"{2 * hidden} is not a multiple of num_attention_heads {n_heads}",
                              field="attention_head_dim")
        return 2 * hidden // n_heads if explicit is None else explicit
    explicit = r.opt_int("head_dim", minimum=1, maximum=1 << 16)
    if explicit is not None:
        return explicit
    if hidden % n_heads:
        raise ConfigError(
            f"config.json has no 'head_dim' and hidden_size {hidden} is not a multiple of "
            f"num_attention_heads {n_heads}", field="head_dim")
    return hidden // n_heads


def _ffn_widths(cfg: dict[str, Any], n_layers: int) -> list[int] | None:
    """The MLP width of every layer where ``intermediate_size`` lists one per layer (Gemma-3n's
    MatFormer configs); None where it is one number."""
    widths = cfg.get("intermediate_size")
    if not isinstance(widths, list):
        return None
    if len(widths) != n_layers or not all(
            isinstance(w, int) and not isinstance(w, bool) and 0 < w <= 1 << 24 for w in widths):
        raise ConfigError(f"config.json 'intermediate_size' must be one integer or list one "
                          f"positive width per layer ({n_layers})", field="intermediate_size")
    return widths


#: architectures whose configs may leave the MLP width out: 4 × hidden (the config classes'
#: defaults: GPT-2's and StarCoder's n_inner None, BLOOM's and Falcon's 4 × hidden; MPT's
#: expansion_ratio, 4 unless given)
_FFN_4X_HIDDEN = frozenset({"gpt2", "gpt_bigcode", "bloom", "falcon", "mpt", "gptj", "codegen",
                            "gpt_neo", "openai-gpt", "gpt_neox_japanese"})
#: the config field that names those classes' multiple, where it is not 4
_FFN_MULTIPLE = {"mpt": "expansion_ratio", "gpt_neox_japanese": "intermediate_multiple_size"}
#: architectures whose MLP width field spans the gate and up projections together (Moshi's
#: ffn_dim: MoshiGatingMLP's fc1 is hidden -> ffn_dim, split in two, fc2 ffn_dim / 2 -> hidden)
_PAIRED_FFN = frozenset({"moshi"})
#: pure state-space models: their layers are a Mamba mixer and no MLP (Mamba-1's
#: intermediate_size is the mixer's inner width)
_NO_MLP = frozenset({"mamba", "falcon_mamba", "mamba2"})


def _intermediate(r: _Reader, n_layers: int) -> int:
    """The config's MLP width: the widest layer's where it lists one per layer; where the
    config gives none, its class's multiple of the hidden size (_FFN_4X_HIDDEN), else 0 (a
    model whose every layer is a mixture of experts of their own width)."""
    if r.model_type in _NO_MLP:
        return 0
    widths = _ffn_widths(r.cfg, n_layers)
    if widths:
        return max(widths)
    given = r.opt_int("intermediate_size", 0)
    if given and r.model_type in _PAIRED_FFN:
        # the width of the gate and up projections together: each is half of it
        return given // 2
    if given or r.model_type not in _FFN_4X_HIDDEN:
        return given or 0
    times = 4
    multiple = _FFN_MULTIPLE.get(r.model_type)
    if multiple is not None and multiple in r.cfg:
        times = _check_int(multiple, r.cfg[multiple], 1, 64)
    else:
        r.defaulted.append(multiple or "intermediate_size")
    return times * r.get_int("hidden_size", maximum=1 << 20)


class _Attn(NamedTuple):
    """One attention layer's cache geometry and query heads."""

    kv: int
    #: K and V values per KV head
    dk: int
    dv: int
    q_heads: int
    #: the layer has a V projection of its own (Gemma 4's K=V full layers do not)
    v_proj: bool = True
    #: the layer projects K and V at all (HunYuan's cross-layer attention followers do not)
    kv_proj: bool = True


def _per_layer(cfg: Mapping[str, Any], n_layers: int) -> list[dict[str, int]]:
    """Each layer's entry of ``per_layer_config`` (transformers 5 saves per-layer attention
    fields there, keyed by the layer's zero-padded index: {"05": {"head_dim": 512}}), its
    head_dim and num_key_value_heads checked; empty dicts where the config has none."""
    out: list[dict[str, int]] = [{} for _ in range(n_layers)]
    per = cfg.get("per_layer_config")
    if per is None:
        return out
    if not isinstance(per, Mapping):
        raise ConfigError("config.json 'per_layer_config' must map layer indices to fields",
                          field="per_layer_config")
    for key, entry in per.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else -1
        if not 0 <= index < n_layers or not isinstance(entry, Mapping):
            raise ConfigError(f"config.json 'per_layer_config' has {shown(key)}: expected a "
                              f"layer index below {n_layers} mapping to its fields",
                              field="per_layer_config")
        for name in ("head_dim", "num_key_value_heads"):
            if name in entry:
                out[index][name] = _check_int(f"per_layer_config.{key}.{name}", entry[name],
                                              1, 1 << 16)
    return out


def _attention_geometry(r: _Reader, kinds: list[set[LayerKind]], kv_list: list[int],
                        n_heads: int, head_dim: int) -> tuple[list[_Attn], frozenset[int]]:
    """Per layer, the KV heads and K/V widths its cache holds (and its query heads); and the
    layers that keep no cache of their own (Gemma 4's KV-shared tail)."""
    cfg, mt = r.cfg, r.model_type
    n = len(kinds)
    out = [_Attn(kv_list[i], head_dim, head_dim, n_heads) for i in range(n)]
    shared: frozenset[int] = frozenset()
    if mt in GEMMA4_TYPES:
        # full-attention layers: global_head_dim wide; with attention_k_eq_v their V is their K
        # (no v_proj) and they have num_global_key_value_heads heads. Engines still cache V:
        # vLLM loads K's weights into the V slot (gemma4.py Gemma4DecoderLayer), llama.cpp
        # stores Kcur as Vcur (gemma4-iswa.cpp).
        # a config saved by transformers 5 may give them per layer instead, in per_layer_config
        per = _per_layer(cfg, n)
        full_dim = r.opt_int("global_head_dim", maximum=1 << 16) or head_dim
        k_eq_v = r.get_bool("attention_k_eq_v", False)
        listed_kv = k_eq_v and all(
            "num_key_value_heads" in per[i] for i, ks in enumerate(kinds) if LayerKind.FULL in ks)
        full_kv = (r.get_int("num_global_key_value_heads", maximum=1 << 16)
                   if k_eq_v and not listed_kv else 0)
        for i, ks in enumerate(kinds):
            if LayerKind.FULL in ks:
                dim = per[i].get("head_dim", full_dim)
                kv = per[i].get("num_key_value_heads") if k_eq_v else None
                out[i] = _Attn(kv or full_kv or kv_list[i], dim, dim, n_heads, not k_eq_v)
    elif mt in MIMO_V2_TYPES or mt in INKLING2_TYPES:
        # vLLM mimo_v2_flash.py MiMoV2FlashDecoderLayer (and Inkling2SlidingAttention):
        # sliding layers take the swa_* fields
        # (swa_v_head_dim defaulting to swa_head_dim), full layers head_dim and v_head_dim
        v_dim = r.opt_int("v_head_dim", maximum=1 << 16) or head_dim
        swa_kv = r.get_int("swa_num_key_value_heads", maximum=1 << 16)
        swa_dim = r.get_int("swa_head_dim", maximum=1 << 16)
        swa_v = r.opt_int("swa_v_head_dim", maximum=1 << 16) or swa_dim
        swa_q = r.opt_int("swa_num_attention_heads", maximum=1 << 16) or n_heads
        for i, ks in enumerate(kinds):
            if LayerKind.SLIDING in ks:
                out[i] = _Attn(swa_kv, swa_dim, swa_v, swa_q)
            else:
                out[i] = _Attn(kv_list[i], head_dim, v_dim, n_heads)
    elif mt in STEP3P5_TYPES and isinstance(cfg.get("attention_other_setting"), dict):
        # vLLM step3p5.py Step3p5DecoderLayer: layers of attention_other_setting's
        # attention_type take its heads, KV groups and head_dim
        other = cfg["attention_other_setting"]
        kind = _LAYER_TYPE_KINDS.get(other.get("attention_type", ""))
        o_kv = _check_int("attention_other_setting.num_attention_groups",
                          other.get("num_attention_groups"), 1, 1 << 16)
        o_q = _check_int("attention_other_setting.num_attention_heads",
                         other.get("num_attention_heads", n_heads), 1, 1 << 16)
        o_dim = _check_int("attention_other_setting.head_dim", other.get("head_dim", head_dim),
                           1, 1 << 16)
        for i, ks in enumerate(kinds):
            if kind in ks:
                out[i] = _Attn(o_kv, o_dim, o_dim, o_q)
    elif mt in LAGUNA_TYPES:
        # vLLM / SGLang / transformers laguna: num_attention_heads_per_layer[i] query heads,
        # num_key_value_heads × head_dim K and V in every layer
        q_heads = _laguna(r, n, n_heads, head_dim).q_heads
        out = [_Attn(kv_list[i], head_dim, head_dim, q_heads[i]) for i in range(n)]
    if mt in GEMMA4_TYPES or mt in GEMMA3N_TYPES:
        shared = _kv_shared_layers(r, kinds)
    elif mt in HUNYUAN_TYPES:
        shared = _cla_followers(r, n)
        # a follower projects only q (and o): it attends over its leader's K and V
        out = [g._replace(kv_proj=False) if i in shared else g for i, g in enumerate(out)]
    return out, shared


def cla_share_factor(cfg: Mapping[str, Any]) -> int:
    """HunYuan's cross-layer attention: how many consecutive layers share one K/V (1: none).
    Read as vLLM hunyuan_v1.py _get_cla_factor does: cla_share_factor where use_cla is true."""
    if cfg.get("use_cla") is not True:
        return 1
    return _check_int("cla_share_factor", cfg.get("cla_share_factor", 1), 1, 4096)


def _cla_followers(r: _Reader, n_layers: int) -> frozenset[int]:
    """The layers of a cross-layer-attention group after its first, which reuse the K and V
    of the group's first layer (model.cla_followers)."""
    return cla_followers(n_layers, cla_share_factor(r.cfg))


class _HunYuanMoE(NamedTuple):
    """HunYuan's per-layer MoE widths: routed experts a token takes, an expert's width, the
    shared MLP's width (intermediate_size × num_shared_expert; 0 without use_mixed_mlp_moe)."""

    top_k: list[int]
    expert: list[int]
    shared: list[int]


def _hunyuan_moe(r: _Reader, n_layers: int, inter: int) -> _HunYuanMoE:
    """Read moe_topk, moe_intermediate_size and num_shared_expert, each one integer or a list
    of one per layer, as vLLM hunyuan_v1.py HunYuanSparseMoeBlock does (moe_intermediate_size
    absent: intermediate_size; the shared MLP is intermediate_size × num_shared_expert wide)."""
    cfg = r.cfg

    def per_layer(key: str, default: int | None) -> list[int]:
        value = cfg.get(key)
        if value is None:
            if default is None:
                raise ConfigError(f"config.json has no '{key}', which kvplan needs to size "
                                  f"this model (model_type '{r.model_type}')", field=key)
            return [default] * n_layers
        if isinstance(value, list):
            if len(value) != n_layers:
                raise ConfigError(f"config.json '{key}' must be one integer or list one per "
                                  f"layer ({n_layers}), got {len(value)}", field=key)
            return [_check_int(f"{key}[{i}]", v, 0, 1 << 24) for i, v in enumerate(value)]
        return [_check_int(key, value, 0, 1 << 24)] * n_layers

    top_k = per_layer("moe_topk", None)
    expert = per_layer("moe_intermediate_size", inter)
    mixed = cfg.get("use_mixed_mlp_moe")
    if not isinstance(mixed, bool | int):
        # vLLM reads config.use_mixed_mlp_moe with no default: whether a shared MLP runs
        # beside the experts is the config's to say
        raise ConfigError("config.json has no 'use_mixed_mlp_moe' (true or false), which "
                          "says whether a HunYuan MoE layer runs a shared MLP",
                          field="use_mixed_mlp_moe")
    n_shared = per_layer("num_shared_expert", 1) if mixed else [0] * n_layers
    return _HunYuanMoE(top_k, expert, [inter * k for k in n_shared])


def _kv_shared_layers(r: _Reader, kinds: list[set[LayerKind]]) -> frozenset[int]:
    """Gemma 4 / Gemma-3n: the last ``num_kv_shared_layers`` layers read the cache of the last
    earlier layer of their type and keep none (vLLM kv_sharing_target_layer_name, llama.cpp
    hparams.has_kv)."""
    n = len(kinds)
    n_shared = r.opt_int("num_kv_shared_layers", 0, maximum=n) or 0
    if not n_shared:
        return frozenset()
    first = n - n_shared
    for i in range(first, n):
        if not any(kinds[j] == kinds[i] for j in range(first)):
            raise ConfigError(
                f"num_kv_shared_layers {n_shared}: layer {i} has no earlier layer of its "
                "attention type to share a cache with", field="num_kv_shared_layers")
    return frozenset(range(first, n))


def _kv_shared_sources(kinds: list[set[LayerKind]],
                       shared: frozenset[int]) -> tuple[tuple[int, int], ...]:
    """(layer, source) for each KV-shared layer: the last layer before the shared tail with
    the same attention kinds (``_kv_shared_layers`` has checked that one exists)."""
    if not shared:
        return ()
    first = min(shared)
    return tuple((i, max(j for j in range(first) if kinds[j] == kinds[i]))
                 for i in sorted(shared))


class _Laguna(NamedTuple):
    """Laguna's per-layer fields: query heads, the output gate's width per query head (1: one
    scalar a head, head_dim: one a channel, 0: no gate) and which layers run the MoE block."""

    q_heads: list[int]
    gate_per_head: int
    sparse: list[bool]


#: Laguna's ``gating`` values -> per head (True) or per element (False); vLLM laguna.py and
#: SGLang configs/laguna.py read True as per-head (transformers' LagunaConfig has no other)
_LAGUNA_GATING = {True: True, "per-head": True, "per_head": True, "per-element": False,
                  "per_element": False}


def _sparse_layers(mlp_types: Any, n_layers: int) -> list[bool]:
    """``mlp_layer_types`` ('dense' or 'sparse' a layer) as each layer's holding experts."""
    if (not isinstance(mlp_types, list) or len(mlp_types) != n_layers
            or not all(t in ("dense", "sparse") for t in mlp_types)):
        raise ConfigError(f"config.json 'mlp_layer_types' must list 'dense' or 'sparse' for "
                          f"each of the {n_layers} layers", field="mlp_layer_types")
    return [t == "sparse" for t in mlp_types]


def _laguna(r: _Reader, n_layers: int, n_heads: int, head_dim: int) -> _Laguna:
    """Read Laguna's ``num_attention_heads_per_layer``, ``gating`` / ``gating_types`` and
    ``mlp_layer_types`` (with ``mlp_only_layers`` / ``decoder_sparse_step`` where a config also
    gives them: they must agree), as transformers' modeling_laguna.py builds the layers."""
    cfg = r.cfg
    heads = cfg.get("num_attention_heads_per_layer")
    if heads is None:
        q_heads = [n_heads] * n_layers
    else:
        if not isinstance(heads, list) or len(heads) != n_layers:
            raise ConfigError(f"config.json 'num_attention_heads_per_layer' must list one head "
                              f"count per layer ({n_layers})",
                              field="num_attention_heads_per_layer")
        q_heads = [_check_int("num_attention_heads_per_layer", h, 1, 1 << 16) for h in heads]
    kv = r.raw("num_key_value_heads") or n_heads
    for i, h in enumerate(q_heads):
        if isinstance(kv, int) and h % kv:
            raise ConfigError(f"config.json 'num_attention_heads_per_layer'[{i}] ({h}) must be "
                              f"a multiple of num_key_value_heads ({kv})",
                              field="num_attention_heads_per_layer")
    gating = cfg.get("gating", False)
    if gating is False or gating is None:
        per_head: bool | None = None
    elif isinstance(gating, bool | str) and gating in _LAGUNA_GATING:
        per_head = _LAGUNA_GATING[gating]
    else:
        raise ConfigError(f"config.json 'gating' is {shown(gating)}; kvplan sizes Laguna's "
                          "output gate for true, 'per-head', 'per-element' or false",
                          field="gating")
    types = cfg.get("gating_types")
    if types is not None:
        # one entry per layer; the engines read only 'gating', so the two must agree
        want = {True: "per_head", False: "per_element", None: None}[per_head]
        if (not isinstance(types, list) or len(types) != n_layers
                or any(t.replace("-", "_") != want if isinstance(t, str) else want is not None
                       for t in types)):
            raise ConfigError(f"config.json 'gating_types' must list {want or 'no gate'} for "
                              f"each of the {n_layers} layers, as 'gating' ({shown(gating)}) "
                              "says: the engines build one gate for all layers from 'gating'",
                              field="gating_types")
    if r.get_bool("use_bidirectional_attention", False):
        raise ConfigError("config.json 'use_bidirectional_attention' is true: a Laguna model "
                          "without causal attention is not a decoder kvplan sizes",
                          field="use_bidirectional_attention")
    mlp_types = cfg.get("mlp_layer_types")
    if mlp_types is None:
        # transformers' LagunaConfig default: the first layer dense, the rest sparse
        mlp_types = ["dense"] + ["sparse"] * (n_layers - 1)
    sparse = _sparse_layers(mlp_types, n_layers)
    if "mlp_only_layers" in cfg or "decoder_sparse_step" in cfg:
        # vLLM's laguna.py picks MoE layers by mlp_only_layers and decoder_sparse_step
        step = r.opt_int("decoder_sparse_step", 1, minimum=1) or 1
        dense = cfg.get("mlp_only_layers") or []
        if not isinstance(dense, list):
            raise ConfigError("config.json 'mlp_only_layers' must be a list of layer indices",
                              field="mlp_only_layers")
        legacy = [i not in dense and (i + 1) % step == 0 for i in range(n_layers)]
        if legacy != sparse:
            first = next(i for i in range(n_layers) if legacy[i] != sparse[i])
            raise ConfigError(
                f"config.json 'mlp_layer_types' says layer {first} is '{mlp_types[first]}', "
                "but mlp_only_layers / decoder_sparse_step make it "
                f"{'sparse' if legacy[first] else 'dense'}; kvplan cannot tell which one an "
                "engine follows", field="mlp_layer_types")
    gate = 0 if per_head is None else 1 if per_head else head_dim
    return _Laguna(q_heads, gate, sparse)


def _rwkv7_heads(r: _Reader, hidden: int) -> tuple[int, int]:
    """RWKV-7's (heads, head width): RWKV7Config gives one and derives the other from
    hidden_size (head_dim 64 where it gives neither)."""
    heads = r.opt_int("num_heads", minimum=1, maximum=1 << 16)
    dim = r.opt_int("head_dim", minimum=1, maximum=1 << 16)
    if dim is None and heads is None:
        dim = 64
        r.defaulted.append("head_dim")
    if heads is None:
        assert dim is not None
        if hidden % dim:
            raise ConfigError(f"config.json 'head_dim' {dim} does not divide hidden_size "
                              f"{hidden}", field="head_dim")
        heads = hidden // dim
    if dim is None:
        dim = hidden // heads
    return heads, dim


def _rwkv7_state(r: _Reader, hidden: int) -> tuple[int, int, str]:
    """RWKV-7's state a layer: a head_dim × head_dim matrix a head (the wkv state) and two
    token shifts of hidden_size (time mixing's and channel mixing's previous token), which
    llama.cpp keeps as its R row (token_shift_count × n_embd)."""
    heads, dim = _rwkv7_heads(r, hidden)
    shift = 2 * hidden
    return (heads * dim * dim + shift, shift,
            f"wkv {heads}×{dim}×{dim} + token shift 2×{hidden}")


def _rwkv7_params(r: _Reader, n_layers: int, hidden: int, vocab: int) -> ParamCount:
    """RWKV-7's parameters as fla's RWKV7ForCausalLM builds them: in each layer time mixing's
    r, k, v, o projections, its low-rank decay (w), in-context rate (a), gate (g) and, after
    the first layer, value-residual (v) projections (all but the gate with a bias on their
    up-projection), nine per-channel vectors, the group norm; channel mixing's key and value
    (relu², no gate) and its token-shift mix; two layer norms (three in the first); the
    embedding, final norm and head."""
    cfg = r.cfg
    ratio = r.opt_int("hidden_ratio", 4, minimum=1, maximum=64) or 4
    inter = r.opt_int("intermediate_size", minimum=1, maximum=1 << 24)
    if inter is None:
        inter = -(-hidden * ratio // 32) * 32
    ranks = {name: r.opt_int(name, default, minimum=1, maximum=1 << 16) or default
             for name, default in (("decay_low_rank_dim", 64), ("gate_low_rank_dim", 128),
                                   ("a_low_rank_dim", 64), ("v_low_rank_dim", 16))}
    norm = 2 * hidden if r.get_bool("norm_bias", True) else hidden
    values = cfg.get("value_dim")
    if values is None or isinstance(values, int):
        values = [values or hidden] * n_layers
    if (not isinstance(values, list) or len(values) != n_layers
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                       for v in values)):
        raise ConfigError(f"config.json 'value_dim' must be a width or one a layer "
                          f"({n_layers})", field="value_dim")
    modules: list[Module] = []
    total = replicated = 0
    for i, vdim in enumerate(values):
        proj = [_Part(("attn",), "r_proj", hidden * hidden, hidden),
                _Part(("attn",), "k_proj", hidden * hidden, hidden),
                _Part(("attn",), "v_proj", hidden * vdim, vdim),
                _Part(("attn",), "o_proj", vdim * hidden, hidden)]
        low = (2 * hidden * ranks["decay_low_rank_dim"] + hidden
               + 2 * hidden * ranks["a_low_rank_dim"] + hidden
               + hidden * ranks["gate_low_rank_dim"] + ranks["gate_low_rank_dim"] * vdim)
        if i:
            low += hidden * ranks["v_low_rank_dim"] + ranks["v_low_rank_dim"] * vdim + vdim
        ffn = [_Part(("ffn",), "key", hidden * inter, inter),
               _Part(("ffn",), "value", inter * hidden, hidden)]
        # x_r, x_w, x_k, x_v, x_a, x_g, k_k, k_a, r_k; the group norm's weight and bias;
        # channel mixing's x_k; the two layer norms (and the first layer's pre-norm)
        small = 9 * hidden + 2 * vdim + hidden + norm * (3 if i == 0 else 2)
        modules += [_module(i, part) for part in proj + ffn]
        modules.append(_module(i, _Part(("attn",), "lora", low, 0)))
        total += sum(p.params for p in proj + ffn) + low + small
        replicated += small
    tied = r.get_bool("tie_word_embeddings", False)
    embedding = vocab * hidden * (1 if tied else 2)
    modules += _embed_and_head(vocab, hidden, tied)
    return ParamCount(total=total + embedding + norm, active=total + vocab * hidden + norm,
                      embedding=embedding, replicated=replicated + norm,
                      modules=tuple(modules))


def _gdn_state(r: _Reader) -> tuple[int, int, str]:
    nv = r.get_int("linear_num_value_heads")
    nk = r.get_int("linear_num_key_heads")
    dk = r.get_int("linear_key_head_dim")
    dv = r.get_int("linear_value_head_dim")
    kc = r.get_int("linear_conv_kernel_dim")
    conv_width = 2 * nk * dk + nv * dv
    values = nv * dk * dv + (kc - 1) * conv_width
    return values, (kc - 1) * conv_width, f"delta {nv}×{dk}×{dv} + conv {kc - 1}×{conv_width}"


def _conv_shape(r: _Reader, hidden: int) -> tuple[int, int]:
    """LFM2's gated short convolution: (channels, taps)."""
    return (r.opt_int("conv_dim", maximum=1 << 20) or hidden,
            r.get_int("conv_L_cache", maximum=1 << 10))


def _hybrid_kinds(cfg: Mapping[str, Any], n_layers: int, name: str,
                  full_every: int) -> list[set[LayerKind]]:
    """ZAYA's and Inkling-2's layers: each attends ("hybrid": all tokens, "hybrid_sliding": a
    window) and keeps a convolution's state (ZAYA's CCA projection; Inkling-2's K, V and
    residual convolutions). Where none are listed, every ``full_every``-th is "hybrid" and the
    rest "hybrid_sliding", as the config class makes them (ZayaConfig: every layer;
    Inkling2TextConfig: every sixth)."""
    types = cfg.get("layer_types") or [
        "hybrid" if (i + 1) % full_every == 0 else "hybrid_sliding" for i in range(n_layers)]
    kinds = {"hybrid": LayerKind.FULL, "hybrid_sliding": LayerKind.SLIDING}
    if (not isinstance(types, list) or len(types) != n_layers
            or not all(t in kinds for t in types)):
        raise ConfigError(f"config.json 'layer_types' must name each of the {n_layers} layers "
                          f"of a {name} model 'hybrid' or 'hybrid_sliding'", field="layer_types")
    return [{kinds[t], LayerKind.CONV} for t in types]


def _inkling2_conv(r: _Reader, hidden: int, g: _Attn) -> tuple[int, int, str]:
    """Inkling-2's convolution state a layer: the last (kernel − 1) inputs of its K and V
    convolutions (KV heads × head_dim channels each) and of its two convolutions on the
    residual stream, after attention and after the MLP (hidden channels each)."""
    taps = r.opt_int("conv_kernel_size", 4, minimum=1, maximum=64) or 4
    kv = g.kv * g.dk
    channels = 2 * kv + 2 * hidden
    return ((taps - 1) * channels, kv,
            f"conv {taps - 1}×(K {kv} + V {kv} + 2 × residual {hidden})")


#: architectures whose convolution layers ``_added_params`` counts (ZAYA's CCA convolutions,
#: Inkling-2's K, V and residual ones), not the LFM2-style short convolution
_OWN_CONV_COUNT = frozenset({"zaya", *INKLING2_TYPES})


def _cache_repeats(r: _Reader) -> int:
    """How many caches each decoder layer holds: LongCat-Flash's two attentions, Ouro's
    total_ut_steps runs (4 where its config leaves it out, as vLLM's model reads it), 1 for
    others."""
    if r.model_type in LONGCAT_TYPES:
        return 2
    if r.model_type in OURO_TYPES:
        return r.opt_int("total_ut_steps", 4, minimum=1, maximum=64) or 4
    return 1


def _added_params(r: _Reader, kinds: list[set[LayerKind]], geometry: list[_Attn],
                  moe: list[bool], *, hidden: int, n_heads: int, head_dim: int, vocab: int,
                  n_experts: int) -> tuple[int, int, int, list[Module]] | None:
    """What an architecture adds to the decoder ``_count_params`` counts: (parameters, of those
    replicated, per-layer embedding tables, modules); None for the others."""
    mt = r.model_type
    if mt == "axk2":
        total, replicated, parts = _axk2_params(r, moe, hidden, n_heads)
        return total, replicated, 0, parts
    if mt == "hy_v4":
        total, replicated, parts = _hy4_params(r, len(kinds), hidden, n_heads)
        return total, replicated, 0, parts
    if mt in INKLING2_TYPES:
        total, parts = _inkling2_params(r, kinds, geometry, hidden, vocab)
        return total, 0, 0, parts
    if mt == "zaya":
        total, replicated, parts = _zaya_params(r, kinds, hidden, n_heads, geometry[0].kv,
                                                head_dim, n_experts)
        return total, replicated, 0, parts
    if mt in QWEN4_EXP_TYPES:
        total, replicated, table, parts = _qwen4_exp_params(r, kinds, hidden, vocab)
        return total, replicated, table, parts
    if mt in GLM5_NEXT_TYPES:
        total, parts = _glm5_next_params(r, kinds, hidden)
        return total, total, 0, parts
    return None


def _glm5_next_params(r: _Reader, kinds: list[set[LayerKind]],
                      hidden: int) -> tuple[int, list[Module]]:
    """What GLM-5.3-Flash adds to an MLA / DSA and KDA decoder: (parameters, modules), all
    replicated. Each indexer's pooling weights (a learned position a pool slot, index_kpool ×
    index_head_dim, and the gate's hidden → index_head_dim); in every layer, around attention
    and around the MLP, hyper-connections over hc_mult copies of the hidden state (each a
    (2 + hc) · hc × hc · hidden projection, its bias and three scales; the streams' final
    collapse is an unweighted mean)."""
    hc = r.opt_int("hc_mult", 1, minimum=1, maximum=64) or 1
    mix = (2 + hc) * hc
    hyper = 2 * (mix * hc * hidden + mix + 3) if hc > 1 else 0
    pool = 0
    if r.has("index_topk"):
        dim = r.get_int("index_head_dim")
        pool = r.get_int("index_kpool", maximum=1 << 16) * dim + dim * hidden
    modules: list[Module] = []
    total = 0
    for i, ks in enumerate(kinds):
        if LayerKind.INDEXER in ks and pool:
            modules.append(_module(i, _Part(("self_attn.indexer",), "index_kpool_compress",
                                            pool, 0, replicated=True)))
            total += pool
        if hyper:
            modules.append(_module(i, _Part(("attn_hc", "ffn_hc"), "", hyper, 0,
                                            replicated=True)))
            total += hyper
    return total, modules


def _mla_rope(r: _Reader) -> int:
    """An MLA latent's rotary part: ``qk_rope_head_dim``, 0 for GLM-5.3-Flash (its config
    class requires 0: no rotary positions)."""
    return r.get_int("qk_rope_head_dim", minimum=0 if r.model_type in GLM5_NEXT_TYPES else 1)


def _nope_mla_layers(r: _Reader, n_layers: int) -> frozenset[int]:
    """Mistral-Large-4's MLA layers without rotary positions (``no_rope_layers`` 0): their
    latent and key heads have no rotary part. Empty for other models."""
    if r.model_type not in MISTRAL4_TYPES:
        return frozenset()
    flags = r.cfg.get("no_rope_layers")
    if flags is None:
        return frozenset()
    if (not isinstance(flags, list) or len(flags) != n_layers
            or not all(f in (0, 1) and not isinstance(f, bool) for f in flags)):
        raise ConfigError(f"config.json 'no_rope_layers' must give 0 or 1 for each of the "
                          f"{n_layers} layers", field="no_rope_layers")
    return frozenset(i for i, f in enumerate(flags) if f == 0)


def _axk2_params(r: _Reader, moe: list[bool], hidden: int,
                 n_heads: int) -> tuple[int, int, list[Module]]:
    """What A.X-K2 changes in an MLA / DSA decoder: (parameters, of those replicated,
    modules). Its q_gate_proj takes the query's low-rank state beside its norm (2 ×
    q_lora_rank) to each head's query and output gate (qk_head_dim + v_head_dim), in place of
    the q_b_proj of q_lora_rank → qk_head_dim; and its norms carry a low-rank gate (hidden →
    gated_norm_rank → hidden) before attention in every layer, before the MLP in the MoE
    layers."""
    q_rank = r.get_int("q_lora_rank", maximum=1 << 20)
    qk = (r.get_int("qk_nope_head_dim", maximum=1 << 16)
          + r.get_int("qk_rope_head_dim", maximum=1 << 16))
    v_dim = r.get_int("v_head_dim", maximum=1 << 16)
    rank = r.opt_int("gated_norm_rank", 16, minimum=1, maximum=1 << 16) or 16
    q_gate = 2 * q_rank * n_heads * (qk + v_dim) - q_rank * n_heads * qk
    gates = [2 * hidden * rank * (2 if sparse else 1) for sparse in moe]
    modules = [m for i, g in enumerate(gates) for m in (
        _module(i, _Part(("self_attn",), "q_gate_proj", q_gate, 0)),
        _module(i, _Part(("norm_gates",), "", g, 0, replicated=True)))]
    return len(moe) * q_gate + sum(gates), sum(gates), modules


def _hy4_params(r: _Reader, n_layers: int, hidden: int,
                n_heads: int) -> tuple[int, int, list[Module]]:
    """What Hy4 adds to an MLA / DSA decoder: (parameters, of those replicated, modules). Its
    attention's output gate (hidden → heads × v_head_dim) and a sink a head; around
    attention and around the MLP, hyper-connections over hc_mult copies of the hidden state
    (a 2·hc_mult × hc_mult · hidden projection, its bias and two scales), and before the
    head one more (hc_mult rows, their bias, a scale)."""
    hc = r.opt_int("hc_mult", 1, minimum=1, maximum=64) or 1
    v_dim = r.get_int("v_head_dim", maximum=1 << 16)
    gate = hidden * n_heads * v_dim
    streams = hc * hidden
    hyper = 2 * (2 * hc * streams + 2 * hc + 2) if hc > 1 else 0
    head = streams * hc + hc + 1 if hc > 1 else 0
    modules = [m for i in range(n_layers) for m in (
        _module(i, _Part(("self_attn",), "gate_proj", gate, n_heads * v_dim)),
        _module(i, _Part(("hc",), "", hyper + n_heads, 0, replicated=True)))]
    if head:
        modules.append(_module(None, _Part(("hc_head",), "", head, 0, replicated=True)))
    return (n_layers * (gate + hyper + n_heads) + head, n_layers * (hyper + n_heads) + head,
            modules)


def _inkling2_params(r: _Reader, kinds: list[set[LayerKind]], geometry: list[_Attn],
                     hidden: int, vocab: int) -> tuple[int, list[Module]]:
    """What Inkling-2 adds to a decoder of attention and routed experts: (parameters,
    modules). In each layer the output gate (hidden → query heads × head_dim), the relative
    position bias (hidden → heads × d_rel, d_rel × rel_extent, a scale a head), the attention
    sinks' projection, the query norm's scale, the K and V convolutions (sliding layers: a
    static kernel a channel; full layers: a static kernel and its per-token part projected from
    the hidden state, a kernel a KV head) and the two residual convolutions; the lm_head holds
    ``unpadded_vocab_size`` rows, fewer than the embedding's ``vocab_size``."""
    taps = r.opt_int("conv_kernel_size", 4, minimum=1, maximum=64) or 4
    d_rel = r.opt_int("d_rel", 16, minimum=1, maximum=1 << 16) or 16
    extent = r.opt_int("rel_extent", 1024, minimum=1, maximum=1 << 24) or 1024
    total = 0
    modules: list[Module] = []
    for i, (ks, g) in enumerate(zip(kinds, geometry, strict=True)):
        q, kv = g.q_heads * g.dk, g.kv * g.dk
        gate = hidden * q
        rel = hidden * g.q_heads * d_rel + d_rel * extent + g.q_heads * d_rel
        kv_conv = 2 * (kv * taps + (hidden * g.kv * taps if LayerKind.FULL in ks else 0))
        small = hidden * g.q_heads + q + 2 * hidden * taps
        modules += [_module(i, _Part(("self_attn",), "o_proj.gate_proj", gate, q)),
                    _module(i, _Part(("self_attn",), "relative_position_bias", rel, 0)),
                    _module(i, _Part(("self_attn",), "convolutions", kv_conv + small, 0))]
        total += gate + rel + kv_conv + small
    unpadded = r.opt_int("unpadded_vocab_size", vocab, minimum=1, maximum=vocab) or vocab
    return total - (vocab - unpadded) * hidden, modules


def _cca_kernels(r: _Reader) -> tuple[int, int]:
    """ZAYA's CCA convolution kernels: the depthwise one's taps (cca_time0) and the grouped
    one's (cca_time1), ZayaConfig's 2 each where the config gives none."""
    return (r.opt_int("cca_time0", 2, minimum=1, maximum=64) or 2,
            r.opt_int("cca_time1", 2, minimum=1, maximum=64) or 2)


def _cca_state(r: _Reader, n_heads: int, kv_heads: int, head_dim: int) -> tuple[int, int, str]:
    """ZAYA's Compressed Convolutional Attention state a layer: its q/k convolutions (a
    depthwise one of cca_time0 taps, then a grouped one of cca_time1) keep the last
    (cca_time0 − 1) + (cca_time1 − 1) inputs of the q and k channels, and its value path the
    previous token's delayed half of V (ZayaCCAProjection)."""
    t0, t1 = _cca_kernels(r)
    taps = (t0 - 1) + (t1 - 1)
    channels = (n_heads + kv_heads) * head_dim
    delayed = kv_heads * head_dim // 2
    return (taps * channels + delayed, channels,
            f"q/k conv {taps}×{channels} + delayed V {delayed}")


def _zaya_params(r: _Reader, kinds: list[set[LayerKind]], hidden: int, n_heads: int,
                 kv_heads: int, head_dim: int, n_experts: int) -> tuple[int, int, list[Module]]:
    """What ZAYA adds to a decoder of attention and routed experts, and its router in place of
    one hidden × experts matrix: (parameters, of those replicated, modules). Its CCA
    convolutions (depthwise over the q and k channels, then grouped a head, each with a bias);
    its router (a hidden → router_hidden_size projection with a bias, a norm, two square
    layers with biases, an output to the experts and one more, and from the second layer a
    state scale); the residual scales around attention and the MLP (four vectors each) and
    the model's input scale and bias."""
    channels = (n_heads + kv_heads) * head_dim
    t0, t1 = _cca_kernels(r)
    conv = channels * t0 + channels + channels * head_dim * t1 + channels
    width = r.opt_int("router_hidden_size", 256, minimum=1, maximum=1 << 16) or 256
    router = (hidden * width + width + width + 2 * (width * width + width)
              + width * (n_experts + 1))
    total = replicated = 0
    modules: list[Module] = []
    for i, _ in enumerate(kinds):
        scale = width if i else 0
        # beyond the hidden × experts router the decoder's count gives every MoE layer
        rest = router + scale - hidden * n_experts
        modules += [_module(i, _Part(("self_attn",), "qkv_proj.conv_qk", conv, 0)),
                    _module(i, _Part(("mlp",), "gate.router_mlp", rest, 0, replicated=True))]
        total += conv + rest + 8 * hidden
        replicated += rest + 8 * hidden
    return total + 2 * hidden, replicated + 2 * hidden, modules


def _conv_state(r: _Reader, hidden: int) -> tuple[int, int, str]:
    """The state of a short convolution: the last taps − 1 inputs of every channel."""
    width, kernel = _conv_shape(r, hidden)
    values = (kernel - 1) * width
    return values, width, f"conv {kernel - 1}×{width}"


#: DbrxConfig's nested fields (attn_config, ffn_config) as the flat names kvplan reads, with
#: DbrxAttentionConfig's and DbrxFFNConfig's defaults
_DBRX_FIELDS = (("attn_config", "kv_n_heads", "num_key_value_heads", 1),
                ("ffn_config", "ffn_hidden_size", "intermediate_size", 3584),
                ("ffn_config", "moe_num_experts", "num_local_experts", 4),
                ("ffn_config", "moe_top_k", "num_experts_per_tok", 1))


def _dbrx_fields(lm: dict[str, Any]) -> dict[str, Any]:
    """DBRX's config: grouped-query attention and every layer's experts under attn_config and
    ffn_config (each expert a gated w1, v1, w2 of ffn_hidden_size)."""
    out = dict(lm)
    for part, name, flat, default in _DBRX_FIELDS:
        sub = lm.get(part)
        value = sub.get(name, default) if isinstance(sub, Mapping) else default
        out.setdefault(flat, value)
    return out


#: DeepSeek-V4's layer types as transformers 5 saves them (DeepseekV4Config.layer_types), by
#: the compress_rates key that gives each its ratio (0: the sliding window alone)
_V4_LAYER_TYPES = ("sliding_attention", "compressed_sparse_attention",
                   "heavily_compressed_attention")
_V4_DEFAULT_RATES = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def _resaved_fields(lm: dict[str, Any], model_type: str) -> dict[str, Any]:
    """A config transformers 5 re-saved, in the fields its original checkpoint ships:
    DeepSeek-V4's ``layer_types`` and ``compress_rates`` as ``compress_ratios``, its
    ``mlp_layer_types`` ("hash_moe" first) as ``num_hash_layers``; Kimi-Linear's
    ``layer_types`` and ``linear_*`` fields as its ``linear_attn_config``. Others unchanged."""
    types = lm.get("layer_types")
    if model_type == "deepseek_v4" and "compress_ratios" not in lm and isinstance(types, list):
        rates = lm.get("compress_rates")
        rates = {**_V4_DEFAULT_RATES, **(rates if isinstance(rates, Mapping) else {})}
        ratios = []
        for i, name in enumerate(types):
            if name not in _V4_LAYER_TYPES:
                raise ConfigError(f"layer_types[{i}] is {shown(name)}, not a DeepSeek-V4 layer "
                                  f"type ({', '.join(_V4_LAYER_TYPES)})", field="layer_types")
            ratios.append(rates.get(name, 0))
        if len(ratios) == lm.get("num_hidden_layers"):
            # transformers keeps the decoder's layers only; the MTP layers after them are
            # sliding-window layers (0) in both published V4 configs
            n_mtp = lm.get("num_nextn_predict_layers")
            ratios += [0] * (n_mtp if isinstance(n_mtp, int) and 0 < n_mtp <= 64 else 0)
        out = {**lm, "compress_ratios": ratios}
        mlp = lm.get("mlp_layer_types")
        if "num_hash_layers" not in lm and isinstance(mlp, list):
            out["num_hash_layers"] = sum(1 for t in mlp if t == "hash_moe")
        return out
    if model_type == "kimi_linear" and isinstance(lm.get("linear_attn_config"), dict):
        # transformers 5 writes layer_types beside the checkpoint's linear_attn_config, whose
        # full layers are MLA: the block list rules
        return {k: v for k, v in lm.items() if k != "layer_types"}
    if model_type in ("kimi_linear", "bailing_hybrid") and isinstance(types, list):
        bad = next((i for i, t in enumerate(types)
                    if t not in ("full_attention", "linear_attention")), None)
        if bad is not None:
            raise ConfigError(f"layer_types[{bad}] is {shown(types[bad])}, not a Kimi-Linear "
                              "layer type (full_attention, linear_attention)",
                              field="layer_types")
        out = {k: v for k, v in lm.items() if k != "layer_types"}
        # KimiLinearConfig's defaults where the re-saved config leaves a field out
        out["linear_attn_config"] = _kimi_layout(
            [t == "full_attention" for t in types], lm.get("linear_num_heads", 32),
            lm.get("linear_head_dim", 128), lm.get("linear_conv_kernel_dim", 4))
        return out
    if model_type in GLM5_NEXT_TYPES:
        return _glm5_next_fields(lm)
    return lm


def _kimi_layout(full: list[bool], heads: Any, dim: Any, kernel: Any) -> dict[str, Any]:
    """A ``linear_attn_config`` in Kimi-Linear's form for layers whose ``full`` flags mark the
    MLA / full-attention ones (the rest Kimi Delta Attention), numbered from 1, with the KDA
    heads, head width and short-convolution kernel as given (checked by _kda_state)."""
    return {"full_attn_layers": [i + 1 for i, f in enumerate(full) if f],
            "kda_layers": [i + 1 for i, f in enumerate(full) if not f],
            "num_heads": heads, "head_dim": dim, "short_conv_kernel_size": kernel}


#: GLM-5.3-Flash's names for its MLA / DSA layers in ``layer_types`` (Glm5NextTextConfig
#: renames "full_attention" to "indexed_attention"; checkpoints write
#: "deepseek_sparse_attention")
_GLM5_NEXT_MLA = ("deepseek_sparse_attention", "indexed_attention", "full_attention")


def _glm5_next_fields(lm: dict[str, Any]) -> dict[str, Any]:
    """GLM-5.3-Flash's layers in Kimi-Linear's form (``linear_attn_config`` numbering them
    from 1): its checkpoints list them in ``linear_attn_config`` from 0 (SGLang's
    Glm5NextConfig reads kda_layers first), transformers' config in ``layer_types``, and
    where neither is given every fourth layer (3, 7, …) is MLA (Glm5NextTextConfig's
    default). The KDA heads come from linear_attn_config or the ``linear_*`` fields (64 × 128,
    kernel 4 by default). ``index_kpool`` must be given: transformers defaults it to 16,
    SGLang to 1."""
    n = _check_int("num_hidden_layers", lm.get("num_hidden_layers"), 1, 4096)
    lac = lm.get("linear_attn_config")
    if lac is not None and not isinstance(lac, dict):
        raise ConfigError("config.json 'linear_attn_config' must be an object",
                          field="linear_attn_config")
    lac = lac or {}
    types = lm.get("layer_types")
    mla_types: list[bool] | None = None
    if types is not None:
        if not isinstance(types, list) or len(types) != n:
            raise ConfigError(f"config.json 'layer_types' must list one type per layer ({n})",
                              field="layer_types")
        bad = next((i for i, t in enumerate(types)
                    if t not in ("linear_attention", *_GLM5_NEXT_MLA)), None)
        if bad is not None:
            raise ConfigError(f"layer_types[{bad}] is {shown(types[bad])}, not a GLM-5.3-Flash "
                              f"layer type (linear_attention, {', '.join(_GLM5_NEXT_MLA)})",
                              field="layer_types")
        mla_types = [t != "linear_attention" for t in types]
    kda = lac.get("kda_layers")
    mla_listed: list[bool] | None = None
    if kda is not None:
        if (not isinstance(kda, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                 and 0 <= i < n for i in kda)
                or len(set(kda)) != len(kda)):
            raise ConfigError(f"linear_attn_config.kda_layers must list layers 0..{n - 1} at "
                              "most once each", field="linear_attn_config")
        mla_listed = [i not in kda for i in range(n)]
    if mla_types is not None and mla_listed is not None and mla_types != mla_listed:
        first = next(i for i in range(n) if mla_types[i] != mla_listed[i])
        raise ConfigError(f"config.json 'layer_types' and linear_attn_config.kda_layers "
                          f"disagree on layer {first}; kvplan cannot tell which one an engine "
                          "follows", field="layer_types")
    mla = mla_listed or mla_types or [i % 4 == 3 for i in range(n)]
    if "index_topk" in lm and "index_kpool" not in lm:
        raise ConfigError("config.json has no 'index_kpool', which sizes GLM-5.3-Flash's "
                          "pooled index keys (transformers defaults it to 16, SGLang to 1)",
                          field="index_kpool")
    out = {k: v for k, v in lm.items() if k != "layer_types"}
    out["linear_attn_config"] = _kimi_layout(
        mla, lac.get("num_heads", lm.get("linear_num_heads", 64)),
        lac.get("head_dim", lm.get("linear_head_dim", 128)),
        lac.get("short_conv_kernel_size", lm.get("linear_conv_kernel_dim", 4)))
    return out


#: fields only the Kimi Delta Attention layers of a Bailing hybrid (Ling-3.0) have
_BAILING_KDA_FIELDS = ("short_conv_kernel_size", "no_kda_lora", "kda_safe_gate",
                       "kda_lower_bound")


def _bailing_fields(lm: dict[str, Any], model_type: str) -> dict[str, Any]:
    """A Bailing hybrid's published config (``layer_group_size``, no ``layer_types``) in the
    fields kvplan reads: each group's last layer is full attention (MLA where the config has
    kv_lora_rank, else grouped-query), the others linear. Those are Kimi Delta Attention where
    the config has its short-convolution fields (Ling-3.0: a ``linear_attn_config`` as
    Kimi-Linear's, over num_attention_heads × head_dim), else lightning attention (Ring-linear
    2.0, Ling-2.5/2.6: ``layer_types``). Others unchanged."""
    if model_type in BAILING_TYPES and lm.get("use_mla_nope") is True:
        # SGLang's BailingHybridConfig then caches the latent without its rotary part; whether
        # the model code and the other engines do was not established
        raise ConfigError("config.json 'use_mla_nope' drops the rotary part of a Bailing "
                          "hybrid's MLA latent, which kvplan does not size (model_type "
                          f"'{model_type}')", field="use_mla_nope")
    if (model_type not in BAILING_TYPES or "layer_types" in lm or "layer_group_size" not in lm
            or isinstance(lm.get("linear_attn_config"), dict)):
        return lm
    group = _check_int("layer_group_size", lm["layer_group_size"], 1, 4096)
    layers = _check_int("num_hidden_layers", lm.get("num_hidden_layers"), 1, 4096)
    if layers % group:
        # the model code makes the layers past the last whole group full attention, vLLM's
        # and SGLang's linear: they would cache different layers
        raise ConfigError(f"config.json num_hidden_layers {layers} is not a whole number of "
                          f"layer_group_size {group} groups, where engines disagree on the "
                          "last layers' kind", field="layer_group_size")
    full = [(i + 1) % group == 0 for i in range(layers)]
    if any(f in lm for f in _BAILING_KDA_FIELDS):
        heads = lm.get("linear_num_heads", lm.get("num_attention_heads"))
        dim = lm.get("linear_head_dim", lm.get("head_dim"))
        for name, value in (("num_attention_heads", heads), ("head_dim", dim)):
            if value is None:
                raise ConfigError(f"config.json has no '{name}', which kvplan needs to size "
                                  "this model's Kimi Delta Attention layers (model_type "
                                  f"'{model_type}')", field=name)
        return {**lm, "linear_attn_config": _kimi_layout(
            full, _check_int("num_attention_heads", heads, 1, 1 << 16),
            _check_int("head_dim", dim, 1, 1 << 16), lm.get("short_conv_kernel_size", 4))}
    return {**lm, "layer_types": ["full_attention" if f else "linear_attention" for f in full]}


_QSA_FIELDS = ("indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget",
               "indexer_compress_ratio")


def _qsa(r: _Reader) -> tuple[int, int, int, int] | None:
    """Qwen4-Exp's QSA indexer: (compress ratio, token budget, index key width, index KV
    heads), checked as Qwen4ExpTextConfig checks them; None where the config sets none of its
    fields (attention without an indexer)."""
    if not any(r.has(f) for f in _QSA_FIELDS):
        return None
    ratio = r.get_int("indexer_compress_ratio", maximum=1 << 16)
    budget = r.get_int("indexer_budget", maximum=1 << 31)
    width = r.get_int("indexer_head_dim", maximum=1 << 16)
    kv = r.get_int("indexer_kv_heads", maximum=1 << 16)
    if budget % ratio:
        raise ConfigError(f"config.json 'indexer_budget' {budget} must be a multiple of "
                          f"indexer_compress_ratio {ratio}", field="indexer_budget")
    if kv != 1:
        raise ConfigError(f"config.json 'indexer_kv_heads' is {kv}; Qwen4-Exp's indexer keeps "
                          "one index key head", field="indexer_kv_heads")
    return ratio, budget, width, kv


def _ple_layers(r: _Reader, n_layers: int) -> list[int]:
    """The decoder layers (0-based) with a per-layer n-gram embedding: ``ple_layer_ids``
    counts from 1."""
    ids = r.cfg.get("ple_layer_ids") or []
    if (not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                             and 1 <= i <= n_layers for i in ids)):
        raise ConfigError(f"config.json 'ple_layer_ids' must list layer ids from 1 to "
                          f"{n_layers}", field="ple_layer_ids")
    return sorted(i - 1 for i in ids)


def _qsa_groups(r: _Reader, groups: list[LayerGroup], hidden: int,
                n_layers: int) -> list[LayerGroup]:
    """Qwen4-Exp's caches beside its K/V and Gated DeltaNet state: QSA mean-pools each
    ``indexer_compress_ratio`` tokens' index keys into one block key (kept per block) and keeps
    the raw keys of the block not yet complete (ratio rows a sequence: vLLM's QSAKeyStateCache
    ring without speculative tokens); a decode step attends to at most ``indexer_budget``
    selected tokens and the incomplete tail (budget + ratio − 1). A PLE layer's depthwise
    convolution over the hyper-connection streams (hc_count × hidden channels, dilation
    ngram_size) keeps (kernel − 1) · ngram_size columns a sequence, whole on every rank."""
    qsa = _qsa(r)
    out: list[LayerGroup] = []
    for g in groups:
        if g.kind is not LayerKind.FULL or qsa is None:
            out.append(g)
            continue
        ratio, budget, width, kv = qsa
        out.append(replace(g, read_limit=budget + ratio - 1))
        out.append(LayerGroup(LayerKind.INDEX, g.layers, n_kv_heads=kv, head_dim_k=width,
                              ratio=ratio, mtp=g.mtp))
        out.append(LayerGroup(LayerKind.COMPRESSOR, g.layers, state_values=ratio * width,
                              state_detail=f"unpooled index keys {ratio}×{width}",
                              ratio=ratio, mtp=g.mtp))
    ple = _ple_layers(r, n_layers)
    if ple:
        channels = (r.opt_int("hc_count", 1, minimum=1, maximum=64) or 1) * hidden
        kernel = r.get_int("ple_conv_kernel_size", maximum=1 << 10)
        columns = (kernel - 1) * r.get_int("ngram_size", maximum=64)
        values = columns * channels
        out.append(LayerGroup(LayerKind.CONV, tuple(ple), state_values=values,
                              conv_state_values=values, replicated_conv_values=values,
                              state_detail=f"PLE conv {columns}×{channels}"))
    return out


def _kpool_groups(r: _Reader, groups: list[LayerGroup]) -> list[LayerGroup]:
    """GLM-5.3-Flash's indexer keys: each complete pool of ``index_kpool`` tokens keeps one
    index key (the pool's keys gated into one; vLLM's Glm5NextIndexerCache and SGLang's
    index-K buffer keep a row a pool), and the pool not yet complete keeps its tokens' raw
    keys and gate scores (index_head_dim each) a sequence (vLLM's Glm5NextTailCache ring
    without speculative tokens, SGLang's compress tail)."""
    kpool = r.get_int("index_kpool", maximum=1 << 16)
    out: list[LayerGroup] = []
    for g in groups:
        if g.kind is not LayerKind.INDEXER:
            out.append(g)
            continue
        width = g.head_dim_k
        out.append(replace(g, kind=LayerKind.INDEX, ratio=kpool))
        out.append(LayerGroup(LayerKind.COMPRESSOR, g.layers, state_values=2 * kpool * width,
                              state_detail=f"unpooled index keys and gates {kpool}×2×{width}",
                              ratio=kpool, mtp=g.mtp))
    return out


def _is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for n below 3.3 × 10^24."""
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    if n in small:
        return True
    if any(n % p == 0 for p in small):
        return False
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _ngram_rows(base: int, first_head: int, heads: int, divisor: int) -> int:
    """Rows of one PLE layer's n-gram table: head h's vocabulary is the (h + 1)-th prime
    above ``base`` − 1 counted over every PLE layer's heads (Qwen4-Exp's
    ``_find_nth_prime_after``), the sum padded to a multiple of ``divisor``."""
    primes: list[int] = []
    n = base - 1
    while len(primes) < first_head + heads:
        n += 1
        if _is_prime(n):
            primes.append(n)
    rows = sum(primes[first_head:])
    return -(-rows // divisor) * divisor


def _qwen4_exp_params(r: _Reader, kinds: list[set[LayerKind]], hidden: int,
                      vocab: int) -> tuple[int, int, int, list[Module]]:
    """What Qwen4-Exp adds to a Gated DeltaNet / attention MoE decoder: (parameters, of those
    replicated, n-gram table rows × width, modules). Each attention layer's QSA indexer
    (index_qk_proj: hidden → (indexer heads + 1) × indexer_head_dim, two key/query norms);
    two hyper-connections a layer (a grouped norm over hc_count × hidden, a hc_lowrank
    down/up pair, a block inject to hc_count) and the final mixer (no inject); each PLE layer's
    key and value projections of its n-gram embedding, its conv over the streams and three
    norms, and its n-gram table (a lookup of (ngram_size − 1) × heads_per_ngram rows a token,
    kept apart as a per-layer embedding)."""
    n_layers = len(kinds)
    qsa = _qsa(r)
    hc = r.opt_int("hc_count", 1, minimum=1, maximum=64) or 1
    streams = hc * hidden
    lowrank = r.opt_int("hc_lowrank", 0, maximum=1 << 20) or 0
    parts: list[Module] = []
    total = replicated = table = 0
    indexer = index_rows = 0
    if qsa is not None:
        _, _, width, kv = qsa
        index_rows = (r.get_int("indexer_n_heads", maximum=1 << 16) + kv) * width
        indexer = hidden * index_rows + 2 * width  # the projection, its key and query norms
    for i, ks in enumerate(kinds):
        if LayerKind.FULL in ks and indexer:
            parts.append(_module(i, _Part(("self_attn",), "indexer.index_qk_proj",
                                          indexer, index_rows)))
            total += indexer
    mixer = streams + 2 * streams * lowrank
    hyper = 2 * (mixer + streams * hc) if hc > 1 else 0
    if hyper:
        for i in range(n_layers):
            parts += [_module(i, _Part((block,), "", hyper // 2, lowrank + streams + hc,
                                       replicated=True, matrices=3))
                      for block in ("attn_hyper_connection", "mlp_hyper_connection")]
        parts.append(_module(None, _Part(("hyper_connection_mixer",), "", mixer,
                                         lowrank + streams, replicated=True, matrices=2)))
        total += n_layers * hyper + mixer
        replicated += n_layers * hyper + mixer
    ple = _ple_layers(r, n_layers)
    if ple:
        embed = r.get_int("ple_embed_dim", maximum=1 << 20)
        ngram = r.get_int("ngram_size", minimum=2, maximum=64)
        heads = (ngram - 1) * r.get_int("heads_per_ngram", maximum=1024)
        if embed % heads:
            raise ConfigError(f"config.json 'ple_embed_dim' {embed} must split over the "
                              f"{heads} n-gram heads", field="ple_embed_dim")
        if len(ple) * heads > 4096:
            raise ConfigError(f"{len(ple)} PLE layers × {heads} n-gram heads is more n-gram "
                              "tables than kvplan sizes (4,096)", field="ple_layer_ids")
        base = r.get_int("ngram_vocab_size_base", minimum=2, maximum=1 << 48)
        divisor = r.opt_int("make_ngram_vocab_size_divisible_by", 1, minimum=1,
                            maximum=1 << 20) or 1
        kernel = r.get_int("ple_conv_kernel_size", maximum=1 << 10)
        for k, i in enumerate(ple):
            rows = _ngram_rows(base, k * heads, heads, divisor)
            table += rows * (embed // heads)
            layer = embed * streams + embed * hidden + streams * kernel + 3 * streams
            parts.append(_module(i, _Part(("ple",), "", layer, streams + hidden, matrices=2)))
            parts.append(_module(i, _Part(("ple",), "ple_embedding.ngram_embedding",
                                          rows * (embed // heads), 0), (0, 1)))
            total += layer
    return total, replicated, table, parts


def _is_lightning(cfg: Mapping[str, Any], model_type: str) -> bool:
    """MiniMax's linear layers, and a Bailing hybrid's without Kimi Delta Attention, are
    lightning attention (a kv state per head), not DeltaNet."""
    return model_type.startswith("minimax") or (
        model_type in BAILING_TYPES and not isinstance(cfg.get("linear_attn_config"), dict))


def _lightning_state(r: _Reader, n_heads: int, head_dim: int) -> tuple[int, int, str]:
    return n_heads * head_dim * head_dim, 0, f"kv {n_heads}×{head_dim}×{head_dim}"


def _mamba_state(r: _Reader, hidden: int) -> tuple[int, str, dict[str, int]]:
    cfg, mt = r.cfg, r.model_type
    def first(*names: str) -> Any:
        return next((cfg[n] for n in names if cfg.get(n) is not None), None)

    d_state = first("ssm_state_size", "mamba_d_state", "state_size", "d_state")
    d_conv = first("conv_kernel", "mamba_d_conv", "d_conv")
    # a pure Mamba-2 (Mamba2Config) names its heads without the prefix
    own = ("num_heads",) if mt == "mamba2" else ()
    n_heads = first("mamba_num_heads", "mamba_n_heads", "n_mamba_heads", *own)
    if d_state is None:
        d_state = r.opt_int("mamba_d_state")
    if d_conv is None:
        d_conv = r.opt_int("mamba_d_conv")
    if d_state is None or d_conv is None:
        missing = "ssm_state_size / mamba_d_state" if d_state is None else "conv_kernel / mamba_d_conv"
        raise ConfigError(f"config.json has no '{missing}', needed for the Mamba state",
                          field=missing.split(" ")[0])
    d_state = _check_int("ssm_state_size", d_state, 1, 1 << 16)
    d_conv = _check_int("conv_kernel", d_conv, 1, 1 << 10)
    if n_heads is not None and mt != "jamba":
        # Mamba2: n_heads × head_dim × d_state SSM + conv over x, B and C
        n_heads = _check_int("mamba_num_heads", n_heads, 1, 1 << 16)
        head_dim = first("mamba_head_dim", "mamba_d_head", "mamba_headdim",
                         *(("head_dim",) if own else ()))
        if head_dim == "auto" or (head_dim is None and mt == "zamba2"):
            # BambaConfig's "auto", and Zamba2Config's: the inner width over the heads
            widen = _check_int("mamba_expand", first("mamba_expand", "expand"), 1, 64)
            head_dim = widen * hidden // n_heads
        head_dim = _check_int("mamba_head_dim", head_dim, 1, 1 << 16)
        groups = _check_int("n_groups", first("n_groups", "mamba_n_groups", "mamba_ngroups")
                            or 1, 1, 1 << 12)
        d_inner = first("mamba_d_ssm")
        d_inner = n_heads * head_dim if d_inner is None else _check_int("mamba_d_ssm", d_inner, 1, 1 << 24)
        conv_width = d_inner + 2 * groups * d_state
        values = n_heads * head_dim * d_state + (d_conv - 1) * conv_width
        detail = f"ssm {n_heads}×{head_dim}×{d_state} + conv {d_conv - 1}×{conv_width}"
        shape = {"d_inner": d_inner, "d_state": d_state, "d_conv": d_conv, "n_groups": groups,
                 "n_heads": n_heads, "version": 2, "conv": (d_conv - 1) * conv_width}
        return values, detail, shape
    expand = first("mamba_expand", "expand")
    d_inner = first("intermediate_size") if mt in ("mamba", "falcon_mamba") else None
    if d_inner is None:
        if expand is None:
            expand = r.opt_int("mamba_expand")
        if expand is None:
            raise ConfigError("config.json has no 'mamba_expand', needed for the Mamba state",
                              field="mamba_expand")
        d_inner = _check_int("mamba_expand", expand, 1, 64) * hidden
    d_inner = _check_int("intermediate_size", d_inner, 1, 1 << 24)
    values = d_inner * d_state + (d_conv - 1) * d_inner
    detail = f"ssm {d_inner}×{d_state} + conv {d_conv - 1}×{d_inner}"
    return values, detail, {"d_inner": d_inner, "d_state": d_state, "d_conv": d_conv,
                            "n_groups": 0, "n_heads": 0, "version": 1,
                            "conv": (d_conv - 1) * d_inner}


def _cross_tokens(vision: dict[str, Any] | None) -> int:
    """Encoder tokens one image leaves in each cross-attention layer (Mllama)."""
    if not vision:
        raise ConfigError("a cross-attention model needs a 'vision_config' to size the image "
                          "tokens", field="vision_config")
    size, patch = vision.get("image_size"), vision.get("patch_size")
    tiles = vision.get("max_num_tiles", 1)
    for name, value in (("image_size", size), ("patch_size", patch), ("max_num_tiles", tiles)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"vision_config '{name}' must be a positive integer, got {shown(value)}",
                              field=f"vision_config.{name}")
    assert isinstance(size, int) and isinstance(patch, int) and isinstance(tiles, int)
    # one class token per tile
    return tiles * ((size // patch) ** 2 + 1)


# ---------------------------------------------------------------------------------------------
# parameters


def _moe_layers(r: _Reader, n_layers: int, kinds: list[set[LayerKind]]) -> list[bool]:
    cfg, mt = r.cfg, r.model_type
    n_experts = r.opt_int("num_experts", 0) or 0
    if n_experts <= 1 or cfg.get("is_moe") is False:
        # DOGE's config keeps its expert fields with is_moe false: dense MLPs alone
        return [False] * n_layers
    if mt == "nemotron_h":
        return [ch == "E" for ch in nemotron_h_pattern(cfg)]
    if mt in LAGUNA_TYPES:
        return _laguna(r, n_layers, r.get_int("num_attention_heads", maximum=1 << 16), 0).sparse
    if mt == "lfm2_moe":
        # LFM2-MoE: the first num_dense_layers (default 2) run a dense MLP (vLLM lfm2_moe.py,
        # transformers Lfm2MoeConfig)
        dense = r.opt_int("num_dense_layers", 2, minimum=0) or 0
        return [i >= dense for i in range(n_layers)]
    if mt.startswith("ernie4_5_moe") or "moe_layer_start_index" in cfg:
        # ERNIE-4.5: experts in layers start..end (inclusive) whose (i + 1) is a multiple of
        # moe_layer_interval (vLLM ernie45_moe.py Ernie4_5_MoeDecoderLayer)
        start = r.opt_int("moe_layer_start_index", 0) or 0
        end = r.opt_int("moe_layer_end_index", n_layers - 1)
        assert end is not None
        step = r.opt_int("moe_layer_interval", 1, minimum=1) or 1
        return [start <= i <= end and (i + 1) % step == 0 for i in range(n_layers)]
    freq = cfg.get("moe_layer_freq")
    if isinstance(freq, list):
        # MiMo-V2 (vLLM mimo_v2_flash.py is_moe_layer), MiniMax-M3: one 0/1 flag per layer
        moe = _layer_flags(freq, n_layers)
        if moe is None:
            raise ConfigError(f"config.json 'moe_layer_freq' must list {n_layers} layers of 0 or "
                              "1, or be one integer", field="moe_layer_freq")
        return moe
    types = cfg.get("mlp_layer_types")
    if types is not None and not any(k in cfg for k in ("moe_layers_enum", "first_k_dense_replace",
                                                         "mlp_only_layers")):
        # transformers 5 saves which layers hold experts as mlp_layer_types (Step-3.7: its
        # moe_layers_enum; GLM-4.7-Flash: its first_k_dense_replace)
        return _sparse_layers(types, n_layers)
    enum = cfg.get("moe_layers_enum")
    if isinstance(enum, str) and enum.strip():
        # Step-3.5: the MoE layers as a comma-separated list (vLLM step3p5.py)
        try:
            listed = {int(t) for t in enum.split(",") if t.strip()}
        except ValueError:
            raise ConfigError("config.json 'moe_layers_enum' must be comma-separated layer "
                              "numbers", field="moe_layers_enum") from None
        return [i in listed for i in range(n_layers)]
    if "first_k_dense_replace" in cfg:
        first = r.get_int("first_k_dense_replace", minimum=0)
        freq = r.opt_int("moe_layer_freq", 1, minimum=1) or 1
        return [i >= first and i % freq == 0 for i in range(n_layers)]
    if mt == "jamba":
        period, offset = r.get_int("expert_layer_period"), r.get_int("expert_layer_offset", minimum=0)
        return [i % period == offset for i in range(n_layers)]
    if "interleave_moe_layer_step" in cfg:
        step = r.get_int("interleave_moe_layer_step")
        moe = cfg.get("moe_layers")
        if isinstance(moe, list) and moe and all(isinstance(i, int) for i in moe):
            return [i in moe for i in range(n_layers)]
        return [(i + 1) % step == 0 for i in range(n_layers)]
    sparse_step = r.opt_int("decoder_sparse_step", 1, minimum=1) or 1
    dense_only_raw = cfg.get("mlp_only_layers") or []
    if not isinstance(dense_only_raw, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in dense_only_raw):
        raise ConfigError("config.json 'mlp_only_layers' must be a list of layer indices",
                          field="mlp_only_layers")
    dense_only = set(dense_only_raw)
    return [i not in dense_only and (i + 1) % sparse_step == 0 for i in range(n_layers)]


def _encoder_params(vision: dict[str, Any] | None, text_hidden: int, model_type: str = "") -> int:
    if not vision:
        return 0
    def get(*names: str) -> int | None:
        for n in names:
            value = vision.get(n)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    # Qwen2-VL's tower is embed_dim wide; its hidden_size is the merger's output (the LLM's)
    hidden = get("embed_dim", "hidden_size", "width", "d_model")
    depth = get("depth", "num_hidden_layers", "num_layers", "layers")
    if not hidden or not depth:
        return 0
    inter = get("intermediate_size", "mlp_dim", "ffn_dim") or (get("mlp_ratio") or 4) * hidden
    if model_type.startswith("glm4v") and get("out_hidden_size"):
        # GLM-4.1V/4.5V/4.6V: the blocks' MLP is out_hidden_size wide (Glm4vVisionMlp);
        # intermediate_size is the patch merger's
        inter = get("out_hidden_size") or inter
    patch = get("patch_size") or 14
    channels = get("in_channels", "num_channels", "in_chans") or 3
    temporal = get("temporal_patch_size") or 1
    merge = get("spatial_merge_size") or 1
    # Pixtral's blocks are gated whatever their activation (PixtralMLP: gate, up, down)
    gated = (3 if vision.get("hidden_act") in ("silu", "swiglu")
             or vision.get("model_type") == "pixtral" else 2)
    # q and o are hidden × hidden; k and v narrower where the tower groups its heads
    # (EXAONE 4.5's vision_config: 32 heads, 8 KV heads)
    heads = get("num_heads", "num_attention_heads")
    kv_heads = get("num_key_value_heads")
    kv_width = hidden * kv_heads // heads if heads and kv_heads and kv_heads < heads else hidden
    per_layer = 2 * hidden * hidden + 2 * hidden * kv_width + gated * hidden * inter + 4 * hidden
    patch_embed = channels * temporal * patch * patch * hidden
    if get("num_global_layers") is not None and get("max_num_tiles"):
        return _mllama_encoder(vision, hidden, depth, inter, patch, channels, text_hidden)
    merged = hidden * merge * merge
    projector = merged * merged + merged * text_hidden
    # Qwen3-VL: a learned position table, and one more patch merger (norm, two biased
    # linears) for every layer whose features are fed to the LLM ("deepstack")
    positions = (get("num_position_embeddings") or 0) * hidden
    deepstack = vision.get("deepstack_visual_indexes")
    n_deep = len(deepstack) if isinstance(deepstack, list) else 0
    deep = n_deep * (2 * merged + merged * merged + merged + merged * text_hidden + text_hidden)
    return depth * per_layer + patch_embed + projector + positions + deep


def _voxtral_audio(audio: Any, text_hidden: int) -> int:
    """Voxtral's audio tower: a Whisper encoder (transformers modeling_voxtral.py VoxtralEncoder)
    and the two-matrix projector to the text width; 0 for any other ``audio_config``.

    Encoder: conv1 (num_mel_bins -> d, 3 taps) and conv2 (d -> d, 3 taps), both biased; a
    max_source_positions × d position table; per layer q, v and o with biases and k without,
    fc1 (d -> intermediate) and fc2 back, both biased, and two LayerNorms (weight and bias); a
    final LayerNorm. Projector: linear_1 (intermediate_size -> text hidden) and linear_2 (text
    hidden -> text hidden), no biases (VoxtralMultiModalProjector)."""
    if not isinstance(audio, Mapping) or audio.get("model_type") != "voxtral_encoder":
        return 0
    d = _check_int("audio_config.hidden_size", audio.get("hidden_size"), 1, 1 << 16)
    layers = _check_int("audio_config.num_hidden_layers", audio.get("num_hidden_layers"), 1, 4096)
    inter = _check_int("audio_config.intermediate_size", audio.get("intermediate_size"), 1, 1 << 20)
    mels = _check_int("audio_config.num_mel_bins", audio.get("num_mel_bins"), 1, 1 << 16)
    positions = _check_int("audio_config.max_source_positions",
                           audio.get("max_source_positions"), 1, 1 << 24)
    convs = mels * d * 3 + d + d * d * 3 + d
    layer = 4 * d * d + 3 * d + 2 * d * inter + inter + d + 4 * d
    projector = inter * text_hidden + text_hidden * text_hidden
    return convs + positions * d + layers * layer + 2 * d + projector


#: parameters of timm's mobilenetv5_300m_enc, Gemma-3n's vision tower (keras-team/keras-hub
#: keras_hub/src/models/mobilenetv5/mobilenetv5_presets.py "mobilenetv5_300m_enc_gemma3n"
#: @b93373ada9594791c890a664ef0bd6205e8e81f4)
MOBILENETV5_300M_PARAMS = 294_284_096


def _gemma3n_towers(cfg: dict[str, Any], text_hidden: int) -> int:
    """Gemma-3n's audio encoder, vision tower and the two embedders that project them into
    the text width (transformers Gemma3nAudioEncoder, Gemma3nMultimodalEmbedder; SGLang
    models/gemma3n_audio.py builds the same tensors)."""
    def whole(sub: Mapping[str, Any], key: str, default: int) -> int:
        value = sub.get(key, default)
        return _check_int(key, value, 1, 1 << 20)

    total = 0
    vision = cfg.get("vision_config")
    if isinstance(vision, Mapping):
        width = whole(vision, "hidden_size", 2048)
        arch = vision.get("architecture", "mobilenetv5_300m_enc")
        if arch != "mobilenetv5_300m_enc":
            raise ConfigError(f"vision_config architecture {shown(arch)} is not the "
                              "mobilenetv5_300m_enc tower kvplan can weigh",
                              field="vision_config.architecture")
        # embedder: a table of vocab_size soft tokens, two norms, a projection to the text
        total += MOBILENETV5_300M_PARAMS + _mm_embedder(vision, width, text_hidden)
    audio = cfg.get("audio_config")
    if isinstance(audio, Mapping):
        d = whole(audio, "hidden_size", 1536)
        depth = whole(audio, "conf_num_hidden_layers", 12)
        kernel = whole(audio, "conf_conv_kernel_size", 5)
        heads = whole(audio, "conf_num_attention_heads", 8)
        feats = whole(audio, "input_feat_size", 128)
        channels = audio.get("sscp_conv_channel_size", [128, 32])
        kernels = audio.get("sscp_conv_kernel_size", [[3, 3], [3, 3]])
        strides = audio.get("sscp_conv_stride_size", [[2, 2], [2, 2]])
        if not (isinstance(channels, list) and isinstance(kernels, list)
                and isinstance(strides, list) and len(channels) == len(kernels) == len(strides)):
            raise ConfigError("audio_config's sscp_conv_channel_size, sscp_conv_kernel_size and "
                              "sscp_conv_stride_size must list one entry per convolution",
                              field="audio_config")
        # subsampling: unbiased 2-D convolutions, each with a per-channel norm scale, the
        # frequency axis padded by one on each side; then a projection of channels × bins
        sscp, in_ch, bins = 0, 1, feats
        for ch, (kt, kf), (_, sf) in zip(channels, kernels, strides, strict=True):
            sscp += in_ch * ch * kt * kf + ch
            in_ch, bins = ch, (bins + 2 - kf) // sf + 1
        sscp += in_ch * bins * d
        ffw = 2 * d * 4 * d + 2 * d  # d -> 4d -> d and two norms, twice a block
        # q, k, v, output and the relative-position projection; per-dim scale; two norms
        attn = 5 * d * d + d // heads + 2 * d
        conv = d * 2 * d + d * kernel + d * d + 2 * d  # GLU in, depthwise, out; two norms
        block = 2 * ffw + attn + conv + d
        total += sscp + depth * block + _mm_embedder(audio, d, text_hidden)
    return total


def _mm_embedder(sub: Mapping[str, Any], width: int, text_hidden: int) -> int:
    """Gemma3nMultimodalEmbedder: vocab_size hard tokens × width, hard and soft norms, a
    width -> text projection (its post-projection norm has no weight)."""
    vocab = _check_int("vocab_size", sub.get("vocab_size", 128), 1, 1 << 24)
    return vocab * width + 2 * width + width * text_hidden


def _mllama_encoder(vision: dict[str, Any], hidden: int, depth: int, inter: int, patch: int,
                    channels: int, text_hidden: int) -> int:
    """Llama-3.2-Vision's encoder: ``depth`` local layers and ``num_global_layers`` gated
    ones (biased GELU MLP, unbiased attention), a position table per tile layout, and a
    projector from the concatenated layer outputs (``vision_output_dim``) to the text width."""
    layer = 4 * hidden * hidden + 2 * hidden * inter + inter + hidden + 4 * hidden
    n_global = int(vision.get("num_global_layers") or 0)
    tiles = int(vision.get("max_num_tiles") or 4)
    image = vision.get("image_size")
    side = image // patch if isinstance(image, int) and not isinstance(image, bool) else 40
    positions = side * side + 1  # patches + the class token
    ratios = vision.get("supported_aspect_ratios")
    layouts = (len(ratios) if isinstance(ratios, list) else 8) + 1  # ids 1..n, 0 = padding
    out_dim = vision.get("vision_output_dim")
    out = out_dim if isinstance(out_dim, int) and not isinstance(out_dim, bool) else hidden
    embeddings = (channels * patch * patch * hidden + hidden  # patch conv, class token
                  + positions * hidden + 1 + layouts * tiles * positions * hidden  # gated table
                  + 2 * (layouts * tiles * hidden + 1)  # pre- and post-tile tables
                  + 4 * hidden)  # layernorm_pre, layernorm_post
    return (depth * layer + n_global * (layer + 2) + embeddings
            + out * text_hidden + text_hidden)


#: the MLP (and MoE) block's name in checkpoints where it is not "mlp" (by model_type, or by
#: the model_type's first word)
_MLP_BLOCKS = {"nemotron_h": "mixer", "minimax": "block_sparse_moe", "mixtral": "block_sparse_moe",
               "llama4_text": "feed_forward"}


@dataclass(frozen=True)
class _Part:
    """One weight of a layer as checkpoints name it: its block's names (``self_attn``,
    ``attn``), its own name, weights and output rows (rows 0: not a linear layer)."""

    blocks: tuple[str, ...]
    name: str
    params: int
    rows: int
    replicated: bool = False
    #: the name a fused checkpoint gives it (Qwen3-Next's in_proj_qkvz)
    alias: str = ""
    matrices: int = 1
    #: Module.lora_dims
    lora_dims: tuple[int, int] = (0, 0)


def _embed_and_head(vocab: int, hidden: int, tied: bool) -> list[Module]:
    """The token embedding (read a row a token: its whole is read only as a tied head) and,
    untied, the lm_head, as modules."""
    embed = Module(("embed_tokens", "embeddings", "embed"), vocab * hidden,
                   vocab * hidden if tied else 0, role="embed")
    head = Module(("lm_head", "head"), vocab * hidden, vocab * hidden, vocab, 1, role="head")
    return [embed] if tied else [embed, head]


def _module(i: int | None, part: _Part, active_share: tuple[int, int] = (1, 1),
            role: str = "") -> Module:
    """``part`` of layer ``i`` (None: outside the layers) as a Module."""
    prefix = f"layers.{i}" if i is not None else ""
    names = tuple(".".join(x for x in (prefix, b, n) if x) for b in part.blocks
                  for n in (part.name, *((part.alias,) if part.alias else ())))
    return Module(names, part.params, part.params * active_share[0] // active_share[1],
                  part.rows, part.matrices if part.rows else 0,
                  "replicated" if part.replicated else role, part.lora_dims)


def _mla_parts(r: _Reader, hidden: int, n_heads: int, block: tuple[str, ...],
               nope: bool = False) -> list[_Part]:
    """An MLA attention's weights as checkpoints name them under ``block``: the query (its
    low-rank pair where q_lora_rank is set), the latent's down-projection with the rotary key,
    its up-projection to the heads' keys and values, the output (and Kimi-K3's output gate).
    ``nope``: a layer without rotary positions (its query/key head all non-rotary)."""
    qk_nope, qk_rope = r.get_int("qk_nope_head_dim"), _mla_rope(r)
    if nope:
        qk_nope, qk_rope = qk_nope + qk_rope, 0
    v_head, kv_rank = r.get_int("v_head_dim"), r.get_int("kv_lora_rank")
    q_rank = r.opt_int("q_lora_rank")
    qk = qk_nope + qk_rope
    q = ([_Part(block, "q_a_proj", hidden * q_rank, q_rank, replicated=True),
          _Part(block, "q_b_proj", q_rank * n_heads * qk, n_heads * qk)] if q_rank
         else [_Part(block, "q_proj", hidden * n_heads * qk, n_heads * qk)])
    parts = q + [
        _Part(block, "kv_a_proj_with_mqa", hidden * (kv_rank + qk_rope), kv_rank + qk_rope,
              replicated=True),
        _Part(block, "kv_b_proj", kv_rank * n_heads * (qk_nope + v_head),
              n_heads * (qk_nope + v_head)),
        _Part(block, "o_proj", n_heads * v_head * hidden, hidden)]
    if r.get_bool("mla_use_output_gate", False):
        # Kimi-K3's MLA multiplies its output by a gate projected from the hidden state
        parts.append(_Part(block, "g_proj", hidden * n_heads * v_head, n_heads * v_head))
    return parts


def _count_params(
    r: _Reader,
    kinds: list[set[LayerKind]],
    *,
    hidden: int,
    n_heads: int,
    geometry: list[_Attn],
    head_dim: int,
    vocab: int,
    vision: dict[str, Any] | None,
    mamba_shape: dict[str, int] | None,
    n_mtp: int,
    shared: frozenset[int] = frozenset(),
) -> ParamCount:
    cfg, mt = r.cfg, r.model_type
    n_layers = len(kinds)
    widths = _ffn_widths(cfg, n_layers)
    inter = _intermediate(r, n_layers)
    n_experts = r.opt_int("num_experts", 0) or 0
    hunyuan = (_hunyuan_moe(r, n_layers, inter) if mt in HUNYUAN_TYPES and n_experts > 1
               else None)
    top_k = (0 if hunyuan else r.opt_int("experts_per_token", 1 if n_experts else 0)) or 0
    moe_inter = (0 if hunyuan else r.opt_int("moe_intermediate_size", 0)) or 0
    if n_experts > 1 and not moe_inter:
        moe_inter = inter
    dense_inter = (r.opt_int("intermediate_size_mlp", 0)
                   or r.opt_int("dense_intermediate_size", 0) or inter)
    if r.get_bool("block_auto_adjust_ff_dim", False) and dense_inter:
        # LFM2 sizes its SwiGLU as Llama did: 2/3 of the given width, times the multiplier,
        # rounded up to a multiple of block_multiple_of
        ff = int(2 * dense_inter / 3)
        mult = cfg.get("block_ffn_dim_multiplier")
        if mult is not None:
            if (isinstance(mult, bool) or not isinstance(mult, int | float)
                    or not 0 < mult <= 1000):  # NaN compares false; a huge int fits no float
                raise ConfigError("config.json field 'block_ffn_dim_multiplier' must be a "
                                  f"positive number up to 1,000, got {shown(mult)}",
                                  field="block_ffn_dim_multiplier")
            ff = int(mult * ff)
        step = r.opt_int("block_multiple_of", 1, minimum=1) or 1
        dense_inter = -(-ff // step) * step
    shared_inter = (r.opt_int("shared_expert_intermediate_size", 0)
                    or r.opt_int("share_expert_dim", 0)
                    or r.opt_int("shared_intermediate_size", 0) or 0)
    n_shared = (r.opt_int("n_shared_experts", 0) or r.opt_int("num_shared_experts", 0)
                or r.opt_int("moe_num_shared_experts", 0) or 0)
    if mt == "nemotron_h" and n_shared:
        # NemotronHMoE's shared expert: one ungated MLP of moe_shared_expert_intermediate_size
        # (transformers modeling_nemotron_h.py; the default 7,688 where a config omits it)
        shared_inter = r.opt_int("moe_shared_expert_intermediate_size", 7688) or 0
    if n_shared and not shared_inter:
        shared_inter = n_shared * moe_inter
    if mt in GEMMA4_TYPES and r.get_bool("enable_moe_block", False):
        # Gemma 4's MoE layers run the dense MLP beside the experts on every token (vLLM
        # gemma4.py Gemma4DecoderLayer): it weighs like an always-active shared expert
        shared_inter = inter
    # Latent MoE: the routed experts work in a narrower space, reached by a projection from
    # the hidden width and left by one back; the router and the shared expert read the full
    # width. Nemotron-3 Super/Ultra: moe_latent_size (fc1/fc2_latent_proj, ReplicatedLinear in
    # vLLM's and SGLang's nemotron_h.py, so held whole on every rank); Kimi-K3:
    # routed_expert_hidden_size (counted with the experts); Muse-Spark: moe_hidden_size
    # (pre_expert_proj, post_expert_proj)
    if mt == "nemotron_h":
        latent = r.opt_int("moe_latent_size", 0, maximum=1 << 20) or 0
    elif mt.startswith("muse_spark"):
        latent = r.opt_int("moe_hidden_size", 0, maximum=1 << 20) or 0
    else:
        latent = r.opt_int("routed_expert_hidden_size", 0) or 0
    expert_width = latent or hidden
    latent_proj = 2 * hidden * latent
    # the share of latent_proj counted with the experts (not replicated)
    expert_proj = 0 if mt == "nemotron_h" else latent_proj
    if mt.startswith("llama4") and n_experts > 1 and not shared_inter:
        shared_inter = moe_inter
    mats = 2 if mt in _UNGATED_MLP else 3
    moe = _moe_layers(r, n_layers, kinds)
    laguna = _laguna(r, n_layers, n_heads, head_dim) if mt in LAGUNA_TYPES else None
    # a score-correction bias of one value an expert beside the router, counted where the model
    # code builds one for every MoE layer: Laguna, ERNIE-4.5 (gate.e_score_correction_bias) and
    # LFM2-MoE with use_expert_bias (its expert_bias)
    router_bias = (n_experts if laguna is not None or mt.startswith("ernie4_5_moe")
                   or (mt == "lfm2_moe" and r.get_bool("use_expert_bias", True)) else 0)
    sparse = _sparse_attention(r, n_layers)
    # the attention block's name in checkpoints (Nemotron-H calls every block a mixer)
    attn_block = ("mixer", "self_attn") if mt == "nemotron_h" else ("self_attn", "attn")

    def attention_parts(g: _Attn) -> list[_Part]:
        # Qwen3-Next's, Qwen3.5's and Qwen4-Exp's q_proj carries the sigmoid output gate
        # unless the config turns it off (transformers always builds it; vLLM reads
        # attn_output_gate, default true)
        gate = cfg.get("attn_output_gate", mt in _GATED_Q_TYPES)
        q_rows = g.q_heads * g.dk * (2 if gate else 1)
        parts = [_Part(attn_block, "q_proj", hidden * q_rows, q_rows)]
        if g.kv_proj:
            parts.append(_Part(attn_block, "k_proj", hidden * g.kv * g.dk, g.kv * g.dk))
        if g.v_proj and g.kv_proj:
            parts.append(_Part(attn_block, "v_proj", hidden * g.kv * g.dv, g.kv * g.dv))
        parts.append(_Part(attn_block, "o_proj", g.q_heads * g.dv * hidden, hidden))
        if mt in HUNYUAN_TYPES and r.get_bool("use_qk_norm", False):
            # HunYuan's RMSNorms of q and k over head_dim (query_layernorm, key_layernorm:
            # vLLM hunyuan_v1.py), in cross-layer followers too
            parts += [_Part(attn_block, "query_layernorm", g.dk, 0, replicated=True),
                      _Part(attn_block, "key_layernorm", g.dk, 0, replicated=True)]
        if mt in MUSE_GLIMMER_TYPES:
            # Muse-Glimmer (transformers modular_muse_glimmer.py, AfmoeAttention's gate_proj;
            # llama.cpp muse-glimmer.cpp attn_gate {n_embd, head_dim · n_head}): a sigmoid gate
            # a channel; its q/k norm has no weight
            width = g.q_heads * g.dv
            parts.append(_Part(attn_block, "gate_proj", hidden * width, width))
        if mt == "lfm3" and r.get_bool("use_attention_gate", True):
            # Lfm3Attention (vLLM 0.34 models/lfm3.py): a sigmoid output gate a head
            # (gate_proj, hidden -> heads, unless use_attention_gate is false)
            parts.append(_Part(attn_block, "gate_proj", hidden * g.q_heads, g.q_heads))
        if mt in ("lfm2", "lfm2_moe", "lfm3"):
            # LFM2's, LFM2-MoE's and LFM3's RMSNorms of q and k over head_dim (vLLM lfm2.py
            # q_layernorm and k_layernorm, lfm3.py q_norm and k_norm)
            parts += [_Part(attn_block, "q_norm", g.dk, 0, replicated=True),
                      _Part(attn_block, "k_norm", g.dk, 0, replicated=True)]
        if laguna is not None:
            # Laguna: g_proj (hidden -> one softplus gate per head, or per channel) and the
            # RMSNorms of q and k over head_dim (vLLM laguna.py LagunaAttention)
            if laguna.gate_per_head:
                width = g.q_heads * laguna.gate_per_head
                parts.append(_Part(attn_block, "g_proj", hidden * width, width))
            parts += [_Part(attn_block, "q_norm", g.dk, 0, replicated=True),
                      _Part(attn_block, "k_norm", g.dk, 0, replicated=True)]
        return parts

    def attention(g: _Attn) -> int:
        return sum(part.params for part in attention_parts(g))

    nope = _nope_mla_layers(r, n_layers)

    def mla_parts(i: int | None = None) -> list[_Part]:
        return _mla_parts(r, hidden, n_heads, attn_block, nope=i is not None and i in nope)

    def mla(i: int | None = None) -> int:
        return sum(part.params for part in mla_parts(i))

    def indexer_parts() -> list[_Part]:
        # the DSA lightning indexer as checkpoints hold it: wq_b (q_lora_rank -> heads ×
        # index_head_dim), wk (hidden -> index_head_dim), k_norm (a LayerNorm: weight and
        # bias) and weights_proj (hidden -> heads), none with a bias; engines replicate it
        heads, dim = r.get_int("index_n_heads"), r.get_int("index_head_dim")
        # Mistral-Large-4's MLA has no query low-rank: its indexer's queries come from the
        # (normed) hidden state
        mistral4 = mt in MISTRAL4_TYPES
        q_rank = hidden if mistral4 else r.get_int("q_lora_rank")
        block = tuple(f"{b}.indexer" for b in attn_block)
        return [*([_Part(block, "q_input_norm", hidden, 0, replicated=True)] if mistral4
                  else []),
                _Part(block, "wq_b", q_rank * heads * dim, heads * dim, replicated=True),
                _Part(block, "wk", hidden * dim, dim, replicated=True),
                _Part(block, "k_norm", 2 * dim, 0, replicated=True),
                _Part(block, "weights_proj", hidden * heads, heads, replicated=True)]

    def indexer() -> int:
        return sum(part.params for part in indexer_parts())

    def mla_replicated(i: int | None = None) -> int:
        # the latent down-projections (q_a and kv_a, fused) and their norms are not split by
        # tensor parallelism: vLLM builds them with disable_tp / ReplicatedLinear
        q_rank = r.opt_int("q_lora_rank")
        kv = r.get_int("kv_lora_rank")
        rope = 0 if i in nope else _mla_rope(r)
        return hidden * ((q_rank or 0) + kv + rope) + (q_rank or 0) + kv

    def gdn_parts() -> list[_Part]:
        nv, nk = r.get_int("linear_num_value_heads"), r.get_int("linear_num_key_heads")
        dk, dv = r.get_int("linear_key_head_dim"), r.get_int("linear_value_head_dim")
        kc = r.get_int("linear_conv_kernel_dim")
        conv = 2 * nk * dk + nv * dv
        block = ("linear_attn",)
        # Qwen3.5 splits the input projection in four; Qwen3-Next fuses qkv+z and b+a
        return [_Part(block, "in_proj_qkv", hidden * conv, conv, alias="in_proj_qkvz"),
                _Part(block, "in_proj_z", hidden * nv * dv, nv * dv, alias="in_proj_qkvz"),
                _Part(block, "in_proj_b", hidden * nv, nv, alias="in_proj_ba"),
                _Part(block, "in_proj_a", hidden * nv, nv, alias="in_proj_ba"),
                _Part(block, "conv1d", conv * kc, 0),
                _Part(block, "out_proj", nv * dv * hidden, hidden)]

    def short_conv_parts() -> list[_Part]:
        # LFM2: in_proj to B, C and x; a depthwise conv of L_cache taps; out_proj
        width, kernel = _conv_shape(r, hidden)
        return [_Part(("conv",), "in_proj", hidden * 3 * width, 3 * width),
                _Part(("conv",), "conv", width * kernel, 0),
                _Part(("conv",), "out_proj", width * hidden, hidden)]

    def mamba_parts() -> list[_Part]:
        assert mamba_shape is not None
        d_inner, d_state = mamba_shape["d_inner"], mamba_shape["d_state"]
        d_conv, groups, heads = mamba_shape["d_conv"], mamba_shape["n_groups"], mamba_shape["n_heads"]
        block = ("mixer",)
        if mamba_shape["version"] == 2:
            conv = d_inner + 2 * groups * d_state
            rows = 2 * d_inner + 2 * groups * d_state + heads
            return [_Part(block, "in_proj", hidden * rows, rows),
                    _Part(block, "conv1d", conv * d_conv, 0),
                    _Part(block, "out_proj", d_inner * hidden, hidden)]
        dt_rank = math.ceil(hidden / 16)
        return [_Part(block, "in_proj", hidden * 2 * d_inner, 2 * d_inner),
                _Part(block, "conv1d", d_inner * d_conv, 0),
                _Part(block, "x_proj", d_inner * (dt_rank + 2 * d_state), dt_rank + 2 * d_state),
                _Part(block, "dt_proj", dt_rank * d_inner, d_inner),
                _Part(block, "A_log", d_inner * d_state, 0),
                _Part(block, "out_proj", d_inner * hidden, hidden)]

    # the MLP block's name in checkpoints, as each architecture spells it (one name each: an
    # exclusion of one block must not reach another, Gemma-4's mlp* its experts); Gemma-4's
    # experts and router sit beside its dense MLP, in the layer itself
    mlp_block = (_MLP_BLOCKS.get(mt) or _MLP_BLOCKS.get(mt.split("_")[0]) or "mlp",)
    moe_block = ("",) if mt in GEMMA4_TYPES else mlp_block
    # DeepSeek's MoEGate and GLM's top-k router hold a bare weight, no linear layer: neither
    # quantization tool touches them; elsewhere the router is a linear layer
    bare_router = mt.startswith(("deepseek", "glm", "kimi"))
    modules: list[Module] = []

    def record(i: int, parts: list[_Part], active_share: tuple[int, int] = (1, 1),
               role: str = "") -> None:
        modules.extend(_module(i, part, active_share, role) for part in parts)

    def mlp_parts(width: int) -> list[_Part]:
        names = ("up_proj", "down_proj") if mats == 2 else ("gate_proj", "up_proj", "down_proj")
        return [_Part(mlp_block, n, hidden * width, hidden if n == "down_proj" else width)
                for n in names]

    g3n_layer = g3n_replicated = g3n_model = 0
    if mt in GEMMA3N_TYPES:
        # Gemma-3n's decoder layer beyond attention and MLP (vLLM gemma3n.py
        # Gemma3nDecoderLayer, llama.cpp gemma3n.cpp load_arch_tensors): q and k norms of
        # head_dim, two more hidden-size norms (pre- and post-feedforward); LAuReL (hidden ->
        # laurel_rank -> hidden, its post norm); AltUp's correction (n × n) and prediction
        # (n × n²) coefficients, its router (hidden -> n) and router norm, and the corrected
        # output scale. The model adds AltUp's n − 1 embedding and unembedding projections
        # (hidden × hidden each) and the final norm.
        n_alt = r.opt_int("altup_num_inputs", 4, minimum=1, maximum=64) or 1
        rank = r.opt_int("laurel_rank", 0, maximum=1 << 16) or 0
        altup = n_alt * n_alt + n_alt ** 3 + hidden * n_alt + 2 * hidden
        g3n_layer = 2 * head_dim + 2 * hidden + 2 * hidden * rank + hidden + altup
        # the AltUp router and coefficients are ReplicatedLinear in vLLM; the norms too
        g3n_replicated = 2 * head_dim + 3 * hidden + altup
        g3n_model = 2 * (n_alt - 1) * hidden * hidden + hidden
    total = active = experts_total = active_experts = replicated = 0
    for i, layer_kinds in enumerate(kinds):
        mixer = 0
        # of the mixer's weights, those a token does not read (JetMoE's unrouted attention
        # experts)
        mixer_idle = 0
        for kind in layer_kinds:
            if mt == "jetmoe" and kind is LayerKind.FULL:
                # JetMoE's mixture of attention heads (transformers modeling_jetmoe.py JetMoeMoA):
                # one shared kv_proj to the KV heads' K and V; num_local_experts experts, each
                # projecting the hidden state to one query group of the KV heads' width and back
                # (input_linear, output_linear), a token's num_experts_per_tok of them chosen by
                # a router; an output bias
                g = geometry[i]
                width = g.kv * g.dk
                routed = 2 * n_experts * hidden * width
                moa = [_Part(("self_attention",), "kv_proj", hidden * 2 * width, 2 * width),
                       _Part(("self_attention.experts",), "router", hidden * n_experts,
                             n_experts, replicated=True),
                       _Part(("self_attention.experts",), "bias", hidden, 0, replicated=True)]
                record(i, moa)
                record(i, [_Part(("self_attention.experts",), "", routed,
                                 n_experts * (width + hidden), matrices=2 * n_experts)],
                       (top_k, n_experts))
                mixer += sum(part.params for part in moa) + routed
                mixer_idle += routed - routed * top_k // n_experts
                replicated += hidden * n_experts + hidden
            elif kind is LayerKind.MLA:
                record(i, mla_parts(i))
                mixer += mla(i)
                replicated += mla_replicated(i)
            elif kind is LayerKind.INDEXER:
                record(i, indexer_parts())
                mixer += indexer()
                replicated += indexer()
            elif kind is LayerKind.LINEAR:
                if isinstance(cfg.get("linear_attn_config"), dict):
                    lac = cfg["linear_attn_config"]
                    heads, dim = int(lac["num_heads"]), int(lac["head_dim"])
                    if lac.get("use_full_rank_gate"):
                        # q, k, v, gate and o projections of heads × dim, the decay's
                        # hidden→dim→heads·dim pair, beta and the short convs of q, k, v
                        # (vLLM models/kimi_k3/nvidia/kda.py KimiK3DeltaAttention)
                        width = heads * dim
                        kernel = int(lac.get("short_conv_kernel_size", 4))
                        kda = (5 * hidden * width + hidden * dim + dim * width
                               + hidden * heads + 3 * width * kernel)
                    elif mt in GLM5_NEXT_TYPES:
                        # GLM-5.3-Flash's KDA (Glm5NextTextLinearAttention): q, k, v and o of
                        # heads × dim, the short convs of q, k, v, the forget gate's
                        # hidden→dim→heads·dim pair with dt_bias and A_log, beta, the output
                        # gate's hidden→dim→heads·dim pair and the output norm
                        width = heads * dim
                        kernel = int(lac.get("short_conv_kernel_size", 4))
                        kda = (4 * hidden * width + 3 * width * kernel + 2 * hidden * dim
                               + 2 * dim * width + width + heads + hidden * heads + dim)
                    elif mt in BAILING_TYPES:
                        # Ling's KDA (BailingHybrid's linear attention): q, k, v, a full-rank
                        # forget gate, the output gate and o of heads × dim, beta, the short
                        # convs of q, k, v, and A_log, dt_bias and the output norm
                        width = heads * dim
                        kernel = int(lac.get("short_conv_kernel_size", 4))
                        kda = (6 * hidden * width + hidden * heads + 3 * width * kernel + heads
                               + width + dim)
                    else:
                        width, kda = heads * dim, 4 * hidden * heads * dim
                    # one module for the whole Kimi Delta Attention block
                    record(i, [_Part(attn_block, "projections", kda, 4 * width, matrices=5)])
                    mixer += kda
                elif _is_lightning(cfg, mt):
                    g = _Attn(n_heads, head_dim, head_dim, n_heads)
                    record(i, [*attention_parts(g),
                               _Part(attn_block, "output_gate", hidden * n_heads * head_dim,
                                     n_heads * head_dim)])
                    mixer += attention(g) + hidden * n_heads * head_dim
                else:
                    record(i, gdn_parts())
                    mixer += sum(part.params for part in gdn_parts())
            elif kind is LayerKind.MAMBA:
                record(i, mamba_parts())
                mixer += sum(part.params for part in mamba_parts())
            elif kind is LayerKind.CONV:
                if mt not in _OWN_CONV_COUNT:
                    record(i, short_conv_parts())
                    mixer += sum(part.params for part in short_conv_parts())
            else:
                record(i, attention_parts(geometry[i]))
                mixer += attention(geometry[i])
                replicated += sum(p.params for p in attention_parts(geometry[i]) if p.replicated)
        if sparse is not None and sparse.layers[i]:
            # MiniMax-M3's sparse layers project, with q, k and v, index queries (one per
            # index head) and one index key (and value unless disabled)
            index = hidden * sparse.index_dim * (sparse.index_heads + 1
                                                 + (0 if sparse.k_only[i] else 1))
            record(i, [_Part(attn_block, "index_proj", index, index // hidden, matrices=3)])
            mixer += index
        if not layer_kinds and mt == "nemotron_h":
            mixer = 0
        if hunyuan is not None:
            # HunYuan's MoE widths, layer by layer
            top_k, moe_inter, shared_inter = (hunyuan.top_k[i], hunyuan.expert[i],
                                              hunyuan.shared[i])
        if moe[i]:
            experts = n_experts * mats * expert_width * moe_inter
            experts_total += experts + expert_proj
            shared_mlp = mats * hidden * shared_inter
            router = hidden * n_experts
            replicated += router + latent_proj - expert_proj
            mlp_total = experts + latent_proj + shared_mlp + router
            routed = top_k * mats * expert_width * moe_inter
            mlp_active = routed + latent_proj + shared_mlp + router
            active_experts += routed + expert_proj
            rows = n_experts * ((mats - 1) * moe_inter + expert_width)
            # each expert's matrices: hidden (or latent) width -> moe_inter and back
            dims = (n_experts * mats * (expert_width + moe_inter), n_experts * mats * moe_inter)
            record(i, [_Part(moe_block, "experts", experts, rows, matrices=n_experts * mats,
                             lora_dims=dims)],
                   (top_k, n_experts), role="experts")
            record(i, [_Part(moe_block, "gate", router, n_experts, replicated=True,
                             alias="router", matrices=0 if bare_router else 1)])
            if router_bias:
                mlp_total += router_bias
                mlp_active += router_bias
                replicated += router_bias
                record(i, [_Part((f"{mlp_block[0]}.experts",), "e_score_correction_bias",
                                 router_bias, 0, replicated=True)])
            if laguna is not None:
                # the shared expert's three matrices apart, as the checkpoint's quantization
                # lists them one by one
                record(i, [_Part((f"{mlp_block[0]}.shared_expert",), n, hidden * shared_inter,
                                 hidden if n == "down_proj" else shared_inter)
                           for n in ("gate_proj", "up_proj", "down_proj")])
            elif shared_mlp and mt in GEMMA4_TYPES:
                # Gemma 4's dense MLP beside its experts
                record(i, mlp_parts(shared_inter))
            elif shared_mlp:
                # HunYuan's checkpoints name it mlp.shared_mlp (vLLM hunyuan_v1.py
                # HunYuanSparseMoeBlock), which quantization exclusion lists then name
                hunyuan_name = mt in HUNYUAN_TYPES
                record(i, [_Part(mlp_block, "shared_mlp" if hunyuan_name else "shared_experts",
                                 shared_mlp, (mats - 1) * shared_inter + hidden, matrices=mats,
                                 alias="" if hunyuan_name else "shared_expert",
                                 lora_dims=(mats * (hidden + shared_inter),
                                            mats * shared_inter))])
            if latent_proj:
                # Nemotron-3's fc1/fc2_latent_proj (replicated); Kimi-K3's, with the experts
                record(i, [_Part(mlp_block, "fc1_latent_proj", hidden * latent, latent,
                                 replicated=not expert_proj),
                           _Part(mlp_block, "fc2_latent_proj", hidden * latent, hidden,
                                 replicated=not expert_proj)])
        elif mt == "nemotron_h" and layer_kinds:
            # Nemotron-H layers are either a mixer or an MLP, never both
            mlp_total = mlp_active = 0
        else:
            wide = 2 if i in shared and r.get_bool("use_double_wide_mlp", False) else 1
            width = widths[i] if widths else dense_inter
            mlp_total = mlp_active = mats * hidden * width * wide
            record(i, mlp_parts(width * wide))
        # Muse-Glimmer (as Gemma-2's decoder layer), Ouro and LFM3 (Lfm3DecoderLayer's
        # post_operator_norm and post_ffn_norm, unless use_sandwich_norm is false) sandwich
        # the mixer and the MLP in four norms
        sandwich = (mt in MUSE_GLIMMER_TYPES or mt in OURO_TYPES
                    or (mt == "lfm3" and r.get_bool("use_sandwich_norm", True)))
        norms = (4 if sandwich else 2) * hidden
        replicated += norms
        record(i, [_Part(("input_layernorm",), "", norms, 0, replicated=True)])
        if g3n_layer:
            # Gemma-3n: LAuReL's two projections; AltUp's router, coefficients and the extra
            # norms (replicated, not linear layers a quantization lists)
            record(i, [_Part(("laurel",), "linear_left", hidden * rank, rank),
                       _Part(("laurel",), "linear_right", hidden * rank, hidden),
                       _Part(("altup",), "", g3n_replicated, 0, replicated=True)])
        total += mixer + mlp_total + norms + g3n_layer
        active += mixer - mixer_idle + mlp_active + norms + g3n_layer
        replicated += g3n_replicated

    if mt in OURO_TYPES:
        # every run of the loop reads the layers' weights again; its early-exit gate (hidden
        # -> 1, biased) scores the hidden state after each run
        active *= _cache_repeats(r)
        gate = hidden + 1
        total += gate
        active += gate
        replicated += gate
        modules.append(_module(None, _Part(("early_exit_gate",), "", gate, 1)))
    if laguna is not None or mt in MUSE_GLIMMER_TYPES or mt in HUNYUAN_TYPES:
        # the final RMSNorm (counted for Laguna, Muse-Glimmer and HunYuan, whose parameters are counted to
        # the last one)
        total += hidden
        active += hidden
        replicated += hidden
        modules.append(_module(None, _Part(("norm",), "", hidden, 0, replicated=True)))
    # LFM2 ties its embeddings unless told otherwise ("tie_embedding", default true)
    tied = r.get_bool("tie_word_embeddings",
                      r.get_bool("tie_embedding", mt in ("lfm2", "lfm2_moe")))
    embedding = vocab * hidden * (1 if tied else 2)
    per_layer = r.opt_int("hidden_size_per_layer_input", 0, maximum=1 << 16) or 0
    per_layer_table = 0
    if per_layer:
        # Gemma 4 E2B/E4B per-layer embeddings (vLLM gemma4.py): a table of n_layers ×
        # per_layer values per token, a projection of the hidden state to it, and in every
        # layer a gate and a projection back (its norms are hidden-size vectors)
        ple_vocab = r.opt_int("vocab_size_per_layer_input", maximum=1 << 24) or vocab
        table = ple_vocab * n_layers * per_layer
        dense = hidden * n_layers * per_layer + per_layer + n_layers * (2 * hidden * per_layer
                                                                        + hidden)
        per_layer_table = table
        total += dense
        active += dense
        if mt in GEMMA3N_TYPES:
            # vLLM builds per_layer_input_gate and per_layer_projection as ReplicatedLinear
            replicated += n_layers * 2 * hidden * per_layer
        # priced unquantized (no checkpoint of these lists them); the table is a lookup, kept
        # apart from the token embedding (Weights.per_layer_embedding_bytes)
        modules.append(_module(None, _Part(("embed_tokens_per_layer",), "", table, 0), (0, 1)))
        modules.append(_module(None, _Part(("per_layer_projections",), "", dense, 0)))
    added = _added_params(r, kinds, geometry, moe, hidden=hidden, n_heads=n_heads,
                          head_dim=head_dim, vocab=vocab, n_experts=n_experts)
    if added is not None:
        extra, extra_replicated, table, parts = added
        total += extra
        active += extra
        replicated += extra_replicated
        per_layer_table += table
        modules += parts
    total += g3n_model
    active += g3n_model
    if g3n_model:
        # AltUp's embedding and unembedding projections and the final norm
        modules.append(_module(None, _Part(("altup_projections",), "", g3n_model, 0)))
    encoder = _encoder_params(vision, hidden, mt) + _voxtral_audio(cfg.get("audio_config"), hidden)
    if mt in GEMMA3N_TYPES:
        encoder = _gemma3n_towers(r.cfg, hidden)
    mtp_layer = 0
    if n_mtp and mt == "nemotron_h":
        # each MTP step: its blocks (attention, MoE, MLP; vLLM's nemotron_h_mtp.py builds no
        # other), eh_proj (2·hidden -> hidden) and three norms; embedding and head are shared
        blocks = {"*": attention(geometry[-1]),
                  "E": (n_experts * mats * expert_width * moe_inter + mats * hidden * shared_inter
                        + hidden * n_experts + latent_proj),
                  "-": mats * hidden * dense_inter}
        step = sum(blocks[ch] + hidden for ch in nemotron_h_mtp_pattern(cfg))
        mtp_layer = n_mtp * (step + 2 * hidden * hidden + 3 * hidden)
    elif n_mtp:
        # an MTP module: one decoder layer (MoE where the model is) + two projections
        last = n_layers - 1
        layer_params = (total // max(1, n_layers)) if not moe[last] else 0
        if moe[last]:
            layer_params = (mla() if r.has("kv_lora_rank") else attention(geometry[0])) + \
                n_experts * mats * hidden * moe_inter + mats * hidden * shared_inter
            if any(LayerKind.INDEXER in ks for ks in kinds):
                # a DSA model's next-n layer carries its own indexer
                layer_params += indexer()
        # DeepSeek-style next-n layers (num_nextn_predict_layers: DeepSeek-V3, GLM-4.5) are
        # saved with their own copy of the embedding and of the output head
        # (layers.N.embed_tokens, layers.N.shared_head.head); Qwen's mtp.* modules share them
        copies = 2 * vocab * hidden if r.opt_int("num_nextn_predict_layers", 0, maximum=64) else 0
        norms = 0
        if mt in ("exaone4_5", "exaone4_5_text") or mt in BAILING_TYPES:
            # EXAONE 4.5's mtp.* module: fc (2·hidden -> hidden), one decoder layer and three
            # norms (norm, pre_fc_norm_hidden, pre_fc_norm_embedding); it takes the model's
            # embed_tokens and lm_head (vLLM exaone4_5_mtp.py load_weights), so no copies.
            # mtp_share_layers (one layer run for every step) leaves num_nextn_predict_layers
            # layers in the checkpoint: vLLM builds that many and cycles through them. A
            # Bailing MTP layer (vLLM bailing_moe_mtp.py) likewise: enorm, hnorm, eh_proj, the
            # final norm and one decoder layer, with the model's embedding and head
            copies, norms = 0, 3 * hidden
        mtp_layer = n_mtp * (layer_params + 2 * hidden * hidden + copies + norms)
    modules += _embed_and_head(vocab, hidden, tied)
    if encoder:
        modules.append(Module(("vision_tower", "visual", "vision_model"), encoder, 0,
                              role="encoder"))
    return ParamCount(
        total=total + embedding + per_layer_table + encoder,
        active=active + vocab * hidden,
        embedding=embedding,
        per_layer_embedding=per_layer_table,
        encoder=encoder,
        mtp=mtp_layer,
        experts=experts_total,
        active_experts=active_experts,
        replicated=replicated,
        modules=tuple(modules),
    )


def _longcat_params(r: _Reader, n_layers: int, *, hidden: int, n_heads: int, vocab: int,
                    n_mtp: int) -> ParamCount:
    """LongCat-Flash's parameters, as its checkpoint names them: in each layer two MLA
    attentions (``self_attn.0``/``.1``), two dense SwiGLU MLPs of ``ffn_hidden_size``
    (``mlps.0``/``.1``), four layer norms, and one MoE whose router scores the real experts and
    ``zero_expert_num`` zero-computation ones (``mlp.router.classifier`` and its score
    correction bias). A zero-computation expert returns its input and holds no weights: a
    token's ``moe_topk`` slots land on real experts with probability n_routed / (n_routed +
    zero), so ``active`` counts that share of the experts (12 × 512/768 = 8 for LongCat-Flash,
    whose published average activation is about 27B). An MTP layer: one MLA attention, a dense
    MLP, enorm, hnorm, eh_proj (2·hidden -> hidden), the final norm and its own embedding.

    LongCat-Flash-Lite's n-gram embedding (``ngram_vocab_size_ratio``): emb_split_num ×
    (emb_neighbor_num − 1) tables, table i of m + 2i + 1 rows (m: the ratio × vocab_size) of
    hidden / tables values, each with a projection back to hidden (``post_projs``, no bias):
    lookups a token reads a row of each, kept with the token embedding
    (``per_layer_embedding``), as vLLM's NgramEmbedding does."""
    q_rank, kv_rank = r.opt_int("q_lora_rank") or 0, r.get_int("kv_lora_rank")
    ffn = r.get_int("intermediate_size", maximum=1 << 24)
    experts, top_k = r.get_int("num_experts"), r.get_int("experts_per_token")
    zero = r.opt_int("zero_expert_num", 0, maximum=1 << 16) or 0
    inter = r.get_int("expert_ffn_hidden_size", maximum=1 << 24)
    scored = experts + zero

    def attention(i: int | None, a: int) -> list[_Part]:
        block = (f"self_attn.{a}",) if i is not None else ("self_attn",)
        return [*_mla_parts(r, hidden, n_heads, block),
                _Part(block, "kv_a_layernorm", kv_rank, 0, replicated=True),
                *([_Part(block, "q_a_layernorm", q_rank, 0, replicated=True)] if q_rank
                  else [])]

    def mlp(block: str) -> list[_Part]:
        return [_Part((block,), n, hidden * ffn, hidden if n == "down_proj" else ffn)
                for n in ("gate_proj", "up_proj", "down_proj")]

    routed = experts * 3 * hidden * inter
    modules: list[Module] = []
    total = active = replicated = 0
    for i in range(n_layers):
        parts = [*attention(i, 0), *attention(i, 1), *mlp("mlps.0"), *mlp("mlps.1"),
                 _Part(("mlp.router",), "classifier", hidden * scored, scored, replicated=True),
                 _Part(("mlp.router",), "e_score_correction_bias", scored, 0, replicated=True),
                 _Part(("input_layernorm",), "", 4 * hidden, 0, replicated=True)]
        modules += [_module(i, part) for part in parts]
        modules.append(_module(i, _Part(("mlp",), "experts", routed,
                                        experts * (2 * inter + hidden), matrices=3 * experts,
                                        lora_dims=(experts * 3 * (hidden + inter),
                                                   experts * 3 * inter)),
                               (top_k, scored), role="experts"))
        layer = sum(part.params for part in parts)
        total += layer + routed
        active += layer + routed * top_k // scored
        # the latent down-projections and their norms, the router and the layer norms
        replicated += sum(part.params for part in parts if part.replicated)
    embedding = 2 * vocab * hidden
    modules += [*_embed_and_head(vocab, hidden, False),
                _module(None, _Part(("norm",), "", hidden, 0, replicated=True))]
    mtp_layer = (sum(part.params for part in attention(None, 0)) + 3 * hidden * ffn
                 + 2 * hidden + 2 * hidden + 2 * hidden * hidden + hidden + vocab * hidden)
    table = 0
    if r.has("ngram_vocab_size_ratio"):
        ratio = r.get_int("ngram_vocab_size_ratio", maximum=1 << 16)
        tables = (r.get_int("emb_split_num", maximum=1 << 10)
                  * (r.get_int("emb_neighbor_num", minimum=2, maximum=1 << 10) - 1))
        if hidden % tables:
            raise ConfigError(f"config.json hidden_size {hidden} does not split over its "
                              f"{tables} n-gram tables (emb_split_num × (emb_neighbor_num − 1))",
                              field="emb_split_num")
        width = hidden // tables
        table = (tables * ratio * vocab + tables * tables) * width
        projections = tables * width * hidden
        modules += [_module(None, _Part(("ngram_embeddings.embedders",), "", table, 0), (0, 1)),
                    _module(None, _Part(("ngram_embeddings.post_projs",), "", projections,
                                        tables * hidden, matrices=tables))]
        total += projections
        active += projections
    return ParamCount(
        total=total + embedding + table + hidden,
        active=active + vocab * hidden + hidden,
        embedding=embedding,
        per_layer_embedding=table,
        mtp=n_mtp * mtp_layer,
        experts=n_layers * routed,
        active_experts=n_layers * (routed * top_k // scored),
        replicated=replicated + hidden,
        modules=tuple(modules),
    )


def _zamba2_params(r: _Reader, hybrid: list[bool], *, hidden: int, n_heads: int, head_dim: int,
                   vocab: int, mamba_shape: dict[str, int]) -> ParamCount:
    """Zamba2's parameters: a Mamba-2 mixer in every layer; ``num_mem_blocks`` shared blocks
    (attention over the hidden state beside the input embeddings, 2 × hidden wide, and a
    gated MLP) applied in turn at the hybrid layers; at each hybrid layer its own adapters
    (rank ``adapter_rank`` on the MLP's gate/up and, where enabled, on q, k and v) and a
    hidden × hidden linear. A decode step reads a shared block at every hybrid layer that
    applies it, so ``active`` counts the block once a use (more than ``total`` holds)."""
    d_inner, d_state = mamba_shape["d_inner"], mamba_shape["d_state"]
    d_conv, groups, m_heads = mamba_shape["d_conv"], mamba_shape["n_groups"], mamba_shape["n_heads"]
    inter = r.get_int("intermediate_size", maximum=1 << 24)
    rank = r.opt_int("adapter_rank", 128, minimum=1, maximum=1 << 16) or 128
    blocks = r.opt_int("num_mem_blocks", 1, minimum=1, maximum=64) or 1
    bias = r.get_bool("add_bias_linear", False)
    conv_bias = r.get_bool("use_conv_bias", True)
    mlp_adapter = r.get_bool("use_shared_mlp_adapter", False)
    attn_adapter = r.get_bool("use_shared_attention_adapter", False)
    tied = r.get_bool("tie_word_embeddings", True)
    width = 2 * hidden  # the shared attention's input: hidden state and input embeddings
    q_width = n_heads * head_dim
    # Zamba2's mixer: in_proj to x, z, B, C and dt; a depthwise conv over x, B and C; dt_bias,
    # A_log and D a head; the gated norm over d_inner; out_proj
    conv = d_inner + 2 * groups * d_state
    rows = 2 * d_inner + 2 * groups * d_state + m_heads
    mixer = [_Part(("mamba",), "in_proj", hidden * rows + (rows if bias else 0), rows),
             _Part(("mamba",), "conv1d", conv * d_conv + (conv if conv_bias else 0), 0),
             _Part(("mamba",), "out_proj", d_inner * hidden + (hidden if bias else 0), hidden)]
    mixer_small = 3 * m_heads + d_inner + hidden  # dt_bias, A_log, D, gated norm, layer norm
    mixer_params = sum(p.params for p in mixer) + mixer_small
    attention = [_Part(("self_attn",), "q_proj", width * q_width, q_width),
                 _Part(("self_attn",), "k_proj", width * q_width, q_width),
                 _Part(("self_attn",), "v_proj", width * q_width, q_width),
                 _Part(("self_attn",), "o_proj", q_width * hidden, hidden)]
    mlp = [_Part(("feed_forward",), "gate_up_proj", hidden * 2 * inter + (2 * inter if bias else 0),
                 2 * inter),
           _Part(("feed_forward",), "down_proj", inter * hidden + (hidden if bias else 0),
                 hidden)]
    norms = width + hidden  # input_layernorm over 2 × hidden, pre_ff_layernorm
    block = sum(p.params for p in attention + mlp) + norms
    adapter = ((hidden * rank + rank * 2 * inter if mlp_adapter else 0)
               + (3 * (width * rank + rank * q_width) if attn_adapter else 0))
    modules: list[Module] = []
    total = active = replicated = 0
    uses = 0
    for i, is_hybrid in enumerate(hybrid):
        modules += [_module(i, part) for part in mixer]
        layer = mixer_params
        replicated += mixer_small
        if is_hybrid:
            # the hybrid layer's own linear (ReplicatedLinear in vLLM) and adapters
            modules.append(_module(i, _Part(("linear",), "", hidden * hidden, hidden,
                                            replicated=True)))
            if adapter:
                modules.append(_module(i, _Part(("adapters",), "", adapter, 0)))
            layer += hidden * hidden + adapter
            replicated += hidden * hidden
            active += block
            uses += 1
        total += layer
        active += layer
    for k in range(blocks):
        modules += [Module((f"blocks.{k}.{'.'.join(p.blocks)}.{p.name}",), p.params,
                           p.params * len(range(k, uses, blocks)), p.rows, 1)
                    for p in attention + mlp]
    total += blocks * block
    replicated += blocks * norms
    embedding = vocab * hidden * (1 if tied else 2)
    modules += _embed_and_head(vocab, hidden, tied)
    return ParamCount(total=total + embedding + hidden, active=active + vocab * hidden + hidden,
                      embedding=embedding, replicated=replicated + hidden,
                      modules=tuple(modules))


# ---------------------------------------------------------------------------------------------


_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8": 1}


def _chunk_size(cfg: dict[str, Any]) -> int:
    """The Mamba2 scan chunk a config names (0 when it names none)."""
    for key in ("mamba_chunk_size", "chunk_size"):
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 20:
            return value
    return 0


def _checkpoint_weights(config: Mapping[str, Any]) -> str | None:
    """The weight format a checkpoint ships in, from its ``quantization_config``."""
    qc = config.get("quantization_config")
    if not isinstance(qc, Mapping):
        return None
    method = str(qc.get("quant_method", "")).lower()
    if method == "fp8" and config.get("expert_dtype") == "fp4":
        return "fp8_mxfp4_moe"
    if method == "fp8":
        return "fp8"
    if method == "mxfp4":
        # gpt-oss: MoE experts in MXFP4, everything else in 16 bits
        return "mxfp4_moe"
    ignore = qc.get("ignore")
    if (method == "compressed-tensors" and qc.get("format") == "mxfp4-pack-quantized"
            and isinstance(ignore, list) and any("shared_experts" in str(x) for x in ignore)):
        # Kimi-K3: every Linear in MXFP4 but those ignored (attention, shared experts, dense
        # MLPs, lm_head): the routed experts and their latent projections
        return "mxfp4_moe"
    bits = qc.get("bits")
    if method in ("awq", "gptq", "autoround", "auto-round") and bits in (2, 3, 4, 8):
        return f"int{bits}"
    if method == "bitsandbytes":
        if qc.get("load_in_4bit") or qc.get("_load_in_4bit"):
            return "nf4_dq" if qc.get("bnb_4bit_use_double_quant") else "nf4"
        if qc.get("load_in_8bit") or qc.get("_load_in_8bit"):
            return "int8"
    if method == "fbgemm_fp8":
        return "fp8"
    if method == "quark":
        # AMD Quark: global_quant_config.weight.dtype (fp8_e4m3 per tensor, mx_fp4 a
        # block of 32, uint4/int4 groups); lm_head is excluded as the HF ones are
        glob = qc.get("global_quant_config")
        weight = glob.get("weight") if isinstance(glob, Mapping) else None
        return _named_format(weight.get("dtype") if isinstance(weight, Mapping) else None)
    if method == "torchao":
        return _named_format(qc.get("quant_type"))
    return None


def _named_format(text: Any) -> str | None:
    """The weight format a quantizer's type name names (fp8_e4m3, mx_fp4, uint4,
    Int4WeightOnlyConfig, float8_weight_only …), None where it names none kvplan prices."""
    kind = str(text or "").lower()
    for key, name in (("fp8", "fp8"), ("float8", "fp8"), ("nvfp4", "nvfp4"), ("fp4", "mxfp4"),
                      ("int4", "int4"), ("int8", "int8")):
        if key in kind:
            return name
    return None


def spec_from_config(
    config: Mapping[str, Any],
    *,
    name: str,
    source: str,
    hub_repo: str | None = None,
    safetensors_total_bytes: int | None = None,
    quant_config: Mapping[str, Any] | None = None,
) -> ModelSpec:
    """Build the ModelSpec of a Hugging Face ``config.json`` (already parsed);
    ``quant_config``: the checkpoint's ``hf_quant_config.json`` (ModelOpt), where it has one."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"a config.json must be a JSON object, got {type(config).__name__}")
    lm, vision = language_config(config)
    model_type = lm.get("model_type") or config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ConfigError("config.json has no 'model_type'", field="model_type")
    if model_type in ("llama4",):
        model_type = "llama4_text"
    if model_type == "dbrx":
        lm = _dbrx_fields(lm)
    lm = _bailing_fields(_resaved_fields(lm, model_type), model_type)
    if isinstance(lm.get("num_key_value_heads_per_layer"), list):
        # DeciLM-7B: engines differ (vLLM's DeciLM gave every layer the most KV heads)
        raise ConfigError("config.json 'num_key_value_heads_per_layer' gives each layer its own "
                          "KV heads, which kvplan does not plan for this architecture "
                          f"(model_type '{model_type}')", field="num_key_value_heads_per_layer")
    loops = lm.get("n_recurrent_loops")
    if isinstance(loops, int) and not isinstance(loops, bool) and loops > 1:
        # Dory: a recurrent section of layers run n_recurrent_loops times, a KV cache a loop
        # ("per_loop") or one written by the last ("last_loop")
        raise ConfigError(f"config.json 'n_recurrent_loops' runs a section of layers {loops} "
                          "times, which kvplan does not plan (model_type "
                          f"'{model_type}')", field="n_recurrent_loops")
    sources = lm.get("kv_source_layers")
    if isinstance(sources, list) and sources != list(range(len(sources))):
        # Mistral-Large-4's and Kolibri's layers that reuse an earlier layer's K/V: which
        # engines honour it, and how, is not established
        raise ConfigError("config.json 'kv_source_layers' has layers read an earlier layer's "
                          "K/V, which kvplan does not plan for this architecture "
                          f"(model_type '{model_type}')", field="kv_source_layers")
    if config.get("is_encoder_decoder") is True or lm.get("is_encoder_decoder") is True:
        raise ConfigError(f"{model_type} is an encoder-decoder model: kvplan plans decoder "
                          "language models (their self-attention caches)",
                          field="is_encoder_decoder")
    if model_type in _UNMODELED:
        raise ConfigError(f"kvplan does not model {model_type} yet "
                          f"({_UNMODELED[model_type]}): its cache cannot be sized from this "
                          "config", field="model_type")
    r = _Reader(lm, model_type)
    if _is_deepseek_v4(lm, model_type):
        return _deepseek_v4_spec(config, r, name=name, source=source, hub_repo=hub_repo,
                                 safetensors_total_bytes=safetensors_total_bytes,
                                 quant_config=quant_config)
    _check_structure_fields(lm, model_type)

    if model_type == "nemotron_h":
        # the block list gives the layers (Nemotron-3 Ultra's config has no num_hidden_layers)
        n_layers = len(nemotron_h_pattern(lm))
    elif model_type in LONGCAT_TYPES:
        # num_layers decoder layers of two attentions each (transformers' num_hidden_layers,
        # where a config saves one, counts the attentions)
        n_layers = r.get_int("num_layers", maximum=4096)
    else:
        n_layers = r.get_int("num_hidden_layers", maximum=4096)
    hidden = r.get_int("hidden_size", maximum=1 << 20)
    nas: list[_NasBlock] | None = None
    if model_type == "nemotron-nas":
        nas_heads = r.get_int("num_attention_heads", maximum=1 << 16)
        nas = _nas_blocks(lm, n_layers, nas_heads, hidden)
        # only the layers with grouped-query attention hold a cache
        kinds_per_layer = [{LayerKind.FULL} if b.attention == "gqa" else set() for b in nas]
    else:
        kinds_per_layer = _layer_kinds(r, n_layers)
    _check_recurrent_found(lm, model_type, kinds_per_layer)
    # DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): MLA plus a lightning indexer whose
    # keys are cached too; engines recognise it by index_topk (vLLM: is_v32)
    dsa = r.has("index_topk") and any(LayerKind.MLA in ks for ks in kinds_per_layer)
    if dsa:
        for ks, has_indexer in zip(kinds_per_layer, _indexer_layers(r, n_layers), strict=True):
            if has_indexer and LayerKind.MLA in ks:
                ks.add(LayerKind.INDEXER)
    has_attention = any(k.is_attention and not k.is_latent for ks in kinds_per_layer for k in ks)
    needs_heads = has_attention or (model_type != "rwkv7" and any(
        LayerKind.LINEAR in ks for ks in kinds_per_layer))
    n_heads = r.get_int("num_attention_heads", maximum=1 << 16) if needs_heads or r.has(
        "num_attention_heads") else 0
    kv: int | list[int]
    if nas is not None:
        kv = [b.kv_heads for b in nas]
    else:
        kv = _kv_heads(r, n_heads) if n_heads else 0
        _check_kv_groups(r, kinds_per_layer, n_heads, kv)
    if model_type == "zamba2" and kv != n_heads:
        # vLLM's Zamba2 attention projects K and V for every head (QKVParallelLinear over
        # num_attention_heads), transformers' for num_key_value_heads: no engine agreement
        raise ConfigError(f"config.json gives a Zamba2 model {kv} KV heads for "
                          f"{n_heads} attention heads; its engines project K and V for every "
                          "head, so kvplan sizes only configs where the two are equal",
                          field="num_key_value_heads")
    if isinstance(kv, list):
        if len(kv) != n_layers:
            raise ConfigError(f"config.json 'num_key_value_heads' lists {len(kv)} layers, "
                              f"expected {n_layers}", field="num_key_value_heads")
        kv_list = kv
    else:
        kv_list = [kv] * n_layers
    # MLA layers cache a latent and Kimi Delta Attention sizes its heads in linear_attn_config:
    # only GQA-style attention and lightning attention need a head width
    needs_head_dim = has_attention or (
        any(LayerKind.LINEAR in ks for ks in kinds_per_layer)
        and not isinstance(lm.get("linear_attn_config"), dict))
    head_dim = _head_dim(r, hidden, n_heads) if n_heads and needs_head_dim else 0
    vocab = r.get_int("vocab_size", maximum=1 << 24)
    geometry, shared = _attention_geometry(r, kinds_per_layer, kv_list, n_heads, head_dim)
    # KV-shared layers keep no cache of their own
    cache_kinds = [set() if i in shared else ks for i, ks in enumerate(kinds_per_layer)]

    mla_width = 0
    if any(LayerKind.MLA in ks for ks in kinds_per_layer):
        mla_width = r.get_int("kv_lora_rank") + _mla_rope(r)
    index_width = r.get_int("index_head_dim", maximum=1 << 16) if dsa else 0
    window = None
    if any(LayerKind.SLIDING in ks for ks in kinds_per_layer):
        # MiMo-V2's layers slide over sliding_window_size (vLLM mimo_v2_flash.py; SGLang's
        # _get_sliding_window_size reads it first too)
        window_key = ("sliding_window_size"
                      if (model_type in MIMO_V2_TYPES or model_type in INKLING2_TYPES)
                      and lm.get("sliding_window_size") is not None else "sliding_window")
        if model_type == "plamo3" and lm.get("window_size") is not None:
            # PLaMo 3's window (its config class derives the per-layer sliding_window list
            # vLLM reads from it)
            window_key = "window_size"
        window = r.get_int(window_key, maximum=1 << 31)
    chunk = None
    if any(LayerKind.CHUNKED in ks for ks in kinds_per_layer):
        chunk = r.get_int("attention_chunk_size", maximum=1 << 31)
    linear_state = linear_conv = 0
    linear_detail = ""
    linear_split: tuple[int, ...] = ()
    gdn_key_dim = 0
    if any(LayerKind.LINEAR in ks for ks in kinds_per_layer):
        if isinstance(lm.get("linear_attn_config"), dict):
            linear_state, linear_conv, linear_detail = _kda_state(lm["linear_attn_config"])
            linear_split = (int(lm["linear_attn_config"]["num_heads"]),)
        elif _is_lightning(lm, model_type):
            linear_state, linear_conv, linear_detail = _lightning_state(r, n_heads, head_dim)
            linear_split = (n_heads,)
            if model_type in BAILING_TYPES and r.has("group_norm_size"):
                # a Bailing lightning layer's output norm runs over group_norm_size groups of
                # its heads, each rank holding whole groups (vLLM's and SGLang's
                # BailingMoELinearAttention assert tp divides it)
                linear_split += (r.get_int("group_norm_size", maximum=1 << 16),)
        elif model_type == "rwkv7":
            linear_state, linear_conv, linear_detail = _rwkv7_state(r, hidden)
            linear_split = (_rwkv7_heads(r, hidden)[0],)
        else:
            linear_state, linear_conv, linear_detail = _gdn_state(r)
            linear_split = (r.get_int("linear_num_key_heads"), r.get_int("linear_num_value_heads"))
            gdn_key_dim = r.get_int("linear_key_head_dim")
    mamba_state = mamba_detail = None
    mamba_shape = None
    mamba_split: tuple[int, ...] = ()
    mamba_replicated = 0
    if any(LayerKind.MAMBA in ks for ks in kinds_per_layer):
        mamba_state, mamba_detail, mamba_shape = _mamba_state(r, hidden)
        if mamba_shape["version"] == 2:
            # heads split over tp; a single B/C group is replicated on every rank
            b_c_groups = mamba_shape["n_groups"]
            mamba_split = (mamba_shape["n_heads"],) + ((b_c_groups,) if b_c_groups > 1 else ())
            if b_c_groups == 1:
                mamba_replicated = (mamba_shape["d_conv"] - 1) * 2 * mamba_shape["d_state"]
        else:
            mamba_split = (mamba_shape["d_inner"],)
    def conv_of(i: int) -> tuple[int, int, str]:
        """Layer i's short-convolution state: (values, the channels tp splits, detail)."""
        if model_type == "zaya":
            return _cca_state(r, n_heads, kv_list[i], head_dim)
        if model_type in INKLING2_TYPES:
            # its K and V convolutions are as wide as the layer's own KV heads
            return _inkling2_conv(r, hidden, geometry[i])
        return _conv_state(r, hidden)

    cross_tokens = 0
    if any(LayerKind.CROSS in ks for ks in kinds_per_layer):
        cross_tokens = _cross_tokens(vision)

    nope = _nope_mla_layers(r, n_layers)

    def group_key(i: int, kind: LayerKind) -> tuple[Any, ...]:
        if kind is LayerKind.MLA:
            # a NoPE layer's latent has no rotary part (Mistral-Large-4)
            width = mla_width - (_mla_rope(r) if i in nope else 0)
            return (kind, 1, width, 0, None)
        if kind is LayerKind.INDEXER:
            return (kind, 1, index_width, 0, None)
        if kind in (LayerKind.LINEAR, LayerKind.MAMBA):
            return (kind, 0, 0, 0, None)
        if kind is LayerKind.CONV:
            values, width, detail = conv_of(i)
            return (kind, values, width, 0, detail)
        win = window if kind is LayerKind.SLIDING else chunk if kind is LayerKind.CHUNKED else None
        g = geometry[i]
        return (kind, g.kv, g.dk, g.dv, win)

    buckets: dict[tuple[Any, ...], list[int]] = {}
    for i, layer_kinds in enumerate(cache_kinds):
        for kind in sorted(layer_kinds, key=lambda k: k.value):
            buckets.setdefault(group_key(i, kind), []).append(i)

    def make_group(key: tuple[Any, ...], layers: list[int], mtp: bool = False) -> LayerGroup:
        if key[0] is LayerKind.CONV:
            # the whole state is conv state (model dtype); its channels split over tp
            kind, values, width, _, detail = key
            return LayerGroup(kind, tuple(layers), state_values=values,
                              conv_state_values=values, state_detail=detail, mtp=mtp,
                              split_counts=(width,))
        kind, heads, dk, dv, win = key
        if kind is LayerKind.LINEAR:
            return LayerGroup(kind, tuple(layers), state_values=linear_state,
                              conv_state_values=linear_conv, state_detail=linear_detail, mtp=mtp,
                              split_counts=linear_split)
        if kind is LayerKind.MAMBA:
            return LayerGroup(kind, tuple(layers), state_values=mamba_state or 0,
                              conv_state_values=(mamba_shape or {}).get("conv", 0),
                              state_detail=mamba_detail or "", mtp=mtp,
                              split_counts=mamba_split, replicated_conv_values=mamba_replicated)
        return LayerGroup(kind, tuple(layers), n_kv_heads=heads, head_dim_k=dk, head_dim_v=dv,
                          window=win, mtp=mtp)

    order = [LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.MLA,
             LayerKind.INDEXER, LayerKind.CROSS, LayerKind.LINEAR, LayerKind.MAMBA, LayerKind.CONV]
    groups = [make_group(key, layers) for key, layers in
              sorted(buckets.items(), key=lambda kv_: (order.index(kv_[0][0]), kv_[1][0]))]

    sparse = _sparse_attention(r, n_layers)
    if sparse is not None:
        groups.extend(_index_groups(sparse))
    if model_type in QWEN4_EXP_TYPES:
        groups = _qsa_groups(r, groups, hidden, n_layers)
    repeats = _cache_repeats(r)
    if repeats > 1:
        # a LongCat-Flash layer's two MLA attentions cache a latent each; an Ouro layer run
        # total_ut_steps times caches its K and V in each run: the layer's number that often
        groups = [replace(g, layers=tuple(i for i in g.layers for _ in range(repeats)))
                  for g in groups]
    n_mtp = (r.opt_int("num_nextn_predict_layers", 0, maximum=64)
             or r.opt_int("mtp_num_hidden_layers", 0, maximum=64) or 0)
    if model_type == "longcat_flash" and "num_nextn_predict_layers" not in lm:
        # its checkpoints hold one MTP layer whether or not the config names it (the model's
        # config class defaults num_nextn_predict_layers to 1, as vLLM's and SGLang's drafts)
        n_mtp = 1
    if n_mtp and model_type == "nemotron_h":
        step = nemotron_h_mtp_pattern(lm)
        if "M" in step:
            raise ConfigError("a nemotron_h MTP step of Mamba blocks is not supported (engines "
                              "build MTP steps of attention, moe and mlp blocks only)",
                              field="mtp_layers_block_type")
        # one cache-holding layer per attention block of each step, numbered after the decoder
        attn = [n_layers + k * len(step) + j for k in range(n_mtp)
                for j, ch in enumerate(step) if ch == "*"]
        if attn:
            groups.append(make_group((LayerKind.FULL, kv_list[-1], head_dim, head_dim, None),
                                     attn, mtp=True))
    elif n_mtp:
        kind = LayerKind.MLA if mla_width else LayerKind.FULL
        key = (kind, 1, mla_width, 0, None) if mla_width else (kind, kv_list[-1], head_dim, head_dim, None)
        tail = lm.get("layer_types")
        if (not mla_width and isinstance(tail, list) and len(tail) == n_layers + n_mtp
                and all(t in ("full_attention", "sliding_attention") for t in tail[n_layers:])):
            # the draft layers' own types, listed after the decoder's (Step-3.5/3.7)
            mtp_kinds = [{_LAYER_TYPE_KINDS[t]} for t in tail[n_layers:]]
            mtp_geometry, _ = _attention_geometry(r, mtp_kinds, [kv_list[-1]] * n_mtp, n_heads,
                                                  head_dim)
            mtp_buckets: dict[tuple[Any, ...], list[int]] = {}
            for j, ks in enumerate(mtp_kinds):
                (mk,) = ks
                g = mtp_geometry[j]
                mkey = (mk, g.kv, g.dk, g.dv, window if mk is LayerKind.SLIDING else None)
                mtp_buckets.setdefault(mkey, []).append(n_layers + j)
            groups += [make_group(k, v, mtp=True) for k, v in mtp_buckets.items()]
        else:
            groups.append(make_group(key, list(range(n_layers, n_layers + n_mtp)), mtp=True))

        if dsa:
            # next-n (MTP) layers always build their own indexer (vLLM: is_mtp_layer)
            groups.append(make_group((LayerKind.INDEXER, 1, index_width, 0, None),
                                     list(range(n_layers, n_layers + n_mtp)), mtp=True))
    if dsa:
        # a decode step attends to the index_topk latent rows the indexer selects (GLM-5.2's
        # layers without an indexer to those of the last layer that has one): it reads them,
        # and every indexer key
        topk = r.get_int("index_topk", maximum=1 << 31)
        groups = [replace(g, read_limit=topk) if g.kind is LayerKind.MLA else g for g in groups]
        if model_type in GLM5_NEXT_TYPES:
            groups = _kpool_groups(r, groups)

    if model_type == "rwkv7":
        params = _rwkv7_params(r, n_layers, hidden, vocab)
    elif model_type in LONGCAT_TYPES:
        params = _longcat_params(r, n_layers, hidden=hidden, n_heads=n_heads, vocab=vocab,
                                 n_mtp=n_mtp)
    elif model_type == "zamba2":
        assert mamba_shape is not None
        params = _zamba2_params(r, [LayerKind.FULL in ks for ks in kinds_per_layer],
                                hidden=hidden, n_heads=n_heads, head_dim=head_dim, vocab=vocab,
                                mamba_shape=mamba_shape)
    elif nas is not None:
        params = _nas_params(nas, hidden=hidden, n_heads=n_heads, head_dim=head_dim, vocab=vocab,
                             tied=r.get_bool("tie_word_embeddings", False))
    else:
        params = _count_params(r, kinds_per_layer, hidden=hidden, n_heads=n_heads,
                               geometry=geometry, head_dim=head_dim, vocab=vocab, vision=vision,
                               mamba_shape=mamba_shape, n_mtp=n_mtp, shared=shared)
    dtype = _checkpoint_dtype(config, lm)
    max_pos = r.opt_int("max_position_embeddings")
    ssm_dtype = lm.get("mamba_ssm_dtype") or lm.get("ssm_dtype")
    ssm_bytes = _DTYPE_BYTES.get(ssm_dtype, 0) if isinstance(ssm_dtype, str) else 0
    pinned_bytes = ssm_bytes
    cache_dtype = lm.get("mamba_ssm_cache_dtype")
    cache_dtype_bytes = _DTYPE_BYTES.get(cache_dtype, 0) if isinstance(cache_dtype, str) else 0
    stored = _checkpoint_weights(config) or _checkpoint_weights(lm)
    scheme, weight_notes = _quantization(config, lm, quant_config, dtype, params.modules,
                                         stored)
    if isinstance(lm.get("linear_attn_config"), dict):
        # Kimi Delta Attention keeps its recurrent matrix in float32 whatever the checkpoint
        # dtype (vLLM's MambaStateDtypeCalculator.kda_state_dtype pins it; SGLang's default)
        ssm_bytes = 4
    return ModelSpec(
        name=name,
        model_type=model_type,
        groups=tuple(groups),
        params=params,
        source=source,
        hub_repo=hub_repo,
        hidden_size=hidden,
        vocab_size=vocab,
        intermediate_size=_intermediate(r, n_layers),
        num_attention_heads=n_heads,
        max_position_embeddings=max_pos,
        dtype_bytes=_DTYPE_BYTES.get(dtype, 2),
        dtype=dtype, config_dtype=_config_dtype(config, lm),
        ssm_dtype_bytes=ssm_bytes or _DTYPE_BYTES.get(dtype, 2),
        ssm_pinned_bytes=pinned_bytes,
        ssm_cache_dtype_bytes=cache_dtype_bytes,
        mamba_chunk_size=_chunk_size(lm),
        gdn_key_head_dim=gdn_key_dim,
        checkpoint_weights=stored,
        quant=scheme,
        weight_notes=weight_notes,
        cross_tokens_per_image=cross_tokens,
        safetensors_total_bytes=safetensors_total_bytes,
        defaulted=tuple(dict.fromkeys(r.defaulted)),
        cacheless_layers=sum(1 for ks in cache_kinds if not ks),
        kv_shared_layers=len(shared),
        kv_shared_sources=(_kv_shared_sources(kinds_per_layer, shared)
                           if model_type in GEMMA4_TYPES or model_type in GEMMA3N_TYPES else ()),
        cla_share_factor=cla_share_factor(lm) if model_type in HUNYUAN_TYPES else 1,
        linear_attention_layers=sum(1 for b in nas or () if b.attention == "linear"),
        hidden_layers=n_layers,
        vision_encoder=_vision_encoder(vision, _architecture(config)),
        towers=_towers(config, vision, params.encoder),
        architecture=_architecture(config),
        architectures=_architectures(config),
        head=_head_config(config, lm),
        text_architecture=(_architecture(config["text_config"])
                           if isinstance(config.get("text_config"), dict) else ""),
        remote_code=isinstance(config.get("auto_map"), dict)
        and any(str(k).startswith("AutoModel") for k in config["auto_map"]),
        kda_declared=_declares_kda(config),
        index_tail=model_type in GLM5_NEXT_TYPES and lm.get("index_kpool_compress") is True,
        kda=isinstance(lm.get("linear_attn_config"), dict)
        and bool(lm["linear_attn_config"].get("kda_layers")),
        qk_nope_head_dim=(r.opt_int("qk_nope_head_dim", maximum=1 << 16) or 0) if mla_width else 0,
        mla_qk_head_dim=((r.opt_int("qk_nope_head_dim", maximum=1 << 16) or 0)
                         + (r.opt_int("qk_rope_head_dim", maximum=1 << 16) or 0)
                         if mla_width else 0),
        mla_v_head_dim=(r.opt_int("v_head_dim", maximum=1 << 16) or 0) if mla_width else 0,
        q_heads_per_layer=(tuple(g.q_heads for g in geometry)
                           if len({g.q_heads for g in geometry}) > 1 else ()),
        mm_prefix=(model_type in GEMMA4_TYPES
                   and lm.get("use_bidirectional_attention") == "vision"
                   and _architecture(config) in GEMMA4_MULTIMODAL
                   or str(config.get("model_type") or "") in MM_PREFIX_TYPES),
        notes=_notes(lm, model_type),
        vllm_max_len=vllm_max_len(lm, str(config.get("model_type") or model_type), max_pos),
        sglang_context_len=sglang_context_len(lm, str(config.get("model_type") or model_type),
                                              max_pos),
    )


#: the config keys vLLM derives a default max_model_len from (the least of those present;
#: vllm/transformers_utils/model_arch_config_convertor.py derive_max_model_len_and_key, 0.33.0)
_VLLM_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                  "model_max_length", "max_target_positions", "max_sequence_length",
                  "max_seq_length", "seq_len")
#: RoPE types whose factor vLLM does not multiply the derived length by (their
#: max_position_embeddings is taken as already scaled)
_VLLM_UNSCALED_ROPE = {"su", "longrope", "llama3", "yarn", "deepseek_yarn",
                       "deepseek_llama_scaling"}


def _finite(value: Any) -> bool:
    """A JSON number a length or a factor can be: not a boolean, not NaN or infinite."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _lengths(lm: Mapping[str, Any], keys: tuple[str, ...]) -> list[float]:
    """The length keys of a config that hold a (finite) number, in the order of ``keys``."""
    return [lm[k] for k in keys if _finite(lm.get(k))]


def _rope(lm: Mapping[str, Any]) -> dict[str, Any] | None:
    """A config's RoPE scaling (transformers 5's rope_parameters, or rope_scaling)."""
    rope = lm.get("rope_parameters") or lm.get("rope_scaling")
    return rope if isinstance(rope, dict) else None


def _rope_kind(params: Mapping[str, Any]) -> str:
    """A RoPE parameter set's type, its legacy names as transformers renames them."""
    kind = str(params.get("rope_type", params.get("type")))
    return {"su": "longrope", "mrope": "default"}.get(kind, kind)


def vllm_max_len(lm: Mapping[str, Any], model_type: str,
                 known: int | None = None) -> int | None:
    """The max_model_len vLLM derives from a (text) config, as 0.33.0's
    _get_and_verify_max_len does: the least of _VLLM_LEN_KEYS present, model_max_length over
    them where set, times the factor of a RoPE scaling whose type is not in
    _VLLM_UNSCALED_ROPE (linear, dynamic; not for Gemma 3). Where the config names none of the
    keys, the length its class defaults to (``known``: transformers' default, which vLLM's
    config object carries), else None (vLLM then defaults to 2048, which kvplan does not
    check)."""
    found = [int(n) for n in _lengths(lm, _VLLM_LEN_KEYS)]
    if not found:
        if known is None:
            return None
        found = [known]
    derived = float(min(found))
    if _finite(lm.get("model_max_length")) and lm["model_max_length"]:
        derived = float(lm["model_max_length"])
    rope = _rope(lm)
    if rope is not None and "gemma3" not in model_type:
        # per-layer-type parameters (Gemma's full / sliding) nest a dict a type
        nested = [v for v in rope.values() if isinstance(v, dict)]
        factor = 1.0
        for params in nested or [rope]:
            if _rope_kind(params) not in _VLLM_UNSCALED_ROPE:
                value = params.get("factor", factor)
                factor = float(value) if _finite(value) else 1.0
        derived *= factor
    return int(derived) if math.isfinite(derived) else None


#: the config keys SGLang reads its context length from, the first present winning
#: (srt/utils/hf_transformers/common.py CONTEXT_LENGTH_KEYS, 0.5.23)
_SGLANG_LEN_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                    "max_position_embeddings")


def sglang_context_len(lm: Mapping[str, Any], model_type: str = "",
                       known: int | None = None) -> int | None:
    """The context length SGLang 0.5.23 derives from a (text) config (get_context_length):
    the first of _SGLANG_LEN_KEYS present, times a RoPE scaling's factor unless the scaling
    names original_max_position_embeddings or is llama3 (transformers 5 adds that key to
    yarn and longrope scalings, so only linear and dynamic factors count). Where the config
    names none of the keys, the class default ``known``, else None (SGLang's 2048, which
    kvplan does not check)."""
    value = next(iter(_lengths(lm, _SGLANG_LEN_KEYS)), known)
    if value is None:
        return None
    rope = _rope(lm)
    factor: Any = 1
    if rope:
        kind = _rope_kind(rope)
        factor = rope.get("factor", 1)
        # Gemma 3's global and local RoPE become per-layer parameters under transformers 5,
        # whose top level has no factor (as a config that nests them already)
        if ("original_max_position_embeddings" in rope
                or kind in ("llama3", "yarn", "longrope")
                or "gemma3" in model_type
                or any(isinstance(v, dict) for v in rope.values())
                or not _finite(factor)):
            factor = 1
    length = factor * value
    return int(length) if math.isfinite(length) else None


def _declares_kda(config: Mapping[str, Any]) -> bool:
    """Whether the config, or its text_config, names Kimi Delta Attention layers itself
    (SGLang 0.5.23 configs/model_config.py uses_kda_attention)."""
    for c in (config, config.get("text_config")):
        if not isinstance(c, Mapping):
            continue
        lac = c.get("linear_attn_config")
        if isinstance(lac, Mapping) and lac.get("kda_layers"):
            return True
        types = c.get("layer_types")
        if (isinstance(types, list) and "linear_attention" in types
                and c.get("linear_num_heads") is not None
                and c.get("linear_head_dim") is not None):
            return True
    return False


def _architecture(config: Mapping[str, Any]) -> str:
    archs = config.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return ""


def _architectures(config: Mapping[str, Any]) -> tuple[str, ...]:
    """Every name the config's ``architectures`` list gives, in order."""
    archs = config.get("architectures")
    return tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else ()


#: rotary kinds vLLM stretches to the target's context for an EAGLE head
#: (config/speculative.py: the head then shares the target's positions)
_STRETCHED_ROPE = frozenset({"default", "linear", "llama3", "ntk", "proportional"})


def _head_config(config: Mapping[str, Any], lm: Mapping[str, Any]) -> HeadConfig:
    """What ``config`` says of an EAGLE draft head (every config is read; most say nothing)."""
    archs = " ".join(_architectures(config)).lower()
    declared = "eagle3" if "eagle3" in archs else "eagle" if "eagle" in archs else ""
    kind = config.get("speculators_model_type")
    if kind in ("eagle", "eagle3"):
        # a speculators-format head (Eagle3Speculator, Eagle3DraftModel)
        declared = str(kind)

    def size(key: str) -> int:
        v = lm.get(key, config.get(key))
        if v is None:
            return 0
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 1 << 24:
            raise ConfigError(f"config.json '{key}' must be a positive integer or null, got "
                              f"{v!r}", field=key)
        return v

    eagle = lm.get("eagle_config", config.get("eagle_config"))
    aux = (eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, dict)
           # the speculators format names them beside its layer config
           else lm.get("eagle_aux_hidden_state_layer_ids"))
    rope = lm.get("rope_scaling") or lm.get("rope_parameters")
    kind = (rope.get("rope_type") or rope.get("type") or "default") if isinstance(rope, dict) \
        else "default"
    return HeadConfig(declared=declared, draft_vocab_size=size("draft_vocab_size"),
                      target_hidden_size=size("target_hidden_size"),
                      bias=lm.get("bias", config.get("bias")) is True,
                      norm_before_fc=lm.get("norm_before_fc") is True,
                      aux_layers=len(aux) if isinstance(aux, list) else 0,
                      rope_stretches=str(kind) in _STRETCHED_ROPE)


def _notes(lm: dict[str, Any], model_type: str) -> tuple[str, ...]:
    """What a reader of the figures should know about this config."""
    if model_type == "step3p7" and not isinstance(lm.get("attention_other_setting"), dict):
        # the published Step-3.7-Flash config declares its sliding layers' geometry in
        # attention_other_setting (96 query heads, 8 KV groups × 128); a config without it
        # sizes them with the top-level heads
        return ("this config has no attention_other_setting: the sliding layers are sized "
                "with the top-level 64 query heads (the published Step-3.7-Flash config gives "
                "them 96; their KV heads and width are the same, 8 × 128)",)
    notes: list[str] = []
    audio = lm.get("audio_config")
    if (isinstance(audio, Mapping) and model_type not in GEMMA3N_TYPES
            and audio.get("model_type") != "voxtral_encoder"):
        # an audio encoder whose tensors were not read (Gemma 4 E2B/E4B's conformer, the
        # Whisper towers of MiniCPM-o and Qwen-Omni): its weights are not in the figures
        notes.append("the audio tower (audio_config) is not counted in the weights")
    if isinstance(lm.get("depth_decoder_config"), Mapping):
        # Moshi: the temporal decoder is planned; the depth decoder that writes each step's
        # audio codebooks and the Mimi codec (audio_encoder_config) are not
        notes.append("planned: the temporal (text) decoder; the depth decoder and the audio "
                     "codec (depth_decoder_config, audio_encoder_config) are not counted")
    if isinstance(lm.get("talker_config"), Mapping):
        # Qwen-Omni: the thinker writes text; the talker and its code-to-waveform model speak
        notes.append("planned: the thinker (text output); the talker and code2wav that turn "
                     "it into speech (talker_config) are not counted")
    return tuple(notes)


class _SparseAttention:
    """MiniMax-M3's block-sparse attention (``sparse_attention_config``): which layers select
    blocks through index heads, and which of those keep index keys only."""

    def __init__(self, layers: list[bool], k_only: list[bool], index_heads: int,
                 index_dim: int) -> None:
        self.layers, self.k_only = layers, k_only
        self.index_heads, self.index_dim = index_heads, index_dim


def _sparse_attention(r: _Reader, n_layers: int) -> _SparseAttention | None:
    sc = r.cfg.get("sparse_attention_config")
    if not isinstance(sc, Mapping) or not sc.get("use_sparse_attention"):
        return None

    def flags(key: str, default: int) -> list[bool]:
        value = sc.get(key)
        if value is None:
            return [bool(default)] * n_layers
        listed = _layer_flags(value, n_layers)
        if listed is None:
            raise ConfigError(f"sparse_attention_config '{key}' must list {n_layers} layers of "
                              "0 or 1", field=f"sparse_attention_config.{key}")
        return listed

    heads = _check_int("sparse_attention_config.sparse_num_index_heads",
                       sc.get("sparse_num_index_heads"), 1, 1 << 12)
    dim = _check_int("sparse_attention_config.sparse_index_dim", sc.get("sparse_index_dim"), 1,
                     1 << 16)
    return _SparseAttention(flags("sparse_attention_freq", 1),
                            flags("sparse_disable_index_value", 0), heads, dim)


def _index_groups(sparse: _SparseAttention) -> list[LayerGroup]:
    """The index cache of block-sparse layers: one index-key head of ``sparse_index_dim`` per
    token (and an index-value head where ``sparse_disable_index_value`` is 0), whatever the
    number of index query heads (SGLang's MiniMaxSparseKVPool: head_num 1)."""
    groups = []
    for k_only in (True, False):
        layers = tuple(i for i, on in enumerate(sparse.layers) if on and sparse.k_only[i] == k_only)
        if layers:
            groups.append(LayerGroup(LayerKind.INDEX, layers, n_kv_heads=1,
                                     head_dim_k=sparse.index_dim,
                                     head_dim_v=0 if k_only else sparse.index_dim))
    return groups


def _is_deepseek_v4(cfg: Mapping[str, Any], model_type: str) -> bool:
    return model_type in ("deepseek_v4", "deepseek_ref") or "compress_ratios" in cfg


#: DeepSeek-V4 compressors: (entries per block of `ratio` tokens overlap: coff) and the rows
#: of unfinished blocks each layer keeps per sequence (SGLang's compress-state ring of 8 rows
#: for ratio 4, 128 for ratio 128, without speculative decoding)
_V4_OVERLAP = {4: 2, 128: 1}
_V4_STATE_ROWS = {4: 8, 128: 128}


def _deepseek_v4_groups(r: _Reader, n_layers: int) -> tuple[list[LayerGroup], int]:
    """DeepSeek-V4's cache, per layer kind, and its MTP depth.

    Every layer keeps a sliding window of ``sliding_window`` tokens of one latent of
    ``head_dim`` values (K and V are the same latent, RoPE part included). A layer of
    ``compress_ratios`` 4 adds one compressed latent per 4 tokens and a lightning indexer's
    key (``index_head_dim``) per 4 tokens; a layer of ratio 128 adds one compressed latent per
    128 tokens; ratio 0 is the window alone. Each compressor keeps, per sequence, the kv and
    score rows of the tokens it has not folded yet (float32): ratio 4 overlaps two blocks
    (8 rows × 2·head_dim, and 8 rows × 2·index_head_dim for the indexer's compressor), ratio
    128 one (128 rows × head_dim). Layers past ``num_hidden_layers`` in the list are the MTP
    layers'.
    """
    ratios = r.cfg.get("compress_ratios")
    n_mtp = r.opt_int("num_nextn_predict_layers", 0, maximum=64) or 0
    if (not isinstance(ratios, list) or len(ratios) not in (n_layers, n_layers + n_mtp)
            or not all(x in (0, 4, 128) and not isinstance(x, bool) for x in ratios)):
        raise ConfigError(
            f"config.json 'compress_ratios' must list {n_layers} layers (or {n_layers + n_mtp} "
            "with the MTP layers) of 0, 4 or 128", field="compress_ratios")
    latent = r.get_int("head_dim", maximum=1 << 16)
    window = r.get_int("sliding_window", maximum=1 << 31)
    index_dim = r.get_int("index_head_dim", maximum=1 << 16) if 4 in ratios else 0
    groups: list[LayerGroup] = []
    main = list(ratios[:n_layers])
    mtp_layers = list(range(n_layers, len(ratios)))
    groups.append(LayerGroup(LayerKind.SLIDING, tuple(range(n_layers)), n_kv_heads=1,
                             head_dim_k=latent, head_dim_v=0, window=window))
    for ratio in (4, 128):
        layers = tuple(i for i, x in enumerate(main) if x == ratio)
        if layers:
            # ratio 4: a decode step reads the index_topk entries the indexer selects; ratio
            # 128: every entry
            groups.append(LayerGroup(LayerKind.COMPRESSED, layers, n_kv_heads=1,
                                     head_dim_k=latent, ratio=ratio,
                                     read_limit=r.get_int("index_topk", maximum=1 << 31)
                                     if ratio == 4 else None))
    c4 = tuple(i for i, x in enumerate(main) if x == 4)
    if c4:
        groups.append(LayerGroup(LayerKind.INDEX, c4, n_kv_heads=1, head_dim_k=index_dim,
                                 ratio=4))
    for ratio in (4, 128):
        layers = tuple(i for i, x in enumerate(main) if x == ratio)
        if not layers:
            continue
        rows, width = _V4_STATE_ROWS[ratio], _V4_OVERLAP[ratio] * latent
        values = 2 * rows * width
        detail = f"kv + score 2×{rows}×{width}"
        if ratio == 4:
            index_width = _V4_OVERLAP[ratio] * index_dim
            values += 2 * rows * index_width
            detail += f" + indexer 2×{rows}×{index_width}"
        groups.append(LayerGroup(LayerKind.COMPRESSOR, layers, state_values=values,
                                 state_detail=detail, ratio=ratio))
    if mtp_layers:
        if any(ratios[i] for i in mtp_layers):
            raise ConfigError("config.json 'compress_ratios' gives an MTP layer a compressed "
                              "attention kvplan does not size (expected 0)",
                              field="compress_ratios")
        groups.append(LayerGroup(LayerKind.SLIDING, tuple(mtp_layers), n_kv_heads=1,
                                 head_dim_k=latent, head_dim_v=0, window=window, mtp=True))
    return groups, len(mtp_layers) or n_mtp


def _deepseek_v4_params(r: _Reader, n_layers: int) -> ParamCount:
    """DeepSeek-V4's parameters, tensor by tensor as its checkpoint names them.

    Attention: q low-rank (wq_a, q_norm, wq_b), one shared latent (wkv, kv_norm), the grouped
    low-rank output (wo_a: n_heads·head_dim → o_groups·o_lora_rank block-diagonally, wo_b),
    a sink per head; a compressor per compressed layer (wkv, wgate of coff·head_dim, ape, norm)
    and, at ratio 4, the indexer (wq_b, weights_proj, its own compressor of index_head_dim).
    MoE in every layer (experts, one shared expert, a router: a bias for score routing, a
    vocab × top-k table for the first num_hash_layers hash-routed ones); hyper-connections of
    hc_mult streams around attention and MoE (fn, base, scale) and at the head.
    """
    cfg = r.cfg
    hidden, vocab = r.get_int("hidden_size"), r.get_int("vocab_size")
    heads, latent = r.get_int("num_attention_heads"), r.get_int("head_dim")
    q_rank, o_rank = r.get_int("q_lora_rank"), r.get_int("o_lora_rank")
    o_groups = r.get_int("o_groups")
    experts, top_k = r.get_int("num_experts"), r.get_int("experts_per_token")
    inter = r.get_int("moe_intermediate_size")
    shared = r.opt_int("n_shared_experts", 0) or 0
    hc = r.opt_int("hc_mult", 1) or 1
    hash_layers = r.opt_int("num_hash_layers", 0) or 0
    ratios = cfg["compress_ratios"]
    index_heads = r.opt_int("index_n_heads", 0) or 0
    index_dim = r.opt_int("index_head_dim", 0) or 0
    mix = (2 + hc) * hc

    def compressor(ratio: int, dim: int) -> int:
        width = _V4_OVERLAP[ratio] * dim
        return 2 * hidden * width + ratio * width + dim

    # the heads' projections (wq_b, wo_a, wo_b, the sinks), which tensor parallelism splits
    heads_part = q_rank * heads * latent + heads * latent * o_rank + o_groups * o_rank * hidden + heads

    def whole_parts(ratio: int) -> list[_Part]:
        """What every rank holds whole: the down-projections to the query's rank and to the
        one shared latent (wq_a, wkv, with their norms), the compressor and the indexer
        (ReplicatedLinear in SGLang's and vLLM's model files)."""
        parts = [_Part(("attn",), "wq_a", hidden * q_rank + q_rank, q_rank, replicated=True),
                 _Part(("attn",), "wkv", hidden * latent + latent, latent, replicated=True)]
        if ratio:
            parts.append(_Part(("attn",), "compressor", compressor(ratio, latent),
                               _V4_OVERLAP[ratio] * latent, replicated=True, matrices=2))
        if ratio == 4:
            parts.append(_Part(("attn",), "indexer", q_rank * index_heads * index_dim
                               + hidden * index_heads + compressor(4, index_dim),
                               index_heads * index_dim, replicated=True, matrices=4))
        return parts

    def attention(ratio: int) -> int:
        return heads_part + sum(p.params for p in whole_parts(ratio))

    routed = experts * 3 * hidden * inter
    shared_mlp = shared * 3 * hidden * inter
    hyper = 2 * (mix * hc * hidden + mix + 3)
    total = active = experts_total = active_experts = replicated = 0
    # by module as the checkpoint names them (layers.N.attn.*, layers.N.ffn.experts,
    # .shared_experts, .gate), for quantization lists; the router is a bare weight
    modules: list[Module] = []
    for i in range(n_layers):
        whole = whole_parts(ratios[i])
        whole_params = sum(part.params for part in whole)
        attn = heads_part + whole_params
        router = hidden * experts + (vocab * top_k if i < hash_layers else experts)
        layer = attn + shared_mlp + router + 2 * hidden + hyper
        total += layer + routed
        active += layer + top_k * 3 * hidden * inter
        experts_total += routed
        active_experts += top_k * 3 * hidden * inter
        replicated += router + 2 * hidden + hyper + whole_params
        modules += [
            _module(i, _Part(("attn",), "", heads_part, heads * latent, matrices=3)),
            *(_module(i, part) for part in whole),
            _module(i, _Part(("ffn",), "experts", routed, experts * (2 * inter + hidden),
                             matrices=3 * experts), (top_k, experts), role="experts"),
            _module(i, _Part(("ffn",), "gate", router, 0, replicated=True)),
            _module(i, _Part(("hc",), "", 2 * hidden + hyper, 0, replicated=True))]
        if shared_mlp:
            modules.append(_module(i, _Part(("ffn",), "shared_experts", shared_mlp,
                                            shared * (2 * inter + hidden), matrices=3 * shared)))
    head_hc = hc * hc * hidden + hc + 1
    embedding = 2 * vocab * hidden
    modules += [Module(("embed",), vocab * hidden, 0, role="embed"),
                Module(("head",), vocab * hidden, vocab * hidden, vocab, 1, role="head"),
                Module(("norm",), hidden + head_hc, hidden + head_hc)]
    n_mtp = max(0, len(ratios) - n_layers) or (r.opt_int("num_nextn_predict_layers", 0) or 0)
    # an MTP block: a score-routed layer of ratio 0, e_proj and h_proj, three norms and its
    # own head hyper-connection; it shares the embedding and the head
    mtp_block = (attention(0) + routed + shared_mlp + hidden * experts + experts + 2 * hidden
                 + hyper + 2 * hidden * hidden + 3 * hidden + head_hc)
    return ParamCount(
        total=total + embedding + hidden + head_hc,
        active=active + vocab * hidden + hidden + head_hc,
        embedding=embedding,
        mtp=n_mtp * mtp_block,
        experts=experts_total,
        active_experts=active_experts,
        replicated=replicated,
        modules=tuple(modules),
    )


def _deepseek_v4_spec(config: Mapping[str, Any], r: _Reader, *, name: str, source: str,
                      hub_repo: str | None, safetensors_total_bytes: int | None,
                      quant_config: Mapping[str, Any] | None = None) -> ModelSpec:
    lm = r.cfg
    n_layers = r.get_int("num_hidden_layers", maximum=4096)
    groups, _ = _deepseek_v4_groups(r, n_layers)
    params = _deepseek_v4_params(r, n_layers)
    dtype = _checkpoint_dtype(config, lm)
    stored = _checkpoint_weights(config) or _checkpoint_weights(lm)
    scheme, weight_notes = _quantization(config, lm, quant_config, dtype, params.modules,
                                         stored)
    return ModelSpec(
        name=name, model_type=r.model_type, groups=tuple(groups), params=params, source=source,
        hub_repo=hub_repo, hidden_size=r.get_int("hidden_size"),
        architecture=_architecture(config), architectures=_architectures(config),
        vocab_size=r.get_int("vocab_size"),
        intermediate_size=r.opt_int("moe_intermediate_size", 0) or 0,
        num_attention_heads=r.get_int("num_attention_heads"),
        max_position_embeddings=r.opt_int("max_position_embeddings"),
        vllm_max_len=vllm_max_len(lm, r.model_type, r.opt_int("max_position_embeddings")),
        sglang_context_len=sglang_context_len(lm, r.model_type,
                                              r.opt_int("max_position_embeddings")),
        dtype_bytes=_DTYPE_BYTES.get(dtype, 2), dtype=dtype,
        config_dtype=_config_dtype(config, lm),
        ssm_dtype_bytes=4,
        checkpoint_weights=stored,
        quant=scheme,
        weight_notes=weight_notes,
        safetensors_total_bytes=safetensors_total_bytes,
        defaulted=tuple(dict.fromkeys(r.defaulted)),
        hidden_layers=n_layers,
    )


def _config_dtype(config: Mapping[str, Any], lm: Mapping[str, Any]) -> str:
    """The dtype name the config gives: the language model's torch_dtype (or dtype), else the
    outer config's; "" where none is a name."""
    dtype = (lm.get("torch_dtype") or lm.get("dtype") or config.get("torch_dtype")
             or config.get("dtype"))
    return dtype if isinstance(dtype, str) else ""


def _checkpoint_dtype(config: Mapping[str, Any], lm: Mapping[str, Any]) -> str:
    """The checkpoint's dtype name (_config_dtype); bfloat16 where the config names none."""
    return _config_dtype(config, lm) or "bfloat16"


def _quantization(config: Mapping[str, Any], lm: Mapping[str, Any],
                  sidecar: Mapping[str, Any] | None, dtype: str, modules: tuple[Module, ...],
                  stored: str | None) -> tuple[QuantScheme | None, tuple[str, ...]]:
    """The checkpoint's per-module quantization (config.json's quantization_config, else its
    hf_quant_config.json) and what a plan should say about it; ``stored``: the weight format
    the checkpoint is priced in per weight (_checkpoint_weights), if any."""
    dtype_bytes = _DTYPE_BYTES.get(dtype, 2)
    qc = config.get("quantization_config") or lm.get("quantization_config")
    scheme, note = parse_quant(qc, sidecar, dtype_bytes if dtype_bytes > 1 else 2)
    notes = [note] if note else []
    if isinstance(qc, Mapping) and scheme is None and not note and not stored:
        # neither priced module by module (a scheme, or a note that it was not understood)
        # nor per weight (a stored format)
        method = str(qc.get("quant_method", "")).lower()
        notes.append(f"quantization_config ({method or 'no quant_method'}"
                     + (f", {qc.get('bits')} bits" if qc.get("bits") else "")
                     + ") is not one kvplan prices: the weights are priced in the "
                     f"checkpoint's dtype ({dtype}); --weights names the stored format")
    if scheme is not None and not modules:
        notes.append(f"the checkpoint's {scheme.label} quantization is not priced module by "
                     "module for this architecture: the weights are an estimate per weight")
    elif scheme is not None:
        notes += quant_notes(scheme, modules)
    return scheme, tuple(notes)


#: architectures whose SGLang vision config names its depth and width vt_num_hidden_layers and
#: vt_hidden_size and aliases them as num_hidden_layers / hidden_size (configs/kimi_k3.py
#: KimiK3VisionConfig, sglang 0.5.23)
_VT_VISION_ARCHS = frozenset({"KimiK3ForConditionalGeneration"})


def _towers(config: Mapping[str, Any], vision: Any,
            encoder: int) -> tuple[tuple[str, ...], ...]:
    """The modalities of each tower of a model whose encoder kvplan weighs (``encoder``
    parameters), as vLLM's models mark them: a vision tower serves images, and videos too where
    the config names a video token; an audio tower serves audio."""
    if not encoder:
        return ()
    out: list[tuple[str, ...]] = []
    if isinstance(vision, Mapping):
        video = any(k in config for k in ("video_token_id", "video_token_index"))
        out.append(("image", "video") if video else ("image",))
    if isinstance(config.get("audio_config"), Mapping):
        out.append(("audio",))
    return tuple(out)


def _vision_encoder(vision: dict[str, Any] | None,
                    architecture: str | None = None) -> tuple[int, int] | None:
    """(layers, hidden size) of a vision encoder, as SGLang reads them (24 and 1024 where the
    config has no such key, or no usable value)."""
    if not vision:
        return None
    vt = architecture in _VT_VISION_ARCHS

    def whole(key: str, default: int) -> int:
        value = vision.get(f"vt_{key}" if vt else key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 20:
            return value
        return default

    # KimiK3VisionConfig's own defaults where the vt_ keys are absent: 27 layers of 1024
    return whole("num_hidden_layers", 27 if vt else 24), whole("hidden_size", 1024)

