"""Which architectures each engine loads, and how.

An engine finds a model by the class its config's ``architectures`` names: vLLM and SGLang in
their own model registries, then through their Transformers backend (where Transformers
exports the class, or the checkpoint ships its own code through ``auto_map``); TensorRT-LLM's
PyTorch backend in its model index alone; llama.cpp's converter in its text-model table (by
``text_config.architectures`` where a config has one). ``kvcore/data/registries.json`` holds
those tables as read from the releases kvplan follows (``bench/registries.py`` regenerates it).
A config with no ``architectures`` (a GGUF file, some flattened configs) is not looked up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from functools import cache
from importlib import resources

from ..errors import InputError
from ..model import ModelSpec

__all__ = ["Load", "Registry", "load_path", "looked_up", "registry", "require",
           "transformers_release"]

#: architectures an engine's config loader renames before its registry looks them up:
#: SGLang's Olmo3Config (configs/olmo3.py, 0.5.23) swaps Olmo3ForCausalLM for its
#: Olmo2ForCausalLM, whose model builds OLMo 3's sliding layers too
ALIASES: dict[str, dict[str, str]] = {
    "sglang": {"Olmo3ForCausalLM": "Olmo2ForCausalLM"},
}
#: text models llama.cpp's converter registers after the table read (its master moves daily),
#: with where each was read; kvplan's llama.cpp rules already follow them
LATER: dict[str, dict[str, str]] = {
    "llama.cpp": {
        "LagunaForCausalLM": "conversion/laguna.py @051139f5",
        "KimiK3ForConditionalGeneration": "conversion/kimi_k3.py @051139f5",
        "MiniMaxText01ForCausalLM": "b10437 (PR #27018)",
        "MiniMaxM1ForCausalLM": "b10437 (PR #27018)",
        "DeepseekV4ForCausalLM": "b9840",
        "AXK2ForCausalLM": "conversion/axk2.py @04fbdf3a",
    },
}


class Load(Enum):
    """How an engine would load an architecture."""

    #: a model class of the engine's own
    OWN = "own"
    #: the engine's Transformers backend over the class Transformers exports
    TRANSFORMERS = "transformers"
    #: the engine's Transformers backend over the checkpoint's own code (auto_map)
    REMOTE_CODE = "remote code"
    #: nothing: the engine stops at start-up
    NONE = "none"
    #: the config names no architecture, so nothing was looked up
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Registry:
    """One engine's table of architectures, as read from one release."""

    engine: str
    release: str
    source: str
    classes: frozenset[str]
    #: the registered classes the engine serves through its Transformers backend (vLLM's
    #: _TRANSFORMERS_SUPPORTED_MODELS)
    backend: frozenset[str] = frozenset()

    def has(self, architecture: str) -> bool:
        name = ALIASES.get(self.engine, {}).get(architecture, architecture)
        return name in self.classes or name in LATER.get(self.engine, {})


@cache
def _tables() -> dict[str, Registry]:
    text = resources.files("kvcore").joinpath("data/registries.json").read_text("utf-8")
    return {name: Registry(name, t["release"], t["source"], frozenset(t["classes"]),
                           frozenset(t.get("transformers_backend", ())))
            for name, t in json.loads(text).items()}


def registry(engine: str) -> Registry:
    """The table of ``engine`` ("vllm", "sglang", "llama.cpp", "trtllm" or "transformers")."""
    return _tables()[engine]


def transformers_release() -> str:
    return registry("transformers").release


def looked_up(engine: str, spec: ModelSpec) -> str:
    """The class ``engine`` looks ``spec`` up by: the config's first architecture, or for
    llama.cpp's converter its text_config's where it names one ("": none)."""
    if engine == "llama.cpp" and spec.text_architecture:
        return spec.text_architecture
    return spec.architecture


def load_path(engine: str, spec: ModelSpec, *, fallback: bool = True) -> Load:
    """How ``engine`` would load ``spec``'s architecture; ``fallback``: the engine tries its
    Transformers backend where it has no class of its own."""
    arch = looked_up(engine, spec)
    if not arch:
        return Load.UNKNOWN
    reg = registry(engine)
    # an engine with a fallback (vLLM's resolve_model_cls, SGLang's get_model_architecture)
    # loads the first of the config's architectures it registers; the others look up the first
    names = [a for a in spec.architectures if a] if fallback and spec.architectures else [arch]
    for name in names:
        if name in reg.backend:
            return Load.TRANSFORMERS
        if reg.has(name):
            return Load.OWN
    if not fallback:
        return Load.NONE
    if registry("transformers").has(arch):
        return Load.TRANSFORMERS
    return Load.REMOTE_CODE if spec.remote_code else Load.NONE


def require(engine: str, label: str, spec: ModelSpec, *, fallback: bool = True,
            strict: bool = True) -> tuple[Load, list[str]]:
    """Refuse, in one line, a model ``engine`` cannot load; else how it loads it, with the
    notes on how it loads one it has no class of its own for. ``label`` names the engine in
    the messages; ``strict`` off (a table known to trail the engine's source) notes a missing
    class instead."""
    how = load_path(engine, spec, fallback=fallback)
    if how in (Load.OWN, Load.UNKNOWN):
        return how, []
    reg = registry(engine)
    arch = looked_up(engine, spec)
    if how is Load.NONE:
        if not strict:
            return how, [f"{label}'s converter registers no {arch} in the table read "
                         f"({reg.source}), so it makes no GGUF of it unless a later build adds "
                         "it; the plan assumes one that does, caching the layer kinds the "
                         "config declares"]
        if not fallback:
            raise InputError(f"{label} has no {arch} model ({spec.model_type}; not in "
                             f"{reg.source}); choose another engine, or --engine raw",
                             field="engine")
        raise InputError(
            f"{label} {reg.release} does not run {arch}: its model registry has no such class, "
            f"Transformers {transformers_release()} exports none and the config's auto_map "
            "names no AutoModel class, so its Transformers backend has nothing to load; "
            "--engine raw sizes the cache", field="engine")
    if arch in reg.backend:
        return how, [f"{label} {reg.release} serves {arch} through its Transformers backend "
                     "(its registry maps the class there, not to a model of its own)"]
    where = ("the class Transformers exports" if how is Load.TRANSFORMERS else
             "the checkpoint's own modeling code (auto_map; the command passes "
             "--trust-remote-code)")
    return how, [f"{label} {reg.release} has no model of its own for {arch}: it loads it "
                 f"through its Transformers backend, from {where}, where that class is "
                 "compatible with the backend; the cache is planned here from the config's "
                 "layers"]
