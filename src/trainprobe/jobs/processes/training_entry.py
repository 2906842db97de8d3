"""``python -m trainprobe.jobs.processes.training_entry SCRIPT [ARGS...]``: run a training script as
a job.

The job runner starts every Python training through this module (under torchrun too, once per
process), the way SageMaker's framework containers start the user's script:

- when the job has a hook configuration (``$TRAINPROBE_AUTO_HOOK`` is 1) and PyTorch is
  installed, the hook is installed automatically (``trainprobe.jobs.processes.pytorch_auto_hook``),
  so a plain PyTorch script saves the default collections without importing trainprobe; a script
  that creates its own hook keeps it. XGBoost and Keras trainings get theirs the same way, once the
  script imports xgboost or keras (``trainprobe.jobs.processes.xgboost_auto_hook``,
  ``trainprobe.jobs.processes.keras_auto_hook``);
- when the job's runner goes away (``$TRAINPROBE_RUNNER_PID``), the training is interrupted as
  by Ctrl-C, so its hook closes its files, rather than running on unsupervised; so is a
  torchrun worker whose torchrun went away (killed with its host), though the runner is still
  there (``child_process.end_with_parent``);
- SIGTERM (how the runner stops a training: StopTrainingJob, MaxRuntimeInSeconds, a rule's
  StopTraining) interrupts it the same way, so its hook and framework profiler close their files
  (the last steps, the step timeline the profiler rules read) before it exits with status 143;
  a script that handles SIGTERM itself keeps its own handler;
- ``import smdebug...`` is answered by trainprobe (``trainprobe.smdebug_names``) unless a real
  smdebug is installed, so a script written for SageMaker Debugger runs unchanged;
- then the script runs as ``__main__``, with ``sys.argv`` and ``sys.path[0]`` as
  ``python SCRIPT ARGS`` would give it. Its exit status is the process's.
"""

from __future__ import annotations

import _thread
import contextlib
import importlib.util
import logging
import os
import runpy
import signal
import sys
import traceback
from collections.abc import Sequence

from trainprobe import settings
from trainprobe.jobs.child_process import end_with_parent
from trainprobe.jobs.processes.runner_watch import end_within, watch_runner
from trainprobe.smdebug_names import install as install_smdebug_names

__all__ = ["main"]

log = logging.getLogger("trainprobe")

_TERMINATED_STATUS = 128 + signal.SIGTERM


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the training as Ctrl-C's interrupt is, so it unwinds the same way."""


def _interrupt_on_sigterm(signum: int, frame: object) -> None:
    # Once: a second SIGTERM would interrupt the unwinding itself (the hook closing its files);
    # whoever sent it ends the training with SIGKILL if it takes too long.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _Terminated


def _interrupt_when_runner_is_gone() -> None:
    value = settings.RUNNER_PID.get()
    if value is None:
        return
    end_with_parent()

    def on_gone() -> None:
        _thread.interrupt_main(signal.SIGINT)
        end_within()  # a training stuck in native code may never see the interrupt
        # The runner read this process's output: there may be no one left to write to.
        with contextlib.suppress(OSError):
            print(
                f"trainprobe: the job runner (process {value}) is gone: stopping the training",
                file=sys.stderr,
                flush=True,
            )

    watch_runner(value, on_gone)


def _install_auto_hook() -> None:
    if not settings.AUTO_HOOK.get() or not settings.USE_SMDEBUG.get():
        return
    try:
        from trainprobe.jobs.processes import keras_auto_hook, xgboost_auto_hook

        xgboost_auto_hook.install()
        keras_auto_hook.install()
        if importlib.util.find_spec("torch") is None:
            return
        from trainprobe.jobs.processes import pytorch_auto_hook

        pytorch_auto_hook.install()
    except Exception as error:  # the training must run even when the hook cannot
        print(
            f"trainprobe: the hook could not be installed automatically ({error}); "
            "the training runs without it",
            file=sys.stderr,
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> None:
    """Run the script ``argv[0]`` with arguments ``argv[1:]`` (default: this process's)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments:
        print(
            "usage: python -m trainprobe.jobs.processes.training_entry SCRIPT [ARGS...]",
            file=sys.stderr,
        )
        raise SystemExit(2)
    script = os.path.abspath(arguments[0])
    sys.argv = [script, *arguments[1:]]
    sys.path[0] = os.path.dirname(script)
    _interrupt_when_runner_is_gone()
    install_smdebug_names(by="the job's training entry point")
    _install_auto_hook()
    signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    try:
        runpy.run_path(script, run_name="__main__")
    except _Terminated:
        print("trainprobe: the training was stopped (SIGTERM)", file=sys.stderr, flush=True)
        raise SystemExit(_TERMINATED_STATUS) from None
    except Exception as error:
        # The traceback as `python SCRIPT` shows it: from the script's frames on.
        trace = error.__traceback__
        while trace is not None and trace.tb_frame.f_code.co_filename != script:
            trace = trace.tb_next
        traceback.print_exception(type(error), error, trace or error.__traceback__)
        sys.stderr.flush()
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
