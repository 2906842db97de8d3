"""Object storage behind an fsspec URL (``s3://bucket/prefix``): the one place that talks to it.

``storage.files`` sends every path that is a URL here; everything else in trainprobe only passes
strings around. fsspec and s3fs are imported on the first URL (``pip install trainprobe[s3]``),
so local runs never pay for them. S3's endpoint and credentials come from the usual AWS
settings, as boto3 reads them: ``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``),
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, ``~/.aws/config``.

An object appears whole or not at all (S3 has no partial objects), so a writer streams straight
to its final key: a large file goes up as a multipart upload, completed on commit and aborted on
discard; a small one is a single PUT.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from trainprobe.errors import TrainprobeError

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = [
    "PART_SIZE",
    "ObjectStoreUnavailable",
    "ObjectStoreUnreachable",
    "check_reachable",
    "filesystem",
    "is_url",
    "list_keys_after",
    "open_for_write",
]

PART_SIZE = 16 * 1024 * 1024
"""Bytes per multipart part: a file larger than this goes up in parts as it is written."""

_LOCAL_SCHEMES = ("file://", "local://")

_filesystems: dict[str, AbstractFileSystem] = {}
_lock = threading.Lock()


class ObjectStoreUnavailable(TrainprobeError):
    """An object storage URL was given but its fsspec backend is not installed."""


class ObjectStoreUnreachable(TrainprobeError):
    """An object storage URL whose bucket cannot be reached, does not exist, or refuses us."""


_PROBE_CONFIG = {"connect_timeout": 5, "read_timeout": 10, "retries": {"max_attempts": 1}}
"""botocore's settings for ``check_reachable``: an answer in seconds, not after retries."""


def is_url(path: str) -> bool:
    """Whether ``path`` names object storage (``scheme://...``) rather than a local file."""
    return "://" in path and not path.startswith(_LOCAL_SCHEMES)


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower()


def filesystem(url: str) -> AbstractFileSystem:
    """The fsspec filesystem for ``url``'s scheme, made once per process and shared."""
    scheme = _scheme(url)
    with _lock:
        found = _filesystems.get(scheme)
        if found is None:
            try:
                import fsspec
            except ImportError as error:
                raise ObjectStoreUnavailable(
                    f"{url}: object storage needs fsspec and s3fs (pip install 'trainprobe[s3]')"
                ) from error
            options: dict[str, Any] = {}
            if scheme in ("s3", "s3a"):
                # Listings are ours to refresh (a live trial); never serve a stale one.
                options = {"use_listings_cache": False, "skip_instance_cache": True}
            try:
                found = fsspec.filesystem(scheme, **options)
            except (ImportError, ValueError) as error:
                raise ObjectStoreUnavailable(
                    f"{url}: no fsspec backend for {scheme}:// ({error}); for S3, "
                    "pip install 'trainprobe[s3]'"
                ) from error
            _filesystems[scheme] = found
        return found


def open_for_write(url: str) -> BinaryIO:
    """A file object that uploads to ``url``: ``close()`` makes the object appear,
    ``discard()`` (fsspec's) abandons it, aborting a multipart upload already started."""
    fs = filesystem(url)
    file: BinaryIO = fs.open(url, "wb", block_size=PART_SIZE)
    return file


def _bucket_and_prefix(url: str) -> tuple[str, str]:
    path = url.split("://", 1)[1]
    bucket, _, prefix = path.partition("/")
    return bucket, prefix


def check_reachable(url: str) -> None:
    """Return once ``url``'s bucket answers (it exists, and these credentials may use it);
    else ObjectStoreUnreachable saying why, within seconds: asked before a job starts, so
    that a wrong endpoint or bucket is an error at once, not a training whose outputs vanish.
    """
    filesystem(url)  # the backend is installed
    if _scheme(url) not in ("s3", "s3a"):
        return
    import fsspec

    bucket, _ = _bucket_and_prefix(url)
    if not bucket:
        raise ObjectStoreUnreachable("it names no bucket (s3://bucket/prefix)")
    probe = fsspec.filesystem("s3", skip_instance_cache=True, config_kwargs=_PROBE_CONFIG)
    probe.retries = 1  # s3fs's own retries, on top of botocore's
    try:
        probe.call_s3("head_bucket", Bucket=bucket)
    except FileNotFoundError:
        raise ObjectStoreUnreachable(f"there is no bucket {bucket!r} at this endpoint") from None
    except PermissionError as error:
        raise ObjectStoreUnreachable(
            f"access to bucket {bucket!r} is denied with these credentials ({error})"
        ) from None
    except Exception as error:  # s3fs's OSErrors and botocore's own (no endpoint, no keys)
        raise ObjectStoreUnreachable(
            f"it cannot be reached ({error}); the endpoint and credentials come from "
            "AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE"
        ) from None


def list_keys_after(directory: str, start_after: str | None) -> Iterator[str]:
    """Every object under ``directory`` whose path relative to it sorts after ``start_after``,
    as relative ``/``-separated paths in key order.

    On S3 the listing starts there (ListObjectsV2's StartAfter), so following a growing output
    costs the new keys only, not the whole prefix again.
    """
    fs = filesystem(directory)
    root = directory.rstrip("/")
    if _scheme(directory) not in ("s3", "s3a"):
        base = fs._strip_protocol(root)
        for path in sorted(fs.find(root)):
            relative = path[len(base) :].lstrip("/")
            if start_after is None or relative > start_after:
                yield relative
        return
    bucket, prefix = _bucket_and_prefix(root)
    prefix = prefix + "/" if prefix else ""
    request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if start_after:
        request["StartAfter"] = prefix + start_after
    while True:
        page = fs.call_s3("list_objects_v2", **request)
        for entry in page.get("Contents", []):
            yield entry["Key"][len(prefix) :]
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return
        request["ContinuationToken"] = token
