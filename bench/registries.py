"""Regenerate ``kvcore/data/registries.json``: the model classes each engine registers, read
from the releases kvplan follows, and the generation classes Transformers exports (the
engines' fallback).

    python bench/registries.py --vllm VLLM_PKG --sglang SGLANG_PKG --transformers TF_PKG \
        --llamacpp TEXT_MODEL_MAP.txt --trtllm MODEL_ARCH_TO_MODULE.txt > kvcore/data/registries.json

VLLM_PKG, SGLANG_PKG and TF_PKG are unpacked release wheels (the ``vllm``, ``sglang`` and
``transformers`` package folders). llama.cpp's and TensorRT-LLM's tables are read from their
source at the commits named below and passed as files of whitespace-separated names.
"""
from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

VLLM_RELEASE = "0.34.0"
SGLANG_RELEASE = "0.5.23"
TRANSFORMERS_RELEASE = "5.19.0"
LLAMACPP_COMMIT = "00bdaa105cb03380daf899b4fc9f026555745269"
TRTLLM_COMMIT = "065ff9e93780bc0bdbfdbc7156a306ca14f5850c"
GENERATION_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")


def _assigned(tree: ast.Module, name: str) -> ast.expr | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == name):
            return node.value
    return None


def vllm_classes(pkg: Path) -> list[str]:
    """Every architecture in vLLM's registry tables (_VLLM_MODELS is their union)."""
    tree = ast.parse((pkg / "model_executor" / "models" / "registry.py").read_text())
    names: set[str] = set()
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if (isinstance(target, ast.Name) and target.id.endswith("_MODELS")
                and target.id not in ("_PREVIOUSLY_SUPPORTED_MODELS", "_OOT_SUPPORTED_MODELS")
                and isinstance(value, ast.Dict)):
            names |= {k.value for k in value.keys if isinstance(k, ast.Constant)}
    return sorted(names)


def vllm_backend_classes(pkg: Path) -> list[str]:
    """The architectures vLLM's registry maps to its Transformers backend
    (_TRANSFORMERS_SUPPORTED_MODELS)."""
    tree = ast.parse((pkg / "model_executor" / "models" / "registry.py").read_text())
    value = _assigned(tree, "_TRANSFORMERS_SUPPORTED_MODELS")
    assert isinstance(value, ast.Dict)
    return sorted(k.value for k in value.keys if isinstance(k, ast.Constant))


def sglang_classes(pkg: Path) -> list[str]:
    """The classes each module of python/sglang/srt/models names as its EntryClass."""
    names: set[str] = set()
    for path in sorted((pkg / "srt" / "models").glob("*.py")):
        value = _assigned(ast.parse(path.read_text()), "EntryClass")
        if value is None:
            continue
        items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        names |= {e.id for e in items if isinstance(e, ast.Name)}
    return sorted(names)


def transformers_classes(pkg: Path) -> list[str]:
    """The generation classes the modeling modules export (``getattr(transformers, arch)``)."""
    names: set[str] = set()
    for path in (pkg / "models").glob("*/modeling_*.py"):
        value = _assigned(ast.parse(path.read_text()), "__all__")
        if isinstance(value, (ast.List, ast.Tuple)):
            names |= {e.value for e in value.elts
                      if isinstance(e, ast.Constant) and str(e.value).endswith(GENERATION_SUFFIXES)}
    return sorted(names)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag in ("vllm", "sglang", "transformers", "llamacpp", "trtllm"):
        ap.add_argument(f"--{flag}", type=Path, required=True)
    a = ap.parse_args()
    out = {
        "vllm": {"release": VLLM_RELEASE,
                 "source": "vllm/model_executor/models/registry.py (the tables _VLLM_MODELS "
                           "joins)",
                 "classes": vllm_classes(a.vllm),
                 "transformers_backend": vllm_backend_classes(a.vllm)},
        "sglang": {"release": SGLANG_RELEASE,
                   "source": "python/sglang/srt/models/*.py (EntryClass)",
                   "classes": sglang_classes(a.sglang)},
        "llama.cpp": {"release": f"master @{LLAMACPP_COMMIT[:8]}",
                      "source": f"conversion/__init__.py TEXT_MODEL_MAP @{LLAMACPP_COMMIT[:8]}",
                      "classes": sorted(set(a.llamacpp.read_text().split()))},
        "trtllm": {"release": f"main @{TRTLLM_COMMIT[:8]}",
                   "source": "tensorrt_llm/_torch/models/_arch_index.py MODEL_ARCH_TO_MODULE "
                             f"@{TRTLLM_COMMIT[:8]}",
                   "classes": sorted(set(a.trtllm.read_text().split()))},
        "transformers": {"release": TRANSFORMERS_RELEASE,
                         "source": "transformers/models/*/modeling_*.py (__all__: the "
                                   "generation classes)",
                         "classes": transformers_classes(a.transformers)},
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
