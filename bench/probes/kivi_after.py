"""Compile-only probe (no GPU): KIVI's decode with the scales and minimums after the
tensor-core products, against the kernel decode runs (kivi_decode_kernel, swapped, 64-token
steps).

The probe's kernel unpacks each code to 2^(10 − BITS·k) + c by one lop3 a pair (the current
kernel adds a subtraction and a fused multiply-add a pair: c·s + m). Keys: the group's
per-channel scales multiply the query (q·s, the second operand), the code positions are joined
into token order for one [32 × 128] product a group, and the initial accumulator holds
q·m − unit·Σ(q·s). Values: a product a channel group of 32 (kivi4: a code position, 16 rows;
kivi2: two joined), its second operand the weights times the tokens' scales; Σ weight·minimum
and Σ weight·scale are one more product a step, added at the end. One group a step, a program
a (sequence, KV head) for the residual ring.

Counts each loop's warp instructions, compiled for sm_90 with the tools in the installed
triton wheel. (Its values are not exact: the value side's units, up to 1024, multiply the
float16 rounding of weight times scale, which the correction's sum does not share; on the
interpreter it was 1–4% from the reference where the decode kernel is within 0.03%.)

    python bench/probes/kivi_after.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kvcore.kernels.kivi_triton import _codes_asm, _program  # noqa: E402
from kvcore.kernels.triton_ops import pdl_enter, softmax_next  # noqa: E402

#: code k of each byte as 2^(10 − BITS·k) + c: _codes_asm's first step alone
UNITS2_ASM = tl.constexpr(_codes_asm(2, scaled=False))
UNITS4_ASM = tl.constexpr(_codes_asm(4, scaled=False))


@triton.jit
def _code_units(byte, BITS: tl.constexpr, ASM: tl.constexpr):
    """Bytes of packed BITS-bit codes → 8 / BITS float16 tensors of their shape: code k of every
    byte as 2^(10 − BITS·k) + c, exact (ASM: UNITS*_ASM; else integer arithmetic, the
    interpreter's path)."""
    if ASM:
        if BITS == 2:
            return tl.inline_asm_elementwise(
                UNITS2_ASM, "=r,=r,=r,=r,=r,=r,=r,=r,r", [byte],
                dtype=(tl.float16, tl.float16, tl.float16, tl.float16), is_pure=True, pack=4)
        else:
            return tl.inline_asm_elementwise(
                UNITS4_ASM, "=r,=r,=r,=r,r", [byte],
                dtype=(tl.float16, tl.float16), is_pure=True, pack=4)
    else:
        b = byte.to(tl.int32)
        if BITS == 2:
            return ((b & 3) + 1024).to(tl.float16), (((b >> 2) & 3) + 256).to(tl.float16), \
                (((b >> 4) & 3) + 64).to(tl.float16), ((b >> 6) + 16).to(tl.float16)
        else:
            return ((b & 15) + 1024).to(tl.float16), ((b >> 4) + 64).to(tl.float16)


@triton.jit
def _after_values(VQ, VS, pt, slot, cg: tl.constexpr, acc_a, acc_b, BITS: tl.constexpr,
                  PER: tl.constexpr, G: tl.constexpr, ASM: tl.constexpr):
    """Channel group ``cg`` (G channels) of a group's values in kivi_decode_after_kernel: its
    codes (as 2^(10 − BITS·k) + c) times the weights pt [G tokens, QPAD] times the tokens'
    scales of the group, added to its two output blocks acc_a, acc_b [16, QPAD] (kivi4: codes 0
    and 1, row b channel PER·b + k; kivi2: codes 0, 1 and 2, 3, row 2b + j channel
    4b + 2·block + j). The units and the minimums are added once, at the end."""
    GB: tl.constexpr = G // PER
    t = tl.arange(0, G)
    jb = tl.arange(0, GB)
    vb = tl.load(VQ + (slot * (4 * GB) + cg * GB + jb[:, None]) * G + t[None, :])
    vs = tl.load(VS + (slot * 4 + cg) * G + t).to(tl.float32)
    w = (pt * vs[:, None]).to(tl.float16)
    if PER == 4:
        v0, v1, v2, v3 = _code_units(vb, BITS, ASM)
        a = tl.reshape(tl.permute(tl.join(v0, v1), (0, 2, 1)), (16, G))
        b = tl.reshape(tl.permute(tl.join(v2, v3), (0, 2, 1)), (16, G))
    else:
        a, b = _code_units(vb, BITS, ASM)
    return tl.dot(a, w, acc_a), tl.dot(b, w, acc_b)


@triton.jit
def _after_store(ACC, acc, corr, cg: tl.constexpr, blk: tl.constexpr, base, omask,
                 BITS: tl.constexpr, PER: tl.constexpr, G: tl.constexpr, NC: tl.constexpr,
                 DP: tl.constexpr):
    """An output block [16, QPAD] of kivi_decode_after_kernel (_after_values' rows) plus its
    rows' minimums' and units' terms, stored at its channels of each query row's partial
    output."""
    r = tl.arange(0, 16)
    if PER == 4:
        ch = cg * G + 4 * (r // 2) + 2 * blk + r % 2
        k = 2 * blk + r % 2
    else:
        ch = cg * G + 2 * r + blk
        k = r * 0 + blk
    unit = tl.exp2((10 - BITS * k).to(tl.float32))
    rc = tl.arange(0, 16)
    mins = tl.sum(tl.where(rc[:, None] == cg, corr, 0.0), axis=0)
    scales = tl.sum(tl.where(rc[:, None] == NC + cg, corr, 0.0), axis=0)
    out = acc + mins[None, :] - unit[:, None] * scales[None, :]
    tl.store(ACC + base[None, :] * DP + ch[:, None], out, mask=omask[None, :])


@triton.jit
def kivi_decode_after_kernel(Q, ACC, ML, KQ, KS, KM, VQ, VS, VM, KR, VR, NQ, NR, GT, stride_gt,
                             RING, n_splits, qk_scale,
                             H: tl.constexpr, GROUP: tl.constexpr, QPAD: tl.constexpr,
                             D: tl.constexpr, G: tl.constexpr, BITS: tl.constexpr,
                             PER: tl.constexpr, SPLIT: tl.constexpr, ASM: tl.constexpr,
                             QB: tl.constexpr = 1, PDL: tl.constexpr = False):
    """KIVI decode with the scales and minimums after the products (K and V, heads of 128
    lanes, groups of G = 32 tokens, products swapped). Programs 0 … n_splits − 2 take SPLIT
    quantized tokens of a sequence, one group a step; the last program of a (sequence, KV head)
    takes its residual ring. Partial outputs as kivi_decode_kernel's.

    Keys: the group's per-channel scales multiply the query (q·s, the product's second
    operand), its codes unpacked to 2^(10 − BITS·k) + c by one lop3 a pair are the first, token
    order joined from the code positions; the initial accumulator holds, for token t and query
    row r, q·m − 2^(10 − BITS·(t mod PER))·Σ(q·s). Values: a channel group's codes times the
    weights times the tokens' scales of that group, a product each (16 rows: kivi4 one code
    position, kivi2 two joined); Σ weight·minimum and Σ weight·scale a channel group are one
    more product a step, kept beside the output and added at the end. The weights are not
    lazy (at most 1), so that weights times scales stay within float16."""
    tl.static_assert(D == 128 and G == 32, "heads of 128 lanes, groups of 32 tokens")
    pdl_enter(PDL)
    s, h, sp, nq, start, end, rows, q32 = _program(Q, NQ, NR, qk_scale, SPLIT, H, GROUP, QPAD,
                                                   QB, D, D)
    d = tl.arange(0, D)
    m_i = tl.full([QPAD], float("-inf"), tl.float32)
    l_i = tl.zeros([QPAD], tl.float32)
    omask = rows < GROUP
    base = ((s * H + h) * GROUP + rows) * n_splits + sp
    if sp < n_splits - 1:
        NC: tl.constexpr = D // G
        GB: tl.constexpr = G // PER
        t = tl.arange(0, G)
        jb = tl.arange(0, GB)
        r16 = tl.arange(0, 16)
        unit_t = tl.exp2((10 - BITS * (t % PER)).to(tl.float32))
        a00 = tl.zeros([16, QPAD], tl.float32)
        a01 = tl.zeros([16, QPAD], tl.float32)
        a10 = tl.zeros([16, QPAD], tl.float32)
        a11 = tl.zeros([16, QPAD], tl.float32)
        a20 = tl.zeros([16, QPAD], tl.float32)
        a21 = tl.zeros([16, QPAD], tl.float32)
        a30 = tl.zeros([16, QPAD], tl.float32)
        a31 = tl.zeros([16, QPAD], tl.float32)
        corr = tl.zeros([16, QPAD], tl.float32)
        qend = tl.minimum(end, nq)
        for t0 in range(start, qend, G):
            slot = tl.load(GT + s * stride_gt + t0 // G).to(tl.int64) * H + h
            kb = tl.load(KQ + (slot * GB + jb[None, :]) * D + d[:, None])
            ks = tl.load(KS + slot * D + d).to(tl.float32)
            km = tl.load(KM + slot * D + d).to(tl.float32)
            qs = (q32 * ks[None, :]).to(tl.float16)
            qsum = tl.sum(qs.to(tl.float32), axis=1)
            qmin = tl.sum(q32 * km[None, :], axis=1)
            init = qmin[None, :] - unit_t[:, None] * qsum[None, :]
            if PER == 4:
                k0, k1, k2, k3 = _code_units(kb, BITS, ASM)
                kt = tl.reshape(tl.join(tl.join(k0, k2), tl.join(k1, k3)), (D, G))
            else:
                k0, k1 = _code_units(kb, BITS, ASM)
                kt = tl.reshape(tl.join(k0, k1), (D, G))
            scores = tl.trans(tl.dot(tl.trans(kt), tl.trans(qs), init))
            p, alpha, m_i, l_i, grow = softmax_next(scores, t0 + t < qend, m_i, l_i, False)
            pt = tl.trans(p)
            a = alpha[None, :]
            # the minimums (rows 0 … NC − 1) and scales (NC … 2 NC − 1) of the tokens
            mrow = tl.where(r16 < NC, r16, r16 - NC)
            mptr = tl.where(r16 < NC, VM, VS)[:, None] + (slot * NC + mrow[:, None]) * G \
                + t[None, :]
            ms = tl.load(mptr, mask=(r16 < 2 * NC)[:, None], other=0.0)
            corr = tl.dot(ms, pt.to(tl.float16), corr * a)
            a00, a01 = _after_values(VQ, VS, pt, slot, 0, a00 * a, a01 * a, BITS, PER, G, ASM)
            a10, a11 = _after_values(VQ, VS, pt, slot, 1, a10 * a, a11 * a, BITS, PER, G, ASM)
            a20, a21 = _after_values(VQ, VS, pt, slot, 2, a20 * a, a21 * a, BITS, PER, G, ASM)
            a30, a31 = _after_values(VQ, VS, pt, slot, 3, a30 * a, a31 * a, BITS, PER, G, ASM)
        _after_store(ACC, a00, corr, 0, 0, base, omask, BITS, PER, G, NC, D)
        _after_store(ACC, a01, corr, 0, 1, base, omask, BITS, PER, G, NC, D)
        _after_store(ACC, a10, corr, 1, 0, base, omask, BITS, PER, G, NC, D)
        _after_store(ACC, a11, corr, 1, 1, base, omask, BITS, PER, G, NC, D)
        _after_store(ACC, a20, corr, 2, 0, base, omask, BITS, PER, G, NC, D)
        _after_store(ACC, a21, corr, 2, 1, base, omask, BITS, PER, G, NC, D)
        _after_store(ACC, a30, corr, 3, 0, base, omask, BITS, PER, G, NC, D)
        _after_store(ACC, a31, corr, 3, 1, base, omask, BITS, PER, G, NC, D)
    else:
        # the residual ring: float16 rows
        n = nq + tl.load(NR + s).to(tl.int64)
        q = q32.to(tl.float16)
        acc = tl.zeros([D, QPAD], tl.float32)
        for t0 in range(nq, n, G):
            tok = t0 + tl.arange(0, G)
            tmask = tok < n
            rb = (s * H + h) * RING + tok % RING
            krow = tl.load(KR + rb[:, None] * D + d[None, :], mask=tmask[:, None], other=0.0)
            vrow = tl.load(VR + rb[:, None] * D + d[None, :], mask=tmask[:, None], other=0.0)
            scores = tl.trans(tl.dot(krow, tl.trans(q)))
            p, alpha, m_i, l_i, grow = softmax_next(scores, tmask, m_i, l_i, False)
            acc = tl.dot(tl.trans(vrow), tl.trans(p.to(tl.float16)), acc * alpha[None, :])
        tl.store(ACC + base[None, :] * D + d[:, None], acc, mask=omask[None, :])
    tl.store(ML + base * 2, m_i, mask=omask)
    tl.store(ML + base * 2 + 1, l_i, mask=omask)


def _loop_count(kernel, sass: str, usage) -> str:
    import sass_count as sc

    lines = [ln for ln in sass.splitlines() if sc.INSTRUCTION.match(ln)]
    loop = sc._loop(sass, lines)
    body = lines[loop[0]:loop[1] + 1]
    ops = ", ".join(f"{op} {n}" for op, n in sc._opcodes(body).most_common(10))
    return f"{sc._registers(usage)} registers, loop {len(body)} instructions ({ops})"


def main() -> None:
    import sass_count as sc

    sig = {"Q": "*fp16", "ACC": "*fp32", "ML": "*fp32", "KQ": "*u8", "KS": "*fp16",
           "KM": "*fp16", "VQ": "*u8", "VS": "*fp16", "VM": "*fp16", "KR": "*fp16",
           "VR": "*fp16", "NQ": "*i32", "NR": "*i32", "GT": "*i32", "stride_gt": "i32",
           "RING": "i32", "n_splits": "i32", "qk_scale": "fp32"}
    for bits in (2, 4):
        now = sc.compile_kivi_decode(bits)
        print(f"kivi{bits} decode (64 tokens a step): {_loop_count(*now)}")
        consts = dict(H=8, GROUP=4, QPAD=8, D=128, G=32, BITS=bits, PER=8 // bits, SPLIT=1024,
                      ASM=True, QB=1, PDL=False)
        after = sc._compile(kivi_decode_after_kernel, sig, consts, ("RING",),
                            {"num_warps": 1, "num_stages": 2, "maxnreg": 168})
        print(f"kivi{bits} after (32 tokens a step): {_loop_count(*after)}")


if __name__ == "__main__":
    main()
