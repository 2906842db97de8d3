"""A job's page: its status and rules, its scalars by step, its step durations and system
metrics, its reports, and the two actions (stop it, profile its next steps), which go through
the control plane.

``JobPage``'s data methods (``summary``, ``scalars``, ``profile``, ``report_file``, ``stop``,
``profile_steps``) take a job's name and plain values and return JSON-ready data, raising
``Refused``; its handlers read the request, call one in a worker thread and answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from trainprobe.jobs.operations.control import profile_training_job, stop_training_job
from trainprobe.jobs.store import JobStore
from trainprobe.ui.event_stream import StreamRefused, event_stream
from trainprobe.ui.pages.base import (
    JobViews,
    Refused,
    in_thread,
    json_body,
    json_response,
    page_response,
    step_number,
)

__all__ = ["REPORT_POLICY", "JobPage"]

REPORT_POLICY = (
    "sandbox allow-scripts; default-src 'none'; "
    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:"
)
"""A report runs its own inline scripts: in a sandbox, with no access to the UI."""


class JobPage:
    """The job page's routes over ``jobs``; ``store`` is where its actions go, ``closing``
    says when the server shuts down (its event stream ends)."""

    def __init__(self, jobs: JobViews, store: JobStore, closing: Callable[[], bool]) -> None:
        self.jobs = jobs
        self.store = store
        self.closing = closing

    def routes(self) -> list[Route]:
        return [
            Route("/jobs/{name}", self.page),
            Route("/jobs/{name}/report/{kind}", self.report),
            Route("/api/events/jobs/{name}", self.events),
            Route("/api/jobs/{name}", self.get_summary),
            Route("/api/jobs/{name}/scalars", self.get_scalars),
            Route("/api/jobs/{name}/profile", self.get_profile),
            Route("/api/jobs/{name}/stop", self.post_stop, methods=["POST"]),
            Route("/api/jobs/{name}/profile-steps", self.post_profile_steps, methods=["POST"]),
        ]

    # ----- the data -----------------------------------------------------------------------

    def summary(self, name: str) -> tuple[dict[str, Any], bool]:
        """Job ``name``'s header (a finished job's steps/s: its mean, ``JobView.mean_rate``),
        rules and marks (``JobView.marks``), and whether it has settled (its training and
        runner done: its events can slow down)."""
        record = self.jobs.record(name)
        settled = record.finished and record.runner_done
        view = self.jobs.view(record)
        found = view.summary(record)
        if record.finished:
            found["stepsPerSecond"] = view.mean_rate(record)
        found["marks"] = [mark.to_json() for mark in view.marks(found["rules"])]
        return found, settled

    def scalars(
        self, name: str, lo: float | None, hi: float | None, tensor: str | None
    ) -> list[dict[str, Any]]:
        """A chart of each scalar within steps ``[lo, hi]``; only ``tensor``'s when given."""
        view = self.jobs.view(self.jobs.record(name))
        if tensor is None:
            return view.scalars(lo, hi)
        if tensor not in view.scalar_names():
            raise Refused(404, f"the job saved no scalar named {tensor!r}")
        return [view.scalar_chart(tensor, lo, hi)]  # one chart zoomed

    def profile(self, name: str) -> dict[str, Any]:
        """Job ``name``'s step durations, system usage and step times."""
        record = self.jobs.record(name)
        return self.jobs.view(record).profile(record)

    def report_file(self, name: str, kind: str) -> str:
        """The path of job ``name``'s report ``kind``; Refused (404) when it has none yet."""
        found = self.jobs.view(self.jobs.record(name)).report_files().get(kind)
        if found is None:
            raise Refused(404, f"the job has no {kind} report (yet)")
        return found

    def stop(self, name: str) -> None:
        """StopTrainingJob for job ``name``."""
        record = self.jobs.record(name)
        stop_training_job({"TrainingJobName": record.name}, store=self.store)

    def profile_steps(self, name: str, steps: object) -> None:
        """Ask job ``name``'s flight recorder to profile its next ``steps`` steps."""
        record = self.jobs.record(name)
        request = {"TrainingJobName": record.name, "Steps": steps}
        profile_training_job(request, store=self.store, requested_by="the web UI")

    # ----- the handlers -------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        name = request.path_params["name"]
        await in_thread(lambda: self.jobs.record(name))
        return page_response("job")

    async def get_summary(self, request: Request) -> Response:
        found, _ = await in_thread(lambda: self.summary(request.path_params["name"]))
        return json_response(found)

    async def events(self, request: Request) -> Response:
        name = request.path_params["name"]
        await in_thread(lambda: self.jobs.record(name))

        def read() -> tuple[dict[str, Any], bool]:
            try:
                return self.summary(name)
            except Refused as refusal:
                raise StreamRefused(str(refusal)) from None

        return event_stream(request, "job", read, self.closing)

    async def get_scalars(self, request: Request) -> Response:
        name = request.path_params["name"]
        lo, hi = step_number(request, "from"), step_number(request, "to")
        tensor = request.query_params.get("tensor")
        return json_response(await in_thread(lambda: self.scalars(name, lo, hi, tensor)))

    async def get_profile(self, request: Request) -> Response:
        return json_response(await in_thread(lambda: self.profile(request.path_params["name"])))

    async def report(self, request: Request) -> Response:
        name, kind = request.path_params["name"], request.path_params["kind"]
        path = await in_thread(lambda: self.report_file(name, kind))
        return FileResponse(
            path,
            media_type="text/html; charset=utf-8",
            headers={"Content-Security-Policy": REPORT_POLICY, "Cache-Control": "no-store"},
        )

    async def post_stop(self, request: Request) -> Response:
        await json_body(request)
        await in_thread(lambda: self.stop(request.path_params["name"]))
        return json_response({"stopping": True})

    async def post_profile_steps(self, request: Request) -> Response:
        steps = (await json_body(request)).get("steps")
        await in_thread(lambda: self.profile_steps(request.path_params["name"], steps))
        return json_response({"steps": steps})
