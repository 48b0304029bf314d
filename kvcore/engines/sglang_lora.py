"""SGLang's LoRA memory pool: the adapter buffers ``--enable-lora`` allocates on every card.

Rules (sgl-project/sglang, ``python/sglang/srt/lora/mem_pool.py · LoRAMemoryPool``,
``lora/utils.py``, ``server_args.py``): the pool holds ``--max-loras-per-batch`` slots (8 by
default) at ``--max-lora-rank`` in the model's dtype, for the target modules
(``--lora-target-modules``: names, or ``all``; when left out, both rank and modules are taken
from the adapters of ``--lora-paths``, which kvplan does not read). For every decoder layer
(``num_hidden_layers``) and target module it allocates ``A`` (slots, rank × slices, input) and
``B`` (slots, output, rank): the merged qkv_proj three slices of A, gate_up_proj two; a
row-parallel module (o_proj, down_proj) splits A's input by tensor parallelism, a
column-parallel one B's output (K and V keep one head a rank where the model has fewer KV heads
than ranks). ``embed_tokens``: A (slots, rank, vocab) and B (slots, hidden, rank), whole on every
rank; ``lm_head``: A (slots, rank, hidden) and B (slots, vocab shard, rank), B split like the
lm_head (its vocab padded to 64). The pool is allocated after the weights and before the KV
cache is profiled, so it comes off the KV pool.

kvplan sizes it for dense attention models (the default ``get_hidden_dim`` geometry); SGLang
shapes its MoE (4D per-expert buffers in every layer), MLA and hybrid buffers per model class,
which kvplan refuses rather than guesses.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import InputError
from ..model import LayerKind, ModelSpec
from ..parallel import Parallel
from .lora import LoRA
from .vllm_lora import DTYPE_BYTES, check_lora, kv_heads_by_layer, layer_of, module_values

__all__ = ["DEFAULT_SLOTS", "for_sglang", "sglang_lora_bytes"]

#: --max-loras-per-batch's default
DEFAULT_SLOTS = 8
#: the module names SGLang's pool keys its buffers by, for a dense model, and the names that
#: map to them (lora/utils.py get_normalized_target_modules)
MODULES = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "embed_tokens", "lm_head")
_NORMAL = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
           "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj", "vocab_emb": "embed_tokens",
           "embeddings": "embed_tokens", "word_embeddings": "embed_tokens",
           "output": "lm_head", "unembed_tokens": "lm_head"}
#: the config's modules each buffer name covers
_PARTS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "o_proj": ("o_proj",),
          "gate_up_proj": ("gate_proj", "up_proj"), "down_proj": ("down_proj",)}
#: SGLang pads the lm_head's vocabulary to a multiple of this before splitting it
VOCAB_PADDING = 64
_DENSE = (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED)


def for_sglang(lora: LoRA, spec: ModelSpec, parallel: Parallel) -> LoRA:
    """``lora`` as SGLang's pool takes it (8 slots by default, the target names normalized),
    refusing what kvplan cannot size: no rank or modules given (SGLang reads them from the
    adapters), vLLM's --fully-sharded-loras, modules beyond a dense model's, a model that is
    not a dense attention model, pipeline stages."""
    if lora.fully_sharded:
        raise InputError("--fully-sharded-loras is vLLM's; SGLang has none",
                         field="fully_sharded_loras")
    if lora.rank is None:
        raise InputError("SGLang sizes its LoRA pool at --max-lora-rank, which it otherwise "
                         "takes from --lora-paths' adapters (kvplan does not read them): give "
                         "--max-lora-rank", field="max_lora_rank")
    if not lora.targets:
        raise InputError("SGLang allocates its LoRA pool for --lora-target-modules, which it "
                         "otherwise takes from --lora-paths' adapters (kvplan does not read "
                         "them): give --lora-target-modules (all, or names such as qkv_proj "
                         "o_proj)", field="lora_target_modules")
    names: set[str] = set()
    for t in lora.targets:
        if t in ("all", "all-linear"):
            names.update(MODULES)
            continue
        name = _NORMAL.get(t.split(".")[-1], t.split(".")[-1])
        if name not in MODULES:
            raise InputError(f"kvplan sizes SGLang's LoRA pool for {', '.join(MODULES)} (or "
                             f"all); got {t!r}", field="lora_target_modules")
        names.add(name)
    experts = any(m.role == "experts" for m in spec.params.modules)
    other = sorted({g.kind.value for g in spec.groups if g.kind not in _DENSE})
    if experts or other:
        what = "routed experts" if experts else "layers of kind " + ", ".join(other)
        raise InputError(f"kvplan sizes SGLang's LoRA pool for dense attention models; this "
                         f"one has {what}, whose buffers SGLang shapes per model class: plan "
                         "it under vLLM (--engine vllm), or without LoRA", field="enable_lora")
    check_lora(spec, "SGLang's LoRA pool")
    if parallel.pp > 1:
        raise InputError("kvplan does not size SGLang's LoRA pool under pipeline parallelism: "
                         "plan it with tensor parallelism", field="enable_lora")
    ordered = tuple(n for n in MODULES if n in names)
    return replace(lora, slots=DEFAULT_SLOTS if lora.slots is None else lora.slots,
                   targets=ordered)


def sglang_lora_bytes(spec: ModelSpec, lora: LoRA, parallel: Parallel) -> int:
    """The bytes of SGLang's LoRA pool on each rank (``lora`` as for_sglang returns it)."""
    assert lora.slots is not None and lora.rank is not None
    tp = parallel.tp
    kv = kv_heads_by_layer(spec)
    parts = {p for t in lora.targets for p in _PARTS.get(t, ())}
    values = 0
    for m in spec.params.modules:
        name = m.names[0].split(".")[-1]
        layer = layer_of(m)
        if m.matrices and layer is not None and name in parts:
            values += module_values(m, tp, kv_heads=kv.get(layer, 0))
    if "embed_tokens" in lora.targets:
        values += spec.vocab_size + spec.hidden_size
    if "lm_head" in lora.targets:
        shard = (spec.vocab_size if tp == 1
                 else -(-spec.vocab_size // VOCAB_PADDING) * VOCAB_PADDING // tp)
        values += spec.hidden_size + shard
    # the model's 16-bit dtype (a float32 checkpoint is served in 16 bits)
    return values * lora.rank * lora.slots * DTYPE_BYTES
