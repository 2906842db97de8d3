"""An ``accelerate`` training loop with gradient accumulation and evaluation, as its users write it.

Nothing of trainprobe in it; synthetic regression data. Prints ``train_loss STEP VALUE`` for each
optimizer step (the mean of its micro-batches' losses, before ``accelerator.backward`` divides
them), ``eval_loss VALUE`` for each evaluation batch, and ``optimizer_steps N`` and
``evaluation_batches N`` at the end. Options: ``--steps N`` (optimizer steps, default 10),
``--accumulation K`` (default 4), ``--eval-every N`` (default 5), ``--lr LR`` (default 0.01).
"""

import argparse

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch import nn


def batches(count: int, seed: int, size: int) -> torch.utils.data.DataLoader:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 8, generator=generator)
    y = x @ torch.linspace(-1, 1, 8) + 0.1 * torch.randn(count, generator=generator)
    dataset = torch.utils.data.TensorDataset(x, y.unsqueeze(1))
    return torch.utils.data.DataLoader(dataset, batch_size=size)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--accumulation", type=int, default=4)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.01)
    arguments = parser.parse_args()
    torch.manual_seed(0)
    accelerator = Accelerator(gradient_accumulation_steps=arguments.accumulation, cpu=True)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=arguments.lr)
    train = batches(16 * arguments.steps * arguments.accumulation, 1, 16)
    evaluation = batches(48, 2, 16)
    model, optimizer, train, evaluation = accelerator.prepare(model, optimizer, train, evaluation)
    steps, evaluation_batches, window = 0, 0, []
    model.train()
    for x, y in train:
        with accelerator.accumulate(model):
            loss = F.mse_loss(model(x), y)
            window.append(loss.item())
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        if accelerator.sync_gradients:
            print(f"train_loss {steps} {sum(window) / len(window)}", flush=True)
            steps, window = steps + 1, []
            if steps % arguments.eval_every == 0:
                model.eval()
                with torch.no_grad():
                    for ex, ey in evaluation:
                        print(f"eval_loss {F.mse_loss(model(ex), ey).item()}", flush=True)
                        evaluation_batches += 1
                model.train()
    print(f"optimizer_steps {steps}", flush=True)
    print(f"evaluation_batches {evaluation_batches}", flush=True)


if __name__ == "__main__":
    main()
