"""SGLang speculative decoding with the model's own MTP / next-n head (EAGLE, NEXTN), as
release 0.5.23 sizes it.

Sources read (sglang 0.5.23 wheel): ``arg_groups/speculative_hook.py`` (``_handle_eagle_family``:
NEXTN is EAGLE; without ``--speculative-num-steps`` it picks 3 steps, top-k 1 and 4 draft
tokens (``_auto_choose_speculative_params``), and with top-k 1 the draft tokens are always
steps + 1; DeepSeek-V3/V3.2, GLM-4.5 and GLM-5 get their own checkpoint as the draft path),
``model_runner_components/spec_aux_hidden_state.py · _resolve_eagle_aux_hidden_state`` (the
draft layers the target's pool pays for: the draft config's ``num_nextn_predict_layers``, or
for a draft without a path the target config's, which Qwen3.5's and Qwen3-Next's configs do
not name), ``model_executor/pool_configurator.py · DefaultPoolConfigurator.__init__`` (cell +=
int(cell × draft layers / layers); a DSA model adds the draft's latent share and 132-byte
indexer keys in every draft layer), ``mem_cache/kv_cache_configurator.py ·
_handle_max_mamba_cache`` (the Mamba slots and the draft tokens' intermediate states solved
together: sglang.py ``mamba_slots_for`` with the draft tokens) and ``managers/scheduler.py · init_target_memory_pool / init_memory_pools`` (the
draft is loaded before the target's pool is profiled; the draft worker then builds its own
pool of the same token count from the target's MemoryPoolConfig).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..draft import check_vocab
from ..errors import InputError
from ..kv import CacheOptions, kv_row_bytes
from ..model import LayerKind, ModelSpec
from .base import EngineRequest, GiB

#: draft steps, top-k and draft tokens SGLang picks itself for an EAGLE/NEXTN run
#: (speculative_hook.py _auto_choose_speculative_params: (3, 1, 4) for every built-in head)
AUTO_STEPS, AUTO_TOPK, AUTO_DRAFT_TOKENS = 3, 1, 4
#: model types whose config names its MTP layers ``mtp_num_hidden_layers``, a field SGLang
#: does not read: with no draft path (speculative_hook.py sets one only for the DeepSeek / GLM
#: / Bailing / HunYuan families) the target's num_nextn_predict_layers is None, so the
#: target's pool adds no draft layers (spec_aux_hidden_state.py _resolve_eagle_aux_hidden_state)
NO_NEXTN_FIELD_TYPES = frozenset({"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text",
                                  "qwen3_next"})
#: cache kinds whose SGLang draft pool kvplan sizes: MLA (with its DSA indexer keys) and
#: full attention; recurrent layers are the target's Mamba pool
SIZED_KINDS = frozenset({LayerKind.FULL, LayerKind.MLA, LayerKind.INDEXER})


@dataclass(frozen=True)
class Speculative:
    """An EAGLE/NEXTN launch: draft steps, top-k 1, draft tokens, and the draft layers the
    target's pool pays for (``cell_layers``; 0 where SGLang reads none) and the draft model
    has (``draft_layers``)."""

    steps: int
    draft_tokens: int
    cell_layers: int
    draft_layers: int
    #: a draft model of its own (STANDALONE) or an EAGLE head (EAGLE, EAGLE3), as
    #: --speculative-draft-model-path names it
    draft_path: str | None = None
    #: --speculative-algorithm
    algorithm: str = "EAGLE"
    #: the model class SGLang loads an EAGLE head by, where the head's config names another
    #: (its architecture picks the class; no rename for a draft): "" where it names it
    head_class: str = ""

    def flags(self) -> list[str]:
        """The launch_server flags of this run."""
        algorithm = [f"--speculative-algorithm {self.algorithm}",
                     *([f"--speculative-draft-model-path {self.draft_path}"]
                       if self.draft_path else [])]
        return [*algorithm, f"--speculative-num-steps {self.steps}",
                "--speculative-eagle-topk 1",
                f"--speculative-num-draft-tokens {self.draft_tokens}"]


#: --speculative-algorithm by draft method
ALGORITHMS = {"draft_model": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3"}
#: the class SGLang loads a Llama EAGLE head by (models/llama_eagle.py, llama_eagle3.py),
#: where the head's config names no EAGLE class
HEAD_CLASSES = {"eagle": "LlamaForCausalLMEagle", "eagle3": "LlamaForCausalLMEagle3"}


def _refuse(what: str, field: str = "mtp", *, draft: bool = False) -> InputError:
    if draft:
        return InputError(f"SGLang with a draft model: {what}", field="draft")
    return InputError(f"SGLang with --mtp: {what}", field=field)


def resolve(req: EngineRequest, *, sliding: bool) -> Speculative | None:
    """The speculative run of this request (None without --mtp), or a one-line refusal of what
    is not sized. ``--speculative-tokens`` sets --speculative-num-draft-tokens (top-k 1, so
    steps = tokens − 1); without it SGLang's own 3 steps and 4 draft tokens."""
    spec, tokens = req.spec, req.settings.speculative_tokens
    if not req.cache.mtp:
        if tokens:
            raise InputError("SGLang's --speculative-tokens sets the draft tokens of the "
                             "model's own MTP head: add --mtp (kvplan sizes SGLang's "
                             "speculative decoding only with it)", field="speculative_tokens")
        return None
    own = spec.draft is not None
    if req.parallel.pp > 1:
        raise _refuse("the draft runs on the last pipeline stage only (SGLANG_ENABLE_PP_SPEC); "
                      "how the other stages' pools count it is not sized: use --pp 1",
                      draft=own)
    if own and req.parallel.attn_dp > 1:
        # speculative_hook.py: STANDALONE refuses DP attention; an EAGLE-3 head then runs in
        # an attention group of its own (draft_parallel.py), which is not sized
        raise _refuse("SGLang's STANDALONE speculative decoding refuses attention data "
                      "parallelism: plan it with attn_dp 1"
                      if spec.draft is not None and spec.draft.method == "draft_model" else
                      "an EAGLE head's attention group under attention data parallelism is "
                      "not sized: plan it with attn_dp 1", draft=True)
    draft_kinds = ({g.kind for g in spec.groups if g.mtp} if spec.draft is not None
                   else set())
    if sliding and (not own or draft_kinds != {LayerKind.FULL}):
        # a draft model of full attention only: HybridSWAPoolConfigurator's full side pays for
        # its layers (eagle_draft_swa_num_layers None); a sliding draft's place is not read
        raise _refuse("the draft layer's place in the sliding-window and full pools "
                      "(eagle_draft_swa_num_layers of a draft without its own path, or of a "
                      "draft with sliding-window layers) is not established", draft=own)
    target_kinds = {g.kind for g in spec.groups if not g.mtp}
    allowed = ({LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED} if sliding
               else {LayerKind.FULL})
    if own and not target_kinds <= allowed:
        # DefaultPoolConfigurator's cell with a draft is read for a target of full attention
        # only; the hybrid, MLA and sparse configurators' draft terms were not
        odd = sorted(k.value for k in target_kinds - allowed)
        raise _refuse(f"the pools of a target with {', '.join(odd)} layers beside a draft "
                      "model are not sized (kvplan sizes a target of full attention, and one "
                      "of full and sliding-window pools)",
                      draft=True)
    kinds = {g.kind for g in spec.groups if not g.kind.is_recurrent}
    if not kinds <= SIZED_KINDS | (allowed if own else set()):
        raise _refuse("the draft pool of a model with "
                      + ", ".join(sorted(k.name.lower() for k in kinds - SIZED_KINDS))
                      + " layers is not sized", draft=own)
    draft = spec.mtp_layers
    if not draft:
        raise _refuse(f"{spec.name} has no MTP / next-n layers in its config "
                      "(num_nextn_predict_layers or mtp_num_hidden_layers) for an EAGLE draft")
    if tokens == 1:
        raise InputError("SGLang's EAGLE with top-k 1 drafts steps + 1 tokens: "
                         "--speculative-tokens must be at least 2", field="speculative_tokens")
    d = tokens or AUTO_DRAFT_TOKENS
    if spec.draft is not None:
        # standalone_worker_v2.py _validate_vocab_compatibility: STANDALONE raises unless the
        # vocab sizes are equal (then it compares the tokenizers, which a config does not
        # hold); a head's vocabulary was checked as it was attached
        check_vocab(spec, "SGLang", exact=True)
        # STANDALONE: the draft's own config gives its layers (num_hidden_layers), and SGLang
        # picks 3 steps, top-k 1 and 4 draft tokens for it too; an EAGLE head's likewise
        # (EAGLE, EAGLE3: the command names top-k 1, where SGLang's own choice for a Llama
        # target is 5 steps, top-k 4 and 8 draft tokens, over the same pools)
        path = spec.draft.spec.hub_repo or spec.draft.name
        method = spec.draft.method
        need = HEAD_CLASSES.get(method, "")
        return Speculative(steps=d - 1, draft_tokens=d, cell_layers=draft, draft_layers=draft,
                           draft_path=path, algorithm=ALGORITHMS[method],
                           head_class="" if spec.draft.spec.head.declared else need)
    cell_layers = 0 if spec.model_type in NO_NEXTN_FIELD_TYPES else draft
    return Speculative(steps=d - 1, draft_tokens=d, cell_layers=cell_layers, draft_layers=draft)


def target_cell(cell: int, layers: int, sp: Speculative, *, indexer_row: int = 0,
                indexer_layers: int | None = None) -> int:
    """The profiler's cell with the draft's share (DefaultPoolConfigurator): ``cell`` over
    ``layers`` KV layers gains int(cell × draft / layers); for a DSA model (``indexer_row`` the
    indexer bytes a layer, in ``indexer_layers`` of them: every layer if not given) the share
    of the cell less its indexer keys, and the draft's own indexer keys in every draft layer
    (_compute_dsa_indexer_cell_size with allocate_all_layers)."""
    if not sp.cell_layers or layers <= 0:
        return cell
    if indexer_row:
        latent = cell - indexer_row * (layers if indexer_layers is None else indexer_layers)
        return cell + latent * sp.cell_layers // layers + indexer_row * sp.cell_layers
    return cell + cell * sp.cell_layers // layers


def notes(sp: Speculative, *, hybrid: bool, cell: int, base_cell: int) -> list[str]:
    """What a plan says about the speculative run."""
    if sp.draft_path and sp.algorithm != "STANDALONE":
        return [f"{sp.algorithm} with the head {sp.draft_path}: {sp.steps} steps, top-k 1, "
                f"{sp.draft_tokens} draft tokens (--speculative-tokens sets the draft tokens; "
                "SGLang's own choice for a Llama target, without the step flags, is 5 steps, "
                "top-k 4 and 8 draft tokens, over the same pools); its weights and its own "
                "token embedding are loaded before the pool is profiled (the embedding is freed "
                "once the head borrows the target's), and the pool's cell pays for its "
                f"{sp.cell_layers} layer(s) at the target's bytes a layer ({cell:,} bytes a "
                f"token per rank, {cell - base_cell:,} of them the head's); the draft worker then "
                "allocates its own pool of the same token count in its own geometry"] + (
                [f"SGLang loads a draft by its config's architecture, with no rename for a "
                 f"head: this head's config names another class, so the draft path must be a "
                 f"copy whose config names {sp.head_class} (the memory is the same)"]
                if sp.head_class else [])
    if sp.draft_path:
        return [f"STANDALONE with the draft model {sp.draft_path}: {sp.steps} steps, top-k 1, "
                f"{sp.draft_tokens} draft tokens (--speculative-tokens sets the draft tokens); "
                "its weights are loaded before the pool is profiled, and the pool's cell pays "
                f"for its {sp.cell_layers} layer(s) at the target's bytes a layer ({cell:,} bytes "
                f"a token per rank, {cell - base_cell:,} of them the draft's); the draft worker "
                "then allocates its own pool of the same token count in its own geometry",
                "SGLang compares the draft's tokenizer with the target's at start-up and raises "
                "where their token-to-id maps differ (a draft of the target's own family shares "
                "it; Qwen2.5's is not Qwen3's), which a config does not show"]
    out = [f"EAGLE/NEXTN with the model's MTP head: {sp.steps} steps, top-k 1, "
           f"{sp.draft_tokens} draft tokens (--speculative-tokens sets the draft tokens); the "
           "draft's weights are loaded before the pool is profiled"]
    if sp.cell_layers:
        out.append(f"the pool's cell pays for {sp.cell_layers} draft layer(s): {cell:,} bytes a "
                   f"token per rank, {cell - base_cell:,} of them the draft's")
    else:
        out.append("SGLang reads no num_nextn_predict_layers from this config (it names "
                   "mtp_num_hidden_layers), so the pool's cell pays for no draft layer")
    if hybrid:
        out.append(f"the Mamba pool also holds intermediate states for {sp.draft_tokens} draft "
                   "tokens a running request, solved together with the slots; the draft "
                   "worker's own pool (same token count) is not sized here")
    elif not sp.cell_layers:
        out.append("the draft worker's own KV pool (same token count) comes out of the memory "
                   "mem_fraction_static leaves, not sized here")
    return out


def pool_line(dtype: str, tokens: int, k_gb: float, v_gb: float | None = None, *,
              label: str = "") -> str:
    """The line a KV pool logs once allocated (memory_pool.py _finalize_allocation_log):
    its dtype, tokens and K and V sizes in GiB, or one size (``v_gb`` None) where the pool
    keeps one buffer (MLA latents, the DSA pool); ``label`` "Full" or "SWA" for the two pools
    of a sliding-window model."""
    name = f"{label} KV Cache" if label else "KV Cache"
    sizes = (f"KV size: {k_gb:.2f} GB" if v_gb is None
             else f"K size: {k_gb:.2f} GB, V size: {v_gb:.2f} GB")
    return f"{name} is allocated. dtype: {dtype}, #tokens: {tokens}, {sizes}"


def draft_line(spec: ModelSpec, opts: CacheOptions, tokens: int, page: int, dtype: str, *,
               pool_bytes: int | None = None) -> str:
    """The line the draft worker's pool logs: ``tokens`` + one page of rows over the draft's
    layers (its MTP layers' geometry; ``pool_bytes`` where the caller sized a DSA pool), in
    the target's pool ``dtype``."""
    if pool_bytes is not None:
        return pool_line(dtype, tokens, pool_bytes / GiB)
    k_all, v_all = kv_row_bytes(spec, opts.kv_k, opts.kv_v, mtp=True)
    k_base, v_base = kv_row_bytes(spec, opts.kv_k, opts.kv_v)
    k_gb = (tokens + page) * (k_all - k_base) / GiB
    v_gb = (tokens + page) * (v_all - v_base) / GiB
    if any(g.kind is LayerKind.MLA for g in spec.groups if g.mtp):
        return pool_line(dtype, tokens, k_gb + v_gb)
    return pool_line(dtype, tokens, k_gb, v_gb)
