"""Where llama.cpp keeps a model's weights when they do not all go on the card.

The rules, from llama.cpp's source (``src/llama-model.cpp · load_tensors``,
``common/arg.cpp``, ``common/fit.cpp``, ``src/llama-kv-cache.cpp``,
``ggml/src/ggml-backend.cpp``, ``ggml/src/ggml-cuda/ggml-cuda.cu``):

- The input embedding (``token_embd``) always stays in host memory.
- ``-ngl N`` counts the output layer as layer ``n_layer`` and offloads it first: the card
  holds the output layer and the last N − 1 blocks (N > n_layer: all of them; ``auto`` and
  ``all``: all of them, unless ``--fit`` chooses).
- A block's KV cache and recurrent state live where the block does (``offload_kqv``, on by
  default).
- ``--cpu-moe`` keeps every block's routed experts (the tensors matching
  ``\\.ffn_(up|down|gate|gate_up)_(ch|)exps``) in host memory, ``--n-cpu-moe N`` those of
  blocks 0 … N − 1. The router and shared experts stay with their block.
- ``--fit`` (on by default) changes only what the command leaves unset (``-ngl``, tensor
  overrides; the context only where ``-c`` is not given). With everything on the card over
  its target (1,024 MiB free by default) it keeps the most layers the card takes:
  a dense model's output layer and last blocks; a mixture of experts the most layers with
  their experts in host memory (the lowest of them whole), then, where every expert in host
  memory leaves room, the experts of the first blocks on the card, front to back, and one
  more block in part (its up projections, then its gate projections too, or its attention
  alone; ``common_params_fit_impl``'s layer fractions).
- A weight in host memory is computed on by the CPU in a step of fewer than 32 tokens
  (``GGML_OP_OFFLOAD_MIN_BATCH``), so a decode step reads it at host memory bandwidth; from
  32 tokens (a prompt's batches) the CUDA backend copies it to the card for each batch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..gpus import GPU
from ..kv import CacheOptions
from ..model import ModelSpec
from ..plan import largest
from ..weights import Weights

__all__ = ["DEFAULT_HOST_BANDWIDTH", "DEFAULT_HOST_LINK", "Block", "Placement", "blocks_for",
           "fit_placement", "offload_decode", "offload_prefill", "requested"]

#: routed experts' tensors as --cpu-moe's pattern names them (common.h LLM_FFN_EXPS_REGEX)
EXPS = re.compile(r"ffn_(up|down|gate_up|gate)_(ch|)exps")
#: a module path's layer number (``layers.12.mlp.experts``)
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
#: a GGUF tensor's block number (``blk.12.ffn_up_exps.weight``)
_BLK = re.compile(r"^blk\.(\d+)\.(.+)$")
#: the FFN tensor families the layer fractions of --fit move: gate (gate_up, the router
#: ffn_gate_inp and the shared experts' gate among them), up, down
FAMILIES = ("gate", "up", "down")
#: what of the first partly offloaded block the card keeps, by --fit's layer fraction:
#: LAYER_FRACTION_UP moves ffn_(gate|gate_up|down).*, GATE moves ffn_down.*, ATTN every FFN
#: tensor, MOE the routed experts only
FRACTION_KEEPS = {"up": ("up",), "gate": ("gate", "up"), "attn": ()}


@dataclass(frozen=True)
class Block:
    """One decoder block's weight bytes, sorted by the tensor patterns llama.cpp places by:
    ``other`` (attention, norms, everything but ffn_gate*/ffn_up*/ffn_down*), ``ffn`` (those
    FFN families that are not routed experts: a dense MLP, shared experts, the router) and
    ``exps`` (the routed experts), each as (gate, up, down)."""

    other: int = 0
    ffn: tuple[int, int, int] = (0, 0, 0)
    exps: tuple[int, int, int] = (0, 0, 0)

    @property
    def experts(self) -> int:
        return sum(self.exps)

    @property
    def total(self) -> int:
        return self.other + sum(self.ffn) + self.experts


def _family(name: str) -> str | None:
    for fam in FAMILIES:
        if name.startswith(f"ffn_{fam}"):
            return fam
    return None


def _add(parts: dict[str, list[int]], where: str, fam: str | None, n: int) -> None:
    if fam is None:
        parts["other"][0] += n
    else:
        parts[where][FAMILIES.index(fam)] += n


def _freeze(parts: dict[str, list[int]]) -> Block:
    ffn, exps = parts["ffn"], parts["exps"]
    return Block(parts["other"][0], (ffn[0], ffn[1], ffn[2]), (exps[0], exps[1], exps[2]))


def _empty() -> dict[str, list[int]]:
    return {"other": [0], "ffn": [0, 0, 0], "exps": [0, 0, 0]}


def gguf_blocks(tensors: Iterable[tuple[str, int]], n_layers: int) -> tuple[Block, ...]:
    """Each block's bytes from a GGUF's tensors (name, bytes): ``blk.i.*`` only (draft blocks
    past ``n_layers`` are not the decoder's)."""
    parts = [_empty() for _ in range(n_layers)]
    for name, n in tensors:
        m = _BLK.match(name)
        if m is None or int(m.group(1)) >= n_layers:
            continue
        rest = m.group(2)
        fam = _family(rest)
        _add(parts[int(m.group(1))], "exps" if EXPS.search(rest) else "ffn", fam, n)
    return tuple(_freeze(p) for p in parts)


#: module leaves (a checkpoint's names) of each FFN family, as the GGUF converter renames them
#: (gate_proj → ffn_gate, the router gate → ffn_gate_inp, gate_up_proj → ffn_gate_up)
_LEAVES = {"gate": ("gate_proj", "gate_up_proj", "gate", "router", "w1"),
           "up": ("up_proj", "w3"), "down": ("down_proj", "w2")}
#: modules that hold a whole MLP's matrices (shared experts as one module)
_WHOLE_MLP = ("shared_experts", "shared_expert", "shared_mlp")


def _module_families(path: str, fams: tuple[str, ...]) -> tuple[str, ...]:
    """The FFN families a checkpoint module's weights fall in (empty: attention, norms and
    the rest, which llama.cpp's FFN patterns do not match)."""
    block, _, leaf = path.rpartition(".")
    if "attn" in block:
        return ()
    if leaf in _WHOLE_MLP:
        return fams
    return next(((f,) for f, leaves in _LEAVES.items() if leaf in leaves), ())


def blocks_for(spec: ModelSpec, weights: Weights) -> tuple[tuple[Block, ...], str]:
    """Each decoder block's weight bytes and where they come from: the GGUF's own tensors
    (exact), or the config's modules priced at the plan's weight bytes (each block's share of
    the decoder's bytes by its parameters; routed experts split evenly over their gate, up
    and down projections, or over up and down for an ungated MLP)."""
    n = spec.decoder_layers
    ck = spec.checkpoint
    if weights.source.startswith("GGUF") and ck is not None and ck.blocks:
        return ck.blocks, "the GGUF's tensors"
    body = max(0, weights.bytes - weights.embedding_bytes - weights.per_layer_embedding_bytes)
    by_layer: list[list[tuple[str, int, str]]] = [[] for _ in range(n)]
    for m in spec.params.modules:
        if m.role in ("embed", "head", "encoder"):
            continue
        hit = _LAYER.search(m.names[0])
        if hit is None or int(hit.group(1)) >= n:
            continue
        by_layer[int(hit.group(1))].append((m.names[0], m.params, m.role))
    params = sum(p for layer in by_layer for _, p, _ in layer)
    from ..hf import _UNGATED_MLP
    fams = ("up", "down") if spec.model_type in _UNGATED_MLP else FAMILIES
    if not params:
        # no module list: the decoder's bytes spread evenly, the experts' as well
        experts = weights.expert_bytes
        per = (body - experts) // max(1, n)
        share = experts // max(1, n)
        exps = tuple(share // len(fams) if f in fams else 0 for f in FAMILIES)
        blocks = [Block(per, (0, 0, 0), (exps[0], exps[1], exps[2])) for _ in range(n)]
        return tuple(blocks), "the decoder's bytes spread evenly over its blocks (no module list)"
    ratio = body / params
    out = []
    for layer in by_layer:
        parts = _empty()
        for path, p, role in layer:
            size = round(p * ratio)
            into = fams if role == "experts" else _module_families(path, fams)
            if not into:
                _add(parts, "ffn", None, size)
            for f in into:
                _add(parts, "exps" if role == "experts" else "ffn", f, size // len(into))
        out.append(_freeze(parts))
    return tuple(out), "the config's modules at the plan's bytes per parameter"


@dataclass(frozen=True)
class Placement:
    """Which of a model's weights llama.cpp keeps on the card.

    ``ngl``: the layers offloaded (the output layer counted as one, offloaded first);
    ``cpu_experts``: blocks whose routed experts stay in host memory; ``partial``: one block
    (number, fraction: "up", "gate" or "attn") whose FFN the card holds in part."""

    n_layers: int
    ngl: int
    cpu_experts: frozenset[int] = frozenset()
    partial: tuple[int, str] | None = None
    #: the command's flags that ask for it (none: --fit chose it)
    flags: tuple[str, ...] = field(default=())

    @property
    def how(self) -> str:
        """How the command asks for it: "-ngl 30", "--n-cpu-moe 12", or "--fit"."""
        return " ".join(self.flags) or "--fit"

    @property
    def gpu_range(self) -> range:
        """The blocks on the card: the last ngl − 1 (the output layer is offloaded first)."""
        return range(max(self.n_layers + 1 - self.ngl, 0), self.n_layers)

    @property
    def gpu_blocks(self) -> frozenset[int]:
        return frozenset(self.gpu_range)

    @property
    def output_on_gpu(self) -> bool:
        return self.ngl >= 1

    @property
    def everything(self) -> bool:
        return (len(self.gpu_blocks) == self.n_layers and self.output_on_gpu
                and not self.cpu_experts and self.partial is None)

    def card_bytes(self, blk: Block, i: int, experts_share: float = 1.0) -> tuple[float, float]:
        """(bytes of block ``i`` on the card, in host memory), its routed experts counted at
        ``experts_share`` (the share a decode step reads)."""
        exps = [e * experts_share for e in blk.exps]
        whole = blk.other + sum(blk.ffn) + sum(exps)
        if i not in self.gpu_blocks:
            return 0.0, whole
        if self.partial is not None and self.partial[0] == i:
            keep = FRACTION_KEEPS[self.partial[1]]
            card = blk.other + sum(blk.ffn[k] + exps[k] for k, f in enumerate(FAMILIES)
                                   if f in keep)
            return card, whole - card
        if i in self.cpu_experts:
            card = blk.other + sum(blk.ffn)
            return card, whole - card
        return whole, 0.0

    def split(self, blocks: tuple[Block, ...], output_bytes: int,
              experts_share: float = 1.0) -> tuple[int, int]:
        """(bytes on the card, in host memory) of the blocks and the output layer (the input
        embedding apart)."""
        card = host = 0.0
        for i, blk in enumerate(blocks):
            c, h = self.card_bytes(blk, i, experts_share)
            card += c
            host += h
        if self.output_on_gpu:
            card += output_bytes
        else:
            host += output_bytes
        return round(card), round(host)

    def describe(self) -> str:
        """The placement in words: what host memory holds."""
        n = self.n_layers
        parts = []
        cpu_blocks = n - len(self.gpu_blocks)
        if cpu_blocks:
            parts.append(f"blocks 0–{cpu_blocks - 1}" if cpu_blocks > 1 else "block 0")
        if not self.output_on_gpu:
            parts.append("the output layer")
        experts = sorted(self.cpu_experts & self.gpu_blocks)
        if experts:
            parts.append(f"the routed experts of {_ranges(experts)}")
        if self.partial is not None:
            i, frac = self.partial
            moved = {"up": "gate and down projections", "gate": "down projections",
                     "attn": "feed-forward"}[frac]
            parts.append(f"block {i}'s {moved}")
        return ", ".join(parts) if parts else "nothing"


def _ranges(items: list[int]) -> str:
    """``blocks 0–11, 14`` for a sorted list of block numbers."""
    runs: list[list[int]] = []
    for i in items:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    text = ", ".join(f"{a}–{b}" if b > a else f"{a}" for a, b in runs)
    return ("blocks " if len(items) > 1 else "block ") + text


def requested(n_layers: int, ngl: int | None, n_cpu_moe: int | None,
              has_experts: bool) -> Placement | None:
    """The placement a command's -ngl / --n-cpu-moe ask for (None: neither given).
    ``n_cpu_moe`` past the block count is --cpu-moe."""
    if ngl is None and n_cpu_moe is None:
        return None
    if ngl is not None and ngl < 0:
        raise InputError(f"ngl must be 0 or more layers, got {ngl}", field="ngl")
    if n_cpu_moe is not None:
        if n_cpu_moe < 0:
            raise InputError(f"n_cpu_moe must be 0 or more blocks, got {n_cpu_moe}",
                             field="n_cpu_moe")
        if n_cpu_moe and not has_experts:
            raise InputError("n_cpu_moe keeps routed experts in host memory; this model has "
                             "none (use ngl)", field="n_cpu_moe")
    layers = n_layers + 1 if ngl is None else min(ngl, n_layers + 1)
    cpu = frozenset(range(min(n_cpu_moe or 0, n_layers)))
    flags = []
    if ngl is not None:
        flags.append(f"-ngl {ngl}")
    if n_cpu_moe:
        flags.append("--cpu-moe" if n_cpu_moe >= n_layers else f"--n-cpu-moe {n_cpu_moe}")
    return Placement(n_layers, layers, cpu, None, tuple(flags))


def fit_placement(n_layers: int, blocks: tuple[Block, ...],
                  card_need: Callable[[Placement], int], room: int) -> Placement | None:
    """The placement llama-server's ``--fit`` chooses where everything does not fit in
    ``room`` (the card's memory less its target), given ``card_need(placement)``: the bytes
    a placement puts on the card. None where even nothing on the card is too much.

    ``common_params_fit_impl`` counts a device's layers as ``n_layer`` of which ``n_part``
    are partial, and lays the tensor overrides from the first layer on the card: its
    ``n_layer − n_part`` whole layers first, then the partial ones, the output layer (the
    last, which no block pattern matches) among them. So the lowest block on the card always
    keeps its experts, where --fit meant the output layer to be the whole one."""
    n = n_layers
    moe = any(b.experts for b in blocks)

    def fits(p: Placement, strict: bool = False) -> bool:
        need = card_need(p)
        return need < room if strict else need <= room

    def dense_only(k: int) -> Placement:
        """Step 3: k layers counted from the output layer; of a mixture of experts the
        lowest block whole, the others' experts in host memory."""
        on = range(max(n + 1 - k, 0), n)
        return Placement(n, k, frozenset(on[1:]) if moe else frozenset())

    best = _largest(lambda k: fits(dense_only(k)), n + 1)
    if best is None:
        return None
    # a mixture of experts goes on to step 4 only where every expert in host memory leaves
    # a surplus (free − used − target > 0)
    if not moe or not fits(Placement(n, n + 1, frozenset(range(n))), strict=True):
        return dense_only(best)
    on = range(max(n + 1 - best, 0), n)
    if len(on) < 2:
        return dense_only(best)

    def whole(f: int) -> frozenset[int]:
        """the blocks on the card past the first f keep their experts in host memory"""
        return frozenset(on[f:])

    # the experts of the first blocks on the card back on it, front to back
    f = largest(lambda f: f <= 1 or fits(Placement(n, best, whole(f))), len(on))
    base = Placement(n, best, whole(f))
    if f == len(on):
        return base
    # one more block in part: its up projections on the card, then its gate ones as well;
    # where the up ones do not fit, its attention alone (each test strict, as --fit's)
    i, tail = on[f], whole(f + 1)
    up = Placement(n, best, tail, (i, "up"))
    if fits(up, strict=True):
        gate = Placement(n, best, tail, (i, "gate"))
        return gate if fits(gate, strict=True) else up
    attn = Placement(n, best, tail, (i, "attn"))
    return attn if fits(attn, strict=True) else base


def _largest(ok: Callable[[int], bool], hi: int) -> int | None:
    """Largest k in [0, hi] with ok(k) (monotone), None if not even 0."""
    return largest(ok, hi) if ok(0) else None


#: host memory's read bandwidth where none is given: dual-channel DDR5-5600, 2 × 8 bytes ×
#: 5,600 MT/s (a datasheet figure, as the cards' are)
DEFAULT_HOST_BANDWIDTH = 89.6e9
#: the batch from which llama.cpp's CUDA backend computes a host-held weight on the card,
#: copying it over for the batch (GGML_OP_OFFLOAD_MIN_BATCH's default)
OP_OFFLOAD_MIN_BATCH = 32
#: the host link where none is given: PCIe 4.0 x16, 16 GT/s × 16 lanes × 128/130 / 8
DEFAULT_HOST_LINK = 16e9 * 16 * 128 / 130 / 8


def host_link_of(gpu: GPU, given: float | None) -> tuple[float, str]:
    """The host link's rate and what it is: the one given ("given"), the card's own from the
    catalog (its name, "PCIe 4.0 x8"), or PCIe 4.0 x16 assumed ("assumed")."""
    if given is not None:
        return given, "given"
    if gpu.host_link_bytes_per_s:
        return float(gpu.host_link_bytes_per_s), gpu.host_link
    return DEFAULT_HOST_LINK, "assumed"


def _copied(place: Placement, blocks: tuple[Block, ...], output_bytes: int,
            weights: Weights, batch: int) -> int:
    """Host-held weight bytes a batch of ``batch`` tokens copies to the card (op offload):
    all of them, but of the routed experts those its tokens route to (MUL_MAT_ID copies
    only the experts used)."""
    share = weights.expert_share(batch)
    return place.split(blocks, output_bytes, 1.0 if share is None else share)[1]


def offload_decode(spec: ModelSpec, opts: CacheOptions, context: int, sequences: int,
                   weights: Weights, blocks: tuple[Block, ...], output_bytes: int,
                   place: Placement, gpu: GPU, host_bandwidth: float | None,
                   host_link: float | None = None) -> dict[str, Any]:
    """A decode step at full context with part of the model in host memory: the card reads
    what it holds (its weights, of the routed experts the share the step's tokens route to,
    and its blocks' caches) at its bandwidth, or computes its share of the step's FLOPs at
    its matrix peak where that takes longer; then the CPU reads the rest at host memory's
    bandwidth (its compute not counted). The two run one after the other. From 32
    sequences (op offload) the card computes the host-held weights as well, copied over the
    host link each step; the host blocks' caches are still counted at host bandwidth."""
    from ..kv import cache_size
    from ..parallel import Parallel, rank_spec
    from ..plan import attention_flops

    share = weights.expert_share(sequences)
    card_w, host_w = place.split(blocks, output_bytes, 1.0 if share is None else share)
    # from 32 sequences the card computes the host-held weights too, copied over the link
    offload = sequences >= OP_OFFLOAD_MIN_BATCH
    link, link_from = host_link_of(gpu, host_link)
    on = place.gpu_range
    whole = cache_size(spec, context, sequences, opts)
    card_spec = rank_spec(spec, Parallel(), 0, lambda n, pp, stage: on)
    card_cache = cache_size(card_spec, context, sequences, opts)
    card_kv = card_cache.read_bytes + 2 * card_cache.state_bytes
    host_kv = whole.read_bytes + 2 * whole.state_bytes - card_kv
    weight_read = card_w + host_w
    card_params = spec.params.active * card_w / weight_read if weight_read else 0.0
    card_flops = int(2 * sequences * card_params) + attention_flops(card_spec, card_cache)
    host_flops = (int(2 * sequences * (spec.params.active - card_params))
                  + attention_flops(spec, whole) - attention_flops(card_spec, card_cache))
    assert gpu.bandwidth_bytes_per_s
    card_memory = (card_w + card_kv) / gpu.bandwidth_bytes_per_s
    card_compute = card_flops / gpu.matmul_flops_per_s if gpu.matmul_flops_per_s else None
    card_seconds = max(card_memory, card_compute or 0.0)
    bw = host_bandwidth or DEFAULT_HOST_BANDWIDTH
    host_bytes = host_w + host_kv
    # the host-held blocks' caches at host bandwidth either way
    host_seconds = (host_w / link + host_kv / bw) if offload else host_bytes / bw
    seconds = card_seconds + host_seconds
    step = card_w + card_kv + host_bytes
    if host_seconds > card_seconds:
        bound = "host"
    else:
        bound = "compute" if card_compute and card_compute > card_memory else "bandwidth"
    return {"bytes_per_step": step, "seconds_per_step": seconds,
            "tokens_per_s_per_sequence": 1 / seconds,
            "tokens_per_s_total": sequences / seconds,
            "kv_share": (card_kv + host_kv) / step if step else 0.0,
            "sparse_read": whole.read_bytes < whole.kv_bytes,
            "expert_share": share,
            "flops_per_step": card_flops + host_flops,
            "bandwidth_seconds_per_step": card_memory,
            "compute_seconds_per_step": card_compute,
            "bound": bound,
            "host_bytes_per_step": host_bytes,
            "host_weight_bytes_per_step": host_w,
            "host_cache_bytes_per_step": host_kv,
            "host_seconds_per_step": host_seconds,
            "host_bandwidth_bytes_per_s": bw,
            "host_bandwidth_given": host_bandwidth is not None,
            "op_offload": offload,
            "host_link_bytes_per_s": link if offload else None, "host_link_from": link_from}


def offload_prefill(spec: ModelSpec, opts: CacheOptions, context: int, weights: Weights,
                    blocks: tuple[Block, ...], output_bytes: int, place: Placement, gpu: GPU,
                    n_ubatch: int, host_link: float | None) -> dict[str, Any] | None:
    """The prompt of one sequence where every block is on the card and only (part of) their
    FFN weights are in host memory: the card computes all of it at its matrix peak, and each
    batch of ``n_ubatch`` tokens first copies the host-held weights over the host link (of
    the routed experts, those the batch routes to). None where whole blocks are in host
    memory: where llama.cpp's scheduler runs their attention in a large batch (the CPU, or
    the card with the cache copied over) was not traced."""
    from ..plan import prefill_estimate

    if len(place.gpu_blocks) < place.n_layers or not place.output_on_gpu or context < 1:
        return None
    base = prefill_estimate(spec, opts, context, weights, gpu)
    if base is None:
        return None
    link, link_from = host_link_of(gpu, host_link)
    batches = -(-context // n_ubatch)
    full, last = divmod(context, n_ubatch)
    copied = full * _copied(place, blocks, output_bytes, weights, n_ubatch)
    if last:
        copied += _copied(place, blocks, output_bytes, weights, last)
    copy_seconds = copied / link
    seconds = base.seconds + copy_seconds
    return {"tokens": context, "flops": base.flops, "attention_flops": base.attention_flops,
            "seconds": seconds, "tokens_per_s": context / seconds,
            "bound": "host link" if copy_seconds > base.seconds else base.bound,
            "batches": batches, "n_ubatch": n_ubatch, "host_link_bytes": copied,
            "host_link_seconds": copy_seconds, "host_link_bytes_per_s": link,
            "host_link_from": link_from}
