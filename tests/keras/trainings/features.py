"""A Keras functional model with a feature of its own, written as Keras users write one: a custom
layer gives the head the norm of the hidden layer's output beside it. ``--zero-row-at N`` makes
one input row of batch N all zeros: that row's hidden output is zero, where the norm's gradient
is 0/0, so the hidden layer's gradient turns NaN while the loss stays finite (a broken twin whose
NaN starts in a gradient). ``--spike-at N`` multiplies the targets of batch N by 100 (a corrupted
batch: its loss spikes). What it records of itself (the optimizer's iterations, each batch's
logged loss, its final weights) goes to ``--truth FILE``.
"""

import argparse
import json

import keras
import numpy as np
from keras import ops

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--zero-row-at", type=int, default=-1)
parser.add_argument("--spike-at", type=int, default=-1)
parser.add_argument("--truth", default="")
args = parser.parse_args()


class RowNorm(keras.layers.Layer):
    """The Euclidean norm of each row."""

    def call(self, inputs):
        return ops.sqrt(ops.sum(ops.square(inputs), axis=-1, keepdims=True))


keras.utils.set_random_seed(11)
rng = np.random.default_rng(11)
x = rng.normal(size=(160, 6)).astype("float32")
y = (np.abs(x).sum(axis=1, keepdims=True) + 0.1 * rng.normal(size=(160, 1))).astype("float32")
if args.zero_row_at >= 0:
    x[args.zero_row_at * args.batch_size] = 0.0
if args.spike_at >= 0:
    start = args.spike_at * args.batch_size
    y[start : start + args.batch_size] *= 100.0

inputs = keras.Input((6,))
hidden = keras.layers.Dense(12, activation="tanh", use_bias=False, name="hidden")(inputs)
both = keras.layers.Concatenate()([hidden, RowNorm()(hidden)])
outputs = keras.layers.Dense(1, name="head")(both)
model = keras.Model(inputs, outputs)
model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")


class Truth(keras.callbacks.Callback):
    """The running mean of the loss Keras logs after each training batch."""

    def __init__(self):
        super().__init__()
        self.logged = []

    def on_train_batch_end(self, batch, logs=None):
        self.logged.append(float(logs["loss"]))


truth = Truth()
model.fit(
    x,
    y,
    batch_size=args.batch_size,
    epochs=args.epochs,
    shuffle=False,
    callbacks=[truth],
    verbose=2,
)
if args.truth:
    with open(args.truth, "w", encoding="utf-8") as file:
        json.dump(
            {
                "iterations": int(ops.convert_to_numpy(model.optimizer.iterations)),
                "logged_losses": truth.logged,
                "weights": {v.path: np.asarray(v).tolist() for v in model.weights},
            },
            file,
        )
