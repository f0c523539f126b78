# Gradients of scaled_dot_product_attention in float16 on CUDA, eager versus torch.compile.
# /// bisect-case
# requires = "cuda"
# timeout = 1200
# tags = ["inductor", "numerics", "fp16", "backward", "cuda", "attention"]
# ///
import torch
import torch.nn.functional as F

torch.manual_seed(0)


def fn(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True).float().square().sum()


def grads(run, dtype):
    inputs = [t.detach().to(dtype).clone().requires_grad_() for t in base]
    run(*inputs).backward()
    return [t.grad.double() for t in inputs]


base = [torch.randn(2, 8, 256, 64, device="cuda") for _ in range(3)]
reference = grads(fn, torch.float32)  # float64 SDPA has no fused kernel; float32 is the anchor
eager = grads(fn, torch.float16)
compiled = grads(torch.compile(fn), torch.float16)
for name, ref, e, c in zip("qkv", reference, eager, compiled, strict=False):
    eager_error, compiled_error = (e - ref).abs().max().item(), (c - ref).abs().max().item()
    print(f"grad {name}: eager {eager_error:.3e}, compiled {compiled_error:.3e}")
    assert compiled_error <= 2 * eager_error + 1e-2, f"grad {name}: compiled is further off"
