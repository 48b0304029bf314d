"""Triton kernels for KIVI caches: quantize the groups an append flushes (from the residual ring
and the new tokens) into the quantized region, and fused split-K decode attention over
quantized groups plus the f16 residual ring."""

from __future__ import annotations

import triton
import triton.language as tl

from .triton_ops import pdl_enter, softmax_lazy, softmax_step


@triton.jit
def _below(x, n: tl.constexpr, WHOLE: tl.constexpr):
    """x < n, or a constant true mask where the lanes are known to be whole (no padding), so
    that a power-of-two head dimension compiles without masks."""
    if WHOLE:
        return tl.full(x.shape, 1, tl.int1)
    else:
        return x < n


@triton.jit
def _codes_f16(c, MAGIC: tl.constexpr):
    """Small non-negative integer codes (int32, < 1024) as float16, exactly. MAGIC: by their
    bits (the code ORed into the exponent of 1024, less 1024: a logic op and a half add) rather
    than an integer-to-float conversion, which Hopper issues at a quarter of the rate."""
    if MAGIC:
        return (c | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1024.0
    else:
        return c.to(tl.float16)


@triton.jit
def _quantize(x, mn, sc, LEVELS: tl.constexpr, HW: tl.constexpr):
    """The codes (int32) of x given its group's minimum ``mn`` and scale ``sc`` (float16,
    broadcast against x), as the reference computes them: floor((x − mn) / sc + 0.5), the
    quotient rounded to float32, clamped to 0 … LEVELS (before the rounding: the same codes),
    0 where the scale is 0. HW (a GPU): the quotient from the correctly rounded reciprocal
    (one a group) and one correction by fused multiply-adds, which gives the correctly rounded
    quotient; floor and conversion by one add rounded down to 2²³ (the code is then the low
    bits). Otherwise a division and a floor."""
    y = x.to(tl.float32) - mn.to(tl.float32)
    scf = sc.to(tl.float32)
    if HW:
        r = tl.broadcast_to(tl.where(scf > 0, tl.math.div_rn(1.0, tl.where(scf > 0, scf, 1.0)),
                                     0.0), y.shape)
        q0 = y * r
        q = tl.fma(tl.fma(-q0, tl.broadcast_to(scf, y.shape), y), r, q0)
    else:
        q = tl.where(scf > 0, y / tl.where(scf > 0, scf, 1.0), 0.0)
    q = tl.minimum(tl.maximum(q, 0.0), LEVELS * 1.0) + 0.5
    if HW:
        magic = tl.full(q.shape, 8388608.0, tl.float32)
        t = tl.inline_asm_elementwise("add.rm.f32 $0, $1, $2;", "=r,r,r", [q, magic],
                                      dtype=tl.float32, is_pure=True, pack=1)
        return t.to(tl.int32, bitcast=True) & 0xFF
    else:
        return tl.floor(q).to(tl.int32)


@triton.jit
def kivi_flush_kernel(KR, VR, XK, XV, KQ, KS, KM, VQ, VS, VM, GT, s, stride_gt, g0, live, RING,
                      H: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, G: tl.constexpr,
                      BITS: tl.constexpr, PER: tl.constexpr, LEVELS: tl.constexpr,
                      HAS_V: tl.constexpr, HW: tl.constexpr = False):
    """Program (j, h): quantize group g0 + j of sequence ``s`` (tokens (g0 + j)·G …) into the
    slot the group table GT gives it. A token below ``live`` (the tokens held before this
    append) comes from the residual ring, a later one from the new tokens XK, XV [n, H, D]
    (token live + i at row i), read as float16 as the ring holds them. DP: D rounded up to a
    power of two (the lanes past D are masked). HAS_V false: a K-only cache."""
    gi = g0 + tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    t = tl.arange(0, G)
    d = tl.arange(0, DP)
    dm = _below(d, D, DP == D)
    tok = gi.to(tl.int64) * G + t
    old = tok < live
    rb = (s * H + h) * RING + tok % RING
    xb = (tok - live) * H + h
    if XK.dtype.element_ty == KR.dtype.element_ty:
        # one load a row, from the ring or the new tokens by the row's own pointer
        m = tl.broadcast_to(dm[None, :], (G, DP))
        k = tl.load(tl.where(old, KR + rb * D, XK + xb * D)[:, None] + d[None, :], mask=m,
                    other=0.0)
        if HAS_V:
            v = tl.load(tl.where(old, VR + rb * D, XV + xb * D)[:, None] + d[None, :], mask=m,
                        other=0.0)
    else:
        mo = old[:, None] & dm[None, :]
        mn = ~old[:, None] & dm[None, :]
        k = tl.where(old[:, None],
                     tl.load(KR + rb[:, None] * D + d[None, :], mask=mo, other=0.0),
                     tl.load(XK + xb[:, None] * D + d[None, :], mask=mn,
                             other=0.0).to(tl.float16))
        if HAS_V:
            v = tl.where(old[:, None],
                         tl.load(VR + rb[:, None] * D + d[None, :], mask=mo, other=0.0),
                         tl.load(XV + xb[:, None] * D + d[None, :], mask=mn,
                                 other=0.0).to(tl.float16))
    # keys (float16: their minimum and maximum are exact in it): per channel over the G tokens
    lo = tl.min(k, axis=0)
    hi = tl.max(k, axis=0)
    ks = ((hi.to(tl.float32) - lo.to(tl.float32)) / LEVELS).to(tl.float16)
    km = lo
    kc = _quantize(k, km[None, :], ks[None, :], LEVELS, HW)
    # pack along tokens: byte j of channel d holds tokens PER·j .. PER·j + PER − 1
    kc3 = tl.reshape(kc, (G // PER, PER, DP))
    shifts = (tl.arange(0, PER) * BITS)[None, :, None]
    kbytes = tl.sum(kc3 << shifts, axis=1)  # [G/per, DP]
    gbase = tl.load(GT + s * stride_gt + gi).to(tl.int64) * H + h
    j = tl.arange(0, G // PER)
    tl.store(KQ + (gbase * D + d[None, :]) * (G // PER) + j[:, None], kbytes.to(tl.uint8),
             mask=dm[None, :])
    tl.store(KS + gbase * D + d, ks, mask=dm)
    tl.store(KM + gbase * D + d, km, mask=dm)
    if HAS_V:
        _flush_values(v, VQ, VS, VM, gbase * G + t, D, DP, G, BITS, PER, LEVELS, HW)


@triton.jit
def _flush_values(v, VQ, VS, VM, tbase, D: tl.constexpr, DP: tl.constexpr, G: tl.constexpr,
                  BITS: tl.constexpr, PER: tl.constexpr, LEVELS: tl.constexpr,
                  HW: tl.constexpr):
    """Values [G, DP] (float16) of one group quantized per token over groups of G channels (D is a
    multiple of G; the groups past D are padding) into rows ``tbase`` of the value planes."""
    v3 = tl.reshape(v, (G, DP // G, G))
    vlo = tl.min(v3, axis=2)
    vhi = tl.max(v3, axis=2)
    vs = ((vhi.to(tl.float32) - vlo.to(tl.float32)) / LEVELS).to(tl.float16)
    vm = vlo
    vc = _quantize(v3, vm[:, :, None], vs[:, :, None], LEVELS, HW)
    vc3 = tl.reshape(vc, (G, DP // PER, PER))
    vshift = (tl.arange(0, PER) * BITS)[None, None, :]
    vbytes = tl.sum(vc3 << vshift, axis=2)  # [G, DP/per]
    c = tl.arange(0, DP // PER)
    tl.store(VQ + tbase[:, None] * (D // PER) + c[None, :], vbytes.to(tl.uint8),
             mask=_below(c, D // PER, DP == D)[None, :])
    ng = tl.arange(0, DP // G)
    gm = _below(ng, D // G, DP == D)[None, :]
    tl.store(VS + tbase[:, None] * (D // G) + ng[None, :], vs, mask=gm)
    tl.store(VM + tbase[:, None] * (D // G) + ng[None, :], vm, mask=gm)


@triton.jit
def kivi_decode_kernel(Q, ACC, ML, KQ, KS, KM, VQ, VS, VM, KR, VR, NQ, NR, GT, stride_gt,
                       RING, n_splits, qk_scale,
                       H: tl.constexpr, GROUP: tl.constexpr, QPAD: tl.constexpr,
                       D: tl.constexpr, DP: tl.constexpr, G: tl.constexpr, BITS: tl.constexpr,
                       PER: tl.constexpr, LEVELS: tl.constexpr, SPLIT: tl.constexpr,
                       HAS_V: tl.constexpr, MAGIC: tl.constexpr, QB: tl.constexpr = 1,
                       PDL: tl.constexpr = False, LAZY: tl.constexpr = False):
    """One (sequence, KV head, split) program over quantized groups and the residual ring;
    partial output [QPAD, DP], running max and sum go to ACC and ML as decode_split_kernel's
    do. DP: D rounded up to a power of two (the lanes past D are masked to zero). HAS_V false:
    a K-only cache, V = the dequantized keys. MAGIC: codes to float16 by their bits
    (_codes_f16; the same values). A group of more query heads than QPAD is spread over QB
    programs of a KV head (program id 1: KV head · QB + query block). PDL: pdl_enter. LAZY:
    softmax_lazy (the output rescaled only when the running max grows by more than its
    margin)."""
    pdl_enter(PDL)
    s = tl.program_id(0).to(tl.int64)
    h = (tl.program_id(1) // QB).to(tl.int64)
    sp = tl.program_id(2).to(tl.int64)
    nq = tl.load(NQ + s).to(tl.int64)
    n = nq + tl.load(NR + s).to(tl.int64)
    start = sp * SPLIT
    end = tl.minimum(start + SPLIT, n)
    rows = (tl.program_id(1) % QB) * QPAD + tl.arange(0, QPAD)
    d = tl.arange(0, DP)
    dm = _below(d, D, DP == D)
    t = tl.arange(0, G)
    q = tl.load(Q + ((s * H + h) * GROUP + rows[:, None]) * D + d[None, :],
                mask=(rows[:, None] < GROUP) & dm[None, :], other=0.0).to(tl.float32)
    q = q * qk_scale
    m_i = tl.full([QPAD], float("-inf"), tl.float32)
    l_i = tl.zeros([QPAD], tl.float32)
    acc = tl.zeros([QPAD, DP], tl.float32)
    jk = tl.arange(0, G // PER)
    shifts = tl.arange(0, PER) * BITS
    for t0 in range(start, end, G):
        tok = t0 + t
        tmask = tok < end
        if t0 < nq:
            gi = t0 // G
            gbase = tl.load(GT + s * stride_gt + gi).to(tl.int64) * H + h
            # K^T codes [DP, G]: byte j of channel d holds tokens PER·j … at BITS each; each
            # byte is loaded once and split by shifts. The key's per-channel scale goes into
            # the query and its minimum into a per-row bias, so the codes enter the product
            # as they are: q · (c·s + m) = (q·s) · c + q · m
            kb = tl.load(KQ + (gbase * D + d[:, None]) * (G // PER) + jk[None, :],
                         mask=dm[:, None], other=0).to(tl.int32)
            kc = tl.reshape((kb[:, :, None] >> shifts[None, None, :]) & LEVELS, (DP, G))
            ksc = tl.load(KS + gbase * D + d, mask=dm, other=0.0).to(tl.float32)
            kmn = tl.load(KM + gbase * D + d, mask=dm, other=0.0).to(tl.float32)
            qk = (q * ksc[None, :]).to(tl.float16)
            bias = tl.sum(q * kmn[None, :], axis=1)
            kh = _codes_f16(kc, MAGIC)
            scores = tl.dot(qk, kh) + bias[:, None]
            if HAS_V:
                v = _group_values(VQ, VS, VM, gbase * G + t, D, DP, G, BITS, PER, LEVELS, MAGIC)
            else:
                v = tl.trans((kh.to(tl.float32) * ksc[:, None] + kmn[:, None]).to(tl.float16))
        else:
            slot = tok % RING
            rb = ((s * H + h) * RING + slot)
            rm = tmask[:, None] & dm[None, :]
            krow = tl.load(KR + rb[:, None] * D + d[None, :], mask=rm, other=0.0)
            if HAS_V:  # noqa: SIM108 (a compile-time branch)
                v = tl.load(VR + rb[:, None] * D + d[None, :], mask=rm, other=0.0)
            else:
                v = krow
            scores = tl.dot(q.to(tl.float16), tl.trans(krow))
        if LAZY:
            p, alpha, m_i, l_i, grow = softmax_lazy(scores, tmask, m_i, l_i)
            if grow:
                acc = acc * alpha[:, None]
            acc = tl.dot(p.to(tl.float16), v, acc)
        else:
            p, alpha, m_i, l_i = softmax_step(scores, tmask, m_i, l_i)
            acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
    out_rows = (s * H + h) * GROUP + rows
    omask = rows < GROUP
    base = out_rows * n_splits + sp
    tl.store(ACC + base[:, None] * DP + d[None, :], acc, mask=omask[:, None])
    tl.store(ML + base * 2, m_i, mask=omask)
    tl.store(ML + base * 2 + 1, l_i, mask=omask)


@triton.jit
def _group_values(VQ, VS, VM, tb, D: tl.constexpr, DP: tl.constexpr, G: tl.constexpr,
                  BITS: tl.constexpr, PER: tl.constexpr, LEVELS: tl.constexpr,
                  MAGIC: tl.constexpr):
    """The values [G, DP] (float16) of the quantized group whose token rows are ``tb``: byte c
    of a token's row holds channels PER·c … at BITS each, split by shifts; the scale and
    minimum of each G channels, loaded once per token, spread over their channels (zero past
    D, so the padded lanes are zero)."""
    jv = tl.arange(0, DP // PER)
    ng = tl.arange(0, DP // G)
    shifts = tl.arange(0, PER) * BITS
    vb = tl.load(VQ + tb[:, None] * (D // PER) + jv[None, :],
                 mask=_below(jv, D // PER, DP == D)[None, :], other=0).to(tl.int32)
    vc = tl.reshape((vb[:, :, None] >> shifts[None, None, :]) & LEVELS, (G, DP))
    gm = _below(ng, D // G, DP == D)[None, :]
    vsc = tl.load(VS + tb[:, None] * (D // G) + ng[None, :], mask=gm, other=0.0).to(tl.float32)
    vmn = tl.load(VM + tb[:, None] * (D // G) + ng[None, :], mask=gm, other=0.0).to(tl.float32)
    vsc = tl.reshape(tl.broadcast_to(vsc[:, :, None], (G, DP // G, G)), (G, DP))
    vmn = tl.reshape(tl.broadcast_to(vmn[:, :, None], (G, DP // G, G)), (G, DP))
    return (_codes_f16(vc, MAGIC).to(tl.float32) * vsc + vmn).to(tl.float16)
