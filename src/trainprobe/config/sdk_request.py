"""What the SageMaker SDK adds to a request before it sends it, for clients that play its part.

SageMaker's API runs a request as it is; the SDK's estimator fills it in first. ``trainprobe
run`` (and an estimator) do the same with these functions:

- ``job_name_from_base``: ``<base>-YYYY-MM-DD-HH-MM-SS-mmm``, as the SDK names jobs;
- ``with_rule_collections``: the collections each debugging rule needs, added to the hook's
  ``CollectionConfigurations`` (a collection the request configures itself is kept as it is);
- ``with_default_profiler_rule``: ProfilerReport when no profiler rule is given and profiling
  is on (debugging rules or not, as SageMaker Debugger's SDK did).
"""

from __future__ import annotations

import copy
import datetime
import re
from collections.abc import Mapping
from typing import Any

from trainprobe.config.rules import Rule, get_default_profiler_rule

__all__ = ["job_name_from_base", "with_default_profiler_rule", "with_rule_collections"]

_NAME_LIMIT = 63
_NOT_IN_NAMES = re.compile(r"[^a-zA-Z0-9-]+")


def job_name_from_base(base: str, now: datetime.datetime | None = None) -> str:
    """A job name from ``base`` and the time (UTC, to the millisecond), as the SDK makes them."""
    now = now or datetime.datetime.now(tz=datetime.timezone.utc)
    stamp = now.strftime("%Y-%m-%d-%H-%M-%S-") + f"{now.microsecond // 1000:03d}"
    cleaned = _NOT_IN_NAMES.sub("-", base).strip("-") or "job"
    cleaned = cleaned[: _NAME_LIMIT - len(stamp) - 1].rstrip("-")
    return f"{cleaned}-{stamp}"


def with_rule_collections(request: Mapping[str, Any]) -> dict[str, Any]:
    """``request`` with each debugging rule's collections in DebugHookConfig."""
    result = copy.deepcopy(dict(request))
    rules = result.get("DebugRuleConfigurations") or []
    if not rules:
        return result
    hook = result.setdefault("DebugHookConfig", {})
    collections = hook.setdefault("CollectionConfigurations", [])
    present = {entry.get("CollectionName") for entry in collections}
    for entry in rules:
        for collection in Rule.from_request_dict(entry).collection_configs or []:
            if collection.name not in present:
                collections.append(collection.to_request_dict())
                present.add(collection.name)
    return result


def with_default_profiler_rule(request: Mapping[str, Any]) -> dict[str, Any]:
    """``request`` with ProfilerReport added when profiling is on and no profiler rule is
    given, debugging rules or not (as SageMaker Debugger's SDK did)."""
    result = copy.deepcopy(dict(request))
    profiler = result.get("ProfilerConfig")
    profiling = isinstance(profiler, Mapping) and not profiler.get("DisableProfiler", False)
    if profiling and not result.get("ProfilerRuleConfigurations"):
        rule = get_default_profiler_rule()
        result["ProfilerRuleConfigurations"] = [rule.to_profiler_rule_config_dict()]
    return result
