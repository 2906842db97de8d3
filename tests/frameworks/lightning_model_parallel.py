"""A Lightning training sharded with ``ModelParallelStrategy`` (FSDP2's ``fully_shard`` in
``configure_model``), as its users write it; nothing of trainprobe in it.

Started by torchrun (or ``trainprobe run --nproc-per-node 2``) on the CPU: Lightning joins the
processes torchrun started. ``lightning_model_parallel.py TRUTH_DIR [--steps N]``: each rank
writes ``TRUTH_DIR/rank_<rank>.json``, the full gradient of ``net.0.weight`` (gathered with
``full_tensor()``) at each optimizer step, before the update.
"""

import argparse
import json
from pathlib import Path

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.strategies import ModelParallelStrategy
from torch import nn
from torch.distributed.fsdp import fully_shard


class Regression(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
        self.gradients: list[list[float]] = []

    def configure_model(self) -> None:
        mesh = self.device_mesh["data_parallel"]
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(self.net, mesh=mesh)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self.net(x), y)

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        gradient = self.net[0].weight.grad
        self.gradients.append(gradient.full_tensor().reshape(-1).tolist())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("truth_dir")
    parser.add_argument("--steps", type=int, default=4)
    arguments = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(128, 8)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8
    )
    strategy = ModelParallelStrategy(data_parallel_size=2, tensor_parallel_size=1)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=strategy,
        max_steps=arguments.steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    module = Regression()
    trainer.fit(module, data)
    Path(arguments.truth_dir).mkdir(parents=True, exist_ok=True)
    Path(arguments.truth_dir, f"rank_{trainer.global_rank}.json").write_text(
        json.dumps(module.gradients)
    )


if __name__ == "__main__":
    main()
