"""A card reading weights that stay in pinned host memory, measured: what vLLM's
``--cpu-offload-gb`` does (its UVA offloader leaves the card a view of the host pages, and every
matrix product reads them over the host link) against the copy rate over the same link and
the card's own memory.

For a matrix of fp16 weights in pinned host memory, seen by the card through its unified
virtual address, this times: a sum over it (every byte read once), the products a decode step
runs on it (a vector, and 8 and 64 rows of activations) and a prefill chunk's (2,048 rows);
the same products over a copy in the card's memory; and a pinned host-to-card copy.

    python bench/uva_read.py [--out DIR]

Writes uva-read.json (with the usual env block and the catalog's host link for the card).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cuda_timing import timed  # noqa: E402  (bench/cuda_timing.py, beside this file)

from kvcore import find_gpu  # noqa: E402
from kvcore.measure import environment  # noqa: E402

MiB = 2**20
#: the matrix: 4,096 columns (a hidden size), rows for 512 MiB of fp16
COLS = 4096
ROWS = 512 * MiB // (2 * COLS)
ACTIVATION_ROWS = (1, 8, 64, 2048)


class _Device:
    """A pinned host tensor as a CUDA array (its address is the card's too, under UVA)."""

    def __init__(self, t: torch.Tensor) -> None:
        self.__cuda_array_interface__ = {
            "shape": tuple(t.shape), "typestr": "<f2", "data": (t.data_ptr(), False),
            "version": 3, "strides": None}


def triton_sum(host: torch.Tensor) -> float | None:
    """Seconds for a Triton kernel to sum the pinned tensor through its raw address (the
    fallback where torch will not wrap the pointer); None where Triton is missing."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def _sum(addr, out, n, BLOCK: tl.constexpr):
        ptr = addr.to(tl.pointer_type(tl.float16))
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(ptr + i, mask=i < n, other=0.0).to(tl.float32)
        tl.atomic_add(out, tl.sum(x, axis=0))

    n = host.numel()
    out = torch.zeros(1, device="cuda", dtype=torch.float32)
    block = 8192
    return timed(lambda: _sum[(triton.cdiv(n, block),)](host.data_ptr(), out, n, BLOCK=block))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    torch.manual_seed(0)
    host = torch.randn(ROWS, COLS, dtype=torch.float16).pin_memory()
    size = host.numel() * host.element_size()
    on_card = host.to("cuda")
    rows: dict[str, Any] = {"matrix": [ROWS, COLS], "bytes": size}
    try:
        view = torch.as_tensor(_Device(host), device="cuda")
        rows["view"] = "torch.as_tensor over __cuda_array_interface__"
        assert torch.equal(view[:4], on_card[:4]), "the view reads other bytes"
    except Exception as exc:  # noqa: BLE001 - recorded, the Triton read stands in
        view = None
        rows["view_error"] = f"{type(exc).__name__}: {exc}"
    staging = torch.empty_like(on_card)
    rows["pinned_copy_bytes_per_s"] = size / timed(lambda: staging.copy_(host, non_blocking=True))
    rows["card_sum_bytes_per_s"] = size / timed(lambda: on_card.sum(dtype=torch.float32))
    if view is not None:
        rows["uva_sum_bytes_per_s"] = size / timed(lambda: view.sum(dtype=torch.float32))
    else:
        seconds = triton_sum(host)
        if seconds is not None:
            rows["uva_sum_bytes_per_s"] = size / seconds
            rows["view"] = "Triton load through the raw address"
    products = []
    for m in ACTIVATION_ROWS:
        x = torch.randn(m, COLS, dtype=torch.float16, device="cuda")
        row: dict[str, Any] = {"rows": m}
        row["card_seconds"] = timed(lambda x=x: x @ on_card.T)
        if view is not None:
            row["uva_seconds"] = timed(lambda x=x: x @ view.T)
            row["uva_bytes_per_s"] = size / row["uva_seconds"]
            # how many times over its bytes the product takes, against the sum's one read
            row["reads_vs_sum"] = row["uva_seconds"] / (size / rows["uva_sum_bytes_per_s"])
        products.append(row)
    rows["products"] = products
    gpu = torch.cuda.get_device_name()
    card = "h200" if "H200" in gpu else None
    link = find_gpu(card).host_link_bytes_per_s if card else None
    result = {"env": environment("cuda", torch), "card": card, "catalog_host_link_bytes_per_s": link, **rows}
    if link and "uva_sum_bytes_per_s" in rows:
        result["uva_share_of_link"] = rows["uva_sum_bytes_per_s"] / link
        result["pinned_copy_share_of_link"] = rows["pinned_copy_bytes_per_s"] / link
    out = Path(args.out) / "uva-read.json"
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
