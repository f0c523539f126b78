# A deliberately wrong decomposition of aten.cumsum (an exclusive scan where cumsum is
# inclusive), registered in Inductor's decomposition table, which aot_eager_decomp_partition
# uses too (torch/_dynamo/backends/debugging.py). Eager, aot_eager agree with eager; from
# aot_eager_decomp_partition on the result is wrong: a decomposition bug, not rounding.
import sys

import torch
from torch._inductor import decomposition as inductor_decomposition

device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
aten = torch.ops.aten


def exclusive_cumsum(x, dim, dtype=None):
    n = x.shape[dim]
    strict = torch.ones(n, n, device=x.device, dtype=x.dtype).triu(diagonal=1)
    return (x.movedim(dim, -1) @ strict).movedim(-1, dim)


inductor_decomposition.decompositions[aten.cumsum.default] = exclusive_cumsum


def fn(x):
    return torch.cumsum(x * 2, dim=-1)


x = torch.randn(4, 64, device=device)
torch.testing.assert_close(torch.compile(fn)(x), fn(x))
print("compiled matches eager")
