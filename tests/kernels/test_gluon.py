"""The Gluon kernel (kvcore.kernels.gluon_q4_0: q4_0, and q8_0's and nvfp4's forms). Gluon has no
interpreter, so CI compiles it for sm_90 with the triton wheel's compiler (bench/sass_count.py's
compile_gluon) and checks what the compiled kernel holds; its output is checked on a GPU against
LayerCache.decode_ref by bench/probes/gluon_q4_0.py and bench/decode.py's check. Here also:
where decode takes it, and which query its reference multiplies."""

from __future__ import annotations

import re

import pytest

from kvcore.kernels.cache import (
    GLUON_FEW_ROWS,
    GLUON_PER_SM,
    GLUON_PER_SM_16,
    GLUON_PER_SM_Q4,
    GLUON_PER_SM_Q8,
    GLUON_PER_SM_Q8_FEW,
    GLUON_PER_SM_SHORT,
    GLUON_PER_SM_TBQ3,
    GLUON_PER_SM_TBQ4,
    GLUON_SHORT_SPLIT,
    SMS,
    gluon_launch,
    tiled_splits,
)

from .sm90 import compiled_ptx
from .sm90 import usage_value as _usage

SCRIPT = '''
import json
import sass_count
out = {}
# what decode launches: q4_0 groups of up to 8 with the offsets and scales after the products,
# groups of 9-16 (16 columns) without; the 8-column form without, for comparison; q8_0's form
# the 8-column q4_0 form at 8 programs a multiprocessor takes PIPE, its registers capped;
# nvfp4's scaled forms, with PIPE in 8 columns
for name, fmt, group, after, per_sm in (("8", "q4_0", 4, True, 12), ("16", "q4_0", 16, False, 12),
                                        ("8-unpacked-scaled", "q4_0", 4, False, 12),
                                        ("8-q8_0", "q8_0", 4, True, 8),
                                        ("8-pipe", "q4_0", 4, True, 8),
                                        ("8-pairs", "q4_0", 4, True, 8),
                                        ("8-nvfp4", "nvfp4", 4, False, 12),
                                        ("16-nvfp4", "nvfp4", 16, False, 12),
                                        ("8-tbq4", "tbq4", 4, False, 8),
                                        ("8-tbq3", "tbq3", 4, False, 8),
                                        ("16-tbq3", "tbq3", 16, False, 8)):
    kernel, sass, usage = sass_count.compile_gluon(fmt, group, after, pdl=after, per_sm=per_sm,
                                                   rows=64 if "pairs" in name else 0)
    lines = [ln for ln in sass.splitlines() if sass_count.INSTRUCTION.match(ln)]
    first, last = sass_count._loop(sass, lines)
    out[name] = {"ptx": kernel.asm["ptx"], "usage": usage,
                 "loop": "\\n".join(lines[first:last + 1]),
                 "local_in_loops": sass_count.local_in_loops(sass)}
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def compiled() -> dict[str, dict[str, str]]:
    pytest.importorskip("triton.experimental.gluon")
    return compiled_ptx(SCRIPT)  # type: ignore[return-value]


def test_gluon_kernel_compiles_without_spills_or_byte_reads(compiled):
    # the key operand's layout conversion is asserted trivial when it compiles; compiled, the
    # kernel must keep its tiles in 16- and 8-byte shared-memory reads (no byte read: a
    # byte-by-byte operand conversion would show as ld.shared.u8), copy them with cp.async,
    # and not spill
    for name, c in compiled.items():
        ptx, usage = c["ptx"], c["usage"]
        qn = int(name.split("-")[0])
        if name == "8":
            # q4_0's 8-column form at 12 a multiprocessor without PIPE, which decode has not
            # launched since v62 (8 with PIPE): no stack under triton 3.6, one word under 3.9
            # (stored once, reloaded once a tile)
            assert _usage(usage, "LOCAL") == 0 and _usage(usage, "STACK") <= 8, (name, usage)
        else:
            assert _usage(usage, "LOCAL") == 0 and _usage(usage, "STACK") == 0, (name, usage)
            assert c["local_in_loops"] == 0, name
        if "nvfp4" in name or "tbq4" in name:
            if "nvfp4" in name:
                # only its e4m3 scales by byte (V's, a byte a token a block) or by pair (K's
                # two blocks of a span), converted two at a time
                assert "ld.shared.u8" not in ptx and ptx.count("ld.shared.b8") <= 16, name
                assert "cvt.rn.f16x2.e4m3x2" in ptx, name
            else:  # tbq4: its norms copied in pairs, read as float16; its byte tables loaded
                # once, not set in each lookup's text
                assert "ld.shared.u8" not in ptx and "ld.shared.b8" not in ptx, name
                assert "mov.b32 a0" not in ptx, name
            # their codes as q4_0's scaled form's
            assert ptx.count("ld.shared.v4") >= 1 and ptx.count("ld.shared.v2") >= 2, name
            # 16 products a side for 8 columns, 32 for 16; the 8-column form with PIPE has
            # them twice (the first tile's scores before its loop, the last tile's values
            # after it)
            assert ptx.count("mma.sync.aligned.m16n8k16") == 64, name
            continue
        if "tbq3" in name:
            # its codes copied a word at a time; read as 16 bytes a key token (a group's
            # w0 w1 w1 w2) and 8 bytes a value token (a window's two words), no byte read; its
            # centroids looked up by prmt from tables loaded once, not rebuilt in the loop
            assert "ld.shared.u8" not in ptx and "ld.shared.b8" not in ptx, name
            assert "cp.async.ca.shared.global" in ptx, name
            assert ptx.count("ld.shared.v4") >= 1 and ptx.count("ld.shared.v2") >= 1, name
            assert "mov.b32 a0" not in ptx and ptx.count("shf.r.clamp.b32") >= 4, name
            assert ptx.count("mma.sync.aligned.m16n8k16") == 64, name
            continue
        assert "ld.shared.u8" not in ptx and "ld.shared.b8" not in ptx, name
        assert "cp.async.ca.shared.global" in ptx or "cp.async.cg.shared.global" in ptx, name
        products = ptx.count("mma.sync.aligned.m16n8k16")
        if name in ("8", "8-q8_0", "8-pipe", "8-pairs"):
            # the words of K by matrix loads, V's transposed (a token pair a register); the
            # codes unpacked by one lop3 (q4_0) or prmt (q8_0) a pair, with no float16
            # subtraction or scaling
            assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx, name
            assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx, name
            assert "sub.rn.f16x2" not in ptx and "mul.rn.f16x2" not in ptx, name
            # launched as a programmatic dependent, as decode launches it on a Hopper GPU
            assert ptx.index("griddepcontrol.wait") < ptx.index("griddepcontrol.launch_dep"), name
            # 16 key products (a block's two 16-column steps, two 16-token halves), 16 value
            # products and 16 more for the offsets; the PIPE forms (q8_0's, q4_0's at 8 a
            # multiprocessor) have them twice, the first tile's scores before its loop and the
            # last tile's values after it; the PAIRS form three times, two tiles in its loop
            # and one in the loop after it
            assert products == {"8": 48, "8-pairs": 144}.get(name, 96), name
        else:
            assert ptx.count("ld.shared.v4") >= 1 and ptx.count("ld.shared.v2") >= 2, name
            # 32 tokens × 128 lanes × QN rows: 16 products of 16×8×16 a side for 8 rows,
            # twice as many for 16
            assert products == 32 * qn // 8, name
    # the 8-row programs fit the 12 (q4_0) and 8 (q8_0) a multiprocessor whose whole waves
    # decode's splits fill
    assert _usage(compiled["8"]["usage"], "REG") <= 65536 // (32 * GLUON_PER_SM)
    assert _usage(compiled["8-q8_0"]["usage"], "REG") <= 65536 // (32 * GLUON_PER_SM_Q8)
    assert _usage(compiled["8-pipe"]["usage"], "REG") <= 65536 // (32 * GLUON_PER_SM_SHORT)
    assert _usage(compiled["8-pairs"]["usage"], "REG") <= 65536 // (32 * GLUON_PER_SM_SHORT)
    # tbq4's and tbq3's fit the 8 they run (two a scheduler), capped
    assert _usage(compiled["8-tbq4"]["usage"], "REG") <= 65536 // (32 * GLUON_PER_SM_TBQ4)
    assert _usage(compiled["8-tbq3"]["usage"], "REG") <= 65536 // (32 * GLUON_PER_SM_TBQ3)
    # nvfp4's PIPE form fits the 12, capped (under triton 3.9's ptxas it would take 190)
    assert _usage(compiled["8-nvfp4"]["usage"], "REG") <= 65536 // (32 * GLUON_PER_SM)
    # the PIPE form needs more than the 12's 168 registers: at 12 it had spilled
    assert _usage(compiled["8-pipe"]["usage"], "REG") > 65536 // (32 * GLUON_PER_SM)


def test_gluon_tiles_addressed_without_division(compiled):
    # each tile's page comes from a cursor moved a tile at a time (no division by the runtime
    # page size in any loop: an integer division compiles to IABS and friends), and a lane's
    # four copies of a plane's codes in the offsets-after forms share one 64-bit address, the
    # rows' distances immediates (K's and V's, 3 each)
    for name, c in compiled.items():
        loop = c["loop"]
        assert "IABS" not in loop and "I2F" not in loop, name
        if name in ("8", "8-q8_0", "8-pipe", "8-pairs"):
            assert len(re.findall(r"LDGSTS[^\n]*\.64\+0x[246]00\]", loop)) >= 6, name


@pytest.mark.parametrize(("kwargs", "expect"), [
    # q4_0: 8 a multiprocessor (two a scheduler, with PIPE) at every length since v62
    ({}, GLUON_PER_SM_Q4),  # B=8 32k: a wave of 8 makes 2,048-token splits
    ({"rows": 8, "max_len": 131072}, GLUON_PER_SM_Q4),  # B=1 128k, 993 tokens
    ({"rows": 8, "max_len": 65536}, GLUON_PER_SM_Q4),
    ({"rows": 16, "max_len": 32768}, GLUON_PER_SM_Q4),
    ({"rows": 32, "max_len": 32768}, GLUON_PER_SM_Q4),  # B=4 32k
    ({"rows": 8, "max_len": 262144}, GLUON_PER_SM_Q4),  # B=1 256k, 1,986 tokens
    ({"rows": 16, "max_len": 131072}, GLUON_PER_SM_Q4),  # B=2 128k
    ({"rows": 8, "max_len": 1 << 20}, GLUON_PER_SM_Q4),
    ({"rows": 512, "max_len": 32768}, GLUON_PER_SM_Q4),  # B=64 32k
    # batch 1 at 32k and below: faster than the split kernel too (gluon-short-h200.json)
    ({"rows": 8, "max_len": 32768}, GLUON_PER_SM_Q4),
    ({"rows": 8, "max_len": 4096}, GLUON_PER_SM_Q4),
    ({"rows": 64, "max_len": 4096}, GLUON_PER_SM_Q4),  # B=8 4k
    ({"device_type": "cpu"}, None),
    ({"capability": (7, 5)}, None),
    ({"group": 32}, None),
    ({"page_size": 16}, None),
    ({"k_fmt": "tbq4"}, None),
    ({"v_fmt": "q8_0"}, None),
    # q8_0's form: one program a scheduler over at most 64 rows, 8 a multiprocessor past them
    ({"k_fmt": "q8_0", "v_fmt": "q8_0"}, GLUON_PER_SM_Q8_FEW),  # B=8: 64 rows
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 8, "max_len": 131072}, GLUON_PER_SM_Q8_FEW),
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 8, "max_len": 1 << 20}, GLUON_PER_SM_Q8_FEW),
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 32, "max_len": 131072}, GLUON_PER_SM_Q8_FEW),
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 65}, GLUON_PER_SM_Q8),
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 128, "max_len": 131072}, GLUON_PER_SM_Q8),
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 512}, GLUON_PER_SM_Q8),  # B=64
    # at every count (gluon-short-h200.json from B=1 16k, short-q8_0-h200.json below it)
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 8, "max_len": 32768}, GLUON_PER_SM_Q8_FEW),
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 8, "max_len": 16384}, GLUON_PER_SM_Q8_FEW),
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 8, "max_len": 8192}, GLUON_PER_SM_Q8_FEW),
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 8, "max_len": 2048}, GLUON_PER_SM_Q8_FEW),
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 16, "max_len": 4096}, GLUON_PER_SM_Q8_FEW),
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "rows": 8, "max_len": 8192, "faster_only": False},
     GLUON_PER_SM_Q8_FEW),
    ({"k_fmt": "q8_0", "v_fmt": "q8_0", "group": 16, "faster_only": False}, None),
    ({"k_fmt": "q8_0", "v_fmt": "q4_0"}, None),
    ({"head_dim": 96}, None),
    ({"head_dim_v": 64}, None),
    # nvfp4: q4_0's counts, from less work (its split kernel is slower than q4_0's)
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4"}, GLUON_PER_SM),  # B=8 32k
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 8, "max_len": 131072}, GLUON_PER_SM_SHORT),
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 8, "max_len": 1 << 20}, GLUON_PER_SM),
    # B=1 16k–32k: 4 a multiprocessor (v72, short-programs-nvfp4-h200.json)
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 8, "max_len": 32768}, 4),
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 8, "max_len": 16384}, 4),
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 8, "max_len": 65536}, GLUON_PER_SM_SHORT),
    # B=2 up to 16k at 4 as well (v74, few-fp4-rows-h200.json); B=2 32k and B=4 at 8
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 16, "max_len": 16384}, 4),
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 16, "max_len": 32768}, GLUON_PER_SM_SHORT),
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 16, "max_len": 8192}, 4),
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 32, "max_len": 8192}, GLUON_PER_SM_SHORT),
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 16, "max_len": 65536}, GLUON_PER_SM_SHORT),
    # B=1 8k at 4 too (v73, short-nvfp4-h200.json); B=1 4k the split kernel, B=2 4k at 4 (v74)
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 8, "max_len": 8192}, 4),
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 8, "max_len": 4096}, None),
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 16, "max_len": 4096}, 4),
    ({"k_fmt": "nvfp4", "v_fmt": "nvfp4", "rows": 8, "max_len": 4096, "faster_only": False},
     4),
    ({"k_fmt": "nvfp4", "v_fmt": "q4_0"}, None),
    ({"k_fmt": "q4_0", "v_fmt": "nvfp4"}, None),
    # tbq4: 8 a multiprocessor past q4_0's least work (B=1 32k: the split kernel)
    ({"k_fmt": "tbq4", "v_fmt": "tbq4"}, GLUON_PER_SM_TBQ4),
    ({"k_fmt": "tbq4", "v_fmt": "tbq4", "rows": 8, "max_len": 131072}, GLUON_PER_SM_TBQ4),
    ({"k_fmt": "tbq4", "v_fmt": "tbq4", "rows": 512, "max_len": 1 << 20}, GLUON_PER_SM_TBQ4),
    ({"k_fmt": "tbq4", "v_fmt": "tbq4", "rows": 8, "max_len": 32768}, None),
    ({"k_fmt": "tbq4", "v_fmt": "tbq3"}, None),
    # tbq3: 8 a multiprocessor past 8 rows × 16,384 tokens; over at most 32 rows from 8 ×
    # 8,192, at 4 up to 8 × 32,768 (v73, short-tbq3-h200.json, few-tbq3-h200.json)
    ({"k_fmt": "tbq3", "v_fmt": "tbq3"}, GLUON_PER_SM_TBQ3),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "rows": 8, "max_len": 32768}, 4),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "rows": 16, "max_len": 16384}, 4),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "rows": 32, "max_len": 8192}, 4),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "rows": 8, "max_len": 16384}, 4),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "rows": 16, "max_len": 8192}, 4),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "rows": 8, "max_len": 65536}, GLUON_PER_SM_TBQ3),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "rows": 16, "max_len": 32768}, GLUON_PER_SM_TBQ3),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "rows": 8, "max_len": 8192}, None),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "rows": 64, "max_len": 2048}, None),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "rows": 64, "max_len": 4096}, GLUON_PER_SM_TBQ3),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "rows": 8, "max_len": 8192, "faster_only": False}, 4),
    ({"k_fmt": "tbq3", "v_fmt": "tbq4"}, None),
    ({"k_fmt": "tbq3", "v_fmt": "tbq3", "head_dim": 96}, None),
    # groups of 9-16: the 16-column forms, 8 a multiprocessor past each format's least work
    ({"group": 16, "rows": 16, "max_len": 32768}, None),  # q4_0: the split kernel at 16 × 32k
    ({"group": 16, "rows": 32, "max_len": 32768}, GLUON_PER_SM_16),
    ({"group": 12, "rows": 64, "max_len": 131072}, GLUON_PER_SM_16),
    ({"group": 16, "rows": 16, "max_len": 32768, "k_fmt": "nvfp4", "v_fmt": "nvfp4"},
     GLUON_PER_SM_16),
    ({"group": 16, "rows": 8, "max_len": 32768, "k_fmt": "nvfp4", "v_fmt": "nvfp4"}, None),
    ({"group": 16, "rows": 16, "max_len": 32768, "k_fmt": "tbq4", "v_fmt": "tbq4"}, None),
    ({"group": 16, "rows": 32, "max_len": 32768, "k_fmt": "tbq4", "v_fmt": "tbq4"},
     GLUON_PER_SM_16),
    ({"group": 16, "rows": 16, "max_len": 32768, "k_fmt": "tbq3", "v_fmt": "tbq3"},
     GLUON_PER_SM_16),
    ({"group": 16, "rows": 4, "max_len": 65536, "k_fmt": "tbq3", "v_fmt": "tbq3"}, None),
    ({"group": 16, "rows": 4, "max_len": 8192, "faster_only": False}, GLUON_PER_SM_16),
    ({"group": 17, "rows": 512, "max_len": 131072}, None),
])
def test_gluon_launch_only_where_it_applies_and_was_faster(kwargs, expect):
    base = dict(k_fmt="q4_0", v_fmt="q4_0", head_dim=128, head_dim_v=128, group=4,
                page_size=32, rows=64, max_len=32768, device_type="cuda", capability=(9, 0))
    assert gluon_launch(**{**base, **kwargs}) == expect


@pytest.mark.parametrize("rows", [8, 16, 24, 32, 64, 65, 100, 512])
@pytest.mark.parametrize("max_len", [40000, 65536, 131072, 139264, 262144, 1 << 20])
def test_gluon_takes_fewer_programs_only_over_few_rows_or_short_splits(rows, max_len):
    # nvfp4: splits of a wave of 8 a multiprocessor, in whole 32-token tiles, stated here again
    want = max(1, 8 * SMS // rows)
    split8 = max(32, -(-max_len // (want * 32)) * 32)
    per_sm = gluon_launch("nvfp4", "nvfp4", 128, 128, 4, 32, rows, max_len, "cuda",
                          faster_only=False)
    assert per_sm == (GLUON_PER_SM_SHORT if split8 <= GLUON_SHORT_SPLIT else GLUON_PER_SM)
    # q4_0: 8 at every length (v62)
    assert gluon_launch("q4_0", "q4_0", 128, 128, 4, 32, rows, max_len, "cuda",
                        faster_only=False) == GLUON_PER_SM_Q4 == GLUON_PER_SM_SHORT
    # fewer programs make longer splits than the 12's, never shorter ones
    split12 = max(32, -(-max_len // (max(1, 12 * SMS // rows) * 32)) * 32)
    assert tiled_splits(max_len, max(1, per_sm * SMS // rows))[0] >= split12
    # q8_0: by rows alone
    per_sm = gluon_launch("q8_0", "q8_0", 128, 128, 4, 32, rows, max_len, "cuda",
                          faster_only=False)
    assert per_sm == (GLUON_PER_SM_Q8_FEW if rows <= GLUON_FEW_ROWS else GLUON_PER_SM_Q8)
    # every count a multiple of a multiprocessor's four schedulers: none holds a warp more
    assert per_sm % 4 == 0


@pytest.mark.parametrize("fmt", ["q4_0", "q8_0", "nvfp4", "tbq4", "tbq3"])
@pytest.mark.parametrize("rows", [8, 16, 32, 64, 96, 128, 256, 384, 512, 1600])
@pytest.mark.parametrize("max_len", [65536, 131072, 1 << 20])
def test_gluon_splits_fill_one_whole_wave(fmt, rows, max_len):
    pytest.importorskip("triton.experimental.gluon")
    from kvcore.kernels.gluon_q4_0 import splits_for

    per_sm = gluon_launch(fmt, fmt, 128, 128, 4, 32, rows, max_len, "cuda")
    split, n = splits_for(rows, max_len, per_sm)
    assert split % 32 == 0 and n == -(-max_len // split)
    # one wave of the programs that reside at once, none left over for a second (the 17 splits
    # at B=16 that had made 1.37 waves of q4_0's 12 a multiprocessor); and the shortest whole
    # tiles that do so: a tile less a split would spill past the wave
    most = max(1, per_sm * SMS // rows)
    assert n <= most
    assert split == 32 or -(-max_len // (split - 32)) > most
    if (fmt, rows, max_len) == ("nvfp4", 128, 131072):
        assert (per_sm, n) == (12, 12)
    if (fmt, rows, max_len) == ("q4_0", 128, 131072):  # B=16 128k: 8 splits since v62
        assert (per_sm, n) == (8, 8)
    if (fmt, rows, max_len) == ("q8_0", 128, 131072):
        assert (per_sm, n) == (8, 8)
    if (fmt, rows, max_len) == ("q8_0", 8, 131072):  # B=1 128k: 66 splits of 2,016 tokens
        assert (per_sm, split, n) == (4, 2016, 66)
    if (fmt, rows, max_len) == ("q4_0", 8, 131072):  # B=1 128k: 128 splits of 1,024 tokens
        assert (per_sm, split, n) == (8, 1024, 128)


def test_decode_refuses_gluon_where_it_cannot_run():
    torch = pytest.importorskip("torch")
    from kvcore.kernels.cache import LayerCache

    cache = LayerCache("q4_0", "q4_0", 2, 32, 2, 128)
    q = torch.randn(1, 8, 128, dtype=torch.float16)
    table = torch.zeros(1, 2, dtype=torch.int32)
    seq = torch.tensor([40], dtype=torch.int32)
    with pytest.raises(ValueError, match="gluon: K and V in q4_0"):
        cache.decode(q, table, seq, gluon=True)  # on the CPU
    other = LayerCache("tbq4", "tbq4", 2, 32, 2, 128)
    with pytest.raises(ValueError, match="got tbq4/tbq4"):
        other.decode(q, table, seq, gluon=True)


def test_gluon_available_follows_the_installed_triton(monkeypatch):
    # the wheel CI installs has the dialect; a triton without it (kvplan[gpu] allows 3.2)
    # makes decode keep its split kernel instead of failing on the import
    import sys

    from kvcore.kernels.cache import gluon_available

    pytest.importorskip("triton.experimental.gluon")
    assert gluon_available()
    monkeypatch.setitem(sys.modules, "kvcore.kernels.gluon_q4_0", None)
    assert not gluon_available()


def test_decode_ref_query_follows_the_path_decode_takes(monkeypatch):
    # q8_0's split kernel multiplies an int8 query, the Gluon form the float16 one: the
    # reference's default quantizes the query only where decode's default would
    torch = pytest.importorskip("torch")
    from kvcore.kernels.cache import LayerCache

    torch.manual_seed(0)
    cache = LayerCache("q8_0", "q8_0", 2, 32, 2, 128)
    k, v = (torch.randn(40, 2, 128, dtype=torch.float16) for _ in range(2))
    t = torch.arange(40)
    cache.append(k, v, t // 32, t % 32)
    table = torch.tensor([[0, 1]], dtype=torch.int32)
    seq = torch.tensor([40], dtype=torch.int32)
    q = torch.randn(1, 8, 128, dtype=torch.float16)
    as_int8 = cache.decode_ref(q, table, seq, int_query=True)
    as_f16 = cache.decode_ref(q, table, seq, int_query=False)
    assert (as_int8 - as_f16).abs().max() > 1e-5  # the two references differ
    assert not cache.takes_gluon(q, seq)  # on the CPU: the split kernel
    assert torch.equal(cache.decode_ref(q, table, seq), as_int8)
    monkeypatch.setattr(LayerCache, "_gluon_launch", lambda self, *a: 8)
    assert cache.takes_gluon(q, seq)
    assert torch.equal(cache.decode_ref(q, table, seq), as_f16)


def _launch_recorded(monkeypatch, fmt: str, batch: int, tokens: int, group: int, per_sm: int):
    """decode_gluon over a CPU cache in ``fmt`` (``batch`` sequences of ``tokens``, 8 KV heads,
    ``group`` query heads each) at ``per_sm`` programs a multiprocessor, the kernel stood in
    for: (its launch's keyword arguments, its positional ones, the cache, the query)."""
    pytest.importorskip("triton.experimental.gluon")
    torch = pytest.importorskip("torch")
    from kvcore.kernels import gluon_q4_0
    from kvcore.kernels.cache import LayerCache

    launched: dict = {}
    launched_args: list = []

    class Recorder:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                launched.update(kwargs)
                launched_args.extend(args)
            return launch

    monkeypatch.setattr(gluon_q4_0, "q4_0_swapped_kernel", Recorder())
    cache = LayerCache(fmt, fmt, batch, tokens, 8, 128)
    q = torch.randn(batch, 8 * group, 128, generator=torch.Generator().manual_seed(0)).half()
    table = torch.arange(batch, dtype=torch.int32).reshape(batch, 1)
    seq = torch.full((batch,), tokens, dtype=torch.int32)
    scratch = torch.empty(1 << 24)
    gluon_q4_0.decode_gluon(cache, q, table, seq, None, tokens, per_sm, scratch, scratch,
                            merge=False)
    return launched, launched_args, cache, q


@pytest.mark.parametrize(("fmt", "batch", "per_sm", "pairs"), [
    ("q4_0", 8, 8, True), ("q4_0", 64, 8, True), ("q4_0", 4, 8, False), ("q4_0", 8, 12, False),
    ("q8_0", 8, 8, False), ("nvfp4", 8, 8, False)])
def test_decode_takes_pairs_for_q4_0_over_many_rows(monkeypatch, fmt, batch, per_sm, pairs):
    # q4_0 over at least Q4_PAIRS_ROWS (sequence, KV head) rows: two tiles a step in four
    # stages in PIPE's place, with PIPE's register cap and its sums by place
    from kvcore.kernels import gluon_q4_0

    launched, _, _, _ = _launch_recorded(monkeypatch, fmt, batch, 256, 4, per_sm)
    assert (batch * 8 >= gluon_q4_0.Q4_PAIRS_ROWS) is (batch >= 8)
    assert launched["PAIRS"] is pairs
    if pairs:
        assert launched["PIPE"] is False and launched["STAGES"] == 4
        assert launched["SUM_LANES"] is True
        assert launched["maxnreg"] == gluon_q4_0.Q4_PIPE_REGISTERS
    else:
        assert launched["STAGES"] == 3


@pytest.mark.parametrize(("fmt", "group", "per_sm", "pipe"), [
    ("q4_0", 4, 8, True), ("q4_0", 4, 12, False), ("q4_0", 16, 8, False),
    ("q8_0", 4, 4, True), ("q8_0", 8, 8, True),
    ("nvfp4", 4, 8, True), ("nvfp4", 4, 12, True), ("nvfp4", 16, 12, False),
    ("tbq4", 4, 8, True), ("tbq4", 16, 8, False), ("tbq3", 4, 8, True), ("tbq3", 16, 8, False)])
def test_decode_launches_pipe_for_q4_0_only_at_8_programs_with_its_registers_capped(
        monkeypatch, fmt, group, per_sm, pipe):
    torch = pytest.importorskip("torch")
    from kvcore.kernels import gluon_q4_0

    launched, launched_args, cache, q = _launch_recorded(monkeypatch, fmt, 1, 4096, group,
                                                         per_sm)
    assert launched["PIPE"] is pipe
    fp4 = fmt == "nvfp4"
    capped = pipe and fmt == "q4_0"
    assert launched.get("maxnreg") == (gluon_q4_0.Q4_PIPE_REGISTERS if capped else
                                       gluon_q4_0.FP4_REGISTERS if fp4 and group <= 8 else
                                       gluon_q4_0.TBQ4_REGISTERS if fmt == "tbq4" and group <= 8
                                       else gluon_q4_0.TBQ3_REGISTERS if fmt == "tbq3"
                                       and group <= 8 else None)
    # tbq4: its scaled forms unscaled, fed the rotated query (float32, each row's length kept)
    # one compile-time format code for K and V
    assert launched["FMT"] == fmt
    if fmt in ("tbq4", "tbq3"):
        qr = launched_args[0]
        assert qr.dtype == torch.float32 and qr.shape == q.shape
        assert torch.allclose(qr.norm(dim=-1), q.float().norm(dim=-1), rtol=1e-3, atol=1e-3)
        assert not torch.allclose(qr, q.float(), atol=1e-2)
        # tbq4's in the rotation's order, tbq3's in its key operand's column order
        from kvcore.kernels import ref

        rotated = q.float() @ ref.rotation("cpu").T
        order = gluon_q4_0.tbq3_query_order() if fmt == "tbq3" else list(range(128))
        assert torch.allclose(qr, rotated[..., order], atol=1e-3)
    if fmt in ("tbq3", "tbq4"):  # the centroids' byte tables, as int32
        from kvcore.kernels.triton_ops import tbq4_tables

        tables = gluon_q4_0.tbq3_tables() if fmt == "tbq3" else tbq4_tables()
        assert [w & 0xFFFFFFFF for w in launched_args[9].tolist()] == list(tables)
    # nvfp4: its scaled forms, its global scales passed (K's, then V's)
    assert not any(k in launched for k in ("Q8", "FP4", "TBQ4", "TBQ3"))
    assert launched["K_AFTER"] is launched["V_AFTER"] is (fmt in ("q4_0", "q8_0") and group <= 8)
    # only q4_0's PIPE form keeps its running sums by place
    assert launched["SUM_LANES"] is (fmt == "q4_0" and launched["PIPE"])
    if fp4:
        assert launched_args[7] is cache.k.global_scale
        assert launched_args[8] is cache.v.global_scale
    # programs a multiprocessor not given: q4_0 as at the most, without PIPE
    assert gluon_q4_0.launch_consts(fmt, group)["PIPE"] is (
        fmt == "q8_0" or (fmt in ("nvfp4", "tbq4", "tbq3") and group <= 8))
