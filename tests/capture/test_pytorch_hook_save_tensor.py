"""A collection that only ``save_tensor`` fills, the way ClassImbalance and Confusion are fed."""

from __future__ import annotations

from pathlib import Path

import torch

from trainprobe.capture.save_config import SaveConfig
from trainprobe.pytorch import Hook
from trainprobe.trials import create_trial


def test_labels_and_predictions_from_save_tensor_are_saved_in_their_collections(
    tmp_path: Path,
) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    hook = Hook(
        tmp_path / "out",
        include_collections=["losses", "labels", "predictions"],
        save_config=SaveConfig(save_interval=1),
    )
    hook.register_module(model)
    saved_labels = []
    for _ in range(3):
        x, y = torch.randn(4, 3), torch.randint(0, 2, (4,))
        predictions = model(x).argmax(dim=1)
        hook.save_tensor("labels", y, collections_to_write="labels")
        hook.save_tensor("predictions", predictions, collections_to_write="predictions")
        saved_labels.append(y)
    hook.close()
    trial = create_trial(str(tmp_path / "out"))
    assert trial.tensor_names(collection="labels") == ["labels"]
    assert trial.tensor_names(collection="predictions") == ["predictions"]
    labels = trial.tensor("labels")
    assert labels.steps() == [0, 1, 2]
    for step, expected in enumerate(saved_labels):
        assert labels.value(step).tolist() == expected.tolist()
