"""A separate draft model for speculative decoding, planned beside its target.

A draft model (Qwen3-0.6B proposing tokens that Qwen3-32B verifies) costs its weights and a
cache of its own for every token the target caches. ``attach`` folds it into the target's
spec: the draft's layers become the target's draft (``mtp``) groups, numbered after the
target's decoder, and its weights are priced once in their own format, so that every engine
that counts MTP layers counts the draft's (vLLM puts them in the target's KV pool, SGLang
sizes the target's cell for them and gives the draft a pool of the same token count, raw adds
them); llama.cpp, which gives the draft a context of its own, reads ``spec.draft``.

An EAGLE head (EAGLE-1, EAGLE-3) is a draft of one decoder layer that reads the target's
hidden states: it borrows the target's token embedding (and EAGLE-1 its lm_head), so its
weights are its fc, its layer, its norms and an EAGLE-3 head's own lm_head over its draft
vocabulary (``draft_vocab_size`` rows) with the map of those rows to the target's tokens
(int64, one a row). Its layer's cache is sized as a draft model's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .errors import InputError, KvplanError
from .formats import KVFormat
from .model import DraftModel, LayerGroup, LayerKind, ModelSpec, ParamCount
from .units import format_count
from .weights import weights_for

if TYPE_CHECKING:
    from .gpus import GPU
    from .kv import CacheOptions

__all__ = ["DRAFT_KINDS", "DRAFT_TOKENS", "METHODS", "TITLES", "VOCAB_SLACK", "attach",
           "check_vocab", "draft_groups", "draft_row_bytes", "head_method", "head_params",
           "load_draft", "speculative_decode"]

#: cache kinds a draft model may have: attention over its own tokens (full or windowed)
DRAFT_KINDS = frozenset({LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED})
#: draft tokens a step where none are given: llama.cpp's --spec-draft-n-max default, and the
#: 3 steps SGLang picks for a STANDALONE draft (vLLM asks for num_speculative_tokens)
DRAFT_TOKENS = 3
#: llama.cpp's most a draft's vocabulary may differ from the target's in size
#: (common/speculative.cpp SPEC_VOCAB_MAX_SIZE_DIFFERENCE)
VOCAB_SLACK = 128


#: how a draft drafts: "auto" (head_method decides), a model of its own, or an EAGLE head
METHODS = ("auto", "draft_model", "eagle", "eagle3")
#: bytes of an EAGLE-3 head's map from its draft vocabulary to the target's tokens, a row
D2T_BYTES = 8
#: hidden states an EAGLE-3 head takes from the target where its config names none
AUX_LAYERS = 3


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


def head_method(draft: ModelSpec, method: str | None = None) -> str:
    """How ``draft`` drafts where ``method`` is None or "auto": "eagle3" where an
    ``architectures`` entry names an EAGLE-3 head, its config gives ``draft_vocab_size`` or its
    name has "eagle3"; "eagle" where an entry names an EAGLE head or its name has "eagle-"
    (the names as vLLM tells its heads apart by their paths); else "draft_model". A method
    given is checked against a config that names another."""
    m = (method or "auto").strip().lower().replace("-", "_")
    if m not in METHODS:
        raise InputError(f"draft_method must be one of {', '.join(METHODS)}; got {method!r}",
                         field="draft_method")
    h = draft.head
    names = f"{draft.name} {draft.hub_repo or ''}".lower()
    stated = _stated(draft)
    found = stated or ("eagle3" if "eagle3" in names else
                       "eagle" if "eagle-" in names else "draft_model")
    if m == "auto":
        return found
    if stated and m != stated:
        why = (f"its architecture {draft.architecture}" if h.declared
               else "its config's draft_vocab_size")
        raise InputError(f"draft {draft.name} is an {TITLES[stated]} head ({why}): "
                         f"draft_method {m} does not load it", field="draft_method")
    return m


#: each draft method as a plan names it
TITLES = {"eagle": "EAGLE", "eagle3": "EAGLE-3", "draft_model": "draft model"}


def _stated(spec: ModelSpec) -> str:
    """The head a config itself names: by its architecture, or an EAGLE-3 head by its draft
    vocabulary ("" where it names none)."""
    return spec.head.declared or ("eagle3" if spec.head.draft_vocab_size else "")


def refuse_head_target(spec: ModelSpec) -> None:
    """Refuse, in one line, an EAGLE head planned as a model to serve: its config names one
    (an Eagle architecture, draft_vocab_size) or the catalog lists it as a head."""
    from .catalog import model_catalog

    declared = _stated(spec)
    of = next((e.head_of for e in model_catalog() if e.id == spec.name and e.head_of), "")
    if not declared and not of:
        return
    method = declared or head_method(spec)
    target = f" (it was trained for {of})" if of else ""
    raise InputError(f"{spec.name} is an {TITLES[method]} draft head{target}: it drafts over a "
                     f"target's hidden states and serves nothing alone; plan the target with "
                     f"--draft {spec.name}", field="model")


def _head_params(d: ModelSpec, method: str) -> tuple[ParamCount, int, int]:
    """An EAGLE head's parameters as the engines keep them (its fc, layers, norms and an
    EAGLE-3 head's own lm_head; the token embedding and EAGLE-1's lm_head are the target's),
    the bytes of its draft-to-target token map, and the parameters an engine allocates for
    the head and then swaps for the target's (its embedding; EAGLE-1's full lm_head, as an
    EAGLE-3 head without a draft vocabulary builds one)."""
    hidden, heads, inter = d.hidden_size, d.num_attention_heads, d.intermediate_size
    groups = d.groups_for(mtp=False)
    if not hidden or not heads or not inter or not groups:
        raise InputError(f"draft {d.name}: an EAGLE head's config needs hidden_size, "
                         "num_attention_heads and intermediate_size", field="draft")
    h = d.head
    eagle3 = method == "eagle3"
    layers = attn = 0
    for g in groups:
        qkv = (heads * g.head_dim_k + g.n_kv_heads * (g.head_dim_k + g.head_dim_v))
        for i in range(g.count):
            first = layers + i == 0
            # EAGLE-3's first layer reads the token's embedding beside the fused hidden state
            attn += (2 * hidden if eagle3 and first else hidden) * qkv
            attn += heads * g.head_dim_v * hidden
        layers += g.count
    mlp = 3 * hidden * inter * layers
    if eagle3:
        # input and post-attention norms a layer, the first layer's hidden_norm, the final norm
        norms = 2 * hidden * layers + 2 * hidden
        width = h.target_hidden_size or hidden
        fc = (h.aux_layers or AUX_LAYERS) * width * hidden
        lm_head = h.draft_vocab_size * hidden
        borrowed = d.vocab_size * hidden * (1 if h.draft_vocab_size else 2)
        d2t = h.draft_vocab_size * D2T_BYTES
    else:
        # EAGLE-1: the first layer's input norm is removed, and there is no final norm
        norms = 2 * hidden * layers - hidden
        fc = 2 * hidden * hidden
        lm_head, d2t = 0, 0
        borrowed = 2 * d.vocab_size * hidden
    fc += hidden if h.bias else 0
    if eagle3 and h.norm_before_fc:
        norms += (h.aux_layers or AUX_LAYERS) * (h.target_hidden_size or hidden)
    total = attn + mlp + norms + fc + lm_head
    return (ParamCount(total=total, active=total, embedding=lm_head, replicated=fc + norms),
            d2t, borrowed)


def head_params(head: ModelSpec) -> int:
    """The parameters an EAGLE head keeps (its config's own count takes it for a whole model:
    an embedding and a full lm_head it borrows); 0 for a draft model."""
    method = head_method(head)
    return 0 if method == "draft_model" else _head_params(head, method)[0].total


def check_head(target: ModelSpec, head: ModelSpec, method: str) -> None:
    """Refuse an EAGLE head that does not read ``target``'s hidden states (a head is trained
    for one target: its width and vocabulary are the target's)."""
    width = (head.head.target_hidden_size or head.hidden_size) if method == "eagle3" \
        else head.hidden_size
    if target.hidden_size and width and width != target.hidden_size:
        raise InputError(f"draft {head.name} is an {TITLES[method]} head over hidden states "
                         f"of {width:,} values; {target.name}'s are {target.hidden_size:,} (a "
                         "head is trained for one target)", field="draft")
    if target.vocab_size and head.vocab_size and target.vocab_size != head.vocab_size:
        raise InputError(f"draft {head.name} is an {TITLES[method]} head over a vocabulary of "
                         f"{head.vocab_size:,}; {target.name}'s is {target.vocab_size:,} (a "
                         "head is trained for one target)", field="draft")


def attach(target: ModelSpec, draft: ModelSpec, weights: str | None = None,
           method: str | None = None) -> ModelSpec:
    """``target`` with ``draft`` as its speculative draft (``weights``: the draft's weight
    format, None or auto for its checkpoint's; ``method``: head_method's). The target's own MTP
    layers and weights are left out (one draft at a time), and a draft of another kind than
    attention is refused."""
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
    how = head_method(draft, method)
    extra = borrowed = 0
    if how != "draft_model":
        check_head(target, draft, how)
        params, extra, borrowed = _head_params(draft, how)
        draft = replace(draft, params=params, safetensors_total_bytes=None, checkpoint=None,
                        quant=None)
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
        draft=DraftModel(draft, priced.bytes + extra, priced.format,
                         priced.source if how == "draft_model" else _head_source(draft, how),
                         input_bytes=(priced.embedding_bytes + priced.per_layer_embedding_bytes
                                      - priced.head_bytes) if how == "draft_model" else 0,
                         weights_asked=weights, method=how,
                         borrowed_bytes=borrowed * draft.dtype_bytes, map_bytes=extra))


def _head_source(d: ModelSpec, method: str) -> str:
    """How an EAGLE head's weights were counted."""
    h = d.head
    head = (f"its lm_head of {h.draft_vocab_size:,} rows and their token map"
            if method == "eagle3" and h.draft_vocab_size else "the target's lm_head")
    return (f"{TITLES[method]} head of {format_count(d.params.total)} params from its config "
            f"(fc, {d.decoder_layers} layer(s), norms, {head}; the target's token embedding)")


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
