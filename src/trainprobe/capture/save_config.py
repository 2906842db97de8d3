"""When tensors are saved: a schedule per mode (TRAIN, EVAL, PREDICT, GLOBAL), as smdebug has it.

A ``SaveConfigMode`` saves a step when the step is listed in ``save_steps``, *or* when it lies in
``[start_step, end_step)`` and is a multiple of ``save_interval``. The two are a union:
``save_steps`` adds steps, it does not replace the interval. The modulo is taken on the step
itself, not on the distance from ``start_step``, so ``start_step=150, save_interval=100`` saves
200, 300, ... The step tested is the step *within the current mode* (the mode step).

A ``SaveConfig`` holds one ``SaveConfigMode`` per mode. Modes left out stay open (None) until the
config is merged with a default (a collection's config with the hook's), which fills them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from trainprobe.capture.json_form import JsonForm
from trainprobe.config.errors import ConfigError
from trainprobe.storage.modes import ModeKeys

__all__ = [
    "DEFAULT_SAVE_INTERVAL",
    "SaveConfig",
    "SaveConfigMode",
    "parse_step_list",
]

DEFAULT_SAVE_INTERVAL = 500
"""Steps between saves when nothing else is said (SageMaker's default)."""

_STEP_KEYS = ("save_interval", "save_steps", "start_step", "end_step")


def _count(field: str, value: object, minimum: int) -> int:
    """``value`` (an int or a string of digits) as an int >= ``minimum``, or a ConfigError."""
    allowed = f"an integer >= {minimum}"
    if isinstance(value, bool):
        raise ConfigError(field, value, allowed)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        number = int(value.strip())
    else:
        raise ConfigError(field, value, allowed)
    if number < minimum:
        raise ConfigError(field, value, allowed)
    return number


def parse_step_list(field: str, value: object) -> tuple[int, ...]:
    """Steps given as a list of ints or a comma-separated string ("1,2,3"), sorted, unique."""
    if value is None:
        return ()
    items: Iterable[object]
    if isinstance(value, str):
        items = [item for item in (part.strip() for part in value.split(",")) if item]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    else:
        raise ConfigError(field, value, "a list of integers >= 0 or a string like '1,2,3'")
    return tuple(sorted({_count(field, item, 0) for item in items}))


class SaveConfigMode:
    """The save schedule of one mode: an interval within [start_step, end_step), plus listed steps.

    Every argument may be given as a string (as SageMaker sends it). Immutable once built.
    """

    __slots__ = ("_steps", "end_step", "save_interval", "save_steps", "start_step")

    def __init__(
        self,
        save_interval: int | str | None = None,
        start_step: int | str | None = None,
        end_step: int | str | None = None,
        save_steps: Iterable[int] | str | None = None,
    ) -> None:
        self.save_interval = (
            DEFAULT_SAVE_INTERVAL
            if save_interval is None
            else _count("SaveConfigMode.save_interval", save_interval, 1)
        )
        self.start_step = (
            0 if start_step is None else _count("SaveConfigMode.start_step", start_step, 0)
        )
        self.end_step = None if end_step is None else _count("SaveConfigMode.end_step", end_step, 0)
        steps = parse_step_list("SaveConfigMode.save_steps", save_steps)
        self.save_steps = list(steps)
        self._steps = frozenset(steps)

    def should_save_step(self, step: int) -> bool:
        """Whether ``step`` (a mode step) is saved under this schedule."""
        if step in self._steps:
            return True
        if step < self.start_step or (self.end_step is not None and step >= self.end_step):
            return False
        return step % self.save_interval == 0

    def to_json_dict(self) -> dict[str, Any]:
        """The schedule as the collections file writes it."""
        return {
            "save_interval": self.save_interval,
            "save_steps": list(self.save_steps),
            "start_step": self.start_step,
            "end_step": self.end_step,
        }

    @classmethod
    def from_dict(
        cls, params: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
    ) -> SaveConfigMode:
        """A schedule from ``save_interval``/``save_steps``/``start_step``/``end_step`` keys.

        Keys missing from ``params`` are taken from ``defaults``, then from the built-in defaults.
        """
        unknown = [key for key in params if key not in _STEP_KEYS]
        if unknown:
            raise ConfigError("SaveConfigMode", unknown[0], "one of " + ", ".join(_STEP_KEYS))
        merged = {**(defaults or {}), **params}
        return cls(
            save_interval=merged.get("save_interval"),
            start_step=merged.get("start_step"),
            end_step=merged.get("end_step"),
            save_steps=merged.get("save_steps"),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaveConfigMode):
            return NotImplemented
        return self.to_json_dict() == other.to_json_dict()

    def __hash__(self) -> int:
        return hash((self.save_interval, self.start_step, self.end_step, tuple(self.save_steps)))

    def __repr__(self) -> str:
        return (
            f"SaveConfigMode(save_interval={self.save_interval}, start_step={self.start_step}, "
            f"end_step={self.end_step}, save_steps={self.save_steps})"
        )


def _mode_key(key: object) -> ModeKeys:
    if isinstance(key, ModeKeys):
        return key
    if isinstance(key, str) and key.upper() in ModeKeys.__members__:
        return ModeKeys[key.upper()]
    names = ", ".join(mode.name for mode in ModeKeys)
    raise ConfigError("SaveConfig.mode_save_configs", key, f"keys are modes: {names}")


class SaveConfig(JsonForm):
    """The save schedule of every mode.

    Either give one schedule for all modes (``save_interval``, ``start_step``, ``end_step``,
    ``save_steps``) or a ``mode_save_configs`` mapping from mode to ``SaveConfigMode``; modes the
    mapping leaves out are filled from the hook's schedule when the two are merged.
    """

    def __init__(
        self,
        mode_save_configs: Mapping[Any, SaveConfigMode | Mapping[str, Any] | None] | None = None,
        save_interval: int | str | None = None,
        start_step: int | str | None = None,
        end_step: int | str | None = None,
        save_steps: Iterable[int] | str | None = None,
    ) -> None:
        self._modes: dict[ModeKeys, SaveConfigMode | None]
        if mode_save_configs is None:
            one = SaveConfigMode(save_interval, start_step, end_step, save_steps)
            self._modes = dict.fromkeys(ModeKeys, one)
            return
        if not isinstance(mode_save_configs, Mapping):
            raise ConfigError(
                "SaveConfig.mode_save_configs",
                mode_save_configs,
                "a dictionary from mode to SaveConfigMode",
            )
        self._modes = dict.fromkeys(ModeKeys)
        for key, value in mode_save_configs.items():
            mode = _mode_key(key)
            if value is None or isinstance(value, SaveConfigMode):
                self._modes[mode] = value
            elif isinstance(value, Mapping):
                self._modes[mode] = SaveConfigMode.from_dict(value)
            else:
                raise ConfigError(
                    f"SaveConfig.mode_save_configs[{mode.name}]", value, "a SaveConfigMode"
                )

    @property
    def mode_save_configs(self) -> dict[ModeKeys, SaveConfigMode | None]:
        """The schedule of each mode (None for a mode still to be filled by a merge)."""
        return dict(self._modes)

    def get_save_config(self, mode: ModeKeys) -> SaveConfigMode:
        """The schedule of ``mode``; the default schedule if that mode was left open."""
        config = self._modes[mode]
        return config if config is not None else SaveConfigMode()

    def set_save_config(self, mode: ModeKeys, save_config_mode: SaveConfigMode) -> None:
        """Replace the schedule of one mode."""
        if not isinstance(save_config_mode, SaveConfigMode):
            raise ConfigError(f"SaveConfig[{mode.name}]", save_config_mode, "a SaveConfigMode")
        self._modes[mode] = save_config_mode

    def should_save_step(self, mode: ModeKeys, step: int) -> bool:
        """Whether mode step ``step`` of ``mode`` is saved."""
        return self.get_save_config(mode).should_save_step(step)

    def is_complete(self) -> bool:
        """Whether every mode has its own schedule (nothing left for a merge to fill)."""
        return all(config is not None for config in self._modes.values())

    def merged_with(self, default: SaveConfig) -> SaveConfig:
        """This config with each open mode taken from ``default`` (smdebug's merge)."""
        filled = {
            mode: config if config is not None else default.get_save_config(mode)
            for mode, config in self._modes.items()
        }
        return SaveConfig(mode_save_configs=filled)

    def merge_default_save_config(self, default: SaveConfig) -> None:
        """Fill, in place, each open mode from ``default`` (smdebug's method name)."""
        self._modes = dict(self.merged_with(default)._modes)

    def to_json_dict(self) -> dict[str, Any]:
        """``{"TRAIN": {...}, "EVAL": {...}, "PREDICT": {...}, "GLOBAL": {...}}``."""
        return {
            mode.name: (config.to_json_dict() if config is not None else None)
            for mode, config in self._modes.items()
        }

    @classmethod
    def from_dict(cls, params: Mapping[Any, Any] | None) -> SaveConfig | None:
        """Read ``to_json_dict``'s shape (mode names or ModeKeys to schedules or dicts)."""
        if params is None:
            return None
        return cls(mode_save_configs=params)

    @classmethod
    def parse(cls, value: object) -> SaveConfig:
        """A SaveConfig from None (the default), a SaveConfig, a SaveConfigMode or a mapping."""
        if value is None:
            return cls()
        if isinstance(value, SaveConfig):
            return value
        if isinstance(value, SaveConfigMode):
            return cls(mode_save_configs=dict.fromkeys(ModeKeys, value))
        if isinstance(value, Mapping):
            return cls(mode_save_configs=value)
        raise ConfigError(
            "save_config",
            value,
            "a SaveConfig, a SaveConfigMode or a dict of mode to SaveConfigMode",
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaveConfig):
            return NotImplemented
        return self._modes == other._modes

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{mode.name}: {config!r}" for mode, config in self._modes.items())
        return f"SaveConfig({{{inner}}})"
