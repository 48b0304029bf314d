"""vLLM's LoRA slots: the adapter buffers ``--enable-lora`` allocates on every card.

Rules (vllm-project/vllm, ``vllm/lora/model_manager.py``, ``vllm/lora/layers/*.py``,
``vllm/config/lora.py``): with LoRA on, vLLM wraps every linear layer of the language model
(``get_supported_lora_modules``: each ``LinearBase``, and the fused MoE experts) and, where the
model class declares ``embedding_modules``, the input embedding and the lm_head. Each wrapped
layer allocates, at load time and before the KV cache is sized, zeroed buffers for
``--max-loras`` adapters of rank ``--max-lora-rank`` in ``--lora-dtype`` (``auto``: the model's
16-bit dtype), whatever the adapters later loaded hold:

- a matrix of input width ``in`` and output width ``out`` holds ``A`` (rank × in) and ``B``
  (out × rank) a slot; the merged projections (qkv, gate/up) hold one pair per slice;
- tensor parallelism splits ``B``'s rows of a column-parallel layer (q, k, v, gate, up) and
  ``A``'s columns of a row-parallel one (o, down), the other side whole on every rank;
  ``--fully-sharded-loras`` splits the other side too (the rank of a column-parallel ``A``,
  the output of a row-parallel ``B``); a replicated layer (MLA down-projections, the router)
  holds both whole;
- the routed experts (``FusedMoEWithLoRA``) hold a pair per expert for each of w1, w3 and w2;
- the input embedding holds ``A`` (vocab × rank) and ``B`` (hidden × rank), the lm_head ``A``
  (rank × hidden) and ``B`` (vocab × rank), whole on every rank.

The vision and audio towers are not wrapped unless ``--enable-tower-connector-lora``, which
kvplan does not plan. Adapters kept in host memory (``--max-cpu-loras``) take no card memory.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import InputError
from ..gguf_mix import MODULE_LAYER
from ..model import ModelSpec, Module
from ..parallel import Parallel, stage_layers
from . import registry
from .lora import LoRA

__all__ = ["LORA_RANKS", "check_lora", "for_vllm", "kv_heads_by_layer", "layer_of",
           "lora_bytes", "lora_label", "lora_note", "module_values"]

#: the ranks vLLM's --max-lora-rank accepts (config/lora.py MaxLoRARanks)
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
#: --max-loras' default, and its rank's
DEFAULT_LORAS, DEFAULT_RANK = 1, 16
#: a LoRA buffer's bytes a value (--lora-dtype auto, float16 or bfloat16)
DTYPE_BYTES = 2
#: model types whose vLLM class declares embedding_modules with both the input embedding and
#: the lm_head (0.34.0: LlamaForCausalLM and the classes built on it without their own, Phi-3,
#: ERNIE 4.5; qwen3.py, qwen3_moe.py, mixtral.py, phimoe.py, nemotron.py, nemotron_h.py,
#: nemotron_nas.py, granite*.py, exaone.py, exaone4.py, jamba.py, lfm2*.py, lfm3.py,
#: falcon_h1.py, minicpm.py, solar.py, apertus.py, qwen3_5.py): their embedding and lm_head get
#: slots too. MistralForCausalLM sets embedding_modules to {} ("We don't support LoRA on the
#: embedding layers"), which architecture_roles checks
EMBEDDING_TYPES = frozenset({
    "llama", "phi3", "ernie4_5", "qwen3", "qwen3_moe", "mixtral", "phimoe", "nemotron",
    "nemotron_h", "nemotron-nas", "granite", "granitemoe", "granitemoeshared",
    "granitemoehybrid", "exaone", "exaone4", "jamba", "lfm2", "lfm2_moe", "lfm3", "falcon_h1",
    "minicpm", "solar", "apertus", "qwen3_5_text", "qwen3_5_moe_text"})
#: model types whose vLLM class wraps the input embedding only: Command R's
#: (commandr.py, embedding_modules {"embed_tokens"}) and the architectures vLLM runs through its
#: Transformers backend (registry.py _TRANSFORMERS_SUPPORTED_MODELS; transformers/base.py
#: Base.embedding_modules {"embed_tokens": "input_embeddings"}, no lm_head)
EMBED_ONLY_TYPES = frozenset({
    "cohere", "cohere2", "gemma", "olmo", "olmo2", "olmo3", "olmoe", "stablelm", "phi",
    "starcoder2", "gpt_neox", "gpt_bigcode", "glm", "smollm3", "seed_oss", "arcee",
    "hunyuan_v1_dense", "hunyuan_v1_moe", "vaultgemma", "flex_olmo"})


def embedding_roles(spec: ModelSpec) -> frozenset[str]:
    """The embedding modules vLLM's class wraps with LoRA slots: "embed" (embed_tokens) and
    "head" (lm_head), by the model's type and architecture; a class vLLM serves through its
    Transformers backend (registered there, or loaded there for want of its own:
    registry.load_path) wraps the input embedding only."""
    if spec.architecture == "MistralForCausalLM":
        return frozenset()
    if spec.model_type in EMBEDDING_TYPES:
        return frozenset({"embed", "head"})
    if spec.model_type in EMBED_ONLY_TYPES:
        return frozenset({"embed"})
    if registry.load_path("vllm", spec) in (registry.Load.TRANSFORMERS,
                                            registry.Load.REMOTE_CODE):
        return frozenset({"embed"})
    return frozenset()


#: model types whose vLLM class sets is_3d_moe_weight (gpt-oss, Qwen3.5-MoE, Qwen3-VL-MoE):
#: FusedMoE3DWithLoRA holds w1 and w3 as one slice, so one A (rank × hidden) an expert where
#: the others hold two
THREE_D_MOE_TYPES = frozenset({"gpt_oss", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_vl_moe",
                               "qwen3_vl_moe_text"})
#: layers whose input tensor parallelism splits (RowParallelLinear); the rest of a layer's
#: linear modules are column-parallel
ROW_PARALLEL = frozenset({"o_proj", "down_proj", "out_proj", "fc2_latent_proj"})


def for_vllm(lora: LoRA) -> LoRA:
    """``lora`` with vLLM's defaults filled in (1 slot, rank 16), refusing what vLLM refuses:
    a rank outside MaxLoRARanks, "all" as a module name (vLLM takes names; none given is
    every module)."""
    rank = DEFAULT_RANK if lora.rank is None else lora.rank
    if rank not in LORA_RANKS:
        raise InputError(f"max_lora_rank must be one of vLLM's ranks "
                         f"{', '.join(map(str, LORA_RANKS))}; got {rank}",
                         field="max_lora_rank")
    if any(t in ("all", "all-linear") for t in lora.targets):
        raise InputError("vLLM's --lora-target-modules takes module names (o_proj, qkv_proj, "
                         "...); leave it out for every module", field="lora_target_modules")
    return replace(lora, slots=DEFAULT_LORAS if lora.slots is None else lora.slots, rank=rank)


#: the names vLLM gives the merged modules kvplan lists apart (packed_modules_mapping)
_PACKED = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
           "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}


def _targeted(name: str, lora: LoRA) -> bool:
    """Whether --lora-target-modules wraps module ``name``: named itself, or by its merged
    module's name or a sibling's (vLLM wraps the merged module whole)."""
    if not lora.targets:
        return True
    packed = _PACKED.get(name)
    if packed is None:
        return name in lora.targets
    return packed in lora.targets or any(_PACKED.get(t) == packed for t in lora.targets)


def layer_of(m: Module) -> int | None:
    """The decoder layer a module belongs to (None: outside the layers)."""
    hit = MODULE_LAYER.search(m.names[0])
    return int(hit.group(1)) if hit else None


def module_values(m: Module, tp: int, *, kv_heads: int = 0, fully_sharded: bool = False,
                  fused_w13: bool = False) -> int:
    """Values a rank holds for one slot of rank 1 of linear module ``m`` (the slot's A and B
    over each of its matrices): column-parallel B and row-parallel A split by ``tp``, the rest
    whole; a replicated module whole; ``fully_sharded`` splits the other side too. A K or V
    projection of ``kv_heads`` heads, fewer than ``tp``, keeps one head a rank (its heads are
    replicated). ``fused_w13``: the experts' w1 and w3 share one A."""
    name = m.names[0].split(".")[-1]
    total, split = _dims(m, name)
    if fused_w13 and m.role == "experts" and m.matrices % 3 == 0:
        # gated experts' unsplit widths are w1's and w3's inputs and w2's output, the hidden
        # width each: one of the three goes with the shared A
        total -= (total - split) // 3
    if m.role == "replicated":
        # ReplicatedLinear: A and B whole on every rank
        return total
    div = min(tp, kv_heads) if name in ("k_proj", "v_proj") and kv_heads else tp
    whole = total - split
    return (whole // tp if fully_sharded else whole) + split // div


def kv_heads_by_layer(spec: ModelSpec) -> dict[int, int]:
    """Each attention layer's KV heads (for the K and V projections' split)."""
    return {i: g.n_kv_heads for g in spec.groups if g.n_kv_heads for i in g.layers}


def _dims(m: Module, name: str) -> tuple[int, int]:
    """(Σ input + output widths, Σ widths tensor parallelism splits) over ``m``'s matrices."""
    if m.lora_dims != (0, 0):
        return m.lora_dims
    width_in = m.params // m.rows if m.rows else 0
    total = m.matrices * width_in + m.rows
    return total, m.matrices * width_in if name in ROW_PARALLEL else m.rows


def check_lora(spec: ModelSpec, what: str = "vLLM's LoRA slots") -> None:
    """Refuse LoRA for a model whose linear modules kvplan does not list (``what``: the
    engine's buffers, as the message names them)."""
    if not any(m.matrices for m in spec.params.modules):
        raise InputError(f"kvplan has no list of {spec.model_type}'s linear layers, so it "
                         f"cannot size {what} for it: plan without --enable-lora",
                         field="enable_lora")


def lora_bytes(spec: ModelSpec, lora: LoRA, parallel: Parallel) -> list[int]:
    """The bytes of LoRA slots each rank of every pipeline stage holds (one entry a stage)."""
    return lora_split(spec, lora, parallel)[0]


def lora_split(spec: ModelSpec, lora: LoRA, parallel: Parallel) -> tuple[list[int], list[int]]:
    """The bytes of LoRA slots each rank of every pipeline stage holds, and of those the
    routed experts' (a decode step reads its tokens' share of them), one entry a stage each."""
    check_lora(spec)
    lora = for_vllm(lora)
    assert lora.slots is not None and lora.rank is not None
    tp, pp = parallel.tp, parallel.pp
    n = spec.decoder_layers
    stage_of = {i: s for s in range(pp) for i in stage_layers(n, pp, s)}
    non_gated = spec.model_type == "nemotron_h"
    kv = kv_heads_by_layer(spec)
    per_stage = [0] * pp
    experts = [0] * pp
    roles = embedding_roles(spec)
    for m in spec.params.modules:
        name = m.names[0].split(".")[-1]
        if m.role in ("embed", "head"):
            if m.role in roles and _targeted("embed_tokens" if m.role == "embed" else "lm_head",
                                             lora):
                # the embedding's A is vocab × rank, the lm_head's B vocab × rank: both
                # whole on every rank, with a hidden-wide partner
                values = spec.vocab_size + spec.hidden_size
                per_stage[0 if m.role == "embed" else pp - 1] += values
            continue
        if not m.matrices or m.role == "encoder" or not _targeted(name, lora):
            continue
        if non_gated and m.role == "replicated" and name == "gate":
            # vLLM leaves a non-gated MoE's router unwrapped (its peft adapters have none)
            continue
        layer = layer_of(m)
        stage = stage_of.get(layer, 0) if layer is not None else 0
        # FusedMoEWithLoRA splits like its layer: over the tensor-parallel group flattened
        # across the data-parallel ranks (lora/layers/fused_moe.py moe_parallel_config.tp_size)
        split = tp * parallel.dp if m.role == "experts" else tp
        values = module_values(m, split, kv_heads=kv.get(layer, 0) if layer is not None else 0,
                               fully_sharded=lora.fully_sharded,
                               fused_w13=spec.model_type in THREE_D_MOE_TYPES)
        per_stage[stage] += values
        if m.role == "experts":
            experts[stage] += values
    if ("head" in roles and not any(m.role == "head" for m in spec.params.modules)
            and _targeted("lm_head", lora)):
        # a tied lm_head is still wrapped under its own name (LogitsProcessorWithLoRA)
        per_stage[pp - 1] += spec.vocab_size + spec.hidden_size
    scale = lora.rank * lora.slots * DTYPE_BYTES
    return [v * scale for v in per_stage], [v * scale for v in experts]


def lora_label(lora: LoRA) -> str:
    """The budget line's name: "LoRA slots (4 × rank 64)"."""
    return f"LoRA slots ({lora.slots} × rank {lora.rank})"


def lora_note(spec: ModelSpec, lora: LoRA, per_rank: int, tp: int = 1,
              weights_per_rank: int = 0) -> str:
    """What the LoRA line holds, for the plan's notes, and what the decode estimate leaves
    out: each adapter in a batch reads its own slot every step (punica's kernels read the
    slot at its full rank)."""
    from ..units import format_bytes

    experts = (any(m.role == "experts" for m in spec.params.modules)
               and _targeted("experts", lora))
    wrapped = "the targeted linear layers" if lora.targets else "every linear layer"
    roles = embedding_roles(spec)
    if roles:
        wrapped += (", the embedding and the lm_head" if "head" in roles
                    else ", the input embedding")
    if experts:
        wrapped += " and each routed expert"
    return (f"--enable-lora: {lora.slots} adapter slot{'s' if lora.slots != 1 else ''} of rank "
            f"{lora.rank} in 16 bits on {wrapped}, {format_bytes(per_rank)} a card, allocated "
            "at load whatever the adapters hold (a lower --max-lora-rank or --max-loras, or "
            "--lora-target-modules, makes it smaller"
            + ("; --fully-sharded-loras splits it over tensor parallelism"
               if tp > 1 and not lora.fully_sharded else "") + ")"
            + _read_note(lora, per_rank, weights_per_rank, experts))


def _read_note(lora: LoRA, per_rank: int, weights_per_rank: int, experts: bool) -> str:
    from ..units import format_bytes

    slot = per_rank // (lora.slots or 1)
    share = (f" ({100 * slot / weights_per_rank:.1f}% of the weights a card)"
             if weights_per_rank else "")
    routed = ", a MoE its routed experts' share of it" if experts else ""
    return (f"; the decode estimate reads an adapter's slot for each sequence, up to the "
            f"slots (each sequence its own adapter): {format_bytes(slot, 1)}{share}{routed}")
