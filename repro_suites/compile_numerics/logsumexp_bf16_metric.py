# logsumexp in bfloat16: how much further from float64 compiled is than eager, as a metric.
# /// bisect-case
# requires = "cpu"
# timeout = 900
# metric = "excess_error"
# threshold = 0.05
# tags = ["inductor", "numerics", "bf16", "forward", "metric"]
# ///
import torch

torch.manual_seed(0)


def fn(x):
    return torch.logsumexp(x * 8.0, dim=-1)


x = torch.randn(64, 1024, dtype=torch.bfloat16)
reference = fn(x.double())
eager_error = (fn(x).double() - reference).abs().max().item()
compiled_error = (torch.compile(fn)(x).double() - reference).abs().max().item()
print(f"eager {eager_error:.3e}, compiled {compiled_error:.3e}")
print(f"METRIC excess_error={max(0.0, compiled_error - eager_error):.6g}")
