"""SimilarAcrossRuns and StalledTrainingRule on hand-made trials.

The stall tests set the index files' modification times (when each step was written) instead
of waiting, and pass the clock to ``check_progress``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from builtin_trials import TrialBuilder, evidence_of, fired_steps

from trainprobe.config.errors import ConfigError
from trainprobe.rules.builtin import SimilarAcrossRuns, StalledTrainingRule
from trainprobe.storage import locations
from trainprobe.storage.step_file import write_collections_file, write_training_end
from trainprobe.trials import create_trial


def test_similar_across_runs_uses_numpy_allclose(tmp_path: Path) -> None:
    base = (
        TrialBuilder(tmp_path / "base")
        .series("w", {0: [1.0, 2.0], 1: [1.0, 2.0], 2: [1.0, 2.0]})
        .add(0, "b", [0.0])
        .write()
    )
    other = (
        TrialBuilder(tmp_path / "other")
        .series("w", {0: [1.0, 2.0], 1: [1.0 + 0.5e-5, 2.0], 2: [1.0 + 2e-5, 2.0]})
        .write()
    )
    rule = SimilarAcrossRuns(base, other_trials=[other])
    assert fired_steps(rule) == [2]
    (evidence,) = evidence_of(rule)
    assert evidence.tensor == "w"
    assert evidence.value == pytest.approx(2e-5)
    assert "w differs from other's at TRAIN step 2" in evidence.message


def test_similar_across_runs_holds_nan_equal_to_nan_only_where_both_runs_have_it(
    tmp_path: Path,
) -> None:
    nan = float("nan")
    base = (
        TrialBuilder(tmp_path / "base")
        .series("w", {0: [nan, 2.0], 1: [nan, 2.0], 2: [1.0, 2.0]})
        .write()
    )
    other = (
        TrialBuilder(tmp_path / "other")
        .series("w", {0: [nan, 2.0], 1: [1.0, 2.0], 2: [1.0, nan]})
        .write()
    )
    rule = SimilarAcrossRuns(base, other_trials=[other])
    assert fired_steps(rule) == [1, 2]


def test_similar_across_runs_opens_the_other_trial_from_its_path(tmp_path: Path) -> None:
    base = TrialBuilder(tmp_path / "base").series("w", {0: [1.0], 1: np.ones((2, 2))}).write()
    TrialBuilder(tmp_path / "other").series("w", {0: [1.0], 1: np.ones(4)}).write()
    rule = SimilarAcrossRuns(base, str(tmp_path / "other"), tensor_regex="^w$")
    assert fired_steps(rule) == [1]
    assert "shape (2, 2) here, (4,) in other" in evidence_of(rule)[0].message


def test_similar_across_runs_needs_another_trial(tmp_path: Path) -> None:
    base = TrialBuilder(tmp_path).add(0, "w", [1.0]).write()
    with pytest.raises(ConfigError, match="other_trial"):
        SimilarAcrossRuns(base)


def _written_at(trial_path: Path, times: dict[int, float]) -> None:
    for step, when in times.items():
        index = locations.join(str(trial_path), locations.index_file(step, "worker_0"))
        os.utime(index, (when, when))


def test_stalled_training_rule_finds_a_gap_between_steps(tmp_path: Path) -> None:
    builder = TrialBuilder(tmp_path).series("loss", {0: 1.0, 1: 0.9, 2: 0.8, 3: 0.7})
    trial = builder.write()
    start = 1_700_000_000.0
    _written_at(tmp_path, {0: start, 1: start + 10, 2: start + 40, 3: start + 41})
    rule = StalledTrainingRule(trial, threshold=29)
    assert fired_steps(rule) == [2]
    (evidence,) = evidence_of(rule)
    assert evidence.value == 30.0
    assert "no step was written for 30 s, between TRAIN step 1 and TRAIN step 2" in evidence.message
    assert fired_steps(StalledTrainingRule(trial, threshold="30")) == []


def test_stalled_training_rule_check_progress_of_a_running_job(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path).series("loss", {0: 1.0, 1: 0.9}).write(end=False)
    written = 1_700_000_000.0
    _written_at(tmp_path, {0: written - 5, 1: written})
    rule = StalledTrainingRule(trial, threshold=100, stop_training_on_fire=True)
    assert rule.check_progress(now=written + 99.5) is False
    assert rule.check_progress(now=written + 100.5) is True
    assert "no new step for 100.5 s since TRAIN step 1 was written" in evidence_of(rule)[0].message
    assert rule.stop_training_on_fire is True
    write_training_end(str(tmp_path))
    assert rule.check_progress(now=written + 1000) is False


def test_stalled_training_rule_before_the_first_step(tmp_path: Path) -> None:
    write_collections_file(str(tmp_path), "worker_0", {}, 1)
    trial = create_trial(str(tmp_path))
    rule = StalledTrainingRule(trial, threshold=60)
    assert rule.check_progress(now=rule.started + 59) is False
    assert rule.check_progress(now=rule.started + 61) is True
    assert "since the rule started" in evidence_of(rule)[0].message
