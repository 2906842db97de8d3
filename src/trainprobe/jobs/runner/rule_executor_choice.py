"""Which executor runs a job's rules: local processes, or a task each on a Dask cluster.

It is ``TRAINPROBE_RULE_EXECUTOR`` (``trainprobe.settings``), read from the job request's
Environment, else from the environment that creates the job: ``local`` (the default,
``LocalRuleExecutor``) or ``dask://HOST:PORT`` (``trainprobe.jobs.runner.dask_rule_executor``,
imported only then). Creation checks it (``check_rule_executor``) before anything starts.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainprobe import settings
from trainprobe.config.errors import ConfigError
from trainprobe.jobs.launch_plan import LaunchPlan
from trainprobe.jobs.runner.process_settings import ProcessSettings
from trainprobe.jobs.runner.rule_executor import LocalRuleExecutor, RuleExecutor

__all__ = ["check_rule_executor", "dask_scheduler_address", "rule_executor_for"]


def rule_executor_for(plan: LaunchPlan, process: ProcessSettings) -> RuleExecutor:
    """The executor of the job ``plan`` launches (see the module docstring), run with the
    runner's ``process`` settings."""
    address = dask_scheduler_address(settings.child_environment(plan.environment))
    if address is not None:
        from trainprobe.jobs.runner.dask_rule_executor import DaskRuleExecutor

        return DaskRuleExecutor(
            address,
            job_name=plan.job_name,
            progress_timeout_seconds=process.rule_progress_timeout_seconds,
        )
    return LocalRuleExecutor(
        limits=process.rule_limits(),
        environment=settings.child_environment(process.rule_environment()),
        progress_timeout_seconds=process.rule_progress_timeout_seconds,
    )


def dask_scheduler_address(environment: Mapping[str, str]) -> str | None:
    """The Dask scheduler (``tcp://HOST:PORT``) a job whose environment is ``environment`` runs
    its rules on; None for local processes. ConfigError for a value that is neither."""
    value = settings.RULE_EXECUTOR.get(environment)
    if value == "local":
        return None
    return "tcp://" + value.removeprefix("dask://")


def check_rule_executor(environment: Mapping[str, str], field: str) -> None:
    """ConfigError naming ``field`` and the value when the rule executor ``environment`` names
    cannot run the job's rules: a malformed value, or a Dask cluster that does not answer."""
    try:
        address = dask_scheduler_address(environment)
    except ConfigError as error:
        raise ConfigError(field, error.value, error.allowed) from None
    if address is None:
        return
    value = settings.RULE_EXECUTOR.get(environment)
    try:
        from trainprobe.jobs.runner.dask_rule_executor import reach_cluster
    except ImportError:
        raise ConfigError(
            field, value, "local, as Dask is not installed here (pip install 'trainprobe[dask]')"
        ) from None
    problem = reach_cluster(address)
    if problem is not None:
        raise ConfigError(field, value, f"the address of a Dask scheduler that answers ({problem})")
