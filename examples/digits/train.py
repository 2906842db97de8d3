"""Train a small network to read handwritten digits: a plain PyTorch script, no trainprobe in it.

The data is scikit-learn's digits (1,797 8x8 images, shipped with the package: nothing to
download). Each epoch trains on 80% of it in mini-batches, then evaluates on the rest and
prints the accuracy. It takes about ten seconds on two CPU cores. Under ``trainprobe run`` the job
runner hooks it as SageMaker's containers do: the tensors, the step timeline and the rules need no
line here.

Usage: ``train.py [--epochs N] [--batch-size B] [--lr LR] [--hidden H]``
"""

import argparse
import os

import torch
from sklearn.datasets import load_digits
from torch import nn


def load(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The digits as scaled pixel tensors, split 80/20 into training and evaluation sets."""
    images, labels = load_digits(return_X_y=True)
    inputs = torch.tensor(images, dtype=torch.float32) / 16.0
    targets = torch.tensor(labels, dtype=torch.long)
    order = torch.randperm(len(inputs), generator=torch.Generator().manual_seed(seed))
    cut = int(0.8 * len(order))
    return inputs[order[:cut]], targets[order[:cut]], inputs[order[cut:]], targets[order[cut:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()

    torch.manual_seed(arguments.seed)
    train_x, train_y, test_x, test_y = load(arguments.seed)
    model = nn.Sequential(
        nn.Linear(64, arguments.hidden),
        nn.ReLU(),
        nn.Linear(arguments.hidden, arguments.hidden),
        nn.ReLU(),
        nn.Linear(arguments.hidden, 10),
    )
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=arguments.lr, momentum=0.9)
    batches = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(train_x, train_y),
        batch_size=arguments.batch_size,
        shuffle=True,
    )

    accuracy = 0.0
    for epoch in range(1, arguments.epochs + 1):
        model.train()
        total = 0.0
        for inputs, labels in batches:
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), labels)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(inputs)
        model.eval()
        with torch.no_grad():
            outputs = model(test_x)
            test_loss = loss_fn(outputs, test_y).item()
            accuracy = (outputs.argmax(dim=1) == test_y).float().mean().item()
        print(
            f"epoch {epoch}: train loss {total / len(train_x):.4f}, "
            f"eval loss {test_loss:.4f}, eval accuracy {accuracy:.3f}",
            flush=True,
        )

    print(f"final eval accuracy: {accuracy:.3f}", flush=True)
    model_dir = os.environ.get("SM_MODEL_DIR")
    if model_dir:
        os.makedirs(model_dir, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(model_dir, "model.pt"))


if __name__ == "__main__":
    main()
