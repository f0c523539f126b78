# RMS norm in float16 on CUDA: the compiled kernel is no further from float64 than eager.
# /// bisect-case
# requires = "cuda"
# timeout = 900
# tags = ["inductor", "numerics", "fp16", "forward", "cuda"]
# ///
import torch

torch.manual_seed(0)


def fn(x, weight):
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return (x * torch.rsqrt(variance + 1e-6)).to(x.dtype) * weight


x = torch.randn(128, 4096, device="cuda", dtype=torch.float16)
weight = torch.rand(4096, device="cuda", dtype=torch.float16) + 0.5
reference = fn(x.double(), weight.double())
eager_error = (fn(x, weight).double() - reference).abs().max().item()
compiled_error = (torch.compile(fn)(x, weight).double() - reference).abs().max().item()
print(f"eager {eager_error:.3e}, compiled {compiled_error:.3e}")
assert compiled_error <= 2 * eager_error + 1e-3, "compiled is further from float64 than eager"
