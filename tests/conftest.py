import os

# Kernels run in Triton's interpreter on CPU tensors; it must be chosen before triton is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")
