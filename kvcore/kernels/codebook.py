"""Lloyd-Max codebooks for N(0, σ²) and the randomized Walsh–Hadamard rotation (pure Python).

The rotated formats (tbq4, tbq3) map each coordinate of a unit vector rotated by
``R = diag(s2) · H · diag(s1) / √n`` to the nearest Lloyd-Max centroid for N(0, 1/n): after a
random rotation the coordinates of a unit vector are close to that distribution.
"""

from __future__ import annotations

import math
import random
import struct
from functools import cache

__all__ = ["cells", "hadamard_signs", "lloyd_max", "rotation_matrix", "staircase_bias",
           "staircase_exact", "thresholds"]

BLOCK = 128
SEED = 42


def _pdf(z: float) -> float:
    return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _cdf(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


@cache
def lloyd_max(levels: int, sigma: float = 1 / math.sqrt(BLOCK), iters: int = 500) -> tuple[float, ...]:
    """The ``levels`` centroids minimising squared error for N(0, sigma²), ascending."""
    # start from equal-probability quantiles
    cent = []
    for i in range(levels):
        p = (i + 0.5) / levels
        lo, hi = -10.0, 10.0
        for _ in range(100):
            mid = (lo + hi) / 2
            if _cdf(mid) < p:
                lo = mid
            else:
                hi = mid
        cent.append(lo)
    for _ in range(iters):
        edges = [-math.inf] + [(a + b) / 2 for a, b in zip(cent, cent[1:], strict=False)] + [math.inf]
        new = []
        for a, b in zip(edges, edges[1:], strict=False):
            mass = _cdf(b) - _cdf(a)
            pa = 0.0 if math.isinf(a) else _pdf(a)
            pb = 0.0 if math.isinf(b) else _pdf(b)
            new.append((pa - pb) / mass)
        if max(abs(x - y) for x, y in zip(new, cent, strict=True)) < 1e-13:
            cent = new
            break
        cent = new
    # exactly symmetric, as N(0, σ²) is: c[i] = −c[levels − 1 − i]
    half = [(cent[levels - 1 - i] - cent[i]) / 2 for i in range(levels // 2)]
    cent = [-x for x in half] + [0.0] * (levels % 2) + half[::-1]
    return tuple(c * sigma for c in cent)


def thresholds(levels: int) -> tuple[float, ...]:
    """Decision boundaries between consecutive centroids (levels − 1 of them)."""
    c = lloyd_max(levels)
    return tuple((a + b) / 2 for a, b in zip(c, c[1:], strict=False))


def _f32(x: float) -> float:
    """x rounded to float32 (to nearest, ties to even)."""
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def _bits(x: float) -> int:
    """The float32 x's bits."""
    return int(struct.unpack("<I", struct.pack("<f", x))[0])


def _coded(c: float, code: int, mask: int) -> float:
    """The float32 c with ``code`` in the low bits ``mask`` of its mantissa (the append
    kernels' coded centroid)."""
    return float(struct.unpack("<f", struct.pack("<I", (_bits(c) & ~mask) | code))[0])


def staircase_exact(cent: list[float]) -> bool:
    """Whether the float32 staircase over the ascending float32 values ``cent`` is exact:
    each value plus the float32 step to the next is the next, bit for bit."""
    return all(_f32(a + _f32(b - a)) == b for a, b in zip(cent, cent[1:], strict=False))


@cache
def staircase_bias(levels: int, bias: float = 0.25) -> float:
    """The bias the rotated append's FMA search adds to the positive centroids: 0.0 where the
    staircase over the coded centroids as they are is exact (staircase_exact), else ``bias``
    (which puts them all in one binade, where every step is exact)."""
    half, mask = levels // 2, levels - 1
    pos = lloyd_max(levels)[half:]
    cent = [_coded(_f32(c), half + j, mask) for j, c in enumerate(pos)]
    return 0.0 if staircase_exact(cent) else bias


@cache
def cells(levels: int, bias: float = 0.0) -> tuple[float, tuple[tuple[int, int], ...]]:
    """The rotated append's centroid search by lookup: a coordinate v of a unit vector
    (0 ≤ v ≤ 1) falls in cell round(v · inv), and each cell holds at most one positive
    threshold, as far from the cell's edges as cells of 1/61 to 1 allow (tbq4: 0.24 of a
    cell, tbq3: 0.37; a float32 rounding of v · inv is about 10⁻⁵ of one), so one comparison
    with it finds the centroid: the cell's lowest coded centroid (_coded, plus ``bias``, as
    staircase_bias gives it) plus 1 or 0 times the step to the next. Returns (inv, rows): inv
    a multiple of 2⁻⁹ (a float32), the rows a power of two (past the last cell, the top
    centroid; the kernel masks a cell's index with len(rows) − 1), each two int64 words: the
    threshold negated (float32 bits, low half) and the cell's lowest coded centroid (high
    half); the step to the next centroid (low half; 0 in a cell with no threshold, whose
    threshold is then 0)."""
    half, mask = levels // 2, levels - 1
    th = [_f32(t) for t in thresholds(levels)[half:]]
    coded = [_coded(_f32(_f32(c) + bias), half + j, mask)
             for j, c in enumerate(lloyd_max(levels)[half:])]
    steps = [_f32(b - a) for a, b in zip(coded, coded[1:], strict=False)] + [0.0]
    # the widest margin between a threshold and its cell's edges, over cells from the whole
    # unit down to a 61st of it (64 rows)
    best = (-1.0, 0.0)
    for k in range(512, 61 * 512):
        inv = k / 512
        at = [t * inv for t in th]
        if len({round(x) for x in at}) < len(at):
            continue
        margin = 0.5 - max(abs(x - round(x)) for x in at)
        if margin > best[0] + 1e-9:
            best = (margin, inv)
    inv = best[1]
    last = round(inv) + 2  # v up to 1 and a little rounding past it
    size = 1 << (last - 1).bit_length()
    rows = []
    for i in range(size):
        below = sum(round(t * inv) < i for t in th)
        inside = [t for t in th if round(t * inv) == i]
        t, step = (inside[0], steps[below]) if inside else (0.0, 0.0)
        rows.append(((_bits(-t) if inside else 0) | _bits(coded[below]) << 32, _bits(step)))
    return inv, tuple(rows)


@cache
def hadamard_signs(n: int = BLOCK, seed: int = SEED) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two fixed ±1 vectors (s1 before the transform, s2 after)."""
    rng = random.Random(seed)
    s1 = tuple(rng.choice((-1, 1)) for _ in range(n))
    s2 = tuple(rng.choice((-1, 1)) for _ in range(n))
    return s1, s2


def rotation_matrix(n: int = BLOCK) -> list[list[float]]:
    """R with R·x = s2 ⊙ (H (s1 ⊙ x)) / √n; orthonormal, so R⁻¹ = Rᵀ."""
    if n & (n - 1):
        raise ValueError("the Walsh–Hadamard size must be a power of two")
    s1, s2 = hadamard_signs(n)
    scale = 1 / math.sqrt(n)
    # Sylvester Hadamard: H[i][j] = (-1)^popcount(i & j)
    return [[s2[i] * (-1 if bin(i & j).count("1") % 2 else 1) * s1[j] * scale for j in range(n)]
            for i in range(n)]
