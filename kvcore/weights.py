"""Weight bytes: the checkpoint's exact size when known, else parameters × the weight format.

Bits per weight include each format's scales. GGUF k-quant mixes use the whole-file averages
llama.cpp publishes for Llama-2-7B in ``tools/quantize/README.md`` (Q4_K_M 4.84 bpw ...);
HF-style quantizations (fp8, int8, int4 AWQ/GPTQ, nvfp4, mxfp4) keep embeddings and the
lm_head in 16 bits, GGUF quantizes them too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import UnknownNameError
from .gguf_mix import MIXES, module_types
from .model import ModelSpec, Module
from .quant import QuantScheme, estimate
from .units import format_bytes

__all__ = ["WEIGHT_FORMATS", "WeightFormat", "Weights", "get_weight_format", "weight_format_list",
           "weights_for"]


@dataclass(frozen=True)
class WeightFormat:
    name: str
    bits_per_weight: float
    description: str
    #: embeddings and lm_head stay 16-bit (HF quantization schemes) rather than quantized
    embeddings_16bit: bool = False
    aliases: tuple[str, ...] = ()
    #: only the routed experts are in ``bits_per_weight``; attention, router and embeddings
    #: stay 16-bit, or the rest (embeddings aside) in ``rest_bits``
    experts_only: bool = False
    rest_bits: float = 16


WEIGHT_FORMATS: tuple[WeightFormat, ...] = (
    WeightFormat("f32", 32, "float32", aliases=("fp32", "float32")),
    WeightFormat("f16", 16, "float16", aliases=("fp16", "float16")),
    WeightFormat("bf16", 16, "bfloat16", aliases=("bfloat16",)),
    WeightFormat("fp8", 8 + 32 / (128 * 128), "float8 e4m3, fp32 scale per 128×128 block",
                 embeddings_16bit=True, aliases=("fp8_e4m3", "float8")),
    WeightFormat("int8", 8 + 16 / 4096, "int8 per-channel (W8A8/W8A16)", embeddings_16bit=True,
                 aliases=("w8a8", "w8a16")),
    # 4-bit values + fp16 scale + 4-bit zero point per group of 128
    WeightFormat("int4", 4 + (16 + 4) / 128, "int4 AWQ/GPTQ, group 128, fp16 scale + zero",
                 embeddings_16bit=True, aliases=("awq", "gptq", "w4a16")),
    # bitsandbytes 4-bit (NF4 or FP4): an fp32 absmax per 64 weights; with double
    # quantization the absmax is 8-bit, with an fp32 scale per 256 of them
    WeightFormat("nf4", 4 + 32 / 64, "bitsandbytes 4-bit (NF4/FP4), fp32 absmax per 64",
                 embeddings_16bit=True, aliases=("bnb_4bit", "bnb4")),
    WeightFormat("nf4_dq", 4 + 8 / 64 + 32 / (64 * 256),
                 "bitsandbytes 4-bit, double-quantized absmax", embeddings_16bit=True),
    WeightFormat("int3", 3 + (16 + 3) / 128, "int3 GPTQ/AWQ, group 128, fp16 scale + zero",
                 embeddings_16bit=True),
    WeightFormat("int2", 2 + (16 + 2) / 128, "int2 GPTQ/AWQ, group 128, fp16 scale + zero",
                 embeddings_16bit=True),
    WeightFormat("nvfp4", 4.5, "e2m1 + fp8 scale per 16", embeddings_16bit=True),
    WeightFormat("mxfp4", 4.25, "e2m1 + e8m0 scale per 32", embeddings_16bit=True),
    WeightFormat("mxfp4_moe", 4.25, "MoE experts in MXFP4, the rest 16-bit (gpt-oss)",
                 embeddings_16bit=True, experts_only=True),
    # DeepSeek-V4's checkpoints (expert_dtype fp4): routed experts in MXFP4, every other
    # linear in fp8 e4m3 with one ue8m0 (1-byte) scale per 128×128 block, embeddings 16-bit
    WeightFormat("fp8_mxfp4_moe", 4.25, "MoE experts in MXFP4, the rest fp8 per 128×128 block "
                 "(DeepSeek-V4)", embeddings_16bit=True, experts_only=True,
                 rest_bits=8 + 8 / (128 * 128)),
    # llama-quantize's mixes (gguf_mix prices each tensor in its own type; these averages,
    # an 80-layer Llama's, serve where a config lists no modules)
    WeightFormat("q8_0", 8.5, "GGUF Q8_0 (34 B per 32)", aliases=("gguf_q8_0",)),
    WeightFormat("q6_k", 6.56, "GGUF Q6_K", aliases=("q6_k_m",)),
    WeightFormat("q5_k_m", 5.66, "GGUF Q5_K_M mix", aliases=("q5_k",)),
    WeightFormat("q5_k_s", 5.52, "GGUF Q5_K_S mix"),
    WeightFormat("q5_1", 6.01, "GGUF Q5_1 (24 B per 32)"),
    WeightFormat("q5_0", 5.53, "GGUF Q5_0 (22 B per 32)"),
    WeightFormat("q4_1", 5.02, "GGUF Q4_1 (20 B per 32)"),
    WeightFormat("q4_k_m", 4.82, "GGUF Q4_K_M mix", aliases=("q4_k",)),
    WeightFormat("q4_k_s", 4.57, "GGUF Q4_K_S mix"),
    WeightFormat("q4_0", 4.55, "GGUF Q4_0 (18 B per 32)"),
    WeightFormat("iq4_nl", 4.54, "GGUF IQ4_NL (18 B per 32)"),
    WeightFormat("iq4_xs", 4.3, "GGUF IQ4_XS (136 B per 256)"),
    WeightFormat("q3_k_l", 4.21, "GGUF Q3_K_L mix"),
    WeightFormat("q3_k_m", 3.88, "GGUF Q3_K_M mix", aliases=("q3_k",)),
    WeightFormat("iq3_m", 3.62, "GGUF IQ3_M mix"),
    WeightFormat("q3_k_s", 3.5, "GGUF Q3_K_S mix"),
    WeightFormat("iq3_s", 3.5, "GGUF IQ3_S (110 B per 256)"),
    WeightFormat("iq3_xs", 3.32, "GGUF IQ3_XS mix"),
    WeightFormat("iq3_xxs", 3.11, "GGUF IQ3_XXS (98 B per 256)"),
    WeightFormat("q2_k", 2.99, "GGUF Q2_K mix"),
    WeightFormat("q2_k_s", 2.77, "GGUF Q2_K_S mix"),
    WeightFormat("iq2_m", 2.73, "GGUF IQ2_M mix"),
    WeightFormat("iq2_s", 2.52, "GGUF IQ2_S mix"),
    WeightFormat("iq2_xs", 2.4, "GGUF IQ2_XS (74 B per 256)"),
    WeightFormat("iq2_xxs", 2.16, "GGUF IQ2_XXS (66 B per 256)"),
    WeightFormat("iq1_m", 1.9, "GGUF IQ1_M (56 B per 256)"),
    WeightFormat("iq1_s", 1.74, "GGUF IQ1_S (50 B per 256)"),
)

_BY_NAME = {key: f for f in WEIGHT_FORMATS for key in (f.name, *f.aliases)}


def weight_format_list() -> list[dict[str, object]]:
    """Every weight format as ``kvplan weights --json`` and ``/api/v1/weights`` list it: its
    name, aliases, description, the average bits a weight it is priced at where a config lists
    no modules, and whether it is a llama-quantize mix (priced tensor by tensor)."""
    return [{"name": f.name, "aliases": list(f.aliases), "description": f.description,
             "bits_per_weight": f.bits_per_weight, "gguf_mix": f.name in MIXES,
             "experts_only": f.experts_only} for f in WEIGHT_FORMATS]


def get_weight_format(name: str) -> WeightFormat:
    key = str(name).strip().lower().replace("-", "_")
    try:
        return _BY_NAME[key]
    except KeyError:
        raise UnknownNameError(
            "weight format", str(name), {"auto": "auto", **{k: f.name for k, f in _BY_NAME.items()}},
            field="weights", choices=["auto", *(f.name for f in WEIGHT_FORMATS)]) from None


@dataclass(frozen=True)
class Weights:
    """Resident weight bytes and what they are based on."""

    bytes: int
    #: bytes read per generated token (MoE: active experts only)
    active_bytes: int
    format: str
    #: "safetensors index" or "GGUF tensors (FILE)" (exact), or "config estimate"
    source: str
    params: int
    #: bytes of the input embedding and (untied) lm_head within ``bytes``
    embedding_bytes: int = 0
    #: the lm_head is a matrix of its own (untied embeddings)
    lm_head_separate: bool = True
    #: the lm_head's exact bytes where the checkpoint's tensors give them (a GGUF's output
    #: tensor is often of another type than its token embedding)
    lm_head_bytes: int | None = None
    #: bytes of the decoder weights every tensor-parallel rank holds whole (ParamCount.replicated)
    replicated_bytes: int = 0
    #: bytes of the per-layer embedding tables within ``bytes`` (ParamCount.per_layer_embedding):
    #: an input-side lookup that engines place like the input embedding
    per_layer_embedding_bytes: int = 0
    #: routed-expert bytes within ``bytes`` (all experts) and within ``active_bytes`` (the
    #: top-k share one token reads)
    expert_bytes: int = 0
    active_expert_bytes: int = 0

    def step_bytes(self, tokens: int) -> int:
        """Weight bytes one decode step of ``tokens`` tokens (one a sequence) reads: the
        active bytes, but of the routed experts those any of the tokens routes to. A token
        routes to a given expert with probability active_expert_bytes / expert_bytes (k of E);
        with routing uniform and independent across tokens, a step reads the expected share
        1 - (1 - k/E)^tokens of every layer's experts, each once (engines group a step's
        tokens by expert). Skewed routing reads fewer distinct experts, so this is the most a
        step reads in expectation."""
        if tokens <= 1 or not self.expert_bytes or not self.active_expert_bytes:
            return self.active_bytes
        share = min(1.0, self.active_expert_bytes / self.expert_bytes)
        touched = round(self.expert_bytes * (1.0 - (1.0 - share) ** tokens))
        return self.active_bytes - self.active_expert_bytes + max(touched,
                                                                  self.active_expert_bytes)

    def expert_share(self, tokens: int) -> float | None:
        """The share of the routed experts' bytes one step of ``tokens`` tokens reads
        (step_bytes); None for a model without routed experts."""
        if not self.expert_bytes or not self.active_expert_bytes:
            return None
        routed = self.step_bytes(tokens) - self.active_bytes + self.active_expert_bytes
        return routed / self.expert_bytes

    @property
    def head_bytes(self) -> int:
        """Bytes of the lm_head, read every token: half the embedding bytes where it is a
        matrix of its own, the whole (tied) embedding where not (or the tensor's own bytes)."""
        if self.lm_head_bytes is not None:
            return self.lm_head_bytes
        return self.embedding_bytes // 2 if self.lm_head_separate else self.embedding_bytes

    @property
    def input_bytes(self) -> int:
        """Bytes of the input embedding: the lm_head's size, or the tensor's own bytes."""
        if self.lm_head_bytes is None:
            return self.head_bytes
        return (self.embedding_bytes - self.lm_head_bytes if self.lm_head_separate
                else self.embedding_bytes)


def _format(spec: ModelSpec, weight_format: str | None, auto: bool) -> WeightFormat:
    """The format weights are priced in: the one asked for, or with ``auto`` the
    checkpoint's (its dtype where kvplan knows it, else bf16)."""
    if auto:
        return get_weight_format(spec.checkpoint_weights or
                                 (spec.dtype if spec.dtype in _BY_NAME else "bf16"))
    return get_weight_format(str(weight_format))


def weights_for(spec: ModelSpec, weight_format: str | None = None, *, mtp: bool = False,
                include_encoder: bool = True) -> Weights:
    """Resident weights for ``spec`` in ``weight_format`` (None/"auto": the checkpoint); with
    ``mtp``, a separate draft model's weights (spec.draft) too, as priced when it was attached."""
    own = _weights_for(spec, weight_format, mtp=mtp, include_encoder=include_encoder)
    if not mtp or spec.draft is None:
        return own
    d = spec.draft
    # the draft is read once for every token it proposes: counted in the bytes a step reads
    return replace(own, bytes=own.bytes + d.weight_bytes,
                   active_bytes=own.active_bytes + d.weight_bytes,
                   params=own.params + d.spec.params.total,
                   source=f"{own.source}; with draft {d.name}: "
                          f"{format_bytes(d.weight_bytes, 2)} in {d.weight_format}, "
                          f"{d.weight_source}")


def _weights_for(spec: ModelSpec, weight_format: str | None = None, *, mtp: bool = False,
                 include_encoder: bool = True) -> Weights:
    p = spec.params
    params = p.total + (p.mtp if mtp else 0) - (0 if include_encoder else p.encoder)
    auto = weight_format is None or str(weight_format).lower() in ("auto", "")
    untied = p.embedding > spec.vocab_size * spec.hidden_size
    ck = spec.checkpoint
    if auto and ck is not None:
        # read per token: all but the experts not routed to and an untied input embedding
        active = (ck.total_bytes - ck.expert_bytes + ck.active_expert_bytes
                  - (ck.input_bytes if ck.head_separate else 0))
        draft = ck.draft_bytes if mtp else 0
        return Weights(ck.total_bytes + draft, active + draft,
                       ck.format, ck.source, params,
                       ck.input_bytes + (ck.head_bytes if ck.head_separate else 0),
                       ck.head_separate, lm_head_bytes=ck.head_bytes,
                       expert_bytes=ck.expert_bytes,
                       active_expert_bytes=ck.active_expert_bytes)
    if auto and spec.quant is not None and p.modules:
        return _quantized(spec, spec.quant, params, mtp=mtp, include_encoder=include_encoder)
    if auto and spec.safetensors_total_bytes:
        # the index counts every tensor the checkpoint holds, the draft (MTP) layers its config
        # declares among them: those are resident only when asked for
        ratio = spec.safetensors_total_bytes / max(1, p.total + p.mtp)
        stored = spec.safetensors_total_bytes - (0 if mtp else int(p.mtp * ratio))
        return Weights(stored, int(p.active * ratio),
                       spec.dtype, "safetensors index", params, int(p.embedding * ratio), untied,
                       replicated_bytes=int(p.replicated * ratio),
                       per_layer_embedding_bytes=int(p.per_layer_embedding * ratio),
                       expert_bytes=int(p.experts * ratio),
                       active_expert_bytes=int(p.active_experts * ratio))
    fmt = _format(spec, weight_format, auto)
    # (a model that reads shared weights more than once a step, Zamba2's blocks, is priced at
    # the mix's average: the mix's tensor list has each weight once)
    if fmt.name in MIXES and p.modules and not p.per_layer_embedding and p.active <= p.total:
        return _gguf_mix(spec, fmt, params, mtp=mtp, include_encoder=include_encoder)

    def size(n: int, embedding: int, experts: int) -> int:
        if fmt.experts_only:
            rest = n - experts - embedding
            return (int(experts * fmt.bits_per_weight / 8) + int(rest * fmt.rest_bits / 8)
                    + embedding * 2)
        if fmt.embeddings_16bit:
            return int((n - embedding) * fmt.bits_per_weight / 8) + embedding * 2
        return int(n * fmt.bits_per_weight / 8)

    # HF-style quantizations leave the vision/audio encoder and its projector in 16 bits
    # (modules_to_not_convert / ignore lists name the vision tower); GGUF keeps it in a
    # file of its own
    encoder = p.encoder if include_encoder and fmt.embeddings_16bit else 0
    # a per-layer embedding table is an embedding: 16-bit where the format keeps embeddings so
    total = (size(params - encoder, p.embedding + p.per_layer_embedding, p.experts)
             + encoder * 2)
    # the lm_head is read every token; it is half of `embedding` when untied
    head = spec.vocab_size * spec.hidden_size
    active = size(p.active, head, p.active_experts)
    embedding = size(p.embedding, p.embedding, 0)
    return Weights(total, active, fmt.name, "config estimate", params, embedding, untied,
                   replicated_bytes=size(p.replicated, 0, 0),
                   per_layer_embedding_bytes=size(p.per_layer_embedding, p.per_layer_embedding,
                                                  0),
                   expert_bytes=int(p.experts * fmt.bits_per_weight / 8),
                   active_expert_bytes=int(p.active_experts * fmt.bits_per_weight / 8))


def _gguf_mix(spec: ModelSpec, fmt: WeightFormat, params: int, *, mtp: bool,
              include_encoder: bool) -> Weights:
    """Weights of a llama-quantize mix (Q4_K_M …) tensor by tensor, each in the type the
    quantizer gives it (gguf_mix); draft (MTP) layers, which no module lists, at the mix's
    average."""
    p = spec.params
    sizes = module_types(spec, fmt.name)
    by_role: dict[str, int] = {}
    for m, b in zip(p.modules, sizes, strict=True):
        by_role[m.role] = by_role.get(m.role, 0) + b
    embed, head = by_role.get("embed", 0), by_role.get("head", 0)
    encoder = by_role.get("encoder", 0)
    draft = int(p.mtp * fmt.bits_per_weight / 8) if mtp else 0
    total = sum(sizes) - (0 if include_encoder else encoder) + draft
    untied = head > 0
    experts = by_role.get("experts", 0)
    active_experts = int(experts * p.active_experts / p.experts) if p.experts else 0
    # read per token: all but the experts not routed to and an untied input embedding
    active = (total - experts + active_experts - (embed if untied else 0)
              - (encoder if include_encoder else 0))
    source = "config, llama-quantize's tensor types"
    if encoder and include_encoder:
        source += ", vision tower in f16 (mmproj)"
    return Weights(total, active, fmt.name, source, params,
                   embed + head, untied, lm_head_bytes=head if untied else embed,
                   replicated_bytes=by_role.get("replicated", 0),
                   expert_bytes=experts, active_expert_bytes=active_experts)


def _quantized(spec: ModelSpec, scheme: QuantScheme, params: int, *, mtp: bool,
               include_encoder: bool) -> Weights:
    """Weights of a per-module quantization (ModelOpt, compressed-tensors), module by module;
    scaled to the safetensors index's exact total where the Hub gave one."""
    p = spec.params
    unquantized = spec.dtype_bytes if spec.dtype_bytes > 1 else 2
    est = estimate(p.modules, scheme, unquantized)
    # draft (MTP) layers are left out of the lists or excluded by them: 16-bit
    draft = p.mtp * unquantized
    total = est.total_bytes - (0 if include_encoder else est.encoder_bytes)
    untied = est.head_bytes > 0
    embedding = est.embed_bytes + est.head_bytes
    head = est.head_bytes if untied else est.embed_bytes
    active, replicated = est.active_bytes, est.replicated_bytes
    experts, active_experts = est.expert_bytes, est.active_expert_bytes
    source = "config estimate"
    if spec.safetensors_total_bytes:
        # the index is exact; the split between parts stays the estimate's
        stored = spec.safetensors_total_bytes - (0 if mtp else draft)
        ratio = stored / max(1, total)
        total, active = stored, int(active * ratio)
        embedding, head = int(embedding * ratio), int(head * ratio)
        replicated = int(replicated * ratio)
        experts, active_experts = int(experts * ratio), int(active_experts * ratio)
        source = "safetensors index"
    elif mtp:
        total += draft
        active += draft
    # a per-layer embedding table (Gemma-3n, Gemma 4 E2B/E4B) is priced unquantized
    per_layer = p.per_layer_embedding * unquantized
    if spec.safetensors_total_bytes:
        per_layer = int(per_layer * ratio)
    return Weights(total, active, scheme.label, source, params, embedding, untied,
                   lm_head_bytes=head, replicated_bytes=replicated,
                   per_layer_embedding_bytes=per_layer, expert_bytes=experts,
                   active_expert_bytes=active_experts)


def module_bytes(spec: ModelSpec, weight_format: str | None, modules: list[Module], *,
                 mtp: bool = False) -> int | None:
    """The bytes ``weights_for`` counts for ``modules`` (of ``spec.params.modules``) in
    ``weight_format``; None where the weights come from a checkpoint's tensors (GGUF), which
    are not priced module by module."""
    p = spec.params
    params = sum(m.params for m in modules)
    auto = weight_format is None or str(weight_format).lower() in ("auto", "")
    if auto and spec.checkpoint is not None:
        return None
    if auto and spec.quant is not None and p.modules:
        unquantized = spec.dtype_bytes if spec.dtype_bytes > 1 else 2
        out = estimate(tuple(modules), spec.quant, unquantized).total_bytes
        if spec.safetensors_total_bytes:
            # scaled as _quantized scales every part to the index's total
            est = estimate(p.modules, spec.quant, unquantized)
            stored = spec.safetensors_total_bytes - (0 if mtp else p.mtp * unquantized)
            out = int(out * stored / max(1, est.total_bytes))
        return out
    if auto and spec.safetensors_total_bytes:
        return int(params * spec.safetensors_total_bytes / max(1, p.total + p.mtp))
    fmt = _format(spec, weight_format, auto)
    # a decoder weight that is neither an embedding nor a routed expert
    bits = fmt.rest_bits if fmt.experts_only else fmt.bits_per_weight
    return int(params * bits / 8)
