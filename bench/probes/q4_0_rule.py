"""q4_0's decode benchmark (bench/decode.py's shapes and timing, its GPU checks skipped) under
v62's launch rule (8 programs a multiprocessor with PIPE at every length) and v61's (12
without PIPE where a wave of 8 would make splits longer than 1,024 tokens), one process a
rule, so that two calls in turns compare them on one card:

    python bench/probes/q4_0_rule.py v62|v61 [--out DIR]

Writes DIR/decode.json as bench/decode.py does.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import decode  # noqa: E402

from kvcore.kernels import cache  # noqa: E402


def v61_rule(k_fmt: str, v_fmt: str, head_dim: int, head_dim_v: int, group: int,
             page_size: int, rows: int, max_len: int, device_type: str,
             capability: tuple[int, int] = (9, 0), faster_only: bool = True) -> int | None:
    per_sm = V62(k_fmt, v_fmt, head_dim, head_dim_v, group, page_size, rows, max_len,
                 device_type, capability, faster_only)
    if k_fmt == "q4_0" and per_sm == cache.GLUON_PER_SM_Q4 and group <= 8:
        split = cache.tiled_splits(max_len, cache.wave_splits(rows, cache.GLUON_PER_SM_Q4))[0]
        if split > cache.GLUON_SHORT_SPLIT:
            return cache.GLUON_PER_SM  # 12: past Q4_PIPE_PER_SM, so without PIPE
    return per_sm


V62 = cache.gluon_launch

if __name__ == "__main__":
    rule = sys.argv.pop(1)
    if rule == "v61":
        cache.gluon_launch = v61_rule
    elif rule != "v62":
        sys.exit("rule: v62 or v61")
    decode.check_correctness = lambda: {}
    sys.argv[1:1] = ["--formats", "q4_0"]
    print("rule", rule, flush=True)
    decode.main()
