"""What each built-in rule catches, and what it does not, in a user's words.

The rules keep the spec's documented semantics, even where they are narrower than a user would
expect (a loss that falls just over diff_percent passes LossNotDecreasing); ``trainprobe
rules show`` prints these lines so that nobody reads more into a NoIssuesFound than was checked.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RuleScope", "scope_of"]


@dataclass(frozen=True)
class RuleScope:
    """What a rule catches and what it does not."""

    catches: str
    misses: str


_ACTIVATIONS_BY_TYPE = (
    "Of the activations called as functions, the hook sees relu, tanh and sigmoid (F.relu, "
    "torch.tanh, x.sigmoid()); others (F.gelu, F.leaky_relu) are not seen, and a rule that "
    "found nothing else ends in Error saying so."
)

_SCOPES = {
    "LossNotDecreasing": RuleScope(
        "A training loss whose mean over its newest 5 saved steps is, every num_steps TRAIN "
        "steps, no lower (by diff_percent) than the mean of 5 saved at least num_steps before, "
        "or rose by more than increase_threshold_percent beyond the batches' noise; the same "
        "for the evaluation passes, "
        "each one value (its mean), against earlier passes; a NaN or infinite loss.",
        "A rise or dip shorter than the 5 saved steps it averages over, or a rise within two "
        "standard errors of the batches' losses; batches of one evaluation pass against each "
        "other (they share the same weights). A loss that falls "
        "by just over diff_percent every num_steps, however slowly that converges. Losses the "
        "job does not save (a functional loss never given to the hook).",
    ),
    "Overfit": RuleScope(
        "A validation loss (the mean of the newest evaluation passes, 5 losses or more) above "
        "the training loss of the same stretch by more than ratio_threshold, beyond the "
        "batches' noise, patience evaluation passes in a row.",
        "A gap within two standard errors of the batches' losses (near a loss of 0, a few "
        "hard samples move a batch by tens of percent); overfitting that shows in metrics but "
        "not in the loss; jobs that save no EVAL steps.",
    ),
    "Overtraining": RuleScope(
        "A training loss (the mean of its newest 5) with no new best (by delta) for "
        "patience_train saved steps, or a validation loss (the newest evaluation passes, 5 "
        "losses or more) with none for patience_validation evaluation passes.",
        "A loss that still improves by tiny amounts above delta; the steps between saves.",
    ),
    "ExplodingTensor": RuleScope(
        "A NaN or infinity in any saved tensor of the saved steps, and (with the PyTorch hook's "
        "non-finite guard, on by default) the step and the layer where the first one started, "
        "whether or not that step was due to be saved.",
        "Values that are huge but finite; NaNs in tensors the hook never sees (functional "
        "operations inside a module are covered only through that module's output).",
    ),
    "DeadRelu": RuleScope(
        "ReLU layers most of whose units output 0 for almost every sample: tensors named like "
        "relu_output and, with the default tensor_regex, the outputs of every nn.ReLU module "
        "and F.relu call.",
        "LeakyReLU, GELU and other activations; units that die between saved steps. "
        + _ACTIVATIONS_BY_TYPE,
    ),
    "SaturatedActivation": RuleScope(
        "tanh and sigmoid layers whose inputs lie where the gradient vanishes for almost every "
        "sample: inputs of nn.Tanh / nn.Sigmoid modules (told apart by type) or tensors named "
        "tanh_input / sigmoid_input.",
        "Other saturating functions (Hardtanh, Softsign); saturation in some samples only. "
        + _ACTIVATIONS_BY_TYPE,
    ),
    "PoorWeightInitialization": RuleScope(
        "In the first steps: activation inputs whose variances differ across layers by more "
        "than threshold, gradients spread too narrowly, or a loss that stops improving.",
        "Poor initialization that shows after the first steps. When no activation input is "
        "saved, only the gradient and loss checks run, and the status says the variance check "
        "matched nothing. " + _ACTIVATIONS_BY_TYPE,
    ),
    "VanishingGradient": RuleScope(
        "A gradient whose mean absolute value is below threshold at a saved step, unless it is "
        "small by construction (exactly 0 and never non-zero while others are not, or a bias "
        "the loss is invariant to): the status names those it set aside.",
        "Gradients that vanish only for some elements while others stay large; a layer whose "
        "gradient is exactly 0 from the first step on while other layers learn (named in the "
        "status, not an issue).",
    ),
    "WeightUpdateRatio": RuleScope(
        "A weight whose update between two saved steps is too large or too small relative to "
        "the weight.",
        "Updates between saved steps that cancel out; weights saved at a single step.",
    ),
    "AllZero": RuleScope(
        "A tensor with at least threshold percent zeros at a saved step.",
        "Tensors that are constant but not zero.",
    ),
    "TensorVariance": RuleScope(
        "A tensor whose variance at a saved step is above max_threshold or below min_threshold.",
        "Changes of variance within the thresholds, however sudden.",
    ),
    "UnchangedTensor": RuleScope(
        "A tensor equal (numpy.allclose) over its last num_steps saved steps.",
        "Tensors that change by less than the tolerance but not by nothing.",
    ),
    "ClassImbalance": RuleScope(
        "A class with more than threshold_imbalance times the samples of another, or a class "
        "mostly mispredicted, counted over the saved labels and predictions.",
        "Imbalance in the data the job does not save (labels outside the saved steps).",
    ),
    "Confusion": RuleScope(
        "A confusion matrix too far from diagonal at a saved step.",
        "Confusion between classes absent from the saved steps.",
    ),
    "CheckInputImages": RuleScope(
        "Input images whose per-channel mean is far from 0 (not normalized).",
        "Images with a wrong scale but a mean near 0.",
    ),
    "NLPSequenceRatio": RuleScope(
        "Input sequences with too many padding or unknown tokens.",
        "Tokens other than those listed in token_values.",
    ),
    "SimilarAcrossRuns": RuleScope(
        "A tensor that differs from another run's at the same step.",
        "Differences below numpy.allclose's tolerance.",
    ),
    "FeatureImportanceOverweight": RuleScope(
        "An XGBoost model whose nfeatures most important features hold more than threshold of "
        "the total importance.",
        "Models with no more than nfeatures features (never judged); importance types the job "
        "does not save.",
    ),
    "TreeDepth": RuleScope(
        "Trees deeper than depth.",
        "Trees that are shallow but too many, or overfit in other ways.",
    ),
    "StalledTrainingRule": RuleScope(
        "No new step written for threshold seconds.",
        "A training that runs but makes no progress (it checks that steps are written, not "
        "what they hold).",
    ),
    # ----- profiler rules -----
    "BatchSize": RuleScope(
        "A host whose CPU use and each GPU's utilization and memory use all have a 95th "
        "percentile below their thresholds over the newest window readings: everything is "
        "lightly used, so the batch is likely too small.",
        "A host without GPU readings (it never fires on a CPU-only job); a small batch on a "
        "machine that something else keeps busy; the first patience readings.",
    ),
    "CPUBottleneck": RuleScope(
        "Readings where a GPU is below gpu_threshold % busy while a CPU is above "
        "cpu_threshold %, once they are more than threshold % of all the readings so far.",
        "Hosts without GPU readings (no GPU waits); a short bottleneck in a long healthy run, "
        "since the share counts every reading so far; a CPU-bound step whose GPU stays above "
        "gpu_threshold.",
    ),
    "IOBottleneck": RuleScope(
        "Readings where a GPU is below gpu_threshold % busy while the I/O wait is above "
        "io_threshold %, once they are more than threshold % of all the readings so far.",
        "Hosts without GPU readings; slow input that shows as CPU work (decoding) rather than "
        "I/O wait; a short stall in a long healthy run.",
    ),
    "Dataloader": RuleScope(
        "A median number of data loader processes per second below min_threshold % or above "
        "max_threshold % of the host's cores, read from the framework timeline.",
        "Jobs without framework profiling (no data loader events); a loader slow for other "
        "reasons than its number of workers (slow storage, heavy transforms).",
    ),
    "GPUMemoryIncrease": RuleScope(
        "A GPU whose mean memory use over its newest window readings is more than increase "
        "points above the mean over the readings before the last two (smdebug's comparison).",
        "A slow leak: the two means overlap, so memory that grows steadily by less than two "
        "thirds of increase points per reading never fires, however long it grows. Host (CPU) "
        "memory; jobs without GPUs.",
    ),
    "LowGPUUtilization": RuleScope(
        "A GPU whose newest window readings have a 95th percentile below threshold_p95 "
        "(underused), or above it with a 5th percentile below threshold_p5 (fluctuating).",
        "A GPU kept busy by needless work (utilization counts any kernel); jobs without GPUs; "
        "GPUs with patience readings or fewer.",
    ),
    "LoadBalancing": RuleScope(
        "Two GPUs of one host whose utilization histograms are further apart than threshold "
        "(Jensen-Shannon distance).",
        "Imbalance between hosts (GPUs are compared within a host); hosts with one GPU; uneven "
        "work that keeps every GPU equally busy.",
    ),
    "MaxInitializationTime": RuleScope(
        "No step started more than threshold minutes after the job's first data.",
        "Jobs without framework profiling (no step events: it does not judge); slow steps "
        "after the first (StepOutlier looks at those).",
    ),
    "OverallFrameworkMetrics": RuleScope(
        "Nothing: it sums the time spent in framework operations for the report, and never fires.",
        "Every problem: read its figures in the profiler report.",
    ),
    "OverallSystemUsage": RuleScope(
        "Nothing: it sums CPU, GPU, memory, I/O and network use per host for the report, and "
        "never fires.",
        "Every problem: read its figures in the profiler report.",
    ),
    "StepOutlier": RuleScope(
        "More than n_outliers steps of one kind (TRAIN, EVAL) on a host that last longer than "
        "the mean plus stddev standard deviations, once that kind has more than 100 steps.",
        "Jobs without framework profiling (no step events); 100 steps of a kind or fewer; a "
        "training slow at every step, where no step stands out.",
    ),
    "LossSpike": RuleScope(
        "A step's loss more than sigma deviations from the mean of the last window healthy "
        "losses of its mode, either side (or above ratio times that mean), once warmup_steps "
        "losses are in; a loss that is NaN or infinite at any step. In a job, the training "
        "judges every step; afterwards, the saved losses.",
        "A loss that drifts up slowly (each step stays within the window's spread: "
        "LossNotDecreasing looks at the trend); a spike in the first warmup_steps steps that is "
        "finite; after the training, steps whose loss was not saved.",
    ),
    "GradientNormSpike": RuleScope(
        "An update whose gradients' norm is more than sigma deviations from the mean of the "
        "last window healthy norms, either side (or above ratio times that mean), once "
        "warmup_steps norms are in; a NaN or infinite norm at any step.",
        "Anything after the training (the norms are judged inside it and not saved); a "
        "gradient that grows slowly; one layer's spike hidden in a large model's total norm.",
    ),
    "ProfilerReport": RuleScope(
        "What the profiler rules it runs catch; it fires if any of them does.",
        "What those rules miss: see `trainprobe rules show` for each.",
    ),
}


def scope_of(rule: str) -> RuleScope | None:
    """What ``rule`` catches and does not; None for rules without such a note."""
    return _SCOPES.get(rule)
