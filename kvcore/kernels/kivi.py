"""KIVI: keys quantized per channel over groups of G tokens, values per token over groups of G
channels (asymmetric, fp16 scale and minimum per group); the most recent tokens stay in an f16
residual window that flushes whole groups of G, so it holds R to R + G − 1 tokens.

A cache of capacity T allocates ``floor((T − R) / G)`` quantized groups and a residual ring of
``min(T, R + G − 1)`` f16 slots: exactly ``kvcore.formats`` ``kivi2`` / ``kivi4`` bytes.

The quantized region is paged by group: planes are ``[slots, heads, ...]`` with one slot per
group of G tokens, and a group table ``[seqs, groups]`` maps each sequence's groups to slots,
as an engine's block table maps token blocks to pages. A slot is taken from the pool when a
group is flushed, in the pool's order (``slot_order``: an identity order gives a contiguous
cache). The residual ring stays per sequence.

Within a group the planes lie as the decode's products read them: the key codes
``[G·bits/8, D]`` (byte j of every channel, channels contiguous; byte j of a channel holds
tokens 8/bits·j …), the key scales and minimums ``[D]``; the value codes ``[D·bits/8, G]`` and
the value scales and minimums ``[D/G, G]`` (token-minor: byte c of a token holds channels
8/bits·c …). The reference functions below pack and unpack one group; the cache stores their
planes in this order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..formats import get_format
from .cache import SMS, _pow2, decode_output, wave_splits, wide_head_warps

__all__ = ["KiviCache", "decode_form", "dequantize_group_keys", "dequantize_values",
           "quantize_group_keys", "quantize_values"]


def _torch() -> Any:
    from . import require_torch

    return require_torch()


def _pack(q: Any, bits: int) -> Any:
    """[..., n] codes (< 2**bits) → [..., n·bits/8] bytes, code i at bits (i % per)·bits."""
    per = 8 // bits
    q = q.reshape(*q.shape[:-1], -1, per).to(_torch().int32)
    shifts = _torch().arange(0, 8, bits, dtype=_torch().int32, device=q.device)
    return (q << shifts).sum(dim=-1).to(_torch().uint8)


def _unpack(b: Any, bits: int) -> Any:
    torch = _torch()
    shifts = torch.arange(0, 8, bits, dtype=torch.int32, device=b.device)
    q = (b.to(torch.int32).unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    return q.reshape(*b.shape[:-1], -1)


def _minmax_quant(x: Any, bits: int, dim: int) -> tuple[Any, Any, Any]:
    torch = _torch()
    lo = x.amin(dim=dim, keepdim=True)
    hi = x.amax(dim=dim, keepdim=True)
    levels = (1 << bits) - 1
    # (hi − lo) times 1/levels in float32, as the flush kernel computes it
    scale = ((hi - lo) * torch.tensor(1 / levels, dtype=torch.float32)).to(torch.float16)
    mn = lo.to(torch.float16)
    s = scale.float()
    # times the reciprocal, rounded half to even, in float32: the Triton flush kernel's
    # operations one by one, so that both write the same codes. Below float16's normal range
    # (2**-14) a scale is rounded by up to 2**-25: the reciprocal of the scale one unit (2**-24)
    # up keeps the top code at most ``levels`` (a normal scale's rounding cannot pass it)
    up = torch.where(s < 2.0 ** -14, s + 2.0 ** -24, s)
    r = torch.where(s > 0, 1 / torch.where(s > 0, up, 1), 0)
    q = torch.round((x - mn.float()) * r)
    return q.to(torch.uint8), scale, mn


def quantize_group_keys(k: Any, bits: int) -> dict[str, Any]:
    """Keys [..., G, D] (one group of G tokens) → per-channel codes packed along tokens, the
    bytes [..., G·bits/8, D]: byte j of every channel, then byte j + 1 (channels contiguous,
    so that a decode reads the bytes of neighbouring channels, which one product pairs, in one
    load)."""
    q, scale, mn = _minmax_quant(k.float(), bits, dim=-2)
    codes = q.transpose(-1, -2)  # [..., D, G]
    return {"q": _pack(codes, bits).transpose(-1, -2).contiguous(), "scale": scale.squeeze(-2),
            "min": mn.squeeze(-2)}


def dequantize_group_keys(planes: dict[str, Any], bits: int) -> Any:
    """→ float32 [..., G, D]."""
    codes = _unpack(planes["q"].transpose(-1, -2), bits).float()  # [..., D, G]
    x = codes * planes["scale"].float().unsqueeze(-1) + planes["min"].float().unsqueeze(-1)
    return x.transpose(-1, -2)


def quantize_values(v: Any, bits: int, group: int) -> dict[str, Any]:
    """Values [..., D] → per token, per group of ``group`` channels."""
    x = v.float().reshape(*v.shape[:-1], v.shape[-1] // group, group)
    q, scale, mn = _minmax_quant(x, bits, dim=-1)
    return {"q": _pack(q.reshape(*v.shape), bits), "scale": scale.squeeze(-1),
            "min": mn.squeeze(-1)}


def dequantize_values(planes: dict[str, Any], bits: int, group: int) -> Any:
    codes = _unpack(planes["q"], bits).float()
    d = codes.shape[-1]
    x = codes.reshape(*codes.shape[:-1], d // group, group)
    x = x * planes["scale"].float().unsqueeze(-1) + planes["min"].float().unsqueeze(-1)
    return x.reshape(*codes.shape[:-1], d)


#: decode launch: programs of one warp, two pipeline stages, KIVI_PER_SM programs a
#: multiprocessor in one wave (v49: the splits are as few as fill it; until then a program
#: took at most 1,024 tokens, 5 to 16 waves at B=8 128k, B=1 1M and B=64 32k, 1.3 at B=8 32k:
#: bench/results/kivi-split-h200.json, kivi2 B=8 32k 114.0 → 97.7 µs, B=1 1M 369.7 → 349.9,
#: kivi4 B=8 128k 477.3 → 451.7). On an H200 (bench/results/
#: kivi-launch-h200.json) against the former four warps and one wave: kivi2 one sequence of
#: 32k 114 → 59 µs, of 128k 432 → 211 µs, eight of 32k 849 → 414 µs. With the unpacking by
#: PTX (kivi-decode-h200-v16.json) still the best at batch 1: two warps 106 → 130 µs and three
#: stages 106 → 120 µs for kivi2 at 128k
KIVI_WARPS, KIVI_STAGES, KIVI_PER_SM = 1, 2, 8
#: warps a program of kivi_decode_keys_kernel (a K-only cache of heads of 512 lanes or more, an
#: MLA latent): on DeepSeek-V2-Lite's 576-wide latent 4 warps were 4-10% faster than 8 and 16
#: in all four rows (kivi2 8k 26.6 → 24.4 µs, 32k 110.7 → 100.0; bench/results/kivi-mla-h200.json)
KIVI_KEYS_WARPS = 4
#: quantized tokens a decode step takes: two groups of 32, so that kivi2's codes of one byte
#: index fill a product of 16 tokens (128: kivi2 106 → 134 µs, kivi4 122 → 253 µs at B=1 128k,
#: kivi-decode-h200-v16.json)
KIVI_TILE = 64
#: KIVI's decode rescales its running output lazily by default (softmax_lazy): on an H200 kivi4
#: 1-7% faster (103.0 → 101.9 µs at B=1 128k, 220.9 → 206.7 µs at B=8 32k), kivi2 within 1%
#: either way (bench/results/kivi-decode-h200-v16b.json; kivi-lazy-h200.json before the
#: unpacking by PTX)
KIVI_LAZY = True
#: KIVI's decode takes its products swapped (kivi_decode_kernel's SWAP: the cache tile the
#: first operand, the query rows, padded to 8 instead of 16, the second) by default at heads of
#: up to 128 lanes with K and V (it applies up to 511, where it is not yet measured). On an H200 (bench/results/kivi-swap-h200.json,
#: GQA 32/8): kivi2 B=1 128k 78.0 → 62.7 µs, B=8 128k 531.0 → 404.1, B=8 32k 146.0 → 115.2;
#: kivi4 82.5 → 70.2, 557.5 → 485.1, 154.6 → 131.0 (sm_90: kivi2 255 → 188 registers a thread,
#: half the tensor-core instructions)
KIVI_SWAP = True
#: kivi2's swapped launch at heads of up to 128 lanes: at least KIVI_SWAP_PER_SM programs a
#: multiprocessor, capped at KIVI_SWAP_REGS registers a thread (bench/results/
#: kivi-swap-launches-h200.json, against 8 uncapped: B=1 128k 62.1 → 54.2 µs, B=8 128k
#: 403.7 → 364.8; 10 uncapped was slower; in the decode benchmark, decode-h200-v47-kivi-partial:
#: 61.7 → 52.8 and 405.4 → 367.4). kivi4 keeps KIVI_PER_SM uncapped: the same launch gave
#: 69.5 → 64.0 and 476.1 → 450.8 there, but in the decode benchmark B=8 32k 129.2 → 148.0
#: and B=64 4k 137.3 → 156.5, while B=1 gained (32k 30.6 → 27.1, 128k 70.0 → 62.7): kivi4
#: takes it over at most KIVI4_CAP_ROWS sequence-head rows (decode-h200-v48-kivi: kivi4 B=1
#: 128k 62.6 µs, 1M 452.8 against v46's 473.6, its other rows as v46's)
KIVI_SWAP_PER_SM, KIVI_SWAP_REGS = 12, 168
KIVI4_CAP_ROWS = 8


def decode_form(bits: int, width: int, has_v: bool, swap: bool | None = None,
                rows: int = 0) -> tuple[bool, int]:
    """(products swapped, registers a thread at most or 0) of KIVI's decode at heads held in
    ``width`` lanes (a power of two) over ``rows`` sequence-head rows (0: not known):
    ``swap`` None takes KIVI_SWAP at up to 128 lanes; the cap is KIVI_SWAP_REGS (with
    KIVI_SWAP_PER_SM programs a multiprocessor) swapped at up to 128 lanes for kivi2, and for
    kivi4 over 1 to KIVI4_CAP_ROWS rows, else none. Swapped products need K and V and heads
    under 512 lanes."""
    can_swap = has_v and width < 512
    if swap and not can_swap:
        raise ValueError("swapped products need K and V and heads under 512 lanes")
    swap = can_swap and (KIVI_SWAP and width <= 128 if swap is None else swap)
    capped = bits == 2 or 0 < rows <= KIVI4_CAP_ROWS
    return swap, KIVI_SWAP_REGS if swap and width <= 128 and capped else 0
#: new tokens a ring-writing program of the append's launch copies into the residual ring
#: (a head's)
RING_TOKENS = 32
#: KIVI's flush kernel (a program a group of a KV head) by bits: (warps, values of a channel
#: block loaded once its keys are stored), and its cap of registers a thread. On an H200,
#: 16,384 new tokens a call into empty sequences (B=8 32k), the whole append (flush and ring):
#: the kernel holding the whole group, its rows read element by element, 17.0% → 25.9% of
#: read bandwidth for kivi2 at one warp with the late load, kivi4 25.0% → 30.4% at two warps
#: (kivi-flush-warps-h200.json); with the ring slots from one kernel kivi2 69.7 → 50.2 µs a
#: call, kivi4 65.5 → 54.3 (kivi-append-ring-h200.json). Walking the channels in blocks of one
#: group, rows read in vectors (sm_90: 54.6 → 24 instructions a value, no spills), one warp
#: and the late load for both: 52.6 and 53.1 µs, faster at 128 registers (12 → 16 programs a
#: multiprocessor): kivi2 45.3 µs (39.9%), kivi4 45.7 µs (43.6%); 96 and 80 registers spill
#: and were slower, two and four warps too (kivi-flush-blocks-h200.json). One load a row
#: (through a pointer chosen per row) and the codes from the scale's reciprocal, rounded by one
#: add (about 26 → 19 instructions a value): kivi2 45.3 → 38.4 µs, kivi4 45.7 → 39.1 µs in one
#: call; 96 registers still slower (kivi-append-h200-v36.json, kivi-append-h200-v36-old.json).
#: The ring slots written in the same launch: 38.5 → 35.5 and 39.1 → 36.4 µs
#: (kivi-append-h200-v37.json). The codes' mask and clamp dropped: 35.9 → 35.4 and
#: 36.7 → 36.0 µs; the next channel blocks' rows loaded while a block is quantized (STAGES,
#: FLUSH_STAGES): three in flight 35.4 → 31.9 and 36.1 → 33.4 µs, two 34.3 and 36.4
#: (kivi-append-h200-v38*.json)
FLUSH_LAUNCH = {2: (1, True), 4: (1, True)}
FLUSH_REGS = 128
FLUSH_STAGES = 3
#: the flush kernel's programs a multiprocessor holds (one warp at FLUSH_REGS registers)
FLUSH_PER_SM = 16
#: a flush launch's channel blocks shared between two programs (``parts``) once it has more
#: programs than one wave holds (FLUSH_PER_SM a multiprocessor). On an H100, appends into
#: empty sequences of 8 KV heads, one launch: kivi2 B=64 4k 37.0 → 34.1 µs, B=16 1k
#: 38.8 → 36.1, B=1 32k 38.8 → 33.8 µs (4,104 to 4,224 programs at one part); at B=1 4k
#: (1,032 programs, under a wave) 11.3 → 11.6 µs, kivi4 alike; four parts slower than two
#: wherever two paid (kivi-batched-append-h100.json)
FLUSH_SHARED_PARTS = 2
#: kernel v80: once v79 had cut the flush's loop by a third, four parts (each program one
#: 32-channel block of a 128-lane head) are the fastest at every program count timed, under a
#: wave too. On an H100, three rounds in turns against the rule above
#: (bench/results/kivi-parts-v79-h100.json): kivi2 B=1 4k 10.2 → 9.9 µs, B=2 4k 19.2 → 17.7,
#: B=64 4k 33.0 → 32.6, B=1 32k 32.6 → 31.7; kivi4 10.5 → 10.2, 19.9 → 18.9, 36.4 → 34.8,
#: 36.3 → 34.2. Taken where the blocks split in four; the rule above elsewhere
FLUSH_PARTS = 4
#: kernel v80: the launch of a flush whose programs each walk one channel block (FLUSH_PARTS
#: on 128-lane heads): (registers a thread, channel blocks in flight). With no next block to
#: load ahead, one stage; 80 registers, which sm_90 code fits without spilling (kivi2 fits
#: 72 too, kivi4 spills there), so that more programs reside. On an H100, three rounds in turns
#: against FLUSH_REGS and FLUSH_STAGES at four parts (bench/results/kivi-one-block-h100.json):
#: kivi2 B=1 4k 9.9 → 9.6 µs, B=2 4k 17.7 → 17.2, B=64 4k 32.6 → 31.6, B=8 32k 31.8 → 30.8;
#: kivi4 10.2 → 9.9, 18.9 → 18.4, 34.9 → 34.3, 34.2 → 33.5 (72 registers slower for both, 88
#: slower but at kivi2 B=1 4k, 9.5 µs)
FLUSH_ONE_BLOCK = (80, 1)
#: the flush kernel's tile rows hold tokens so that each of a one-warp tile's 8 lane rows
#: holds G/8 consecutive tokens (kivi_flush_kernel's LANE_TOKENS): a key byte's codes are
#: then packed inside one thread instead of across lanes (sm_90, the default launch: kivi2's
#: channel-block loop 1,122 → 978 instructions, kivi4's 1,074 → 1,011). On an H100, three
#: rounds in turns (bench/results/kivi-lane-tokens-h100.json): kivi2 B=1 4k 11.3 → 10.6 µs,
#: B=8 32k 33.8 → 32.9; kivi4 11.2 → 10.9, 36.4 → 36.2
FLUSH_LANE_TOKENS = True
#: on a GPU the flush takes its scales' reciprocals from the approximate reciprocal and one
#: Newton step (kivi_flush_kernel's RCP_FMA) instead of a correctly rounded division: the
#: two agree for all 31,743 positive float16 scales on an H100 (kivi-lane-tokens-h100.json),
#: so it is taken on compute capability 9.0 only. With LANE_TOKENS kivi2's loop 978 → 821
#: instructions; B=1 4k 10.6 → 10.2 µs, kivi4 10.9 → 10.3
FLUSH_RCP_FMA = True
#: with LANE_TOKENS, the flush takes each channel's and token's minimum and maximum in float16,
#: two of them a 32-bit word across lanes (kivi_flush_kernel's PACKED_RANGE; on compute
#: capability 8.0 and up, _capability): kivi2's loop 821 → 727 instructions. With the two
#: above, against token order on an H100: kivi2 B=1 4k 11.3 → 10.2 µs (57.5% → 63.3% of read
#: bandwidth), B=64 4k 34.0 → 33.1, B=8 32k 33.8 → 32.5; kivi4 11.2 → 10.3 (63.5% → 69.0%),
#: 37.3 → 36.4, 36.4 → 36.4
FLUSH_PACKED_RANGE = True


def _capability(x: Any) -> tuple[int, int]:
    """The compute capability of the GPU holding ``x``; (0, 0) off a GPU. RCP_FMA's
    reciprocals were checked against the division on compute capability 9.0 only (another
    chip's approximate reciprocal may differ); PACKED_RANGE's min.f16x2 and max.f16x2 need
    8.0. The interpreter takes neither by default (its PACKED_RANGE, in plain Triton, runs
    each packed combine in Python: the tests ask for it on few groups)."""
    if not x.is_cuda:
        return (0, 0)
    major, minor = _torch().cuda.get_device_capability(x.device)
    return (major, minor)


def flush_parts(programs: int, blocks: int) -> int:
    """The programs a flush launch's channel blocks are shared among (``parts``) by default:
    FLUSH_PARTS where the ``blocks`` (G-channel blocks of the widest head) split evenly in
    that many, else FLUSH_SHARED_PARTS where its ``programs`` at one part fill more than one
    wave and the blocks split evenly in two, else 1."""
    if blocks % FLUSH_PARTS == 0:
        return FLUSH_PARTS
    if programs > FLUSH_PER_SM * SMS and blocks % FLUSH_SHARED_PARTS == 0:
        return FLUSH_SHARED_PARTS
    return 1


class KiviCache:
    """KIVI cache: ``seqs`` sequences × ``heads`` KV heads × capacity ``tokens``, quantized
    groups paged through ``group_table``."""

    def __init__(self, fmt: str, seqs: int, heads: int, head_dim: int, tokens: int,
                 device: Any = "cpu", *, slot_order: Any = None, values: bool = True,
                 head_dim_v: int | None = None) -> None:
        """``values=False``: a K-only cache (an MLA latent, as kvcore counts it), attended with
        V = the keys. ``head_dim_v``: the width of V's rows where it is not ``head_dim`` (K's
        and the query's), narrower or wider; V's planes and ring are sized by it and decode's
        output is that wide."""
        torch = _torch()
        f = get_format(fmt)
        if not f.residual_tokens:
            raise ValueError(f"{fmt} is not a KIVI format")
        self.bits = {"kivi2": 2, "kivi4": 4}[f.name]
        self.group, self.residual = f.token_group, f.residual_tokens
        head_dim_v = head_dim if head_dim_v is None else head_dim_v
        if not values and head_dim_v != head_dim:
            raise ValueError("a K-only cache attends with V = the keys: no V width of its own")
        if head_dim % self.group or head_dim_v % self.group or head_dim_v < 1:
            raise ValueError(f"KIVI needs head_dim a multiple of {self.group}")
        self.fmt, self.seqs, self.heads, self.head_dim = f.name, seqs, heads, head_dim
        self.head_dim_v = head_dim_v
        self.capacity = tokens
        self.groups = f.quantized_tokens(tokens) // self.group
        self.ring = f.residual_capacity(tokens)
        g, d, dv, b = self.group, head_dim, head_dim_v, self.bits
        slots = seqs * self.groups
        z = dict(device=device)
        self.kq = torch.zeros(slots, heads, g * b // 8, d, dtype=torch.uint8, **z)
        self.ks = torch.zeros(slots, heads, d, dtype=torch.float16, **z)
        self.km = torch.zeros(slots, heads, d, dtype=torch.float16, **z)
        self.has_v = values
        # a K-only cache allocates no V planes: the names point at the K ones
        # the value planes lie token-minor in a group: byte c (scale, minimum of channel group
        # c) of the G tokens side by side
        self.vq = torch.zeros(slots, heads, dv * b // 8, g, dtype=torch.uint8, **z) if values \
            else self.kq
        self.vs = torch.zeros(slots, heads, dv // g, g, dtype=torch.float16, **z) if values \
            else self.ks
        self.vm = torch.zeros(slots, heads, dv // g, g, dtype=torch.float16, **z) if values \
            else self.km
        self.kr = torch.zeros(seqs, heads, self.ring, d, dtype=torch.float16, **z)
        self.vr = torch.zeros(seqs, heads, self.ring, dv, dtype=torch.float16, **z) if values \
            else self.kr
        #: group → slot of every sequence (-1: not flushed yet)
        self.group_table = torch.full((seqs, max(1, self.groups)), -1, dtype=torch.int32, **z)
        order = (list(range(slots)) if slot_order is None
                 else [int(x) for x in slot_order])
        if sorted(order) != list(range(slots)):
            raise ValueError(f"slot_order must be a permutation of the {slots} group slots")
        self._free = order[::-1]
        #: tokens held per sequence: quantized, then residual
        self.n_quant = [0] * seqs
        self.n_resid = [0] * seqs
        # the lengths as decode last copied them to the device (see decode)
        self._lens_key: tuple[Any, ...] | None = None
        self._lens: tuple[Any, Any] | None = None

    def _take_slots(self, s: int, g0: int, count: int) -> list[int]:
        """Slots for groups g0 … g0 + count − 1 of sequence ``s``, taken from the pool in its
        order into the group table (one copy to the device)."""
        if g0 + count > self.groups or count > len(self._free):
            raise ValueError("KIVI cache is full")
        slots = [self._free.pop() for _ in range(count)]
        if slots:
            self.group_table[s, g0:g0 + count] = _torch().tensor(
                slots, dtype=self.group_table.dtype).to(self.group_table.device)
        return slots

    def tensors(self) -> list[Any]:
        """The cache's bytes: codes, scales, minima and the fp16 residual window."""
        if not self.has_v:
            return [self.kq, self.ks, self.km, self.kr]
        return [self.kq, self.ks, self.km, self.vq, self.vs, self.vm, self.kr, self.vr]

    def allocations(self) -> list[Any]:
        """Every device tensor the cache allocated, in order: its bytes and the group table
        (bookkeeping, not cache bytes, but a block of the allocator all the same)."""
        return [*self.tensors(), self.group_table]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())

    def _flush(self, s: int) -> None:
        """Quantize the oldest G residual tokens of sequence ``s`` into its next group."""
        torch = _torch()
        g = self.group
        start = self.n_quant[s]
        slot = self._take_slots(s, start // g, 1)[0]
        ring = torch.tensor([(start + i) % self.ring for i in range(g)])
        kp = quantize_group_keys(self.kr[s][:, ring], self.bits)
        self.kq[slot], self.ks[slot], self.km[slot] = kp["q"], kp["scale"], kp["min"]
        if self.has_v:
            vp = quantize_values(self.vr[s][:, ring], self.bits, g)
            for plane, x in ((self.vq, vp["q"]), (self.vs, vp["scale"]), (self.vm, vp["min"])):
                plane[slot] = x.transpose(-1, -2)

    def _append(self, s: int, k: Any, v: Any, flush: Callable[[int], None]) -> None:
        for i in range(k.shape[0]):
            if self.n_quant[s] + self.n_resid[s] >= self.capacity:
                raise ValueError("KIVI cache is full")
            if self.n_resid[s] == self.residual + self.group - 1:
                flush(s)
                self.n_quant[s] += self.group
                self.n_resid[s] -= self.group
            slot = (self.n_quant[s] + self.n_resid[s]) % self.ring
            self.kr[s, :, slot] = k[i].to(self.kr.dtype)
            if self.has_v:
                self.vr[s, :, slot] = v[i].to(self.vr.dtype)
            self.n_resid[s] += 1

    def append(self, s: int, k: Any, v: Any) -> None:
        """Append tokens k [n, heads, head_dim], v [n, heads, head_dim_v] to sequence ``s``."""
        self._append(s, k, v, self._flush)

    # ---- Triton path -----------------------------------------------------------------------

    def plan_append(self, s: int, n: int) -> tuple[int, int, int]:
        """Book ``n`` new tokens of sequence ``s`` as the token-by-token append would: the
        residual window flushes whole groups whenever it would pass R + G − 1 tokens. Takes the
        flushed groups' slots from the pool into the group table and advances the lengths.
        Returns (tokens held before, first flushed group, groups flushed) for write_append."""
        g = self.group
        live = self.n_quant[s] + self.n_resid[s]
        flushed = self._flushes(s, n)
        g0 = self.n_quant[s] // g
        self._take_slots(s, g0, flushed)
        self.n_quant[s] += flushed * g
        self.n_resid[s] += n - flushed * g
        return live, g0, flushed

    def _flushes(self, s: int, n: int) -> int:
        """The groups ``n`` new tokens of sequence ``s`` flush: the residual window holds at
        most R + G − 1 tokens. Raises where the sequence's capacity cannot take them."""
        if n < 0 or self.n_quant[s] + self.n_resid[s] + n > self.capacity:
            raise ValueError("KIVI cache is full")
        over = self.n_resid[s] + n - (self.residual + self.group - 1)
        return max(0, -(-over // self.group))

    def write_append(self, s: int, k: Any, v: Any, live: int, g0: int, flushed: int,
                     num_warps: int | None = None, late_v: bool | None = None,
                     ring_kernel: bool = True, max_registers: int | None = None,
                     writers_first: bool = False, parts: int | None = None) -> None:
        """The device work of an append that plan_append booked, in one launch: its programs
        quantize the flushed groups (from the ring and the new tokens) and put the newest
        tokens in their ring slots, each slot that a flushed token is read from written by the
        program that reads it. No host-side state changes and no copy from the host, so a CUDA
        graph can replay it. ``num_warps``, ``late_v``: the launch (default FLUSH_LAUNCH's for
        the bits), ``max_registers`` its cap of registers a thread (FLUSH_REGS, or
        FLUSH_ONE_BLOCK's where each program walks one channel block; 0 none);
        ``ring_kernel`` False: the ring slots written by torch indexing after the launch
        instead (several small launches: the probe times the difference); ``writers_first``:
        the launch in two, the ring-writing programs before the flushing ones (the order in
        which a writer that touched a slot still to be read would show); ``parts``: each
        program's channel blocks shared among that many programs (default flush_parts' for
        each launch)."""
        self._check_parts(parts)
        n = k.shape[0]
        # every token passes through the ring in the token-by-token append; the last ``ring``
        # of them are what it holds afterwards
        first = max(0, n - self.ring)
        writers = -(-(n - first) // RING_TOKENS) if ring_kernel else 0
        launches = ([(flushed, writers), (0, flushed)] if writers_first
                    else [(0, flushed + writers)])
        for j_first, programs in launches:
            if programs:
                self._flush_launch((programs, self.heads),
                                   (s, g0, flushed, live, first, n), j_first, k, v,
                                   ring_kernel, num_warps, late_v, max_registers, parts, None)
        if not ring_kernel:
            slots = (_torch().arange(first, n, device=k.device) + live) % self.ring
            self.kr[s][:, slots] = k[first:].transpose(0, 1).to(self.kr.dtype)
            if self.has_v:
                self.vr[s][:, slots] = v[first:].transpose(0, 1).to(self.vr.dtype)

    def plan_appends(self, counts: list[tuple[int, int]]) -> tuple[Any, int]:
        """Book appends of n new tokens to each sequence s of ``counts`` [(s, n), …], each as
        plan_append books it, for one launch of write_appends: the sequences must differ (the
        programs of two appends to one sequence would race). Returns the launch's plan rows
        (int32 [B, 7] on the cache's device: s, first flushed group, groups flushed, tokens
        held before, first token that reaches the ring, n, and the append's first row among
        the new tokens, the appends' tokens one after another) and its programs a KV head:
        the most any append needs."""
        seqs = [s for s, _ in counts]
        if len(set(seqs)) != len(seqs):
            raise ValueError("one launch appends to a sequence once: "
                             f"sequences {sorted(seqs)} repeat one")
        if sum(self._flushes(s, n) for s, n in counts) > len(self._free):
            raise ValueError("KIVI cache is full")
        rows, start, programs = [], 0, 0
        for s, n in counts:
            live, g0, flushed = self.plan_append(s, n)
            first = max(0, n - self.ring)
            programs = max(programs, flushed + -(-(n - first) // RING_TOKENS))
            rows.append([s, g0, flushed, live, first, n, start])
            start += n
        plans = _torch().tensor(rows, dtype=_torch().int32).reshape(-1, 7)
        return plans.to(self.kr.device), programs

    def write_appends(self, plans: Any, programs: int, k: Any, v: Any,
                      num_warps: int | None = None, late_v: bool | None = None,
                      max_registers: int | None = None, parts: int | None = None) -> None:
        """The device work of the appends plan_appends booked, in one launch: k [Σn, heads,
        head_dim], v [Σn, heads, head_dim_v] the appends' new tokens one after another. Each
        append's programs do what write_append's one launch does for it (its ring slots
        written by the kernel); no host state changes, so a CUDA graph can replay it.
        ``num_warps``, ``late_v``, ``max_registers``, ``parts``: write_append's."""
        self._check_parts(parts)
        if programs and plans.shape[0]:
            self._flush_launch((programs, self.heads, plans.shape[0]), (0,) * 6, 0,
                               k, v, True, num_warps, late_v, max_registers, parts, plans)

    def _flush_launch(self, grid: tuple[int, ...], scalars: tuple[int, ...], j_first: int,
                      k: Any, v: Any, ring_kernel: bool, num_warps: int | None,
                      late_v: bool | None, max_registers: int | None, parts: int | None,
                      plans: Any) -> None:
        """One launch of kivi_flush_kernel over ``grid`` (its programs at one part, the first
        axis then multiplied by ``parts``, default flush_parts'): one append's (sequence, first
        flushed group, groups flushed, tokens held, first token that reaches the ring, tokens)
        as ``scalars``, or several appends' as the rows of ``plans`` (BATCHED)."""
        from .kivi_triton import kivi_flush_kernel

        if parts is None:
            parts = flush_parts(math.prod(grid), self._blocks())
        grid = (grid[0] * parts, *grid[1:])
        registers, stages = (FLUSH_ONE_BLOCK if self._blocks() == parts
                             else (FLUSH_REGS, FLUSH_STAGES))
        if max_registers is not None:
            registers = max_registers
        cap = _capability(k)
        kivi_flush_kernel[grid](
            self.kr, self.vr, k.contiguous(), v.contiguous(), self.kq, self.ks, self.km,
            self.vq, self.vs, self.vm, self.group_table, scalars[0], self.group_table.stride(0),
            *scalars[1:], self.ring, j_first, H=self.heads, D=self.head_dim,
            DV=self.head_dim_v, G=self.group, BITS=self.bits, PER=8 // self.bits,
            LEVELS=(1 << self.bits) - 1, HAS_V=self.has_v, TOK=RING_TOKENS,
            RING_SLOTS=ring_kernel, HW=k.is_cuda, STAGES=stages,
            LATE_V=FLUSH_LAUNCH[self.bits][1] if late_v is None else late_v,
            num_warps=num_warps or FLUSH_LAUNCH[self.bits][0], PARTS=parts,
            LANE_TOKENS=FLUSH_LANE_TOKENS and self.group % (64 // self.bits) == 0,
            RCP_FMA=FLUSH_RCP_FMA and cap == (9, 0),
            PACKED_RANGE=FLUSH_PACKED_RANGE and cap >= (8, 0),
            **({"PLANS": plans, "BATCHED": True} if plans is not None else {}),
            **({"maxnreg": registers} if registers else {}))

    def _blocks(self) -> int:
        """The G-channel blocks of a group (the wider of K's and V's heads), which a flush's
        ``parts`` programs share."""
        return max(self.head_dim, self.head_dim_v) // self.group

    def _check_parts(self, parts: int | None) -> None:
        """A flush's programs share their channel blocks (G channels each) evenly (None:
        flush_parts' default, which does)."""
        blocks = self._blocks()
        if parts is not None and (parts < 1 or blocks % parts):
            raise ValueError(f"parts must divide the {blocks} channel blocks of "
                             f"{self.group}, got {parts}")

    def append_many(self, seqs: list[int], ks: list[Any], vs: list[Any],
                    parts: int | None = None) -> None:
        """Append ks[i] [n_i, heads, head_dim] and vs[i] to sequence seqs[i], every append in
        one kernel launch (the bytes of appending each on its own); ``parts``:
        write_append's."""
        if not (len(seqs) == len(ks) == len(vs)):
            raise ValueError("one list of new K tokens and one of V tokens a sequence")
        if not seqs:
            return
        torch = _torch()
        plans, programs = self.plan_appends([(s, k.shape[0])
                                             for s, k in zip(seqs, ks, strict=True)])
        self.write_appends(plans, programs, torch.cat(ks), torch.cat(vs), parts=parts)

    def append_triton(self, s: int, k: Any, v: Any) -> None:
        """Append tokens k [n, heads, head_dim], v [n, heads, head_dim_v] to sequence ``s`` in
        one kernel launch for all the groups they flush (the same bytes as ``append``)."""
        self.write_append(s, k, v, *self.plan_append(s, k.shape[0]))

    def decode(self, q: Any, split_tokens: int | None = None, *, num_warps: int | None = None,
               num_stages: int | None = None, tile_tokens: int | None = None,
               query_rows: int | None = None, pdl: bool | None = None,
               lazy: bool = KIVI_LAZY, asm: bool | None = None,
               programs_per_sm: int | None = None, max_registers: int | None = None,
               swap: bool | None = None, out: Any = None, gluon: bool | None = None) -> Any:
        """Fused decode attention over quantized groups and the residual ring. Without
        ``split_tokens`` the splits are as many as KIVI_PER_SM programs a multiprocessor hold
        in one wave (at least one);
        ``num_warps`` and ``num_stages`` override KIVI_WARPS (more warps for heads wider than
        128; KIVI_KEYS_WARPS for a K-only cache of heads of 512 lanes or more, which takes
        kivi_decode_keys_kernel) and KIVI_STAGES. ``tile_tokens``: quantized tokens a step of
        the program takes (whole groups, default KIVI_TILE; a split is a multiple of it; heads
        of 512 lanes or more take one group). ``asm``: unpack the codes with PTX (default: on a
        GPU; the interpreter cannot). ``programs_per_sm``: the fewest programs a multiprocessor
        the default split aims at (KIVI_PER_SM; KIVI_SWAP_PER_SM where decode_form caps the
        registers); ``max_registers``: a cap on the registers a thread (0 none; default
        KIVI_SWAP_REGS where KIVI_SWAP_PER_SM applies, else none). ``query_rows``: the query
        heads a program takes at most (default max_query_rows of the head's lanes); a larger
        group is spread over several programs of its KV head. ``swap``: the products swapped
        (default KIVI_SWAP at heads of up to 128 lanes; only with K and V and heads under 512
        lanes), the query rows then
        padded to 8 instead of 16. ``pdl``: as LayerCache.decode's. ``gluon`` (default: where
        _takes_gluon finds it applies and none of the Triton kernel's launch arguments is
        given; True forces it, False never): the kernel that states its layouts
        (kernels/gluon_kivi.py), KIVI_GLUON_PER_SM programs a multiprocessor.
        ``lazy`` (default KIVI_LAZY): rescale the running output only when the max grows by
        more than LAZY_MARGIN (softmax_lazy). q [seqs, Hq, head_dim] → [seqs, Hq, head_dim_v]
        float32: into ``out`` where given (that tensor, contiguous float32 on q's device),
        else into a new tensor filled with NaN first, so that an unwritten element cannot pass
        for a result (a launch more a step)."""
        from .cache import LOG2E, max_query_rows, programmatic_launch, query_blocks
        from .kivi_triton import kivi_decode_kernel, kivi_decode_keys_kernel
        from .triton_ops import pdl_launch, reduce_splits

        torch = _torch()
        seqs, hq, d = q.shape
        if gluon is not False:
            triton_args = (num_warps, num_stages, tile_tokens, query_rows, asm, programs_per_sm,
                           max_registers, swap)
            if self._takes_gluon(q, bool(gluon), any(a is not None for a in triton_args)):
                from .gluon_kivi import decode_kivi_gluon

                out = decode_output(out, (seqs, hq, self.head_dim_v), q.device)
                return decode_kivi_gluon(self, q, out, split_tokens=split_tokens, lazy=lazy,
                                         pdl=programmatic_launch(q.device) if pdl is None
                                         else pdl)
        group = hq // self.heads
        dp = _pow2(max(d, self.head_dim_v))
        swap, cap = decode_form(self.bits, dp, self.has_v, swap, seqs * self.heads)
        qpad, qblocks = query_blocks(group, query_rows or max_query_rows(dp),
                                     least=8 if swap else 16)
        total = max(a + b for a, b in zip(self.n_quant, self.n_resid, strict=True))
        if max_registers is None:
            max_registers = cap
        if split_tokens is None:
            per_sm = programs_per_sm or (KIVI_SWAP_PER_SM if cap else KIVI_PER_SM)
            split_tokens = -(-total // wave_splits(seqs * self.heads * qblocks, per_sm))
        wide = dp >= 512
        if wide:
            # wide heads (an MLA latent) take one group a step, their keys by shifts
            tok = self.group
        else:
            tok = tile_tokens or KIVI_TILE
            if tok % self.group or (tok // self.group) * (self.group * self.bits // 8) < 16:
                raise ValueError(f"tile_tokens must be whole groups of {self.group} tokens, "
                                 f"at least {16 * 8 // self.bits} for {self.fmt}")
        split = max(tok, -(-split_tokens // tok) * tok)
        n_splits = max(1, -(-total // split))
        acc = torch.empty(seqs * hq * n_splits * dp, dtype=torch.float32, device=q.device)
        ml = torch.empty(seqs * hq * n_splits * 2, dtype=torch.float32, device=q.device)
        out = decode_output(out, (seqs, hq, self.head_dim_v), q.device)
        nq, nr = self.device_lengths(q.device)
        if pdl is None:
            pdl = programmatic_launch(q.device)
        grid = (seqs, self.heads * qblocks, n_splits)
        # what both kernels take
        common = dict(H=self.heads, GROUP=group, QPAD=qpad, D=d, DP=dp, G=self.group,
                      BITS=self.bits, PER=8 // self.bits, LEVELS=(1 << self.bits) - 1,
                      SPLIT=split, QB=qblocks, LAZY=bool(lazy),
                      num_stages=num_stages or KIVI_STAGES, **pdl_launch(pdl),
                      **({"maxnreg": max_registers} if max_registers else {}))
        if wide and not self.has_v:
            # an MLA latent: its own kernel
            kivi_decode_keys_kernel[grid](
                q.contiguous(), acc, ml, self.kq, self.ks, self.km, self.kr, nq, nr,
                self.group_table, self.group_table.stride(0), self.ring, n_splits,
                LOG2E / d ** 0.5, num_warps=num_warps or KIVI_KEYS_WARPS, **common)
        else:
            kivi_decode_kernel[grid](
                q.contiguous(), acc, ml, self.kq, self.ks, self.km, self.vq, self.vs, self.vm,
                self.kr, self.vr, nq, nr, self.group_table, self.group_table.stride(0),
                self.ring, n_splits, LOG2E / d ** 0.5, DV=self.head_dim_v, HAS_V=self.has_v,
                TOK=tok, SWAP=swap,
                ASM=q.is_cuda if asm is None else asm,
                num_warps=num_warps or (KIVI_WARPS if dp <= 128 else wide_head_warps(dp)),
                **common)
        reduce_splits(acc, ml, out, n_splits, seqs, self.heads, group, dp, pdl=pdl)
        return out

    def device_lengths(self, device: Any) -> tuple[Any, Any]:
        """Each sequence's quantized and residual token counts as int32 tensors on ``device``,
        copied again only after they change, so that a decode step can be captured in a CUDA
        graph (no copy from the host inside it)."""
        torch = _torch()
        key = (tuple(self.n_quant), tuple(self.n_resid), str(device))
        if self._lens is None or self._lens_key != key:
            self._lens = (torch.tensor(self.n_quant, dtype=torch.int32, device=device),
                          torch.tensor(self.n_resid, dtype=torch.int32, device=device))
            self._lens_key = key
        return self._lens

    def _takes_gluon(self, q: Any, forced: bool, other_launch: bool) -> bool:
        """decode's ``gluon``: whether the step takes the Gluon kernel (forced: it must, or a
        ValueError says why it cannot)."""
        from .cache import gluon_available

        why = None
        if not (self.has_v and self.head_dim == self.head_dim_v and self.head_dim in (64, 128)
                and self.group == 32):
            why = "K and V with heads of 128 or 64 lanes"
        elif not (q.is_cuda and q.shape[-1] == self.head_dim and q.shape[1] % self.heads == 0
                  and q.shape[1] // self.heads <= (16 if self.head_dim == 128 else 8)):
            # (the 16-column form was timed on 128-lane heads; on 64 only checked)
            why = ("a query on a GPU with at most 16 heads a KV head (8 on heads of 64 "
                   "lanes)")
        elif not gluon_available("gluon_kivi"):
            why = "a triton with the Gluon dialect"
        elif other_launch and not forced:
            return False
        if why is not None and forced:
            raise ValueError(f"gluon: the Gluon kernel needs {why}")
        return why is None

    def dequantize(self, s: int) -> tuple[Any, Any]:
        """Float32 K [heads, tokens, head_dim], V [heads, tokens, head_dim_v] of sequence ``s``
        in token order."""
        torch = _torch()
        nq, nr = self.n_quant[s], self.n_resid[s]
        ng = nq // self.group
        if ng:
            sl = self.group_table[s, :ng].long()
            k_q = dequantize_group_keys({"q": self.kq[sl].transpose(0, 1),
                                         "scale": self.ks[sl].transpose(0, 1),
                                         "min": self.km[sl].transpose(0, 1)}, self.bits)
            k_q = k_q.reshape(self.heads, nq, self.head_dim)

            def flat(t: Any) -> Any:
                # token-minor value planes → [heads, tokens, width]
                return t[sl].transpose(-1, -2).transpose(0, 1).reshape(self.heads, nq, -1)
            v_q = dequantize_values({"q": flat(self.vq), "scale": flat(self.vs),
                                     "min": flat(self.vm)}, self.bits, self.group) \
                if self.has_v else k_q
        else:
            k_q = torch.zeros(self.heads, 0, self.head_dim, device=self.kr.device)
            v_q = torch.zeros(self.heads, 0, self.head_dim_v, device=self.kr.device)
        slots = torch.tensor([(nq + i) % self.ring for i in range(nr)], dtype=torch.long)
        k = torch.cat([k_q, self.kr[s][:, slots].float()], dim=1)
        v = torch.cat([v_q, self.vr[s][:, slots].float()], dim=1) if self.has_v else k
        return k, v

    def decode_ref(self, q: Any) -> Any:
        """Attention of q [seqs, Hq, D] over each sequence (float64)."""
        torch = _torch()
        from .ref import attention_ref

        outs = []
        for s in range(self.seqs):
            k, v = self.dequantize(s)
            n = k.shape[1]
            outs.append(attention_ref(q[s:s + 1], k[None], v[None], torch.tensor([n]))[0])
        return torch.stack(outs)


