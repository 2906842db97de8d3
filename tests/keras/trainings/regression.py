"""A small Keras regression, written as a Keras user writes one: compile, fit with validation and
a checkpoint callback, evaluate, predict, save. It trains with plain SGD; ``--accumulate K``
accumulates gradients over K batches, ``--nan-at N`` puts a NaN into the data of batch N (a
broken twin). ``--save DIR`` keeps a ``ModelCheckpoint`` of every epoch and saves the model at the
end (``model.keras``), as users keep theirs. What it records of itself (the optimizer's
iterations and variables, each batch's loss through a callback of its own, its weights, a
pickled copy's predictions, its JSON) goes to ``--truth FILE``.
"""

import argparse
import json
import pickle

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--accumulate", type=int, default=0)
parser.add_argument("--steps-per-execution", type=int, default=1)
parser.add_argument("--nan-at", type=int, default=-1)
parser.add_argument("--save", default="")
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
model.compile(
    optimizer=keras.optimizers.SGD(0.05, gradient_accumulation_steps=args.accumulate or None),
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
callbacks = [truth]
if args.save:
    callbacks.append(keras.callbacks.ModelCheckpoint(f"{args.save}/checkpoint.keras"))
model.fit(
    x,
    y,
    batch_size=args.batch_size,
    epochs=args.epochs,
    validation_data=(x_val, y_val),
    shuffle=False,
    callbacks=callbacks,
    verbose=2,
)
print("evaluate:", model.evaluate(x_val, y_val, batch_size=args.batch_size, verbose=0))
predictions = model.predict(x_val, batch_size=args.batch_size, verbose=0)
kept = {}
if args.save:
    model.save(f"{args.save}/model.keras")
    weights = model.get_weights()
    model.set_weights(weights)
    copy = pickle.loads(pickle.dumps(model))
    kept = {
        "optimizer_variables": {v.path: np.asarray(v).tolist() for v in model.optimizer.variables},
        "metrics_variables": len(model.metrics_variables),
        "get_weights": [w.tolist() for w in weights],
        "json": model.to_json(),
        "pickled_outputs": keras.ops.convert_to_numpy(copy(x_val)).tolist(),
        "x_val": x_val.tolist(),
        "y_val": y_val.tolist(),
    }
if args.truth:
    with open(args.truth, "w", encoding="utf-8") as file:
        json.dump(
            {
                "iterations": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
                "logged_losses": truth.logged,
                "weights": {v.path: np.asarray(v).tolist() for v in model.weights},
                "predictions": predictions.tolist(),
                **kept,
            },
            file,
        )
