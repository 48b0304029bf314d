"""vLLM's ``--cpu-offload-gb``: part of each rank's weights in pinned host memory.

``vllm/model_executor/offloader/uva.py · UVAOffloader`` (the backend ``--cpu-offload-gb`` picks
when no prefetch group is set, ``offloader/base.py · create_offloader``) is handed the decoder
layers one at a time as ``make_layers`` builds them (a stage's own layers, first to last) and
walks each layer's parameters in order: while the bytes moved so far are under the budget
(``--cpu-offload-gb`` GiB, per rank) it moves the next parameter whole to pinned host memory
and leaves the card a view of it (unified virtual addressing). The last parameter moved can
take the total past the budget; the embeddings, the lm_head and anything outside the layer
stack stay on the card.

The card reads those parameters over its host link in every forward pass: a decode step reads
the dense ones whole and, of the routed experts, those the step's tokens route to; each chunk
of a prefill reads them all.

A layer's parameters here are its config modules as vLLM fuses them (Q, K and V in one
``qkv_proj``, gate and up in one ``gate_up_proj``, a mixture of experts' ``w13_weight`` and
``w2_weight``), each a tensor-parallel rank's share, at the weight format's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..gguf_mix import MIXES, MODULE_LAYER, module_types
from ..hf import _UNGATED_MLP
from ..model import ModelSpec
from ..weights import Weights

__all__ = ["Offloaded", "offloaded", "with_offload_decode", "with_offload_prefill"]

_FUSED = ({"q_proj", "k_proj", "v_proj"}, {"gate_proj", "up_proj"})


@dataclass(frozen=True)
class Offloaded:
    """What one rank of a stage keeps in host memory."""

    #: bytes moved, of them the routed experts'
    bytes: int
    expert_bytes: int
    #: the decoder layers whose parameters were moved (all of them or in part)
    first_layer: int
    last_layer: int

    def read_per_step(self, expert_share: float | None) -> int:
        """Bytes a decode step reads of them: the dense ones, and of the experts the share the
        step's tokens route to."""
        share = 1.0 if expert_share is None else expert_share
        return self.bytes - self.expert_bytes + int(self.expert_bytes * share)


def _module_bytes(spec: ModelSpec, weights: Weights) -> list[int]:
    """Each config module's bytes in the weight format: a llama-quantize mix's per tensor,
    else the routed experts at the experts' rate and every other layer module at the rate the
    rest of the decoder's bytes give."""
    mods = spec.params.modules
    if weights.format in MIXES and weights.source.startswith("config, llama-quantize"):
        return module_types(spec, weights.format)
    p = spec.params
    expert_rate = weights.expert_bytes / p.experts if p.experts else 0.0
    layered = [m for m in mods if m.role not in ("experts", "embed", "head", "encoder")
               and MODULE_LAYER.search(m.names[0])]
    rest = sum(m.params for m in layered)
    body = (weights.bytes - weights.embedding_bytes - weights.per_layer_embedding_bytes
            - weights.expert_bytes)
    rate = body / rest if rest else 0.0
    return [int(m.params * (expert_rate if m.role == "experts" else rate)) for m in mods]


def _layer_params(spec: ModelSpec, weights: Weights, tp: int) -> dict[int, list[tuple[int, bool]]]:
    """Per decoder layer: (bytes on one tensor-parallel rank, routed experts?) of each
    parameter vLLM holds, in the layer's order."""
    sizes = _module_bytes(spec, weights)
    # FusedMoE's w13 holds gate and up of every expert, two thirds of them (an ungated MLP's
    # w1 half)
    w13 = (2, 3) if spec.model_type not in _UNGATED_MLP else (1, 2)
    out: dict[int, list[tuple[int, bool]]] = {}
    fused_key: tuple[int, int] | None = None
    for m, size in zip(spec.params.modules, sizes, strict=True):
        hit = MODULE_LAYER.search(m.names[0])
        if hit is None or m.role in ("embed", "head", "encoder"):
            continue
        layer = int(hit.group(1))
        params = out.setdefault(layer, [])
        share = size if m.role == "replicated" else size // tp
        leaf = m.names[0].rpartition(".")[2]
        if m.role == "experts":
            # FusedMoE's w13_weight (gate and up of every expert), then w2_weight (down)
            first = share * w13[0] // w13[1]
            params += [(first, True), (share - first, True)]
            fused_key = None
            continue
        group = next((i for i, g in enumerate(_FUSED) if leaf in g), None)
        key = (layer, group) if group is not None else None
        if key is not None and key == fused_key and params:
            params[-1] = (params[-1][0] + share, False)
        else:
            params.append((share, False))
        fused_key = key
    return out


def offloaded(spec: ModelSpec, weights: Weights, tp: int, layers: range,
              budget: int) -> Offloaded | None:
    """What the UVA offloader moves to host memory on one rank of the stage holding
    ``layers``, with a budget of ``budget`` bytes (None: nothing)."""
    if budget <= 0:
        return None
    per_layer = _layer_params(spec, weights, tp)
    moved = experts = 0
    first = last = -1
    for layer in layers:
        for size, expert in per_layer.get(layer, []):
            if moved >= budget:
                break
            moved += size
            experts += size if expert else 0
            first = layer if first < 0 else first
            last = layer
        if moved >= budget:
            break
    if not moved:
        return None
    return Offloaded(moved, experts, first, last)


def with_offload_decode(decode: dict[str, Any], stages: list[dict[str, Any]],
                        expert_share: float | None) -> dict[str, Any]:
    """A decode estimate with each stage's offloaded parameters read over its host link
    instead of from the card's memory (``stages``: per stage the offloaded bytes and expert
    bytes, the card's bandwidth and the link's rate); the stages in turn."""
    out = dict(decode)
    host_bytes = host_seconds = card_saved = 0.0
    for st in stages:
        read = Offloaded(st["bytes"], st["expert_bytes"], 0, 0).read_per_step(expert_share)
        host_bytes += read
        host_seconds += read / st["link_bytes_per_s"]
        card_saved += read / st["bandwidth_bytes_per_s"]
    memory = max(0.0, decode["bandwidth_seconds_per_step"] - card_saved)
    compute = decode.get("compute_seconds_per_step")
    card = max(memory, compute or 0.0)
    seconds = card + host_seconds
    sequences = decode["tokens_per_s_total"] / decode["tokens_per_s_per_sequence"]
    out.update(seconds_per_step=seconds, tokens_per_s_per_sequence=1 / seconds,
               tokens_per_s_total=sequences / seconds, bandwidth_seconds_per_step=memory,
               offload_bytes_per_step=int(host_bytes), offload_seconds_per_step=host_seconds,
               offload_link_bytes_per_s=stages[0]["link_bytes_per_s"],
               offload_link_from=stages[0]["link_from"],
               bound="host link" if host_seconds > card else decode["bound"])
    return out


def with_offload_prefill(prefill: dict[str, Any], stages: list[dict[str, Any]],
                         forwards: int) -> dict[str, Any]:
    """A prefill estimate with each of its ``forwards`` passes (chunks of the prompt) reading
    every stage's offloaded parameters over the host link once: the least that takes (a
    matrix product that reads a weight more than once reads it over the link again)."""
    link = sum(st["bytes"] / st["link_bytes_per_s"] for st in stages) * forwards
    seconds = prefill["seconds"] + link
    out = dict(prefill)
    out.update(seconds=seconds, tokens_per_s=prefill["tokens"] / seconds,
               offload_seconds=link, offload_forwards=forwards)
    return out
