# A long cumulative sum in float32: compiled matches eager within the float32 tolerances.
# /// bisect-case
# requires = "cpu"
# timeout = 900
# tags = ["inductor", "numerics", "fp32", "forward", "scan"]
# ///
import torch

torch.manual_seed(0)


def fn(x):
    return torch.cumsum(x, dim=-1) / x.shape[-1]


x = torch.rand(8, 4096, dtype=torch.float32)
torch.testing.assert_close(torch.compile(fn)(x), fn(x), rtol=1e-5, atol=1e-5)
print("compiled matches eager")
