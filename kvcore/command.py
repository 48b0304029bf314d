"""A serving engine's launch command read as a plan.

``llama-server …``, ``vllm serve …``, ``python -m sglang.launch_server …``,
``trtllm-serve …`` and ``[OLLAMA_*=…] ollama serve|run …`` name the model, the context and the sequences they serve, the KV-cache
dtype, the parallel layout and the memory settings. ``read_command`` turns those flags into
kvplan's own fields (the REST API's names: ``context``, ``sequences``, ``kv_k``, ``tp``,
``gpu_memory_utilization``, …), with the engine's defaults where a flag is left out, and says
what it did not read. ``Launch.fields`` then completes the context a command leaves to the
model (its trained context), which needs the model's config.

Every flag is read as the engine reads it:

- llama-server: ``-c`` is the context of all slots together, each of ``-np`` slots holding
  ``-c / -np`` tokens; ``-c 0`` or no ``-c`` is the trained context a stream (--fit sets it
  so: one stream with a unified cache, else one a slot; the trained context in all with
  --fit off), which --fit shortens first where it does not fit (``fit_shortened``; not
  ``-c 0``'s). No ``-np`` is 4 slots
  sharing one unified KV cache (``server.cpp``: ``n_parallel < 0`` → 4 and ``kv_unified``);
  an explicit ``-np`` turns that unification off unless ``-kvu`` is given. llama-cli,
  llama-completion and the other programs run one sequence. ``-b`` lowers n_ubatch to it.
  ``LLAMA_ARG_*`` variables set before the program (or with docker's ``-e``) are read as their
  flags, the flags after the program winning.
- vLLM: ``--max-model-len`` takes ``32k`` (1,000s) or ``32K`` (1,024s), as vLLM's
  ``human_readable_int`` does; no ``--max-model-len`` is the length vLLM derives from the
  config (``hf.vllm_max_len``). ``--max-num-seqs``, where given, is the number of full-length
  sequences planned; else one (the request vLLM checks at start-up), the plan then reporting
  how many fit.
- SGLang: ``--context-length`` (``128k``, ``128Ki``) and ``--max-running-requests`` likewise
  (``hf.sglang_context_len``).
- trtllm-serve: ``--max_seq_len`` and ``--max_batch_size``.
- Ollama: ``OLLAMA_CONTEXT_LENGTH`` (num_ctx a sequence; unset, Ollama's default by the cards'
  memory, ``fit_shortened``), ``OLLAMA_NUM_PARALLEL``, ``OLLAMA_KV_CACHE_TYPE``,
  ``OLLAMA_FLASH_ATTENTION`` and the ``LLAMA_ARG_*`` variables its llama-server inherits;
  ``ollama run``'s model where kvplan reads it (``hf.co/OWNER/REPO:QUANT``, a catalog id).

A flag that changes memory in a way kvplan does not plan (llama.cpp's ``-sm row`` and ``-ot``
overrides other than whole blocks' routed experts to the CPU, SGLang's DP attention, vLLM's
in-flight bitsandbytes quantization) is refused in one line rather than read as something
else.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path, PurePath, PureWindowsPath
from typing import Any

from .engines import llamacpp as _llamacpp
from .engines import ollama as _ollama
from .engines import sglang as _sglang
from .engines import vllm as _vllm
from .engines.llamacpp_offload import split_overrides
from .errors import InputError, shown
from .hub import HubUnavailable, gguf_weights
from .model import ModelSpec
from .yamlish import parse_yaml

__all__ = ["Launch", "cli_line", "fit_shortened", "give_way", "gguf_file_model", "human_int",
           "launch_query", "read_command", "resolve"]

#: the longest command read
MAX_COMMAND = 16_000
#: llama-server's slots where -np is not given (server.cpp: auto is 4, with a unified cache)
AUTO_SLOTS = 4
#: llama.cpp's programs whose flags are read (llama-server's slot defaults apart)
LLAMA_PROGRAMS = ("llama-server", "llama-cli", "llama-completion", "llama-mtmd-cli",
                  "llama-run")
#: -ngl all (or -2 and below), as llama.cpp's own commands spell every layer
ALL_LAYERS = 999
#: llama.cpp's --fit shortens a context left unset to no less than this a stream
#: (fit_params_min_ctx), and to a multiple of FIT_ROUND a stream
FIT_MIN_CTX = 4096
FIT_ROUND = 256
#: llama.cpp's KV cache types (-ctk/-ctv), as its profile names them
LLAMA_KV = _llamacpp.FORMATS


def _inverse(formats: dict[str, str], aliases: dict[str, str | None]) -> dict[str, str | None]:
    """An engine's --kv-cache-dtype names to kvplan's formats: its profile's table inverted
    (auto: the model's own dtype, None), with the other spellings it takes."""
    return {"auto": None, **aliases, **{v: k for k, v in formats.items() if v != "auto"}}


#: vLLM's --kv-cache-dtype and SGLang's: kvplan's format, None for the model's own dtype
VLLM_KV = _inverse(_vllm.FORMATS, {"float16": "f16", "half": "f16", "bfloat16": "bf16",
                                   "fp8_e4m3": "fp8_e4m3"})
SGLANG_KV = _inverse(_sglang.FORMATS, {"bf16": "bf16", "bfloat16": "bf16"})
#: GGUF file-name tags of llama-quantize's types (…-Q4_K_M.gguf, ….IQ4_XS.gguf, …-BF16.gguf)
_QUANT_TAG = re.compile(r"(?:^|[-._])((?:UD-)?I?Q\d(?:_[A-Z0-9]+)+|BF16|F16|F32|MXFP4(?:_MOE)?)"
                        r"(?=$|[-._])", re.IGNORECASE)
_SPLIT = re.compile(r"-\d{5}-of-\d{5}$")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


@dataclass
class Launch:
    """A launch command as kvplan reads it."""

    engine: str
    #: what the command loads, as kvplan's MODEL takes it (a Hub repo, REPO:QUANT, a path, a
    #: catalog name); None where it names nothing kvplan can load here
    model: str | None
    #: kvplan's fields (the REST API's names) the command sets
    settings: dict[str, Any] = field(default_factory=dict)
    #: what was assumed or left out, one sentence each
    notes: list[str] = field(default_factory=list)
    #: flags read and left aside: the engine's flags known to change no memory kvplan plans
    #: (ports, sampling, logging, templates, threads)
    unread: list[str] = field(default_factory=list)
    #: flags (and stray words) kvplan does not know: the plan is without whatever they do
    unknown: list[str] = field(default_factory=list)
    #: the options file the command names (--config, --extra_llm_api_options), if any
    options_path: str | None = None
    #: the field each note is about, where one is: a plan that sets the field itself drops it
    about: dict[str, str] = field(default_factory=dict)
    #: the flag and value that named the model (-m ./x.gguf), for messages
    model_flag: str = ""
    #: whether the card holds the vision tower (llama.cpp: a projector file, --mmproj)
    mmproj: bool = True
    #: vLLM's --limit-mm-per-prompt: the modalities it sets to 0 (None: not given); resolve
    #: leaves out the towers whose modalities are all among them
    mm_zero: frozenset[str] | None = None
    #: where the command leaves the context to the model: how many sequences share its
    #: trained context (llama-server's slots), else 0
    trained_share: int = 0
    #: llama.cpp with -c left out and --fit on: the fit may shorten the context; the streams
    #: its minimum and rounding count (1 with a unified cache, else the sequences); 0: no
    fit_streams: int = 0
    #: --fit-ctx: the least context a stream --fit shortens to (common.h fit_params_min_ctx)
    fit_min_ctx: int = FIT_MIN_CTX
    #: Ollama without OLLAMA_CONTEXT_LENGTH: num_ctx by the cards' memory (fit_shortened),
    #: each card's less OLLAMA_GPU_OVERHEAD (bytes)
    auto_ctx: bool = False
    gpu_overhead: int = 0
    #: a start-up refusal the engine raises only after its check of the platform
    #: (refuse_launch raises it once the cards are known)
    refused: InputError | None = None

    def fitted(self, plan: dict[str, Any]) -> int | None:
        """The context a sequence gets where llama.cpp's --fit, with -c left out, shortens
        the context to fit the card (common/fit.cpp: before it moves any layer to host
        memory, to the largest total that fits, a multiple of 256 a stream, and no less than
        4,096 a stream: where not even that fits, it keeps the least and moves layers);
        None where the plan fits."""
        if not self.fit_streams or plan.get("fits") is not False:
            return None
        seqs, streams = plan["sequences"], self.fit_streams
        least = self.fit_min_ctx * streams
        total = (plan.get("max_context") or 0) * seqs // (FIT_ROUND * streams) * FIT_ROUND \
            * streams
        total = max(total, least)
        if total >= plan["context"] * seqs:
            return None
        return int(total // seqs)

    def given(self, names: set[str]) -> None:
        """Drop the notes about fields the plan sets itself (a context given beside the
        command makes "no -c: the trained context" moot, and --fit's shortening of it)."""
        self.notes = [n for n in self.notes if self.about.get(n) not in names]
        if "context" in names:
            self.fit_streams = 0
            self.auto_ctx = False

    def fields(self, trained: int | None) -> dict[str, Any]:
        """The settings with the context completed from the model's trained context (its
        ``max_position_embeddings``) where the command leaves it to the model."""
        out = dict(self.settings)
        if self.trained_share:
            if not trained:
                raise InputError("the command leaves the context to the model, whose config "
                                 "gives no max_position_embeddings: set it in the command "
                                 f"({_CONTEXT_FLAG[self.engine]})", field="command")
            # rounded up as -c's share is: the cells pad from it as llama.cpp pads n_ctx
            out["context"] = -(-trained // self.trained_share)
        return out


_CONTEXT_FLAG = {"llama.cpp": "-c", "vllm": "--max-model-len", "sglang": "--context-length",
                 "trtllm": "--max_seq_len"}


def _int(flag: str, value: str, low: int = 0) -> int:
    try:
        n = int(value)
    except ValueError:
        raise InputError(f"{flag} takes a whole number, got {shown(value)}",
                         field="command") from None
    if n < low:
        raise InputError(f"{flag} must be at least {low}, got {n}", field="command")
    return n


def _float(flag: str, value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = math.nan
    if not math.isfinite(x):
        raise InputError(f"{flag} takes a number, got {shown(value)}", field="command")
    return x


def human_int(flag: str, value: str) -> int:
    """vLLM's ``human_readable_int``: 32k = 32,000, 32K = 32,768 (k, m, g decimal; K, M, G
    binary); a decimal fraction only with a decimal suffix (25.6k)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)([kmgKMG]?)\s*", value)
    if m is None:
        raise InputError(f"{flag} takes a whole number (or 32k = 32,000, 32K = 32,768), got "
                         f"{shown(value)}", field="command")
    number, suffix = m.groups()
    if suffix in "KMG" and suffix and "." in number:
        raise InputError(f"{flag} takes no decimals with a binary suffix like {suffix} (vLLM "
                         f"refuses them), got {shown(value)}: write {number}{suffix.lower()} "
                         f"for {suffix.lower()} = 1,000s", field="command")
    scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 1 << 10, "M": 1 << 20,
             "G": 1 << 30}[suffix]
    if not suffix and "." in number:
        raise InputError(f"{flag} takes a whole number, got {shown(value)}", field="command")
    # a decimal suffix's fraction is cut, as vLLM's int(float(number) * multiplier) cuts it
    return int(Decimal(number) * scale)


def sglang_int(flag: str, value: str) -> int:
    """SGLang's --context-length: a whole number, or one with k (1,000s) or Ki (1,024s),
    M or Mi."""
    m = re.fullmatch(r"\s*(\d+)(k|Ki|M|Mi)?\s*", value)
    if m is None:
        raise InputError(f"{flag} takes a whole number (or 128k = 128,000, 128Ki = 131,072), "
                         f"got {shown(value)}", field="command")
    number, suffix = m.groups()
    scale = {None: 1, "k": 1000, "Ki": 1024, "M": 1000**2, "Mi": 1024**2}[suffix]
    if int(number) * scale < 1:
        raise InputError(f"{flag} must be at least 1, got {shown(value)}", field="command")
    return int(number) * scale


@dataclass(frozen=True)
class _Flag:
    names: tuple[str, ...]
    #: "value": takes one; "none": takes none; "maybe": takes one where a word follows
    #: (llama.cpp's -fa, once a switch, now on|off|auto); "many": every word up to the next
    #: flag (argparse's nargs="+"), passed on joined by spaces
    arity: str
    read: Callable[[_Reader, str, str], None]


class _Reader:
    """One command's flags, read into a Launch."""

    def __init__(self, engine: str, options: str | None = None) -> None:
        #: the text of the options file the command names, where given
        self.options = options
        self.launch = Launch(engine, None)
        self.set = self.launch.settings
        self.positional: list[str] = []
        self.seen: dict[str, Any] = {}

    def note(self, text: str, about: str | None = None) -> None:
        if text not in self.launch.notes:
            self.launch.notes.append(text)
        if about is not None:
            self.launch.about[text] = about


# --- llama-server -------------------------------------------------------------------------

def _model(r: _Reader, flag: str, value: str) -> None:
    r.seen["model"] = value
    r.launch.model_flag = f"{flag} {value}"


def _llama_hf(r: _Reader, flag: str, value: str) -> None:
    # without a tag llama.cpp takes the repository's Q4_K_M, else its Q8_0, else its first
    # file: kvplan reads the repository the same way
    r.seen["hf"] = value.strip()
    r.launch.model_flag = f"{flag} {value}"


def _llama_kv(which: str) -> Callable[[_Reader, str, str], None]:
    def read(r: _Reader, flag: str, value: str) -> None:
        name = value.strip().lower()
        if name not in LLAMA_KV:
            raise InputError(f"{flag} takes one of llama.cpp's cache types "
                             f"({', '.join(LLAMA_KV)}), got {shown(value)}", field="command")
        r.set[which] = LLAMA_KV[name]
    return read


def _llama_ngl(r: _Reader, flag: str, value: str) -> None:
    v = value.strip().lower()
    if v == "auto" or v == "-1":
        return      # --fit places the layers: kvplan's default
    if v == "all":
        r.set["ngl"] = ALL_LAYERS
        return
    n = _int(flag, v, low=-(1 << 30))
    # <= -2: every layer (common.h)
    r.set["ngl"] = ALL_LAYERS if n <= -2 else n


def _llama_fa(r: _Reader, flag: str, value: str) -> None:
    v = value.strip().lower()
    if v in ("off", "0", "false", "disabled"):
        r.set["no_flash_attn"] = True
    elif v in ("on", "auto", "1", "true", "enabled", ""):
        r.set.pop("no_flash_attn", None)
    else:
        raise InputError(f"{flag} takes on, off or auto, got {shown(value)}", field="command")


def _llama_fit_target(r: _Reader, flag: str, value: str) -> None:
    """--fit-target MiB[,MiB...]: the memory --fit leaves free on each device (one value for
    all, or one each); kvplan plans one margin for every card, the largest given."""
    words = [w.strip() for w in value.split(",")]
    mibs = [_int(flag, w, low=0) for w in words]
    r.set["fit_target"] = max(mibs)
    if len(set(mibs)) > 1:
        r.note(f"{flag} {value}: planned with the largest, {max(mibs):,} MiB, on every card",
               "fit_target")


def _llama_fit_ctx(r: _Reader, flag: str, value: str) -> None:
    """--fit-ctx N: the least context a stream --fit shortens to, where -c is left out."""
    r.launch.fit_min_ctx = _int(flag, value, low=0)


def _llama_ts(r: _Reader, flag: str, value: str) -> None:
    shares = [s for s in re.split(r"[,/]", value) if s.strip()]
    r.set["tensor_split"] = ",".join(s.strip() for s in shares)
    if len(shares) > 1:
        # a share a card: as many cards (-dev, where given, names them)
        r.set.setdefault("gpus", len(shares))


def _llama_sm(r: _Reader, flag: str, value: str) -> None:
    v = value.strip().lower()
    if v == "row":
        raise InputError(f"{flag} row splits each matrix's rows over the cards, which kvplan "
                         "does not plan: plan -sm layer (the default) or one card",
                         field="command")
    if v == "none":
        r.set["gpus"] = 1
    elif v != "layer":
        raise InputError(f"{flag} takes none, layer or row, got {shown(value)}", field="command")


def _llama_dev(r: _Reader, flag: str, value: str) -> None:
    devices = [d for d in value.split(",") if d.strip() and d.strip().lower() != "none"]
    if devices:
        r.set["gpus"] = len(devices)   # over any -ts count
        r.note(f"{flag} {value}: {len(devices)} card{'s' if len(devices) > 1 else ''}; give "
               "the card with --gpu")


def _llama_ot(r: _Reader, flag: str, value: str) -> None:
    # each PATTERN=BUFFER, at the commas as llama.cpp splits them; the plan checks them
    # against the model's tensors
    r.set.setdefault("override_tensor", []).extend(split_overrides([value]))


def _switch(flag: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("on", "1", "true", "enabled"):
        return True
    if v in ("off", "0", "false", "disabled"):
        return False
    raise InputError(f"{flag} takes on or off, got {shown(value)}", field="command")


def _llama_draft(r: _Reader, flag: str, value: str) -> None:
    # -md FILE.gguf (read like -m's file in resolve), -hfd REPO[:QUANT] (like -hf's)
    r.set["draft"] = value.strip()


def _llama_spec_type(r: _Reader, flag: str, value: str) -> None:
    """--spec-type: draft-eagle3 runs the draft (-md) as an EAGLE-3 head; draft-simple as a
    draft model; the others (n-gram lookups, a model's own MTP) need no draft of kvplan's."""
    v = value.strip().lower()
    if v == "draft-eagle3":
        r.set["draft_method"] = "eagle3"
    elif v == "draft-simple":
        r.set["draft_method"] = "draft_model"
    else:
        _left(r, flag, value)


def _llama_mmproj(r: _Reader, flag: str, value: str) -> None:
    r.seen["mmproj"] = True
    tag = gguf_file_model(value)[1]
    if tag and tag not in ("f16", "bf16"):
        r.note(f"{flag} {value}: the vision tower is counted in f16, not as this file's "
               f"{tag.upper()}")


def _set(name: str, conv: Callable[[str, str], Any]) -> Callable[[_Reader, str, str], None]:
    def read(r: _Reader, flag: str, value: str) -> None:
        r.set[name] = conv(flag, value)
    return read


def _on(name: str, value: Any = True) -> Callable[[_Reader, str, str], None]:
    def read(r: _Reader, flag: str, _: str) -> None:
        if value is None:
            r.set.pop(name, None)
        else:
            r.set[name] = value
    return read


def _seen(name: str, conv: Callable[[str, str], Any] | None = None
          ) -> Callable[[_Reader, str, str], None]:
    def read(r: _Reader, flag: str, value: str) -> None:
        r.seen[name] = conv(flag, value) if conv else value
    return read


def _options_file(holds: str) -> Callable[[_Reader, str, str], None]:
    """--config FILE (a YAML file of the engine's options): read where its text was given
    (read_command's ``options``: the CLI reads the file where it is on this machine), else a
    note that the plan is without it."""
    def read(r: _Reader, flag: str, value: str) -> None:
        r.seen["options_flag"] = f"{flag} {value}"
        r.launch.options_path = value
        if r.options is None:
            r.note(f"{flag} {value}: the file is not on this machine (or not given), so its "
                   f"options ({holds}) are not planned (the plan is without them)")
    return read


def _comma_list(flag: str, value: str) -> str:
    """A many-valued flag's words (spaces or commas between them) joined by commas."""
    return ",".join(value.replace(",", " ").split())


def _left(r: _Reader, flag: str, value: str) -> None:
    """A flag known to change no memory kvplan plans: listed as not read."""
    r.launch.unread.append(f"{flag} {value}" if value else flag)


def _unplanned(why: str, inert: tuple[str, ...] = ()) -> Callable[[_Reader, str, str], None]:
    """A flag that changes memory in a way kvplan does not plan: a note saying so (unless
    its value is one of ``inert``, the engine's default, in any case: then it is listed as not
    read)."""
    def read(r: _Reader, flag: str, value: str) -> None:
        if value.strip().lower() in inert:
            _left(r, flag, value)
            return
        r.note(f"{flag}{' ' + value if value else ''}: {why}; not planned (the plan is "
               "without it)")
    return read


def _refuse(why: str) -> Callable[[_Reader, str, str], None]:
    def read(r: _Reader, flag: str, value: str) -> None:
        raise InputError(f"{flag}{' ' + value if value else ''}: {why}", field="command")
    return read


def _inert(engine_bools: bool = False, **by_arity: str) -> tuple[_Flag, ...]:
    """An engine's flags that change no memory kvplan plans, by arity ("none", "value",
    "maybe", "many"), each a space-separated list whose aliases are joined by "|";
    ``engine_bools``: each switch also has its --no- form (vLLM's BooleanOptionalAction)."""
    out = []
    for arity, words in by_arity.items():
        for word in words.split():
            names = tuple(word.split("|"))
            if engine_bools and arity == "none":
                names += tuple("--no-" + n[2:] for n in names if n.startswith("--"))
            out.append(_Flag(names, arity, _left))
    return tuple(out)


def _llama_lora(r: _Reader, flag: str, value: str) -> None:
    """--lora FNAME[,FNAME...] and --lora-scaled FNAME:SCALE[,...] (or FNAME SCALE): the
    adapter files, for the CLI to read where they are on this machine (field ``lora``)."""
    files = r.set.setdefault("lora", [])
    for word in value.replace(",", " ").split():
        name = word.rsplit(":", 1)[0] if flag == "--lora-scaled" and ":" in word else word
        try:
            float(name)  # --lora-scaled FNAME SCALE: the scale
            continue
        except ValueError:
            files.append(name)


_LLAMA = (
    _Flag(("-m", "--model"), "value", _model),
    _Flag(("-hf", "-hfr", "--hf-repo"), "value", _llama_hf),
    _Flag(("-hff", "--hf-file"), "value", _seen("hf_file")),
    _Flag(("-mu", "--model-url"), "value", _model),
    _Flag(("-c", "--ctx-size"), "value", _seen("ctx", lambda f, v: _int(f, v))),
    _Flag(("-np", "--parallel"), "value", _seen("np", lambda f, v: _int(f, v, low=-1))),
    _Flag(("-ctk", "--cache-type-k"), "value", _llama_kv("kv_k")),
    _Flag(("-ctv", "--cache-type-v"), "value", _llama_kv("kv_v")),
    _Flag(("-ngl", "--gpu-layers", "--n-gpu-layers"), "value", _llama_ngl),
    _Flag(("-ts", "--tensor-split"), "value", _llama_ts),
    _Flag(("-sm", "--split-mode"), "value", _llama_sm),
    _Flag(("-dev", "--device"), "value", _llama_dev),
    _Flag(("-b", "--batch-size"), "value", _seen("batch", lambda f, v: _int(f, v, low=1))),
    _Flag(("-ub", "--ubatch-size"), "value", _set("ubatch", lambda f, v: _int(f, v, low=1))),
    _Flag(("-fa", "--flash-attn"), "maybe", _llama_fa),
    _Flag(("--swa-full",), "none", _on("swa_full")),
    _Flag(("-kvu", "--kv-unified"), "none", _seen("kvu", lambda f, v: True)),
    _Flag(("-no-kvu", "--no-kv-unified"), "none", _seen("kvu", lambda f, v: False)),
    _Flag(("-cmoe", "--cpu-moe"), "none", _on("cpu_moe")),
    _Flag(("-ncmoe", "--n-cpu-moe"), "value", _set("n_cpu_moe", lambda f, v: _int(f, v))),
    _Flag(("-ot", "--override-tensor"), "value", _llama_ot),
    _Flag(("--lora",), "value", _llama_lora),
    _Flag(("--lora-scaled",), "many", _llama_lora),
    _Flag(("-md", "--model-draft", "-hfd", "-hfrd", "--hf-repo-draft"), "value", _llama_draft),
    # the draft's speculation: draft-eagle3 runs -md as an EAGLE-3 head; the least tokens a
    # step and the least chance change no memory kvplan plans
    _Flag(("--spec-type",), "value", _llama_spec_type),
    _Flag(("--spec-draft-n-min", "--draft-p-min"), "value", _left),
    # the draft's tokens a round: kvplan's speculative_tokens (the speculative estimate's k)
    _Flag(("--spec-draft-n-max",), "value",
          _set("speculative_tokens", lambda f, v: _int(f, v, 1))),
    _Flag(("-ctkd", "--cache-type-k-draft"), "value", _seen("ctkd")),
    _Flag(("-ctvd", "--cache-type-v-draft"), "value", _seen("ctvd")),
    _Flag(("-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"), "value",
          _unplanned("some of the draft's layers in host memory", ("-1", "999", "all",
                                                                    "auto"))),
    _Flag(("-mm", "--mmproj", "-mmu", "--mmproj-url"), "value", _llama_mmproj),
    _Flag(("--no-mmproj",), "none", _seen("no_mmproj", lambda f, v: True)),
    _Flag(("--no-mmproj-offload",), "none", _seen("mmproj_on_host", lambda f, v: True)),
    _Flag(("-fit", "--fit"), "value", _seen("fit", lambda f, v: _switch(f, v))),
    _Flag(("-fitt", "--fit-target"), "value", _llama_fit_target),
    _Flag(("-fitc", "--fit-ctx"), "value", _llama_fit_ctx),
    _Flag(("-cram", "--cache-ram"), "value",
          _set("cache_ram", lambda f, v: _int(f, v, low=-1))),
    _Flag(("-ctxcp", "--ctx-checkpoints", "--swa-checkpoints"), "value",
          _set("ctx_checkpoints", lambda f, v: _int(f, v, low=0))),
    _Flag(("-nkvo", "--no-kv-offload"), "none",
          _refuse("the KV cache in host memory is not planned: leave the flag out")),
)


def _llama_draft_kv(r: _Reader) -> None:
    """-ctkd/-ctvd: the draft's cache type, planned where K's and V's are one (kvplan's
    draft_kv), else noted."""
    k, v = r.seen.get("ctkd"), r.seen.get("ctvd")
    if k is None and v is None:
        return
    k, v = (k or "f16").strip().lower(), (v or "f16").strip().lower()
    if k == v:
        if k != "f16":
            r.set["draft_kv"] = k
        return
    r.note(f"-ctkd {k} -ctvd {v}: the draft's K and V caches in two types; not planned (the "
           "plan keeps both in f16)")


def _llama_finish(r: _Reader) -> None:
    _llama_draft_kv(r)
    if "draft" not in r.set:
        # --spec-draft-n-max without a draft model drafts nothing kvplan plans
        r.set.pop("speculative_tokens", None)
        if r.set.pop("draft_method", None) == "eagle3":
            r.note("--spec-type draft-eagle3 without -md: no EAGLE-3 head is loaded")
    launch, seen = r.launch, r.seen
    hf = seen.get("hf")
    if hf and seen.get("hf_file"):
        tag = gguf_file_model(seen["hf_file"])[1]
        hf = f"{hf.partition(':')[0]}:{tag.upper()}" if tag else hf
    if hf:
        launch.model = hf
    elif "model" in seen:
        launch.model = seen["model"]
    # the vision tower: a projector file, loaded with --mmproj, or with -hf from the same
    # repository unless --no-mmproj; --no-mmproj-offload keeps it in host memory
    loaded = seen.get("mmproj", False) or (bool(hf) and not seen.get("no_mmproj"))
    if seen.get("no_mmproj") and not seen.get("mmproj"):
        loaded = False
    if loaded and seen.get("mmproj_on_host"):
        r.note("--no-mmproj-offload keeps the vision tower in host memory: not counted",
               "no_mmproj")
        loaded = False
    launch.mmproj = loaded
    # llama-server's -np defaults to automatic (-1); the other programs' to one sequence
    slots = seen.get("np", -1 if seen["server"] else 1)
    if slots == 0:
        raise InputError("-np must be at least 1 (or -1 for llama-server's automatic 4 slots)",
                         field="command")
    unified = seen.get("kvu")
    if slots < 0:
        slots = AUTO_SLOTS
        if unified is None:
            unified = True
            r.note(f"no -np: llama-server's {AUTO_SLOTS} slots share one unified KV cache of "
                   f"-c cells, planned as {AUTO_SLOTS} sequences of -c / {AUTO_SLOTS} (one slot "
                   "alone may fill them all)", "sequences")
    r.set["sequences"] = slots
    if unified:
        r.set["kv_unified"] = True
    if "batch" in seen:
        # llama_context takes n_ubatch = min(n_batch, n_ubatch)
        ubatch = min(seen["batch"], r.set.get("ubatch", _llamacpp.N_UBATCH))
        if ubatch != _llamacpp.N_UBATCH:
            r.set["ubatch"] = ubatch
    n_ctx = seen.get("ctx", 0)
    if n_ctx:
        # a sequence's share rounded up, so that the cells padded from it are -c's
        r.set["context"] = -(-n_ctx // slots)
        if n_ctx % slots:
            r.note(f"-c {n_ctx} over {slots} slots: planned as {slots} × "
                   f"{r.set['context']:,} tokens, padded as llama.cpp pads -c", "context")
    else:
        # llama_context takes n_ctx 0 as the trained context in all; --fit (on by default)
        # sets it first to the trained context a stream (common/fit.cpp: n_ctx_train ×
        # n_streams), so that each of several slots without a unified cache gets all of it
        fit = seen.get("fit", True)
        streams = 1 if unified else slots
        launch.trained_share = slots // streams if fit else slots
        flag = "no -c" if "ctx" not in seen else "-c 0"
        if launch.trained_share == 1 and slots > 1:
            r.note(f"{flag}: the trained context for each of the {slots} slots (--fit sets -c "
                   "to that times the slots where their cache is not unified)", "context")
        else:
            r.note(f"{flag}: the trained context over the slots", "context")
        if "ctx" not in seen and fit:
            launch.fit_streams = streams


def gguf_file_model(path: str) -> tuple[str, str | None]:
    """A GGUF file name's model name and llama-quantize type, as the common naming spells
    them (``Qwen3-8B-Q4_K_M.gguf`` → ``Qwen3-8B``, ``q4_k_m``; split parts' suffixes
    dropped)."""
    win = "\\" in path
    stem = (PureWindowsPath(path) if win else PurePath(path)).name
    stem = re.sub(r"\.gguf$", "", stem, flags=re.IGNORECASE)
    stem = _SPLIT.sub("", stem)
    hits = list(_QUANT_TAG.finditer(stem))
    if not hits:
        return stem, None
    last = hits[-1]
    return stem[:last.start(1)].rstrip("-._ "), last.group(1).lower()


# --- vLLM ---------------------------------------------------------------------------------

def _server_kv(engine: str, table: dict[str, str | None]) -> Callable[[_Reader, str, str], None]:
    """--kv-cache-dtype of vLLM or SGLang (TensorRT-LLM's kv_cache_config.dtype): kvplan's format,
    or the model's own dtype (auto)."""
    def read(r: _Reader, flag: str, value: str) -> None:
        name = value.strip().lower()
        if name not in table:
            raise InputError(f"{flag} takes one of {', '.join(table)} (kvplan's {engine} "
                             f"formats), got {shown(value)}", field="command")
        fmt = table[name]
        if fmt is None:
            r.set.pop("kv", None)
        else:
            r.set["kv"] = fmt
    return read


def _vllm_quant(r: _Reader, flag: str, value: str) -> None:
    name = value.strip().lower()
    if name in ("fp8", "mxfp4"):
        r.set["weights"] = name
    elif name in ("bitsandbytes", "bnb"):
        raise InputError(f"{flag} {value}: in-flight bitsandbytes quantization is not priced; "
                         "plan the checkpoint as given or another --weights", field="command")
    else:
        r.note(f"{flag} {value}: the weights as the checkpoint's quantization_config gives "
               "them")


#: --load-format (vLLM's and SGLang's LoadFormat): where the weights are read from, not what
#: they are, but for bitsandbytes, gguf, SGLang's layered (quantized as loaded) and flash_rl,
#: which load other weights than the checkpoint's config describes
_LOAD_FORMAT = _unplanned(
    "weights in another format than the checkpoint's (plan them with --weights)",
    inert=("auto", "pt", "safetensors", "npcache", "dummy", "mistral", "fastsafetensors",
           "runai_streamer", "runai_streamer_sharded", "sharded_state", "tensorizer", "jax",
           "remote", "remote_instance", "rdma", "local_cached", "private"))


def _vllm_max_len(r: _Reader, flag: str, value: str) -> None:
    v = value.strip().lower()
    if v in ("auto", "-1"):
        r.seen["auto_len"] = True
        return
    r.set["context"] = human_int(flag, value)


def _dotted_json(path: str, value: str) -> str:
    """``--flag.a.b value`` as ``--flag``'s JSON object {"a": {"b": value}} (the value read as
    JSON where it is, else as a string)."""
    try:
        leaf: Any = json.loads(value)
    except json.JSONDecodeError:
        leaf = value
    for part in reversed(path.split(".")):
        leaf = {part: leaf}
    return json.dumps(leaf)


def _json_object(flag: str, value: str, example: str = "") -> dict[str, Any]:
    """``value`` read as the JSON object ``flag`` takes, or a one-line error."""
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise InputError(f"{flag} takes a JSON object{example}, got {shown(value)}",
                         field="command")
    return parsed


#: vLLM's cache dtype names as kvplan's formats, for the speculative config's kv_cache_dtype
_VLLM_DRAFT_DTYPES = {"fp8": "fp8_e4m3", "bfloat16": "bf16", "float16": "f16", "half": "f16"}


def _vllm_spec(r: _Reader, flag: str, value: str) -> None:
    config = _json_object(flag, value)
    n = config.get("num_speculative_tokens")
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        r.set["speculative_tokens"] = n
    method = str(config.get("method") or "")
    model = str(config.get("model") or "")
    if "mtp" in method:
        r.set["mtp"] = True
    elif model and method in ("", "draft_model") and "eagle" not in model.lower():
        # a draft model of its own (method draft_model, vLLM's choice where the checkpoint
        # is no EAGLE, DFlash or MTP head)
        r.set["draft"] = model
    elif model and method in ("", "eagle", "eagle3"):
        # an EAGLE head: named, or found by its path as vLLM finds it ("eagle-", "eagle3")
        r.set["draft"] = model
        if method:
            r.set["draft_method"] = method
    dtype = str(config.get("kv_cache_dtype") or "auto").lower()
    if "draft" in r.set and dtype != "auto":
        # the draft's own KV dtype (speculative.py _DRAFT_VLLM_CONFIG_OVERRIDES)
        r.set["draft_kv"] = _VLLM_DRAFT_DTYPES.get(dtype, dtype)
    elif model:
        r.note(f"{flag}: the {method} draft {model}'s weights and cache are not counted "
               "(kvplan plans a draft model of its own and EAGLE heads)")


def _vllm_mm_limits(r: _Reader, flag: str, value: str) -> None:
    """--limit-mm-per-prompt: a JSON object of counts (or {"count": n, ...} options), or the
    older image=0,video=0 form; read at the end (_vllm_towers), several given merged."""
    text = value.strip()
    example = " of counts, such as '{\"image\": 0, \"video\": 0}'"
    limits: dict[str, Any] = {}
    if text.startswith("{"):
        limits = _json_object(flag, value, example)
    else:
        for part in filter(None, text.split(",")):
            key, eq, count = part.partition("=")
            if not eq or not key.strip():
                raise InputError(f"{flag} takes a JSON object{example}, got {shown(value)}",
                                 field="command")
            limits[key.strip()] = count.strip()
    counts = r.seen.setdefault("mm_limits", {})
    for key, item in limits.items():
        n = item.get("count", 999) if isinstance(item, dict) else item
        try:
            counts[key] = int(n)
        except (TypeError, ValueError):
            raise InputError(f"{flag}: {key}'s count must be a whole number, got {shown(n)}",
                             field="command") from None


def _vllm_towers(r: _Reader) -> None:
    """The modalities --limit-mm-per-prompt sets to 0, for resolve to weigh against the model's
    towers (vLLM builds no tower whose modalities are all at 0, _mark_tower_model)."""
    counts = r.seen.get("mm_limits")
    if counts is not None and not r.set.get("language_model_only"):
        r.launch.mm_zero = frozenset(k for k, n in counts.items() if n == 0)


#: vLLM's flags that take a JSON object also take its keys dotted (--limit-mm-per-prompt.image
#: 0 is --limit-mm-per-prompt '{"image": 0}'; FlexibleArgumentParser)
_VLLM_DOTTED = ("--limit-mm-per-prompt", "--speculative-config", "--attention-config", "-ac")


def _vllm_backend(r: _Reader, flag: str, value: str, *, config: bool = False) -> None:
    """--attention-backend, or --attention-config's "backend": one of them only
    (EngineArgs.create_engine_config: "attention_backend and attention_config.backend are
    mutually exclusive", "auto" included)."""
    other = "flag" if config else "config"
    if other in r.seen.setdefault("attention_backend", set()):
        raise InputError("vLLM refuses --attention-backend beside --attention-config's backend "
                         "(\"attention_backend and attention_config.backend are mutually "
                         "exclusive\"): give one", field="command")
    r.seen["attention_backend"].add("config" if config else "flag")
    r.set["attention_backend"] = value.strip()


def _vllm_attention_config(r: _Reader, flag: str, value: str) -> None:
    """--attention-config (-ac), a JSON object or its keys dotted: "backend" as
    --attention-backend; what changes blocks or bytes and is not planned, in a note."""
    config = _json_object(flag, value, " such as '{\"backend\": \"FLASHINFER\"}'")
    if "backend" in config:
        backend = config["backend"]
        if not isinstance(backend, str) and backend is not None:
            raise InputError(f"{flag}: backend takes a backend's name, got {shown(backend)}",
                             field="command")
        _vllm_backend(r, flag, backend or "auto", config=True)
    if config.get("backend_per_kind"):
        r.note(f"{flag}: backend_per_kind: a backend per kind of layer; not planned (the plan "
               "runs one backend for every attention layer)")
    if config.get("flash_attn_version") is not None:
        r.note(f"{flag}: flash_attn_version {config['flash_attn_version']}: kvplan takes "
               "FlashAttention's version by card; not planned (the plan is without it)")
    if str(config.get("indexer_kv_dtype", "auto")).lower() != "auto":
        r.note(f"{flag}: indexer_kv_dtype {config['indexer_kv_dtype']}: the sparse-attention "
               "indexer's keys in another dtype; not planned (the plan keeps them in fp8)")


def _vllm_dtype(r: _Reader, flag: str, value: str) -> None:
    """--dtype: a 16-bit one (or auto) changes no byte kvplan plans; float32 doubles the
    weights, which kvplan does not plan."""
    if value.strip().lower() in ("float32", "float", "fp32"):
        r.note(f"{flag} {value}: weights in 32 bits; not planned (the plan is without it: "
               "16-bit weights)")


def _vllm_extensible_on(r: _Reader, flag: str, value: str) -> None:
    """--enable-extensible-kv-cache: vLLM's default where it can (the plan's), and asked for
    (config/vllm.py _resolve_extensible_kv_cache stops where a flag beside it overrides the
    measured sizing: _vllm_finish)."""
    _on("no_extensible_kv_cache", None)(r, flag, value)
    r.set["enable_extensible_kv_cache"] = True
    r.seen["extensible_asked"] = True


def _vllm_extensible_off(r: _Reader, flag: str, value: str) -> None:
    """--no-enable-extensible-kv-cache: off, over an --enable-... before it (the last wins)."""
    r.set["no_extensible_kv_cache"] = True
    r.set.pop("enable_extensible_kv_cache", None)
    r.seen.pop("extensible_asked", None)


def _vllm_blocks_override(r: _Reader, flag: str, value: str) -> None:
    _unplanned("the pool's block count instead of what memory gives")(r, flag, value)
    r.seen["blocks_override"] = True


_VLLM = (
    _Flag(("--model",), "value", _model),
    _Flag(("--config",), "value", _options_file("vLLM's flags")),
    _Flag(("--max-model-len",), "value", _vllm_max_len),
    _Flag(("--max-num-seqs",), "value", _set("sequences", human_int)),
    _Flag(("--kv-cache-dtype",), "value", _server_kv("vLLM", VLLM_KV)),
    _Flag(("--tensor-parallel-size", "-tp"), "value", _set("tp", lambda f, v: _int(f, v, 1))),
    _Flag(("--pipeline-parallel-size", "-pp"), "value", _set("pp", lambda f, v: _int(f, v, 1))),
    _Flag(("--data-parallel-size", "-dp"), "value", _set("dp", lambda f, v: _int(f, v, 1))),
    _Flag(("--gpu-memory-utilization",), "value", _set("gpu_memory_utilization", _float)),
    _Flag(("--block-size",), "value", _set("block_size", lambda f, v: _int(f, v, 1))),
    _Flag(("--kv-cache-dtype-skip-layers",), "many",
          _set("kv_cache_dtype_skip_layers", _comma_list)),
    _Flag(("--max-num-batched-tokens",), "value", _set("max_num_batched_tokens", human_int)),
    _Flag(("--no-enable-prefix-caching",), "none", _on("no_prefix_caching")),
    _Flag(("--enable-prefix-caching",), "none", _on("no_prefix_caching", None)),
    _Flag(("--enforce-eager",), "none", _on("enforce_eager")),
    _Flag(("--no-enable-extensible-kv-cache",), "none", _vllm_extensible_off),
    _Flag(("--enable-extensible-kv-cache",), "none", _vllm_extensible_on),
    _Flag(("--language-model-only",), "none", _on("language_model_only")),
    _Flag(("--limit-mm-per-prompt",), "value", _vllm_mm_limits),
    _Flag(("--cpu-offload-gb",), "value", _set("cpu_offload_gb", _float)),
    _Flag(("--quantization", "-q"), "value", _vllm_quant),
    _Flag(("--speculative-config",), "value", _vllm_spec),
    _Flag(("--kv-offloading-size",), "value", _seen("kv_offloading", _float)),
    _Flag(("--num-gpu-blocks-override",), "value", _vllm_blocks_override),
    _Flag(("--disable-hybrid-kv-cache-manager",), "none",
          _unplanned("a hybrid model's layers paged without the hybrid manager (a sliding "
                     "window's layers keep the whole context)")),
    _Flag(("--mamba-cache-dtype", "--mamba-ssm-cache-dtype"), "value",
          _unplanned("the recurrent state's dtype, which kvplan plans as vLLM's auto")),
    _Flag(("--eplb-config",), "value",
          _unplanned("with redundant experts, more experts on each card")),
    # AttentionConfig.backend (engines/vllm_backends.py forced), alone or in --attention-config
    _Flag(("--attention-backend",), "value", _vllm_backend),
    _Flag(("--attention-config", "-ac"), "value", _vllm_attention_config),
    _Flag(("--dtype",), "value", _vllm_dtype),
    _Flag(("--load-format",), "value", _LOAD_FORMAT),
    _Flag(("--kv-cache-memory-bytes",), "value",
          _set("kv_budget", lambda f, v: human_int(f, v))),
    _Flag(("--enable-expert-parallel", "-ep"), "none", _seen("ep", lambda f, v: True)),
    _Flag(("--enable-lora",), "none", _on("enable_lora")),
    _Flag(("--max-loras",), "value", _set("max_loras", lambda f, v: _int(f, v, 1))),
    _Flag(("--max-lora-rank",), "value", _set("max_lora_rank", lambda f, v: _int(f, v, 1))),
    _Flag(("--fully-sharded-loras",), "none", _on("fully_sharded_loras")),
    _Flag(("--lora-target-modules",), "many",
          _set("lora_target_modules", _comma_list)),
    _Flag(("--lora-modules",), "many", _seen("lora_modules")),
)

#: the flags that size vLLM's LoRA slots, which it reads only with --enable-lora
_VLLM_LORA = {"max_loras": "--max-loras", "max_lora_rank": "--max-lora-rank",
              "fully_sharded_loras": "--fully-sharded-loras",
              "lora_target_modules": "--lora-target-modules"}


def _lora_flags_unread(r: _Reader, flags: dict[str, str], also: list[str]) -> str:
    """With LoRA off, the LoRA flags a command gave (``flags``: field → flag; ``also``: flags
    read aside), dropped from its fields: named for a note, "" where none was given."""
    unread = [k for k in flags if k in r.set]
    for k in unread:
        r.set.pop(k)
    return ", ".join([flags[k] for k in unread] + also)


def _vllm_finish(r: _Reader) -> None:
    if r.seen.get("extensible_asked") and r.seen.get("blocks_override"):
        # config/vllm.py _resolve_extensible_kv_cache: asked for where a pinned pool
        # overrides its measured sizing, it raises ValueError at start-up (the plan refuses
        # --kv-cache-memory-bytes, its kv_budget, itself: engines/vllm.py); on a platform
        # without it (Intel's XPU) it says that first, so this waits for the cards
        r.launch.refused = InputError(
            "--enable-extensible-kv-cache with --num-gpu-blocks-override: vLLM stops at "
            "start-up (\"enable_extensible_kv_cache: it sizes the KV cache from measured "
            "memory, which num_gpu_blocks_override overrides\"); leave one of them out",
            field="command")
    if "kv_offloading" in r.seen:
        # the CPU tier over all tensor-parallel ranks, kvplan's --offload a rank
        tp = r.set.get("tp", 1)
        r.set["offload"] = f"{r.seen['kv_offloading'] / tp:g}GiB"
    if r.positional:
        r.launch.model = r.positional[0]
        r.launch.model_flag = r.launch.model_flag or r.positional[0]
    if "model" in r.seen:
        r.launch.model = r.seen["model"]
    _vllm_towers(r)
    if not r.set.get("enable_lora"):
        flags = _lora_flags_unread(r, _VLLM_LORA,
                                   ["--lora-modules"] if "lora_modules" in r.seen else [])
        if flags:
            r.note(f"{flags}: LoRA is off without --enable-lora, so vLLM allocates no adapter "
                   "slots; planned without them")
    elif "lora_modules" in r.seen:
        r.note("--lora-modules: the adapters load into the --max-loras slots planned (more "
               "wait in host memory, up to --max-cpu-loras)")
    if r.seen.get("ep"):
        if r.set.get("dp", 1) > 1:
            # without it FusedMoE flattens its TP group across DP, slicing every expert over
            # the tp × dp ranks; with it each of those ranks holds whole experts
            r.note("--enable-expert-parallel: the experts spread over the tp × dp ranks whole "
                   "instead of sliced across them, about the same bytes a rank; planned as "
                   "vLLM's data parallelism without it")
        else:
            r.note("--enable-expert-parallel: the experts spread over the tensor-parallel "
                   "ranks whole instead of sliced, about the same bytes a rank; planned as "
                   "tensor parallel")
        if r.set.get("enable_lora"):
            r.note("--enable-expert-parallel with --enable-lora: the experts' LoRA slots are "
                   "planned as tensor parallel places them (every expert on every rank, its "
                   "intermediate width split); expert parallelism holds a rank's own experts' "
                   "slots whole, fewer bytes where the hidden width exceeds the experts'")
    _server_finish(r, "--max-model-len", "--max-num-seqs", "vLLM")
    if r.seen.get("auto_len"):
        r.note("--max-model-len auto: vLLM takes the longest context that fits, the plan's "
               "max context; planned here at the model's own", "context")


def _server_finish(r: _Reader, ctx_flag: str, seqs_flag: str, engine: str) -> None:
    if r.set.get("sequences", 1) > 1 and not r.seen.get("adp"):
        r.note(f"{seqs_flag} {r.set['sequences']}: planned as that many full-length sequences "
               f"at once; {engine} starts where one fits and runs as many as its pool holds",
               "sequences")
    if "context" not in r.set:
        r.launch.trained_share = 1
        own = (f"the length {engine} derives from the config" if engine in ("vLLM", "SGLang")
               else "the model's own maximum (max_position_embeddings)")
        r.note(f"no {ctx_flag}: {own}", "context")
    if "sequences" not in r.set:
        r.set["sequences"] = 1
        check = (", the request vLLM checks at start-up" if engine == "vLLM" else "")
        r.note(f"no {seqs_flag}: planned for one full-length sequence{check}; the plan gives "
               "how many fit", "sequences")


# --- SGLang -------------------------------------------------------------------------------

def _sglang_spec(r: _Reader, flag: str, value: str) -> None:
    r.seen["spec_algo"] = value.strip().upper()


def _sglang_a2a(flag: str, value: str) -> str:
    """--moe-a2a-backend: none or deepep, which kvplan sizes (another is refused)."""
    word = value.strip().lower()
    if word not in ("none", "deepep"):
        raise InputError(f"{flag} {value}: kvplan sizes none and deepep (the memory SGLang's "
                         "fraction sets aside for DeepEP); what it sets aside is not sized",
                         field="command")
    return word


def _sglang_prefill_dtype(flag: str, value: str) -> str | None:
    """--prefill-kv-cache-dequant-dtype: auto (None), fp8_e4m3 or nvfp4."""
    word = value.strip().lower()
    if word not in ("auto", "fp8_e4m3", "nvfp4"):
        raise InputError(f"{flag} takes auto, fp8_e4m3 or nvfp4, got {shown(value)}",
                         field="command")
    return None if word == "auto" else word


def _sglang_graph_list(r: _Reader, flag: str, value: str) -> None:
    """--cuda-graph-bs-decode 1 2 4 …: the largest is the graph's max_bs."""
    sizes = [_int(flag, v, 1) for v in value.replace(",", " ").split()]
    r.set["cuda_graph_max_bs_decode"] = max(sizes)


def _sglang_old_max_bs(r: _Reader, flag: str, value: str) -> None:
    r.set["cuda_graph_max_bs_decode"] = _int(flag, value, 1)
    r.note(f"{flag} {value}: read as --cuda-graph-max-bs-decode, its name since SGLang 0.5.23 "
           "(which takes the old one no more)")


def _sglang_no_graphs(r: _Reader, flag: str, value: str) -> None:
    r.set["disable_decode_cuda_graph"] = r.set["disable_prefill_cuda_graph"] = True


def _sglang_graph_backend(phase: str) -> Callable[[_Reader, str, str], None]:
    """--cuda-graph-backend-decode/-prefill: full or breakable keep the phase's graph (the
    memory kvplan sets aside is the same), disabled drops it."""
    def read(r: _Reader, flag: str, value: str) -> None:
        word = value.strip().lower()
        if word not in ("full", "breakable", "disabled"):
            raise InputError(f"{flag} takes full, breakable or disabled, got {shown(value)}",
                             field="command")
        r.set[f"disable_{phase}_cuda_graph"] = word == "disabled"
    return read


_SGLANG = (
    _Flag(("--model-path", "--model"), "value", _model),
    _Flag(("--config",), "value", _options_file("SGLang's flags")),
    _Flag(("--context-length",), "value", _set("context", lambda f, v: sglang_int(f, v))),
    _Flag(("--max-running-requests",), "value", _set("sequences", lambda f, v: _int(f, v, 1))),
    _Flag(("--kv-cache-dtype",), "value", _server_kv("SGLang", SGLANG_KV)),
    _Flag(("--tp-size", "--tp", "--tensor-parallel-size"), "value",
          _set("tp", lambda f, v: _int(f, v, 1))),
    _Flag(("--pp-size", "--pp", "--pipeline-parallel-size"), "value",
          _set("pp", lambda f, v: _int(f, v, 1))),
    _Flag(("--dp-size", "--dp", "--data-parallel-size"), "value",
          _set("dp", lambda f, v: _int(f, v, 1))),
    _Flag(("--mem-fraction-static",), "value", _set("mem_fraction_static", _float)),
    _Flag(("--chunked-prefill-size",), "value",
          _set("chunked_prefill_size", lambda f, v: _int(f, v, 1))),
    _Flag(("--page-size",), "value", _set("page_size", lambda f, v: _int(f, v, 1))),
    _Flag(("--max-total-tokens",), "value", _set("max_total_tokens", lambda f, v: _int(f, v, 1))),
    _Flag(("--cpu-offload-gb",), "value", _set("cpu_offload_gb", _float)),
    _Flag(("--quantization",), "value", _vllm_quant),
    _Flag(("--load-format",), "value", _LOAD_FORMAT),
    _Flag(("--speculative-algorithm",), "value", _sglang_spec),
    _Flag(("--speculative-num-draft-tokens",), "value",
          _set("speculative_tokens", lambda f, v: _int(f, v, 1))),
    _Flag(("--speculative-draft-model-path",), "value", _seen("draft")),
    _Flag(("--speculative-draft-kv-cache-dtype",), "value", _seen("draft_kv")),
    _Flag(("--attn-dp-size",), "value", _set("attn_dp", lambda f, v: _int(f, v, 1))),
    # the deprecated spelling: --dp-size N with it is --attn-dp-size N (parallel_hook.py
    # handle_deprecated_dp_attention)
    _Flag(("--enable-dp-attention",), "none", _seen("dp_attention", lambda f, v: True)),
    _Flag(("--enable-dp-lm-head",), "none", _on("enable_dp_lm_head")),
    _Flag(("--moe-a2a-backend",), "value", _set("moe_a2a_backend", _sglang_a2a)),
    _Flag(("--prefill-kv-cache-dequant-dtype",), "value",
          _set("prefill_kv_cache_dequant_dtype", _sglang_prefill_dtype)),
    _Flag(("--cuda-graph-max-bs-decode",), "value",
          _set("cuda_graph_max_bs_decode", lambda f, v: _int(f, v, 1))),
    _Flag(("--cuda-graph-max-bs-prefill",), "value",
          _set("cuda_graph_max_bs_prefill", lambda f, v: _int(f, v, 1))),
    _Flag(("--disable-decode-cuda-graph",), "none", _on("disable_decode_cuda_graph")),
    _Flag(("--disable-prefill-cuda-graph",), "none", _on("disable_prefill_cuda_graph")),
    # the older spelling of both (deprecated in 0.5.23)
    _Flag(("--disable-cuda-graph",), "none", _sglang_no_graphs),
    _Flag(("--cuda-graph-backend-decode",), "value", _sglang_graph_backend("decode")),
    _Flag(("--cuda-graph-backend-prefill",), "value", _sglang_graph_backend("prefill")),
    _Flag(("--cuda-graph-max-bs",), "value", _sglang_old_max_bs),
    _Flag(("--cuda-graph-bs-decode",), "many", _sglang_graph_list),
    _Flag(("--enable-hierarchical-cache",), "none", _seen("hicache", lambda f, v: True)),
    _Flag(("--hicache-size",), "value", _seen("hicache_size", _float)),
    # the pools' memory settings: read where kvplan plans them, else (_unplanned) said in a
    # note, not dropped
    _Flag(("--swa-full-tokens-ratio",), "value", _set("swa_full_tokens_ratio", _float)),
    _Flag(("--disable-hybrid-swa-memory",), "none",
          _unplanned("one pool for every layer instead of a smaller sliding-window pool")),
    _Flag(("--disable-radix-cache",), "none", _on("disable_radix_cache")),
    _Flag(("--mamba-full-memory-ratio",), "value", _set("mamba_full_memory_ratio", _float)),
    _Flag(("--max-mamba-cache-size",), "value",
          _set("max_mamba_cache_size", lambda f, v: _int(f, v, 1))),
    _Flag(("--attention-backend",), "value",
          _set("attention_backend", lambda f, v: v.strip().lower())),
    # one phase's backend (arg_groups: prefill_attention_backend, decode_attention_backend)
    _Flag(("--prefill-attention-backend", "--decode-attention-backend"), "value",
          _unplanned("kvplan plans one backend for both phases (--attention-backend, or "
                     "the one SGLang picks) and its page size")),
    _Flag(("--moe-dense-tp-size",), "value",
          _unplanned("the dense MLP layers split over fewer cards than tensor parallelism")),
    _Flag(("--ep-num-redundant-experts",), "value",
          _unplanned("redundant copies of experts on each card")),
    _Flag(("--speculative-num-steps", "--speculative-eagle-topk"), "value",
          _unplanned("kvplan plans the draft tokens --speculative-num-draft-tokens gives")),
    _Flag(("--enable-lora",), "none", _on("enable_lora")),
    _Flag(("--max-lora-rank",), "value", _set("max_lora_rank", lambda f, v: _int(f, v, 1))),
    _Flag(("--max-loras-per-batch",), "value", _set("max_loras", lambda f, v: _int(f, v, 1))),
    _Flag(("--lora-target-modules",), "many",
          _set("lora_target_modules", _comma_list)),
    _Flag(("--lora-paths",), "many", _seen("lora_paths")),
)


def _sglang_finish(r: _Reader) -> None:
    if "model" in r.seen:
        r.launch.model = r.seen["model"]
    if r.seen.get("hicache"):
        size = r.seen.get("hicache_size")
        if size:
            r.set["offload"] = f"{size:g}GiB"
        else:
            r.note("--enable-hierarchical-cache without --hicache-size: SGLang sizes its host "
                   "tier from --hicache-ratio (2 × the card's pool), which kvplan does not "
                   "plan; give --hicache-size (kvplan's --offload)")
    elif r.seen.get("hicache_size"):
        r.note("--hicache-size without --enable-hierarchical-cache: SGLang keeps no host tier")
    if r.seen.get("dp_attention") and r.set.get("attn_dp", 1) == 1 and r.set.get("dp", 1) > 1:
        r.set["attn_dp"] = r.set.pop("dp")
        r.note(f"--dp-size {r.set['attn_dp']} --enable-dp-attention: SGLang reads it as "
               f"--attn-dp-size {r.set['attn_dp']} (attention groups within the TP cards, no "
               "replicas)")
    algo = r.seen.get("spec_algo")
    if algo:
        if r.seen.get("draft") and algo in ("STANDALONE", "EAGLE3"):
            r.set["draft"] = r.seen["draft"]
            r.set["draft_method"] = "draft_model" if algo == "STANDALONE" else "eagle3"
        elif r.seen.get("draft") and algo == "EAGLE" and r.seen["draft"] != r.seen.get("model"):
            # an EAGLE-1 head (LlamaForCausalLMEagle); a model's own path is its MTP head
            r.set["draft"] = r.seen["draft"]
            r.set["draft_method"] = "eagle"
        elif r.seen.get("draft"):
            r.note(f"--speculative-draft-model-path {r.seen['draft']}: the {algo} draft "
                   "head's weights and cache are not counted (kvplan plans a draft model of "
                   "its own, STANDALONE, and EAGLE heads)")
        else:
            # EAGLE or NEXTN without a draft model drafts with the model's own MTP head
            r.set["mtp"] = True
        dkv = str(r.seen.get("draft_kv") or "auto").lower()
        if dkv != "auto" and "draft" in r.set:
            # the draft's pool dtype (its choices: fp8_e5m2, fp8_e4m3, bf16, bfloat16)
            r.set["draft_kv"] = "bf16" if dkv == "bfloat16" else dkv
        elif dkv != "auto":
            r.note(f"--speculative-draft-kv-cache-dtype {dkv}: the draft worker's pool of the "
                   "model's own MTP head in another dtype; not planned (the plan keeps it in "
                   "the target's)")
    elif "speculative_tokens" in r.set:
        r.set.pop("speculative_tokens")
    if "lora_paths" in r.seen:
        # adapters to load turn LoRA on (server_args: enable_lora follows lora_paths)
        r.set["enable_lora"] = True
        r.note("--lora-paths: SGLang takes the pool's rank and modules from these adapters "
               "where --max-lora-rank and --lora-target-modules do not give them; kvplan "
               "reads neither adapter, so it plans with the flags given")
    if not r.set.get("enable_lora"):
        flags = _lora_flags_unread(r, _SGLANG_LORA, [])
        if flags:
            r.note(f"{flags}: LoRA is off without --enable-lora or --lora-paths, so SGLang "
                   "allocates no LoRA pool; planned without one")
    _server_finish(r, "--context-length", "--max-running-requests", "SGLang")


#: the flags that size SGLang's LoRA pool, by the field each sets
_SGLANG_LORA = {"max_lora_rank": "--max-lora-rank", "max_loras": "--max-loras-per-batch",
                "lora_target_modules": "--lora-target-modules"}


# --- trtllm-serve -------------------------------------------------------------------------

# trtllm-serve's click options (commands/serve.py), each under its long name and its alias
_TRTLLM = (
    _Flag(("--max-seq-len",), "value", _set("context", lambda f, v: _int(f, v, 1))),
    _Flag(("--max-batch-size",), "value", _set("sequences", lambda f, v: _int(f, v, 1))),
    _Flag(("--tensor-parallel-size", "--tp-size"), "value",
          _set("tp", lambda f, v: _int(f, v, 1))),
    _Flag(("--pipeline-parallel-size", "--pp-size"), "value",
          _set("pp", lambda f, v: _int(f, v, 1))),
    _Flag(("--free-gpu-memory-fraction", "--kv-cache-free-gpu-memory-fraction"), "value",
          _set("free_gpu_memory_fraction", _float)),
    _Flag(("--max-num-tokens",), "value", _set("max_num_tokens", lambda f, v: _int(f, v, 1))),
    _Flag(("--config", "--extra-llm-api-options"), "value",
          _options_file("kv_cache_config's dtype, tokens_per_block and "
                        "free_gpu_memory_fraction, enable_attention_dp, max_batch_size")),
    # kvplan plans the PyTorch backend, trtllm-serve's default
    _Flag(("--backend",), "value",
          _unplanned("kvplan plans the PyTorch backend's KV cache manager and activations",
                     ("pytorch",))),
    _Flag(("--max-beam-width",), "value",
          _unplanned("each request's beams keep their own cache blocks", ("1",))),
    _Flag(("--context-parallel-size", "--cp-size"), "value",
          _unplanned("a sequence's cache split over context-parallel ranks", ("1",))),
    _Flag(("--moe-expert-parallel-size", "--ep-size"), "value",
          _unplanned("the experts placed by expert parallelism (kvplan splits them over the "
                     "tensor-parallel ranks)", ("1",))),
    _Flag(("--moe-cluster-parallel-size", "--cluster-size"), "value",
          _unplanned("the experts placed by cluster parallelism", ("1",))),
)


def _options_args(engine: str, data: dict[str, Any]) -> list[str]:
    """A vLLM or SGLang options file's keys as the flags they stand for."""
    out: list[str] = []
    for key, value in data.items():
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False:
            # vLLM's switches have their --no- forms; an SGLang switch off is its default
            if engine == "vllm":
                out.append("--no-" + flag[2:])
        elif value is None:
            continue
        elif isinstance(value, list):
            out += [flag, *(json.dumps(v) if isinstance(v, dict) else str(v) for v in value)]
        elif isinstance(value, dict):
            out += [flag, json.dumps(value)]
        else:
            out += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return out


#: TensorRT-LLM LLM API options that change no memory kvplan plans
_TRTLLM_OPTIONS_INERT = frozenset({
    "cuda_graph_config", "print_iter_log", "stream_interval", "enable_iter_perf_stats",
    "enable_chunked_prefill", "disable_overlap_scheduler", "scheduler_config", "backend",
    "attn_backend", "trust_remote_code", "enable_layerwise_nvtx_marker", "return_perf_metrics",
    "num_postprocess_workers", "enable_autotuner", "batch_wait_timeout_ms", "sampler_type",
    "allreduce_strategy", "guided_decoding_backend", "moe_config", "tokenizer", "revision",
    "skip_tokenizer_init", "otlp_traces_endpoint", "enable_iter_req_stats", "gpus_per_node",
})
_TRTLLM_KV_INERT = frozenset({"enable_block_reuse", "enable_partial_reuse",
                              "copy_on_partial_reuse", "event_buffer_max_size",
                              "secondary_offload_min_priority", "onboard_blocks"})
#: kv_cache_config.dtype: kvplan's format (None: the model's own, auto)
_TRTLLM_KV = {"auto": None, "fp8": "fp8_e4m3", "nvfp4": "nvfp4"}


def _option_int(flag: str, name: str, value: Any, low: int = 1) -> int:
    """An options file's whole-number value, at least ``low``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"{flag}: {name} must be a whole number of at least {low}, got "
                         f"{shown(value)}", field="command")
    return value


#: TensorRT-LLM's LLM API options kvplan reads as its fields
_TRTLLM_OPTION_FIELDS = {"max_batch_size": "sequences", "max_seq_len": "context",
                         "max_num_tokens": "max_num_tokens", "tensor_parallel_size": "tp",
                         "pipeline_parallel_size": "pp"}
#: options that place the model otherwise than kvplan plans it, with what they do
_TRTLLM_OPTION_UNPLANNED = {
    "moe_expert_parallel_size": "the experts placed by expert parallelism (kvplan splits them "
                                "over the tensor-parallel ranks)",
    "context_parallel_size": "a sequence's cache split over context-parallel ranks",
}


def _trtllm_options(r: _Reader, data: dict[str, Any]) -> None:
    """TensorRT-LLM's LLM API options file, over the command's flags (trtllm-serve's
    update_llm_args_with_extra_dict lets it win)."""
    flag = r.seen["options_flag"]
    for key, value in data.items():
        if key in _TRTLLM_OPTION_FIELDS:
            r.set[_TRTLLM_OPTION_FIELDS[key]] = _option_int(flag, key, value)
        elif key == "enable_attention_dp":
            if not isinstance(value, bool):
                raise InputError(f"{flag}: enable_attention_dp must be true or false, got "
                                 f"{shown(value)}", field="command")
            r.seen["adp"] = value
        elif key == "kv_cache_config" and isinstance(value, dict):
            _trtllm_kv_options(r, flag, value)
        elif key in _TRTLLM_OPTION_UNPLANNED and value in (1, None):
            r.launch.unread.append(f"{key}: {value}")
        elif key in _TRTLLM_OPTION_UNPLANNED:
            r.note(f"{flag}: {key} {_brief(value)}: {_TRTLLM_OPTION_UNPLANNED[key]}; not "
                   "planned (the plan is without it)")
        elif key == "speculative_config":
            r.note(f"{flag}: speculative_config: draft layers and draft tokens in the KV cache "
                   "manager, which kvplan does not size for TensorRT-LLM; not planned (the "
                   "plan is without it)")
        elif key in _TRTLLM_OPTIONS_INERT:
            r.launch.unread.append(f"{key}: {_brief(value)}")
        else:
            r.launch.unknown.append(f"{key}: {_brief(value)}")


def _trtllm_kv_options(r: _Reader, flag: str, kv: dict[str, Any]) -> None:
    for key, value in kv.items():
        name = f"kv_cache_config.{key}"
        if key == "dtype":
            _server_kv("TensorRT-LLM", _TRTLLM_KV)(r, f"{flag}: {name}", str(value))
        elif key == "free_gpu_memory_fraction":
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not 0 < value <= 1:
                raise InputError(f"{flag}: {name} must be a number in (0, 1], got "
                                 f"{shown(value)}", field="command")
            r.set["free_gpu_memory_fraction"] = float(value)
        elif key == "tokens_per_block":
            r.set["tokens_per_block"] = _option_int(flag, name, value)
        elif key == "host_cache_size":
            if _option_int(flag, name, value, low=0):
                r.set["offload"] = str(value)
        elif key == "max_tokens" and value is not None:
            r.set["max_total_tokens"] = _option_int(flag, name, value)
        elif key == "max_attention_window" and value is not None:
            r.note(f"{flag}: {name} {_brief(value)}: windowed pools for the layers it names; "
                   "not planned (the plan is without it: every layer holds max_seq_len)")
        elif key in _TRTLLM_KV_INERT or value is None:
            r.launch.unread.append(f"{name}: {_brief(value)}")
        else:
            r.launch.unknown.append(f"{name}: {_brief(value)}")


def _brief(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, dict | list) else str(value).lower() \
        if isinstance(value, bool) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _trtllm_finish(r: _Reader) -> None:
    if r.positional:
        r.launch.model = r.positional[0]
        r.launch.model_flag = r.positional[0]
    if r.options is not None:
        _trtllm_options(r, parse_yaml(r.options, f"the {r.seen['options_flag'].split()[0]} "
                                                 "file"))
    if r.seen.get("adp"):
        # enable_attention_dp: every tensor-parallel rank an attention group of its own, its
        # max_batch_size a rank's
        tp = r.set.get("tp", 1)
        if tp > 1:
            r.set["attn_dp"] = tp
            if "sequences" in r.set:
                r.set["sequences"] *= tp
                r.note(f"enable_attention_dp: --max_batch_size is a rank's: planned as "
                       f"{r.set['sequences']:,} full-length sequences at once over the {tp} "
                       "ranks; TensorRT-LLM starts where one fits on a rank", "sequences")
    _server_finish(r, "--max_seq_len", "--max_batch_size", "TensorRT-LLM")


#: flags known to change no memory kvplan plans, by engine: listed as not read, where a flag
#: kvplan does not know is said as unknown. llama-server's from common/arg.cpp; vLLM's from FrontendArgs (entrypoints/openai/
#: cli_args.py) and EngineArgs' model, parallel and observability fields; SGLang's from the
#: server-args field groups (arg_groups/fields: serving, observability, device, model,
#: parallel, schedule); trtllm-serve's from its click options (commands/serve.py)
_LLAMA_INERT = _inert(
    none="--jinja --no-jinja -v|--verbose|--log-verbose --log-disable --log-prefix "
         "--no-log-prefix --log-timestamps --no-log-timestamps --metrics --props --slots "
         "--no-slots -cb|--cont-batching -nocb|--no-cont-batching --warmup --no-warmup "
         "--context-shift --no-context-shift --perf --no-perf -e|--escape --no-escape "
         "-sp|--special --ignore-eos --offline --check-tensors --cache-prompt "
         "--no-cache-prompt --webui --no-webui --ui --no-ui --reuse-port --mlock --mmap "
         "--no-mmap",
    value="--host --port --path --api-prefix --api-key --api-key-file --ssl-key-file "
          "--ssl-cert-file -to|--timeout --threads-http --sleep-idle-seconds -a|--alias "
          "--chat-template --chat-template-file --chat-template-kwargs --reasoning-format "
          "--reasoning-budget -t|--threads -tb|--threads-batch -C|--cpu-mask "
          "-Cr|--cpu-range --cpu-strict --prio --poll --numa -n|--predict|--n-predict --keep "
          "-s|--seed --samplers --temp|--temperature --top-k --top-p --min-p "
          "--typical|--typical-p --top-nsigma|--top-n-sigma --repeat-last-n --repeat-penalty "
          "--presence-penalty --frequency-penalty --dry-multiplier --dry-base "
          "--dry-allowed-length --dry-penalty-last-n --dry-sequence-breaker --mirostat "
          "--mirostat-lr --mirostat-ent --xtc-probability --xtc-threshold --dynatemp-range "
          "--dynatemp-exp -l|--logit-bias --grammar --grammar-file -j|--json-schema "
          "-jf|--json-schema-file -r|--reverse-prompt --cache-reuse --slot-save-path "
          "-sps|--slot-prompt-similarity --media-path --log-file -lv|--verbosity|--log-verbosity "
          "-hft|--hf-token -dt|--defrag-thold",
    maybe="--log-colors",
)
_VLLM_INERT = _inert(
    engine_bools=True,
    none="--trust-remote-code --disable-log-stats --enable-log-requests --disable-log-requests "
         "--enable-log-outputs --enable-auto-tool-choice --exclude-tools-when-tool-choice-none "
         "--disable-uvicorn-access-log --allow-credentials --enable-request-id-headers "
         "--disable-fastapi-docs --enable-offline-docs --enable-prompt-tokens-details "
         "--enable-per-request-metrics --enable-server-load-tracking "
         "--enable-force-include-usage --enable-tokenizer-info-endpoint "
         "--return-tokens-as-token-ids --trust-request-chat-template --enable-ssl-refresh "
         "--disable-frontend-multiprocessing --headless",
    value="--host --port --uds --uvicorn-log-level --disable-access-log-for-endpoints "
          "--chat-template --chat-template-content-format --default-chat-template-kwargs "
          "--response-role --ssl-keyfile --ssl-certfile --ssl-ca-certs --ssl-cert-reqs "
          "--ssl-ciphers --root-path --tool-call-parser --tool-parser-plugin --tool-server "
          "--reasoning-parser --reasoning-parser-plugin --log-config-file --max-log-len "
          "--tokenizer --tokenizer-mode --tokenizer-revision --revision --code-revision "
          "--config-format --download-dir --seed --generation-config --override-generation-config "
          "--api-server-count|-asc --data-parallel-address|-dpa --data-parallel-rpc-port|-dpp "
          "--data-parallel-start-rank|-dpr --data-parallel-size-local|-dpl "
          "--distributed-executor-backend --max-logprobs --logprobs-mode "
          "--fingerprint-mode --fingerprint-value",
    maybe="--hf-token",
    many="--api-key --served-model-name --allowed-origins --allowed-methods --allowed-headers "
         "--middleware",
)
_SGLANG_INERT = _inert(
    none="--trust-remote-code --skip-tokenizer-init --skip-server-warmup --enable-cache-report "
         "--allow-auto-truncate --stream-response-default-include-usage "
         "--enable-tokenizer-batch-encode --log-requests --show-time-cost --enable-metrics "
         "--enable-request-time-stats-logging --enable-trace --sleep-on-idle "
         "--enable-priority-scheduling --enable-custom-logit-processor --enable-p2p-check",
    value="--host --port --fastapi-root-path --api-key --admin-api-key --served-model-name "
          "--weight-version --chat-template --hf-chat-template-name --completion-template "
          "--default-chat-template-kwargs --tool-call-parser --reasoning-parser --tool-server "
          "--sampling-defaults --preferred-sampling-params --file-storage-path "
          "--stream-interval --ssl-keyfile --ssl-certfile --ssl-ca-certs --tokenizer-path "
          "--tokenizer-mode --tokenizer-worker-num --detokenizer-worker-num --log-level "
          "--log-level-http --log-requests-level --crash-dump-folder --decode-log-interval "
          "--otlp-traces-endpoint --random-seed --watchdog-timeout --base-gpu-id "
          "--gpu-id-step --revision --download-dir --nccl-port --dist-timeout "
          "--dist-init-addr --nnodes --node-rank --schedule-policy "
          "--schedule-conservativeness --max-queued-requests --grammar-backend",
)
_TRTLLM_INERT = _inert(
    none="--trust-remote-code --fail-fast-on-attention-window-too-large "
         "--enable-chunked-prefill",
    value="--host --port --log-level --tokenizer --custom-tokenizer --revision "
          "--num-postprocess-workers --reasoning-parser --tool-parser --chat-template "
          "--metadata-server-config-file --server-role --otlp-traces-endpoint "
          "--disagg-cluster-uri --media-io-kwargs --custom-module-dirs --gpus-per-node",
)

_TABLES = {"llama.cpp": (_LLAMA_INERT + _LLAMA, _llama_finish),
           "vllm": (_VLLM_INERT + _VLLM, _vllm_finish),
           "sglang": (_SGLANG_INERT + _SGLANG, _sglang_finish),
           "trtllm": (_TRTLLM_INERT + _TRTLLM, _trtllm_finish)}


#: the LLAMA_ARG_* environment variables llama.cpp reads for the flags kvplan reads
LLAMA_ENV = {"CTX_SIZE": "-c", "N_PARALLEL": "-np", "N_GPU_LAYERS": "-ngl",
             "CACHE_TYPE_K": "-ctk", "CACHE_TYPE_V": "-ctv", "FLASH_ATTN": "-fa",
             "UBATCH": "-ub", "BATCH": "-b", "MODEL": "-m", "HF_REPO": "-hf",
             "HF_FILE": "-hff", "MODEL_URL": "-mu", "N_CPU_MOE": "--n-cpu-moe",
             "CPU_MOE": "--cpu-moe", "SWA_FULL": "--swa-full", "KV_UNIFIED": "-kvu",
             "MMPROJ": "--mmproj", "TENSOR_SPLIT": "-ts", "SPLIT_MODE": "-sm",
             "DEVICE": "-dev", "CACHE_RAM": "--cache-ram",
             "CTX_CHECKPOINTS": "--ctx-checkpoints", "FIT": "--fit",
             "FIT_TARGET": "--fit-target", "FIT_CTX": "--fit-ctx"}
#: the switches among them, which an environment value turns on or off
_SWITCHES = {"--cpu-moe", "--swa-full", "-kvu"}


def _llama_env(words: list[str]) -> list[str]:
    """The flags of the LLAMA_ARG_* assignments among ``words`` (the shell's NAME=VALUE
    before a program, docker's -e NAME=VALUE)."""
    out: list[str] = []
    for word in words:
        name, eq, value = word.partition("=")
        if not eq or not name.startswith("LLAMA_ARG_"):
            continue
        flag = LLAMA_ENV.get(name.removeprefix("LLAMA_ARG_"))
        if flag is None:
            continue
        if flag in _SWITCHES:
            if value.strip().lower() in ("1", "true", "on", "enabled"):
                out.append(flag)
        else:
            out += [flag, value]
    return out


def _engine(tokens: list[str]) -> tuple[str, list[str]]:
    """The engine a command starts and the arguments after its program."""
    for i, tok in enumerate(tokens):
        base = PurePath(tok.replace("\\", "/")).name.lower().removesuffix(".exe")
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if base in LLAMA_PROGRAMS or re.match(r"(?:[\w.-]+/)*llama\.cpp:"
                                                             r"(?:server|full)", tok):
            rest = tokens[i + 1:]
            # llama-server's slots default to automatic; every other program runs one sequence
            server = base == "llama-server" or "--server" in rest or ":server" in tok
            # LLAMA_ARG_* settings given before the program (NAME=VALUE, docker's -e NAME=VALUE)
            # read first, so that the flags after it win, as llama.cpp lets them
            return ("llama.cpp" if server else "llama.cpp-cli"), _llama_env(tokens[:i]) + [
                t for t in rest if t not in ("--server", "--run")]
        if base == "vllm" and nxt == "serve":
            return "vllm", tokens[i + 2:]
        if tok in ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server") or (
                re.match(r"(?:[\w.-]+/)*vllm/vllm-openai(?::|$)", tok)):
            return "vllm", tokens[i + 1:]
        if tok == "sglang.launch_server" or (base == "sglang" and nxt == "serve"):
            return "sglang", tokens[i + (2 if nxt == "serve" else 1):]
        if base == "trtllm-serve":
            return "trtllm", tokens[i + (2 if nxt == "serve" else 1):]
    raise InputError("expected a launch command of llama-server, vllm serve, python -m "
                     "sglang.launch_server, trtllm-serve or ollama serve/run, got "
                     f"{shown(' '.join(tokens)[:120])}", field="command")


# --- Ollama -------------------------------------------------------------------------------

#: the OLLAMA_* variables that change what its llama-server holds, as kvplan's fields
_OLLAMA_ENV = {"OLLAMA_CONTEXT_LENGTH": "context", "OLLAMA_NUM_PARALLEL": "sequences",
               "OLLAMA_KV_CACHE_TYPE": "kv", "OLLAMA_FLASH_ATTENTION": "no_flash_attn",
               "OLLAMA_SCHED_SPREAD": "sched_spread"}
#: the LLAMA_ARG_* variables its llama-server inherits that kvplan plans (the flags Ollama
#: passes itself, -c, -np, the cache types, -fa, -b, -ub and -ngl, win over theirs)
_OLLAMA_LLAMA_ENV = ("FIT_TARGET", "N_CPU_MOE", "CPU_MOE", "CACHE_RAM", "CTX_CHECKPOINTS",
                     "SWA_FULL", "KV_UNIFIED", "TENSOR_SPLIT")
#: llama-server's flags by each of their names (the LLAMA_ARG_* readers of Ollama's path)
_LLAMA_FLAGS = {n: f for f in _LLAMA for n in f.names}
#: ollama run's flags that take a value (the others are switches); none changes memory
_OLLAMA_RUN_VALUES = ("--keepalive", "--format", "--dimensions", "--think")


def _ollama_program(tokens: list[str]) -> int | None:
    """Where an Ollama program is among ``tokens``: the ``ollama/ollama`` image, or ``ollama``
    before serve or run (docker's ``--name ollama`` and ``docker exec -it ollama ollama run``
    name a container so), else the first word named ollama; None where there is none."""
    named = [i for i, tok in enumerate(tokens)
             if PurePath(tok.replace("\\", "/")).name.lower().removesuffix(".exe") == "ollama"]
    for i, tok in enumerate(tokens):
        if re.fullmatch(r"(?:[\w.-]+/)*ollama/ollama(?::[\w.-]+)?", tok) or (
                i in named and tokens[i + 1:i + 2] in (["serve"], ["run"])):
            return i
    return named[0] if named else None


def _ollama_bool(name: str, value: str) -> bool:
    """An OLLAMA_* switch as Go's strconv.ParseBool reads it."""
    v = value.strip()
    if v in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if v in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise InputError(f"{name} takes true or false (1 or 0), got {shown(value)}",
                     field="command")


def _read_ollama(tokens: list[str], at: int) -> Launch:
    """``[NAME=VALUE …] ollama serve`` or ``ollama run MODEL``: Ollama's settings from its
    environment (engines/ollama.py), the model from ollama run's name where kvplan can read
    it (a Hugging Face repository, hf.co/OWNER/REPO:QUANT, or a catalog id)."""
    r = _Reader("ollama")
    launch = r.launch
    for word in tokens[:at]:
        name, eq, value = word.partition("=")
        if not eq:
            continue
        if name in _OLLAMA_ENV:
            field_name = _OLLAMA_ENV[name]
            if field_name == "kv":
                # -ctk's reader (left empty: f16, Ollama's default)
                _llama_kv("kv")(r, name, value if value.strip() else "f16")
            elif field_name == "no_flash_attn":
                if value.strip() and not _ollama_bool(name, value):
                    r.set["no_flash_attn"] = True
            elif field_name == "sched_spread":
                if value.strip() and _ollama_bool(name, value):
                    r.set["sched_spread"] = True
            else:
                n = _int(name, value, low=0)
                if n:
                    r.set[field_name] = n
        elif name.startswith("LLAMA_ARG_") and name[10:] in _OLLAMA_LLAMA_ENV:
            # read by the flag's own llama-server reader, named by the variable
            flag = LLAMA_ENV[name[10:]]
            if flag in _SWITCHES:
                if not _switch(name, value):
                    continue
                value = ""
            _LLAMA_FLAGS[flag].read(r, name, value)
        elif name == "OLLAMA_GPU_OVERHEAD":
            # bytes set aside on each card: Ollama's default num_ctx counts the cards less it
            launch.gpu_overhead = _int(name, value, low=0)
        elif name.startswith(("OLLAMA_", "LLAMA_ARG_")):
            launch.unread.append(word)
    if r.seen.get("kvu"):
        r.set["kv_unified"] = True
    if "context" not in r.set:
        launch.auto_ctx = True
        r.note("OLLAMA_CONTEXT_LENGTH not set: Ollama takes num_ctx by the cards' memory "
               "(4,096 below 23 GiB, 32,768 below 47 GiB, else 262,144)", "context")
    words = tokens[at + 1:]
    image = "/" in tokens[at]
    verb = words[0] if words else ("serve" if image else "")
    if verb not in ("serve", "run"):
        raise InputError("expected ollama serve or ollama run MODEL (with its OLLAMA_* "
                         f"settings before it), got {shown(' '.join(tokens[at:at + 2]))}",
                         field="command")
    rest = words[1:]
    if verb == "run":
        i = 0
        while i < len(rest):
            tok = rest[i]
            i += 1
            if not tok.startswith("-"):
                r.positional.append(tok)
            elif tok.partition("=")[0] in _OLLAMA_RUN_VALUES and "=" not in tok and (
                    tok != "--think" and i < len(rest)):
                launch.unread.append(f"{tok} {rest[i]}")
                i += 1
            else:
                launch.unread.append(tok)
        if not r.positional:
            raise InputError("ollama run needs a model name", field="command")
        name = r.positional[0]
        launch.model_flag = f"ollama run {name}"
        hf = re.match(r"(?:https?://)?(?:hf\.co|huggingface\.co)/([\w.-]+/[\w.-]+)"
                      r"(?::([\w.-]+))?$", name, re.IGNORECASE)
        if hf is not None:
            # Ollama's Hugging Face form: without a tag it takes the repository's Q4_K_M,
            # as llama.cpp's -hf does
            launch.model = hf.group(1) + (f":{hf.group(2)}" if hf.group(2) else "")
        elif "/" not in name:
            launch.model = name
        if r.positional[1:]:
            launch.unread.append("the prompt")
    elif rest:
        launch.unknown.extend(rest)
    return launch


def _is_flag(tok: str) -> bool:
    return tok.startswith("-") and len(tok) > 1 and not _NUMBER.match(tok)


def read_command(text: str, options: str | None = None) -> Launch:
    """Read a launch command (``llama-server -m x.gguf -c 32768 -np 4 …``) as kvplan's fields.
    ``options``: the text of the YAML file its ``--config`` (trtllm-serve's
    ``--extra_llm_api_options``) names, read with it: vLLM's and SGLang's keys as their flags
    (the command's own flags win), TensorRT-LLM's LLM API options over its flags.

    Raises InputError (field ``command``) for a command of no known engine, a flag's bad
    value, or a flag whose memory kvplan does not plan."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("command must be a launch command line (llama-server …, vllm serve …)",
                         field="command")
    if len(text) > MAX_COMMAND:
        raise InputError(f"command must be at most {MAX_COMMAND:,} characters, got "
                         f"{len(text):,}", field="command")
    # shell line continuations, then the words as the shell splits them
    joined = re.sub(r"\\\r?\n", " ", text)
    # a Windows command line (C:\models\x.gguf, a ^ or ` continuation): its backslashes
    # are path separators, not escapes
    windows = bool(re.search(r"(?:^|[\s\"'=])[A-Za-z]:\\", joined))
    if windows:
        joined = re.sub(r"[\^`]\r?\n", " ", joined)
    try:
        if windows:
            lexer = shlex.shlex(joined, posix=False, punctuation_chars=False)
            lexer.whitespace_split = True
            tokens = [t[1:-1] if len(t) > 1 and t[0] == t[-1] and t[0] in "\"'" else t
                      for t in lexer]
        else:
            tokens = shlex.split(joined, comments=True)
    except ValueError as exc:
        raise InputError(f"command could not be split into words: {exc}",
                         field="command") from None
    at = _ollama_program(tokens)
    if at is not None and not any(PurePath(w).name.lower() in LLAMA_PROGRAMS
                                  for w in tokens[:at]):
        return _read_ollama(tokens, at)
    engine, args = _engine(tokens)
    server = engine != "llama.cpp-cli"
    engine = "llama.cpp" if engine == "llama.cpp-cli" else engine
    flags, finish = _TABLES[engine]
    by_name = {n: flag for flag in flags for n in flag.names}
    names_file = any(a == "--config" or a.startswith("--config=")
                     or a.replace("_", "-").startswith("--extra-llm-api-options") for a in args)
    unused = options is not None and options.strip() and not names_file
    if not names_file:
        options = None
    r = _Reader(engine, options)
    if unused:
        r.note("the options file's text given is not read: the command names no file "
               "(--config" + (", --extra_llm_api_options" if engine == "trtllm" else "") + ")")
    r.seen["server"] = server
    if options is not None and engine in ("vllm", "sglang"):
        # the file's options as flags before the command's own, which win (vLLM's
        # FlexibleArgumentParser puts them first; SGLang's config merger lets the CLI win)
        start = 1 if engine == "vllm" and args and not _is_flag(args[0]) else 0
        args = args[:start] + _options_args(engine, parse_yaml(options, "the --config file")) \
            + args[start:]
    i = 0
    if engine in ("vllm", "trtllm") and args and not _is_flag(args[0]):
        # vllm serve MODEL …, trtllm-serve MODEL …
        r.positional.append(args[0])
        i = 1
    while i < len(args):
        tok = args[i]
        i += 1
        if not _is_flag(tok):
            r.positional.append(tok)
            continue
        # (a short flag's dotted keys take "=" too: -ac.backend=FLASHINFER)
        name, eq, inline = (tok.partition("=") if tok.startswith("--") or (
            engine == "vllm" and tok.startswith("-ac.")) else (tok, "", ""))
        key = name
        if engine != "llama.cpp" and name.startswith("--"):
            # vLLM, SGLang and TensorRT-LLM take --max_model_len as --max-model-len
            key = "--" + name[2:].replace("_", "-")
        f = by_name.get(key)
        # a JSON flag's keys given dotted (the keys after the dot keep their own spelling)
        base, dot, path = key.partition(".")[0], *name.partition(".")[1:]
        dotted = f is None and engine == "vllm" and bool(dot and path) and base in _VLLM_DOTTED
        if dotted:
            f = by_name[base]
        if f is None:
            # a flag kvplan does not know: its value with it, where it seems to have one
            if not eq and i < len(args) and not _is_flag(args[i]):
                r.launch.unknown.append(f"{tok} {args[i]}")
                i += 1
            else:
                r.launch.unknown.append(tok)
            continue
        if f.arity == "none":
            if eq:
                raise InputError(f"{name} takes no value, got {shown(inline)}", field="command")
            f.read(r, name, "")
            continue
        if eq:
            value = inline
        elif f.arity == "maybe":
            if i < len(args) and not _is_flag(args[i]):
                value = args[i]
                i += 1
            else:
                value = ""
        elif f.arity == "many":
            words = []
            while i < len(args) and not _is_flag(args[i]):
                words.append(args[i])
                i += 1
            if not words:
                raise InputError(f"{name} needs at least one value", field="command")
            value = " ".join(words)
        elif i < len(args):
            value = args[i]
            i += 1
        else:
            raise InputError(f"{name} needs a value", field="command")
        if dotted:
            f.read(r, base, _dotted_json(path, value))
        else:
            f.read(r, name, value)
    finish(r)
    if engine == "llama.cpp" and r.positional:
        r.launch.unknown.extend(r.positional)
    elif engine != "llama.cpp" and r.positional[1:]:
        r.launch.unknown.extend(r.positional[1:])
    return r.launch


# --- the model a command loads ------------------------------------------------------------

def _hf_url(url: str) -> str | None:
    """REPO:QUANT of a Hugging Face file URL (…/owner/name/resolve/main/x-Q4_K_M.gguf)."""
    m = re.match(r"https?://(?:www\.)?(?:huggingface\.co|hf\.co)/([\w.-]+/[\w.-]+)/"
                 r"(?:resolve|blob)/[^/]+/(.+\.gguf)$", url.strip(), re.IGNORECASE)
    if m is None:
        return None
    tag = gguf_file_model(m.group(2))[1]
    return f"{m.group(1)}:{tag.upper()}" if tag else None


def _draft_file(launch: Launch, fields: dict[str, Any], allow_local: bool) -> None:
    """-md FILE.gguf: the file itself where it is on this machine (its header is exact), else
    the catalog model its name spells in the type its name carries; else not counted, with a
    note saying so."""
    from .catalog import load_model

    path = str(fields["draft"])
    try:
        if allow_local and Path(path).expanduser().exists():
            return
    except OSError:
        pass
    name, weights = gguf_file_model(path)
    try:
        load_model(name, allow_local=False, allow_hub=False)
    except InputError:
        fields.pop("draft")
        launch.notes.append(f"-md {path}: the draft's file is not on this machine and its name "
                            f"{shown(name)} is no catalog model: its weights and cache are not "
                            "counted (--draft gives the draft model)")
        return
    fields["draft"] = name
    if weights is not None and gguf_weights(weights) in _llamacpp.WEIGHTS:
        fields["draft_weights"] = gguf_weights(weights)


def resolve(launch: Launch, model: str | None = None, *, weights_given: bool = False,
            allow_local: bool = True) -> tuple[ModelSpec, dict[str, Any]]:
    """The model a launch command loads and the plan's fields (``engine`` and ``model``
    among them). ``model`` (kvplan's MODEL) stands for the command's where given: a GGUF
    file the command names by path is read where it exists here, else by its name (a
    catalog model, the type its name carries, unless ``weights_given``: the plan names its
    own)."""
    from .catalog import gguf_holder, load_model, ollama_entry, same_model

    weights = None
    ref = model
    named = launch.model if launch.engine == "llama.cpp" else None
    if named is not None and re.match(r"https?://", named):
        # -mu URL: a Hugging Face file as REPO:QUANT, any other by its file name
        named = _hf_url(named) or named.rsplit("/", 1)[-1]
    if named is not None and named.lower().endswith(".gguf"):
        name, weights = gguf_file_model(named)
        if ref is None:
            exists = False
            if allow_local:
                try:
                    exists = Path(named).expanduser().exists()
                except OSError:
                    exists = False
            if exists:
                ref, weights = named, None    # the file itself: its header is exact
            else:
                try:
                    load_model(name, allow_local=False, allow_hub=False)
                except InputError:
                    raise InputError(
                        f"the command's model file {shown(launch.model_flag or named)} is not "
                        f"on this machine and its name {shown(name)} is no catalog model: give "
                        "the model beside the command (a catalog id or Hub repo id)",
                        field="model") from None
                ref = name
        elif ref.lower().endswith(".gguf"):
            weights = None                    # MODEL is the file: its header is exact
    elif ref is None:
        ref = named if named is not None else launch.model
    if weights_given:
        weights = None
    if ref is not None and model is None and launch.engine == "ollama" and "/" not in ref:
        # ollama run NAME: a catalog id, or a library name that spells a catalog model
        try:
            stored = load_model(ref, allow_local=False, allow_hub=False).checkpoint_weights
        except InputError:
            ref = None
        library = ollama_entry(ref) if ref is not None else None
        # a tag that names no quantization holds the one its manifest says, which is not
        # read; a checkpoint stored quantized (gpt-oss's MXFP4) is planned as it is stored
        if (library is not None and library.weights is None and not weights_given
                and stored is None):
            raise InputError(
                f"{shown(launch.model_flag)}: the quantization Ollama's {shown(ref)} holds is "
                f"not one its name gives: give --weights (`ollama show {ref}` prints it; "
                f"most of Ollama's tags hold Q4_K_M) or a tag that names it "
                f"({library.base}-q4_K_M)", field="weights")
    if ref is None and launch.engine == "ollama" and launch.model_flag:
        # the catalog models the library name most likely means (gemma3:27b: gemma-3-27b-it)
        likely = same_model(launch.model_flag.removeprefix("ollama run "))[:2]
        lead = (" (the catalog has " + " or ".join(f"'{i}'" for i in likely) + ")"
                if likely else "")
        raise InputError(f"{shown(launch.model_flag)}: Ollama's library names are not models "
                         "kvplan reads; give the model beside the command, a catalog id or Hub "
                         f"repo id{lead}, and --weights for the quantization its tag holds",
                         field="model")
    if ref is None:
        raise InputError("the command names no model: give the model beside it (a catalog "
                         "id or Hub repo id)", field="model")
    if weights is not None:
        weights = gguf_weights(weights)
        if weights not in _llamacpp.WEIGHTS:
            raise InputError(
                f"the command's file is quantized as {weights.upper()}, none of "
                "llama-quantize's types kvplan prices: give the weights as --weights (the "
                "nearest type) or the GGUF file itself", field="weights")
    try:
        spec = load_model(ref, allow_local=allow_local)
    except HubUnavailable:
        # offline, llama.cpp's -hf REPO:QUANT read as the catalog model the repository holds
        # (…/Qwen3-8B-GGUF:Q4_K_M → qwen3-8b in Q4_K_M), where it is one
        repo, _, tag = ref.partition(":")
        if launch.engine not in ("llama.cpp", "ollama") or model is not None or not tag:
            raise
        held = gguf_holder(repo)
        if held is None:
            base = re.sub(r"[-_.]gguf$", "", repo.rsplit("/", 1)[-1], flags=re.IGNORECASE)
            raise HubUnavailable(f"the Hub could not be reached to read {shown(ref)}, and "
                                 f"{shown(base)} is no catalog model: give the model beside the "
                                 "command",
                                 field="model") from None
        base, spec = held
        weights = None if weights_given else gguf_weights(tag)
        if weights is not None and weights not in _llamacpp.WEIGHTS:
            raise
        launch.notes.append(f"the Hub could not be reached: {ref} read as the catalog's "
                            f"{base} in llama-quantize's {tag.upper()} tensor types, not from "
                            "the file's header")
        ref = base
    # vLLM's and SGLang's own default is the length each derives from the config
    own = {"vllm": spec.vllm_max_len, "sglang": spec.sglang_context_len}.get(launch.engine)
    fields = {"model": ref, "engine": launch.engine,
              **launch.fields(own or spec.max_position_embeddings)}
    if str(fields.get("draft", "")).lower().endswith(".gguf"):
        _draft_file(launch, fields, allow_local)
    if launch.engine == "vllm" and launch.mm_zero is not None and spec.params.encoder:
        _vllm_mm_towers(launch, spec, fields)
    if launch.engine == "llama.cpp" and spec.params.encoder and not launch.mmproj:
        fields["no_mmproj"] = True
        if not any(launch.about.get(n) == "no_mmproj" for n in launch.notes):
            launch.notes.append("no --mmproj: the model's vision tower is not loaded")
            launch.about[launch.notes[-1]] = "no_mmproj"
    if weights is not None and "weights" not in fields:
        fields["weights"] = weights
    if launch.engine == "ollama":
        _ollama_changes(launch, spec, fields)
    return spec, fields


def _ollama_changes(launch: Launch, spec: ModelSpec, fields: dict[str, Any]) -> None:
    """What Ollama changes of its settings for the model (engines/ollama.py): num_ctx lowered
    to the trained context, raised to 2,048 for a vision model, one request at a time for
    some families; each with a note."""
    trained = spec.max_position_embeddings
    ctx = fields.get("context")
    if isinstance(ctx, int) and trained and ctx > trained:
        fields["context"] = trained
        launch.notes.append(f"OLLAMA_CONTEXT_LENGTH={ctx}: Ollama lowers num_ctx to the model's "
                            f"trained context, {trained:,}")
        launch.about[launch.notes[-1]] = "context"
    if isinstance(ctx, int) and spec.params.encoder and ctx < 2048:
        fields["context"] = 2048
        launch.notes.append(f"OLLAMA_CONTEXT_LENGTH={ctx}: Ollama gives a vision model at "
                            "least 2,048 tokens")
        launch.about[launch.notes[-1]] = "context"
    seqs = fields.get("sequences", 1)
    if seqs > 1 and spec.model_type.startswith(_ollama.ONE_AT_A_TIME):
        fields["sequences"] = 1
        launch.notes.append(f"OLLAMA_NUM_PARALLEL={seqs}: Ollama serves {spec.model_type} "
                            "models one request at a time")
        launch.about[launch.notes[-1]] = "sequences"


def _vllm_mm_towers(launch: Launch, spec: ModelSpec, fields: dict[str, Any]) -> None:
    """--limit-mm-per-prompt against the model's towers: with every tower's modalities at 0,
    vLLM builds none (planned as --language-model-only); else the towers stay, all of them
    (kvplan weighs a model's towers together), and the note says which modality keeps one."""
    zero = launch.mm_zero or frozenset()
    # a model whose towers kvplan cannot tell apart: one vision tower of images and videos
    towers = spec.towers or (("image", "video"),)
    kept = [t for t in towers if not set(t) <= zero]
    if not kept:
        fields["language_model_only"] = True
        note = ("--limit-mm-per-prompt: every modality of the model's towers ("
                + ", ".join(m for t in towers for m in t) + ") at 0, so vLLM builds no tower: "
                "planned as --language-model-only")
    else:
        missing = sorted({m for t in kept for m in t} - zero)
        note = ("--limit-mm-per-prompt: vLLM builds a tower unless all its modalities are at 0, "
                f"and {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not: "
                "planned with the towers")
    launch.notes.append(note)
    launch.about[note] = "language_model_only"


#: kvplan's CLI flags for the fields a command sets, in the order they are written
_CLI = {"context": "--ctx", "sequences": "--seqs"}
_CLI_ORDER = ("engine", "context", "sequences", "kv", "kv_k", "kv_v", "weights", "gpus", "tp",
              "pp", "dp", "attn_dp")


def cli_line(fields: dict[str, Any]) -> str:
    """The kvplan command line of a command's fields (``kvplan MODEL --engine vllm …``)."""
    words = ["kvplan", shlex.quote(str(fields["model"]))]
    keys = [k for k in _CLI_ORDER if k in fields] + sorted(
        k for k in fields if k not in _CLI_ORDER and k != "model")
    for k in keys:
        flag = _CLI.get(k, "--" + k.replace("_", "-"))
        value = fields[k]
        if value is True:
            words.append(flag)
        elif isinstance(value, list):
            for item in value:
                words += [flag, shlex.quote(str(item))]
        elif value is not False and value is not None:
            words += [flag, shlex.quote(f"{value:g}" if isinstance(value, float) else str(value))]
    return " ".join(words)


def give_way(launch: Launch, fields: dict[str, Any], given: set[str]) -> None:
    """The fields a plan sets beside the command (``given``, kvplan's names) win: the
    command's kv_k and kv_v leave ``fields`` where a kv (both formats) is given, and its notes
    about the fields given are dropped (Launch.given)."""
    if "kv" in given:
        fields.pop("kv_k", None)
        fields.pop("kv_v", None)
    launch.given(given)


def refuse_launch(launch: Launch, query: Any) -> None:
    """Raise the launch's start-up refusal (Launch.refused) for ``query``'s cards, unless
    vLLM refuses the extensible KV cache for an earlier reason, which the plan gives
    (engines/vllm.py): Intel's cards (the platform, checked first), then a pool pinned by
    --kv-cache-memory-bytes (kvplan's kv_budget), checked before the block count."""
    if launch.refused is None:
        return
    if launch.engine == "vllm" and (query.kv_budget_bytes is not None or _vllm.on_xpu(query)):
        return
    raise launch.refused


def launch_query(launch: Launch, query: Any, shorten: bool = True) -> Any:
    """``query`` as ``launch`` would run it: the launch's start-up refusal raised for the
    query's cards (refuse_launch), then, with ``shorten``, at the context the engine chooses
    where the command leaves it out (fit_shortened)."""
    refuse_launch(launch, query)
    return fit_shortened(launch, query) if shorten else query


def fit_shortened(launch: Launch, query: Any) -> Any:
    """``query`` (a kvcore Query planned from ``launch``) at the context the engine chooses
    where the command leaves it out, with a note saying so: Ollama's num_ctx by the cards'
    memory (Launch.auto_ctx), llama.cpp's --fit shortening of the trained context where it
    does not fit (Launch.fitted); else ``query`` itself."""
    from dataclasses import replace

    from .query import answer

    if launch.auto_ctx and query.gpus:
        # Ollama's num_ctx by the cards' memory, no more than the trained context
        cards = _ollama.rank_gpus(query)
        total = _ollama.cards_memory(cards, launch.gpu_overhead)
        ctx = _ollama.auto_context(query.spec, cards, launch.gpu_overhead)
        trained = query.spec.max_position_embeddings
        launch.notes = [n for n in launch.notes if launch.about.get(n) != "context"]
        launch.notes.append(f"OLLAMA_CONTEXT_LENGTH not set: Ollama takes num_ctx {ctx:,} "
                            f"with {total / 2**30:,.1f} GiB of cards"
                            + (" (the model's trained context)" if ctx == trained else "")
                            + "; planned at that")
        launch.about[launch.notes[-1]] = "context"
        return replace(query, context=ctx)
    if not launch.fit_streams:
        return query
    fitted = launch.fitted(answer(query))
    if fitted is None:
        return query
    seqs = query.sequences
    least = fitted * seqs <= launch.fit_min_ctx * launch.fit_streams
    launch.notes.append(
        f"-c not set: llama.cpp's --fit shortens the context from {query.context * seqs:,} to "
        f"{fitted * seqs:,} tokens" + (f" ({seqs} × {fitted:,})" if seqs > 1 else "")
        + (", its least, and then moves layers to host memory" if least else
           " to fit the card, before it would move any layer to host memory")
        + "; planned at that")
    launch.about[launch.notes[-1]] = "context"
    return replace(query, context=fitted)
