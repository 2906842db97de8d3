"""What every page of the web UI shares: the jobs it reads, a refusal, JSON answers, the page
itself, and reading in a worker thread.

``JobViews`` is the store and a ``JobView`` of each job a page has looked at; a page's handlers
take it (and whatever else they need) when they are made, never the app. ``Refused`` is an
answer with a status and a message, sent as ``{"error": ...}``. Nothing from a request or a job's
files is ever put into HTML here: a page is a fixed file whose script draws it from JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from starlette.requests import Request
from starlette.responses import Response

from trainprobe.config.errors import ConfigError
from trainprobe.config.training_job import validate_training_job_name
from trainprobe.errors import TrainprobeError
from trainprobe.jobs.runner.liveness import settle
from trainprobe.jobs.store import JobRecord, JobStore
from trainprobe.report.web_assets import Assets
from trainprobe.ui.event_stream import to_json
from trainprobe.ui.job_view import JobView

__all__ = [
    "ASSETS",
    "PAGES",
    "SCALARS_DIR",
    "JobViews",
    "Refused",
    "in_thread",
    "json_body",
    "json_response",
    "page_response",
    "step_number",
]

SCALARS_DIR = "ui-scalars"
"""Beside the job store: where the UI keeps the scalars it has read of each job, so that a job
read once opens at once the next time (``analysis.scalar_series``)."""

PAGES = frozenset({"jobs", "job", "tensors", "compare"})
"""The pages: one HTML file, which loads the script of its ``data-page``."""
ASSETS = Assets("trainprobe.ui")
"""The UI's page, scripts and style (``ui/assets``), and plotly.js."""

_LARGEST_BODY = 4096
_T = TypeVar("_T")


class Refused(TrainprobeError):
    """A request the UI answers with ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class JobViews:
    """The store, and a ``JobView`` for each job a page has looked at."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.scalars_root = os.path.join(os.path.dirname(store.path), SCALARS_DIR)
        self._views: dict[str, JobView] = {}

    def record(self, name: str) -> JobRecord:
        """Job ``name``'s record, brought up to date; Refused when the name is not a job's
        name (400) or there is no such job (404)."""
        try:
            name = validate_training_job_name(name)
        except ConfigError as error:
            raise Refused(400, str(error)) from None
        record = self.store.get(name)
        if record is None:
            raise Refused(404, f"there is no job named {name!r} in {self.store.path}")
        return settle(self.store, record)

    def view(self, record: JobRecord) -> JobView:
        """The ``JobView`` of ``record``'s job, made on the first look."""
        view = self._views.get(record.name)
        if view is None:
            view = self._views[record.name] = JobView(record, self.scalars_root)
        return view


async def in_thread(read: Callable[[], _T]) -> _T:
    """``read()`` in a worker thread: a slow disk never holds up the event loop."""
    return await anyio.to_thread.run_sync(read)


def json_response(value: Any, status: int = 200) -> Response:
    """``value`` as JSON (NaN as null), never cached."""
    return Response(
        to_json(value),
        status_code=status,
        media_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def page_response(kind: str) -> Response:
    """The page ``kind`` (one of ``PAGES``): the one HTML file, told which page it is."""
    assert kind in PAGES
    html = ASSETS.text("page.html").replace("{page}", kind)  # a fixed word, never a request's
    return Response(html, media_type="text/html; charset=utf-8")


def step_number(request: Request, key: str) -> float | None:
    """Query parameter ``key`` as a step number, None when absent; Refused (400) when it is not
    a number."""
    text = request.query_params.get(key)
    if text in (None, ""):
        return None
    try:
        return float(text)
    except ValueError:
        raise Refused(400, f"{key}={text!r} is not a step number") from None


async def json_body(request: Request) -> dict[str, Any]:
    """The request's body, a JSON object of at most a few kilobytes; Refused when it is not."""
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > _LARGEST_BODY:
            raise Refused(413, f"the request's body is over {_LARGEST_BODY} bytes")
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        raise Refused(400, "the request's body is not JSON") from None
    if not isinstance(body, dict):
        raise Refused(400, "the request's body is not a JSON object")
    return body
