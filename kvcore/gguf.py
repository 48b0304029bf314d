"""GGUF files (llama.cpp's model format) read as kvplan reads a config.json.

Only the header is read: the metadata (the architecture's numbers) and the tensor table (every
tensor's shape and type), never the tensor data, so a 40 GB file answers in milliseconds. The
weights are then exact: each tensor's bytes follow from its ggml type's block size and block
bytes, summed over the files of a split model.

The architecture's numbers become the Hugging Face config the file was converted from, so that
the cache, the engines' rules and the fit are those of a config.json. Architectures whose
numbers are not mapped here (pure Mamba and other state-space models, encoder-decoders, vision
towers, which ship in a separate mmproj file) are refused with the names of those that are read.
"""

from __future__ import annotations

import re
import shlex
import struct
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from .errors import ConfigError, InputError, shown
from .model import Checkpoint, ModelSpec, ParamCount

__all__ = ["GGML_TYPES", "GgufFile", "TensorInfo", "config_from_gguf",
           "is_gguf", "read_gguf", "spec_from_gguf", "tensor_bytes"]

MAGIC = b"GGUF"
#: ggml tensor types: id → (name, values per block, bytes per block)
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18), 42: ("Q2_0", 64, 18),
}
#: ``general.file_type`` → the name of the mix (llama-quantize's names)
FILE_TYPES: dict[int, str] = {
    0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 7: "q8_0", 8: "q5_0", 9: "q5_1", 10: "q2_k",
    11: "q3_k_s", 12: "q3_k_m", 13: "q3_k_l", 14: "q4_k_s", 15: "q4_k_m", 16: "q5_k_s",
    17: "q5_k_m", 18: "q6_k", 19: "iq2_xxs", 20: "iq2_xs", 21: "q2_k_s", 22: "iq3_xs",
    23: "iq3_xxs", 24: "iq1_s", 25: "iq4_nl", 26: "iq3_s", 27: "iq3_m", 28: "iq2_s",
    29: "iq2_m", 30: "iq4_xs", 31: "iq1_m", 32: "bf16", 36: "tq1_0", 37: "tq2_0",
    38: "mxfp4_moe", 39: "nvfp4", 40: "q1_0", 41: "q2_0",
}
#: metadata value types: id → struct format (scalars); 8 string, 9 array
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
#: an array longer than this is kept as its length only (the tokenizer's vocabulary)
KEEP_ITEMS = 1 << 16
#: sanity bounds of a header (a corrupt or foreign file fails on them, not on memory)
MAX_TENSORS = 1 << 20
MAX_KEYS = 1 << 16
MAX_STRING = 1 << 26
MAX_DIMS = 4
#: the most blocks a header may count (as config.json's num_hidden_layers): per-layer lists are
#: built from it
MAX_BLOCKS = 4096
#: a split model's parts: name-00001-of-00003.gguf
SPLIT_NAME = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
#: words in the name of a GGUF that is not a model of its own (llama-server -hf passes over
#: them: vision projectors, importance matrices, draft heads shipped beside the model)
SIDE_FILES = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-")


def is_model_file(name: str) -> bool:
    """A GGUF file name that llama-server -hf takes for a model (not a projector, importance
    matrix or draft head beside one)."""
    base = name.rsplit("/", 1)[-1].lower()
    return base.endswith(".gguf") and not any(w in base for w in SIDE_FILES)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    #: ggml's dimensions, the row length first
    shape: tuple[int, ...]
    type: int
    offset: int

    @property
    def elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return tensor_bytes(self.shape, self.type, self.name)


class Files(Protocol):
    """Where a model's GGUF files are read from: a local folder (LocalFiles) or a Hub
    repository (kvcore.hub.HubFiles). Names are relative to it, with '/' between folders."""

    def open(self, name: str) -> tuple[BinaryIO, int]:
        """The file, open for reading, and its size in bytes."""

    def exists(self, name: str) -> bool:
        """Whether the source holds ``name``."""

    def locate(self, name: str) -> str:
        """llama-server's arguments that load the file (-m PATH, -hf REPO:TAG)."""


class LocalFiles:
    def __init__(self, folder: Path):
        self.folder = folder

    def open(self, name: str) -> tuple[BinaryIO, int]:
        path = self.folder / name
        return path.open("rb"), path.stat().st_size

    def exists(self, name: str) -> bool:
        return (self.folder / name).is_file()

    def locate(self, name: str) -> str:
        return f"-m {shlex.quote(str(self.folder / name))}"


@dataclass(frozen=True)
class GgufFile:
    #: the file's name within ``files`` (a Hub file may sit in a folder: Q4_K_M/x.gguf)
    name: str
    files: Files
    version: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    #: where the tensor data begins
    data_start: int

    @property
    def base(self) -> str:
        """The file's own name, without its folder."""
        return self.name.rsplit("/", 1)[-1]

    @property
    def arch(self) -> str:
        arch = self.metadata.get("general.architecture")
        if not isinstance(arch, str) or not arch:
            raise ConfigError(f"{self.base} has no 'general.architecture'",
                              field="general.architecture")
        return arch


def tensor_bytes(shape: tuple[int, ...], type_id: int, name: str = "tensor") -> int:
    """Bytes of a ggml tensor of ``shape`` (row length first) and ``type_id``."""
    if type_id not in GGML_TYPES:
        raise ConfigError(f"tensor {shown(name)} has ggml type {type_id}, which kvplan does not "
                          f"know (known: {', '.join(t[0] for t in GGML_TYPES.values())})",
                          field="tensor type")
    tname, block, size = GGML_TYPES[type_id]
    row = shape[0] if shape else 1
    if row % block:
        raise ConfigError(f"tensor {shown(name)}: a row of {row:,} values is not a whole number "
                          f"of {tname} blocks of {block}", field="tensor type")
    rows = 1
    for d in shape[1:]:
        rows *= d
    return rows * (row // block) * size


class _Reader:
    def __init__(self, f: BinaryIO, name: str):
        self.f, self.name = f, name

    def _take(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise ConfigError(f"{self.name} ends inside its header: the file is truncated "
                              "or not a GGUF file")
        return data

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.scalar("<Q")
        if n > MAX_STRING:
            raise ConfigError(f"{self.name} holds a string of {n:,} bytes in its header: "
                              "the file is corrupt")
        return self._take(n).decode("utf-8", errors="replace")

    def skip_strings(self, count: int) -> None:
        for _ in range(count):
            n = self.scalar("<Q")
            if n > MAX_STRING:
                raise ConfigError(f"{self.name}: a string of {n:,} bytes in an array: "
                                  "the file is corrupt")
            self.f.seek(n, 1)

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9:
            itype, count = self.scalar("<I"), self.scalar("<Q")
            if itype == 9:
                raise ConfigError(f"{self.name}: nested arrays in the metadata are not "
                                  "read")
            if count > KEEP_ITEMS:
                if itype == 8:
                    self.skip_strings(count)
                elif itype in _SCALARS:
                    self.f.seek(count * struct.calcsize(_SCALARS[itype]), 1)
                else:
                    raise ConfigError(f"{self.name}: array of unknown type {itype}")
                return _Long(count)
            return [self.value(itype) for _ in range(count)]
        raise ConfigError(f"{self.name}: metadata value of unknown type {vtype}: the file "
                          "is corrupt or of a newer GGUF version")


@dataclass(frozen=True)
class _Long:
    """An array kept as its length only."""

    count: int

    def __len__(self) -> int:
        return self.count


def is_gguf(path: Path) -> bool:
    """The file begins with GGUF's magic."""
    try:
        with path.open("rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def read_gguf(path: Path) -> GgufFile:
    """The header of one local GGUF file."""
    return read_header(LocalFiles(path.parent), path.name)


def read_header(files: Files, name: str) -> GgufFile:
    """The header of one GGUF file: metadata and tensor table, checked against its size."""
    base = name.rsplit("/", 1)[-1]
    f, size = files.open(name)
    with f:
        r = _Reader(f, base)
        if r._take(4) != MAGIC:
            raise ConfigError(f"{base} is not a GGUF file (it does not begin with 'GGUF')")
        version = r.scalar("<I")
        if version not in (2, 3) and struct.unpack(">I", struct.pack("<I", version))[0] in (2, 3):
            raise ConfigError(f"{base} is a big-endian GGUF; llama.cpp on a little-endian host "
                              "(x86, ARM: every GPU server) does not load it: convert the model "
                              "without --bigendian")
        if version not in (2, 3):
            raise ConfigError(f"{base} is GGUF version {version}; versions 2 and 3 are "
                              "read (re-convert the model with a current llama.cpp)")
        n_tensors, n_keys = r.scalar("<Q"), r.scalar("<Q")
        if n_tensors > MAX_TENSORS or n_keys > MAX_KEYS:
            raise ConfigError(f"{base} claims {n_tensors:,} tensors and {n_keys:,} "
                              "metadata keys: the file is corrupt")
        meta: dict[str, Any] = {}
        for _ in range(n_keys):
            key = r.string()
            meta[key] = r.value(r.scalar("<I"))
        tensors = []
        for _ in range(n_tensors):
            tname = r.string()
            dims = r.scalar("<I")
            if not 1 <= dims <= MAX_DIMS:
                raise ConfigError(f"{base}: tensor {shown(tname)} has {dims} dimensions; "
                                  f"1 to {MAX_DIMS} expected: the file is corrupt")
            shape = tuple(r.scalar("<Q") for _ in range(dims))
            tensors.append(TensorInfo(tname, shape, r.scalar("<I"), r.scalar("<Q")))
        align = meta.get("general.alignment", 32)
        if not isinstance(align, int) or align <= 0 or align & (align - 1):
            raise ConfigError(f"{base}: general.alignment is {shown(align)}, expected a "
                              "power of two")
        start = -(-f.tell() // align) * align
    end = max((t.offset + t.nbytes for t in tensors), default=0)
    if start + end > size:
        raise ConfigError(f"{base} is truncated: its tensors need {start + end:,} bytes, the "
                          f"file has {size:,} (an incomplete download?)")
    return GgufFile(name, files, version, meta, tuple(tensors), start)


def _sibling(name: str, base: str) -> str:
    """``base`` in the folder of ``name``."""
    return f"{name.rsplit('/', 1)[0]}/{base}" if "/" in name else base


def _parts(first: GgufFile) -> Iterator[GgufFile]:
    """Every file of a split model, the one given first (``split.count`` > 1)."""
    count = first.metadata.get("split.count", 1)
    if not isinstance(count, int) or count <= 1:
        yield first
        return
    m = SPLIT_NAME.match(first.base)
    if not m or int(m.group("count")) != count:
        raise ConfigError(f"{first.base} is part of a model split in {count} files, but its "
                          "name is not NAME-0000k-of-0000n.gguf: pass the first part by its "
                          "llama-gguf-split name")
    yield first
    here = int(m.group("no"))
    for no in range(1, count + 1):
        if no == here:
            continue
        part = _sibling(first.name, f"{m.group('stem')}-{no:05d}-of-{count:05d}.gguf")
        if not first.files.exists(part):
            raise InputError(f"part {no} of {count} of the split model is missing: "
                             f"{part.rsplit('/', 1)[-1]} (next to {first.base})", field="model")
        yield read_header(first.files, part)


def first_part(files: Files, name: str) -> str:
    """A split model's first part, whichever part was named."""
    m = SPLIT_NAME.match(name.rsplit("/", 1)[-1])
    if m and int(m.group("no")) != 1:
        first = _sibling(name, f"{m.group('stem')}-00001-of-{m.group('count')}.gguf")
        if files.exists(first):
            return first
    return name


#: architectures read → the Hugging Face model_type they were converted from
ARCHS: dict[str, str] = {
    "llama": "llama", "mistral3": "mistral", "qwen2": "qwen2", "qwen2moe": "qwen2_moe",
    "qwen3": "qwen3", "qwen3moe": "qwen3_moe", "gemma2": "gemma2", "gemma3": "gemma3_text",
    "phi3": "phi3", "gpt-oss": "gpt_oss", "deepseek2": "deepseek_v3",
    # Gated DeltaNet hybrids: three linear-attention layers, then one full
    "qwen3next": "qwen3_next", "qwen35": "qwen3_5_text", "qwen35moe": "qwen3_5_moe_text",
    # DeepSeek Sparse Attention: MLA plus a lightning indexer (DeepSeek-V3.2, GLM-5, Hy4)
    "deepseek32": "deepseek_v32", "glm-dsa": "glm_moe_dsa", "hy_v4": "hy_v4",
    # A.X-K2: the same cache, an indexer in every layer (src/models/axk2.cpp)
    "axk2": "axk2",
    # GLM-4.5 / 4.6 / 4.7 (and -Air): GQA MoE, its next-n blocks counted in block_count
    "glm4moe": "glm4_moe",
    # Gemma 4: sliding and full layers of their own head widths and KV heads
    "gemma4": "gemma4_text",
    # Nemotron-H hybrids (Mamba-2, attention, MLP or MoE blocks): the pattern from the
    # per-layer head_count_kv and feed_forward_length
    "nemotron_h": "nemotron_h", "nemotron_h_moe": "nemotron_h",
    # MiniMax-M2 / M2.5 / M2.7: full attention and MoE in every layer (no draft blocks kept)
    "minimax-m2": "minimax_m2",
    # Kimi-Linear and Kimi-K3: MLA layers among Kimi Delta Attention ones, told apart by
    # head_count_kv (Kimi-K3's text model is a kimi_linear config)
    "kimi-linear": "kimi_linear", "kimi-k3": "kimi_linear",
    # Ling-3.0: Kimi Delta Attention layers with an MLA layer closing each group, told apart
    # the same way (src/models/bailingmoe3.cpp), its next-n blocks counted in block_count
    "bailingmoe3": "bailing_hybrid",
    # DeepSeek-V4: a sliding latent in every layer, compressed latents, indexer keys and
    # compressor states by attention.compress_ratios
    "deepseek4": "deepseek_v4",
}
#: the Kimi hybrids (src/models/kimi-linear.cpp, src/models/kimi-k3.cpp)
_KIMI = frozenset({"kimi-linear", "kimi-k3"})
#: hybrids of MLA and Kimi Delta Attention layers, a layer of 0 KV heads a KDA one
_KDA = _KIMI | {"bailingmoe3"}
#: architectures converted with MLA (the deepseek2 key set)
_MLA = frozenset({"deepseek2", "deepseek32", "glm-dsa", "hy_v4", "axk2"}) | _KDA
#: GLM-5.2's indexer types where a glm-dsa GGUF lists none and its training context is at
#: least 1,048,576 (src/models/glm-dsa.cpp GLM_5_2_DEFAULT_INDEXER_TYPES): layers 0 and 1 run
#: an indexer, then one in four from layer 2, for 78 layers; 0 (shared) past them
_GLM_5_2_TYPES = (True, True) + tuple(j % 4 == 0 for j in range(76))
_GLM_5_2_CONTEXT = 1048576
#: Nemotron-H's architectures (src/models/nemotron-h.cpp)
_NEMOTRON_H = frozenset({"nemotron_h", "nemotron_h_moe"})
#: the hybrids' Gated DeltaNet numbers: GGUF key → config field
_GDN = {"ssm.conv_kernel": "linear_conv_kernel_dim", "ssm.state_size": "linear_key_head_dim",
        "ssm.group_count": "linear_num_key_heads", "ssm.time_step_rank": "linear_num_value_heads"}


def _get(meta: dict[str, Any], key: str, default: Any = None, *, need: bool = False) -> Any:
    if key not in meta:
        if need:
            raise ConfigError(f"the GGUF has no '{key}'", field=key)
        return default
    return meta[key]


def _uniform(value: Any) -> Any:
    """A per-layer array whose entries are all equal, as that one number."""
    if isinstance(value, list):
        if not value or any(v != value[0] for v in value):
            return value
        return value[0]
    return value


def _layer_count(base: str, arch: str, value: Any) -> Any:
    """``{arch}.block_count`` as read, once it is a whole number from 1 to MAX_BLOCKS (a value
    of another type is left to the config reader, which names it)."""
    if isinstance(value, int) and not isinstance(value, bool) and not 1 <= value <= MAX_BLOCKS:
        raise ConfigError(f"{base}: {arch}.block_count must be between 1 and {MAX_BLOCKS:,}, "
                          f"got {value:,} (a corrupt or truncated header?)",
                          field=f"{arch}.block_count")
    return value


def config_from_gguf(g: GgufFile, names: set[str] | None = None) -> dict[str, Any]:
    """The Hugging Face config a GGUF's architecture numbers stand for (``names``: the
    tensors of every part of a split model; else the file's own)."""
    arch = g.arch
    if arch not in ARCHS:
        raise ConfigError(f"{g.base} is a '{arch}' model; kvplan reads the GGUFs of "
                          f"{', '.join(sorted(ARCHS))}: pass the model's config.json (or its "
                          "Hub id) instead", field="general.architecture")
    m = g.metadata

    def k(name: str, default: Any = None, need: bool = False) -> Any:
        return _get(m, f"{arch}.{name}", default, need=need)

    def count(name: str, default: int | None = None) -> int:
        """A key that must hold a whole number (0 or more)."""
        value = k(name, default, need=default is None)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{g.base}: {arch}.{name} must be a whole number, got "
                              f"{shown(value)}", field=f"{arch}.{name}")
        return value

    names = names if names is not None else {t.name for t in g.tensors}
    heads = _uniform(k("attention.head_count", need=True))
    kv = _uniform(k("attention.head_count_kv", heads))
    if isinstance(heads, list) and arch in _NEMOTRON_H | _KIMI:
        # query heads listed by layer, 0 on the blocks that are not attention
        heads = _uniform([h for h in heads if h]) or heads
    if isinstance(heads, list):
        raise ConfigError(f"{g.base}: query heads that differ by layer are not read",
                          field=f"{arch}.attention.head_count")
    tokens = m.get("tokenizer.ggml.tokens")
    vocab = k("vocab_size") or (len(tokens) if tokens is not None else None)
    if not vocab:
        embd = next((t for t in g.tensors if t.name == "token_embd.weight"), None)
        vocab = embd.shape[1] if embd and len(embd.shape) > 1 else None
    if not vocab:
        raise ConfigError(f"{g.base} gives no vocabulary size", field="vocab_size")
    cfg: dict[str, Any] = {
        "model_type": ARCHS[arch],
        "_name_or_path": m.get("general.name") or g.base.removesuffix(".gguf"),
        "num_hidden_layers": _layer_count(g.base, arch, k("block_count", need=True)),
        "hidden_size": k("embedding_length", need=True),
        "intermediate_size": _uniform(k("feed_forward_length", 0)),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "vocab_size": vocab,
        "max_position_embeddings": k("context_length"),
        "tie_word_embeddings": "output.weight" not in names,
        "torch_dtype": "bfloat16",
    }
    nextn = count("nextn_predict_layers", 0)
    if nextn and arch in _KIMI:
        raise ConfigError(
            f"{g.base}: a {arch} GGUF with {arch}.nextn_predict_layers {nextn} is not read: "
            f"llama.cpp's {arch} converter writes no next-n (MTP) blocks and its loader reads "
            "no such key, so which of the file's blocks are draft blocks, and whether a draft "
            "block holds an MLA latent or Kimi Delta Attention state, is not known: pass the "
            "model's config.json", field=f"{arch}.nextn_predict_layers")
    if arch == "deepseek4":
        nextn = _deepseek4_nextn(g, nextn, cfg["num_hidden_layers"], names)
    if nextn and isinstance(cfg["num_hidden_layers"], int):
        # the draft (MTP) blocks are numbered after the decoder's, counted in block_count
        cfg["num_hidden_layers"] -= nextn
        cfg["num_nextn_predict_layers"] = nextn
    if isinstance(cfg["intermediate_size"], list):
        widths = [w for w in cfg["intermediate_size"] if isinstance(w, int)]
        cfg["intermediate_size"] = max(widths) if widths else 0
    key_len = k("attention.key_length")
    if key_len and arch not in _MLA and arch != "gemma4":
        cfg["head_dim"] = key_len
    experts, used = k("expert_count", 0), k("expert_used_count", 0)
    if experts:
        cfg["num_local_experts" if arch in ("llama", "gpt-oss", "mistral3", "minimax-m2")
            else "num_experts"] \
            = experts
        cfg["num_experts_per_tok"] = used
        if k("expert_feed_forward_length"):
            cfg["moe_intermediate_size"] = k("expert_feed_forward_length")
        if k("expert_shared_feed_forward_length"):
            cfg["shared_expert_intermediate_size"] = k("expert_shared_feed_forward_length")
        if arch == "llama":
            cfg["model_type"] = "mixtral"
    window = k("attention.sliding_window")
    if arch in ("gemma2", "gemma3", "gpt-oss", "phi3") and window:
        cfg["sliding_window"] = window
        pattern = k("attention.sliding_window_pattern")
        period = {"gemma2": 2, "gemma3": 6, "gpt-oss": 2}.get(arch)
        n = cfg["num_hidden_layers"]
        if isinstance(pattern, list) and len(pattern) == n:
            cfg["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
        elif period and isinstance(n, int):
            # llama.cpp's pattern: layer i slides unless i % period is the period's last
            cfg["layer_types"] = ["sliding_attention" if i % period < period - 1
                                  else "full_attention" for i in range(n)]
    if arch == "gemma4":
        _gemma4(g, cfg, kv, names, count)
    if arch in _NEMOTRON_H:
        _nemotron_h(g, cfg, kv, names, count)
    if arch == "glm4moe":
        # src/models/glm4-moe.cpp: the first leading_dense_block_count layers run a dense FFN,
        # the others expert_shared_count shared experts beside the routed ones
        cfg.update(first_k_dense_replace=count("leading_dense_block_count", 0),
                   n_shared_experts=count("expert_shared_count", 0))
    if arch in ("qwen3next", "qwen35", "qwen35moe"):
        if isinstance(kv, list) and len({v for v in kv if v}) == 1:
            # KV heads listed by layer, 0 on the linear-attention layers
            cfg["num_key_value_heads"] = max(kv)
        for key, field_ in _GDN.items():
            cfg[field_] = count(key)
        inner = count("ssm.inner_size")
        if not cfg["linear_num_value_heads"] or inner % cfg["linear_num_value_heads"]:
            raise ConfigError(f"{g.base}: {arch}.ssm.inner_size {shown(inner)} is not a whole "
                              "number of value heads", field=f"{arch}.ssm.inner_size")
        cfg["linear_value_head_dim"] = inner // cfg["linear_num_value_heads"]
        interval = count("full_attention_interval", 4)
        cfg["full_attention_interval"] = interval
        n = cfg["num_hidden_layers"]
        if isinstance(interval, int) and interval > 0 and isinstance(n, int):
            cfg["layer_types"] = ["full_attention" if (i + 1) % interval == 0
                                  else "linear_attention" for i in range(n)]
        if arch != "qwen3next":
            # Qwen3.5 pins its recurrent state to float32 (mamba_ssm_dtype)
            cfg["mamba_ssm_dtype"] = "float32"
    if arch in _MLA:
        rank = count("attention.kv_lora_rank")
        rope = count("rope.dimension_count")
        key_mla = count("attention.key_length_mla", 0) or count("attention.key_length")
        value_mla = count("attention.value_length_mla", 0) or count("attention.value_length")
        if key_mla <= rope:
            raise ConfigError(f"{g.base}: a key of {key_mla} values is not wider than its "
                              f"{rope} rotary ones", field=f"{arch}.attention.key_length")
        # DeepSeek-V3's router is a sigmoid (expert_gating_func 2), V2's a softmax
        if arch == "deepseek2" and k("expert_gating_func") != 2:
            cfg["model_type"] = "deepseek_v2"
        cfg.update(kv_lora_rank=rank, qk_rope_head_dim=rope, qk_nope_head_dim=key_mla - rope,
                   v_head_dim=value_mla, q_lora_rank=k("attention.q_lora_rank") or None,
                   first_k_dense_replace=k("leading_dense_block_count", 0),
                   n_shared_experts=k("expert_shared_count", 0))
    if arch in _KDA:
        n = cfg["num_hidden_layers"]
        if (nextn and isinstance(kv, list) and isinstance(n, int)
                and len(kv) == n + nextn):
            # head_count_kv lists the draft blocks too: the decoder's layers are read
            kv = kv[:n]
        _kimi_linear(g, cfg, kv, count)
        if arch == "kimi-k3":
            _kimi_k3(g, cfg, names, count)
    if arch == "deepseek4":
        _deepseek4(g, cfg, k, count)
    if arch == "axk2":
        # its norms' low-rank gate (conversion/axk2.py add_gated_norm_rank)
        cfg["gated_norm_rank"] = count("gated_norm_rank", 16)
    if arch in ("deepseek32", "glm-dsa", "hy_v4", "axk2"):
        cfg.update(index_n_heads=count("attention.indexer.head_count"),
                   index_head_dim=count("attention.indexer.key_length"),
                   index_topk=count("attention.indexer.top_k"))
    if arch == "glm-dsa":
        pattern = _glm_dsa_pattern(g, k("attention.indexer.types"), cfg["num_hidden_layers"],
                                   cfg["max_position_embeddings"])
        if pattern is not None:
            cfg["index_topk_pattern"] = pattern
    if arch == "hy_v4":
        # src/models/hy-v4.cpp: attention.indexer.types is required (true: the layer runs its
        # own indexer, "full"; false: it reuses one, "shared")
        pattern = _glm_dsa_pattern(g, k("attention.indexer.types", need=True),
                                   cfg["num_hidden_layers"], None)
        if pattern is not None and not pattern.startswith("F"):
            raise ConfigError(f"{g.base}: hy_v4.attention.indexer.types must make layer 0 run "
                              "its own indexer (llama.cpp's loader refuses it otherwise)",
                              field="hy_v4.attention.indexer.types")
        if pattern is not None:
            cfg["indexer_types"] = ["full" if t == "F" else "shared" for t in pattern]
    return cfg


def _gemma4(g: GgufFile, cfg: dict[str, Any], kv: Any, names: set[str], count: Any) -> None:
    """Gemma 4's numbers as llama.cpp reads them (src/models/gemma4.cpp load_arch_hparams):
    attention.sliding_window_pattern (true: the layer slides), attention.key_length the full
    layers' head width and key_length_swa the sliding ones', head_count_kv a number or one per
    layer, attention.shared_kv_layers the tail that reuses earlier caches. A full layer
    without attn_v.weight takes its V from K (attention_k_eq_v)."""
    n = cfg["num_hidden_layers"]
    pattern = g.metadata.get("gemma4.attention.sliding_window_pattern")
    if (not isinstance(n, int) or not isinstance(pattern, list) or len(pattern) != n
            or not all(isinstance(p, bool | int) and p in (0, 1) for p in pattern)):
        raise ConfigError(f"{g.base}: gemma4.attention.sliding_window_pattern must hold a true "
                          f"or false for each of the {n} layers",
                          field="gemma4.attention.sliding_window_pattern")
    full = [i for i, p in enumerate(pattern) if not p]
    sliding = [i for i, p in enumerate(pattern) if p]
    cfg["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
    cfg["sliding_window"] = count("attention.sliding_window")
    cfg["head_dim"] = count("attention.key_length_swa")
    cfg["global_head_dim"] = count("attention.key_length")
    for key in ("attention.value_length_swa", "attention.value_length"):
        width = g.metadata.get(f"gemma4.{key}")
        if width is not None and width != g.metadata.get(f"gemma4.{key.replace('value', 'key')}"):
            raise ConfigError(f"{g.base}: gemma4.{key} differs from its key width; llama.cpp "
                              "loads Gemma 4 only with equal K and V widths", field=f"gemma4.{key}")
    k_eq_v = bool(full) and all(f"blk.{i}.attn_v.weight" not in names for i in full)
    per_layer = kv if isinstance(kv, list) else [kv] * n
    if len(per_layer) != n:
        raise ConfigError(f"{g.base}: gemma4.attention.head_count_kv lists {len(per_layer)} "
                          f"layers, the model has {n}", field="gemma4.attention.head_count_kv")
    slide_kv = {per_layer[i] for i in sliding}
    full_kv = {per_layer[i] for i in full}
    if len(slide_kv) > 1 or len(full_kv) > 1 or (not k_eq_v and slide_kv != full_kv
                                                  and slide_kv and full_kv):
        raise ConfigError(f"{g.base}: gemma4.attention.head_count_kv {shown(kv)} is not one count on the "
                          "sliding layers and one on the full ones (the latter only where those "
                          "layers take V from K)", field="gemma4.attention.head_count_kv")
    cfg["num_key_value_heads"] = next(iter(slide_kv or full_kv))
    cfg["attention_k_eq_v"] = k_eq_v
    if k_eq_v:
        cfg["num_global_key_value_heads"] = next(iter(full_kv))
    cfg["num_kv_shared_layers"] = count("attention.shared_kv_layers", 0)
    cfg["hidden_size_per_layer_input"] = count("embedding_length_per_layer_input", 0)
    if cfg["hidden_size_per_layer_input"]:
        # per_layer_token_embd.weight is {per-layer width × layers, n_vocab}
        cfg["vocab_size_per_layer_input"] = cfg["vocab_size"]
    if cfg.get("num_experts"):
        cfg["enable_moe_block"] = True
        cfg["top_k_experts"] = cfg["num_experts_per_tok"]


def _nemotron_h(g: GgufFile, cfg: dict[str, Any], kv: Any, names: set[str], count: Any) -> None:
    """Nemotron-H's blocks as llama.cpp tells them apart (src/models/nemotron-h.cpp): a block
    of 0 KV heads and 0 FFN width is Mamba-2 (M), one of 0 FFN width attention (*), the others
    an FFN: MoE (E) where the block has a router (ffn_gate_inp), else an MLP (-). The Mamba-2
    numbers: ssm.conv_kernel, ssm.state_size, ssm.group_count, ssm.time_step_rank (the heads)
    and ssm.inner_size (heads × head width)."""
    arch = g.arch
    n = cfg["num_hidden_layers"]
    nextn = cfg.get("num_nextn_predict_layers", 0)
    ffn = g.metadata.get(f"{arch}.feed_forward_length")
    blocks = n + nextn if isinstance(n, int) else n
    if (not isinstance(n, int) or not isinstance(kv, list) or not isinstance(ffn, list)
            or len(kv) != blocks or len(ffn) != blocks):
        raise ConfigError(f"{g.base}: {arch}.attention.head_count_kv and feed_forward_length "
                          f"must each list the {blocks} blocks (0 where a block has none)",
                          field=f"{arch}.attention.head_count_kv")
    letters = []
    for i in range(n):
        if not ffn[i]:
            letters.append("*" if kv[i] else "M")
        else:
            letters.append("E" if f"blk.{i}.ffn_gate_inp.weight" in names else "-")
    cfg["hybrid_override_pattern"] = "".join(letters)
    if nextn:
        # each next-n block folds one MTP step, an attention sub-layer and a MoE one, into a
        # block after the decoder's (conversion/nemotron.py NemotronHModel; the loader's
        # graph_mtp): its head_count_kv and feed_forward_length entries are both set
        drafts = range(n, n + nextn)
        if not all(kv[i] and ffn[i] and f"blk.{i}.ffn_gate_inp.weight" in names
                   for i in drafts):
            which = f"block {n}" if nextn == 1 else f"blocks {n} to {n + nextn - 1}"
            raise ConfigError(f"{g.base}: {arch}'s next-n {which} must hold attention "
                              "(head_count_kv) and a MoE (feed_forward_length, "
                              "ffn_gate_inp.weight), as llama.cpp builds a next-n block",
                              field=f"{arch}.nextn_predict_layers")
        cfg["mtp_hybrid_override_pattern"] = "*E"
    attn = {v for v in kv if v}
    if len(attn) > 1:
        raise ConfigError(f"{g.base}: attention blocks of several KV head counts "
                          f"({', '.join(map(str, sorted(attn)))}) are not read",
                          field=f"{arch}.attention.head_count_kv")
    cfg["num_key_value_heads"] = next(iter(attn), 0)
    cfg["intermediate_size"] = max(ffn)
    heads = count("ssm.time_step_rank")
    inner = count("ssm.inner_size")
    if not heads or inner % heads:
        raise ConfigError(f"{g.base}: {arch}.ssm.inner_size {shown(inner)} is not a whole "
                          "number of Mamba heads", field=f"{arch}.ssm.inner_size")
    cfg.update(conv_kernel=count("ssm.conv_kernel"), ssm_state_size=count("ssm.state_size"),
               n_groups=count("ssm.group_count"), mamba_num_heads=heads,
               mamba_head_dim=inner // heads,
               # llama.cpp keeps the recurrent states in float32
               mamba_ssm_cache_dtype="float32")
    if cfg.get("num_experts"):
        cfg["n_routed_experts"] = cfg.pop("num_experts")
        if k_shared := g.metadata.get(f"{arch}.expert_shared_feed_forward_length"):
            cfg["moe_shared_expert_intermediate_size"] = k_shared


def _kimi_linear(g: GgufFile, cfg: dict[str, Any], kv: Any, count: Any) -> None:
    """Kimi-Linear's, Kimi-K3's and Ling-3.0's layers as llama.cpp tells them apart
    (src/models/kimi-linear.cpp, kimi-k3.cpp and bailingmoe3.cpp load_arch_hparams): a layer
    of 0 KV heads is Kimi Delta Attention (recurrent), the others MLA. The KDA heads are
    attention.head_count, each kda.head_dim wide, with short convolutions of ssm.conv_kernel
    taps."""
    arch = g.arch
    n = cfg["num_hidden_layers"]
    if (not isinstance(n, int) or not isinstance(kv, list) or len(kv) != n
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in kv)):
        raise ConfigError(f"{g.base}: {arch}.attention.head_count_kv must list the {n} "
                          "layers (0 on the Kimi Delta Attention ones)",
                          field=f"{arch}.attention.head_count_kv")
    heads = cfg["num_attention_heads"]
    # Kimi Linear numbers the layers of linear_attn_config from 1
    cfg["linear_attn_config"] = {
        "full_attn_layers": [i + 1 for i in range(n) if kv[i]],
        "kda_layers": [i + 1 for i in range(n) if not kv[i]],
        "num_heads": heads, "head_dim": count("kda.head_dim"),
        "short_conv_kernel_size": count("ssm.conv_kernel")}
    cfg["num_key_value_heads"] = max(kv) or heads


def _kimi_k3(g: GgufFile, cfg: dict[str, Any], names: set[str], count: Any) -> None:
    """What Kimi-K3 adds to the Kimi-Linear config (src/models/kimi-k3.cpp load_arch_hparams,
    conversion/kimi_k3.py): routed experts in a latent space of expert_latent_length values,
    a sigmoid gate on the MLA output (attn_gate.weight), one full-rank KDA gate (ssm_g.weight)
    in place of the ssm_g_a / ssm_g_b pair. None of them holds a cache."""
    lac = cfg["linear_attn_config"]
    full = [i - 1 for i in lac["full_attn_layers"]]
    kda = [i - 1 for i in lac["kda_layers"]]
    if latent := count("expert_latent_length", 0):
        cfg["routed_expert_hidden_size"] = latent
    cfg["mla_use_output_gate"] = any(f"blk.{i}.attn_gate.weight" in names for i in full)
    lac["use_full_rank_gate"] = any(f"blk.{i}.ssm_g.weight" in names for i in kda)


#: DeepSeek-V4's compression ratios llama.cpp loads (src/models/deepseek4.cpp)
_DSV4_RATIOS = (0, 4, 128)


def _deepseek4_nextn(g: GgufFile, nextn: int, blocks: Any, names: set[str]) -> int:
    """DeepSeek-V4's draft blocks as llama.cpp's loader counts them: nextn_predict_layers
    only where the first draft block's nextn.eh_proj.weight is in the file (else every block
    is the decoder's). A file of the draft blocks alone (no blk.0.attn_norm.weight) is the
    draft head llama.cpp loads beside the model."""
    if not nextn or not isinstance(blocks, int):
        return 0
    if nextn >= blocks:
        raise ConfigError(f"{g.base}: deepseek4.nextn_predict_layers {nextn} is not fewer than "
                          f"its {blocks} blocks", field="deepseek4.nextn_predict_layers")
    if f"blk.{blocks - nextn}.nextn.eh_proj.weight" not in names:
        return 0
    if "blk.0.attn_norm.weight" not in names:
        raise ConfigError(f"{g.base} holds DeepSeek-V4's draft (MTP) blocks only, the draft "
                          "head llama-server loads beside the model: pass the model's GGUF",
                          field="model")
    return nextn


def _deepseek4(g: GgufFile, cfg: dict[str, Any], k: Any, count: Any) -> None:
    """DeepSeek-V4's numbers as llama.cpp reads them (src/models/deepseek4.cpp
    load_arch_hparams; conversion/deepseek.py DeepseekV4Model): attention.key_length the
    latent's width (head_dim: K and V are the same latent), attention.sliding_window, one
    attention.compress_ratios entry a block (0, 4 or 128; the converter writes the config's
    list, the draft layers' entries included, and llama.cpp reads the first block_count),
    the indexer's attention.indexer.head_count / key_length / top_k, the low-rank query and
    grouped output (attention.q_lora_rank, output_lora_rank, output_group_count), the MoE
    (expert_shared_count, hash_layer_count) and hyper_connection.count."""
    n = cfg["num_hidden_layers"]
    nextn = cfg.get("num_nextn_predict_layers", 0)
    ratios = k("attention.compress_ratios")
    if (not isinstance(n, int) or not isinstance(ratios, list) or len(ratios) < n + nextn
            or not all(isinstance(r, int) and not isinstance(r, bool) and r in _DSV4_RATIOS
                       for r in ratios)):
        raise ConfigError(f"{g.base}: deepseek4.attention.compress_ratios must list at least "
                          f"the file's {shown(n + nextn if isinstance(n, int) else n)} blocks, "
                          "each 0, 4 or 128", field="deepseek4.attention.compress_ratios")
    value = count("attention.value_length", 0)
    if value and value != cfg.get("head_dim"):
        raise ConfigError(f"{g.base}: deepseek4.attention.value_length {value} differs from "
                          f"key_length {shown(cfg.get('head_dim'))}; DeepSeek-V4's K and V are "
                          "one latent", field="deepseek4.attention.value_length")
    cfg.update(
        num_key_value_heads=1, head_dim=count("attention.key_length"),
        compress_ratios=list(ratios[:n + nextn]),
        sliding_window=count("attention.sliding_window"),
        qk_rope_head_dim=count("rope.dimension_count"),
        q_lora_rank=count("attention.q_lora_rank"),
        o_lora_rank=count("attention.output_lora_rank"),
        o_groups=count("attention.output_group_count"),
        index_n_heads=count("attention.indexer.head_count"),
        index_head_dim=count("attention.indexer.key_length"),
        index_topk=count("attention.indexer.top_k"),
        n_shared_experts=count("expert_shared_count", 0),
        num_hash_layers=count("hash_layer_count", 0),
        hc_mult=count("hyper_connection.count", 1))
    if isinstance(theta := k("attention.compress_rope_freq_base"), int | float):
        cfg["compress_rope_theta"] = theta


def _glm_dsa_pattern(g: GgufFile, types: Any, layers: Any, context: Any) -> str | None:
    """The indexer pattern of a glm-dsa (or hy_v4) GGUF as llama.cpp reads it
    (src/models/glm-dsa.cpp, hy-v4.cpp):
    its ``attention.indexer.types`` (true: the layer runs its own indexer, false: it shares
    the top-k of an earlier one), else GLM-5.2's built-in table for a training context of at
    least 1,048,576, else an indexer in every layer (None). F and S as index_topk_pattern
    spells them."""
    if not isinstance(layers, int):
        return None
    if types is None:
        if isinstance(context, int) and context >= _GLM_5_2_CONTEXT:
            return "".join("F" if i < len(_GLM_5_2_TYPES) and _GLM_5_2_TYPES[i] else "S"
                           for i in range(layers))
        return None
    if (not isinstance(types, list) or len(types) != layers
            or not all(isinstance(t, bool | int) and t in (0, 1) for t in types)):
        raise ConfigError(f"{g.base}: {g.arch}.attention.indexer.types must hold a true or "
                          f"false for each of the {layers} layers, got {shown(types)}",
                          field=f"{g.arch}.attention.indexer.types")
    return "".join("F" if t else "S" for t in types)


_BLOCK = re.compile(r"^blk\.(\d+)\.")


def _draft(name: str, layers: int) -> bool:
    """A tensor of a draft (MTP) block: numbered past the decoder's ``layers``."""
    m = _BLOCK.match(name)
    return m is not None and int(m.group(1)) >= layers


def _checkpoint(parts: list[GgufFile], experts: int, used: int, layers: int) -> Checkpoint:
    total = inp = head = exp = 0
    types: dict[str, int] = {}
    separate = False
    draft = 0
    for g in parts:
        for t in g.tensors:
            if _draft(t.name, layers):
                draft += t.nbytes
                continue
            n = t.nbytes
            total += n
            tname = GGML_TYPES[t.type][0]
            types[tname] = types.get(tname, 0) + n
            if t.name == "token_embd.weight":
                inp = n
            elif t.name == "output.weight":
                head, separate = n, True
            elif "_exps." in t.name:
                exp += n
    first = parts[0]
    ftype = first.metadata.get("general.file_type")
    fmt = FILE_TYPES.get(ftype, "gguf") if isinstance(ftype, int) else "gguf"
    active = exp * used // experts if experts else 0
    files = f"{len(parts)} files" if len(parts) > 1 else first.base
    from .engines.llamacpp_offload import gguf_blocks
    blocks = gguf_blocks(((t.name, t.nbytes) for g in parts for t in g.tensors), layers)
    return Checkpoint(total, inp, head if separate else inp, exp, active, fmt,
                      f"GGUF tensors ({files})", separate,
                      tuple(sorted(types.items(), key=lambda kv: -kv[1])),
                      first.files.locate(first.name),
                      draft, len(parts), blocks)


#: general.type values of GGUFs that are not models → what they are
_NOT_MODELS = {"adapter": "a LoRA adapter (general.type = adapter): pass the GGUF of the model "
                          "it adapts; llama-server loads the adapter beside it with --lora",
               "imatrix": "an importance matrix (general.type = imatrix), the input of "
                          "llama-quantize, not a model",
               "mmproj": "a multimodal projector (mmproj): pass the language model's GGUF; "
                         "llama-server loads the projector beside it with --mmproj"}


def _refuse_non_models(g: GgufFile) -> None:
    """A GGUF that is not a model (an adapter, a projector, an importance matrix) is named as
    what it is."""
    kind = g.metadata.get("general.type")
    if kind not in _NOT_MODELS and g.metadata.get("general.architecture") == "clip":
        kind = "mmproj"  # projectors carry the architecture 'clip'
    if isinstance(kind, str) and kind in _NOT_MODELS:
        raise ConfigError(f"{g.base} is {_NOT_MODELS[kind]}", field="model")


def spec_from_gguf(path: Path) -> ModelSpec:
    """The ModelSpec of a local GGUF file (a split model's parts are found beside it)."""
    files = LocalFiles(path.parent)
    return spec_from_files(files, first_part(files, path.name), f"file {path}")


def spec_from_files(files: Files, name: str, source: str) -> ModelSpec:
    """The ModelSpec of the GGUF file ``name`` of ``files`` (a split model's first part)."""
    from .hf import spec_from_config

    first = read_header(files, name)
    _refuse_non_models(first)
    parts = list(_parts(first))
    if not any(g.tensors for g in parts):
        raise ConfigError(f"{first.base} holds no tensors (a vocabulary-only file): pass the "
                          "model's GGUF", field="model")
    cfg = config_from_gguf(first, {t.name for g in parts for t in g.tensors})
    label = str(cfg.get("_name_or_path") or first.base)[:200]
    spec = spec_from_config(cfg, name=label, source=source)
    # Nemotron-H's config names its routed experts n_routed_experts
    experts = int(cfg.get("num_local_experts") or cfg.get("num_experts")
                  or cfg.get("n_routed_experts") or 0)
    layers = int(cfg["num_hidden_layers"])
    ck = _checkpoint(parts, experts, int(cfg.get("num_experts_per_tok") or 0), layers)
    # parameters counted from the tensors themselves, the draft blocks' apart
    tensors = [t for g in parts for t in g.tensors]
    model = [t for t in tensors if not _draft(t.name, layers)]
    total = sum(t.elements for t in model)
    embedding = sum(t.elements for t in model
                    if t.name in ("token_embd.weight", "output.weight"))
    inputs = sum(t.elements for t in model if t.name == "token_embd.weight")
    expert = sum(t.elements for t in model if "_exps." in t.name)
    draft = sum(t.elements for t in tensors) - total
    active_expert = expert * ck.active_expert_bytes // ck.expert_bytes if ck.expert_bytes else 0
    params = ParamCount(total=total, active=total - expert + active_expert
                        - (inputs if ck.head_separate else 0),
                        embedding=embedding, experts=expert, active_experts=active_expert,
                        mtp=draft)
    return replace(spec, params=params, checkpoint=ck,
                   notes=spec.notes + (f"weights read from the GGUF's {len(tensors):,} tensors",))
