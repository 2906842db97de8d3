"""LossSpike and GradientNormSpike: the rules the hook judges inside the training, on every step.

trainprobe additions, beside SageMaker's 20. A value is a spike when it lies more than
``sigma`` deviations from the mean of the last ``window`` healthy values, either side (or,
with ``ratio``, above that multiple of their mean), once ``warmup_steps`` values are in the
window; a value that is not finite always is (``trainprobe.capture.spike_window``). Each mode
has its own window. Their actions (SkipStep, Rollback, StopTraining) take effect before the
spiking update (the Keras hook, listed as "tensorflow", skips the update where Rollback asks to
roll back); more than ``max_skips`` skips within ``max_skips_window`` updates stop the
training instead. After the training, LossSpike judges the saved losses the same way.
"""

from __future__ import annotations

from trainprobe.config.catalogue.model import CollectionNeed, Parameter, ParamType, RuleSpec

__all__ = ["SPIKE_RULES"]

_SOURCE = "trainprobe (these rules are not SageMaker's)"


def _parameters() -> tuple[Parameter, ...]:
    def integer(name: str, default: int, minimum: float, meaning: str) -> Parameter:
        return Parameter(name, ParamType.INTEGER, default, meaning, minimum=minimum, source=_SOURCE)

    return (
        integer(
            "window",
            128,
            2.0,
            "How many of the last healthy values the mean and deviation are taken over.",
        ),
        Parameter(
            "sigma",
            ParamType.FLOAT,
            6.0,
            "How many deviations from the window's mean, either side, make a spike.",
            minimum=0.0,
            min_exclusive=True,
            source=_SOURCE,
        ),
        integer(
            "warmup_steps",
            20,
            0.0,
            "Values the window holds before any is judged (a "
            "value that is not finite is a spike even then).",
        ),
        Parameter(
            "ratio",
            ParamType.FLOAT,
            0.0,
            "A value above ratio times the window's mean is a spike too; 0 turns this off.",
            minimum=0.0,
            source=_SOURCE,
        ),
        integer(
            "max_skips",
            10,
            1.0,
            "More skips (or rollbacks) than this within "
            "max_skips_window updates stop the training instead.",
        ),
        integer("max_skips_window", 100, 1.0, "The updates over which max_skips is counted."),
    )


# The rule's evaluator follows the training by its saved steps: the losses, saved every 10
# steps, give it those (and LossSpike the values it judges after the training).
_LOSSES = CollectionNeed("losses", (("save_interval", "10"),))

SPIKE_RULES: tuple[RuleSpec, ...] = (
    RuleSpec(
        name="LossSpike",
        kind="debugging",
        sdk_name="loss_spike",
        description=(
            "Fires when a step's loss spikes; can skip the update, roll back or stop, in the step."
        ),
        parameters=(
            Parameter(
                "tensor_regex",
                ParamType.STRING_LIST,
                None,
                "Regex patterns selecting the saved losses judged after the training (by "
                "default the losses collection, else the tensors named like a loss).",
                source=_SOURCE,
            ),
            *_parameters(),
        ),
        collections=(_LOSSES,),
        frameworks=("pytorch", "tensorflow"),
        in_training=True,
    ),
    RuleSpec(
        name="GradientNormSpike",
        kind="debugging",
        sdk_name="gradient_norm_spike",
        description=(
            "Fires when a step's gradient norm spikes; can skip, roll back or stop, in the step."
        ),
        parameters=_parameters(),
        collections=(_LOSSES,),
        frameworks=("pytorch", "tensorflow"),
        in_training=True,
    ),
)
