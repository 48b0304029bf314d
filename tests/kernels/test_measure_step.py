"""The decode step kvcore.measure times: the fused kernel writing into one output of its own."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.kernels.kivi import KiviCache  # noqa: E402
from kvcore.measure import decode_step  # noqa: E402


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def test_the_timed_step_writes_into_one_output_of_its_own():
    # every call returns the same tensor, written whole (no NaN fill launch in the timed step,
    # nothing left unwritten), with the reference's values over the same bytes
    g = torch.Generator().manual_seed(3)
    seqs, heads, dim, tokens = 2, 2, 64, 40
    paged = LayerCache("q4_0", "q8_0", seqs, tokens, heads, dim)
    k = torch.randn(seqs * tokens, heads, dim, generator=g).half()
    v = torch.randn(seqs * tokens, heads, dim, generator=g).half()
    t = torch.arange(seqs * tokens)
    paged.append(k, v, t // tokens, t % tokens)
    kivi = KiviCache("kivi2", seqs, heads, dim, 64)
    for s in range(seqs):
        kivi.append_triton(s, k[s * tokens:(s + 1) * tokens], v[s * tokens:(s + 1) * tokens])
    for cache in (paged, kivi):
        torch.manual_seed(0)
        step = decode_step(cache, seqs, 4 * heads, dim, tokens, "cpu", torch, kernel=True)
        torch.manual_seed(0)
        ref = decode_step(cache, seqs, 4 * heads, dim, tokens, "cpu", torch, kernel=False)()
        first = step()
        assert step() is first
        assert first.shape == (seqs, 4 * heads, dim) and not bool(first.isnan().any())
        assert rel(first, ref) < 3e-3
