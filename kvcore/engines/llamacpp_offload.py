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
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from ..errors import InputError
from ..gguf_mix import MIXES, MODULE_LAYER, WHOLE_MLP, module_parts
from ..gpus import GPU
from ..kv import CacheOptions
from ..model import ModelSpec
from ..parallel import ts_split
from ..plan import largest
from ..weights import Weights

__all__ = ["DEFAULT_HOST_BANDWIDTH", "DEFAULT_HOST_LINK", "Block", "Placement", "blocks_for",
           "even_split", "fit_placement", "offload_decode", "offload_prefill", "requested",
           "ts_split"]

#: routed experts' tensors as --cpu-moe's pattern names them (common.h LLM_FFN_EXPS_REGEX)
EXPS = re.compile(r"ffn_(up|down|gate_up|gate)_(ch|)exps")
#: a GGUF tensor's block number and the rest of its name (``blk.12.ffn_up_exps.weight``)
BLOCK_TENSOR = re.compile(r"^blk\.(\d+)\.(.+)$")
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
        m = BLOCK_TENSOR.match(name)
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


def _module_families(path: str, fams: tuple[str, ...]) -> tuple[str, ...]:
    """The FFN families a checkpoint module's weights fall in (empty: attention, norms and
    the rest, which llama.cpp's FFN patterns do not match)."""
    block, _, leaf = path.rpartition(".")
    if "attn" in block:
        return ()
    if leaf in WHOLE_MLP:
        return fams
    return next(((f,) for f, leaves in _LEAVES.items() if leaf in leaves), ())


def blocks_for(spec: ModelSpec, weights: Weights) -> tuple[tuple[Block, ...], str]:
    """Each decoder block's weight bytes and where they come from: the GGUF's own tensors
    (exact), the config's modules in a llama-quantize mix's tensor types (gguf_mix), or the
    config's modules priced at the plan's weight bytes (each block's share of the decoder's
    bytes by its parameters; routed experts split evenly over their gate, up and down
    projections, or over up and down for an ungated MLP)."""
    n = spec.decoder_layers
    ck = spec.checkpoint
    if weights.source.startswith("GGUF") and ck is not None and ck.blocks:
        return ck.blocks, "the GGUF's tensors"
    body = max(0, weights.bytes - weights.embedding_bytes - weights.per_layer_embedding_bytes)
    # a llama-quantize mix gives each module its own tensor types (gguf_mix): its bytes as
    # they are, else the module's parameters at the plan's bytes per parameter
    mixed = weights.source.startswith("config, llama-quantize") and weights.format in MIXES
    exact = module_parts(spec, weights.format) if mixed else None
    by_layer: list[list[tuple[str, int, str, dict[str, int]]]] = [[] for _ in range(n)]
    for k, m in enumerate(spec.params.modules):
        if m.role in ("embed", "head", "encoder"):
            continue
        hit = MODULE_LAYER.search(m.names[0])
        if hit is None or int(hit.group(1)) >= n:
            continue
        parts_k = exact[k] if exact else {}
        by_layer[int(hit.group(1))].append(
            (m.names[0], sum(parts_k.values()) if exact else m.params, m.role, parts_k))
    params = sum(p for layer in by_layer for _, p, _, _ in layer)
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
    ratio = 1.0 if exact else body / params
    out = []
    for layer in by_layer:
        parts = _empty()
        for path, p, role, cats in layer:
            size = round(p * ratio)
            into = fams if role == "experts" else _module_families(path, fams)
            where = "exps" if role == "experts" else "ffn"
            if not into:
                _add(parts, "ffn", None, size)
            elif cats and len(into) > 1:
                # the mix's own bytes of each projection (a down projection can be a type up)
                for f in into:
                    _add(parts, where, f, cats.get(f"ffn_{f}", 0))
                _add(parts, where, None, size - sum(cats.get(f"ffn_{f}", 0) for f in into))
            else:
                for f in into:
                    _add(parts, where, f, size // len(into))
        out.append(_freeze(parts))
    if exact:
        return tuple(out), "the config's modules in llama-quantize's tensor types"
    return tuple(out), "the config's modules at the plan's bytes per parameter"


@dataclass(frozen=True)
class Placement:
    """Which of a model's weights llama.cpp keeps on the cards.

    ``ngl``: the layers offloaded (the output layer counted as one, offloaded first);
    ``cpu_experts``: blocks whose routed experts stay in host memory; ``partials``: blocks
    whose FFN a card holds in part, each (number, fraction "up" | "gate" | "attn", where the
    rest goes: the next card's index, or None for host memory); ``tensor_split``: the layers
    on each card, first to last, the output layer counted on the last that holds any (-ts
    or --fit's split; empty: one card)."""

    n_layers: int
    ngl: int
    cpu_experts: frozenset[int] = frozenset()
    partials: tuple[tuple[int, str, int | None], ...] = ()
    #: the command's flags that ask for it (none: --fit chose it)
    flags: tuple[str, ...] = field(default=())
    tensor_split: tuple[int, ...] = ()

    @property
    def how(self) -> str:
        """How the command asks for it: "-ngl 30", "--n-cpu-moe 12", or "--fit"."""
        return " ".join(self.flags) or "--fit"

    @property
    def partial(self) -> tuple[int, str] | None:
        """The first partly held block and its fraction."""
        return self.partials[0][:2] if self.partials else None

    @property
    def n_devices(self) -> int:
        return max(1, len(self.tensor_split))

    @property
    def gpu_range(self) -> range:
        """The blocks on the cards: the last ngl − 1 (the output layer is offloaded first)."""
        return range(max(self.n_layers + 1 - self.ngl, 0), self.n_layers)

    @property
    def gpu_blocks(self) -> frozenset[int]:
        return frozenset(self.gpu_range)

    def device_ranges(self) -> list[range]:
        """The blocks on each card: contiguous slices of the offloaded layers, first to last
        (the output layer, which no range holds, is the last offloaded layer)."""
        start = self.gpu_range.start
        out = []
        for count in self.tensor_split or (self.ngl,):
            out.append(range(min(start, self.n_layers), min(start + count, self.n_layers)))
            start += count
        return out

    @property
    def output_device(self) -> int | None:
        """The card holding the output layer (None: host memory)."""
        if self.ngl < 1:
            return None
        counts = self.tensor_split or (self.ngl,)
        return max(d for d, c in enumerate(counts) if c)

    @property
    def output_on_gpu(self) -> bool:
        return self.ngl >= 1

    @property
    def on_cards(self) -> bool:
        """Nothing but the input embedding in host memory."""
        return (len(self.gpu_blocks) == self.n_layers and self.output_on_gpu
                and not self.cpu_experts and all(to is not None for _, _, to in self.partials))

    @property
    def everything(self) -> bool:
        return self.on_cards and not self.partials

    def place_bytes(self, blocks: tuple[Block, ...], output_bytes: int,
                    experts_share: float = 1.0) -> tuple[list[int], int]:
        """(bytes on each card, in host memory) of the blocks and the output layer (the input
        embedding apart), routed experts counted at ``experts_share`` (the share a decode
        step reads)."""
        cards = [0.0] * self.n_devices
        host = 0.0
        where = {i: d for d, r in enumerate(self.device_ranges()) for i in r}
        parts = {i: (frac, to) for i, frac, to in self.partials}
        for i, blk in enumerate(blocks):
            exps = [e * experts_share for e in blk.exps]
            whole = blk.other + sum(blk.ffn) + sum(exps)
            d = where.get(i)
            if d is None:
                host += whole
                continue
            if i in parts:
                frac, to = parts[i]
                keep = FRACTION_KEEPS[frac]
                card = blk.other + sum(blk.ffn[k] + exps[k] for k, f in enumerate(FAMILIES)
                                       if f in keep)
            elif i in self.cpu_experts:
                card, to = blk.other + sum(blk.ffn), None
            else:
                card, to = whole, None
            cards[d] += card
            if to is None:
                host += whole - card
            else:
                cards[to] += whole - card
        out = self.output_device
        if out is None:
            host += output_bytes
        else:
            cards[out] += output_bytes
        return [round(c) for c in cards], round(host)

    def split(self, blocks: tuple[Block, ...], output_bytes: int,
              experts_share: float = 1.0) -> tuple[int, int]:
        """(bytes on the cards together, in host memory) of the blocks and the output layer
        (the input embedding apart)."""
        cards, host = self.place_bytes(blocks, output_bytes, experts_share)
        return sum(cards), host

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
        for i, frac, to in self.partials:
            if to is None:
                parts.append(f"block {i}'s {MOVED[frac]}")
        return ", ".join(parts) if parts else "nothing"

    def describe_devices(self) -> str:
        """The split over several cards in words: each card's blocks, the output layer's
        card, and the fractions one card passes to the next."""
        words = []
        for d, r in enumerate(self.device_ranges()):
            held = ([f"{_ranges(list(r))}"] if len(r) else [])
            if self.output_device == d:
                held.append("the output layer")
            words.append(f"CUDA{d} {' and '.join(held) if held else 'nothing'}")
        moved = [f"block {i}'s {MOVED[frac]} on CUDA{to}" for i, frac, to in self.partials
                 if to is not None]
        return "; ".join(words + moved)


#: what a partly held block's fraction moves off its card
MOVED = {"up": "gate and down projections", "gate": "down projections", "attn": "feed-forward"}


def even_split(layers: int, devices: int) -> tuple[int, ...]:
    """The layers each of ``devices`` cards takes of ``layers`` offloaded ones under an even
    ``-ts`` (one card: ())."""
    return ts_split(layers, (1.0,) * devices)


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


#: the tensors of a block that are not routed experts, as GGUF names them: what an -ot pattern
#: must leave alone (attention, norms, the router, dense and shared-expert FFN, SSM)
_NOT_EXPERTS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_qkv", "attn_output",
                "attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_kv_b", "attn_q_norm",
                "attn_k_norm", "ffn_norm", "ffn_gate_inp", "exp_probs_b", "ffn_gate", "ffn_up",
                "ffn_down", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", "ssm_in",
                "ssm_out", "ssm_conv1d")
_GLOBAL = ("token_embd.weight", "output.weight", "output_norm.weight")


#: the longest -ot pattern searched, and nested repetition, which it may not hold
MAX_PATTERN = 300
MAX_REPEATS = 4
_UNBOUNDED = re.compile(r"(?<!\\)(?:[*+]|,\})")
_NESTED = re.compile(r"\((?:[^()\\]|\\.)*[*+}](?:[^()\\]|\\.)*\)\s*[*+{?]")


def split_overrides(given: Iterable[str] | None) -> tuple[str, ...]:
    """-ot values as llama.cpp takes them: each split at its commas into PATTERN=BUFFER
    overrides, in order."""
    return tuple(p.strip() for g in given or () for p in g.split(",") if p.strip())


def _q(pattern: str) -> str:
    """A pattern as typed (its backslashes kept), quoted and cut to a line's length."""
    return "'" + (pattern if len(pattern) <= 120 else pattern[:117] + "...") + "'"


def override_blocks(patterns: tuple[str, ...], n_layers: int, gated: bool) -> frozenset[int]:
    """The blocks whose routed experts llama.cpp's -ot overrides (``PATTERN=CPU``, each
    PATTERN searched in every tensor name as llama.cpp searches it) keep in host memory.
    Only whole blocks' routed experts are planned: a pattern that matches any other tensor,
    or some of a block's expert projections and not the rest, is refused in one line."""
    families = ("gate", "up", "down") if gated else ("up", "down")
    blocks: set[int] = set()
    for given in patterns:
        pattern, eq, target = given.rpartition("=")
        if not eq or not pattern:
            raise InputError(f"override_tensor {_q(given)} must be PATTERN=BUFFER, as llama.cpp's "
                             "-ot takes it (blk\\.(1[0-9])\\.ffn_.*_exps\\.=CPU)",
                             field="override_tensor")
        if target != "CPU":
            raise InputError(f"override_tensor {_q(given)}: kvplan plans tensors moved to host "
                             f"memory (=CPU), not to another device ({target})",
                             field="override_tensor")
        repeats = len(_UNBOUNDED.findall(pattern))
        if len(pattern) > MAX_PATTERN or _NESTED.search(pattern) or repeats > MAX_REPEATS:
            # a repeated group that repeats inside, or many unbounded repeats, can take
            # exponential or high-power time to search: no tensor pattern needs them
            raise InputError(f"override_tensor {_q(given)}: a pattern of at most "
                             f"{MAX_PATTERN} characters, {MAX_REPEATS} unbounded repeats (*, +) "
                             "and no repeated group that repeats inside ((a+)+), as tensor "
                             "patterns are", field="override_tensor")
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise InputError(f"override_tensor {_q(given)} is not a regular expression: {exc}",
                             field="override_tensor") from None
        other = [n for n in _GLOBAL if rx.search(n)] + [
            f"blk.{i}.{t}.weight" for i in range(n_layers) for t in _NOT_EXPERTS
            if rx.search(f"blk.{i}.{t}.weight")]
        if other:
            raise InputError(f"override_tensor {_q(given)} moves {other[0]} (and "
                             f"{len(other) - 1:,} other tensors) that are not routed experts; "
                             "kvplan plans only whole blocks' routed experts in host memory",
                             field="override_tensor")
        matched = False
        for i in range(n_layers):
            hit = [f for f in families if rx.search(f"blk.{i}.ffn_{f}_exps.weight")
                   or rx.search(f"blk.{i}.ffn_gate_up_exps.weight") and f != "down"]
            if hit and len(hit) < len(families):
                raise InputError(f"override_tensor {_q(given)} moves block {i}'s "
                                 f"{', '.join(hit)} experts and not its others; kvplan plans "
                                 "only whole blocks' routed experts in host memory",
                                 field="override_tensor")
            if hit:
                blocks.add(i)
                matched = True
        if not matched:
            raise InputError(f"override_tensor {_q(given)} matches no routed-expert tensor of "
                             f"this model's {n_layers} blocks (blk.N.ffn_up_exps.weight …)",
                             field="override_tensor")
    return frozenset(blocks)


def requested(n_layers: int, ngl: int | None, n_cpu_moe: int | None,
              has_experts: bool, devices: int = 1,
              shares: tuple[float, ...] | None = None, overrides: tuple[str, ...] = (),
              gated: bool = True) -> Placement | None:
    """The placement a command's -ngl / --n-cpu-moe / -ot / -ts ask for (None: none given),
    over ``devices`` cards (-ts ``shares``, or an even split). ``n_cpu_moe`` past the block
    count is --cpu-moe; ``overrides`` are -ot's PATTERN=CPU (override_blocks)."""
    if ngl is None and n_cpu_moe is None and shares is None and not overrides:
        return None
    if overrides and not has_experts:
        raise InputError("override_tensor keeps routed experts in host memory; this model has "
                         "none (use ngl)", field="override_tensor")
    if ngl is not None and ngl < 0:
        raise InputError(f"ngl must be 0 or more layers, got {ngl}", field="ngl")
    if n_cpu_moe is not None:
        if n_cpu_moe < 0:
            raise InputError(f"n_cpu_moe must be 0 or more blocks, got {n_cpu_moe}",
                             field="n_cpu_moe")
        if n_cpu_moe and not has_experts:
            raise InputError("n_cpu_moe keeps routed experts in host memory; this model has "
                             "none (use ngl)", field="n_cpu_moe")
    if shares is not None and devices == 1:
        raise InputError("tensor_split shares the layers over several cards: plan two or "
                         "more (--gpus 2x4090)", field="tensor_split")
    if shares is not None and len(shares) != devices:
        raise InputError(f"tensor_split gives {len(shares)} shares for {devices} "
                         f"card{'s' if devices > 1 else ''}: give one share a card, over two "
                         "cards or more", field="tensor_split")
    layers = n_layers + 1 if ngl is None else min(ngl, n_layers + 1)
    cpu = frozenset(range(min(n_cpu_moe or 0, n_layers)))
    cpu |= override_blocks(overrides, n_layers, gated)
    flags = []
    if ngl is not None:
        flags.append(f"-ngl {ngl}")
    if n_cpu_moe:
        flags.append("--cpu-moe" if n_cpu_moe >= n_layers else f"--n-cpu-moe {n_cpu_moe}")
    flags += [f"-ot {shlex.quote(o)}" for o in overrides]
    if shares is not None and devices > 1:
        flags.append(f"-ts {','.join(f'{x:g}' for x in shares)}")
    split = ts_split(layers, shares if shares is not None else (1.0,) * devices)
    return Placement(n_layers, layers, cpu, (), tuple(flags), split)


@dataclass
class _Card:
    """One card's share in --fit's search (common_params_fit_impl's ngl_t): ``layers``
    offloaded, ``part`` of them partial, the first partial one's ``fraction`` and where its
    rest goes (``to``: the next card, or None for host memory)."""

    layers: int = 0
    part: int = 0
    fraction: str = "moe"
    to: int | None = None

    @property
    def whole(self) -> int:
        return self.layers - self.part


def _as_placement(n: int, cards: list[_Card]) -> Placement:
    """The placement --fit's per-card counts make: the overrides are laid from each card's
    first layer, its whole layers first, then the partial ones (the first with the card's
    fraction, the others with their routed experts in host memory); the output layer is the
    last offloaded layer, and no block's pattern matches it."""
    ngl = sum(c.layers for c in cards)
    il = n + 1 - ngl
    cpu: set[int] = set()
    partials = []
    for c in cards:
        il += c.whole
        for j in range(il, il + c.part):
            if j >= n:
                continue
            if j == il and c.fraction != "moe":
                partials.append((j, c.fraction, c.to))
            else:
                cpu.add(j)
        il += c.part
    split = tuple(c.layers for c in cards) if len(cards) > 1 else ()
    return Placement(n, ngl, frozenset(cpu), tuple(partials), (), split)


def _copy(cards: list[_Card]) -> list[_Card]:
    return [replace(c) for c in cards]


def _with_layers(cards: list[_Card], d: int, k: int, moe: bool) -> list[_Card]:
    """--fit's step 3 on card ``d``: k layers, of a mixture of experts all partial (their
    experts in host memory) but, on the last card, one counted whole for the output layer."""
    out = _copy(cards)
    out[d].layers = k
    out[d].part = (k if d < len(cards) - 1 else max(k - 1, 0)) if moe else 0
    return out


def _convert(cards: list[_Card], start: int, d: int, c: int) -> tuple[list[_Card], int]:
    """--fit's step 4 on card ``d``: c partial layers of the cards from ``start`` become whole
    ones on card d; with the first card still holding partial ones."""
    out, s, done = _copy(cards), start, 0
    while s < len(out):
        take = min(c - done, out[s].part)
        out[s].layers -= take
        out[s].part -= take
        out[d].layers += take
        done += take
        if out[s].part > 0:
            break
        s += 1
    return out, s


def fit_placement(n_layers: int, blocks: tuple[Block, ...],
                  card_need: Callable[[Placement], list[int]],
                  rooms: list[int]) -> Placement | None:
    """The placement llama-server's ``--fit`` chooses where everything does not fit, given
    ``rooms`` (each card's memory less its target) and ``card_need(placement)``: the bytes a
    placement puts on each card. None where even nothing on the cards is too much.

    ``common_params_fit_impl``, step 3: card by card from the last, the most layers from
    the back that the card takes (of a mixture of experts only their dense weights). Step 4,
    for a mixture of experts where every expert in host memory leaves a surplus over all
    cards: card by card from the first, the layers whose experts stay in host memory become
    whole ones on it, front to back, and one more layer in part (its up projections, then
    its gate ones as well, else its attention alone), the rest of it on the next card (on
    the last, in host memory). A card's whole layers come first: the search counts the
    output layer as the last card's whole one, but the output layer is the last index, which
    no block pattern matches, so the lowest block on that card always keeps its experts."""
    n = n_layers
    nd = len(rooms)
    moe = any(b.experts for b in blocks)

    def need(cards: list[_Card]) -> list[int]:
        return card_need(_as_placement(n, cards))

    def fits_layers(cards: list[_Card], d: int, k: int) -> bool:
        return k == 0 or need(_with_layers(cards, d, k, moe))[d] <= rooms[d]

    def fits_converted(cards: list[_Card], start: int, d: int, c: int) -> bool:
        return c == 0 or need(_convert(cards, start, d, c)[0])[d] <= rooms[d]

    cards = [_Card() for _ in range(nd)]
    # step 3: dense(-only) layers, back to front
    for d in reversed(range(nd)):
        free = n + 1 - sum(c.layers for c in cards[d + 1:])
        k = largest(partial(fits_layers, cards, d), free)
        cards = _with_layers(cards, d, k, moe)
    if not sum(c.layers for c in cards) and any(
            m > r for m, r in zip(need(cards), rooms, strict=True)):
        return None
    if not moe:
        return _as_placement(n, cards)
    everything = n + 1
    spread = Placement(n, everything, frozenset(range(n)), (), (), even_split(everything, nd))
    if sum(rooms) - sum(card_need(spread)) <= 0:
        return _as_placement(n, cards)
    # step 4: whole layers front to back
    start = nd
    for d in reversed(range(nd)):
        if not cards[d].layers:
            break
        start = d
    d = 0
    while d <= start < nd:
        high = _copy(cards)
        for j in range(start, nd):
            move = high[j].layers if j < nd - 1 else high[j].layers - 1
            high[d].layers += move
            high[j].layers -= move
            high[j].part = 0
        if need(high)[d] <= rooms[d]:
            cards, start = high, nd - 1
        else:
            most = high[d].whole - cards[d].whole
            c = largest(partial(fits_converted, cards, start, d), max(most - 1, 0))
            cards, start = _convert(cards, start, d, c)
        # one more layer in part, the rest of it on the next card (in host memory from the
        # last); each test strict, on this card and the next
        if start < nd and cards[start].layers > (0 if d < nd - 1 else 1) and cards[start].part:
            test = _copy(cards)
            s = start
            test[s].layers -= 1
            test[s].part -= 1
            test[d].layers += 1
            test[d].part += 1
            if test[s].part == 0:
                s += 1
            test[d].to = d + 1 if d < nd - 1 else None

            def room_for(t: list[_Card], d: int = d) -> bool:
                m = need(t)
                return m[d] < rooms[d] and (d + 1 == nd or m[d + 1] < rooms[d + 1])

            test[d].fraction = "up"
            if room_for(test):
                cards, start = _copy(test), s
                test[d].fraction = "gate"
                if room_for(test):
                    cards = test
            else:
                test[d].fraction = "attn"
                if room_for(test):
                    cards, start = test, s
        d += 1
    return _as_placement(n, cards)


#: host memory's read bandwidth where none is given: dual-channel DDR5-5600, 2 × 8 bytes ×
#: 5,600 MT/s (a datasheet figure, as the cards' are)
DEFAULT_HOST_BANDWIDTH = 89.6e9
#: the same for a data-center card, which sits in a server: one socket's eight channels of
#: DDR5-4800, 8 × 8 bytes × 4,800 MT/s
SERVER_HOST_BANDWIDTH = 307.2e9


def host_bandwidth_of(gpus: list[GPU | None], given: float | None) -> tuple[float, str]:
    """Host memory's read bandwidth and where it comes from: the rate given ("given"), the
    card's host as the catalog gives it (a Grace CPU's LPDDR5X: its name), else assumed by
    the card's segment: a server socket's for a data-center card ("assumed server"),
    dual-channel DDR5 for the rest ("assumed")."""
    if given:
        return given, "given"
    known = next((g for g in gpus if g is not None and g.host_bandwidth_bytes_per_s), None)
    if known is not None and known.host_bandwidth_bytes_per_s:
        return float(known.host_bandwidth_bytes_per_s), known.host_memory or "catalog"
    if any(g is not None and g.segment == "datacenter" for g in gpus):
        return SERVER_HOST_BANDWIDTH, "assumed server"
    return DEFAULT_HOST_BANDWIDTH, "assumed"
#: the batch from which llama.cpp's CUDA backend computes a host-held weight on the card,
#: copying it over for the batch (GGML_OP_OFFLOAD_MIN_BATCH's default)
OP_OFFLOAD_MIN_BATCH = 32
#: copies from pageable host memory (a block's KV cache in host memory is a plain CPU buffer,
#: not pinned): as measured on the H200 machine, 6.6–7.4 GB/s against 55.4 from pinned memory
#: (bench/results/host-link-h200.json)
PAGEABLE_COPY = 7e9
#: the host link where none is given: PCIe 4.0 x16, 16 GT/s × 16 lanes × 128/130 / 8
DEFAULT_HOST_LINK = 16e9 * 16 * 128 / 130 / 8
#: copies from pinned host memory run at this share of the link's rate: 55.1–55.4 of the H200's
#: 63.0 GB/s (PCIe 5.0 x16; bench/results/host-link-h200.json, uva-read-h200.json); a link
#: given is taken as the rate itself
PINNED_COPY_SHARE = 0.874


def link_rate(gpu: GPU, given: float | None,
              share: float = PINNED_COPY_SHARE) -> tuple[float, str, float]:
    """The rate a transfer over the host link runs at, what the link is (host_link_of), and
    the share of it taken: a rate given is the rate itself; the card's own link (or PCIe 4.0
    x16 assumed) runs at ``share`` of its rate, as measured (a pinned copy's by default)."""
    link, link_from = host_link_of(gpu, given)
    taken = 1.0 if link_from == "given" else share
    return link * taken, link_from, taken


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


def _holding(on: range) -> Callable[[int, int, int], range]:
    """A layer split that gives a card the blocks ``on``."""
    def split(n: int, pp: int, stage: int) -> range:
        return on
    return split


def offload_decode(spec: ModelSpec, opts: CacheOptions, context: int, sequences: int,
                   weights: Weights, blocks: tuple[Block, ...], output_bytes: int,
                   place: Placement, gpus: list[GPU], host_bandwidth: float | None,
                   host_link: float | None = None) -> dict[str, Any]:
    """A decode step at full context with part of the model in host memory: each card
    (``gpus``, one a device of the placement) reads what it holds (its weights, of the
    routed experts the share the step's tokens route to, and its blocks' caches) at its
    bandwidth, or computes its share of the step's FLOPs at its matrix peak where that
    takes longer; the CPU reads the rest at host memory's bandwidth (its compute not
    counted). The cards and the CPU run one after the other, layer by layer. From 32
    sequences (op offload) the first card computes the host-held blocks as well, their
    weights copied over its host link each step and their caches from pageable memory at
    PAGEABLE_COPY."""
    from ..kv import cache_size
    from ..parallel import Parallel, rank_spec
    from ..plan import attention_flops

    share = weights.expert_share(sequences)
    cards_w, host_w = place.place_bytes(blocks, output_bytes, 1.0 if share is None else share)
    # from 32 sequences the card computes the host-held weights too, copied over the link
    offload = sequences >= OP_OFFLOAD_MIN_BATCH
    link, link_from, _ = link_rate(gpus[0], host_link)
    whole = cache_size(spec, context, sequences, opts)
    weight_read = sum(cards_w) + host_w
    card_memory = card_seconds = 0.0
    card_compute: float | None = 0.0
    card_kv = card_flops = 0
    for gpu, card_w, on in zip(gpus, cards_w, place.device_ranges(), strict=True):
        card_spec = rank_spec(spec, Parallel(), 0, _holding(on))
        cache = cache_size(card_spec, context, sequences, opts)
        kv = cache.read_bytes + 2 * cache.state_bytes
        params = spec.params.active * card_w / weight_read if weight_read else 0.0
        flops = int(2 * sequences * params) + attention_flops(card_spec, cache)
        assert gpu.bandwidth_bytes_per_s
        memory = (card_w + kv) / gpu.bandwidth_bytes_per_s
        compute = flops / gpu.matmul_flops_per_s if gpu.matmul_flops_per_s else None
        card_memory += memory
        card_compute = (card_compute + compute if card_compute is not None
                        and compute is not None else None)
        card_seconds += max(memory, compute or 0.0)
        card_kv += kv
        card_flops += flops
    host_kv = whole.read_bytes + 2 * whole.state_bytes - card_kv
    card_params = spec.params.active * sum(cards_w) / weight_read if weight_read else 0.0
    host_flops = (int(2 * sequences * (spec.params.active - card_params))
                  + max(0, attention_flops(spec, whole) - (card_flops
                                                          - int(2 * sequences * card_params))))
    bw, bw_from = host_bandwidth_of(list(gpus), host_bandwidth)
    host_bytes = host_w + host_kv
    # the host-held blocks' caches at host bandwidth either way
    # from 32 sequences the card runs the host-held blocks' attention too, their caches
    # copied from pageable memory (Memory.prompt_copies says why)
    pageable = min(link, PAGEABLE_COPY)
    host_seconds = (host_w / link + host_kv / pageable) if offload else host_bytes / bw
    seconds = card_seconds + host_seconds
    step = sum(cards_w) + card_kv + host_bytes
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
            "host_bandwidth_from": bw_from,
            "op_offload": offload,
            "host_link_bytes_per_s": link if offload else None, "host_link_from": link_from,
            "host_cache_copy_bytes_per_s": pageable if offload and host_kv else None}


def offload_prefill(spec: ModelSpec, opts: CacheOptions, context: int, weights: Weights,
                    blocks: tuple[Block, ...], output_bytes: int, place: Placement,
                    gpus: list[GPU], n_ubatch: int, host_link: float | None,
                    cache_copies: int | None = 0) -> dict[str, Any] | None:
    """The prompt of one sequence with part of the model in host memory. Each batch of
    ``n_ubatch`` tokens (32 or more) offloads every op on a host-held weight: the cards
    compute all of it at their matrix peaks (each its blocks' share, the first card the
    host-held blocks'), and each batch first copies the host-held weights over the first
    card's host link (of the routed experts, those the batch routes to; the output layer,
    which a prompt runs for its last token alone, not). Blocks whole in host memory also
    copy their caches (``cache_copies`` bytes, Memory.prompt_copies) from pageable host
    memory at PAGEABLE_COPY. None where those caches' copies were not traced."""
    from ..plan import prefill_estimate

    whole = len(place.gpu_blocks) < place.n_layers
    if context < 1 or cache_copies is None:
        return None
    bases = [prefill_estimate(spec, opts, context, weights, g) for g in gpus]
    if any(b is None for b in bases):
        return None
    shares = [len(r) / place.n_layers for r in place.device_ranges()]
    shares[0] += (place.n_layers - len(place.gpu_blocks)) / place.n_layers
    compute_seconds = sum(b.seconds * f for b, f in zip(bases, shares, strict=True) if b)
    base = bases[0]
    assert base is not None
    link, link_from, _ = link_rate(gpus[0], host_link)
    batches = -(-context // n_ubatch)
    full, last = divmod(context, n_ubatch)
    # the output layer in host memory runs on the CPU, for the prompt's last token only
    kept = 0 if place.output_on_gpu else output_bytes
    copied = full * (_copied(place, blocks, output_bytes, weights, n_ubatch) - kept)
    if last:
        copied += _copied(place, blocks, output_bytes, weights, last) - kept
    copy_seconds = copied / link
    pageable = min(link, PAGEABLE_COPY)
    cache_seconds = cache_copies / pageable
    seconds = compute_seconds + copy_seconds + cache_seconds
    out = {"tokens": context, "flops": base.flops, "attention_flops": base.attention_flops,
           "seconds": seconds, "tokens_per_s": context / seconds,
           "bound": ("host link" if copy_seconds + cache_seconds > compute_seconds
                     else base.bound),
           "batches": batches, "n_ubatch": n_ubatch, "host_link_bytes": copied,
           "host_link_seconds": copy_seconds, "host_link_bytes_per_s": link,
           "host_link_from": link_from}
    if whole:
        out.update({"host_cache_copy_bytes": cache_copies,
                    "host_cache_copy_seconds": cache_seconds,
                    "host_cache_copy_bytes_per_s": pageable})
    return out
