"""Checking a request's AWS Signature Version 4, as SageMaker does, with botocore's own signer.

A signed request carries ``Authorization: AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/
sagemaker/aws4_request, SignedHeaders=host;x-amz-date;..., Signature=<hex>`` and its time in
``X-Amz-Date``. The server rebuilds the request from what it received (method, path, the signed
headers, the body), lets botocore's ``SigV4Auth`` compute the signature the key pair gives at that
time, and compares the two in constant time. The request's own time must be within 15 minutes of
the server's, so a captured request cannot be replayed later; the signed ``host`` header ties it
to this server. A refusal carries AWS's error name for it, which boto3 shows as the error code.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
from collections.abc import Sequence

from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]

from trainprobe.errors import TrainprobeError
from trainprobe.jobs.server.access_key import AccessKey

__all__ = ["ALGORITHM", "LARGEST_CLOCK_SKEW", "SERVICE", "SignatureRefused", "verify_signature"]

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sagemaker"
LARGEST_CLOCK_SKEW = datetime.timedelta(minutes=15)
_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
_SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check "
    "your AWS Secret Access Key and signing method (the key pair in the file trainprobe serve "
    "names)."
)


class SignatureRefused(TrainprobeError):
    """A request without a valid signature; ``error_code`` and ``status`` are AWS's answer."""

    def __init__(self, error_code: str, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.status = status


def _parse_authorization(value: str) -> dict[str, str]:
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SignatureRefused(
            "IncompleteSignatureException",
            f"Authorization header: algorithm {algorithm!r} is not supported; expected "
            f"{ALGORITHM} (AWS Signature Version 4)",
            400,
        )
    parts: dict[str, str] = {}
    for item in rest.split(","):
        name, equals, part = item.strip().partition("=")
        if equals:
            parts[name] = part
    missing = [name for name in ("Credential", "SignedHeaders", "Signature") if name not in parts]
    if missing:
        raise SignatureRefused(
            "IncompleteSignatureException",
            "Authorization header requires " + ", ".join(f"'{name}'" for name in missing),
            400,
        )
    return parts


def _request_time(headers: Sequence[tuple[str, str]]) -> str:
    values = [value for name, value in headers if name == "x-amz-date"]
    if len(values) != 1:
        raise SignatureRefused(
            "IncompleteSignatureException",
            "a signed request needs exactly one X-Amz-Date header (its time, as 20260101T000000Z)",
            400,
        )
    return values[0].strip()


def _check_time(stamp: str, now: datetime.datetime) -> None:
    try:
        when = datetime.datetime.strptime(stamp, _TIME_FORMAT).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        raise SignatureRefused(
            "IncompleteSignatureException",
            f"X-Amz-Date {stamp!r} is not a time of the form 20260101T000000Z",
            400,
        ) from None
    if when < now - LARGEST_CLOCK_SKEW:
        raise SignatureRefused(
            "InvalidSignatureException",
            f"Signature expired: {stamp} is now earlier than "
            f"{(now - LARGEST_CLOCK_SKEW).strftime(_TIME_FORMAT)} "
            f"({now.strftime(_TIME_FORMAT)} - 15 min.)",
        )
    if when > now + LARGEST_CLOCK_SKEW:
        raise SignatureRefused(
            "InvalidSignatureException",
            f"Signature not yet current: {stamp} is still later than "
            f"{(now + LARGEST_CLOCK_SKEW).strftime(_TIME_FORMAT)} "
            f"({now.strftime(_TIME_FORMAT)} + 15 min.)",
        )


def verify_signature(
    method: str,
    path: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
    key: AccessKey,
    now: datetime.datetime | None = None,
) -> None:
    """Return if the request is signed with ``key``, else raise SignatureRefused.

    ``headers`` are the received (name, value) pairs, names in lower case; ``path`` is the path
    as sent (with its query string, if any); ``now`` is the server's time (default: the clock).
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    authorizations = [value for name, value in headers if name == "authorization"]
    if not authorizations:
        raise SignatureRefused(
            "MissingAuthenticationTokenException",
            "Missing Authentication Token: sign the request with the key pair trainprobe serve "
            "keeps in its credentials file (profile 'trainprobe')",
        )
    if len(authorizations) > 1:
        raise SignatureRefused(
            "IncompleteSignatureException", "the request has more than one Authorization", 400
        )
    parts = _parse_authorization(authorizations[0])
    scope = parts["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        raise SignatureRefused(
            "IncompleteSignatureException",
            f"Credential {parts['Credential']!r} is not of the form "
            f"<key id>/<yyyymmdd>/<region>/{SERVICE}/aws4_request",
            400,
        )
    key_id, day, region, service, _ = scope
    if not hmac.compare_digest(key_id.encode(), key.access_key_id.encode()):
        raise SignatureRefused(
            "UnrecognizedClientException",
            "The security token included in the request is invalid: the access key id is not "
            "the one trainprobe serve keeps in its credentials file",
        )
    stamp = _request_time(headers)
    _check_time(stamp, now)
    if day != stamp[:8]:
        raise SignatureRefused(
            "InvalidSignatureException",
            f"Date in Credential scope does not match YYYYMMDD from X-Amz-Date: {day!r} != "
            f"{stamp[:8]!r}, from {stamp!r}",
        )
    if service != SERVICE:
        raise SignatureRefused(
            "InvalidSignatureException",
            f"Credential should be scoped to correct service: '{SERVICE}', not {service!r}",
        )
    signed = parts["SignedHeaders"].split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        raise SignatureRefused(
            "InvalidSignatureException",
            f"SignedHeaders {parts['SignedHeaders']!r} must include host and x-amz-date",
        )
    payload_hash = [value for name, value in headers if name == "x-amz-content-sha256"]
    if payload_hash and payload_hash[0].strip() != hashlib.sha256(body).hexdigest():
        raise SignatureRefused("InvalidSignatureException", _SIGNATURE_MISMATCH)

    host = next((value for name, value in headers if name == "host"), "")
    request = AWSRequest(method=method, url=f"http://{host}{path}", data=body)
    for name, value in headers:
        if name in signed:
            request.headers[name] = value
    request.context["timestamp"] = stamp
    signer = SigV4Auth(Credentials(key.access_key_id, key.secret_access_key), SERVICE, region)
    expected = signer.signature(
        signer.string_to_sign(request, signer.canonical_request(request)), request
    )
    if not hmac.compare_digest(expected.encode(), parts["Signature"].strip().encode()):
        raise SignatureRefused("InvalidSignatureException", _SIGNATURE_MISMATCH)
