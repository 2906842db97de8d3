"""The compare page: one scalar of several jobs on one chart.

``ComparePage.compare`` gives, for each job asked for (ten at most), its chart of the tensor
asked for (by default each job's first scalar) and the scalars it has, to choose from.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from trainprobe.ui.pages.base import JobViews, in_thread, json_response, page_response

__all__ = ["MOST_JOBS", "ComparePage"]

MOST_JOBS = 10
"""Jobs drawn together, at most (the first ones asked for)."""


class ComparePage:
    """The compare page's routes over ``jobs``."""

    def __init__(self, jobs: JobViews) -> None:
        self.jobs = jobs

    def routes(self) -> list[Route]:
        return [Route("/compare", self.page), Route("/api/compare", self.get_compare)]

    def compare(self, names: list[str], wanted: str | None) -> list[dict[str, Any]]:
        """A chart of tensor ``wanted`` (each job's first scalar when None) for each of the
        first ``MOST_JOBS`` jobs of ``names``; no series where a job has no such scalar."""
        charts: list[dict[str, Any]] = []
        for name in names[:MOST_JOBS]:
            view = self.jobs.view(self.jobs.record(name))
            tensors = view.scalar_names()
            tensor = wanted if wanted is not None else (tensors[0] if tensors else None)
            if tensor is None or tensor not in tensors:
                charts.append({"job": name, "tensor": tensor, "series": []})
                continue
            series = view.scalar_chart(tensor)["series"]
            charts.append({"job": name, "tensor": tensor, "tensors": tensors, "series": series})
        return charts

    async def page(self, request: Request) -> Response:
        return page_response("compare")

    async def get_compare(self, request: Request) -> Response:
        names = request.query_params.getlist("job")
        wanted = request.query_params.get("tensor")
        return json_response(await in_thread(lambda: self.compare(names, wanted)))
