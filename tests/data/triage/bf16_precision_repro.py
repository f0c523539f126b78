# bf16 forward and backward through a scan op: torch.compile (Inductor) vs eager.
# Inductor keeps the intermediate products in float32 where eager rounds each to bfloat16, so
# the results differ by rounding; TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 makes them agree.
import sys

import torch

device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
torch.manual_seed(0)


def fn(y, x):
    area = torch.cumulative_trapezoid(y * x.sin(), x, dim=-1)
    return (area * y[..., 1:]).cumsum(-1)


x = torch.linspace(0, 4, 512, device=device, dtype=torch.bfloat16).expand(64, 512).contiguous()
y = torch.randn(64, 512, device=device, dtype=torch.bfloat16)
y_eager = y.clone().requires_grad_()
y_compiled = y.clone().requires_grad_()

expected = fn(y_eager, x)
actual = torch.compile(fn)(y_compiled, x)
grad = torch.randn_like(expected)
expected.backward(grad)
actual.backward(grad)
torch.testing.assert_close(actual, expected)
torch.testing.assert_close(y_compiled.grad, y_eager.grad)
print("compiled matches eager")
