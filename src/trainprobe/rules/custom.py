"""Custom rules: load ``rule_to_invoke`` from the user's ``source`` file and build it.

``Rule.custom(..., source="custom_rules.py", rule_to_invoke="ImproperActivation",
rule_parameters={"threshold": "10.0"})`` names a Python file and a class in it, a subclass of
``trainprobe.rules.Rule``: SageMaker's template as it is, since ``from smdebug.rules.rule import
Rule`` is answered by trainprobe (``trainprobe.smdebug_names``, turned on before the file runs
unless a real smdebug is installed). The file is run as a module of its own; the class is built
with the trial and the parameters as keyword strings, as smdebug passes them.

Everything that can go wrong in the user's file (a syntax error, an exception at import or in
the constructor, a missing class) raises CustomRuleError, which names the file, the line and
the message; the runner turns it into status Error.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType

from trainprobe.analysis.trial import Trial
from trainprobe.config.errors import closest
from trainprobe.errors import RuleError
from trainprobe.rules.failure import describe_failure
from trainprobe.rules.rule import Rule
from trainprobe.smdebug_names import install as install_smdebug_names

__all__ = ["CustomRuleError", "build_custom_rule", "load_rule_class", "local_source_path"]


class CustomRuleError(RuleError):
    """The user's rule file could not be loaded, or its rule could not be built."""

    def __init__(self, source: str, message: str) -> None:
        self.source = source
        self.message = message
        super().__init__(f"custom rule from {source}: {message}")


def local_source_path(source: str) -> str:
    """The local file a ``source`` names (a path or a ``file://`` URL); CustomRuleError for
    anything else."""
    if source.startswith("file://"):
        source = source[len("file://") :]
    elif "://" in source:
        raise CustomRuleError(
            source, "only local files can be loaded for now; copy the rule file locally"
        )
    path = os.path.abspath(os.path.expanduser(source))
    if not os.path.isfile(path):
        raise CustomRuleError(source, f"no such file: {path}")
    return path


def _module_from_file(path: str) -> ModuleType:
    digest = hashlib.sha1(path.encode()).hexdigest()[:12]
    name = f"trainprobe_custom_rule_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CustomRuleError(path, "not a Python file")
    module = importlib.util.module_from_spec(spec)
    install_smdebug_names(by=f"the custom rule file {path}")
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as error:
        sys.modules.pop(name, None)
        if isinstance(error, KeyboardInterrupt | SystemExit):
            raise
        message = describe_failure(error, prefer_file=path)
        if isinstance(error, ModuleNotFoundError) and (error.name or "").startswith("smdebug"):
            message += (
                "; trainprobe answers smdebug's documented names only; "
                "the base class is `from smdebug.rules.rule import Rule`"
            )
        raise CustomRuleError(path, message) from error
    return module


def _rule_classes(module: ModuleType) -> list[str]:
    return [
        name
        for name, value in vars(module).items()
        if inspect.isclass(value) and issubclass(value, Rule) and value is not Rule
    ]


def load_rule_class(source: str, rule_to_invoke: str) -> type[Rule]:
    """The rule class ``rule_to_invoke`` defined in the file ``source``."""
    path = local_source_path(source)
    module = _module_from_file(path)
    found = getattr(module, rule_to_invoke, None)
    if found is None:
        known = _rule_classes(module)
        listed = f"the rules it defines: {', '.join(known)}" if known else "it defines no rule"
        message = f"no class {rule_to_invoke} in it; {listed}"
        suggestion = closest(rule_to_invoke, known)
        if suggestion:
            message += f". Did you mean {suggestion!r}?"
        raise CustomRuleError(path, message)
    if not (inspect.isclass(found) and issubclass(found, Rule)):
        message = (
            f"{rule_to_invoke} is not a rule: it must be a class that subclasses "
            "trainprobe.rules.Rule (`from trainprobe.rules import Rule`)"
        )
        if inspect.isclass(found) and any(
            base.__module__.startswith("smdebug.") for base in found.__mro__
        ):
            message += (
                "; it subclasses the Rule of the smdebug installed here, which trainprobe "
                "does not shadow: uninstall smdebug, or import Rule from trainprobe.rules"
            )
        raise CustomRuleError(path, message)
    return found


def build_custom_rule(
    rule_class: type[Rule],
    base_trial: Trial,
    parameters: Mapping[str, object],
    other_trials: Sequence[Trial] = (),
    *,
    source: str | None = None,
) -> Rule:
    """``rule_class(base_trial, **parameters)``, with ``other_trials=`` when there are any
    (a custom rule from a file gets its parameters as strings).

    Raises CustomRuleError naming the line in ``source`` when the constructor fails.
    """
    arguments: dict[str, object] = dict(parameters)
    if other_trials:
        arguments["other_trials"] = list(other_trials)
    try:
        construct: Callable[..., Rule] = rule_class
        return construct(base_trial, **arguments)
    except Exception as error:
        where = source or inspect.getsourcefile(rule_class) or rule_class.__name__
        message = describe_failure(error, prefer_file=where)
        if isinstance(error, TypeError) and parameters:
            message += f" (parameters given: {', '.join(sorted(parameters))})"
        raise CustomRuleError(where, f"{rule_class.__name__}(...) failed: {message}") from error
