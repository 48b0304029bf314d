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
    weights, shares = rank_weights(req)
    sh = shares[0]
    per_token = max(1, sum(kv_row_bytes(sh.spec, opts.kv_k, opts.kv_v)))
    act = 2 * 8192 * (req.spec.hidden_size + req.spec.intermediate_size // p.tp) * 2
    if req.kv_budget_bytes is not None:
        available = req.kv_budget_bytes
        budget = None
    elif sh.gpu is None:
        raise need_gpu()
    else:
        total = sh.gpu.total_bytes
        peak = max(x.weights_bytes for x in shares) + act + RUNTIME
        available = int((total - peak) * frac)
        budget = total
    max_tokens = max(0, available) // per_token
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
        weights_bytes=max(x.weights_bytes for x in shares),
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
        offload_tokens=offload_tokens,
        extra={"bytes_per_token": per_token, "weights": weights.format},
    )
