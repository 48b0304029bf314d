"""KIVI caches: exact bytes, the residual window's bounds, Triton append and decode vs torch."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kvcore.kernels import kivi, kivi_triton  # noqa: E402
from kvcore.kernels.cache import SMS, wave_splits  # noqa: E402
from kvcore.kernels.kivi import KiviCache, decode_form, flush_parts  # noqa: E402
from kvcore.kernels.ref import attention_ref  # noqa: E402
from kvcore.kv import geometry_bytes  # noqa: E402


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


@pytest.mark.parametrize("fmt", ["kivi2", "kivi4"])
@pytest.mark.parametrize(("seqs", "heads", "dim", "tokens"), [(1, 1, 32, 1), (2, 3, 64, 159),
                                                              (2, 3, 64, 160), (1, 2, 128, 1000)])
def test_bytes_equal_kvcore(fmt, seqs, heads, dim, tokens):
    cache = KiviCache(fmt, seqs, heads, dim, tokens)
    assert cache.nbytes == geometry_bytes(fmt, fmt, layers=1, sequences=seqs, kv_heads=heads,
                                          head_dim=dim, tokens=tokens)


def test_allocations_name_every_tensor_the_cache_holds():
    # the allocator model replays allocations(): a tensor missing there (the group table was,
    # 2 KiB a layer on an H200) makes the predicted allocator bytes short
    from kvcore.kernels.cache import LayerCache

    for cache in (KiviCache("kivi2", 2, 3, 64, 500), LayerCache("nvfp4", "q8_0", 4, 16, 2, 64)):
        held = [v for v in vars(cache).values() if isinstance(v, torch.Tensor)]
        for side in (getattr(cache, "k", None), getattr(cache, "v", None)):
            if side is not None:
                held += list(side.planes.values())
                held += [side.global_scale] if side.global_scale is not None else []
        ids = {id(t) for t in cache.allocations()}
        assert held and all(id(t) in ids for t in held)
        assert len(ids) == len(cache.allocations())


def test_residual_window_holds_r_to_r_plus_g_minus_1():
    cache = KiviCache("kivi2", 1, 1, 32, 1000)
    x = torch.randn(1, 1, 32, generator=torch.Generator().manual_seed(3)).half()
    seen = []
    for _ in range(1000):
        cache.append(0, x, x)
        seen.append(cache.n_resid[0])
        assert cache.n_quant[0] % 32 == 0
    assert max(seen) == 159 and min(seen[200:]) >= 128
    with pytest.raises(ValueError, match="full"):
        cache.append(0, x, x)


@pytest.mark.parametrize("fmt", ["kivi2", "kivi4"])
@pytest.mark.parametrize("dim", [64, 96])  # 96: Phi-3's heads, not a power of two
def test_triton_flush_and_decode_match_reference(fmt, dim):
    g = torch.Generator().manual_seed(1)
    lens = [300, 170, 5]
    k = torch.randn(3, 300, 2, dim, generator=g).half()
    v = torch.randn(3, 300, 2, dim, generator=g).half()
    ref_cache = KiviCache(fmt, 3, 2, dim, 400)
    tri = KiviCache(fmt, 3, 2, dim, 400)
    for s, n in enumerate(lens):
        ref_cache.append(s, k[s, :n], v[s, :n])
        tri.append_triton(s, k[s, :n], v[s, :n])
    assert tri.n_quant == ref_cache.n_quant == [160, 32, 0]
    for a, b in zip(tri.tensors(), ref_cache.tensors(), strict=True):
        assert torch.equal(a, b)
    q = torch.randn(3, 8, dim, generator=g).half()
    out = tri.decode(q, split_tokens=64)
    assert not torch.isnan(out).any()
    expect = ref_cache.decode_ref(q.float())
    assert rel(out, expect) < 3e-3
    exact = torch.stack([attention_ref(q[s:s + 1].float(), k[s:s + 1, :n].permute(0, 2, 1, 3).float(),
                                       v[s:s + 1, :n].permute(0, 2, 1, 3).float(),
                                       torch.tensor([n]))[0] for s, n in enumerate(lens)])
    # random Gaussian data is the hard case for per-channel 2-bit keys
    assert rel(out, exact) < (0.9 if fmt == "kivi2" else 0.2)


@pytest.mark.parametrize("fmt", ["kivi2", "kivi4"])
@pytest.mark.parametrize(("dim", "hq"), [(64, 8), (96, 4), (64, 24), (256, 8)])
def test_swapped_products_give_the_unswapped_answer(fmt, dim, hq):
    # swap: the cache tile the first operand, the query rows (4 or 2 a KV head: 8 columns;
    # 12: 16; at 256 lanes only when asked for) the second, the output blocks transposed;
    # quantized groups, a partial tile and the ring, over several splits, must give what the
    # unswapped kernel gives
    g = torch.Generator().manual_seed(6)
    lens = [300, 161, 20]
    cache = KiviCache(fmt, 3, 2, dim, 400)
    for s, n in enumerate(lens):
        cache.append_triton(s, torch.randn(n, 2, dim, generator=g).half(),
                            torch.randn(n, 2, dim, generator=g).half())
    q = torch.randn(3, hq, dim, generator=g).half()
    swapped = cache.decode(q, split_tokens=128, swap=True)
    plain = cache.decode(q, split_tokens=128, swap=False)
    assert not torch.isnan(swapped).any()
    # float32 sums of other shapes in another order; the interpreter's products go through
    # numpy's BLAS, whose kernels (and so its sums' order) follow the CPU: 1.15e-5 at kivi4,
    # 96 lanes on one; a tile or row out of place gives 1e-2 and more
    assert rel(swapped, plain) < 5e-5
    assert rel(swapped, cache.decode_ref(q.float())) < 3e-3


def test_swapped_products_refuse_a_k_only_cache():
    cache = KiviCache("kivi4", 1, 1, 64, 100, values=False)
    with pytest.raises(ValueError, match="swapped products need K and V"):
        cache.decode(torch.zeros(1, 2, 64).half(), swap=True)


@pytest.mark.parametrize("bits, width, rows, form", [
    (2, 128, 64, (True, 168)), (2, 128, 0, (True, 168)), (2, 256, 8, (False, 0)),
    (4, 128, 8, (True, 168)), (4, 128, 9, (True, 0)), (4, 128, 0, (True, 0)),
    (4, 64, 1, (True, 168)), (4, 256, 8, (False, 0))])
def test_decode_form_caps_registers_where_measured(bits, width, rows, form):
    # kivi2 swapped at heads of up to 128 lanes always; kivi4 only over 1 to 8 sequence-head
    # rows (B=1 at 8 KV heads), where the capped launch was faster on an H200
    assert decode_form(bits, width, True, rows=rows) == form
    assert decode_form(bits, width, True, swap=False, rows=rows) == (False, 0)


def test_default_splits_fill_one_wave():
    # as many splits as one wave of programs holds (132 multiprocessors), no program past it:
    # B=8 at 8 KV heads 24 splits at 12 programs a multiprocessor, 16 at 8; more rows than a
    # wave, one split each
    assert wave_splits(64, 12) == 24 and wave_splits(64, 8) == 16
    assert wave_splits(8, 12) == 198 and wave_splits(4096, 8) == 1
    for rows in (1, 7, 64, 100, 513, 1584):
        n = wave_splits(rows, 12)
        assert n * rows <= 12 * 132 < (n + 1) * rows


def test_query_groups_spread_over_programs():
    # 20 query heads a KV head, 16 a program: two query blocks, the second partly masked,
    # give the answer of one program for the whole group
    g = torch.Generator().manual_seed(4)
    k = torch.randn(2, 200, 2, 64, generator=g).half()
    v = torch.randn(2, 200, 2, 64, generator=g).half()
    cache = KiviCache("kivi4", 2, 2, 64, 256)
    for s, n in enumerate([200, 150]):
        cache.append_triton(s, k[s, :n], v[s, :n])
    q = torch.randn(2, 40, 64, generator=g).half()
    spread = cache.decode(q, split_tokens=64, query_rows=16)
    whole = cache.decode(q, split_tokens=64, query_rows=32)
    assert not torch.isnan(spread).any()
    # (float32 sums of products of other shapes, in another order: 1.2e-5 swapped)
    assert rel(spread, whole) < 5e-5
    assert rel(spread, cache.decode_ref(q.float())) < 3e-3


@pytest.mark.parametrize(("capacity", "chunks"), [
    (600, [0, 1, 31, 32, 33, 159, 1, 200, 0, 143]),  # 600 tokens, ring and new tokens mixed
    (600, [600]),                                     # one append flushes 14 groups
    (100, [7, 93]),                                   # capacity below R + G - 1: no group
])
@pytest.mark.parametrize("writers_first", [False, True])
def test_bulk_append_writes_the_token_by_token_bytes(capacity, chunks, writers_first):
    # append_triton books a whole chunk at once (the groups it flushes, the ring slots it
    # fills); every byte and the lengths must be those of appending one token at a time.
    # writers_first: the ring-writing programs run before the flushing ones, so that a writer
    # that touched a slot a flushed token is still to be read from would change the bytes
    g = torch.Generator().manual_seed(9)
    n = sum(chunks)
    k = torch.randn(n, 2, 64, generator=g).half()
    v = torch.randn(n, 2, 64, generator=g).half()
    one, bulk = KiviCache("kivi2", 2, 2, 64, capacity), KiviCache("kivi2", 2, 2, 64, capacity)
    start = 0
    for c in chunks:
        for i in range(start, start + c):
            one.append(1, k[i:i + 1], v[i:i + 1])
        bulk.write_append(1, k[start:start + c], v[start:start + c],
                          *bulk.plan_append(1, c), writers_first=writers_first)
        start += c
        assert (bulk.n_quant, bulk.n_resid) == (one.n_quant, one.n_resid)
    for a, b in zip(bulk.tensors(), one.tensors(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(bulk.group_table, one.group_table)
    with pytest.raises(ValueError, match="full"):
        bulk.append_triton(1, k[:1], v[:1])
    assert (bulk.n_quant, bulk.n_resid) == (one.n_quant, one.n_resid)


@pytest.mark.parametrize(("fmt", "dtype", "dv", "values"), [
    ("kivi2", torch.float16, 64, True), ("kivi4", torch.bfloat16, 64, True),
    ("kivi4", torch.float16, 32, True), ("kivi2", torch.float16, 64, False)])
def test_appends_of_several_sequences_in_one_launch_write_the_token_by_token_bytes(
        fmt, dtype, dv, values):
    # one launch for the appends of several sequences (each its own rows of the new tokens,
    # its own flushed groups and ring slots; some flush nothing, one appends no token, the
    # grid's programs past an append's own idle): every byte, the lengths and the group table
    # must be those of appending one token at a time to each sequence
    g = torch.Generator().manual_seed(31)
    rounds = [{0: 200, 1: 7, 2: 0, 3: 160}, {0: 1, 1: 300, 3: 33}, {2: 450, 0: 40, 1: 2}]
    one, many = (KiviCache(fmt, 4, 2, 64, 800, head_dim_v=dv, values=values) for _ in range(2))
    for r in rounds:
        ks = {s: torch.randn(n, 2, 64, generator=g).to(dtype) for s, n in r.items()}
        vs = {s: torch.randn(n, 2, dv, generator=g).to(dtype) if values else ks[s]
              for s, n in r.items()}
        for s in r:
            for i in range(r[s]):
                one.append(s, ks[s][i:i + 1], vs[s][i:i + 1])
        many.append_many(list(r), [ks[s] for s in r], [vs[s] for s in r])
        assert (many.n_quant, many.n_resid) == (one.n_quant, one.n_resid)
    assert many.n_quant[2] > 0 and many.n_resid[1] > 0
    for a, b in zip(many.tensors(), one.tensors(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(many.group_table, one.group_table)


@pytest.mark.parametrize("fmt", ["kivi2", "kivi4"])
@pytest.mark.parametrize(("dim", "dv", "dtype", "lane"), [
    (64, 64, torch.float16, True), (96, 32, torch.float16, True),
    (128, 128, torch.bfloat16, True), (96, 32, torch.float16, False)])
def test_a_flush_with_its_rows_in_lane_or_token_order_writes_the_reference_bytes(
        monkeypatch, fmt, dim, dv, dtype, lane):
    # LANE_TOKENS (the default): the tile's rows hold its tokens out of order, so that each
    # byte's codes are packed in one thread; the codes, their bytes and each token's value
    # scales must still land where the reference puts them, as in token order (one sequence
    # and several in one launch, groups from the ring and from new rows, any warps)
    monkeypatch.setattr(kivi, "FLUSH_LANE_TOKENS", lane)
    g = torch.Generator().manual_seed(41)
    ref, one, many, wide = (KiviCache(fmt, 2, 2, dim, 700, head_dim_v=dv) for _ in range(4))
    for s, c in [(0, 230), (1, 70), (0, 1), (1, 260), (0, 140)]:
        k = torch.randn(c, 2, dim, generator=g).to(dtype)
        v = torch.randn(c, 2, dv, generator=g).to(dtype)
        ref.append(s, k, v)
        one.append_triton(s, k, v)
        many.append_many([s], [k], [v])
        wide.write_append(s, k, v, *wide.plan_append(s, c), num_warps=2)
    assert ref.n_quant[0] > 0 and ref.n_quant[1] > 0
    for cache in (one, many, wide):
        for a, b in zip(cache.tensors(), ref.tensors(), strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize(("fmt", "dv"), [("kivi2", 32), ("kivi4", 64)])
def test_a_flush_taking_its_ranges_two_values_a_word_writes_the_reference_bytes(
        monkeypatch, fmt, dv):
    # PACKED_RANGE (with LANE_TOKENS): each channel's and token's minimum and maximum in
    # float16, two neighbours a 32-bit word across lanes; one launch for two sequences, a
    # group of ring rows and new rows, a V narrower than K; few groups, as the interpreter
    # runs each packed combine in Python
    monkeypatch.setattr(kivi, "FLUSH_LANE_TOKENS", True)
    monkeypatch.setattr(kivi, "FLUSH_PACKED_RANGE", True)
    # as on a GPU that has the packed min and max (the kernel's HW stays off: plain Triton)
    monkeypatch.setattr(kivi, "_capability", lambda x: (9, 0))
    g = torch.Generator().manual_seed(43)
    ref, many = (KiviCache(fmt, 2, 1, 64, 300, head_dim_v=dv) for _ in range(2))
    for r in ({0: 20}, {0: 150, 1: 165}):
        ks = {s: torch.randn(n, 1, 64, generator=g).half() * (s + 1) for s, n in r.items()}
        vs = {s: torch.randn(n, 1, dv, generator=g).half() - s for s, n in r.items()}
        for s in r:
            ref.append(s, ks[s], vs[s])
        many.append_many(list(r), [ks[s] for s in r], [vs[s] for s in r])
    assert ref.n_quant == [32, 32]
    for a, b in zip(many.tensors(), ref.tensors(), strict=True):
        assert torch.equal(a, b)


def test_the_flush_switches_reach_the_launch_where_the_chip_has_them(monkeypatch):
    # LANE_TOKENS by FLUSH_LANE_TOKENS on every device; the Newton reciprocal only on compute
    # capability 9.0, where it was checked against the division for every float16 scale;
    # the packed ranges from 8.0 (min.f16x2); the interpreter (0, 0) takes neither by default
    seen = []

    class Spy:
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append((kw["LANE_TOKENS"], kw["RCP_FMA"],
                                                 kw["PACKED_RANGE"]))

    monkeypatch.setattr(kivi_triton, "kivi_flush_kernel", Spy())
    k = torch.zeros(64, 1, 64, dtype=torch.float16)
    assert kivi._capability(k) == (0, 0)
    for lane in (True, False):
        monkeypatch.setattr(kivi, "FLUSH_LANE_TOKENS", lane)
        for cap in ((0, 0), (7, 5), (8, 6), (9, 0)):
            monkeypatch.setattr(kivi, "_capability", lambda x, cap=cap: cap)
            for fmt in ("kivi2", "kivi4"):
                cache = KiviCache(fmt, 1, 1, 64, 128)
                cache.write_append(0, k, k, *cache.plan_append(0, 64))
    on = [(False, False), (False, False), (False, True), (True, True)]
    assert seen == [(lane, *c) for lane in (True, False) for c in on for _ in range(2)]


@pytest.mark.parametrize(("dim", "dv", "parts"), [(64, 64, 2), (128, 128, 4), (96, 96, 3),
                                                  (64, 32, 2)])
def test_a_flush_shared_among_programs_by_channel_blocks_writes_the_same_bytes(dim, dv, parts):
    # each program's G-channel blocks shared among ``parts`` programs (the flushed groups and
    # the ring slots alike; a narrower V lies in the first blocks only), one sequence at a
    # time and several in one launch: the bytes of one program a group
    g = torch.Generator().manual_seed(37)
    chunks = [(0, 250), (1, 40), (0, 1), (1, 300), (0, 170)]
    one, split, many = (KiviCache("kivi4", 2, 2, dim, 800, head_dim_v=dv) for _ in range(3))
    for s, c in chunks:
        k = torch.randn(c, 2, dim, generator=g).half()
        v = torch.randn(c, 2, dv, generator=g).half()
        one.append_triton(s, k, v)
        split.write_append(s, k, v, *split.plan_append(s, c), parts=parts)
        many.append_many([s], [k], [v], parts=parts)
    for cache in (split, many):
        for a, b in zip(cache.tensors(), one.tensors(), strict=True):
            assert torch.equal(a, b)
    assert one.n_quant[1] > 0
    with pytest.raises(ValueError, match="parts must divide"):
        one.write_append(0, k[:1], v[:1], *one.plan_append(0, 1), parts=dim // 32 + 1)


def test_flush_launches_share_channel_blocks_four_ways_else_two_past_one_wave():
    wave = kivi.FLUSH_PER_SM * SMS
    # a 128-lane head's four blocks: a block a program at any count (kernel v80)
    assert flush_parts(1, 4) == flush_parts(wave, 4) == flush_parts(wave + 1, 4) == 4
    assert flush_parts(wave, 8) == 4  # 256 lanes: two blocks a program
    # blocks that do not split in four: two programs a group only past one wave
    assert flush_parts(wave, 2) == 1
    assert flush_parts(wave + 1, 2) == 2
    assert flush_parts(wave + 1, 6) == 2
    assert flush_parts(10 * wave, 3) == 1  # three blocks of 32 channels do not split in two


def _launched_grids(monkeypatch) -> list:
    """From here on each flush launch's grid, recorded as it launches."""
    grids = []
    real = kivi_triton.kivi_flush_kernel

    class Spy:
        def __getitem__(self, grid):
            grids.append(grid)
            return real[grid]

    monkeypatch.setattr(kivi_triton, "kivi_flush_kernel", Spy())
    return grids


def test_the_four_default_parts_reach_a_short_launch_and_keep_the_bytes(monkeypatch):
    # one sequence under a wave on 128-lane heads: four programs a group (and a ring chunk),
    # each one 32-channel block; the bytes those of one program a group
    g = torch.Generator().manual_seed(43)
    k = torch.randn(300, 2, 128, generator=g).half()
    v = torch.randn(300, 2, 128, generator=g).half()
    one, rule = (KiviCache("kivi4", 1, 2, 128, 400) for _ in range(2))
    one.write_append(0, k, v, *one.plan_append(0, 300), parts=1)
    grids = _launched_grids(monkeypatch)
    live, g0, flushed = rule.plan_append(0, 300)
    rule.write_append(0, k, v, live, g0, flushed)
    assert flushed > 0
    assert grids == [(4 * (flushed + -(-min(300, rule.ring) // 32)), 2)]
    for a, b in zip(rule.tensors(), one.tensors(), strict=True):
        assert torch.equal(a, b)


def test_the_default_parts_reach_the_launch_and_keep_the_bytes(monkeypatch):
    # a wave of one program: every launch is past it, so the default shares each group's
    # channel blocks between two programs; the bytes stay those of one program a group
    g = torch.Generator().manual_seed(41)
    chunks = [(0, 250), (1, 40), (0, 1), (1, 300)]
    ks = [torch.randn(c, 2, 64, generator=g).half() for _, c in chunks]
    vs = [torch.randn(c, 2, 64, generator=g).half() for _, c in chunks]
    one, rule = (KiviCache("kivi2", 2, 2, 64, 800) for _ in range(2))
    for (s, _), k, v in zip(chunks, ks, vs, strict=True):
        one.write_append(s, k, v, *one.plan_append(s, k.shape[0]), parts=1)
    monkeypatch.setattr(kivi, "FLUSH_PER_SM", 1 / SMS)
    grids = _launched_grids(monkeypatch)
    for (s, _), k, v in zip(chunks, ks, vs, strict=True):
        live, g0, flushed = rule.plan_append(s, k.shape[0])
        rule.write_append(s, k, v, live, g0, flushed)
        assert grids[-1] == (2 * (flushed + -(-min(k.shape[0], rule.ring) // 32)), 2)
    for a, b in zip(rule.tensors(), one.tensors(), strict=True):
        assert torch.equal(a, b)


def test_programs_of_one_channel_block_launch_with_one_stage_and_fewer_registers(monkeypatch):
    # kernel v80: nothing to load ahead where a program walks one block, and fewer registers
    # so that more reside; programs of several blocks keep FLUSH_REGS and FLUSH_STAGES; an
    # explicit cap wins either way
    seen = []

    class Spy:
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append((grid[0], kw["PARTS"], kw["STAGES"],
                                                 kw.get("maxnreg")))

    monkeypatch.setattr(kivi_triton, "kivi_flush_kernel", Spy())
    k = torch.zeros(64, 1, 128, dtype=torch.float16)
    for parts, regs in ((None, None), (2, None), (1, None), (4, 0), (2, 96)):
        cache = KiviCache("kivi2", 1, 1, 128, 128)
        cache.write_append(0, k, k, *cache.plan_append(0, 64), parts=parts,
                           max_registers=regs)
    one, many = kivi.FLUSH_ONE_BLOCK, (kivi.FLUSH_REGS, kivi.FLUSH_STAGES)
    assert one == (80, 1) and many == (128, 3)
    # 64 tokens into an empty sequence: 2 programs a head at one part (flushed groups and
    # ring chunks), times the parts
    assert seen == [(8, 4, one[1], one[0]), (4, 2, many[1], many[0]),
                    (2, 1, many[1], many[0]), (8, 4, one[1], None), (4, 2, many[1], 96)]
    # a 64-lane head's two blocks under a wave: one part, two blocks a program
    seen.clear()
    k = torch.zeros(64, 1, 64, dtype=torch.float16)
    cache = KiviCache("kivi4", 1, 1, 64, 128)
    cache.write_append(0, k, k, *cache.plan_append(0, 64))
    assert seen == [(2, 1, many[1], many[0])]


def test_appends_in_one_launch_refuse_a_repeated_sequence_and_a_full_cache_unbooked():
    cache = KiviCache("kivi2", 3, 1, 32, 200)
    x = torch.zeros(150, 1, 32).half()
    with pytest.raises(ValueError, match="repeat"):
        cache.plan_appends([(0, 1), (1, 1), (0, 1)])
    cache.append_many([0], [x], [x])
    # sequence 1 fits, sequence 0 does not: nothing is booked for either
    with pytest.raises(ValueError, match="full"):
        cache.plan_appends([(1, 10), (0, 51)])
    assert (cache.n_quant, cache.n_resid) == ([0, 0, 0], [150, 0, 0])
    assert int((cache.group_table >= 0).sum()) == 0
    plans, programs = cache.plan_appends([(1, 10), (0, 50)])
    assert plans.tolist() == [[1, 0, 0, 0, 0, 10, 0], [0, 0, 2, 150, 0, 50, 10]]
    assert programs == 2 + 2  # sequence 0 flushes 2 groups and writes 50 ring slots


@pytest.mark.parametrize(("dtype", "dv", "values"), [(torch.float16, 64, True),
                                                     (torch.bfloat16, 64, True),
                                                     (torch.float16, 32, True),
                                                     (torch.float16, 64, False)])
def test_ring_kernel_writes_what_torch_indexing_writes(dtype, dv, values):
    # the ring slots of an append come from one kernel: chunks shorter and longer than the
    # ring, wrapping around it, bfloat16 rows (stored as float16), a narrower V and a K-only
    # cache must leave every plane as the torch indexing leaves it
    g = torch.Generator().manual_seed(23)
    chunks = [5, 200, 1, 90, 400]
    k = torch.randn(sum(chunks), 2, 64, generator=g).to(dtype)
    v = torch.randn(sum(chunks), 2, dv, generator=g).to(dtype) if values else k
    caches = [KiviCache("kivi4", 2, 2, 64, 800, head_dim_v=dv, values=values)
              for _ in range(2)]
    start = 0
    for c in chunks:
        for cache, kernel in zip(caches, (True, False), strict=True):
            plan = cache.plan_append(0, c)
            cache.write_append(0, k[start:start + c], v[start:start + c], *plan,
                               ring_kernel=kernel)
        start += c
        for a, b in zip(caches[0].tensors(), caches[1].tensors(), strict=True):
            assert torch.equal(a, b), c
    assert bool((caches[0].kr[0] != 0).any()) and not bool((caches[0].kr[1] != 0).any())


@pytest.mark.parametrize("fmt", ["kivi2", "kivi4"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_flush_writes_the_same_bytes_with_its_values_loaded_early_or_late(fmt, dtype):
    # FLUSH_LAUNCH loads kivi2's values once the keys are stored (LATE_V) and kivi4's with
    # them: either order, any warps, the same bytes in every plane (rows from the ring and
    # new rows in one group; bf16 rows take the two-load path)
    g = torch.Generator().manual_seed(17)
    k = torch.randn(300, 2, 64, generator=g).to(dtype)
    v = torch.randn(300, 2, 64, generator=g).to(dtype)
    caches = []
    for late, warps in ((False, 4), (True, 1), (True, 2)):
        cache = KiviCache(fmt, 1, 2, 64, 300)
        for a, b in ((0, 50), (50, 300)):
            cache.write_append(0, k[a:b], v[a:b], *cache.plan_append(0, b - a),
                               num_warps=warps, late_v=late)
        caches.append(cache)
    assert caches[0].n_quant[0] > 0
    for other in caches[1:]:
        for a, b in zip(other.tensors(), caches[0].tensors(), strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("fmt", ["kivi2", "kivi4"])
def test_k_only_cache_as_kvcore_counts_an_mla_latent(fmt):
    # an MLA layer caches one latent row a token (576 wide for DeepSeek): kvcore counts KIVI
    # on it as keys only, so the cache allocates no V planes and attends with V = the keys
    from kvcore.catalog import load_model
    from kvcore.formats import get_format
    from kvcore.kv import CacheOptions, group_cache

    spec = load_model("deepseek-v2-lite-chat")
    mla = next(g for g in spec.groups if g.kind.value == "mla")
    opts = CacheOptions(kv_k=get_format(fmt), kv_v=get_format(fmt))
    want = group_cache(mla, spec, 300, 2, opts)
    cache = KiviCache(fmt, 2, mla.n_kv_heads, mla.head_dim_k, 300, values=False)
    assert cache.nbytes * mla.count == want.k_bytes + want.v_bytes
    assert len(cache.allocations()) == 5
    g = torch.Generator().manual_seed(11)
    d = mla.head_dim_k
    k = torch.randn(2, 300, 1, d, generator=g).half()
    one = KiviCache(fmt, 2, 1, d, 300, values=False)
    tri = KiviCache(fmt, 2, 1, d, 300, values=False)
    for s, n in enumerate([300, 190]):
        one.append(s, k[s, :n], k[s, :n])
        tri.append_triton(s, k[s, :n], k[s, :n])
    for a, b in zip(tri.tensors(), one.tensors(), strict=True):
        assert torch.equal(a, b)
    q = torch.randn(2, 16, d, generator=g).half()
    out = tri.decode(q, split_tokens=64)
    assert not torch.isnan(out).any()
    assert rel(out, tri.decode_ref(q.float())) < 3e-3
    kk, vv = tri.dequantize(1)
    assert torch.equal(kk, vv) and kk.shape == (1, 190, d)


@pytest.mark.parametrize("values", [True, False])
def test_tile_of_one_or_more_groups_gives_the_same_attention(values):
    # the quantized tokens a step takes (whole groups; a split is a multiple of them) change
    # only the order of the sums and the running max each float16 weight is rounded against:
    # 250 tokens = 3 groups (an odd count) + 154 in the ring
    g = torch.Generator().manual_seed(12)
    cache = KiviCache("kivi4", 2, 2, 96, 300, values=values)
    k = torch.randn(2, 250, 2, 96, generator=g).half()
    v = torch.randn(2, 250, 2, 96, generator=g).half()
    for s in range(2):
        cache.append_triton(s, k[s], v[s])
    assert cache.n_quant == [96, 96] and cache.n_resid == [154, 154]
    q = torch.randn(2, 8, 96, generator=g).half()
    outs = [cache.decode(q, split_tokens=split, tile_tokens=tok)
            for tok, split in ((32, 32), (64, 64), (64, 128), (128, 128))]
    assert not any(torch.isnan(o).any() for o in outs)
    for o in outs[1:]:
        assert rel(o, outs[0]) < 1e-3
    assert rel(outs[0], cache.decode_ref(q.float())) < 3e-3


def test_tile_must_fill_a_product():
    cache = KiviCache("kivi2", 1, 1, 64, 300)
    q = torch.zeros(1, 4, 64).half()
    # kivi2's byte index covers 4 tokens: a tile of one group gives products of 8 tokens
    with pytest.raises(ValueError, match="tile_tokens must be whole groups of 32 tokens, at "
                                         "least 64 for kivi2"):
        cache.decode(q, tile_tokens=32)
    with pytest.raises(ValueError, match="whole groups"):
        cache.decode(q, tile_tokens=80)


def test_decode_sees_tokens_appended_after_an_earlier_decode():
    # decode keeps the lengths on the device between calls (a step must be capturable in a
    # CUDA graph); appending must still be seen by the next decode
    g = torch.Generator().manual_seed(4)
    k = torch.randn(2, 200, 2, 64, generator=g).half()
    cache = KiviCache("kivi4", 2, 2, 64, 256)
    q = torch.randn(2, 4, 64, generator=g).half()
    cache.append_triton(0, k[0, :40], k[0, :40])
    cache.append_triton(1, k[1, :7], k[1, :7])
    first = cache.decode(q, split_tokens=64)
    assert rel(first, cache.decode_ref(q.float())) < 3e-3
    cache.append_triton(0, k[0, 40:200], k[0, 40:200])
    cache.append_triton(1, k[1, 7:9], k[1, 7:9])
    again = cache.decode(q, split_tokens=64)
    assert rel(again, cache.decode_ref(q.float())) < 3e-3
    assert rel(again, first) > 1e-2


def test_decode_writes_every_element_of_a_given_output():
    # a given output is written in place (no fill each step): pre-filled with NaN, every
    # element must be written, with the values of a decode into a new tensor
    g = torch.Generator().manual_seed(5)
    k = torch.randn(120, 2, 64, generator=g).half()
    cache = KiviCache("kivi2", 2, 2, 64, 256, head_dim_v=32)
    cache.append_triton(0, k, k[..., :32])
    cache.append_triton(1, k[:9], k[:9, :, :32])
    q = torch.randn(2, 4, 64, generator=g).half()
    out = torch.full((2, 4, 32), float("nan"))
    got = cache.decode(q, split_tokens=64, out=out)
    assert got is out and not bool(out.isnan().any())
    assert torch.equal(out, cache.decode(q, split_tokens=64))
    for bad in (torch.empty(2, 4, 64), torch.empty(2, 4, 32, dtype=torch.float16),
                torch.empty(2, 32, 4).transpose(1, 2)):
        with pytest.raises(ValueError, match="contiguous float32 tensor of shape"):
            cache.decode(q, out=bad)


@pytest.mark.parametrize("fmt", ["kivi2", "kivi4"])
def test_paged_groups_give_the_same_cache_and_attention(fmt):
    # groups flushed into slots taken in a shuffled pool order, as an engine's block table
    # scatters pages: same bytes, same dequantized K/V, same attention as the contiguous cache
    g = torch.Generator().manual_seed(7)
    lens = [260, 97]
    k = torch.randn(2, 260, 2, 64, generator=g).half()
    v = torch.randn(2, 260, 2, 64, generator=g).half()
    flat = KiviCache(fmt, 2, 2, 64, 300)
    slots = flat.seqs * flat.groups
    order = torch.randperm(slots, generator=g).tolist()
    paged_ref = KiviCache(fmt, 2, 2, 64, 300, slot_order=order)
    paged_tri = KiviCache(fmt, 2, 2, 64, 300, slot_order=order)
    assert paged_tri.nbytes == flat.nbytes
    # interleave the sequences' appends so that their groups alternate in the pool
    for start in range(0, 260, 40):
        for s, n in enumerate(lens):
            if start < n:
                end = min(n, start + 40)
                flat.append(s, k[s, start:end], v[s, start:end])
                paged_ref.append(s, k[s, start:end], v[s, start:end])
                paged_tri.append_triton(s, k[s, start:end], v[s, start:end])
    used = [int(x) for x in paged_tri.group_table.flatten() if x >= 0]
    assert len(used) == sum(n // 32 for n in paged_tri.n_quant) > 2
    assert used != sorted(used) and len(set(used)) == len(used)
    for a, b in zip(paged_tri.tensors(), paged_ref.tensors(), strict=True):
        assert torch.equal(a, b)
    for s in range(2):
        for x, y in zip(flat.dequantize(s), paged_tri.dequantize(s), strict=True):
            assert torch.equal(x, y)
    q = torch.randn(2, 4, 64, generator=g).half()
    assert rel(paged_tri.decode(q, split_tokens=64), flat.decode(q, split_tokens=64)) < 1e-6


def test_slot_order_must_be_a_permutation():
    with pytest.raises(ValueError, match="permutation"):
        KiviCache("kivi2", 1, 1, 32, 400, slot_order=[0, 0, 1, 2, 3, 4, 5, 6])


@pytest.mark.parametrize("values", [True, False])
def test_lazy_rescaling_gives_the_eager_answer(values):
    # keys growing along the sequence: the running max rises by less than the margin in some
    # groups and by more in others, through the quantized groups and the residual ring
    g = torch.Generator().manual_seed(31)
    cache = KiviCache("kivi4", 2, 2, 128, 300, values=values)
    grow = (0.25 + torch.arange(260) / 40.0)[:, None, None]
    k = (torch.randn(2, 260, 2, 128, generator=g) * grow).half()
    v = torch.randn(2, 260, 2, 128, generator=g).half()
    for s in range(2):
        cache.append_triton(s, k[s, :260 - 30 * s], v[s, :260 - 30 * s])
    q = torch.randn(2, 8, 128, generator=g).half()
    eager = cache.decode(q, split_tokens=1024, lazy=False)
    lazy = cache.decode(q, split_tokens=1024, lazy=True)
    assert not torch.isnan(lazy).any()
    assert rel(lazy, eager) < 1e-3
    assert rel(lazy, cache.decode_ref(q.float())) < 3e-3


@pytest.mark.parametrize(("fmt", "dim"), [("kivi2", 512), ("kivi4", 256)])
def test_wide_heads_with_values(fmt, dim):
    # heads of 512 lanes take one group a step with their keys by shifts; 256 the general path
    g = torch.Generator().manual_seed(21)
    cache = KiviCache(fmt, 1, 1, dim, 260)
    k = torch.randn(230, 1, dim, generator=g).half()
    v = torch.randn(230, 1, dim, generator=g).half()
    cache.append_triton(0, k, v)
    assert cache.n_quant == [96]
    q = torch.randn(1, 2, dim, generator=g).half()
    out = cache.decode(q, split_tokens=64)
    assert not torch.isnan(out).any()
    assert rel(out, cache.decode_ref(q.float())) < 3e-3


@pytest.mark.parametrize("fmt", ["kivi2", "kivi4"])
def test_planes_lie_as_the_decode_reads_them(fmt):
    # one group whose codes are known: x[t, d] = (t + d) mod (levels + 1) gives every channel
    # (keys) and every 32 channels of a token (values) scale 1 and minimum 0, so code = x.
    # Key code of (token t, channel d) at byte [t // per, d], bits (t % per)·bits; value code of
    # (token t, channel d) at byte [d // per, t], bits (d % per)·bits (token-minor)
    bits = {"kivi2": 2, "kivi4": 4}[fmt]
    per, levels = 8 // bits, (1 << bits) - 1
    t = torch.arange(32)[:, None]
    d = torch.arange(64)[None, :]
    x = ((t + d) % (levels + 1)).half()[:, None, :]  # [tokens, heads, dim]
    for append in ("append", "append_triton"):
        cache = KiviCache(fmt, 1, 1, 64, 32 + 128)
        getattr(cache, append)(0, torch.cat([x, torch.zeros(128, 1, 64).half()]),
                               torch.cat([x, torch.zeros(128, 1, 64).half()]))
        assert cache.n_quant == [32]
        slot = int(cache.group_table[0, 0])
        kq, vq = cache.kq[slot, 0].long(), cache.vq[slot, 0].long()
        assert kq.shape == (32 // per, 64) and vq.shape == (64 // per, 32)
        k_codes = (kq[t // per, d] >> ((t % per) * bits)) & levels
        v_codes = (vq[d // per, t] >> ((d % per) * bits)) & levels
        want = x[:, 0].long()
        assert torch.equal(k_codes, want) and torch.equal(v_codes, want)
        assert torch.equal(cache.ks[slot, 0], torch.ones(64).half())
        assert torch.equal(cache.vs[slot, 0], torch.ones(2, 32).half())
        assert not cache.km[slot, 0].any() and not cache.vm[slot, 0].any()


@pytest.mark.parametrize("fmt", ["kivi2", "kivi4"])
def test_scales_below_float16_normal_range_keep_every_code_within_its_levels(fmt):
    # values a few units of 2**-24 apart give groups whose float16 scale lies below the normal
    # range, rounded by up to half a unit: no code may pass the top level (packed, it would
    # carry into a neighbour's bits), every value must come back within half a step of the
    # scale one unit up (plus what that unit adds over the levels), and the kernel must write
    # the reference's bytes. Spans up to 20,000 units give normal scales too.
    from kvcore.kernels.kivi import (
        _minmax_quant,
        dequantize_group_keys,
        dequantize_values,
        quantize_group_keys,
        quantize_values,
    )

    bits = int(fmt[-1])
    levels = (1 << bits) - 1
    g = torch.Generator().manual_seed(5)
    groups, heads, dim = 12, 2, 64
    n = 32 * groups
    span = torch.randint(1, 2000, (n, heads, 1), generator=g) * torch.randint(
        1, 11, (1, heads, dim), generator=g)
    x = (torch.rand(n, heads, dim, generator=g) * span).round() - span // 2
    x = (x * 2.0 ** -24).half()
    assert (x.float().abs() < 2.0 ** -14).float().mean() > 0.5
    k, v = x, x.flip(0)
    for dim_q, y in ((-2, k.float().reshape(groups, 32, heads, dim)),
                     (-1, v.float().reshape(n, heads, 2, 32))):
        codes, scale, _ = _minmax_quant(y, bits, dim_q)
        assert int(codes.max()) <= levels
        assert bool((scale.float() < 2.0 ** -14).any())
    unit = 2.0 ** -24
    kp = quantize_group_keys(k.reshape(groups, 32, heads, dim).transpose(1, 2), bits)
    back = dequantize_group_keys(kp, bits).transpose(1, 2).reshape(n, heads, dim)
    step = kp["scale"].float()  # [groups, heads, dim]
    bound = (step + unit) / 2 + levels * unit
    err = (back - k.float()).abs().reshape(groups, 32, heads, dim)
    assert bool((err <= bound[:, None] * (1 + 2.0 ** -20)).all())
    vp = quantize_values(v, bits, 32)
    back = dequantize_values(vp, bits, 32)
    step = vp["scale"].float().repeat_interleave(32, dim=-1)
    assert bool(((back - v.float()).abs() <= ((step + unit) / 2 + levels * unit)
                 * (1 + 2.0 ** -20)).all())
    one, bulk = KiviCache(fmt, 1, heads, dim, n), KiviCache(fmt, 1, heads, dim, n)
    one.append(0, k, v)
    bulk.append_triton(0, k, v)
    assert bulk.n_quant == one.n_quant and bulk.n_quant[0] >= 32 * 7
    for a, b in zip(bulk.tensors(), one.tensors(), strict=True):
        assert torch.equal(a, b)
