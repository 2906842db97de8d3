"""Calls to ``trainprobe serve`` as a client makes them: signed with the key pair (AWS Signature
Version 4, by botocore's signer), as boto3 or as raw HTTP."""

from __future__ import annotations

import datetime
import http.client
import json
import urllib.parse
from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from trainprobe.jobs.server.access_key import AccessKey

CONTENT_TYPE = "application/x-amz-json-1.1"


def client(url: str, key: AccessKey) -> Any:
    """boto3's SageMaker client for the server at ``url``, signing with ``key``."""
    return boto3.client(
        "sagemaker",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key.access_key_id,
        aws_secret_access_key=key.secret_access_key,
    )


def sign(
    url: str,
    target: str,
    body: bytes,
    key: AccessKey,
    *,
    headers: dict[str, str] | None = None,
    when: datetime.datetime | None = None,
    service: str = "sagemaker",
) -> dict[str, str]:
    """The headers of ``POST url`` calling ``target`` with ``body``, signed with ``key`` at
    ``when`` (default: now) for ``service``: ``headers`` (default: SageMaker's Content-Type and
    the target) plus Host, X-Amz-Date and Authorization."""
    request = AWSRequest(method="POST", url=url.rstrip("/") + "/", data=body)
    request.headers["Host"] = urllib.parse.urlsplit(url).netloc
    chosen = {"Content-Type": CONTENT_TYPE, "X-Amz-Target": target} if headers is None else headers
    for name, value in chosen.items():
        request.headers[name] = value
    signer = SigV4Auth(Credentials(key.access_key_id, key.secret_access_key), service, "us-east-1")
    if when is None:
        signer.add_auth(request)
    else:
        stamp = when.strftime("%Y%m%dT%H%M%SZ")
        request.headers["X-Amz-Date"] = stamp
        request.context["timestamp"] = stamp
        canonical = signer.canonical_request(request)
        signature = signer.signature(signer.string_to_sign(request, canonical), request)
        request.headers["Authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={signer.scope(request)}, "
            f"SignedHeaders={signer.signed_headers(signer.headers_to_sign(request))}, "
            f"Signature={signature}"
        )
    return dict(request.headers.items())


def call(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    method: str = "POST",
    path: str = "/",
    timeout: float = 30.0,
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Send one request as given (http.client adds nothing it was given); its status, headers
    (names in lower case) and JSON body."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        if not any(name.lower() == "content-length" for name in headers):
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        answer = response.read()
        got = {name.lower(): value for name, value in response.getheaders()}
        return response.status, got, json.loads(answer)
    finally:
        connection.close()


def signed_call(
    url: str, target: str, request: dict[str, Any], key: AccessKey
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Call ``target`` with ``request`` (a JSON object), signed; status, headers and answer."""
    body = json.dumps(request).encode()
    return call(url, body, sign(url, target, body, key))
