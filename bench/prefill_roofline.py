"""The prefill estimate against the card: a dense model's prompt of N tokens through its layers
in bfloat16, the products an engine runs (fused QKV, causal attention by torch's
scaled_dot_product_attention over its KV heads repeated, fused kernels only, O, fused gate/up, down; the norms, the
rotary embedding and the activation left out, being elementwise), then the lm_head on the
last token, timed with CUDA events, against kvplan's prefill estimate of the same prompt
(``plan(...).prefill``: its FLOPs at the card's dense FP16/BF16 peak).

    python bench/prefill_roofline.py [--model qwen3-8b] [--tokens 4096,16384,…] [--out DIR]

Writes prefill-roofline.json and prints, for each N, the time, the estimate and the share of
the estimate reached, with the time the attention alone took.
"""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cuda_timing import timed  # noqa: E402  (bench/cuda_timing.py, beside this file)
from decode import write_json  # noqa: E402  (bench/decode.py, beside this file)
from decode_roofline import gemm_peak, roofline_args, shapes  # noqa: E402

from kvcore import CacheOptions, PlanRequest, find_gpu, load_model, plan  # noqa: E402
from kvcore.measure import environment  # noqa: E402

TOKENS = [4096, 16384, 32768, 65536, 131072]
#: the attention kernels a prefill may use: fused ones, never the math fallback
FUSED = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]


def prompt(weights: list, head: torch.Tensor, x: torch.Tensor, heads: int, kv: int, hd: int,
           attention: bool = True, products: bool = True) -> None:
    """One prompt through the layers: each layer's products and its causal attention (either
    alone where the other is switched off, to time them apart)."""
    n = x.shape[0]
    for wqkv, wo, wgu, wd in weights:
        if products:
            qkv = x @ wqkv.t()
        else:
            qkv = torch.empty(n, (heads + 2 * kv) * hd, device=x.device, dtype=x.dtype)
        if attention:
            # [1, heads, n, hd], each KV head repeated for its query heads: the fused kernels
            # (flash, cuDNN) take these; the math fallback would hold n × n scores
            q = qkv[:, :heads * hd].view(n, heads, hd).transpose(0, 1)[None]
            k = qkv[:, heads * hd:(heads + kv) * hd].view(n, kv, hd).transpose(0, 1)
            v = qkv[:, (heads + kv) * hd:].view(n, kv, hd).transpose(0, 1)
            k = k.repeat_interleave(heads // kv, dim=0)[None]
            v = v.repeat_interleave(heads // kv, dim=0)[None]
            with sdpa_kernel(FUSED):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            attn = out[0].transpose(0, 1).reshape(n, heads * hd)
        else:
            attn = qkv[:, :heads * hd]
        if products:
            h = attn @ wo.t()
            gu = h @ wgu.t()
            gu[:, : gu.shape[1] // 2] @ wd.t()
    if products:
        x[-1:] @ head.t()


def main() -> None:
    args = roofline_args(TOKENS)
    layer, vocab, layers = shapes(args.model)
    spec = load_model(args.model)
    gpu = find_gpu(args.gpu)
    g = spec.groups[0]
    heads, kv, hd = spec.num_attention_heads, g.n_kv_heads, g.head_dim_k
    if len(spec.groups) != 1 or g.kind.value != "full":
        raise SystemExit(f"{args.model}: give a model of full-attention layers only")
    weights = [[torch.randn(o, i, device="cuda", dtype=torch.bfloat16) * 0.02 for o, i in layer]
               for _ in range(layers)]
    head = torch.randn(vocab, spec.hidden_size, device="cuda", dtype=torch.bfloat16) * 0.02
    peak = gemm_peak()
    result = {"env": environment("cuda", torch), "model": args.model, "gpu": gpu.id,
              "catalog_matmul_flops_per_s": gpu.matmul_flops_per_s,
              "measured_gemm_flops_per_s": peak, "rows": []}
    print(f"{args.model}: {layers} layers, {heads}/{kv} heads of {hd}; GEMM {peak / 1e12:.0f} "
          "TFLOPS measured", flush=True)
    for n in (int(t) for t in args.tokens.split(",")):
        est = plan(PlanRequest(spec=spec, context=n, cache=CacheOptions(kv_k="bf16", kv_v="bf16"),
                               weights="bf16", gpu=gpu)).prefill
        x = torch.randn(n, spec.hidden_size, device="cuda", dtype=torch.bfloat16)
        seconds = timed(partial(prompt, weights, head, x, heads, kv, hd), repeats=2)
        attention = timed(partial(prompt, weights, head, x, heads, kv, hd, products=False), repeats=2)
        row = {"tokens": n, "seconds": seconds, "attention_seconds": attention,
               "estimate_seconds": est.seconds, "estimate_flops": est.flops,
               "estimate_attention_flops": est.attention_flops,
               "share_of_estimate": est.seconds / seconds,
               "achieved_flops_per_s": est.flops / seconds,
               "attention_flops_per_s": est.attention_flops / attention}
        result["rows"].append(row)
        write_json(args.out, "prefill-roofline.json", result)
        print(f"N={n:7,d}  {seconds:7.3f} s (attention {attention:6.3f} s)  estimate "
              f"{est.seconds:7.3f} s  {row['share_of_estimate']:.0%} of it reached  "
              f"{row['achieved_flops_per_s'] / 1e12:.0f} TFLOPS, attention "
              f"{row['attention_flops_per_s'] / 1e12:.0f}", flush=True)
        torch.cuda.empty_cache()
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, default=str))


if __name__ == "__main__":
    main()
