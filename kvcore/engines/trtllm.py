"""TensorRT-LLM (PyTorch backend) allocation rules.

Sources read (NVIDIA/TensorRT-LLM): ``tensorrt_llm/_torch/pyexecutor/_util.py``
(``KvCacheCreator``: available = (total − peak) × ``free_gpu_memory_fraction`` (0.9) after a
profiling pass), ``tensorrt_llm/_torch/pyexecutor/resource_manager.py``
(``get_cache_size_per_token``: 2 × layers × head_dim × KV heads // tp × dtype bytes, MLA one
latent; ``tokens_per_block`` 32), ``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``
(``[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N).``, N a whole number of
blocks).
"""

from __future__ import annotations

from ..kv import kv_row_bytes
from ..parallel import trtllm_stage_layers
from ..plan import largest
from .base import (
    EngineReport,
    EngineRequest,
    GiB,
    model_ref,
    need_gpu,
    parallel_flags,
    rank_weights,
    single_format,
)

NAME = "trtllm"
#: --pp: the remainder of the layers goes to the first stages (mapping.py Mapping.pp_layers)
STAGE_SPLIT = trtllm_stage_layers
FRACTION = 0.9
TOKENS_PER_BLOCK = 32
FORMATS = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8", "nvfp4": "nvfp4"}
#: CUDA context, cuBLAS and runtime buffers outside the KV pool (rough)
RUNTIME = int(1.0 * GiB)


def plan(req: EngineRequest) -> EngineReport:
    s, opts = req.settings, req.cache
    name = single_format(NAME, opts, FORMATS)
    frac = s.free_gpu_memory_fraction or FRACTION
    tpb = s.tokens_per_block or TOKENS_PER_BLOCK
    p = req.parallel
    weights, shares = rank_weights(req, STAGE_SPLIT)
    act = 2 * 8192 * (req.spec.hidden_size + req.spec.intermediate_size // p.tp) * 2
    # each rank sizes its own pool (its weights, its layers' bytes per token); the
    # executor keeps the smallest token count over the ranks
    per_tokens = [max(1, sum(kv_row_bytes(sh.spec, opts.kv_k, opts.kv_v))) for sh in shares]
    if req.kv_budget_bytes is not None:
        availables = [req.kv_budget_bytes] * len(shares)
    elif any(sh.gpu is None for sh in shares):
        raise need_gpu()
    else:
        availables = [int((sh.gpu.total_bytes - (sh.weights_bytes + act + RUNTIME)) * frac)
                      for sh in shares if sh.gpu is not None]
    stage_tokens = [max(0, a) // t for a, t in zip(availables, per_tokens, strict=True)]
    binding = min(range(len(shares)), key=stage_tokens.__getitem__)
    per_token, available = per_tokens[binding], availables[binding]
    gpu = shares[binding].gpu
    budget = gpu.total_bytes if req.kv_budget_bytes is None and gpu is not None else None
    max_tokens = stage_tokens[binding]
    blocks = -(-max_tokens // tpb)
    tokens = blocks * tpb
    max_ctx = largest(lambda n: n == 0 or tokens >= n * req.sequences, 1 << 31)
    lines = [f"Number of tokens per block: {tpb}.",
             f"[MemUsageChange] Allocated {tokens * per_token / GiB:.2f} GiB for max tokens in "
             f"paged KV cache ({tokens})."]
    cmd = [f"trtllm-serve {model_ref(req.spec)}", f"--max_seq_len {req.context}",
           f"--max_batch_size {req.sequences}", f"--kv_cache_free_gpu_memory_fraction {frac:g}"]
    cmd += parallel_flags(p, "--tp_size", "--pp_size", None)
    notes = []
    offload_tokens = 0
    if s.offload_bytes:
        offload_tokens = s.offload_bytes // per_token
        notes.append(f"host cache (kv_cache_config.host_cache_size) holds about "
                     f"{offload_tokens:,} more tokens per rank")
    if name != "auto":
        notes.append(f"set kv_cache_config.dtype: {name} in the extra LLM API options file")
    return EngineReport(
        engine=NAME,
        budget_bytes=budget,
        weights_bytes=shares[binding].weights_bytes,
        overheads=(("activation peak", act), ("runtime buffers", RUNTIME)),
        kv_pool_bytes=max(0, available),
        kv_tokens=tokens * p.dp,
        blocks=blocks,
        block_tokens=tpb,
        max_concurrency=tokens / max(1, req.context),
        max_sequences=tokens // req.context,
        max_context=max_ctx,
        fits=tokens >= req.context * req.sequences,
        log_lines=tuple(lines),
        command=" ".join(cmd),
        notes=tuple(notes),
        binding_stage=binding,
        offload_tokens=offload_tokens,
        extra={"bytes_per_token": per_token, "weights": weights.format},
    )
