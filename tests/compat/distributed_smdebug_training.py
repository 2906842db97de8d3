"""A two-process data-parallel training written for SageMaker Debugger (``import smdebug``), as
smdebug 1.0.34's ``tests/pytorch/test_distributed_training.py`` runs it: each process is spawned
by ``torch.multiprocessing`` and imports this module afresh, smdebug's names included.

Each worker trains sigmoid(w*x + b) with gloo all-reduced gradients, saves everything at steps
0, 1 and 5 from every worker, marks each epoch on the framework timeline with a begin and an end
event, checks its worker name, and closes its hook with smdebug's ``_cleanup``.
"""

from __future__ import annotations

import os
import socket
import time

import smdebug.pytorch as smd
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import multiprocessing, nn

EPOCHS = 10
BATCHES = 10


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def worker(out_dir: str, rank: int, size: int, port: int) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(1, 1), nn.Sigmoid())
    optimizer = torch.optim.SGD(model.parameters(), lr=1)
    hook = smd.Hook(
        out_dir=out_dir,
        save_config=smd.SaveConfig(save_steps=[0, 1, 5]),
        save_all=True,
        include_workers="all",
    )
    hook.register_module(model)
    for epoch in range(EPOCHS):
        began = time.time()
        hook.record_trace_events(
            training_phase="Training", op_name="TrainingEpochStart", phase="B", timestamp=began,
            rank=rank, epoch=epoch,
        )  # fmt: skip
        for _ in range(BATCHES):
            optimizer.zero_grad()
            inputs = torch.rand(128, 1)
            loss = F.mse_loss(model(inputs), torch.sigmoid(2 * inputs + 1))
            loss.backward()
            for parameter in model.parameters():
                assert parameter.grad is not None
                dist.all_reduce(parameter.grad.data, op=dist.ReduceOp.SUM)
                parameter.grad.data /= size
            optimizer.step()
        ended = time.time()
        hook.record_trace_events(
            training_phase="Training", op_name="TrainingEpochEnd", phase="E", timestamp=ended,
            rank=rank, duration=ended - began, epoch=epoch,
        )  # fmt: skip
    assert hook._get_worker_name() == f"worker_{dist.get_rank()}"
    hook._cleanup()


def train_on_two_workers(out_dir: str) -> list[int | None]:
    """Spawn the two workers, wait for them, and return their exit codes."""
    spawn = multiprocessing.get_context("spawn")  # smdebug's test sets it for the process
    port = free_port()
    processes = [spawn.Process(target=worker, args=(out_dir, rank, 2, port)) for rank in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
    return [process.exitcode for process in processes]
