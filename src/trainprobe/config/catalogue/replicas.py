"""ReplicaDivergence: data-parallel replicas of a parameter that no longer hold the same values.

A trainprobe addition, beside SageMaker's 20 (SageMaker has no such rule). Data parallelism
keeps a copy of each parameter on every replica (DDP: every process; HSDP and tensor
parallelism: the ranks along a replicated dimension of the mesh) and updates them together, so
they stay equal, value for value. A replica that drifts (a rank's bad memory, a collective that
skipped it, an update applied on one rank alone) trains on silently. The hook fingerprints each
saved parameter per rank at its saved steps (a sum of its values weighted by position); the
rule compares the replicas' fingerprints.
"""

from __future__ import annotations

from trainprobe.config.catalogue.model import CollectionNeed, Parameter, ParamType, RuleSpec

__all__ = ["REPLICA_RULES"]

_SOURCE = "trainprobe (this rule is not SageMaker's)"

REPLICA_RULES: tuple[RuleSpec, ...] = (
    RuleSpec(
        name="ReplicaDivergence",
        kind="debugging",
        sdk_name="replica_divergence",
        description="Fires when a parameter's data-parallel replicas hold different values.",
        parameters=(
            Parameter(
                "tensor_regex",
                ParamType.STRING_LIST,
                None,
                "Regex patterns selecting the parameters compared (all saved parameters when "
                "none).",
                source=_SOURCE,
            ),
            Parameter(
                "tolerance",
                ParamType.FLOAT,
                0.0,
                "The largest difference between two replicas' fingerprints, relative to their "
                "size, taken as equal; 0: replicas must match value for value, as data "
                "parallelism keeps them.",
                minimum=0.0,
                source=_SOURCE,
            ),
        ),
        collections=(
            CollectionNeed("weights", (("save_interval", "500"),)),
            CollectionNeed("biases", (("save_interval", "500"),)),
        ),
        frameworks=("pytorch",),
    ),
)
