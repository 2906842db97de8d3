"""A DistributedDataParallel training whose rank 1 alone meets a corrupted batch, run by torchrun.

Usage: ``torchrun --nproc_per_node 2 ddp_spike_training.py OUT_DIR``. Each rank trains on its own
stream of batches; at step 12 rank 1's targets are multiplied by 1000. The hook runs LossSpike
with SkipStep. Each rank writes its final parameters to ``OUT_DIR/parameters-<rank>.pt`` and the
steps whose update it applied to ``OUT_DIR/applied-<rank>.txt``.
"""

import datetime
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

import trainprobe.pytorch as smd

SPIKE = 12


def main() -> None:
    out = Path(sys.argv[1])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1))
    ddp = nn.parallel.DistributedDataParallel(model)
    rule = {
        "RuleConfigurationName": "LossSpike",
        "RuleName": "LossSpike",
        "RuleParameters": {
            "warmup_steps": "5",
            "action_json": json.dumps({"name": "SkipStep"}),
        },
    }
    hook = smd.Hook(str(out), include_workers="all", training_rules=[rule], follow_training=True)
    hook.register_module(ddp)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(100 + rank)
    applied = []
    for step in range(20):
        x = torch.randn(16, 6, generator=generator)
        y = x.sum(dim=1, keepdim=True)
        if rank == 1 and step == SPIKE:
            y = y * 1000
        optimizer.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        before = [p.detach().clone() for p in model.parameters()]
        optimizer.step()
        if any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True)):
            applied.append(step)
    hook.close()
    torch.save([p.detach() for p in model.parameters()], out / f"parameters-{rank}.pt")
    (out / f"applied-{rank}.txt").write_text(" ".join(map(str, applied)))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
