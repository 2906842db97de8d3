"""The modules of ``src/trainprobe`` import one another in one direction only.

Read from the source (every ``import``, at the top, inside a function or under
``TYPE_CHECKING``): no two modules import each other, directly or round a longer loop, and no
module imports one of a higher layer, in DESIGN.md's order: config < storage < capture <
analysis < rules < jobs, report and ui < cli. The modules beside the packages take the layer of
what they are (``settings`` and ``debugger`` are configuration, ``trainprobe.pytorch`` is the
capture layer's facade, ``estimator`` drives jobs, ...); a new one must be given its layer here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"

# The layer of each module, by the longest dotted prefix of its name that is listed.
LAYERS = {
    "trainprobe": 0,  # the package alone: its version
    "trainprobe.errors": 0,
    "trainprobe.config": 1,
    "trainprobe.settings": 1,
    "trainprobe.sdk_arguments": 1,
    "trainprobe.debugger": 1,
    "trainprobe.smdebug_names": 1,  # the import hook alone; the names it answers are below
    "trainprobe.storage": 2,
    "trainprobe.capture": 3,
    "trainprobe.pytorch": 3,
    "trainprobe.keras": 3,
    "trainprobe.xgboost": 3,
    "trainprobe.analysis": 4,
    "trainprobe.trials": 4,
    "trainprobe.profiler": 4,
    "trainprobe.exceptions": 4,
    "trainprobe.rules": 5,
    "trainprobe.jobs": 6,
    "trainprobe.report": 6,
    "trainprobe.ui": 6,
    "trainprobe.estimator": 6,
    "trainprobe.local_session": 6,
    "trainprobe.smdebug_names.smdebug": 6,  # smdebug's names, answered by every layer
    "trainprobe.cli": 7,
}
LAYER_NAMES = ["root", "config", "storage", "capture", "analysis", "rules", "jobs", "cli"]


def _modules() -> dict[str, tuple[Path, bool]]:
    """Each module's dotted name, its file and whether it is a package's ``__init__``."""
    found = {}
    for path in sorted((SOURCE / "trainprobe").rglob("*.py")):
        parts = list(path.relative_to(SOURCE).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


MODULES = _modules()


def _module_of(name: str) -> str | None:
    """The module of ours that importing ``name`` runs (its longest prefix that is one)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imported(name: str, path: Path, package: bool) -> Iterator[tuple[str, int]]:
    """The modules of ours ``name`` imports, each with the line that does."""
    own_package = name if package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (module := _module_of(alias.name)) is not None:
                    yield module, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = own_package.split(".")[: len(own_package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                module = full if full in MODULES else _module_of(base)
                if module is not None:
                    yield module, node.lineno


def _graph() -> dict[str, dict[str, int]]:
    """Each module's imports of ours, each with the first line that imports it."""
    graph: dict[str, dict[str, int]] = {}
    for name, (path, package) in MODULES.items():
        imports: dict[str, int] = {}
        for module, line in _imported(name, path, package):
            if module != name:
                imports.setdefault(module, line)
        graph[name] = imports
    return graph


GRAPH = _graph()


def _layer(name: str) -> int:
    prefix = name
    while prefix not in LAYERS or (prefix == "trainprobe" != name):
        if "." not in prefix:
            raise KeyError(f"{name} has no layer: give it one in LAYERS")
        prefix = prefix.rpartition(".")[0]
    return LAYERS[prefix]


def _cycles() -> list[list[str]]:
    """The groups of modules that import one another round a loop (Tarjan's strongly
    connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in GRAPH[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in GRAPH:
        if module not in index:
            visit(module)
    return groups


def test_the_reading_sees_every_kind_of_import() -> None:
    """One at the top, one under ``TYPE_CHECKING``, one inside a function."""
    assert "trainprobe.config.errors" in GRAPH["trainprobe.settings"]
    assert "trainprobe.jobs.operations.control" in GRAPH["trainprobe.jobs"]
    assert "trainprobe.cli.run_following" in GRAPH["trainprobe.cli.run_command"]


def test_no_two_modules_import_each_other() -> None:
    cycles = _cycles()
    assert not cycles, "modules importing one another: " + "; ".join(map(str, cycles))


def test_no_module_imports_a_higher_layer() -> None:
    upward = [
        f"{name} ({LAYER_NAMES[_layer(name)]}) line {line}: {module} "
        f"({LAYER_NAMES[_layer(module)]})"
        for name, imports in sorted(GRAPH.items())
        for module, line in sorted(imports.items())
        if _layer(module) > _layer(name)
    ]
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)
