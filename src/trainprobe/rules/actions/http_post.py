"""POSTing a JSON document over HTTP(S), for the SMS gateway and webhook actions."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

__all__ = ["post_json"]


def post_json(
    url: str,
    payload: Mapping[str, Any],
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> str:
    """POST ``payload`` as JSON to ``url``; returns a short description of the response.

    Raises OSError (urllib's errors are OSErrors) naming the status and the start of the body
    when the server does not answer 2xx, or cannot be reached within ``timeout`` seconds.
    """
    body = json.dumps(payload).encode()
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("User-Agent", "trainprobe")
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return f"HTTP {response.status}"
    except urllib.error.HTTPError as error:
        answer = error.read(200).decode(errors="replace").strip()
        raise OSError(f"{url} answered HTTP {error.code}: {answer or error.reason}") from None
    except urllib.error.URLError as error:
        raise OSError(f"cannot reach {url}: {error.reason}") from None
