"""Ollama: the llama-server it starts, and the flags it starts it with.

Ollama serves GGUF models by starting llama.cpp's llama-server; kvplan plans that server with
llama.cpp's rules (engines/llamacpp.py) and Ollama's choices of its flags. Sources read
(ollama/ollama @fb307609, 2026-08-21):

- ``llm/llama_server.go`` startLlamaServer: ``-c num_ctx × num_parallel -np num_parallel``,
  ``--cache-type-k`` and ``--cache-type-v`` both OLLAMA_KV_CACHE_TYPE (left out: f16),
  ``--flash-attn auto`` unless OLLAMA_FLASH_ATTENTION says on or off, ``-b N -ub N`` for
  num_batch, ``-ngl`` only where num_gpu is set (else llama-server's ``--fit`` places the
  layers); the server inherits Ollama's environment, so LLAMA_ARG_* variables reach it for
  the flags Ollama does not pass (-ot has no variable kvplan has established); a
  projector loaded on the card sets LLAMA_ARG_FIT_TARGET to its size + 1 GiB
  (mmprojFitTargetMiB), where --fit counts no projector: the 1 GiB --fit leaves beside the
  projector kvplan counts with the weights; the projector stays in host memory
  (--no-mmproj-offload) where num_gpu is below the layers or a card has less free memory than
  it and 1 GiB (shouldDisableMMProjOffload).
- ``llm/server.go`` NewLlamaServer: num_ctx lowered to the GGUF's context_length.
- ``server/sched.go``: OLLAMA_NUM_PARALLEL (default 1), set to 1 for some families (load);
  num_ctx at least 4, at least 2,048 for a vision model (getRunner); num_batch chosen by the
  context where not set (automaticGenerationBatch: 2,048 past 32,768 tokens of -c, 1,024 past
  4,096, else 512, lowered while Ollama's own estimate of the load, the GGUF's size and an
  f16 cache of ``2 × block_count × head_count_kv(min) × (embedding_length / head_count(max))``
  values a token, leaves too little of the cards' free memory; with flash attention off on a
  CUDA card 512, or 256 past 4,096 tokens on a card of 8 GiB or less); with several cards a
  model Ollama's estimate puts within 80% of one card's free memory runs on that card only
  (selectLlamaServerPlacement, unless OLLAMA_SCHED_SPREAD, kvplan's sched_spread: then the
  best group of cards, every one of them).
- ``llm/llama_server.go`` NewLlamaServerRunner, appendDraftArgs and ``server/routes.go``: a
  GGUF with MTP layers (nextn_predict_layers) drafts with them (``--spec-type draft-mtp
  --spec-draft-n-max N``) only where draft_num_predict is set in the Modelfile or the request
  (its default, 4, is dropped otherwise); kvplan's ``--mtp`` plans that.
- ``server/routes.go``: num_ctx's default by the cards' total memory (a Mac's as ggml's Metal
  backend reports it, the working set Metal lets the GPU wire) less OLLAMA_GPU_OVERHEAD each:
  262,144 from 47 GiB, 32,768 from 23 GiB, else 4,096.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import NamedTuple

from ..errors import InputError
from ..gpus import GPU
from ..model import LayerKind, ModelSpec
from .base import CPU_MOE, EngineReport, EngineRequest, GiB, MiB, encoder_bytes, loaded_weights

NAME = "ollama"
#: model families Ollama serves one request at a time (server/sched.go load), by the
#: model_type prefixes of their configs: qwen3vl(moe), qwen35(moe), qwen3next, lfm2(moe),
#: nemotron_h(_moe, _omni), mllama
ONE_AT_A_TIME = ("qwen3_vl", "qwen3_5", "qwen3_next", "lfm2", "nemotron_h", "mllama")
#: num_batch: Ollama's default, the one under flash attention off on a small CUDA card, and
#: the two it takes for longer contexts (server/sched.go)
BATCH, BATCH_SMALL, BATCH_MEDIUM, BATCH_LARGE = 512, 256, 1024, 2048
#: what Ollama sets aside beside its estimate before it takes a larger batch (sched.go
#: generationBatchSurcharge) and the share of free memory its estimate may reach with it
SURCHARGE = {BATCH_LARGE: 2 * GiB, BATCH_MEDIUM: 768 * MiB}
HEADROOM = {BATCH_LARGE: 60, BATCH_MEDIUM: 75}
#: hybrid models whose GGUF lists head_count_kv layer by layer (0 where a layer has no
#: attention: Nemotron-H, LFM2, Granite hybrids, Jamba); Qwen3-Next and Qwen3.5 write one
#: count (llama.cpp's converters)
PER_LAYER_KV_HEADS = ("nemotron_h", "lfm2", "granitemoehybrid", "jamba")
#: draft_num_predict's default: the tokens an MTP draft proposes a step (api/types.go)
DRAFT_TOKENS = 4


def default_context(total_bytes: int) -> int:
    """num_ctx where neither OLLAMA_CONTEXT_LENGTH nor a request sets it, by the cards' total
    memory (less OLLAMA_GPU_OVERHEAD): server/routes.go."""
    if total_bytes >= 47 * GiB:
        return 262144
    if total_bytes >= 23 * GiB:
        return 32768
    return 4096


def cards_memory(gpus: Iterable[GPU | None], overhead: int = 0) -> int:
    """The cards' memory as Ollama counts it for its default num_ctx: each card's total (a
    Mac's, what Metal lets the GPU wire, which ggml reports as its total) less ``overhead``
    (OLLAMA_GPU_OVERHEAD)."""
    return sum(max(0, (g.usable_bytes if g.unified else g.total_bytes) - overhead)
               for g in gpus if g is not None)


def auto_context(spec: ModelSpec, gpus: Iterable[GPU | None], overhead: int = 0) -> int:
    """Ollama's own num_ctx for ``spec`` on ``gpus``: default_context, no more than the
    trained context (llm/server.go)."""
    ctx = default_context(cards_memory(gpus, overhead))
    trained = spec.max_position_embeddings
    return min(ctx, trained) if trained else ctx


def rank_gpus(req: EngineRequest) -> list[GPU | None]:
    """The card of each rank of one replica."""
    return [req.gpu_for(d) for d in range(req.parallel.ranks_per_replica)]


class Load(NamedTuple):
    """Ollama's own estimate of a load (llm PredictServerVRAM): the GGUF's size and an f16
    cache's bytes a token of -c, in every block at the fewest KV heads the GGUF lists (1 where
    that is 0) and a head of embedding_length / head_count."""

    file_bytes: int
    token_bytes: int

    def at(self, n_ctx: int) -> int:
        """The estimate for ``n_ctx`` tokens of -c."""
        return self.file_bytes + self.token_bytes * n_ctx


def load_estimate(req: EngineRequest) -> Load:
    """Ollama's estimate of ``req``'s load (Load), its parts read once."""
    spec = req.spec
    heads = [g.n_kv_heads for g in spec.groups if g.kind.is_attention and not g.mtp]
    if spec.model_type.startswith(PER_LAYER_KV_HEADS) or not heads:
        # a list with 0 for each layer without attention: its fewest is 0, taken as 1
        heads.append(0)
    kv_heads = max(1, min(heads))
    if any(g.kind is LayerKind.MLA for g in spec.groups):
        # llama.cpp's converter writes MLA as one KV head (deepseek2)
        kv_heads = 1
    head_dim = spec.hidden_size // max(1, spec.num_attention_heads)
    return Load(loaded_weights(req).bytes, 2 * spec.decoder_layers * kv_heads * head_dim * 2)


def estimate_bytes(req: EngineRequest, n_ctx: int) -> int:
    """Ollama's estimate of ``req``'s load with ``n_ctx`` tokens of -c."""
    return load_estimate(req).at(n_ctx)


def free_bytes(req: EngineRequest) -> int:
    """The free memory Ollama places a model in: every card's, each taken as idle (its
    driver-reported total)."""
    return sum(g.usable_bytes for g in rank_gpus(req) if g is not None)


def _room(batch: int, need: int, free: int) -> bool:
    """Whether Ollama takes ``batch`` (1,024 or 2,048) for a load it estimates at ``need``
    bytes in ``free`` bytes (sched.go generationBatchFits)."""
    threshold = free * 80 // 100
    return (need <= threshold and need <= free * HEADROOM[batch] // 100
            and SURCHARGE[batch] <= threshold - need)


def _small_cuda(req: EngineRequest) -> bool | None:
    """With flash attention off on a CUDA card, whether one card has 8 GiB or less (None where
    flash attention is not off or no card is NVIDIA's)."""
    cuda = [g for g in rank_gpus(req) if g is not None and g.vendor == "nvidia"]
    if req.settings.flash_attn is not False or not cuda:
        return None
    return any(g.usable_bytes <= 8 * GiB for g in cuda)


def auto_batch(req: EngineRequest, n_ctx: int, load: Load | None = None) -> int:
    """num_batch where it is not set, for ``n_ctx`` tokens of -c (sched.go
    automaticGenerationBatch); ``load``: load_estimate(req), where already read."""
    small = _small_cuda(req)
    if small is not None:
        return BATCH_SMALL if small and n_ctx > 4096 else BATCH
    batch = BATCH_LARGE if n_ctx > 32768 else BATCH_MEDIUM if n_ctx > 4096 else BATCH
    free = free_bytes(req)
    if not free:
        return batch
    need = (load or load_estimate(req)).at(n_ctx)
    while batch > BATCH and not _room(batch, need, free):
        batch = BATCH_MEDIUM if batch > BATCH_MEDIUM else BATCH
    return batch


def runs(req: EngineRequest, per: int, top: int,
         load: Load | None = None) -> list[tuple[int, int, int]]:
    """The runs of ``x`` in 1..top over which Ollama's batch for ``x × per`` tokens of -c is
    one value, as (first, last, batch). That batch is the smaller of a step that rises with
    the context (past 4,096 and 32,768 tokens) and the largest its estimate leaves room for,
    which falls as the estimate grows: the runs start where either changes. ``load``:
    load_estimate(req), where already read."""
    load = load or load_estimate(req)
    starts = {1, 4096 // per + 1, 32768 // per + 1}
    free = free_bytes(req)
    if free and _small_cuda(req) is None:
        for b in (BATCH_LARGE, BATCH_MEDIUM):
            if not _room(b, load.at(per), free):
                continue
            lo, hi = 1, top
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if _room(b, load.at(mid * per), free) else (lo, mid - 1)
            starts.add(lo + 1)
    first = sorted(x for x in starts if 1 <= x <= top)
    return [(a, (first[i + 1] - 1 if i + 1 < len(first) else top),
             auto_batch(req, a * per, load)) for i, a in enumerate(first)]


def one_card(req: EngineRequest) -> bool:
    """Whether Ollama, given several cards, loads the model on one of them: its estimate within
    80% of a card's free memory (sched.go bestSingleGPUFit)."""
    need = estimate_bytes(req, req.context * req.sequences)
    return any(need <= g.usable_bytes * 80 // 100 for g in rank_gpus(req) if g is not None)


def _check(req: EngineRequest) -> None:
    spec, s = req.spec, req.settings
    if req.cache.kv_k.name != req.cache.kv_v.name:
        raise InputError("Ollama sets one type for K and V (OLLAMA_KV_CACHE_TYPE): give --kv, "
                         f"not {req.cache.kv_k.name} keys and {req.cache.kv_v.name} values",
                         field="kv_k")
    if (req.sequences > 1 and spec.model_type.startswith(ONE_AT_A_TIME)
            and not any(g.kind is LayerKind.CROSS for g in spec.groups)):
        # (llama.cpp runs no cross-attention model: its own refusal says so)
        raise InputError(f"Ollama serves {spec.model_type} models one request at a time (it sets "
                         "num_parallel to 1 for their family, whatever OLLAMA_NUM_PARALLEL "
                         "says): plan --seqs 1", field="sequences")
    trained = spec.max_position_embeddings
    if trained and req.context > trained:
        raise InputError(f"Ollama lowers num_ctx to the model's trained context, {trained:,} "
                         f"tokens (the GGUF's context_length): plan at most that, not "
                         f"{req.context:,}", field="context")
    vision = bool(spec.params.encoder and req.cache.encoder)
    least = 2048 if vision else 4
    if req.context < least:
        raise InputError(f"Ollama gives {'a vision model' if vision else 'a model'} at least "
                         f"{least:,} tokens of num_ctx: plan {least:,} or more", field="context")
    if not req.cache.encoder and spec.params.encoder:
        raise InputError("Ollama loads a model's projector with it (its vision tower has no "
                         "switch of its own): leave out no_mmproj", field="no_mmproj")
    if req.parallel.pp > 1 and s.n_gpu_layers != 0 and not s.sched_spread and one_card(req):
        raise InputError("Ollama would load this model on one card: its estimate of the load "
                         "is within 80% of one card's memory: plan it on one card, or give "
                         "sched_spread (OLLAMA_SCHED_SPREAD=1), which spreads it over every "
                         "card", field="gpus")


def _projector_in_host(req: EngineRequest) -> str:
    """Why Ollama keeps the model's projector in host memory (llama-server's
    --no-mmproj-offload), or "": num_gpu below the layers and the output layer, or a card with
    less free memory than the projector and 1 GiB (llm/llama_server.go
    shouldDisableMMProjOffload)."""
    if not (req.spec.params.encoder and req.cache.encoder):
        return ""
    ngl = req.settings.n_gpu_layers
    if ngl is not None and ngl < req.spec.decoder_layers + 1:
        return f"num_gpu {ngl} puts part of the text model in host memory"
    need = encoder_bytes(req) + GiB
    if any(g.usable_bytes < need for g in rank_gpus(req) if g is not None):
        return "a card has less free memory than the projector and 1 GiB"
    return ""


def plan(req: EngineRequest, llama: Callable[[EngineRequest], EngineReport]) -> EngineReport:
    """llama.cpp's plan of the server Ollama starts for ``req`` (``llama``: the llama.cpp
    engine), its max context and sequences at the batch Ollama would choose for each."""
    _check(req)
    s = req.settings
    host_projector = _projector_in_host(req)
    if host_projector:
        # --no-mmproj-offload: the projector stays in host memory, off the card's weights
        req = replace(req, cache=replace(req.cache, encoder=False))
    given = s.n_ubatch
    flash = "auto" if s.flash_attn is None else ("on" if s.flash_attn else "off")
    load = load_estimate(req)

    def batch_for(ctx: int, n: int) -> int:
        return given or auto_batch(req, ctx * n, load)

    reports: dict[int, EngineReport] = {}

    def run(b: int) -> EngineReport:
        if b not in reports:
            reports[b] = llama(replace(req, settings=replace(s, n_ubatch=b)))
        return reports[b]

    batch = batch_for(req.context, req.sequences)
    report = run(batch)
    trained = req.spec.max_position_embeddings
    max_ctx, max_seqs = report.max_context, report.sequences_max
    if given is None and req.gpus:
        # the largest context and sequence count that fit at the batch Ollama takes for each:
        # the smallest batch it may take bounds the search
        low = run(BATCH_SMALL if _small_cuda(req) else BATCH)
        top = min(low.max_context, trained or low.max_context)
        max_ctx = max((min(last, run(b).max_context)
                       for first, last, b in runs(req, req.sequences, top, load)
                       if run(b).max_context >= first), default=0)
        max_seqs = max((min(last, run(b).sequences_max)
                        for first, last, b in runs(req, req.context, low.sequences_max, load)
                        if run(b).sequences_max >= first), default=0)
    elif trained:
        max_ctx = min(max_ctx, trained)
    n_ctx = req.context * req.sequences
    env = [f"OLLAMA_CONTEXT_LENGTH={req.context}"]
    if req.sequences > 1:
        env.append(f"OLLAMA_NUM_PARALLEL={req.sequences}")
    if req.cache.kv_k.name != "f16":
        env.append(f"OLLAMA_KV_CACHE_TYPE={req.cache.kv_k.name}")
    if s.flash_attn is not None:
        env.append(f"OLLAMA_FLASH_ATTENTION={int(s.flash_attn)}")
    if s.sched_spread and req.parallel.pp > 1:
        env.append("OLLAMA_SCHED_SPREAD=1")
    if s.fit_margin_bytes is not None:
        env.append(f"LLAMA_ARG_FIT_TARGET={-(-s.fit_margin_bytes // MiB)}")
    if s.n_cpu_moe is not None:
        env.append("LLAMA_ARG_CPU_MOE=1" if s.n_cpu_moe >= CPU_MOE
                   else f"LLAMA_ARG_N_CPU_MOE={s.n_cpu_moe}")
    if s.cache_ram_mib is not None:
        env.append(f"LLAMA_ARG_CACHE_RAM={s.cache_ram_mib}")
    if s.ctx_checkpoints is not None:
        env.append(f"LLAMA_ARG_CTX_CHECKPOINTS={s.ctx_checkpoints}")
    if s.swa_full:
        env.append("LLAMA_ARG_SWA_FULL=1")
    if s.kv_unified:
        env.append("LLAMA_ARG_KV_UNIFIED=1")
    if s.tensor_split is not None:
        env.append("LLAMA_ARG_TENSOR_SPLIT=" + ",".join(f"{x:g}" for x in s.tensor_split))
    params = [f"num_batch {given}"] if given else []
    if s.n_gpu_layers is not None:
        params.append(f"num_gpu {s.n_gpu_layers}")
    if req.cache.mtp:
        # a GGUF with MTP layers drafts with them where draft_num_predict is set (the
        # default, 4, is dropped unless the Modelfile or the request names it: routes.go)
        params.append(f"draft_num_predict {DRAFT_TOKENS}")
    server = (f"llama-server -c {n_ctx} -np {req.sequences}"
              + (f" --cache-type-k {req.cache.kv_k.name} --cache-type-v {req.cache.kv_v.name}"
                 if req.cache.kv_k.name != "f16" else "")
              + f" --flash-attn {flash} -b {batch} -ub {batch}"
              + (f" --spec-type draft-mtp --spec-draft-n-max {DRAFT_TOKENS}"
                 " --spec-draft-backend-sampling" if req.cache.mtp else "")
              + "".join(f" --lora {shlex.quote(a.name)}" for a in s.lora_adapters)
              + (f" -ngl {s.n_gpu_layers}" if s.n_gpu_layers is not None else ""))
    how = ("num_batch as set" if given else
           f"Ollama's num_batch for {n_ctx:,} tokens of context"
           + (" with flash attention off" if s.flash_attn is False else ""))
    notes = [f"Ollama starts {server} ({how}), its --fit placing the layers"
             + ("" if s.n_gpu_layers is None else " as num_gpu sets them")]
    notes.append("Ollama passes its environment to llama-server: the server's settings "
                 "it has no name for are LLAMA_ARG_* variables set before ollama serve "
                 "(--cache-ram as LLAMA_ARG_CACHE_RAM, --ctx-checkpoints as "
                 "LLAMA_ARG_CTX_CHECKPOINTS, --n-cpu-moe as LLAMA_ARG_N_CPU_MOE, --fit-target "
                 "as LLAMA_ARG_FIT_TARGET, -ts as LLAMA_ARG_TENSOR_SPLIT)")
    if params:
        notes.append("set " + " and ".join(params) + " in the Modelfile (PARAMETER "
                     + params[0] + ") or the request's options")
    if s.lora_adapters:
        # llm/llama_server.go: each of the model's adapters as llama-server's --lora
        notes.append("the adapters are the Modelfile's ADAPTER lines ("
                     + ", ".join(f"ADAPTER {a.name}" for a in s.lora_adapters)
                     + "), which Ollama passes as --lora")
    if req.gpus:
        total = cards_memory(rank_gpus(req))
        auto = auto_context(req.spec, rank_gpus(req))
        notes.append(f"{auto:,} tokens is Ollama's num_ctx with {total / GiB:,.1f} GiB of cards "
                     "where OLLAMA_CONTEXT_LENGTH and the request's num_ctx are not set"
                     + (" (the model's trained context)" if auto == trained else "")
                     + ("" if auto == req.context else
                        f"; OLLAMA_CONTEXT_LENGTH={req.context} sets this plan's"))
    if host_projector:
        notes.append(f"Ollama keeps the projector in host memory (--no-mmproj-offload): "
                     f"{host_projector}; its weights are not on the card")
    lines = [line.replace("; --no-mmproj serves text only", "") for line in report.notes
             if not line.startswith("--no-mmap keeps")]
    if len(lines) < len(report.notes):
        # Ollama maps the weights (llama-server's default) unless use_mmap is false or it
        # turns mmap off itself (sched.go disableMmapDefaultReason: on Windows with CUDA, and
        # for a partial offload on a Mac)
        lines.append("the prefill rate takes the host-held weights in pinned memory: on Linux "
                     "set use_mmap false (PARAMETER use_mmap false) so that Ollama loads them "
                     "so (--load-mode none; Ollama does on Windows with CUDA); mapped weights "
                     "cross to the card at a fraction of the link's rate")
    return replace(
        report, engine=NAME, max_context=max_ctx, max_sequences=max_seqs,
        max_concurrency=float(max_seqs),
        command=" ".join(env) + " ollama serve",
        notes=(*notes, *lines),
        extra={**report.extra, "ollama": {"num_ctx": req.context,
                                          "num_parallel": req.sequences,
                                          "num_batch": batch, "flash_attention": flash,
                                          "llama_server": server}})
