"""KIVI's Gluon kernel (kvcore.kernels.gluon_kivi, kivi2 and kivi4). Gluon has no interpreter,
so CI compiles it for sm_90 with the triton wheel's compiler (bench/sass_count.py's
compile_kivi_gluon) and checks what the compiled kernel holds; its output is checked on a GPU
against the Triton kernel and KiviCache.decode_ref by bench/probes/gluon_kivi.py and
bench/decode.py's check. Here also: where KiviCache.decode takes it."""

from __future__ import annotations

import re

import pytest

from .sm90 import compiled_ptx
from .sm90 import usage_value as _usage

SCRIPT = '''
import json
import sass_count
out = {}
# (name, query heads a KV head, K_AFTER, bits, lanes, V_AFTER, K_SUB: None as decode launches
# them)
for name, group, after, bits, lanes, v_after, k_sub in (
        ("scaled", 4, False, 2, 128, False, False), ("v", 4, False, 2, 128, True, False),
        ("vz", 4, False, 2, 128, None, None), ("after", 8, True, 2, 128, False, False),
        ("kivi4", 4, False, 4, 128, False, False), ("kivi4-v", 8, False, 4, 128, None, None),
        ("16-v", 16, False, 2, 128, None, None), ("16-kivi4-v", 12, False, 4, 128, None, None),
        ("64-v", 8, False, 2, 64, True, False), ("64-vz", 8, False, 2, 64, None, None),
        ("64-kivi4-v", 4, False, 4, 64, None, None)):
    kernel, sass, usage = sass_count.compile_kivi_gluon(group, after, bits, lanes, v_after,
                                                        k_sub)
    out[name] = {"ptx": kernel.asm["ptx"], "usage": usage,
                 "local_in_loops": sass_count.local_in_loops(sass)}
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def compiled() -> dict[str, dict[str, str]]:
    pytest.importorskip("triton.experimental.gluon")
    return compiled_ptx(SCRIPT)  # type: ignore[return-value]


def test_kivi_gluon_kernel_compiles_to_its_copies_reads_and_products(compiled):
    from kvcore.kernels.gluon_kivi import launch_for

    for name, c in compiled.items():
        ptx, usage = c["ptx"], c["usage"]
        # no spill inside the loops, and 12 one-warp programs (8 of the 16-column form) fit a
        # multiprocessor's registers; at most four words spilled outside them (triton 3.9's
        # V_AFTER and K_SUB forms keep output indices across the ring's loop, stored once and
        # read once; 3.6's none)
        per_sm = launch_for(16 if name.startswith("16") else 8)[0]
        assert c["local_in_loops"] == 0, (name, usage)
        assert _usage(usage, "LOCAL") == 0 and _usage(usage, "STACK") <= 16, (name, usage)
        assert _usage(usage, "REG") <= 65536 // (32 * per_sm), (name, usage)
        # the six planes of a group copied by cp.async (16-byte copies of the codes), read in
        # 16- and 8-byte vectors, never byte by byte
        assert "cp.async.cg.shared.global" in ptx and "cp.async.ca.shared.global" in ptx, name
        assert "ld.shared.u8" not in ptx and "ld.shared.b8" not in ptx, name
        assert ptx.count("ld.shared.v4.b32") >= 8 and ptx.count("ld.shared.v2.b32") >= 2, name
        # launched as a programmatic dependent
        assert ptx.index("griddepcontrol.wait") < ptx.index("griddepcontrol.launch_dep"), name
        products = ptx.count("mma.sync.aligned.m16n8k16")
        unscaled = ptx.count("fma.rn.f16x2")
        subnormals = len(re.findall(r"and\.b32 %r\d+, t[01], 0x", ptx))
        # code pairs a thread unpacks a tile, keys or values (kivi4 as many: a tile holds as
        # many codes, two a byte; half as many on 64 lanes)
        pairs = 32 if name.startswith("64") else 64
        # 16 score and 16 value products a quantized tile, as many a ring tile (twice as many
        # in 16 columns, half as many on 64-lane heads)
        plain = {"16": 128, "64": 32}.get(name.split("-")[0], 64)
        if name == "after":
            # K_AFTER: 16 more a quantized tile for the sums of the minimums' and the units'
            # terms; only the values' codes are scaled as they are unpacked
            assert products == 80, name
            assert unscaled == pairs and ptx.count("sub.rn.f16x2") == pairs, name
        elif name.endswith("vz"):
            # kivi2's default in 8 columns, K_SUB too: the keys' codes also one AND a pair, the
            # minimums' term one [16, D] product (8 on 128 lanes, 4 on 64) a tile more; no
            # float16 subtraction or fused multiply-add left
            assert products == plain + 2 + (4 if name.startswith("64") else 8), name
            assert unscaled == 0 and ptx.count("sub.rn.f16x2") == 0, name
            assert subnormals == 2 * pairs, name
        elif name.endswith("-v") or name == "v":
            # V_AFTER: the minimums' product a quantized tile more (2 or 4 products); the
            # keys' pairs one subtraction and one fused multiply-add each, the values' one AND
            # (subnormals), nothing more
            assert products == plain + 2 * (2 if name.startswith("16") else 1), name
            assert unscaled == pairs and ptx.count("sub.rn.f16x2") == pairs, name
            assert subnormals == pairs, name
        else:
            # each code pair one subtraction and one fused multiply-add, keys and values
            assert products == plain, name
            assert unscaled == 2 * pairs and ptx.count("sub.rn.f16x2") == 2 * pairs, name
            assert subnormals == 0, name


def test_operand_orders_are_permutations_that_keep_a_lanes_channels_together():
    pytest.importorskip("triton.experimental.gluon")
    from kvcore.kernels import gluon_kivi

    # the kernel's own index functions, on ints
    key_channel, key_token = gluon_kivi.key_channel.fn, gluon_kivi.key_token.fn
    value_channel = gluon_kivi.value_channel.fn

    assert sorted(key_channel(k) for k in range(128)) == list(range(128))
    assert sorted(key_channel(k, 64) for k in range(64)) == list(range(64))
    for bits in (2, 4):
        assert sorted(value_channel(r, bits) for r in range(128)) == list(range(128))
        assert sorted(key_token(r, bits) for r in range(32)) == list(range(32))
    for g in range(8):
        # a lane group's score rows (g, g + 8, g + 16, g + 24) are the tokens of the key byte
        # rows it reads: kivi2's row g (tokens 4 g …), kivi4's rows g and g + 8 (2 j, 2 j + 1)
        rows = [g + 8 * i for i in range(4)]
        assert sorted(key_token(r, 2) for r in rows) == [4 * g + k for k in range(4)]
        assert sorted(key_token(r, 4) for r in rows) == sorted(
            2 * j + k for j in (g, g + 8) for k in (0, 1))
        # and kivi4's value rows are the channels of its byte rows 16 q + 8 i + g (2 c, 2 c + 1)
        vrows = [g + 8 * i for i in range(16)]
        assert sorted(value_channel(r, 4) for r in vrows) == sorted(
            2 * (16 * q + 8 * i + g) + k for q in range(4) for i in (0, 1) for k in (0, 1))
    for t in range(4):
        # the columns lane t holds in every 16-column step (2t, 2t + 1, 2t + 8, 2t + 9) are
        # its 32 channels, whose key bytes it reads in two 16-byte reads
        cols = [16 * j + 8 * f + 2 * t + e for j in range(8) for f in (0, 1) for e in (0, 1)]
        assert sorted(key_channel(k) for k in cols) == list(range(32 * t, 32 * t + 32))
    for g in range(8):
        # the rows lane group g holds (g + 8 i) are channels 4 c … 4 c + 3 of its byte rows
        # c = g + 8 q: code k of byte row c is channel 4 c + k
        rows = [g + 8 * i for i in range(16)]
        assert sorted(value_channel(r) for r in rows) == sorted(
            4 * (g + 8 * q) + k for q in range(4) for k in range(4))


@pytest.mark.parametrize(("fmt", "kwargs", "why"), [
    ("kivi2", {"values": False}, "K and V with heads of 128 or 64 lanes"),
    ("kivi4", {"values": False}, "K and V with heads of 128 or 64 lanes"),
    ("kivi2", {"head_dim": 96}, "heads of 128 or 64 lanes"),
    ("kivi2", {"head_dim": 64}, "a query on a GPU"),
    ("kivi2", {}, "a query on a GPU"),  # the query on the CPU
    ("kivi4", {}, "a query on a GPU"),
    ("kivi2", {"group": 32}, "at most 16 heads a KV head"),
])
def test_decode_takes_the_gluon_kernel_only_where_it_applies(fmt, kwargs, why):
    torch = pytest.importorskip("torch")
    from kvcore.kernels.kivi import KiviCache

    d = kwargs.pop("head_dim", 128)
    group = kwargs.pop("group", 2)
    cache = KiviCache(fmt, 1, 2, d, 64, **kwargs)
    q = torch.zeros(1, 2 * group, d, dtype=torch.float16)
    # by default such a step goes to the Triton kernel; forced, it says what the kernel needs
    assert cache._takes_gluon(q, forced=False, other_launch=False) is False
    with pytest.raises(ValueError, match=why):
        cache._takes_gluon(q, forced=True, other_launch=False)
    with pytest.raises(ValueError, match="gluon: the Gluon kernel needs"):
        cache.decode(q, gluon=True)


@pytest.mark.parametrize(("head_dim", "group", "takes"), [
    (128, 4, True), (128, 16, True), (128, 17, False),
    (64, 8, True), (64, 16, False),  # the 16-column form on 64 lanes: checked, not timed
])
def test_decode_takes_the_gluon_kernel_where_it_was_timed_faster(head_dim, group, takes):
    # a query on a GPU (stood in for by its shape and device): 128-lane heads take the kernel
    # for up to 16 query heads a KV head, 64-lane ones for up to 8
    from types import SimpleNamespace

    pytest.importorskip("triton.experimental.gluon")
    pytest.importorskip("torch")
    from kvcore.kernels.kivi import KiviCache

    cache = KiviCache("kivi2", 1, 2, head_dim, 64)
    q = SimpleNamespace(is_cuda=True, shape=(1, 2 * group, head_dim))
    assert cache._takes_gluon(q, forced=False, other_launch=False) is takes
    # a launch argument of the Triton kernel keeps the default on it
    assert cache._takes_gluon(q, forced=False, other_launch=True) is False
    if not takes:
        with pytest.raises(ValueError, match="at most 16 heads a KV head"):
            cache._takes_gluon(q, forced=True, other_launch=False)


@pytest.mark.parametrize(("consts", "v_after", "k_sub"), [
    ({}, True, True), ({"V_AFTER": False}, False, True), ({"K_SUB": False}, True, False),
    ({"K_AFTER": True}, None, None), ({"PAIRS": True, "STAGES": 4}, None, None),
])
@pytest.mark.parametrize(("fmt", "head_dim", "group", "qn"), [
    ("kivi2", 128, 4, 8), ("kivi4", 128, 4, 8), ("kivi2", 128, 12, 16), ("kivi2", 64, 8, 8)])
def test_decode_launches_the_after_forms_unless_told_or_keys_after(monkeypatch, consts, v_after,
                                                                  k_sub, fmt, head_dim, group,
                                                                  qn):
    # the launch decode_kivi_gluon makes, the kernel and the merge stood in for (no GPU):
    # V_AFTER by default in every form (each timed faster with it), K_SUB in kivi2's 8-column
    # forms (on 128 and 64 lanes, where it was timed faster; the 16-column form was slower with
    # it), either off when asked, and neither beside K_AFTER or PAIRS, which they cannot join
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton.experimental.gluon")
    from kvcore.kernels import gluon_kivi, triton_ops
    from kvcore.kernels.kivi import KiviCache

    launches: list[dict] = []

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, **kw: launches.append({"grid": grid, **kw})

    monkeypatch.setattr(gluon_kivi, "kivi2_swapped_kernel", Kernel())
    monkeypatch.setattr(triton_ops, "reduce_splits", lambda *a, **k: None)
    cache = KiviCache(fmt, 1, 2, head_dim, 64)
    q = torch.zeros(1, 2 * group, head_dim, dtype=torch.float16)
    gluon_kivi.decode_kivi_gluon(cache, q, torch.empty(1, 2 * group, head_dim), **consts)
    (launch,) = launches
    assert launch.get("V_AFTER") is v_after
    timed = fmt == "kivi2" and qn == 8
    assert launch.get("K_SUB") is (k_sub and timed if k_sub is not None else None)
    assert launch["QN"] == qn and launch["D"] == head_dim and launch["GROUP"] == group
    with pytest.raises(ValueError, match="heads of 128 or 64 lanes"):
        gluon_kivi.launch_for(4, 96)
