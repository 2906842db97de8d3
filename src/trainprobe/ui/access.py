"""Who may use the web UI: the holder of its token, on the address it serves, from its own pages.

``trainprobe ui`` makes a random token at each start and prints it in the page's URL. The first
request carrying ``?token=`` gets it back as an HttpOnly, SameSite=Strict cookie (and a redirect
to the same URL without it, so the token leaves the address bar); every later request (pages,
data, events, static files) must bring that cookie. A request whose ``Host`` is not the server's
own address is refused before anything else, so that a web page of another site cannot reach the
UI through a name it controls that resolves to 127.0.0.1 (DNS rebinding). A request that changes
anything is a POST carrying the CSRF token, which only the UI's own pages can read (from
``GET /api/session``); a request sent from another site is refused even before that.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from urllib.parse import urlencode

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSRF_HEADER", "Access", "RequireAccess"]

CSRF_HEADER = "x-trainprobe-csrf"
_CHANGING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_ALLOWED_METHODS = frozenset({"GET", "HEAD", "POST"})


class Access:
    """The token of one UI server and the addresses it answers to."""

    def __init__(self, host: str, port: int, token: str | None = None) -> None:
        self.token = token or secrets.token_urlsafe(32)
        self.port = port
        self.cookie = f"trainprobe-ui-{port}"
        """Cookies are shared by every port of a host: each server has its own name."""
        self.csrf = hmac.new(self.token.encode(), b"csrf", hashlib.sha256).hexdigest()
        address = ipaddress.ip_address(host)
        shown = f"[{address}]" if address.version == 6 else str(address)
        self.origin = f"http://{shown}:{port}"
        names = {shown}
        if address.is_loopback:
            names |= {"localhost", "127.0.0.1", "[::1]"}
        self.hosts = frozenset(f"{name}:{port}" for name in names)

    def url(self, path: str = "/") -> str:
        """The URL that lets a browser in: ``path`` with the token."""
        return f"{self.origin}{path}?{urlencode({'token': self.token})}"

    def holds_token(self, given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), self.token.encode())

    def holds_csrf(self, given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), self.csrf.encode())


def _refusal(status: int, message: str) -> Response:
    return JSONResponse(
        {"error": message}, status_code=status, headers={"Cache-Control": "no-store"}
    )


class RequireAccess:
    """ASGI middleware: refuses every request that ``Access`` does not let in (see the module
    docstring); adds the headers that keep the pages from being framed or from loading anything
    but their own files."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._check(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        token = request.query_params.get("token")
        if token is not None:
            await self._let_in(request)(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"SAMEORIGIN"),
                    (b"referrer-policy", b"no-referrer"),
                ]
                if not any(name.lower() == b"content-security-policy" for name, _ in headers):
                    headers.append((b"content-security-policy", _POLICY))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _check(self, request: Request) -> Response | None:
        access = self.access
        if request.headers.get("host", "") not in access.hosts:
            return _refusal(403, "this server answers only to its own address: " + access.origin)
        if request.method not in _ALLOWED_METHODS:
            return _refusal(405, f"method {request.method} is not served")
        token = request.query_params.get("token")
        if token is not None:
            if not access.holds_token(token):
                return _refusal(403, "the token is wrong: use the URL trainprobe ui printed")
        elif not access.holds_token(request.cookies.get(access.cookie)):
            return _refusal(403, "no token: open the URL trainprobe ui printed")
        if request.method in _CHANGING_METHODS:
            site = request.headers.get("sec-fetch-site")
            origin = request.headers.get("origin")
            if (site is not None and site != "same-origin") or (
                origin is not None and origin != access.origin
            ):
                return _refusal(403, "a request from another site cannot change anything here")
            if not access.holds_csrf(request.headers.get(CSRF_HEADER)):
                return _refusal(403, f"the {CSRF_HEADER} header is missing or wrong")
        return None

    def _let_in(self, request: Request) -> Response:
        """The redirect that sets the cookie and takes the token out of the address."""
        query = [
            (key, value) for key, value in request.query_params.multi_items() if key != "token"
        ]
        target = URL(path=request.url.path, query=urlencode(query))
        response = RedirectResponse(str(target), status_code=303)
        response.set_cookie(
            self.access.cookie,
            self.access.token,
            httponly=True,
            samesite="strict",
            path="/",
        )
        return response


_POLICY = (
    b"default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    b"img-src 'self' data: blob:; connect-src 'self'; font-src 'self' data:; "
    b"frame-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)
"""Only the UI's own scripts run; plotly sets styles inline and draws images from data: URLs."""
