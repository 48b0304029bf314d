"""A separate draft model for speculative decoding, planned beside its target.

A draft model (Qwen3-0.6B proposing tokens that Qwen3-32B verifies) costs its weights and a
cache of its own for every token the target caches. ``attach`` folds it into the target's
spec: the draft's layers become the target's draft (``mtp``) groups, numbered after the
target's decoder, and its weights are priced once in their own format, so that every engine
that counts MTP layers counts the draft's (vLLM puts them in the target's KV pool, SGLang
sizes the target's cell for them and gives the draft a pool of the same token count, raw adds
them); llama.cpp, which gives the draft a context of its own, reads ``spec.draft``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .errors import InputError, KvplanError
from .formats import KVFormat
from .model import DraftModel, LayerGroup, LayerKind, ModelSpec
from .weights import weights_for

if TYPE_CHECKING:
    from .gpus import GPU
    from .kv import CacheOptions

__all__ = ["DRAFT_KINDS", "DRAFT_TOKENS", "VOCAB_SLACK", "attach", "check_vocab", "draft_groups",
           "draft_row_bytes", "load_draft", "speculative_decode"]

#: cache kinds a draft model may have: attention over its own tokens (full or windowed)
DRAFT_KINDS = frozenset({LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED})
#: draft tokens a step where none are given: llama.cpp's --spec-draft-n-max default, and the
#: 3 steps SGLang picks for a STANDALONE draft (vLLM asks for num_speculative_tokens)
DRAFT_TOKENS = 3
#: llama.cpp's most a draft's vocabulary may differ from the target's in size
#: (common/speculative.cpp SPEC_VOCAB_MAX_SIZE_DIFFERENCE)
VOCAB_SLACK = 128


def _kinds(spec: ModelSpec) -> set[LayerKind]:
    return {g.kind for g in spec.groups_for(mtp=False)}


def load_draft(ref: str, *, allow_local: bool = True) -> ModelSpec:
    """The draft model's spec from any reference a model takes (catalog id, Hub repo id, GGUF
    or config path, Ollama name), its errors naming the draft."""
    from .catalog import load_model

    try:
        return load_model(ref, allow_local=allow_local)
    except KvplanError as exc:
        exc.field = "draft"
        exc.args = (f"draft: {exc.args[0]}" if exc.args else "draft: not a model",)
        raise


def attach(target: ModelSpec, draft: ModelSpec, weights: str | None = None) -> ModelSpec:
    """``target`` with ``draft`` as its speculative draft model (``weights``: the draft's weight
    format, None or auto for its checkpoint's). The target's own MTP layers and weights are left
    out (one draft at a time), and a draft of another kind than attention is refused."""
    if target.draft is not None:
        raise InputError("a model can have one draft model", field="draft")
    odd = _kinds(draft) - DRAFT_KINDS
    if odd:
        raise InputError(f"draft {draft.name} has {', '.join(sorted(k.value for k in odd))} "
                         "layers: kvplan plans a draft model of attention layers (full or "
                         "sliding-window), as the engines' standalone drafts are",
                         field="draft")
    if draft.has_mtp:
        draft = replace(draft, groups=draft.groups_for(mtp=False),
                        params=replace(draft.params, mtp=0))
    try:
        priced = weights_for(draft, weights)
    except KvplanError as exc:
        exc.field = "draft_weights"
        raise
    base = target.decoder_layers
    groups = tuple(replace(g, layers=tuple(base + i for i in g.layers), mtp=True)
                   for g in draft.groups)
    params = target.params
    stored = target.safetensors_total_bytes
    if params.mtp and stored:
        # the index holds the target's own MTP layers, which a draft model replaces
        stored -= int(params.mtp * stored / max(1, params.total + params.mtp))
    checkpoint = target.checkpoint
    if checkpoint is not None and checkpoint.draft_bytes:
        checkpoint = replace(checkpoint, draft_bytes=0)
    return replace(
        target, groups=target.groups_for(mtp=False) + groups,
        params=replace(params, mtp=0), safetensors_total_bytes=stored, checkpoint=checkpoint,
        hidden_layers=target.hidden_layers or base,
        draft=DraftModel(draft, priced.bytes, priced.format, priced.source,
                         input_bytes=priced.embedding_bytes + priced.per_layer_embedding_bytes
                         - priced.head_bytes, weights_asked=weights))


def draft_groups(spec: ModelSpec) -> tuple[LayerGroup, ...]:
    """The draft's layer groups as the target's spec numbers them."""
    return tuple(g for g in spec.groups if g.mtp) if spec.draft is not None else ()


def check_vocab(spec: ModelSpec, engine: str, *, exact: bool) -> None:
    """Refuse a draft whose vocabulary the engine will not pair with the target's: vLLM asks
    for the same vocab_size (``exact``); llama.cpp for sizes within VOCAB_SLACK (it then
    compares the tokens, which a config does not hold)."""
    if spec.draft is None:
        return
    t, d = spec.vocab_size, spec.draft.spec.vocab_size
    if not t or not d:
        return
    if exact and t != d:
        raise InputError(f"{engine} needs the draft's vocab_size to equal the target's: "
                         f"{spec.draft.name} has {d:,}, {spec.name} {t:,} (a draft of the "
                         "target's family shares its tokenizer)", field="draft")
    if not exact and abs(t - d) > VOCAB_SLACK:
        raise InputError(f"{engine} pairs a draft whose vocabulary is within {VOCAB_SLACK} "
                         f"tokens of the target's: {spec.draft.name} has {d:,}, {spec.name} "
                         f"{t:,} (a draft of the target's family shares its tokenizer)",
                         field="draft")


def draft_row_bytes(spec: ModelSpec, k: KVFormat, v: KVFormat, tp: int = 1) -> tuple[int, int]:
    """(K, V) bytes one token adds to the draft's layers on one of ``tp`` ranks: each rank
    holds max(1, heads // tp) of a layer's KV heads (a head replicated where the heads are
    fewer than the ranks), as vLLM and SGLang shard the draft with the target's tensor
    parallelism."""
    kb = vb = 0
    for g in draft_groups(spec):
        heads = max(1, g.n_kv_heads // tp)
        kb += g.count * heads * k.row_bytes(g.head_dim_k)
        vb += g.count * heads * (v.row_bytes(g.head_dim_v, "v") if g.head_dim_v else 0)
    return kb, vb


def speculative_decode(spec: ModelSpec, opts: CacheOptions, context: int, sequences: int,
                       weights: str | None, gpu: GPU, acceptance: float,
                       tokens: int) -> dict[str, Any] | None:
    """The decode rate of speculative decoding with ``spec``'s draft model on one ``gpu``, at
    full context, where each of the ``tokens`` draft tokens a round is accepted with
    probability ``acceptance`` (independently): a round is ``tokens`` draft steps (the draft's
    weights and cache read, a token a sequence) and one verify step of the target (its weights
    and cache read once, its matrix products over tokens + 1 tokens a sequence, a mixture of
    experts routing all of them), and yields (1 − a^(tokens+1)) / (1 − a) tokens a sequence in
    expectation. None where the card has no bandwidth figure."""
    from .kv import in_format
    from .plan import PlanRequest, plan

    if spec.draft is None or not gpu.bandwidth_bytes_per_s:
        return None
    d = spec.draft
    target = replace(spec, groups=spec.groups_for(mtp=False), draft=None)
    alone = replace(opts, mtp=False, draft_format=None)
    t = plan(PlanRequest(spec=target, context=context, sequences=sequences, cache=alone,
                         weights=weights, gpu=gpu))
    d_opts = alone if opts.draft_format is None else in_format(alone, opts.draft_format)
    p = plan(PlanRequest(spec=d.spec, context=context, sequences=sequences, cache=d_opts,
                         weights=d.weights_asked, gpu=gpu))
    assert t.decode is not None and p.decode is not None
    bw = gpu.bandwidth_bytes_per_s
    width = tokens + 1
    read = (t.weights.step_bytes(sequences * width) + t.cache.read_bytes
            + 2 * t.cache.state_bytes)
    flops = t.decode.flops_per_step * width
    verify = max(read / bw, flops / gpu.matmul_flops_per_s if gpu.matmul_flops_per_s else 0.0)
    draft_step = p.decode.seconds_per_step
    a = acceptance
    expected = float(width) if a >= 1 else (1 - a ** width) / (1 - a)
    seconds = verify + tokens * draft_step
    return {"acceptance": a, "draft_tokens": tokens, "tokens_per_round": expected,
            "verify_seconds": verify, "draft_step_seconds": draft_step,
            "seconds_per_round": seconds,
            "tokens_per_s_per_sequence": expected / seconds,
            "tokens_per_s_total": expected * sequences / seconds,
            "target_tokens_per_s_per_sequence": t.decode.tokens_per_s_per_sequence,
            "speedup": expected / seconds / t.decode.tokens_per_s_per_sequence}
