"""A job's tensors page: every saved tensor by collection, one tensor's reductions and
distribution over steps, and its value at a step.

Names come from the trial's own list (``tensor_view``): a name a request makes up is simply not
found, and never becomes a path. ``TensorsPage``'s data methods return JSON-ready data or raise
``Refused``; its handlers read the request and answer.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from trainprobe.ui.pages.base import (
    JobViews,
    Refused,
    in_thread,
    json_response,
    page_response,
    step_number,
)

__all__ = ["TensorsPage"]


class TensorsPage:
    """The tensors page's routes over ``jobs``."""

    def __init__(self, jobs: JobViews) -> None:
        self.jobs = jobs

    def routes(self) -> list[Route]:
        return [
            Route("/jobs/{name}/tensors", self.page),
            Route("/api/jobs/{name}/tensors", self.get_tensors),
            Route("/api/jobs/{name}/tensor", self.get_tensor),
            Route("/api/jobs/{name}/tensor-value", self.get_tensor_value),
        ]

    # ----- the data -----------------------------------------------------------------------

    def tensors(self, job: str) -> dict[str, Any]:
        """Every tensor job ``job`` saved, by collection (none yet: empty lists)."""
        found = self.jobs.view(self.jobs.record(job)).tensors()
        return found if found is not None else {"tensors": [], "collections": {}}

    def tensor(self, job: str, name: str) -> dict[str, Any]:
        """Tensor ``name``'s reductions and distribution over steps; Refused (404) when the
        job saved no such tensor."""
        found = self.jobs.view(self.jobs.record(job)).tensor_history(name)
        if found is None:
            raise Refused(404, f"job {job!r} saved no tensor named {name!r}")
        return found

    def tensor_value(self, job: str, name: str, step: int) -> dict[str, Any]:
        """Tensor ``name``'s value at ``step``; Refused (404) when it was not saved there."""
        found = self.jobs.view(self.jobs.record(job)).tensor_at(name, step)
        if found is None:
            raise Refused(404, f"job {job!r} saved no tensor {name!r} at step {step}")
        return found

    # ----- the handlers -------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        name = request.path_params["name"]
        await in_thread(lambda: self.jobs.record(name))
        return page_response("tensors")

    async def get_tensors(self, request: Request) -> Response:
        return json_response(await in_thread(lambda: self.tensors(request.path_params["name"])))

    async def get_tensor(self, request: Request) -> Response:
        job, name = request.path_params["name"], _tensor_name(request)
        return json_response(await in_thread(lambda: self.tensor(job, name)))

    async def get_tensor_value(self, request: Request) -> Response:
        job, name = request.path_params["name"], _tensor_name(request)
        step = step_number(request, "step")
        if step is None or step != int(step):
            raise Refused(400, "step= is missing or not a whole number")
        at = int(step)
        return json_response(await in_thread(lambda: self.tensor_value(job, name, at)))


def _tensor_name(request: Request) -> str:
    name = request.query_params.get("name")
    if not name:
        raise Refused(400, "name= is missing: the tensor's name")
    return name
