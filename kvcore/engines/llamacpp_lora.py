"""llama.cpp's LoRA adapters (``llama-server --lora FILE``): their tensors beside the model's.

Rules (ggml-org/llama.cpp, ``src/llama-adapter.cpp · llama_adapter_lora_init_impl``): an
adapter is a GGUF of ``general.type`` "adapter" and ``adapter.type`` "lora" whose tensors come
in pairs, ``NAME.lora_a`` and ``NAME.lora_b``, NAME a tensor of the model (``*_norm.weight``
tensors are skipped). Each pair is allocated, as stored (F16, F32, Q8_0 ...), in the buffer
type of the model tensor it adapts: on the card that holds that layer, in host memory for a
layer kept there (and for the input embedding, which stays in host memory), and in host memory
where the model tensor sits in a repacked CPU buffer. So an adapter splits over the devices as
the model's layers do, and kvplan adds each block's pairs to that block's weights.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, KvplanError, shown
from .llamacpp_offload import BLOCK_TENSOR, Block, gguf_blocks

__all__ = ["Adapter", "adapter_blocks", "add_blocks", "read_adapter"]

_PAIR = re.compile(r"^(.*)\.lora_[ab]$")


@dataclass(frozen=True)
class Adapter:
    """A LoRA adapter's tensors: (the model tensor it adapts, bytes) for each of A and B."""

    name: str
    tensors: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(n for _, n in self.tensors)


def read_adapter(path: str | Path) -> Adapter:
    """The adapter GGUF at ``path`` (a local file), refusing a file that is not a LoRA."""
    from ..gguf import read_gguf

    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"--lora takes a LoRA adapter GGUF on this machine; no file "
                         f"{shown(str(path))}", field="lora")
    try:
        g = read_gguf(p)
    except KvplanError as exc:
        exc.field = "lora"
        raise
    except (OSError, ValueError) as exc:  # a truncated or foreign file
        raise InputError(f"--lora {shown(str(path))} is not a GGUF file kvplan can read "
                         f"({exc})", field="lora") from None
    kind = g.metadata.get("general.type")
    if kind != "adapter" or g.metadata.get("adapter.type") != "lora":
        raise InputError(f"--lora {shown(p.name)} is not a LoRA adapter (general.type "
                         f"{shown(kind)}; llama.cpp takes general.type = adapter, adapter.type "
                         "= lora)", field="lora")
    pairs = []
    for t in g.tensors:
        m = _PAIR.match(t.name)
        if m is None:
            if t.name.endswith("_norm.weight"):
                continue  # llama.cpp skips them
            raise InputError(f"--lora {shown(p.name)}: tensor {shown(t.name)} is neither a "
                             "lora_a nor a lora_b (llama.cpp refuses it)", field="lora")
        pairs.append((m.group(1), t.nbytes))
    return Adapter(p.name, tuple(pairs))


def adapter_blocks(adapters: tuple[Adapter, ...], n_layers: int
                   ) -> tuple[tuple[Block, ...], int, int]:
    """(each decoder block's adapter bytes, as llama.cpp's placement patterns sort the
    tensors they adapt; the output layer's; the input embedding's, in host memory) over
    ``adapters``, refusing one that adapts a block the model does not have."""
    tensors = [(name, n) for a in adapters for name, n in a.tensors]
    for a in adapters:
        last = max((int(hit.group(1)) for name, _ in a.tensors
                    if (hit := BLOCK_TENSOR.match(name)) is not None), default=-1)
        if last >= n_layers:
            raise InputError(f"--lora {shown(a.name)} adapts block {last}, and the model has "
                             f"{n_layers} blocks (0 to {n_layers - 1}): an adapter of another "
                             "model?", field="lora")
    blocks = gguf_blocks(tensors, n_layers)
    inp = sum(n for name, n in tensors if name.startswith("token_embd."))
    # the output layer and anything else outside the blocks go with the output layer
    out = sum(n for name, n in tensors
              if not BLOCK_TENSOR.match(name) and not name.startswith("token_embd."))
    return blocks, out, inp


def add_blocks(a: tuple[Block, ...], b: tuple[Block, ...]) -> tuple[Block, ...]:
    """Block by block, ``a`` and ``b`` together."""
    return tuple(Block(x.other + y.other,
                       (x.ffn[0] + y.ffn[0], x.ffn[1] + y.ffn[1], x.ffn[2] + y.ffn[2]),
                       (x.exps[0] + y.exps[0], x.exps[1] + y.exps[1], x.exps[2] + y.exps[2]))
                 for x, y in zip(a, b, strict=True))
