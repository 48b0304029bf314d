"""The GPU catalog (``data/gpus.toml``) and forgiving name lookup.

A bare size such as ``24GiB`` or ``80GB`` stands for a custom card of that memory (its
bandwidth unknown, so no decode estimate).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

from .errors import InputError, UnknownNameError, shown
from .units import format_bytes, parse_bytes

__all__ = ["GPU", "SEGMENTS", "VENDORS", "counted_gpu", "find_gpu", "gpu_catalog",
           "gpu_selection", "maker", "memory_variants", "segment_of"]

#: the makers the catalog's cards are listed under (a GPU's ``vendor``)
VENDORS = ("nvidia", "amd", "intel", "apple")
#: the kinds of card the catalog sorts its entries into (an entry's ``segment``): desktop
#: GeForce/Radeon/Arc cards, laptop GPUs, workstation cards, datacenter parts, Apple's chips
SEGMENTS = ("consumer", "laptop", "workstation", "datacenter", "apple")


@dataclass(frozen=True)
class GPU:
    id: str
    name: str
    memory_bytes: int
    #: peak memory bandwidth from the datasheet; None for a custom size
    bandwidth_bytes_per_s: int | None
    vendor: str = "custom"
    segment: str = "custom"
    aliases: tuple[str, ...] = ()
    source: str = ""
    #: total memory as the driver reports it, when a reading is known
    driver_total_bytes: int | None = None
    #: share of memory the GPU may use (Apple unified memory: ~0.75 by default)
    usable_fraction: float = 1.0
    #: one memory for the CPU and the GPU (Apple silicon, Jetson, DGX Spark, AMD's Strix Halo):
    #: layers kept "in host memory" sit in the same memory, and there is no link to cross
    unified: bool = False
    #: what sets the GPU's share of that memory and how to raise it, where a vendor other than
    #: Apple sets one (Apple's is macOS's wired limit, said by the plan itself)
    usable_note: str = ""
    #: the setting that raises that share: "iogpu.wired_limit_mb" (macOS, Apple's always),
    #: "ttm.pages_limit" (Linux's ttm module); "" where there is none to name
    limit_setting: str = ""
    #: the memory its GPU may use as the user gave it (gpu_limit: a raised wired or GTT
    #: limit), where given; None: usable_fraction's default share
    limit_bytes: int | None = None
    #: the most of these cards one tensor-parallel group can hold (``--find-gpu`` tries no more)
    max_cards: int = 8
    #: the chip generation as the catalog names it ("Hopper", "Blackwell", ...; "" if unknown)
    architecture: str = ""
    #: "HBM3e", "GDDR7", ... ("" if unknown)
    memory_type: str = ""
    #: NVIDIA's CUDA compute capability, "9.0", "10.3", ... ("" for other vendors)
    compute_capability: str = ""
    #: AMD's LLVM target of the chip ("gfx942", "gfx1100"; "" for other vendors): the chips
    #: an engine's ROCm build runs on are named so
    llvm_target: str = ""
    #: unified-memory sizes (GB as Apple counts them: GiB) the chip was sold with (Apple)
    memory_options_gb: tuple[int, ...] = ()
    #: (sizes sold only with the cut-down chip, its bandwidth, its GPU cores), where one is
    lower_bin: tuple[tuple[int, ...], int, int] | None = None
    #: peak dense FP16/BF16 matrix throughput (FLOP/s) from the datasheet; None where unknown
    matmul_flops_per_s: int | None = None
    #: where that figure comes from (the datasheet, or how it was derived)
    matmul_flops_source: str = ""
    #: GPU cores of the configuration listed (Apple), 0 where not given
    gpu_cores: int = 0
    #: the card's link to the host ("PCIe 4.0 x16", "NVLink-C2C"; "" for unified memory) and
    #: its one-direction rate, what weights held in host memory cross to reach the card
    host_link: str = ""
    host_link_bytes_per_s: int | None = None
    host_link_source: str = ""
    #: the host memory's read bandwidth where the card's host is known (a Grace CPU's
    #: LPDDR5X), else None: llama.cpp's host-held layers are read at it
    host_bandwidth_bytes_per_s: int | None = None
    host_bandwidth_source: str = ""
    #: what that host memory is ("Grace LPDDR5X")
    host_memory: str = ""

    @property
    def cuda_family(self) -> int | None:
        """The major CUDA compute capability engines pick kernels by (9: Hopper; 10: B200,
        B300, GB200; 11: Jetson Thor; 12: the GeForce/RTX PRO Blackwell cards and GB10), None
        where the catalog gives none. Blackwell spans several families, so the catalog names
        the capability rather than leaving it to be guessed from the architecture."""
        if not self.compute_capability:
            return None
        return int(self.compute_capability.split(".")[0])

    @property
    def chip(self) -> str:
        """The name without its configuration in parentheses (``Apple M3 Max`` of
        ``Apple M3 Max (36GB, 30-core GPU)``)."""
        return self.name.split(" (")[0]

    @property
    def total_bytes(self) -> int:
        """Total memory as the driver reports it when a reading is known, else the datasheet's."""
        return self.driver_total_bytes or self.memory_bytes

    @property
    def usable_bytes(self) -> int:
        """Memory a plan may fill: what the driver reports when known (a little under the
        marketing size), times the share the GPU may use."""
        if self.limit_bytes is not None:
            return self.limit_bytes
        return int(self.total_bytes * self.usable_fraction)


def _norm(name: str) -> str:
    text = name.lower().strip()
    text = re.sub(r"\b(nvidia|geforce|amd|radeon|instinct|apple)\b", "", text)
    return re.sub(r"[\s_\-]+", "", text)


@cache
def gpu_catalog() -> tuple[GPU, ...]:
    raw = tomllib.loads(resources.files("kvcore").joinpath("data/gpus.toml").read_text("utf-8"))
    gpus = []
    for entry in raw["gpu"]:
        gpus.append(GPU(
            id=entry["id"],
            name=entry["name"],
            memory_bytes=int(entry["memory_bytes"]),
            bandwidth_bytes_per_s=int(entry["bandwidth_bytes_per_s"]),
            vendor=entry.get("vendor", ""),
            segment=entry.get("segment", ""),
            aliases=tuple(entry.get("aliases", ())),
            source=entry.get("source", ""),
            driver_total_bytes=entry.get("driver_total_bytes"),
            usable_fraction=float(entry.get("gpu_usable_fraction", 1.0)),
            unified=entry.get("vendor") == "apple" or bool(entry.get("unified_memory", False)),
            usable_note=entry.get("gpu_usable_note", ""),
            limit_setting=("iogpu.wired_limit_mb" if entry.get("vendor") == "apple"
                           else entry.get("gpu_limit_setting", "")),
            max_cards=int(entry.get("max_cards", 8)),
            architecture=entry.get("architecture", ""),
            memory_type=entry.get("memory_type", ""),
            compute_capability=entry.get("compute_capability", ""),
            llvm_target=entry.get("llvm_target", ""),
            memory_options_gb=tuple(entry.get("memory_options_gb", ())),
            lower_bin=((tuple(entry["lower_bin"]["memory_gb"]),
                        int(entry["lower_bin"]["bandwidth_bytes_per_s"]),
                        int(entry["lower_bin"]["gpu_cores"])) if "lower_bin" in entry else None),
            matmul_flops_per_s=(int(entry["matmul_flops_per_s"])
                                if "matmul_flops_per_s" in entry else None),
            matmul_flops_source=entry.get("matmul_flops_source", ""),
            gpu_cores=int(entry.get("gpu_cores", 0)),
            host_link=entry.get("host_link", ""),
            host_link_bytes_per_s=(int(entry["host_link_bytes_per_s"])
                                   if "host_link_bytes_per_s" in entry else None),
            host_link_source=entry.get("host_link_source", ""),
            host_bandwidth_bytes_per_s=entry.get("host_bandwidth_bytes_per_s"),
            host_bandwidth_source=entry.get("host_bandwidth_source", ""),
            host_memory=entry.get("host_memory", ""),
        ))
    return tuple(gpus)


def _one_of(value: str | None, names: tuple[str, ...], field: str) -> str | None:
    """``value`` as the catalog spells one of ``names`` (any case, spaces around dropped;
    None stays None); any other is an error on ``field``."""
    if value is None:
        return None
    want = str(value).strip().lower()
    if want not in names:
        raise InputError(f"{field} must be one of {', '.join(names)}; got {shown(value)}",
                         field=field)
    return want


def maker(vendor: str | None, field: str = "vendor") -> str | None:
    """``vendor`` as the catalog names makers; one not in VENDORS is an error on ``field``."""
    return _one_of(vendor, VENDORS, field)


def segment_of(segment: str | None, field: str = "segment") -> str | None:
    """``segment`` as the catalog names kinds of card; one not in SEGMENTS is an error on
    ``field``."""
    return _one_of(segment, SEGMENTS, field)


def gpu_selection(vendor: str | None = None, min_memory: int | str | None = None, *,
                  vendor_field: str = "vendor", memory_field: str = "min_memory",
                  segment: str | None = None,
                  segment_field: str = "segment") -> tuple[GPU, ...]:
    """The catalog's GPUs in its order, only ``vendor``'s where one is given (any case), only
    those with at least ``min_memory`` where given: a size with its unit (24GiB, 24GB),
    against the memory as sold (``memory_bytes``, not the driver's total, so that "24GiB"
    keeps the 24 GB cards whose driver shows a little less), and only one ``segment``'s
    (laptop, datacenter, …) where given. The fields name the inputs in errors."""
    want = maker(vendor, vendor_field)
    kind = segment_of(segment, segment_field)
    least = 0
    if min_memory is not None:
        if isinstance(min_memory, str) and _NUMBER.match(min_memory.strip()):
            raise InputError(f"{memory_field} needs its unit: 24GiB or 24GB, got "
                             f"{shown(min_memory)}", field=memory_field)
        least = parse_bytes(min_memory, field=memory_field)
    return tuple(g for g in gpu_catalog()
                 if (want is None or g.vendor == want) and g.memory_bytes >= least
                 and (kind is None or g.segment == kind))


@cache
def _index() -> dict[str, GPU]:
    index: dict[str, GPU] = {}
    for gpu in gpu_catalog():
        for key in (gpu.id, gpu.name, *gpu.aliases):
            index.setdefault(_norm(key), gpu)
    return index


_SIZE = re.compile(r"^\s*[0-9][0-9.,_]*\s*(b|kb|mb|gb|tb|kib|mib|gib|tib|g|t)\s*$", re.I)
_NUMBER = re.compile(r"^[0-9][0-9.,_]*$")
#: a number and letters that are no unit _SIZE knows (``24XB``)
_UNKNOWN_UNIT = re.compile(r"^([0-9][0-9.,_]*)\s*[a-z]{1,3}$", re.I)
#: a size written with an exponent (1e30GiB, 2.4e1 GB)
_EXPONENT = re.compile(r"^[0-9][0-9.]*e[+-]?[0-9]+\s*[a-z]{0,3}$", re.I)


@cache
def _numeric_name_lengths() -> frozenset[int]:
    """Lengths of the catalog names that are bare numbers (``4090``: model numbers)."""
    return frozenset(len(key) for key in _index() if key.isdigit())


def _is_bare_size(text: str) -> bool:
    """A number that names no catalog card and has no unit: meant as a memory size (``24``,
    ``80``, ``24.5``); a number as long as a card's model number (``4091``) is a name."""
    return bool(_NUMBER.match(text)) and not (
        text.isdigit() and len(text) in _numeric_name_lengths())


def find_gpu(name: str) -> GPU:
    """A catalog GPU by id, name or alias (``4090``, ``rtx4090``, ``RTX 4090``), or a bare size."""
    text = str(name).strip()
    if not text:
        raise InputError("gpu must be a catalog name like 4090 or h100, or a size like 24GiB",
                         field="gpu")
    if _SIZE.match(text):
        size = parse_bytes(text, field="gpu")
        return GPU(id=f"custom-{size}", name=f"custom {text}", memory_bytes=size,
                   bandwidth_bytes_per_s=None)
    if text.startswith("-") and (_SIZE.match(text[1:]) or _NUMBER.match(text[1:])):
        raise InputError(f"a GPU's memory must be larger than zero, got {shown(text)}",
                         field="gpu")
    gpu = _index().get(_norm(text))
    if gpu is None and _EXPONENT.match(text):
        raise InputError(f"{shown(text)} is no memory size: write it without an exponent, like "
                         "24GiB or 80GB (a catalog GPU is a name, like 4090 or h100)",
                         field="gpu")
    if gpu is None and _is_bare_size(text):
        raise InputError(f"'{text}' has no unit; a memory size needs one, like {text}GiB or "
                         f"{text}GB (a catalog GPU is a name, like 4090 or h100)", field="gpu")
    unit = _UNKNOWN_UNIT.match(text)
    if gpu is None and unit and _is_bare_size(unit.group(1)):
        raise InputError(f"{shown(text)} is no memory size: its unit must be one of B, KB, MB, "
                         "GB, TB, KiB, MiB, GiB or TiB, like 24GiB (a catalog GPU is a name, "
                         "like 4090 or h100)", field="gpu")
    if gpu is None:
        gpu = _memory_option(text)
    if gpu is None:
        gpu = _card_in_size(text)
    if gpu is None:
        raise UnknownNameError("GPU", text, {key: g.id for key, g in _index().items()},
                               field="gpu", query=_norm(text))
    return gpu


#: a chip and a memory size after it: m3 max 36gb, M4-Pro-24GB, apple m2 ultra (64 GB)
_WITH_MEMORY = re.compile(r"^(?P<chip>.*?[a-z].*?)[\s_\-(]*(?P<gb>[0-9]{1,4})\s*(?:gb|gib|g)\)?$",
                          re.IGNORECASE)


def memory_variants(chip: GPU) -> list[GPU]:
    """``chip`` in each memory size it was sold with, smallest first (the catalog entry, its
    largest, last); just the entry where it came in one size."""
    return [chip if gb << 30 == chip.memory_bytes else _sized(chip, gb)
            for gb in chip.memory_options_gb] or [chip]


def _memory_option(text: str) -> GPU | None:
    """A chip of the catalog sold in several memory sizes (Apple's), in one of them: its
    memory that size, its bandwidth and GPU cores the cut-down bin's where only that bin came
    with it. None where ``text`` names no such chip; an error for a size it was not sold
    with."""
    m = _WITH_MEMORY.match(text)
    chip = _index().get(_norm(m.group("chip"))) if m else None
    if m is None or chip is None or not chip.memory_options_gb:
        return None
    gb = int(m.group("gb"))
    if gb not in chip.memory_options_gb:
        sizes = ", ".join(str(o) for o in chip.memory_options_gb[:-1])
        raise InputError(f"{chip.chip} was sold with {sizes} or "
                         f"{chip.memory_options_gb[-1]} GB of memory, not {gb} GB; give one "
                         "of those", field="gpu")
    return _sized(chip, gb)


#: a card's name and its memory after it: rtx 4090 24gb, 4090 24GB, h100 (94 GB)
_CARD_MEMORY = re.compile(r"^(?P<card>.+?)[\s_\-(]+(?P<gb>[0-9]{1,4})\s*(?:gb|gib|g)\)?$",
                          re.IGNORECASE)


#: what a card's other names add for another memory size or form factor of the same card
_ANOTHER_FORM = re.compile(r"(?:[0-9]+gb|sxm[0-9]?|pcie|nvl|oam)*")


def _gib(gpu: GPU) -> int:
    """The card's memory as sold, in GB as the vendor counts them (GiB)."""
    return round(gpu.memory_bytes / (1 << 30))


def _card_in_size(text: str) -> GPU | None:
    """A catalog card named with its memory (``rtx 4090 24gb``): the card where that is its
    memory, else the one card of that name sold with it (``h100 94gb``: the H100 NVL); an
    error for a size none of them has. None where ``text`` names no such card."""
    m = _CARD_MEMORY.match(text)
    key = _norm(m.group("card")) if m else ""
    card = _index().get(key) if m else None
    if m is None or card is None or card.memory_options_gb:
        return None
    gb = int(m.group("gb"))
    if _gib(card) == gb:
        return card
    # the same card in another memory size or form (a100-40gb, h100 nvl), not another model
    # of that name (rtx 3060 ti) or a longer model number (a10 is not a100)
    named = {g.id: g for k, g in _index().items()
             if k.startswith(key) and _ANOTHER_FORM.fullmatch(k[len(key):])
             and not (key[-1:].isdigit() and k[len(key):][:1].isdigit())
             and not g.memory_options_gb}
    sized = [g for g in named.values() if _gib(g) == gb]
    if len(sized) == 1:
        return sized[0]
    if sized:
        listed = " or ".join(g.id for g in sized)
        raise InputError(f"{shown(text)} is {listed}: give the one meant", field="gpu")
    sizes = sorted({_gib(g) for g in named.values()})
    held = " or ".join(f"{n} GB" for n in sizes)
    which = (f"the catalog's {shown(m.group('card'), 40)} cards have" if len(sizes) > 1
             else f"{card.name} has")
    raise InputError(f"{which} {held} of memory, not {gb} GB: give the name alone, or the "
                     f"memory ({gb}GiB) for a card the catalog does not list", field="gpu")


def _sized(chip: GPU, gb: int) -> GPU:
    """``chip`` with ``gb`` GiB of memory, one of the sizes it was sold with: the cut-down
    bin's bandwidth and GPU cores where only that bin came with it."""
    bandwidth, cores, flops = chip.bandwidth_bytes_per_s, None, chip.matmul_flops_per_s
    if chip.lower_bin is not None:
        low_sizes, low_bandwidth, low_cores = chip.lower_bin
        cores = chip.gpu_cores or None
        if gb in low_sizes:
            # the cut-down bin: its bandwidth, and its share of the full chip's cores
            if flops is not None and chip.gpu_cores:
                flops = flops * low_cores // chip.gpu_cores
            bandwidth, cores = low_bandwidth, low_cores
    label = f"{gb}GB" + (f", {cores}-core GPU" if cores else "")
    return replace(chip, id=f"{chip.id}-{gb}gb", name=f"{chip.chip} ({label})",
                   memory_bytes=gb << 30, bandwidth_bytes_per_s=bandwidth, aliases=(),
                   driver_total_bytes=None, matmul_flops_per_s=flops, gpu_cores=cores or 0)


#: a card count before a card, as a rig is written: 2x4090, 4×H100, 8 x h100-sxm, 2*24GiB
_COUNTED = re.compile(r"^\s*([0-9]+)\s*[x×*]\s*(\S.*)$", re.IGNORECASE)


def counted_gpu(name: str, field: str = "gpu") -> tuple[int, GPU] | None:
    """``(count, card)`` of a name with a card count before it (``2x4090``), or None where the
    name is one card (a catalog name or a size: ``rx-7900-xtx`` and ``7900xtx`` are cards,
    not 7900 of some 'tx'). A count before a name that is no card is no rig either: the
    caller's error for the whole name stands."""
    text = str(name).strip()
    m = _COUNTED.match(text)
    if m is None:
        return None
    try:
        find_gpu(text)
        return None
    except InputError:
        pass
    try:
        card = find_gpu(m.group(2))
    except InputError:
        return None
    count = int(m.group(1))
    if not 1 <= count <= 1024:
        raise InputError(f"the card count in {shown(text)} must be between 1 and 1,024",
                         field=field)
    return count, card


def with_limit(gpu: GPU, limit: str | int, field: str = "gpu_limit") -> GPU:
    """``gpu`` with the memory its GPU may use set to ``limit`` (a size), for a machine whose
    CPU and GPU share one memory and whose GPU's default share was raised (macOS's
    ``iogpu.wired_limit_mb``, the Linux ttm module's ``pages_limit``). A card with memory of
    its own, a size past the machine's memory or none at all is refused."""
    size = parse_bytes(limit, field=field)
    if not gpu.unified:
        raise InputError(f"{field} is the share of a memory the GPU shares with the CPU (Apple "
                         "silicon, Strix Halo, DGX Spark, Jetson); "
                         f"{gpu.name} has memory of its own", field=field)
    if size > gpu.total_bytes:
        raise InputError(f"{field} must be at most the {format_bytes(gpu.total_bytes, 4)} of "
                         f"{gpu.name}, got {format_bytes(size, 4)}", field=field)
    return replace(gpu, limit_bytes=size)
