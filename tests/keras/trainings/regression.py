"""A small Keras regression, written as a Keras user writes one: compile, fit with validation,
evaluate, predict. ``--sgd`` trains with plain SGD, ``--accumulate K`` accumulates gradients over
K batches, ``--nan-at N`` puts a NaN into the data of batch N (a broken twin), ``--explode``
trains with a learning rate that makes the loss grow. What it records of itself (the optimizer's
iterations, each batch's loss through a callback of its own) goes to ``--truth FILE``.
"""

import argparse
import json

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--accumulate", type=int, default=0)
parser.add_argument("--steps-per-execution", type=int, default=1)
parser.add_argument("--nan-at", type=int, default=-1)
parser.add_argument("--explode", action="store_true")
parser.add_argument("--truth", default="")
args = parser.parse_args()

keras.utils.set_random_seed(7)
rng = np.random.default_rng(7)
x = rng.normal(size=(128, 8)).astype("float32")
y = (x @ rng.normal(size=(8, 1)) + 0.1 * rng.normal(size=(128, 1))).astype("float32")
if args.nan_at >= 0:
    x[args.nan_at * args.batch_size] = np.nan
x_val, y_val = x[:32], y[:32]

model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(1)]
)
rate = 50.0 if args.explode else 0.05
model.compile(
    optimizer=keras.optimizers.SGD(rate, gradient_accumulation_steps=args.accumulate or None),
    loss="mse",
    metrics=["mae"],
    steps_per_execution=args.steps_per_execution,
)


class Truth(keras.callbacks.Callback):
    """The running mean of the loss Keras logs after each training batch."""

    def __init__(self) -> None:
        super().__init__()
        self.logged: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.logged.append(float(logs["loss"]))


truth = Truth()
model.fit(
    x,
    y,
    batch_size=args.batch_size,
    epochs=args.epochs,
    validation_data=(x_val, y_val),
    shuffle=False,
    callbacks=[truth],
    verbose=2,
)
print("evaluate:", model.evaluate(x_val, y_val, batch_size=args.batch_size, verbose=0))
predictions = model.predict(x_val, batch_size=args.batch_size, verbose=0)
if args.truth:
    with open(args.truth, "w", encoding="utf-8") as file:
        json.dump(
            {
                "iterations": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
                "logged_losses": truth.logged,
                "weights": {v.path: np.asarray(v).tolist() for v in model.weights},
                "predictions": predictions.tolist(),
            },
            file,
        )
