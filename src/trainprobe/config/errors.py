"""The one error a configuration can raise, and how it names what went wrong.

Every rejected value says three things: which field, what value, and what would have been
allowed; for a misspelt name it also suggests the nearest valid one. A request with several
problems reports them all at once (``ConfigErrors``, itself a ``ConfigError``, so that
``except ConfigError`` catches both) so the user fixes them in one pass.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Sequence

from trainprobe.errors import TrainprobeError

__all__ = ["ConfigError", "ConfigErrors", "closest"]


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The valid name nearest to a misspelt ``name``, or None when nothing is close.

    Case is ignored when matching, and the suggestion keeps the spelling of the valid name.
    """
    by_lower = {choice.lower(): choice for choice in choices}
    matches = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[matches[0]] if matches else None


def _show(value: object) -> str:
    try:
        text = repr(value)
    except RecursionError:  # a value nested too deep to print
        return f"<{type(value).__name__} nested too deep to show>"
    # A long value keeps its end too: a path's file name is what tells the user which one.
    return text if len(text) <= 80 else text[:38] + "..." + text[-39:]


class ConfigError(TrainprobeError, ValueError):
    """A configuration value trainprobe cannot accept.

    ``field`` is where the value was found, in the user's terms: a Python parameter such as
    ``ProfilerConfig.system_monitor_interval_millis`` or a request path such as
    ``DebugRuleConfigurations[0].RuleParameters.threshold``. ``allowed`` says what is valid.
    It subclasses ValueError, which is what the SageMaker SDK raises for bad input.
    """

    def __init__(
        self,
        field: str,
        value: object,
        allowed: str,
        *,
        suggestion: str | None = None,
    ) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        self.suggestion = suggestion
        message = f"{field}: {_show(value)} is not valid; {allowed}"
        if suggestion is not None:
            message += f". Did you mean {suggestion!r}?"
        super().__init__(message)

    def at(self, prefix: str) -> ConfigError:
        """The same error, with its field placed under ``prefix`` (e.g. a request path)."""
        if not prefix:
            return self
        field = f"{prefix}.{self.field}" if self.field else prefix
        return ConfigError(field, self.value, self.allowed, suggestion=self.suggestion)

    def problems(self) -> list[ConfigError]:
        """Each problem this error reports, one error apiece: here, itself alone."""
        return [self]


class ConfigErrors(ConfigError):
    """Every problem found in one request, raised together so they can be fixed together.

    ``errors`` holds each problem once (a ConfigErrors among those given is opened up); as a
    ConfigError, its ``field``, ``value`` and ``allowed`` are those of the first problem.
    """

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        if not errors:
            raise ValueError("ConfigErrors needs at least one error")
        self.errors: list[ConfigError] = []
        for error in errors:
            self.errors += error.problems()
        first = self.errors[0]
        self.field = first.field
        self.value = first.value
        self.allowed = first.allowed
        self.suggestion = first.suggestion
        lines = [f"{len(self.errors)} problem(s) in the configuration:"]
        lines += [f"  - {error}" for error in self.errors]
        ValueError.__init__(self, "\n".join(lines))

    def at(self, prefix: str) -> ConfigErrors:
        """The same problems, each with its field placed under ``prefix``."""
        return ConfigErrors([error.at(prefix) for error in self.errors])

    def problems(self) -> list[ConfigError]:
        """Each problem, one error apiece."""
        return list(self.errors)

    def __iter__(self) -> Iterator[ConfigError]:
        return iter(self.errors)

    def __len__(self) -> int:
        return len(self.errors)
