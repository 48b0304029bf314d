"""What a process holds on the card before an engine takes its memory snapshot: the CUDA
context torch creates, then cuBLAS's and cuBLASLt's handles and workspaces (vLLM 0.34's
gpu_worker.init_device runs one matmul and one linear with a bias before its snapshot, so
that they count as baseline). Prints one JSON object: the driver's total, the memory used
before this process (nvidia-smi), and the free memory after each step, in bytes."""

import json
import subprocess
import sys

import torch


def smi_used() -> int | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total",
                              "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=30).stdout.split(",")
        return int(out[0]) * 1024**2
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def main() -> None:
    row: dict = {"smi_used_before": smi_used()}
    torch.cuda.set_device(0)
    free, total = torch.cuda.mem_get_info()
    row.update(total=total, free_after_context=free)
    x = torch.ones(16, 16, dtype=torch.bfloat16, device="cuda")
    torch.mm(x, x)
    torch.cuda.synchronize()
    row["free_after_mm"] = torch.cuda.mem_get_info()[0]
    torch.nn.functional.linear(x, x, x[0])
    torch.cuda.synchronize()
    del x
    torch.cuda.empty_cache()
    row["free_after_linear"] = torch.cuda.mem_get_info()[0]
    row["smi_used_after"] = smi_used()
    row["before_snapshot"] = total - row["free_after_linear"]
    row["torch"] = torch.__version__
    row["card"] = torch.cuda.get_device_name(0)
    json.dump(row, sys.stdout)
    print()


if __name__ == "__main__":
    main()
