# A case that needs a GPU: the demo's synthetic torch has none, so sweeps skip it and say why.
# /// bisect-case
# requires = "cuda"
# timeout = 60
# tags = ["demo", "cuda"]
# ///
import torch

assert torch.cuda.is_available(), "needs a CUDA device"
print("a GPU is visible")
