"""A plain DistributedDataParallel training (gloo, CPU) that never imports trainprobe.

Run by the job runner through torchrun, ``ddp_plain_training.py [--steps N] [--sleep SECONDS]``:
each rank prints ``host <SM_CURRENT_HOST> rank <r> of <world> in <SM_HOSTS>``, trains N steps
(default 4) on its own batches and prints ``rank <r> finished``. Rank 0 then prints
``listening on <address>:<port>`` for every port a process of its host's training (its process
group: torchrun and the worker) listens on.
"""

import argparse
import datetime
import os
import time

import psutil
import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--sleep", type=float, default=0.0)
    arguments = parser.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    host, hosts = os.environ.get("SM_CURRENT_HOST"), os.environ.get("SM_HOSTS")
    print(f"host {host} rank {rank} of {dist.get_world_size()} in {hosts}", flush=True)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
    )
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(100 + rank)
    for _ in range(arguments.steps):
        inputs = torch.randn(5, 6, generator=generator)
        labels = torch.randint(0, 3, (5,), generator=generator)
        optimizer.zero_grad()
        loss_fn(model(inputs), labels).backward()
        optimizer.step()
        time.sleep(arguments.sleep)
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
