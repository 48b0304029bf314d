"""A mixture of experts' decode step against kvplan's estimate of what it reads: N tokens, each
routed to k of E experts at random (uniformly, a new draw a layer), through the routed experts'
products (fused gate/up, then down) as one grouped GEMM each (torch._grouped_mm, bfloat16: a
group of no tokens reads no weights, as engines' MoE kernels), replayed from a CUDA graph.

kvplan's estimate reads 1 - (1 - k/E)^N of the experts' bytes a step (Weights.step_bytes).
For each N this prints the share of experts the draws routed to, the formula's, the step's
time, and the bytes of the experts routed to over that time: if the step's time follows the
experts it reads, that rate stays level while the share grows from k/E to all of them.

    python bench/moe_roofline.py [--model qwen3-30b-a3b] [--layers 16] [--tokens 1,2,4,…]
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

from kvcore import load_model, weights_for  # noqa: E402
from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.measure import environment  # noqa: E402

TOKENS = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def routing(n: int, experts: int, k: int) -> tuple[torch.Tensor, int]:
    """Group ends (int32, one a group) of n tokens each routed to k distinct experts drawn
    uniformly, and how many experts got a token."""
    chosen = torch.rand(n, experts, device="cuda").topk(k, dim=1).indices.flatten()
    counts = torch.bincount(chosen, minlength=experts)
    return counts.cumsum(0).to(torch.int32), int((counts > 0).sum())


def step(layers: list, ins: torch.Tensor, mids: torch.Tensor) -> None:
    """Each layer's routed experts: gate/up over the tokens' rows grouped by expert, then down
    (the activation's output is a fixed buffer: its cost is not the point)."""
    for gate_up, down, offs in layers:
        torch._grouped_mm(ins, gate_up.transpose(-2, -1), offs=offs)
        torch._grouped_mm(mids, down.transpose(-2, -1), offs=offs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-30b-a3b")
    ap.add_argument("--experts", type=int, default=128)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--layers", type=int, default=16, help="layers timed (of the model's)")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    ap.add_argument("--out", default="bench/results/out")
    args = ap.parse_args()
    spec = load_model(args.model)
    e, k = args.experts, args.top_k
    h = spec.hidden_size
    # the routed experts' width: their parameters over (layers × experts × 3 matrices × h)
    moe_layers = spec.decoder_layers
    inter = spec.params.experts // (moe_layers * e * 3 * h)
    assert moe_layers * e * 3 * h * inter == spec.params.experts, "not this model's experts"
    assert spec.params.active_experts * e == spec.params.experts * k, "not this model's top-k"
    w = weights_for(spec, "bf16")
    expert_bytes = 3 * h * inter * 2  # one expert of one layer
    layers_w = [(torch.randn(e, 2 * inter, h, device="cuda", dtype=torch.bfloat16) * 0.02,
                 torch.randn(e, h, inter, device="cuda", dtype=torch.bfloat16) * 0.02)
                for _ in range(args.layers)]
    bw = measure_bandwidth(torch)["read_bytes_per_s"]
    result = {"env": environment("cuda", torch), "model": args.model, "experts": e, "top_k": k,
              "hidden": h, "expert_intermediate": inter, "layers_timed": args.layers,
              "expert_bytes_per_layer": e * expert_bytes, "measured_read_bytes_per_s": bw,
              "rows": []}
    print(f"{args.model}: {e} experts of {inter}, top-{k}, {args.layers} layers timed "
          f"({args.layers * e * expert_bytes / 1e9:.1f} GB of experts); read {bw / 1e12:.2f} "
          "TB/s measured", flush=True)
    for n in (int(t) for t in args.tokens.split(",")):
        torch.manual_seed(n)
        draws = [routing(n, e, k) for _ in range(args.layers)]
        layers = [(gu, dn, offs) for (gu, dn), (offs, _) in zip(layers_w, draws, strict=True)]
        touched = sum(t for _, t in draws)
        ins = torch.randn(n * k, h, device="cuda", dtype=torch.bfloat16)
        mids = torch.randn(n * k, inter, device="cuda", dtype=torch.bfloat16)
        seconds = graph_time([partial(step, layers, ins, mids)], rep_ms=200.0)
        share = touched / (args.layers * e)
        formula = 1 - (1 - k / e) ** n
        read = touched * expert_bytes
        row = {"tokens": n, "seconds": seconds, "experts_routed_to": touched,
               "share_routed_to": share, "share_formula": formula,
               "share_step_bytes": w.expert_share(n),
               "bytes_routed_to": read, "bytes_per_s": read / seconds,
               "estimate_seconds": read / bw}
        result["rows"].append(row)
        write_json(args.out, "moe-roofline.json", result)
        print(f"N={n:4d}  {seconds * 1e6:9.1f} µs  experts routed to {share:6.1%} (formula "
              f"{formula:6.1%})  {read / seconds / 1e12:.2f} TB/s over them", flush=True)
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, default=str))


if __name__ == "__main__":
    main()
