# Eager vs torch.compile on a CUDA GPU, in float32: the compiled result must match eager.
import torch

assert torch.cuda.is_available(), "this reproducer needs a CUDA GPU"


def f(x):
    return torch.nn.functional.gelu(x) * x.cumsum(-1) / x.shape[-1]


x = torch.randn(512, 1024, device="cuda", dtype=torch.float32)
eager = f(x)
compiled = torch.compile(f)(x)
print(f"max abs diff: {(compiled - eager).abs().max().item():.3e}")
torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-4)
