"""Triton kernels for KIVI caches: quantize the groups an append flushes (from the residual ring
and the new tokens) into the quantized region, and fused split-K decode attention over
quantized groups plus the f16 residual ring."""

from __future__ import annotations

import triton
import triton.language as tl

from .triton_ops import softmax_step


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
def kivi_flush_kernel(KR, VR, XK, XV, KQ, KS, KM, VQ, VS, VM, GT, s, stride_gt, g0, live, RING,
                      H: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, G: tl.constexpr,
                      BITS: tl.constexpr, PER: tl.constexpr, LEVELS: tl.constexpr,
                      HAS_V: tl.constexpr):
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
    mo = old[:, None] & dm[None, :]
    mn = ~old[:, None] & dm[None, :]
    k = tl.where(old[:, None],
                 tl.load(KR + rb[:, None] * D + d[None, :], mask=mo, other=0.0),
                 tl.load(XK + xb[:, None] * D + d[None, :], mask=mn,
                         other=0.0).to(tl.float16)).to(tl.float32)
    if HAS_V:
        v = tl.where(old[:, None],
                     tl.load(VR + rb[:, None] * D + d[None, :], mask=mo, other=0.0),
                     tl.load(XV + xb[:, None] * D + d[None, :], mask=mn,
                             other=0.0).to(tl.float16)).to(tl.float32)
    # keys: per channel over the G tokens
    lo = tl.min(k, axis=0)
    hi = tl.max(k, axis=0)
    ks = ((hi - lo) / LEVELS).to(tl.float16)
    km = lo.to(tl.float16)
    ksf = ks.to(tl.float32)
    kc = tl.where(ksf[None, :] > 0, (k - km.to(tl.float32)[None, :]) / tl.where(ksf > 0, ksf, 1.0)[None, :], 0.0)
    kc = tl.minimum(tl.maximum(tl.floor(kc + 0.5), 0.0), LEVELS * 1.0).to(tl.int32)
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
        _flush_values(v, VQ, VS, VM, gbase * G + t, D, DP, G, BITS, PER, LEVELS)


@triton.jit
def _flush_values(v, VQ, VS, VM, tbase, D: tl.constexpr, DP: tl.constexpr, G: tl.constexpr,
                  BITS: tl.constexpr, PER: tl.constexpr, LEVELS: tl.constexpr):
    """Values [G, DP] of one group quantized per token over groups of G channels (D is a
    multiple of G; the groups past D are padding) into rows ``tbase`` of the value planes."""
    v3 = tl.reshape(v, (G, DP // G, G))
    vlo = tl.min(v3, axis=2)
    vhi = tl.max(v3, axis=2)
    vs = ((vhi - vlo) / LEVELS).to(tl.float16)
    vm = vlo.to(tl.float16)
    vsf = vs.to(tl.float32)
    vc = tl.where(vsf[:, :, None] > 0,
                  (v3 - vm.to(tl.float32)[:, :, None]) / tl.where(vsf > 0, vsf, 1.0)[:, :, None], 0.0)
    vc = tl.minimum(tl.maximum(tl.floor(vc + 0.5), 0.0), LEVELS * 1.0).to(tl.int32)
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
                       HAS_V: tl.constexpr, MAGIC: tl.constexpr):
    """One (sequence, KV head, split) program over quantized groups and the residual ring;
    partial output [QPAD, DP], running max and sum go to ACC and ML as decode_split_kernel's
    do. DP: D rounded up to a power of two (the lanes past D are masked to zero). HAS_V false:
    a K-only cache, V = the dequantized keys. MAGIC: codes to float16 by their bits
    (_codes_f16; the same values)."""
    s = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    sp = tl.program_id(2).to(tl.int64)
    nq = tl.load(NQ + s).to(tl.int64)
    n = nq + tl.load(NR + s).to(tl.int64)
    start = sp * SPLIT
    end = tl.minimum(start + SPLIT, n)
    rows = tl.arange(0, QPAD)
    d = tl.arange(0, DP)
    dm = _below(d, D, DP == D)
    t = tl.arange(0, G)
    q = tl.load(Q + ((s * H + h) * GROUP + rows[:, None]) * D + d[None, :],
                mask=(rows[:, None] < GROUP) & dm[None, :], other=0.0).to(tl.float32)
    # held in float16 (the query's own precision) through the loops: fewer registers
    q = (q * qk_scale).to(tl.float16)
    m_i = tl.full([QPAD], float("-inf"), tl.float32)
    l_i = tl.zeros([QPAD], tl.float32)
    jk = tl.arange(0, G // PER)
    # the quantized groups of the split, then its tokens in the residual ring: two loops, so
    # that the hot one has no branch and its loads can be pipelined; a quantized group is
    # whole (every token valid)
    whole = t >= 0
    if HAS_V:
        # the output by channel group of G, [DP / G, QPAD, G]: the values' per-token scale of
        # each G channels goes into the weights (one product per channel group) and their
        # minimum into a per-group sum of weights: Σ_t p·(c·s + m) = Σ_t (p·s)·c + Σ_t p·m
        acc3 = tl.zeros([DP // G, QPAD, G], tl.float32)
        for t0 in range(start, tl.minimum(end, nq), G):
            gbase = tl.load(GT + s * stride_gt + t0 // G).to(tl.int64) * H + h
            scores, kh, ksc, kmn = _key_scores(q, KQ, KS, KM, gbase, d, dm, jk, D, G, BITS,
                                               PER, LEVELS, MAGIC)
            p, alpha, m_i, l_i = softmax_step(scores, whole, m_i, l_i)
            vc, vsc, vmn = _group_codes(VQ, VS, VM, gbase * G + t, D, DP, G, BITS, PER,
                                        LEVELS)
            ps = (p[None, :, :] * tl.trans(vsc)[:, None, :]).to(tl.float16)  # [NG, QPAD, G]
            pm = tl.sum(p[None, :, :] * tl.trans(vmn)[:, None, :], axis=2)  # [NG, QPAD]
            acc3 = (acc3 * alpha[None, :, None] + pm[:, :, None]
                    + tl.dot(ps, _codes_f16(vc, MAGIC)))
        acc = tl.reshape(tl.permute(acc3, (1, 0, 2)), (QPAD, DP))
    else:
        acc = tl.zeros([QPAD, DP], tl.float32)
        for t0 in range(start, tl.minimum(end, nq), G):
            gbase = tl.load(GT + s * stride_gt + t0 // G).to(tl.int64) * H + h
            scores, kh, ksc, kmn = _key_scores(q, KQ, KS, KM, gbase, d, dm, jk, D, G, BITS,
                                               PER, LEVELS, MAGIC)
            p, alpha, m_i, l_i = softmax_step(scores, whole, m_i, l_i)
            v = tl.trans((kh.to(tl.float32) * ksc[:, None] + kmn[:, None]).to(tl.float16))
            acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
    for t0 in range(tl.maximum(start, nq), end, G):
        tok = t0 + t
        tmask = tok < end
        rb = (s * H + h) * RING + tok % RING
        rm = tmask[:, None] & dm[None, :]
        krow = tl.load(KR + rb[:, None] * D + d[None, :], mask=rm, other=0.0)
        if HAS_V:  # noqa: SIM108 (a compile-time branch)
            v = tl.load(VR + rb[:, None] * D + d[None, :], mask=rm, other=0.0)
        else:
            v = krow
        scores = tl.dot(q, tl.trans(krow))
        p, alpha, m_i, l_i = softmax_step(scores, tmask, m_i, l_i)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
    out_rows = (s * H + h) * GROUP + rows
    omask = rows < GROUP
    base = out_rows * n_splits + sp
    tl.store(ACC + base[:, None] * DP + d[None, :], acc, mask=omask[:, None])
    tl.store(ML + base * 2, m_i, mask=omask)
    tl.store(ML + base * 2 + 1, l_i, mask=omask)


@triton.jit
def _key_scores(q, KQ, KS, KM, gbase, d, dm, jk, D: tl.constexpr, G: tl.constexpr,
                BITS: tl.constexpr, PER: tl.constexpr, LEVELS: tl.constexpr,
                MAGIC: tl.constexpr):
    """Scores of the query rows ``q`` [QPAD, DP] (float32, scaled) against the keys of the
    quantized group at ``gbase``, with its K^T codes [DP, G] as float16 and the per-channel
    scale and minimum. Byte j of channel d holds tokens PER·j … at BITS each; each byte is
    loaded once and split by shifts. The scale goes into the query and the minimum into a
    per-row bias, so the codes enter the product as they are: q · (c·s + m) = (q·s) · c + q · m."""
    shifts = tl.arange(0, PER) * BITS
    kb = tl.load(KQ + (gbase * D + d[:, None]) * (G // PER) + jk[None, :],
                 mask=dm[:, None], other=0).to(tl.int32)
    kc = tl.reshape((kb[:, :, None] >> shifts[None, None, :]) & LEVELS, (d.shape[0], G))
    ksc = tl.load(KS + gbase * D + d, mask=dm, other=0.0).to(tl.float32)
    kmn = tl.load(KM + gbase * D + d, mask=dm, other=0.0).to(tl.float32)
    qf = q.to(tl.float32)
    qk = (qf * ksc[None, :]).to(tl.float16)
    bias = tl.sum(qf * kmn[None, :], axis=1)
    kh = _codes_f16(kc, MAGIC)
    return tl.dot(qk, kh) + bias[:, None], kh, ksc, kmn


@triton.jit
def _group_codes(VQ, VS, VM, tb, D: tl.constexpr, DP: tl.constexpr, G: tl.constexpr,
                 BITS: tl.constexpr, PER: tl.constexpr, LEVELS: tl.constexpr):
    """The value codes of the quantized group whose token rows are ``tb``, by channel group:
    [DP / G, G tokens, G channels] (int32; byte c of a token's row holds channels PER·c … at
    BITS each, split by shifts), and the scale and minimum of each token's G channels
    [G tokens, DP / G] (float32; zero past D, so the padded lanes add nothing)."""
    jv = tl.arange(0, DP // PER)
    ng = tl.arange(0, DP // G)
    shifts = tl.arange(0, PER) * BITS
    vb = tl.load(VQ + tb[:, None] * (D // PER) + jv[None, :],
                 mask=_below(jv, D // PER, DP == D)[None, :], other=0).to(tl.int32)
    vc = tl.reshape((vb[:, :, None] >> shifts[None, None, :]) & LEVELS, (G, DP // G, G))
    gm = _below(ng, D // G, DP == D)[None, :]
    vsc = tl.load(VS + tb[:, None] * (D // G) + ng[None, :], mask=gm, other=0.0).to(tl.float32)
    vmn = tl.load(VM + tb[:, None] * (D // G) + ng[None, :], mask=gm, other=0.0).to(tl.float32)
    return tl.permute(vc, (1, 0, 2)), vsc, vmn
