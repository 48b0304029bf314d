"""Tensor, pipeline and data parallelism: what one rank (one card) holds.

- Tensor parallel (TP): each rank holds ``max(1, n_kv_heads // tp)`` KV heads; when tp exceeds
  the KV heads they are replicated, so the group's total cache grows (vLLM
  ``vllm/config/model.py`` ``get_num_kv_heads``; SGLang ``srt/configs/model_config.py``). The MLA
  latent is one "head": every TP rank holds all of it. Linear-attention and SSM states split
  their heads over TP.
- Pipeline parallel (PP): each stage holds its own layers. Layers split as vLLM's
  ``get_pp_indices`` (``vllm/distributed/utils.py``) does: ``n // pp`` each, the remainder given one
  apiece to the stages before the last, from the end. SGLang gives the remainder to the last
  stages, TensorRT-LLM to the first, llama.cpp splits by device shares (each has its own
  split function below).
- Tensor parallel needs the heads to split evenly: ``tp`` must divide the attention heads, and
  the KV heads must be a multiple of ``tp`` or a divisor of it (vLLM
  ``verify_with_parallel_config`` and the QKV projection's replication rule; SGLang and
  TensorRT-LLM check the same). Anything else is refused rather than rounded.
- Data parallel (DP): independent replicas; capacity adds up, memory per card does not change.
- Attention data parallel (SGLang's ``--attn-dp-size``): inside one TP group of ``tp`` cards,
  attention runs as ``attn_dp`` groups of ``tp / attn_dp`` cards, each with its own requests
  and its own KV pool, while the MLP and experts stay split over all ``tp`` cards. It adds no
  cards (``arg_groups/parallel_hook.py``; ``runtime_context.derive_attn_tp_size``).

Memory is per card and never summed across cards.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace

from .errors import InputError, shown
from .model import LayerGroup, ModelSpec

__all__ = ["Parallel", "Split", "check_tp", "llamacpp_stage_layers", "pp_layer_counts", "ts_split",
           "rank_spec", "sglang_stage_layers", "stage_layers", "trtllm_stage_layers"]


@dataclass(frozen=True)
class Parallel:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    #: attention data-parallel groups within the TP group (SGLang's --attn-dp-size)
    attn_dp: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "attn_dp"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1024:
                raise InputError(f"{name} must be a whole number from 1 to 1024, got {shown(value)}",
                                 field=name)
        if self.tp % self.attn_dp:
            raise InputError(f"attn_dp must divide tp: attention data parallelism splits the "
                             f"tensor-parallel cards into groups of equal size (tp {self.tp}, "
                             f"attn_dp {self.attn_dp})", field="attn_dp")

    @property
    def attn_tp(self) -> int:
        """The cards one attention group splits its heads over: tp / attn_dp."""
        return self.tp // self.attn_dp

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def ranks_per_replica(self) -> int:
        return self.tp * self.pp


def pp_layer_counts(num_layers: int, pp: int) -> list[int]:
    """Decoder layers per pipeline stage, in stage order."""
    if pp > num_layers:
        raise InputError(f"pp {pp} is larger than the model's {num_layers} layers", field="pp")
    counts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        counts[-i] += 1
    return counts


def stage_layers(num_layers: int, pp: int, stage: int) -> range:
    counts = pp_layer_counts(num_layers, pp)
    start = sum(counts[:stage])
    return range(start, start + counts[stage])


def _split_extra(num_layers: int, pp: int, stage: int, extra: list[int]) -> range:
    """Layers of ``stage`` when every stage holds ``num_layers // pp`` and the stages named in
    ``extra`` one more each."""
    if pp > num_layers:
        raise InputError(f"pp {pp} is larger than the model's {num_layers} layers", field="pp")
    counts = [num_layers // pp + (1 if s in extra else 0) for s in range(pp)]
    start = sum(counts[:stage])
    return range(start, start + counts[stage])


def sglang_stage_layers(num_layers: int, pp: int, stage: int) -> range:
    """Layers SGLang puts on pipeline stage ``stage``: ``num_layers // pp`` each, the remainder
    one apiece to the LAST stages (sglang/srt/distributed/utils.py get_pp_indices: 61 layers
    over 4 stages are 15, 15, 15, 16)."""
    return _split_extra(num_layers, pp, stage, list(range(pp - num_layers % pp, pp)))


def trtllm_stage_layers(num_layers: int, pp: int, stage: int) -> range:
    """Layers TensorRT-LLM puts on pipeline stage ``stage``: ``num_layers // pp`` each, the
    remainder one apiece to the FIRST stages (tensorrt_llm/mapping.py Mapping.pp_layers, a
    torch.tensor_split: 61 layers over 4 stages are 16, 15, 15, 15)."""
    return _split_extra(num_layers, pp, stage, list(range(num_layers % pp)))


def _f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def ts_split(layers: int, shares: tuple[float, ...]) -> tuple[int, ...]:
    """The layers each device takes of ``layers`` offloaded ones under ``-ts shares``: the
    shares summed into split points and divided by their sum, layer j on the first device
    whose split point exceeds j / layers (llama-model.cpp load_tensors, ``(il − i_gpu_start)
    / act_gpu_layers``, in float32 as there). One device: ()."""
    if len(shares) <= 1:
        return ()
    points, total = [], 0.0
    for x in shares:
        total = _f32(total + _f32(x))
        points.append(total)
    points = [_f32(p / total) for p in points]
    counts = [0] * len(shares)
    for j in range(layers):
        counts[bisect.bisect_right(points, _f32(_f32(j) / layers))] += 1
    return tuple(counts)


def llamacpp_stage_layers(num_layers: int, pp: int, stage: int) -> range:
    """Layers llama.cpp puts on device ``stage`` of ``pp`` under ``-sm layer`` with an even
    ``-ts``: every layer offloaded, the output layer counting as one more, split by ts_split
    (llama-model.cpp load_tensors: 32 layers over 2 devices are 17 and 15, the output on the
    second)."""
    if pp > num_layers:
        raise InputError(f"pp {pp} is larger than the model's {num_layers} layers", field="pp")
    counts = ts_split(num_layers + 1, (1.0,) * pp) or (num_layers + 1,)
    start = sum(counts[:stage])
    return range(start, min(start + counts[stage], num_layers))


def _shard_group(group: LayerGroup, tp: int, layers: tuple[int, ...]) -> LayerGroup:
    if group.kind.is_replicated:
        # the MLA latent, the DSA indexer's key, V4's compressed latent, index keys and
        # compressor state: one row per token (or state), whole on every rank
        return replace(group, layers=layers)
    if group.kind.is_recurrent:
        # heads split evenly over TP (check_tp refused uneven splits; a config without the
        # head counts rounds up); a replicated B/C group stays whole on every rank
        whole = group.replicated_conv_values
        conv = -(-(group.conv_state_values - whole) // tp) + whole
        ssm = -(-(group.state_values - group.conv_state_values) // tp)
        return replace(group, layers=layers, state_values=ssm + conv, conv_state_values=conv)
    return replace(group, layers=layers, n_kv_heads=max(1, group.n_kv_heads // tp))


def _tp_problem(spec: ModelSpec, tp: int) -> str | None:
    heads = spec.num_attention_heads
    if heads and heads % tp:
        return f"tp {tp} does not divide the model's {heads} attention heads"
    for g in spec.groups:
        if g.kind.is_recurrent:
            for count in g.split_counts:
                if count % tp:
                    return (f"tp {tp} does not divide the {count} heads (channels, or norm "
                            f"groups) of the {g.kind.value} layers' state")
            continue
        if not g.kind.is_attention or g.kind.is_replicated:
            continue
        kv = g.n_kv_heads
        if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
            return (f"tp {tp} does not split the {kv} KV heads of the {g.kind.value} layers "
                    "(tp must divide them or be a multiple of them)")
    return None


def check_tp(spec: ModelSpec, tp: int) -> None:
    """Refuse a tensor-parallel size that does not split the model's heads evenly."""
    if tp == 1:
        return
    problem = _tp_problem(spec, tp)
    if problem is not None:
        best = max(d for d in range(1, tp) if _tp_problem(spec, d) is None)
        raise InputError(f"{problem}; the largest tp below {tp} that works is {best}", field="tp")


Split = Callable[[int, int, int], range]


def rank_spec(spec: ModelSpec, parallel: Parallel, stage: int = 0,
              split: Split = stage_layers) -> ModelSpec:
    """The part of ``spec`` one rank of pipeline stage ``stage`` holds (``split``: the layers
    of a stage, vLLM's rule unless an engine splits otherwise)."""
    check_tp(spec, parallel.tp)
    if not 0 <= stage < parallel.pp:
        raise InputError(f"stage must be in 0..{parallel.pp - 1}", field="pp")
    # stages split the decoder's layers by their numbers, those without a cache included
    n = spec.decoder_layers
    own = set(split(n, parallel.pp, stage))
    last_stage = stage == parallel.pp - 1
    groups = []
    for g in spec.groups:
        # MTP/draft layers sit after the decoder, on the last stage
        layers = tuple(i for i in g.layers if (i in own) or (g.mtp and last_stage))
        if layers:
            groups.append(_shard_group(g, parallel.tp, layers))
    # a rank attends with its share of the query heads (0: not known, or not split evenly)
    heads = spec.num_attention_heads
    return replace(spec, groups=tuple(groups),
                   num_attention_heads=heads // parallel.tp if heads % parallel.tp == 0 else 0)
