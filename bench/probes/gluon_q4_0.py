"""A probe: q4_0 decode attention (K and V in q4_0, 128-wide heads, groups of at most 16 query
heads) by a split kernel that states its layouts (Triton's Gluon dialect), so that the packed
bytes are loaded straight into the registers the tensor cores read, with no pass through
shared memory and no byte moved between lanes.

- Keys: a lane loads one 16-byte q4_0 block of a token (one 128-bit load) and unpacks it with
  PTX into the second operand of the score product. The operand's columns are head dimensions
  in the order the block's nibbles fall into the lanes' registers; the query's columns are
  gathered in the same order, so the product is unchanged.
- Values: a lane loads 8 bytes of each of its tokens; the PTX pairs the nibbles of two tokens
  at the same head dimension in one register, as the weight-times-value product wants them.
  Its output columns are head dimensions in that order, and are stored in order.
- The softmax runs on the score product's accumulator layout, which is the weight operand's:
  no conversion.
- A tile is 32 tokens of one page (pages of a multiple of 32 tokens); one warp a program; the
  splits are merged by decode's reduce_splits.
- Variants: ``sync`` loads each tile at the top of its iteration; ``async3``/``async4`` copy
  tiles into shared memory 2 or 3 ahead (cp.async); ``swapped3`` swaps the products as well:
  that one is kvcore.kernels.gluon_q4_0.q4_0_swapped_kernel, which decode runs for q4_0
  (LayerCache.decode's ``gluon``). The probe's baseline is decode with ``gluon=False``.

    python bench/probes/gluon_q4_0.py [--shapes 1x131072,8x131072,1x32768,8x32768]
        [--per-sm 8,12,16] [--regs 0,168] [--out DIR]

First a check against LayerCache.decode_ref on small paged caches (pages of 32 and 64, a
shuffled block table, lengths that end mid-tile, groups of 4, 8 and 16). Then per shape:
decode's default (q4_0) and this kernel under each programs-a-multiprocessor count and
register cap, timed as bench/decode.py times (CUDA graph over cache copies), against torch's
fp16 SDPA. Writes gluon-q4_0.json. Needs a GPU (Gluon has no interpreter).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
from functools import partial
from pathlib import Path

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE)]

from kvcore.kernels.gluon_q4_0 import (  # noqa: E402 (after the path)
    BARRIER,
    K_ASM,
    KB,
    MMA,
    OPA,
    OPB,
    SH2,
    SH3,
    V_ASM,
    VB,
    _issue,
    _v_scales,
    q4_0_swapped_kernel,
)
from kvcore.kernels.triton_ops import Q4_0_ASM  # noqa: E402


@gluon.jit
def _k_operand(x):
    """A K half [32 tokens, 64 (byte p = 16 blk + r)] → the B operand [64 (k), 32] with
    k = r0 + 2 blk0 + 4 blk1 + 8 r1 + 16 r2 + 32 r3: the same registers, relabelled."""
    x = gl.reshape(x, [32, 2, 2, 2, 2, 2, 2])  # tok, blk1, blk0, r3, r2, r1, r0 (from [32, 4, 16])
    x = gl.permute(x, [3, 4, 5, 1, 2, 6, 0])
    x = gl.reshape(x, [64, 32])
    return gl.convert_layout(x, OPB, assert_trivial=True)


@gluon.jit
def _v_operand(x):
    """A V output [16 pairs, 64 (byte c = 4 q + i)] of V_ASM → the B operand [32 tokens, 32]
    with token = 2 pair + i0, column 16 q' + 8 i1 + g where c = 8 g + 4 q' + i (q' the bit 2 of
    c) ... (see the mapping)."""
    # c = 8 g + 4 q + 2 i1 + i0 ; pair = 8 p3 + 4 p2 + 2 p1 + p0
    x = gl.reshape(x, [2, 2, 2, 2, 8, 2, 2, 2])  # p3 p2 p1 p0 g q i1 i0 (from [16, 8, 8])
    x = gl.permute(x, [0, 1, 2, 3, 7, 5, 6, 4])  # token = (p, i0); column (q, i1, g)
    x = gl.reshape(x, [32, 32])
    return gl.convert_layout(x, OPB)


@gluon.jit
def _tile(K0, K1, V0, V1, BT, bt0, h, n0, end, PAGE, H_KV: gl.constexpr, koff, ksoff, voff,
          vsoff, ktok, vpair):
    """The loads of the tile of tokens n0 … n0 + 32 (a tile past the end loads nothing): K's
    bytes and block scales (broadcast over the bytes), V's even and odd tokens' likewise."""
    left = end - n0
    page = gl.load(BT + bt0 + n0 // PAGE, mask=left > 0, other=0).to(gl.int64)
    first = (page * H_KV + h) * PAGE + n0 % PAGE
    tm = ktok < left
    kb = gl.load(K0 + first * 64 + koff, mask=tm[:, None, None], other=0)
    ks = gl.load(K1 + first * 4 + ksoff, mask=tm[:, None], other=0.0)
    ks = gl.broadcast(gl.expand_dims(ks, 2), kb)[0]
    me = (2 * vpair < left)[:, None]
    mo = (2 * vpair + 1 < left)[:, None]
    va = gl.load(V0 + first * 64 + voff, mask=me[:, :, None], other=0)
    vb = gl.load(V0 + first * 64 + 64 + voff, mask=mo[:, :, None], other=0)
    sa = gl.load(V1 + first * 4 + vsoff, mask=me, other=0.0)
    sb = gl.load(V1 + first * 4 + 4 + vsoff, mask=mo, other=0.0)
    sa = gl.broadcast(gl.expand_dims(sa, 2), va)[0]
    sb = gl.broadcast(gl.expand_dims(sb, 2), va)[0]
    return kb, ks, va, vb, sa, sb



@gluon.jit
def q4_0_split_kernel(Q, ACC, ML, K0, K1, V0, V1, BLOCK_TABLE, SEQ_LENS, stride_bt, n_splits,
                      qk_scale, PAGE, SPLIT, H_KV: gl.constexpr, GROUP: gl.constexpr,
                      D: gl.constexpr, PREFETCH: gl.constexpr = False):
    BN: gl.constexpr = 32
    b = gl.program_id(0)
    h = gl.program_id(1)
    sp = gl.program_id(2)
    seq_len = gl.load(SEQ_LENS + b)
    start = sp * SPLIT
    end = gl.minimum(start + SPLIT, seq_len)
    # the query, as two A operands [16, 64]: column k of the low half is head dimension
    # 32 blk + r (k = r0 + 2 blk0 + 4 blk1 + 8 r1 + 16 r2 + 32 r3), the high half 16 more
    QL: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [1, 1], [1, 0])
    qi = gl.arange(0, 16, layout=gl.SliceLayout(1, QL))
    kk = gl.arange(0, 64, layout=gl.SliceLayout(0, QL))
    dlo = 32 * ((kk >> 1) & 3) + (kk & 1) + 2 * (kk >> 3)
    qrow = (b * H_KV + h) * GROUP + qi
    qm = (qi < GROUP)[:, None]
    qlo = gl.load(Q + qrow[:, None] * D + dlo[None, :], mask=qm, other=0.0).to(gl.float32)
    qhi = gl.load(Q + qrow[:, None] * D + dlo[None, :] + 16, mask=qm, other=0.0).to(gl.float32)
    qa = gl.convert_layout((qlo * qk_scale).to(gl.float16), OPA)
    qb = gl.convert_layout((qhi * qk_scale).to(gl.float16), OPA)

    m_i = gl.full([16], float("-inf"), gl.float32, layout=gl.SliceLayout(1, MMA))
    l_i = gl.zeros([16], gl.float32, layout=gl.SliceLayout(1, MMA))
    acc0 = gl.zeros([16, 32], gl.float32, layout=MMA)
    acc1 = gl.zeros([16, 32], gl.float32, layout=MMA)
    acc2 = gl.zeros([16, 32], gl.float32, layout=MMA)
    acc3 = gl.zeros([16, 32], gl.float32, layout=MMA)
    KS: gl.constexpr = gl.SliceLayout(2, KB)
    ktok = gl.arange(0, BN, layout=gl.SliceLayout(1, KS))
    kblk = gl.arange(0, 4, layout=gl.SliceLayout(0, KS))
    KC: gl.constexpr = gl.SliceLayout(0, KB)
    kcol = (gl.arange(0, 4, layout=gl.SliceLayout(1, KC))[:, None] * 16
            + gl.arange(0, 16, layout=gl.SliceLayout(0, KC))[None, :])
    VS: gl.constexpr = gl.SliceLayout(2, VB)
    vpair = gl.arange(0, 16, layout=gl.SliceLayout(1, VS))
    vg = gl.arange(0, 8, layout=gl.SliceLayout(0, VS))
    VC: gl.constexpr = gl.SliceLayout(0, VB)
    vcol = (gl.arange(0, 8, layout=gl.SliceLayout(1, VC))[:, None] * 8
            + gl.arange(0, 8, layout=gl.SliceLayout(0, VC))[None, :])
    stok = gl.arange(0, BN, layout=gl.SliceLayout(0, MMA))
    koff = ktok[:, None, None] * 64 + kcol[None, :, :]
    ksoff = ktok[:, None] * 4 + kblk[None, :]
    voff = 2 * vpair[:, None, None] * 64 + vcol[None, :, :]
    vsoff = 2 * vpair[:, None] * 4 + (vg >> 1)[None, :]
    if PREFETCH:
        nxt = _tile(K0, K1, V0, V1, BLOCK_TABLE, b * stride_bt, h, start, end, PAGE, H_KV,
                    koff, ksoff, voff, vsoff, ktok, vpair)
    for n0 in range(start, end, BN):
        if PREFETCH:
            kb, ks, va, vb, sa, sb = nxt
            nxt = _tile(K0, K1, V0, V1, BLOCK_TABLE, b * stride_bt, h, n0 + BN, end, PAGE,
                        H_KV, koff, ksoff, voff, vsoff, ktok, vpair)
        else:
            kb, ks, va, vb, sa, sb = _tile(K0, K1, V0, V1, BLOCK_TABLE, b * stride_bt, h, n0,
                                           end, PAGE, H_KV, koff, ksoff, voff, vsoff, ktok,
                                           vpair)
        left = end - n0
        klo, khi = gl.inline_asm_elementwise(Q4_0_ASM, "=r,=r,=r,=r,r,r,r", [kb, ks],
                                             dtype=(gl.float16, gl.float16), is_pure=True,
                                             pack=4)
        s = gl.zeros([16, BN], gl.float32, layout=MMA)
        s = gl.nvidia.ampere.mma_v2(qa, _k_operand(klo), s)
        s = gl.nvidia.ampere.mma_v2(qb, _k_operand(khi), s)
        s = gl.where((stok < left)[None, :], s, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, axis=1))
        alpha = gl.exp2(m_i - m_new)
        p = gl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + gl.sum(p, axis=1)
        m_i = m_new
        acc0 = acc0 * alpha[:, None]
        acc1 = acc1 * alpha[:, None]
        acc2 = acc2 * alpha[:, None]
        acc3 = acc3 * alpha[:, None]
        pa = gl.convert_layout(p.to(gl.float16), OPA, assert_trivial=True)
        o0, o1, o2, o3 = gl.inline_asm_elementwise(
            V_ASM, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r", [va, vb, sa, sb],
            dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=4)
        acc0 = gl.nvidia.ampere.mma_v2(pa, _v_operand(o0), acc0)
        acc1 = gl.nvidia.ampere.mma_v2(pa, _v_operand(o1), acc1)
        acc2 = gl.nvidia.ampere.mma_v2(pa, _v_operand(o2), acc2)
        acc3 = gl.nvidia.ampere.mma_v2(pa, _v_operand(o3), acc3)
    # store: acc_j column (q, i1, g) = 16 q + 8 i1 + g is head dimension
    # 32 (g >> 1) + 8 (g & 1) + 4 q + i1 + (2, 16, 18 for j = 1, 2, 3)
    oi = gl.arange(0, 16, layout=gl.SliceLayout(1, MMA))
    oc = gl.arange(0, 32, layout=gl.SliceLayout(0, MMA))
    g = oc & 7
    dcol = 32 * (g >> 1) + 8 * (g & 1) + 4 * (oc >> 4) + ((oc >> 3) & 1)
    orow = (b * H_KV + h) * GROUP + oi
    base = orow.to(gl.int64) * n_splits + sp
    om = (oi < GROUP)[:, None]
    dst = ACC + base[:, None] * D + dcol[None, :]
    gl.store(dst, acc0, mask=om)
    gl.store(dst + 2, acc1, mask=om)
    gl.store(dst + 16, acc2, mask=om)
    gl.store(dst + 18, acc3, mask=om)
    gl.store(ML + base * 2, m_i, mask=oi < GROUP)
    gl.store(ML + base * 2 + 1, l_i, mask=oi < GROUP)


@gluon.jit
def q4_0_split_async_kernel(Q, ACC, ML, K0, K1, V0, V1, BLOCK_TABLE, SEQ_LENS, stride_bt,
                            n_splits, qk_scale, PAGE, SPLIT, H_KV: gl.constexpr,
                            GROUP: gl.constexpr, D: gl.constexpr, STAGES: gl.constexpr = 3,
                            LAZY: gl.constexpr = False):
    """q4_0_split_kernel with each tile copied into shared memory (cp.async) STAGES − 1
    tiles ahead and read from there in the same layouts. LAZY: the running output is rescaled
    only when a tile raises the max by more than 2^8."""
    BN: gl.constexpr = 32
    cp: gl.constexpr = gl.nvidia.ampere.async_copy
    b = gl.program_id(0)
    h = gl.program_id(1)
    sp = gl.program_id(2)
    seq_len = gl.load(SEQ_LENS + b)
    start = sp * SPLIT
    end = gl.minimum(start + SPLIT, seq_len)
    QL: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [1, 1], [1, 0])
    qi = gl.arange(0, 16, layout=gl.SliceLayout(1, QL))
    kk = gl.arange(0, 64, layout=gl.SliceLayout(0, QL))
    dlo = 32 * ((kk >> 1) & 3) + ((kk >> 3) & 1) + 2 * (kk & 1) + 4 * (kk >> 4)
    qrow = (b * H_KV + h) * GROUP + qi
    qm = (qi < GROUP)[:, None]
    qlo = gl.load(Q + qrow[:, None] * D + dlo[None, :], mask=qm, other=0.0).to(gl.float32)
    qhi = gl.load(Q + qrow[:, None] * D + dlo[None, :] + 16, mask=qm, other=0.0).to(gl.float32)
    qa = gl.convert_layout((qlo * qk_scale).to(gl.float16), OPA)
    qb = gl.convert_layout((qhi * qk_scale).to(gl.float16), OPA)
    kbuf = gl.allocate_shared_memory(gl.uint8, [STAGES, 32, 4, 16], SH3)
    ksbuf = gl.allocate_shared_memory(gl.float16, [STAGES, 32, 4], SH2)
    vbuf = gl.allocate_shared_memory(gl.uint8, [STAGES, 16, 16, 8], SH3)
    vsbuf = gl.allocate_shared_memory(gl.float16, [2 * STAGES, 16, 4], SH2)
    bt0 = b * stride_bt
    for i in gl.static_range(STAGES - 1):
        _issue(kbuf, ksbuf, vbuf, vsbuf, i, K0, K1, V0, V1, BLOCK_TABLE, bt0, h,
               start + i * BN, end, PAGE, H_KV)
    m_i = gl.full([16], float("-inf"), gl.float32, layout=gl.SliceLayout(1, MMA))
    l_i = gl.zeros([16], gl.float32, layout=gl.SliceLayout(1, MMA))
    acc0 = gl.zeros([16, 32], gl.float32, layout=MMA)
    acc1 = gl.zeros([16, 32], gl.float32, layout=MMA)
    acc2 = gl.zeros([16, 32], gl.float32, layout=MMA)
    acc3 = gl.zeros([16, 32], gl.float32, layout=MMA)
    stok = gl.arange(0, BN, layout=gl.SliceLayout(0, MMA))
    it = 0
    for n0 in range(start, end, BN):
        st = it % STAGES
        BARRIER()
        _issue(kbuf, ksbuf, vbuf, vsbuf, (it + STAGES - 1) % STAGES, K0, K1, V0, V1,
               BLOCK_TABLE, bt0, h, n0 + (STAGES - 1) * BN, end, PAGE, H_KV)
        cp.wait_group(STAGES - 1)
        BARRIER()
        left = end - n0
        kb = kbuf.index(st).load(KB)
        ks = ksbuf.index(st).load(gl.SliceLayout(2, KB))
        ks = gl.broadcast(gl.expand_dims(ks, 2), kb)[0]
        klo, khi = gl.inline_asm_elementwise(K_ASM, "=r,=r,=r,=r,r,r,r", [kb, ks],
                                             dtype=(gl.float16, gl.float16), is_pure=True,
                                             pack=4)
        s = gl.zeros([16, BN], gl.float32, layout=MMA)
        s = gl.nvidia.ampere.mma_v2(qa, _k_operand(klo), s)
        s = gl.nvidia.ampere.mma_v2(qb, _k_operand(khi), s)
        if left < BN:
            s = gl.where((stok < left)[None, :], s, float("-inf"))
        m_t = gl.max(s, axis=1)
        if LAZY:  # noqa: SIM108 (a compile-time branch)
            m_new = gl.where(m_t > m_i + 8.0, m_t, m_i)
        else:
            m_new = gl.maximum(m_i, m_t)
        alpha = gl.exp2(m_i - m_new)
        p = gl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + gl.sum(p, axis=1)
        if LAZY:
            if gl.max(m_new - m_i, axis=0) > 0:
                acc0 = acc0 * alpha[:, None]
                acc1 = acc1 * alpha[:, None]
                acc2 = acc2 * alpha[:, None]
                acc3 = acc3 * alpha[:, None]
        else:
            acc0 = acc0 * alpha[:, None]
            acc1 = acc1 * alpha[:, None]
            acc2 = acc2 * alpha[:, None]
            acc3 = acc3 * alpha[:, None]
        m_i = m_new
        pa = gl.convert_layout(p.to(gl.float16), OPA, assert_trivial=True)
        vt = vbuf.index(st)
        va = vt.slice(0, 8, dim=1).load(VB)
        vb = vt.slice(8, 8, dim=1).load(VB)
        sa = _v_scales(vsbuf, st, 0, va)
        sb = _v_scales(vsbuf, st, 1, va)
        o0, o1, o2, o3 = gl.inline_asm_elementwise(
            V_ASM, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r", [va, vb, sa, sb],
            dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=4)
        acc0 = gl.nvidia.ampere.mma_v2(pa, _v_operand(o0), acc0)
        acc1 = gl.nvidia.ampere.mma_v2(pa, _v_operand(o1), acc1)
        acc2 = gl.nvidia.ampere.mma_v2(pa, _v_operand(o2), acc2)
        acc3 = gl.nvidia.ampere.mma_v2(pa, _v_operand(o3), acc3)
        it += 1  # noqa: SIM113 (a Gluon loop: no enumerate)
    cp.wait_group(0)
    oi = gl.arange(0, 16, layout=gl.SliceLayout(1, MMA))
    oc = gl.arange(0, 32, layout=gl.SliceLayout(0, MMA))
    g = oc & 7
    dcol = 32 * (g >> 1) + 8 * (g & 1) + 4 * (oc >> 4) + ((oc >> 3) & 1)
    orow = (b * H_KV + h) * GROUP + oi
    base = orow.to(gl.int64) * n_splits + sp
    om = (oi < GROUP)[:, None]
    dst = ACC + base[:, None] * D + dcol[None, :]
    gl.store(dst, acc0, mask=om)
    gl.store(dst + 2, acc1, mask=om)
    gl.store(dst + 16, acc2, mask=om)
    gl.store(dst + 18, acc3, mask=om)
    gl.store(ML + base * 2, m_i, mask=oi < GROUP)
    gl.store(ML + base * 2 + 1, l_i, mask=oi < GROUP)





def launch(kernel, cache, q, table, seq, out, max_len: int, per_sm: int = 12, regs: int = 0,
           **consts):
    """One decode step: the Gluon split kernel, then decode's merge (reduce_splits)."""
    import torch

    from kvcore.kernels.cache import LOG2E, SMS
    from kvcore.kernels.triton_ops import reduce_splits

    bsz, hq, d = q.shape
    hkv = cache.kv_heads
    want = max(1, math.ceil(per_sm * SMS / (bsz * hkv)))
    split = max(32, math.ceil(max_len / want / 32) * 32)
    n_splits = math.ceil(max_len / split)
    acc = torch.empty(bsz * hq * n_splits * d, device=q.device, dtype=torch.float32)
    ml = torch.empty(bsz * hq * n_splits * 2, device=q.device, dtype=torch.float32)
    k0, k1, _, _ = cache.k.operands()
    v0, v1, _, _ = cache.v.operands()
    extra = {"maxnreg": regs} if regs else {}
    if kernel is q4_0_swapped_kernel:
        consts = {**consts, "QN": 8 if hq // hkv <= 8 else 16}
    kernel[(bsz, hkv, n_splits)](q, acc, ml, k0, k1, v0, v1, table, seq, table.stride(0),
                                 n_splits, LOG2E / math.sqrt(d), cache.page_size, split,
                                 H_KV=hkv, GROUP=hq // hkv, D=d, num_warps=1, **consts,
                                 **extra)
    reduce_splits(acc, ml, out, n_splits, bsz, hkv, hq // hkv, d)
    return out


def variants() -> dict:
    """The kernels the probe runs: name → (kernel, compile-time arguments)."""
    return {"sync": (q4_0_split_kernel, {}),
            "async3": (q4_0_split_async_kernel, {"STAGES": 3}),
            "async3-lazy": (q4_0_split_async_kernel, {"STAGES": 3, "LAZY": True}),
            "async4": (q4_0_split_async_kernel, {"STAGES": 4}),
            "swapped3": (q4_0_swapped_kernel, {"STAGES": 3}),
            "swapped3-lazy": (q4_0_swapped_kernel, {"STAGES": 3, "LAZY": True})}


def check(device: str = "cuda") -> dict:
    """Largest difference from decode_ref over the output's largest magnitude, per case."""
    import torch
    from decode import fill_paged

    from kvcore.kernels.cache import LayerCache

    res = {}
    for ps, group, lens in ((32, 4, [37, 200, 129, 1]), (64, 8, [300, 64, 65]),
                            (32, 16, [95, 33]), (64, 4, [2048, 1000])):
        torch.manual_seed(ps + group)
        hkv, d = 2, 128
        hq = hkv * group
        bsz = len(lens)
        per = max(math.ceil(n / ps) for n in lens)
        cache = LayerCache("q4_0", "q4_0", bsz * per, ps, hkv, d, device=device)
        table = torch.randperm(bsz * per, device=device).view(bsz, per).to(torch.int32)
        k, v = (torch.randn(bsz, max(lens), hkv, d, device=device, dtype=torch.float16)
                for _ in range(2))
        fill_paged(cache, table, k, v, lens)
        seq = torch.tensor(lens, device=device, dtype=torch.int32)
        q = torch.randn(bsz, hq, d, device=device, dtype=torch.float16)
        ref = cache.decode_ref(q, table, seq).float()
        base = cache.decode(q, table, seq, max_len=max(lens), gluon=False)
        for (vname, (kernel, consts)), per_sm in itertools.product(variants().items(), (1, 12)):
            out = torch.full((bsz, hq, d), float("nan"), device=device)
            launch(kernel, cache, q, table, seq, out, max(lens), per_sm, 0, **consts)
            torch.cuda.synchronize()
            name = (f"{vname}-page{ps}-group{group}-lens{'/'.join(map(str, lens))}"
                    f"-per_sm{per_sm}")
            res[name] = {
                "vs_ref": float((out - ref).abs().max() / ref.abs().max()),
                "decode_vs_ref": float((base - ref).abs().max() / ref.abs().max()),
                "nan": bool(torch.isnan(out).any())}
            print(name, res[name], flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1x131072,8x131072,1x32768,8x32768")
    ap.add_argument("--per-sm", default="8,12,16")
    ap.add_argument("--regs", default="0,168")
    ap.add_argument("--variants", default="sync,async3,async3-lazy,async4")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()

    import torch
    from decode import HKV, HQ, D, copies, fill, graph_time, sdpa_time, time_steps

    from kvcore.kernels.bandwidth import measure_bandwidth
    from kvcore.kernels.cache import LayerCache
    from kvcore.measure import environment

    res: dict = {"env": environment("cuda", torch), "bandwidth": measure_bandwidth(torch),
                 "check": check(), "rows": []}
    bw = res["bandwidth"]["read_bytes_per_s"]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for spec in args.shapes.split(","):
        bsz, tokens = (int(x) for x in spec.split("x"))
        t_sdpa = sdpa_time(bsz, tokens)
        cache = LayerCache("q4_0", "q4_0", bsz, tokens, HKV, D, device="cuda")
        fill(cache, bsz, tokens, torch.float16)
        caches = copies(cache, bsz, tokens)
        table = torch.arange(bsz, device="cuda", dtype=torch.int32).reshape(bsz, 1)
        seq = torch.full((bsz,), tokens, device="cuda", dtype=torch.int32)
        q = torch.randn(bsz, HQ, D, device="cuda", dtype=torch.float16)
        ref = cache.decode(q, table, seq, max_len=tokens, gluon=False)
        t_dec = time_steps(caches, bsz, tokens, torch.float16, gluon=False)
        row = {"batch": bsz, "tokens": tokens, "sdpa_f16_seconds": t_sdpa,
               "decode_seconds": t_dec, "decode_vs_sdpa": t_sdpa / t_dec,
               "decode_fraction_of_read_bw": cache.nbytes / t_dec / bw, "configs": []}
        for (vname, (kernel, consts)), per_sm, regs in itertools.product(
                variants().items(), (int(x) for x in args.per_sm.split(",")),
                (int(x) for x in args.regs.split(","))):
            if vname not in args.variants.split(","):
                continue
            if True:  # noqa: SIM102
                out = torch.empty(bsz, HQ, D, device="cuda")
                launch(kernel, cache, q, table, seq, out, tokens, per_sm, regs, **consts)
                diff = float((out - ref).abs().max() / ref.abs().max())
                outs = [torch.empty_like(out) for _ in caches]
                t = graph_time([partial(launch, kernel, c, q, table, seq, o, tokens, per_sm,
                                        regs, **consts)
                                for c, o in zip(caches, outs, strict=True)])
                row["configs"].append({"variant": vname, "per_sm": per_sm, "regs": regs,
                                       "seconds": t,
                                       "diff_vs_decode": diff, "vs_decode": t_dec / t,
                                       "vs_sdpa": t_sdpa / t,
                                       "fraction_of_read_bw": cache.nbytes / t / bw})
        best = min(row["configs"], key=lambda x: x["seconds"])
        print(f"B={bsz} T={tokens}: sdpa {t_sdpa * 1e6:.1f} us, decode {t_dec * 1e6:.1f} us "
              f"({t_sdpa / t_dec:.2f}x); gluon best {best['variant']} {best['per_sm']}/{best['regs']} "
              f"{best['seconds'] * 1e6:.1f} us ({best['vs_sdpa']:.2f}x, "
              f"{best['fraction_of_read_bw']:.0%} bw, diff {best['diff_vs_decode']:.1e})",
              flush=True)
        res["rows"].append(row)
        (out_dir / "gluon-q4_0.json").write_text(json.dumps(res, indent=1))
        del caches, cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
