"""A small training over two ranks (gloo), data parallel, FSDP2-sharded or tensor-parallel.

Usage: ``torchrun --nproc_per_node 2 sharded_training.py KIND TRUTH_DIR [options]``, or the same
under ``trainprobe run --nproc-per-node 2`` (the script then has no hook of its own).

KIND is ``ddp`` (DistributedDataParallel), ``fsdp2`` (``fully_shard`` on each layer, then the
model), ``hsdp`` (the same on a 2-D mesh: replicas of shards, here of one shard each) or ``tp``
(``parallelize_module``: a sequence-parallel norm, a column-wise then a row-wise linear layer;
both ranks see the same batch, each its half of the sequence). Each rank writes what it knows
itself to ``TRUTH_DIR/rank_<rank>.json``: its losses by step, and at every step the full
parameters' and gradients' statistics, gathered the way a user checks them (``full_tensor()``).

Options: ``--hook OUT_DIR`` has the script make its own hook (smdebug's way, every step saved);
``--nan-rank R --nan-step S`` makes rank R's input NaN at step S; ``--drift-rank R --drift-step
S`` adds 0.001 to one value of ``--drift-parameter`` (default ``up.weight``) on rank R alone
after step S's update (its replicas drift apart); ``--spike-rank R --spike-step S`` multiplies
rank R's loss by 1000 at step S; ``--steps N`` (default 6). The tensor-parallel
model's head stays an ordinary layer; FSDP2 shards the head's 3 rows unevenly (2 and 1).
"""

import argparse
import datetime
import json
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(6)
        self.up = nn.Linear(6, 8)
        self.down = nn.Linear(8, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.down(torch.relu(self.up(self.norm(x)))))


def build(kind: str) -> nn.Module:
    torch.manual_seed(0)
    model = Net()
    if kind == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    if kind in ("fsdp2", "hsdp"):
        mesh = None
        if kind == "hsdp":
            shape = (dist.get_world_size(), 1)
            mesh = init_device_mesh("cpu", shape, mesh_dim_names=("replicate", "shard"))
        for layer in (model.norm, model.up, model.down, model.head):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    parallelize_module(
        model,
        mesh,
        {"norm": SequenceParallel(), "up": ColwiseParallel(), "down": RowwiseParallel()},
    )
    return model


def full(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def statistics(tensor: torch.Tensor) -> dict[str, object]:
    value = full(tensor.detach()).double()
    return {
        "shape": list(value.shape),
        "min": value.min().item(),
        "max": value.max().item(),
        "l2": value.norm().item(),
        "mean": value.mean().item(),
        "values": value.reshape(-1).tolist(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["ddp", "fsdp2", "hsdp", "tp"])
    parser.add_argument("truth_dir")
    parser.add_argument("--hook")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--nan-rank", type=int, default=-1)
    parser.add_argument("--nan-step", type=int, default=-1)
    parser.add_argument("--drift-rank", type=int, default=-1)
    parser.add_argument("--drift-step", type=int, default=-1)
    parser.add_argument("--drift-parameter", default="up.weight")
    parser.add_argument("--spike-rank", type=int, default=-1)
    parser.add_argument("--spike-step", type=int, default=-1)
    args = parser.parse_args()

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    model = build(args.kind)
    hook = None
    if args.hook:
        import trainprobe.pytorch as smd

        hook = smd.Hook(
            args.hook,
            save_config=smd.SaveConfig(save_interval=1),
            include_collections=["weights", "biases", "gradients", "losses"],
            include_workers="all",
            reduction_config=smd.ReductionConfig(
                reductions=["min", "max", "mean", "std"],
                abs_reductions=["min"],
                norms=["l2"],
                save_raw_tensor=True,
            ),
        )
        hook.register_module(model)
    loss_fn = nn.MSELoss()
    if hook is not None:
        hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # tensor parallelism: the ranks of a group see the same batch; otherwise each its own
    seed = 100 if args.kind == "tp" else 100 + rank
    generator = torch.Generator().manual_seed(seed)
    inputs_shape = (4, 10, 6) if args.kind == "tp" else (5, 6)
    truth: dict[str, object] = {"losses": {}, "parameters": {}, "gradients": {}}
    for step in range(args.steps):
        inputs = torch.randn(*inputs_shape, generator=generator)
        targets = torch.randn(*inputs_shape[:-1], 3, generator=generator)
        if rank == args.nan_rank and step == args.nan_step:
            inputs[0, 0] = float("nan")
        if args.kind == "tp":  # the sequence-parallel norm takes this rank's part of the sequence
            size = inputs.shape[1] // dist.get_world_size()
            inputs = inputs[:, rank * size : (rank + 1) * size]
        optimizer.zero_grad()
        truth["parameters"][step] = {n: statistics(p) for n, p in model.named_parameters()}
        loss = loss_fn(model(inputs), targets)
        if rank == args.spike_rank and step == args.spike_step:
            loss = loss * 1000  # its gradients, and so the global gradient norm, spike
        loss.backward()
        truth["gradients"][step] = {
            n: statistics(p.grad) for n, p in model.named_parameters() if p.grad is not None
        }
        truth["losses"][step] = loss.item()
        optimizer.step()
        if rank == args.drift_rank and step == args.drift_step:
            with torch.no_grad():
                prefix = "module." if args.kind == "ddp" else ""
                weight = dict(model.named_parameters())[prefix + args.drift_parameter]
                local = weight.to_local() if isinstance(weight, DTensor) else weight
                local.view(-1)[0] += 0.001
    if hook is not None:
        hook.close()
    Path(args.truth_dir).mkdir(parents=True, exist_ok=True)
    Path(args.truth_dir, f"rank_{rank}.json").write_text(json.dumps(truth))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
