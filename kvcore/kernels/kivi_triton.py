"""Triton kernels for KIVI caches: quantize the groups an append flushes (from the residual ring
and the new tokens) into the quantized region, and fused split-K decode attention over
quantized groups plus the f16 residual ring."""

from __future__ import annotations

import triton
import triton.language as tl

from .triton_ops import pdl_enter, softmax_next


@triton.jit
def _below(x, n: tl.constexpr, WHOLE: tl.constexpr):
    """x < n, or a constant true mask where the lanes are known to be whole (no padding), so
    that a power-of-two head dimension compiles without masks."""
    if WHOLE:
        return tl.full(x.shape, 1, tl.int1)
    else:
        return x < n


@triton.jit
def _fmin(a, b):
    return tl.minimum(a, b)


@triton.jit
def _fmax(a, b):
    return tl.maximum(a, b)


@triton.jit
def _pack2(a, b, HW: tl.constexpr):
    """Float16 a and b as the low and high halves of an int32."""
    if HW:
        return tl.inline_asm_elementwise("mov.b32 $0, {$1, $2};", "=r,h,h", [a, b],
                                         dtype=tl.int32, is_pure=True, pack=1)
    else:
        return ((b.to(tl.int16, bitcast=True).to(tl.int32) << 16)
                | (a.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF))


@triton.jit
def _unpack2(p, HW: tl.constexpr):
    """_pack2's halves back: (low, high) as float16."""
    if HW:
        return tl.inline_asm_elementwise("mov.b32 {$0, $1}, $2;", "=h,=h,r", [p],
                                         dtype=(tl.float16, tl.float16), is_pure=True, pack=1)
    else:
        return ((p & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True),
                (p >> 16).to(tl.int16).to(tl.float16, bitcast=True))


@triton.jit
def _min2_hw(a, b):
    return tl.inline_asm_elementwise("min.f16x2 $0, $1, $2;", "=r,r,r", [a, b],
                                     dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _max2_hw(a, b):
    return tl.inline_asm_elementwise("max.f16x2 $0, $1, $2;", "=r,r,r", [a, b],
                                     dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _min2(a, b):
    a0, a1 = _unpack2(a, False)
    b0, b1 = _unpack2(b, False)
    return _pack2(tl.minimum(a0, b0), tl.minimum(a1, b1), False)


@triton.jit
def _max2(a, b):
    a0, a1 = _unpack2(a, False)
    b0, b1 = _unpack2(b, False)
    return _pack2(tl.maximum(a0, b0), tl.maximum(a1, b1), False)


@triton.jit
def _pairs_range(a, b, c, d, AXIS: tl.constexpr, HW: tl.constexpr):
    """The minimums of a and b and the maximums of c and d (float16) along AXIS, each pair
    in one 32-bit word: one reduction of packed words for a and b, one for c and d."""
    if HW:
        lo = tl.reduce(_pack2(a, b, HW), AXIS, _min2_hw)
        hi = tl.reduce(_pack2(c, d, HW), AXIS, _max2_hw)
    else:
        lo = tl.reduce(_pack2(a, b, HW), AXIS, _min2)
        hi = tl.reduce(_pack2(c, d, HW), AXIS, _max2)
    a, b = _unpack2(lo, HW)
    c, d = _unpack2(hi, HW)
    return a, b, c, d


@triton.jit
def _lane_key_range(k, G: tl.constexpr, HW: tl.constexpr):
    """Each channel's minimum and maximum over the G tokens of a LANE_TOKENS tile k [G, G]
    (float16, row q · 8 + L): over a thread's G/8 rows in float16, then across the 8 lane
    rows with two neighbouring channels in one 32-bit word, so that a shuffle and a packed
    min or max serve both."""
    k4 = tl.reshape(k, (G // 8, 8, G))
    lo = tl.reduce(k4, 0, _fmin)
    hi = tl.reduce(k4, 0, _fmax)
    a, b = tl.split(tl.reshape(lo, (8, G // 2, 2)))
    c, d = tl.split(tl.reshape(hi, (8, G // 2, 2)))
    a, b, c, d = _pairs_range(a, b, c, d, 0, HW)
    return tl.reshape(tl.join(a, b), (G,)), tl.reshape(tl.join(c, d), (G,))


@triton.jit
def _lane_value_range(v, G: tl.constexpr, HW: tl.constexpr):
    """Each row's minimum and maximum over the G channels of a LANE_TOKENS tile v [G, G]
    (float16, row q · 8 + L, a thread's 8 channels of 4 lane columns): over a thread's
    channels in float16, then across the lane columns with rows q and q + 1 in one 32-bit
    word."""
    v3 = tl.reshape(v, (G, 4, G // 4))
    lo = tl.reshape(tl.reduce(v3, 2, _fmin), (G // 16, 2, 8, 4))
    hi = tl.reshape(tl.reduce(v3, 2, _fmax), (G // 16, 2, 8, 4))
    a, b = tl.split(tl.permute(lo, (0, 2, 3, 1)))
    c, d = tl.split(tl.permute(hi, (0, 2, 3, 1)))
    a, b, c, d = _pairs_range(a, b, c, d, 2, HW)
    return (tl.reshape(tl.permute(tl.join(a, b), (0, 2, 1)), (G,)),
            tl.reshape(tl.permute(tl.join(c, d), (0, 2, 1)), (G,)))


@triton.jit
def _scale(lo, hi, LEVELS: tl.constexpr):
    """A group's scale, as the reference computes it: (hi − lo) times 1/LEVELS rounded to
    float32 (a constant: a division here compiles to an approximate reciprocal), then rounded
    to float16."""
    return ((hi.to(tl.float32) - lo.to(tl.float32)) * (1.0 / LEVELS)).to(tl.float16)


@triton.jit
def _reciprocal(x, RCP_FMA: tl.constexpr):
    """1 / x for x > 0, rounded to nearest, in float32. RCP_FMA (a GPU only): the
    approximate reciprocal and one Newton step of two fused multiply-adds, without the
    correctly rounded division's range check and its slow path; used only where every
    float32 this kernel takes (a float16 scale, or one below float16's normal range plus
    2⁻²⁴) was checked on the GPU to give the division's result
    (bench/probes/kivi_lane_tokens.py)."""
    if RCP_FMA:
        return tl.inline_asm_elementwise(
            "{ .reg .f32 r, e; rcp.approx.ftz.f32 r, $1; neg.f32 e, $1; "
            "fma.rn.f32 e, e, r, 0f3F800000; fma.rn.f32 $0, r, e, r; }",
            "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    else:
        return tl.math.div_rn(1.0, x)


@triton.jit
def _divisor(scf):
    """What a float32 scale's reciprocal is taken of: the scale, or below float16's normal
    range (2⁻¹⁴) the scale plus one float16 unit there (2⁻²⁴; _quantize says why)."""
    return tl.where(scf < 0.00006103515625, scf + 5.960464477539063e-08, scf)


@triton.jit
def _quantize(x, mn, sc, HW: tl.constexpr, RCP_FMA: tl.constexpr = False):
    """The codes of x given its group's minimum ``mn`` and scale ``sc`` (float16, broadcast
    against x, mn at most x), as the reference computes them: (x − mn) times the correctly
    rounded reciprocal of the scale, rounded to the nearest integer, ties to even, all in
    float32; the reciprocal 0 where the scale is 0, and that of the scale plus 2⁻²⁴ where the
    scale is below float16's normal range. No code passes LEVELS, so none is clamped: a normal
    scale is at most 2⁻¹¹ below (max − min) / LEVELS, which moves the top quotient by less
    than a half; a smaller one is rounded by up to 2⁻²⁵, and one unit (2⁻²⁴) more makes it no
    smaller than that quotient's scale. Returned as int32 whose low bits are the code (one add
    of 2²³ rounds and converts: the bits above are dropped where the codes are packed into
    bytes); on a GPU (HW) the add goes through PTX, so that it cannot be fused with the
    product."""
    scf = sc.to(tl.float32)
    up = _divisor(scf)
    if RCP_FMA and HW:
        # a zero scale's Newton step gives NaN, not a fault: no operand to guard
        r = tl.where(scf > 0, _reciprocal(up, True), 0.0)
    else:
        r = tl.where(scf > 0, _reciprocal(tl.where(scf > 0, up, 1.0), False), 0.0)
    q = (x.to(tl.float32) - mn.to(tl.float32)) * r
    if HW:
        magic = tl.full(q.shape, 8388608.0, tl.float32)
        t = tl.inline_asm_elementwise("add.rn.f32 $0, $1, $2;", "=r,r,r", [q, magic],
                                      dtype=tl.float32, is_pure=True, pack=1)
    else:
        t = q + 8388608.0
    return t.to(tl.int32, bitcast=True)


@triton.jit
def _group_rows(R, X, old, rb, xb, d, dm, D: tl.constexpr):
    """The float16 rows [G, columns d] of one group: a token below ``live`` (``old``)
    from the ring R (row rb), a later one from the new tokens X (row xb). New tokens in float16
    (as the ring): one load through a pointer chosen per row, the same choice along a row, so
    that the compiler still knows each row starts aligned (a row is D elements) and reads it in
    vectors. In another type: two loads, each masked to its rows."""
    m = dm[None, :] & (old[:, None] | True)  # the columns inside the row, on every row
    if X.dtype.element_ty == tl.float16:
        p = tl.where(old[:, None], R + rb[:, None] * D + d[None, :],
                     X + xb[:, None] * D + d[None, :])
        return tl.load(p, mask=m, other=0.0)
    else:
        return tl.where(old[:, None],
                        tl.load(R + rb[:, None] * D + d[None, :], mask=m & old[:, None],
                                other=0.0),
                        tl.load(X + xb[:, None] * D + d[None, :], mask=m & ~old[:, None],
                                other=0.0).to(tl.float16))


@triton.jit
def _ring_block(KR, VR, XK, XV, slot, src, m, d, dm, dvm, D: tl.constexpr, DV: tl.constexpr,
                HAS_V: tl.constexpr):
    """Columns d of the new tokens' rows ``src`` (rows of XK [n, H, D], XV [n, H, DV]) into
    the residual ring's rows ``slot``, as float16, where ``m`` ([T] rows; dm, dvm: the columns
    inside K's and V's rows)."""
    mk = m[:, None] & dm[None, :]
    tl.store(KR + slot[:, None] * D + d[None, :],
             tl.load(XK + src[:, None] * D + d[None, :], mask=mk).to(tl.float16), mask=mk)
    if HAS_V:
        mv = m[:, None] & dvm[None, :]
        tl.store(VR + slot[:, None] * DV + d[None, :],
                 tl.load(XV + src[:, None] * DV + d[None, :], mask=mv).to(tl.float16), mask=mv)


@triton.jit
def kivi_flush_kernel(KR, VR, XK, XV, KQ, KS, KM, VQ, VS, VM, GT, s, stride_gt, g0, nflush,
                      live, first, n, RING, j_first, H: tl.constexpr, D: tl.constexpr,
                      DV: tl.constexpr, G: tl.constexpr, BITS: tl.constexpr, PER: tl.constexpr,
                      LEVELS: tl.constexpr, HAS_V: tl.constexpr, TOK: tl.constexpr = 32,
                      RING_SLOTS: tl.constexpr = True, HW: tl.constexpr = False,
                      LATE_V: tl.constexpr = False, STAGES: tl.constexpr = 3, PLANS=None,
                      BATCHED: tl.constexpr = False, PARTS: tl.constexpr = 1,
                      LANE_TOKENS: tl.constexpr = False, RCP_FMA: tl.constexpr = False,
                      PACKED_RANGE: tl.constexpr = False):
    """An append to sequence ``s`` of the new tokens XK [n, H, D] and XV [n, H, DV] (token
    live + i at row i; ``live``: the tokens held before it) in one launch. DV: the width of
    V's rows (D but where K and V differ; both multiples of G). HAS_V false: a K-only cache
    (DV = D).

    Program (j, h), j < nflush: quantize group g0 + j into the slot the group table GT gives
    it. A token below ``live`` comes from the residual ring, a later one from the new tokens,
    read as float16 as the ring holds them. The program walks the channels in blocks of G: a
    key's scale and minimum are a channel's over the group's G tokens, a value's those of a
    token over G channels, so each [G, G] block of either is quantized and stored on its own
    and a thread holds only a block at a time. LATE_V: a block's values loaded once its keys
    are stored, not with them. STAGES: the channel blocks whose rows are in flight at once (the
    next ones' loads issued, through shared memory, before a block is quantized).

    RING_SLOTS: the last of the new tokens (i from ``first`` to n) also go into their ring
    slots (live + i) mod RING. A slot that a flushed token is read from takes its new token
    from the program that reads it, once it has (after the group's loop); the programs
    j ≥ nflush write the other slots, TOK new tokens each, and can run at any time.
    ``j_first``: the launch's first program j (0; a launch in parts puts the writers first).

    BATCHED: the appends of several sequences in one launch, program (j, h, b) doing program
    (j, h) of append b, whose s, g0, nflush, live, first and n are row b of PLANS [B, 7] (int32)
    and whose new tokens are rows PLANS[b, 6] … of XK and XV (the appends' tokens one after
    another); the scalar arguments are not read. An append of fewer programs than the grid's
    leaves its last ones idle: a writer past its tokens stores nothing.

    PARTS: each program j's channels shared among PARTS programs (j · PARTS + part), each
    taking (max(D, DV) / G) / PARTS of the G-channel blocks, in its group and in its ring
    slots alike: a block is quantized, and a ring slot's columns read and written, by one
    program whatever the others do, so more programs share a short append.

    LANE_TOKENS: the tile's row r holds token (r mod 8) · G/8 + r // 8, so that a one-warp
    tile's lane rows hold consecutive tokens and a key byte's codes are packed in one thread.
    RCP_FMA (on a GPU): the scales' reciprocals by one Newton step (_reciprocal).
    PACKED_RANGE (with LANE_TOKENS): the keys' and values' minimums and maximums in float16,
    two a 32-bit word across lanes (_lane_key_range, _lane_value_range). The bytes are the
    same with or without each."""
    NCB: tl.constexpr = (D if D > DV else DV) // G // PARTS
    if PARTS == 1:
        j0 = j_first + tl.program_id(0)
        cb0 = 0
    else:
        j0 = j_first + tl.program_id(0) // PARTS
        cb0 = (tl.program_id(0) % PARTS) * NCB
    h = tl.program_id(1).to(tl.int64)
    xoff = 0
    if BATCHED:
        row = PLANS + tl.program_id(2) * 7
        s = tl.load(row)
        g0 = tl.load(row + 1)
        nflush = tl.load(row + 2)
        live = tl.load(row + 3)
        first = tl.load(row + 4)
        n = tl.load(row + 5)
        xoff = tl.load(row + 6).to(tl.int64)
    c = tl.arange(0, G)
    if j0 < nflush:
        gi = g0 + j0
        if LANE_TOKENS:
            # tile row r holds token (r mod 8) · G/8 + r // 8: a one-warp tile's 8 lane rows
            # each hold G/8 consecutive tokens, so a byte's codes are packed in one thread
            r = tl.arange(0, G)
            t = (r % 8) * (G // 8) + r // 8
        else:
            t = tl.arange(0, G)
        tok = gi.to(tl.int64) * G + t
        old = tok < live
        rb = (s * H + h) * RING + tok % RING
        xb = (tok - live + xoff) * H + h
        gbase = tl.load(GT + s * stride_gt + gi).to(tl.int64) * H + h
        j = tl.arange(0, G // PER)  # K's bytes of a channel, V's of a token in a block
        kshift = (tl.arange(0, PER) * BITS)[None, :, None]
        vshift = (tl.arange(0, PER) * BITS)[None, None, :]
        for cb in tl.range(cb0, cb0 + NCB, num_stages=STAGES):
            d = cb * G + c
            # a block lies wholly inside a row or wholly past it (D, DV multiples of G)
            dm = _below(d, D, D == DV)
            dvm = _below(d, DV, D == DV)
            k = _group_rows(KR, XK, old, rb, xb, d, dm, D)
            if HAS_V and not LATE_V:
                v = _group_rows(VR, XV, old, rb, xb, d, dvm, DV)
            # keys (float16: their minimum and maximum are exact in it): per channel over the
            # G tokens; packed along tokens: byte j of channel d holds tokens PER·j …
            # PER·j + PER − 1, the bytes lie [G/PER, D], channels contiguous
            if LANE_TOKENS and PACKED_RANGE:
                km, kx = _lane_key_range(k, G, HW)
            else:
                km = tl.min(k, axis=0)
                kx = tl.max(k, axis=0)
            ks = _scale(km, kx, LEVELS)
            kc = _quantize(k, km[None, :], ks[None, :], HW, RCP_FMA)
            if LANE_TOKENS:
                # rows r = q · 8 + L hold token Q·L + q (Q = G/8 a lane row): byte
                # L · Q/PER + q // PER, its code q mod PER
                kb = tl.sum(tl.reshape(kc, (G // 8 // PER, PER, 8, G))
                            << (tl.arange(0, PER) * BITS)[None, :, None, None], axis=1)
                jb = (tl.arange(0, 8)[None, :] * (G // 8 // PER)
                      + tl.arange(0, G // 8 // PER)[:, None])  # [Q/PER, 8]
                tl.store(KQ + (gbase * (G // PER) + jb[:, :, None]) * D + d[None, None, :],
                         kb.to(tl.uint8), mask=dm[None, None, :])
            else:
                kbytes = tl.sum(tl.reshape(kc, (G // PER, PER, G)) << kshift, axis=1)
                tl.store(KQ + (gbase * (G // PER) + j[:, None]) * D + d[None, :],
                         kbytes.to(tl.uint8), mask=dm[None, :])  # [G/PER, G]
            tl.store(KS + gbase * D + d, ks, mask=dm)
            tl.store(KM + gbase * D + d, km, mask=dm)
            if HAS_V:
                if LATE_V:
                    v = _group_rows(VR, XV, old, rb, xb, d, dvm, DV)
                # values: per token over the block's G channels (channel group cb); the planes
                # lie token-minor: byte c of token t at [c, t], the scale and minimum of group
                # cb at [cb, t]
                if LANE_TOKENS and PACKED_RANGE:
                    vm, vx = _lane_value_range(v, G, HW)
                else:
                    vm = tl.min(v, axis=1)
                    vx = tl.max(v, axis=1)
                vs = _scale(vm, vx, LEVELS)
                vc = _quantize(v, vm[:, None], vs[:, None], HW, RCP_FMA)
                vbytes = tl.sum(tl.reshape(vc, (G, G // PER, PER)) << vshift, axis=2)
                tm = _below(cb * G + 0 * t, DV, D == DV)  # [G]: the block inside V's rows
                tl.store(VQ + (gbase * (DV // PER) + cb * (G // PER) + j[None, :]) * G
                         + t[:, None], vbytes.to(tl.uint8), mask=tm[:, None])
                tl.store(VS + (gbase * (DV // G) + cb) * G + t, vs, mask=tm)
                tl.store(VM + (gbase * (DV // G) + cb) * G + t, vm, mask=tm)
        if RING_SLOTS and gi * G < live:
            # the slot of each token read from the ring takes the new token i ≡ tok − live
            # (mod RING) among first … n − 1, if there is one (tok − live ≥ −RING: every
            # operand of a remainder is kept non-negative)
            a = (tok - live + RING) % RING
            i = first + (a - first % RING + RING) % RING
            for cb in range(cb0, cb0 + NCB):
                d = cb * G + c
                _ring_block(KR, VR, XK, XV, rb, (i + xoff) * H + h, old & (i < n), d,
                            _below(d, D, D == DV), _below(d, DV, D == DV), D, DV, HAS_V)
    else:
        i = first + (j0 - nflush) * TOK + tl.arange(0, TOK)
        # the token the slot held: a flushed one's slot is written by the program that reads it
        prev = live + i % RING - RING
        m = (i < n) & ~((prev >= g0 * G) & (prev < (g0 + nflush) * G))
        slot = (s * H + h) * RING + (live + i) % RING
        for cb in range(cb0, cb0 + NCB):
            d = cb * G + c
            _ring_block(KR, VR, XK, XV, slot, (i.to(tl.int64) + xoff) * H + h, m, d,
                        _below(d, D, D == DV), _below(d, DV, D == DV), D, DV, HAS_V)


def _codes_asm(bits: int, scaled: bool = True) -> str:
    """PTX for four bytes of BITS-bit codes → the values c·s + m of their 8/BITS codes as
    float16 pairs: output pair 2k holds code k of bytes 0 and 1, pair 2k + 1 of bytes 2 and 3. Operands: the outputs, the four bytes, then the bytes' scales and minimums as float16
    pairs (bytes 0 and 1, bytes 2 and 3). The bytes are spread into the low halves of two
    words; code k is then masked into the mantissa of the float16 whose units are 1 at that
    position (2^(10 − BITS·k)), that power of two is subtracted (exact), and one fused
    multiply-add rounds c·s + m once. Without ``scaled``: 2^(10 − BITS·k) + c, no subtraction,
    no scale or minimum operands."""
    src = 2 * (8 // bits)
    body = [".reg .b32 t0, t1, z, u;", "mov.b32 z, 0;",
            f"prmt.b32 t0, ${src}, z, 0x4140;", f"prmt.b32 t1, ${src}, z, 0x4342;"]
    for k in range(8 // bits):
        unit = ((25 - bits * k) << 10) * 0x10001
        mask = (((1 << bits) - 1) << (bits * k)) * 0x10001
        body.append(f"mov.b32 u, 0x{unit:08X};")
        for h in (0, 1):
            out = f"${2 * k + h}"
            body.append(f"lop3.b32 {out}, t{h}, 0x{mask:08X}, u, 0xea;")
            if scaled:
                body += [f"sub.rn.f16x2 {out}, {out}, u;",
                         f"fma.rn.f16x2 {out}, {out}, ${src + 1 + h}, ${src + 3 + h};"]
    return "{\n" + "\n".join(body) + "\n}"


#: every code of a byte: kivi2's four, kivi4's two
CODES2_ASM = tl.constexpr(_codes_asm(2))
CODES4_ASM = tl.constexpr(_codes_asm(4))


@triton.jit
def _code_values(byte, sc, mn, BITS: tl.constexpr, ASM: tl.constexpr):
    """Bytes of packed BITS-bit codes (uint8) and the scale and minimum of each (float16,
    broadcast against the bytes) → 8 / BITS float16 tensors of the bytes' shape: code k of
    every byte as c·s + m, rounded once. ASM: the PTX block (CODES*_ASM); otherwise float64 arithmetic rounded to
    float16, which gives the same values (the interpreter's path)."""
    if ASM:
        sc = tl.broadcast_to(sc, byte.shape)
        mn = tl.broadcast_to(mn, byte.shape)
        if BITS == 2:
            return tl.inline_asm_elementwise(
                CODES2_ASM, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r", [byte, sc, mn],
                dtype=(tl.float16, tl.float16, tl.float16, tl.float16), is_pure=True, pack=4)
        else:
            return tl.inline_asm_elementwise(
                CODES4_ASM, "=r,=r,=r,=r,r,r,r,r,r", [byte, sc, mn],
                dtype=(tl.float16, tl.float16), is_pure=True, pack=4)
    else:
        b = byte.to(tl.int32)
        s = sc.to(tl.float64)
        m = mn.to(tl.float64)
        if BITS == 2:
            return ((b & 3).to(tl.float64) * s + m).to(tl.float16), \
                (((b >> 2) & 3).to(tl.float64) * s + m).to(tl.float16), \
                (((b >> 4) & 3).to(tl.float64) * s + m).to(tl.float16), \
                ((b >> 6).to(tl.float64) * s + m).to(tl.float16)
        else:
            return ((b & 15).to(tl.float64) * s + m).to(tl.float16), \
                ((b >> 4).to(tl.float64) * s + m).to(tl.float16)


@triton.jit
def _program(Q, NQ, NR, qk_scale, SPLIT: tl.constexpr, H: tl.constexpr, GROUP: tl.constexpr,
             QPAD: tl.constexpr, QB: tl.constexpr, D: tl.constexpr, DP: tl.constexpr):
    """A KIVI decode program's place: (sequence, KV head, split, the sequence's quantized
    tokens, the split's first token and its end, its query rows of the head's group, their
    queries [QPAD, DP] float32 times qk_scale, zero on padded rows and lanes)."""
    s = tl.program_id(0).to(tl.int64)
    h = (tl.program_id(1) // QB).to(tl.int64)
    sp = tl.program_id(2).to(tl.int64)
    nq = tl.load(NQ + s).to(tl.int64)
    n = nq + tl.load(NR + s).to(tl.int64)
    start = sp * SPLIT
    end = tl.minimum(start + SPLIT, n)
    rows = (tl.program_id(1) % QB) * QPAD + tl.arange(0, QPAD)
    d = tl.arange(0, DP)
    q = tl.load(Q + ((s * H + h) * GROUP + rows[:, None]) * D + d[None, :],
                mask=(rows[:, None] < GROUP) & _below(d, D, DP == D)[None, :],
                other=0.0).to(tl.float32)
    return s, h, sp, nq, start, end, rows, q * qk_scale


@triton.jit
def _store_partial(ACC, ML, out, m_i, l_i, s, h, sp, rows, n_splits, H: tl.constexpr,
                   GROUP: tl.constexpr, DP: tl.constexpr):
    """A split's partial output [QPAD, DP], running max and sum of its real query rows into ACC
    and ML, as reduce_kernel reads them."""
    omask = rows < GROUP
    base = ((s * H + h) * GROUP + rows) * n_splits + sp
    tl.store(ACC + base[:, None] * DP + tl.arange(0, DP)[None, :], out, mask=omask[:, None])
    tl.store(ML + base * 2, m_i, mask=omask)
    tl.store(ML + base * 2 + 1, l_i, mask=omask)


@triton.jit
def _rescaled(alpha, grow, acc0, acc1, acc2, acc3, SWAP: tl.constexpr = False):
    """The output blocks times the rescale factor ``alpha`` of their query rows, where
    ``grow`` (SWAP: the blocks transposed, a query row a column)."""
    if grow:
        if SWAP:  # noqa: SIM108 (a compile-time branch)
            a = alpha[None, :]
        else:
            a = alpha[:, None]
        acc0 = acc0 * a
        acc1 = acc1 * a
        acc2 = acc2 * a
        acc3 = acc3 * a
    return acc0, acc1, acc2, acc3


@triton.jit
def _scores(q, qt, k, SWAP: tl.constexpr):
    """The scores [QPAD, n] of the query rows q [QPAD, DP] against the key tile k [DP, n];
    SWAP: as the product kᵀ·qᵀ (qt = qᵀ), the key tile the first operand and the query rows
    the narrow second one, transposed back."""
    if SWAP:  # noqa: SIM108 (a compile-time branch)
        s = tl.trans(tl.dot(tl.trans(k), qt))
    else:
        s = tl.dot(q, k)
    return s


@triton.jit
def _weighed(p, pt, v, acc, SWAP: tl.constexpr):
    """acc plus the weights p [QPAD, n] times the value tile v [n, W]; SWAP: the transposed
    output block [W, QPAD] plus vᵀ·pᵀ (pt = pᵀ)."""
    if SWAP:  # noqa: SIM108 (a compile-time branch)
        acc = tl.dot(tl.trans(v), pt, acc)
    else:
        acc = tl.dot(p, v, acc)
    return acc


@triton.jit
def kivi_decode_kernel(Q, ACC, ML, KQ, KS, KM, VQ, VS, VM, KR, VR, NQ, NR, GT, stride_gt,
                       RING, n_splits, qk_scale,
                       H: tl.constexpr, GROUP: tl.constexpr, QPAD: tl.constexpr,
                       D: tl.constexpr, DV: tl.constexpr, DP: tl.constexpr, G: tl.constexpr,
                       BITS: tl.constexpr, PER: tl.constexpr, LEVELS: tl.constexpr,
                       SPLIT: tl.constexpr, HAS_V: tl.constexpr, TOK: tl.constexpr,
                       ASM: tl.constexpr,
                       QB: tl.constexpr = 1, PDL: tl.constexpr = False,
                       LAZY: tl.constexpr = False, SWAP: tl.constexpr = False):
    """One (sequence, KV head, split) program over quantized groups, TOK tokens (TOK / G
    groups) a step, then over the residual ring; partial output, running max and sum go to
    ACC and ML as decode_split_kernel's do. D: the query's and K's width, DV: V's (D but where
    they differ; the partial output holds DV values). DP: the wider of D and DV rounded up to
    a power of two (the lanes past a row's width are masked to zero). HAS_V false: a K-only
    cache, V = the dequantized keys (DV = D).

    The packed bytes are read as they lie and unpacked by _code_values into float16 values,
    code k of every byte one tensor: no code moves between lanes. K's bytes run along tokens,
    so code k of a channel's byte j is token PER·j + k: each k is its own product with the
    query, and the scores of the PER products are interleaved back into token order. V's
    bytes run along channels: code k of a token's byte c is channel PER·c + k, so the output
    is kept in PER blocks of channels (k, k + PER, …; one block for a K-only cache) and put
    back in order when it is stored.

    A group of more query heads than QPAD is spread over QB programs of a KV head (program id
    1: KV head · QB + query block). ASM (a GPU): the PTX unpacking; the interpreter takes the
    float64 path, which gives the same float16 values. PDL: pdl_enter. LAZY: softmax_lazy.
    SWAP (K and V, heads under 512 lanes): every product swapped, the cache tile the first
    operand and the query rows (QPAD of 8 suffices) the narrow second one, the output blocks
    kept transposed [DP / PER, QPAD]: half the padded product work and output registers of 16
    rows for a group of up to 8."""
    tl.static_assert(not SWAP or (HAS_V and DP < 512), "SWAP: K and V, heads under 512 lanes")
    pdl_enter(PDL)
    s, h, sp, nq, start, end, rows, q32 = _program(Q, NQ, NR, qk_scale, SPLIT, H, GROUP, QPAD,
                                                   QB, D, DP)
    qend = tl.minimum(end, nq)
    d = tl.arange(0, DP)
    dm = _below(d, D, DP == D)
    q = q32.to(tl.float16)
    qt = tl.trans(q)
    # V's output blocks (one for a K-only cache: V is the keys, in channel order)
    NA: tl.constexpr = PER if HAS_V else 1
    m_i = tl.full([QPAD], float("-inf"), tl.float32)
    l_i = tl.zeros([QPAD], tl.float32)
    # (blocks a format does not use are one column wide)
    W2: tl.constexpr = DP // NA if NA >= 2 else 1
    W4: tl.constexpr = DP // NA if NA == 4 else 1
    if SWAP:
        acc0 = tl.zeros([DP // NA, QPAD], tl.float32)
        acc1 = tl.zeros([W2, QPAD], tl.float32)
        acc2 = tl.zeros([W4, QPAD], tl.float32)
        acc3 = tl.zeros([W4, QPAD], tl.float32)
    else:
        acc0 = tl.zeros([QPAD, DP // NA], tl.float32)
        acc1 = tl.zeros([QPAD, W2], tl.float32)
        acc2 = tl.zeros([QPAD, W4], tl.float32)
        acc3 = tl.zeros([QPAD, W4], tl.float32)
    # heads of 512 lanes or more take one group a step and their keys by shifts (below): a
    # product of 16 tokens holds a wide key tile in every warp (a K-only cache of wide heads,
    # an MLA latent, takes kivi_decode_keys_kernel)
    WIDE: tl.constexpr = DP >= 512
    tl.static_assert(HAS_V or not WIDE, "a K-only cache of wide heads: kivi_decode_keys_kernel")
    NG: tl.constexpr = TOK // G
    GB: tl.constexpr = G // PER
    NC: tl.constexpr = DP // G
    gi = tl.arange(0, NG)
    jb = tl.arange(0, GB)
    cg = tl.arange(0, NC)
    cgm = _below(cg, DV // G, DP == DV)
    c = tl.arange(0, TOK)
    for t0 in range(start, qend, TOK):
        # the tile's groups (whole groups: start and nq are multiples of G), their slots
        g = t0 // G + gi
        gok = g * G < qend
        slot = tl.load(GT + s * stride_gt + g, mask=gok, other=0).to(tl.int64) * H + h
        # K: bytes [DP, NG, GB] (they lie [GB, D] a group: the neighbouring channels that a
        # product pairs are neighbouring bytes), a channel's scale and minimum a group
        km3 = dm[:, None, None] & gok[None, :, None]
        kb = tl.load(KQ + (slot[None, :, None] * GB + jb[None, None, :]) * D + d[:, None, None],
                     mask=km3, other=0)
        km2 = dm[:, None] & gok[None, :]
        ksc = tl.load(KS + slot[None, :] * D + d[:, None], mask=km2, other=0.0)[:, :, None]
        kmn = tl.load(KM + slot[None, :] * D + d[:, None], mask=km2, other=0.0)[:, :, None]
        if WIDE:
            # one group a step (TOK = G): its codes by shifts into a tile in token order, the
            # group's per-channel scale folded into the query and its minimum into a bias a
            # row (a product of G tokens; the key tile of a wide head is not held PER times)
            kc = (kb.to(tl.int32)[:, :, :, None]
                  >> (tl.arange(0, PER) * BITS)[None, None, None, :]) & LEVELS
            kh = tl.reshape(kc, (DP, TOK)).to(tl.float16)
            ks1 = tl.reshape(ksc, (DP,)).to(tl.float32)
            km1 = tl.reshape(kmn, (DP,)).to(tl.float32)
            scores = tl.dot((q32 * ks1[None, :]).to(tl.float16), kh) \
                + tl.sum(q32 * km1[None, :], axis=1)[:, None]
        elif PER == 4:
            k0, k1, k2, k3 = _code_values(kb, ksc, kmn, BITS, ASM)
            s0 = _scores(q, qt, tl.reshape(k0, (DP, NG * GB)), SWAP)
            s1 = _scores(q, qt, tl.reshape(k1, (DP, NG * GB)), SWAP)
            s2 = _scores(q, qt, tl.reshape(k2, (DP, NG * GB)), SWAP)
            s3 = _scores(q, qt, tl.reshape(k3, (DP, NG * GB)), SWAP)
            scores = tl.reshape(tl.join(tl.join(s0, s2), tl.join(s1, s3)), (QPAD, TOK))
        else:
            k0, k1 = _code_values(kb, ksc, kmn, BITS, ASM)
            s0 = _scores(q, qt, tl.reshape(k0, (DP, NG * GB)), SWAP)
            s1 = _scores(q, qt, tl.reshape(k1, (DP, NG * GB)), SWAP)
            scores = tl.reshape(tl.join(s0, s1), (QPAD, TOK))
        tmask = t0 + c < qend
        p, alpha, m_i, l_i, grow = softmax_next(scores, tmask, m_i, l_i, LAZY)
        acc0, acc1, acc2, acc3 = _rescaled(alpha, grow, acc0, acc1, acc2, acc3, SWAP)
        p = p.to(tl.float16)
        pt = tl.trans(p)
        if HAS_V:
            # V: the tile's groups, bytes [NG, NC, GB, G] (they lie token-minor: the tokens a
            # product pairs are neighbouring bytes), a scale and a minimum a token and group of
            # G channels; code k of byte b of a token is channel PER·b + k
            tg = tl.arange(0, G)
            vm4 = gok[:, None, None, None] & cgm[None, :, None, None]
            vbase = slot[:, None, None, None] * (DV // PER) * G
            vb = tl.load(VQ + vbase + (cg[None, :, None, None] * GB + jb[None, None, :, None]) * G
                         + tg[None, None, None, :], mask=vm4, other=0)
            vm3 = gok[:, None, None] & cgm[None, :, None]
            sbase = slot[:, None, None] * (DV // G) * G + cg[None, :, None] * G \
                + tg[None, None, :]
            vsc = tl.load(VS + sbase, mask=vm3, other=0.0)[:, :, None, :]
            vmn = tl.load(VM + sbase, mask=vm3, other=0.0)[:, :, None, :]
            if PER == 4:
                v0, v1, v2, v3 = _code_values(vb, vsc, vmn, BITS, ASM)
                acc0 = _weighed(p, pt, tl.reshape(tl.permute(v0, (0, 3, 1, 2)), (TOK, DP // 4)),
                                acc0, SWAP)
                acc1 = _weighed(p, pt, tl.reshape(tl.permute(v1, (0, 3, 1, 2)), (TOK, DP // 4)),
                                acc1, SWAP)
                acc2 = _weighed(p, pt, tl.reshape(tl.permute(v2, (0, 3, 1, 2)), (TOK, DP // 4)),
                                acc2, SWAP)
                acc3 = _weighed(p, pt, tl.reshape(tl.permute(v3, (0, 3, 1, 2)), (TOK, DP // 4)),
                                acc3, SWAP)
            else:
                v0, v1 = _code_values(vb, vsc, vmn, BITS, ASM)
                acc0 = _weighed(p, pt, tl.reshape(tl.permute(v0, (0, 3, 1, 2)), (TOK, DP // 2)),
                                acc0, SWAP)
                acc1 = _weighed(p, pt, tl.reshape(tl.permute(v1, (0, 3, 1, 2)), (TOK, DP // 2)),
                                acc1, SWAP)
        else:
            # V is the keys: the weights of tokens PER·j + k (column PER·j + k of p) against
            # the key tile of code k
            if PER == 4:
                pe, po = tl.split(tl.reshape(p, (QPAD, NG * GB, 2, 2)))
                p0, p2 = tl.split(pe)
                p1, p3 = tl.split(po)
                acc0 = tl.dot(p0, tl.trans(tl.reshape(k0, (DP, NG * GB))), acc0)
                acc0 = tl.dot(p1, tl.trans(tl.reshape(k1, (DP, NG * GB))), acc0)
                acc0 = tl.dot(p2, tl.trans(tl.reshape(k2, (DP, NG * GB))), acc0)
                acc0 = tl.dot(p3, tl.trans(tl.reshape(k3, (DP, NG * GB))), acc0)
            else:
                p0, p1 = tl.split(tl.reshape(p, (QPAD, NG * GB, 2)))
                acc0 = tl.dot(p0, tl.trans(tl.reshape(k0, (DP, NG * GB))), acc0)
                acc0 = tl.dot(p1, tl.trans(tl.reshape(k1, (DP, NG * GB))), acc0)

    # the residual ring: float16 rows
    for t0 in range(tl.maximum(start, nq), end, G):
        tok = t0 + tl.arange(0, G)
        tmask = tok < end
        rb = (s * H + h) * RING + tok % RING
        krow = tl.load(KR + rb[:, None] * D + d[None, :], mask=tmask[:, None] & dm[None, :],
                       other=0.0)
        if WIDE:  # noqa: SIM108 (a compile-time branch; a wide head's query is float32 only)
            scores = tl.dot(q32.to(tl.float16), tl.trans(krow))
        else:
            scores = _scores(q, qt, tl.trans(krow), SWAP)
        p, alpha, m_i, l_i, grow = softmax_next(scores, tmask, m_i, l_i, LAZY)
        acc0, acc1, acc2, acc3 = _rescaled(alpha, grow, acc0, acc1, acc2, acc3, SWAP)
        p = p.to(tl.float16)
        pt = tl.trans(p)
        if HAS_V:
            vrow = tl.load(VR + rb[:, None] * DV + d[None, :],
                           mask=tmask[:, None] & _below(d, DV, DP == DV)[None, :], other=0.0)
        else:
            vrow = krow
        # the rows' values split into the output blocks (head dimension PER·c + k → block k)
        if NA == 4:
            ve, vo = tl.split(tl.reshape(vrow, (G, DP // 4, 2, 2)))
            v0, v2 = tl.split(ve)
            v1, v3 = tl.split(vo)
            acc0 = _weighed(p, pt, v0, acc0, SWAP)
            acc1 = _weighed(p, pt, v1, acc1, SWAP)
            acc2 = _weighed(p, pt, v2, acc2, SWAP)
            acc3 = _weighed(p, pt, v3, acc3, SWAP)
        elif NA == 2:
            v0, v1 = tl.split(tl.reshape(vrow, (G, DP // 2, 2)))
            acc0 = _weighed(p, pt, v0, acc0, SWAP)
            acc1 = _weighed(p, pt, v1, acc1, SWAP)
        else:
            acc0 = tl.dot(p, vrow, acc0)
    if SWAP:
        acc0 = tl.trans(acc0)
        acc1 = tl.trans(acc1)
        acc2 = tl.trans(acc2)
        acc3 = tl.trans(acc3)
    # the output blocks interleaved back into head order (block k holds PER·c + k)
    if NA == 4:
        out = tl.reshape(tl.join(tl.join(acc0, acc2), tl.join(acc1, acc3)), (QPAD, DP))
    elif NA == 2:
        out = tl.reshape(tl.join(acc0, acc1), (QPAD, DP))
    else:
        out = acc0
    _store_partial(ACC, ML, out, m_i, l_i, s, h, sp, rows, n_splits, H, GROUP, DP)


@triton.jit
def kivi_decode_keys_kernel(Q, ACC, ML, KQ, KS, KM, KR, NQ, NR, GT, stride_gt, RING, n_splits,
                            qk_scale, H: tl.constexpr, GROUP: tl.constexpr, QPAD: tl.constexpr,
                            D: tl.constexpr, DP: tl.constexpr, G: tl.constexpr,
                            BITS: tl.constexpr, PER: tl.constexpr, LEVELS: tl.constexpr,
                            SPLIT: tl.constexpr, QB: tl.constexpr = 1, PDL: tl.constexpr = False,
                            LAZY: tl.constexpr = False):
    """kivi_decode_kernel for a K-only cache of wide heads (an MLA latent, V = the keys): one
    loop over groups and ring rows, a group's codes by shifts into a key tile in token order,
    its per-channel scale folded into the query and its minimum into a bias a row, the tile
    dequantized once more as the values. On DeepSeek's 576-wide latent the general kernel's
    tiles spilled registers (bench/results/kivi-mla-h200.json)."""
    pdl_enter(PDL)
    s, h, sp, nq, start, end, rows, q = _program(Q, NQ, NR, qk_scale, SPLIT, H, GROUP, QPAD, QB,
                                                 D, DP)
    d = tl.arange(0, DP)
    dm = _below(d, D, DP == D)
    t = tl.arange(0, G)
    m_i = tl.full([QPAD], float("-inf"), tl.float32)
    l_i = tl.zeros([QPAD], tl.float32)
    acc = tl.zeros([QPAD, DP], tl.float32)
    jk = tl.arange(0, G // PER)
    shifts = tl.arange(0, PER) * BITS
    for t0 in range(start, end, G):
        tok = t0 + t
        tmask = tok < end
        if t0 < nq:
            gbase = tl.load(GT + s * stride_gt + t0 // G).to(tl.int64) * H + h
            # the group's bytes lie [G/PER, D]: byte j of channel d holds tokens PER·j …
            kb = tl.load(KQ + (gbase * (G // PER) + jk[None, :]) * D + d[:, None],
                         mask=dm[:, None], other=0).to(tl.int32)
            kc = tl.reshape((kb[:, :, None] >> shifts[None, None, :]) & LEVELS, (DP, G))
            ksc = tl.load(KS + gbase * D + d, mask=dm, other=0.0).to(tl.float32)
            kmn = tl.load(KM + gbase * D + d, mask=dm, other=0.0).to(tl.float32)
            kh = kc.to(tl.float16)
            scores = tl.dot((q * ksc[None, :]).to(tl.float16), kh) \
                + tl.sum(q * kmn[None, :], axis=1)[:, None]
            v = tl.trans((kh.to(tl.float32) * ksc[:, None] + kmn[:, None]).to(tl.float16))
        else:
            rb = (s * H + h) * RING + tok % RING
            v = tl.load(KR + rb[:, None] * D + d[None, :], mask=tmask[:, None] & dm[None, :],
                        other=0.0)
            scores = tl.dot(q.to(tl.float16), tl.trans(v))
        p, alpha, m_i, l_i, grow = softmax_next(scores, tmask, m_i, l_i, LAZY)
        if grow:
            acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.float16), v, acc)
    _store_partial(ACC, ML, acc, m_i, l_i, s, h, sp, rows, n_splits, H, GROUP, DP)
