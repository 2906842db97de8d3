"""What a Keras user meets before any training: trainprobe stays free of TensorFlow, JAX and keras
until a training uses them, and smdebug's TensorFlow names answer with the Keras hook."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def python(code: str, **environment: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **environment},
    )


def test_trainprobe_rules_and_cli_never_import_a_keras_framework(tmp_path) -> None:
    finished = python(
        """
        import sys
        import trainprobe, trainprobe.rules, trainprobe.trials, trainprobe.debugger
        import trainprobe.cli.main, trainprobe.jobs.processes.training_entry
        import trainprobe.smdebug_names
        from trainprobe.jobs.processes import keras_auto_hook, pytorch_auto_hook
        keras_auto_hook.install()
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"keras", "tensorflow", "jax"})
        print(heavy)
        """
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "[]"


def test_smdebug_tensorflow_is_the_keras_hook_and_tf1_hooks_say_they_are_gone(tmp_path) -> None:
    finished = python(
        f"""
        import trainprobe.smdebug_names
        trainprobe.smdebug_names.install()
        import smdebug.tensorflow as smd
        import trainprobe.keras
        assert smd.KerasHook is trainprobe.keras.Hook
        hook = smd.KerasHook({str(tmp_path / "out")!r}, save_config=smd.SaveConfig(save_interval=5))
        assert smd.get_hook(hook_type="keras") is hook
        for make in (smd.SessionHook, smd.EstimatorHook.create_from_json_file,
                     lambda: smd.get_hook(hook_type="session")):
            try:
                make()
            except trainprobe.errors.TrainprobeError as error:
                print(error)
        """,
        KERAS_BACKEND="torch",
    )
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.strip().splitlines()
    assert len(lines) == 3
    assert "TF1 sessions" in lines[0] and "removed from TensorFlow in 2.16" in lines[0]
    assert "tf.estimator were removed from TensorFlow in 2.16" in lines[1]
    assert "TF1 sessions" in lines[2]


def test_a_hook_given_to_evaluate_alone_saves_each_batch_loss(tmp_path) -> None:
    finished = python(
        f"""
        import numpy as np, keras
        import trainprobe.keras as tk
        from trainprobe.trials import create_trial
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile("sgd", "mse")
        x = np.random.rand(32, 4).astype("float32"); y = np.zeros((32, 2), "float32")
        hook = tk.Hook({str(tmp_path / "out")!r}, save_config=tk.SaveConfig(save_interval=1))
        model.evaluate(x, y, batch_size=8, callbacks=[hook], verbose=0)
        hook.close()
        own = [float(np.mean(model.predict(x[i:i + 8], verbose=0) ** 2)) for i in (0, 8, 16, 24)]
        saved = create_trial({str(tmp_path / "out")!r}).tensor("batch_loss").values(tk.modes.EVAL)
        print(np.allclose([float(saved[s]) for s in sorted(saved)], own, rtol=1e-5))
        """,
        KERAS_BACKEND="torch",
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip().splitlines()[-1] == "True"
