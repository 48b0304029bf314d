"""Resolve what a user names as a model: a catalog id, a Hub repo id, a local file or folder,
or pasted JSON. The bundled catalog (``data/models/``) answers without network.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import NAME_CHARS, ConfigError, InputError, UnknownNameError, nearest, shown
from .gguf import SPLIT_NAME, is_gguf, is_model_file, spec_from_gguf
from .hf import spec_from_config
from .hub import (
    HubUnavailable,
    MissingFile,
    fetch_config,
    gguf_spec,
    gguf_tag,
    gguf_weights,
    hub_address,
    is_repo_id,
    split_tag,
)
from .model import ModelSpec

__all__ = ["Alias", "CatalogEntry", "find_models", "load_model", "model_catalog",
           "parse_config_text"]

#: largest config.json accepted (bytes), pasted, uploaded, read from disk or from the Hub.
#: Real configs reach 3.1 MB (nvidia/MiniMax-M3-NVFP4 lists every quantized layer in its
#: quantization_config); 16 MiB leaves five times that and still refuses absurd input.
MAX_CONFIG_BYTES = 16 << 20
#: deepest JSON nesting accepted in a config
MAX_JSON_DEPTH = 32


@dataclass(frozen=True)
class Alias:
    """Another Hub repository whose config.json equals a catalog entry's in every field kvplan
    reads (``differs``: the fields it does not, such as eos_token_id), checked against the
    copy named in ``source``; its checkpoint holds the same tensors."""

    repo: str
    differs: str
    source: str


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    repo: str
    family: str
    config_file: str
    source: str
    safetensors_total_bytes: int | None
    #: the checkpoint's ModelOpt hf_quant_config.json, bundled beside its config
    quant_file: str | None = None
    #: the entry stands for the unquantized original of the checkpoint its config was copied
    #: from (index.toml weights = "original"): that config's quantization_config is not read
    original_weights: bool = False
    aliases: tuple[Alias, ...] = ()
    #: an EAGLE draft head: the catalog model it was trained for (index.toml ``head_of``); ""
    #: for a model
    head_of: str = ""

    def config(self) -> dict[str, Any]:
        return self._read(self.config_file)

    def quant_config(self) -> dict[str, Any] | None:
        return self._read(self.quant_file) if self.quant_file else None

    @staticmethod
    def _read(name: str) -> dict[str, Any]:
        text = resources.files("kvcore").joinpath(f"data/models/{name}").read_text("utf-8")
        data = json.loads(text)
        assert isinstance(data, dict)
        return data


@cache
def model_catalog() -> tuple[CatalogEntry, ...]:
    index = resources.files("kvcore").joinpath("data/models/index.toml").read_text("utf-8")
    return tuple(
        CatalogEntry(
            id=e["id"], repo=e["repo"], family=e.get("family", ""), config_file=e["config"],
            source=e.get("source", ""),
            safetensors_total_bytes=e.get("safetensors_total_bytes"),
            quant_file=e.get("quant_config"),
            original_weights=e.get("weights") == "original",
            aliases=tuple(Alias(a["repo"], a.get("differs", ""), a["source"])
                          for a in e.get("aliases", ())),
            head_of=e.get("head_of", ""),
        )
        for e in tomllib.loads(index)["model"]
    )


@cache
def _by_key() -> dict[str, CatalogEntry]:
    keys: dict[str, CatalogEntry] = {}
    for entry in model_catalog():
        keys.setdefault(entry.id.lower(), entry)
        keys.setdefault(entry.repo.lower(), entry)
        keys.setdefault(entry.repo.split("/")[-1].lower(), entry)
    return keys


def _loose(name: str) -> str:
    """A name as typed loosely: case, spaces, dashes, underscores and colons dropped, dots
    kept (``qwen3 8b``, ``Qwen3_8B`` and ``qwen3:8b`` → ``qwen38b``; ``qwen3.5`` stays apart
    from ``qwen35``)."""
    return re.sub(r"[^a-z0-9.]", "", name.strip().lower())


#: what separates the words of a search or a name (Ollama's colon, a repo id's slash too)
_WORD_BREAKS = re.compile(r"[\s,:/_-]+")
#: longest catalog search accepted (characters)
MAX_QUERY_CHARS = 200


def find_models(query: str, field: str = "q") -> list[CatalogEntry]:
    """The catalog entries every word of ``query`` names (words apart at spaces, commas,
    dashes, underscores, colons and slashes), each in any case in the entry's id, Hub
    repository, family or the repositories that share its config, a number alone as a whole
    number: ``qwen3 coder``, ``llama 3.1``, ``gemma3:27b`` (Ollama's spelling) and
    ``HuggingFaceTB`` each find theirs."""
    if len(query) > MAX_QUERY_CHARS:
        raise InputError(f"{field} is at most {MAX_QUERY_CHARS} characters, got {len(query):,}",
                         field=field)
    words = [w for w in (_loose(part) for part in _WORD_BREAKS.split(query)) if w]
    if not words:
        raise InputError(f"{field} must hold a word of a model's name, like qwen3 or llama 3.1; "
                         f"got {shown(query)}", field=field)
    # a number alone (3, 3.1, 2507) is a whole number of a name: "gemma 3" is not gemma-4-31b
    numbers, spelled = [], []
    for w in words:
        if re.fullmatch(r"[0-9.]+", w):
            numbers.append(re.compile(rf"(?<![0-9.]){re.escape(w)}(?![0-9])"))
        else:
            spelled.append(w)
    found = []
    for entry in model_catalog():
        names = [entry.id, entry.repo, entry.family, *(a.repo for a in entry.aliases)]
        text = " ".join(_loose(n) for n in names)
        dotless = text.replace(".", "")
        apart = " ".join(re.sub(r"[^a-z0-9.]+", " ", n.lower()) for n in names)
        # a word matches the way it is spelled or with its dots dropped (qwen35 finds qwen3.5)
        if (all(w in text or w in dotless for w in spelled)
                and all(n.search(apart) for n in numbers)):
            found.append(entry)
    return found


@cache
def _name_words() -> tuple[str, ...]:
    """Every word of the catalog's names (ids, repositories, families, twins), spelled
    loosely, for a search's hint."""
    words: set[str] = set()
    for entry in model_catalog():
        for name in (entry.id, entry.repo, entry.family, *(a.repo for a in entry.aliases)):
            words.update(w for w in (_loose(p) for p in _WORD_BREAKS.split(name)) if w)
    return tuple(sorted(words))


def why_unmatched(query: str) -> str:
    """Why a search finds no catalog model: the words that are in no model's name, with the
    nearest word that is (``mistrall``: mistral), or that each word names models but none
    all of them."""
    words = [w for w in _WORD_BREAKS.split(query) if _loose(w)]
    alone = [w for w in words if not find_models(w)]
    if not alone:
        return "each word names models, none all of them"
    hints = []
    for word in alone[:3]:
        close = nearest(_loose(word), _name_words(), cutoff=0.8)
        hints.append(f"{shown(word, 40)} is in no model's name"
                     + (f" (did you mean {close}?)" if close else ""))
    return "; ".join(hints)


def unmatched(query: str) -> str:
    """The sentence for a search that finds no catalog model, with why."""
    why = why_unmatched(query)
    said = f"no catalog model matches {shown(query, NAME_CHARS)}"
    return f"{said} ({why})" if why.startswith("each") else f"{said}: {why}"


@cache
def _loose_keys() -> dict[str, CatalogEntry]:
    """Catalog ids and repo names by their loose spelling, where exactly one entry has it."""
    found: dict[str, set[str]] = {}
    for entry in model_catalog():
        for key in (entry.id, entry.repo.split("/")[-1]):
            found.setdefault(_loose(key), set()).add(entry.id)
    by_id = {e.id: e for e in model_catalog()}
    return {k: by_id[next(iter(ids))] for k, ids in found.items() if k and len(ids) == 1}


@cache
def _alias_keys() -> dict[str, tuple[CatalogEntry, Alias]]:
    keys: dict[str, tuple[CatalogEntry, Alias]] = {}
    for entry in model_catalog():
        for alias in entry.aliases:
            keys.setdefault(alias.repo.lower(), (entry, alias))
            keys.setdefault(alias.repo.split("/")[-1].lower(), (entry, alias))
    return keys


@cache
def _loose_alias_keys() -> dict[str, tuple[CatalogEntry, Alias]]:
    """Alias repository names by their loose spelling, where exactly one alias has it and no
    catalog entry does."""
    found: dict[str, list[tuple[CatalogEntry, Alias]]] = {}
    for entry, alias in {a.repo: (e, a) for e, a in _alias_keys().values()}.values():
        found.setdefault(_loose(alias.repo.split("/")[-1]), []).append((entry, alias))
    entries = {_loose(k) for e in model_catalog() for k in (e.id, e.repo.split("/")[-1])}
    return {k: v[0] for k, v in found.items() if k and len(v) == 1 and k not in entries}


@cache
def _alias_spec(entry: CatalogEntry, alias: Alias) -> ModelSpec:
    """The catalog entry's spec, named for its alias repository."""
    but = f" but {alias.differs}" if alias.differs else ""
    return dataclasses.replace(
        _catalog_spec(entry.id), hub_repo=alias.repo,
        source=f"catalog ({entry.id}'s config, equal to {alias.repo}'s in every field{but}: "
               f"{alias.source})")


@cache
def _catalog_spec(entry_id: str) -> ModelSpec:
    entry = next(e for e in model_catalog() if e.id == entry_id)
    config = entry.config()
    if entry.original_weights:
        config.pop("quantization_config", None)
    return spec_from_config(config, name=entry.id, source=f"catalog ({entry.source})",
                            hub_repo=entry.repo,
                            safetensors_total_bytes=entry.safetensors_total_bytes,
                            quant_config=entry.quant_config())


def _depth(value: Any, limit: int, level: int = 0) -> None:
    if level > limit:
        raise ConfigError(f"config JSON is nested deeper than {limit} levels")
    if isinstance(value, dict):
        for item in value.values():
            _depth(item, limit, level + 1)
    elif isinstance(value, list):
        for item in value:
            _depth(item, limit, level + 1)


def parse_config_text(text: str | bytes, what: str = "config") -> dict[str, Any]:
    """Parse pasted or uploaded config.json text (size, depth, an object).

    ``Infinity``, ``-Infinity`` and ``NaN`` are read as the floats they name, as Python's json
    module and so Hugging Face read them (Nemotron-H configs write ``time_step_limit: [0.0,
    Infinity]``); a field kvplan sizes with refuses a non-finite value where it is read.
    """
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{what} is larger than {MAX_CONFIG_BYTES:,} bytes")
    try:
        data = json.loads(text)
    except RecursionError:
        raise ConfigError(f"{what} is nested too deeply") from None
    except ValueError as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} must be a JSON object, got {type(data).__name__}")
    _depth(data, MAX_JSON_DEPTH)
    return data


def _index_total(folder: Path) -> int | None:
    """``metadata.total_size`` of the folder's model.safetensors.index.json (None: no index,
    or none given there)."""
    index = folder / "model.safetensors.index.json"
    if not index.is_file():
        return None
    meta = parse_config_text(index.read_bytes(), str(index)).get("metadata")
    size = meta.get("total_size") if isinstance(meta, dict) else None
    if size is None:
        return None
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise ConfigError(f"{index}: metadata.total_size must be the weights' bytes, "
                          f"a whole number above 0, got {shown(size)}")
    return size


def _sidecar(path: Path) -> dict[str, Any] | None:
    """The ModelOpt ``hf_quant_config.json`` beside a config: ``hf_quant_config.json`` next to
    ``config.json``, ``NAME_hf_quant_config.json`` next to ``NAME_config.json``."""
    if path.name == "config.json":
        side = path.parent / "hf_quant_config.json"
    elif path.name.endswith("_config.json"):
        side = path.with_name(path.name.removesuffix("config.json") + "hf_quant_config.json")
    else:
        return None
    if not side.is_file():
        return None
    return parse_config_text(side.read_bytes(), str(side))


def _local(path: Path) -> ModelSpec:
    if path.is_file() and (path.suffix.lower() == ".gguf" or is_gguf(path)):
        return spec_from_gguf(path)
    if path.is_dir() and not (path / "config.json").is_file():
        ggufs = sorted(p for p in path.glob("*.gguf") if is_model_file(p.name))
        firsts = [p for p in ggufs if (m := SPLIT_NAME.match(p.name)) is None
                  or m.group("no") == "00001"]
        if len(firsts) == 1:
            return spec_from_gguf(firsts[0])
        if len(firsts) > 1:
            raise InputError(f"folder '{path}' has no config.json and {len(firsts)} GGUF "
                             f"models ({', '.join(p.name for p in firsts[:4])}"
                             f"{', ...' if len(firsts) > 4 else ''}): name one", field="model")
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise InputError(f"folder '{path.parent}' has no config.json", field="model")
    # a checkpoint's config.json, named as a folder or as the file, is read with the index
    # beside it: the same model gives the same weights either way
    total = _index_total(path.parent) if path.name == "config.json" else None
    config = parse_config_text(path.read_bytes(), str(path))
    return spec_from_config(config, name=path.parent.name if path.name == "config.json" else path.stem,
                            source=f"file {path}", safetensors_total_bytes=total,
                            quant_config=_sidecar(path))


#: words a repository's name adds for one variant of a model (instruction or chat tuned,
#: thinking, base, pretrained, converted for transformers), and the "Meta-" before Llama 3 and
#: 3.1 names
_VARIANT_WORDS = re.compile(r"-(?:instruct|it|chat|base|hf|pt|thinking"
                            # a quantized or converted copy of the same model
                            r"|gguf|awq|gptq|fp8|int4|int8|bnb-4bit|4bit|8bit|mlx|qat)(?=-|$)")


def _stem(name: str) -> str:
    """A model name without its owner and its variant words: ``meta-llama/Meta-Llama-3.1-8B-
    Instruct`` → ``llama-3.1-8b``, ``google/gemma-2-9b-it`` → ``gemma-2-9b``."""
    n = name.strip().lower().rsplit("/", 1)[-1]
    n = re.sub(r"^meta-(?=llama)", "", n)
    return _VARIANT_WORDS.sub("", n)


def variants(name: str) -> list[CatalogEntry]:
    """The catalog entries for the model ``name`` names in another variant (base for instruct,
    instruct for base, …): the same name once owner and variant words are left out, spelled
    loosely (Ollama's ``gemma3:27b`` is ``gemma-3-27b-it``'s). Their
    configs may differ (context length, vocabulary); they are suggestions, not stand-ins."""
    stem = _loose(_stem(name))
    return [e for e in model_catalog() if stem in (_loose(_stem(e.id)), _loose(_stem(e.repo)))]


def _variant_note(name: str) -> str:
    found = variants(name)
    if not found:
        return ""
    listed = " or ".join(f"'{e.id}' ({e.repo})" for e in found[:3])
    return f"; the bundled catalog has {listed}, another variant of it"


def _known_names() -> dict[str, str]:
    """Every spelling a catalog model is found by, mapped to its id (for suggestions); an
    alias's repository name to itself."""
    names = {k: e.id for k, e in _by_key().items()}
    for _, alias in _alias_keys().values():
        name = alias.repo.split("/")[-1].lower()
        names.setdefault(name, name)
    return names


def _named_by_words(name: str) -> list[str]:
    """Catalog ids of the few entries whose names hold every word of ``name`` (Ollama's
    deepseek-r1:7b: deepseek-r1-distill-qwen-7b), for suggestions; none where a word is
    missing, the name is one word or more than three entries hold them (their spellings are
    closer suggestions)."""
    words = [w for w in _WORD_BREAKS.split(name.rsplit("/", 1)[-1]) if w]
    if len(words) < 2 or len(name) > MAX_QUERY_CHARS:
        return []
    try:
        found = find_models(" ".join(words))
    except InputError:
        return []
    return [e.id for e in sorted(found, key=lambda e: len(e.id))] if len(found) <= 3 else []


def same_model(name: str) -> list[str]:
    """Catalog ids of the entries ``name`` most likely means though it names none (another
    variant of it, or the few whose names hold every word of it): Ollama's ``gemma3:27b``
    gives ``gemma-3-27b-it``. Leads to suggest, not stand-ins."""
    found = [e.id for e in variants(name)] + _named_by_words(name)
    return list(dict.fromkeys(found))


def _variant_keys(name: str) -> list[str]:
    """Keys of _known_names for the model ``name`` names in another variant: catalog ids,
    then alias repository names."""
    stem = _loose(_stem(name))
    aliases = {a.repo.split("/")[-1].lower() for _, a in _alias_keys().values()}
    return [e.id for e in variants(name)] + sorted(a for a in aliases
                                                   if _loose(_stem(a)) == stem)


#: the quantization an Ollama tag ends in (qwen3:8b-q8_0, llama3.1:8b-instruct-q4_K_M, -fp16)
_OLLAMA_QUANT = re.compile(r"-(?P<quant>i?q\d(?:_[a-z0-9]+)*|bf16|fp16|f16|fp32|f32)$",
                           re.IGNORECASE)
#: the words of a chat-tuned model's name, which Ollama's library names leave out
_TUNED_WORDS = ("instruct", "it", "chat")


@dataclasses.dataclass(frozen=True)
class OllamaName:
    """What Ollama's ``NAME:TAG`` names in the catalog: an entry (or a repository that shares
    its config), the quantization the tag ends in (None where it names none: the library's
    default file) and whether the name leaves out the chat-tuned word of the entry's."""

    entry: CatalogEntry
    alias: Alias | None
    quant: str | None
    tuned: bool
    #: the name less the quantization its tag ends in (qwen3:8b-q8_0: qwen3:8b)
    base: str

    @property
    def weights(self) -> str | None:
        """kvplan's weight format of the tag's quantization, None where it names none kvplan
        prices."""
        return self.quant if self.quant is not None and _priced(self.quant) else None

    @property
    def label(self) -> str:
        return self.alias.repo if self.alias is not None else f"the catalog's {self.entry.id}"


def ollama_entry(text: str) -> OllamaName | None:
    """The catalog model Ollama's ``NAME:TAG`` spells loosely (``qwen3:8b``, ``qwen3:8b-q8_0``;
    ``llama3.2:3b`` is Llama-3.2-3B-Instruct, the model Ollama's library serves), or None."""
    name, colon, tag = text.strip().partition(":")
    if not colon or not name or not tag or "/" in text:
        return None
    m = _OLLAMA_QUANT.search(tag)
    quant = None
    if m is not None:
        quant = m["quant"].lower().replace("fp", "f")
        tag = tag[:m.start()]
    key = _loose(f"{name}{tag}")
    found: dict[str, tuple[CatalogEntry, Alias | None]] = {
        k: (e, a) for k, (e, a) in _loose_alias_keys().items()}
    found.update((k, (e, None)) for k, e in _loose_keys().items())
    tuned = [found[key + w] for w in _TUNED_WORDS if key + w in found]
    base = f"{name.strip()}:{tag}"
    if len(tuned) == 1:
        return OllamaName(*tuned[0], quant, True, base)
    if key in found:
        return OllamaName(*found[key], quant, False, base)
    # a size tag of a model whose name carries none (deepseek-r1:671b): the entry the name
    # spells, where its parameters are that size
    size = re.fullmatch(r"(\d+(?:\.\d+)?)b", tag.strip().lower())
    held = found.get(_loose(name))
    if size is not None and held is not None and _sized(held[0], float(size[1])):
        return OllamaName(*held, quant, False, base)
    # the one entry whose name goes on to say only its active parameters, its tuning and
    # its date (qwen3-coder:30b: Qwen3-Coder-30B-A3B-Instruct)
    longer = [(k, v) for k, v in found.items()
              if k.startswith(key) and _ONLY_MORE.fullmatch(k[len(key):])]
    if size is not None and len(longer) == 1:
        k, held = longer[0]
        return OllamaName(*held, quant, any(w in k[len(key):] for w in _TUNED_WORDS), base)
    return None


#: what an entry's name may add to Ollama's NAME:SIZE for the one model it means: the active
#: parameters of a mixture of experts, the chat-tuned word, a release date
_ONLY_MORE = re.compile(r"(?:a[0-9.]+b)?(?:instruct|it|chat)?(?:[0-9]{4})?")


def _sized(entry: CatalogEntry, billions: float) -> bool:
    """Whether the entry's parameters round to a size label of ``billions`` (within 10%:
    Qwen3-8B's 8.19B is 8b, gpt-oss-20b's 20.9B is 20b)."""
    total = _catalog_spec(entry.id).params.total / 1e9
    return billions > 0 and abs(total - billions) <= 0.1 * billions


def _ollama_spec(text: str, named: OllamaName) -> ModelSpec:
    """The catalog model Ollama's name spells, in the quantization its tag names."""
    spec = (_catalog_spec(named.entry.id) if named.alias is None
            else _alias_spec(named.entry, named.alias))
    read = f"{shown(text, NAME_CHARS)}, as Ollama spells it, is read as {named.label}"
    if named.tuned:
        read += " (its library serves the chat-tuned model)"
    quant = named.quant
    if quant is None:
        held = (f"planned as the checkpoint's {spec.checkpoint_weights} (`ollama show` prints "
                "the tag's; --weights gives another)" if spec.checkpoint_weights
                else "--weights gives it (most of Ollama's tags hold Q4_K_M; `ollama show` "
                "prints it)")
        note = f"{read}; the quantization its library tag holds is not read: {held}"
        return dataclasses.replace(spec, notes=(*spec.notes, note))
    if named.weights is None:
        note = (f"{read}; its tag's {quant.upper()} is no type kvplan prices: --weights gives "
                "the nearest")
        return dataclasses.replace(spec, notes=(*spec.notes, note))
    priced = ("" if quant in ("f16", "bf16", "f32")
              else "priced by llama-quantize's tensor types for it, ")
    note = (f"{read} in {quant.upper()}, as its tag names ({priced}not read from the file's "
            "header; --weights plans another)")
    return dataclasses.replace(spec, checkpoint_weights=quant, notes=(*spec.notes, note))


def _priced(weights: str) -> bool:
    """Whether ``weights`` is the name of a weight format kvplan prices (q4_k_m, mxfp4)."""
    from .weights import WEIGHT_FORMATS

    return weights in {f.name for f in WEIGHT_FORMATS}


def gguf_holder(repo: str) -> tuple[str, ModelSpec] | None:
    """The catalog model a GGUF repository holds, read from its name, and the name that
    plans it: the name less its ``-GGUF`` (and a quantizer's ``OWNER_`` prefix, bartowski's
    ``Qwen_Qwen3-8B-GGUF``) as the catalog finds it, else the one entry it names in another
    variant; None where it names none."""
    name = re.sub(r"[-_.]gguf$", "", repo.strip().rsplit("/", 1)[-1], flags=re.IGNORECASE)
    owner, cut_at, rest = name.partition("_")
    names = [name] + ([rest] if cut_at and owner and rest else [])
    for held in names:
        try:
            spec = load_model(held, allow_local=False, allow_hub=False)
        except InputError:
            continue
        entry = _by_key().get(spec.name)
        # the entry's id, or the name of the repository that shares its config
        own = entry is not None and spec.hub_repo == entry.repo
        return (spec.name if own or not spec.hub_repo
                else spec.hub_repo.rsplit("/", 1)[-1]), spec
    found = {e.id: e for n in names for e in variants(n)}
    if len(found) != 1:
        return None
    entry = next(iter(found.values()))
    return entry.id, _catalog_spec(entry.id)


def _gguf_or_offline(repo: str, tag: str) -> ModelSpec:
    """A Hub GGUF repository's ``tag`` file; offline, the error names the catalog model the
    repository holds and the weights that plan it (…/Qwen3-8B-GGUF:Q4_K_M: qwen3-8b with
    --weights q4_k_m), where there is one."""
    try:
        return gguf_spec(repo, tag)
    except HubUnavailable as exc:
        held = gguf_holder(repo)
        weights = gguf_weights(tag)
        if held is None:
            raise
        name, spec = held
        model = f"{name} ({spec.hub_repo})" if spec.hub_repo else name
        if _priced(weights):
            lead = (f"offline, `kvplan {name} --weights {weights}` plans the catalog's "
                    f"{model} in llama-quantize's {tag.upper()} types, not from the file's "
                    "header")
        else:
            lead = (f"offline, the catalog has {model}: `kvplan {name} --weights TYPE` plans "
                    f"it in the llama-quantize type nearest {shown(tag.upper(), 64)}, which "
                    "kvplan does not price")
        raise HubUnavailable(f"{exc}; {lead}", field="model") from None


def _addressed(text: str, repo: str, revision: str | None, file: str | None, tag: str | None,
               *, allow_hub: bool) -> ModelSpec:
    """The model a Hub address names: its repository as its repo id names it (the catalog
    answers offline), a GGUF file or tag as llama.cpp's -hf names its quantization, and a
    revision other than main read from the Hub at that revision."""
    at_main = revision is None or revision == "main"
    if file is not None and file.lower().endswith(".gguf"):
        tag = gguf_tag(file)
    if tag is not None:
        if not at_main:
            raise InputError(f"{shown(text, NAME_CHARS)} names a GGUF file at revision "
                             f"{shown(revision, 60)}; kvplan reads a GGUF repository's main "
                             f"branch, as llama.cpp's -hf does: give {repo}:{tag}", field="model")
        if not allow_hub:
            raise InputError(f"{shown(text, NAME_CHARS)} is a GGUF file on the Hub, which this "
                             "server does not read: give a catalog model or paste its config.json",
                             field="model")
        return _gguf_or_offline(repo, tag)
    if at_main:
        return load_model(repo, allow_local=False, allow_hub=allow_hub)
    if not allow_hub:
        raise InputError(f"{shown(text, NAME_CHARS)} names revision {shown(revision, 60)} of "
                         f"{repo}, which only the Hub has and this server does not read: give "
                         "the repo id for its main branch or paste that revision's config.json",
                         field="model")
    assert revision is not None
    try:
        config, total, quant = fetch_config(repo, revision)
    except HubUnavailable as exc:
        entry = _by_key().get(repo.lower())
        note = (f"; the bundled catalog has its main branch, '{entry.id}'" if entry is not None
                else _variant_note(repo))
        raise HubUnavailable(f"{exc}{note}", field="model") from None
    return spec_from_config(config, name=f"{repo}@{revision}", source=f"hub {repo} at {revision}",
                            hub_repo=repo, safetensors_total_bytes=total, quant_config=quant)


def load_model(ref: str | dict[str, Any], *, allow_local: bool = True,
               allow_hub: bool = True) -> ModelSpec:
    """The ModelSpec of a catalog id, Hub repo id, local path, JSON text or config dict."""
    if isinstance(ref, dict):
        _depth(ref, MAX_JSON_DEPTH)
        return spec_from_config(ref, name=str(ref.get("_name_or_path") or "config")[:200],
                                source="pasted config")
    text = str(ref).strip()
    if not text:
        raise InputError("model must be a catalog id, a Hub repo id, a config.json or GGUF path or JSON",
                         field="model")
    # pasted JSON: an object is a config; a list or a string is a config pasted wrongly
    if text.startswith(("{", "[", '"')):
        config = parse_config_text(text)
        return spec_from_config(config, name=str(config.get("_name_or_path") or "config"),
                                source="pasted config")
    address = hub_address(text)
    if address is not None:
        return _addressed(text, *address, allow_hub=allow_hub)
    entry = _by_key().get(text.lower())
    if entry is not None:
        return _catalog_spec(entry.id)
    aliased = _alias_keys().get(text.lower())
    if aliased is not None:
        return _alias_spec(*aliased)
    if allow_local:
        path = Path(text).expanduser()
        try:
            if path.exists():
                return _local(path)
        except OSError as exc:
            # a name too long to be a path is no file; a file that cannot be read is one
            if exc.errno == errno.ENAMETOOLONG:
                raise UnknownNameError("model", text[:100],
                                       _known_names(),
                                       field="model") from None
            raise InputError(f"cannot read '{text[:200]}': {exc.strerror or exc}",
                             field="model") from None
        if text.lower().endswith((".json", ".gguf")) or text.startswith(("/", "./", "../", "~")):
            raise InputError(f"no such file or folder: {shown(text)} (a model is a catalog "
                             "id, a Hub repo id, a config.json or GGUF path or JSON)", field="model")
    if allow_hub:
        repo, tag = split_tag(text)
        if tag is not None:
            # llama.cpp's -hf spelling: a GGUF repository and one of its quantizations
            return _gguf_or_offline(repo, tag)
    if allow_hub and is_repo_id(text):
        try:
            config, total, quant = fetch_config(text)
        except MissingFile:
            # no config.json: a repository of GGUF files, read as llama.cpp's -hf reads it
            return gguf_spec(text, None)
        except HubUnavailable as exc:
            raise HubUnavailable(f"{exc}{_variant_note(text)}", field="model") from None
        return spec_from_config(config, name=text, source=f"hub {text}", hub_repo=text,
                                safetensors_total_bytes=total, quant_config=quant)
    if "/" not in text:
        named = ollama_entry(text)
        if named is not None:
            return _ollama_spec(text, named)
        # the same name spelled with spaces, underscores or another case (qwen3 8b, Qwen3_8B):
        # one catalog entry has it, so it is that entry, not a guess
        loose = _loose_keys().get(_loose(text))
        if loose is not None:
            return _catalog_spec(loose.id)
        loose_alias = _loose_alias_keys().get(_loose(text))
        if loose_alias is not None:
            return _alias_spec(*loose_alias)
    raise UnknownNameError("model", text, _known_names(), field="model",
                           first=_variant_keys(text) + _named_by_words(text))
