# float32 cumulative_trapezoid checked against a hand-written reference that is wrong: it is a
# left Riemann sum, not the trapezoid rule. It fails the same way with and without
# torch.compile, under every backend: the bug is in the reproducer, not in the compiler.
import sys

import torch

device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
torch.manual_seed(0)


def fn(y, x):
    return torch.cumulative_trapezoid(y, x, dim=-1)


def reference(y, x):
    return torch.cumsum(y[..., :-1] * x.diff(dim=-1), dim=-1)  # should average y[i], y[i+1]


x = torch.linspace(0, 1, 256, device=device).expand(8, 256).contiguous()
y = torch.randn(8, 256, device=device)
torch.testing.assert_close(torch.compile(fn)(y, x), reference(y, x))
print("compiled matches the reference")
