"""The web UI's routes: four pages, their data as JSON, live updates as server-sent events, and
the two actions (stop a job, profile its next steps), which go through the control plane.

Pages are fixed HTML files that draw themselves from the JSON routes with ``assets/ui.js``;
nothing from a job's files or a request is ever put into HTML on the server, and the script
inserts every name and message as text. A job's name is checked against SageMaker's pattern
before the store is asked for it; a tensor's name is looked up in the job's trial. Reading runs
in worker threads, so a slow disk never holds up the event loop.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from importlib import resources
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from trainprobe.config.errors import ConfigError
from trainprobe.config.training_job import validate_training_job_name
from trainprobe.jobs.errors import JobStateError
from trainprobe.jobs.operations.control import profile_training_job, stop_training_job
from trainprobe.jobs.runner.liveness import settle
from trainprobe.jobs.store import JobRecord, JobStore
from trainprobe.ui.access import Access, RequireAccess
from trainprobe.ui.event_stream import StreamRefused, event_stream, to_json
from trainprobe.ui.job_view import JobView

__all__ = ["SCALARS_DIR", "ui_app"]

_LARGEST_BODY = 4096
SCALARS_DIR = "ui-scalars"
"""Beside the job store: where the UI keeps the scalars it has read of each job, so that a job
read once opens at once the next time (``analysis.scalar_series``)."""

_PAGES = frozenset({"jobs", "job", "tensors", "compare"})
"""The pages: one HTML file, which ``ui.js`` fills according to its ``data-page``."""
_STATIC = {"ui.css": "text/css", "ui.js": "text/javascript", "plotly.js": "text/javascript"}


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _json(value: Any, status: int = 200) -> Response:
    body = to_json(value)
    return Response(
        body,
        status_code=status,
        media_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def _asset(name: str) -> str:
    return resources.files("trainprobe.ui").joinpath("assets", name).read_text("utf-8")


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs  # large: read once, on the first page

    return str(get_plotlyjs())


class _Jobs:
    """The store, and a ``JobView`` for each job a page has looked at."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.scalars_root = os.path.join(os.path.dirname(store.path), SCALARS_DIR)
        self._views: dict[str, JobView] = {}
        self._rows: dict[str, tuple[float, dict[str, Any]]] = {}

    def record(self, name: str) -> JobRecord:
        try:
            name = validate_training_job_name(name)
        except ConfigError as error:
            raise _Refused(400, str(error)) from None
        record = self.store.get(name)
        if record is None:
            raise _Refused(404, f"there is no job named {name!r} in {self.store.path}")
        return settle(self.store, record)

    def view(self, record: JobRecord) -> JobView:
        view = self._views.get(record.name)
        if view is None:
            view = self._views[record.name] = JobView(record, self.scalars_root)
        return view

    def rows(self) -> list[dict[str, Any]]:
        """Every job as the jobs list shows it, newest first; a finished job's row is read
        again only when its record changes."""
        rows = []
        for record in self.store.query(descending=True):
            kept = self._rows.get(record.name)
            if kept is not None and kept[0] == record.last_modified_time and record.runner_done:
                rows.append(kept[1])
                continue
            record = settle(self.store, record)
            summary = self.view(record).summary(record)
            row = {key: summary[key] for key in _ROW_KEYS}
            self._rows[record.name] = (record.last_modified_time, row)
            rows.append(row)
        return rows


_ROW_KEYS = (
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


def _settled(record: JobRecord) -> bool:
    return record.finished and record.runner_done


def ui_app(
    store: JobStore, access: Access, *, closing: Callable[[], bool] = lambda: False
) -> RequireAccess:
    """The UI's ASGI application over ``store``, let in by ``access``; ``closing`` says when the
    server is shutting down, so that open event streams end."""
    jobs = _Jobs(store)
    plotly: list[str] = []

    async def in_thread(read: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(read)

    def page(kind: str) -> Callable[[Request], Any]:
        assert kind in _PAGES

        async def serve(request: Request) -> Response:
            if "name" in request.path_params:
                await in_thread(lambda: jobs.record(request.path_params["name"]))
            html = _asset("page.html").replace("{page}", kind)  # a fixed word, never a request's
            return Response(html, media_type="text/html; charset=utf-8")

        return serve

    async def static(request: Request) -> Response:
        name = request.path_params["file"]
        if name not in _STATIC:
            raise _Refused(404, "no such file")
        if name == "plotly.js":
            if not plotly:
                plotly.append(await in_thread(_plotly_js))
            text = plotly[0]
        else:
            text = _asset(name)
        return Response(
            text, media_type=_STATIC[name], headers={"Cache-Control": "private, max-age=3600"}
        )

    async def session(request: Request) -> Response:
        return _json({"csrf": access.csrf})

    async def job_list(request: Request) -> Response:
        return _json(await in_thread(jobs.rows))

    def summary_of(name: str) -> tuple[dict[str, Any], bool]:
        record = jobs.record(name)
        return jobs.view(record).summary(record), _settled(record)

    async def job_summary(request: Request) -> Response:
        found, _ = await in_thread(lambda: summary_of(request.path_params["name"]))
        return _json(found)

    def _range(request: Request, key: str) -> float | None:
        text = request.query_params.get(key)
        if text in (None, ""):
            return None
        try:
            return float(text)
        except ValueError:
            raise _Refused(400, f"{key}={text!r} is not a step number") from None

    async def scalars(request: Request) -> Response:
        lo, hi = _range(request, "from"), _range(request, "to")
        tensor = request.query_params.get("tensor")

        def read() -> list[dict[str, Any]]:
            view = jobs.view(jobs.record(request.path_params["name"]))
            if tensor is None:
                return view.scalars(lo, hi)
            if tensor not in view.scalar_names():
                raise _Refused(404, f"the job saved no scalar named {tensor!r}")
            return [view.scalar_chart(tensor, lo, hi)]  # one chart zoomed

        return _json(await in_thread(read))

    async def profile(request: Request) -> Response:
        def read() -> dict[str, Any]:
            record = jobs.record(request.path_params["name"])
            return jobs.view(record).profile(record)

        return _json(await in_thread(read))

    async def tensors(request: Request) -> Response:
        name = request.path_params["name"]
        found = await in_thread(lambda: jobs.view(jobs.record(name)).tensors())
        return _json(found if found is not None else {"tensors": [], "collections": {}})

    def _tensor_name(request: Request) -> str:
        name = request.query_params.get("name")
        if not name:
            raise _Refused(400, "name= is missing: the tensor's name")
        return name

    async def tensor(request: Request) -> Response:
        job, name = request.path_params["name"], _tensor_name(request)
        found = await in_thread(lambda: jobs.view(jobs.record(job)).tensor_history(name))
        if found is None:
            raise _Refused(404, f"job {job!r} saved no tensor named {name!r}")
        return _json(found)

    async def tensor_value(request: Request) -> Response:
        job, name = request.path_params["name"], _tensor_name(request)
        step = _range(request, "step")
        if step is None or step != int(step):
            raise _Refused(400, "step= is missing or not a whole number")
        found = await in_thread(lambda: jobs.view(jobs.record(job)).tensor_at(name, int(step)))
        if found is None:
            raise _Refused(404, f"job {job!r} saved no tensor {name!r} at step {int(step)}")
        return _json(found)

    async def compare(request: Request) -> Response:
        names = request.query_params.getlist("job")[:10]
        wanted = request.query_params.get("tensor")

        def read() -> list[dict[str, Any]]:
            charts: list[dict[str, Any]] = []
            for name in names:
                view = jobs.view(jobs.record(name))
                tensors = view.scalar_names()
                tensor = wanted if wanted is not None else (tensors[0] if tensors else None)
                if tensor is None or tensor not in tensors:
                    charts.append({"job": name, "tensor": tensor, "series": []})
                    continue
                series = view.scalar_chart(tensor)["series"]
                charts.append({"job": name, "tensor": tensor, "tensors": tensors, "series": series})
            return charts

        return _json(await in_thread(read))

    async def _body(request: Request) -> dict[str, Any]:
        data = b""
        async for chunk in request.stream():
            data += chunk
            if len(data) > _LARGEST_BODY:
                raise _Refused(413, f"the request's body is over {_LARGEST_BODY} bytes")
        try:
            body = json.loads(data or b"{}")
        except ValueError:
            raise _Refused(400, "the request's body is not JSON") from None
        if not isinstance(body, dict):
            raise _Refused(400, "the request's body is not a JSON object")
        return body

    async def stop(request: Request) -> Response:
        await _body(request)

        def act() -> None:
            record = jobs.record(request.path_params["name"])
            stop_training_job({"TrainingJobName": record.name}, store=store)

        await in_thread(act)
        return _json({"stopping": True})

    async def profile_steps(request: Request) -> Response:
        body = await _body(request)
        steps = body.get("steps")

        def act() -> None:
            record = jobs.record(request.path_params["name"])
            request_dict = {"TrainingJobName": record.name, "Steps": steps}
            profile_training_job(request_dict, store=store, requested_by="the web UI")

        await in_thread(act)
        return _json({"steps": steps})

    def stream(request: Request, event: str, read: Callable[[], tuple[Any, bool]]) -> Response:
        def looked_at() -> tuple[Any, bool]:
            try:
                return read()
            except _Refused as refusal:
                raise StreamRefused(str(refusal)) from None

        return event_stream(request, event, looked_at, closing)

    async def job_list_events(request: Request) -> Response:
        return stream(request, "jobs", lambda: (jobs.rows(), False))

    async def job_events(request: Request) -> Response:
        name = request.path_params["name"]
        await in_thread(lambda: jobs.record(name))
        return stream(request, "job", lambda: summary_of(name))

    async def report(request: Request) -> Response:
        kind = request.path_params["kind"]

        def find() -> str:
            found = jobs.view(jobs.record(request.path_params["name"])).report_files().get(kind)
            if found is None:
                raise _Refused(404, f"the job has no {kind} report (yet)")
            return found

        path = await in_thread(find)
        # The report runs its own inline scripts: in a sandbox, with no access to the UI.
        return FileResponse(
            path,
            media_type="text/html; charset=utf-8",
            headers={
                "Content-Security-Policy": "sandbox allow-scripts; default-src 'none'; "
                "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:",
                "Cache-Control": "no-store",
            },
        )

    async def refused(request: Request, error: Exception) -> Response:
        assert isinstance(error, _Refused)
        return _json({"error": str(error)}, error.status)

    async def not_served(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        return _json({"error": error.detail}, error.status_code)

    async def conflict(request: Request, error: Exception) -> Response:
        return _json({"error": str(error)}, 409 if isinstance(error, JobStateError) else 400)

    routes = [
        Route("/", page("jobs")),
        Route("/compare", page("compare")),
        Route("/jobs/{name}", page("job")),
        Route("/jobs/{name}/tensors", page("tensors")),
        Route("/jobs/{name}/report/{kind}", report),
        Route("/static/{file}", static),
        Route("/api/session", session),
        Route("/api/jobs", job_list),
        Route("/api/events/jobs", job_list_events),
        Route("/api/events/jobs/{name}", job_events),
        Route("/api/jobs/{name}", job_summary),
        Route("/api/jobs/{name}/scalars", scalars),
        Route("/api/jobs/{name}/profile", profile),
        Route("/api/jobs/{name}/tensors", tensors),
        Route("/api/jobs/{name}/tensor", tensor),
        Route("/api/jobs/{name}/tensor-value", tensor_value),
        Route("/api/compare", compare),
        Route("/api/jobs/{name}/stop", stop, methods=["POST"]),
        Route("/api/jobs/{name}/profile-steps", profile_steps, methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={_Refused: refused, ConfigError: conflict, HTTPException: not_served},
    )
    return RequireAccess(app, access)
