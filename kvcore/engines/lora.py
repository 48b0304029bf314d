"""LoRA serving settings, as the engines that allocate adapter slots on the card take them:
vLLM (``--enable-lora``, ``--max-loras``, ``--max-lora-rank``, ``--fully-sharded-loras``,
``--lora-target-modules``; engines/vllm_lora.py) and SGLang (``--enable-lora``,
``--max-loras-per-batch``, ``--max-lora-rank``, ``--lora-target-modules``;
engines/sglang_lora.py). A setting left out is the engine's own default, which each engine's
module fills in (``LoRA.slots`` and ``LoRA.rank`` None until then)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError

__all__ = ["LoRA", "lora_from"]

#: the highest rank either engine is asked for (vLLM's largest is 512)
MAX_RANK = 4096


@dataclass(frozen=True)
class LoRA:
    """Adapter slots: ``slots`` adapters at once (vLLM --max-loras, SGLang
    --max-loras-per-batch), each up to ``rank`` (--max-lora-rank); None: the engine's default."""

    slots: int | None = None
    rank: int | None = None
    #: vLLM --fully-sharded-loras
    fully_sharded: bool = False
    #: --lora-target-modules: module names (suffixes) that get slots; empty: the engine's
    #: default (vLLM: every module; SGLang: the adapters', which kvplan cannot read)
    targets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.slots is not None and not 1 <= self.slots <= 4096:
            raise InputError(f"max_loras must be a whole number from 1 to 4,096, got "
                             f"{self.slots}", field="max_loras")
        if self.rank is not None and not 1 <= self.rank <= MAX_RANK:
            raise InputError(f"max_lora_rank must be a whole number from 1 to {MAX_RANK:,}, "
                             f"got {self.rank}", field="max_lora_rank")
        for name in self.targets:
            if not name or not name.replace("_", "").replace("-", "").isalnum():
                raise InputError("lora_target_modules takes module names such as o_proj, "
                                 f"qkv_proj or gate_up_proj; got {name!r}",
                                 field="lora_target_modules")

    def flags(self, slots_flag: str) -> list[str]:
        """The launch flags of these settings (those given; ``slots_flag`` the engine's name
        for the slot count: vLLM's --max-loras, SGLang's --max-loras-per-batch)."""
        out = ["--enable-lora"]
        if self.slots is not None:
            out.append(f"{slots_flag} {self.slots}")
        if self.rank is not None:
            out.append(f"--max-lora-rank {self.rank}")
        if self.fully_sharded:
            out.append("--fully-sharded-loras")
        if self.targets:
            out.append(f"--lora-target-modules {' '.join(self.targets)}")
        return out


def lora_from(enable: bool, max_loras: int | None = None, max_lora_rank: int | None = None,
              fully_sharded: bool = False, targets: str | list[str] | tuple[str, ...] | None = None,
              ) -> LoRA | None:
    """The LoRA settings of --enable-lora and its flags (None: LoRA off). The flags that only
    shape the slots are an error without --enable-lora, which the engines would leave unread."""
    # names apart, or separated by commas or spaces in one string or in each item
    items = [targets] if isinstance(targets, str) else list(targets or ())
    names = tuple(t for item in items for t in str(item).replace(",", " ").split())
    if not enable:
        given = [flag for flag, value in (("max_loras", max_loras),
                                          ("max_lora_rank", max_lora_rank),
                                          ("fully_sharded_loras", fully_sharded or None),
                                          ("lora_target_modules", names or None))
                 if value is not None]
        if given:
            raise InputError(f"{', '.join(given)} shape{'s' if len(given) == 1 else ''} the "
                             "LoRA slots, which only --enable-lora (enable_lora) allocates: "
                             "add it, or leave them out", field=given[0])
        return None
    return LoRA(max_loras, max_lora_rank, fully_sharded, names)
