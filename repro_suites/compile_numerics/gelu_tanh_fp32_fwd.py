# The tanh approximation of GELU in float32: compiled matches eager within assert_close defaults.
# /// bisect-case
# requires = "cpu"
# timeout = 900
# tags = ["inductor", "numerics", "fp32", "forward"]
# ///
import torch
import torch.nn.functional as F

torch.manual_seed(0)


def fn(x):
    return F.gelu(x, approximate="tanh") * x.sigmoid()


x = torch.randn(64, 1024, dtype=torch.float32) * 3
torch.testing.assert_close(torch.compile(fn)(x), fn(x))  # fp32: rtol 1.3e-6, atol 1e-5
print("compiled matches eager")
