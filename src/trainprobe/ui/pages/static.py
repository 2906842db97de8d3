"""What every page loads besides its data: its scripts and style, plotly.js, and the CSRF token
its actions carry (``GET /api/session``, which only the UI's own pages can read).

The files are the UI's assets (``trainprobe/ui/assets``), read as the report reads its own
(``trainprobe.report.web_assets``); only scripts and styles are served.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from trainprobe.report.web_assets import Assets
from trainprobe.ui.access import Access
from trainprobe.ui.pages.base import ASSETS, Refused, in_thread, json_response

__all__ = ["SERVED", "StaticFiles"]

SERVED = (".js", ".css")
"""The kinds of asset under ``/static/``: a page is served at its own address only."""


class StaticFiles:
    """``/static/{file}`` (of ``assets``) and ``/api/session`` for the server let in by
    ``access``."""

    def __init__(self, access: Access, assets: Assets = ASSETS) -> None:
        self.access = access
        self.assets = assets

    def routes(self) -> list[Route]:
        return [Route("/static/{file}", self.static), Route("/api/session", self.session)]

    async def static(self, request: Request) -> Response:
        name = request.path_params["file"]
        if name not in self.assets.names or not name.endswith(SERVED):
            raise Refused(404, "no such file")
        text = await in_thread(lambda: self.assets.text(name))  # plotly.js: read once, at first
        return Response(
            text,
            media_type=self.assets.media_type(name),
            headers={"Cache-Control": "private, max-age=3600"},
        )

    async def session(self, request: Request) -> Response:
        return json_response({"csrf": self.access.csrf})
