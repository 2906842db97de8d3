"""The checks a Keras training runs inside its own steps, on each backend, under ``trainprobe run``.

The broken twin (``trainings/features.py``, a functional model with a custom layer, as Keras
users write one) has a NaN that starts in a gradient at step 5 (an all-zero row, where the
custom layer's norm has a 0/0 gradient, while the loss stays finite) and a corrupted batch at
step 9 (its targets times 100: the loss spikes). With LossSpike and GradientNormSpike judging
every step and SkipStep on both, the NaN is named at its step and layer, both updates are
skipped (the weights and the optimizer's state stay exactly as they were; the iteration count
goes on) and the training ends healthy. The healthy regression's broken twin (a NaN in its
data) has its NaN loss named, and StopTraining stops it with its last weights the healthy ones.
The web UI shows a Keras job: its losses, steps and verdicts.
"""

from __future__ import annotations

import numpy as np
import pytest
from keras_jobs import BACKENDS, KerasJob, run_job

from trainprobe.storage.nonfinite_file import read_nonfinite_origin
from trainprobe.storage.spike_records import read_spikes

pytestmark = pytest.mark.slow

SPIKE_RULES = ("LossSpike:warmup_steps=5", "GradientNormSpike:warmup_steps=5")
KERNEL = "hidden/weights/hidden/kernel:0"
STEPS = 20  # 160 samples in batches of 8, one epoch


@pytest.fixture(scope="module", params=BACKENDS)
def broken(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> KerasJob:
    return run_job(
        tmp_path_factory,
        request.param,
        "--zero-row-at",
        "5",
        "--spike-at",
        "9",
        script="features.py",
        rules=("ExplodingTensor", *SPIKE_RULES),
        options=("--on-spike", "skip", "--collection", "optimizer_variables"),
    )


def test_the_first_nan_is_named_at_its_step_and_layer(broken: KerasJob) -> None:
    origin = read_nonfinite_origin(str(broken.out / "debug-output"))
    assert origin is not None
    assert (origin.step, origin.kind, origin.module, origin.what) == (
        5,
        "gradient",
        "hidden/kernel",
        "NaN",
    )
    assert origin.loss_step is None  # the skipped update kept the NaN out of the weights
    said = "TRAIN step 5: first NaN in the gradient of `hidden/kernel` (the loss was finite)"
    assert origin.describe() == said
    assert broken.rule_status("ExplodingTensor") == "IssuesFound"
    assert said in broken.evidence("ExplodingTensor")
    assert np.isnan(broken.values("gradients/hidden/kernelGrad")[5]).any()


def test_spiking_updates_are_skipped_and_the_training_goes_on(broken: KerasJob) -> None:
    spikes = read_spikes(str(broken.out / "debug-output"))
    assert [(s.rule, s.step, s.action) for s in spikes] == [
        ("GradientNormSpike", 5, "skip"),
        ("LossSpike", 9, "skip"),
        ("GradientNormSpike", 9, "skip"),
    ]
    assert broken.rule_status("LossSpike") == "IssuesFound"
    assert "TRAIN step 9: " in broken.status_of("LossSpike")["StatusDetails"]
    assert broken.rule_status("GradientNormSpike") == "IssuesFound"

    weights = broken.values(KERNEL)
    assert sorted(weights) == list(range(STEPS))
    unchanged = [s for s in range(1, STEPS) if np.array_equal(weights[s], weights[s - 1])]
    assert unchanged == [5, 9]
    final = np.asarray(broken.truth["weights"]["hidden/kernel"])
    np.testing.assert_array_equal(weights[STEPS - 1], final)
    assert np.isfinite(final).all()
    # Adam's moments stay as they were too; its iteration count goes on.
    moments = broken.values("adam/hidden_kernel_momentum:0")
    iterations = broken.values("adam/iteration:0")
    for skipped in (5, 9):
        np.testing.assert_array_equal(moments[skipped], moments[skipped - 1])
        assert int(iterations[skipped]) == skipped + 1
    assert not np.array_equal(moments[6], moments[5])
    assert broken.truth["iterations"] == STEPS


def test_a_nan_loss_is_named_and_stop_training_keeps_the_healthy_weights(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The healthy regression's broken twin: a NaN in batch 3's data makes its loss NaN (a
    spike even while LossSpike warms up). The checks name the loss at step 3, StopTraining
    skips that update and every one after it, and the job stops; ExplodingTensor finds the
    saved NaN loss and says where it started."""
    job = run_job(
        tmp_path_factory,
        "jax",  # its checks are read a step late: the stop comes up to two batches later
        "--nan-at",
        "3",
        rules=("ExplodingTensor", "LossSpike"),
        options=("--on-spike", "stop"),
        ending="Stopped",
    )
    origin = read_nonfinite_origin(str(job.out / "debug-output"))
    assert origin is not None
    assert (origin.step, origin.kind, origin.loss_step) == (3, "loss", 3)
    said = "TRAIN step 3: first NaN in the loss `batch_loss` (the layers' outputs are not checked)"
    assert origin.describe() == said
    assert job.rule_status("ExplodingTensor") == "IssuesFound"
    assert said in job.evidence("ExplodingTensor")
    status = job.status_of("LossSpike")
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    assert (
        "TRAIN step 3: nan (not finite); the training was stopped before the update"
        in (status["StatusDetails"])
    )
    weights = job.values("dense/weights/dense/kernel:0")
    last = max(weights)
    assert 3 <= last < 15
    for step in range(3, last + 1):
        np.testing.assert_array_equal(weights[step], weights[2])
    assert np.isfinite(weights[last]).all()


def test_the_web_ui_shows_the_job_its_losses_and_verdicts(broken: KerasJob) -> None:
    pytest.importorskip("playwright")
    if broken.backend != "tensorflow":
        pytest.skip("one backend is enough: the UI reads the files, whichever wrote them")
    from browser import CHROMIUM_FLAGS, chromium_path
    from ui.ui_process import trainprobe_ui

    with trainprobe_ui(broken.home) as ui:
        summary = ui.get_json("/api/jobs/job")
        assert (summary["status"], summary["framework"], summary["step"]) == (
            "Completed",
            "Keras",
            STEPS - 1,
        )
        assert summary["nonFinite"]["step"] == 5
        cards = {card["name"]: card for card in summary["rules"]}
        for rule, step in (("LossSpike", 9), ("GradientNormSpike", 5)):
            assert cards[rule]["status"] == "IssuesFound"
            assert any(f"TRAIN step {step}: " in said for said in cards[rule]["evidence"])
        charts = {chart["tensor"]: chart for chart in ui.get_json("/api/jobs/job/scalars")}
        [train] = [s for s in charts["batch_loss"]["series"] if s["mode"] == "TRAIN"]
        assert train["x"] == list(range(STEPS))
        saved = broken.values("batch_loss")
        assert train["mean"] == pytest.approx([float(saved[s]) for s in range(STEPS)], rel=1e-3)

        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True
            )
            try:
                page = chromium.new_page(viewport={"width": 1400, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda error: errors.append(str(error)))
                page.goto(ui.url)
                page.click('tr[data-job="job"] a')
                page.wait_for_selector('[data-rule="LossSpike"] .status-IssuesFound')
                assert page.locator("#step").inner_text() == str(STEPS - 1)
                banner = page.locator(".banner").first.inner_text()
                assert "gradient of `hidden/kernel`" in banner
                page.locator('[data-tensor="batch_loss"]').scroll_into_view_if_needed()
                page.wait_for_selector('[data-tensor="batch_loss"][data-drawn]')
                assert errors == []
            finally:
                chromium.close()
