"""Why a rule checked nothing, in words a user can act on.

When a rule ends without having judged a single step, its Error says three things: what it
looked for (or, where it found tensors it could not judge yet, why not), what the job did save
(its collections and a few tensor names), and the configuration that would save what it needs
(a ``CollectionConfig`` line for the SDK, a hook argument for a script; for activations found
by module type, a pattern naming the job's own modules of that type). Activation rules add
which activations the hook can see: modules, and on save steps the relu, tanh and sigmoid
functions, but no other function.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainprobe.analysis.read_log import Lookup
from trainprobe.analysis.trial import Trial

__all__ = [
    "FUNCTIONAL_ACTIVATIONS",
    "empty_collections",
    "mentions_activations",
    "nothing_checked",
    "saved_summary",
    "unmatched_summary",
]

_NAMES_SHOWN = 5
_ACTIVATION_WORDS = re.compile(r"(?i)relu|tanh|sigmoid|activation")

FUNCTIONAL_ACTIVATIONS = (
    "The hook sees activation modules (nn.ReLU, nn.Tanh, nn.Sigmoid) and, on save steps, the "
    "relu, tanh and sigmoid functions (F.relu, torch.tanh, x.sigmoid()) as <Model>.relu_input_0 "
    "and <Model>.relu_output_0; other activation functions (F.gelu, F.leaky_relu, ...) are "
    "not seen, since catching every function would cost every step. Use modules for those, or "
    'save the value yourself with hook.record_tensor_value("fc1_relu", x).'
)


def mentions_activations(text: str) -> bool:
    """Whether ``text`` (a rule name, what it looked for) is about activation functions."""
    return bool(_ACTIVATION_WORDS.search(text))


def empty_collections(trial: Trial) -> list[str]:
    """The collections the job configured (its collections file names them) of which it saved
    no tensor."""
    names = trial.tensor_names()
    return sorted(
        name
        for name, collection in trial.collections().items()
        if not any(collection.matches(tensor) for tensor in names)
    )


def saved_summary(trial: Trial) -> str:
    """What the job saved: the collections it saved a tensor of (a collection only configured
    is never named as saved) and a few tensor names."""
    names = trial.tensor_names()
    if not names:
        return "The job saved no tensor."
    empty = empty_collections(trial)
    saved = sorted(name for name in trial.collections() if name not in empty)
    shown = ", ".join(names[:_NAMES_SHOWN])
    more = f" ({len(names)} in all)" if len(names) > _NAMES_SHOWN else ""
    listed = ", ".join(saved) if saved else "none"
    return f"The job saved tensors of the collections {listed}; its tensors include {shown}{more}."


def _configured_but_empty(name: str, trial: Trial) -> str:
    """Why configuring collection ``name`` again would not help: it is configured already."""
    steps = len(trial.steps())
    said = (
        f"The collection {name} is in the job's configuration already, yet none of its tensors "
        f"was saved in the {steps} step(s) the job saved: the hook saves a tensor of it only "
        "when the training produces one at a saved step"
    )
    if name == "gradients":
        said += " (a gradient, when backward() has computed it before the step's update)"
    return said + "."


_TORCH_NN = re.compile(r"torch\.nn\.\w+")


def _module_pattern(lookup: Lookup, trial: Trial | None) -> str | None:
    """For a lookup of module tensors (``inputs of torch.nn.Tanh modules``): a pattern naming
    the job's own modules of those types (``^1_input_`` for the second module of an
    nn.Sequential); None when it has none."""
    if trial is None:
        return None
    names = trial.modules_of_types(_TORCH_NN.findall(lookup.text))
    if not names:
        return None
    side = "input" if lookup.text.startswith("input") else "output"
    alternatives = "|".join(re.escape(name) for name in names)
    return f"^({alternatives})_{side}_" if len(names) > 1 else f"^{alternatives}_{side}_"


def _configuration(lookup: Lookup, trial: Trial | None) -> tuple[str, str] | None:
    """(CollectionConfig line, hook argument) that saves what ``lookup`` asked for."""
    if lookup.kind == "collection":
        return (
            f'CollectionConfig(name="{lookup.text}")',
            f'Hook(..., include_collections=["{lookup.text}"])',
        )
    if lookup.kind == "module":
        pattern = _module_pattern(lookup, trial)
    elif lookup.kind in ("pattern", "tensor"):
        pattern = lookup.text if lookup.kind == "pattern" else re.escape(lookup.text)
    else:
        pattern = None
    if pattern is None:
        return None
    # A raw string where the pattern escapes something, so the line can be pasted as it is.
    quoted = f'r"{pattern}"' if "\\" in pattern else f'"{pattern}"'
    return (
        f'CollectionConfig(name="custom", parameters={{"include_regex": {quoted}}})',
        f"Hook(..., include_regex=[{quoted}])",
    )


def unmatched_summary(lookups: Sequence[Lookup]) -> str:
    """The lookups that found nothing, in one phrase: ``names matching 'x', tensor 'y'``."""
    return ", ".join(lookup.describe() for lookup in lookups)


def nothing_checked(
    rule: str,
    trial: Trial | None,
    looked_for: Sequence[Lookup],
    reason: str | None = None,
    collections: Sequence[str] = (),
) -> str:
    """The Error details of a rule that judged no tensor: what it looked for, what the job
    saved, and how to save what it needs (``collections``: those the rule's configuration
    attaches, suggested first)."""
    asked = unmatched_summary(looked_for) if looked_for else None
    text = f"{rule} checked no tensor"
    if asked:
        text += f": it looked for {asked}, and found none"
    elif reason:
        # What it found could not be judged yet (too few steps, say): the reason says why.
        text = f"{rule} judged no step ({reason})"
    text += "."
    if trial is not None:
        text += " " + saved_summary(trial)
    # The rule's own collections first, then the job's modules of the types it wants (an
    # nn.Sequential's tanh is "1", which no name pattern finds), then what it looked for.
    wanted = [Lookup("collection", name) for name in collections]
    wanted += sorted(looked_for, key=lambda lookup: lookup.kind != "module")
    empty = set(empty_collections(trial)) if trial is not None else set()
    configured = {
        lookup.text for lookup in wanted if lookup.kind == "collection" and lookup.text in empty
    }
    if trial is not None:
        text += "".join(" " + _configured_but_empty(name, trial) for name in sorted(configured))
    # A collection configured already is not saved by configuring it again, nor by a pattern.
    configurations = [
        found for found in (_configuration(lookup, trial) for lookup in wanted) if found
    ]
    if configured:
        configurations = []
    if configurations:
        sdk, hook = configurations[0]
        text += f" To save it, add {sdk} to the estimator's collection_configs, or pass {hook}"
        text += " to the hook in your script."
    if mentions_activations(" ".join([rule, asked or "", reason or ""])):
        text += " " + FUNCTIONAL_ACTIVATIONS
    return text
