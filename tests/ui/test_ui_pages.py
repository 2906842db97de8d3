"""Each page of the web UI alone, without a server: its data methods over a real job store and
job files written by trainprobe's own writers, and a handler called with a request as Starlette
makes it. What a page refuses (a made-up job or tensor, a file that is not a script) it refuses
by name, with the status the browser gets. The job page marks what the flight recorder captured
and the spikes the in-training rules saw, and counts slow steps as the recorder did."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from job_records import job_in_progress
from starlette.requests import Request
from starlette.responses import Response

from trainprobe.jobs import JobStore
from trainprobe.storage.flight_captures import Capture, CapturedStep, capture_dir, write_capture
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.spike_records import SpikeRecord, write_spikes
from trainprobe.storage.step_file import StepWriter, write_collections_file
from trainprobe.ui.access import Access
from trainprobe.ui.pages.base import JobViews, Refused, page_response
from trainprobe.ui.pages.compare import ComparePage
from trainprobe.ui.pages.job import JobPage
from trainprobe.ui.pages.jobs import JobRows
from trainprobe.ui.pages.static import StaticFiles
from trainprobe.ui.pages.tensors import TensorsPage

LOSS = "CrossEntropyLoss_output_0"
ACCURACY = "metric-accuracy"


def _write_job(store: JobStore, root: Path, name: str, scalars: list[str], steps: int) -> None:
    """Job ``name`` in progress in ``store``: ``steps`` TRAIN steps of ``scalars`` and a weight."""
    debug_output = root / name / "debug-output"
    collections = {
        "losses": {"include_regex": ["Loss_output"], "tensor_names": [], "save_config": None},
        "metrics": {"include_regex": ["^metric-"], "tensor_names": [], "save_config": None},
        "weights": {"include_regex": ["^fc"], "tensor_names": [], "save_config": None},
    }
    write_collections_file(str(debug_output), "worker_0", collections, num_workers=1)
    for step in range(steps):
        with StepWriter(str(debug_output), step, "worker_0") as writer:
            for index, scalar in enumerate(scalars):
                value = np.array((index + 1) / (1 + step), np.float32)
                writer.add(scalar, value, mode=ModeKeys.TRAIN, mode_step=step)
            weight = np.arange(6, dtype=np.float32).reshape(2, 3) * step
            writer.add("fc.weight", weight, mode=ModeKeys.TRAIN, mode_step=step)
    store.insert(job_in_progress(name, root / name))


@pytest.fixture
def jobs(tmp_path: Path) -> JobViews:
    store = JobStore(tmp_path / "jobs.sqlite")
    _write_job(store, tmp_path / "out", "with-accuracy", [LOSS, ACCURACY], 12)
    _write_job(store, tmp_path / "out", "loss-only", [LOSS], 5)
    return JobViews(store)


def _refusal(call: Any) -> tuple[int, str]:
    with pytest.raises(Refused) as refused:
        call()
    return refused.value.status, str(refused.value)


def _request(path: str, path_params: dict[str, str], query: str = "") -> Request:
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": query.encode(),
        "headers": [],
        "path_params": path_params,
    }
    return Request(scope)


def _answer(response: Response) -> tuple[int, str, Any]:
    body = bytes(response.body)
    kind = response.headers["content-type"]
    return response.status_code, kind, json.loads(body) if "json" in kind else body.decode()


def test_a_job_is_found_by_its_name_and_a_made_up_one_is_refused_by_name(
    jobs: JobViews,
) -> None:
    assert jobs.record("loss-only").name == "loss-only"

    status, message = _refusal(lambda: jobs.record("../jobs.sqlite"))
    assert status == 400 and "../jobs.sqlite" in message
    status, message = _refusal(lambda: jobs.record("no-such-job"))
    assert status == 404 and "there is no job named 'no-such-job'" in message


def test_the_jobs_rows_list_every_job_newest_first(jobs: JobViews) -> None:
    rows = JobRows(jobs)()

    assert [row["name"] for row in rows] == ["loss-only", "with-accuracy"]
    assert [row["step"] for row in rows] == [4, 11]
    assert all(row["status"] == "InProgress" and row["framework"] == "PyTorch" for row in rows)


def test_the_job_page_charts_each_scalar_and_zooms_one_to_a_range(jobs: JobViews) -> None:
    page = JobPage(jobs, jobs.store, closing=lambda: False)

    charts = page.scalars("with-accuracy", None, None, None)
    assert [chart["tensor"] for chart in charts] == [LOSS, ACCURACY]
    [zoomed] = page.scalars("with-accuracy", 3, 6, ACCURACY)
    [train] = zoomed["series"]
    assert train["x"] == [3, 4, 5, 6]
    assert train["mean"] == pytest.approx([2 / 4, 2 / 5, 2 / 6, 2 / 7], rel=1e-3)

    status, message = _refusal(lambda: page.scalars("loss-only", None, None, ACCURACY))
    assert status == 404 and repr(ACCURACY) in message
    summary, settled = page.summary("loss-only")
    assert (summary["name"], summary["step"], settled) == ("loss-only", 4, False)


def test_compare_draws_the_tensor_asked_for_or_each_jobs_first(jobs: JobViews) -> None:
    page = ComparePage(jobs)

    first = page.compare(["with-accuracy", "loss-only"], None)
    assert [(chart["job"], chart["tensor"]) for chart in first] == [
        ("with-accuracy", LOSS),
        ("loss-only", LOSS),
    ]
    assert [len(chart["series"][0]["x"]) for chart in first] == [12, 5]

    accuracy = page.compare(["with-accuracy", "loss-only"], ACCURACY)
    assert accuracy[0]["series"][0]["x"] == list(range(12))
    assert accuracy[1] == {"job": "loss-only", "tensor": ACCURACY, "series": []}


def test_the_tensors_page_finds_saved_tensors_and_refuses_others_by_name(
    jobs: JobViews,
) -> None:
    page = TensorsPage(jobs)

    assert page.tensors("loss-only")["collections"]["weights"] == ["fc.weight"]
    value = page.tensor_value("loss-only", "fc.weight", 2)
    assert value["shape"] == [2, 3] and value["rows"] == [[0, 2, 4], [6, 8, 10]]
    history = page.tensor("loss-only", "fc.weight")
    assert history["modes"]["TRAIN"]["steps"] == [0, 1, 2, 3, 4]

    status, message = _refusal(lambda: page.tensor("loss-only", "../../jobs.sqlite"))
    assert status == 404 and "saved no tensor named '../../jobs.sqlite'" in message
    status, message = _refusal(lambda: page.tensor_value("loss-only", "fc.weight", 99))
    assert status == 404 and "at step 99" in message


def test_a_tensor_value_handler_answers_a_request_alone(jobs: JobViews) -> None:
    page = TensorsPage(jobs)
    request = _request(
        "/api/jobs/loss-only/tensor-value", {"name": "loss-only"}, "name=fc.weight&step=1"
    )

    status, kind, body = _answer(asyncio.run(page.get_tensor_value(request)))

    assert (status, kind) == (200, "application/json")
    assert body["rows"] == [[0, 1, 2], [3, 4, 5]]
    half = _request("/api/jobs/loss-only/tensor-value", {"name": "loss-only"}, "name=x&step=1.5")
    with pytest.raises(Refused, match="not a whole number"):
        asyncio.run(page.get_tensor_value(half))


def test_static_files_are_the_uis_scripts_and_style_and_nothing_else() -> None:
    files = StaticFiles(Access("127.0.0.1", 8000))

    def get(name: str) -> tuple[int, str, Any]:
        return _answer(asyncio.run(files.static(_request(f"/static/{name}", {"file": name}))))

    status, kind, script = get("job.js")
    assert (status, kind) == (200, "text/javascript; charset=utf-8")
    assert 'from "/static/charts.js"' in script
    assert get("ui.css")[1] == "text/css; charset=utf-8"
    for name in ("page.html", "../pages/base.py", "__init__.py", "nothing.js"):
        with pytest.raises(Refused, match="no such file"):
            get(name)


def test_a_page_is_the_one_html_file_naming_its_script() -> None:
    status, kind, html = _answer(page_response("tensors"))

    assert (status, kind) == (200, "text/html; charset=utf-8")
    assert 'data-page="tensors"' in html and 'src="/static/tensors.js"' in html
    with pytest.raises(AssertionError):
        page_response("../../etc/passwd")


def _captured(trigger: str, step: int, node: str, slow_s: float | None) -> Capture:
    """A capture as the flight recorder writes one: of a slow step (``slow_s`` long, against a
    median of 0.1 s) or of a request, the two steps after ``step``."""
    start = 1.7e15 + step * 100_000

    def at(number: int, seconds: float = 0.1) -> CapturedStep:
        return CapturedStep(number, "train", start, start + seconds * 1e6)

    capture = Capture(trigger, "planted", step, node, capture_dir(trigger, step), written_at=1.0)
    capture.steps = [at(step + 1), at(step + 2)]
    if slow_s is not None:
        capture.slow_step, capture.median_s, capture.threshold_s = at(step, slow_s), 0.1, 0.3
    return capture


def test_the_job_page_marks_captures_and_spikes_and_counts_the_recorders_slow_steps(
    jobs: JobViews,
) -> None:
    layout_dir = Path(jobs.record("with-accuracy").job_dir)
    profiler_output = str(layout_dir / "profiler-output")
    for capture in (
        _captured("slow_step", 4, "1-algo-1", 1.5),
        _captured("request", 9, "1-algo-1", None),
    ):
        write_capture(profiler_output, capture)
    spike = SpikeRecord(
        "LossSpike", "worker_0", 7, ModeKeys.TRAIN, 7, 9.5, 1.0, 0.1, 85.0, "skip", 1.0
    )
    write_spikes(str(layout_dir / "debug-output"), "worker_0", [spike])
    page = JobPage(jobs, jobs.store, closing=lambda: False)

    summary, _ = page.summary("with-accuracy")
    assert [(mark["step"], mark["kind"], mark["label"]) for mark in summary["marks"]] == [
        (4, "capture", "capture"),
        (7, "spike", "LossSpike spike"),
        (9, "capture", "capture"),
    ]
    assert summary["marks"][0]["text"] == "Capture (slow step) on 1-algo-1: planted"
    assert "the update was skipped" in summary["marks"][1]["text"]
    [slow] = page.profile("with-accuracy")["slowSteps"]  # a request is not a slow step
    assert slow == {
        "node": "1-algo-1",
        "mode": "TRAIN",
        "step": 4,
        "durationMs": pytest.approx(1500.0),
        "medianMs": pytest.approx(100.0),
        "thresholdMs": pytest.approx(300.0),
    }
    assert page.summary("loss-only")[0]["marks"] == []
