"""kvcore: byte-exact KV-cache arithmetic, model and GPU catalogs, and the fit solver.

Standard library only; torch lives in ``kvcore.kernels`` and ``kvcore.measure`` (optional).
"""

from .catalog import CatalogEntry, load_model, model_catalog, parse_config_text
from .errors import ConfigError, HubError, InputError, KvplanError, UnknownNameError
from .formats import FORMATS, KVFormat, format_names, get_format
from .gpus import GPU, counted_gpu, find_gpu, gpu_catalog, gpu_selection
from .hf import spec_from_config
from .kv import (
    CacheOptions,
    CacheSize,
    GroupCache,
    bytes_per_token,
    cache_size,
    marginal_bytes_per_token,
)
from .model import LayerGroup, LayerKind, ModelSpec, ParamCount
from .plan import Decode, Overhead, Plan, PlanRequest, plan
from .report import model_summary, plan_to_dict
from .units import format_bytes, parse_bytes, parse_count, parse_tokens
from .weights import WEIGHT_FORMATS, WeightFormat, Weights, get_weight_format, weights_for

__all__ = [
    "FORMATS",
    "GPU",
    "WEIGHT_FORMATS",
    "CacheOptions",
    "CacheSize",
    "CatalogEntry",
    "ConfigError",
    "Decode",
    "GroupCache",
    "HubError",
    "InputError",
    "KVFormat",
    "KvplanError",
    "LayerGroup",
    "LayerKind",
    "ModelSpec",
    "Overhead",
    "ParamCount",
    "Plan",
    "PlanRequest",
    "UnknownNameError",
    "WeightFormat",
    "Weights",
    "bytes_per_token",
    "cache_size",
    "counted_gpu",
    "find_gpu",
    "format_bytes",
    "format_names",
    "get_format",
    "get_weight_format",
    "gpu_catalog",
    "gpu_selection",
    "load_model",
    "marginal_bytes_per_token",
    "model_catalog",
    "model_summary",
    "parse_bytes",
    "parse_config_text",
    "parse_count",
    "parse_tokens",
    "plan",
    "plan_to_dict",
    "spec_from_config",
    "weights_for",
]
__version__ = "0.1.0"
