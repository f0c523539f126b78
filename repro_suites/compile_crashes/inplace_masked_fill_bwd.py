# An in-place masked_fill_ on a view inside a compiled function: forward and backward must work
# and give eager's gradient (`match` takes its own assert_close failing: a wrong gradient).
# /// bisect-case
# requires = "cpu"
# timeout = 900
# match = "(RuntimeError|InternalTorchDynamoError|BackendCompilerFailed|AssertionError)"
# tags = ["aot_autograd", "functionalization", "backward", "crash"]
# ///
import torch

torch.manual_seed(0)


def fn(x):
    y = x * 2
    y[:, :4].masked_fill_(y[:, :4] < 0, 0.0)
    return y.sum(dim=-1)


x_eager = torch.randn(8, 16, requires_grad=True)
x_compiled = x_eager.detach().clone().requires_grad_()
fn(x_eager).sum().backward()
torch.compile(fn, backend="aot_eager")(x_compiled).sum().backward()
torch.testing.assert_close(x_compiled.grad, x_eager.grad)
print("forward and backward match")
