"""``trainprobe ui`` refuses, over plain HTTP, every request that is not its own user's: no
token, a wrong token, a foreign Host, a state change sent from another site or without the CSRF
token, and names that try to leave the store or carry HTML. The job it is asked to stop is a
record of the real job store, in progress, with no runner."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from job_records import job_in_progress
from ui_process import UiProcess, environment, trainprobe_ui

from trainprobe.jobs import JobStore

JOB = "refusal-job"


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiProcess]:
    home = tmp_path_factory.mktemp("ui-refusals")
    JobStore(home / "jobs.sqlite").insert(job_in_progress(JOB, home / "out" / JOB))
    with trainprobe_ui(home) as process:
        yield process


def _status(ui: UiProcess) -> str:
    record = JobStore(ui.home / "jobs.sqlite").get(JOB)
    assert record is not None
    return record.status


@pytest.mark.parametrize(
    "path",
    ["/", f"/jobs/{JOB}", "/api/jobs", "/api/events/jobs", f"/api/jobs/{JOB}", "/static/job.js"],
)
def test_every_route_refuses_a_request_without_the_token(ui: UiProcess, path: str) -> None:
    status, _, body = ui.request("GET", path, cookie=False)

    assert status == 403
    assert "open the URL trainprobe ui printed" in json.loads(body)["error"]
    assert JOB not in body.decode()


def test_a_wrong_token_is_refused_in_the_url_and_in_the_cookie(ui: UiProcess) -> None:
    status, headers, _ = ui.request("GET", "/?token=not-the-token", cookie=False)
    assert status == 403
    assert "set-cookie" not in headers

    status, _, body = ui.request(
        "GET", "/api/jobs", cookie=False, headers={"Cookie": f"trainprobe-ui-{ui.port}=nope"}
    )
    assert status == 403
    assert JOB not in body.decode()


def test_the_token_in_the_url_becomes_an_http_only_strict_cookie(ui: UiProcess) -> None:
    status, headers, _ = ui.request("GET", f"/jobs/{JOB}?token={ui.token}&x=1", cookie=False)

    assert status == 303
    assert headers["location"] == f"/jobs/{JOB}?x=1"  # the token leaves the address bar
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"trainprobe-ui-{ui.port}={ui.token};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie

    status, headers, body = ui.request("GET", "/api/jobs")
    assert status == 200
    assert [row["name"] for row in json.loads(body)] == [JOB]
    assert "default-src 'none'" in headers["content-security-policy"]


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", ""])
def test_a_foreign_host_is_refused_even_with_the_token(ui: UiProcess, host: str) -> None:
    status, _, body = ui.request("GET", "/api/jobs", headers={"Host": host.format(port=ui.port)})

    assert status == 403
    assert "answers only to its own address" in json.loads(body)["error"]
    assert JOB not in body.decode()


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"X-Trainprobe-Csrf": "wrong"},
        {},
    ],
    ids=["foreign-origin", "cross-site", "same-site", "wrong-csrf", "no-csrf"],
)
def test_a_cross_site_or_unchecked_post_changes_nothing(
    ui: UiProcess, headers: dict[str, str]
) -> None:
    if "X-Trainprobe-Csrf" not in headers and headers:
        headers = {**headers, "X-Trainprobe-Csrf": ui.csrf()}  # even with the right token
    status, _, body = ui.request("POST", f"/api/jobs/{JOB}/stop", headers=headers, body=b"{}")

    assert status == 403, body
    assert _status(ui) == "InProgress"


def test_a_state_change_is_a_post(ui: UiProcess) -> None:
    status, _, _ = ui.request("GET", f"/api/jobs/{JOB}/stop")
    assert status == 405
    status, _, _ = ui.request("PUT", f"/api/jobs/{JOB}/stop", body=b"{}")
    assert status == 405
    assert _status(ui) == "InProgress"


def test_profiling_steps_outside_the_allowed_range_is_refused_by_name(ui: UiProcess) -> None:
    headers = {"X-Trainprobe-Csrf": ui.csrf(), "Origin": ui.origin}
    status, _, body = ui.request(
        "POST", f"/api/jobs/{JOB}/profile-steps", headers=headers, body=b'{"steps": 0}'
    )

    assert status == 400
    assert (
        json.loads(body)["error"] == "Steps: 0 is not valid; a whole number of steps from 1 to 20"
    )


@pytest.mark.parametrize(
    "path",
    [
        "/api/jobs/..%2F..%2Fjobs.sqlite",
        "/api/jobs/%2e%2e",
        "/jobs/..%2F..%2F..%2Fetc%2Fpasswd",
        "/static/..%2F..%2Fapp.py",
        "/static/..%2Fassets%2Fjob.js",
        "/api/jobs/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E",
        "/jobs/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E",
        f"/api/jobs/{JOB}/tensor?name=..%2F..%2F..%2Fjobs.sqlite",
        f"/api/jobs/{JOB}/tensor-value?name=%3Cscript%3E&step=0",
    ],
)
def test_names_that_leave_the_store_or_carry_html_are_refused_as_json(
    ui: UiProcess, path: str
) -> None:
    status, headers, body = ui.request("GET", path)

    assert status in (400, 404), (status, body)
    # A name echoed in an error is JSON data, which a browser never renders as a page.
    assert headers["content-type"] == "application/json"
    assert headers["x-content-type-options"] == "nosniff"
    assert json.loads(body)["error"]
    assert b"SQLite format" not in body and b"root:" not in body


def test_stopping_through_the_ui_is_a_stop_training_job_request(ui: UiProcess) -> None:
    headers = {"X-Trainprobe-Csrf": ui.csrf(), "Origin": ui.origin, "Sec-Fetch-Site": "same-origin"}
    status, _, body = ui.request("POST", f"/api/jobs/{JOB}/stop", headers=headers, body=b"{}")

    assert status == 200, body
    assert _status(ui) == "Stopping"
    status, _, body = ui.request(
        "POST", f"/api/jobs/{JOB}/profile-steps", headers=headers, body=b'{"steps": 5}'
    )
    assert status == 409
    assert "the job is Stopping" in json.loads(body)["error"]


def test_a_busy_port_is_an_error_naming_it(ui: UiProcess) -> None:
    started = subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", "ui", "--port", str(ui.port), "--no-browser"],
        env=environment(ui.home),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert started.returncode == 1
    assert started.stderr.startswith(f"trainprobe ui: cannot listen on 127.0.0.1:{ui.port}: ")
    assert ui.get_json("/api/jobs")  # the running UI is untouched
