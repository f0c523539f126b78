# A linear + GELU block in bfloat16 on CUDA: compiled gradients are no further from float64.
# /// bisect-case
# requires = "cuda"
# timeout = 1200
# repeat = 2
# tags = ["inductor", "numerics", "bf16", "backward", "cuda"]
# ///
import copy

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)
)
x = torch.randn(64, 512)


def gradients(dtype, compiled):
    module = copy.deepcopy(model).to("cuda", dtype)
    run = torch.compile(module) if compiled else module
    run(x.to("cuda", dtype)).float().square().mean().backward()
    return [p.grad.double() for p in module.parameters()]


reference = gradients(torch.float64, compiled=False)
eager = gradients(torch.bfloat16, compiled=False)
compiled = gradients(torch.bfloat16, compiled=True)
for n, (ref, e, c) in enumerate(zip(reference, eager, compiled, strict=False)):
    eager_error, compiled_error = (e - ref).abs().max().item(), (c - ref).abs().max().item()
    print(f"param {n}: eager {eager_error:.3e}, compiled {compiled_error:.3e}")
    assert compiled_error <= 2 * eager_error + 1e-3, f"param {n}: compiled is further off"
