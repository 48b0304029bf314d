"""llama.cpp (llama-server) allocation rules.

Sources read (ggml-org/llama.cpp): ``src/llama-context.cpp`` (n_ctx padded to 256; without a
unified cache each of the ``--parallel`` sequences gets ``n_ctx / n_seq`` cells of its own
stream), ``src/llama-kv-cache.cpp`` (per layer ``ggml_row_size(type, n_embd_k_gqa) × cells``
for K and V; the ``llama_kv_cache: size = ...`` line), ``src/llama-kv-cache-iswa.cpp``
(sliding-window layers keep ``min(n_ctx, PAD256(n_swa·(unified ? n_seq : 1) + n_ubatch))``
cells unless ``--swa-full``), ``src/llama-memory-recurrent.cpp`` and ``src/llama-hparams.cpp``
(recurrent state: R = conv, S = ssm, f32, one cell per sequence), ``common/arg.cpp`` (``--fit``
leaves 1024 MiB free per device). DeepSeek MLA caches the 576-value latent as K and no V.
DeepSeek Sparse Attention (``src/llama-kv-cache-dsa.cpp``, ``create_memory`` in
``src/llama-model.cpp``) adds a K-only cache of the indexer keys; DeepSeek-V4
(``src/llama-kv-cache-dsv4.cpp``) keeps a sliding latent, three compressed K-only caches and
float32 compressor states (docs/ENGINES.md L5a, L5b).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from typing import Any

from ..draft import DRAFT_TOKENS, check_vocab
from ..errors import InputError
from ..formats import KVFormat, get_format
from ..gguf_mix import MIXES
from ..hf import GEMMA3N_TYPES
from ..kv import CacheOptions
from ..model import LayerGroup, LayerKind, ModelSpec
from ..parallel import llamacpp_stage_layers
from ..plan import activation_width, largest, raw_overhead
from ..units import format_bytes
from ..weights import Weights, get_weight_format
from .base import (
    EngineReport,
    EngineRequest,
    EngineSettings,
    MiB,
    RankShare,
    check_format,
    has_kind,
    kind_layers,
    mib,
    rank_weights,
    refuse_architecture,
    refuse_layout,
    stage_pools,
)
from .llamacpp_host import ServerHost, row_bytes, server_host, token_bytes
from .llamacpp_lora import adapter_blocks, add_blocks
from .llamacpp_offload import (
    Block,
    Placement,
    blocks_for,
    fit_placement,
    offload_decode,
    offload_prefill,
    requested,
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
    # src/models/ouro.cpp unrolls the loops into num_loops × block_count logical layers that
    # share their weights, each with its own K/V: the cache is vLLM's, but how -ngl, -sm layer
    # and --fit place logical layers whose weights are shared was not traced
    "ouro": "how llama.cpp places Ouro's unrolled layers (loops × layers sharing their weights) "
            "on devices and in host memory",
    "lfm3": "a GGUF layout for LFM3 (no lfm3 architecture in the llama.cpp source read; its "
            "lfm2 one lays out LFM2's convolutions)",
    "step3p7": "a GGUF layout for Step-3.7-Flash (llama.cpp's converter registers "
               "Step3p5ForCausalLM, not Step3p7FlashForCausalLM, and reads "
               "num_attention_groups and moe_num_experts, which this config lacks)",
}
#: architectures llama.cpp has no LLM_ARCH for, by model_type (refuse_architecture): Zamba2's
#: shared attention blocks over the hidden state and the input embeddings (its support was an
#: open pull request, ggml-org/llama.cpp#21412, not merged in the source read); LongCat-Flash's
#: two attentions a layer (its ports, ggml-org/llama.cpp#19182 and #19167 for -Lite, were open
#: pull requests)
UNSUPPORTED = {
    "zamba2": ("Zamba2ForCausalLM", "llama.cpp has no Zamba2 architecture; vLLM runs it"),
    "longcat_flash": ("LongcatFlashForCausalLM", "llama.cpp has no LongCat-Flash architecture "
                      "(its port is an open pull request); vLLM and SGLang run it"),
    "longcat_flash_ngram": ("LongcatFlashNgramForCausalLM", "llama.cpp has no LongCat-Flash-Lite "
                            "architecture (its port is an open pull request); vLLM runs it"),
}
#: Kimi-K3 (KimiK3ForConditionalGeneration) runs as LLM_ARCH_KIMI_K3: the kimi-linear hybrid
#: memory (K-only 576-value MLA latent, KDA state in f32), sized like Kimi-Linear
LAYOUT_UNKNOWN_ARCH: dict[str, str] = {}
#: llama.cpp's gemma3n architecture gives K and V to the first 20 layers whatever the model
#: (src/models/gemma3n.cpp load_arch_hparams: n_layer_kv_from_start = 20); the rest read the
#: cache of the last earlier layer of their kind (hparams.has_kv)
GEMMA3N_KV_LAYERS = 20
#: GGUF weight types kvplan can price
WEIGHTS = {"f32", "f16", "bf16", "mxfp4", *MIXES}


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


def window_cells(spec: ModelSpec, layout: Layout, swa_full: bool) -> int:
    """Cells a long sequence holds in the window layers' cache (0 under --swa-full or without
    window layers): a stream's cells, at most its own context; what a context checkpoint of
    it saves (llamacpp_host)."""
    window = spec.widest_window
    if swa_full or not window:
        return 0
    return min(layout.cells if not layout.unified else layout.n_ctx // layout.n_seq,
               layout.swa_cells(window, False))


@dataclass(frozen=True)
class Cache:
    """One ``llama_kv_cache`` object: its cells a stream, streams, layers and bytes."""

    name: str
    cells: int
    streams: int
    layers: int
    k_bytes: int
    v_bytes: int

    @property
    def bytes(self) -> int:
        return self.k_bytes + self.v_bytes


#: DeepSeek-V4's compression ratios and the caches llama_kv_cache_dsv4 builds for them
#: (src/llama-kv-cache-dsv4.cpp: DSV4_CSA_RATIO, DSV4_HCA_RATIO)
DSV4_CSA, DSV4_HCA = 4, 128


@dataclass(frozen=True)
class Part:
    """One cache object as it logs itself: the lines before it allocates (``creating …``),
    its buffers (one a device holding any of its layers; ``what`` names them) and its
    ``size`` line. ``per_layer``: bytes a layer, by layer number."""

    head: tuple[str, ...]
    logger: str
    what: str
    per_layer: dict[int, int]
    size_line: str
    #: cells a stream holds (a recurrent state: one a sequence) and the streams
    cells: int = 1
    streams: int = 1

    def buffer_lines(self, devices: list[tuple[str, frozenset[int]]]) -> list[str]:
        """The buffer lines of this object with its layers on the named buffer types
        (``CUDA0``, ``CPU``): in name order (the ctx_map's strcmp comparator), a buffer type
        holding none of its layers printing nothing."""
        out = []
        for name, layers in sorted(devices):
            mine = [b for layer, b in self.per_layer.items() if layer in layers]
            if mine:
                out.append(f"{self.logger}: {name:>10} {self.what} buffer size = "
                           f"{mib(sum(mine)):>8} MiB")
        return out


def dsv4_entries(cells: int, ratio: int) -> int:
    """Rows a compressed cache needs for ``cells`` tokens (at least one)."""
    return max(1, -(-cells // ratio))


class Memory:
    """The caches llama.cpp allocates on one device, with its log lines."""

    def __init__(self, spec: ModelSpec, layout: Layout, opts: CacheOptions, swa_full: bool,
                 flash: bool = True):
        self.k, self.v = opts.kv_k.name, opts.kv_v.name
        self.lines: list[str] = []
        self.caches: list[Cache] = []
        #: the cache objects in the order llama.cpp builds them (Memory.split_lines)
        self.parts: list[Part] = []
        self._mark = 0
        #: DeepSeek-V4's compressor states by name (csa, hca, lid), float32 bytes
        self.states: dict[str, int] = {}
        self.kv_bytes = self.k_bytes = self.v_bytes = 0
        self.state_bytes = self.r_bytes = self.s_bytes = 0
        self.n_seq = layout.n_seq
        sparse = _sparse_kind(spec)
        self.sparse = bool(sparse)
        if sparse == "dsa":
            self._dsa(spec, layout)
        elif sparse == "dsv4":
            self._dsv4(spec, layout, swa_full)
        else:
            self._plain(spec, layout, opts, swa_full, flash)
        self.kv_bytes = self.k_bytes + self.v_bytes

    def cache(self, name: str) -> Cache:
        return next(c for c in self.caches if c.name == name)

    def _part(self, logger: str, what: str, per_layer: dict[int, int], cells: int = 1,
              streams: int = 1) -> None:
        """Close the cache object whose size line was just logged."""
        self.parts.append(Part(tuple(self.lines[self._mark:-1]), logger, what, per_layer,
                               self.lines[-1], cells, streams))
        self._mark = len(self.lines)

    def prompt_copies(self, layers: frozenset[int], context: int,
                      n_ubatch: int) -> int | None:
        """Bytes one sequence's prompt of ``context`` tokens moves between host memory and
        the card for the caches of ``layers`` when those blocks stay in host memory and the
        card computes their attention (a batch of 32 tokens or more offloads every op of a
        host-held block, and the scheduler's expansion puts its attention beside them;
        ggml-backend.cpp ggml_backend_sched_split_graph): each batch of ``n_ubatch`` tokens
        copies the K and V views over the cells in use (padded to 256) to the card, and the
        batch's new rows back; a recurrent block copies its state each batch. None where
        those blocks hold DeepSeek's sparse caches, whose views were not traced."""
        batches = range(0, context, n_ubatch)
        total = 0
        for part in self.parts:
            mine = sum(b for layer, b in part.per_layer.items() if layer in layers)
            if not mine:
                continue
            if self.sparse or part.what not in ("KV", "RS"):
                return None
            per_cell = mine // (part.cells * part.streams)
            if part.what == "RS":
                total += per_cell * len(batches)
                continue
            total += sum(per_cell * min(part.cells, pad(min(context, start + n_ubatch)))
                         for start in batches)
            total += per_cell * context
        return total

    def bytes_of(self, layers: frozenset[int]) -> int:
        """Bytes of every cache object's buffers that ``layers`` hold (a block's cache lives
        where the block does)."""
        return sum(b for part in self.parts for layer, b in part.per_layer.items()
                   if layer in layers)

    def split_lines(self, stages: list[frozenset[int]]) -> list[str]:
        """The log with the layers split over devices (-sm layer; device i holds stage i)."""
        return self.device_lines([(f"CUDA{i}", layers) for i, layers in enumerate(stages)])

    def device_lines(self, devices: list[tuple[str, frozenset[int]]]) -> list[str]:
        """The log with the layers on the named buffer types: each cache object logs its own
        buffer lines, then its size line, before the next object is created
        (llama_kv_cache, llama_memory_recurrent and llama_dsv4_comp_state constructors)."""
        out: list[str] = []
        for part in self.parts:
            out += [*part.head, *part.buffer_lines(devices), part.size_line]
        return out + self.lines[self._mark:]

    def _kv(self, name: str, cells: int, streams: int, members: list[LayerGroup],
            layers: int | None = None, v_bytes: int | None = None) -> None:
        """One llama_kv_cache over ``members``: K (and V) rows of every layer, cell and
        stream, and its ``size = …`` line."""
        k_bytes = v = 0
        per_layer: dict[int, int] = {}
        for g in members:
            k_row = row_bytes(self.k, g.n_kv_heads * g.head_dim_k) * cells * streams
            v_row = row_bytes(self.v, g.n_kv_heads * g.head_dim_v) * cells * streams if g.head_dim_v else 0
            k_bytes += g.count * k_row
            v += g.count * v_row
            for layer in g.layers:
                per_layer[layer] = per_layer.get(layer, 0) + k_row + v_row
        if layers is None:
            layers = sum(g.count for g in members)
        if v_bytes is not None:
            v = v_bytes
        self.caches.append(Cache(name, cells, streams, layers, k_bytes, v))
        self.lines.append(
            f"llama_kv_cache: size = {mib(k_bytes + v):>7} MiB ({cells:6d} cells, "
            f"{layers:3d} layers, {self.n_seq:2d}/{streams} seqs), "
            f"K ({self.k}): {mib(k_bytes):>7} MiB, V ({self.v}): {mib(v):>7} MiB")
        self._part("llama_kv_cache", "KV", per_layer, cells, streams)
        self.k_bytes += k_bytes
        self.v_bytes += v

    def _plain(self, spec: ModelSpec, layout: Layout, opts: CacheOptions, swa_full: bool,
               flash: bool) -> None:
        groups = [g for g in spec.groups_for(mtp=opts.mtp) if g.kind.is_attention]
        recurrent = [g for g in spec.groups_for(mtp=opts.mtp) if g.kind.is_recurrent]
        caches: list[tuple[str, int, list[LayerGroup]]] = []
        full = [g for g in groups if g.kind in (LayerKind.FULL, LayerKind.MLA, LayerKind.CROSS)]
        swa = [g for g in groups if g.kind in (LayerKind.SLIDING, LayerKind.CHUNKED)]
        if swa:
            window = max(g.window or 0 for g in swa)
            caches.append(("non-SWA", layout.cells, full))
            caches.append(("SWA", layout.swa_cells(window, swa_full), swa))
        elif groups or not recurrent:
            # a recurrent architecture (Mamba, RWKV) gets its recurrent memory alone
            # (llama_model::create_memory: llm_arch_is_recurrent)
            caches.append(("", layout.cells, full))
        for label, cells, members in caches:
            layers = v_bytes = None
            if spec.model_type == "nemotron-nas":
                # deci: every layer gets K and V tensors of n_head_kv(il) heads, a no-op or
                # linear attention layer 0 of them (src/llama-kv-cache.cpp); without flash
                # attention V is transposed and every layer's V padded to the widest
                # (TAG_V_CACHE_VARIABLE)
                layers = spec.decoder_layers
                widths = {g.n_kv_heads * g.head_dim_v for g in members}
                if not flash and (len(widths) > 1 or spec.cacheless_layers):
                    v_bytes = (layers * row_bytes(self.v, max(widths, default=0)) * cells
                               * layout.streams)
            if label:
                self.lines.append(f"llama_kv_cache_iswa: creating {label:>7} KV cache, "
                                  f"size = {cells} cells")
            self._kv(label, cells, layout.streams, members, layers, v_bytes)
        if recurrent:
            cells = max(1, layout.n_seq)
            r = sum(g.count * g.conv_state_values for g in recurrent) * 4 * cells
            s = sum(g.count * (g.state_values - g.conv_state_values) for g in recurrent) * 4 * cells
            self.state_bytes = r + s
            self.r_bytes, self.s_bytes = r, s
            # hparams.n_layer: the GGUF's block_count, its next-n (MTP) blocks included when
            # the file carries them (--mtp)
            n_layer = spec.decoder_layers + (spec.mtp_layers if opts.mtp else 0)
            # the size line as builds from b9191 print it (llama-memory-recurrent.cpp, MTP
            # support #22673): the snapshot rows a sequence keeps for speculative rollback,
            # n_rs_seq, follow the sequences; 0 without a draft
            self.lines.append(
                f"llama_memory_recurrent: size = {mib(r + s):>7} MiB ({cells:6d} cells, "
                f"{n_layer:3d} layers, {cells:2d} seqs {0:2d} rs_seq), "
                f"R (f32): {mib(r):>7} MiB, S (f32): {mib(s):>7} MiB")
            self._part("llama_memory_recurrent", "RS",
                       {layer: g.state_values * 4 * cells for g in recurrent for layer in g.layers},
                       cells)

    def _dsa(self, spec: ModelSpec, layout: Layout) -> None:
        # llama_kv_cache_dsa (src/llama-kv-cache-dsa.cpp): the MLA latent cache of the
        # decoder's layers (create_memory's filter_mla drops the GGUF's MTP block), then the
        # indexer keys as a second K-only cache of one head of indexer_head_size values over
        # the layers that run their own indexer (filter_lid), both of the main cache's cells
        # and streams
        groups = spec.groups_for(mtp=False)
        for name, kind in (("main", LayerKind.MLA), ("indexer", LayerKind.INDEXER)):
            self.lines.append(f"llama_kv_cache_dsa: creating {name} KV cache, "
                              f"size = {layout.cells} cells")
            self._kv(name, layout.cells, layout.streams, [g for g in groups if g.kind is kind])

    def _dsv4(self, spec: ModelSpec, layout: Layout, swa_full: bool) -> None:
        # llama_kv_cache_dsv4 (src/llama-kv-cache-dsv4.cpp): one stream a sequence whatever
        # --kv-unified, a K-only iSWA cache of the latent (every layer sliding, so its
        # non-SWA half holds none), K-only caches of ceil(cells / ratio) rows padded to 256
        # for the ratio-4 latents, ratio-128 latents and ratio-4 indexer keys, and float32
        # compressor states of kv and score rows, one plane a stream
        groups = spec.groups_for(mtp=False)
        streams = layout.n_seq
        cells = layout.cells
        sliding = [g for g in groups if g.kind is LayerKind.SLIDING]
        window = max((g.window or 0 for g in sliding), default=0)
        swa = cells if swa_full else pad(min(cells, window + layout.n_ubatch))
        self.lines.append("llama_kv_cache_dsv4: creating DSV4 raw KV cache")
        self.lines.append(f"llama_kv_cache_iswa: creating non-SWA KV cache, size = {cells} cells")
        self._kv("non-SWA", cells, streams, [])
        self.lines.append(f"llama_kv_cache_iswa: creating     SWA KV cache, size = {swa} cells")
        self._kv("SWA", swa, streams, sliding)
        csa = [g for g in groups if g.kind is LayerKind.COMPRESSED and g.ratio == DSV4_CSA]
        hca = [g for g in groups if g.kind is LayerKind.COMPRESSED and g.ratio == DSV4_HCA]
        lid = [g for g in groups if g.kind is LayerKind.INDEX]
        for name, label, ratio, members in (("csa", "CSA compressed", DSV4_CSA, csa),
                                            ("hca", "HCA compressed", DSV4_HCA, hca),
                                            ("lid", "lightning-indexer", DSV4_CSA, lid)):
            rows = dsv4_entries(cells, ratio)
            self.lines.append(f"llama_kv_cache_dsv4: creating DSV4 {label} KV cache, "
                              f"size = {rows} cells")
            self._kv(name, pad(rows), streams, members)
        latent = max((g.head_dim_k for g in csa + hca), default=0)
        index = max((g.head_dim_k for g in lid), default=0)
        states = (("csa", "CSA", DSV4_CSA, 2 * DSV4_CSA, 2 * latent, csa),
                  ("hca", "HCA", DSV4_HCA, DSV4_HCA, latent, hca),
                  ("lid", "lightning-indexer", DSV4_CSA, 2 * DSV4_CSA, 2 * index, lid))
        for name, label, ratio, rows, width, members in states:
            layers = sum(g.count for g in members)
            size = 2 * width * rows * 4 * streams * layers
            self.state_bytes += size
            self.states[name] = size
            self.lines.append(f"llama_kv_cache_dsv4: creating DSV4 {label} compressor state")
            self.lines.append(
                f"llama_dsv4_comp_state: {name} ratio = {ratio}, state = {rows} x {width}, "
                f"streams = {streams}, rs_seq = 0, layers = {layers}, size = {mib(size):>7} MiB")
            self._part("llama_dsv4_comp_state", f"DSV4 {name} state",
                       {layer: 2 * width * rows * 4 * streams for g in members
                        for layer in g.layers})


def _notes(opts: CacheOptions, flash_attn: bool) -> list[str]:
    notes = []
    if flash_attn and (opts.kv_k.name != opts.kv_v.name
                       or opts.kv_k.name not in ("f16", "bf16", "q8_0", "q4_0")):
        notes.append("CUDA flash attention supports f16/bf16/q8_0/q4_0 with K type = V type "
                     "unless built with GGML_CUDA_FA_ALL_QUANTS; other pairs run on the CPU")
    return notes


#: the llama.cpp revision kvplan's DeepSeek Sparse Attention and DeepSeek-V4 caches follow
#: (docs/ENGINES.md L5a, L5b): master @3f545bec (2026-08-22)
SPARSE_COMMIT = "3f545bec (2026-08-22)"


#: the models each sparse cache kind (_sparse_kind) belongs to, for messages
SPARSE_LABELS = {"dsa": "DeepSeek Sparse Attention", "dsv4": "DeepSeek-V4"}


def _sparse_kind(spec: ModelSpec) -> str:
    """'dsa' for DeepSeek Sparse Attention (an indexer key cache beside the MLA latent),
    'dsv4' for DeepSeek-V4's compressed caches, '' for anything else."""
    kinds = {g.kind for g in spec.groups}
    if LayerKind.INDEXER in kinds:
        return "dsa"
    if LayerKind.COMPRESSED in kinds:
        return "dsv4"
    return ""


def _check_same_types(spec: ModelSpec, sparse: str, opts: CacheOptions) -> None:
    """llama_init_from_model refuses -ctk != -ctv where hparams.is_mla() (every model whose
    cache is the K-only MLA latent, the sparse ones included) or the arch is DEEPSEEK4
    (src/llama-context.cpp, since b10217): refused here in one line."""
    if opts.kv_k.name == opts.kv_v.name:
        return
    if sparse:
        label = SPARSE_LABELS[sparse]
    elif has_kind(spec, LayerKind.MLA):
        label = "MLA"
    else:
        return
    raise InputError(f"llama.cpp (since b10217) refuses different K ({opts.kv_k.name}) and V "
                     f"({opts.kv_v.name}) cache types for {label} models, whose cache is "
                     "K only: give -ctk and -ctv the same type", field="kv_v")


def _check_sparse(spec: ModelSpec, sparse: str, opts: CacheOptions) -> None:
    """Refuse, in one line, what llama.cpp does not build for these caches."""
    label = SPARSE_LABELS[sparse]
    if opts.mtp:
        raise InputError(f"llama.cpp keeps the MTP layers of {label} models in a separate draft "
                         "context, which kvplan does not size: leave out --mtp", field="mtp")
    if sparse == "dsv4":
        ratios = {g.ratio for g in spec.groups if g.kind is LayerKind.COMPRESSED}
        index = {g.ratio for g in spec.groups if g.kind is LayerKind.INDEX}
        if not ratios <= {DSV4_CSA, DSV4_HCA} or not index <= {DSV4_CSA}:
            raise InputError("llama.cpp's DeepSeek-V4 cache holds compression ratios 4 and 128 "
                             f"only, this model has {sorted(ratios | index)}", field="engine")
        if not any(g.kind is LayerKind.SLIDING for g in spec.groups_for(mtp=False)):
            raise InputError("llama.cpp's DeepSeek-V4 cache needs the sliding-window latent "
                             "on every layer (sliding_window)", field="engine")


def _sparse_notes(spec: ModelSpec, sparse: str, unified: bool, n_seq: int) -> list[str]:
    if sparse == "dsa" and spec.model_type == "axk2":
        # src/models/axk2.cpp @04fbdf3a: build_attn_inp_k_dsa, every layer its own indexer;
        # conversion/axk2.py appends the NextN block unless --no-mtp
        return ["llama.cpp runs A.X-K2 as axk2 (src/models/axk2.cpp @04fbdf3a): the latent as "
                "a K-only cache and the indexer keys as a second K-only cache in the -ctk type, "
                "in every decoder layer; its converter appends the NextN block to the GGUF "
                "(--no-mtp drops it), which the DSA cache leaves out as GLM-5's"]
    if sparse == "dsa" and spec.model_type == "hy_v4":
        # src/llama-model.cpp create_memory: llama_kv_cache_dsa, filter_lid is_indexer_full;
        # conversion's HYV4Model drops model.mtp_layers.*
        return ["llama.cpp runs Hy4 as hy_v4 (ggml-org/llama.cpp#28127, merged 2026-08-31): "
                "the indexer keys are a second K-only cache in the -ctk type, in the layers "
                "indexer_types lists \"full\"; its converter drops the MTP layers"]
    if sparse == "dsa":
        older = ("builds before b10237 (DeepSeek-V3.2) or b10184 (GLM-5.x) also cache the GGUF's "
                 "MTP block")
        mla = kind_layers(spec, LayerKind.MLA)
        if kind_layers(spec, LayerKind.INDEXER) < mla:
            older += (f", and builds before b10259 keep indexer keys in all {mla} layers, not "
                      "only those that run their own indexer")
        return [f"llama.cpp master @{SPARSE_COMMIT}, since b10259: the indexer keys are a second "
                f"K-only cache in the -ctk type; {older}"]
    if sparse == "dsv4":
        notes = [f"llama.cpp master @{SPARSE_COMMIT} (DeepSeek-V4 since b9840): compressed caches "
                 "of ceil(cells / ratio) rows padded to 256, compressor state in f32; "
                 "speculative decoding (n_rs_seq) adds state planes not counted here",
                 "llama.cpp's DeepSeek-V4 compute buffer has grown with the context in some "
                 "builds (its lightning-indexer scores: ggml-org/llama.cpp#25468, #27680); the "
                 "compute-buffer figure here does not"]
        if unified and n_seq > 1:
            notes.append("llama.cpp's DeepSeek-V4 cache ignores --kv-unified: each of the "
                         f"{n_seq} sequences gets a stream of all n_ctx cells")
        return notes
    return []


def without_windows(spec: ModelSpec, swa_full: bool = False) -> ModelSpec:
    """``spec`` as llama.cpp runs it: the sliding-window layers of an architecture in
    NO_WINDOW_TYPES hold a full cache; with ``swa_full`` (--swa-full, or any engine that keeps
    every token in every layer) every sliding-window and chunked layer's cache holds the whole
    context too."""
    bounded = (LayerKind.SLIDING, LayerKind.CHUNKED)
    if ((spec.model_type not in NO_WINDOW_TYPES and not swa_full)
            or not any(g.kind in bounded for g in spec.groups)):
        return spec
    groups = tuple(replace(g, kind=LayerKind.FULL, window=None, dropped_kind=g.kind.value,
                           dropped_window=g.window) if g.kind in bounded
                   else g for g in spec.groups)
    return replace(spec, groups=groups)


def plan(req: EngineRequest) -> EngineReport:
    refuse_architecture(NAME, req.spec, UNSUPPORTED)
    refuse_layout(NAME, req.spec, LAYOUT_UNKNOWN, LAYOUT_UNKNOWN_ARCH)
    own = req.spec.decoder_layers - req.spec.cacheless_layers
    if req.spec.model_type in GEMMA3N_TYPES and own != GEMMA3N_KV_LAYERS:
        raise InputError(f"llama.cpp's gemma3n architecture caches the first "
                         f"{GEMMA3N_KV_LAYERS} layers (n_layer_kv_from_start), this config "
                         f"{own} (num_kv_shared_layers): it would not run as configured; "
                         "use --engine vllm or raw", field="engine")
    if req.spec.draft is not None:
        # the draft model's context is its own (_draft_context), not the target's draft layers
        req = replace(req, cache=replace(req.cache, mtp=False))
    windowed = req.spec
    req = replace(req, spec=without_windows(req.spec))
    s = req.settings
    opts = req.cache
    k = check_format(NAME, opts.kv_k, FORMATS, "kv_k")
    v = check_format(NAME, opts.kv_v, FORMATS, "kv_v")
    sparse = _sparse_kind(req.spec)
    _check_same_types(req.spec, sparse, opts)
    if sparse:
        _check_sparse(req.spec, sparse, opts)
    if opts.hot_format is not None or opts.keep_fraction < 1:
        raise InputError("llama.cpp has no hot/cold mix or token eviction", field="engine")
    if (req.weights is not None and str(req.weights).strip().lower() != "auto"
            and get_weight_format(req.weights).name not in WEIGHTS):
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
    # the compute buffers hold one ubatch's activations and logits (llama-context.cpp reserves
    # the graph for n_ubatch tokens, each an output): kvplan's estimate for 512, scaled
    compute = (raw_overhead(req.spec).bytes - 512 * MiB) * n_ubatch // N_UBATCH
    # --lora: each adapter's pairs sit with the tensors they adapt (llamacpp_lora): a block's
    # with the block, the output layer's with it, the input embedding's in host memory
    n_dec, n_pp = req.spec.decoder_layers, req.parallel.pp
    a_blocks, a_out, a_in = (adapter_blocks(s.lora_adapters, n_dec) if s.lora_adapters
                             else ((), 0, 0))
    # the adapters' bytes on each card (with every layer on the cards: its stage's blocks',
    # the output layer's on the last)
    adapter_cards = [sum(a_blocks[i].total for i in STAGE_SPLIT(n_dec, n_pp, sh.stage))
                     + (a_out if sh.stage == n_pp - 1 else 0)
                     for sh in shares] if a_blocks else [0] * len(shares)
    shares = [replace(sh, weights_bytes=sh.weights_bytes + a)
              for sh, a in zip(shares, adapter_cards, strict=True)]
    # -md: the draft model, every layer on the card (-ngld's default), in a context of its own
    # with the target's n_ctx, sequences, ubatch and flash attention, its cache in
    # -ctkd/-ctvd's f16 (llama_draft)
    draft = _draft_context(req, opts, n_ubatch)
    draft_compute = draft.compute if draft is not None else 0
    draft_card = draft.card_bytes if draft is not None else 0
    compute += draft_compute
    shares = [replace(sh, weights_bytes=sh.weights_bytes + draft_card) for sh in shares]

    def memory(share: RankShare, ctx: int, n_seq: int | None = None) -> Memory:
        return Memory(share.spec, Layout(ctx, n_seq or req.sequences, unified, n_ubatch), opts,
                      s.swa_full, flash)

    def cache_bytes(share: RankShare, ctx: int, n_seq: int | None = None) -> int:
        m = memory(share, ctx, n_seq)
        return m.kv_bytes + m.state_bytes

    # a given pool is every stage's budget for its own cache
    pools = stage_pools(req, shares, margin + compute)

    blocks, blocks_from = blocks_for(req.spec, weights)
    if a_blocks:
        blocks = add_blocks(blocks, a_blocks)
    n_blocks = req.spec.decoder_layers
    nd = req.parallel.pp
    # what the cards hold with every layer offloaded: all but the input embedding
    card_total = (shares[0].weights_bytes if nd == 1 else
                  weights.bytes - weights.embedding_bytes - weights.per_layer_embedding_bytes
                  + weights.head_bytes + sum(adapter_cards))
    output_bytes = max(0, card_total - sum(b.total for b in blocks))
    from ..hf import _UNGATED_MLP
    place = requested(n_blocks, s.n_gpu_layers, s.n_cpu_moe, bool(weights.expert_bytes), nd,
                      s.tensor_split, s.override_tensor,
                      gated=req.spec.model_type not in _UNGATED_MLP)
    # a command that sets -ngl or a tensor override turns --fit's layer search off
    asked = place.flags if place is not None else ()
    shared = next((g for g in req.gpus if g.unified), None)
    if place is not None and shared is not None and not place.everything:
        # -ngl 99 (every layer on the GPU) says what the plan does anyway; fewer say nothing
        # a shared memory can give
        where = "Apple silicon" if shared.vendor == "apple" else shared.chip
        raise InputError(f"on {where} the CPU and the GPU share one memory, so layers kept in "
                         "host memory (ngl, n_cpu_moe) free none of it: plan without them"
                         + (", or raise the GPU's share of it" if shared.usable_fraction < 1
                            and shared.vendor != "apple" else ""), field="ngl")
    if place is not None and place.everything and s.tensor_split is None:
        place = None

    def whole_memory(ctx: int, n_seq: int | None = None) -> Memory:
        """Every layer's caches (where a placement puts them is its business)."""
        return Memory(req.spec, Layout(ctx, n_seq or req.sequences, unified, n_ubatch), opts,
                      s.swa_full, flash)

    if place is not None:
        card_bytes, _ = place.place_bytes(blocks, output_bytes)
        if a_blocks:
            adapter_cards = place.place_bytes(a_blocks, a_out)[0]
        held = [frozenset(r) for r in place.device_ranges()]
        shares = [RankShare(d, req.spec, card_bytes[d], req.gpu_for(d)) for d in range(nd)]
        pools = stage_pools(req, shares, margin + compute)

        def cache_bytes(share: RankShare, ctx: int, n_seq: int | None = None) -> int:
            return whole_memory(ctx, n_seq).bytes_of(held[share.stage])

    if draft is not None:
        target_cache = cache_bytes

        def cache_bytes(share: RankShare, ctx: int, n_seq: int | None = None) -> int:
            d = draft.memory(ctx, n_seq or req.sequences, unified, s.swa_full, flash)
            return target_cache(share, ctx, n_seq) + d.kv_bytes + d.state_bytes

    host_cap = s.host_memory_bytes if place is not None else None

    # a token's rows in every attention layer: what an unlimited prompt cache holds a token
    per_token = token_bytes((g for g in req.spec.groups_for(mtp=False) if g.kind.is_attention),
                            opts)

    def server(ctx: int, n_seq: int | None = None) -> ServerHost:
        """What llama-server itself keeps in host memory (llamacpp_host): its prompt cache
        and its slots' context checkpoints."""
        n = n_seq or req.sequences
        lay = Layout(ctx, n, unified, n_ubatch)
        return server_host(req.spec, opts, swa_cells=window_cells(req.spec, lay, s.swa_full),
                           slots=n, n_ctx=lay.n_ctx,
                           cache_ram_mib=s.cache_ram_mib,
                           # DeepSeek-V4's compressed caches' partial states are not traced
                           ctx_checkpoints=0 if sparse == "dsv4" else s.ctx_checkpoints,
                           kv_bytes_per_token=per_token)
    # the placement's weights in host memory, the input embedding among them
    host_weights = (place.split(blocks, output_bytes)[1] + weights.input_bytes + a_in
                    if place is not None else 0)

    def host_need(ctx: int, n_seq: int | None = None) -> int:
        """Host memory a placement fills: its weights there, the caches of the blocks it
        keeps there and llama-server's prompt cache and context checkpoints (server)."""
        assert place is not None
        m = whole_memory(ctx, n_seq)
        # the prompt cache fills to its limit as conversations are saved, and a long
        # conversation fills its slot's checkpoints (public logs print "32 of 32")
        return (host_weights + m.kv_bytes + m.state_bytes - m.bytes_of(place.gpu_blocks)
                + server(ctx, n_seq).total_bytes)

    def ok(ctx: int, n_seq: int | None = None) -> bool:
        if ctx == 0:
            return True
        if host_cap is not None and host_need(ctx, n_seq) > host_cap:
            return False
        return all(cache_bytes(sh, ctx, n_seq) <= pool
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
    notes += _sparse_notes(req.spec, sparse, unified, req.sequences)
    if max_seqs == MAX_SEQ:
        notes.append(f"{MAX_SEQ} sequences at this context is llama.cpp's most (-np); more "
                     "would fit in memory")
    extra: dict[str, Any] = {}
    fit = None
    whole = whole_memory(req.context)
    gpus = [req.gpu_for(d) for d in range(nd)]
    if draft is not None and not fits:
        notes.append("llama-server's --fit (on by default) counts the draft too; the layers "
                     "it would then keep in host memory are not planned with a draft model")
    if (not asked and req.kv_budget_bytes is None and not fits and draft is None
            and all(g is not None and not g.unified for g in gpus)):
        def card_need(p: Placement) -> list[int]:
            cards, _ = p.place_bytes(blocks, output_bytes)
            return [c + whole.bytes_of(frozenset(r)) + compute
                    for c, r in zip(cards, p.device_ranges(), strict=True)]

        fit = fit_placement(n_blocks, blocks, card_need,
                            [g.usable_bytes - margin for g in gpus if g is not None])
        cards = "card" if nd == 1 else "cards"
        if fit is None:
            alone = ("the cards' compute buffers and targets alone exceed them" if nd > 1
                     else "the card's compute buffers and target alone exceed it")
            notes.append(f"llama-server's --fit (on by default) would find no placement: {alone}")
        else:
            extra["fit"] = _placement_dict(req, fit, blocks, output_bytes, whole, weights,
                                           blocks_from)
            card = extra["fit"]["card_weights_bytes"]
            host = extra["fit"]["host_weights_bytes"] - weights.input_bytes
            decode, prefill = extra["fit"]["decode"], extra["fit"]["prefill"]
            rate = (f", decoding ≈ {decode['tokens_per_s_per_sequence']:,.1f} tokens/s per "
                    f"sequence with host memory at {decode['host_bandwidth_bytes_per_s'] / 1e9:g}"
                    " GB/s" if decode else "")
            if prefill:
                rate += (f", prefilling ≈ {prefill['tokens_per_s']:,.0f} tokens/s copying over "
                         f"the host link at {prefill['host_link_bytes_per_s'] / 1e9:.1f} GB/s")
            split = (f" ({fit.describe_devices()}: -ts "
                     f"{','.join(str(c) for c in fit.tensor_split)})" if nd > 1 else "")
            notes.append(f"everything does not fit: llama-server's --fit (on by default) keeps "
                         f"{fit.describe()} in host memory ({format_bytes(host, 2)} of weights "
                         f"beside the input embedding), {format_bytes(card, 2)} of weights on "
                         f"the {cards}{split}{rate}; plan such a split with ngl or n_cpu_moe"
                         + (" and tensor_split" if nd > 1 else ""))
    # what llama-server keeps in host memory at the plan's context and sequences
    srv = server(req.context)
    if place is not None:
        extra["placement"] = _placement_dict(req, place, blocks, output_bytes, whole,
                                             weights, blocks_from)
        placed = extra["placement"]
        if place.on_cards:
            notes.append(f"{place.how} splits the layers over the cards: "
                         f"{place.describe_devices()}")
        else:
            notes.append(f"{place.how} keeps {place.describe()} in host memory: "
                         f"{format_bytes(placed['host_weights_bytes'] - weights.input_bytes, 2)}"
                         f" of weights and {format_bytes(placed['host_cache_bytes'], 2)} of "
                         "cache there, beside the input embedding"
                         + (f"; over the cards, {place.describe_devices()}" if nd > 1 else ""))
        if host_cap is not None:
            need = host_need(req.context)
            extra["placement"]["host_bytes"] = need
            cache = srv.total_bytes
            notes.append(f"host memory: {format_bytes(need, 2)} of the "
                         f"{format_bytes(host_cap, 2)} given"
                         + (f" (llama-server's prompt cache and checkpoints "
                            f"{format_bytes(cache, 2)} of it)" if cache else "")
                         + ("" if need <= host_cap else
                            " — too little once the prompt cache and checkpoints fill: the "
                            "system would swap (--cache-ram and --ctx-checkpoints lower them)"
                            if need - cache <= host_cap else
                            " — too little: llama.cpp would page the weights from disk or fail "
                            "to allocate the caches"))
    extra["server_host"] = srv.as_dict()
    said = srv.note()
    if said and shared is not None:
        # one pool: what the GPU may take and what the process keeps beside it
        rest = shared.total_bytes - shared.usable_bytes
        system = "macOS" if shared.vendor == "apple" else "the system"
        where = "a Mac" if shared.vendor == "apple" else shared.chip
        said += (f"; on {where} that is the same unified memory as the GPU's: "
                 + (f"of its {format_bytes(shared.total_bytes, 2)} the GPU may take "
                    f"{format_bytes(shared.usable_bytes, 2)}, which leaves "
                    f"{format_bytes(rest, 2)} for {system}, the apps and these"
                    + (" — too little once they fill: the system would swap"
                       if srv.total_bytes > rest else "")
                    if rest > 0 else
                    f"the plan's budget is all {format_bytes(shared.total_bytes, 2)} of it, "
                    f"so these and {system} take theirs from the same memory"))
    if said:
        notes.append(said + (" (DeepSeek-V4's context checkpoints not sized)"
                             if sparse == "dsv4" else ""))
    ck = req.spec.checkpoint
    # a file of the model's name and its type, as GGUF files are named (Qwen3-8B-Q4_K_M.gguf)
    tag = f"-{weights.format.upper()}" if weights.format in WEIGHTS else ""
    load = ck.load if ck is not None and ck.load else (
        f"-m {shlex.quote(f'{req.spec.name}{tag}.gguf')}")
    if (req.spec.params.encoder and req.cache.encoder
            and not weights.source.startswith("GGUF")):
        # the vision tower the plan counts: the projector file beside the model's
        load += f" --mmproj {shlex.quote(f'{req.spec.name}-mmproj-F16.gguf')}"
    if req.spec.params.encoder and req.cache.encoder:
        # tools/mtmd/clip.cpp: the projector's warmup reserves its compute buffer for the
        # largest image it takes (alloc_compute_meta), a graph kvplan does not size
        notes.append("the projector (--mmproj) also reserves a compute buffer at start-up for "
                     "the largest image it takes (\"alloc_compute_meta: … compute buffer "
                     "size\"), which kvplan does not count; --no-mmproj serves text only")
    cmd = [f"llama-server {load} -c {layout.n_ctx} -np {req.sequences}",
           f"-ctk {k} -ctv {v}", f"-fa {'on' if flash else 'off'}"]
    # with everything on the card -ngl 999; where it does not fit, -ngl left unset so that
    # --fit places the layers (a set -ngl turns its layer search off)
    if asked:
        cmd += list(asked)
    elif fit is None:
        cmd.append("-ngl 999")
    if (place is not None and not place.on_cards) or fit is not None:
        # host-held weights in pinned memory (CUDA_Host buffers) rather than mmap'd pageable
        # pages: the card copies them for each batch of 32 tokens or more at its link's rate,
        # pageable ones through a bounce buffer at a fraction of it
        cmd.append("--no-mmap")
        notes.append("--no-mmap keeps the host-held weights in pinned memory, which the card "
                     "copies at its link's rate for every batch of 32 tokens or more; mmap'd "
                     "weights are pageable and copy at a fraction of it (on the H200 machine "
                     "7 GB/s against 55: bench/results/host-link-h200.json)")
    if n_ubatch != N_UBATCH:
        cmd.append(f"-ub {n_ubatch}")
    if s.swa_full:
        cmd.append("--swa-full")
    if unified:
        cmd.append("--kv-unified")
    if margin != FIT_MARGIN:
        cmd.append(f"--fit-target {-(-margin // MiB)}")
    if s.cache_ram_mib is not None:
        cmd.append(f"--cache-ram {s.cache_ram_mib}")
    if s.ctx_checkpoints is not None:
        cmd.append(f"--ctx-checkpoints {s.ctx_checkpoints}")
    if nd > 1:
        # an even split, unless --fit chooses it (a set -ts turns --fit's search off)
        cmd.append("-sm layer" if fit is not None or s.tensor_split is not None
                   else f"-sm layer -ts {','.join(['1'] * nd)}")
    if place is not None and (nd > 1 or place.gpu_blocks != frozenset(range(n_blocks))):
        # each cache object's buffers on the cards that hold its layers and in host memory
        host_blocks = frozenset(range(n_blocks)) - place.gpu_blocks
        lines = whole.device_lines([(f"CUDA{d}", frozenset(r))
                                    for d, r in enumerate(place.device_ranges())]
                                   + [("CPU", host_blocks)])
    elif nd > 1:
        # each cache object over every layer, its buffers on the devices that hold its
        # layers: its buffer lines, then its own size line, object by object
        stages = [frozenset(i for g in sh.spec.groups for i in g.layers) for sh in shares]
        lines = Memory(req.spec, layout, opts, s.swa_full, flash).split_lines(stages)
    else:
        lines = list(mem.lines)
    if draft is not None:
        d_mem = draft.memory(req.context, req.sequences, unified, s.swa_full, flash)
        cmd.append(f"{draft.load} --spec-type {draft.spec_type}")
        lines += list(d_mem.lines)
        extra["draft"] = {"kv_bytes": d_mem.kv_bytes, "state_bytes": d_mem.state_bytes,
                          "weights_bytes": draft_card, "compute_bytes": draft_compute}
        notes.append(f"draft {draft.name} (-md, --spec-type {draft.spec_type}): every layer on the "
                     f"card (-ngld's default), {format_bytes(draft_card, 2)} of weights there; "
                     f"a context of its own with the target's {layout.n_ctx:,} cells and "
                     f"{req.sequences:,} sequence(s), its cache in {draft.opts.kv_k.name} "
                     + ("(-ctkd/-ctvd) " if s.draft_kv else "(-ctkd/-ctvd's default) ")
                     + f"{format_bytes(d_mem.kv_bytes + d_mem.state_bytes, 2)}, and compute "
                     f"buffers ≈ {format_bytes(draft_compute, 2)} (in the compute buffers "
                     "above); llama-server drafts "
                     f"{s.speculative_tokens or DRAFT_TOKENS} tokens a round "
                     "(--spec-draft-n-max)")
        if draft.spec_type == "draft-eagle3":
            notes.append(f"the EAGLE-3 head borrows the target's token embedding; its compute "
                         "buffers hold logits for every token of a ubatch (with the target's "
                         "three layer inputs it takes, in the figure above), and host memory "
                         f"holds {format_bytes(draft.host_bytes, 2)} more (its output buffer "
                         "with backend sampling, --no-spec-draft-backend-sampling shrinks it, "
                         f"and the target's copied hidden states for a {N_BATCH}-token batch); "
                         "llama-server's --fit measures the target without a head that has no "
                         "embedding of its own")
    if s.lora_adapters:
        for a in s.lora_adapters:
            cmd.append(f"--lora {shlex.quote(a.name)}")
        on_cards = sum(adapter_cards)
        total_a = sum(a.total for a in s.lora_adapters)
        extra["lora_adapters"] = {"files": [a.name for a in s.lora_adapters],
                                  "bytes": total_a, "card_bytes": adapter_cards}
        notes.append(f"--lora: {format_bytes(total_a, 2)} of adapter tensors, each pair with "
                     f"the tensor it adapts: {format_bytes(on_cards, 2)} on the "
                     f"card{'s' if nd > 1 else ''}"
                     + (f", {format_bytes(total_a - on_cards, 2)} in host memory"
                        if total_a > on_cards else ""))
    return EngineReport(
        engine=NAME,
        budget_bytes=budget_bytes,
        weights_bytes=share.weights_bytes - adapter_cards[binding],
        overheads=(("compute buffers", compute), ("--fit margin", margin),
                   *([("LoRA adapters", adapter_cards[binding])] if s.lora_adapters else [])),
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
               "weights": weights.format, **extra},
    )


@dataclass(frozen=True)
class _Draft:
    """llama-server's draft model (-md): its spec as llama.cpp caches it, the bytes of it on
    the card, its compute buffers and how the command loads it."""

    name: str
    spec: ModelSpec
    opts: CacheOptions
    n_ubatch: int
    card_bytes: int
    compute: int
    load: str
    #: --spec-type: draft-simple for a draft model, draft-eagle3 for an EAGLE-3 head
    spec_type: str = "draft-simple"
    #: host memory the draft adds (an EAGLE-3 head's output buffer and the target's hidden
    #: states copied out for it)
    host_bytes: int = 0

    def memory(self, ctx: int, n_seq: int, unified: bool, swa_full: bool,
               flash: bool) -> Memory:
        """The draft context's caches: the target's n_ctx and sequences
        (common/speculative.cpp: n_ctx = llama_n_ctx(ctx_tgt), n_seq_max = n_parallel)."""
        return Memory(self.spec, Layout(ctx, n_seq, unified, self.n_ubatch), self.opts,
                      swa_full, flash)


def draft_cache_format(settings: EngineSettings) -> KVFormat:
    """The draft context's cache type: -ctkd/-ctvd (kvplan's draft_kv), f16 by default
    whatever -ctk/-ctv are."""
    return get_format(settings.draft_kv or "f16", field="draft_kv")


#: model types whose llama.cpp graph hands an EAGLE-3 head the inputs of three layers
#: (llama-graph.cpp's layer-input outputs: llama, qwen3, qwen3moe, qwen35, qwen35moe,
#: qwen3next, gemma4, gpt-oss, minimax-m2, nemotron-h); another target asserts
EAGLE3_TARGETS = frozenset({"llama", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5",
                            "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "gemma4",
                            "gemma4_text", "gpt_oss", "minimax_m2", "nemotron_h"})
#: llama-server's -b: the tokens a batch, for which the target copies out an EAGLE-3 head's
#: hidden states
N_BATCH = 2048


def _eagle3(req: EngineRequest, n_ubatch: int, width: int) -> tuple[int, int]:
    """An EAGLE-3 head's draft context beyond a draft model's, as llama.cpp (speculative.cpp,
    models/eagle3.cpp) reserves it: (its compute buffers on the card with what the target's
    graph adds, host memory), or a one-line refusal. The head's graph makes logits for every token
    of a ubatch, over its draft vocabulary and then the target's (f32), and the default
    backend sampling re-reserves it with 3 bytes a token and target token more (measured at
    this release: 322 MiB without, 510.5 MiB with, at ubatch 512 over 128,256 and 32,000
    tokens); the target keeps the inputs of three layers of every token (f32) on the card for
    a ubatch and in host memory for a batch; the head's output buffer holds 16 bytes a token
    of the target's vocabulary and its hidden state a row, a ubatch of rows. ``width``: the
    head's activation values a token (plan.activation_width)."""
    d = req.spec.draft
    assert d is not None
    h = d.spec.head
    if req.spec.model_type not in EAGLE3_TARGETS:
        raise InputError(f"llama.cpp's EAGLE-3 reads the inputs of three target layers, which "
                         f"its graph gives for llama, qwen3, qwen3.5, qwen3-next, gemma4, "
                         f"gpt-oss, minimax-m2 and nemotron-h models, not "
                         f"{req.spec.model_type}: plan the head under vLLM or SGLang",
                         field="draft")
    if h.aux_layers not in (0, 3) or d.spec.decoder_layers != 1:
        raise InputError(f"llama.cpp runs an EAGLE-3 head of one layer over three target "
                         f"layers; {d.name} has {d.spec.decoder_layers} layer(s) over "
                         f"{h.aux_layers or 3}", field="draft")
    vocab = req.spec.vocab_size
    rows = h.draft_vocab_size or vocab
    own = 4 * n_ubatch * (width + rows + vocab) + 3 * n_ubatch * vocab
    target = 4 * 3 * req.spec.hidden_size * n_ubatch
    host = (n_ubatch * (16 * vocab + 4 * d.spec.hidden_size + 4)
            + 4 * 3 * req.spec.hidden_size * N_BATCH)
    return own + target, host


def _draft_context(req: EngineRequest, opts: CacheOptions, n_ubatch: int) -> _Draft | None:
    """The draft model of a request (None without one), or a one-line refusal of what is not
    planned with it."""
    d = req.spec.draft
    s = req.settings
    if d is None:
        if s.draft_kv is not None:
            raise InputError("draft_kv is the draft model's cache type (-ctkd/-ctvd): give the "
                             "draft model too (--draft)", field="draft_kv")
        if s.speculative_tokens:
            raise InputError("speculative_tokens is llama-server's --spec-draft-n-max, the "
                             "draft model's tokens a round: give the draft model too (--draft)",
                             field="speculative_tokens")
        return None
    if d.method == "eagle":
        raise InputError(f"llama.cpp runs EAGLE-3 heads (--spec-type draft-eagle3), not "
                         f"EAGLE-1's: plan {d.name} under vLLM or SGLang", field="draft")
    check_vocab(req.spec, "llama.cpp", exact=False)
    if (s.n_gpu_layers is not None or s.n_cpu_moe or s.override_tensor
            or s.tensor_split is not None):
        raise InputError("with a draft model kvplan plans llama.cpp with every layer on the "
                         "card: leave out ngl, n_cpu_moe, override_tensor and tensor_split",
                         field="draft")
    if d.weight_format not in WEIGHTS:
        raise InputError(f"llama.cpp loads a GGUF draft; the draft's weights are "
                         f"{d.weight_format}: give draft_weights one of "
                         f"{', '.join(sorted(WEIGHTS))}", field="draft_weights")
    spec = without_windows(d.spec, swa_full=s.swa_full)
    fmt = draft_cache_format(s)
    check_format(NAME, fmt, FORMATS, "draft_kv")
    if fmt.is_quantized and s.flash_attn is False:
        raise InputError(f"llama.cpp's draft context fails with a quantized V cache "
                         f"({fmt.name}) and flash attention off (-fa off): keep -ctvd in f16 or "
                         "turn flash attention on", field="draft_kv")
    d_opts = replace(opts, kv_k=fmt, kv_v=fmt, mtp=False)
    # its graph is reserved for one ubatch like the target's, but with one output row a
    # sequence (llama-context.cpp: n_outputs = min(n_tokens, n_seq_max)): the activations of
    # n_ubatch tokens (plan.activation_width, f32) and the logits of one row a sequence
    width = activation_width(spec)
    if d.method == "eagle3":
        compute, host = _eagle3(req, n_ubatch, width)
    else:
        compute, host = 4 * (n_ubatch * width + min(req.sequences, n_ubatch)
                             * spec.vocab_size), 0
    ck = d.spec.checkpoint
    if ck is not None and ck.load.startswith("-hf "):
        load = "-hfd " + ck.load[4:]
    elif ck is not None and ck.load.startswith("-m "):
        load = "-md " + ck.load[3:]
    else:
        tag = f"-{d.weight_format.upper()}"
        load = f"-md {shlex.quote(f'{d.name}{tag}.gguf')}"
    if s.draft_kv is not None:
        name = FORMATS[fmt.name]
        load += f" -ctkd {name} -ctvd {name}"
    if s.speculative_tokens:
        load += f" --spec-draft-n-max {s.speculative_tokens}"
    return _Draft(d.name, spec, d_opts, n_ubatch, d.weight_bytes - d.input_bytes, compute, load,
                  "draft-eagle3" if d.method == "eagle3" else "draft-simple", host)


def _placement_dict(req: EngineRequest, p: Placement, blocks: tuple[Block, ...],
                    output_bytes: int, mem: Memory, weights: Weights,
                    blocks_from: str) -> dict[str, Any]:
    """A placement as the JSON gives it: what the cards and host memory hold, the layers'
    numbers and the decode estimate (the report's ``placement`` or ``fit``). ``mem``: every
    layer's caches."""
    cards, host = p.place_bytes(blocks, output_bytes)
    ranges = p.device_ranges()
    caches = [mem.bytes_of(frozenset(r)) for r in ranges]
    gpus = [req.gpu_for(d) for d in range(len(ranges))]
    s = req.settings
    decode = prefill = None
    known = [g for g in gpus if g is not None and g.bandwidth_bytes_per_s]
    if len(known) == len(gpus):
        decode = offload_decode(req.spec, req.cache, req.context, req.sequences, weights,
                                blocks, output_bytes, p, known, s.host_bandwidth_bytes_per_s,
                                s.host_link_bytes_per_s)
        n_ubatch = s.n_ubatch or N_UBATCH
        host_blocks = frozenset(range(p.n_layers)) - p.gpu_blocks
        prefill = offload_prefill(req.spec, req.cache, req.context, weights, blocks,
                                  output_bytes, p, known, n_ubatch, s.host_link_bytes_per_s,
                                  mem.prompt_copies(host_blocks, req.context, n_ubatch))
    out: dict[str, Any] = {
        "decode": decode, "prefill": prefill, "how": p.how, "ngl": p.ngl,
        "blocks_on_card": len(p.gpu_blocks), "output_on_card": p.output_on_gpu,
        "cpu_expert_blocks": sorted(p.cpu_experts & p.gpu_blocks),
        "partial_block": list(p.partial) if p.partial is not None else None,
        "card_weights_bytes": sum(cards), "host_weights_bytes": host + weights.input_bytes,
        "card_cache_bytes": sum(caches),
        "host_cache_bytes": mem.kv_bytes + mem.state_bytes - sum(caches),
        "host_holds": p.describe(), "host_held": not p.on_cards,
        "block_bytes_from": blocks_from}
    if len(ranges) > 1:
        # each card's part (-sm layer): its blocks, its weights and caches
        out["tensor_split"] = list(p.tensor_split)
        out["cards"] = [{"device": f"CUDA{d}", "blocks": [r.start, r.stop - 1] if len(r) else [],
                         "output_layer": p.output_device == d, "weights_bytes": cards[d],
                         "cache_bytes": caches[d]} for d, r in enumerate(ranges)]
        out["partial_blocks"] = [{"block": i, "fraction": f,
                                  "rest_on": f"CUDA{to}" if to is not None else "host"}
                                 for i, f, to in p.partials]
        out["cards_hold"] = p.describe_devices()
    return out


def kv_bytes(spec: ModelSpec, ctx: int, n_seq: int, k: str, v: str, *, unified: bool = False,
             n_ubatch: int = N_UBATCH, swa_full: bool = False) -> Memory:
    """The caches llama.cpp allocates for a model (all layers on one device)."""
    opts = CacheOptions(kv_k=get_format(k), kv_v=get_format(v))
    return Memory(without_windows(spec), Layout(ctx, n_seq, unified, n_ubatch), opts, swa_full)


__all__ = ["FORMATS", "Layout", "Memory", "kv_bytes", "plan"]
