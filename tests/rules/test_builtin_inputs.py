"""CheckInputImages and NLPSequenceRatio on hand-made trials, at their thresholds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from builtin_trials import TrialBuilder, evidence_of, fired_steps

from trainprobe.config.errors import ConfigError
from trainprobe.rules.builtin import CheckInputImages, NLPSequenceRatio

IMAGES = "conv1_input_0"


def _images(count: int, means: tuple[float, ...], channel_axis: int = 1) -> np.ndarray:
    """``count`` images of 4x4 pixels whose channels have exactly the given means."""
    pixels = np.array([-1.0, 1.0] * 8).reshape(4, 4)  # mean 0
    batch = np.stack([np.stack([pixels + mean for mean in means]) for _ in range(count)])
    return np.moveaxis(batch, 1, channel_axis)


def test_check_input_images_threshold_mean_boundary(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path / "a").add(0, IMAGES, _images(500, (0.0, 0.21, 0.0))).write()
    rule = CheckInputImages(trial, regex=IMAGES)
    assert fired_steps(rule) == [0]
    (evidence,) = evidence_of(rule)
    assert evidence.value == pytest.approx(0.21)
    assert "channel 1 has mean 0.21 over 500 images" in evidence.message
    below = TrialBuilder(tmp_path / "b").add(0, IMAGES, _images(500, (0.19, -0.19, 0.0))).write()
    assert fired_steps(CheckInputImages(below, regex=IMAGES)) == []
    negative = TrialBuilder(tmp_path / "c").add(0, IMAGES, _images(500, (-0.21,))).write()
    assert fired_steps(CheckInputImages(negative, regex=IMAGES)) == [0]


def test_check_input_images_waits_for_threshold_samples(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, IMAGES, _images(300, (0.5,)))
        .add(1, IMAGES, _images(199, (0.5,)))
        .add(2, IMAGES, _images(1, (0.5,)))
        .write()
    )
    assert fired_steps(CheckInputImages(trial, regex=IMAGES)) == [2]
    assert fired_steps(CheckInputImages(trial, regex=IMAGES, threshold_samples=300)) == [0, 1, 2]


def test_check_input_images_channel_last(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path).add(0, IMAGES, _images(500, (0.0, 0.3), 3)).write()
    assert fired_steps(CheckInputImages(trial, regex=IMAGES)) == []  # axis 1 is a pixel row
    rule = CheckInputImages(trial, regex=IMAGES, channel=3)
    assert fired_steps(rule) == [0]
    assert "channel 1" in evidence_of(rule)[0].message


def _tokens(zeros: int, threes: int = 0, total: int = 100) -> np.ndarray:
    tokens = np.full(total, 7)
    tokens[:zeros] = 0
    tokens[zeros : zeros + threes] = 3
    return tokens.reshape(4, total // 4)


def test_nlp_sequence_ratio_default_token_boundary(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "embedding0_input_0", _tokens(50))
        .add(1, "embedding0_input_0", _tokens(51))
        .write()
    )
    rule = NLPSequenceRatio(trial)
    assert fired_steps(rule) == [1]
    (evidence,) = evidence_of(rule)
    assert evidence.value == 51.0
    assert "token 0 is 51% of the 100 tokens" in evidence.message


def test_nlp_sequence_ratio_several_tokens(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "embedding_input_0", _tokens(10, 21))
        .add(1, "embedding_input_0", _tokens(60, 20))
        .add(2, "embedding_input_0", _tokens(20, 20))
        .write()
    )
    rule = NLPSequenceRatio(
        trial, ".*embedding_input_0", token_values="3, 0", token_thresholds_percent="20, 50.0"
    )
    assert fired_steps(rule) == [0, 1]
    assert [item.message.split(":")[1].split(" is")[0] for item in evidence_of(rule)] == [
        " token 3",
        " token 0",
    ]
    # One threshold for every token.
    assert fired_steps(NLPSequenceRatio(trial, ".*embedding_input_0", "3,0", "19")) == [0, 1, 2]


def test_nlp_sequence_ratio_needs_one_threshold_per_token(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path).add(0, "embedding_input_0", _tokens(1)).write()
    with pytest.raises(ConfigError, match="token_thresholds_percent"):
        NLPSequenceRatio(trial, token_values="0,1,2", token_thresholds_percent="10,20")
