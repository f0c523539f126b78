# torch.compile with dynamic shapes must not crash or recompile per size on a masked reduction.
# /// bisect-case
# requires = "cpu"
# timeout = 900
# tags = ["dynamo", "dynamic-shapes", "crash"]
# ///
import torch


def fn(x, lengths):
    mask = torch.arange(x.shape[1]) < lengths[:, None]
    return (x * mask).sum(dim=1) / lengths.clamp(min=1)


compiled = torch.compile(fn, dynamic=True, fullgraph=True)
for size in (7, 16, 33, 64):
    x = torch.randn(4, size)
    lengths = torch.randint(0, size + 1, (4,))
    torch.testing.assert_close(compiled(x, lengths), fn(x, lengths))
print("no crash across sizes 7, 16, 33, 64")
