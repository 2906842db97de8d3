"""The sizes the house holds to (STYLE.md, section 10), read from the source.

A module readable in one sitting is at most 800 lines; a class small enough to hold in one's head
has at most 40 methods; a function is at most 100 lines, its argument declarations aside. A change
that grows past one of them names the place here, so that it is split before it lands.
"""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src" / "trainprobe"

MODULE_LINES = 800
CLASS_METHODS = 40
FUNCTION_LINES = 100


def modules() -> list[Path]:
    return sorted(SOURCE.rglob("*.py"))


def test_no_module_is_longer_than_one_sitting() -> None:
    too_long = {
        str(path.relative_to(SOURCE)): lines
        for path in modules()
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert too_long == {}


def test_no_class_has_more_methods_than_one_can_hold_in_mind() -> None:
    too_many = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                methods = [
                    item
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                ]
                if len(methods) > CLASS_METHODS:
                    too_many[f"{path.relative_to(SOURCE)}:{node.name}"] = len(methods)
    assert too_many == {}


def test_no_function_is_longer_than_a_hundred_lines() -> None:
    too_long = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                # The body, from its first statement (the docstring included) to its last line.
                lines = node.end_lineno - node.body[0].lineno + 1  # type: ignore[operator]
                if lines > FUNCTION_LINES:
                    too_long[f"{path.relative_to(SOURCE)}:{node.lineno}:{node.name}"] = lines
    assert too_long == {}
