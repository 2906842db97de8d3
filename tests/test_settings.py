"""The environment variables: one reading of yes/no, read when used, documented as declared."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainprobe import settings
from trainprobe.config.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_doc_is_the_generated_one() -> None:
    generated = subprocess.run(
        [sys.executable, "-m", "trainprobe.settings"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (ROOT / "docs" / "environment.md").read_text(encoding="utf-8") == generated, (
        "docs/environment.md is stale: regenerate it with `python -m trainprobe.settings`"
    )
    for variable in settings.VARIABLES:
        assert f"`{variable.name}`" in generated


@pytest.mark.parametrize("word", ["1", "true", "TRUE", "Yes", "on", " On "])
def test_every_yes_word_is_yes(word: str) -> None:
    assert settings.STRICT.get({"TRAINPROBE_STRICT": word}) is True
    assert settings.AUTO_HOOK.get({"TRAINPROBE_AUTO_HOOK": word}) is True


@pytest.mark.parametrize("word", ["0", "false", "False", "NO", "off"])
def test_every_no_word_is_no(word: str) -> None:
    assert settings.USE_SMDEBUG.get({"USE_SMDEBUG": word}) is False


def test_blank_is_the_default_and_anything_else_names_the_variable() -> None:
    assert settings.USE_SMDEBUG.get({"USE_SMDEBUG": "  "}) is True
    assert settings.STRICT.get({}) is False
    with pytest.raises(ConfigError, match=r"\$TRAINPROBE_STRICT: 'maybe' is not valid; 1, true"):
        settings.STRICT.get({"TRAINPROBE_STRICT": "maybe"})
    with pytest.raises(ConfigError, match=r"TRAINPROBE_SMTP_PORT.*port number"):
        settings.SMTP_PORT.get({"TRAINPROBE_SMTP_PORT": "70000"})
    with pytest.raises(ConfigError, match=r"TRAINPROBE_STOP_GRACE_SECONDS.*seconds"):
        settings.STOP_GRACE_SECONDS.get({"TRAINPROBE_STOP_GRACE_SECONDS": "nan"})


def test_a_variable_is_read_when_used_not_when_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPROBE_HOME", "/somewhere/else")
    assert settings.HOME.get() == "/somewhere/else"
    monkeypatch.delenv("TRAINPROBE_HOME")
    assert settings.HOME.get() == "~/.trainprobe"


def test_use_smdebug_no_means_no_hook_from_the_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    import trainprobe.capture.pytorch.hook as hook_module
    import trainprobe.pytorch as smd

    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps({"LocalPath": str(tmp_path / "tensors")}))
    monkeypatch.setenv("TRAINPROBE_HOOK_CONFIG", str(config))
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(tmp_path / "no-tensorboard.json"))
    monkeypatch.setattr(hook_module, "_singleton", None)
    monkeypatch.setenv("USE_SMDEBUG", "false")
    assert smd.get_hook(create_if_not_exists=True) is None
    monkeypatch.setenv("USE_SMDEBUG", "1")
    hook = smd.get_hook(create_if_not_exists=True)
    assert hook is not None
    assert hook.out_dir == str(tmp_path / "tensors")
    hook.close()


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _reads_of_the_environment(path: Path) -> list[int]:
    """Lines reading one variable: ``os.environ.get``, ``os.environ[...]``, ``os.getenv``."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and (
            node.attr == "getenv" or (node.attr == "get" and _is_environ(node.value))
        ):
            lines.append(node.lineno)
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            lines.append(node.lineno)
    return lines


def test_a_childs_environment_is_this_ones_with_each_addition_laid_over_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRAINPROBE_RULE_EXECUTOR", "local")
    monkeypatch.setenv("TRAINPROBE_TEST_KEPT", "kept")
    environment = settings.child_environment(
        {"TRAINPROBE_RULE_EXECUTOR": "dask://a:1"}, {"TRAINPROBE_RULE_EXECUTOR": "dask://b:2"}
    )
    assert environment["TRAINPROBE_TEST_KEPT"] == "kept"
    assert settings.RULE_EXECUTOR.get(environment) == "dask://b:2"
    assert settings.RULE_EXECUTOR.get() == "local"  # this process's own is left alone


def test_only_the_settings_module_reads_variables() -> None:
    """Building a child's environment (``{**os.environ, ...}``) is no read and is allowed."""
    source = ROOT / "src" / "trainprobe"
    reads = {
        str(path.relative_to(source)): lines
        for path in sorted(source.rglob("*.py"))
        if path.name != "settings.py" or path.parent != source
        if (lines := _reads_of_the_environment(path))
    }
    assert reads == {}, "read these through trainprobe.settings"
