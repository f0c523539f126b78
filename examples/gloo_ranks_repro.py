# Two gloo ranks all_reduce, and rank 1 rejects the sum: a distributed reproducer's shape.
# Run it as `torchrun --nproc_per_node=2 gloo_ranks_repro.py` (bisect-bot: --nproc-per-node 2).
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
x = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(x)
print(f"rank {dist.get_rank()}: {x.tolist()}", flush=True)
if dist.get_rank() == 1:
    raise RuntimeError(f"rank 1 sees {x.sum().item()}")
dist.destroy_process_group()
