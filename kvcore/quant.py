"""Which weights a quantized checkpoint stores in which format, and their bytes.

Reads the descriptions 2026 checkpoints carry:

- NVIDIA ModelOpt: ``hf_quant_config.json`` (``{"producer": {"name": "modelopt"},
  "quantization": {"quant_algo", "kv_cache_quant_algo", "group_size", "exclude_modules",
  "quantized_layers"}}``) or the same in config.json's ``quantization_config`` with
  ``quant_method: "modelopt"`` (``ignore`` for ``exclude_modules``, ``kv_cache_scheme`` for
  ``kv_cache_quant_algo``). Exclusions are shell wildcards over module paths; with
  ``MIXED_PRECISION`` only the modules ``quantized_layers`` names (or their children) are
  quantized, each in its own format.
- compressed-tensors (llm-compressor): ``config_groups`` of ``targets`` (``Linear``, module
  names, ``re:`` patterns) with a ``weights`` scheme (``num_bits``, ``type``, ``group_size``,
  ``strategy``, ``symmetric``), and an ``ignore`` list.
- ``quant_method: "mxfp8"`` (MiniMax's exports): every linear layer in MXFP8 but the
  ``ignored_layers`` (module names); one that also names a ``moe_quant_algo`` (experts in
  another format) is not read.

Bytes per format count every tensor the checkpoint stores for a weight matrix:

| format | per weight | per block | per matrix |
|---|---|---|---|
| NVFP4 (W4A4) | 4 bits | one fp8 e4m3 scale per 16 | fp32 weight_scale_2 + input_scale |
| W4A16 NVFP4 | 4 bits | one fp8 e4m3 scale per 16 | fp32 weight_scale_2 |
| FP8 (per tensor) | 1 byte | | fp32 weight_scale + input_scale |
| FP8 per channel | 1 byte | fp32 scale per output row | |
| FP8 block 128×128 | 1 byte | fp32 scale per 16,384 | |
| MXFP8 / MXFP4 | 8 / 4 bits | one e8m0 byte per 32 | |
| int4/int8 packed, group g | 4 / 8 bits | 16-bit scale per g (+ 4-bit zero point when asymmetric) | int64[2] weight_shape |
| compressed-tensors NVFP4 | 4 bits | one fp8 e4m3 scale per 16 | fp32 weight_global_scale (+ input_global_scale for W4A4) |
| compressed-tensors FP8 | 1 byte | per channel or block: a scale in the checkpoint's dtype | per tensor: fp32 scale |

Embeddings, norms, convolutions and the vision encoder are never quantized by either tool
(both quantize linear layers only; vLLM's ModelOpt loader keeps vision towers unquantized).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .model import Module

__all__ = ["QuantScheme", "Rule", "WeightEstimate", "estimate", "parse_quant", "quant_notes"]

#: what checkpoints put before ``layers.N`` (and before ``lm_head``/``embed_tokens``)
ROOTS = ("", "model.", "model.language_model.", "language_model.model.", "language_model.",
         "backbone.")


@dataclass(frozen=True)
class Rule:
    """How one quantized weight matrix is stored."""

    name: str
    #: bits per weight of the values themselves
    value_bits: int
    #: weights per block scale (0: no block scales) and each block scale's bytes
    group: int = 0
    group_scale_bytes: int = 0
    #: bits of a zero point per block (asymmetric integer schemes)
    group_zero_bits: int = 0
    #: bytes per matrix: per-tensor scales, recorded shapes
    matrix_bytes: int = 0
    #: bytes per output row: per-channel scales
    row_bytes: int = 0

    def bytes(self, params: int, rows: int, matrices: int) -> int:
        """Stored bytes of ``params`` weights in ``matrices`` matrices of ``rows`` rows."""
        out = params * self.value_bits // 8
        if self.group:
            blocks = params // self.group
            out += blocks * self.group_scale_bytes + blocks * self.group_zero_bits // 8
        return out + matrices * self.matrix_bytes + rows * self.row_bytes


NVFP4 = Rule("nvfp4", 4, 16, 1, matrix_bytes=8)
W4A16_NVFP4 = Rule("nvfp4 w4a16", 4, 16, 1, matrix_bytes=4)
FP8 = Rule("fp8", 8, matrix_bytes=8)
FP8_PER_CHANNEL = Rule("fp8 per-channel", 8, row_bytes=4)
FP8_BLOCK = Rule("fp8 block 128", 8, 128 * 128, 4)
MXFP8 = Rule("mxfp8", 8, 32, 1)
MXFP4 = Rule("mxfp4", 4, 32, 1)

#: ModelOpt's quant_algo names -> formats (vLLM modelopt.py QUANT_ALGOS, less MIXED_PRECISION)
MODELOPT_ALGOS = {"NVFP4": NVFP4, "W4A16_NVFP4": W4A16_NVFP4, "FP8": FP8,
                  "FP8_PER_CHANNEL_PER_TOKEN": FP8_PER_CHANNEL, "FP8_PB_WO": FP8_BLOCK,
                  "MXFP8": MXFP8}


@dataclass(frozen=True)
class QuantScheme:
    """A checkpoint's per-module quantization."""

    #: for people: "nvfp4 (modelopt)", "mixed nvfp4 w4a16+fp8 (modelopt)"
    label: str
    #: "modelopt", "compressed-tensors", "fp8" or "mxfp8"
    method: str
    #: the format of a linear layer neither excluded nor listed (None: unquantized)
    default: Rule | None = None
    #: modules left unquantized: wildcards (ModelOpt), names or ``re:`` patterns
    exclude: tuple[str, ...] = ()
    #: module path -> format, for ``quantized_layers`` (children inherit)
    layers: tuple[tuple[str, Rule], ...] = ()
    #: compressed-tensors groups: (targets, format), first match wins
    targets: tuple[tuple[tuple[str, ...], Rule], ...] = ()
    #: the KV-cache format the checkpoint was calibrated for ("fp8"), None where none
    kv_cache: str | None = None
    #: where the description came from ("hf_quant_config.json", "config.json")
    source: str = "config.json"
    notes: tuple[str, ...] = field(default=())

    @cached_property
    def _layer_map(self) -> dict[str, Rule]:
        # a key names a module; its ancestors (a fused-expert parent) inherit its format
        out: dict[str, Rule] = {}
        for key, rule in self.layers:
            out[key] = rule
        for key, rule in self.layers:
            parts = key.split(".")
            for n in range(1, len(parts)):
                out.setdefault(".".join(parts[:n]), rule)
        return out

    @cached_property
    def _exclude_index(self) -> tuple[dict[str, list[str]], list[str]]:
        # wildcards that name one layer (layers.7.self_attn*) by that layer, the rest apart:
        # a module is then matched against its own layer's patterns only
        by_layer: dict[str, list[str]] = {}
        rest: list[str] = []
        for pattern in self.exclude:
            m = re.search(r"(?:^|\.)layers\.(\d+)(?=\.|$)", pattern)
            if m and not pattern.startswith("re:"):
                by_layer.setdefault(m.group(1), []).append(pattern)
            else:
                rest.append(pattern)
        return by_layer, rest

    @cached_property
    def _roots(self) -> tuple[str, ...]:
        # the roots the lists actually use (fewer names to try per module)
        texts = [*self.exclude, *(k for k, _ in self.layers),
                 *(t for targets, _ in self.targets for t in targets)]
        used = {root for root in ROOTS if root and any(t.startswith(root) for t in texts)}
        return ("", *sorted(used))

    def _matches(self, name: str, pattern: str) -> bool:
        if pattern.startswith("re:"):
            return re.match(pattern[3:], name) is not None
        return name == pattern or fnmatch.fnmatchcase(name, pattern)

    def excluded(self, module: Module) -> bool:
        by_layer, rest = self._exclude_index
        for name in self.candidates(module):
            m = re.search(r"(?:^|\.)layers\.(\d+)\.", name)
            patterns = [*by_layer.get(m.group(1), ()), *rest] if m else rest
            if any(self._matches(name, p) for p in patterns):
                return True
        return False

    def candidates(self, module: Module) -> Iterable[str]:
        # a module of several matrices (experts, a shared expert) has children: "name.*"
        # wildcards reach it through a stand-in child
        children = ("", ".x") if module.matrices > 1 else ("",)
        return (root + name + child for name in module.names for root in self._roots
                for child in children)

    def rule_for(self, module: Module) -> Rule | None:
        """The format ``module`` is stored in; None: the checkpoint's own dtype."""
        if not module.matrices or module.role in ("embed", "encoder"):
            return None
        if self.excluded(module):
            return None
        if self.layers:
            layer_map = self._layer_map
            for name in self.candidates(module):
                if name in layer_map:
                    return layer_map[name]
        for targets, rule in self.targets:
            if any(t == "Linear" or self._matches(name, t)
                   for t in targets for name in self.candidates(module)):
                return rule
        return self.default


@dataclass(frozen=True)
class WeightEstimate:
    total_bytes: int
    active_bytes: int
    embed_bytes: int
    head_bytes: int
    encoder_bytes: int
    replicated_bytes: int
    #: routed experts, all of them, and the share of them read per token
    expert_bytes: int = 0
    active_expert_bytes: int = 0


def estimate(modules: tuple[Module, ...], scheme: QuantScheme, dtype_bytes: int) -> WeightEstimate:
    """Bytes of ``modules`` under ``scheme``; unquantized weights in ``dtype_bytes`` each."""
    total = active = embed = head = encoder = replicated = experts = active_experts = 0
    for m in modules:
        rule = scheme.rule_for(m)
        size = rule.bytes(m.params, m.rows, m.matrices) if rule else m.params * dtype_bytes
        total += size
        read = size * m.active // m.params if m.params else 0
        active += read
        if m.role == "experts":
            experts += size
            active_experts += read
        elif m.role == "embed":
            embed += size
        elif m.role == "head":
            head += size
        elif m.role == "encoder":
            encoder += size
        elif m.role == "replicated":
            replicated += size
    return WeightEstimate(total, active, embed, head, encoder, replicated, experts,
                          active_experts)


def _algo(info: Any) -> str:
    algo = info.get("quant_algo") if isinstance(info, Mapping) else info
    return str(algo or "").upper()


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _kv_cache(q: Mapping[str, Any]) -> str | None:
    """"fp8" where the checkpoint was calibrated for an FP8 KV cache."""
    algo = q.get("kv_cache_quant_algo")
    if isinstance(algo, str) and algo.upper() == "FP8":
        return "fp8"
    scheme = q.get("kv_cache_scheme")
    if isinstance(scheme, str) and scheme.upper() == "FP8":
        return "fp8"
    if isinstance(scheme, Mapping) and scheme.get("type") == "float" and scheme.get("num_bits") == 8:
        return "fp8"
    return None


def _modelopt(q: Mapping[str, Any], source: str, exclude_key: str) -> QuantScheme | None:
    algo = _algo(q)
    exclude = _strings(q.get(exclude_key)) or _strings(q.get("exclude_modules"))
    kv = _kv_cache(q)
    if algo == "MIXED_PRECISION":
        raw = q.get("quantized_layers")
        if not isinstance(raw, Mapping) or not raw:
            return None
        layers = []
        for key, info in raw.items():
            rule = MODELOPT_ALGOS.get(_algo(info))
            if rule is None:
                return None
            layers.append((str(key), rule))
        kinds = "+".join(sorted({r.name for _, r in layers}))
        return QuantScheme(f"mixed {kinds} (modelopt)", "modelopt", None, exclude,
                           tuple(layers), kv_cache=kv, source=source)
    rule = MODELOPT_ALGOS.get(algo)
    if rule is None:
        return None
    return QuantScheme(f"{rule.name} (modelopt)", "modelopt", rule, exclude, kv_cache=kv,
                       source=source)


def _ct_rule(weights: Mapping[str, Any], fmt: str, dtype_bytes: int,
             activations: Any = None) -> Rule | None:
    """A compressed-tensors weight scheme as a format (``activations``: the group's
    input_activations, whose static 4-bit scheme adds an fp32 input_global_scale)."""
    bits, kind = weights.get("num_bits"), weights.get("type", "int")
    group = weights.get("group_size")
    strategy = str(weights.get("strategy") or ("group" if group else "tensor"))
    symmetric = weights.get("symmetric", True) is not False
    if kind == "float" and bits == 4 and group == 16:
        # weight_packed, an e4m3 weight_scale per 16, an fp32 weight_global_scale, and an
        # fp32 input_global_scale where activations are NVFP4 too
        w4a4 = isinstance(activations, Mapping) and activations.get("num_bits") == 4
        return Rule("nvfp4" if w4a4 else "nvfp4 w4a16", 4, 16, 1, matrix_bytes=8 if w4a4 else 4)
    if kind == "float" and bits == 4 and group == 32:
        return MXFP4
    if kind == "float" and bits == 8:
        if strategy == "tensor":
            return Rule("fp8", 8, matrix_bytes=4)
        if strategy == "channel":
            return Rule("fp8 per-channel", 8, row_bytes=dtype_bytes)
        block = weights.get("block_structure")
        if strategy == "block" and isinstance(block, list) and len(block) == 2:
            return Rule(f"fp8 block {block[0]}", 8, int(block[0]) * int(block[1]), dtype_bytes)
        return None
    if kind == "int" and (bits == 8 or bits == 4 and "pack" in fmt):
        zero = 0 if symmetric else bits
        # a packed checkpoint records each matrix's shape as int64[2]
        shape = 16 if "pack" in fmt else 0
        if strategy == "group" and isinstance(group, int) and group > 0:
            return Rule(f"int{bits} g{group}", int(bits), group, dtype_bytes, zero, shape)
        if strategy == "channel":
            return Rule(f"int{bits} per-channel", int(bits), matrix_bytes=shape,
                        row_bytes=dtype_bytes + zero // 8)
    return None


def _compressed(q: Mapping[str, Any], dtype_bytes: int) -> QuantScheme | None:
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        return None
    targets = []
    for group in groups.values():
        if not isinstance(group, Mapping) or not isinstance(group.get("weights"), Mapping):
            return None
        fmt = str(group.get("format") or q.get("format") or "")
        rule = _ct_rule(group["weights"], fmt, dtype_bytes, group.get("input_activations"))
        if rule is None:
            return None
        targets.append((_strings(group.get("targets")) or ("Linear",), rule))
    kinds = "+".join(dict.fromkeys(r.name for _, r in targets))
    return QuantScheme(f"{kinds} (compressed-tensors)", "compressed-tensors", None,
                       _strings(q.get("ignore")), targets=tuple(targets),
                       kv_cache=_kv_cache(q))


def parse_quant(qc: Any, sidecar: Any = None, dtype_bytes: int = 2,
                ) -> tuple[QuantScheme | None, str | None]:
    """The scheme of config.json's ``quantization_config`` ``qc`` or, where it has none, of
    ``hf_quant_config.json`` (``sidecar``); and a note when one is given but not understood.
    (None, None): neither describes a per-module quantization (plain fp8 blocks, mxfp4, AWQ
    and GPTQ are priced per weight by kvcore.weights)."""
    if isinstance(qc, Mapping):
        method = str(qc.get("quant_method", "")).lower()
        producer = qc.get("producer")
        by_modelopt = isinstance(producer, Mapping) and producer.get("name") == "modelopt"
        if method.startswith("modelopt") or (not method and by_modelopt and "quant_algo" in qc):
            scheme = _modelopt(qc, "config.json", "ignore")
        elif method == "compressed-tensors":
            scheme = _compressed(qc, dtype_bytes)
        elif method == "mxfp8":
            # MiniMax's MXFP8 exports: every linear layer in MXFP8 (weight_block_size [1, 32])
            # but the ignored_layers (vLLM loads them with its ModelOpt MXFP8 config, SGLang
            # with its mxfp8 method); with a moe_quant_algo the experts are another format
            # (MiniMax-M3.1's packed NVFP4), not read here
            if qc.get("moe_quant_algo"):
                return None, (f"quantization_config (mxfp8, moe_quant_algo "
                              f"{qc.get('moe_quant_algo')}) is not understood: weights are "
                              "priced in the checkpoint's dtype")
            scheme = QuantScheme("mxfp8", "mxfp8", MXFP8, _strings(qc.get("ignored_layers")))
        elif method == "fp8" and isinstance(qc.get("quantized_layers"), Mapping):
            # DeepSeek-V4 NVFP4 exports: experts as quantized_layers, the rest of the
            # linear layers in the fp8 blocks of weight_block_size unless ignored
            mixed = _modelopt(qc, "config.json", "ignore")
            kinds = "+".join(sorted({r.name for _, r in mixed.layers} | {FP8_BLOCK.name})
                             ) if mixed else ""
            scheme = None if mixed is None else QuantScheme(
                f"mixed {kinds} (fp8, modelopt quantized_layers)", "fp8",
                FP8_BLOCK, mixed.exclude, mixed.layers, kv_cache=mixed.kv_cache)
        else:
            return None, None
        if scheme is None:
            return None, (f"quantization_config ({method or 'modelopt'}, "
                          f"{_algo(qc) or 'config_groups'}) is not understood: weights are "
                          "priced in the checkpoint's dtype")
        return scheme, None
    if isinstance(sidecar, Mapping) and "unread" in sidecar:
        return None, (f"{sidecar['unread']}: a ModelOpt checkpoint's quantization could not be "
                      "read, weights are priced in the checkpoint's dtype")
    if isinstance(sidecar, Mapping) and isinstance(sidecar.get("quantization"), Mapping):
        scheme = _modelopt(sidecar["quantization"], "hf_quant_config.json", "exclude_modules")
        if scheme is None:
            return None, (f"hf_quant_config.json (quant_algo "
                          f"{_algo(sidecar['quantization']) or 'missing'}) is not understood: "
                          "weights are priced in the checkpoint's dtype")
        return scheme, None
    return None, None


#: exclusions of modules a plan does not price as decoder weights (draft layers, the vision
#: side, embeddings, a tied lm_head) or counts in no module of its own (Qwen's one-row
#: shared_expert_gate): no note for these
_UNCOUNTED = re.compile(r"mtp|vision|visual|projector|patch_merge|embed|shared_expert_gate|"
                        r"(^|\.)(lm_)?head\*?$", re.IGNORECASE)


def unmatched_exclusions(scheme: QuantScheme, modules: tuple[Module, ...]) -> list[str]:
    """Exclusions that name none of ``modules`` (beside draft and vision modules)."""
    by_layer: dict[str, list[str]] = {}
    every: list[str] = []
    for m in modules:
        for name in scheme.candidates(m):
            every.append(name)
            found = re.search(r"(?:^|\.)layers\.(\d+)\.", name)
            if found:
                by_layer.setdefault(found.group(1), []).append(name)
    layered, rest = scheme._exclude_index
    # a layer past the decoder's is a draft (next-n) layer: DeepSeek's and GLM's model.layers.61
    out = [p for n, patterns in layered.items() if n in by_layer for p in patterns
           if not any(scheme._matches(name, p) for name in by_layer[n])]
    last = max((int(n) for n in by_layer), default=-1)

    def draft(pattern: str) -> bool:
        found = re.search(r"layers\.(\d+)", pattern)
        return found is not None and int(found.group(1)) > last

    out += [p for p in rest
            if not draft(p) and not any(scheme._matches(name, p) for name in every)]
    return [p for p in out if not _UNCOUNTED.search(p)]


def quant_notes(scheme: QuantScheme, modules: tuple[Module, ...]) -> list[str]:
    """What a plan should say about ``scheme``."""
    notes = []
    if scheme.kv_cache == "fp8" and scheme.method == "modelopt":
        notes.append("the checkpoint is calibrated for an FP8 KV cache (ModelOpt "
                     "kv_cache_quant_algo FP8): vLLM's, SGLang's and TensorRT-LLM's automatic "
                     "KV dtype then keeps the cache in fp8_e4m3; plan it with --kv fp8")
    elif scheme.kv_cache == "fp8":
        notes.append("the checkpoint carries FP8 KV-cache scales (kv_cache_scheme): they are "
                     "used where the engine runs an fp8 cache (--kv fp8)")
    if modules:
        missing = unmatched_exclusions(scheme, modules)
        if missing:
            notes.append(f"{len(missing)} of the checkpoint's quantization exclusions name "
                         f"modules kvplan does not count (e.g. '{missing[0]}'); the weights "
                         "are an estimate")
    return notes
