# Gradients of layer_norm in bfloat16 through torch.compile: no further from float64 than eager.
# /// bisect-case
# requires = "cpu"
# timeout = 900
# tags = ["inductor", "numerics", "bf16", "backward"]
# ///
import torch
import torch.nn.functional as F

torch.manual_seed(0)


def fn(x, weight, bias):
    return F.layer_norm(x, x.shape[-1:], weight, bias).square().sum()


def grads(run, dtype):
    inputs = [t.detach().to(dtype).clone().requires_grad_() for t in (x, weight, bias)]
    run(*inputs).backward()
    return [t.grad.double() for t in inputs]


x, weight, bias = torch.randn(16, 256), torch.rand(256) + 0.5, torch.randn(256)
reference = grads(fn, torch.float64)
eager = grads(fn, torch.bfloat16)
compiled = grads(torch.compile(fn), torch.bfloat16)
for name, ref, e, c in zip(("x", "weight", "bias"), reference, eager, compiled, strict=False):
    eager_error, compiled_error = (e - ref).abs().max().item(), (c - ref).abs().max().item()
    print(f"grad {name}: eager {eager_error:.3e}, compiled {compiled_error:.3e}")
    assert compiled_error <= 2 * eager_error + 1e-3, f"grad {name}: compiled is further off"
