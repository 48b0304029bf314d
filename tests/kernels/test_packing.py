"""Round trips of every bit packer at every width; the 3-bit lane layout pinned bit by bit."""

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kvcore.kernels.packing import (  # noqa: E402
    pack3,
    pack4_halves,
    pack4_pairs,
    unpack3,
    unpack4_halves,
    unpack4_pairs,
)


def values(bits, groups, group):
    return st.lists(st.integers(0, (1 << bits) - 1), min_size=groups * group,
                    max_size=groups * group)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 13).flatmap(lambda g: values(3, g, 8)))
def test_pack3_round_trip(vals):
    q = torch.tensor(vals, dtype=torch.uint8)
    packed = pack3(q)
    assert packed.numel() == q.numel() // 8 * 3
    assert torch.equal(unpack3(packed), q)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9).flatmap(lambda g: values(4, g, 32)))
def test_pack4_halves_round_trip(vals):
    q = torch.tensor(vals, dtype=torch.uint8)
    packed = pack4_halves(q)
    assert packed.numel() == q.numel() // 2
    assert torch.equal(unpack4_halves(packed), q)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 63).flatmap(lambda g: values(4, g, 2)))
def test_pack4_pairs_round_trip(vals):
    q = torch.tensor(vals, dtype=torch.uint8)
    assert torch.equal(unpack4_pairs(pack4_pairs(q)), q)


@pytest.mark.parametrize("position", range(8))
@pytest.mark.parametrize("value", range(8))
def test_pack3_every_value_at_every_position(position, value):
    # the bug to keep out: values 3..7 of an 8-group corrupted by a negative shift
    q = torch.zeros(8, dtype=torch.uint8)
    q[position] = value
    lane = int.from_bytes(bytes(pack3(q).tolist()), "little")
    assert lane == value << (3 * position)
    assert torch.equal(unpack3(pack3(q)), q)


def test_pack3_all_ones_and_alternating():
    for pattern in ([7] * 8, [0, 7] * 4, [5, 2] * 4, list(range(8))):
        q = torch.tensor(pattern * 3, dtype=torch.uint8)
        assert torch.equal(unpack3(pack3(q)), q)


def test_q4_0_byte_order():
    # byte j holds value j (low nibble) and value j + 16 (high nibble)
    q = torch.arange(32, dtype=torch.uint8) % 16
    packed = pack4_halves(q)
    assert packed[0] == (0 | (0 << 4)) and packed[1] == (1 | (1 << 4))
    q2 = torch.zeros(32, dtype=torch.uint8)
    q2[16] = 9
    assert pack4_halves(q2)[0] == 9 << 4


@pytest.mark.parametrize("bad", [7, 9, 33])
def test_packers_refuse_partial_groups(bad):
    with pytest.raises(ValueError):
        pack3(torch.zeros(bad, dtype=torch.uint8))
    with pytest.raises(ValueError):
        pack4_halves(torch.zeros(bad, dtype=torch.uint8))
