"""Write GGUF files for tests: a header (metadata, tensor table) and a sparse data section of
the size the tensors need, so that a file of many gigabytes costs nothing on disk."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

#: (values per block, bytes per block) of the types tests use, from ggml's block layouts
BLOCKS = {0: (1, 4), 1: (1, 2), 8: (32, 34), 12: (256, 144), 14: (256, 210), 30: (1, 2),
          39: (32, 17), 2: (32, 18)}


class U32(int):
    pass


class U64(int):
    pass


class F32(float):
    pass


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _typed(v: Any) -> tuple[int, bytes]:
    if isinstance(v, bool):
        return 7, struct.pack("<?", v)
    if isinstance(v, U64):
        return 10, struct.pack("<Q", v)
    if isinstance(v, int):
        return 4, struct.pack("<I", v)
    if isinstance(v, float):
        return 6, struct.pack("<f", v)
    if isinstance(v, str):
        return 8, _string(v)
    if isinstance(v, list):
        inner = [_typed(x) for x in v]
        itype = inner[0][0] if inner else 4
        return 9, struct.pack("<IQ", itype, len(v)) + b"".join(b for _, b in inner)
    raise TypeError(type(v))


def nbytes(shape: tuple[int, ...], type_id: int) -> int:
    block, size = BLOCKS[type_id]
    rows = 1
    for d in shape[1:]:
        rows *= d
    return rows * shape[0] // block * size


def write_gguf(path: Path, meta: dict[str, Any], tensors: list[tuple[str, tuple[int, ...], int]],
               *, version: int = 3, cut: int = 0, alignment: int = 32) -> int:
    """Write a GGUF file; returns the bytes of its tensors. ``cut`` bytes short of whole."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(meta))
    for key, value in meta.items():
        t, b = _typed(value)
        head += _string(key) + struct.pack("<I", t) + b
    offset = 0
    for name, shape, t in tensors:
        head += _string(name) + struct.pack("<I", len(shape))
        head += b"".join(struct.pack("<Q", d) for d in shape)
        head += struct.pack("<IQ", t, offset)
        offset += -(-nbytes(shape, t) // alignment) * alignment
    start = -(-len(head) // alignment) * alignment
    with path.open("wb") as f:
        f.write(head)
        f.truncate(start + offset - cut)
    return sum(nbytes(s, t) for _, s, t in tensors)


def dense_model(arch: str, *, layers: int, hidden: int, heads: int, kv_heads: int,
                head_dim: int, ffn: int, vocab: int, ctx: int, tied: bool = False,
                quant: int = 12, head_type: int = 14, extra: dict[str, Any] | None = None,
                experts: int = 0, used: int = 0, expert_ffn: int = 0,
                ) -> tuple[dict[str, Any], list[tuple[str, tuple[int, ...], int]]]:
    """Metadata and tensor table of a transformer as llama.cpp's converter lays it out."""
    meta: dict[str, Any] = {
        "general.architecture": arch, "general.name": f"test-{arch}", "general.file_type": 15,
        f"{arch}.block_count": layers, f"{arch}.context_length": ctx,
        f"{arch}.embedding_length": hidden, f"{arch}.feed_forward_length": ffn,
        f"{arch}.attention.head_count": heads, f"{arch}.attention.head_count_kv": kv_heads,
        f"{arch}.attention.key_length": head_dim, f"{arch}.attention.value_length": head_dim,
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
    }
    if experts:
        meta[f"{arch}.expert_count"] = experts
        meta[f"{arch}.expert_used_count"] = used
        meta[f"{arch}.expert_feed_forward_length"] = expert_ffn
    meta.update(extra or {})
    tensors: list[tuple[str, tuple[int, ...], int]] = [("token_embd.weight", (hidden, vocab),
                                                        quant)]
    for i in range(layers):
        b = f"blk.{i}."
        tensors += [(b + "attn_norm.weight", (hidden,), 0),
                    (b + "attn_q.weight", (hidden, heads * head_dim), quant),
                    (b + "attn_k.weight", (hidden, kv_heads * head_dim), quant),
                    (b + "attn_v.weight", (hidden, kv_heads * head_dim), quant),
                    (b + "attn_output.weight", (heads * head_dim, hidden), quant),
                    (b + "ffn_norm.weight", (hidden,), 0)]
        if experts:
            tensors += [(b + "ffn_gate_inp.weight", (hidden, experts), 0),
                        (b + "ffn_gate_exps.weight", (hidden, expert_ffn, experts), quant),
                        (b + "ffn_up_exps.weight", (hidden, expert_ffn, experts), quant),
                        (b + "ffn_down_exps.weight", (expert_ffn, hidden, experts), quant)]
        else:
            tensors += [(b + "ffn_gate.weight", (hidden, ffn), quant),
                        (b + "ffn_up.weight", (hidden, ffn), quant),
                        (b + "ffn_down.weight", (ffn, hidden), quant)]
    tensors.append(("output_norm.weight", (hidden,), 0))
    if not tied:
        tensors.append(("output.weight", (hidden, vocab), head_type))
    return meta, tensors
