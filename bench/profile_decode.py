"""Run the decode kernel for a few formats so that Nsight Compute can profile it.

    ncu --clock-control none --kernel-name regex:decode_split_kernel --launch-count 6 \\
        --section SpeedOfLight --section WarpStateStats --section InstructionStats \\
        --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \\
        python bench/profile_decode.py [FORMATS...]

One layer, GQA 32/8, head_dim 128, batch 8 × 32,768 tokens; each format's decode runs twice
(the second launch is the one to read).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode import HKV, HQ, D, fill  # noqa: E402  (bench/decode.py, beside this file)

from kvcore.kernels.cache import LayerCache  # noqa: E402

B, T = 8, 32768


def main() -> None:
    formats = sys.argv[1:] or ["f16", "q4_0", "tbq4"]
    for fmt in formats:
        cache = LayerCache(fmt, fmt, B, T, HKV, D, device="cuda")
        fill(cache, B, T, torch.float16)
        table = torch.arange(B, device="cuda", dtype=torch.int32).reshape(B, 1)
        seq = torch.full((B,), T, device="cuda", dtype=torch.int32)
        q = torch.randn(B, HQ, D, device="cuda", dtype=torch.float16)
        for _ in range(2):
            cache.decode(q, table, seq, max_len=T)
        torch.cuda.synchronize()
        print(fmt, "done", flush=True)
        del cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
