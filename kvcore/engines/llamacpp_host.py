"""What llama-server keeps in host memory beside the model and its caches: the prompt cache
and the context checkpoints (docs/ENGINES.md L9).

Sources read (ggml-org/llama.cpp, tools/server/server-context.cpp ``load_model`` and
``update_slots``, tools/server/server-task.cpp ``server_prompt_cache``, common/common.h,
common/arg.cpp, src/llama-kv-cache.cpp ``state_write``, src/llama-memory-recurrent.cpp
``state_write``):

- ``--cache-ram N`` (MiB, default 8192; 0 off; -1 no byte limit): one prompt cache a process,
  made at every launch. Saved prompts (the slot's whole sequence state, its checkpoints
  copied beside it) are evicted oldest first to keep the held bytes within the limit; with -1
  only the token limit, the total context n_ctx, bounds it.
- ``--ctx-checkpoints N`` (default 32 a slot; 0 off): where a sequence cannot be cut back in
  place (a recurrent or hybrid model) or the model has sliding-window layers (without
  --swa-full), each slot keeps up to N checkpoints in host memory, each the partial state of
  its sequence: the cells it holds in the window layers' cache (up to that cache's cells a
  stream: the window, times the sequences where the cache is unified, and a micro-batch) and
  the recurrent state, the full-attention layers left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import InputError
from ..formats import get_format
from ..kv import CacheOptions
from ..model import LayerGroup, LayerKind, ModelSpec
from ..units import format_bytes
from .base import MiB

#: common.h cache_ram_mib
CACHE_RAM_MIB = 8192
#: common.h n_ctx_checkpoints
CTX_CHECKPOINTS = 32
#: a serialized cell's metadata: its position, its count of sequence ids and the one id
CELL_META = 12
#: a layer's K or V block header in a serialized state: its type and its row size
LAYER_HEADER = 12
#: a serialized state's fixed fields: the stream and cell counts, v_trans and n_layer
STATE_HEADER = 16


@dataclass(frozen=True)
class ServerHost:
    """llama-server's host memory for one launch: the prompt cache's bound, one context
    checkpoint's bytes and how many a slot keeps (0 where the model takes none)."""

    prompt_cache_bytes: int
    #: --cache-ram as given or its default (MiB; -1: no byte limit)
    cache_ram_mib: int
    checkpoint_bytes: int
    checkpoints: int
    slots: int
    #: what a checkpoint holds, in words ("" where none is taken)
    holds: str

    @property
    def checkpoints_bytes(self) -> int:
        return self.checkpoint_bytes * self.checkpoints * self.slots

    @property
    def total_bytes(self) -> int:
        return self.prompt_cache_bytes + self.checkpoints_bytes

    def as_dict(self) -> dict[str, int | str]:
        return {"prompt_cache_bytes": self.prompt_cache_bytes, "cache_ram_mib": self.cache_ram_mib,
                "checkpoint_bytes": self.checkpoint_bytes, "checkpoints_per_slot": self.checkpoints,
                "slots": self.slots, "checkpoints_bytes": self.checkpoints_bytes,
                "total_bytes": self.total_bytes, "checkpoint_holds": self.holds}

    def note(self) -> str | None:
        """The plan's note on this memory (None where there is none)."""
        parts = []
        if self.cache_ram_mib > 0:
            parts.append(f"a prompt cache of up to {format_bytes(self.prompt_cache_bytes, 2)} "
                         f"(--cache-ram {self.cache_ram_mib}; 0 turns it off)")
        elif self.cache_ram_mib < 0:
            parts.append(f"a prompt cache without a byte limit (--cache-ram -1): up to the "
                         f"total context of saved prompts, about "
                         f"{format_bytes(self.prompt_cache_bytes, 2)}")
        if self.checkpoints_bytes:
            slots = f"{self.slots} slots" if self.slots > 1 else "one slot"
            parts.append(f"up to {self.checkpoints} context checkpoints a slot of "
                         f"{format_bytes(self.checkpoint_bytes, 2)} each ({self.holds}), "
                         f"{format_bytes(self.checkpoints_bytes, 2)} for {slots} "
                         "(--ctx-checkpoints N lowers it)")
        if not parts:
            return None
        return "llama-server keeps in host memory, beside the model: " + " and ".join(parts)


def row_bytes(fmt_name: str, width: int) -> int:
    """A llama.cpp cache row's bytes: ``width`` values in ``fmt_name``'s whole blocks
    (ggml_row_size)."""
    fmt = get_format(fmt_name)
    if width % fmt.block_values:
        raise InputError(f"llama.cpp needs rows that are whole {fmt.name} blocks: "
                         f"{width} values is not a multiple of {fmt.block_values}", field="kv")
    return width // fmt.block_values * fmt.block_bytes


def token_bytes(groups: Iterable[LayerGroup], opts: CacheOptions) -> int:
    """Bytes a token (a cell) takes in the K and V rows of these attention layers."""
    return sum(g.count * (row_bytes(opts.kv_k.name, g.n_kv_heads * g.head_dim_k)
                          + (row_bytes(opts.kv_v.name, g.n_kv_heads * g.head_dim_v)
                             if g.head_dim_v else 0))
               for g in groups)


def checkpoint(spec: ModelSpec, opts: CacheOptions, cells: int) -> tuple[int, str]:
    """(bytes, what it holds) of one context checkpoint of a sequence: the ``cells`` it holds
    in the window layers' cache (0 under --swa-full), in their K and V rows, each cell's
    metadata and the layer headers, and the recurrent state; (0, "") where the model takes
    none."""
    groups = spec.groups_for(mtp=False)
    window = [g for g in groups if g.kind in (LayerKind.SLIDING, LayerKind.CHUNKED)]
    recurrent = [g for g in groups if g.kind.is_recurrent]
    total, what = 0, []
    if window and cells:
        per_cell = token_bytes(window, opts)
        layers = sum(g.count for g in window)
        total += STATE_HEADER + cells * (per_cell + CELL_META) + 2 * layers * LAYER_HEADER
        what.append(f"{cells:,} cells of the window layers")
    if recurrent:
        state = sum(g.count * g.state_values for g in recurrent) * 4
        layers = sum(g.count for g in recurrent)
        total += STATE_HEADER + 8 + state + 2 * layers * LAYER_HEADER
        what.append("the recurrent state")
    return total, " and ".join(what)


def server_host(spec: ModelSpec, opts: CacheOptions, *, swa_cells: int, slots: int, n_ctx: int,
                cache_ram_mib: int | None, ctx_checkpoints: int | None,
                kv_bytes_per_token: float) -> ServerHost:
    """llama-server's prompt cache and context checkpoints for ``slots`` sequences (``n_ctx``
    cells in all), a checkpoint holding ``swa_cells`` cells of the window layers' cache. With
    --cache-ram -1 the prompt cache is bounded by n_ctx tokens of saved prompts, counted at
    ``kv_bytes_per_token``."""
    ram = CACHE_RAM_MIB if cache_ram_mib is None else cache_ram_mib
    n = CTX_CHECKPOINTS if ctx_checkpoints is None else ctx_checkpoints
    cache = ram * MiB if ram > 0 else int(n_ctx * kv_bytes_per_token) if ram < 0 else 0
    each, holds = checkpoint(spec, opts, swa_cells) if n else (0, "")
    return ServerHost(cache, ram, each, n if each else 0, slots, holds)
