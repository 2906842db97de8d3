"""A Keras training written for SageMaker Debugger, as AWS's TensorFlow examples write it:
smdebug's ``KerasHook`` from the job's configuration, ``wrap_optimizer``, the hook among
``fit``'s callbacks, a scalar saved by hand."""

import argparse
import json

import keras
import numpy as np
import smdebug.tensorflow as smd

parser = argparse.ArgumentParser()
parser.add_argument("--truth", default="")
args = parser.parse_args()

hook = smd.KerasHook.create_from_json_file()
hook.save_scalar("learning_rate", 0.05, sm_metric=True)

keras.utils.set_random_seed(3)
x = np.random.default_rng(3).normal(size=(128, 8)).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
optimizer = hook.wrap_optimizer(keras.optimizers.SGD(0.05))
model.compile(optimizer=optimizer, loss="mse")
hook.set_mode(smd.modes.TRAIN)
model.fit(x, y, batch_size=16, epochs=2, callbacks=[hook], verbose=0)

try:
    smd.SessionHook.create_from_json_file()
    session_hook = "made"
except Exception as error:  # a TF1 session hook cannot be made any more
    session_hook = str(error)

if args.truth:
    with open(args.truth, "w", encoding="utf-8") as file:
        json.dump(
            {
                "iterations": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
                "same_hook": smd.get_hook() is hook,
                "session_hook": session_hook,
            },
            file,
        )
