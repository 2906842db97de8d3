"""Server-sent events: a page's data pushed to it whenever it changes, never polled by the page.

``event_stream`` looks at the data once a second (every five seconds once it has settled: a job
whose training and rules have all finished) in a worker thread, and sends it as one event only
when it differs from what was sent last; a comment every 15 s keeps a quiet connection open.
The stream ends when the page goes away or the server shuts down.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import StreamingResponse

from trainprobe.errors import TrainprobeError

__all__ = ["EVENT_SECONDS", "SETTLED_EVENT_SECONDS", "StreamRefused", "event_stream", "to_json"]

EVENT_SECONDS = 1.0
SETTLED_EVENT_SECONDS = 5.0
_KEEP_ALIVE_SECONDS = 15.0


class StreamRefused(TrainprobeError):
    """The data can no longer be read (the job is gone): the page is told why, and the stream
    ends."""


def _clean(value: Any) -> Any:
    """``value`` with every NaN or infinity as None: JSON has no such numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(item) for item in value]
    return value


def to_json(value: Any) -> str:
    """``value`` as compact JSON, with NaN and infinities as null."""
    try:
        return json.dumps(value, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:  # a NaN somewhere: the rare case pays for the walk
        return json.dumps(_clean(value), separators=(",", ":"), default=str)


def event_stream(
    request: Request,
    event: str,
    read: Callable[[], tuple[Any, bool]],
    closing: Callable[[], bool],
) -> StreamingResponse:
    """Events named ``event`` carrying ``read()``'s data (``read`` also says whether the data
    has settled), until the page goes away or ``closing()``."""

    async def events() -> AsyncIterator[str]:
        last = None
        quiet_since = time.monotonic()
        while not closing():
            try:
                data, settled = await anyio.to_thread.run_sync(read)
            except StreamRefused as refusal:
                yield f"event: refused\ndata: {json.dumps(str(refusal))}\n\n"
                return
            text = to_json(data)
            if text != last:
                last, quiet_since = text, time.monotonic()
                yield f"event: {event}\ndata: {text}\n\n"
            elif time.monotonic() - quiet_since > _KEEP_ALIVE_SECONDS:
                quiet_since = time.monotonic()
                yield ": still here\n\n"
            wait = SETTLED_EVENT_SECONDS if settled else EVENT_SECONDS
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and not closing():
                if await request.is_disconnected():
                    return
                await anyio.sleep(0.25)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
