"""A paged KV cache of one attention layer in any kernel format, K and V chosen separately.

Tensors per side are planes of shape ``[pages, kv_heads, page_size, width]`` (indices and scales
in separate planes, so rows stay aligned for vector loads); their bytes are exactly kvcore's
figure for the same geometry. A contiguous cache is the paged one with one page per sequence
and an identity block table.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any

from ..formats import get_format
from . import codebook, ref
from .ref import plane_widths

__all__ = ["LayerCache", "Side"]

ROTATED = ("tbq4", "tbq3")
#: streaming multiprocessors to fill (an H100/H200 has 132)
SMS = 132
#: the context split: programs per multiprocessor for several waves of them and for one wave,
#: the fewest tokens a program gets while there are enough programs for one wave, the fewest at
#: all, and the most splits of one sequence taken for several waves (bench/results/decode-occupancy-h200-v7.json:
#: 16 programs per multiprocessor were 20–25% faster than 4 at batch 8, where a second,
#: near-empty wave was left; programs of fewer than 2,048 tokens were slower at batch 1;
#: decode-split-h200-v7.json: at batch 1 and 1M tokens 66 splits beat 264 by 8–11%, the
#: reduction walking the splits one by one)
WAVES_PER_SM, WAVE_PER_SM, LONG_SPLIT, SHORT_SPLIT, MAX_SPLITS = 16, 4, 2048, 256, 64
LOG2E = 1.4426950408889634
#: decode launch (block_n, num_warps, num_stages) by K format at head_dim ≤ 128, for few rows of
#: (sequence, KV head) and for many (MANY_ROWS or more): the best at batch 1 (4k to 1M tokens)
#: and at batch 8 (128k) on an H200 (bench/results/decode-sweep-b1-h200-v12.json and
#: decode-sweep-h200-v10.json; formats those sweeps did not move keep their v7b or words-check
#: launch). Programs of one or two warps keep the softmax's reductions within a warp; at
#: batch 8 they took fp8_pth from 730 to 590 µs, at batch 1 (with FEW_ROWS_PER_SM) q4_0 from
#: 108 to 92 µs at 128k. tbq3 at batch 1 since its merge spread over programs: (64, 1, 2)
#: 155 µs against (128, 2, 2) 163 µs at 128k (decode-sweep-wide-h200-check.json).
#: fp8_pth over few rows: 32 tokens, 12 programs a multiprocessor and 4 query rows (PAD_ROWS),
#: 79.3 → 73.3 µs at B=1 128k (decode-sweep-pad-h200.json).
LAUNCH = {"f16": (64, 4, 4), "bf16": (64, 4, 4), "fp8_pth": (32, 1, 2), "q8_0": (32, 1, 3),
          "q4_0": (32, 1, 3), "tbq4": (64, 4, 2), "tbq3": (64, 1, 2), "nvfp4": (64, 1, 2)}
LAUNCH_MANY = {**LAUNCH, "fp8_pth": (64, 1, 2), "q8_0": (64, 1, 2), "tbq4": (32, 2, 2)}
#: programs per multiprocessor for a launch of one-warp programs over fewer than MANY_ROWS rows:
#: at batch 1, 128k tokens, 8 (132 splits of ~1k tokens) beat 4, 16 and 32 for every such
#: format (decode-sweep-b1-h200-v12.json); with many rows the split rule below gives ~16.
#: FEW_ROWS_FORMAT_PER_SM: (K format, block_n) → programs where a launch's registers fit
#: more (fp8_pth's 32-token programs of 4 query rows: 168 registers, 12 a multiprocessor)
FEW_ROWS_PER_SM = 8
FEW_ROWS_FORMAT_PER_SM = {("fp8_pth", 32): 12}
#: the same over long contexts, where registers capped so that more programs fit make one
#: wave of them: (K format, V format, integer keys, block_n, query rows) → (fewest tokens,
#: programs a multiprocessor, registers a thread). q8_0 (196 registers) and q4_0 (180), 8
#: programs a multiprocessor (WHOLE_RESIDENT's note), capped at 168 (no spills) in 12, at B=1
#: on an H200 (bench/results/occupancy-b1-h200.json): q8_0 128k 104.9 → 99.5 µs, 256k
#: 198.4 → 192.3, 1M 792 → 783, but 64k 54.6 → 55.7 and 32k 32.2 → 35.2; q4_0 64k 45.7 → 43.2, 128k 83.8 → 76.5,
#: 256k 158.1 → 147.6, 1M 620 → 587, but 32k 26.2 → 26.9. Uncapped, 12 programs make more than
#: one wave (q8_0 128k 123.9 µs, q4_0 102.2); nvfp4 and tbq3 capped spill and were slower.
#: Over at most FEW_ROWS_LONG_ROWS rows only (bench/results/fewrows-h200.json): at B=2 (16
#: rows) 128k q4_0 160.4 → 143.7 µs, q8_0 190.3 → 187.9, but at B=4 (32 rows) q4_0 307 → 378
#: and q8_0 370 → 468.
FEW_ROWS_LONG_ROWS = 16
FEW_ROWS_LONG = {("q8_0", "q8_0", True, 32, 4): (131072, 12, 168),
                 ("q4_0", "q4_0", False, 32, 8): (65536, 12, 168)}
#: K format (V the same) → (launch, query rows, registers a thread, programs a multiprocessor)
#: for heads of at most 128 lanes in one part, a group of at most that many rows and at most
#: MANY_ROWS (sequence, KV head) rows: the rotated formats in 16-token one-warp programs of 3
#: stages capped at 128 registers (tbq3 155 uncapped, no spills; tbq4 2 bytes spilled), 16 a
#: multiprocessor, against their LAUNCH/LAUNCH_MANY on an H200
#: (bench/results/launch-rotated-h200.json): tbq3 B=1 128k 143.4 → 135.5 µs, B=8 128k 1,017 →
#: 963, B=1 32k 44.2 → 42.3; tbq4 118.7 → 111.1, 807 → 784, 38.2 → 36.2. nvfp4 gained in no
#: launch tried. Over every B=1 and B=8 shape of bench/decode.py 3-11% faster than v19
#: (bench/results/decode-h200-v25-tiles.md). Both take SWAPPED's launch instead since v26
#: (unless decode(swap=False)).
ROTATED_TILES = {"tbq3": ((16, 1, 3), 4, 128, 16), "tbq4": ((16, 1, 3), 4, 128, 16)}
#: the longest context (max_len) at which a rotated format, where its head is 128 lanes in
#: one part, has the split kernel rotate its query and partial outputs (decode_split_kernel's
#: ROT_Q, ROT_V) rather than two launches of rotate_kernel; formats not listed: any. On an H200
#: (bench/results/rotation-cost-h200-fold.json) tbq3 gained at every shape (B=1 4k 14.6 → 12.6
#: µs, 128k 126.3 → 123.1, B=8 128k 894.8 → 885.4); tbq4 gained up to 32k (B=1 4k 14.4 → 11.7,
#: 32k 32.4 → 31.3, B=8 4k 36.0 → 32.3) but its loop ran slower with the transform compiled in
#: (B=1 128k 95.4 → 97.6, B=8 128k 663.7 → 691.0)
ROTATE_IN_KERNEL_TOKENS = {"tbq4": 32768}
#: K format (V the same) → (fewest (sequence, KV head) rows, launch, query rows below
#: SWAPPED_MANY_ROWS rows and from there, registers a thread, programs a multiprocessor, planes
#: read as int32 words) for a decode with its products swapped (decode_split_kernel's SWAP: the
#: query heads the narrow side of the tensor-core products, padded to 8 columns, not to 16
#: rows), for heads of 128 lanes in one part and groups of at most 8 query heads. On an H200 a
#: probe kernel with the products swapped against the launches before
#: (bench/results/swapped-h200.json, GQA 32/8 × 128): tbq4 9-13% faster at every shape (B=1 1M
#: 788 → 702 µs, B=8 128k 790 → 702, B=64 32k 1,702 → 1,488); q4_0 from 32 rows 3-9% (B=4
#: 128k 309 → 282, B=8 128k 602 → 548, B=64 32k 1,314 → 1,191), but 5% slower at B=2 and 1-6%
#: at B=1 128k; tbq3 reading words 3-16% (swapped-tbq3-h200.json: B=1 128k 135.5 → 131.8 µs,
#: B=8 128k 972 → 918, B=64 32k 2,346 → 1,969; reading bytes 11-13% slower). nvfp4, q8_0 and
#: fp8_pth (slower or even, swapped-formats-h200.json) keep their launches. tbq4 reads bytes:
#: its words were 2% slower (B=1 128k 100.3 → 102.7 µs, B=8 128k 700 → 712,
#: swapped-words-h200.json). As decode's default (decode-h200-v26-swapped.md, -q4_0.md,
#: -tbq3.md): tbq4 7-12% faster than v25 but 6% slower at B=1 4k; q4_0 1-9% (B=8 128k 593 µs:
#: decode_split_kernel's swapped launch is slower than the probe's kernel there,
#: swapped-gap-h200.json). nvfp4 since its table-free unpacking (decode-h200-v27-nvfp4.md), in
#: its own 64-token one-warp programs of 2 stages, registers and programs as unswapped
#: (None: the few-row and split rules), reading bytes: B=1 128k 89.9 → 83.0 µs, B=8 128k 631 →
#: 587, B=64 32k 1,378 → 1,212, B=1 32k 29.1 → 26.1 (swapped-nvfp4-64-h200.json; in 16- and
#: 32-token programs it was slower, swapped-nvfp4-h200.json); as decode's default
#: (decode-h200-v28-nvfp4.md) every shape faster, B=1 4k 10.8 → 9.4 µs included. Kernel v34:
#: q4_0, nvfp4 and tbq3 load their tiles in one stage, straight into registers, not through
#: shared memory: q4_0 and nvfp4 had run at 84% and 81% of the L1/shared-memory throughput
#: and 41% and 39% of DRAM's (ncu-decode-h200-v33.txt); in one stage q4_0's 32-token loop
#: issues 18 shared-memory loads instead of 87 (sm_90, bench/sass_count.py). Swapped in
#: 32-token programs of one stage (swapped-stages-h200.json): q4_0 B=8 128k 566 → 472 µs,
#: B=1 128k 75.3 → 66.8 (so it swaps at any rows now, not from 32), nvfp4 591 → 557 and
#: 83.9 → 80.4 (4 bytes spilled); tbq3 in 16-token programs of one stage 886 → 871 and
#: 123.7 → 120.8; tbq4 within 2%, keeps its launch. As decode's default
#: (decode-h200-v34-stages.md) every shape of q4_0 and tbq3 faster but q4_0 B=64 4k (1%
#: slower), nvfp4 1-9% faster to B=8 and 7-13% slower at B=64 (512 rows): from
#: SWAPPED_MANY_ROWS rows nvfp4 keeps its v33 launch (SWAPPED_MANY).
SWAPPED: dict[str, tuple[int, tuple[int, int, int], tuple[int, int], int | None, int | None,
                         bool]] = {
    "tbq4": (1, (16, 1, 3), (8, 4), 128, 16, False),
    "q4_0": (1, (32, 1, 1), (8, 4), 128, 16, False),
    "tbq3": (1, (16, 1, 1), (8, 8), 128, 16, True),
    "nvfp4": (1, (32, 1, 1), (8, 8), 128, 16, False)}
SWAPPED_MANY_ROWS = 256
#: K format → (launch, registers a thread, programs a multiprocessor) from SWAPPED_MANY_ROWS
#: rows, where not SWAPPED's
SWAPPED_MANY: dict[str, tuple[tuple[int, int, int], int | None, int | None]] = {
    "nvfp4": ((64, 1, 2), None, None)}
MANY_ROWS = 64
#: query rows a decode program pads its group to at head_dim ≤ 128, by K format where not 16,
#: over few (sequence, KV head) rows and over many (MANY_ROWS or more). A product of fewer
#: rows than 16 is still padded to 16 in the tensor-core instruction, but the softmax, the
#: rescale and the partial output hold only the padded group's rows: compiled for sm_90 at
#: GQA 32/8 (4 rows) fp8_pth's 64-token step is 1,846 instructions against 2,016, nvfp4's
#: 2,712 against 2,960. On an H200 (decode-sweep-pad-h200.json; B=1 32k and 128k, B=8 128k)
#: these pads were faster in every row, by up to 10% (tbq4, tbq3, nvfp4 3-10%, fp8_pth 2-6%,
#: q4_0 0-3%), the outputs identical to 16 rows'; f16 and q8_0 did not gain (q8_0 2-3%
#: slower at B=8). Kernel v17 (decode-h200-v17.md): B=1 128k fp8_pth 81 → 75 µs, nvfp4
#: 123 → 113, tbq4 130 → 118 against v16
#: K formats whose scores are an integer product by default (decode(int_keys=…)), at head
#: widths up to 256 lanes: the query quantized to int8 per 32-value block with q8_0's scale
#: rule (amax / 127; the scale kept in float32, ties rounded to even), the cache's codes read as stored into the tensor cores' int8 product, block scales
#: applied to its int32 sums. Heads of up to 128 lanes: 4 query rows and (32 tokens, 1 warp,
#: 3 stages) at any number of rows (INT_KEYS_LAUNCH); 256 lanes: PAD_ROWS_256's 8 rows and
#: (16, 1, 3), one stage since (INT_KEYS_LAUNCH_256). Against the float16 unpacking on an H200
#: (bench/results/int-keys-h200.json, GQA 32/8 × 128): B=1 128k 111.5 → 103.8 µs, B=8 32k
#: 231.7 → 199.8, B=64 4k 240.3 → 205.7, B=8 128k 812 → 770; int-keys-256-h200.json (24/4
#: × 256, Qwen3.5's full layers): B=1 262k 306.5 → 236.9 µs, B=8 32k 306.8 → 236.5, B=1 32k
#: 47.9 → 41.5. Relative error against exact attention 5.28 → 5.38·10⁻³ (q8_0 K and V).
#: q4_0's nibbles fed the same product were 13-40% slower than its float16 path
#: (int-keys-h200.json; the branch was removed)
INT_KEYS = frozenset({"q8_0"})
INT_KEYS_LAUNCH, INT_KEYS_PAD = (32, 1, 3), 4
#: 256 lanes in one stage (the tiles straight into registers), against 3 stages at 24/4 × 256:
#: B=1 262k and B=8 32k 237 → 227 µs (decode-sweep-stages-wide-h200.json), B=1 32k 41.3 → 38.8,
#: B=8 4k 42.6 → 39.8; but from MANY_ROWS (sequence, KV head) rows over fewer than
#: INT_KEYS_256_STAGED row-tokens (rows × the longest sequence) 3 stages were faster: B=64 4k
#: (256 rows) 268 vs 283 µs, B=32 4k 148 vs 163, B=16 4k, 8k and 16k 85 vs 93, 160 vs 177, 304
#: vs 339 (INT_KEYS_LAUNCH_256_MANY); from 2²¹ one stage again: B=16 32k 443 vs 463, B=64 8k
#: 455 vs 472, B=64 16k 885 vs 920, B=64 32k within 1% (decode-sweep-wide-v35-h200.json,
#: -v35b-, -v35c-)
INT_KEYS_LAUNCH_256 = (16, 1, 1)
INT_KEYS_LAUNCH_256_MANY = (16, 1, 3)
INT_KEYS_256_STAGED = 1 << 21
PAD_ROWS = {"fp8_pth": 4, "q4_0": 8, "tbq4": 8, "tbq3": 4, "nvfp4": 4}
PAD_ROWS_MANY = {**PAD_ROWS, "fp8_pth": 8}
#: the same for heads of 129-256 lanes, any number of rows: at 24/4 × 256 (Qwen3.5's
#: full-attention layers, groups of 6) 8 rows were 2-14% faster than 16 under WIDE_LAUNCH for
#: these formats (B=1 32k and 262k, B=8 32k; nvfp4 8-14%, tbq3 and tbq4 2-10%, fp8_pth 4-6%,
#: q8_0 3-4%), the outputs identical; q4_0 1-2% slower, f16 within 1%
#: (decode-sweep-pad256-h200.json)
PAD_ROWS_256 = {"fp8_pth": 8, "q8_0": 8, "tbq4": 8, "tbq3": 8, "nvfp4": 8}
#: decode launch (block_n, warps, stages) for heads wider than 128 lanes (the head_dim's
#: power of two) whose query group pads to 16 rows, every format: on an H200
#: (bench/results/decode-sweep-wide-h200.json) one-warp programs of 16 tokens took 1.2-2.1×
#: less time than 32 tokens and 4 warps at head_dim 256 (24/4 heads, B=1 32k and 262k, B=8
#: 32k). DeepSeek's 576-wide MLA latent (1024: held as 512 + 64 lanes, head_parts): 16 tokens
#: and 2 warps, 1.3-1.7× less time than 4 warps (decode-sweep-mla-parts-h200.json, B=1 128k
#: and B=4 32k), but tbq4 and fp8_pth (WIDE_FORMAT_LAUNCH). 512 (heads of 257-512 lanes): 16
#: tokens and 2 warps, the best of five launches for every format on 512-wide heads (8/2, B=1
#: 128k: f16 180 → 130 µs, q8_0 328 → 214, q4_0 235 → 143 against 4 warps) and within 10% of
#: the best on a 288-wide latent (256 + 32 lanes) but for f16 and q4_0
#: (decode-sweep-512-h200.json)
WIDE_LAUNCH = {256: (16, 1, 2), 512: (16, 2, 2), 1024: (16, 2, 2)}
#: (power of two, K format) → launch, where a format's best differs from WIDE_LAUNCH's: on the
#: MLA latent 32 tokens and 4 warps, tbq4 214 → 169 µs and fp8_pth 75 → 72 µs (B=1 128k).
#: One stage (the tiles loaded straight into registers, no shared-memory ring), on an H200
#: (decode-sweep-stages-wide-h200.json): at 24/4 × 256 (B=1 262k and B=8 32k) nvfp4 in 32-token
#: programs 312 → 224 µs, tbq4 in 16-token ones 271 → 239, q4_0 in 32-token ones 190 → 179;
#: on DeepSeek-V2-Lite's latent (16 heads, B=1 128k) q4_0 86 → 77 µs and q8_0 127 → 120 in
#: 16-token, two-warp programs. fp8_pth lost in one stage at 256 lanes (151 → 214 µs); f16
#: and fp8_pth on the latent (56 → 78 µs, 72 → 77). Confirmed at more shapes
#: (decode-sweep-wide-v35-h200.json): at 256 lanes, B=1 32k, nvfp4 51.8 → 38.8 µs, tbq4 49.2 →
#: 45.3, q4_0 33.4 → 31.4; B=64 4k nvfp4 342 → 281, tbq4 338 → 319, q4_0 within 1% (232 →
#: 235); tbq3 in 16-token programs 278 → 268 (B=1 262k), 50.2 → 48.4 (B=1 32k), f16 within 1%
#: (kept). On the latent (B=1 128k and B=4 32k) nvfp4 152 → 112 and tbq4 172 → 159 in 32-token
#: 4-warp programs of one stage, tbq3 188 → 166 in 16-token 2-warp ones; q4_0 and q8_0 as at
#: B=1
#: At 512 lanes (Gemma 4's global layers, 32/4 and 8/2 heads × 512) one stage, against
#: WIDE_LAUNCH[512]'s two: nvfp4, q8_0's integer keys and tbq4 in 32-token two-warp programs,
#: tbq3 in 16-token ones, faster at all six shapes timed (decode-sweep-wide512-h200.json,
#: -wide512b-, -wide512c-): 32/4 B=1 128k nvfp4 462 → 325 µs, q8_0 411 → 330, tbq4 425 → 346,
#: tbq3 423 → 393; B=8 32k 1,399 → 897, 1,392 → 927, 1,254 → 975, 1,218 → 1,160; B=1 32k and
#: B=64 4k likewise, and on 8/2 heads (B=1 128k 242 → 168, 214 → 173, 225 → 183, 225 → 209).
#: f16 and fp8_pth lost in one stage (247 → 268, 181 → 256 µs); q4_0 in 32-token programs
#: was 6% faster at B=8 32k but 5% slower at B=1 128k (kept). The three launches passed the
#: GPU check on both head shapes (launch-h200-wide512.json, 48 of 48)
WIDE_FORMAT_LAUNCH = {(1024, "fp8_pth"): (32, 4, 2), (1024, "tbq4"): (32, 4, 1),
                      (1024, "nvfp4"): (32, 4, 1), (1024, "tbq3"): (16, 2, 1),
                      (1024, "q4_0"): (16, 2, 1), (1024, "q8_0"): (16, 2, 1),
                      (512, "nvfp4"): (32, 2, 1), (512, "q8_0"): (32, 2, 1),
                      (512, "tbq4"): (32, 2, 1), (512, "tbq3"): (16, 2, 1),
                      (256, "q4_0"): (32, 1, 1), (256, "nvfp4"): (32, 1, 1),
                      (256, "tbq4"): (16, 1, 1), (256, "tbq3"): (16, 1, 1)}
#: (power of two, K format) → (block_n, warps, stages, query rows a program) for a query group
#: of more than 16 heads: on DeepSeek-V3's latent (128 heads, B=1 128k, H200,
#: decode-sweep-mla-v3-h200.json) 32 rows took f16 from 267 to 250 µs, fp8_pth 410 → 352,
#: q8_0 875 → 611, tbq3 1,037 → 998; 64 rows and 8 warps tbq4 880 → 849, nvfp4 858 → 768
#: (against 16 rows and WIDE_LAUNCH; tbq3 and nvfp4: decode-sweep-mla-v3b-h200.json, where
#: tbq3's 64-row launches do not compile); bf16 takes f16's. q4_0 keeps 16 rows (567 µs): its
#: 64-row launch (460 µs) makes an illegal memory access, the interpreter's run of the same
#: launch correct (launch-h200.json); compute-sanitizer puts it at an out-of-range shared
#: memory address in the tail part's key product (the latent's 64-lane tail as two 32-lane
#: nibble halves), with 8 warps or 4; 32 rows run (rows64-sanitizer-h200.txt), not timed.
#: Tiles of 32 tokens over pages of 16 read the block scales misaligned until _rows hid the
#: looked-up rows from the compiler (launch-h200-before.json, catalog-h200.json). One stage
#: (the tiles straight into registers; decode-sweep-wide-v35b-h200.json, B=1 128k): q8_0 597
#: → 580 µs, tbq3 970 → 831, tbq4 in 32 rows and 4 warps 853 → 804, nvfp4 750 → 717 (its
#: 32-row launches 5-11 ms); f16 and fp8_pth slower (248 → 330, 345 → 385)
#: On 128-lane heads the group's 64 rows a program (max_query_rows) kept the one-warp launch
#: of the GQA tables, whose rows × 128 float32 partial output one warp cannot hold: MiniMax-M3's
#: index keys (64 query heads over one K-only head, B=2 128k, H100,
#: bench/results/group64-sweep-h100.json) took q8_0 from 170.6 µs to 58.1 and q4_0 from 243.4
#: to 49.3 in 4-warp programs of 64 tokens (f16 46.0 → 45.1, kept); a group of 16 (its K/V
#: layers, 64 over 4) stays fastest in the tables' launch. On the same index shape fp8_pth took
#: 218.3 → 52.2 µs in one stage and nvfp4 310.8 → 125.0 (tbq4 already in 4 warps, 129.0;
#: group-wide-sweep-h100.json); tbq3, whose 4-warp launches of 64 rows do not compile, 448.8 →
#: 102.2 in 4-warp programs of 32 rows, two a head (group-tbq3-sweep-h100.json). GLM-5.3-Flash's
#: 512-value latent under 64 query heads (B=2 32k, ibid.), where 16 rows a program had kept
#: WIDE_FORMAT_LAUNCH's 2 warps: q8_0 156.5 → 132.9 µs and q4_0 132.2 → 101.3 in 4-warp
#: programs of 32 rows, tbq4 230.6 → 188.0 in 4 warps of 16 (f16 kept, 73.5)
GROUP_LAUNCH = {(1024, "f16"): (32, 4, 2, 32), (1024, "bf16"): (32, 4, 2, 32),
                (1024, "fp8_pth"): (32, 4, 2, 32), (1024, "q8_0"): (32, 4, 1, 32),
                (1024, "tbq4"): (32, 4, 1, 32), (1024, "tbq3"): (32, 4, 1, 32),
                (1024, "nvfp4"): (32, 8, 1, 64),
                (512, "q8_0"): (32, 4, 1, 32), (512, "q4_0"): (32, 4, 1, 32),
                (512, "tbq4"): (32, 4, 1, 16),
                (128, "q8_0"): (64, 4, 2, 64), (128, "q4_0"): (64, 4, 2, 64),
                (128, "fp8_pth"): (64, 4, 1, 64), (128, "nvfp4"): (64, 4, 2, 64),
                (128, "tbq3"): (64, 4, 2, 32)}
#: K formats whose K-only (MLA) decode unpacks each key tile once for both products (V = the
#: keys) by default: faster on the H200 for f16 (121 → 113 µs on DeepSeek's latent, B=1 128k),
#: tbq4 and nvfp4 (5%); slower for fp8_pth (147 → 231 µs), q8_0, q4_0 and tbq3 (3-7%), whose
#: key tile held across the softmax costs registers (bench/results/mla-reuse-h200.json); bf16
#: takes f16's path
REUSE_KEYS = ("f16", "bf16", "tbq4", "nvfp4")
#: K formats whose decode reads the packed planes as int32 words by default: faster for these
#: (tbq3 by 23-25%, q8_0 by 14-23%, q4_0 by up to 10% at batch 1, tbq4 by 7-8%), not for
#: fp8_pth and nvfp4, with 4-warp or with 1- and 2-warp launches
#: (bench/results/decode-words-h200-v10.json, -v10b.json, -v11.json). With the current kernel
#: (words-h200.json, GQA 32/8 × 128, 128k) words still win for q8_0 (129 → 111 µs at B=1),
#: tbq4 (144 → 133) and tbq3 (213 → 154), no longer for q4_0 (bytes: 92 → 86 µs at B=1,
#: 652 → 604 at B=8; on the MLA latent 90 → 87 µs, words-mla-h200.json). V's planes as bytes
#: under K's words (decode's words_v) were slower for all three (words-v-h200.json)
WORDS = ("q8_0", "tbq4", "tbq3")
#: K formats whose decode rescales its running output lazily by default (softmax_lazy): on an
#: H200 fp8_pth 8-15% faster (86.8 → 80.6 µs at B=1 128k, 612 → 551 µs at B=8, GQA 32/8 × 128;
#: even on DeepSeek's latent); every other format 2-28% slower (bench/results/lazy-h200.json).
#: fp8_pth rounds each weight times its V row's scale (the row's largest magnitude / 448) to
#: float16: weights up to 2^8 keep that finite for rows whose largest magnitude is under about
#: 114,000, which float16 rows always are; after bfloat16 or float32 rows (Side.wide) a tile
#: whose scales exceed WIDE_SCALE takes the eager step (weights up to 1: 29 million)
LAZY = ("fp8_pth",)
#: q4_0's append takes each code's floor from an add rounded toward −∞ (append_kernel's
#: Q4_FLOOR_ADD) instead of a float floor, two clamps and a conversion to integer: 23.2 → 21.3
#: instructions a value on sm_90, none of them on the conversion pipe. On an H100, three
#: rounds in turns, the reference's bytes (bench/results/append-base-v79-h100.json): B=1 4k
#: 9.1 → 8.4 µs (74.4% → 81.4% of read bandwidth), 16,384 tokens into a filled 8 × 32k cache
#: 31.6 → 30.6 µs (86.0% → 88.9%)
APPEND_Q4_FLOOR_ADD = True
#: append launch (rows of token-heads a program at head_dim 128, warps) by format, where not
#: (32, 4): measured on an H200 (bench/results/append-sweep-h200-v8.json and
#: append-launch-h200-v12.json; 16,384 new tokens a call: nvfp4 50.2% → 52.2% of read
#: bandwidth, q4_0 54.6% → 56.5%, q8_0 67.3% → 69.9%, fp8_pth 76.8% → 78.2%; q4_0 53.0% since
#: it follows ggml's tie rule, append-q4_0-ties-h200.json)
APPEND_LAUNCH = {"tbq4": (64, 4), "tbq3": (64, 4), "fp8_pth": (64, 2), "q8_0": (8, 2),
                 "q4_0": (8, 1), "nvfp4": (8, 1)}
#: a rotated format's append: persistent programs a multiprocessor, the stages of their loop,
#: their registers a thread and whether each loads its next rows a block ahead (PREFETCH), by
#: format for the FMA form of the centroid search (v64:
#: saturated fused multiply-adds for the comparisons; append-sat-h200.json and
#: append-sat-launch-h200.json, K and V in one launch: tbq4 at 3 programs of 168 registers
#: with two stages 49.3-49.6 µs, 38.5% of read bandwidth, against 51.1 at 128 registers,
#: 51.4 in one stage and 52.1 at 4 programs; tbq3 at 4 of 128 in one stage 42.7-43.0 µs,
#: 42.2%, against 44.4 at 3 with two stages), and for the search by selects (SELECTS_LAUNCH:
#: append-sweep-h200-v15-rotated.json, 3 programs of at most 168 registers, one stage: tbq4
#: 28.6%, tbq3 33.5%; v63's staircase by set.gt at 4 of 128, append-fma-launch-h200.json:
#: 34.4% and 41.3%). Those are 128-lane rows' launches; wider rows (more values a thread)
#: take SELECTS_LAUNCH's with the FMA search too (append-wide-256-h200.json, 8 heads of 256:
#: tbq4 96.9-97.2 µs at 3 of 168 in one stage, 95.7-95.8 at 4 of 128, 119.7-119.9 at 3 of
#: 168 in two stages, 117.6-118.2 by selects; tbq3 87.3-88.0, 90.3-90.8, 112.0-112.1, 95.8;
#: append-wide-mla-h200.json, one K-only latent of 576: tbq4 32.7, 36.5-36.7, 35.2-35.3,
#: 37.4; tbq3 26.9-27.1, 31.5-31.7, 32.4-32.6, 40.7). v65: tbq3 loads its next rows a block
#: ahead (append-prefetch-tbq3-h200.json, three rounds in turns: 42.4-42.8 µs, 42.3-42.6%,
#: against 43.8-44.5), tbq4 not (append-prefetch-tbq4-h200.json: 50.1 against 49.2-49.3 in
#: its two stages)
ROTATED_LAUNCH = {"tbq4": (3, 2, 168, False), "tbq3": (4, 1, 128, True)}
#: the rotated formats whose 128-lane append takes the FMA search by lookup (codebook.cells, one
#: comparison a value; the same bytes) at their launch with registers uncapped (v72,
#: append-lookup-h200.json, three rounds in turns, K and V in one launch: tbq4 48.0–48.2 µs,
#: 39.5% of read bandwidth, against 49.3–49.4 by the staircase at 168 registers; tbq3's lookup
#: was slower, 51.9–52.2 against 41.9–42.0)
LOOKUP = ("tbq4",)
SELECTS_LAUNCH = (3, 1, 168, False)
PAGED = ("f16", "bf16", "fp8_pth", "q8_0", "q4_0", "tbq4", "tbq3", "nvfp4")


def _torch() -> Any:
    from . import require_torch

    return require_torch()


def programmatic_launch(device: Any) -> bool:
    """Whether kernels on ``device`` can be launched as programmatic dependents of the kernel
    before them (CUDA, compute capability 9 or later: Hopper)."""
    torch = _torch()
    dev = torch.device(device)
    return bool(dev.type == "cuda" and torch.cuda.get_device_capability(dev)[0] >= 9)


def wide_head_warps(dpow: int) -> int:
    """Warps a decode program takes for heads wider than 128 lanes (``dpow``, a power of two)."""
    return 4 if dpow <= 256 else 8


def wave_up(rows: int, per_sm: int) -> int:
    """Splits a row for one wave of ``per_sm`` programs a multiprocessor over ``rows`` rows,
    the wave rounded up."""
    return math.ceil(per_sm * SMS / max(1, rows))


def one_wave_splits(rows: int, tokens: int) -> int:
    """Splits of a ``tokens``-long context that give ``rows`` (sequence, KV head) rows one wave
    of programs (WAVE_PER_SM a multiprocessor), none shorter than SHORT_SPLIT tokens."""
    return min(wave_up(rows, WAVE_PER_SM), tokens // SHORT_SPLIT)


def wave_splits(rows: int, per_sm: int) -> int:
    """Splits a row takes so that ``rows`` rows of programs fill one wave of ``per_sm``
    programs a multiprocessor with none past it (at least one split)."""
    return max(1, per_sm * SMS // max(1, rows))


#: K and V formats whose split over MANY_ROWS or more (sequence, KV head) rows fills whole
#: waves of the programs that reside (fullest_waves), not one wave of WAVES_PER_SM rounded up,
#: which had left a second wave of a few programs (bench/results/split-rows-fp8-nvfp4-h200.json,
#: one run: at B=16 128k, 128 rows, 17 splits, fp8_pth 1,295 µs against 1,155 at 16, nvfp4
#: 1,609 against 1,125; B=32 32k, 256 rows, 9 splits, 627 against 581 and 677 against 600 at 8)
WHOLE_WAVES = frozenset({"fp8_pth", "nvfp4"})
#: programs of fp8_pth's many-rows launch and of nvfp4's from SWAPPED_MANY_ROWS rows (64-token
#: one-warp programs, registers uncapped: 243 and 198 a thread on an H200) that reside on a
#: multiprocessor at once. A multiprocessor's 65,536 registers are four quarters of 16,384, one
#: to each scheduler, and a warp takes its registers from one quarter (in units of 8 a
#: thread): at 169 to 256 registers two warps fit a quarter, 8 a multiprocessor (at 129 to 168,
#: 12; at 128, 16), not the 10 the whole file would hold at 198 (their shared memory, 18,944
#: and 12,288 bytes, would allow 11 and 17: resident-h200.json). The split sweeps over 96-800
#: rows time as waves of 8: counts whose
#: programs just pass a whole number of waves of 8 are the slow ones (384 rows, fp8_pth and
#: nvfp4: 6 splits, 2.2 waves, 946 and 1,003 µs; 9, 3.3 waves, 902 and 932; 11, 4.0 waves, 869
#: and 867; split-rows-v52-h200.json). Under fullest_waves (split-rows-fill-h200.json, one
#: run, against one wave of 16 rounded down): nvfp4 B=56 32k 1,174 → 1,017 µs, B=100 32k
#: 2,209 → 1,867, B=56 128k 4,612 → 3,965; fp8_pth 4,283 → 3,938 at B=56 128k, 1-7% at
#: 32k but B=36 (625 → 646 there, 655 → 628 and 650 → 627 in both passes of
#: split-rows-fill-again-h200.json). nvfp4's swapped launch under SWAPPED_MANY_ROWS rows fits
#: 16 (128 registers) and takes its programs_per_sm
WHOLE_RESIDENT = 8
#: registers in each quarter of a multiprocessor's file (one quarter to each scheduler; a warp
#: takes all its registers from one), the unit a thread's registers are allocated in, and the
#: most warps and programs a multiprocessor holds, on sm_80 and sm_90 (A100, H100, H200)
QUARTER_REGISTERS, REGISTER_UNIT, SM_WARPS, SM_PROGRAMS = 16384, 8, 64, 32


def resident_programs(registers: int, warps: int = 1) -> int:
    """Programs of ``warps`` warps at ``registers`` registers a thread that one multiprocessor
    holds at once as far as registers, warps and programs limit them (not shared memory): whole
    warps in each of its four register quarters. 243 and 198 (fp8_pth's and nvfp4's many-rows
    launches) give WHOLE_RESIDENT, 8; 168 (the capped launches) 12; 128, 16."""
    per_warp = math.ceil(registers / REGISTER_UNIT) * REGISTER_UNIT * 32
    held_warps = min(4 * (QUARTER_REGISTERS // per_warp), SM_WARPS)
    return min(held_warps // warps, SM_PROGRAMS)


#: fill within which fewer waves are kept (fullest_waves)
FILL_TIE = 0.01


def fullest_waves(rows: int, resident: int, tokens: int, most: int | None = None) -> int:
    """Splits a sequence of ``tokens`` tokens takes so that ``rows`` (sequence, KV head) rows of
    programs, ``resident`` of which reside on a multiprocessor at once, fill whole waves: of
    WAVES_PER_SM to twice that many programs a multiprocessor, in whole waves of ``resident``,
    the count whose last wave is fullest (fewer waves where the fill is within FILL_TIE). The
    fewest waves are taken at any length (at most ``most`` splits where given); more waves only
    while each split keeps LONG_SPLIT tokens and there are at most MAX_SPLITS splits."""
    wave = resident * SMS
    best, fill = 0, 0.0
    for k in range(max(1, WAVES_PER_SM // resident), 2 * WAVES_PER_SM // resident + 1):
        n = wave_splits(rows, k * resident)
        if best and n > min(tokens // LONG_SPLIT, MAX_SPLITS):
            break
        if not best and most is not None:
            n = max(1, min(n, most))
        f = n * rows / (math.ceil(n * rows / wave) * wave)
        if f > fill + FILL_TIE:
            best, fill = n, f
    return best


#: the rotated formats' swapped launch over MANY_ROWS or more (sequence, KV head) rows: splits
#: for ROTATED_WAVES whole waves of its programs, none shorter than ROTATED_MIN_SPLIT tokens
#: (bench/results/split-many-rows-h200.json: one wave rounded up had left a second wave of
#: a few programs, tbq4 B=16 128k 17 splits 1,652 µs against 32 splits 1,299, B=32 32k
#: 9 splits 788 against 32 splits 642, B=64 32k 5 splits 1,418 against 4 splits 1,359; and more
#: waves were faster: B=8 128k 33 splits 664 µs, 132 splits 635; tbq3 alike)
ROTATED_WAVES, ROTATED_MIN_SPLIT = 4, 512


def rotated_many_splits(rows: int, tokens: int, per_sm: int) -> int:
    """Splits a sequence of ``tokens`` tokens takes under the rotated formats' swapped launch
    of ``per_sm`` programs a multiprocessor over ``rows`` (sequence, KV head) rows, MANY_ROWS
    or more: ROTATED_WAVES waves that no program past them spills over, at least
    ROTATED_MIN_SPLIT tokens a split, at least one split."""
    return max(1, min(ROTATED_WAVES * wave_splits(rows, per_sm), tokens // ROTATED_MIN_SPLIT))


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def max_query_rows(width: int) -> int:
    """Query rows a decode program holds at most for heads held in ``width`` lanes: its partial
    output (rows × width float32) stays near 32 KB, so that it fits the registers of the
    launch's warps without spilling."""
    return max(16, 1 << (max(1, 8192 // width).bit_length() - 1))


def few_rows_launch(k_fmt: str, v_fmt: str, int_keys: bool, block_n: int, qpad: int,
                    max_len: int, rows: int, tail: bool = False) -> tuple[int, int | None]:
    """(programs a multiprocessor, registers a thread or None) for a launch of one-warp
    decode programs over ``rows`` (sequence, KV head) rows, fewer than MANY_ROWS:
    FEW_ROWS_LONG's where it has the launch (a head in one part), the context is long enough
    and the rows at most FEW_ROWS_LONG_ROWS, else FEW_ROWS_FORMAT_PER_SM's or FEW_ROWS_PER_SM,
    uncapped."""
    long = (None if tail or rows > FEW_ROWS_LONG_ROWS
            else FEW_ROWS_LONG.get((k_fmt, v_fmt, int_keys, block_n, qpad)))
    if long and max_len >= long[0]:
        return long[1], long[2]
    return FEW_ROWS_FORMAT_PER_SM.get((k_fmt, block_n), FEW_ROWS_PER_SM), None


def small_tiles(k_fmt: str, v_fmt: str, dpow: int, tail: bool, group: int,
                rows: int) -> tuple[tuple[int, int, int], int, int, int] | None:
    """ROTATED_TILES' launch for a decode (K format ``k_fmt``, V ``v_fmt``, heads held in
    ``dpow`` lanes and a ``tail`` or none, ``group`` query heads a KV head, ``rows``
    (sequence, KV head) rows) where it applies, else None."""
    tiles = ROTATED_TILES.get(k_fmt) if k_fmt == v_fmt else None
    if tiles is None or dpow > 128 or tail or _pow2(group) > tiles[1] or rows > MANY_ROWS:
        return None
    return tiles


def wide_launch(k_fmt: str, dpow: int, qpad: int, int_keys: bool, rows: int = 1,
                max_len: int = 0) -> tuple[int, int, int]:
    """The decode's (block_n, warps, stages) for heads held in ``dpow`` lanes wider than 128,
    K format ``k_fmt``, ``qpad`` query rows a program, integer key products or not, ``rows``
    (sequence, KV head) rows and ``max_len`` the longest sequence, where no GROUP_LAUNCH
    applies: INT_KEYS_LAUNCH_256 (INT_KEYS_LAUNCH_256_MANY from MANY_ROWS rows under
    INT_KEYS_256_STAGED row-tokens), WIDE_FORMAT_LAUNCH's or WIDE_LAUNCH's for groups of up to
    16 rows, else tiles of 8,192 values in wide_head_warps' warps, two stages."""
    if int_keys and dpow == 256 and qpad <= 16:
        if rows >= MANY_ROWS and rows * max_len < INT_KEYS_256_STAGED:
            return INT_KEYS_LAUNCH_256_MANY
        return INT_KEYS_LAUNCH_256
    if qpad <= 16 and dpow in WIDE_LAUNCH:
        return WIDE_FORMAT_LAUNCH.get((dpow, k_fmt), WIDE_LAUNCH[dpow])
    return max(16, 8192 // dpow), wide_head_warps(dpow), 2


def decode_output(out: Any, shape: tuple[int, ...], device: Any) -> Any:
    """The float32 tensor a decode writes into: ``out`` where given (refused unless it is a
    contiguous float32 tensor of ``shape`` on ``device``), else a new one filled with NaN, so
    that an unwritten element cannot pass for a result."""
    torch = _torch()
    if out is None:
        return torch.full(shape, float("nan"), dtype=torch.float32, device=device)
    if (tuple(out.shape) != shape or out.dtype != torch.float32 or out.device != device
            or not out.is_contiguous()):
        raise ValueError(f"out must be a contiguous float32 tensor of shape {shape} on "
                         f"{device}")
    return out


def swapped_launch(k_fmt: str, v_fmt: str, dpow: int, tail: bool, group: int,
                   rows: int, any_rows: bool = False
                   ) -> tuple[tuple[int, int, int], int, int | None, int | None, bool] | None:
    """SWAPPED's (launch, query rows, registers a thread, programs a multiprocessor, words; None:
    decode's rules; SWAPPED_MANY's launch, registers and programs from SWAPPED_MANY_ROWS rows)
    for a
    decode (K format ``k_fmt``, V ``v_fmt``, heads held in ``dpow`` lanes and a ``tail`` or
    none, ``group`` query heads a KV head, ``rows`` (sequence, KV head) rows) where the
    swapped products apply by default (``any_rows``: however few the rows), else None."""
    entry = SWAPPED.get(k_fmt) if k_fmt == v_fmt else None
    if (entry is None or dpow != 128 or tail or group > 8
            or (rows < entry[0] and not any_rows)):
        return None
    _, launch, pads, regs, per_sm, words = entry
    many = rows >= SWAPPED_MANY_ROWS
    if many and k_fmt in SWAPPED_MANY:
        launch, regs, per_sm = SWAPPED_MANY[k_fmt]
    return launch, pads[many], regs, per_sm, words


#: (format, planes read as int32 words) that gave wrong values in decode tiles of fewer than 32
#: tokens on an H200 (bench/results/byte-reads-h200.json: relative error 1.0-1.65 under five
#: 16-token launches; right from 32 tokens and in the interpreter): tbq3 read as bytes, nvfp4
#: read as words. Such a side takes the other read (short_tile_reads)
SHORT_TILE_WRONG = frozenset({("tbq3", False), ("nvfp4", True)})


def short_tile_reads(fmt: str, as_words: bool, given: bool) -> bool:
    """How a decode side in ``fmt`` reads its planes (True: as words) in tiles of fewer than 32
    tokens: as asked, unless that read is in SHORT_TILE_WRONG; then the other one, or, where
    the caller asked for it (``given``), a ValueError."""
    if (fmt, as_words) not in SHORT_TILE_WRONG:
        return as_words
    if given:
        read = "words" if as_words else "bytes"
        raise ValueError(f"{fmt} planes read as {read} in decode tiles of fewer than 32 tokens "
                         "give wrong values on a GPU; leave words/words_v to their default or "
                         "take block_n >= 32")
    return not as_words


def query_blocks(group: int, cap: int, least: int = 16) -> tuple[int, int]:
    """(query rows a decode program holds, programs a KV head takes) for a query group of
    ``group`` heads, at most ``cap`` rows (a power of two, at least 16) a program and at least
    ``least`` (a power of two: the group is padded to it)."""
    qpad = min(max(least, _pow2(group)), cap)
    return qpad, math.ceil(group / qpad)


def head_parts(width: int) -> tuple[int, int]:
    """(main, tail): the lanes a decode program holds a head of ``width`` packed values in, a
    power of two and, where it saves lanes, a smaller power-of-two tail of at least 32 lanes
    (tail 0: none). DeepSeek's 576-wide latent: 512 + 64 instead of 1,024 (640 in a rotated
    format: 512 + 128); 96: 64 + 32; 128: 128."""
    main = 1 << (width.bit_length() - 1)
    if main == width:
        return main, 0
    tail = max(32, _pow2(width - main))
    return (main, tail) if tail < main else (2 * main, 0)


#: programs a multiprocessor of the Gluon kernel (kernels/gluon_q4_0.py) in nvfp4 (q4_0 until v62)
#: and in q8_0: the programs that reside at once (q4_0 at 168 registers, q8_0 at up to 256), so that its
#: splits (splits_for) fill one whole wave. Rounding the wave up had left a second wave of a few
#: programs (bench/results/gluon-waves-h200.json): q4_0 B=16 128k 17 splits 762.3 µs against
#: 681.8 at 12, q8_0 13 splits 1,131.7 against 1,053.6 at 8; the sweeps before it
#: (gluon-q4_0-few-rows-h200.json, gluon-q8_0-per-sm-h200.json) had found the same tails.
GLUON_PER_SM = 12
GLUON_PER_SM_Q8 = 8
#: fewer programs where the work is small, in whole programs a scheduler (a multiprocessor's
#: four schedulers each hold one warp of q8_0's, two of q4_0's; 5, 6, 10 and 11 leave them
#: uneven). q8_0 over at most GLUON_FEW_ROWS (sequence, KV head) rows: one wave of 4
#: (q8_0-few-rounds-h200.json, three rounds in turns: B=1 128k 74.7–74.9 → 72.1–72.3 µs against
#: 6 a multiprocessor, B=1 64k 42.3–42.8 → 40.2–40.6, B=2 32k −5%, B=1 256k −2.5%;
#: q8_0-four-h200.json: B=1 1M 519 → 509–512, B=8 32k 144.4 → 137.3–137.9, B=8 128k 521.3 →
#: 513.3–514.5; 3 a multiprocessor within 1% of the old count, 5 and 2 slower). Over 128 rows
#: and more 4 was within 2% either way, 0.5–1% slower at 256 and 512 rows by 32k
#: (q8_0-four-many-h200.json), so those keep 8. q4_0 where one wave of 8 would make splits of
#: at most GLUON_SHORT_SPLIT tokens: 8 (q4_0-four-h200.json, q4_0-eight-h200.json: B=1 128k
#: 47.0–47.3 → 44.7–44.9 µs, B=1 64k 28.4–28.7 → 26.2–26.5, B=4 32k 47.3–47.5 → 46.2–46.5);
#: at 2,048-token splits and more 12 was as fast or faster (B=1 256k 85.2–85.6 against 87.3,
#: B=1 1M 333–336 against 340–342, B=8 32k within 1%).
GLUON_PER_SM_Q8_FEW = 4
GLUON_FEW_ROWS = 64
GLUON_PER_SM_SHORT = 8
GLUON_SHORT_SPLIT = 1024
#: q4_0 at every count of rows and tokens (v62): 8 a multiprocessor, with PIPE (Q4_PIPE_PER_SM),
#: also where splits are long. Against 12 without PIPE, in three rounds in turns
#: (gluon-q4_0-per-sm-h200.json, gluon-q4_0-per-sm-long-h200.json): B=2 128k 85.1–86.8 against
#: 89.0–89.3 µs, B=4 128k 169.6–172.4 against 173.7–178.3, B=8 32k 88.4–89.5 against
#: 90.5–91.4, B=16 32k 171.1–172.1 against 175.8–176.4, B=8 64k 171.6–173.0 against
#: 174.6–175.0, B=1 256k 86.3–87.2 against 88.0–88.9, B=1 1M 329.8–346.3 against 346.5–353.6;
#: level at B=8 128k (348.7–355.7 against 346.3–354.8) and B=64 32k (673–709 against 686–690).
#: nvfp4 keeps GLUON_PER_SM past short splits (B=8 128k: 355 µs at 12 against 369–374 at 8,
#: gluon-stages-nvfp4-h200.json)
GLUON_PER_SM_Q4 = 8
#: the rows × tokens past which the Gluon kernel was faster than decode_split_kernel (B=1 at
#: 32k, 8 rows × 32,768: 23.3 against 22.1 µs; B=1 64k and B=2 32k, twice the work: 34.2 and
#: 34.0 against 37.0 and 37.2)
GLUON_LEAST_WORK = 8 * 32768
#: q4_0 and q8_0 past these rows × tokens (v72), where v62's Gluon kernel (8 programs a
#: multiprocessor, PIPE) beat the split kernel at every count timed, three rounds in turns,
#: outputs identical (gluon-short-h200.json and gluon-short-rest-h200.json: q4_0 B=1 4k
#: 6.6 µs against 7.1–7.4, B=1 8k 8.7 against 9.9–10.0, B=1 16k 11.2 against 13.9, B=1 32k
#: 15.8 against 21.5–21.6, B=2 16k 16.0–16.1 against 22.0–22.1, B=8 4k 17.7–17.8 against
#: 22.5–22.6; q8_0 B=1 16k 14.2 against 20.0–20.1, B=1 32k 22.8 against 32.1–32.2, B=2 16k
#: 22.8–22.9 against 32.4–32.5):
#: every q4_0 count, q8_0 from B=1 16k; below it (v73, short-q8_0-h200.json) q8_0 too: B=1 2k
#: 6.1 µs against 7.8–8.1, 4k 7.7–7.8 against 10.2–10.3, 8k 9.9 against 14.1, B=2 4k 9.9
#: against 14.4; tbq4 keeps GLUON_LEAST_WORK (its split kernel faster there: B=1 16k 19.2
#: against 23.2, B=1 32k 30.4–30.6 against 31.5; short-tbq4-h200.json, v73: B=1 4k 11.0–11.2
#: against 16.6–16.7 at 8 and 15.4–15.7 at 4, B=1 32k 30.7–30.8 against 31.9–32.0 and
#: 31.5–31.6, B=2 8k 20.0–20.1 against 23.8 and 22.2–22.4)
GLUON_LEAST_WORK_Q4, GLUON_LEAST_WORK_Q8 = 0, 0
#: the same for the nvfp4 form, whose split kernel takes longer: past 8 rows × 8,192 tokens
#: (gluon-nvfp4-pipe-h200.json: B=1 16k 16.4 against 16.6–16.9 µs, B=2 8k 16.3 against 17.3,
#: B=1 32k 21.0 against 25.9; B=1 8k 13.9 against 12.3, B=1 4k 11.9 against 8.7)
GLUON_LEAST_WORK_FP4 = 8 * 8192
#: where GLUON_FEW_FP4's 4 programs a multiprocessor apply (at most 16 rows), from less work
#: (v73, short-nvfp4-h200.json, three rounds in turns, outputs identical: B=1 8k 11.3–11.4 µs
#: against 12.4–12.5 by the split kernel; B=1 4k 10.2 against 8.8, B=1 2k 8.6 against 7.1–7.4;
#: over 16 rows the split kernel stays faster at the same work, B=2 4k 12.8 against 14.1)
GLUON_LEAST_WORK_FP4_FEW = 8 * 4096
#: nvfp4 over at most 16 rows and 8 × 32,768 rows × tokens (B=1 up to 32k and B=2 up to 16k,
#: 8 KV heads): 4 programs a multiprocessor, longer splits and fewer to merge (v72,
#: short-programs-nvfp4-h200.json, three rounds in turns, outputs identical: B=1 16k 14.5 µs
#: against 15.8–16.7 at 8, B=1 32k 20.4 against 20.9–21.0; B=1 64k 32.6 against 29.3–29.5, so
#: 8 past it; q4_0 kept 8 at every count, short-programs-q4_0-h200.json: 4 and 6 level or
#: slower). 16 rows from v74,
#: three rounds in turns, outputs identical: on an H200 (few-fp4-rows-h200.json) B=2 4k
#: 10.9–11.2 µs against the split kernel's 12.7, 8k 14.2–14.3 against 16.7, 16k 20.1 against
#: 20.7–20.8 by 8 a multiprocessor, but B=2 32k 32.3–32.4 against 29.3, hence the rows ×
#: tokens cap; on an H100 (few-fp4-rows-h100.json) B=2 4k–16k 10–20% faster alike, B=2 32k
#: 3% faster, over 32 rows mixed (B=4 8k 21.9–22.0 against 23.8–23.9, 32k 63.4–63.6 against
#: 60.8–61.0), so 16 rows
GLUON_FEW_FP4 = (16, 8 * 32768, 4)
#: the tbq4 form's programs a multiprocessor (213 registers under triton 3.6, so two a
#: scheduler): within 1% of the best of 8 and 12, capped at 168 or not, at every shape timed
#: (gluon-tbq4-h200.json: B=1 128k 82.9 µs against 96.5 by the split kernel, B=8 32k 150.4
#: against 183–186, B=8 128k 554.5 against 551.2 at 12 and 635–641 split); the split kernel
#: stays faster at B=1 32k (30.6 against 31.2)
GLUON_PER_SM_TBQ4 = 8
#: the tbq3 form's programs a multiprocessor (176 registers under triton 3.6, 175 under 3.9,
#: capped at 232): at 12, capped at 168 (142), as fast from 128k tokens and slower below
#: (gluon-tbq3-h200.json: B=1 128k 75.1 µs at 8, 74.5–75.7 at 12, 120.2 by the split kernel;
#: B=1 32k 29.8 against 31.0; B=8 128k 490.2 against 487.8)
GLUON_PER_SM_TBQ3 = 8
#: the tbq3 form past 8 rows × 16,384 tokens; over at most GLUON_FEW_TBQ3[0] rows (measured to
#: 32) past 8 × 8,192 (GLUON_LEAST_WORK_TBQ3_FEW), at 4 programs a multiprocessor up to 8 ×
#: 32,768 (v73, three rounds in turns, outputs identical; short-tbq3-h200.json: B=1
#: 16k 20.9–21.2 µs at 4 against 22.4–22.5 by the split kernel and 22.3–22.4 at 8, B=2 8k
#: 20.8–21.2 against 22.9–23.0 and 21.7–21.8; B=1 8k 16.8 at 4 against 15.2–15.3 split, B=1 4k
#: 14.8–15.1 against 11.3–11.6; few-tbq3-h200.json: B=4 8k 29.5–29.6 against 30.3 at 8, B=1
#: 32k 29.0–29.2 against 29.6–29.7, B=2 16k 28.8–28.9 against 29.2–29.3; B=1 64k 45.8–45.9
#: against 43.9–44.2 and B=2 32k 45.4–45.6 against 43.6–43.8, so 8 past it). Before v73 past
#: 8 × 16,384 at 8 (gluon-tbq3-h200.json: B=1 16k 22.3–22.6 µs against 22.3–22.4 by the split
#: kernel, B=2 16k 29.6 against 36.3, B=1 32k 29.8 against 36.2; B=1 8k 19.1 against 15.3).
#: tbq4 at 4 was slower than at 8 from 8 × 65,536 (few-tbq4-h200.json: B=1 64k 50.2–50.3
#: against 47.9–49.0, B=1 128k 85.7–86.2 against 82.5–83.0) and keeps 8.
GLUON_LEAST_WORK_TBQ3, GLUON_LEAST_WORK_TBQ3_FEW = 8 * 16384, 8 * 8192
GLUON_FEW_TBQ3 = (32, 8 * 32768, 4)
#: groups of 9-16 query heads a KV head (the 16-column forms: q4_0's scaled as unpacked, no
#: PIPE, 207-243 registers uncapped): 8 programs a multiprocessor, faster than 12 at every
#: shape, past these rows × tokens (gluon-group16-*-h200.json, 64/4 heads: at 16 × 32,768 the
#: split kernel was faster for q4_0 (49.5 against 58.8 µs) and tbq4 (69.5 against 76.8), the
#: Gluon kernel for nvfp4 (65.1 → 59.1) and tbq3 (81.4 → 68.8); at 8 × 32,768 the split
#: kernel for all four; at 32 × 32,768 the Gluon kernel for all four (q4_0 88.5 → 84.7,
#: tbq4 129.4 → 117.4); at 32 × 131,072 q4_0 325.5 → 253.1, nvfp4 362.9 → 245.4, tbq4 492.7 →
#: 349.0, tbq3 520.7 → 301.5)
GLUON_PER_SM_16 = 8
GLUON_LEAST_WORK_16 = {"q4_0": 16 * 32768, "nvfp4": 8 * 32768, "tbq4": 16 * 32768,
                       "tbq3": 8 * 32768}


def gluon_available(module: str = "gluon_q4_0") -> bool:
    """Whether the installed triton compiles kernels/gluon_q4_0.py (or ``module``, another
    Gluon kernel: gluon_kivi) (its Gluon dialect with the layouts, copies and barrier the
    kernel uses; ``kvplan[gpu]`` allows triton from 3.2)."""
    import importlib

    try:
        importlib.import_module(f"{__package__}.{module}")
    except (ImportError, AttributeError):
        return False
    return True


def gluon_launch(k_fmt: str, v_fmt: str, head_dim: int, head_dim_v: int, group: int,
                 page_size: int, rows: int, max_len: int, device_type: str,
                 capability: tuple[int, int] = (9, 0), faster_only: bool = True) -> int | None:
    """Programs a multiprocessor for the Gluon kernel where it applies (K and V in q4_0, nvfp4,
    tbq4 or tbq3, or both in q8_0 with groups of at most 8, 128-lane heads, groups of at most 16
    query heads, pages of a multiple of its 32-token tiles, an sm_80+ GPU) and, with
    ``faster_only``, was measured faster (more than GLUON_LEAST_WORK rows × tokens,
    GLUON_LEAST_WORK_FP4 in nvfp4, GLUON_LEAST_WORK_TBQ3 in tbq3, GLUON_LEAST_WORK_Q4 and
    GLUON_LEAST_WORK_Q8 in q4_0 and q8_0, GLUON_LEAST_WORK_16's for groups of 9-16), else
    None. Groups of 9-16: GLUON_PER_SM_16. Else q4_0: GLUON_PER_SM_Q4; nvfp4: GLUON_FEW_FP4's
    count over its few rows and tokens, else GLUON_PER_SM, or GLUON_PER_SM_SHORT where a wave
    of that many would make splits of GLUON_SHORT_SPLIT tokens or fewer; tbq4:
    GLUON_PER_SM_TBQ4; tbq3: GLUON_FEW_TBQ3's count over its few rows up to its rows ×
    tokens (and from GLUON_LEAST_WORK_TBQ3_FEW over them), else GLUON_PER_SM_TBQ3; q8_0:
    GLUON_PER_SM_Q8_FEW over at most GLUON_FEW_ROWS rows, else GLUON_PER_SM_Q8. nvfp4 over
    GLUON_FEW_FP4's few rows and tokens takes it past GLUON_LEAST_WORK_FP4_FEW."""
    if (k_fmt, v_fmt) not in (("q4_0", "q4_0"), ("q8_0", "q8_0"), ("nvfp4", "nvfp4"),
                              ("tbq4", "tbq4"), ("tbq3", "tbq3")):
        return None
    if head_dim != 128 or head_dim_v != 128 or (k_fmt == "q8_0" and group > 8):
        return None
    if device_type != "cuda" or capability < (8, 0) or group > 16 or page_size % 32:
        return None
    if group > 8:  # the 16-column forms
        if faster_only and rows * max_len <= GLUON_LEAST_WORK_16[k_fmt]:
            return None
        return GLUON_PER_SM_16
    few_fp4 = (k_fmt == "nvfp4" and rows <= GLUON_FEW_FP4[0]
               and rows * max_len <= GLUON_FEW_FP4[1])
    few_tbq3 = rows <= GLUON_FEW_TBQ3[0]
    least = {"nvfp4": GLUON_LEAST_WORK_FP4_FEW if few_fp4 else GLUON_LEAST_WORK_FP4,
             "tbq3": GLUON_LEAST_WORK_TBQ3_FEW if few_tbq3 else GLUON_LEAST_WORK_TBQ3,
             "q4_0": GLUON_LEAST_WORK_Q4, "q8_0": GLUON_LEAST_WORK_Q8}
    if faster_only and rows * max_len <= least.get(k_fmt, GLUON_LEAST_WORK):
        return None
    if k_fmt == "q8_0":
        return GLUON_PER_SM_Q8_FEW if rows <= GLUON_FEW_ROWS else GLUON_PER_SM_Q8
    if k_fmt == "tbq4":
        return GLUON_PER_SM_TBQ4
    if k_fmt == "tbq3":
        few = few_tbq3 and rows * max_len <= GLUON_FEW_TBQ3[1]
        return GLUON_FEW_TBQ3[2] if few else GLUON_PER_SM_TBQ3
    if k_fmt == "q4_0":
        return GLUON_PER_SM_Q4
    if few_fp4:
        return GLUON_FEW_FP4[2]
    short = tiled_splits(max_len, wave_splits(rows, GLUON_PER_SM_SHORT))[0] <= GLUON_SHORT_SPLIT
    return GLUON_PER_SM_SHORT if short else GLUON_PER_SM


def tiled_splits(max_len: int, want: int) -> tuple[int, int]:
    """(tokens a split, splits) for about ``want`` splits of up to ``max_len`` tokens: whole
    32-token tiles (the Gluon kernel's), so never more than ``want``."""
    split = max(32, math.ceil(max_len / want / 32) * 32)
    return split, max(1, math.ceil(max_len / split))


def tail_offsets(fmt: str, main: int) -> tuple[int, int]:
    """Elements of a format's two planes before a row's head dimension ``main`` (a multiple of
    the format's block): where a head's tail part starts. A per-row scale (fp8_pth) has none."""
    widths = [w for w, _ in plane_widths(fmt, main).values()]
    if fmt == "fp8_pth":
        return widths[0], 0
    return widths[0], widths[1] if len(widths) > 1 else 0


@dataclass
class Side:
    """The planes of K or of V."""

    fmt: str
    pages: int
    heads: int
    page_size: int
    head_dim: int
    device: Any
    planes: dict[str, Any] = field(default_factory=dict)
    #: per-tensor fp32 scale (nvfp4), one per layer and side
    global_scale: Any = None
    #: the global scale's value as the host last set it: appends read this, not the device
    #: tensor, so that an append never waits for the GPU (and can be captured in a CUDA graph)
    global_scale_host: float = 1.0
    #: rows from outside float16's range may have been written (an append of bfloat16 or
    #: float32 rows): a lazy decode then checks fp8_pth's row scales (decode's ``wide``)
    wide: bool = False

    def __post_init__(self) -> None:
        torch = _torch()
        for name, (width, dtype) in plane_widths(self.fmt, self.head_dim).items():
            shape: tuple[int, ...] = (self.pages, self.heads, self.page_size, width)
            if name == "scale":
                shape = (self.pages, self.heads, self.page_size)
            self.planes[name] = torch.zeros(shape, dtype=getattr(torch, dtype), device=self.device)
        if get_format(self.fmt).tensor_scale_bytes:
            self.global_scale = torch.ones(1, dtype=torch.float32, device=self.device)

    @property
    def nbytes(self) -> int:
        total = sum(int(t.numel()) * int(t.element_size()) for t in self.planes.values())
        if self.global_scale is not None:
            total += int(self.global_scale.numel()) * int(self.global_scale.element_size())
        return total

    @property
    def padded_dim(self) -> int:
        return ref.padded(self.fmt, self.head_dim)

    def flat(self) -> list[Any]:
        return list(self.planes.values())

    def operands(self) -> tuple[Any, Any, int, int]:
        """What a kernel reads: the data plane, the scale plane (the data plane again where
        the format has none) and their row widths in elements (1 for a per-row scale)."""
        planes = self.flat()
        p0 = planes[0]
        p1 = planes[1] if len(planes) > 1 else p0
        return p0, p1, p0.shape[-1], p1.shape[-1] if p1.dim() == 4 else 1

    def rows(self) -> dict[str, Any]:
        """Planes viewed as [pages · heads · page_size, width]."""
        return {k: v.reshape(self.pages * self.heads * self.page_size, -1)
                for k, v in self.planes.items()}


class LayerCache:
    """One layer's K and V for ``pages`` pages of ``page_size`` tokens × ``kv_heads`` heads."""

    def __init__(self, kv_k: str, kv_v: str, pages: int, page_size: int, kv_heads: int,
                 head_dim: int, device: Any = "cpu", *, values: bool = True,
                 head_dim_v: int | None = None) -> None:
        """``values=False``: a K-only cache (an MLA latent), attended with V = the latent.
        ``head_dim_v``: the width of V's rows where it is not ``head_dim`` (K's and the
        query's; MiMo-V2's full layers: K 192, V 128), narrower or wider; V's planes are sized
        by it and decode's output is that wide."""
        for name in (kv_k, kv_v):
            if name not in PAGED:
                raise ValueError(f"no paged kernel layout for {name}; paged formats: "
                                 f"{', '.join(PAGED)}")
        head_dim_v = head_dim if head_dim_v is None else head_dim_v
        if not values and head_dim_v != head_dim:
            raise ValueError("a K-only cache attends with V = the keys: no V width of its own")
        if head_dim_v < 1:
            raise ValueError("head_dim_v must be at least 1")
        self.k = Side(kv_k, pages, kv_heads, page_size, head_dim, device)
        self.has_v = values
        self.v = (Side(kv_v, pages, kv_heads, page_size, head_dim_v, device) if values
                  else self.k)
        self.page_size, self.kv_heads, self.head_dim = page_size, kv_heads, head_dim
        self.head_dim_v = head_dim_v
        self.device = device

    @property
    def nbytes(self) -> int:
        """Bytes held by this cache's tensors (K + V, scales included)."""
        return self.k.nbytes + (self.v.nbytes if self.has_v else 0)

    def tensors(self) -> list[Any]:
        sides = (self.k, self.v) if self.has_v else (self.k,)
        out = [t for side in sides for t in side.planes.values()]
        out += [side.global_scale for side in sides if side.global_scale is not None]
        return out

    def allocations(self) -> list[Any]:
        """Every device tensor the cache allocated, in order (the same as tensors())."""
        return self.tensors()

    def dst_rows(self, pages: Any, offsets: Any) -> Any:
        """Row index of (page, head, offset) for every head: [n, heads] int64."""
        torch = _torch()
        heads = torch.arange(self.kv_heads, device=pages.device, dtype=torch.int64)
        return (pages.to(torch.int64)[:, None] * self.kv_heads + heads[None, :]) * \
            self.page_size + offsets.to(torch.int64)[:, None]

    # ---- reference path (torch only) -------------------------------------------------------

    def append_ref(self, k: Any, v: Any, pages: Any, offsets: Any) -> None:
        """k [n, kv_heads, head_dim], v [n, kv_heads, head_dim_v]; token i goes to (pages[i],
        offsets[i])."""
        dst = self.dst_rows(pages, offsets).reshape(-1)
        for side, x in ((self.k, k), (self.v, v))[: 2 if self.has_v else 1]:
            rows = x.reshape(-1, side.head_dim)
            self._fix_global_scale(side, rows)
            side.wide = side.wide or rows.dtype != _torch().float16
            planes = ref.quantize(side.fmt, rows, global_scale=side.global_scale_host)
            flat = side.rows()
            for name, t in planes.items():
                flat[name][dst] = t.reshape(t.shape[0], -1).to(flat[name].dtype)

    @staticmethod
    def _fix_global_scale(side: Side, rows: Any) -> None:
        """A per-tensor scale (nvfp4) is set by the first append of nonzero rows and then kept,
        so that later tokens never change how earlier ones read."""
        if side.global_scale is not None and side.global_scale_host == 1.0:
            # the float32 value the device holds
            side.global_scale_host = struct.unpack("<f", struct.pack(
                "<f", ref.nvfp4_global_scale(rows)))[0]
            side.global_scale.fill_(side.global_scale_host)

    def gather_ref(self, side: Side, block_table: Any, seq_len: int, b: int) -> Any:
        """Dequantized [kv_heads, seq_len, width] float32 of sequence ``b`` (reference), the
        width ``side``'s."""
        torch = _torch()
        t = torch.arange(seq_len, device=block_table.device)
        pages = block_table[b, t // self.page_size]
        dst = self.dst_rows(pages, t % self.page_size).T.reshape(-1)
        flat = side.rows()
        planes = {k: v[dst] for k, v in flat.items()}
        if "scale" in planes:
            planes["scale"] = planes["scale"].reshape(-1, 1)
        x = ref.dequantize(side.fmt, planes, side.head_dim, global_scale=side.global_scale_host)
        return x.reshape(self.kv_heads, seq_len, side.head_dim)

    def uses_int_keys(self, int_keys: bool | None = None, parts: bool = True) -> bool:
        """Whether decode (with these arguments) takes the integer key product: a K side in
        one of INT_KEYS with a V side of its own (not a K-only latent), held in one power of
        two of lanes (no head tail); ``int_keys`` None: at heads of at most 256 lanes."""
        dpow = self._tables()["dpow"]
        tail = (head_parts(max(self.head_dim, self.k.padded_dim, self.v.padded_dim))[1]
                if parts else 0)
        if int_keys is None:
            int_keys = dpow <= 256
        return bool(int_keys and self.k.fmt in INT_KEYS and not tail and self.has_v)

    def decode_ref(self, q: Any, block_table: Any, seq_lens: Any, *,
                   int_query: bool | None = None) -> Any:
        """Reference decode attention over the dequantized cache: q [B, Hq, head_dim] →
        [B, Hq, head_dim_v] float64. ``int_query`` (default: decode's default takes the
        integer key product, uses_int_keys, and not the Gluon kernel, whose q8_0 form
        multiplies the float16 query, takes_gluon): the query quantized as that product
        quantizes it (ref.int8_query)."""
        torch = _torch()
        if int_query is None:
            int_query = self.uses_int_keys() and not self.takes_gluon(q, seq_lens)
        if int_query:
            q = ref.int8_query(q)
        outs = []
        for b in range(q.shape[0]):
            n = int(seq_lens[b])
            k = self.gather_ref(self.k, block_table, n, b)
            v = self.gather_ref(self.v, block_table, n, b)
            outs.append(ref.attention_ref(q[b:b + 1], k[None], v[None],
                                          torch.tensor([n]))[0])
        return torch.stack(outs)

    # ---- Triton path -----------------------------------------------------------------------

    def _tables(self) -> dict[Any, Any]:
        """The cache's constant tensors by name (made once), and tensors derived from them by
        (name, parameters) keys."""
        if not hasattr(self, "_tab"):
            torch = _torch()
            dpow = _pow2(max(self.head_dim, self.k.padded_dim, self.v.padded_dim))
            self._tab: dict[Any, Any] = {
                # the 128 × 128 rotation of every 128-block of a rotated row, times √128: ±1,
                # exact in float16 (the operand of the kernels' rotations)
                "rot_pm1": torch.sign(ref.rotation("cpu")).half().to(self.device),
                # its signs s1 and s2 (R = diag(s2) H diag(s1) / √128), for hadamard_rotate
                "signs": torch.tensor(codebook.hadamard_signs(), dtype=torch.float32,
                                      device=self.device).reshape(-1),
                "cent16": ref.centroids(16, "cpu").to(self.device),
                "cent8": ref.centroids(8, "cpu").to(self.device),
                "th16": torch.tensor(codebook.thresholds(16), device=self.device),
                "th8": torch.tensor(codebook.thresholds(8), device=self.device),
                "dpow": dpow,
            }
        return self._tab

    def _rotation(self, dtype: Any, lanes: bool = False) -> Any:
        """The ±1 rotation matrix in ``dtype``, its rows in lane_order with ``lanes`` (the
        operand of a rotated append: tbq3's)."""
        from .triton_ops import lane_order

        tab = self._tables()
        key = f"rot_pm1 {dtype} {'lanes' if lanes else 'rows'}"
        if key not in tab:
            rot = tab["rot_pm1"].to(dtype)
            tab[key] = rot[lane_order(), :].contiguous() if lanes else rot
        return tab[key]

    def _cells(self, levels: int, bias: float) -> tuple[float, Any]:
        """codebook.cells for the rotated append's lookup: (inv, its rows as int64 [n, 2])."""
        tab = self._tables()
        key = ("cells", levels, bias)
        if key not in tab:
            inv, rows = codebook.cells(levels, bias)
            words = [w - (1 << 64) if w >> 63 else w for row in rows for w in row]
            tab[key] = (inv, _torch().tensor(words, dtype=_torch().int64,
                                              device=self.device).reshape(-1, 2))
        found: tuple[float, Any] = tab[key]
        return found

    def _cent(self, fmt: str, half: bool = False) -> Any:
        """The format's centroids: float32 for append, float16 for decode (read as is)."""
        tab = self._tables()
        key = ("cent8" if fmt == "tbq3" else "cent16") + ("h" if half else "")
        if key not in tab:
            tab[key] = tab[key[:-1]].half()
        return tab[key]

    def append(self, k: Any, v: Any, pages: Any, offsets: Any,
               rows_per_program: int | None = None, num_warps: int | None = None,
               programs_per_sm: int | None = None, num_stages: int | None = None,
               max_registers: int | None = None, one_launch: bool = True,
               fma_search: bool = True, fma_bias: float | None = None,
               prefetch: bool | None = None, lookup: bool | None = None) -> None:
        """k [n, kv_heads, head_dim], v [n, kv_heads, head_dim_v]: token i goes to (pages[i],
        offsets[i]). Quantize and write new tokens with the Triton append kernels (each side's format's
        APPEND_LAUNCH at head_dim 128, fewer rows for wider heads, so the rotation's operands
        fit shared memory; at least 16 rows for a rotated format, whose rotation is a tensor-core
        product). The destination rows are computed in the kernel: one launch for both sides
        where K and V are in the same format and shape (unless not ``one_launch``), else one
        a side. A rotated format's programs are persistent, each loading the rotation once:
        ``programs_per_sm`` of them a multiprocessor, ``num_stages`` pipelining their loop's
        loads and ``max_registers`` capping their registers a thread (where not given, the
        format's ROTATED_LAUNCH for 128-lane rows, else SELECTS_LAUNCH). ``fma_search``: the
        rotated formats' centroid search as a staircase on the FMA pipes (triton_ops._search's
        FMA form, faster on the H200 than its selects), over the centroids plus ``fma_bias``
        (if not given, codebook.staircase_bias: 0.0 where the staircase is exact as it is).
        ``prefetch``: each rotated program loads its next block's rows into registers before
        coding the block it holds (rotated_append_kernel's PREFETCH; where not given, the
        launch's; one stage unless ``num_stages`` says otherwise). ``lookup``: the FMA form
        with one comparison a value, its threshold found by the value's cell in a table
        (triton_ops._lookup, codebook.cells; the same bytes), at the same launch but with its
        registers uncapped unless ``max_registers`` (compiled for sm_90, tbq4 takes 140 a
        thread and spills under any cap, even 232); where not given, LOOKUP's formats take it
        on 128-lane rows."""
        from .triton_ops import FMT_CODES, append_kernel, rotated_append_kernel

        torch = _torch()
        tab = self._tables()
        pages, offsets = pages.contiguous(), offsets.contiguous()
        launches: list[tuple[Side, dict[str, Any], list[Any], list[Any]]] = []
        for side, x in ((self.k, k), (self.v, v))[: 2 if self.has_v else 1]:
            rows_a, warps = APPEND_LAUNCH.get(side.fmt, (32, 4))
            rotated = side.fmt in ROTATED
            # a side's lanes: the cache's power of two, or where K and V differ in width its
            # own row's (a narrower V is not padded to K's lanes)
            dpow = (tab["dpow"] if self.head_dim_v == self.head_dim
                    else _pow2(max(side.head_dim, side.padded_dim)))
            rows_p = rows_per_program or max(16 if rotated else 1, rows_a * 128 // dpow)
            rows = x.reshape(-1, side.head_dim).contiguous()
            self._fix_global_scale(side, rows)
            side.wide = side.wide or rows.dtype != torch.float16
            p0, p1, x0, x1 = side.operands()
            # the planes and nvfp4's global scale (the data plane again where there is none)
            operands = [p0, p1, side.global_scale if side.global_scale is not None else p0]
            shape = dict(H_KV=self.kv_heads, FMT=FMT_CODES[side.fmt], D=side.head_dim,
                         DP=side.padded_dim, DPOW=dpow, X0=x0, X1=x1, ROWS=rows_p,
                         num_warps=num_warps or warps)
            last = launches[-1] if launches else None
            if one_launch and last and last[1] == shape and last[0].fmt == side.fmt and (
                    last[2][0].dtype == rows.dtype and last[2][0].shape == rows.shape):
                # V as K: one launch writes both sides (SIDES 2)
                last[2].append(rows)
                last[3].extend(operands)
            else:
                launches.append((side, shape, [rows], operands))
        for side, shape, xs, ops in launches:
            rows, n = xs[0], xs[0].shape[0]
            # K's and V's operands: (rows, planes, global scale) a side, the same twice where
            # one side is launched
            first, second = ops[:3], ops[-3:]
            blocks = math.ceil(n / shape["ROWS"]) * len(xs)
            if side.fmt not in ROTATED:
                append_kernel[(blocks,)](
                    rows, xs[-1], pages, offsets, *first[:2], *second[:2], first[2], second[2],
                    n, self.page_size, HW=rows.device.type == "cuda", SIDES=len(xs), **shape,
                    **({"Q4_FLOOR_ADD": True} if APPEND_Q4_FLOOR_ADD and side.fmt == "q4_0"
                       else {}))
                continue
            levels = 8 if side.fmt == "tbq3" else 16
            narrow = shape["DPOW"] == 128  # ROTATED_LAUNCH's rows
            per_sm, stages, regs, ahead = (ROTATED_LAUNCH[side.fmt] if fma_search and narrow
                                           else SELECTS_LAUNCH)
            if prefetch is not None:
                ahead = prefetch
            grid = (min(blocks, SMS * (programs_per_sm or per_sm)),)
            # the rotation in the input's type where it is bfloat16 on a GPU (Triton's
            # interpreter multiplies bfloat16 wrongly), or float16: other inputs than float16
            # then take the kernel's float32 path
            exact = rows.dtype == torch.float16 or (rows.dtype == torch.bfloat16
                                                    and rows.is_cuda)
            rot = self._rotation(rows.dtype if exact else torch.float16,
                                 lanes=side.fmt == "tbq3")
            bias = codebook.staircase_bias(levels) if fma_bias is None else fma_bias
            use = (side.fmt in LOOKUP and narrow) if lookup is None else lookup
            cells = self._cells(levels, bias) if use and fma_search else None
            rotated_append_kernel[grid](
                rows, xs[-1], pages, offsets, *first[:2], *second[:2], rot,
                tab[f"th{levels}"], self._cent(side.fmt),
                tab[f"th{levels}"] if cells is None else cells[1], n, self.page_size,
                LEVELS=levels, SIDES=len(xs), FMA=fma_search, BIAS=bias,
                CELL_INV=0.0 if cells is None else cells[0],
                CELL_MASK=0 if cells is None else cells[1].numel() // 2 - 1,
                HW=rows.device.type == "cuda", PREFETCH=ahead, **shape,
                num_stages=num_stages or (1 if ahead else stages),
                maxnreg=max_registers or (None if cells is not None else regs))

    def _workspace(self, name: str, numel: int, dtype: Any, device: Any) -> Any:
        """A reusable scratch buffer (no allocation on the decode hot path)."""
        torch = _torch()
        if not hasattr(self, "_ws"):
            self._ws: dict[str, Any] = {}
        buf = self._ws.get(name)
        if buf is None or buf.numel() < numel or buf.dtype != dtype or buf.device != torch.device(device):
            buf = torch.empty(numel, dtype=dtype, device=device)
            self._ws[name] = buf
        return buf[:numel]

    def takes_gluon(self, q: Any, seq_lens: Any, max_len: int | None = None) -> bool:
        """Whether decode's default launch for this query takes the Gluon kernel."""
        if max_len is None:
            max_len = int(seq_lens.max()) if q.shape[0] else 0
        return self._gluon_launch(q, q.shape[1] // self.kv_heads, max_len, False,
                                  ()) is not None

    def _gluon_launch(self, q: Any, group: int, max_len: int, forced: bool,
                      given: tuple[Any, ...]) -> int | None:
        """decode's ``gluon``: the Gluon kernel's programs a multiprocessor, or None
        (forced: the launch wherever the kernel applies, a ValueError where it does not)."""
        torch = _torch()
        if q.device.type == "cuda":
            cap = tuple(torch.cuda.get_device_capability(q.device))
        else:
            cap = (0, 0)
        fits = self.has_v and self.k.padded_dim == 128
        if not forced and any(x is not None for x in given):
            return None  # a launch given
        rows = q.shape[0] * self.kv_heads
        launch = gluon_launch(self.k.fmt, self.v.fmt, self.head_dim, self.head_dim_v, group,
                              self.page_size, rows, max_len, q.device.type, cap,
                              faster_only=not forced) if fits else None
        if launch is not None and not gluon_available():
            if forced:
                raise ValueError("gluon: this triton has no Gluon dialect (or not the parts the "
                                 "kernel uses: 3.6 and 3.9 have them)")
            return None
        if forced and launch is None:
            raise ValueError("gluon: K and V in q4_0, nvfp4, tbq4 or tbq3 (or both in q8_0, "
                             "at most 8 query heads a KV head), 128-lane heads, at most 16 query "
                             "heads a KV head, pages of a multiple of 32 tokens, on an sm_80+ GPU; got "
                             f"{self.k.fmt}/{self.v.fmt}, head_dim {self.head_dim}, group "
                             f"{group}, pages of {self.page_size} on {q.device.type}")
        return launch

    def decode(self, q: Any, block_table: Any, seq_lens: Any, *, max_len: int | None = None,
               split_tokens: int | None = None, block_n: int | None = None,
               num_warps: int | None = None, num_stages: int | None = None, out: Any = None,
               asm: bool | None = None, programs_per_sm: int | None = None,
               max_registers: int | None = None, words: bool | None = None,
               reuse_keys: bool | None = None, parts: bool = True,
               query_rows: int | None = None, words_v: bool | None = None,
               pdl: bool | None = None, lazy: bool | None = None,
               pad_rows: int | None = None, wide: bool | None = None,
               int_keys: bool | None = None, swap: bool | None = None,
               rotate_in_kernel: bool = True, gluon: bool | None = None) -> Any:
        """Fused split-K decode attention. q [B, Hq, head_dim] → [B, Hq, head_dim_v] float32
        (V's width; the query and K are head_dim wide).

        Without ``split_tokens`` the context is split (flash-decoding) into several waves of
        programs of at least 2,048 tokens each, or, for short contexts, at least one wave of
        programs of at least 256 tokens; a launch of one-warp programs over fewer than
        MANY_ROWS (sequence, KV head) rows gets FEW_ROWS_PER_SM programs per streaming
        multiprocessor (FEW_ROWS_FORMAT_PER_SM's for its format and block_n; FEW_ROWS_LONG's,
        with its registers a thread unless ``max_registers`` is given, from its fewest tokens;
        ROTATED_TILES' launch, registers and programs for tbq3 and tbq4 where small_tiles
        applies and no launch is given); over MANY_ROWS rows or more, the rotated formats'
        swapped launch takes rotated_many_splits' whole waves, and fp8_pth and nvfp4
        (WHOLE_WAVES) the whole waves of their resident programs that fill most fully
        (fullest_waves) instead of one wave rounded up;
        ``programs_per_sm`` sets that number instead (for fp8_pth and nvfp4 over MANY_ROWS
        rows or more: the programs that reside, of which fullest_waves fills whole waves).
        Give ``max_len`` (the longest sequence) to avoid reading ``seq_lens`` back from the device. Heads wider than
        128 lanes take WIDE_LAUNCH (by the power of two of their width). A head whose width is
        not a power of two is held in two parts where that saves lanes (head_parts: the MLA
        latent's 576 values as 512 + 64, not 1,024). A rotated K format has the query rotated
        by one small kernel before the split kernel; a rotated V format has the merged output
        rotated back by the same kernel after the reduction; where a head is 128 lanes in one
        part, the context is no longer than ROTATE_IN_KERNEL_TOKENS gives and
        ``rotate_in_kernel`` (the default) the split kernel's programs rotate their query and
        their partial outputs themselves (decode_split_kernel's ROT_Q, ROT_V), so that the
        step takes no launch for them. ``asm`` (default: on a
        GPU) unpacks q4_0, q8_0, tbq4, tbq3 and nvfp4 with PTX; without it the plain Triton path
        runs, which gives the same values. ``max_registers`` caps the registers per thread (more
        programs resident per multiprocessor, some spilled). ``words`` (default: the K format
        is in WORDS, or SWAPPED's for a swapped launch) reads the packed planes of fp8_pth, q8_0,
        q4_0, tbq4, tbq3 and nvfp4 as int32 words, four bytes a load, where every row's width
        allows it; ``words_v`` decides for V's planes apart (default: as ``words``). In tiles
        of fewer than 32 tokens a side in tbq3 reads words and one in nvfp4 bytes
        (SHORT_TILE_WRONG; asked for, the other read is a ValueError). ``reuse_keys`` (a
        K-only cache, V = the
        keys; default: the K format is in REUSE_KEYS) unpacks each key tile once
        for both products instead of once for each. ``parts=False`` holds every head in one
        power of two of lanes (the layout before head parts, kept for comparison).
        ``query_rows`` (a power of two, at least 16; default GROUP_LAUNCH's for a group of
        more than 16 heads where it has the format, else max_query_rows): the query heads
        of a KV head's group a program takes at most; a larger group (DeepSeek-V3's 128 heads
        over one latent) is spread over several programs, each reading the same keys.
        ``pad_rows`` (a power of two; default PAD_ROWS's or PAD_ROWS_MANY's for the K format
        at head_dim ≤ 128, PAD_ROWS_256's for heads of 129-256 lanes, else 16): the fewest rows a program holds, its group padded to
        them.
        ``pdl`` (default: on a GPU that has it, programmatic_launch): each kernel of the step
        is launched as a programmatic dependent of the one before it, so that its programs
        are scheduled while that one finishes (the fixed cost of a step, which short contexts
        and batch 1 feel most). ``lazy`` (default: the K format is in LAZY): rescale the
        running output only when a tile's max exceeds the running max by more than
        LAZY_MARGIN (softmax_lazy). ``wide`` (default: V in fp8_pth holds rows from outside
        float16's range, Side.wide; nvfp4's V scale multiplies the output, not the weights,
        and needs no check): with ``lazy``, a tile
        whose V row scale exceeds WIDE_SCALE takes the eager step, so that its weights times
        that scale stay finite in float16 (fp8_pth: rows whose largest magnitude is above
        about 114,000; the check costs about 4% of the loop's instructions). ``int_keys``
        (default: the K format is in INT_KEYS, q8_0, and the head at most 256 lanes; see
        uses_int_keys for where it can apply): the scores are an integer product of the query,
        rounded to int8 per 32-value block, with the key codes as stored, launched as
        INT_KEYS_LAUNCH with the group padded to INT_KEYS_PAD rows (heads of 256 lanes:
        INT_KEYS_LAUNCH_256, 8 rows) unless given; decode_ref
        rounds the query the same way (ref.int8_query). ``swap`` (default: where swapped_launch
        gives a launch and none is given; K and V both in a 4-bit format, q4_0, tbq4, tbq3 or
        nvfp4, otherwise): the products swapped, the cache tile their first operand and the
        query heads the narrow second one, padded to 8 columns (decode_split_kernel's SWAP),
        under SWAPPED's launch, registers and programs a multiprocessor unless given (and
        swapped_launch has one for the format and heads, however few the rows). ``gluon``
        (default: where gluon_launch gives a launch and no launch is given; True forces it
        where the kernel applies, else a ValueError; False: never): K and V in q4_0, or both
        in q8_0 with groups of up to 8 (whose form multiplies the float16 query, not an int8
        one), by the kernel that states its layouts (kernels/gluon_q4_0.py). ``out``: the
        output to write into (contiguous float32 [B, Hq, head_dim_v] on q's device; a step
        replayed from a CUDA graph then takes no fill launch), else a new tensor filled with
        NaN first, so that an unwritten element cannot pass for a result.
        """
        from .triton_ops import (
            FMT_CODES,
            decode_split_kernel,
            pdl_launch,
        )

        torch = _torch()
        tab = self._tables()
        bsz, hq, d = q.shape
        group = hq // self.kv_heads
        dpow = tab["dpow"]
        if max_len is None:
            max_len = int(seq_lens.max()) if bsz else 0
        if gluon is not False:
            per_sm = self._gluon_launch(q, group, max_len, bool(gluon), (
                split_tokens, block_n, num_warps, num_stages, programs_per_sm, max_registers,
                words, query_rows, words_v, pad_rows, int_keys, swap, asm, lazy, reuse_keys))
            if per_sm:
                from .gluon_q4_0 import decode_gluon, splits_for

                n = splits_for(bsz * self.kv_heads, max_len, per_sm)[1]
                return decode_gluon(
                    self, q.contiguous(), block_table, seq_lens,
                    decode_output(out, (bsz, hq, self.head_dim_v), q.device), max_len, per_sm,
                    self._workspace("acc", bsz * hq * n * d, torch.float32, q.device),
                    self._workspace("ml", bsz * hq * n * 2, torch.float32, q.device),
                    pdl=programmatic_launch(q.device) if pdl is None else bool(pdl))
        main, tail = (head_parts(max(self.head_dim, self.k.padded_dim, self.v.padded_dim))
                      if parts else (dpow, 0))
        width = main + tail
        group_launch = GROUP_LAUNCH.get((dpow, self.k.fmt)) if group > 16 else None
        row_cap = query_rows or (group_launch[3] if group_launch else max_query_rows(width))
        many = bsz * self.kv_heads >= MANY_ROWS
        same_kv = not self.has_v and (self.k.fmt in REUSE_KEYS if reuse_keys is None
                                      else reuse_keys)
        int_keys = self.uses_int_keys(int_keys, parts)
        if int_keys and pad_rows is None and dpow <= 128:
            pad_rows = INT_KEYS_PAD
        given = (pad_rows, block_n, num_warps, num_stages) != (None,) * 4
        # the swapped products, or else the rotated formats' small tiles, unless a launch is
        # given
        swapped = (swapped_launch(self.k.fmt, self.v.fmt, dpow, bool(tail), group,
                                  bsz * self.kv_heads, any_rows=bool(swap))
                   if swap is not False and not given and self.has_v and not same_kv
                   else None)
        if swap is None:
            swap = swapped is not None
        elif swap and (FMT_CODES[self.k.fmt] < 3 or FMT_CODES[self.v.fmt] < 3 or tail
                       or same_kv):
            raise ValueError("swap: K and V in a 4-bit format (q4_0, tbq4, tbq3, nvfp4), "
                             "each head in one part, with a V side of its own; got "
                             f"{self.k.fmt}/{self.v.fmt}")
        # a launch, rows, registers and programs a multiprocessor chosen together
        tiles = swapped or (small_tiles(self.k.fmt, self.v.fmt, dpow, bool(tail), group,
                                        bsz * self.kv_heads)
                            if not given and not swap and self.has_v else None)
        if tiles:
            pad_rows = tiles[1]
            if max_registers is None:
                max_registers = tiles[2]
            if programs_per_sm is None:
                programs_per_sm = tiles[3]
        if pad_rows is None:
            pads = ((PAD_ROWS_MANY if many else PAD_ROWS) if dpow <= 128
                    else PAD_ROWS_256 if dpow == 256 else {})
            pad_rows = pads.get(self.k.fmt, 16)
        qpad, qblocks = query_blocks(group, row_cap, pad_rows)
        if tiles:
            bn, nw, ns = tiles[0]
        elif group_launch:
            bn, nw, ns = group_launch[:3]
        elif dpow <= 128 and int_keys:
            bn, nw, ns = INT_KEYS_LAUNCH
        elif dpow <= 128:
            bn, nw, ns = (LAUNCH_MANY if many else LAUNCH).get(self.k.fmt, (64, 4, 2))
        else:
            bn, nw, ns = wide_launch(self.k.fmt, dpow, qpad, bool(int_keys),
                                     bsz * self.kv_heads, max_len)
        block_n = bn if block_n is None else block_n
        num_warps = nw if num_warps is None else num_warps
        num_stages = ns if num_stages is None else num_stages
        if split_tokens is None:
            bh = max(1, bsz * self.kv_heads * qblocks)
            if not programs_per_sm and num_warps == 1 and bh < MANY_ROWS:
                programs_per_sm, regs = few_rows_launch(
                    self.k.fmt, self.v.fmt, bool(int_keys), block_n, qpad, max_len, bh,
                    bool(tail))
                if max_registers is None:
                    max_registers = regs
            whole = self.k.fmt == self.v.fmt in WHOLE_WAVES and bh >= MANY_ROWS
            if programs_per_sm and swapped and self.k.fmt in ROTATED and bh >= MANY_ROWS:
                want = rotated_many_splits(bh, max_len, programs_per_sm)
            elif programs_per_sm:
                want = (fullest_waves(bh, programs_per_sm, max_len) if whole
                        else wave_up(bh, programs_per_sm))
            else:
                most = min(max_len // LONG_SPLIT, MAX_SPLITS)
                several = min(fullest_waves(bh, WHOLE_RESIDENT, max_len, most) if whole
                              else wave_up(bh, WAVES_PER_SM), most)
                want = max(1, several, one_wave_splits(bh, max_len))
            split_tokens = math.ceil(max_len / want)
        # a split is whole tiles, so that no tile straddles two splits
        split_tokens = max(block_n, math.ceil(split_tokens / block_n) * block_n)
        ps = self.page_size
        page_mode = 0 if ps % block_n == 0 else 1 if block_n % ps == 0 else 2
        if asm is None:
            asm = q.device.type == "cuda"
        if pdl is None:
            pdl = programmatic_launch(q.device)
        if lazy is None:
            lazy = self.k.fmt in LAZY
        if wide is None:
            wide = self.v.fmt == "fp8_pth" and self.v.wide
        n_splits = max(1, math.ceil(max_len / split_tokens))
        acc = self._workspace("acc", bsz * hq * n_splits * width, torch.float32, q.device)
        ml = self._workspace("ml", bsz * hq * n_splits * 2, torch.float32, q.device)
        out = decode_output(out, (bsz, hq, self.head_dim_v), q.device)
        q_in = q.contiguous()
        # rotations in the split kernel: a head of 128 lanes in one part, a context no longer
        # than ROTATE_IN_KERNEL_TOKENS gives for each rotated side
        fold = (rotate_in_kernel and main == 128 and not tail
                and all(max_len <= ROTATE_IN_KERNEL_TOKENS.get(f, max_len)
                        for f in (self.k.fmt, self.v.fmt) if f in ROTATED))
        rot_q = fold and self.k.fmt in ROTATED
        rot_v = fold and self.v.fmt in ROTATED
        if self.k.fmt in ROTATED and not rot_q:
            q_in = self.rotated_query(q_in, width, dpow, pdl)
        k0, k1, xk0, xk1 = self.k.operands()
        v0, v1, xv0, xv1 = self.v.operands()
        asked, asked_v = words, words_v
        if words is None:
            # a swapped launch reads as SWAPPED says (tbq4 bytes, tbq3 words)
            words = swapped[4] if swapped else self.k.fmt in WORDS
        k_off = tail_offsets(self.k.fmt, main) if tail else (0, 0)
        v_off = tail_offsets(self.v.fmt, main) if tail else (0, 0)
        words = words and xk0 % 4 == 0 and xv0 % 4 == 0
        words_v = words if words_v is None else (words_v and xv0 % 4 == 0)
        if block_n < 32:
            # tbq3's rows are 48-byte multiples and nvfp4 reads bytes at any width: the other
            # read is always possible; refused only where the caller asked for this one
            words = short_tile_reads(self.k.fmt, bool(words),
                                     asked is not None and bool(asked) == bool(words))
            words_v = short_tile_reads(self.v.fmt, bool(words_v),
                                       asked_v is not None and bool(asked_v) == bool(words_v))
        decode_split_kernel[(bsz, self.kv_heads * qblocks, n_splits)](
            q_in, acc, ml,
            k0, k1, self.k.global_scale if self.k.global_scale is not None else k0,
            v0, v1, self.v.global_scale if self.v.global_scale is not None else v0,
            self._cent(self.k.fmt, half=True), self._cent(self.v.fmt, half=True),
            block_table, seq_lens, block_table.stride(0), n_splits,
            LOG2E / math.sqrt(d), self.page_size, split_tokens,
            H_KV=self.kv_heads, GROUP=group, QPAD=qpad,
            D=q_in.shape[-1], DPOW=main, DPK=min(main, self.k.padded_dim) if tail
            else self.k.padded_dim,
            DPV=min(main, self.v.padded_dim) if tail else self.v.padded_dim, DT=tail,
            DKT=max(0, self.k.padded_dim - main) if tail else 0,
            DVT=max(0, self.v.padded_dim - main) if tail else 0,
            OK0=k_off[0], OK1=k_off[1], OV0=v_off[0], OV1=v_off[1], QB=qblocks,
            FMT_K=FMT_CODES[self.k.fmt], FMT_V=FMT_CODES[self.v.fmt],
            XK0=xk0, XK1=xk1, XV0=xv0, XV1=xv1,
            BLOCK_N=block_n, PAGE_MODE=page_mode, PAGE_C=ps if page_mode == 1 else 1,
            ASM=bool(asm), WORDS=bool(words), WORDS_V=bool(words_v),
            GPU=q.device.type == "cuda",
            SAME_KV=same_kv, IK=bool(int_keys), SWAP=bool(swap),
            LAZY=bool(lazy), WIDE=bool(lazy and wide), num_warps=num_warps, num_stages=num_stages, **pdl_launch(pdl),
            **({"maxnreg": max_registers} if max_registers else {}),
            SIGNS=tab["signs"] if rot_q or rot_v else None, ROT_Q=rot_q, ROT_V=rot_v)
        self.merge(acc, ml, out, n_splits, width, self.v.fmt in ROTATED and not rot_v, pdl)
        return out

    def byte_tables(self, words: tuple[int, ...]) -> Any:
        """``words`` (32-bit) as an int32 tensor on the cache's device, made once."""
        import torch

        tab = self._tables()
        key = ("words", words)
        if key not in tab:
            tab[key] = torch.tensor([w - (1 << 32) if w >= 1 << 31 else w for w in words],
                                    dtype=torch.int32, device=self.device)
        return tab[key]

    def rotated_query(self, q: Any, width: int, dpow: int, pdl: bool,
                      order: tuple[int, ...] | None = None) -> Any:
        """q [B, Hq, D] rotated (rotate_kernel, the ±1 rotation of each 128-block) into the
        "qrot" workspace: float32 [B, Hq, width], the query a rotated K format multiplies;
        with ``order`` (a 128-block's dimensions) its dimensions in that order (the rotation's
        rows permuted)."""
        import torch

        from .triton_ops import pdl_launch, rotate_kernel

        bsz, hq, d = q.shape
        rows = bsz * hq
        q_rot = self._workspace("qrot", rows * width, torch.float32, q.device).reshape(
            bsz, hq, width)
        tab = self._tables()
        rot = tab["rot_pm1"]
        if order is not None:
            key = ("rot_pm1 order", order)
            if key not in tab:
                tab[key] = rot[list(order), :].contiguous()
            rot = tab[key]
        rotate_kernel[(math.ceil(rows / 16),)](q, q_rot, rot, rows,
                                               DIN=d, DOUT=width, DPOW=dpow, BACK=False,
                                               **pdl_launch(pdl))
        return q_rot

    def merge(self, acc: Any, ml: Any, out: Any, n_splits: int, width: int, rotate_back: bool,
              pdl: bool) -> None:
        """reduce_splits of a decode step's partial results into ``out`` [B, Hq, ·], with
        ``rotate_back`` (a rotated V format) the merged rows rotated back through the "merged"
        workspace."""
        import torch

        from .triton_ops import reduce_splits

        bsz, hq = out.shape[0], out.shape[1]
        reduce_splits(acc, ml, out, n_splits, bsz, self.kv_heads, hq // self.kv_heads, width,
                      rot=self._tables()["rot_pm1"] if rotate_back else None,
                      scratch=self._workspace("merged", bsz * hq * width, torch.float32,
                                              out.device) if rotate_back else None, pdl=pdl)
