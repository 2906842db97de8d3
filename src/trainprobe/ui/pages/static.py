"""What every page loads besides its data: its scripts and style, plotly.js, and the CSRF token
its actions carry (``GET /api/session``, which only the UI's own pages can read)."""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from trainprobe.ui.access import Access
from trainprobe.ui.pages.base import Refused, in_thread, json_response

__all__ = ["STATIC", "StaticFiles"]

STATIC = {
    "ui.css": "text/css",
    "plotly.js": "text/javascript",
    **{
        f"{script}.js": "text/javascript"
        for script in ("common", "charts", "jobs", "job", "tensors", "compare")
    },
}
"""The files under ``/static/``, and their types: a name not here is not served."""


def _asset(name: str) -> str:
    return resources.files("trainprobe.ui").joinpath("assets", name).read_text("utf-8")


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs  # large: read once, on the first page

    return str(get_plotlyjs())


class StaticFiles:
    """``/static/{file}`` and ``/api/session`` for the server let in by ``access``."""

    def __init__(self, access: Access) -> None:
        self.access = access
        self._plotly: str | None = None

    def routes(self) -> list[Route]:
        return [Route("/static/{file}", self.static), Route("/api/session", self.session)]

    async def static(self, request: Request) -> Response:
        name = request.path_params["file"]
        if name not in STATIC:
            raise Refused(404, "no such file")
        if name == "plotly.js":
            if self._plotly is None:
                self._plotly = await in_thread(_plotly_js)
            text = self._plotly
        else:
            text = _asset(name)
        return Response(
            text, media_type=STATIC[name], headers={"Cache-Control": "private, max-age=3600"}
        )

    async def session(self, request: Request) -> Response:
        return json_response({"csrf": self.access.csrf})
