"""K and V rows of different widths (MiMo-V2's full layers: K 192, V 128): the paged kernels
and KIVI against their references and exact float64 attention, and the tensors' bytes against
kvcore's figure for such a layer.

Run in Triton's interpreter on CPU tensors (TRITON_INTERPRET=1, set in conftest), on small odd
shapes, in fp16/fp32.
"""

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kvcore.formats import get_format  # noqa: E402
from kvcore.kernels import ref  # noqa: E402
from kvcore.kernels.cache import PAGED, LayerCache, head_parts  # noqa: E402
from kvcore.kernels.kivi import KiviCache  # noqa: E402
from kvcore.kv import CacheOptions, cache_size  # noqa: E402
from kvcore.model import LayerGroup, LayerKind, ModelSpec, ParamCount  # noqa: E402

# relative error of decode attention over the quantized cache against exact attention over the
# unquantized K and V (random Gaussian data), as tests/kernels/test_kernels.py bounds it
BOUNDS = {"f16": 2e-3, "fp8_pth": 4e-2, "q8_0": 1.5e-2, "q4_0": 0.12, "tbq4": 0.12,
          "tbq3": 0.22, "nvfp4": 0.15}
INTERP = [f for f in PAGED if f != "bf16"]


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def predicted(fmt_k, fmt_v, *, sequences, kv_heads, dim_k, dim_v, tokens):
    """kvcore's bytes for one full-attention layer of K ``dim_k`` and V ``dim_v`` wide."""
    group = LayerGroup(LayerKind.FULL, (0,), n_kv_heads=kv_heads, head_dim_k=dim_k,
                       head_dim_v=dim_v)
    spec = ModelSpec(name="widths", model_type="widths", groups=(group,),
                     params=ParamCount(total=0, active=0, embedding=0), source="widths")
    opts = CacheOptions(kv_k=get_format(fmt_k), kv_v=get_format(fmt_v))
    return cache_size(spec, tokens, sequences, opts).kv_bytes


def build(fmt_k, fmt_v, lens, dim_k, dim_v, kv_heads=2, page=16, seed=0):
    """Kernel and reference caches of random rows (K dim_k, V dim_v wide) in shuffled pages."""
    g = torch.Generator().manual_seed(seed)
    bsz = len(lens)
    pages_per = max(math.ceil(n / page) for n in lens)
    total = bsz * pages_per
    table = torch.randperm(total, generator=g).reshape(bsz, pages_per).to(torch.int32)
    tmax = max(lens)
    k = torch.randn(bsz, tmax, kv_heads, dim_k, generator=g).half()
    v = torch.randn(bsz, tmax, kv_heads, dim_v, generator=g).half()
    kernel = LayerCache(fmt_k, fmt_v, total, page, kv_heads, dim_k, head_dim_v=dim_v)
    refc = LayerCache(fmt_k, fmt_v, total, page, kv_heads, dim_k, head_dim_v=dim_v)
    for b, n in enumerate(lens):
        t = torch.arange(n)
        kernel.append(k[b, :n], v[b, :n], table[b, t // page].long(), t % page)
        refc.append_ref(k[b, :n], v[b, :n], table[b, t // page].long(), t % page)
    return kernel, refc, table, torch.tensor(lens, dtype=torch.int32), k, v


def check(fmt_k, fmt_v, dim_k, dim_v, seed=0):
    lens = [29, 1, 40]
    kernel, refc, table, seq_lens, k, v = build(fmt_k, fmt_v, lens, dim_k, dim_v, seed=seed)
    # append writes each side's rows at its own width: the reference's planes
    for side_k, side_r in ((kernel.k, refc.k), (kernel.v, refc.v)):
        for name, t in side_k.planes.items():
            r = side_r.planes[name]
            if t.dtype.is_floating_point:
                assert torch.allclose(t.float(), r.float(), rtol=1e-3, atol=1e-6), name
            else:
                assert (t == r).float().mean() > 0.995, name
    q = torch.randn(len(lens), 6, dim_k, generator=torch.Generator().manual_seed(seed + 1)).half()
    out = kernel.decode(q, table, seq_lens, split_tokens=16, block_n=16)
    # V's width only, every element written (the output is pre-filled with NaN)
    assert out.shape == (len(lens), 6, dim_v)
    assert not torch.isnan(out).any()
    expect = kernel.decode_ref(q.float(), table, seq_lens)
    assert expect.shape == out.shape
    assert rel(out, expect) < 3e-3
    exact = ref.attention_ref(q.float(), k.permute(0, 2, 1, 3).float(),
                              v.permute(0, 2, 1, 3).float(), seq_lens)
    assert rel(expect, exact) < max(BOUNDS[fmt_k], BOUNDS[fmt_v])
    assert rel(out, exact) < max(BOUNDS[fmt_k], BOUNDS[fmt_v])


@pytest.mark.parametrize("fmt", INTERP)
def test_v_narrower_than_k(fmt):
    # K 96 (held as 64 + 32 lanes), V 48: V's planes, products and output only 48 wide
    check(fmt, fmt, 96, 48, seed=3)


@pytest.mark.parametrize("fmt", INTERP)
def test_v_wider_than_k(fmt):
    # K 48, V 96: the query and K masked to 48 of the 64 + 32 lanes, V read in both parts
    check(fmt, fmt, 48, 96, seed=5)


@pytest.mark.parametrize(("fmt_k", "fmt_v"), [("f16", "f16"), ("q4_0", "q4_0"),
                                              ("q8_0", "tbq4"), ("tbq3", "nvfp4"),
                                              ("f16", "tbq3"), ("fp8_pth", "q8_0")])
def test_mimo_widths_k_192_v_128(fmt_k, fmt_v):
    # MiMo-V2's full layers: K 192 (128 + 64 lanes; 256 rotated), V 128 (a rotated V is rotated
    # back over the whole row's lanes, its tail all zero)
    assert head_parts(192) == (128, 64)
    check(fmt_k, fmt_v, 192, 128, seed=7)


def test_equal_widths_are_the_default():
    # head_dim_v equal to head_dim is the cache without it: the same planes, the same output
    g = torch.Generator().manual_seed(9)
    k = torch.randn(30, 2, 80, generator=g).half()
    v = torch.randn(30, 2, 80, generator=g).half()
    t = torch.arange(30)
    plain = LayerCache("q4_0", "tbq4", 2, 16, 2, 80)
    given = LayerCache("q4_0", "tbq4", 2, 16, 2, 80, head_dim_v=80)
    for cache in (plain, given):
        cache.append(k, v, t // 16, t % 16)
    for side_p, side_g in ((plain.k, given.k), (plain.v, given.v)):
        for name, plane in side_p.planes.items():
            assert torch.equal(plane, side_g.planes[name])
    table = torch.tensor([[0, 1]], dtype=torch.int32)
    lens = torch.tensor([30], dtype=torch.int32)
    q = torch.randn(1, 4, 80, generator=g).half()
    out = plain.decode(q, table, lens, split_tokens=16, block_n=16)
    assert out.shape == (1, 4, 80) and not torch.isnan(out).any()
    assert torch.equal(out, given.decode(q, table, lens, split_tokens=16, block_n=16))


@pytest.mark.parametrize("fmt", PAGED)
@pytest.mark.parametrize(("dim_k", "dim_v"), [(192, 128), (48, 32), (64, 160)])
def test_tensor_bytes_equal_kvcore(fmt, dim_k, dim_v):
    cache = LayerCache(fmt, fmt, 3, 17, 2, dim_k, head_dim_v=dim_v)
    assert cache.v.head_dim == dim_v
    assert cache.nbytes == predicted(fmt, fmt, sequences=3, kv_heads=2, dim_k=dim_k,
                                     dim_v=dim_v, tokens=17)


def test_mixed_format_bytes_equal_kvcore():
    cache = LayerCache("q8_0", "tbq3", 4, 63, 4, 192, head_dim_v=128)
    assert cache.nbytes == predicted("q8_0", "tbq3", sequences=4, kv_heads=4, dim_k=192,
                                     dim_v=128, tokens=63)


def test_k_only_cache_has_no_v_width():
    with pytest.raises(ValueError, match="K-only"):
        LayerCache("q8_0", "q8_0", 2, 16, 1, 64, values=False, head_dim_v=32)
    with pytest.raises(ValueError, match="K-only"):
        KiviCache("kivi2", 1, 1, 64, 200, values=False, head_dim_v=32)


@pytest.mark.parametrize("fmt", ["kivi2", "kivi4"])
@pytest.mark.parametrize(("dim_k", "dim_v", "tokens"), [(192, 128, 1000), (64, 96, 159)])
def test_kivi_bytes_equal_kvcore(fmt, dim_k, dim_v, tokens):
    cache = KiviCache(fmt, 2, 3, dim_k, tokens, head_dim_v=dim_v)
    assert cache.nbytes == predicted(fmt, fmt, sequences=2, kv_heads=3, dim_k=dim_k,
                                     dim_v=dim_v, tokens=tokens)


@pytest.mark.parametrize(("fmt", "dim_k", "dim_v"), [("kivi2", 96, 32), ("kivi4", 64, 96)])
def test_kivi_triton_matches_reference(fmt, dim_k, dim_v):
    # the flush kernel writes V's groups at V's width (the reference's bytes exactly); decode
    # attends with K's width and returns V's
    g = torch.Generator().manual_seed(1)
    lens = [200, 5]
    k = torch.randn(2, 200, 2, dim_k, generator=g).half()
    v = torch.randn(2, 200, 2, dim_v, generator=g).half()
    ref_cache = KiviCache(fmt, 2, 2, dim_k, 300, head_dim_v=dim_v)
    tri = KiviCache(fmt, 2, 2, dim_k, 300, head_dim_v=dim_v)
    for s, n in enumerate(lens):
        ref_cache.append(s, k[s, :n], v[s, :n])
        tri.append_triton(s, k[s, :n], v[s, :n])
    assert tri.n_quant == ref_cache.n_quant == [64, 0]
    for a, b in zip(tri.tensors(), ref_cache.tensors(), strict=True):
        assert torch.equal(a, b)
    q = torch.randn(2, 6, dim_k, generator=g).half()
    out = tri.decode(q, split_tokens=64)
    assert out.shape == (2, 6, dim_v)
    assert not torch.isnan(out).any()
    expect = ref_cache.decode_ref(q.float())
    assert rel(out, expect) < 3e-3
    exact = torch.stack([ref.attention_ref(q[s:s + 1].float(),
                                           k[s:s + 1, :n].permute(0, 2, 1, 3).float(),
                                           v[s:s + 1, :n].permute(0, 2, 1, 3).float(),
                                           torch.tensor([n]))[0] for s, n in enumerate(lens)])
    assert rel(out, exact) < (0.9 if fmt == "kivi2" else 0.2)
