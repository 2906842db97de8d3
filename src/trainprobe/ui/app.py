"""The web UI's application: the pages' routes (``trainprobe.ui.pages``, one module per page)
behind the access checks (``trainprobe.ui.access``), and the answers to a refusal.

Pages are fixed HTML files that draw themselves from the JSON routes with their scripts; nothing
from a job's files or a request is ever put into HTML on the server, and the scripts insert
every name and message as text. A job's name is checked against SageMaker's pattern before the
store is asked for it; a tensor's name is looked up in the job's trial. Reading runs in worker
threads, so a slow disk never holds up the event loop.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from trainprobe.config.errors import ConfigError
from trainprobe.jobs.errors import JobStateError
from trainprobe.jobs.store import JobStore
from trainprobe.ui.access import Access, RequireAccess
from trainprobe.ui.pages.base import JobViews, Refused, json_response
from trainprobe.ui.pages.compare import ComparePage
from trainprobe.ui.pages.job import JobPage
from trainprobe.ui.pages.jobs import JobRows, JobsPage
from trainprobe.ui.pages.static import StaticFiles
from trainprobe.ui.pages.tensors import TensorsPage

__all__ = ["ui_app"]


async def _refused(request: Request, error: Exception) -> Response:
    assert isinstance(error, Refused)
    return json_response({"error": str(error)}, error.status)


async def _not_served(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    return json_response({"error": error.detail}, error.status_code)


async def _conflict(request: Request, error: Exception) -> Response:
    return json_response({"error": str(error)}, 409 if isinstance(error, JobStateError) else 400)


def ui_app(
    store: JobStore, access: Access, *, closing: Callable[[], bool] = lambda: False
) -> RequireAccess:
    """The UI's ASGI application over ``store``, let in by ``access``; ``closing`` says when the
    server is shutting down, so that open event streams end."""
    jobs = JobViews(store)
    pages = (
        JobsPage(JobRows(jobs), closing),
        ComparePage(jobs),
        JobPage(jobs, store, closing),
        TensorsPage(jobs),
        StaticFiles(access),
    )
    app = Starlette(
        routes=[route for page in pages for route in page.routes()],
        exception_handlers={Refused: _refused, ConfigError: _conflict, HTTPException: _not_served},
    )
    return RequireAccess(app, access)
