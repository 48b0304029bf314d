"""vLLM's ``--cpu-offload-gb``: part of each rank's weights in pinned host memory.

``vllm/model_executor/offloader/uva.py · UVAOffloader`` (the backend ``--cpu-offload-gb`` picks
when no prefetch group is set, ``offloader/base.py · create_offloader``) is handed the decoder
layers one at a time as ``make_layers`` builds them (a stage's own layers, first to last) and
walks each layer's parameters in order: while the bytes moved so far are under the budget
(``--cpu-offload-gb`` GiB, per rank) it moves the next parameter whole to pinned host memory
and leaves the card a view of it (unified virtual addressing). The last parameter moved can
take the total past the budget; the embeddings, the lm_head and anything outside the layer
stack stay on the card.

The card reads those parameters over its host link in every forward pass, at the share of the
link's rate an H200 measured for such reads: a decode step reads the dense ones whole and, of
the routed experts, those the step's tokens route to; each chunk of a prefill reads them all,
once every UVA_ROWS_PER_READ of its rows. SGLang's ``--cpu-offload-gb``
(``srt/utils/offloader.py · OffloaderV1``) makes the same walk but copies a layer's moved
parameters to the card whole in each pass.

A layer's parameters here are its config modules as vLLM fuses them (Q, K and V in one
``qkv_proj``, gate and up in one ``gate_up_proj``, a mixture of experts' ``w13_weight`` and
``w2_weight``), each a tensor-parallel rank's share, at the weight format's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..gguf_mix import MIXES, MODULE_LAYER, module_types
from ..hf import _UNGATED_MLP
from ..model import ModelSpec
from ..weights import Weights

if TYPE_CHECKING:
    from ..parallel import Split
    from .base import EngineRequest, RankShare

__all__ = ["Offloaded", "offload_extra", "offload_note", "offload_shares", "offloaded",
           "refuse_compressed", "with_offload_decode", "with_offload_prefill"]

GiB = 1 << 30
#: a card reads pinned host memory through a UVA view at this share of its host link's rate:
#: 50.8 of the H200's 63.0 GB/s (PCIe 5.0 x16), a sum and 1–64-row products alike
#: (bench/results/uva-read-h200.json); a pinned copy runs at 55.1 (0.874)
UVA_READ_SHARE = 0.806
#: a matrix product over a UVA view reads the weights once every this many rows of
#: activations: 1–64 rows once, 2,048 rows 8.03 times (uva-read-h200.json)
UVA_ROWS_PER_READ = 256

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



def _module_bytes(spec: ModelSpec, weights: Weights) -> list[int]:
    """Each config module's bytes in the weight format: a llama-quantize mix's per tensor,
    else the routed experts at the experts' rate and every other layer module at the rate the
    rest of the decoder's bytes give."""
    mods = spec.params.modules
    if weights.format in MIXES and weights.source.startswith("config, llama-quantize"):
        return module_types(spec, weights.format)
    p = spec.params
    expert_rate = weights.expert_bytes / p.experts if p.experts else 0.0
    # the bytes beside the embeddings and the routed experts over their parameters (a vision
    # tower's among them)
    rest = p.total - p.embedding - p.per_layer_embedding - p.experts
    body = (weights.bytes - weights.embedding_bytes - weights.per_layer_embedding_bytes
            - weights.expert_bytes)
    rate = body / rest if rest > 0 else 0.0
    return [int(m.params * (expert_rate if m.role == "experts" else rate)) for m in mods]


def _layer_params(spec: ModelSpec, weights: Weights, tp: int, expert_ranks: int = 1
                  ) -> dict[int, list[tuple[int, bool]]]:
    """Per decoder layer: (bytes on one tensor-parallel rank, routed experts?) of each
    parameter vLLM holds, in the layer's order (the routed experts split over
    ``expert_ranks`` data-parallel ranks too)."""
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
            share = size // (tp * expert_ranks)
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
    return _walk(_layer_params(spec, weights, tp), layers, budget)


def _walk(per_layer: dict[int, list[tuple[int, bool]]], layers: range,
          budget: int) -> Offloaded | None:
    """The offloader's walk over ``layers`` (their parameters as _layer_params lists them):
    whole parameters while the bytes moved are under ``budget``."""
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


def offload_shares(req: EngineRequest, weights: Weights, shares: list[RankShare],
                   split: Split, expert_ranks: int = 1
                   ) -> tuple[list[Offloaded | None], list[RankShare]]:
    """--cpu-offload-gb on each stage (``split``: the engine's layers of a stage;
    ``expert_ranks`` as shares takes it): what one of its ranks moves to host memory, and the
    shares with that off their cards. Refused for DeepSeek-V4's compressed caches, whose plans
    do not move weights."""
    budget = req.settings.cpu_offload_bytes
    if budget <= 0:
        return [None] * len(shares), shares
    p, n = req.parallel, req.spec.decoder_layers
    per_layer = _layer_params(req.spec, weights, p.tp, expert_ranks)
    moved = [_walk(per_layer, split(n, p.pp, sh.stage), budget) for sh in shares]
    return moved, [replace(sh, weights_bytes=max(0, sh.weights_bytes - (m.bytes if m else 0)))
                   for sh, m in zip(shares, moved, strict=True)]


def refuse_compressed(req: EngineRequest, engine: str) -> None:
    """Refuse --cpu-offload-gb for DeepSeek-V4's compressed caches, whose plans (under
    ``engine``) do not move weights: dropping it would give the plan without the offload."""
    if req.settings.cpu_offload_bytes:
        raise InputError(f"kvplan does not plan --cpu-offload-gb for DeepSeek-V4's "
                         f"compressed caches under {engine}", field="cpu_offload_gb")


def offload_extra(req: EngineRequest, moved: list[Offloaded | None], shares: list[RankShare],
                  chunk: int, *, whole: bool = False) -> dict[str, Any]:
    """What --cpu-offload-gb keeps in host memory, per stage (a rank's bytes, of them the
    routed experts', its layers, its card's bandwidth and host link), as answer() applies it
    to the decode and prefill estimates; ``forwards``: the passes a prompt of the context
    takes in chunks of ``chunk`` tokens. ``whole``: each pass copies every moved byte (SGLang's
    OffloaderV1), not the routed experts alone (vLLM's UVA views)."""
    from .llamacpp_offload import PINNED_COPY_SHARE, link_rate

    stages = []
    for m, sh in zip(moved, shares, strict=True):
        if m is None or sh.gpu is None or not sh.gpu.bandwidth_bytes_per_s:
            continue
        # copied whole at a pinned copy's share of the link, read through UVA at its own
        rate, link_from, share = link_rate(sh.gpu, req.settings.host_link_bytes_per_s,
                                           PINNED_COPY_SHARE if whole else UVA_READ_SHARE)
        stages.append({"stage": sh.stage, "bytes": m.bytes,
                       "expert_bytes": 0 if whole else m.expert_bytes,
                       "first_layer": m.first_layer, "last_layer": m.last_layer,
                       "bandwidth_bytes_per_s": sh.gpu.bandwidth_bytes_per_s,
                       "link_bytes_per_s": rate, "link_from": link_from,
                       "link_share": share})
    p = req.parallel
    host = sum(m.bytes for m in moved if m is not None) * p.tp * p.dp
    forwards = -(-req.context // chunk)
    # a chunk's products read a UVA view once every UVA_ROWS_PER_READ rows; a copy is made
    # once a pass
    reads = 1 if whole else -(-min(chunk, req.context) // UVA_ROWS_PER_READ)
    return {"stages": stages, "host_bytes": host, "forwards": forwards,
            "reads_per_forward": reads,
            "bytes_per_rank": [m.bytes if m else 0 for m in moved], "copies_whole": whole}


def offload_note(budget: int, moved: list[Offloaded | None], ranks: int, *,
                 copies: bool = False) -> str:
    """The plan's note on --cpu-offload-gb: what moved, from which layers, and how the card
    reads it (``copies``: copied whole each pass, as SGLang does)."""
    from ..units import format_bytes

    held = [(i, m) for i, m in enumerate(moved) if m is not None]
    flag = f"--cpu-offload-gb {budget / GiB:g}"
    if not held:
        return f"{flag}: nothing to move (no decoder-layer weights)"
    reads = ("the card copies a layer's share to itself in every forward pass" if copies
             else "the card reads them over its host link in every forward pass")
    if len(moved) == 1 and ranks == 1:
        m = held[0][1]
        return (f"{flag}: {format_bytes(m.bytes, 2)} of the weights (layers {m.first_layer}–"
                f"{m.last_layer}, whole parameters from the first on) in pinned host memory; "
                f"{reads}")
    parts = "; ".join(f"stage {i}: {format_bytes(m.bytes, 2)}, layers {m.first_layer}–"
                      f"{m.last_layer}" for i, m in held)
    total = sum(m.bytes for _, m in held) * ranks // len(moved)
    return (f"{flag}: each rank keeps part of its weights in pinned host memory ({parts}; "
            f"whole parameters from the stage's first layer on), {format_bytes(total, 2)} in "
            f"all; {reads}")


def with_offload_decode(decode: dict[str, Any], extra: dict[str, Any],
                        expert_share: float | None) -> dict[str, Any]:
    """A decode estimate with each stage's offloaded parameters read over its host link
    (``extra``: offload_extra's, per stage the moved bytes and expert bytes, the card's
    bandwidth and the link's rate); the stages in turn. Read through UVA views they are not
    read from the card's memory; copied to the card first (``copies_whole``), they are read
    there as well."""
    out = dict(decode)
    host_bytes = host_seconds = card_saved = 0.0
    for st in extra["stages"]:
        # the dense bytes, and of the experts the share the step's tokens route to
        share = 1.0 if expert_share is None else expert_share
        read = st["bytes"] - st["expert_bytes"] + int(st["expert_bytes"] * share)
        host_bytes += read
        host_seconds += read / st["link_bytes_per_s"]
        if not extra.get("copies_whole"):
            card_saved += read / st["bandwidth_bytes_per_s"]
    memory = max(0.0, decode["bandwidth_seconds_per_step"] - card_saved)
    compute = decode.get("compute_seconds_per_step")
    card = max(memory, compute or 0.0)
    seconds = card + host_seconds
    sequences = decode["tokens_per_s_total"] / decode["tokens_per_s_per_sequence"]
    first = extra["stages"][0] if extra["stages"] else {}
    out.update(seconds_per_step=seconds, tokens_per_s_per_sequence=1 / seconds,
               tokens_per_s_total=sequences / seconds, bandwidth_seconds_per_step=memory,
               offload_bytes_per_step=int(host_bytes), offload_seconds_per_step=host_seconds,
               offload_link_bytes_per_s=first.get("link_bytes_per_s"),
               offload_link_from=first.get("link_from"),
               offload_link_share=first.get("link_share"),
               bound="host link" if host_seconds > card else decode["bound"])
    return out


def with_offload_prefill(prefill: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """A prefill estimate with each of its passes (``extra["forwards"]``, chunks of the
    prompt) reading every stage's offloaded parameters over the host link
    ``extra["reads_per_forward"]`` times (through a UVA view a product reads them once every
    UVA_ROWS_PER_READ rows of the chunk; a copy is made once), on top of the compute."""
    forwards, reads = extra["forwards"], extra["reads_per_forward"]
    link = sum(st["bytes"] / st["link_bytes_per_s"] for st in extra["stages"]) * forwards * reads
    seconds = prefill["seconds"] + link
    out = dict(prefill)
    out.update(seconds=seconds, tokens_per_s=prefill["tokens"] / seconds,
               offload_seconds=link, offload_forwards=forwards, offload_reads_per_forward=reads)
    return out
