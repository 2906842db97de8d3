"""A plain DistributedDataParallel training (gloo, CPU) that never imports trainprobe.

Run by the job runner through torchrun: each rank trains 4 steps on its own batch and prints
``rank <r> finished``. Rank 0 then prints ``listening on <address>:<port>`` for every port a
process of the job's training (its process group: torchrun and the workers) listens on.
"""

import datetime
import os

import psutil
import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
    )
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(100 + rank)
    for _ in range(4):
        inputs = torch.randn(5, 6, generator=generator)
        labels = torch.randint(0, 3, (5,), generator=generator)
        optimizer.zero_grad()
        loss_fn(model(inputs), labels).backward()
        optimizer.step()
    print(f"rank {rank} finished", flush=True)
    dist.barrier()
    if rank == 0:
        group = os.getpgid(0)
        for process in psutil.process_iter():
            try:
                if os.getpgid(process.pid) != group:
                    continue
                connections = process.net_connections(kind="inet")
            except (psutil.Error, ProcessLookupError):
                continue
            for connection in connections:
                if connection.status == psutil.CONN_LISTEN:
                    print(f"listening on {connection.laddr.ip}:{connection.laddr.port}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
