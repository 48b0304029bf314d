"""Run the decode kernel (or, with --append, the append kernels) for a few formats so that
Nsight Compute can profile it.

    ncu --clock-control none --kernel-name regex:decode_split_kernel --launch-count 6 \\
        --section SpeedOfLight --section WarpStateStats --section InstructionStats \\
        --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \\
        python bench/profile_decode.py [FORMATS...] [--tokens N]

One layer, GQA 32/8, head_dim 128, batch 8 × 32,768 tokens (--tokens: another length); each
format's decode runs twice (the second launch is the one to read; kivi2 and kivi4 by
kivi_decode_kernel, the others by decode_split_kernel or, q4_0 and q8_0, q4_0_swapped_kernel). --append: an append of 16,384 new tokens (K and V, one
launch since v62) into that cache, twice (profile with --kernel-name regex:append_kernel
--launch-skip 1); for
kivi2 and kivi4, 16,384 tokens into each of two empty sequences (regex:kivi_flush_kernel).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode import HKV, HQ, D, fill, kivi_fill, step_inputs  # noqa: E402  (bench/decode.py)

from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.kernels.kivi import KiviCache  # noqa: E402

B, T = 8, 32768


def main() -> None:
    args = sys.argv[1:]
    append = "--append" in args
    tokens = T
    if "--tokens" in args:
        i = args.index("--tokens")
        tokens = int(args[i + 1])
        del args[i:i + 2]
    formats = [a for a in args if a != "--append"] or ["f16", "q4_0", "tbq4"]
    for fmt in formats:
        if append and fmt.startswith("kivi"):
            kivi = KiviCache(fmt, B, HKV, D, tokens, device="cuda")
            x = torch.randn(16384, HKV, D, device="cuda", dtype=torch.float16)
            for s in range(2):  # two empty sequences: every group flushes
                kivi.append_triton(s, x, x)
            torch.cuda.synchronize()
            print(fmt, "appended", flush=True)
            continue
        if fmt.startswith("kivi"):
            kivi = kivi_fill(fmt, B, tokens)
            q = torch.randn(B, HQ, D, device="cuda", dtype=torch.float16)
            for _ in range(2):
                kivi.decode(q)
            torch.cuda.synchronize()
            print(fmt, "done", flush=True)
            del kivi
            torch.cuda.empty_cache()
            continue
        cache = LayerCache(fmt, fmt, B, tokens, HKV, D, device="cuda")
        if append:
            n = 16384
            t = torch.arange(n, device="cuda")
            x = torch.randn(n, HKV, D, device="cuda", dtype=torch.float16)
            for _ in range(2):
                cache.append(x, x, t // tokens, t % tokens)
            torch.cuda.synchronize()
            print(fmt, "appended", flush=True)
            continue
        fill(cache, B, tokens, torch.float16)
        table, seq, q = step_inputs(B, tokens)
        for _ in range(2):
            cache.decode(q, table, seq, max_len=tokens)
        torch.cuda.synchronize()
        print(fmt, "done", flush=True)
        del cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
