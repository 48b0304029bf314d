import os

# Kernels run in Triton's interpreter on CPU tensors; it must be chosen before triton is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")
# No test reaches the network: a Hub lookup answers at once from the (empty) local cache.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
