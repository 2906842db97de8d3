"""A small DistributedDataParallel training with the hook, run by ``torchrun`` from a test.

Usage: ``torchrun --nproc_per_node 2 ddp_training.py OUT_DIR INCLUDE_WORKERS``. Each rank
trains on its own batch (so gradients differ by rank before the all-reduce) and saves every
step's weights, gradients and losses; each rank also writes its input batch's sum as a
scalar so the test can tell the workers' files apart.
"""

import datetime
import sys

import torch
import torch.distributed as dist
from torch import nn

import trainprobe.pytorch as smd


def main() -> None:
    out_dir, include_workers = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
    ddp = nn.parallel.DistributedDataParallel(model)
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(
        out_dir,
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "losses"],
        include_workers=include_workers,
    )
    hook.register_module(ddp)
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(100 + rank)
    hook.set_mode(smd.modes.TRAIN)
    for _ in range(3):
        inputs = torch.randn(5, 6, generator=generator)
        labels = torch.randint(0, 3, (5,), generator=generator)
        optimizer.zero_grad()
        loss = loss_fn(ddp(inputs), labels)
        loss.backward()
        optimizer.step()
        hook.save_scalar("rank", float(rank))
    hook.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
