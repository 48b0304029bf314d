"""One question, every face: the CLI and the API both build a ``Query`` and call ``answer``.

A query is a plan (model, context, sequences, formats, weights) on one or more cards under an
engine's rules, or one of the inverse questions: the smallest catalog GPU that fits
(``find_gpu``), the best KV format that fits (``find_format``), the largest weights that fit
(``find_weights``), or what an engine would report
for a KV budget it printed (``kv_budget``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from .engines import (
    ENGINE_TITLES,
    GGML_ENGINES,
    EngineReport,
    EngineRequest,
    EngineSettings,
    UnsupportedFormat,
    engine_plan,
    platform_refusal,
    sglang_attn_dp,
    stage_split,
    trtllm,
)
from .engines import canonical as canonical_engine
from .engines.base import SETTING_NAMES, RankShare
from .errors import InputError, KvplanError
from .formats import FORMATS, KVFormat, get_format, measured_error, quality_note
from .gguf_mix import MIXES, PERPLEXITY
from .gpus import GPU, gpu_selection, maker, memory_variants, segment_of, with_limit
from .kv import (
    FP8_DS_MLA_ROW,
    FP8_DS_MLA_WIDTH,
    CacheOptions,
    bytes_per_token,
    ds_mla_rows,
    kept_format,
    kept_layers,
)
from .model import LayerKind, ModelSpec
from .parallel import Parallel, rank_spec
from .plan import PlanRequest, attention_flops, plan, prefill_attention_flops
from .report import engine_to_dict, model_summary, plan_to_dict, prefill_to_dict
from .units import format_bytes
from .weights import WEIGHT_FORMATS, WeightFormat, Weights

if TYPE_CHECKING:
    from .catalog import CatalogEntry

__all__ = ["Query", "answer", "find_draft", "find_format", "find_gpu_for", "find_model",
           "find_weights", "to_fit"]

#: card counts tried by find_gpu
GPU_COUNTS = (1, 2, 4, 8)

#: the EngineSettings each engine reads; a setting given for an engine that does not read it is
#: an error, not something to drop without a word
ENGINE_SETTINGS = {
    "raw": (),
    "vllm": ("gpu_memory_utilization", "block_size", "max_num_batched_tokens", "max_num_seqs",
             "speculative_tokens", "draft_kv", "offload_bytes", "prefix_caching",
             "cpu_offload_bytes",
             "enforce_eager", "language_model_only", "lora", "extensible_kv_cache",
             "extensible_kv_cache_asked",
             "host_link_bytes_per_s", "kv_cache_dtype_skip_layers", "attention_backend"),
    # llama.cpp keeps no KV tier beyond the device
    "llama.cpp": ("n_ubatch", "swa_full", "kv_unified", "flash_attn", "fit_margin_bytes",
                  "n_gpu_layers", "n_cpu_moe", "host_bandwidth_bytes_per_s", "host_memory_bytes",
                  "host_link_bytes_per_s", "tensor_split", "override_tensor", "cache_ram_mib",
                  "ctx_checkpoints", "lora_adapters", "draft_kv", "speculative_tokens"),
    # Ollama: num_batch, OLLAMA_FLASH_ATTENTION, num_gpu, the Modelfile's ADAPTER (--lora), and
    # the LLAMA_ARG_* variables its llama-server inherits for --fit-target, --n-cpu-moe,
    # --cache-ram, --ctx-checkpoints, --swa-full, --kv-unified and -ts (engines/ollama.py)
    "ollama": ("n_ubatch", "flash_attn", "fit_margin_bytes", "n_gpu_layers", "n_cpu_moe",
               "sched_spread",
               "host_bandwidth_bytes_per_s", "host_memory_bytes", "host_link_bytes_per_s",
               "cache_ram_mib", "ctx_checkpoints", "lora_adapters", "swa_full", "kv_unified",
               "tensor_split"),
    "sglang": ("mem_fraction_static", "page_size", "chunked_prefill_size", "max_total_tokens",
               "offload_bytes", "cpu_offload_bytes", "host_link_bytes_per_s", "lora",
               "cuda_graph_max_bs_decode", "cuda_graph_max_bs_prefill", "decode_cuda_graph",
               "prefill_cuda_graph", "dp_lm_head", "moe_a2a_backend", "swa_full_tokens_ratio",
               "mamba_full_memory_ratio", "max_mamba_cache_size", "radix_cache",
               "prefill_kv_cache_dequant_dtype", "attention_backend", "draft_kv"),
    "trtllm": ("free_gpu_memory_fraction", "tokens_per_block", "offload_bytes", "max_num_tokens",
               "max_total_tokens"),
}


#: settings an engine reads only with --mtp: SGLang's --speculative-num-draft-tokens for the
#: model's own MTP head (engines/sglang_mtp.py)
MTP_SETTINGS = {"sglang": ("speculative_tokens",)}


def check_settings(engine: str, settings: EngineSettings, *, mtp: bool = False) -> None:
    """Raise for a setting (not at its default) that ``engine`` does not read (with ``mtp``,
    also the MTP_SETTINGS it reads then)."""
    default = EngineSettings()
    reads = ENGINE_SETTINGS[engine] + (MTP_SETTINGS.get(engine, ()) if mtp else ())
    for f in fields(settings):
        if getattr(settings, f.name) == getattr(default, f.name):
            continue
        if f.name not in reads and f.name in MTP_SETTINGS.get(engine, ()):
            name = SETTING_NAMES.get(f.name, f.name)
            raise InputError(f"{name} is {ENGINE_TITLES[engine]}'s draft tokens with --mtp or "
                             f"--draft: give one of them or leave out {name}", field=name)
        if f.name not in reads:
            owners = [e for e, names in ENGINE_SETTINGS.items() if f.name in names]
            name = SETTING_NAMES.get(f.name, f.name)
            spelled = [ENGINE_TITLES[e] for e in owners]
            who = spelled[0] if len(spelled) == 1 else (", ".join(spelled[:-1]) + " and "
                                                         + spelled[-1])
            raise InputError(f"{name} is a setting of {who}, not of {ENGINE_TITLES[engine]}: "
                             f"choose {'that engine' if len(owners) == 1 else 'one of them'} "
                             f"(--engine {owners[0]}) or leave out {name}",
                             field=name)


@dataclass(frozen=True)
class Query(EngineRequest):
    """A plan request for one engine (an ``EngineRequest`` that also names the engine)."""

    engine: str = "raw"
    overhead_bytes: int | None = None
    #: the context is the engine's own where none was asked (Ollama's num_ctx by the cards'
    #: memory): --find-gpu takes each card's
    auto_context: bool = False
    #: speculative decoding with a draft model: the chance each draft token is accepted, for
    #: the decode estimate of its rounds (draft.speculative_decode); None: no such estimate
    acceptance: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "engine", canonical_engine(self.engine))
        check_settings(self.engine, self.settings, mtp=self.cache.mtp)
        if self.engine in ("vllm", "sglang", "trtllm") and not self.cache.indexer_fp8:
            # their DeepSeek Sparse Attention indexers keep fp8 keys whatever the format
            object.__setattr__(self, "cache", replace(
                self.cache, indexer_fp8=True, fp8_ds_mla=self.engine != "trtllm"))
        if (self.engine == "trtllm" and self.spec.dtype == "float32"
                and not self.cache.wide_16):
            # its dtype auto holds a float32 checkpoint's cache in float32 (engines/trtllm.py)
            object.__setattr__(self, "cache", replace(self.cache, wide_16=True))
        if self.engine == "vllm" and self.cache.vllm_skip is None:
            # the layers vLLM keeps at the model's dtype are priced so in every cache figure
            # (kv.kept_layers), whichever format a row tries
            from .engines import vllm_skip
            object.__setattr__(self, "cache", replace(
                self.cache, vllm_skip=vllm_skip.parse(self.settings.kv_cache_dtype_skip_layers)))
        if self.parallel.attn_dp > 1 and self.engine not in ("sglang", "trtllm"):
            raise InputError(f"attn_dp is SGLang's attention data parallelism (--attn-dp-size) "
                             "or TensorRT-LLM's (enable_attention_dp), not "
                             f"{ENGINE_TITLES[self.engine]}'s: plan it with --engine sglang or "
                             "trtllm, or leave out attn_dp", field="attn_dp")
        if (self.engine in GGML_ENGINES and self.spec.draft is not None
                and self.cache.draft_format is None):
            # llama.cpp's draft context keeps its cache in -ctkd/-ctvd (f16 unless given)
            from .engines.llamacpp import draft_cache_format

            object.__setattr__(self, "cache", replace(
                self.cache, draft_format=draft_cache_format(self.settings)))
        elif (self.engine in ("vllm", "sglang") and self.spec.draft is not None
                and self.settings.draft_kv and self.cache.draft_format is None):
            # the draft's own KV dtype (vLLM's speculative kv_cache_dtype, SGLang's
            # --speculative-draft-kv-cache-dtype) prices its rows in the plan's table
            from .formats import get_format

            object.__setattr__(self, "cache", replace(
                self.cache, draft_format=get_format(self.settings.draft_kv, field="draft_kv")))
        if self.acceptance is not None:
            if self.spec.draft is None:
                raise InputError("acceptance is a draft model's: give the draft model too "
                                 "(--draft)", field="acceptance")
            if not 0 <= self.acceptance <= 1 or self.acceptance != self.acceptance:
                raise InputError(f"acceptance must be a chance from 0 to 1 (0.7), got "
                                 f"{self.acceptance!r}", field="acceptance")
        if self.spec.draft is not None:
            refuse_draft_engine(self.engine)
        from .draft import refuse_head_target
        refuse_head_target(self.spec)
        if self.spec.draft is not None and self.parallel.pp > 1:
            raise InputError("a draft model under pipeline parallelism is not planned (vLLM and "
                             "SGLang run it on the last stage only, llama.cpp over every "
                             "device): plan it with pp 1", field="draft")
        n = len(self.gpus)
        if n > 1 and n != self.parallel.ranks_per_replica:
            raise InputError(f"{n} GPUs given but tp × pp is {self.parallel.ranks_per_replica}; "
                             "give one GPU per rank or set --tp/--pp", field="gpus")

    @property
    def multi(self) -> bool:
        return self.parallel.gpus > 1

    def engine_request(self) -> EngineRequest:
        return self


#: a KV budget large enough for any plan: lets an engine check a query that names no card
_ANY_BUDGET_BYTES = 1 << 50


def check_engine(q: Query) -> None:
    """Raise the engine's error for what no card changes (a KV format it lacks, a model it
    cannot run, weights it cannot load, a layout it refuses) for a query that names no card."""
    if q.engine != "raw":
        engine_plan(q.engine, replace(q, gpus=(), kv_budget_bytes=_ANY_BUDGET_BYTES))


def answer(q: Query) -> dict[str, Any]:
    """The plan as one JSON-able dict (what ``kvplan --json`` prints)."""
    if not q.gpus and q.kv_budget_bytes is None:
        check_engine(q)
    single = q.gpus[0] if q.gpus else None
    spec = cached_spec(q)
    base = plan(PlanRequest(spec=spec, context=q.context, sequences=q.sequences, cache=q.cache,
                            weights=q.weights,
                            gpu=single if not q.multi and q.kv_budget_bytes is None else None,
                            overhead_bytes=q.overhead_bytes))
    out = plan_to_dict(base)
    if spec is not q.spec:
        out["model"] = model_summary(q.spec)
    reads = read_spec(q, spec)
    if reads is not spec and base.request.gpu is not None:
        # the engine's decode and prefill attend over what its kernels read
        seen = plan_to_dict(plan(replace(base.request, spec=reads)))
        out["decode"], out["prefill"] = seen.get("decode"), seen.get("prefill")
    out["engine"] = q.engine
    out["parallel"] = {"tp": q.parallel.tp, "pp": q.parallel.pp, "dp": q.parallel.dp,
                       "attn_dp": q.parallel.attn_dp, "gpus": q.parallel.gpus}
    if q.gpus and (q.multi or q.engine != "raw") or q.kv_budget_bytes is not None:
        report = engine_plan(q.engine, q.engine_request())
        out["engine_report"] = engine_to_dict(report)
        if out.get("binding") is not None and (report.fits != out["fits"]
                                               or "cpu_offload" in report.extra):
            # the engine's verdict differs, or its weights on the card do (--cpu-offload-gb)
            out["binding"], out["binding_reason"] = engine_binding(report, out)
        out["fits"] = report.fits
        placed = report.extra.get("placement")
        if placed is not None and not placed["host_held"]:
            # -ts alone: every layer on the cards, split as given
            placed = None
        if placed is not None:
            # part of the model in host memory (llama.cpp's -ngl, --n-cpu-moe): the placement's
            # own estimates (no prefill where whole blocks stay in host memory)
            out["decode"] = placed["decode"]
            if placed["prefill"] is not None:
                out["prefill"] = placed["prefill"]
            else:
                out.pop("prefill", None)
            cap = q.settings.host_memory_bytes
            if not report.fits and cap is not None and placed.get("host_bytes", 0) > cap:
                from .units import format_bytes
                out["binding"], out["binding_reason"] = "host", (
                    f"what llama.cpp keeps in host memory ({format_bytes(placed['host_bytes'], 2)}"
                    f") exceeds the {format_bytes(cap, 2)} given")
        out["max_context"] = report.max_context
        out["max_sequences"] = report.sequences_max
        if q.gpus:
            out["gpus"] = [g.id for g in q.gpus]
            out["gpu_names"] = [g.name for g in q.gpus]
            if q.multi and placed is None:
                out["decode"], out["prefill"] = parallel_estimates(q)
        adapters = _lora_reads(q, report.extra)
        if adapters is not None and out.get("decode"):
            out["decode"] = with_lora_decode(out["decode"], *adapters)
        moved = report.extra.get("cpu_offload")
        if moved is not None and moved["stages"] and out.get("decode"):
            # vLLM's and SGLang's --cpu-offload-gb: the moved weights cross the host link
            from .engines.vllm_offload import with_offload_decode, with_offload_prefill
            out["decode"] = with_offload_decode(out["decode"], moved,
                                                out["decode"].get("expert_share"))
            if out.get("prefill"):
                out["prefill"] = with_offload_prefill(out["prefill"], moved)
    spec_decode = speculative_estimate(q, out)
    if spec_decode is not None:
        out["decode"] = {**out["decode"], "speculative": spec_decode}
    out["notes"] = context_notes(q, out.get("max_context")) + copies_notes(q)
    return out


def draft_tokens(q: Query) -> int:
    """The draft tokens a round of speculative decoding proposes: --speculative-tokens where
    given (SGLang's counts the verified token too: its draft steps are one fewer), else 3
    (llama.cpp's --spec-draft-n-max, SGLang's 3 steps)."""
    from .draft import DRAFT_TOKENS

    n = q.settings.speculative_tokens
    if q.engine == "sglang" and n:
        return n - 1
    return n or DRAFT_TOKENS


def speculative_estimate(q: Query, out: dict[str, Any]) -> dict[str, Any] | None:
    """The decode estimate of speculative decoding with the plan's draft model at
    ``q.acceptance`` on its one card (draft.speculative_decode); None without an acceptance, a
    card, or where the plan's decode is not one card's at its bandwidth (several cards, layers
    in host memory)."""
    from .draft import speculative_decode

    if q.acceptance is None or not q.gpus or q.multi or not out.get("decode"):
        return None
    if out["decode"].get("host_bytes_per_step") is not None or out["decode"].get(
            "offload_bytes_per_step") is not None:
        return None
    return speculative_decode(q.spec, q.cache, q.context, q.sequences, q.weights, q.gpus[0],
                              q.acceptance, draft_tokens(q))


def copies_notes(q: Query) -> list[str]:
    """Where tensor parallelism keeps more than one copy of the cache: KV heads fewer than the
    cards of an attention group are replicated (each head on tp / heads cards), and a
    replicated kind (the MLA latent, the indexer keys) sits whole on every card; the plan's
    table holds one copy, each card's share is the engine's table."""
    tp = q.parallel.attn_tp
    if tp <= 1 or q.engine in GGML_ENGINES:
        return []
    out = []
    heads = sorted({g.n_kv_heads for g in q.spec.groups
                    if g.kind.is_attention and not g.kind.is_replicated and g.n_kv_heads})
    few = [h for h in heads if h < tp]
    if few:
        each = "; ".join(f"{h} KV heads: each head's K and V on {tp // h} cards" for h in few)
        out.append(f"tensor parallel over {tp} cards splits no KV head ({each}): the cards "
                   "hold that many copies (the table above counts one; each card's share is "
                   "in the engine's table)")
    names = {"mla": "MLA latent", "indexer": "indexer keys", "compressed": "compressed latent",
             "index": "index keys"}
    whole = sorted({names.get(g.kind.value, g.kind.value) for g in q.spec.groups
                    if g.kind.is_replicated and g.kind.is_attention})
    if whole:
        out.append(f"tensor parallel keeps the {' and the '.join(whole)} whole on each of the "
                   f"{tp} cards: {tp} copies (the table above counts one; each card's share "
                   "is in the engine's table)")
    return out


def engine_binding(report: EngineReport, raw: dict[str, Any]) -> tuple[str, str]:
    """(binding, reason) of a plan whose engine's verdict is not the raw one: what the raw
    plan named no longer says why (a plan that "uses 23.1 of 24.0 GiB" and does not fit
    under vLLM is bound by vLLM's budget, not by the largest share of the card)."""
    from .units import format_bytes

    if report.fits:
        terms = {"weights": raw["weights_bytes"], "kv": raw["kv_bytes"],
                 "state": raw["state_bytes"], "overhead": raw["overhead_bytes"]}
        binding = max(terms, key=terms.__getitem__)
        return binding, f"{binding} is the largest share of the card"
    if report.refusal:
        return ("weights" if report.kv_pool_bytes <= 0 else "kv",
                f"{report.engine} refuses to start: {report.refusal}")
    if report.kv_pool_bytes <= 0:
        return "weights", (f"the weights and {report.engine}'s own reservations leave no "
                           "memory for the KV cache")
    return "kv", (f"the KV cache for this context and sequence count exceeds the "
                  f"{format_bytes(report.kv_pool_bytes, 2)} pool {report.engine} leaves")


def _lora_reads(q: Query, extra: dict[str, Any]) -> tuple[list[tuple[int, int, float]], int,
                                                          int | None] | None:
    """What a decode step reads of LoRA adapters, per pipeline stage (bytes a rank, of those
    the routed experts', the rank's bandwidth), with the adapters read and the slots: vLLM's
    and SGLang's slots (--max-loras), of which a step reads those its sequences use (taken as
    one each, up to the slots); llama.cpp's --lora adapters (no slots: None), every one
    applied to every token. None without adapters or a card's bandwidth."""
    if not q.gpus or any(not g.bandwidth_bytes_per_s for g in q.gpus):
        return None
    if "lora" in extra:
        lora = extra["lora"]
        stages = lora.get("bytes_per_stage") or [lora["bytes_per_card"]]
        experts = lora.get("expert_bytes_per_stage") or [0] * len(stages)
        slots = lora["max_loras"]
        used = min(q.sequences, slots)
    elif "lora_adapters" in extra:
        # each card holds its blocks' pairs (what stays in host memory is read there)
        stages, slots = list(extra["lora_adapters"]["card_bytes"]), None
        experts, used = [0] * len(stages), 1
    else:
        return None
    tp = q.parallel.tp if "lora" in extra else 1
    reads = []
    for s, held in enumerate(stages):
        gpu = q.gpus[min(len(q.gpus) - 1, s * tp)]
        reads.append((held * used // (slots or 1), experts[s] * used // (slots or 1),
                      float(gpu.bandwidth_bytes_per_s or 0)))
    return reads, used, slots


def with_lora_decode(decode: dict[str, Any], reads: list[tuple[int, int, float]], used: int,
                     slots: int | None) -> dict[str, Any]:
    """A decode estimate whose step also reads the LoRA adapters its sequences use, on each
    stage's cards at their bandwidth (the stages in turn); of a mixture of experts' adapter,
    the share of the routed experts the step's tokens reach (the decode's expert_share)."""
    share = decode.get("expert_share")
    share = 1.0 if share is None else share
    stage_reads = [(int(b - e + e * share), bw) for b, e, bw in reads]
    read = sum(b for b, _ in stage_reads)
    if not read:
        return decode
    extra_s = sum(b / bw for b, bw in stage_reads)
    out = dict(decode)
    memory = decode["bandwidth_seconds_per_step"] + extra_s
    compute = decode.get("compute_seconds_per_step") or 0.0
    # what the step spends beside the cards' reads and math (the host's part of a placement
    # that keeps layers in host memory) stays as it was
    rest = max(0.0, decode["seconds_per_step"]
               - max(decode["bandwidth_seconds_per_step"], compute))
    card = max(memory, compute)
    seconds = card + rest
    sequences = decode["tokens_per_s_total"] / decode["tokens_per_s_per_sequence"]
    total = decode["bytes_per_step"] + read
    out.update(bytes_per_step=total, seconds_per_step=seconds,
               tokens_per_s_per_sequence=1 / seconds, tokens_per_s_total=sequences / seconds,
               bandwidth_seconds_per_step=memory,
               kv_share=decode["kv_share"] * decode["bytes_per_step"] / total,
               lora_bytes_per_step=read, lora_adapters_read=used, lora_slots=slots,
               bound=(decode["bound"] if rest > card
                      else "bandwidth" if memory >= compute else "compute"))
    return out


def context_notes(q: Query, max_context: int | None) -> list[str]:
    """What the plan's context says against the positions the model was trained for, and
    what the model's weights need said (kvcore.quant.quant_notes)."""
    # what the config itself leaves open (a geometry taken from defaults, a tower not counted)
    weights = [*q.spec.notes, *q.spec.weight_notes]
    if q.cache.kv_k.name.startswith("fp8"):
        # the plan already keeps the cache the checkpoint was calibrated for
        weights = [n for n in weights if "FP8 KV cache" not in n]
    given = next((g for g in q.gpus if g.limit_bytes is not None), None)
    unified = next((g for g in q.gpus if g.unified and g.usable_fraction < 1), None)
    if given is not None:
        weights.append(f"{given.chip}: planned with {format_bytes(given.usable_bytes, 2)} of "
                       f"its {format_bytes(given.total_bytes, 2)} for the GPU, as given "
                       "(gpu_limit)")
    elif unified is not None and unified.vendor == "apple":
        weights.append(f"{unified.chip}: the GPU may use "
                       f"{unified.usable_fraction:.0%} of unified memory, macOS's default limit "
                       "on large-memory Macs (two thirds to 78% on smaller ones, by macOS "
                       "version); llama.cpp prints the Mac's own at start-up "
                       "(recommendedMaxWorkingSetSize = N MB), which --gpu-limit NMB plans "
                       "with, and `sudo sysctl iogpu.wired_limit_mb=N` raises it")
    elif unified is not None:
        weights.append(f"{unified.chip}: planned with {unified.usable_fraction:.0%} of its "
                       f"memory for the GPU ({format_bytes(unified.usable_bytes, 2)}): "
                       + (unified.usable_note or "its default share"))
    whole = next((g for g in q.gpus if g.unified and g.usable_fraction >= 1
                  and g.limit_bytes is None), None)
    if given is None and whole is not None:
        # DGX Spark, Jetson: the GPU may use all of it, and so may everything else
        seen = (" (a headless DGX Spark shows 101–102 GiB of it free at boot)"
                if whole.id == "dgx-spark" else "")
        weights.append(f"{whole.chip}: planned with all "
                       f"{format_bytes(whole.total_bytes, 2)}"
                       + (" CUDA reports" if whole.driver_total_bytes else "")
                       + ", which the system and every other process share: what is free when "
                       f"the engine starts is what it gets{seen}; --gpu-limit plans the memory "
                       "you see free")
    limit = q.spec.max_position_embeddings
    if not limit:
        return weights
    if q.context > limit:
        return [f"{q.context:,} tokens is past the {limit:,} positions the model was trained "
                "for", *weights]
    if max_context and max_context > limit:
        return [f"the model was trained for {limit:,} positions", *weights]
    return weights


def parallel_estimates(q: Query) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(decode, prefill) of a plan over several cards, from each pipeline stage's share of
    the weights (parallel_decode, parallel_prefill); None where a card's bandwidth is
    unknown, and no prefill where a card's matrix peak is."""
    from .engines.base import rank_weights

    spec = read_spec(q)
    if spec is not q.spec:
        q = replace(q, spec=spec)
    split = stage_split(q.engine)
    weights, parts = rank_weights(q, split, expert_ranks=expert_ranks(q))
    attention = None
    if q.parallel.attn_dp > 1 and q.engine == "trtllm":
        # TensorRT-LLM's attention DP: each rank holds and reads its attention, dense MLP and
        # shared experts whole (trtllm.whole_modules), the lm_head too
        parts = trtllm.adp_shares(q, weights, parts)
        attention = [trtllm.whole_weights(q) for _ in parts]
    elif q.parallel.attn_dp > 1:
        # SGLang's attention DP: each card holds its attention group's share and reads its
        # attention projections split over the group only (sglang_attn_dp)
        parts = sglang_attn_dp.shares(q, weights, parts, split)
        attention = [sglang_attn_dp.stage_attention(q, split, sh.stage) for sh in parts]
    if not parts or any(sh.gpu is None or not sh.gpu.bandwidth_bytes_per_s for sh in parts):
        return None, None
    stages = [_Stage(sh, len(split(q.spec.decoder_layers, q.parallel.pp, sh.stage)),
                     sh.stage == q.parallel.pp - 1) for sh in parts]
    peaks = all(st.share.gpu.matmul_flops_per_s for st in stages)  # type: ignore[union-attr]
    return (parallel_decode(q, weights, stages, peaks, attention),
            parallel_prefill(q, stages, attention) if peaks and q.context else None)


@dataclass(frozen=True)
class _Stage:
    """One pipeline stage of a plan over several cards: a rank's share, the stage's decoder
    layers, and whether it is the last (which holds the lm_head)."""

    share: RankShare
    layers: int
    last: bool

    @property
    def gpu(self) -> GPU:
        return self.share.gpu  # type: ignore[return-value]


def cached_spec(q: Query) -> ModelSpec:
    """The model as the plan's engine caches it (its sliding-window and chunked layers made
    full-length where the engine keeps every token in them: engines/llamacpp.without_windows):
    llama.cpp (and Ollama's llama-server) for an architecture it runs without the window and,
    with --swa-full, for every model; SGLang for every model it gives no sliding-window pool
    (sglang.HYBRID_SWA_TYPES: one pool in which every layer holds every token); TensorRT-LLM,
    whose pool prices every attention layer for every token; the model itself elsewhere
    (vLLM, raw). Compressed-attention models keep their own layout."""
    from .engines.llamacpp import without_windows
    from .engines.sglang import HYBRID_SWA_TYPES

    if q.engine in GGML_ENGINES:
        return without_windows(q.spec, swa_full=q.settings.swa_full)
    if any(g.kind is LayerKind.COMPRESSED for g in q.spec.groups):
        return q.spec
    if q.engine == "trtllm" or (q.engine == "sglang"
                                and q.spec.model_type not in HYBRID_SWA_TYPES):
        return without_windows(q.spec, swa_full=True)
    return q.spec


def read_spec(q: Query, held: ModelSpec | None = None) -> ModelSpec:
    """The model as the plan's engine reads it in a decode step: what it caches under
    llama.cpp and Ollama (an architecture run without its window attends over every token;
    --swa-full's masked cells are read too); under SGLang the architectures whose model class
    passes it no window (NO_WINDOW_TYPES: its llama.py, qwen2.py, mixtral.py, phi-3 and
    StarCoder2 attend over every token); the window elsewhere (SGLang's Gemma 2/3, EXAONE 4 and
    OLMo 3 pass sliding_window_size to their attention, whose kernels skip what it masks;
    TensorRT-LLM's window is taken so too). ``held``: cached_spec's answer where the caller
    has it (returned as it is where the reads are the same)."""
    from .engines.llamacpp import NO_WINDOW_TYPES

    held = held if held is not None else cached_spec(q)
    if q.engine in GGML_ENGINES:
        return held
    if q.engine == "sglang" and q.spec.model_type in NO_WINDOW_TYPES:
        # every sliding-window layer whole, as the pool holds it
        return held
    return q.spec


def card_cache(q: Query, stage: int) -> tuple[ModelSpec, int]:
    """What one card of pipeline stage ``stage`` caches, and for how many sequences: its
    share of the heads for all the sequences, or under SGLang's attention DP its attention
    group's share of them for the group's share of the sequences."""
    p = q.parallel
    group = replace(p, tp=p.attn_tp, attn_dp=1)
    return (rank_spec(cached_spec(q), group, stage, stage_split(q.engine)),
            sglang_attn_dp.per_group(q))


def _matmul_params(q: Query) -> tuple[int, int]:
    """(the decoder's active parameters, the lm_head's): 2 FLOPs each a token."""
    head = q.spec.vocab_size * q.spec.hidden_size
    return max(0, q.spec.params.active - head), head


def expert_ranks(q: Query) -> int:
    """The data-parallel ranks a MoE model's routed experts are split over besides tensor
    parallelism: vLLM's FusedMoE flattens its TP group across DP (base.shares); 1 elsewhere
    (the other engines' DP ranks are replicas)."""
    return q.parallel.dp if q.engine == "vllm" else 1


def parallel_decode(q: Query, weights: Weights, stages: list[_Stage], peaks: bool,
                    attention: list[tuple[int, int]] | None = None) -> dict[str, Any]:
    """The decode estimate of a plan over several cards, at full context: a step reads, on
    each card of each pipeline stage, its share of the active weights (of a mixture of
    experts, those the step's tokens route to) and of the cache, or computes its share of the
    step's FLOPs at the card's matrix peak (where all ``peaks`` are known) where that takes
    longer; the ranks of a stage work side by side, the stages one after another (no overlap
    of stages, and the interconnect is not counted). ``attention``: each stage's attention
    projections (parameters, bytes) under SGLang's attention DP, whose cards read them split
    over the attention group only and hold the cache of that group's sequences (their FLOPs
    a card are tensor parallelism's: 1/attn_dp of the tokens over 1/attn_tp of the heads)."""
    # read every step: the layers' active weights (of a mixture of experts, those any of the
    # step's tokens routes to), and the lm_head on the last stage (the input embedding only a
    # row a token)
    head = weights.head_bytes
    body = max(0, weights.step_bytes(q.sequences) - head)
    n, p = q.spec.decoder_layers, q.parallel
    # vLLM's DP ranks step together through the MoE layers, each computing its share of the
    # experts for every rank's tokens: a card reads its 1/(tp × dp) of the experts those
    # tokens route to, and the rest of the active weights as an engine of its own does
    ranks = expert_ranks(q) if weights.expert_bytes else 1
    routed = 0
    if ranks > 1:
        dense = weights.active_bytes - weights.active_expert_bytes
        routed = weights.step_bytes(q.sequences * ranks) - dense
        body = max(0, dense - head)
    body_params, head_params = _matmul_params(q)
    seconds = memory = compute = 0.0
    step = kv = flops = 0
    sparse = False
    # the sequences a card's cache holds: its attention group's share
    held = sglang_attn_dp.per_group(q)
    # the cards the lm_head is split over: under attention DP a tied one is the embedding,
    # split over the attention group, and --enable-dp-lm-head splits an untied one so too
    head_cards = p.tp
    if p.attn_dp > 1 and q.engine == "trtllm":
        # TensorRT-LLM's LMHead drops its split under attention DP
        head_cards = 1
    elif p.attn_dp > 1:
        tied = not sglang_attn_dp.head_apart(weights, p)
        if q.settings.dp_lm_head or tied:
            head_cards = p.attn_tp
        if tied and q.spec.architecture in sglang_attn_dp.EMBEDDING_WHOLE:
            # a tied lm_head is the embedding, which these hold whole
            head_cards = 1
    for st, (_, attn_bytes) in zip(stages, attention or [(0, 0)] * len(stages), strict=True):
        size = st.share.cache(q.context, held, q.cache)
        cache_read = size.read_bytes + 2 * size.state_bytes
        sparse = sparse or size.read_bytes < size.kv_bytes
        apart = head_cards != p.tp
        card = ((body * st.layers // n + (head if st.last and not apart else 0)) // p.tp
                + (head // head_cards if st.last and apart else 0)
                + routed * st.layers // n // (p.tp * ranks) + cache_read
                + attn_bytes // p.attn_tp - attn_bytes // p.tp)
        card_flops = (2 * q.sequences * (body_params * st.layers // n
                                         + (head_params if st.last else 0))
                      // p.tp + attention_flops(q.spec, size, p.attn_tp))
        card_memory = card / st.gpu.bandwidth_bytes_per_s  # type: ignore[operator]
        card_compute = card_flops / st.gpu.matmul_flops_per_s if peaks else 0.0  # type: ignore[operator]
        seconds += max(card_memory, card_compute)
        memory += card_memory
        compute += card_compute
        step += card * p.tp
        kv += cache_read * p.tp
        flops += card_flops * p.tp
    return {"bytes_per_step": step, "seconds_per_step": seconds,
            "tokens_per_s_per_sequence": 1 / seconds,
            "tokens_per_s_total": q.sequences * p.dp / seconds,
            "kv_share": kv / step if step else 0.0,
            "sparse_read": sparse,
            "expert_share": weights.expert_share(q.sequences * ranks),
            # the sequences whose tokens share the experts a step reads (every DP rank's)
            "expert_sequences": q.sequences * ranks,
            "flops_per_step": flops,
            "bandwidth_seconds_per_step": memory,
            "compute_seconds_per_step": compute if peaks else None,
            "bound": "compute" if peaks and compute > memory else "bandwidth",
            "basis": "per card: its share of the active weights and of the cache at its "
                     "bandwidth, or its share of the step's FLOPs at its dense FP16/BF16 "
                     "matrix peak where that takes longer; stages in turn, the ranks of a "
                     "stage side by side; interconnect not counted"}


def parallel_prefill(q: Query, stages: list[_Stage],
                     attention: list[tuple[int, int]] | None = None) -> dict[str, Any]:
    """The prefill of one sequence's prompt of the full context over several cards: on each
    stage's cards their share of its FLOPs (2 a weight a token, the lm_head's for the last
    token only, and the attention's) at their matrix peak, or of their weights read once
    where that takes longer, the stages in turn. ``attention`` as parallel_decode takes it:
    under SGLang's attention DP the sequence's attention (its projections and products) runs
    on its attention group's cards alone."""
    n, p = q.spec.decoder_layers, q.parallel
    body_params, head_params = _matmul_params(q)
    seconds = 0.0
    flops = attention_total = 0
    bandwidth_bound = False
    for st, (attn_params, _) in zip(stages, attention or [(0, 0)] * len(stages), strict=True):
        products = prefill_attention_flops(q.spec, st.share.cache(q.context, 1, q.cache),
                                           p.attn_tp)
        # the attention projections and products, on the attention group's cards
        grouped = 2 * q.context * attn_params // p.attn_tp + products
        spread = 2 * (q.context * body_params * st.layers // n - q.context * attn_params
                      + (head_params if st.last else 0)) // p.tp
        card = spread + grouped
        card_compute = card / st.gpu.matmul_flops_per_s  # type: ignore[operator]
        card_memory = st.share.weights_bytes / st.gpu.bandwidth_bytes_per_s  # type: ignore[operator]
        seconds += max(card_compute, card_memory)
        bandwidth_bound = bandwidth_bound or card_memory > card_compute
        flops += spread * p.tp + grouped * p.attn_tp
        attention_total += products * p.attn_tp
    return prefill_to_dict(q.context, flops, attention_total, seconds,
                           "bandwidth" if bandwidth_bound else "compute")


def _fits(q: Query) -> tuple[bool, int]:
    if q.engine == "raw" and not q.multi and q.gpus and q.kv_budget_bytes is None:
        p = plan(PlanRequest(spec=q.spec, context=q.context, sequences=q.sequences,
                             cache=q.cache, weights=q.weights, gpu=q.gpus[0],
                             overhead_bytes=q.overhead_bytes))
        return bool(p.fits), p.max_context or 0
    report: EngineReport = engine_plan(q.engine, q.engine_request())
    return report.fits, report.max_context


def _layout(q: Query, count: int) -> Parallel | None:
    """The engine's layout over ``count`` cards: llama.cpp's layers split, else tensor
    parallel, keeping the plan's attention DP (None where it does not divide ``count``)."""
    if q.engine in GGML_ENGINES:
        # a draft model is planned on one card (Query: no pipeline stages with a draft)
        return Parallel(pp=count) if count == 1 or q.spec.draft is None else None
    if q.engine == "trtllm" and q.parallel.attn_dp > 1:
        # TensorRT-LLM's attention DP: a group a card
        return Parallel(tp=count, attn_dp=count) if count > 1 else None
    if count % q.parallel.attn_dp:
        return None
    return Parallel(tp=count, attn_dp=q.parallel.attn_dp)


def _fewest_cards(q: Query, gpu: GPU, above: int = 0,
                  errors: list[InputError] | None = None,
                  card_context: bool = False) -> tuple[int, int, Query] | None:
    """The fewest cards of ``gpu`` (of GPU_COUNTS, more than ``above``, not past the most one
    host holds) on which ``q`` fits, as (count, max context, that query); None where none.
    A query laid over several cards already (its tp, pp or dp given) is tried in that layout
    only, on as many cards as it asks. ``errors`` collects the engine's refusals there. With
    ``card_context`` a query whose context is the engine's own (Query.auto_context) takes the
    context the engine gives those cards."""
    fixed = q.parallel.gpus > 1 and not above
    for count in (q.parallel.gpus,) if fixed else GPU_COUNTS:
        if count <= above:
            continue
        if count > gpu.max_cards:
            break
        layout = q.parallel if fixed else _layout(q, count)
        if layout is None:
            continue
        trial = replace(q, gpus=(gpu,), parallel=layout)
        if card_context and q.auto_context and q.engine == "ollama":
            from .engines.ollama import auto_context
            trial = replace(trial, context=auto_context(
                q.spec, [gpu] * layout.ranks_per_replica))
        try:
            ok, max_ctx = _fits(trial)
        except InputError as e:
            if errors is not None:
                errors.append(e)
            break
        if not ok and not fixed:
            # SGLang: the fewest attention groups that fit on these cards (attention DP
            # adds no card)
            groups = _attention_groups(trial, estimate=False)
            if groups is not None:
                ok, max_ctx = True, groups["max_context"]
                trial = replace(trial, parallel=replace(layout, attn_dp=groups["attn_dp"]))
        if ok:
            return count, max_ctx, trial
    return None


def find_gpu_for(q: Query, limit: int = 10, card_context: bool = True,
                 vendor: str | None = None, vendor_field: str = "vendor",
                 segment: str | None = None,
                 segment_field: str = "segment") -> list[dict[str, Any]]:
    """Catalog GPUs that fit the query, fewest total memory first, with the card count and
    the decode estimate there (tokens a second a sequence); where the query is laid over
    several cards already (its tp, pp or dp), the cards that fit in that layout. With
    ``card_context`` a query whose context is the engine's own (Query.auto_context: Ollama's
    num_ctx) is tried at the context each card gets (each row's ``context``); without it, at
    the query's. ``vendor``: only that maker's cards, ``segment`` only that kind of card
    (laptop; gpu_selection's checks, their inputs named ``vendor_field`` and
    ``segment_field``)."""
    chips = gpu_selection(vendor, vendor_field=vendor_field, segment=segment,
                          segment_field=segment_field)
    if not chips and (vendor is not None or segment is not None):
        # no card of that maker in that segment (an AMD laptop GPU)
        kind = f"{segment_of(segment)} " if segment else ""
        of = f" of {maker(vendor)}" if vendor else ""
        raise InputError(f"the catalog has no {kind}card{of}",
                         field=segment_field if segment else vendor_field)
    # an engine that cannot run this plan on any card says why, rather than "no GPU fits";
    # what depends on the card (SGLang's KV dtype for a DSA model) is settled card by card
    try:
        check_engine(q)
    except InputError as e:
        if e.field != "gpu":
            raise
    found: list[dict[str, Any]] = []
    refusals: list[InputError] = []
    # the cards the engine's GPU build runs on (none other fits, whatever its memory), and
    # an Apple chip in each memory size it was sold with: the smallest Mac that fits
    runs = [g for g in chips if platform_refusal(q.engine, g) is None]
    if vendor is not None and chips and not runs:
        # a maker asked for whose cards the engine runs on none of
        raise InputError(f"no {maker(vendor)} card in the catalog runs "
                         f"{ENGINE_TITLES[canonical_engine(q.engine)]}: "
                         f"{platform_refusal(q.engine, chips[0])}", field=vendor_field)
    for gpu in (v for chip in runs for v in memory_variants(chip)):
        fewest = _fewest_cards(q, gpu, errors=refusals, card_context=card_context)
        if fewest is not None:
            count, max_ctx, trial = fewest
            found.append({"gpu": gpu.id, "name": gpu.name, "count": count,
                          "context": trial.context,
                          "total_memory_bytes": gpu.memory_bytes * count,
                          "bandwidth_bytes_per_s": gpu.bandwidth_bytes_per_s,
                          "attn_dp": trial.parallel.attn_dp,
                          "max_context": max_ctx, "notes": context_notes(q, max_ctx),
                          "query": trial})
    asked = [e for e in refusals if e.field != "gpu"]
    if not found and asked:
        # no card fits, and on some the engine stopped at a setting of the query (a KV format
        # it does not size there, a fraction it needs given): that, not "none fits", is the
        # answer
        raise asked[0]
    found.sort(key=lambda r: (int(r["total_memory_bytes"]), -int(r["bandwidth_bytes_per_s"] or 0)))
    rows = found[:limit]
    for r in rows:
        # the plan's decode estimate on this rig, a sequence at the context asked
        decode = answer(r.pop("query")).get("decode") or {}
        r["tokens_per_s_per_sequence"] = decode.get("tokens_per_s_per_sequence")
    return rows


def _candidates() -> list[KVFormat]:
    return sorted((f for f in FORMATS if f.name != "f32"), key=lambda f: -f.bits_per_value)


def find_model(build: Callable[[ModelSpec], Query],
               entries: Sequence[CatalogEntry] | None = None) -> dict[str, Any]:
    """Every catalog model (or each of ``entries``) asked the same question (``build`` makes
    its query: the same card, context, sequences, formats and engine), in five lists:
    ``fits``, the models that fit, most parameters first; ``untrained``, those that fit in memory but were trained for fewer
    positions than the context asked (each with its decode estimate, tokens a second a
    sequence); ``shorter``, those that fit a shorter context only
    (longest first); ``too_big``, those whose weights and runtime alone do not fit;
    ``refused``, those the engine or the layout refuses, with the reason. A row of ``shorter``
    or ``too_big`` that llama-server's --fit runs with part of the model in host memory has
    ``host_fit``: what it keeps there, and the decode estimate (host_runnable lists them)."""
    from .catalog import load_model, model_catalog

    found: dict[str, list[dict[str, Any]]] = {"fits": [], "untrained": [], "shorter": [],
                                              "too_big": [], "refused": []}
    errors: list[KvplanError] = []
    for entry in model_catalog() if entries is None else entries:
        if entry.head_of:
            # an EAGLE head drafts for a target; it is no model to serve
            continue
        try:
            data = answer(build(load_model(entry.id)))
        except KvplanError as exc:
            errors.append(exc)
            found["refused"].append({"model": entry.id, "repo": entry.repo, "reason": str(exc)})
            continue
        trained = data["model"]["max_position_embeddings"]
        row = {"model": entry.id, "repo": entry.repo, "params": data["weights"]["params"],
               "weights": data["weights"]["format"], "weights_bytes": data["weights_bytes"],
               "kv_bytes": data["kv_bytes"] + data["state_bytes"],
               "total_bytes": data["total_bytes"], "max_context": data["max_context"],
               "max_sequences": data["max_sequences"], "fits": data["fits"],
               "trained_positions": trained,
               # the decode estimate at the context and sequences asked (None without a
               # card's bandwidth)
               "tokens_per_s_per_sequence": (data.get("decode") or {}).get(
                   "tokens_per_s_per_sequence")}
        host = _host_fit(data)
        if host is not None:
            # llama-server's --fit would run it with part in host memory
            row["host_fit"] = host
        kind = ("too_big" if not data["max_context"] else "shorter" if not data["fits"]
                else "untrained" if trained and data["context"] > trained else "fits")
        found[kind].append(row)
    if errors and len(errors) == len([e for e in model_catalog() if not e.head_of]):
        # no model planned: the question is at fault (an unknown card, a KV format the engine
        # lacks), and its error is the one most models gave
        reasons = Counter(str(e) for e in errors)
        raise next(e for e in errors if str(e) == reasons.most_common(1)[0][0])
    for kind in ("fits", "untrained"):
        found[kind].sort(key=lambda r: (-int(r["params"] or 0), r["model"]))
    found["shorter"].sort(key=lambda r: (-int(r["max_context"]), r["model"]))
    found["too_big"].sort(key=lambda r: (int(r["weights_bytes"]), r["model"]))
    return found


def refuse_draft_engine(engine: str) -> None:
    """Refuse, in one line, a draft model under an engine that loads none (Ollama) or whose
    draft kvplan does not size (TensorRT-LLM)."""
    if engine in ("ollama", "trtllm"):
        why = ("Ollama loads no draft model" if engine == "ollama" else
               "kvplan does not size TensorRT-LLM's draft-target speculative decoding")
        raise InputError(f"{why}: plan the draft with --engine llama.cpp, vllm, sglang or raw",
                         field="draft")


#: the largest draft find_draft lists, as a share of the target's parameters: past it a draft
#: step costs too much of a verify step to speed decoding up
DRAFT_SHARE = 0.25


def find_draft(q: Query, draft_weights: str | None = None,
               acceptance: float | None = None) -> dict[str, Any]:
    """The catalog models ``q``'s model could take as its draft: of the same vocab_size (vLLM
    and SGLang ask for it; SGLang and llama.cpp also compare the tokens, which a config does
    not hold), attention layers only, at most DRAFT_SHARE of its parameters. Each is planned
    with ``q`` (its card, context, sequences, formats and engine; ``draft_weights`` its weight
    format, its checkpoint's if None): ``drafts``, the rows (whether it fits, its max context,
    the decode estimate, and with ``acceptance`` the speculative one and its speed-up; those
    that fit first, the fastest or smallest first), ``refused`` with the engine's reason. A
    draft must share the target's tokenizer: each row names its catalog family."""
    from .catalog import load_model, model_catalog
    from .draft import DRAFT_KINDS, attach, check_head, head_method

    target = q.spec
    if target.draft is not None:
        raise InputError("find-draft tries the catalog's models as the draft; leave out draft",
                         field="draft")
    if not q.gpus and q.kv_budget_bytes is None:
        # (without a card no draft fits or not, and none has a longest context)
        raise InputError("find-draft needs a GPU (--gpu) or a KV budget (--kv-budget) to plan "
                         "the drafts beside the target", field="gpu")
    refuse_draft_engine(q.engine)
    # the target's family, where it is a catalog model: its drafts are listed first
    family = next((e.family for e in model_catalog() if e.id == target.name), None)
    rows: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for entry in model_catalog():
        d = load_model(entry.id)
        method = head_method(d)
        if method != "draft_model":
            # an EAGLE head drafts for the target whose hidden states it was trained on
            try:
                check_head(target, d, method)
            except InputError:
                continue
        elif (d.vocab_size != target.vocab_size or d.name == target.name
                or {g.kind for g in d.groups_for(mtp=False)} - DRAFT_KINDS
                or d.params.total > DRAFT_SHARE * target.params.total):
            continue
        try:
            data = answer(replace(q, spec=attach(target, d, draft_weights), cache=replace(
                q.cache, mtp=True, draft_format=None), acceptance=acceptance))
        except KvplanError as exc:
            if exc.field in ("draft_weights", "acceptance", "draft_kv"):
                # the question is at fault, not this draft
                raise
            refused.append({"draft": entry.id, "repo": entry.repo, "reason": str(exc)})
            continue
        decode = data.get("decode") or {}
        sp = decode.get("speculative") or {}
        rows.append({"draft": entry.id, "repo": entry.repo, "family": entry.family,
                     "method": method, "head_of": entry.head_of,
                     "same_family": family is not None and entry.family == family,
                     "params": data["draft"]["params"],
                     "weights_bytes": data["draft"]["weights_bytes"],
                     "weights": data["draft"]["weights_format"],
                     "fits": data["fits"], "max_context": data["max_context"],
                     "max_sequences": data["max_sequences"],
                     "tokens_per_s_per_sequence": decode.get("tokens_per_s_per_sequence"),
                     "speculative_tokens_per_s_per_sequence": sp.get(
                         "tokens_per_s_per_sequence"),
                     "speedup": sp.get("speedup")})
    rows.sort(key=lambda r: (not r["fits"], not r["same_family"],
                             -(r["speculative_tokens_per_s_per_sequence"] or 0), r["params"],
                             r["draft"]))
    return {"target": target.name, "vocab_size": target.vocab_size, "drafts": rows,
            "refused": refused}


def _host_fit(data: dict[str, Any]) -> dict[str, Any] | None:
    """What llama-server's --fit keeps in host memory for a plan that does not fit its card,
    and the decode estimate then (None: no such placement, or another engine)."""
    fit = (data.get("engine_report") or {}).get("extra", {}).get("fit")
    if fit is None or not fit.get("decode"):
        return None
    return {"host_holds": fit["host_holds"], "host_weights_bytes": fit["host_weights_bytes"],
            "tokens_per_s_per_sequence": fit["decode"]["tokens_per_s_per_sequence"],
            "host_bandwidth_bytes_per_s": fit["decode"]["host_bandwidth_bytes_per_s"]}


def host_runnable(found: dict[str, Any]) -> list[dict[str, Any]]:
    """Of find_model's models that do not fit the card, those llama-server's --fit runs with
    part of the model in host memory (rows with ``host_fit``), fastest first."""
    return sorted((r for kind in ("shorter", "too_big") for r in found[kind] if "host_fit" in r),
                  key=lambda r: (-r["host_fit"]["tokens_per_s_per_sequence"], r["model"]))


def find_format(q: Query, refused_out: list[dict[str, Any]] | None = None
                ) -> list[dict[str, Any]]:
    """Every KV format (K = V) the engine offers, highest precision first, with its fit and
    the decode estimate in it (tokens a second a sequence; None without a card).
    ``refused_out``: where given, each format the engine has but refuses for this plan is
    appended to it with the one-line reason ({"format", "bits_per_value", "reason"})."""
    if not q.gpus and q.kv_budget_bytes is None:
        raise InputError("find-format needs a GPU or a KV budget to fit the cache in", field="gpu")
    rows = []
    refused: InputError | None = None
    for fmt in _candidates():
        trial = replace(q, cache=replace(q.cache, kv_k=fmt, kv_v=fmt))
        try:
            # the plan in this format: its fit, and its decode estimate (what it would read
            # where it does not fit; none without a card)
            data = answer(trial)
        except UnsupportedFormat:
            continue
        except InputError as exc:
            # a format this engine refuses for this plan; kept in case every format is refused,
            # when the reason is the plan's (an option the engine lacks), not a format's
            refused = refused or exc
            if refused_out is not None:
                refused_out.append({"format": fmt.name, "bits_per_value": fmt.bits_per_value,
                                    "reason": str(exc)})
            continue
        here, quality = quality_here(q.spec, trial.cache)
        max_ctx = data["max_context"] or 0
        decode = data.get("decode") or {}
        rows.append({"format": fmt.name, "bits_per_value": fmt.bits_per_value,
                     "bits_per_value_here": here, "fits": data["fits"], "max_context": max_ctx,
                     "tokens_per_s_per_sequence": decode.get("tokens_per_s_per_sequence"),
                     "quality": quality, "notes": context_notes(q, max_ctx), "offered": True})
    if not rows and refused is not None:
        raise refused
    return rows


def find_format_listing(q: Query) -> list[dict[str, Any]]:
    """find_format's rows, then a row for each format the engine has but refuses for this
    plan: ``offered`` false, the reason in ``refused``, no fit (``max_context`` 0) and no
    estimate, so that a script reading the list sees every format the engine names."""
    refused: list[dict[str, Any]] = []
    rows = find_format(q, refused)
    return rows + [{"format": r["format"], "bits_per_value": r["bits_per_value"],
                    "bits_per_value_here": None, "fits": False, "max_context": 0,
                    "tokens_per_s_per_sequence": None, "quality": None, "notes": [],
                    "offered": False, "refused": r["reason"]} for r in refused]


#: below this many bits a weight, "to fit" by weights names the fewest more cards beside them
BITS_WORTH_A_CARD = 4.0


#: what a raised GPU share of a unified memory leaves the system in "to fit" (macOS, Linux
#: and their apps: the share a Mac or a Strix Halo box is commonly raised to, 120 of 128 GiB)
SYSTEM_RESERVE_BYTES = 8 << 30


def to_fit(q: Query, data: dict[str, Any]) -> dict[str, Any] | None:
    """What makes a plan that does not fit its card fit (_one_change), led, on a machine whose
    GPU has its default share of a memory it shares with the CPU, by the smallest raised
    share that fits (_larger_share; the other change as its ``or``)."""
    fix = _one_change(q, data)
    if data.get("fits") is not False:
        return fix
    share = _larger_share(q)
    if share is None:
        return fix
    if fix:
        share["or"] = {k: v for k, v in fix.items() if k != "or"}
    return share


def _larger_share(q: Query) -> dict[str, Any] | None:
    """The smallest whole GiB of memory for the GPU (gpu_limit) with which the plan fits, on
    one machine whose CPU and GPU share one memory and whose GPU has its default share of it,
    leaving the system SYSTEM_RESERVE_BYTES at least, with the setting that raises it there;
    None where the plan does not fit so or sets the share itself."""
    if len(q.gpus) != 1 or q.kv_budget_bytes is not None:
        return None
    gpu = q.gpus[0]
    if not gpu.unified or gpu.limit_bytes is not None or gpu.usable_fraction >= 1:
        return None
    low, high = -(-gpu.usable_bytes // (1 << 30)) + 1, (gpu.total_bytes - SYSTEM_RESERVE_BYTES) >> 30
    if high < low:
        return None

    # each share tried: its plan and, where it fits, the max context it reaches
    tried: dict[int, tuple[Query, int | None]] = {}

    def fits(gib: int) -> bool:
        trial = replace(q, gpus=(with_limit(gpu, gib << 30),))
        try:
            ok, max_ctx = _fits(trial)
        except InputError:
            ok = False
        tried[gib] = (trial, max_ctx if ok else None)
        return ok

    if not fits(high):
        return None
    while low < high:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid + 1
    # macOS's limit in MiB, the ttm module's in pages of 4 KiB
    how = {"iogpu.wired_limit_mb": f"sudo sysctl iogpu.wired_limit_mb={low << 10}",
           "ttm.pages_limit": f"ttm.pages_limit={low << 18}"}.get(gpu.limit_setting, "")
    change = {"gpu_limit": f"{low}GiB", **({"how": how} if how else {})}
    best, max_ctx = tried[low]
    assert max_ctx is not None  # the search ends on a share that fits
    return _change(best, max_ctx, change)


def _one_change(q: Query, data: dict[str, Any]) -> dict[str, Any] | None:
    """What makes a plan that does not fit its card fit, changing one choice: the
    highest-precision KV format (K = V, find_format's first that fits this context and these
    sequences), else, for vLLM's or SGLang's LoRA, the most adapter slots that fit
    (--max-loras), else SGLang's state slots or attention groups, else, under llama.cpp with
    its placement left to it, for a mixture of experts the fewest blocks whose experts stay
    in host memory (--n-cpu-moe, more cards as its ``or``), else, where no format's cache
    fits beside the weights, the largest weight format that fits with the plan's cache
    (find_weights), else the fewest more cards of the plan's kind (``gpus`` of ``gpu``:
    tensor parallel, llama.cpp's layers split, as --find-gpu tries them, that layout as
    ``tp`` and ``pp`` where the plan gave its own; not past a card's most in one host, nor
    for mixed cards or data parallel), under llama.cpp after the most layers on the cards
    that fit (-ngl, the cards as its ``or``). Weights of fewer than BITS_WORTH_A_CARD bits a
    weight come with those cards as ``or``, where some fit, and after weights of at least that
    many bits beside the engine's 8-bit cache where those fit (_weights_with_an_8_bit_cache).
    None where the plan fits, has no card, or no such change fits."""
    if data.get("fits") is not False or not q.gpus:
        return None
    fit: dict[str, Any] | None
    try:
        formats = find_format(q)
    except InputError:
        formats = []
    fit = next((r for r in formats if r["fits"]), None)
    # the change (the plan's option) and the row's name for it
    option, named = "kv", "format"
    groups = _attention_groups(q)
    if fit is not None and groups is not None:
        # SGLang's attention DP fits too, with the cache's format as asked
        fit = {**fit, "or": groups}
    if fit is None and q.settings.lora is not None:
        slots = _fewer_slots(q, data)
        if slots is not None:
            return slots
    if fit is None:
        states = _more_state_slots(q, data)
        if states is not None:
            return states
    if fit is None and groups is not None:
        # before weights of fewer bits or more cards: the same cards and formats
        return groups
    host = _host_held(q, experts=True) if fit is None else None
    if host is not None:
        # llama.cpp's usual answer for a mixture of experts too large for the card: experts
        # in host memory, before weights of fewer bits or more cards (which come as its "or")
        more = _more_cards(q)
        return {**host, "or": more} if more is not None else host
    if fit is None and q.kv_budget_bytes is None:
        try:
            fit = next((r for r in find_weights(q) if r["fits"]), None)
        except InputError:
            fit = None
        option, named = "weights", "weights"
    if fit is None:
        more = _more_cards(q)
        host = _host_held(q, experts=False)
        if host is not None:
            # layers in host memory (-ngl), with more cards as its "or"
            return {**host, "or": more} if more is not None else host
        return more
    fix: dict[str, Any] = {option: fit[named]}
    fix.update({k: fit[k] for k in ("max_context", "tokens_per_s_per_sequence", "quality", "or")
                if k in fit})
    if (option == "kv" and "or" not in fix and (fit.get("bits_per_value") or 16) < 4
            and q.kv_budget_bytes is None):
        # a cache under 4 bits a value costs quality fewer bits of weights may not: the
        # largest weights that fit with the plan's cache, beside it
        try:
            weights = next((r for r in find_weights(q) if r["fits"]), None)
        except InputError:
            weights = None
        if weights is not None:
            fix["or"] = {"weights": weights["weights"],
                         **{k: weights[k] for k in ("max_context", "tokens_per_s_per_sequence",
                                                    "quality") if k in weights}}
    if option == "weights" and (fit.get("bits_per_weight") or 16) < BITS_WORTH_A_CARD:
        # weights under 4 bits cost quality a card more may not: the cards, beside them
        more = _more_cards(q)
        if more is not None:
            fix["or"] = more
        # and an 8-bit cache may leave room for weights of 4 bits or more: both, before them
        both = _weights_with_an_8_bit_cache(q, formats)
        if both is not None:
            return {**both, "or": fix}
    return fix


#: the bits a value of the caches "to fit" pairs with weights (q8_0's 8.5, fp8's 8)
EIGHT_BIT_CACHE = (8.0, 8.5)


def _weights_with_an_8_bit_cache(q: Query, formats: list[dict[str, Any]]
                                 ) -> dict[str, Any] | None:
    """Where only weights under BITS_WORTH_A_CARD bits a weight fit beside the plan's cache of
    more than 8 bits a value: the engine's most precise 8-bit cache (``formats``: find_format's
    rows, highest precision first) with the largest weights of at least that many bits that
    fit beside it, as one change ({"weights", "kv", ...}); a cache of 8 bits costs less
    quality than weights under 4. None where the cache is 8 bits or fewer already, or no such
    pair fits."""
    bits = max(q.cache.kv_k.bits_per_value, q.cache.kv_v.bits_per_value)
    low, high = EIGHT_BIT_CACHE
    kv = next((r for r in formats if low <= r["bits_per_value"] <= high < bits), None)
    if kv is None:
        return None
    fmt = get_format(kv["format"])
    trial = replace(q, cache=replace(q.cache, kv_k=fmt, kv_v=fmt))
    try:
        weights = next((r for r in find_weights(trial) if r["fits"]
                        and (r["bits_per_weight"] or 16) >= BITS_WORTH_A_CARD), None)
    except InputError:
        return None
    if weights is None:
        return None
    quality = "; ".join(f"{what} {text}" for what, text in (
        (f"weights {weights['weights']}:", weights["quality"]),
        (f"KV {kv['format']}:", kv["quality"])) if text)
    return {"weights": weights["weights"], "kv": kv["format"],
            "max_context": weights["max_context"],
            "tokens_per_s_per_sequence": weights["tokens_per_s_per_sequence"],
            "quality": quality or None}


def _change(trial: Query, max_ctx: int, change: dict[str, Any],
            estimate: bool = True) -> dict[str, Any]:
    """A "to fit" change: its fields, the max context ``trial`` (the plan with it) reaches and,
    with ``estimate``, its decode speed."""
    decode = (answer(trial).get("decode") or {}) if estimate else {}
    return {**change, "max_context": max_ctx,
            "tokens_per_s_per_sequence": decode.get("tokens_per_s_per_sequence"),
            "quality": None}


def _host_held(q: Query, experts: bool) -> dict[str, Any] | None:
    """llama.cpp with its placement left to it, where the plan does not fit the cards: with
    ``experts``, for a mixture of experts, the fewest blocks whose routed experts stay in host
    memory (--n-cpu-moe) with which it fits; else the most layers on the cards (-ngl, the
    output layer counted first), at least one. None where that does not fit or the plan sets
    a placement itself."""
    s = q.settings
    if (q.engine not in GGML_ENGINES or s.n_gpu_layers is not None or s.n_cpu_moe is not None
            or s.override_tensor or q.kv_budget_bytes is not None):
        return None
    blocks = q.spec.decoder_layers

    def trial(n: int) -> Query:
        settings = replace(s, n_cpu_moe=n) if experts else replace(s, n_gpu_layers=n)
        return replace(q, settings=settings)

    def fits(n: int) -> bool:
        try:
            return _fits(trial(n))[0]
        except InputError:
            return False

    if experts:
        if not any(m.role == "experts" for m in q.spec.params.modules) or not fits(blocks):
            return None
        lo, hi = 1, blocks          # the fewest blocks: fits grows with them
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if fits(mid) else (mid + 1, hi)
    else:
        if not fits(1):
            return None
        lo, hi = 1, blocks + 1      # the most layers: fits shrinks with them
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    t = trial(lo)
    return _change(t, _fits(t)[1], {"n_cpu_moe" if experts else "ngl": lo})


def _more_state_slots(q: Query, data: dict[str, Any]) -> dict[str, Any] | None:
    """SGLang with --max-mamba-cache-size too small for the sequences: the slots they need
    (each request's slots, in every attention group), where the plan then fits (None where
    the slots are not what holds it back, or more do not fit)."""
    extra = (data.get("engine_report") or {}).get("extra") or {}
    given, slots = q.settings.max_mamba_cache_size, extra.get("mamba_slots")
    per_request = extra.get("mamba_slots_per_request")
    if q.engine != "sglang" or given is None or slots is None or not per_request:
        return None
    groups = q.parallel.attn_dp
    need = -(-q.sequences // groups) * per_request * groups
    if need <= given:
        return None
    trial = replace(q, settings=replace(q.settings, max_mamba_cache_size=need))
    try:
        ok, max_ctx = _fits(trial)
    except InputError:
        return None
    if not ok:
        return None
    return _change(trial, max_ctx, {"max_mamba_cache_size": need})


def _attention_groups(q: Query, estimate: bool = True) -> dict[str, Any] | None:
    """SGLang over several tensor-parallel cards without attention DP: the fewest attention
    groups (--attn-dp, a divisor of tp) with which the plan fits (TensorRT-LLM: a group a
    card, for the architectures it is planned for), as a "to fit" change (None
    where attention DP does not apply to the plan or none fits; ``estimate``: with the
    decode estimate there)."""
    p = q.parallel
    if q.engine not in ("sglang", "trtllm") or p.attn_dp != 1 or p.tp == 1 or p.dp != 1:
        return None
    if q.engine == "trtllm" and (p.pp > 1
                                 or q.spec.architecture not in trtllm.ADP_ARCHITECTURES):
        return None
    # TensorRT-LLM's attention DP makes a group of each card
    counts = (p.tp,) if q.engine == "trtllm" else (d for d in range(2, p.tp + 1) if p.tp % d == 0)
    for n in counts:
        trial = replace(q, parallel=replace(p, attn_dp=n))
        try:
            ok, max_ctx = _fits(trial)
        except InputError:
            return None
        if ok:
            return _change(trial, max_ctx, {"attn_dp": n}, estimate)
    return None


def _fewer_slots(q: Query, data: dict[str, Any]) -> dict[str, Any] | None:
    """Where LoRA slots crowd the cache out: the most adapter slots of the plan's rank (fewer
    than ``data``, the plan's answer, has) with which it fits (None where not even one does)."""
    lora = q.settings.lora
    assert lora is not None
    slots = data["engine_report"]["extra"]["lora"]["max_loras"]
    tried: dict[int, dict[str, Any]] = {}

    def trial(n: int) -> dict[str, Any]:
        if n not in tried:
            tried[n] = answer(replace(q, settings=replace(q.settings,
                                                          lora=replace(lora, slots=n))))
        return tried[n]

    if slots <= 1 or not trial(1)["fits"]:
        return None
    lo, hi = 1, slots - 1  # lo fits; find the largest that does
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if trial(mid)["fits"]:
            lo = mid
        else:
            hi = mid - 1
    best = trial(lo)
    decode = best.get("decode") or {}
    return {"max_loras": lo, "max_context": best["max_context"],
            "tokens_per_s_per_sequence": decode.get("tokens_per_s_per_sequence"),
            "quality": None}


def _more_cards(q: Query) -> dict[str, Any] | None:
    """to_fit's last resort: the fewest cards of the plan's one kind, more than it has, that
    fit it (None where none up to the card's most in one host does)."""
    if len(set(q.gpus)) != 1 or q.parallel.dp != 1 or q.kv_budget_bytes is not None:
        return None
    fewest = _fewest_cards(q, q.gpus[0], above=q.parallel.ranks_per_replica)
    if fewest is None:
        return None
    count, max_ctx, trial = fewest
    # a plan laid out over its cards (tp or pp given) is told the layout of the cards it
    # needs, which its own would contradict
    layout = ({"tp": trial.parallel.tp, "pp": trial.parallel.pp}
              if q.parallel.ranks_per_replica > 1 else {})
    if trial.parallel.attn_dp != q.parallel.attn_dp:
        # SGLang fits those cards only with attention groups
        layout["attn_dp"] = trial.parallel.attn_dp
    return _change(trial, max_ctx, {"gpus": count, "gpu": q.gpus[0].id, **layout})


def quality_here(spec: ModelSpec, cache: CacheOptions) -> tuple[float | None, str]:
    """The bits a value of ``cache``'s K format (K = V) on this model's attention rows, padding
    to whole blocks and scales included (None: no attention rows), and its quality note, which
    says so where that exceeds the format's bits a value by more than 5%."""
    fmt = cache.kv_k
    f16 = get_format("f16")
    # an engine's fp8 indexer rows are the same in every format: the format's bits leave them
    cache = replace(cache, indexer_fp8=False)
    base = bytes_per_token(spec, replace(cache, kv_k=f16, kv_v=f16))
    here = round(16 * bytes_per_token(spec, cache) / base, 4) if base else None
    quality = quality_note(fmt)
    if ds_mla_rows(spec, cache):
        # fp8_ds_mla scales each 128 latent values on their own (a float32 scale a tile), not
        # by one scale as fp8_e4m3's measured row: the nearest measured layout is fp8_pth's
        # scale a 128-value row
        quality = (f"{measured_error(get_format('fp8_pth'))} for fp8 with its own "
                   f"scale a 128-value row (fp8_pth), as fp8_ds_mla gives each 128 latent "
                   f"values a float32 scale and keeps the 64 RoPE values in bf16")
    # the format's own bits a value: on 128-wide heads, scales a head included
    nominal = (fmt.row_bytes(128, "k") + fmt.row_bytes(128, "v")) * 8 / 256
    if here is not None and here > nominal * 1.01:
        reasons = []
        kept = kept_layers(spec, cache)
        if kept:
            reasons.append(f"vLLM keeps {len(kept)} of its layers in "
                           f"{kept_format(spec).name}")
        if ds_mla_rows(spec, cache):
            reasons.append(f"its latent in fp8_ds_mla rows ({FP8_DS_MLA_ROW} bytes for "
                           f"{FP8_DS_MLA_WIDTH} values)")
        bare = 16 * bytes_per_token(spec, replace(cache, vllm_skip=None,
                                                  fp8_ds_mla=False)) / base
        if bare > nominal * 1.01:
            widths = {w for g in spec.groups if g.kind.is_attention
                      for w in (g.head_dim_k, g.head_dim_v) if w}
            padded = any(w % fmt.block_values for w in widths)
            reasons.append(f"its rows padded to whole {fmt.block_values}-value blocks"
                           if padded else "its per-row scales on short rows")
        quality += f"; {here:.3g} bits a value on this model ({'; '.join(reasons)})"
    return here, quality


def _weight_candidates(q: Query) -> list[WeightFormat]:
    """The weight formats find_weights tries under the query's engine: llama.cpp loads GGUF
    (16-bit and llama-quantize's mixes), the serving engines the checkpoint formats; raw
    (no engine) tries both. A format only some checkpoints ship in (gpt-oss's MXFP4 experts,
    DeepSeek-V4's) is tried for such a checkpoint alone; float32 and float16 are left out (no
    model ships in the one, and the other is bfloat16's size)."""
    from .engines.llamacpp import WEIGHTS as GGUF_WEIGHTS

    own = {"mxfp4_moe", "fp8_mxfp4_moe"}
    out = []
    for f in WEIGHT_FORMATS:
        if f.name in ("f32", "f16") or (f.name in own and q.spec.checkpoint_weights != f.name):
            continue
        gguf = f.name in MIXES
        if q.engine in GGML_ENGINES and (f.name not in GGUF_WEIGHTS or f.name == "mxfp4"):
            continue
        if q.engine not in (*GGML_ENGINES, "raw") and gguf:
            continue
        out.append(f)
    return out


def find_weights(q: Query) -> list[dict[str, Any]]:
    """Every weight format the engine loads (_weight_candidates), largest first, with the
    weights' bytes on this model, its fit, the decode estimate in it (tokens a second a
    sequence; None without a card) and what is known of its quality. Under llama.cpp a format
    that does not fit the card but that llama-server's --fit runs with part of the model in
    host memory carries ``host_fit``, as find_model's rows do."""
    if not q.gpus:
        raise InputError("find-weights needs a GPU to fit the weights on (a KV budget is the "
                         "cache's alone: every weight format fits it alike)", field="gpu")
    if q.kv_budget_bytes is not None:
        raise InputError("find-weights fits the weights on the card: leave out the KV budget "
                         "(the cache's alone, which every weight format fits alike)",
                         field="kv_budget")
    rows = []
    refused: InputError | None = None
    for fmt in _weight_candidates(q):
        try:
            data = answer(replace(q, weights=fmt.name))
        except InputError as exc:
            refused = refused or exc
            continue
        params = data["weights"]["params"] or 0
        decode = data.get("decode") or {}
        row = {"weights": fmt.name, "description": fmt.description,
               "weights_bytes": data["weights_bytes"],
               "bits_per_weight": round(data["weights_bytes"] * 8 / params, 3) if params else None,
               "source": data["weights"]["source"], "fits": data["fits"],
               "max_context": data["max_context"] or 0,
               "tokens_per_s_per_sequence": decode.get("tokens_per_s_per_sequence"),
               "quality": weight_quality(fmt.name),
               "perplexity_added": PERPLEXITY.get(fmt.name),
               "notes": context_notes(q, data["max_context"] or 0)}
        host = _host_fit(data)
        if not data["fits"] and host is not None:
            row["host_fit"] = host
        rows.append(row)
    if not rows and refused is not None:
        raise refused
    rows.sort(key=lambda r: (-int(r["weights_bytes"]), r["weights"]))
    return rows


def weight_quality(name: str) -> str:
    """What is known of a weight format's quality: for llama-quantize's mixes the perplexity
    its list of types gives on Llama-3-8B (gguf_mix.PERPLEXITY); 16-bit is the baseline."""
    if name in ("bf16", "f16"):
        return "baseline"
    ppl = PERPLEXITY.get(name)
    return f"{ppl:+.4f} perplexity on Llama-3-8B (llama-quantize)" if ppl is not None else ""
