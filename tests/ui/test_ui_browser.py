"""``trainprobe ui`` in real headless Chromium, following a real training started by
``trainprobe run``: the job appears and its step rises on the jobs page, its page follows the step
and a rule's verdict without a reload, its tensors show their reductions and distribution, and
its buttons profile the next steps and stop it. No page logs an error or asks for anything but
the UI's own address. Screenshots are kept in .cache/test-artifacts/ for a person to look at.

One training serves the whole module: its loss turns NaN at step 250, so ExplodingTensor is in
progress when the job page opens and finds the issue while it is watched. Another, finished,
has a data loader that stalls once and one bad batch: its page marks the flight recorder's
capture of the slow step and the loss spike, counts slow steps as the recorder did, never lets
two labels overlap, and shows the training's mean steps/s, the report's figure. A third, at
SageMaker's save interval, charts the loss of every step from the hook's record.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ui_process import UiProcess, environment, trainprobe_ui, wait_until

from browser import CHROMIUM_FLAGS, chromium_path
from trainprobe.jobs import JobStore
from trainprobe.jobs.operations.describe import layout_of
from trainprobe.report.job_files import JobFiles
from trainprobe.storage.flight_captures import list_captures
from trainprobe.storage.spike_records import read_spikes

pytestmark = pytest.mark.slow

TRAINING = Path(__file__).resolve().parents[1] / "jobs" / "plain_training.py"
MARKED_TRAINING = Path(__file__).with_name("marked_training.py")
ARTIFACTS = Path(__file__).resolve().parents[2] / ".cache" / "test-artifacts"
JOB = "ui-live"
NAN_AT = 250


@dataclass
class Browser:
    """One Chromium page, and what it did: errors logged, addresses asked for."""

    page: Any
    ui: UiProcess
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"ui-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def see(self, chart: str) -> None:
        """Scroll ``chart`` into view (charts are drawn when seen) and wait for it drawn."""
        self.page.locator(chart).first.scroll_into_view_if_needed()
        self.page.wait_for_selector(f"{chart}[data-drawn]")

    def text(self, selector: str) -> str:
        return str(self.page.locator(selector).inner_text())

    def layout(self, chart: str, key: str) -> Any:
        """``layout[key]`` of the plotly chart ``chart`` (an element's id)."""
        return self.page.evaluate(f"document.getElementById({chart!r}).layout[{key!r}]")

    def labels(self, chart: str) -> list[str]:
        return [
            str(text)
            for text in self.page.locator(f"#{chart} .annotation-text").all_text_contents()
        ]

    def assert_labels_apart(self, chart: str) -> None:
        """No two labels of ``chart`` overlap, as Chromium laid them out."""
        boxes = [
            box
            for box in (
                item.bounding_box() for item in self.page.locator(f"#{chart} .annotation").all()
            )
            if box is not None
        ]
        for index, one in enumerate(boxes):
            for other in boxes[index + 1 :]:
                apart = (
                    one["x"] + one["width"] <= other["x"]
                    or other["x"] + other["width"] <= one["x"]
                    or one["y"] + one["height"] <= other["y"]
                    or other["y"] + other["height"] <= one["y"]
                )
                assert apart, (chart, one, other, self.labels(chart))

    def assert_clean(self) -> None:
        assert self.errors == []
        assert [url for url in self.requests if not url.startswith(self.ui.origin + "/")] == []


@dataclass
class Training:
    process: subprocess.Popen[str]
    log: Path


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiProcess]:
    with trainprobe_ui(tmp_path_factory.mktemp("ui-browser")) as process:
        yield process


@pytest.fixture(scope="module")
def training(ui: UiProcess) -> Iterator[Training]:
    """``trainprobe run`` of a training long enough to watch (it is stopped from the UI)."""
    log = ui.home / "run.log"
    with open(log, "w") as output:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "trainprobe.cli.main", "run", str(TRAINING),
                "--rule", "ExplodingTensor", "--collection", "weights",
                "--save-interval", "1", "--plain", "--quiet",
                "--output", str(ui.home / "out"), "--name", JOB,
                "--", "--steps", "5000", "--sleep", "0.02", "--nan-at", str(NAN_AT),
            ],
            env=environment(ui.home),
            cwd=ui.home,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
    yield Training(process, log)
    if process.poll() is None:
        process.terminate()  # trainprobe run stops the job on SIGINT/SIGTERM
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def browser(ui: UiProcess) -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True
        )
        try:
            page = chromium.new_context(viewport={"width": 1400, "height": 900}).new_page()
            page.set_default_timeout(120_000)
            seen = Browser(page, ui)
            page.on(
                "console",
                lambda message: message.type == "error" and seen.errors.append(message.text),
            )
            page.on("pageerror", lambda error: seen.errors.append(str(error)))
            page.on("request", lambda request: seen.requests.append(request.url))
            page.on("dialog", lambda dialog: dialog.accept())
            yield seen
        finally:
            chromium.close()


_LABEL = r"[\w ]+ \d+(, \d+)*( \+\d+)?( · [\w ]+ \d+(, \d+)*( \+\d+)?)*"
"""A chart's label: what it marks and at which steps, several joined by a dot."""


def _number(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def test_the_jobs_page_shows_a_new_job_and_its_step_rising(
    browser: Browser, request: pytest.FixtureRequest
) -> None:
    page = browser.page
    page.goto(browser.ui.url)
    page.wait_for_selector("body[data-jobs]")
    assert page.url == browser.ui.origin + "/"  # the token went into the cookie
    assert page.locator("tr[data-job]").count() == 0

    request.getfixturevalue("training")  # trainprobe run starts, the page open
    row = f'tr[data-job="{JOB}"]'
    page.wait_for_selector(row)  # the job appeared without a reload
    first = wait_until(lambda: _number(browser.text(f"{row} .step")), "a first step")
    wait_until(lambda: (_number(browser.text(f"{row} .step")) or 0) > first, "the step to rise")
    assert "InProgress" in browser.text(row) and "PyTorch" in browser.text(row)
    page.fill('input[type="search"]', "no-such-job")
    assert page.locator(row).count() == 0
    page.fill('input[type="search"]', JOB[:4])
    assert page.locator(row).count() == 1
    browser.screenshot("jobs")
    browser.assert_clean()


def test_the_job_page_follows_the_step_and_a_rules_verdict_live(
    browser: Browser, training: Training
) -> None:
    page = browser.page
    page.click(f'tr[data-job="{JOB}"] a')
    card = '[data-rule="ExplodingTensor"]'
    page.wait_for_selector(f"{card} .status-InProgress")
    first = wait_until(lambda: _number(browser.text("#step")), "the job page's step")
    assert first < NAN_AT, "the rule would have found its issue before the page opened"
    page.wait_for_selector("#scalar-0[data-drawn]")  # the loss by step
    page.wait_for_selector(f"{card} .status-IssuesFound")  # the same page, never reloaded
    assert (_number(browser.text("#step")) or 0) > first
    evidence = browser.text(card)
    assert "Issue at TRAIN step" in evidence and "nan" in evidence.lower()
    # The rule's finding is marked on the loss chart, at its step.
    issue = wait_until(
        lambda: [label for label in browser.labels("scalar-0") if "ExplodingTensor" in label],
        "the finding marked on the loss chart",
    )
    found = re.search(r"ExplodingTensor (\d+)", issue[0])
    assert found and int(found[1]) in [
        shape["x0"] for shape in browser.layout("scalar-0", "shapes")
    ]
    browser.see("#step-durations .chart")
    browser.see("#system .chart")
    labels = browser.labels("system-0")  # steps on the time axis, and the job's marks
    assert labels and labels[0].startswith("step ")
    assert all(re.fullmatch(_LABEL, label) for label in labels), labels
    browser.assert_labels_apart("system-0")
    assert page.locator("#scalar-0 .scatterlayer .trace").count() >= 1
    browser.screenshot("job")
    browser.assert_clean()

    # Dragging across the loss chart zooms in; the chart is bucketed again for that range.
    page.locator("#scalar-0").scroll_into_view_if_needed()
    plot = page.locator("#scalar-0 .nsewdrag").bounding_box()
    assert plot is not None
    middle = plot["y"] + plot["height"] / 2
    page.mouse.move(plot["x"] + plot["width"] * 0.2, middle)
    page.mouse.down()
    page.mouse.move(plot["x"] + plot["width"] * 0.4, middle, steps=5)
    page.mouse.up()
    page.wait_for_selector("#scalar-0[data-zoomed]")
    wait_until(
        lambda: any("/scalars?tensor=" in url and "&from=" in url for url in browser.requests),
        "the zoomed range's request",
    )
    browser.assert_clean()


def test_a_tensor_shows_its_reductions_and_distribution_over_steps(
    browser: Browser, training: Training
) -> None:
    page = browser.page
    page.goto(f"{browser.ui.origin}/jobs/{JOB}/tensors")
    name = "Sequential_0.weight"  # the first layer's weights, saved at every step
    page.click(f'[data-tensor="{name}"]')

    page.wait_for_selector("#reductions[data-drawn]")
    page.wait_for_selector("#distribution[data-drawn]")
    assert browser.text("#tensor-title") == name
    assert page.locator("#reductions .scatterlayer .trace").count() >= 3
    assert page.locator("#distribution .hm image, #distribution image").count() >= 1
    page.wait_for_selector("#value table.matrix td")
    assert "shape [" in browser.text("#value")
    for tensor in ("Sequential_0.weight", "Sequential_2.weight"):  # both on one chart
        page.check(f'input[aria-label="draw {tensor}"]')
    page.wait_for_selector('#overlay[data-drawn="2"]')
    legend = page.locator("#overlay .legendtext").all_text_contents()
    assert {"Sequential_0.weight TRAIN", "Sequential_2.weight TRAIN"} <= set(legend)
    browser.screenshot("tensors")
    browser.assert_clean()

    # A name made up by a request is looked up among the trial's tensors, never followed.
    status, _, body = browser.ui.request(
        "GET", f"/api/jobs/{JOB}/tensor?name=..%2F..%2Fjobs.sqlite"
    )
    assert status == 404 and b"saved no tensor" in body


def test_profile_the_next_steps_then_stop_the_job_from_its_page(
    browser: Browser, training: Training
) -> None:
    page = browser.page
    page.goto(f"{browser.ui.origin}/jobs/{JOB}")
    page.wait_for_selector("#status .status-InProgress")
    page.fill("#profile-steps", "3")
    page.click("#profile")
    page.wait_for_selector("#action-message:has-text('profiles the next 3 steps')")
    # The job's flight recorder got the request: a capture of the next 3 steps appears.
    record = JobStore(browser.ui.home / "jobs.sqlite").get(JOB)
    assert record is not None
    profiler_output = layout_of(record).profiler_output
    [capture] = wait_until(
        lambda: [c for c in list_captures(profiler_output) if c.trigger == "request"],
        "a capture of the requested steps",
    )
    assert len(capture.steps) == 3

    page.click("#stop")
    page.wait_for_selector("#status .status-Stopped")  # Stopping, then Stopped, live
    assert training.process.wait(timeout=120) is not None
    assert "job page: http://127.0.0.1:" in training.log.read_text()
    browser.screenshot("job-stopped")
    browser.assert_clean()


def _trainprobe_run(
    ui: UiProcess,
    name: str,
    script: Path,
    *arguments: str,
    rules: tuple[str, ...] = (),
    options: tuple[str, ...] = (),
) -> None:
    subprocess.run(
        [
            sys.executable, "-m", "trainprobe.cli.main", "run", str(script), "--plain",
            "--quiet", "--save-interval", "1", "--output", str(ui.home / "out"), "--name", name,
            *(word for rule in rules for word in ("--rule", rule)), *options, "--", *arguments,
        ],
        env=environment(ui.home),
        cwd=ui.home,
        capture_output=True,
        timeout=300,
    )  # fmt: skip


def test_compare_draws_two_jobs_losses_on_one_chart(browser: Browser, training: Training) -> None:
    _trainprobe_run(browser.ui, "ui-short", TRAINING, "--steps", "30", "--lr", "0.2")
    page = browser.page
    page.goto(f"{browser.ui.origin}/compare?job={JOB}&job=ui-short")

    page.wait_for_selector("#compare-chart[data-drawn]")
    names = page.locator("#compare-chart .legendtext").all_text_contents()
    assert any(JOB in name for name in names) and any("ui-short" in name for name in names)
    # A loss is compared: every step's, from the hooks' records, once the live job's record has
    # reached its files, else the saved one; the saved loss is always offered.
    chosen = page.locator("#compare-tensor").input_value()
    assert chosen in ("trainprobe/loss", "CrossEntropyLoss_output_0")
    offered = page.locator("#compare-tensor option").all_text_contents()
    assert "CrossEntropyLoss_output_0" in offered and chosen in offered
    browser.screenshot("compare")
    browser.assert_clean()

    # A finished job's page embeds its profiler report, which draws its plots in a sandbox.
    page.goto(f"{browser.ui.origin}/jobs/ui-short")
    page.locator('iframe[data-report="profiler"]').scroll_into_view_if_needed()
    report = page.frame_locator('iframe[data-report="profiler"]')
    report.locator("body[data-plots-drawn]").wait_for(state="attached")
    assert "Step durations" in report.locator("body").inner_text()
    browser.assert_clean()

    # Zooming asks for a range of steps, bucketed again from every step in it.
    whole = browser.ui.get_json(f"/api/jobs/{JOB}/scalars")[0]["series"][0]
    loss = "CrossEntropyLoss_output_0"
    part = browser.ui.get_json(f"/api/jobs/{JOB}/scalars?tensor={loss}&from=10&to=40")
    part = part[0]["series"][0]
    assert part["points"] == 31 < whole["points"]
    assert part["x"][0] == 10 and part["x"][-1] == 40


def test_html_in_a_jobs_files_is_shown_as_text(browser: Browser, training: Training) -> None:
    _trainprobe_run(browser.ui, "ui-html", Path(__file__).with_name("html_failure_training.py"))
    page = browser.page
    page.goto(f"{browser.ui.origin}/jobs/ui-html")

    page.wait_for_selector("#status .status-Failed")
    banner = browser.text(".banner")
    assert "<img src=x onerror=" in banner and "<b>bold</b>" in banner
    assert page.locator("main img, main b").count() == 0
    assert page.title() == "trainprobe"
    browser.assert_clean()


def test_an_xgboost_jobs_page_shows_its_metrics_and_embeds_its_report(
    browser: Browser, training: Training
) -> None:
    script = Path(__file__).resolve().parents[1] / "capture" / "xgboost_training.py"
    _trainprobe_run(
        browser.ui, "ui-xgboost", script, "--rounds", "8", rules=("CreateXgboostReport",)
    )
    page = browser.page
    page.goto(f"{browser.ui.origin}/jobs/ui-xgboost")

    page.wait_for_selector("#status .status-Completed")
    assert "XGBoost" in browser.text(".facts")
    browser.see("#scalar-0")  # its evaluation metrics by round
    assert "-" in str(page.locator("#scalar-0").get_attribute("data-tensor"))
    page.locator('iframe[data-report="xgboost"]').scroll_into_view_if_needed()
    report = page.frame_locator('iframe[data-report="xgboost"]')
    report.locator("body[data-plots-drawn]").wait_for(state="attached")
    browser.screenshot("xgboost-job")
    browser.assert_clean()


def test_a_finished_jobs_page_marks_its_slow_step_and_spike_and_agrees_with_its_report(
    browser: Browser, training: Training
) -> None:
    _trainprobe_run(
        browser.ui, "ui-marked", MARKED_TRAINING,
        *("--steps", "120", "--stall-at", "16", "--stall", "1.5", "--bad-batch-at", "90"),
        rules=("LossSpike",), options=("--on-spike", "skip"),
    )  # fmt: skip
    record = JobStore(browser.ui.home / "jobs.sqlite").get("ui-marked")
    assert record is not None
    layout = layout_of(record)
    captures = list_captures(layout.profiler_output)
    slow = [c.slow_step for c in captures if c.trigger == "slow_step" and c.slow_step is not None]
    # The data loader's stall before step 16 lengthens step 15, the first the recorder judges
    # (after 5 warm-up steps and 10 for its median): no capture before it can hide it.
    [stalled] = [step.step for step in slow if step.duration_s > 1.4]
    assert stalled == 15
    [spike] = read_spikes(layout.debug_output)
    page = browser.page
    page.goto(browser.ui.url)  # the token, as the URL trainprobe ui printed gives it
    page.goto(f"{browser.ui.origin}/jobs/ui-marked")
    page.wait_for_selector("#status .status-Completed")

    # The step-duration chart counts the slow steps the flight recorder captured, and marks
    # each capture; the stalled step is among them.
    browser.see("#steps-0")
    title = str(page.locator("#steps-0 .gtitle").text_content())
    said = f"{len(slow)} slow step{'' if len(slow) == 1 else 's'} captured"
    assert title.endswith(f"120 steps, {said}"), title
    [dots] = page.evaluate(
        "document.getElementById('steps-0').data"
        ".filter((trace) => trace.name === 'slow steps (flight recorder)').map((trace) => trace.x)"
    )
    assert sorted(dots) == sorted(step.step for step in slow) and stalled in dots
    marked = [shape["x0"] for shape in browser.layout("steps-0", "shapes")]
    assert sorted(marked) == sorted([c.trigger_step for c in captures] + [spike.step])
    assert any("capture" in label for label in browser.labels("steps-0"))

    # The loss chart (every step saved) marks the spike, at the step the rule saw it.
    browser.see("#scalar-0")
    assert spike.step in [shape["x0"] for shape in browser.layout("scalar-0", "shapes")]
    assert any("LossSpike spike" in label for label in browser.labels("scalar-0"))
    for chart in ("scalar-0", "steps-0", "system-0"):
        browser.see(f"#{chart}")
        assert all(re.fullmatch(_LABEL, label) for label in browser.labels(chart))
        browser.assert_labels_apart(chart)

    # A finished job shows its mean steps/s: the report's throughput.
    assert "Mean steps/s" in browser.text(".facts")
    report = JobFiles.find(str(layout.job_dir))
    content = json.loads(Path(report.report_dir(), "profiler-report.json").read_text())
    assert float(browser.text("#rate")) == pytest.approx(content["Job"]["StepsPerSecond"], abs=0.06)
    browser.screenshot("job-marked")
    browser.assert_clean()


def test_nearby_marks_share_one_label_and_labels_never_overlap(browser: Browser) -> None:
    page = browser.page
    page.goto(browser.ui.url)
    page.goto(f"{browser.ui.origin}/compare")
    grouped = page.evaluate(
        """async () => {
          const { groupMarks } = await import("/static/marks.js");
          const mark = (kind, step) => ({ x: step, step, kind, label: kind, text: "" });
          const tick = (step) => ({ ...mark("step", step), label: "step" });
          const crowded = [];
          for (let step = 0; step < 150; step += 1) {  // a crowd at each end
            if (step >= 20 && step < 125) continue;
            crowded.push(step % 3 ? tick(step) : mark("capture", step));
          }
          const texts = (groups) => groups.map((group) => group.text);
          return {
            pair: texts(groupMarks([tick(59), tick(66)], [0, 150], 500)),
            apart: texts(groupMarks([tick(10), tick(140)], [0, 150], 500)),
            crowded: groupMarks(crowded, [0, 150], 500).map((g) => [g.start, g.end, g.text]),
          };
        }"""
    )
    assert grouped["pair"] == ["step 59, 66"]  # as "step 59 66" overlapped on the job page
    assert grouped["apart"] == ["step 10", "step 140"]
    spans = grouped["crowded"]
    assert len(spans) == 2 and all(start >= 0 and end <= 500 for start, end, _ in spans)
    assert all(spans[i][1] < spans[i + 1][0] for i in range(len(spans) - 1))
    assert all(re.fullmatch(_LABEL, text) for _, _, text in spans)
    browser.assert_clean()


def test_a_default_jobs_page_charts_the_loss_of_every_step_and_marks_its_capture(
    browser: Browser,
) -> None:
    # SageMaker's save interval (500 steps) saves the loss of step 0 alone; the hook's record
    # of every TRAIN step is what the page charts first.
    _trainprobe_run(
        browser.ui, "ui-default", MARKED_TRAINING,
        *("--steps", "150", "--stall-at", "40", "--stall", "1.5"),
        options=("--save-interval", "500"),
    )  # fmt: skip
    record = JobStore(browser.ui.home / "jobs.sqlite").get("ui-default")
    assert record is not None
    captures = list_captures(layout_of(record).profiler_output)
    assert captures, "the stalled step was captured"
    page = browser.page
    page.goto(browser.ui.url)
    page.goto(f"{browser.ui.origin}/jobs/ui-default")
    page.wait_for_selector("#status .status-Completed")

    browser.see("#scalar-0")
    assert page.locator("#scalar-0").get_attribute("data-tensor") == "trainprobe/loss"
    steps = page.evaluate(
        "document.getElementById('scalar-0').data.filter((trace) => trace.mode !== 'markers')"
        ".flatMap((trace) => Array.from(trace.x))"
    )
    assert sorted(set(steps)) == list(range(150))
    marked = [shape["x0"] for shape in browser.layout("scalar-0", "shapes")]
    assert {capture.trigger_step for capture in captures} <= set(marked)
    browser.screenshot("job-default")
    browser.assert_clean()
