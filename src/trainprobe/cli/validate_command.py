"""``trainprobe validate job.json``: check a CreateTrainingJob request and say what would run.

It runs the checks ``trainprobe jobs create`` runs (``trainprobe.jobs.operations.admission``),
without creating anything, so it accepts exactly what create would start: the request's content, its
name against the job store, its outputs and entry point on this machine (relative paths are
taken from the current directory). A valid request prints each rule with its effective
parameters, each collection with its save configuration per mode, and the profiling ranges; an
invalid one prints every problem, each with its path in the request, and exits 1. A file that
cannot be read exits 2.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from trainprobe.capture.hook_config_file import parse_hook_config
from trainprobe.capture.save_config import SaveConfigMode
from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.metrics_config import StepWindow, TimeWindow
from trainprobe.config.profiler_config import ProfilerConfig
from trainprobe.config.request_json import RequestFileError, load_request
from trainprobe.config.rules import RuleBase
from trainprobe.config.training_job import TrainingJobRequest
from trainprobe.jobs.operations.admission import admit_training_job
from trainprobe.jobs.store import STORE_FILE, JobStore, trainprobe_home
from trainprobe.storage.modes import ModeKeys

__all__ = ["describe", "register", "run"]


def register(subcommands: Any) -> None:
    """Add ``validate`` to the command line."""
    parser = subcommands.add_parser(
        "validate",
        help="check a CreateTrainingJob request file and print what would run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("request", help="the request file: job.json or file://job.json")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Validate the request file named in ``args``; 0 when valid, 1 when not, 2 when the file
    cannot be read."""
    try:
        admission = admit_training_job(load_request(args.request), store=_existing_store())
        lines = describe(admission.request)
    except RequestFileError as error:
        print(f"trainprobe validate: {error}")
        return 2
    except ConfigErrors as errors:
        print(f"{args.request} is not valid: {len(errors)} problem(s)")
        for problem in errors:
            print(f"  - {problem}")
        return 1
    except ConfigError as error:
        print(f"{args.request} is not valid: {error}")
        return 1
    print("\n".join(lines))
    return 0


def _existing_store() -> JobStore | None:
    """The job store, to look the name up in, when there is one (validating creates none)."""
    path = os.path.join(trainprobe_home(), STORE_FILE)
    return JobStore(path) if os.path.isfile(path) else None


def describe(request: TrainingJobRequest) -> list[str]:
    """What the job would run, as lines of text."""
    lines = [f"Training job {request.training_job_name}: valid."]
    lines += _describe_hook(request)
    lines += _describe_rules("Debugging rules", request.debug_rules)
    lines += _unsaved_collections(request)
    lines += _describe_profiler(request.profiler_config)
    rules: list[RuleBase] = list(request.profiler_rules)
    lines += _describe_rules("Profiler rules", rules)
    return lines


def _describe_hook(request: TrainingJobRequest) -> list[str]:
    if request.debug_hook_config is None:
        return ["", "Tensors: no DebugHookConfig; the hook saves its default collection (losses)."]
    hook = parse_hook_config(request.debug_hook_config._to_request_dict())
    lines = ["", "Tensors saved:"]
    if not hook.collections:
        lines.append("  the default collection (losses), every 500 steps")
    for collection in hook.collections:
        lines.append(f"  collection {collection.name}")
        if collection.include_regex:
            lines.append(f"    tensors matching: {', '.join(collection.include_regex)}")
        if collection.reduction_config is not None:
            lines.append(f"    reductions: {collection.reduction_config.reductions_string}")
        save_config = collection.save_config
        for mode in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT, ModeKeys.GLOBAL):
            schedule = (
                save_config.get_save_config(mode) if save_config is not None else SaveConfigMode()
            )
            lines.append(f"    {mode.name.lower():8} {_schedule(schedule)}")
    return lines


def _unsaved_collections(request: TrainingJobRequest) -> list[str]:
    """Warnings for collections a built-in rule reads that the job does not save."""
    hook = request.debug_hook_config
    saved = {c.name for c in (hook.collection_configs or [])} if hook is not None else set()
    lines = []
    for rule in request.debug_rules:
        for need in rule.spec.collections if rule.spec is not None else ():
            if need.name not in saved:
                lines.append(
                    f"  warning: {rule.name} reads collection {need.name}, which this job does not"
                    f" save; add it to DebugHookConfig.CollectionConfigurations"
                )
    return lines


def _schedule(mode: SaveConfigMode) -> str:
    text = f"every {mode.save_interval} steps from step {mode.start_step}"
    if mode.end_step is not None:
        text += f" until step {mode.end_step}"
    if mode.save_steps:
        text += f", and at steps {', '.join(str(step) for step in mode.save_steps)}"
    return text


def _describe_rules(title: str, rules: list[Any]) -> list[str]:
    if not rules:
        return []
    lines = ["", f"{title} ({len(rules)}):"]
    for rule in rules:
        parameters = rule.effective_parameters
        kind = "built-in" if rule.spec is not None else "custom"
        invoked = (rule.rule_parameters or {}).get("rule_to_invoke", rule.name)
        lines.append(f"  {rule.name} ({kind} {invoked})")
        for key, value in parameters.items():
            lines.append(f"    {key} = {value!r}")
    return lines


def _describe_profiler(config: ProfilerConfig | None) -> list[str]:
    plan = (config or ProfilerConfig()).profiling_plan()
    if not plan.enabled:
        return ["", "Profiling: disabled."]
    lines = ["", f"Profiling: system metrics every {plan.system_monitor_interval_millis} ms"]
    windows = {
        "detailed profiling": plan.detailed,
        "data loader profiling": plan.dataloader,
        "Python profiling": plan.python,
    }
    for title, window in windows.items():
        if window is None:
            lines.append(f"  {title}: off")
            continue
        lines.append(f"  {title}: {_window(window)}")
    if plan.python is not None and plan.python_profiler is not None:
        profiler = plan.python_profiler.value
        timer = f", timer {plan.cprofile_timer.value}" if plan.cprofile_timer else ""
        lines.append(f"    with {profiler}{timer}")
    return lines


def _window(window: StepWindow | TimeWindow) -> str:
    if isinstance(window, StepWindow):
        if window.start_step is None:
            return f"{window.num_steps} step(s) from the step at which the configuration is read"
        last = window.start_step + window.num_steps - 1
        if last == window.start_step:
            return f"step {window.start_step}"
        return f"steps {window.start_step}-{last}"
    length = "one step" if window.duration is None else f"{window.duration} s"
    start = (
        "when the configuration is read"
        if window.start_unix_time is None
        else f"unix time {window.start_unix_time}"
    )
    return f"{length} from {start}"
