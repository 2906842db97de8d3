"""The jobs page: every job of the store, newest first, kept live by server-sent events.

``JobRows`` makes the rows (a finished job's row is read again only when its record changes);
``JobsPage`` serves the page, the rows as JSON and their stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from trainprobe.jobs.runner.liveness import settle
from trainprobe.ui.event_stream import event_stream
from trainprobe.ui.pages.base import JobViews, in_thread, json_response, page_response

__all__ = ["ROW_KEYS", "JobRows", "JobsPage"]

ROW_KEYS = (
    "name",
    "status",
    "secondaryStatus",
    "created",
    "started",
    "ended",
    "step",
    "stepsPerSecond",
    "framework",
    "issues",
)
"""What the jobs page shows of a job: these keys of the job's summary."""


class JobRows:
    """Every job as the jobs page shows it, newest first."""

    def __init__(self, jobs: JobViews) -> None:
        self.jobs = jobs
        self._rows: dict[str, tuple[float, dict[str, Any]]] = {}

    def __call__(self) -> list[dict[str, Any]]:
        """The rows now; a finished job's row is read again only when its record changes."""
        store, rows = self.jobs.store, []
        for record in store.query(descending=True):
            kept = self._rows.get(record.name)
            if kept is not None and kept[0] == record.last_modified_time and record.runner_done:
                rows.append(kept[1])
                continue
            record = settle(store, record)
            summary = self.jobs.view(record).summary(record)
            row = {key: summary[key] for key in ROW_KEYS}
            self._rows[record.name] = (record.last_modified_time, row)
            rows.append(row)
        return rows


class JobsPage:
    """The jobs page's routes: the page, ``/api/jobs`` and its event stream."""

    def __init__(self, rows: JobRows, closing: Callable[[], bool]) -> None:
        self.rows = rows
        self.closing = closing

    def routes(self) -> list[Route]:
        return [
            Route("/", self.page),
            Route("/api/jobs", self.job_list),
            Route("/api/events/jobs", self.job_list_events),
        ]

    async def page(self, request: Request) -> Response:
        return page_response("jobs")

    async def job_list(self, request: Request) -> Response:
        return json_response(await in_thread(self.rows))

    async def job_list_events(self, request: Request) -> Response:
        return event_stream(request, "jobs", lambda: (self.rows(), False), self.closing)
