"""What the engines make of a model kvplan sizes under ``--engine raw`` only."""

import copy
from typing import Any

import pytest

from kvcore import CacheOptions, InputError, find_gpu, get_format
from kvcore.engines import EngineReport, EngineRequest, engine_plan
from kvcore.model import ModelSpec

#: the engines that refuse such a model
ENGINES = ["vllm", "sglang", "llama.cpp", "trtllm"]


def refusal_and_raw(spec: ModelSpec, engine: str, gpu: str) -> tuple[InputError, EngineReport]:
    """The error ``engine`` refuses a 32k-token f16 plan of ``spec`` on ``gpu`` with, and raw's
    plan of the same request."""
    f16 = get_format("f16")
    req = EngineRequest(spec=spec, context=32768, sequences=1,
                        cache=CacheOptions(kv_k=f16, kv_v=f16), gpus=(find_gpu(gpu),))
    with pytest.raises(InputError) as e:
        engine_plan(engine, req)
    return e.value, engine_plan("raw", req)


def text_variant(config: dict[str, Any], *drop: str, **over: Any) -> dict[str, Any]:
    """A copy of a config that nests its decoder, the ``text_config`` fields ``over`` set and
    those named in ``drop`` left out."""
    out = copy.deepcopy(config)
    out["text_config"].update(over)
    for name in drop:
        del out["text_config"][name]
    return out
