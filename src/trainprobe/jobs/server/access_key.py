"""The key pair ``trainprobe serve`` accepts, kept in a file only its user can read.

The first ``trainprobe serve`` creates ``$TRAINPROBE_HOME/serve-credentials`` (mode 0600) in AWS's
shared-credentials format, under the profile ``trainprobe``, so AWS's own clients sign with it::

    AWS_SHARED_CREDENTIALS_FILE=~/.trainprobe/serve-credentials \\
        aws --profile trainprobe --region us-east-1 --endpoint-url http://127.0.0.1:8642 \\
        sagemaker list-training-jobs

Later starts read the same file. A file that others may read, or that another user owns, is
refused: its key may have leaked, and whoever holds the key can run commands as this user.
"""

from __future__ import annotations

import configparser
import os
import secrets
import stat
import string
from dataclasses import dataclass

from trainprobe.errors import TrainprobeError
from trainprobe.jobs.store import trainprobe_home

__all__ = [
    "CREDENTIALS_FILE",
    "PROFILE",
    "AccessKey",
    "AccessKeyFileError",
    "default_path",
    "load_or_create",
]

CREDENTIALS_FILE = "serve-credentials"
PROFILE = "trainprobe"

_KEY_ID_PREFIX = "TPAK"
_KEY_ID_ALPHABET = string.ascii_uppercase + string.digits


class AccessKeyFileError(TrainprobeError):
    """The credentials file cannot be created, read, or trusted."""


@dataclass(frozen=True)
class AccessKey:
    """An AWS-style key pair: the id names it in requests, the secret signs them."""

    access_key_id: str
    secret_access_key: str

    @classmethod
    def generate(cls) -> AccessKey:
        """A new random key pair (an id of 20 characters like AWS's, a 40-character secret)."""
        suffix = "".join(secrets.choice(_KEY_ID_ALPHABET) for _ in range(16))
        return cls(_KEY_ID_PREFIX + suffix, secrets.token_urlsafe(30))


def default_path() -> str:
    """Where ``trainprobe serve`` keeps its key pair: ``$TRAINPROBE_HOME/serve-credentials``."""
    return os.path.join(trainprobe_home(), CREDENTIALS_FILE)


def load_or_create(path: str | None = None) -> AccessKey:
    """The key pair in ``path`` (default: ``default_path()``), created there (0600) if the file
    does not exist yet."""
    path = path or default_path()
    try:
        return _create(path)
    except FileExistsError:
        return _load(path)
    except OSError as error:
        raise AccessKeyFileError(f"cannot create the credentials file {path}: {error}") from error


def _create(path: str) -> AccessKey:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    key = AccessKey.generate()
    text = (
        f"[{PROFILE}]\n"
        f"aws_access_key_id = {key.access_key_id}\n"
        f"aws_secret_access_key = {key.secret_access_key}\n"
    )
    # Written whole under a private name, then linked into place: a server starting at the same
    # time reads either no file or the whole of one, and never overwrites another's key.
    draft = f"{path}.{os.getpid()}.{secrets.token_hex(4)}"
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(text)
        os.link(draft, path)
    finally:
        os.unlink(draft)
    return key


def _load(path: str) -> AccessKey:
    try:
        info = os.stat(path)
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as error:
        raise AccessKeyFileError(f"cannot read the credentials file {path}: {error}") from error
    if info.st_uid != os.getuid():
        raise AccessKeyFileError(
            f"the credentials file {path} belongs to user id {info.st_uid}, not to you "
            f"({os.getuid()}); remove it and start trainprobe serve again for a new key"
        )
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AccessKeyFileError(
            f"the credentials file {path} can be read by others (mode "
            f"{stat.S_IMODE(info.st_mode):o}): its key may have leaked; remove the file and "
            "start trainprobe serve again for a new key (it is created with mode 600)"
        )
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=path)
        section = parser[PROFILE]
        key = AccessKey(section["aws_access_key_id"], section["aws_secret_access_key"])
    except (configparser.Error, KeyError) as error:
        raise AccessKeyFileError(
            f"the credentials file {path} is not valid: expected a [{PROFILE}] section with "
            f"aws_access_key_id and aws_secret_access_key ({error}); remove it and start "
            "trainprobe serve again for a new key"
        ) from error
    if not key.access_key_id.strip() or not key.secret_access_key.strip():
        raise AccessKeyFileError(f"the credentials file {path} holds an empty key")
    return key
