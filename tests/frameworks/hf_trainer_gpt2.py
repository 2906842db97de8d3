"""A Hugging Face ``Trainer`` fine-tuning a tiny GPT-2 built from a config, with evaluation.

Written as the library's users write it; nothing of trainprobe in it. Synthetic token data, no
downloads. Prints ``optimizer_steps N``, ``evaluations N`` (evaluation batches run), and
``train_loss STEP VALUE`` for each optimizer step (the loss the Trainer computed for the step's
batches, averaged over gradient accumulation) and ``eval_loss VALUE`` for each evaluation.
Options: ``--steps N`` (default 12), ``--accumulation K`` (default 1), ``--eval-every N``
(default 5), ``--lr LR`` (default 5e-4).
"""

import argparse

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)


class TokenData(torch.utils.data.Dataset):
    def __init__(self, count: int, length: int, vocabulary: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        # A learnable pattern: each sequence counts up from a random start.
        starts = torch.randint(0, vocabulary, (count, 1), generator=generator)
        self.tokens = (starts + torch.arange(length)) % vocabulary

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        tokens = self.tokens[index]
        return {"input_ids": tokens, "labels": tokens}


class Printer(TrainerCallback):
    def __init__(self) -> None:
        self.evaluation_batches = 0

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            print(f"train_loss {state.global_step} {logs['loss']}", flush=True)
        if logs and "eval_loss" in logs:
            print(f"eval_loss {logs['eval_loss']}", flush=True)

    def on_prediction_step(self, args, state, control, **kwargs):
        self.evaluation_batches += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--lr", type=float, default=5e-4)
    arguments = parser.parse_args()
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
    model = GPT2LMHeadModel(config)
    printer = Printer()
    trainer = Trainer(
        model=model,
        args=TrainingArguments(
            output_dir="hf-output",
            max_steps=arguments.steps,
            per_device_train_batch_size=4,
            per_device_eval_batch_size=8,
            gradient_accumulation_steps=arguments.accumulation,
            learning_rate=arguments.lr,
            eval_strategy="steps",
            eval_steps=arguments.eval_every,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            dataloader_num_workers=0,
            disable_tqdm=True,
        ),
        train_dataset=TokenData(256, 16, 64, seed=1),
        eval_dataset=TokenData(16, 16, 64, seed=2),
        callbacks=[printer],
    )
    trainer.train()
    print(f"optimizer_steps {trainer.state.global_step}", flush=True)
    print(f"evaluations {printer.evaluation_batches}", flush=True)


if __name__ == "__main__":
    main()
