"""Reading a job's saved tensors: ``from trainprobe.trials import create_trial``.

The same entry point as ``smdebug.trials``, with the same names (``create_trial``, ``Trial``,
``LocalTrial``); it reads output written by trainprobe's hooks and by smdebug's alike.
"""

from __future__ import annotations

from trainprobe.analysis.local_trial import LocalTrial
from trainprobe.analysis.steps import StepState
from trainprobe.analysis.tensor import Tensor
from trainprobe.analysis.trial import Trial, create_trial
from trainprobe.storage.modes import ModeKeys

modes = ModeKeys

__all__ = ["LocalTrial", "ModeKeys", "StepState", "Tensor", "Trial", "create_trial", "modes"]
