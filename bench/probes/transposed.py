"""A probe, not part of kvplan: q4_0 decode attention written transposed, the cache tiles as the
tensor-core product's first operand (Sᵀ = K·Qᵀ, Oᵀ = Vᵀ·Pᵀ, so that Triton issues wgmma with the
unpacked tiles in registers), over a V plane stored token-minor within its page (byte j of
tokens t…t+3 adjacent). One page per sequence; no masking of V rows past the end (the probe's
caches are full). Run by bench/probes/transposed_probe.py against the decode kernel."""

import triton
import triton.language as tl

from kvcore.kernels.triton_ops import q4_0_nibbles


@triton.jit
def _kq4(P0, P1, r, rmask, BN: tl.constexpr, DPOW: tl.constexpr, X0: tl.constexpr, X1: tl.constexpr, ASM: tl.constexpr):
    # token-major [BN, NB, 16] -> two [BN, DPOW//2] halves (A operand: m = tokens, k = dims)
    nb = tl.arange(0, DPOW // 32)[None, :, None]
    j = tl.arange(0, 16)[None, None, :]
    r3 = r[:, None, None]
    m3 = rmask[:, None, None]
    byte = tl.load(P0 + r3 * X0 + nb * 16 + j, mask=m3, other=0)
    ds = tl.load(P1 + r3 * X1 + nb, mask=m3, other=0.0)
    lo, hi = q4_0_nibbles(byte, ds, ASM)
    return tl.reshape(lo, (BN, DPOW // 2)), tl.reshape(hi, (BN, DPOW // 2))


@triton.jit
def _vq4(P0, P1, PAGE, rmask, BN: tl.constexpr, DPOW: tl.constexpr, ASM: tl.constexpr):
    # token-minor [NB, 16, BN] -> two [DPOW//2, BN] halves (A operand: m = dims, k = tokens)
    nb = tl.arange(0, DPOW // 32)[:, None, None]
    j = tl.arange(0, 16)[None, :, None]
    t = tl.arange(0, BN)[None, None, :]
    byte = tl.load(P0 + (nb * 16 + j) * PAGE + t)
    ds = tl.load(P1 + nb * PAGE + t)
    lo, hi = q4_0_nibbles(byte, ds, ASM)
    return tl.reshape(lo, (DPOW // 2, BN)), tl.reshape(hi, (DPOW // 2, BN))


@triton.jit
def kern(Q, ACC, ML, K0, K1, V0, V1, BLOCK_TABLE, SEQ_LENS, stride_bt, n_splits, qk_scale, PAGE, SPLIT,
         H_KV: tl.constexpr, GROUP: tl.constexpr, QPAD: tl.constexpr, D: tl.constexpr, DPOW: tl.constexpr,
         X0: tl.constexpr, X1: tl.constexpr, BLOCK_N: tl.constexpr, ASM: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    sp = tl.program_id(2)
    seq_len = tl.load(SEQ_LENS + b)
    start = sp * SPLIT
    end = tl.minimum(start + SPLIT, seq_len)
    rows = tl.arange(0, QPAD)
    qrow = (b * H_KV + h) * GROUP + rows
    qmask = rows < GROUP
    jh = tl.arange(0, DPOW // 2)
    da = (jh // 16) * 32 + jh % 16
    db = da + 16
    # Q^T halves [DPOW//2, QPAD] (B operand)
    qa = (tl.load(Q + qrow[None, :] * D + da[:, None], mask=qmask[None, :], other=0.0).to(tl.float32) * qk_scale).to(tl.float16)
    qb = (tl.load(Q + qrow[None, :] * D + db[:, None], mask=qmask[None, :], other=0.0).to(tl.float32) * qk_scale).to(tl.float16)
    m_i = tl.full([QPAD], float("-inf"), tl.float32)
    l_i = tl.zeros([QPAD], tl.float32)
    acc_a = tl.zeros([DPOW // 2, QPAD], tl.float32)
    acc_b = tl.zeros([DPOW // 2, QPAD], tl.float32)
    hh = h.to(tl.int64)
    pg = start // PAGE
    off = start - pg * PAGE
    i = tl.arange(0, BLOCK_N)
    for n0 in range(start, end, BLOCK_N):
        page = tl.load(BLOCK_TABLE + b * stride_bt + pg).to(tl.int64)
        pbase = (page * H_KV + hh) * PAGE
        nmask = n0 + i < end
        ka, kb = _kq4(K0 + (pbase + off) * X0, K1 + (pbase + off) * X1, i, nmask, BLOCK_N, DPOW, X0, X1, ASM)
        va, vb = _vq4(V0 + pbase * X0 + off, V1 + pbase * X1 + off, PAGE, nmask, BLOCK_N, DPOW, ASM)
        off += BLOCK_N
        wrap = off >= PAGE
        pg += wrap.to(tl.int32)
        off -= wrap.to(tl.int32) * PAGE
        st = tl.dot(kb, qb, tl.dot(ka, qa))  # [BN, QPAD]
        st = tl.where(nmask[:, None], st, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(st, axis=0))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(st - m_new[None, :])
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new
        pt = p.to(tl.float16)
        acc_a = acc_a * alpha[None, :] + tl.dot(va, pt)
        acc_b = acc_b * alpha[None, :] + tl.dot(vb, pt)
    base = qrow.to(tl.int64) * n_splits + sp
    tl.store(ACC + base[None, :] * DPOW + da[:, None], acc_a, mask=qmask[None, :])
    tl.store(ACC + base[None, :] * DPOW + db[:, None], acc_b, mask=qmask[None, :])
    tl.store(ML + base * 2, m_i, mask=qmask)
    tl.store(ML + base * 2 + 1, l_i, mask=qmask)
