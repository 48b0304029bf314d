"""SGLang's attention data parallelism (``--attn-dp-size N``, formerly ``--dp-size N
--enable-dp-attention``): what one card of the TP group holds and how many pools serve.

Within one TP group of ``tp`` cards, attention runs as ``N`` groups of ``tp / N`` cards
(``runtime_context.derive_attn_tp_size``), each with its own scheduler, requests and KV pool;
the dense MLP and the routed experts stay split over all ``tp`` cards. So, on every card:

- the attention projections are split over the attention group only (``parallel_group=
  "attn_tp"`` in the model files), and so is the input embedding
  (``vocab_parallel_embedding.get_embedding_tp_kwargs`` / ``use_attn_tp_group=
  is_dp_attention_enabled()``); the lm_head stays split over the whole TP group
  (``enable_dp_lm_head`` is off by default); MLA's down-projections stay whole as before;
- the KV cache holds the attention group's share of the heads (an MLA latent whole) for
  that group's requests only: the pool is sized per card as without it, and there are ``N``
  of them;
- ``--max-running-requests`` is shared out: each group takes ``max_running_requests // N``
  (``kv_cache_configurator.resolve_max_num_reqs``);
- the automatic mem_fraction_static reserves ``3 × decode max_bs × N`` MiB more (and
  ``1.5 × max_bs × N`` more again past a max_bs of 300; ``memory_hook.reserve_for_graph_mb``);
- ``--chunked-prefill-size`` is divided by ``N`` after the fraction was worked out
  (``parallel_hook._handle_data_parallelism``), so the fraction is unchanged by it;
- replicas (``--dp-size``) beside it, and LoRA, are refused at start-up
  (``parallel_hook``, ``lora_hook._check_v2_lora_modes``).
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..errors import InputError
from ..model import ModelSpec, Module
from ..parallel import Parallel, Split, check_tp, rank_spec
from ..weights import Weights, module_bytes
from .base import EngineRequest, RankShare, encoder_bytes, stage_part

#: architectures whose SGLang model file splits attention over the attention-TP group
#: (models/deepseek_v2.py, glm4_moe.py, qwen3.py, qwen3_moe.py, qwen2_moe.py, minimax_m2.py,
#: gpt_oss.py; qwen3_next.py its Gated DeltaNet layers too, their states with their heads):
#: elsewhere the flag's layout is not established (a model file that splits attention over
#: the whole TP group, Llama's, does not run it)
ARCHITECTURES = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
    "Glm4MoeForCausalLM", "GlmMoeDsaForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
    "Qwen2MoeForCausalLM", "MiniMaxM2ForCausalLM", "GptOssForCausalLM", "Qwen3NextForCausalLM",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    # llama4.py: qkv_proj and o_proj on "attn_tp", the embedding on the attention-TP group
    # under DP attention; the MoE, its shared expert, the dense MLP layers and (mllama4.py)
    # the vision tower over tp
    "Llama4ForConditionalGeneration", "Llama4ForCausalLM",
    # laguna.py: qkv_proj, o_proj and the gate g_proj on "attn_tp", the embedding over the
    # group; its dense first layer's MLP and the shared expert over tp. mimo_v2.py: qkv_proj
    # and o_proj on "attn_tp", the embedding over the group, the dense MLP over tp
    "LagunaForCausalLM", "MiMoV2FlashForCausalLM",
    # deepseek_v4.py: wq_b, wo_a and wo_b on "attn_tp" (wq_a, wkv, the compressor and the
    # indexer replicated either way), the embedding whole under DP attention; the MoE over tp
    "DeepseekV4ForCausalLM",
    # minimax_m3.py: qkv_proj and o_proj on "attn_tp", the index projections over
    # min(attn_tp, index heads) of the group, the embedding over the group (use_attn_tp_group);
    # minimax_vl_common.py: the vision tower on "attn_tp" unless --mm-enable-dp-encoder
    "MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration",
})
#: architectures whose input embedding every card holds whole under attention DP
#: (qwen3_5.py, deepseek_v4.py: VocabParallelEmbedding(enable_tp=not
#: is_dp_attention_enabled()))
EMBEDDING_WHOLE = frozenset({"Qwen3_5ForConditionalGeneration",
                             "Qwen3_5MoeForConditionalGeneration", "DeepseekV4ForCausalLM"})
#: architectures whose vision encoder splits over the attention group, not the TP group
#: (qwen3_vl.py _resolve_vision_parallel_group: "attn_tp" unless --mm-enable-dp-encoder)
ENCODER_OVER_GROUP = frozenset({"Qwen3_5ForConditionalGeneration",
                                "Qwen3_5MoeForConditionalGeneration",
                                "MiniMaxM3SparseForConditionalGeneration"})

#: a layer's attention projections (full attention, or a linear-attention layer's; DeepSeek-V4's
#: heads' part, layers.N.attn)
_LAYER = re.compile(r"^layers\.(\d+)\.(?:(?:self_attn|linear_attn)\.(?!indexer\.)|attn$)")


def check(req: EngineRequest) -> None:
    """Refuse, in one line, an attention-DP plan SGLang does not start or kvplan cannot size."""
    p, spec = req.parallel, req.spec
    if p.attn_dp == 1:
        if req.settings.dp_lm_head:
            raise InputError("--enable-dp-lm-head splits the lm_head over an attention group: "
                             "SGLang refuses it without attention DP (give attn_dp)",
                             field="enable_dp_lm_head")
        return
    if p.dp > 1:
        raise InputError(f"SGLang refuses --dp-size {p.dp} beside --attn-dp-size {p.attn_dp} "
                         "(data-parallel replicas combined with attention data parallelism "
                         "are not supported): give dp or attn_dp", field="attn_dp")
    if spec.architecture not in ARCHITECTURES:
        raise InputError(f"SGLang's attention data parallelism for "
                         f"{spec.architecture or spec.model_type or 'this model'} is not "
                         "established (its "
                         "model file's split of attention over --attn-dp-size groups was not "
                         "read): plan it with tp alone", field="attn_dp")
    if req.settings.cpu_offload_bytes:
        raise InputError("--cpu-offload-gb beside --attn-dp-size is not sized (which of a "
                         "card's attention weights move is not established): give one or the "
                         "other", field="attn_dp")
    if req.settings.lora is not None:
        raise InputError("SGLang refuses --enable-lora with --attn-dp-size above 1: give one "
                         "or the other", field="attn_dp")
    try:
        check_tp(spec, p.attn_tp)
    except InputError as e:
        raise InputError(f"attention groups of {p.attn_tp} cards (tp {p.tp} / attn_dp "
                         f"{p.attn_dp}): {e}", field="attn_dp") from None


def per_group(req: EngineRequest) -> int:
    """The sequences one attention group takes: the request's, shared out evenly (the most any
    group gets)."""
    return -(-req.sequences // req.parallel.attn_dp)


def max_running(req: EngineRequest) -> int:
    """--max-running-requests for the request's sequences: a group's share (per_group) in
    each attention group."""
    return per_group(req) * req.parallel.attn_dp


def attention_modules(spec: ModelSpec) -> list[tuple[int, Module]]:
    """(layer, module) of the attention projections tensor parallelism splits (MLA's
    down-projections, which every rank holds whole, and a DSA indexer's apart)."""
    out = []
    for m in spec.params.modules:
        hit = _LAYER.match(m.names[0])
        if hit and m.role == "":
            out.append((int(hit.group(1)), m))
    return out


def stage_attention(req: EngineRequest, split: Split, stage: int) -> tuple[int, int]:
    """(parameters, bytes) of the attention projections of pipeline stage ``stage`` that
    tensor parallelism splits, in the plan's weight format."""
    spec, p = req.spec, req.parallel
    mods = attention_modules(spec)
    if not mods:
        raise InputError(f"the attention modules of {spec.name} are not known, so its weights "
                         "under attention data parallelism cannot be split: plan it with tp "
                         "alone", field="attn_dp")
    own = set(split(spec.decoder_layers, p.pp, stage))
    mine = [m for i, m in mods if i in own]
    if req.cache.mtp and stage == p.pp - 1:
        # the MTP draft's layers (NextN: a decoder layer of the model's own) sit on the last
        # stage, their attention split over the group too: priced as the last layer's
        drafts = sum(g.count for g in spec.groups if g.mtp and g.kind.is_attention)
        last = max(i for i, _ in mods)
        mine += [m for i, m in mods if i == last] * drafts
    size = module_bytes(spec, req.weights, mine, mtp=req.cache.mtp)
    if size is None:
        raise InputError("the attention weights of a GGUF checkpoint are not priced module "
                         "by module, so their split under attention data parallelism is not "
                         "known: plan it with tp alone", field="attn_dp")
    return sum(m.params for m in mine), size


def shares(req: EngineRequest, weights: Weights, parts: list[RankShare],
           split: Split) -> list[RankShare]:
    """Each stage's share with attention DP: its attention projections and the input
    embedding over the attention group instead of the whole TP group, and a cache of the
    attention group's heads."""
    p, spec = req.parallel, req.spec
    if p.attn_dp == 1:
        return parts
    group = Parallel(tp=p.attn_tp, pp=p.pp)
    whole_embedding = spec.architecture in EMBEDDING_WHOLE
    encoder = encoder_bytes(req) if spec.architecture in ENCODER_OVER_GROUP else 0
    out = []
    for sh in parts:
        _, attn = stage_attention(req, split, sh.stage)
        extra = attn // p.attn_tp - attn // p.tp
        if encoder:
            # the vision tower, spread over the stages with the body
            mine = stage_part(encoder, req, split, sh.stage)
            extra += mine // p.attn_tp - mine // p.tp
        if sh.stage == 0:
            cards = 1 if whole_embedding else p.attn_tp
            extra += weights.input_bytes // cards - weights.input_bytes // p.tp
        if req.settings.dp_lm_head and head_apart(weights, p) and sh.stage == p.pp - 1:
            # --enable-dp-lm-head: the lm_head over the attention group as well
            extra += weights.head_bytes // p.attn_tp - weights.head_bytes // p.tp
        if req.weights_bytes is not None:
            # weights as the engine printed them for a card already hold the group's share
            extra = 0
        out.append(replace(sh, weights_bytes=sh.weights_bytes + extra,
                           spec=rank_spec(spec, group, sh.stage, split)))
    return out


def head_apart(weights: Weights, p: Parallel) -> bool:
    """Whether the lm_head is a matrix of its own on the last stage (untied, or a copy of a
    tied embedding on a later stage): a tied one on a single stage is the embedding, split
    over the attention group already."""
    return weights.lm_head_separate or p.pp > 1


def note(req: EngineRequest, more: int, tokens: int, per: int) -> str:
    """What attention DP does to this plan, in a sentence (``more``: the weight bytes a card
    holds beyond its share under tensor parallelism alone)."""
    from ..units import format_bytes

    p, arch = req.parallel, req.spec.architecture
    split = ["attention weights"]
    if arch in ENCODER_OVER_GROUP and encoder_bytes(req):
        split.append("vision tower")
    if arch not in EMBEDDING_WHOLE:
        split.append("input embedding")
    if req.settings.dp_lm_head:
        split.append("lm_head")
    whole = ("; the input embedding whole on every card (enable_tp off under attention DP)"
             if arch in EMBEDDING_WHOLE else "")
    return (f"--attn-dp-size {p.attn_dp}: attention runs as {p.attn_dp} groups of "
            f"{p.attn_tp} card{'s' if p.attn_tp > 1 else ''}, each with its own KV pool of "
            f"{tokens:,} tokens and up to {per:,} of the {req.sequences:,} sequences "
            f"(--max-running-requests {max_running(req):,} shared out); its "
            f"{', '.join(split[:-1]) + ' and ' + split[-1] if len(split) > 1 else split[0]} "
            f"split over {p.attn_tp} instead of {p.tp} cards{whole} ({format_bytes(more, 2)} a "
            f"card more), the MLP and experts over all {p.tp}")
