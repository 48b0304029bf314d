"""The tensor types llama.cpp's quantizer gives a model's weights in each of its mixes.

``llama-quantize`` does not store every tensor of a ``Q4_K_M`` file in Q4_K: it picks a type a
tensor by its role, its layer and the model (``src/llama-quant.cpp · llama_tensor_get_type``,
``llama_tensor_get_type_impl``, ``llama_ftype_get_default_type``, ``tensor_type_fallback``,
``tensor_allows_quantization``):

- the output matrix (and a tied token embedding) in Q6_K, or Q5_K in the 1- and 2-bit
  importance mixes and IQ3_XXS, or Q8_0 where its rows are not whole blocks;
- attention V (and a fused QKV) and the FFN's down projections one type up on the layers
  ``use_more_bits`` picks: the first and last eighth of them and every third between (Q6_K in
  Q4_K_M and Q5_K_M); the _S, _L and 3-bit mixes raise them by rules of their own (Q4_K_S:
  the first four attention V and the first eighth of FFN down in Q5_K; Q3_K_L: both and the
  attention output in Q5_K; IQ3_M: Q4_K);
- 70B-class models (80 layers of a Llama or Qwen2) take attention V in Q5_K at least, models
  of 8 experts attention K and V in Q8_0 and the attention output in Q5_K;
- the 1- and 2-bit importance mixes (IQ2_XXS … IQ1_M) have a branch of their own: attention
  V in Q4_K where four query heads share a KV head (or four or more experts), the first
  eighth of the FFN down tensors (counted in file order) and the token embedding in Q2_K or
  IQ3_S; IQ3_XXS and IQ3_XS lower attention Q and K (IQ2_S, IQ3_XXS), IQ3_XS the middle
  three quarters of the gate and up projections (IQ3_XXS);
- the files are taken as made with an importance matrix, as the published ones are: IQ4's
  first FFN down projections stay in its type, Q4_0's and Q5_0's go to Q4_1 and Q5_1;
- a tensor whose rows are not whole blocks of its type falls back to a 32-value type (Q4_K
  to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, Q2_K and Q3_K to Q4_0, the IQ types to IQ4_NL), or to
  F16;
- norms, biases, convolutions and the expert router stay float32 (the converter writes them
  so, and the quantizer leaves them), and routed experts a checkpoint ships in MXFP4 (gpt-oss,
  DeepSeek-V4) stay MXFP4.

Each of a config's modules is given the type its GGUF tensor would get, from the module's
name: exact for the architectures whose tensors map one to one (an 8B Llama's Q4_K_M: 193
Q4_K and 33 Q6_K, as its logs print). Modules no rule names (linear-attention gates, MLA's
low-rank projections and its ``kv_b``, which the converter writes as ``attn_k_b`` and
``attn_v_b``) take the mix's base type, as ``llama-quantize`` gives them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .gguf import GGML_TYPES
from .hf import _UNGATED_MLP
from .model import ModelSpec, Module

__all__ = ["MIXES", "PERPLEXITY", "TensorType", "module_parts", "module_types", "tensor_types"]


@dataclass(frozen=True)
class TensorType:
    """A ggml type: bytes a block of ``block`` values."""

    name: str
    block: int
    block_bytes: int

    def nbytes(self, values: int) -> int:
        return values // self.block * self.block_bytes


#: every ggml type with its block (gguf.GGML_TYPES, the one table of them)
TYPES = {name: TensorType(name, block, size) for name, block, size in GGML_TYPES.values()}

#: kvplan's weight formats that name a llama-quantize mix, and the mix's base type
#: (llama_ftype_get_default_type)
MIXES = {"q2_k": "Q2_K", "q2_k_s": "Q2_K", "q3_k_s": "Q3_K", "q3_k_m": "Q3_K", "q3_k_l": "Q3_K",
         "q4_k_s": "Q4_K", "q4_k_m": "Q4_K", "q5_k_s": "Q5_K", "q5_k_m": "Q5_K", "q6_k": "Q6_K",
         "q4_0": "Q4_0", "q4_1": "Q4_1", "q5_0": "Q5_0", "q5_1": "Q5_1", "q8_0": "Q8_0",
         "iq4_xs": "IQ4_XS", "iq4_nl": "IQ4_NL", "iq3_m": "IQ3_S", "iq3_s": "IQ3_S",
         "iq3_xs": "IQ3_S", "iq3_xxs": "IQ3_XXS", "iq2_m": "IQ2_S", "iq2_s": "IQ2_XS",
         "iq2_xs": "IQ2_XS", "iq2_xxs": "IQ2_XXS", "iq1_m": "IQ1_M", "iq1_s": "IQ1_S"}
#: the perplexity each mix adds to Llama-3-8B's, as llama-quantize's list of types gives it
#: (tools/quantize/quantize.cpp, QUANT_OPTIONS); the IQ mixes are listed there by bits alone
PERPLEXITY = {"q8_0": 0.0026, "q6_k": 0.0217, "q5_k_m": 0.0569, "q5_k_s": 0.1049,
              "q5_1": 0.1062, "q5_0": 0.1316, "q4_k_m": 0.1754, "q4_k_s": 0.2689,
              "q4_1": 0.4511, "q4_0": 0.4685, "q3_k_l": 0.5562, "q3_k_m": 0.6569,
              "q3_k_s": 1.6321, "q2_k_s": 3.1836, "q2_k": 3.5199}
#: where a type's rows are not whole blocks (tensor_type_fallback)
FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0",
            **{t: "IQ4_NL" for t in ("IQ4_XS", "IQ3_S", "IQ3_XXS", "IQ2_S", "IQ2_XS", "IQ2_XXS",
                                     "IQ1_M", "IQ1_S")}}
#: the files are taken as made with an importance matrix, as the published ones are (the
#: 1- and 2-bit types and IQ3_XXS need one): it keeps IQ3_XXS's attention V (where fewer than
#: four query heads share a KV head) and IQ4's first FFN down projections in the mix's type,
#: and raises Q4_0's and Q5_0's to Q4_1 and Q5_1
IMATRIX = True
#: the 1- and 2-bit importance mixes, typed by a branch of their own
_IQ_LOW = frozenset({"iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq1_s", "iq1_m"})
#: mixes whose output matrix is Q5_K (the others': Q6_K)
_OUTPUT_Q5_K = _IQ_LOW | {"iq3_xxs"}
#: the token embedding's type where a mix gives it one of its own
_EMBED = {"iq2_xxs": "Q2_K", "iq2_xs": "Q2_K", "iq1_s": "Q2_K", "iq1_m": "Q2_K",
          "iq2_s": "IQ3_S", "iq2_m": "IQ3_S", "iq3_xxs": "IQ3_S"}
#: the attention output's type (models of other than eight experts)
_ATTN_OUT = {"q2_k": "Q3_K", "iq3_xxs": "IQ3_S", "q3_k_m": "Q4_K", "q3_k_l": "Q5_K",
             "iq3_m": "Q4_K"}
#: mixes whose attention output is Q5_K in a model of eight experts
_ATTN_OUT_8X = frozenset({"q2_k", "iq3_xs", "iq3_xxs", "q3_k_s", "q3_k_m", "iq4_nl", "q4_k_s",
                          "q4_k_m", "iq3_s", "iq3_m", "iq4_xs"})

#: a module path's layer number (``layers.12.mlp.experts``)
MODULE_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
#: module leaves by the GGUF tensor category llama-quant.cpp's rules name
_LEAVES = {"attn_q": ("q_proj", "wq"), "attn_k": ("k_proj", "wk"), "attn_v": ("v_proj", "wv"),
           "attn_qkv": ("qkv_proj", "query_key_value", "Wqkv", "c_attn", "in_proj_qkv"),
           "attn_output": ("o_proj", "wo", "dense"),
           "ffn_gate": ("gate_proj", "w1"), "ffn_up": ("up_proj", "w3", "gate_up_proj"),
           "ffn_down": ("down_proj", "w2")}
_ATTENTION = ("self_attn", "attn", "attention", "mixer")
#: architectures whose GGUF fuses Q, K and V into one attn_qkv (phi3: and gate with up)
_FUSED_QKV = frozenset({"phi3", "chatglm", "glm"})
#: model modules holding a whole MLP (gate, up, down) as one
WHOLE_MLP = ("shared_experts", "shared_expert", "shared_mlp")


@dataclass(frozen=True)
class _Tensor:
    module: int
    category: str
    layer: int
    values: int
    ncols: int


def _use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _category(path: str, role: str, model_type: str) -> str:
    parent, _, leaf = path.rpartition(".")
    if role == "embed":
        return "token_embd"
    if role == "head":
        return "output"
    if model_type in _FUSED_QKV and leaf in ("q_proj", "k_proj", "v_proj"):
        return "attn_qkv"
    if model_type == "phi3" and leaf == "gate_proj":
        return "ffn_up"
    for cat, leaves in _LEAVES.items():
        if leaf in leaves:
            if cat == "attn_output" and not parent.endswith(_ATTENTION):
                return "other"
            if cat.startswith("attn") and "linear_attn" in parent and cat != "attn_qkv":
                return "other"
            return cat
    return "other"


def _expert_dims(m: Module, parts: int, widths: list[int]) -> tuple[int, int] | None:
    """(input width, intermediate width) of one expert of a module of ``parts`` projections
    a expert (gate, up, down; or up, down): the input width is the model's hidden size, or a
    latent MoE's latent size (``widths``, in that order), whichever the module's rows and
    parameters agree with."""
    experts = max(1, m.matrices // parts)
    per, rows = m.params // experts, m.rows // experts
    for width in widths:
        if width and rows > width and (rows - width) % (parts - 1) == 0:
            inter = (rows - width) // (parts - 1)
            if inter * width * parts == per:
                return width, inter
    return None


def _tensors(spec: ModelSpec, modules: tuple[Module, ...]) -> list[_Tensor]:
    """The quantizable tensors of a config's modules, in file order (layer by layer), each
    with its category, layer, values and row length (ne[0])."""
    out = []
    hidden = spec.hidden_size
    gated = spec.model_type not in _UNGATED_MLP
    # a latent MoE's experts work in the latent width its fc1_latent_proj projects to
    latent = {int(h.group(1)): m.rows for m in modules
              if m.names[0].endswith("fc1_latent_proj") and (h := MODULE_LAYER.search(m.names[0]))}
    for k, m in enumerate(modules):
        path = m.names[0]
        hit = MODULE_LAYER.search(path)
        layer = int(hit.group(1)) if hit else -1
        if m.role == "experts" or path.rpartition(".")[2] in WHOLE_MLP:
            # gate, up and down of every expert, a third of the module each (or up and down)
            parts = 3 if gated else 2
            dims = _expert_dims(m, parts, [hidden, latent.get(layer, 0)])
            if dims is None:
                out.append(_Tensor(k, "other", layer, m.params, hidden or 1))
                continue
            width, inter = dims
            for cat in ("ffn_gate", "ffn_up") if gated else ("ffn_up",):
                out.append(_Tensor(k, cat, layer, m.params // parts, width))
            out.append(_Tensor(k, "ffn_down", layer, m.params // parts, inter))
            continue
        # one matrix: its input width; several (an aggregate of projections): the hidden size
        ncols = m.params // m.rows if m.rows and m.matrices == 1 else hidden
        out.append(_Tensor(k, _category(path, m.role, spec.model_type), layer, m.params,
                           ncols or 1))
    return out


def _routing_or_plain(m: Module) -> bool:
    """Tensors llama-quantize leaves in float32: 1-D ones (norms, biases, convolutions) and
    the expert router (ffn_gate_inp)."""
    leaf = m.names[0].rpartition(".")[2]
    if m.role in ("embed", "head"):
        return False
    return not m.matrices or (m.role == "replicated" and leaf in ("gate", "router"))


def module_types(spec: ModelSpec, weight_format: str,
                 modules: tuple[Module, ...] | None = None) -> list[int]:
    """Each module's bytes in ``weight_format`` (one of MIXES) as llama-quantize stores its
    tensors (encoder modules in float16, as the projector file beside the GGUF holds them)."""
    return [sum(parts.values()) for parts in module_parts(spec, weight_format, modules)]


def module_parts(spec: ModelSpec, weight_format: str,
                 modules: tuple[Module, ...] | None = None) -> list[dict[str, int]]:
    """module_types by tensor category ("ffn_gate", "ffn_up", "ffn_down", "attn_v", …): a
    routed-expert module's gate, up and down projections apart."""
    if modules is None:
        # a plan prices the same model in one mix several times (the weights, the layers an
        # offload places, a weights table of every mix): the config's own modules are priced
        # once a model and mix
        try:
            return [dict(parts) for parts in _config_parts(spec, weight_format)]
        except TypeError:   # a spec holding an unhashable field: priced afresh
            pass
    return _module_parts(spec, weight_format, spec.params.modules if modules is None else modules)


@lru_cache(maxsize=256)
def _config_parts(spec: ModelSpec, weight_format: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    return tuple(tuple(parts.items())
                 for parts in _module_parts(spec, weight_format, spec.params.modules))


def _module_parts(spec: ModelSpec, weight_format: str,
                  mods: tuple[Module, ...]) -> list[dict[str, int]]:
    out: list[dict[str, int]] = [{} for _ in mods]
    for k, cat, name, values in tensor_types(spec, weight_format, mods):
        out[k][cat] = out[k].get(cat, 0) + TYPES[name].nbytes(values)
    return out


def tensor_types(spec: ModelSpec, weight_format: str, modules: tuple[Module, ...] | None = None
                 ) -> list[tuple[int, str, str, int]]:
    """Every tensor the modules make, in file order: (module index, category, ggml type,
    values)."""
    mods = spec.params.modules if modules is None else modules
    out = []
    tensors = []
    for t in _tensors(spec, mods):
        m = mods[t.module]
        if m.role == "encoder":
            # the vision or audio tower: a projector file of its own (--mmproj), in float16
            out.append((t.module, t.category, "F16", t.values))
        elif _routing_or_plain(m):
            out.append((t.module, t.category, "F32", t.values))
        else:
            tensors.append(t)
    # the quantizer walks the tensors by layer, and a layer's by name (ffn_down_exps before
    # ffn_down_shexp): its counters count in that order
    tensors.sort(key=lambda t: (t.layer, mods[t.module].names[0].rpartition(".")[2] in WHOLE_MLP))
    rules = _Rules.of(spec, weight_format, mods, tensors)
    # routed experts shipped in MXFP4 (gpt-oss, DeepSeek-V4) are written so by the converter
    # and left so by the quantizer, whatever the mix
    mxfp4 = spec.checkpoint_weights in ("mxfp4_moe", "fp8_mxfp4_moe")
    # a GGUF that fuses Q, K and V holds one attn_qkv a layer: one choice for its parts
    fused: dict[int, str] = {}
    for t in tensors:
        if mxfp4 and mods[t.module].role == "experts":
            out.append((t.module, t.category, "MXFP4", t.values))
            if t.category == "ffn_down":
                rules.i_down += 1
            continue
        if t.category == "attn_qkv" and spec.model_type in _FUSED_QKV:
            if t.layer not in fused:
                fused[t.layer] = rules.pick(t)
            new = fused[t.layer]
        else:
            new = rules.pick(t)
        out.append((t.module, t.category, new, t.values))
    return out


@dataclass
class _Rules:
    """llama_tensor_get_type_impl for one model and mix, with its running counters (attention
    V tensors, FFN down, gate and up projections seen so far, in file order)."""

    fmt: str
    base: str
    n_layer: int
    n_gqa: int
    n_expert: int
    seventy: bool
    falcon: bool
    tied: bool
    n_wv: int
    imatrix: bool = IMATRIX
    i_wv: int = 0
    i_down: int = 0
    i_gate: int = 0
    i_up: int = 0

    @classmethod
    def of(cls, spec: ModelSpec, fmt: str, mods: tuple[Module, ...],
           tensors: list[_Tensor]) -> _Rules:
        groups = [g for g in spec.groups if g.kind.is_attention and g.n_kv_heads]
        kv_heads = groups[0].n_kv_heads if groups else 0
        parts = 3 if spec.model_type not in _UNGATED_MLP else 2
        qkv = {t.layer for t in tensors if t.category == "attn_qkv"}
        fused = spec.model_type in _FUSED_QKV
        gqa = spec.num_attention_heads // kv_heads if kv_heads else 1
        # llama.cpp's LLM_TYPE_70B: an 80-layer Qwen2, or an 80-layer Llama whose query heads
        # share KV heads (one that does not is a 65B)
        seventy = spec.decoder_layers == 80 and (spec.model_type == "qwen2" or (
            spec.model_type == "llama" and gqa > 1))
        return cls(fmt, MIXES[fmt], spec.decoder_layers, gqa,
                   max((m.matrices // parts for m in mods if m.role == "experts"), default=1),
                   seventy,
                   spec.model_type == "falcon",
                   not any(t.category == "output" for t in tensors),
                   sum(t.category in ("attn_v", "attn_qkv") for t in tensors)
                   if not fused else len(qkv))

    def pick(self, t: _Tensor) -> str:
        """The type of tensor ``t``, after the fallback for rows that are not whole blocks."""
        new = self._rule(t)
        if t.ncols % TYPES[new].block:
            new = FALLBACK.get(new, new)
            if t.ncols % TYPES[new].block:
                new = "F16"
        return new

    def _layer(self, t: _Tensor, count: int) -> int:
        """The layer a rule reads: a mixture of experts' from the tensor's name, else the
        count of its kind so far (llama-quant.cpp's layer_info)."""
        return t.layer if self.n_expert > 1 and t.layer >= 0 else count

    def _rule(self, t: _Tensor) -> str:
        fmt, new, n = self.fmt, self.base, self.n_layer
        cat = "output" if self.tied and t.category == "token_embd" else t.category
        if cat == "output":
            if self.falcon or t.ncols % TYPES[new].block:
                return "Q8_0"
            if fmt in _OUTPUT_Q5_K:
                return "Q5_K"
            return new if new == "Q8_0" else "Q6_K"
        if cat == "token_embd":
            return _EMBED.get(fmt, new)
        if fmt in _IQ_LOW:
            return self._low_bits(t, cat)
        if cat in ("attn_v", "attn_qkv"):
            new = self._attn_v(new)
            if self.seventy and new in ("Q3_K", "Q4_K"):
                new = "Q5_K"
            if self.n_expert == 8:
                new = "Q8_0"
            self.i_wv += 1
        elif cat == "attn_k":
            if self.n_expert == 8:
                new = "Q8_0"
            elif fmt in ("iq3_xs", "iq3_xxs"):
                new = "IQ3_XXS" if fmt == "iq3_xs" else "IQ2_S"
        elif cat == "attn_q":
            if fmt in ("iq3_xs", "iq3_xxs"):
                new = "IQ3_XXS" if fmt == "iq3_xs" else "IQ2_S"
        elif cat == "ffn_down":
            new = self._ffn_down(self._layer(t, self.i_down), new)
            self.i_down += 1
        elif cat == "attn_output":
            if self.falcon:
                new = "Q4_K" if fmt == "q3_k_l" else new
            elif self.n_expert == 8:
                new = "Q5_K" if fmt in _ATTN_OUT_8X else new
            else:
                new = _ATTN_OUT.get(fmt, new)
        elif cat in ("ffn_gate", "ffn_up"):
            i = self._layer(t, self.i_gate if cat == "ffn_gate" else self.i_up)
            if fmt == "iq3_xs" and n // 8 <= i < 7 * n // 8:
                new = "IQ3_XXS"
            if cat == "ffn_gate":
                self.i_gate += 1
            else:
                self.i_up += 1
        return new

    def _attn_v(self, new: str) -> str:
        fmt, gqa4 = self.fmt, self.n_gqa >= 4
        if fmt == "q2_k":
            return "Q4_K" if gqa4 else "Q3_K"
        if fmt == "q2_k_s":
            return "Q4_K" if gqa4 else new
        if fmt == "iq3_xxs":
            return "Q4_K" if gqa4 else "IQ3_XXS" if self.imatrix else "IQ3_S"
        if fmt in ("iq3_xs", "iq3_s"):
            return "Q4_K" if gqa4 else new
        if fmt == "iq3_m":
            return "Q4_K"
        if fmt == "q3_k_m":
            return "Q5_K" if self.i_wv < 2 else "Q4_K"
        if fmt == "q3_k_l":
            return "Q5_K"
        if fmt in ("iq4_nl", "iq4_xs"):
            return "Q5_K" if gqa4 else new
        if fmt in ("q4_k_m", "q5_k_m"):
            return "Q6_K" if _use_more_bits(self.i_wv, self.n_wv) else new
        if fmt == "q4_k_s":
            return "Q5_K" if self.i_wv < 4 else new
        return new

    def _ffn_down(self, i: int, new: str) -> str:
        fmt, n = self.fmt, self.n_layer
        more = _use_more_bits(i, n)
        if fmt == "q2_k":
            return "Q3_K"
        if fmt == "q2_k_s":
            return "Q4_K" if i < n // 8 else new
        if fmt == "iq3_xxs" and not self.imatrix:
            return "Q4_K" if i < n // 8 else "Q3_K"
        if fmt == "q3_k_m":
            return "Q5_K" if i < n // 16 else "Q4_K" if not self.falcon or more else "Q3_K"
        if fmt == "iq3_m":
            return "Q4_K" if i < n // 8 or (self.n_expert == 8 and more) else new
        if fmt == "q3_k_l":
            return "Q4_K" if self.falcon else "Q5_K"
        if fmt == "q4_k_m":
            if self.falcon:
                return "Q6_K" if i < n // 16 else "Q5_K" if more else "Q4_K"
            return "Q6_K" if more else new
        if fmt in ("iq4_nl", "iq4_xs"):
            return "Q5_K" if i < n // 8 and not self.imatrix else new
        if fmt == "q5_k_m":
            return "Q6_K" if more else new
        if fmt == "q4_k_s":
            return "Q5_K" if not self.falcon and i < n // 8 else new
        if fmt in ("q4_0", "q5_0") and self.imatrix and i < n // 8:
            return "Q4_1" if fmt == "q4_0" else "Q5_1"
        return new

    def _low_bits(self, t: _Tensor, cat: str) -> str:
        """The 1- and 2-bit importance mixes' own branch: attention V at Q4_K where four
        query heads share a KV head (or four or more experts), the first eighth of the FFN
        down projections (counted, not by layer) and the attention output raised."""
        fmt, new = self.fmt, self.base
        raised = "IQ3_S" if fmt in ("iq2_s", "iq2_m") else "Q2_K"
        if cat in ("attn_v", "attn_qkv"):
            self.i_wv += 1
            return "Q4_K" if self.n_gqa >= 4 or self.n_expert >= 4 else raised
        if cat == "attn_k" and self.n_expert == 8:
            return "Q4_K"
        if cat == "ffn_down":
            self.i_down += 1
            return raised if self.i_down - 1 < self.n_layer // 8 else new
        if cat == "attn_output":
            if self.n_expert == 8:
                return "Q5_K"
            if fmt in ("iq1_s", "iq1_m"):
                return "IQ2_XXS"
            return "IQ3_S" if fmt in ("iq2_s", "iq2_m") else new
        return new
