"""The files web pages are made of, read one way for the report and for the web UI.

A page's scripts and style lie beside the code that makes the page, in its package's
``assets/`` folder (``trainprobe/report/assets``, ``trainprobe/ui/assets``); plotly.js comes
from the plotly package. ``Assets`` reads a folder's files by name: a name that is not one of
its files is not found, so a name from a request is looked up, never followed as a path. The
report embeds them in its page (``inline``: the page opens from disk with no network); the UI
serves them under ``/static/``. Each file is read once a process: plotly.js is 4.6 MB.
"""

from __future__ import annotations

import functools
import json
import posixpath
from importlib import resources
from typing import Any

__all__ = ["PLOTLY_JS", "Assets", "json_script", "plotly_js"]

PLOTLY_JS = "plotly.js"
"""plotly.js's name among every folder's assets."""

_MEDIA_TYPES = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".html": "text/html; charset=utf-8",
}


@functools.cache
def plotly_js() -> str:
    """plotly.js, as the plotly package ships it."""
    from plotly.offline import get_plotlyjs  # a large module: imported only to make a page

    return str(get_plotlyjs())


class Assets:
    """The ``assets/`` folder of package ``package``, and plotly.js."""

    def __init__(self, package: str) -> None:
        self.package = package
        folder = resources.files(package).joinpath("assets")
        self._folder = folder
        self.names = frozenset(entry.name for entry in folder.iterdir() if entry.is_file()) | {
            PLOTLY_JS
        }
        """Every name ``text`` finds."""
        self._read: dict[str, str] = {}

    def text(self, name: str) -> str:
        """The file ``name``; KeyError when it is not one of ``names``."""
        if name not in self.names:
            raise KeyError(f"{self.package} has no asset named {name!r}")
        if name == PLOTLY_JS:
            return plotly_js()
        found = self._read.get(name)
        if found is None:
            found = self._read[name] = self._folder.joinpath(name).read_text("utf-8")
        return found

    @staticmethod
    def media_type(name: str) -> str:
        """The file ``name``'s media type, by its suffix."""
        return _MEDIA_TYPES.get(posixpath.splitext(name)[1], "application/octet-stream")

    def inline(self, name: str) -> str:
        """The script or style ``name`` as an element of a self-contained page."""
        tag = "style" if name.endswith(".css") else "script"
        return f"<{tag}>{self.text(name)}</{tag}>"


def json_script(element_id: str, content: Any) -> str:
    """``content`` as a page's data: a ``<script type="application/json">`` element whose text no
    value can end, which the page's scripts read with ``JSON.parse``."""
    data = json.dumps(content, allow_nan=False, separators=(",", ":"))
    data = data.replace("<", "\\u003c")  # no text in the data can end or open a tag
    return f'<script type="application/json" id="{element_id}">{data}</script>'
