"""Statuses are named, never spelt: every module uses ``trainprobe.config.statuses``.

A training job's status, its secondary status and a rule's evaluation status cross the job store,
the job operations, the runner, the rules, the CLI and the report; spelt as strings in each, a
typo is a status nobody ever reaches. Read from the source: no string in code (documentation and
comments aside) is one of them outside the module that declares them. "Error", "Starting" and
"Training" are left out: they are also field names and labels (SageMaker's JSON, the report's).
"""

from __future__ import annotations

import ast
from pathlib import Path

from trainprobe.config.statuses import RuleEvaluationStatus, SecondaryStatus, TrainingJobStatus

SOURCE = Path(__file__).resolve().parents[1] / "src" / "trainprobe"
DECLARED_IN = SOURCE / "config" / "statuses.py"
STATUSES = {*TrainingJobStatus, *SecondaryStatus, *RuleEvaluationStatus} - {
    "Error",
    "Starting",
    "Training",
}


def _documentation(tree: ast.Module) -> set[int]:
    """The ids of the docstring constants of the module, its classes and its functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _spelt(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    documentation = _documentation(tree)
    return [
        f"{path.name}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and node.value in STATUSES
        and id(node) not in documentation
    ]


def test_the_reading_finds_a_spelt_status(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text('"""InProgress"""\n\nif status == "Stopped":\n    pass\n')
    assert _spelt(module) == ["module.py:3: 'Stopped'"]


def test_no_module_spells_a_status() -> None:
    spelt = [
        f"{path.parent.relative_to(SOURCE)}/{line}"
        for path in sorted(SOURCE.rglob("*.py"))
        if path != DECLARED_IN
        for line in _spelt(path)
    ]
    assert not spelt, "statuses spelt instead of named:\n" + "\n".join(spelt)
