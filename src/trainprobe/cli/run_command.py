"""``trainprobe run SCRIPT [OPTIONS] -- [SCRIPT ARGS]``: run a training as a debugged job.

It turns its options into the SDK's objects (Rule, ProfilerRule, DebuggerHookConfig,
ProfilerConfig) and builds CreateTrainingJob from them with the estimator's builder
(``trainprobe.config.sdk_request``: the rules' collections added to the hook's configuration, and
ProfilerReport when no profiler rule is given and profiling is on), starts the job, and follows
it: the training's output as it comes, and ``[trainprobe]`` lines for the job's status, the step
and each rule's status as it changes. On a terminal (unless ``--plain``) the ``[trainprobe]``
lines give way to a live panel under the training's output: step, steps/s, the latest saved
loss, each rule's status and the host's utilisation (``trainprobe.cli.job_follower``).
At the end it prints each rule's verdict with its evidence, where the outputs are, and the report's
path once there is one. Ctrl-C stops the job (a second Ctrl-C leaves it to finish on its own).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from trainprobe import settings
from trainprobe.config import catalogue, rule_configs
from trainprobe.config.actions import Action, Rollback, SkipStep, StopTraining
from trainprobe.config.errors import ConfigError, closest
from trainprobe.config.framework_profile import FrameworkProfile
from trainprobe.config.hook_config import CollectionConfig, DebuggerHookConfig
from trainprobe.config.profiler_config import ProfilerConfig
from trainprobe.config.request_shapes import MAX_INSTANCE_COUNT
from trainprobe.config.rules import ProfilerRule, Rule
from trainprobe.config.sdk_request import (
    ContainerCommand,
    TrainingJobSettings,
    create_training_job_request,
    job_name_from_base,
)
from trainprobe.jobs import JobStore, create_training_job
from trainprobe.storage import files

__all__ = ["build_request", "register", "run", "settings_of"]

log = logging.getLogger(__name__)

_EPILOG = """\
Options after SCRIPT are trainprobe's when a `--` follows them (or when, with no `--`, every
one of them is a trainprobe option); what follows `--` goes to the script.

  trainprobe run train.py -- --epochs 3
  trainprobe run train.py --rule ExplodingTensor --rule LossNotDecreasing:num_steps=20 \\
      --save-interval 10 --stop-on-issue -- --epochs 3
  trainprobe run train.py --rule LossSpike:sigma=5 --on-spike skip -- --epochs 3

--rule takes a built-in rule name and its parameters, NAME[:param=value,...] (a value may
hold commas: collection_names=weights,gradients); name=... sets the rule's configuration name.
--collection names a collection the hook saves besides the rules' own (DebugHookConfig's
CollectionConfigurations), the same way: --collection trees:save_interval=5 for TreeDepth on an
XGBoost training, --collection labels --collection predictions for ClassImbalance and Confusion.
LossSpike and GradientNormSpike are judged by the hook inside the training, on every step;
--on-spike says what it does at a spike, before the update: skip (SkipStep: the update is not
applied), rollback[:steps=N,lr_factor=F] (Rollback: back to a snapshot at most N updates old,
learning rates times F), or stop (StopTraining). It replaces --stop-on-issue for those rules.
Profiler rules (ProfilerReport, the default unless a profiler rule or --no-profiler is given,
or --rule ProfilerReport, --rule CPUBottleneck, ...) run on the system and framework metrics;
ProfilerReport writes rule-output/<its name>/profiler-output/profiler-report.html, whose path is
printed at the end.

On a terminal the progress is a live panel under the training's output: step, steps/s, the
latest saved loss, each rule's status, CPU, memory and GPU use. --plain (or a stdout that is not
a terminal, or TERM=dumb) prints [trainprobe] lines instead.

exit status: 0 the job completed or was stopped; 1 the training failed, or (with
--fail-on-issue) a rule found an issue; 2 bad arguments; 130 stopped with Ctrl-C
"""


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rule",
        action="append",
        default=[],
        metavar="NAME[:param=value,...]",
        help="a built-in rule to run on the job (repeatable)",
    )
    parser.add_argument(
        "--collection",
        action="append",
        default=[],
        metavar="NAME[:param=value,...]",
        help="a collection for the hook to save, with its CollectionParameters (repeatable), "
        "e.g. trees for TreeDepth",
    )
    parser.add_argument(
        "--stop-on-issue",
        action="store_true",
        help="give every debugging rule a StopTraining action: stop the training at its issue",
    )
    parser.add_argument(
        "--on-spike",
        metavar="ACTION",
        help="what LossSpike and GradientNormSpike do at a spike, inside the step: skip, "
        "rollback[:steps=N,lr_factor=F] or stop",
    )
    parser.add_argument(
        "--save-interval",
        type=int,
        metavar="STEPS",
        help="save tensors every STEPS steps (default: SageMaker's 500; the rules' collections "
        "too)",
    )
    parser.add_argument(
        "--no-profiler", action="store_true", help="no system monitoring, no step timeline"
    )
    parser.add_argument(
        "--framework-profile",
        action="store_true",
        help="SageMaker's FrameworkProfile() defaults on top of the step timeline: detailed "
        "profiling at step 5, the data loader at step 7, Python at steps 9-11",
    )
    parser.add_argument(
        "--profiler-interval-ms",
        type=int,
        default=500,
        metavar="MS",
        help="system monitoring interval: 100, 200, 500, 1000, 5000 or 60000 (default 500)",
    )
    parser.add_argument(
        "--output",
        "--output-path",
        metavar="DIR",
        help="output root: a directory or s3://bucket/prefix (default: $TRAINPROBE_HOME/output)",
    )
    parser.add_argument("--name", help="the job's name (default: <script>-<time>)")
    parser.add_argument(
        "--hosts",
        type=int,
        default=1,
        metavar="N",
        help="hosts algo-1 ... algo-N on this machine (InstanceCount), each a torchrun node "
        "with its own system monitor; more than 1 runs the script with torch.distributed "
        "across them, and every host's worker saves tensors",
    )
    parser.add_argument(
        "--max-run",
        type=int,
        metavar="SECONDS",
        help="stop the training after SECONDS (MaxRuntimeInSeconds)",
    )
    parser.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="set for the training"
    )
    parser.add_argument(
        "--rule-executor",
        metavar="URL",
        help="where the rules run: local (processes beside the training, the default) or "
        "dask://HOST:PORT, a task each on that Dask cluster ($TRAINPROBE_RULE_EXECUTOR)",
    )
    parser.add_argument(
        "--fail-on-issue",
        action="store_true",
        help="exit with status 1 when a rule found an issue",
    )
    parser.add_argument("--quiet", action="store_true", help="do not show the training's output")
    parser.add_argument(
        "--plain",
        action="store_true",
        help="print [trainprobe] progress lines, not the live panel (the default when stdout "
        "is not a terminal)",
    )


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run`` to the command line."""
    parser = subcommands.add_parser(
        "run",
        help="run a training script as a debugged job",
        description="Run a training script with the hook, the system monitor and the rules, "
        "follow it, and print the rules' verdicts.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_options(parser)
    parser.add_argument("script", metavar="SCRIPT", help="the training script")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    options = argparse.ArgumentParser(prog="trainprobe run", add_help=False)
    _add_options(options)
    parser.set_defaults(run=lambda args: run(args, options))


def _split_arguments(args: argparse.Namespace, options: argparse.ArgumentParser) -> None:
    """Options after SCRIPT before a ``--`` are trainprobe's, the rest the script's. Without a
    ``--``, they are trainprobe's only when all of them are trainprobe options."""
    rest = list(args.script_args)
    if "--" in rest:
        cut = rest.index("--")
        options.parse_args(rest[:cut], namespace=args)
        rest = rest[cut + 1 :]
    elif rest and rest[0].startswith("-"):
        _, unknown = options.parse_known_args(rest, namespace=argparse.Namespace())
        if not unknown:
            options.parse_args(rest, namespace=args)
            rest = []
    args.script_args = rest


def _name_and_parameters(
    text: str, field: str = "--rule", example: str = "ExplodingTensor"
) -> tuple[str, dict[str, str]]:
    """``NAME[:param=value,...]`` (a --rule or --collection option, ``field``) as its name and
    parameters; a value may hold commas."""
    name, _, listed = text.partition(":")
    parameters: dict[str, str] = {}
    last: str | None = None
    for piece in listed.split(",") if listed else []:
        key, equals, value = piece.partition("=")
        if equals and key.strip():
            last = key.strip()
            parameters[last] = value
        elif last is not None:
            parameters[last] += "," + piece
        else:
            raise ConfigError(field, text, f"NAME[:param=value,...], e.g. {example}")
    return name.strip(), parameters


def _collections(texts: list[str]) -> list[CollectionConfig]:
    """The ``--collection`` options as the hook's CollectionConfigs."""
    collections: list[CollectionConfig] = []
    for text in texts:
        name, parameters = _name_and_parameters(text, "--collection", "trees:save_interval=5")
        if not name:
            raise ConfigError("--collection", text, "NAME[:param=value,...], e.g. trees")
        try:
            collections.append(CollectionConfig(name, parameters or None))
        except ConfigError as error:
            raise ConfigError("--collection", text, _problems(error)) from None
    return collections


def _problems(error: ConfigError) -> str:
    """What was wrong, each problem with its field, for an error re-raised under an option."""
    return "; ".join(f"{each.field}: {each.allowed}" for each in error.problems())


_ON_SPIKE = "skip, stop, or rollback[:steps=N,lr_factor=F]"


def _spike_action(text: str | None) -> Action | None:
    """The action ``--on-spike`` names (None when it is not given)."""
    if text is None:
        return None
    name, parameters = _name_and_parameters(text, "--on-spike", "rollback:steps=20")
    if name == "skip" and not parameters:
        return SkipStep()
    if name == "stop" and not parameters:
        return StopTraining()
    if name == "rollback":
        unknown = set(parameters) - {"steps", "lr_factor"}
        if unknown:
            raise ConfigError(
                "--on-spike", text, f"rollback takes steps and lr_factor; {_ON_SPIKE}"
            )
        try:
            return Rollback(**parameters)
        except ConfigError as error:
            raise ConfigError("--on-spike", text, error.allowed) from None
    raise ConfigError(
        "--on-spike", text, _ON_SPIKE, suggestion=closest(name, ("skip", "rollback", "stop"))
    )


def _with_save_interval(rule: Rule, save_interval: int | None) -> Rule:
    """``rule`` with ``--save-interval`` for each of its collections that sets its own."""
    if save_interval is None:
        return rule
    rule.collection_configs = [
        CollectionConfig(
            collection.name, {**collection.parameters, "save_interval": str(save_interval)}
        )
        if collection.parameters and "save_interval" in collection.parameters
        else collection
        for collection in rule.collection_configs or []
    ]
    return rule


def _rules(args: argparse.Namespace) -> list[Rule | ProfilerRule]:
    """The ``--rule`` options as the SDK's rules, with their actions (``--stop-on-issue``,
    ``--on-spike``) and ``--save-interval`` for their collections."""
    rules: list[Rule | ProfilerRule] = []
    used: set[str] = set()
    on_spike = _spike_action(args.on_spike)
    if on_spike is not None and not any(
        catalogue.get(_name_and_parameters(text)[0], field="--rule").in_training
        for text in args.rule
    ):
        raise ConfigError(
            "--on-spike",
            args.on_spike,
            "a --rule LossSpike or --rule GradientNormSpike for it to act for",
        )
    for text in args.rule:
        name, parameters = _name_and_parameters(text)
        spec = catalogue.get(name, field="--rule")
        configured = parameters.pop("name", None) or spec.name
        suffix = 2
        while configured in used:
            configured, suffix = f"{spec.name}-{suffix}", suffix + 1
        used.add(configured)
        if spec.kind == "profiler":
            try:
                config = getattr(rule_configs, spec.sdk_name)(**parameters)
            except TypeError as error:
                raise ConfigError("--rule", text, f"parameters of {spec.name}: {error}") from None
            rules.append(ProfilerRule.sagemaker(config, name=configured))
            continue
        action: Action | None = StopTraining() if args.stop_on_issue else None
        if spec.in_training and on_spike is not None:
            action = _spike_action(args.on_spike)  # one action object per rule
        rule = Rule.sagemaker(
            rule_configs.base_config(spec.name),
            name=configured,
            rule_parameters=parameters,
            actions=action,
        )
        rules.append(_with_save_interval(rule, args.save_interval))
    return rules


def _environment(pairs: list[str]) -> dict[str, str]:
    environment = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise ConfigError("--env", pair, "KEY=VALUE")
        environment[key] = value
    return environment


def _hook_config(args: argparse.Namespace) -> DebuggerHookConfig:
    """The hook's configuration: ``--save-interval``, every host's worker saving with
    ``--hosts``, the ``--collection`` options; where it writes is the job's output root."""
    parameters: dict[str, str] = {}
    if args.save_interval is not None:
        if args.save_interval < 1:
            raise ConfigError("--save-interval", args.save_interval, "a whole number from 1")
        parameters["save_interval"] = str(args.save_interval)
    if args.hosts > 1:
        # Every host's worker saves its tensors, so the trial shows each host.
        parameters["include_workers"] = "all"
    collections = _collections(args.collection)
    return DebuggerHookConfig(
        hook_parameters=parameters or None, collection_configs=collections or None
    )


def _profiler_config(args: argparse.Namespace) -> ProfilerConfig | None:
    """System monitoring every ``--profiler-interval-ms``, and with no metrics configuration
    the hook records only the cheap step timeline; ``--framework-profile`` adds SageMaker's
    FrameworkProfile() defaults (the job runner sets their ``LocalPath`` to the job's
    profiler-output). None with ``--no-profiler``."""
    if args.no_profiler:
        if args.framework_profile:
            raise ConfigError("--framework-profile", True, "absent with --no-profiler")
        return None
    framework = FrameworkProfile()
    if args.framework_profile:
        framework.profiling_parameters.pop("LocalPath", None)
    else:
        framework.profiling_parameters = {}
    try:
        return ProfilerConfig(
            system_monitor_interval_millis=args.profiler_interval_ms,
            framework_profile_params=framework,
        )
    except ConfigError as error:
        raise ConfigError(
            "--profiler-interval-ms", args.profiler_interval_ms, _problems(error)
        ) from None


def settings_of(args: argparse.Namespace) -> TrainingJobSettings:
    """The job ``args`` describe, as the SDK's objects: ``trainprobe run`` asks for what the
    estimator asks for with the same settings, and, as SageMaker Debugger's SDK did,
    ProfilerReport when profiling is on and no profiler rule is given."""
    if not 1 <= args.hosts <= MAX_INSTANCE_COUNT:
        raise ConfigError("--hosts", args.hosts, f"a whole number from 1 to {MAX_INSTANCE_COUNT}")
    environment = _environment(args.env)
    if args.rule_executor is not None:
        environment[settings.RULE_EXECUTOR.name] = args.rule_executor
    return TrainingJobSettings(
        script=ContainerCommand([os.path.abspath(args.script)], list(args.script_args)),
        rules=_rules(args),
        debugger_hook_config=_hook_config(args),
        profiler_config=_profiler_config(args),
        output_path=files.absolute(args.output) if args.output else None,
        instance_count=args.hosts,
        max_run=args.max_run,
        environment=environment,
        default_profiler_rule=True,
    )


def build_request(args: argparse.Namespace) -> dict[str, Any]:
    """The CreateTrainingJob request ``trainprobe run`` sends for ``args``."""
    stem = os.path.splitext(os.path.basename(args.script))[0]
    name = args.name or job_name_from_base(stem)
    return create_training_job_request(name, settings_of(args))


def _wants_live_view(args: argparse.Namespace) -> bool:
    """The live panel on a terminal that can draw it, unless ``--plain``."""
    return not args.plain and sys.stdout.isatty() and settings.TERM.get() != "dumb"


def run(args: argparse.Namespace, options: argparse.ArgumentParser) -> int:
    """Run the job ``args`` describe and follow it; the exit status (see the epilog)."""
    _split_arguments(args, options)
    store = JobStore()
    try:
        request = build_request(args)
        create_training_job(request, store=store)
    except ConfigError as error:
        print(f"trainprobe run: {error}", file=sys.stderr)
        return 2
    # What following takes is imported once the job is started (it starts meanwhile).
    from trainprobe.cli.run_following import follow_run

    return follow_run(
        store,
        request["TrainingJobName"],
        live=_wants_live_view(args),
        quiet=args.quiet,
        fail_on_issue=args.fail_on_issue,
    )
