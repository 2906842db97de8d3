"""``trainprobe.errors``'s drawn tree names every error trainprobe defines, under its parents.

The tree in the module's docstring is where a user looks to choose what to catch. Walked from
``TrainprobeError`` over every module of the package, each error class must be drawn, under
each of its trainprobe bases (an error with two, such as JobOperationError, is drawn under both),
and every drawing must be true.
"""

from __future__ import annotations

import importlib
import pkgutil

import trainprobe
from trainprobe import errors
from trainprobe.errors import TrainprobeError

_DRAWING = "│├└─ "


def _drawn() -> set[tuple[str, str | None]]:
    """Each (error, parent) pair the docstring draws; the root's parent is None."""
    doc = errors.__doc__ or ""
    lines = doc[doc.index("    TrainprobeError") :].split("\n\n")[0].splitlines()
    indent = len(lines[0]) - len(lines[0].lstrip())
    parents: list[str | None] = []
    pairs = set()
    for line in lines:
        start = len(line) - len(line.lstrip(_DRAWING))
        depth = (start - indent) // 4
        listed = line[start:].split("  ")[0].split(" (")[0]
        names = [name.strip() for name in listed.split(",")]
        parent = parents[depth - 1] if depth else None
        pairs |= {(name, parent) for name in names}
        parents[depth:] = [names[0] if len(names) == 1 else None]
    return pairs


def _defined() -> dict[str, type[TrainprobeError]]:
    """Every subclass of TrainprobeError the package defines, by name."""
    for info in pkgutil.walk_packages(trainprobe.__path__, f"{trainprobe.__name__}."):
        importlib.import_module(info.name)
    found: dict[str, type[TrainprobeError]] = {}
    waiting: list[type[TrainprobeError]] = [TrainprobeError]
    while waiting:
        error = waiting.pop()
        if error.__module__.startswith(f"{trainprobe.__name__}."):
            found[error.__name__] = error
        waiting += error.__subclasses__()
    return found


def test_the_reading_follows_the_drawing() -> None:
    drawn = _drawn()
    assert ("TrainprobeError", None) in drawn
    assert ("JobOperationError", "ConfigError") in drawn
    assert ("JobOperationError", "JobError") in drawn
    assert ("NoMoreData", "AnalysisError") in drawn


def test_every_error_is_drawn_under_each_of_its_parents() -> None:
    drawn = _drawn()
    defined = _defined()
    assert sorted({name for name, _ in drawn}) == sorted(defined)
    expected = {("TrainprobeError", None)} | {
        (name, base.__name__)
        for name, error in defined.items()
        for base in error.__bases__
        if issubclass(base, TrainprobeError)
    }
    assert sorted(drawn, key=str) == sorted(expected, key=str)
