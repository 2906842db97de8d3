"""What the names in a request may be: job, rule and collection names.

A job's name and each rule's name become directory and file names (``<output>/<job>/``,
``rule-output/<rule>/``, ``logs/rules/<rule>.log``), so they are checked before any path is built
from them. The training job name follows SageMaker's pattern, which allows nothing a path could
misread. SageMaker allows any 1 to 256 characters in a rule's name; trainprobe also refuses what
would take the rule's files elsewhere or cannot be a file name (``/``, ``\\``, ``.``, ``..``,
NUL and other control characters, more than 251 bytes). A collection name is 1 to 256 characters
without control characters.
"""

from __future__ import annotations

import re

from trainprobe.config.errors import ConfigError

__all__ = [
    "MAX_RULE_NAME_BYTES",
    "check_collection_name",
    "check_rule_name",
    "validate_training_job_name",
]

# SageMaker's TrainingJobName: 1 to 63 letters, digits and hyphens, starting and ending with a
# letter or digit (the pattern alone lets runs of hyphens through, hence the length check).
_TRAINING_JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
_MAX_JOB_NAME = 63

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_RULE_NAME_BYTES = 251
"""A rule's name and ``.log`` fit the 255 bytes a file name may have."""
_MAX_NAME_CHARACTERS = 256


def _utf8_length(text: str) -> int:
    """The length of ``text`` in UTF-8, or 0 when it holds a lone surrogate (no file can)."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return 0


def validate_training_job_name(name: object, field_name: str = "TrainingJobName") -> str:
    """``name`` if SageMaker would accept it as a training job name, else a ConfigError."""
    if (
        not isinstance(name, str)
        or len(name) > _MAX_JOB_NAME
        or not _TRAINING_JOB_NAME.fullmatch(name)
    ):
        raise ConfigError(
            field_name,
            name,
            "a job name is 1 to 63 letters, digits and hyphens, "
            "starting and ending with a letter or digit",
        )
    return name


def check_rule_name(name: object, field_name: str = "RuleConfigurationName") -> str:
    """``name`` if it can name a rule (and so its output directory), else a ConfigError."""
    allowed = (
        "a rule name is 1 to 256 characters, at most 251 bytes in UTF-8, without '/', '\\' or "
        "control characters, and not '.' or '..' (it names the rule's output directory)"
    )
    if (
        not isinstance(name, str)
        or not name
        or len(name) > _MAX_NAME_CHARACTERS
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or _CONTROL.search(name)
        or not 0 < _utf8_length(name) <= MAX_RULE_NAME_BYTES
    ):
        raise ConfigError(field_name, name, allowed)
    return name


def check_collection_name(name: object, field_name: str = "CollectionName") -> str:
    """``name`` if it can name a collection, else a ConfigError."""
    if (
        not isinstance(name, str)
        or not name
        or len(name) > _MAX_NAME_CHARACTERS
        or _CONTROL.search(name)
        or not _utf8_length(name)
    ):
        raise ConfigError(
            field_name, name, "a collection name is 1 to 256 characters, without control characters"
        )
    return name
