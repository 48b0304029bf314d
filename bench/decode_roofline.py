"""The decode estimate's two ceilings, against the card: a decode step of N tokens through a
dense model's weights in bfloat16, the matrix products an engine runs (fused QKV, O, fused
gate/up, down in every layer, and the lm_head; attention apart: bench/decode.py times it),
replayed from a CUDA graph, against kvplan's estimate of the same step: its weight bytes at
the card's bandwidth or its FLOPs (2 a weight a token) at the card's dense FP16/BF16 peak,
whichever takes longer.

    python bench/decode_roofline.py [--model qwen3-8b] [--tokens 1,8,32,…] [--out DIR]

Both ceilings are also measured in the same run: the streaming read bandwidth, and the best of
three large bfloat16 GEMMs. Writes roofline.json and prints a table: for each N the measured
step, kvplan's estimate from the catalog's figures, the same from the measured ceilings, and
the share of the estimate the GEMMs reach.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode import graph_time, write_json  # noqa: E402  (bench/decode.py, beside this file)

from kvcore import find_gpu, load_model, weights_for  # noqa: E402
from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.measure import environment  # noqa: E402

TOKENS = [1, 8, 32, 64, 128, 256, 512, 1024, 2048]


def shapes(model: str) -> tuple[list[tuple[int, int]], int, int]:
    """(out, in) of one layer's products, the lm_head's, and the layers, from the catalog's
    config: fused QKV, O, fused gate/up, down (a dense model's)."""
    spec = load_model(model)
    g = spec.groups[0]
    h, heads, kv, hd = spec.hidden_size, spec.num_attention_heads, g.n_kv_heads, g.head_dim_k
    inter = spec.intermediate_size
    if spec.params.experts:
        raise SystemExit(f"{model} is a mixture of experts: give a dense model")
    layer = [((heads + 2 * kv) * hd, h), (h, heads * hd), (2 * inter, h), (h, inter)]
    return layer, spec.vocab_size, spec.decoder_layers


def gemm_peak() -> float:
    """FLOP/s of the best of three large bfloat16 GEMMs (8192 × 8192 × 8192)."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(a)
    best = graph_time([lambda: torch.mm(a, b, out=out)])
    for _ in range(2):
        best = min(best, graph_time([lambda: torch.mm(a, b, out=out)]))
    return 2 * 8192**3 / best


def step(weights: list, head: torch.Tensor, ins: dict, outs: dict, logits: torch.Tensor) -> None:
    """One decode step's products: each layer's weights [out, in] times the input of their
    width (the tokens' hidden states, or the attention's / activation's output), then the
    lm_head."""
    for ws in weights:
        for w in ws:
            torch.matmul(ins[w.shape[1]], w.t(), out=outs[w.shape[0]])
    torch.matmul(ins[head.shape[1]], head.t(), out=logits)


def roofline_args(tokens: list[int]) -> argparse.Namespace:
    """The command line of a roofline benchmark: the model, the catalog's card to estimate
    with, the token counts and the output folder."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--gpu", default="h200", help="the catalog's card to estimate with")
    ap.add_argument("--tokens", default=",".join(map(str, tokens)))
    ap.add_argument("--out", default="bench/results/out")
    return ap.parse_args()


def main() -> None:
    args = roofline_args(TOKENS)
    layer, vocab, layers = shapes(args.model)
    spec = load_model(args.model)
    gpu = find_gpu(args.gpu)
    h = spec.hidden_size
    weights = [[torch.randn(o, i, device="cuda", dtype=torch.bfloat16) * 0.02 for o, i in layer]
               for _ in range(layers)]
    head = torch.randn(vocab, h, device="cuda", dtype=torch.bfloat16) * 0.02
    params = sum(o * i for o, i in layer) * layers + vocab * h
    # kvplan's active parameters: the same products, and the layers' norms
    planned = spec.params.active
    assert abs(planned - params) / planned < 0.001, (planned, params)
    nbytes = 2 * params
    assert abs(weights_for(spec, "bf16").active_bytes - nbytes) / nbytes < 0.001
    bw = measure_bandwidth(torch)["read_bytes_per_s"]
    peak = gemm_peak()
    result = {"env": environment("cuda", torch), "model": args.model, "gpu": gpu.id,
              "params": params, "weight_bytes": nbytes,
              "catalog_bandwidth_bytes_per_s": gpu.bandwidth_bytes_per_s,
              "catalog_matmul_flops_per_s": gpu.matmul_flops_per_s,
              "measured_read_bytes_per_s": bw, "measured_gemm_flops_per_s": peak, "rows": []}
    print(f"{args.model}: {params / 1e9:.3f} B parameters, {nbytes / 1e9:.2f} GB; read "
          f"{bw / 1e12:.2f} TB/s, GEMM {peak / 1e12:.0f} TFLOPS measured", flush=True)
    for n in (int(t) for t in args.tokens.split(",")):
        ins = {i: torch.randn(n, i, device="cuda", dtype=torch.bfloat16) for _, i in layer}
        outs = {o: torch.empty(n, o, device="cuda", dtype=torch.bfloat16) for o, _ in layer}
        logits = torch.empty(n, vocab, device="cuda", dtype=torch.bfloat16)
        seconds = graph_time([partial(step, weights, head, ins, outs, logits)], rep_ms=200.0)
        flops = 2 * n * params
        estimate = max(nbytes / gpu.bandwidth_bytes_per_s, flops / gpu.matmul_flops_per_s)
        measured_ceiling = max(nbytes / bw, flops / peak)
        row = {"tokens": n, "seconds": seconds, "flops": flops,
               "estimate_seconds": estimate,
               "bound": ("compute" if flops / gpu.matmul_flops_per_s
                         > nbytes / gpu.bandwidth_bytes_per_s else "bandwidth"),
               "measured_ceiling_seconds": measured_ceiling,
               "share_of_estimate": estimate / seconds,
               "share_of_measured_ceiling": measured_ceiling / seconds,
               "achieved_bytes_per_s": nbytes / seconds, "achieved_flops_per_s": flops / seconds}
        result["rows"].append(row)
        write_json(args.out, "roofline.json", result)
        print(f"N={n:5d}  {seconds * 1e3:8.3f} ms  estimate {estimate * 1e3:7.3f} ms "
              f"({row['bound']}, {row['share_of_estimate']:.0%} of it reached)  measured "
              f"ceilings {measured_ceiling * 1e3:7.3f} ms ({row['share_of_measured_ceiling']:.0%})"
              f"  {row['achieved_bytes_per_s'] / 1e12:.2f} TB/s "
              f"{row['achieved_flops_per_s'] / 1e12:.0f} TFLOPS", flush=True)
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, default=str))


if __name__ == "__main__":
    main()
