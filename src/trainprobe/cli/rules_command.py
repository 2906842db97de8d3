"""``trainprobe rules list``, ``rules show NAME`` and ``rules run RULE PATH``.

``list`` and ``show`` explain the built-in rules. Everything shown comes from the catalogue
(``trainprobe.config.catalogue``); the examples are built with the same classes a user would
call, so they are valid by construction.

``run`` evaluates one rule, built-in or custom (``--source FILE``), on a job's saved tensors,
finished or still being written, and prints the verdict with its evidence. Exit status: 0 no
issues found, 1 issues found, 2 error (bad arguments, or the rule ended in Error), 130 stopped
with Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import textwrap
import time
from typing import Any

from trainprobe.config import catalogue, rule_configs
from trainprobe.config.actions import after_the_step
from trainprobe.config.catalogue.model import format_value
from trainprobe.config.catalogue.scope import scope_of
from trainprobe.config.errors import ConfigError
from trainprobe.config.rules import ProfilerRule, Rule
from trainprobe.jobs.operations.describe import layout_at
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner
from trainprobe.rules.verdict import ERROR, ISSUES_FOUND, NO_ISSUES_FOUND, Evaluation
from trainprobe.storage.job_layout import (
    ACTIONS_FILE,
    DEBUG_OUTPUT,
    EVALUATIONS_FILE,
    RULE_OUTPUT,
    STATUS_FILE,
    job_dir_of,
)

__all__ = ["job_layout", "register", "rerun_name", "run_list", "run_rule", "run_show"]

RERUN = "-rerun-"
"""Between a rule configuration's name and the count of an ad-hoc run written beside it."""

_RUN_EPILOG = """\
PATH is a job directory (holding debug-output/) or a tensor output directory (a hook's
out_dir). With a job directory, the rule's output goes to <job>/rule-output/<NAME>/; where
that folder already holds a verdict (the job's own rule, or an earlier run), it is left as it
is and this run writes beside it, to <NAME>-rerun-1/ (then -rerun-2, ...), the name its
verdict then takes, unless --replace says to write over it.
The rule follows a running job until it ends; --wait bounds the wait for the first tensors.

Actions given as --param action_json=... are carried out. Email uses TRAINPROBE_SMTP_HOST,
TRAINPROBE_SMTP_PORT, TRAINPROBE_SMTP_USER, TRAINPROBE_SMTP_PASSWORD and TRAINPROBE_SMTP_FROM;
SMS uses TRAINPROBE_SMS_GATEWAY_URL (and TRAINPROBE_SMS_GATEWAY_TOKEN).

exit status: 0 no issues found, 1 issues found, 2 error, 130 interrupted
"""


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rules list`` and ``rules show`` to the command line."""
    parser = subcommands.add_parser(
        "rules",
        help="list and explain the built-in rules",
        description="List the built-in debugging and profiler rules, or explain one.",
    )
    actions = parser.add_subparsers(dest="rules_action", metavar="ACTION")
    listing = actions.add_parser("list", help="a table of the built-in rules")
    listing.add_argument("--kind", choices=("debugging", "profiler"), help="only this kind")
    listing.add_argument(
        "--framework", choices=catalogue.FRAMEWORKS, help="only rules for this framework"
    )
    listing.set_defaults(run=run_list)
    show = actions.add_parser("show", help="a rule's parameters, defaults and examples")
    show.add_argument("name", metavar="NAME", help="a rule name, e.g. VanishingGradient")
    show.set_defaults(run=run_show)
    run = actions.add_parser(
        "run",
        help="evaluate a rule on a job's saved tensors",
        description="Evaluate one rule on a job's tensors (saved or being written) and print "
        "the verdict with its evidence.",
        epilog=_RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "rule",
        metavar="RULE",
        help="a built-in rule (e.g. VanishingGradient), or with --source the rule class to run",
    )
    run.add_argument("path", metavar="PATH", help="a job directory or a tensor output directory")
    run.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a rule parameter, as in RuleParameters (repeatable)",
    )
    run.add_argument("--source", metavar="FILE", help="a Python file defining the rule RULE")
    run.add_argument(
        "--every-step",
        action="store_true",
        help="keep evaluating after the first issue (built-in rules stop there by default)",
    )
    run.add_argument("--name", help="the rule configuration name (default: RULE)")
    run.add_argument(
        "--output",
        metavar="DIR",
        help="write the rule's output under DIR/<NAME>/ (default: <job>/rule-output/)",
    )
    run.add_argument(
        "--replace",
        action="store_true",
        help="write over an earlier verdict in DIR/<NAME>/ (by default this run writes beside "
        "it, to <NAME>-rerun-<N>/)",
    )
    run.add_argument(
        "--wait",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for the first tensors (default: 60)",
    )
    run.add_argument(
        "--quiet", action="store_true", help="print the verdict only, not each issue as found"
    )
    run.set_defaults(run=run_rule)

    def usage(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    parser.set_defaults(run=usage)


def run_list(args: argparse.Namespace) -> int:
    """Print one line per rule: name, kind, frameworks, description."""
    specs = [
        spec
        for spec in catalogue.all_rules()
        if (args.kind is None or spec.kind == args.kind)
        and (args.framework is None or args.framework in spec.frameworks)
    ]
    rows = [("NAME", "KIND", "FRAMEWORKS", "DESCRIPTION")]
    rows += [(s.name, s.kind, ",".join(s.frameworks), s.description) for s in specs]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), end=""
        )
        print("  " + row[3])
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Print everything about one rule; exit 2 with a suggestion when the name is unknown."""
    try:
        spec = catalogue.get(args.name, field="NAME")
    except ConfigError as error:
        print(f"trainprobe rules show: {error}", file=sys.stderr)
        return 2
    for line in describe(spec):
        print(line)
    return 0


def describe(spec: catalogue.RuleSpec) -> list[str]:
    """The text ``rules show`` prints for ``spec``."""
    call = f"rule_configs.{spec.sdk_name}()"
    lines = [
        f"{spec.name} ({spec.kind} rule)",
        f"  {spec.description}",
        f"  Python:     {call}",
        f"  Frameworks: {', '.join(spec.frameworks)}"
        + (f" (rule group {spec.group})" if spec.group else ""),
        "",
    ]
    scope = scope_of(spec.name)
    if scope is not None:
        lines += [
            "What it catches:",
            *_wrapped(scope.catches),
            "What it does not catch:",
            *_wrapped(scope.misses),
            "",
        ]
    if spec.in_training:
        lines += [
            "Judged inside the training:",
            *_wrapped(
                "The hook judges every step (not only saved ones), each mode against its own "
                "window, and carries out its action before the spiking update: SkipStep() (the "
                "update is not applied), Rollback(steps=50, lr_factor=1.0) (back to a snapshot "
                "at most `steps` updates old, learning rates times lr_factor) or StopTraining(); "
                "more than max_skips skips within max_skips_window updates stop the training. "
                "The command line's `trainprobe run --rule "
                f"{spec.name} --on-spike skip|rollback|stop` says the same."
            ),
            "",
        ]
    lines += _parameters(spec)
    for group in spec.one_of:
        lines += [f"  Give at least one of: {', '.join(group)}.", ""]
    if spec.runs:
        lines += [
            "  Also takes <Rule>_<parameter> for the rules it runs (see `trainprobe rules show "
            "<Rule>`):",
            "    " + ", ".join(rule.name for rule in spec.runs),
            "",
        ]
    if spec.collections:
        lines.append("Collections it reads (saved with these parameters unless you say otherwise):")
        for need in spec.collections:
            parameters = ", ".join(f"{key}={value}" for key, value in need.parameters)
            lines.append(f"  {need.name}" + (f"  ({parameters})" if parameters else ""))
        lines.append("")
    lines += ["Python example:", *_indent(_python_example(spec)), ""]
    lines += ["JSON example (CreateTrainingJob request):", *_indent(_json_example(spec))]
    return lines


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, width=96, initial_indent="  ", subsequent_indent="  ")


def _parameters(spec: catalogue.RuleSpec) -> list[str]:
    if not spec.parameters:
        return ["Parameters: none", ""]
    lines = ["Parameters:"]
    for parameter in spec.parameters:
        required = "required" if parameter.required else f"default {parameter.default_text()}"
        lines.append(f"  {parameter.name}  ({parameter.type.value}, {required})")
        lines.append(f"      {parameter.meaning}")
        lines.append(f"      valid: {parameter.allowed.removeprefix('expected ')}")
        for alternative in parameter.alternatives:
            value = format_value(alternative.value)
            lines.append(f"      note: another default, {value}, from {alternative.source}")
        if parameter.notes:
            lines.append(f"      note: {parameter.notes}")
        if not parameter.in_rulesconfig:
            lines.append("      note: sent only when given (smdebug-rulesconfig does not send it)")
        lines.append(f"      source: {parameter.source}")
    lines.append("")
    return lines


def _example_parameters(spec: catalogue.RuleSpec) -> dict[str, str]:
    values = {
        parameter.name: parameter.default_text()
        for parameter in spec.parameters
        if parameter.default is not None and parameter.in_rulesconfig
    }
    values.update(dict(spec.example))
    return values


def _profiler_arguments(spec: catalogue.RuleSpec) -> dict[str, Any]:
    if spec.runs:
        # Show the override form with the first rule it runs, at that rule's own default.
        first = spec.runs[0]
        return {f"{first.name}_{first.parameters[0].name}": first.parameters[0].default}
    return {
        parameter.name: parameter.default
        for parameter in spec.parameters
        if parameter.in_rulesconfig
    }


def _python_example(spec: catalogue.RuleSpec) -> list[str]:
    if spec.kind == "profiler":
        arguments = ", ".join(f"{k}={v!r}" for k, v in _profiler_arguments(spec).items())
        return [
            "from trainprobe.debugger import ProfilerRule, rule_configs",
            "",
            f"rule = ProfilerRule.sagemaker(rule_configs.{spec.sdk_name}({arguments}))",
        ]
    lines = [
        "from trainprobe.debugger import Rule, rule_configs",
        "",
        "rule = Rule.sagemaker(",
        f"    rule_configs.{spec.sdk_name}(),",
    ]
    parameters = _example_parameters(spec)
    if parameters:
        lines.append("    rule_parameters={")
        lines += [f"        {json.dumps(k)}: {json.dumps(v)}," for k, v in parameters.items()]
        lines.append("    },")
    if spec.in_training:
        lines.append("    actions=rule_configs.ActionList(rule_configs.SkipStep()),")
    lines.append(")")
    if spec.in_training:
        lines.append('rule.prepare_actions("my-training-job")  # the estimator does it at fit()')
    return lines


def _json_example(spec: catalogue.RuleSpec) -> list[str]:
    request: dict[str, Any]
    if spec.kind == "profiler":
        config = getattr(rule_configs, spec.sdk_name)(**_profiler_arguments(spec))
        profiler_rule = ProfilerRule.sagemaker(config)
        request = {"ProfilerRuleConfigurations": [profiler_rule.to_profiler_rule_config_dict()]}
    else:
        rule = Rule.sagemaker(
            rule_configs.base_config(spec.name),
            rule_parameters=_example_parameters(spec),
            actions=rule_configs.ActionList(rule_configs.SkipStep()) if spec.in_training else None,
        )
        rule.prepare_actions("my-training-job")
        request = {"DebugRuleConfigurations": [rule.to_debugger_rule_config_dict()]}
        if spec.collections:
            collections = [need.to_request_dict() for need in spec.collections]
            request["DebugHookConfig"] = {"CollectionConfigurations": collections}
    return json.dumps(request, indent=2).splitlines()


def _indent(lines: list[str]) -> list[str]:
    return [f"  {line}" if line else "" for line in lines]


def job_layout(path: str, wait: float = 0.0) -> tuple[str, str | None]:
    """(tensor output directory, job directory or None) for the PATH given to ``rules run``.

    A job directory holds ``debug-output/``; a tensor output holds ``collections/``. While PATH
    holds neither (a job that has not started writing), wait up to ``wait`` seconds to tell.
    """
    path = path.rstrip("/") or path
    if os.path.basename(path) == DEBUG_OUTPUT:
        return path, os.path.dirname(path) or "."
    deadline = time.monotonic() + wait
    while True:
        if job_dir_of(path) == (os.path.abspath(path), None):
            debug_output = layout_at(path).debug_output
            if os.path.isdir(debug_output):
                return debug_output, path
        if os.path.isdir(os.path.join(path, "collections")) or time.monotonic() >= deadline:
            return path, None
        time.sleep(0.1)


def _param_pairs(pairs: list[str]) -> dict[str, str]:
    parameters = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"--param {pair!r}: expected KEY=VALUE, e.g. --param threshold=1e-6")
        parameters[key.strip()] = value
    return parameters


def rerun_name(root: str, name: str) -> str:
    """The folder under ``root`` an ad-hoc run of rule configuration ``name`` writes to:
    ``name`` while no run has written there, else the first free ``name-rerun-<N>``."""
    if not os.path.exists(os.path.join(root, name)):
        return name
    count = 1
    while os.path.exists(os.path.join(root, f"{name}{RERUN}{count}")):
        count += 1
    return f"{name}{RERUN}{count}"


def _clear(directory: str) -> None:
    """Remove an earlier run's rule output files from ``directory`` (nothing else in it)."""
    for name in (EVALUATIONS_FILE, ACTIONS_FILE, STATUS_FILE):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(directory, name))


def _definition(args: argparse.Namespace, name: str | None) -> RuleDefinition:
    parameters = _param_pairs(args.param)
    if args.source:
        return RuleDefinition.for_custom(args.source, args.rule, parameters, name=name)
    # SkipStep and Rollback act inside a training's step: after it, there is nothing to do.
    actions = after_the_step(parameters.pop("action_json", None))
    return RuleDefinition.for_builtin(args.rule, parameters, name=name, actions=actions)


def run_rule(args: argparse.Namespace) -> int:
    """Evaluate the rule and print its verdict; the exit status says what it found."""
    try:
        definition = _definition(args, args.name)
    except ValueError as error:
        print(f"trainprobe rules run: {error}", file=sys.stderr)
        return 2
    if args.wait < 0:
        print("trainprobe rules run: --wait: expected seconds >= 0", file=sys.stderr)
        return 2
    trial_path, job = job_layout(args.path, wait=args.wait)
    root = args.output or (os.path.join(job, RULE_OUTPUT) if job is not None else None)
    if root is not None and args.replace:
        _clear(os.path.join(root, definition.name))
    elif root is not None:
        folder = rerun_name(root, definition.name)
        if folder != definition.name:
            print(
                f"{os.path.join(root, definition.name)} holds an earlier verdict, left as it is; "
                f"this run writes {os.path.join(root, folder)} (--replace writes over it)",
                flush=True,
            )
            definition = _definition(args, folder)

    def show(name: str, evaluation: Evaluation) -> None:
        if evaluation.result == ISSUES_FOUND and not args.quiet:
            print(f"{evaluation.where}: issue found", flush=True)
            for item in evaluation.evidence:
                print(f"  - {item.describe()}", flush=True)

    runner = RuleRunner(
        definition,
        trial_path,
        output_dir=root,
        every_step=True if args.every_step else None,
        no_data_timeout=args.wait,
        on_evaluation=show,
    )
    verdict = runner.run()[0]
    for line in verdict.lines():
        print(line)
    if root is not None:
        print(f"  Output: {os.path.join(root, definition.name)}")
    if verdict.status == NO_ISSUES_FOUND:
        return 0
    if verdict.status == ISSUES_FOUND:
        return 1
    return 2 if verdict.status == ERROR else 130
