"""llama.cpp (llama-server) allocation rules.

Sources read (ggml-org/llama.cpp): ``src/llama-context.cpp`` (n_ctx padded to 256; without a
unified cache each of the ``--parallel`` sequences gets ``n_ctx / n_seq`` cells of its own
stream), ``src/llama-kv-cache.cpp`` (per layer ``ggml_row_size(type, n_embd_k_gqa) × cells``
for K and V; the ``llama_kv_cache: size = ...`` line), ``src/llama-kv-cache-iswa.cpp``
(sliding-window layers keep ``min(n_ctx, PAD256(n_swa·(unified ? n_seq : 1) + n_ubatch))``
cells unless ``--swa-full``), ``src/llama-memory-recurrent.cpp`` and ``src/llama-hparams.cpp``
(recurrent state: R = conv, S = ssm, f32, one cell per sequence), ``common/arg.cpp`` (``--fit``
leaves 1024 MiB free per device). DeepSeek MLA caches the 576-value latent as K and no V.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from ..errors import InputError
from ..formats import get_format
from ..hf import GEMMA3N_TYPES
from ..kv import CacheOptions
from ..model import LayerGroup, LayerKind, ModelSpec
from ..parallel import llamacpp_stage_layers
from ..plan import largest, raw_overhead
from .base import (
    EngineReport,
    EngineRequest,
    MiB,
    RankShare,
    check_format,
    mib,
    rank_weights,
    refuse_indexer_cache,
    refuse_layout,
    stage_pools,
)

NAME = "llama.cpp"
#: -sm layer: llama.cpp's own split of the layers over the devices
STAGE_SPLIT = llamacpp_stage_layers
PAD = 256
#: the most sequences (-np) a context serves (llama-cparams.h LLAMA_MAX_SEQ)
MAX_SEQ = 256
N_UBATCH = 512
FIT_MARGIN = 1024 * MiB
#: -ctk / -ctv types (common/arg.cpp kv_cache_types)
FORMATS = {n: n for n in ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")}
#: model types whose llama.cpp architecture keeps no sliding window, so every layer holds all
#: n_ctx cells: Mistral and Mixtral convert to the llama architecture, whose hparams read no
#: window (src/models/llama.cpp), as Qwen2's (src/models/qwen2.cpp), PhiMoE's and StarCoder2's
#: do not; Phi-3 reads it and turns it off ("Phi SWA is currently disabled", src/models/phi3.cpp)
NO_WINDOW_TYPES = frozenset({"llama", "mistral", "mixtral", "qwen2", "phi3", "phimoe",
                             "starcoder2"})
#: models llama.cpp cannot be sized for, with what is missing (docs/ENGINES.md L8): MiMo-V2's
#: GGUF differs between converter revisions (conversion/mimo.py @32e9e044 drops the three MTP
#: blocks, @051139f5 appends them as sliding layers of 8 KV heads), so the cached layer count is
#: not one number; Step-3.7-Flash's architecture is registered by no converter read
#: (conversion/step3.py @0bbad317 registers Step3p5ForCausalLM and reads num_attention_groups
#: and moe_num_experts, keys this config lacks)
LAYOUT_UNKNOWN = {
    "mimo_v2_flash": "how many MiMo-V2-Flash layers hold K/V (llama.cpp's converter revisions "
                     "disagree on its three MTP blocks: dropped, or appended to the GGUF as "
                     "sliding layers of 8 KV heads)",
    "step3p7": "a GGUF layout for Step-3.7-Flash (llama.cpp's converter registers "
               "Step3p5ForCausalLM, not Step3p7FlashForCausalLM, and reads "
               "num_attention_groups and moe_num_experts, which this config lacks)",
}
#: Kimi-K3 (KimiK3ForConditionalGeneration) runs as LLM_ARCH_KIMI_K3: the kimi-linear hybrid
#: memory (K-only 576-value MLA latent, KDA state in f32), sized like Kimi-Linear
LAYOUT_UNKNOWN_ARCH: dict[str, str] = {}
#: llama.cpp's gemma3n architecture gives K and V to the first 20 layers whatever the model
#: (src/models/gemma3n.cpp load_arch_hparams: n_layer_kv_from_start = 20); the rest read the
#: cache of the last earlier layer of their kind (hparams.has_kv)
GEMMA3N_KV_LAYERS = 20
#: GGUF weight types kvplan can price
WEIGHTS = {"f32", "f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m", "q2_k", "iq4_xs",
           "mxfp4"}


def pad(n: int, to: int = PAD) -> int:
    return -(-n // to) * to


class Layout:
    """Cells and streams llama.cpp builds for ``n_seq`` sequences of ``ctx`` tokens each."""

    def __init__(self, ctx: int, n_seq: int, unified: bool, n_ubatch: int) -> None:
        self.n_seq = n_seq
        self.unified = unified
        self.n_ctx = pad(ctx * n_seq)
        self.streams = 1 if unified else n_seq
        if unified:
            self.cells = self.n_ctx
        else:
            # each stream's context is padded too, and n_ctx recomputed from it
            self.cells = pad(self.n_ctx // n_seq)
            self.n_ctx = self.cells * n_seq
        self.n_ubatch = n_ubatch

    def swa_cells(self, window: int, swa_full: bool) -> int:
        if swa_full:
            return self.cells
        return pad(min(self.cells, window * (self.n_seq if self.unified else 1) + self.n_ubatch))


def _row(fmt_name: str, width: int) -> int:
    fmt = get_format(fmt_name)
    if width % fmt.block_values:
        raise InputError(f"llama.cpp needs rows that are whole {fmt.name} blocks: "
                         f"{width} values is not a multiple of {fmt.block_values}", field="kv")
    return width // fmt.block_values * fmt.block_bytes


class Memory:
    """The caches llama.cpp allocates on one device, with its log lines."""

    def __init__(self, spec: ModelSpec, layout: Layout, opts: CacheOptions, swa_full: bool,
                 flash: bool = True):
        k, v = opts.kv_k.name, opts.kv_v.name
        self.lines: list[str] = []
        self.kv_bytes = self.k_bytes = self.v_bytes = 0
        groups = [g for g in spec.groups_for(mtp=opts.mtp) if g.kind.is_attention]
        recurrent = [g for g in spec.groups_for(mtp=opts.mtp) if g.kind.is_recurrent]
        caches: list[tuple[str, int, list[LayerGroup]]] = []
        full = [g for g in groups if g.kind in (LayerKind.FULL, LayerKind.MLA, LayerKind.CROSS)]
        swa = [g for g in groups if g.kind in (LayerKind.SLIDING, LayerKind.CHUNKED)]
        if swa:
            window = max(g.window or 0 for g in swa)
            caches.append(("non-SWA", layout.cells, full))
            caches.append(("SWA", layout.swa_cells(window, swa_full), swa))
        else:
            caches.append(("", layout.cells, full))
        for label, cells, members in caches:
            k_bytes = v_bytes = layers = 0
            for g in members:
                k_row = _row(k, g.n_kv_heads * g.head_dim_k)
                v_row = _row(v, g.n_kv_heads * g.head_dim_v) if g.head_dim_v else 0
                k_bytes += g.count * k_row * cells * layout.streams
                v_bytes += g.count * v_row * cells * layout.streams
                layers += g.count
            if spec.model_type == "nemotron-nas":
                # deci: every layer gets K and V tensors of n_head_kv(il) heads, a no-op or
                # linear attention layer 0 of them (src/llama-kv-cache.cpp); without flash
                # attention V is transposed and every layer's V padded to the widest
                # (TAG_V_CACHE_VARIABLE)
                layers = spec.decoder_layers
                widths = {g.n_kv_heads * g.head_dim_v for g in members}
                if not flash and (len(widths) > 1 or spec.cacheless_layers):
                    v_bytes = layers * _row(v, max(widths, default=0)) * cells * layout.streams
            if label:
                self.lines.append(f"llama_kv_cache_iswa: creating {label:>7} KV cache, "
                                  f"size = {cells} cells")
            self.lines.append(
                f"llama_kv_cache: size = {mib(k_bytes + v_bytes):>7} MiB ({cells:6d} cells, "
                f"{layers:3d} layers, {layout.n_seq:2d}/{layout.streams} seqs), "
                f"K ({k}): {mib(k_bytes):>7} MiB, V ({v}): {mib(v_bytes):>7} MiB")
            self.k_bytes += k_bytes
            self.v_bytes += v_bytes
        self.kv_bytes = self.k_bytes + self.v_bytes
        self.state_bytes = self.r_bytes = self.s_bytes = 0
        if recurrent:
            cells = max(1, layout.n_seq)
            r = sum(g.count * g.conv_state_values for g in recurrent) * 4 * cells
            s = sum(g.count * (g.state_values - g.conv_state_values) for g in recurrent) * 4 * cells
            self.state_bytes = r + s
            self.r_bytes, self.s_bytes = r, s
            self.lines.append(
                f"llama_memory_recurrent: size = {mib(r + s):>7} MiB ({cells:6d} cells, "
                f"{spec.decoder_layers:3d} layers, {cells:2d} seqs), R (f32): {mib(r):>7} MiB, "
                f"S (f32): {mib(s):>7} MiB")


def _notes(opts: CacheOptions, flash_attn: bool) -> list[str]:
    notes = []
    if flash_attn and (opts.kv_k.name != opts.kv_v.name
                       or opts.kv_k.name not in ("f16", "bf16", "q8_0", "q4_0")):
        notes.append("CUDA flash attention supports f16/bf16/q8_0/q4_0 with K type = V type "
                     "unless built with GGML_CUDA_FA_ALL_QUANTS; other pairs run on the CPU")
    return notes


def without_windows(spec: ModelSpec) -> ModelSpec:
    """``spec`` as llama.cpp runs it: the sliding-window layers of an architecture in
    NO_WINDOW_TYPES hold a full cache."""
    bounded = (LayerKind.SLIDING, LayerKind.CHUNKED)
    if spec.model_type not in NO_WINDOW_TYPES or not any(g.kind in bounded for g in spec.groups):
        return spec
    groups = tuple(replace(g, kind=LayerKind.FULL, window=None) if g.kind in bounded
                   else g for g in spec.groups)
    return replace(spec, groups=groups)


def plan(req: EngineRequest) -> EngineReport:
    # llama-kv-cache-dsa keeps the indexer's keys as a second llama_kv_cache of one K-only
    # head of indexer_head_size values in the -ctk type (hparams copied from the MLA model, so
    # is_mla() leaves V out), with the main cache's cells and streams; but the layers it
    # covers changed between builds (every block of the GGUF, the MTP block included, where
    # create_memory passes no filter; only the decoder's full-indexer layers where it filters
    # them), so the layer count cannot be pinned to one build
    refuse_indexer_cache("llama.cpp", req.spec,
                         "the layers its DSA cache gives indexer keys (the GGUF's MTP block, "
                         "GLM-5.2's shared layers) differ between builds; use --engine vllm, "
                         "trtllm or raw")
    refuse_layout(NAME, req.spec, LAYOUT_UNKNOWN, LAYOUT_UNKNOWN_ARCH)
    own = req.spec.decoder_layers - req.spec.cacheless_layers
    if req.spec.model_type in GEMMA3N_TYPES and own != GEMMA3N_KV_LAYERS:
        raise InputError(f"llama.cpp's gemma3n architecture caches the first "
                         f"{GEMMA3N_KV_LAYERS} layers (n_layer_kv_from_start), this config "
                         f"{own} (num_kv_shared_layers): it would not run as configured; "
                         "use --engine vllm or raw", field="engine")
    windowed = req.spec
    req = replace(req, spec=without_windows(req.spec))
    s = req.settings
    opts = req.cache
    k = check_format(NAME, opts.kv_k, FORMATS, "kv_k")
    v = check_format(NAME, opts.kv_v, FORMATS, "kv_v")
    if opts.hot_format is not None or opts.keep_fraction < 1:
        raise InputError("llama.cpp has no hot/cold mix or token eviction", field="engine")
    if req.weights is not None and str(req.weights).lower() not in WEIGHTS | {"auto"}:
        raise InputError(f"llama.cpp loads GGUF weights; choose one of {', '.join(sorted(WEIGHTS))}",
                         field="weights")
    if any(g.kind is LayerKind.CROSS for g in req.spec.groups):
        raise InputError("llama.cpp does not run cross-attention (Mllama) models", field="engine")
    if req.parallel.tp > 1 or req.parallel.dp > 1:
        raise InputError("llama.cpp splits layers across GPUs (use --pp, its -sm layer), "
                         "not tensor or data parallel ranks", field="tp")
    if req.spec.model_type == "nemotron-nas" and req.parallel.pp > 1:
        raise InputError("llama.cpp's split of a Nemotron-NAS model's cache-less layers over "
                         "devices (-sm layer) is not modelled: plan it on one device",
                         field="pp")
    if req.sequences > MAX_SEQ:
        raise InputError(f"llama.cpp serves at most {MAX_SEQ} sequences (-np), got "
                         f"{req.sequences:,}", field="sequences")
    n_ubatch = s.n_ubatch or N_UBATCH
    flash = True if s.flash_attn is None else s.flash_attn
    if opts.kv_v.is_quantized and not flash:
        raise InputError(f"llama.cpp refuses to start with a quantized V cache ({opts.kv_v.name}) "
                         "and flash attention off (-fa off): turn it on (leave out "
                         "no_flash_attn) or keep V in f16 or bf16", field="kv_v")
    unified = bool(s.kv_unified)
    margin = FIT_MARGIN if s.fit_margin_bytes is None else s.fit_margin_bytes
    # the token embedding stays in host memory (llama-model.cpp: "there is very little benefit
    # to offloading the input layer"), the output layer (a copy of it where tied) on the last
    # device
    weights, shares = rank_weights(req, STAGE_SPLIT, input_on_cpu=True)
    compute = raw_overhead(req.spec).bytes - 512 * MiB

    def memory(share: RankShare, ctx: int, n_seq: int | None = None) -> Memory:
        return Memory(share.spec, Layout(ctx, n_seq or req.sequences, unified, n_ubatch), opts,
                      s.swa_full, flash)

    def cache_bytes(share: RankShare, ctx: int, n_seq: int | None = None) -> int:
        m = memory(share, ctx, n_seq)
        return m.kv_bytes + m.state_bytes

    # a given pool is every stage's budget for its own cache
    pools = stage_pools(req, shares, margin + compute)

    def ok(ctx: int, n_seq: int | None = None) -> bool:
        return ctx == 0 or all(cache_bytes(sh, ctx, n_seq) <= pool
                               for sh, pool in zip(shares, pools, strict=True))

    fits = ok(req.context)
    max_ctx = largest(ok, 1 << 31)
    # -np N: N sequences of the context, each cell of n_ctx laid out for N, at most
    # llama.cpp's LLAMA_MAX_SEQ
    max_seqs = largest(lambda n: n == 0 or ok(req.context, n), MAX_SEQ)
    slack = [pool - cache_bytes(sh, req.context) for sh, pool in zip(shares, pools, strict=True)]
    binding = min(range(len(shares)), key=slack.__getitem__)
    share = shares[binding]
    budget_bytes = (share.gpu.usable_bytes - margin
                    if req.kv_budget_bytes is None and share.gpu is not None else None)
    mem = memory(share, req.context)
    layout = Layout(req.context, req.sequences, unified, n_ubatch)
    notes = _notes(opts, flash)
    if req.spec is not windowed:
        notes.append(f"llama.cpp runs {windowed.model_type} without its sliding window: every "
                     "layer keeps the whole context")
    if max_seqs == MAX_SEQ:
        notes.append(f"{MAX_SEQ} sequences at this context is llama.cpp's most (-np); more "
                     "would fit in memory")
    ngl = req.spec.decoder_layers + 1
    if budget_bytes is not None and not fits and req.parallel.pp == 1:
        ngl = _offload_layers(share, mem, budget_bytes, compute, req.spec.decoder_layers)
        notes.append(f"everything does not fit: -ngl {ngl} keeps {ngl} of "
                     f"{req.spec.decoder_layers} layers on the GPU, the rest run on the CPU")
    ck = req.spec.checkpoint
    load = ck.load if ck is not None and ck.load else f"-m {shlex.quote(req.spec.name)}.gguf"
    cmd = [f"llama-server {load} -c {layout.n_ctx} -np {req.sequences}",
           f"-ctk {k} -ctv {v}", f"-fa {'on' if flash else 'off'}",
           f"-ngl {ngl if ngl <= req.spec.decoder_layers else 999}"]
    if s.swa_full:
        cmd.append("--swa-full")
    if unified:
        cmd.append("--kv-unified")
    if req.parallel.pp > 1:
        cmd.append(f"-sm layer -ts {','.join(['1'] * req.parallel.pp)}")
    if req.parallel.pp > 1:
        # one cache over every layer, its buffers on the devices that hold the layers: a
        # buffer line a device, then the cache's own lines for the whole model
        lines = [f"llama_kv_cache: {f'CUDA{i}':>10} KV buffer size = "
                 f"{mib(memory(sh, req.context).kv_bytes):>8} MiB" for i, sh in enumerate(shares)]
        lines += Memory(req.spec, layout, opts, s.swa_full, flash).lines
    else:
        lines = list(mem.lines)
    return EngineReport(
        engine=NAME,
        budget_bytes=budget_bytes,
        weights_bytes=share.weights_bytes,
        overheads=(("compute buffers", compute), ("--fit margin", margin)),
        kv_pool_bytes=pools[binding],
        kv_tokens=layout.n_ctx,
        blocks=layout.cells * layout.streams,
        block_tokens=1,
        max_concurrency=float(max_seqs),
        max_sequences=max_seqs,
        max_context=max_ctx,
        fits=fits,
        log_lines=tuple(lines),
        command=" ".join(cmd),
        notes=tuple(notes),
        binding_stage=binding,
        extra={"n_ctx": layout.n_ctx, "cells_per_stream": layout.cells,
               "streams": layout.streams, "kv_bytes": mem.kv_bytes, "k_bytes": mem.k_bytes,
               "v_bytes": mem.v_bytes, "state_bytes": mem.state_bytes,
               "weights": weights.format},
    )


def _offload_layers(share: RankShare, mem: Memory, budget: int, compute: int, n_layers: int) -> int:
    per_layer = (share.weights_bytes + mem.kv_bytes + mem.state_bytes) // max(1, n_layers)
    room = budget - compute
    return max(0, min(n_layers, room // max(1, per_layer)))


def kv_bytes(spec: ModelSpec, ctx: int, n_seq: int, k: str, v: str, *, unified: bool = False,
             n_ubatch: int = N_UBATCH, swa_full: bool = False) -> Memory:
    """The caches llama.cpp allocates for a model (all layers on one device)."""
    opts = CacheOptions(kv_k=get_format(k), kv_v=get_format(v))
    return Memory(without_windows(spec), Layout(ctx, n_seq, unified, n_ubatch), opts, swa_full)


__all__ = ["FORMATS", "Layout", "Memory", "kv_bytes", "plan"]
