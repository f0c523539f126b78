# torch.compile's softmax in bfloat16 must not be further from a float64 reference than eager's.
# The rule maintainers apply to numerics reports (torch._dynamo.utils.same with fp64_ref).
# /// bisect-case
# requires = "cpu"
# timeout = 900
# tags = ["inductor", "numerics", "bf16", "forward"]
# ///
import torch

torch.manual_seed(0)


def fn(x):
    return torch.softmax(x * 4.0, dim=-1)


x = torch.randn(32, 512, dtype=torch.bfloat16)
reference = fn(x.double())
eager_error = (fn(x).double() - reference).abs().max().item()
compiled_error = (torch.compile(fn)(x).double() - reference).abs().max().item()
print(f"max abs error vs float64: eager {eager_error:.3e}, compiled {compiled_error:.3e}")
assert compiled_error <= 2 * eager_error + 1e-4, "compiled is further from float64 than eager"
