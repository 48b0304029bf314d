"""Kernels against their torch reference and both against exact float64 attention.

Run in Triton's interpreter on CPU tensors (TRITON_INTERPRET=1, set in conftest), on small odd
shapes, in fp16/fp32.
"""

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kvcore.kernels import ref  # noqa: E402
from kvcore.kernels.cache import (  # noqa: E402
    PAD_ROWS,
    PAD_ROWS_MANY,
    PAGED,
    ROTATE_IN_KERNEL_TOKENS,
    WHOLE_RESIDENT,
    LayerCache,
    few_rows_launch,
    fullest_waves,
    head_parts,
    query_blocks,
    resident_programs,
    rotated_many_splits,
    short_tile_reads,
    small_tiles,
    swapped_launch,
    tail_offsets,
    wave_up,
    wide_launch,
)
from kvcore.kv import geometry_bytes  # noqa: E402

# relative error of decode attention over the quantized cache against exact attention over the
# unquantized K and V (random Gaussian data)
BOUNDS = {"f16": 2e-3, "bf16": 1e-2, "fp8_pth": 4e-2, "q8_0": 1.5e-2, "q4_0": 0.12,
          "tbq4": 0.12, "tbq3": 0.22, "nvfp4": 0.15}
INTERP = [f for f in PAGED if f != "bf16"]


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def build(fmt_k, fmt_v, lens, kv_heads=2, head_dim=128, page=16, shuffle=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    bsz = len(lens)
    pages_per = max(math.ceil(n / page) for n in lens)
    total = bsz * pages_per
    order = torch.randperm(total, generator=g) if shuffle else torch.arange(total)
    table = order.reshape(bsz, pages_per).to(torch.int32)
    tmax = max(lens)
    k = torch.randn(bsz, tmax, kv_heads, head_dim, generator=g).half()
    v = torch.randn(bsz, tmax, kv_heads, head_dim, generator=g).half()
    kernel = LayerCache(fmt_k, fmt_v, total, page, kv_heads, head_dim)
    refc = LayerCache(fmt_k, fmt_v, total, page, kv_heads, head_dim)
    for b, n in enumerate(lens):
        t = torch.arange(n)
        kernel.append(k[b, :n], v[b, :n], table[b, t // page].long(), t % page)
        refc.append_ref(k[b, :n], v[b, :n], table[b, t // page].long(), t % page)
    return kernel, refc, table, torch.tensor(lens, dtype=torch.int32), k, v


def two_page_cache(fmt, kv_heads, head_dim, lens, values=True, seed=0, page=32):
    """A cache whose sequence s holds lens[s] random rows in pages 2s and 2s + 1 of ``page``
    tokens (K only unless ``values``): (cache, block table, lengths, the generator, for q)."""
    g = torch.Generator().manual_seed(seed)
    n = max(lens)
    k = torch.randn(len(lens), n, kv_heads, head_dim, generator=g).half()
    v = k if not values else torch.randn(len(lens), n, kv_heads, head_dim, generator=g).half()
    table = torch.arange(2 * len(lens), dtype=torch.int32).reshape(len(lens), 2)
    cache = LayerCache(fmt, fmt, 2 * len(lens), page, kv_heads, head_dim, values=values)
    t = torch.arange(n)
    for b, m in enumerate(lens):
        cache.append(k[b, :m], v[b, :m], table[b, t[:m] // page].long(), t[:m] % page)
    return cache, table, torch.tensor(lens, dtype=torch.int32), g


@pytest.mark.parametrize("fmt", INTERP)
def test_append_matches_reference_planes(fmt):
    kernel, refc, *_ = build(fmt, fmt, [37, 50])
    for side_k, side_r in ((kernel.k, refc.k), (kernel.v, refc.v)):
        for name, t in side_k.planes.items():
            r = side_r.planes[name]
            if t.dtype.is_floating_point:
                assert torch.allclose(t.float(), r.float(), rtol=1e-3, atol=1e-6), (fmt, name)
            else:
                # integer codes: identical but for rounding ties
                assert (t == r).float().mean() > 0.995, (fmt, name)


@pytest.mark.parametrize("fmt", INTERP)
def test_decode_matches_reference_and_exact(fmt):
    lens = [37, 1, 50]
    kernel, refc, table, seq_lens, k, v = build(fmt, fmt, lens)
    q = torch.randn(len(lens), 8, 128, generator=torch.Generator().manual_seed(11)).half()
    out = kernel.decode(q, table, seq_lens, split_tokens=32, block_n=16)
    assert not torch.isnan(out).any()
    expect = kernel.decode_ref(q.float(), table, seq_lens)
    assert rel(out, expect) < 3e-3, fmt
    exact = ref.attention_ref(q.float(), k.permute(0, 2, 1, 3).float(),
                              v.permute(0, 2, 1, 3).float(), seq_lens)
    assert rel(out, exact) < BOUNDS[fmt], (fmt, rel(out, exact))


@pytest.mark.parametrize(("fmt_k", "fmt_v"), [("q8_0", "tbq4"), ("fp8_pth", "q4_0"),
                                              ("tbq4", "f16"), ("nvfp4", "tbq3")])
def test_mixed_k_and_v_formats(fmt_k, fmt_v):
    kernel, refc, table, seq_lens, k, v = build(fmt_k, fmt_v, [29, 40], seed=3)
    q = torch.randn(2, 4, 128, generator=torch.Generator().manual_seed(12)).half()
    out = kernel.decode(q, table, seq_lens, split_tokens=16, block_n=16)
    assert rel(out, kernel.decode_ref(q.float(), table, seq_lens)) < 3e-3


@pytest.mark.parametrize(("fmt", "head_dim"), [("f16", 80), ("q8_0", 80), ("q4_0", 96),
                                               ("fp8_pth", 64), ("tbq4", 64), ("nvfp4", 48)])
def test_odd_head_dims(fmt, head_dim):
    kernel, refc, table, seq_lens, k, v = build(fmt, fmt, [21, 13], head_dim=head_dim, seed=5)
    q = torch.randn(2, 6, head_dim, generator=torch.Generator().manual_seed(13)).half()
    kernel3 = kernel  # GQA 6 query heads over 2 KV heads
    out = kernel3.decode(q, table, seq_lens, split_tokens=16, block_n=16)
    assert not torch.isnan(out).any()
    assert rel(out, kernel.decode_ref(q.float(), table, seq_lens)) < 3e-3


def test_head_parts_and_tail_offsets():
    # a power of two stays whole; otherwise a power-of-two main part and a tail of at least
    # 32 lanes, only where that is fewer lanes than the next power of two
    assert [head_parts(w) for w in (128, 576, 640, 96, 80, 52, 192, 256, 1)] == [
        (128, 0), (512, 64), (512, 128), (64, 32), (64, 32), (64, 0), (128, 64), (256, 0),
        (1, 0)]
    # elements of (packed bytes, scales) before head dimension 512 (64 for the 16-blocks)
    assert tail_offsets("f16", 512) == (512, 0)
    assert tail_offsets("fp8_pth", 512) == (512, 0)  # its scale is per row
    assert tail_offsets("q8_0", 512) == (512, 16)
    assert tail_offsets("q4_0", 512) == (256, 16)
    assert tail_offsets("tbq4", 512) == (256, 4)
    assert tail_offsets("tbq3", 512) == (192, 4)
    assert tail_offsets("nvfp4", 64) == (32, 4)


@pytest.mark.parametrize(("fmt_k", "fmt_v", "head_dim"), [
    ("f16", "f16", 96), ("fp8_pth", "q8_0", 192), ("q4_0", "nvfp4", 80),
    ("nvfp4", "q4_0", 96), ("tbq4", "tbq3", 576), ("tbq3", "fp8_pth", 576)])
def test_heads_held_in_two_parts(fmt_k, fmt_v, head_dim):
    # a head held as a main part and a tail (K and V read from the tail's offset in every
    # format, partly packed tails included) gives the reference, as words and as bytes
    width = max(head_dim, ref.padded(fmt_k, head_dim), ref.padded(fmt_v, head_dim))
    main, tail = head_parts(width)
    assert tail and main + tail < 2 * main
    kernel, _, table, seq_lens, k, v = build(fmt_k, fmt_v, [19, 33], head_dim=head_dim,
                                             seed=31)
    q = torch.randn(2, 4, head_dim, generator=torch.Generator().manual_seed(32)).half()
    by_words = kernel.decode(q, table, seq_lens, split_tokens=32, block_n=32, words=True)
    by_bytes = kernel.decode(q, table, seq_lens, split_tokens=32, block_n=32, words=False)
    assert not torch.isnan(by_words).any()
    assert torch.equal(by_words, by_bytes)
    assert rel(by_words, kernel.decode_ref(q.float(), table, seq_lens)) < 3e-3


@pytest.mark.parametrize(("fmt", "page", "block_n"), [
    ("q4_0", 48, 16),    # several tiles per page
    ("q8_0", 4, 16),     # several pages per tile
    ("tbq4", 12, 16),    # tiles straddle pages
    ("nvfp4", 1, 16),    # a page per token
    ("f16", 50, 32),     # contiguous-like: one long page, tiles straddle its end
])
def test_every_page_layout_reads_the_same_rows(fmt, page, block_n):
    lens = [37, 50, 3]
    kernel, refc, table, seq_lens, k, v = build(fmt, fmt, lens, page=page, seed=9)
    q = torch.randn(3, 4, 128, generator=torch.Generator().manual_seed(15)).half()
    out = kernel.decode(q, table, seq_lens, split_tokens=20, block_n=block_n)
    assert not torch.isnan(out).any()
    assert rel(out, kernel.decode_ref(q.float(), table, seq_lens)) < 3e-3, fmt


def test_split_count_does_not_change_the_answer():
    kernel, _, table, seq_lens, *_ = build("q8_0", "q8_0", [63, 50], seed=7)
    q = torch.randn(2, 8, 128, generator=torch.Generator().manual_seed(14)).half()
    one = kernel.decode(q, table, seq_lens, split_tokens=1024, block_n=16)
    many = kernel.decode(q, table, seq_lens, split_tokens=16, block_n=16)
    # only the fp16 rounding of the softmax weights differs between split layouts
    assert rel(many, one) < 1e-3


@pytest.mark.parametrize(("fmt", "heads", "head_dim", "values"), [
    ("q8_0", (6, 1), 256, True), ("tbq4", (6, 2), 256, True), ("nvfp4", (3, 1), 256, True),
    ("f16", (16, 1), 576, False), ("q4_0", (8, 1), 576, False), ("tbq3", (4, 1), 576, False)])
def test_wide_heads_under_the_default_launch(fmt, heads, head_dim, values):
    # heads wider than 128 lanes take WIDE_LAUNCH (one-warp programs at 256, two warps on
    # the MLA latent) and the default split; a rotated V format's merge rotates back after it
    hq, hkv = heads
    kernel, table, lens, g = two_page_cache(fmt, hkv, head_dim, [45, 30], values, seed=23)
    q = torch.randn(2, hq, head_dim, generator=g).half()
    out = kernel.decode(q, table, lens)
    assert not torch.isnan(out).any()
    assert rel(out, kernel.decode_ref(q.float(), table, lens)) < 3e-3


@pytest.mark.parametrize(("fmt", "heads", "head_dim", "values", "rows"), [
    ("f16", (40, 1), 576, False, None), ("q4_0", (40, 2), 128, True, 16),
    ("tbq3", (20, 1), 128, True, 16)])
def test_query_groups_spread_over_programs(fmt, heads, head_dim, values, rows):
    # a group of more query heads than a program holds (DeepSeek-V3: 128 over one latent;
    # here 40 over a 576-wide latent, GROUP_LAUNCH's 32 rows a program) is spread over query
    # blocks, the last one partly masked: the same answer as one program for the whole group
    hq, hkv = heads
    kernel, table, lens, g = two_page_cache(fmt, hkv, head_dim, [35], values, seed=37)
    q = torch.randn(1, hq, head_dim, generator=g).half()
    spread = kernel.decode(q, table, lens, split_tokens=16, block_n=16, query_rows=rows)
    whole = kernel.decode(q, table, lens, split_tokens=16, block_n=16, query_rows=64)
    assert not torch.isnan(spread).any()
    assert rel(spread, whole) < 1e-5
    assert rel(spread, kernel.decode_ref(q.float(), table, lens)) < 3e-3


@pytest.mark.parametrize(("fmt", "values", "head_dim"), [
    ("q8_0", False, 128), ("q4_0", False, 128), ("q4_0", True, 128), ("fp8_pth", False, 128),
    ("nvfp4", False, 128), ("nvfp4", True, 128), ("tbq3", False, 128), ("q8_0", False, 512),
    ("q4_0", False, 512),
    ("tbq4", False, 512)])
def test_large_groups_take_the_group_launch(fmt, values, head_dim):
    # 64 query heads over one head (MiniMax-M3's 128-lane index keys, GLM-5.3-Flash's 512-value
    # latent: K only): the default launch is GROUP_LAUNCH's 4-warp programs (64-token tiles of
    # 64 rows on 128 lanes, tbq3's of 32; 32-token tiles of 32 or 16 rows on 512), over a context
    # that ends inside a tile (pages of 32), and gives the reference's answer
    from kvcore.kernels.cache import GROUP_LAUNCH
    assert GROUP_LAUNCH[(head_dim, fmt)][1] == 4
    kernel, table, lens, g = two_page_cache(fmt, 1, head_dim, [45, 30], values, seed=43)
    q = torch.randn(2, 64, head_dim, generator=g).half()
    out = kernel.decode(q, table, lens)
    assert not torch.isnan(out).any()
    assert rel(out, kernel.decode_ref(q.float(), table, lens)) < 3e-3


def test_query_rows_are_padded_to_at_least_pad_rows():
    assert query_blocks(3, 64) == (16, 1)
    assert query_blocks(3, 64, 4) == (4, 1)
    assert query_blocks(6, 64, 4) == (8, 1)  # the group's power of two, not fewer rows
    assert query_blocks(40, 32, 4) == (32, 2)
    for table in (PAD_ROWS, PAD_ROWS_MANY):
        assert all(p in (1, 2, 4, 8) for p in table.values())


@pytest.mark.parametrize("fmt", INTERP)
def test_padding_the_query_group_does_not_change_the_answer(fmt):
    # a group of 3 query heads (GQA 6/2) held in 4, 8 or 16 rows a program: the padding rows
    # are masked, the real rows' products and softmax the same. The same up to float32
    # rounding: the interpreter's products are numpy matmuls, whose BLAS may sum a 4-row and
    # a 16-row product in different orders (1e-7 apart on some CPUs); a padding row leaking
    # into the softmax would move the answer by far more
    kernel, table, lens, g = two_page_cache(fmt, 2, 64, [35, 20], seed=41)
    q = torch.randn(2, 6, 64, generator=g).half()
    outs = {p: kernel.decode(q, table, lens, split_tokens=16, block_n=16, pad_rows=p)
            for p in (4, 8, 16)}
    assert not torch.isnan(outs[4]).any()
    assert rel(outs[4], outs[16]) < 1e-6 and rel(outs[8], outs[16]) < 1e-6, fmt
    assert rel(outs[4], kernel.decode_ref(q.float(), table, lens)) < 3e-3


@pytest.mark.parametrize(("fmt", "head_dim"), [("f16", 80), ("q8_0", 128), ("q4_0", 80),
                                               ("tbq4", 128), ("nvfp4", 64)])
def test_k_only_cache_reuses_the_key_tile_exactly(fmt, head_dim):
    # a K-only cache (V = the keys) unpacks each key tile once for both products; a cache
    # with separate V planes holding the same bytes must give the very same output
    g = torch.Generator().manual_seed(29)
    n = 40
    konly = LayerCache(fmt, fmt, 2, 32, 2, head_dim, values=False)
    both = LayerCache(fmt, fmt, 2, 32, 2, head_dim)
    x = torch.randn(n, 2, head_dim, generator=g).half()
    t = torch.arange(n)
    konly.append(x, x, t // 32, t % 32)
    both.append(x, x, t // 32, t % 32)
    for name, plane in both.k.planes.items():
        assert torch.equal(plane, konly.k.planes[name]) and torch.equal(both.v.planes[name], plane)
    table = torch.tensor([[0, 1]], dtype=torch.int32)
    lens = torch.tensor([n], dtype=torch.int32)
    q = torch.randn(1, 8, head_dim, generator=g).half()
    one = konly.decode(q, table, lens, split_tokens=16, block_n=16, reuse_keys=True)
    # the same float16 key unpacking on both sides (a cache with V would take q8_0's integer
    # key product by default, a K-only latent never does)
    two = both.decode(q, table, lens, split_tokens=16, block_n=16, int_keys=False)
    assert not torch.isnan(one).any()
    assert torch.equal(one, two)


@pytest.mark.parametrize("fmt", ["tbq4", "tbq3"])
def test_rotated_formats_on_a_576_wide_latent(fmt):
    # an MLA latent (DeepSeek: 576 values, K only, V = the latent) pads to five rotated blocks
    # of 128 (640), not a power of two: append matches the reference, decode matches the
    # reference over the same bytes and stays within the format's error of exact attention
    g = torch.Generator().manual_seed(21)
    d, n = 576, 40
    kernel = LayerCache(fmt, fmt, 4, 16, 1, d, values=False)
    refc = LayerCache(fmt, fmt, 4, 16, 1, d, values=False)
    assert kernel.nbytes == geometry_bytes(fmt, fmt, layers=1, sequences=4, kv_heads=1,
                                           head_dim=d, tokens=16) // 2
    x = torch.randn(n, 1, d, generator=g).half()
    t = torch.arange(n)
    kernel.append(x, x, t // 16, t % 16)
    refc.append_ref(x, x, t // 16, t % 16)
    for name, p in kernel.k.planes.items():
        r = refc.k.planes[name]
        same = (p == r).float().mean() if not p.dtype.is_floating_point else \
            torch.isclose(p.float(), r.float(), rtol=1e-3, atol=1e-6).float().mean()
        assert same > 0.995, name
    table = torch.arange(4, dtype=torch.int32).reshape(1, 4)
    lens = torch.tensor([n], dtype=torch.int32)
    q = torch.randn(1, 8, d, generator=g).half()
    out = torch.full((1, 8, d), float("nan"))
    given = out
    out = kernel.decode(q, table, lens, split_tokens=16, block_n=16, out=out)
    assert out is given and not torch.isnan(out).any()
    for bad in (torch.empty(1, 8, d + 1), torch.empty(1, 8, d, dtype=torch.float16),
                torch.empty(1, d, 8).transpose(1, 2)):
        with pytest.raises(ValueError, match="contiguous float32 tensor of shape"):
            kernel.decode(q, table, lens, split_tokens=16, block_n=16, out=bad)
    assert rel(out, kernel.decode_ref(q.float(), table, lens)) < 3e-3
    exact = ref.attention_ref(q.float(), x.permute(1, 0, 2)[None].float(),
                              x.permute(1, 0, 2)[None].float(), lens)
    assert rel(out, exact) < BOUNDS[fmt] + 0.05


@pytest.mark.parametrize("one_pass", [True, False])
@pytest.mark.parametrize("chunks", [None, (2, 2), (4, 8)])
def test_merge_of_splits_against_torch(chunks, one_pass, monkeypatch):
    # 3 sequences x 2 KV heads x 5 query heads, 7 splits of partial outputs over 64 padded
    # head dimensions (40 real), some splits empty (max -inf, sum 0) as a short sequence's
    # last splits are; read in one chunk (loaded at once, or maxima first) or in several, the
    # merge is the softmax-weighted mean
    from kvcore.kernels import triton_ops
    from kvcore.kernels.triton_ops import reduce_splits

    monkeypatch.setattr(triton_ops, "MERGE_ONE_PASS", one_pass)

    g = torch.Generator().manual_seed(5)
    seqs, hkv, group, n, dpow, d = 3, 2, 5, 7, 64, 40
    rows = seqs * hkv * group
    acc = torch.randn(rows, n, dpow, generator=g)
    m = torch.randn(rows, n, generator=g) * 4
    lsum = torch.rand(rows, n, generator=g) * 10 + 0.5
    m[0, 3:] = float("-inf")
    lsum[0, 3:] = 0.0
    m[7, :6] = float("-inf")
    lsum[7, :6] = 0.0
    ml = torch.stack([m, lsum], dim=-1).contiguous()
    out = torch.full((seqs, hkv * group, d), float("nan"))
    reduce_splits(acc, ml, out, n, seqs, hkv, group, dpow, chunks=chunks)
    w = torch.exp2(m - m.max(dim=1, keepdim=True).values)
    want = (w[:, :, None] * acc).sum(1) / (w * lsum).sum(1, keepdim=True)
    assert torch.allclose(out.reshape(rows, d), want[:, :d], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fmt", ["q8_0", "tbq4", "tbq3"])
def test_many_splits_merge_in_chunks(fmt):
    # 19 splits of a 300-token sequence, 5 query heads a KV head: the merge reads the splits
    # of a rotated format in several chunks and rotates the output back; the one-split answer
    # must agree
    kernel, _, table, seq_lens, *_ = build(fmt, fmt, [300, 7], seed=17)
    q = torch.randn(2, 10, 128, generator=torch.Generator().manual_seed(18)).half()
    many = kernel.decode(q, table, seq_lens, split_tokens=16, block_n=16)
    one = kernel.decode(q, table, seq_lens, split_tokens=1024, block_n=16)
    assert not torch.isnan(many).any()
    assert rel(many, one) < 1e-3
    assert rel(many, kernel.decode_ref(q.float(), table, seq_lens)) < 3e-3


@pytest.mark.parametrize("fmt", PAGED)
@pytest.mark.parametrize(("seqs", "heads", "dim", "tokens"), [(1, 1, 128, 1), (3, 5, 128, 63),
                                                              (2, 3, 64, 1000), (1, 2, 256, 17)])
def test_tensor_bytes_equal_kvcore(fmt, seqs, heads, dim, tokens):
    # contiguous: one page of `tokens` per sequence
    cache = LayerCache(fmt, fmt, seqs, tokens, heads, dim)
    assert cache.nbytes == geometry_bytes(fmt, fmt, layers=1, sequences=seqs, kv_heads=heads,
                                          head_dim=dim, tokens=tokens)


def test_mixed_bytes_equal_kvcore():
    cache = LayerCache("q8_0", "tbq3", 4, 63, 3, 128)
    assert cache.nbytes == geometry_bytes("q8_0", "tbq3", layers=1, sequences=4, kv_heads=3,
                                          head_dim=128, tokens=63)


import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kvcore.kernels.triton_ops import (  # noqa: E402
    _coded,
    _e2m1,
    _lookup,
    _search,
    _threshold,
    e2m1_magnitude,
    e4m3_decode,
    e4m3_encode,
    hadamard_rotate,
)


@triton.jit
def _search_codes(Y, S, TH, CENT, OUT, LEVELS: tl.constexpr, FMA: tl.constexpr):
    """The codes _search gives 4 rows of 128 values, each row's length S[row]."""
    H: tl.constexpr = LEVELS // 2
    M: tl.constexpr = LEVELS - 1
    r = tl.arange(0, 4)[:, None] * 128 + tl.arange(0, 128)[None, :]
    y = tl.load(Y + r)
    s = tl.load(S + tl.arange(0, 4))[:, None]
    c, flip = _search(y, s, _threshold(TH, 0, H), _threshold(TH, 1, H), _threshold(TH, 2, H),
                      _threshold(TH, 3, H), _threshold(TH, 4, H), _threshold(TH, 5, H),
                      _threshold(TH, 6, H), _coded(CENT, 0, H, M), _coded(CENT, 1, H, M),
                      _coded(CENT, 2, H, M), _coded(CENT, 3, H, M), _coded(CENT, 4, H, M),
                      _coded(CENT, 5, H, M), _coded(CENT, 6, H, M), _coded(CENT, 7, H, M),
                      LEVELS, FMA, False)
    tl.store(OUT + r, (c.to(tl.int32, bitcast=True) ^ flip) & M)


@triton.jit
def _lookup_codes(Y, S, TH, CELLS, OUT, LEVELS: tl.constexpr, INV: tl.constexpr,
                  MASK: tl.constexpr):
    """The codes _lookup gives 4 rows of 128 values, each row's length S[row]."""
    H: tl.constexpr = LEVELS // 2
    M: tl.constexpr = LEVELS - 1
    r = tl.arange(0, 4)[:, None] * 128 + tl.arange(0, 128)[None, :]
    y = tl.load(Y + r)
    s = tl.load(S + tl.arange(0, 4))[:, None]
    c, flip = _lookup(y, s, _threshold(TH, 0, H), CELLS, INV, MASK, False)
    tl.store(OUT + r, (c.to(tl.int32, bitcast=True) ^ flip) & M)


@pytest.mark.parametrize("levels", [16, 8])
def test_fma_search_decides_on_the_threshold_and_either_side(levels):
    # the FMA form compares |y| with each threshold times the block's length, p, by a
    # saturated |y| · k − p · k (k a power of two per block): exactly on p, one float above
    # and one below, on either sign, must give the codes of a float32 comparison |y| > p,
    # at lengths from the kernel's floor (10⁻²⁰) to large; the selects agree except on a
    # negative value exactly on a threshold (bucketize's tie, counted above there)
    half = levels // 2
    th = torch.tensor(ref.codebook.thresholds(levels), dtype=torch.float32)
    cent = ref.centroids(levels)
    lengths = torch.tensor([1e-20, 1.0, 11.3, 3.0e5], dtype=torch.float32)
    g = torch.Generator().manual_seed(3)
    y = torch.randn(4, 128, generator=g) * (lengths[:, None] / 11.3)
    for row, s in enumerate(lengths):
        p = th[half:] * s  # the positive thresholds times the length, rounded as the kernel's
        near = torch.stack([p, torch.nextafter(p, p * 2), torch.nextafter(p, p * 0)]).reshape(-1)
        vals = torch.cat([near, -near, torch.tensor([0.0, -0.0]), s.reshape(1), -s.reshape(1)])
        y[row, : len(vals)] = vals
    a = y.abs()
    above = (a[:, :, None] > (th[half:][None, None, :] * lengths[:, None, None])).sum(-1)
    want = torch.where(y > 0, half + above, half - 1 - above).int()
    inv, rows = ref.codebook.cells(levels)
    cells = torch.tensor([w - (1 << 64) if w >> 63 else w for row in rows for w in row])
    out = torch.full((4, 128), -1, dtype=torch.int32)
    _lookup_codes[(1,)](y, lengths, th, cells, out, levels, inv, len(rows) - 1)
    assert torch.equal(out, want)  # the FMA form by lookup, one comparison a value
    for fma in (True, False):
        out = torch.full((4, 128), -1, dtype=torch.int32)
        _search_codes[(1,)](y, lengths, th, cent, out, levels, fma)
        if fma:
            assert torch.equal(out, want)
        else:
            tie = (y <= 0) & (a[:, :, None] == th[half:][None, None, :]
                              * lengths[:, None, None]).any(-1)
            assert torch.equal(out[~tie], want[~tie])
            assert bool(tie.any()) and torch.equal(out[tie], want[tie] - 1)


@triton.jit
def _e4m3_roundtrip(x_ptr, bits_ptr, back_ptr, n: tl.constexpr):
    i = tl.arange(0, n)
    b = e4m3_encode(tl.load(x_ptr + i))
    tl.store(bits_ptr + i, b)
    tl.store(back_ptr + i, e4m3_decode(b))


def test_e4m3_codec_matches_torch():
    # every finite float16 value within e4m3's range, plus the edges: encode must round to
    # nearest even exactly as torch does, and decode must give torch's values back
    bits = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(torch.float16)
    x = bits.float()
    x = x[torch.isfinite(x) & (x.abs() <= 448)]
    x = torch.cat([x, torch.tensor([448.0, -448.0, 7.93, 0.0019, 2 ** -9, 3 * 2 ** -10])])
    n = 1 << (x.numel() - 1).bit_length()
    x = torch.nn.functional.pad(x, (0, n - x.numel()))
    out_bits = torch.empty(n, dtype=torch.uint8)
    back = torch.empty(n)
    _e4m3_roundtrip[(1,)](x, out_bits, back, n=n)
    expect = x.to(torch.float8_e4m3fn)
    assert torch.equal(out_bits, expect.view(torch.uint8))
    assert torch.equal(back, expect.float())


def test_scale_constants_are_the_float32_reciprocals():
    # fp8_pth's and q8_0's scales are amax times these, in the reference and the kernel: the
    # correctly rounded float32 reciprocals, which the kernel's literals are too
    import inspect
    from fractions import Fraction

    from kvcore.kernels import ref, triton_ops

    for c, k in ((ref.INV_FP8_MAX, 448), (ref.INV_127, 127)):
        f = torch.tensor(c, dtype=torch.float32)
        assert float(f) == c
        near = [float(f.view(torch.int32).add(d).view(torch.float32)) for d in (-1, 1)]
        assert all(abs(Fraction(c) - Fraction(1, k)) < abs(Fraction(n) - Fraction(1, k))
                   for n in near)
        assert repr(c) in inspect.getsource(triton_ops.append_kernel.fn)


@triton.jit
def _e2m1_all(out_ptr):
    c = tl.arange(0, 16)
    tl.store(out_ptr + c, _e2m1(c))


def test_e2m1_bit_construction_matches_the_table():
    # the decode kernel builds nvfp4 values from bits, each the code's value times 2⁻¹⁴ (codes
    # 0 and 1 as float16 subnormals); every one of the 16 codes must equal the reference table
    # with the sign bit applied, times 2⁻¹⁴ (and -0 must keep its sign)
    out = torch.full((16,), float("nan"), dtype=torch.float16)
    _e2m1_all[(1,)](out)
    mags = torch.tensor(ref.E2M1, dtype=torch.float64)
    expect = torch.cat([mags, -mags]) * 2.0 ** -14
    assert torch.equal(out.double(), expect)
    assert torch.signbit(out[8]) and not torch.signbit(out[0])


@triton.jit
def _e2m1_codes(v_ptr, out_ptr, n: tl.constexpr):
    i = tl.arange(0, n)
    tl.store(out_ptr + i, e2m1_magnitude(tl.load(v_ptr + i), False))


def test_e2m1_magnitude_is_the_nearest_ties_down_even_a_float32_unit_from_a_tie():
    # nvfp4's append codes v = |x| / scale by the nearest e2m1 magnitude, ties to the smaller,
    # as the reference's argmin over exact differences: every tie, the float32 values next to
    # it on both sides (below 1 those are finer than 1 + v can hold, where adding 1 before
    # rounding had sent 0.25 + 2⁻²⁶ down to 0), the grid's values, zero and past 6
    grid = torch.tensor(ref.E2M1, dtype=torch.float64)
    ties = (grid[1:] + grid[:-1]) / 2
    points = torch.cat([ties, grid, torch.tensor([0.0, 6.5, 7.0, 100.0, 2.0 ** -20])]).float()
    up = torch.nextafter(points, torch.tensor(float("inf")))
    down = torch.nextafter(points, torch.tensor(0.0))
    extra = torch.tensor([0.25 + 2.0 ** -26, 0.75 - 2.0 ** -25, 0.75 + 2.0 ** -25])
    g = torch.Generator().manual_seed(4)
    v = torch.cat([points, up, down, extra.float(), torch.rand(400, generator=g) * 7])
    n = 1 << (v.numel() - 1).bit_length()
    v = torch.nn.functional.pad(v, (0, n - v.numel()))
    out = torch.full((n,), -1, dtype=torch.int32)
    _e2m1_codes[(1,)](v, out, n=n)
    diff = (v.double()[:, None] - grid[None, :]).abs()
    want = diff.argmin(dim=1).to(torch.int32)  # the first of two equal: the smaller
    assert torch.equal(out, want)


@pytest.mark.parametrize("n", [1, 8191, 100003])
def test_bandwidth_kernels_read_every_element_once(n):
    # the read-bandwidth kernels must sum the whole buffer: a skipped or doubled stretch would
    # make the measured bandwidth wrong in one direction or the other
    from kvcore.kernels.bandwidth import _read4_kernel, _read_kernel

    x = torch.randn(n, generator=torch.Generator().manual_seed(n)).half()
    expect = float(x.double().sum())
    for kernel, block in ((_read_kernel, 1024), (_read4_kernel, 512)):
        out = torch.full((3,), float("nan"))
        kernel[(3,)](x, out, n, BLOCK=block)
        assert abs(float(out.double().sum()) - expect) < 1e-3 * max(1.0, abs(expect)), kernel


@pytest.mark.parametrize("fmt", ["tbq4", "tbq3"])
def test_rotated_append_codes_exact_on_zero_and_one_hot_rows(fmt):
    # the kernel counts only the positive thresholds (the codebook is symmetric); a zero row
    # (y = 0 everywhere, on the middle threshold) and one-hot rows (|y| equal everywhere) must
    # get exactly the codes torch.bucketize gives
    th = ref.codebook.thresholds(16 if fmt == "tbq4" else 8)
    t32 = torch.tensor(th, dtype=torch.float32)
    assert torch.equal(t32, -t32.flip(0))
    rows = torch.zeros(6, 1, 128)
    for i, j in enumerate((0, 5, 77, 127), start=1):
        rows[i, 0, j] = (-1) ** i * 3.0
    rows[5, 0] = torch.randn(128)
    kernel = LayerCache(fmt, fmt, 1, 8, 1, 128)
    refc = LayerCache(fmt, fmt, 1, 8, 1, 128)
    pages, offs = torch.zeros(6, dtype=torch.long), torch.arange(6)
    kernel.append(rows.half(), rows.half(), pages, offs)
    refc.append_ref(rows.half(), rows.half(), pages, offs)
    assert torch.equal(kernel.k.planes["qs"][0, 0, :6], refc.k.planes["qs"][0, 0, :6])


def reference_codes_and_norms(side, side_r):
    """Assert a rotated side's codes are the reference's but for rounding (99.9%) and, where a
    128-block's codes agree, its norm too (a code on the other side of a threshold, as the
    float32 rotations may round, changes the norm); return (codes, the reference's, the
    blocks whose codes agree)."""
    qs, qs_ref = side.planes["qs"], side_r.planes["qs"]
    assert (qs == qs_ref).float().mean() > 0.999
    norm, norm_ref = side.planes["norm"].float(), side_r.planes["norm"].float()
    same = (qs == qs_ref).reshape(*norm.shape, -1).all(-1)
    assert torch.allclose(norm[same], norm_ref[same], rtol=1e-3, atol=0)
    return qs, qs_ref, same


@pytest.mark.parametrize("fmt", ["tbq4", "tbq3"])
@pytest.mark.parametrize(("head_dim", "dtype"), [(128, torch.float16), (256, torch.float16),
                                                 (200, torch.float16), (512, torch.float16),
                                                 (64, torch.float32), (128, torch.float32)])
def test_rotated_append_writes_the_reference_bytes(fmt, head_dim, dtype):
    # float16 rows are rotated as they are (one product), float32 rows as two float16 parts
    # of their unit vectors; tbq3's codes leave the product in lane order and are packed
    # into words. Both paths, every 128-block of wide and padded rows, must write the
    # reference's codes and norms (and the search by lookup the same bytes as the staircase)
    g = torch.Generator().manual_seed(head_dim)
    x = (torch.randn(70, 2, head_dim, generator=g) * 3).to(dtype)
    x[3] = 0
    kernel = LayerCache(fmt, fmt, 1, 128, 2, head_dim)
    refc = LayerCache(fmt, fmt, 1, 128, 2, head_dim)
    lookup = LayerCache(fmt, fmt, 1, 128, 2, head_dim)
    t = torch.arange(70)
    kernel.append(x, x, torch.zeros_like(t), t)
    refc.append_ref(x, x, torch.zeros_like(t), t)
    lookup.append(x, x, torch.zeros_like(t), t, lookup=True)
    for side_k, side_r, side_l in ((kernel.k, refc.k, lookup.k), (kernel.v, refc.v, lookup.v)):
        qs, qs_ref, same = reference_codes_and_norms(side_k, side_r)
        assert torch.equal(qs[0, 0, 70:], qs_ref[0, 0, 70:])  # nothing past the new rows
        assert same.float().mean() > 0.99
        for name in side_k.planes:  # the search by lookup: every block of a row, the same
            assert torch.equal(side_k.planes[name], side_l.planes[name]), name


@pytest.mark.parametrize(("fmt", "head_dim", "fma", "want"), [
    ("tbq4", 128, True, (3, 2, 168, False)), ("tbq3", 128, True, (4, 1, 128, True)),
    ("tbq4", 256, True, (3, 1, 168, False)), ("tbq3", 576, True, (3, 1, 168, False)),
    ("tbq4", 128, False, (3, 1, 168, False)), ("tbq3", 128, False, (3, 1, 168, False))])
def test_rotated_append_launch_by_format_width_and_search(monkeypatch, fmt, head_dim, fma,
                                                          want):
    # the FMA search's launches were measured for 128-lane rows (ROTATED_LAUNCH: tbq4 three
    # programs a multiprocessor in two stages, tbq3 four of 128 registers, each loading its
    # next rows a block ahead); wider rows, and the selects, take three of 168 in one stage,
    # faster there
    import kvcore.kernels.cache as cache_mod
    import kvcore.kernels.triton_ops as ops

    seen = []

    class Launch:
        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append((grid[0], kw["num_stages"], kw["maxnreg"],
                                                    kw["PREFETCH"]))

    monkeypatch.setattr(cache_mod, "SMS", 1)  # the grid is then the programs a multiprocessor
    monkeypatch.setattr(ops, "rotated_append_kernel", Launch())
    cache = LayerCache(fmt, fmt, 1, 4096, 2, head_dim)
    t = torch.arange(1000)
    x = torch.randn(1000, 2, head_dim, dtype=torch.float16)
    cache.append(x, x, torch.zeros_like(t), t, fma_search=fma, lookup=False)
    assert seen == [want]
    # the search by lookup: the same launch, its registers uncapped (capped, it spills)
    lookup = (*want[:2], None if fma else want[2], want[3])
    seen.clear()
    cache.append(x, x, torch.zeros_like(t), t, fma_search=fma, lookup=True)
    assert seen == [lookup]
    # by default tbq4's 128-lane rows take the lookup (v72, append-lookup-h200.json: 48.0–48.2
    # µs against 49.3–49.4), the rest their staircase
    seen.clear()
    cache.append(x, x, torch.zeros_like(t), t, fma_search=fma)
    assert seen == [lookup if (fmt, head_dim) == ("tbq4", 128) else want]


@pytest.mark.parametrize("fmt", ["tbq4", "tbq3"])
@pytest.mark.parametrize(("head_dim", "dtype"), [(128, torch.float16), (256, torch.float32)])
def test_one_rotated_program_walks_every_block(monkeypatch, fmt, head_dim, dtype):
    # the persistent programs step over the row blocks; with one program for K's 9 blocks
    # (the last one short) and then V's, which one launch writes, each step must land in its
    # own side and rows and write the reference's bytes; launched a side at a time, the same;
    # with each block's rows loaded a block ahead (prefetch), the same again
    import kvcore.kernels.cache as cache_mod

    monkeypatch.setattr(cache_mod, "SMS", 1)
    g = torch.Generator().manual_seed(head_dim)
    x = (torch.randn(70, 2, head_dim, generator=g) * 3).to(dtype)
    xv = (torch.randn(70, 2, head_dim, generator=g) * 0.5).to(dtype)
    kernel = LayerCache(fmt, fmt, 1, 128, 2, head_dim)
    apart = LayerCache(fmt, fmt, 1, 128, 2, head_dim)
    refc = LayerCache(fmt, fmt, 1, 128, 2, head_dim)
    t = torch.arange(70)
    kernel.append(x, xv, torch.zeros_like(t), t, rows_per_program=16, programs_per_sm=1)
    apart.append(x, xv, torch.zeros_like(t), t, rows_per_program=16, programs_per_sm=1,
                 one_launch=False)
    ahead = LayerCache(fmt, fmt, 1, 128, 2, head_dim)
    ahead.append(x, xv, torch.zeros_like(t), t, rows_per_program=16, programs_per_sm=1,
                 prefetch=True)
    refc.append_ref(x, xv, torch.zeros_like(t), t)
    for other in (apart, ahead):
        for one, two in ((kernel.k, other.k), (kernel.v, other.v)):
            for name in one.planes:
                assert torch.equal(one.planes[name], two.planes[name]), name
    for side_k, side_r in ((kernel.k, refc.k), (kernel.v, refc.v)):
        qs, qs_ref, _ = reference_codes_and_norms(side_k, side_r)
        assert torch.equal(qs[0, 0, 70:], qs_ref[0, 0, 70:])
        per_block = (qs == qs_ref).reshape(2, 128, -1).float().mean(-1)
        assert bool((per_block[:, :70] > 0.95).all())  # every written row, not most of them
        assert bool(((side_k.planes["norm"][0, :, :70] > 0)).all())


@pytest.mark.parametrize("fmt", ["tbq4", "tbq3"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_rotated_append_fma_search_writes_the_reference_bytes(fmt, dtype):
    # the search's FMA form (append's default) climbs from the smallest centroid by one step
    # a threshold below |y|: its centroids, as they are or biased into one binade, must come
    # out exact (their codes are their low bits, their squares the norm's divisor), so the
    # codes are the reference's and the selects', and the norms too; zero and one-hot rows
    # exactly
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(70, 2, 128, generator=g) * 3).to(dtype)
    x[3] = 0
    x[5] = 0
    x[5, 0, 9] = -2.0
    caches = [LayerCache(fmt, fmt, 1, 128, 2, 128) for _ in range(6)]
    kernel, biased, plain, refc, lookup, lookup_b = caches
    t = torch.arange(70)
    kernel.append(x, x.flip(0), torch.zeros_like(t), t)  # FMA, unbiased (the codebook's)
    biased.append(x, x.flip(0), torch.zeros_like(t), t, fma_bias=0.25)
    # the FMA form by lookup (one comparison a value), unbiased and biased: the same bytes
    lookup.append(x, x.flip(0), torch.zeros_like(t), t, lookup=True)
    lookup_b.append(x, x.flip(0), torch.zeros_like(t), t, lookup=True, fma_bias=0.25)
    for one, two in ((kernel, lookup), (biased, lookup_b)):
        for a, b in ((one.k, two.k), (one.v, two.v)):
            for name in a.planes:
                assert torch.equal(a.planes[name], b.planes[name]), name
    plain.append(x, x.flip(0), torch.zeros_like(t), t, fma_search=False)
    refc.append_ref(x, x.flip(0), torch.zeros_like(t), t)
    # K holds the zero row at token 3 and the one-hot row at 5, V (the rows reversed) at 66
    # and 64
    for side_k, side_b, side_p, side_r, rows in (
            (kernel.k, biased.k, plain.k, refc.k, [3, 5]),
            (kernel.v, biased.v, plain.v, refc.v, [66, 64])):
        qs, qs_ref, same = reference_codes_and_norms(side_k, side_r)
        assert same.float().mean() > 0.99
        assert torch.equal(qs[0, :, rows], qs_ref[0, :, rows])
        assert (qs == side_p.planes["qs"]).float().mean() > 0.999
        # the bias changes no code; a norm by at most its float16 rounding (the coded low
        # bits sit in a biased centroid's mantissa, off its value by up to 2⁻¹⁴ of it)
        assert torch.equal(qs, side_b.planes["qs"])
        torch.testing.assert_close(side_k.planes["norm"], side_b.planes["norm"], rtol=1e-3,
                                   atol=0)


def test_q4_0_append_takes_the_first_of_two_equal_magnitudes():
    # ggml scales a q4_0 block by its value of largest magnitude, the first one on a tie:
    # -4 before +4 gives the scale +0.5 (-4 maps to -8), +4 before -4 gives -0.5. The
    # reference and the kernel must agree, codes included
    x = torch.full((2, 1, 32), 0.25)
    x[0, 0, 3], x[0, 0, 10] = -4.0, 4.0
    x[1, 0, 3], x[1, 0, 10] = 4.0, -4.0
    kernel = LayerCache("q4_0", "q4_0", 1, 8, 1, 32)
    refc = LayerCache("q4_0", "q4_0", 1, 8, 1, 32)
    pages, offs = torch.zeros(2, dtype=torch.long), torch.arange(2)
    kernel.append(x.half(), x.half(), pages, offs)
    refc.append_ref(x.half(), x.half(), pages, offs)
    for c in (kernel, refc):
        assert c.k.planes["d"][0, 0, :2, 0].tolist() == [0.5, -0.5]
    assert torch.equal(kernel.k.planes["qs"][0, 0, :2], refc.k.planes["qs"][0, 0, :2])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_q4_0_append_finds_each_blocks_scale_as_the_reference_among_many_ties(dtype):
    # 16-bit rows (float16, bfloat16: only converted to float32, no bfloat16 arithmetic) find
    # the value of largest magnitude, its first place and its sign with one integer max over
    # their float32 bits; float32 rows by three reductions. Blocks drawn from
    # a few magnitudes (ties of both signs everywhere, negative zeros, all-zero blocks) and
    # from float16's tiny values must give the reference's scales and codes, bit for bit
    g = torch.Generator().manual_seed(11)
    levels = torch.tensor([-2.0, -1.0, -0.0, 0.0, 1.0, 2.0, 6e-8, -6e-8, 3e-5])
    x = levels[torch.randint(0, len(levels), (40, 2, 128), generator=g)]
    x[0] = 0.0
    x[1] = -0.0
    x[2, :, :64] = torch.randn(2, 64, generator=g) * 1e-6
    kernel = LayerCache("q4_0", "q4_0", 5, 8, 2, 128)
    refc = LayerCache("q4_0", "q4_0", 5, 8, 2, 128)
    pages, offs = torch.arange(40) // 8, torch.arange(40) % 8
    kernel.append(x.to(dtype), x.to(dtype), pages, offs)
    refc.append_ref(x.to(dtype), x.to(dtype), pages, offs)
    for name in ("d", "qs"):
        a, b = kernel.k.planes[name], refc.k.planes[name]
        assert torch.equal(a.view(torch.uint8), b.view(torch.uint8)), name
        assert torch.equal(kernel.v.planes[name].view(torch.uint8), b.view(torch.uint8))


def test_q4_0_floor_by_a_rounded_add_reaches_only_q4_0_s_launch(monkeypatch):
    # APPEND_Q4_FLOOR_ADD is a GPU path (PTX); the launch passes it to q4_0's appends only, and
    # never where it is off, so that an earlier kernel without the switch still launches
    from kvcore.kernels import cache as cache_module
    from kvcore.kernels import triton_ops as ops

    seen = []

    class Spy:
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append(kw.get("Q4_FLOOR_ADD"))

    monkeypatch.setattr(ops, "append_kernel", Spy())
    x = torch.randn(8, 2, 128)
    pos = torch.arange(8)
    for on in (False, True):
        monkeypatch.setattr(cache_module, "APPEND_Q4_FLOOR_ADD", on)
        for fmt in ("q4_0", "q8_0"):
            LayerCache(fmt, fmt, 1, 8, 2, 128).append(x, x, pos * 0, pos)
    assert seen == [None, None, True, None]


def test_lane_order_puts_a_threads_columns_in_whole_lanes():
    # a product tile's thread holds columns 2q, 2q + 1 of every 8 (q = its lane mod 4): in
    # lane order those must be codes 32q … 32q + 31, lanes 4q … 4q + 3
    from kvcore.kernels.triton_ops import lane_order

    order = lane_order()
    assert sorted(order) == list(range(128))
    for q in range(4):
        held = sorted(order[8 * i + 2 * q + b] for i in range(16) for b in range(2))
        assert held == list(range(32 * q, 32 * q + 32))


def test_nvfp4_global_scale_is_set_once_and_mirrored_on_the_host():
    # the first append of nonzero rows fixes the per-tensor scale; appends read the host's
    # copy (no device read), which must be the float32 value the device holds
    c = LayerCache("nvfp4", "nvfp4", 1, 16, 1, 128)
    pages = torch.zeros(2, dtype=torch.long)
    zeros = torch.zeros(2, 1, 128).half()
    c.append(zeros, zeros, pages, torch.arange(2))
    assert c.k.global_scale_host == 1.0 and float(c.k.global_scale) == 1.0
    x = torch.randn(2, 1, 128).half() * 3
    c.append(x, x, pages, torch.arange(2, 4))
    first = c.k.global_scale_host
    expect = ref.nvfp4_global_scale(x.reshape(-1, 128).float())
    assert first == float(c.k.global_scale)
    assert abs(first - expect) <= 1e-6 * expect
    c.append(x * 10, x * 10, pages, torch.arange(4, 6))
    assert c.k.global_scale_host == first == float(c.k.global_scale)


def test_nvfp4_append_rounds_every_midpoint_down():
    # nvfp4 codes come from the float32 bits of |x| / scale (one mantissa bit kept); on every
    # grid value and every midpoint between two (ties go to the smaller magnitude, as the
    # reference's first-nearest search) the code must be the exact one. Block 0 fixes the
    # tensor scale at 2⁻⁸ (amax 10.5 = 448 · 6 · 2⁻⁸); blocks 1-7 have amax 6, so their block
    # scale is 256 · 2⁻⁸ = 1 and |x| is the value rounded
    grid = ref.E2M1
    mids = [(a + b) / 2 for a, b in zip(grid, grid[1:], strict=False)]
    vals = sorted(set(grid) | set(mids))  # 15 magnitudes, 6 the largest
    row = [10.5] + [0.0] * 15
    for blk in range(7):
        sign = -1.0 if blk % 2 else 1.0
        row += [6.0, sign * 0.125] + [sign * v for v in vals[:-1]]
    x = torch.tensor(row).reshape(1, 1, 128).half()
    c = LayerCache("nvfp4", "nvfp4", 1, 16, 1, 128)
    refc = LayerCache("nvfp4", "nvfp4", 1, 16, 1, 128)
    pages, offs = torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long)
    c.append(x, x, pages, offs)
    refc.append_ref(x, x, pages, offs)
    assert c.k.global_scale_host == 2.0 ** -8
    qs = c.k.planes["qs"].reshape(-1, 64)[0].long()
    codes = torch.stack([qs & 15, qs >> 4], dim=1).reshape(-1)

    def expect(v):
        mag = min(range(8), key=lambda i: (abs(abs(v) - grid[i]), i))
        return mag | (8 if v < 0 else 0)

    assert codes[16:].tolist() == [expect(v) for v in row[16:]]
    assert torch.equal(c.k.planes["qs"], refc.k.planes["qs"])


@pytest.mark.parametrize(("fmt", "head_dim"), [("fp8_pth", 128), ("q8_0", 128), ("q4_0", 128),
                                               ("tbq4", 128), ("nvfp4", 128), ("q8_0", 80),
                                               ("tbq3", 128), ("tbq3", 256),
                                               ("fp8_pth", 52), ("nvfp4", 48), ("q4_0", 96)])
def test_word_reads_give_the_byte_reads_values(fmt, head_dim):
    # reading the packed planes as int32 words (four bytes a load, unpacked pairwise) must give
    # exactly the values of the byte-wise read, odd head dimensions and masked tails included
    # (tiles of 32 tokens: in shorter ones decode refuses tbq3's bytes and nvfp4's words)
    kernel, _, table, seq_lens, *_ = build(fmt, fmt, [37, 1, 20], head_dim=head_dim, seed=21)
    q = torch.randn(3, 4, head_dim, generator=torch.Generator().manual_seed(22)).half()
    launch = dict(split_tokens=32, block_n=32)
    by_bytes = kernel.decode(q, table, seq_lens, words=False, **launch)
    by_words = kernel.decode(q, table, seq_lens, words=True, **launch)
    # K's planes as words, V's as bytes
    mixed = kernel.decode(q, table, seq_lens, words=True, words_v=False, **launch)
    assert not torch.isnan(by_words).any()
    assert torch.equal(by_words, by_bytes) and torch.equal(mixed, by_bytes)


@pytest.mark.parametrize(("fmt", "block_n"), [("f16", 16), ("q4_0", 16), ("fp8_pth", 32),
                                              ("tbq4", 16)])
def test_lazy_rescaling_gives_the_eager_answer(fmt, block_n):
    # keys that grow along the sequence, so that the running max rises by less than the margin
    # in some tiles (kept) and by more in others (rescaled)
    g = torch.Generator().manual_seed(21)
    lens, heads, dim = [70, 45], 2, 128
    k = torch.randn(2, 70, heads, dim, generator=g)
    k = (k * (0.25 + torch.arange(70) / 6.0)[None, :, None, None]).half()
    v = torch.randn(2, 70, heads, dim, generator=g).half()
    table = torch.arange(4, dtype=torch.int32).reshape(2, 2)
    cache = LayerCache(fmt, fmt, 4, 64, heads, dim)
    for b, n in enumerate(lens):
        t = torch.arange(n)
        cache.append(k[b, :n], v[b, :n], table[b, t // 64].long(), t % 64)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    q = torch.randn(2, 8, dim, generator=g).half()
    scores = torch.einsum("bhd,bthd->bht", q.float().reshape(2, heads, 4, dim)[:, :, 0],
                          k.float()) / dim ** 0.5 * 1.4426950408889634
    steps = scores[0, 0].reshape(-1, 14).amax(1).cummax(0).values.diff()
    assert (steps > 8).any() and ((steps > 0) & (steps <= 8)).any()
    eager = cache.decode(q, table, seq_lens, split_tokens=1024, block_n=block_n, lazy=False)
    lazy = cache.decode(q, table, seq_lens, split_tokens=1024, block_n=block_n, lazy=True)
    assert not torch.isnan(lazy).any()
    assert rel(lazy, eager) < 1e-3, fmt
    assert rel(lazy, cache.decode_ref(q.float(), table, seq_lens)) < 3e-3, fmt


@pytest.mark.parametrize("fmt", ["fp8_pth", "nvfp4"])
def test_lazy_rescaling_stays_finite_for_rows_beyond_float16(fmt):
    # float32 values up to about 10^6: fp8_pth's row scales (and nvfp4's global scale) exceed
    # 255, so that a weight kept at up to 2^8 times its scale would leave float16's range. The
    # second tile's keys are larger: every row's max rises by less than the margin there (the
    # running max kept), some by more than 5 (weights above 32)
    g = torch.Generator().manual_seed(21)
    heads, dim = 2, 128
    k = torch.randn(2, 64, heads, dim, generator=g)
    k[:, 32:] *= 2.5
    k = k.half()
    v = torch.randn(2, 64, heads, dim, generator=g) * 3e5
    q = torch.randn(2, 8, dim, generator=g).half()
    scores = torch.einsum("bhgd,bthd->bhgt", q.float().reshape(2, heads, 4, dim),
                          k.float()) / dim ** 0.5 * 1.4426950408889634
    rise = scores[..., 32:].amax(-1) - scores[..., :32].amax(-1)
    assert 5 < float(rise.max()) < 7.8
    table = torch.arange(2, dtype=torch.int32).reshape(2, 1)
    cache = LayerCache(fmt, fmt, 2, 64, heads, dim)
    for b in range(2):
        cache.append(k[b], v[b], table[b].long().expand(64), torch.arange(64))
    assert cache.v.wide
    seq_lens = torch.tensor([64, 64], dtype=torch.int32)
    exact = cache.decode_ref(q.float(), table, seq_lens)
    lazy = cache.decode(q, table, seq_lens, split_tokens=1024, block_n=32, lazy=True)
    assert torch.isfinite(lazy).all()
    assert rel(lazy, exact) < 3e-3, fmt
    unchecked = cache.decode(q, table, seq_lens, split_tokens=1024, block_n=32, lazy=True,
                             wide=False)
    if fmt == "fp8_pth":
        # without the check the kept weights times their V rows' scales overflow
        assert not torch.isfinite(unchecked).all()
    else:
        # nvfp4's V scale (one a cache) multiplies the output, not the weights: no check
        # needed, and the default takes none
        assert torch.isfinite(unchecked).all()
        assert torch.equal(unchecked, lazy)


def test_int8_query_rounds_each_block_to_127_steps_of_its_largest_magnitude():
    q = torch.zeros(2, 70, dtype=torch.float64)
    q[0, :32] = torch.arange(32) - 16.0
    q[0, 32:64] = torch.linspace(-1, 1, 32)
    q[0, 64:] = 2.5
    got = ref.int8_query(q)
    assert got.shape == q.shape
    # a block whose values are already multiples of its 127th part comes back unchanged
    step = 16 / 127
    assert torch.allclose(got[0, :32], torch.round(q[0, :32] / step) * step)
    # every value within half a step of its block's scale; the largest magnitude exact
    for lo, hi in ((0, 32), (32, 64), (64, 70)):
        s = q[0, lo:hi].abs().max() / 127
        assert (got[0, lo:hi] - q[0, lo:hi]).abs().max() <= s / 2 + 1e-12
        assert got[0, lo:hi].abs().max() == q[0, lo:hi].abs().max()
    # an all-zero row and the padded tail of a short block stay 0, not NaN
    assert (got[1] == 0).all() and not torch.isnan(got).any()


@pytest.mark.parametrize(("fmt_v", "head_dim"), [("q8_0", 128), ("f16", 64), ("tbq4", 128),
                                                 ("q4_0", 16), ("q8_0", 256)])
def test_q8_0_integer_keys_match_the_int8_query_reference(fmt_v, head_dim):
    lens = [37, 1, 50]
    kernel, _, table, seq_lens, k, v = build("q8_0", fmt_v, lens, head_dim=head_dim)
    assert kernel.uses_int_keys()
    q = torch.randn(len(lens), 8, head_dim, generator=torch.Generator().manual_seed(5)).half()
    q[1, 3] = 0.0  # a query row of zeros: its scales are 0, its codes must not be NaN
    ints = kernel.decode(q, table, seq_lens, split_tokens=32, block_n=16)
    plain = kernel.decode(q, table, seq_lens, split_tokens=32, block_n=16, int_keys=False)
    assert not torch.isnan(ints).any()
    want_int = kernel.decode_ref(q.float(), table, seq_lens)
    want_plain = kernel.decode_ref(q.float(), table, seq_lens, int_query=False)
    # each path equals the reference of its own arithmetic far more closely than the other's
    assert rel(ints, want_int) < 6e-4 < rel(ints, want_plain)
    assert rel(plain, want_plain) < 6e-4 < rel(plain, want_int)
    exact = ref.attention_ref(q.float(), k.permute(0, 2, 1, 3).float(),
                              v.permute(0, 2, 1, 3).float(), seq_lens)
    # the query's rounding adds about as much error as q8_0's keys themselves (f16 V:
    # 1.4·10⁻³ → 2.0·10⁻³), far inside the format's bound
    bound = max(BOUNDS["q8_0"], BOUNDS[fmt_v])
    assert rel(ints, exact) < bound and rel(ints, exact) < rel(plain, exact) + 1e-3


@pytest.mark.parametrize(("fmt", "head_dim", "values", "expect"),
                         [("q8_0", 128, True, True), ("q8_0", 32, True, True),
                          ("q8_0", 128, False, False),
                          ("q8_0", 256, True, True), ("q8_0", 512, True, False),
                          ("q8_0", 96, True, False),
                          ("q4_0", 128, True, False), ("f16", 128, True, False)])
def test_integer_keys_only_where_measured(fmt, head_dim, values, expect):
    """The integer product is the default for q8_0 keys in heads of at most 256 lanes held in
    one part with a V side of their own (measured faster there); wider heads, head tails,
    K-only latents and other formats keep the float16 path, and int_keys=True cannot force it
    onto a format or a layout it cannot read."""
    c = LayerCache(fmt, fmt, 2, 16, 1, head_dim, values=values)
    assert c.uses_int_keys() is expect
    assert c.uses_int_keys(True) is (fmt == "q8_0" and head_dim != 96 and values)
    assert c.uses_int_keys(False) is False


def test_rotated_formats_over_many_rows_split_into_whole_waves():
    """tbq4 and tbq3 swapped over 64 rows or more (16 programs a multiprocessor, 2,112 a
    wave): four waves that no program spills past, splits of at least 512 tokens; measured
    best on an H200 at B=8 128k (132), B=32 32k and 128k (32), B=64 4k (8)."""
    assert rotated_many_splits(64, 131072, 16) == 132
    assert rotated_many_splits(256, 32768, 16) == rotated_many_splits(256, 131072, 16) == 32
    assert rotated_many_splits(512, 4096, 16) == 8
    assert rotated_many_splits(64, 32768, 16) == 64  # 512 tokens a split at most
    assert rotated_many_splits(4096, 1 << 20, 16) == 4  # more rows than a wave: one each
    assert rotated_many_splits(64, 300, 16) == 1
    for rows in (64, 100, 128, 333, 512):
        n = rotated_many_splits(rows, 1 << 20, 16)
        assert n * rows <= 4 * 16 * 132 < (n + 4) * rows


def test_rotated_decode_over_many_rows_takes_whole_waves(monkeypatch):
    # 32 sequences × 2 KV heads: the swapped tbq4 launch's split rule for many rows, and the
    # answer the reference gives
    import kvcore.kernels.cache as cache_mod

    calls = []

    def spy(rows, tokens, per_sm):
        calls.append((rows, tokens, per_sm))
        return rotated_many_splits(rows, tokens, per_sm)

    monkeypatch.setattr(cache_mod, "rotated_many_splits", spy)
    lens = [40 - s % 7 for s in range(32)]
    kernel, table, seq_lens, g = two_page_cache("tbq4", 2, 128, lens, seed=41)
    q = torch.randn(32, 8, 128, generator=g).half()
    out = kernel.decode(q, table, seq_lens)
    assert calls == [(64, 40, 16)]
    assert not torch.isnan(out).any()
    assert rel(out, kernel.decode_ref(q.float(), table, seq_lens)) < 3e-3


def _last_wave_fill(rows: int, splits: int, resident: int) -> float:
    wave = resident * 132
    return splits * rows / (math.ceil(splits * rows / wave) * wave)


def test_fullest_waves_fill_whole_waves_of_the_resident_programs():
    """8 programs a multiprocessor reside, 1,056 a wave: 384 rows take 11 splits (4,224
    programs, four whole waves) where one wave of 16 rounded down gave 5 (1.82 waves); 448 take
    7 (2.97 waves, not 4 at 1.70); where two waves fill within 1% (512 rows, 4 splits, 1.94
    waves) they are kept; more waves only while a split keeps 2,048 tokens."""
    assert fullest_waves(384, 8, 32768, 16) == 11
    assert fullest_waves(320, 8, 32768, 16) == 13
    assert fullest_waves(448, 8, 32768, 16) == 7
    assert fullest_waves(512, 8, 32768, 16) == 4
    assert fullest_waves(256, 8, 32768, 16) == 8
    assert fullest_waves(192, 8, 32768, 16) == 11
    assert fullest_waves(768, 8, 32768, 16) == 4
    assert fullest_waves(4096, 8, 32768, 16) == 1
    # 16 resident (nvfp4's swapped launch under 256 rows): one wave or two
    assert fullest_waves(128, 16, 131072) == 33
    assert fullest_waves(128, 16, 32768) == 16
    assert fullest_waves(64, 16, 131072) == fullest_waves(64, 16, 32768) == 33
    for tokens in (32768, 131072, 1 << 20):
        most = min(tokens // 2048, 64)
        for rows in range(64, 1200, 5):
            n = fullest_waves(rows, 8, tokens, most)
            base = max(1, min(2 * 8 * 132 // rows, most))
            assert n * rows <= 4 * 8 * 132 or n == base
            if n != base:
                assert base < n <= most
                assert _last_wave_fill(rows, n, 8) > _last_wave_fill(rows, base, 8) + 0.01


def test_resident_programs_fill_whole_quarters_of_the_register_file():
    """A warp's registers come from one quarter (16,384) of the file, in units of 8 a thread:
    at 169 to 256 registers two one-warp programs fit a quarter, at 129 to 168 three, at 128
    four; the whole file alone would give 10 at 198 and 13 at 144 (bench/results/
    kivi-waves-h200.json: 10 kivi4 programs at 191 registers ran as 1.25 waves of 8)."""
    assert resident_programs(243) == resident_programs(198) == WHOLE_RESIDENT == 8
    assert resident_programs(191) == resident_programs(169) == resident_programs(256) == 8
    assert resident_programs(168) == resident_programs(144) == resident_programs(129) == 12
    assert resident_programs(128) == 16
    assert resident_programs(110, warps=4) == 4
    # past the registers, 64 warps and 32 programs a multiprocessor
    assert resident_programs(24) == 32 and resident_programs(32, warps=4) == 16
    for regs in range(24, 257):
        n = resident_programs(regs)
        warp = -(-regs // 8) * 8 * 32
        assert n % 4 == 0 and n // 4 * warp <= 16384
        assert (n // 4 + 1) * warp > 16384 or n == 32


def test_capped_launches_ask_for_the_programs_their_registers_hold():
    """Every launch table that caps registers and sets programs a multiprocessor sets the
    number resident_programs gives for that cap: a split rule counts waves of those programs,
    and a cap changed without them would leave waves part empty or spilling over."""
    from kvcore.kernels import cache as c
    from kvcore.kernels.kivi import KIVI_SWAP_PER_SM, KIVI_SWAP_REGS

    pairs = [(per_sm, regs, launch[1]) for _, launch, _, regs, per_sm, _ in c.SWAPPED.values()
             if regs is not None and per_sm is not None]
    pairs += [(per_sm, regs, 1) for _, per_sm, regs in c.FEW_ROWS_LONG.values()]
    pairs += [(per_sm, regs, launch[1]) for launch, _, regs, per_sm in c.ROTATED_TILES.values()]
    pairs += [(KIVI_SWAP_PER_SM, KIVI_SWAP_REGS, 1)]
    assert len(pairs) == 9
    for per_sm, regs, warps in pairs:
        assert per_sm == resident_programs(regs, warps), (per_sm, regs, warps)


def test_wave_up_rounds_one_wave_up():
    assert wave_up(128, 16) == 17 and wave_up(256, 16) == 9 and wave_up(96, 16) == 22
    assert wave_up(4096, 16) == 1


@pytest.mark.parametrize(("fmt", "batch", "resident"), [
    ("fp8_pth", 32, 8), ("nvfp4", 32, 16), ("fp8_pth", 16, None), ("q8_0", 32, None)])
def test_fp8_and_nvfp4_decode_over_many_rows_fill_whole_waves(monkeypatch, fmt, batch,
                                                              resident):
    # sequences × 2 KV heads: fp8_pth (8 programs of its many-rows launch reside) and nvfp4
    # (its swapped launch's 16) over 64 rows fill whole waves; 32 rows, or another format,
    # round one wave up; and the answer is the reference's
    import kvcore.kernels.cache as cache_mod

    calls = []

    def spy(rows, per_sm, tokens, most=None):
        calls.append((rows, per_sm))
        return fullest_waves(rows, per_sm, tokens, most)

    monkeypatch.setattr(cache_mod, "fullest_waves", spy)
    lens = [40 - s % 7 for s in range(batch)]
    kernel, table, seq_lens, g = two_page_cache(fmt, 2, 128, lens, seed=43)
    q = torch.randn(batch, 8, 128, generator=g).half()
    out = kernel.decode(q, table, seq_lens)
    assert calls == ([(2 * batch, resident)] if resident else [])
    assert not torch.isnan(out).any()
    assert rel(out, kernel.decode_ref(q.float(), table, seq_lens)) < 3e-3


def test_long_contexts_cap_registers_for_one_wave_of_more_programs():
    """Over at most 16 rows and long contexts q8_0 (integer keys, 4 rows) and q4_0 (8 rows)
    run 12 one-warp programs a multiprocessor with registers capped at 168 (measured faster
    from 128k and 64k at B=1 and 2, slower at B=4); shorter contexts, more rows, other pairs
    of formats, other paths and head tails keep the uncapped launch of 8 programs (fp8_pth:
    12, its registers fitting without a cap)."""
    long = 1 << 20
    assert few_rows_launch("q8_0", "q8_0", True, 32, 4, 131072, 8) == (12, 168)
    assert few_rows_launch("q8_0", "q8_0", True, 32, 4, 131071, 8) == (8, None)
    assert few_rows_launch("q4_0", "q4_0", False, 32, 8, 65536, 16) == (12, 168)
    assert few_rows_launch("q4_0", "q4_0", False, 32, 8, long, 17) == (8, None)
    assert few_rows_launch("q4_0", "q4_0", False, 32, 8, 32768, 8) == (8, None)
    assert few_rows_launch("q4_0", "q4_0", False, 32, 8, long, 8, tail=True) == (8, None)
    assert few_rows_launch("q8_0", "f16", True, 32, 4, long, 8) == (8, None)
    assert few_rows_launch("q8_0", "q8_0", False, 32, 16, long, 8) == (8, None)
    assert few_rows_launch("q8_0", "q8_0", True, 32, 8, long, 8) == (8, None)
    assert few_rows_launch("fp8_pth", "fp8_pth", False, 32, 4, long, 8) == (12, None)
    assert few_rows_launch("nvfp4", "nvfp4", False, 64, 4, long, 8) == (8, None)


def test_rotated_formats_take_small_tiles_where_measured():
    """tbq3 and tbq4 (K and V alike, heads of at most 128 lanes in one part, groups of at most
    4, at most 64 sequence-head rows) decode in 16-token one-warp programs of 3 stages, 4 rows,
    128 registers, 16 programs a multiprocessor; anything else keeps its table's launch."""
    assert small_tiles("tbq4", "tbq4", 128, False, 4, 64) == ((16, 1, 3), 4, 128, 16)
    assert small_tiles("tbq3", "tbq3", 64, False, 2, 8) == ((16, 1, 3), 4, 128, 16)
    assert small_tiles("tbq4", "tbq4", 128, False, 4, 65) is None
    assert small_tiles("tbq4", "tbq4", 128, False, 8, 8) is None
    assert small_tiles("tbq4", "tbq4", 256, False, 4, 8) is None
    assert small_tiles("tbq3", "tbq3", 64, True, 4, 8) is None
    assert small_tiles("tbq4", "q8_0", 128, False, 4, 8) is None
    assert small_tiles("nvfp4", "nvfp4", 128, False, 4, 8) is None


@pytest.mark.parametrize("fmt", ["tbq4", "tbq3"])
def test_small_tiles_decode_matches_the_reference(fmt):
    lens = [70, 33, 1]
    kernel, _, table, seq_lens, _, _ = build(fmt, fmt, lens)
    q = torch.randn(len(lens), 8, 128, generator=torch.Generator().manual_seed(3)).half()
    # the small tiles (GQA 8/2: groups of 4); tbq4 swaps its products by default
    out = kernel.decode(q, table, seq_lens, swap=False)
    table_launch = kernel.decode(q, table, seq_lens, block_n=64, num_warps=1, num_stages=2,
                                 pad_rows=4)
    want = kernel.decode_ref(q.float(), table, seq_lens)
    assert not torch.isnan(out).any()
    assert rel(out, want) < 1e-3 and rel(table_launch, want) < 1e-3
    assert not torch.equal(out, table_launch)  # a different split of the context was run


@pytest.mark.parametrize(("fmt_k", "fmt_v", "head_dim", "swap"), [
    ("tbq4", "tbq4", 128, True), ("tbq4", "tbq4", 128, False), ("tbq3", "tbq3", 128, True),
    ("tbq3", "tbq3", 80, False), ("q8_0", "tbq3", 128, None), ("tbq4", "f16", 128, None),
    ("tbq4", "tbq4", 192, None)])
def test_rotations_in_the_split_kernel_give_the_launched_ones(monkeypatch, fmt_k, fmt_v,
                                                            head_dim, swap):
    """Where a head is 128 lanes in one part the split kernel rotates its query and its
    partial outputs itself (a Walsh–Hadamard transform, no matrix), swapped or not, a rotated
    format on one side only, heads narrower than their 128 lanes: no rotation kernel runs, and
    the answer is that of the rotation kernels (float32 rounding apart) and the reference's. A
    192-wide head (128 + 64 lanes) keeps the kernels."""
    from kvcore.kernels import triton_ops

    lens = [70, 33, 1]
    kernel, _, table, seq_lens, _, _ = build(fmt_k, fmt_v, lens, head_dim=head_dim, seed=6)
    q = torch.randn(len(lens), 8, head_dim, generator=torch.Generator().manual_seed(9)).half()
    launch = dict(split_tokens=32, swap=swap)
    apart = kernel.decode(q, table, seq_lens, rotate_in_kernel=False, **launch)
    want = kernel.decode_ref(q.float(), table, seq_lens)

    class Refused:
        def __getitem__(self, grid):
            raise AssertionError("rotate_kernel launched")

    monkeypatch.setattr(triton_ops, "rotate_kernel", Refused())
    if head_dim == 192:
        with pytest.raises(AssertionError, match="rotate_kernel launched"):
            kernel.decode(q, table, seq_lens, **launch)
        return
    inside = kernel.decode(q, table, seq_lens, **launch)
    assert not torch.isnan(inside).any()
    assert rel(inside, apart) < 1e-5
    assert rel(inside, want) < 1e-3


@pytest.mark.parametrize("fmt", ["tbq4", "tbq3"])
def test_k_only_rotated_cache_rotates_in_the_split_kernel(fmt):
    # a K-only cache (V = the keys, unpacked once) of 128-lane heads: the query and the
    # partial outputs rotated by the split kernel give the launched rotations' answer
    cache, table, lens, g = two_page_cache(fmt, 2, 128, [40, 9], values=False)
    q = torch.randn(2, 8, 128, generator=g).half()
    inside = cache.decode(q, table, lens, split_tokens=16)
    apart = cache.decode(q, table, lens, split_tokens=16, rotate_in_kernel=False)
    assert not torch.isnan(inside).any()
    assert rel(inside, apart) < 1e-5
    assert rel(inside, cache.decode_ref(q.float(), table, lens)) < 1e-3


@pytest.mark.parametrize("fmt", ["tbq4", "tbq3"])
def test_rotations_leave_the_kernel_past_their_longest_context(monkeypatch, fmt):
    """ROTATE_IN_KERNEL_TOKENS: tbq4 (whose loop the transform slows) rotates in the split
    kernel up to 32k tokens and by rotate_kernel beyond; tbq3 in the kernel at any length. A
    longest sequence (max_len) above 32k decides it; the answer stays the reference's."""
    from kvcore.kernels import triton_ops

    assert ROTATE_IN_KERNEL_TOKENS == {"tbq4": 32768}
    lens = [70, 33, 1]
    kernel, _, table, seq_lens, _, _ = build(fmt, fmt, lens, seed=7)
    q = torch.randn(len(lens), 8, 128, generator=torch.Generator().manual_seed(4)).half()
    want = kernel.decode_ref(q.float(), table, seq_lens)
    launched = []
    real = triton_ops.rotate_kernel

    class Counted:
        def __getitem__(self, grid):
            launched.append(grid)
            return real[grid]

    monkeypatch.setattr(triton_ops, "rotate_kernel", Counted())
    for max_len, kernels in ((32768, 0), (32769, 2 if fmt == "tbq4" else 0)):
        launched.clear()
        out = kernel.decode(q, table, seq_lens, max_len=max_len, split_tokens=16384)
        assert len(launched) == kernels, (fmt, max_len)
        assert rel(out, want) < 1e-3


@triton.jit
def _rotate16(X, Y, SIGNS, BACK: tl.constexpr):
    r = tl.arange(0, 16)[:, None] * 128 + tl.arange(0, 128)[None, :]
    tl.store(Y + r, hadamard_rotate(tl.load(X + r), SIGNS, 16, BACK))


def test_hadamard_rotation_is_the_rotation_matrix():
    # hadamard_rotate (signs, seven butterfly stages, 1/√128) against R and Rᵀ themselves
    x = torch.randn(16, 128, generator=torch.Generator().manual_seed(2))
    signs = torch.tensor(ref.codebook.hadamard_signs(), dtype=torch.float32).reshape(-1)
    r = ref.rotation().double()
    for back, want in ((False, x.double() @ r.T), (True, x.double() @ r)):
        y = torch.full_like(x, float("nan"))
        _rotate16[(1,)](x, y, signs, BACK=back)
        assert (y.double() - want).abs().max() < 1e-5 * want.abs().max()


def test_swapped_products_only_where_measured():
    """tbq4, tbq3, q4_0 and nvfp4 swap their products by default at any number of rows:
    tbq4 in 16-token one-warp programs of 3 stages, tbq3 in 16-token and q4_0 and nvfp4 in
    32-token ones of one stage (kernel v34), 8 query columns (tbq4 and q4_0 4 from 256 rows),
    128 registers, 16 programs a multiprocessor, tbq3 reading words; from 256 rows nvfp4 in
    64-token programs of 2 stages, its registers and programs left to decode's rules (None);
    heads other than 128 lanes in one part, groups of more than 8, mixed formats and the other
    formats do not."""
    assert swapped_launch("tbq4", "tbq4", 128, False, 4, 1) == ((16, 1, 3), 8, 128, 16, False)
    assert swapped_launch("tbq4", "tbq4", 128, False, 8, 255) == ((16, 1, 3), 8, 128, 16, False)
    assert swapped_launch("tbq4", "tbq4", 128, False, 4, 256) == ((16, 1, 3), 4, 128, 16, False)
    assert swapped_launch("tbq3", "tbq3", 128, False, 4, 512) == ((16, 1, 1), 8, 128, 16, True)
    assert swapped_launch("q4_0", "q4_0", 128, False, 4, 1) == ((32, 1, 1), 8, 128, 16, False)
    assert swapped_launch("q4_0", "q4_0", 128, False, 4, 32) == ((32, 1, 1), 8, 128, 16, False)
    assert swapped_launch("q4_0", "q4_0", 128, False, 4, 512) == ((32, 1, 1), 4, 128, 16, False)
    assert swapped_launch("nvfp4", "nvfp4", 128, False, 4, 1) == ((32, 1, 1), 8, 128, 16,
                                                                 False)
    assert swapped_launch("nvfp4", "nvfp4", 128, False, 4, 255) == ((32, 1, 1), 8, 128, 16,
                                                                   False)
    assert swapped_launch("nvfp4", "nvfp4", 128, False, 4, 256) == ((64, 1, 2), 8, None, None,
                                                                   False)
    assert swapped_launch("q4_0", "q4_0", 128, False, 16, 64) is None
    assert swapped_launch("tbq4", "tbq4", 64, False, 4, 8) is None
    assert swapped_launch("tbq4", "tbq4", 128, True, 4, 8) is None
    assert swapped_launch("tbq4", "q4_0", 128, False, 4, 64) is None
    assert swapped_launch("nvfp4", "nvfp4", 128, True, 4, 8) is None
    assert swapped_launch("nvfp4", "tbq4", 128, False, 4, 8) is None
    for fmt in ("q8_0", "fp8_pth", "f16"):
        assert swapped_launch(fmt, fmt, 128, False, 4, 512) is None


@pytest.mark.parametrize(("fmt_k", "fmt_v", "heads", "page"), [
    ("q4_0", "q4_0", (8, 2), 16), ("tbq4", "tbq4", (16, 2), 12), ("tbq3", "tbq3", (8, 2), 16),
    ("nvfp4", "nvfp4", (4, 2), 5), ("q4_0", "tbq4", (6, 2), 16)])
def test_swapped_products_match_the_reference(fmt_k, fmt_v, heads, page):
    """The swapped products (the cache tile first, the query heads the narrow side) give the
    unswapped answer under the same launch and split, for groups of 2 to 8 heads, paged
    tiles that straddle pages, mixed 4-bit formats and several splits a sequence."""
    hq, hkv = heads
    lens = [70, 33, 1]
    kernel, _, table, seq_lens, _, _ = build(fmt_k, fmt_v, lens, kv_heads=hkv, page=page,
                                             seed=5)
    q = torch.randn(len(lens), hq, 128, generator=torch.Generator().manual_seed(8)).half()
    launch = dict(split_tokens=32, block_n=16, num_warps=1, num_stages=2)
    swapped = kernel.decode(q, table, seq_lens, swap=True, **launch)
    plain = kernel.decode(q, table, seq_lens, swap=False, **launch)
    assert not torch.isnan(swapped).any()
    assert rel(swapped, plain) < 1e-5
    assert rel(swapped, kernel.decode_ref(q.float(), table, seq_lens)) < 1e-3


def test_default_decode_swaps_where_swapped_launch_applies():
    """The default decode is the swapped launch where swapped_launch has one (tbq4, tbq3,
    q4_0 and nvfp4 at any rows, each head one 128-lane part, groups of at most 8): the same
    output bit for bit, and another output with the products not swapped."""
    g = torch.Generator().manual_seed(12)
    for fmt, hkv, swaps in (("tbq4", 2, True), ("tbq3", 2, True), ("q4_0", 8, True),
                            ("q4_0", 2, True), ("nvfp4", 2, True)):
        lens = [40, 17, 29, 8]
        kernel, _, table, seq_lens, _, _ = build(fmt, fmt, lens, kv_heads=hkv, seed=2)
        q = torch.randn(len(lens), 4 * hkv, 128, generator=g).half()
        default = kernel.decode(q, table, seq_lens)
        assert torch.equal(default, kernel.decode(q, table, seq_lens, swap=swaps)), fmt
        assert not torch.equal(default, kernel.decode(q, table, seq_lens, swap=not swaps))
        assert rel(default, kernel.decode_ref(q.float(), table, seq_lens)) < 1e-3


def test_swap_refuses_formats_and_layouts_it_cannot_read():
    kernel, _, table, seq_lens, _, _ = build("q8_0", "q4_0", [20])
    q = torch.zeros(1, 4, 128).half()
    with pytest.raises(ValueError, match="4-bit format"):
        kernel.decode(q, table, seq_lens, swap=True)
    latent, table, lens, _ = two_page_cache("q4_0", 1, 576, [20], values=False)
    with pytest.raises(ValueError, match="one part"):
        latent.decode(torch.zeros(1, 4, 576).half(), table, lens, swap=True)


def test_short_tiles_take_the_reads_that_are_right_on_a_gpu():
    """In tiles of fewer than 32 tokens tbq3 reads its planes as words and nvfp4 as bytes (the
    other reads gave wrong values on an H200); asked for explicitly, those reads are refused,
    and from 32 tokens they stand."""
    assert short_tile_reads("tbq3", False, False) is True
    assert short_tile_reads("nvfp4", True, False) is False
    assert short_tile_reads("tbq3", True, True) is True
    assert short_tile_reads("q4_0", False, True) is False
    with pytest.raises(ValueError, match="tbq3 planes read as bytes"):
        short_tile_reads("tbq3", False, True)
    kernel, _, table, seq_lens, _, _ = build("nvfp4", "nvfp4", [20, 7])
    q = torch.randn(2, 4, 128, generator=torch.Generator().manual_seed(4)).half()
    with pytest.raises(ValueError, match="nvfp4 planes read as words"):
        kernel.decode(q, table, seq_lens, words=True, block_n=16)
    want = kernel.decode_ref(q.float(), table, seq_lens)
    assert rel(kernel.decode(q, table, seq_lens, words=True, block_n=32), want) < 1e-3


def test_mixed_formats_in_short_tiles_decode_by_default():
    """q8_0 keys over nvfp4 values in 256-lane heads take 16-token tiles whose V words would
    be nvfp4's wrong read: the default takes bytes for that side and decodes."""
    kernel, _, table, seq_lens, _, _ = build("q8_0", "nvfp4", [20, 9], kv_heads=1,
                                             head_dim=256)
    q = torch.randn(2, 6, 256, generator=torch.Generator().manual_seed(6)).half()
    out = kernel.decode(q, table, seq_lens)
    assert not torch.isnan(out).any()
    assert rel(out, kernel.decode_ref(q.float(), table, seq_lens)) < 3e-3


def test_wide_heads_take_one_stage_where_measured():
    """On 256-wide heads q4_0 and nvfp4 run 32-token programs of one stage, tbq4, tbq3 and
    q8_0's integer keys 16-token ones (the integer keys 3 stages from MANY_ROWS rows under 2²¹
    row-tokens); on the MLA latent (held in 1,024 lanes) q4_0, q8_0 and tbq3 run 16-token
    two-warp programs of one stage, tbq4 and nvfp4 32-token 4-warp ones; on 512 lanes nvfp4,
    tbq4 and q8_0's integer keys 32-token two-warp programs of one stage, tbq3 16-token ones.
    fp8_pth and f16 keep
    WIDE_LAUNCH's two stages (the latent's fp8_pth its 32-token 4-warp launch); groups of more
    than 16 rows and other widths tiles of 8,192 values."""
    assert wide_launch("q4_0", 256, 8, False) == (32, 1, 1)
    assert wide_launch("nvfp4", 256, 8, False, rows=256, max_len=4096) == (32, 1, 1)
    assert wide_launch("tbq4", 256, 8, False) == (16, 1, 1)
    assert wide_launch("tbq3", 256, 8, False) == (16, 1, 1)
    assert wide_launch("q8_0", 256, 8, True, rows=4, max_len=262144) == (16, 1, 1)
    assert wide_launch("q8_0", 256, 8, True, rows=32, max_len=4096) == (16, 1, 1)
    assert wide_launch("q8_0", 256, 8, True, rows=64, max_len=16384) == (16, 1, 3)
    assert wide_launch("q8_0", 256, 8, True, rows=256, max_len=4096) == (16, 1, 3)
    assert wide_launch("q8_0", 256, 8, True, rows=64, max_len=32768) == (16, 1, 1)
    assert wide_launch("q8_0", 256, 8, True, rows=256, max_len=8192) == (16, 1, 1)
    assert wide_launch("q8_0", 256, 8, False) == (16, 1, 2)
    for fmt in ("fp8_pth", "f16"):
        assert wide_launch(fmt, 256, 8, False) == (16, 1, 2)
    assert wide_launch("q4_0", 1024, 16, False) == (16, 2, 1)
    assert wide_launch("q8_0", 1024, 16, False) == (16, 2, 1)
    assert wide_launch("tbq3", 1024, 16, False) == (16, 2, 1)
    assert wide_launch("tbq4", 1024, 16, False) == (32, 4, 1)
    assert wide_launch("nvfp4", 1024, 16, False) == (32, 4, 1)
    assert wide_launch("fp8_pth", 1024, 16, False) == (32, 4, 2)
    assert wide_launch("f16", 1024, 16, False) == (16, 2, 2)
    # 512 lanes (Gemma 4's global layers): nvfp4, q8_0's integer keys and tbq4 in 32-token
    # programs of one stage, tbq3 in 16-token ones; q4_0, f16 and fp8_pth keep two stages
    for fmt, int_keys in (("nvfp4", False), ("q8_0", True), ("tbq4", False)):
        assert wide_launch(fmt, 512, 8, int_keys, rows=32, max_len=131072) == (32, 2, 1)
    assert wide_launch("tbq3", 512, 8, False) == (16, 2, 1)
    for fmt in ("q4_0", "f16", "fp8_pth"):
        assert wide_launch(fmt, 512, 16, False) == (16, 2, 2)
    assert wide_launch("q4_0", 256, 32, False) == (32, 4, 2)
    assert wide_launch("q8_0", 256, 32, True) == (32, 4, 2)
    assert wide_launch("f16", 2048, 16, False) == (16, 8, 2)
