"""What a job runs, read from its request as the SageMaker SDK and ``trainprobe run`` send it."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest

from trainprobe.config.errors import ConfigError
from trainprobe.jobs.entry_point import EntryPoint, entry_point_from_request, script_arguments


def encoded(**hyperparameters: object) -> dict[str, str]:
    """Hyperparameters as the SDK sends them: every value JSON-encoded."""
    return {key: json.dumps(value) for key, value in hyperparameters.items()}


def test_the_sdk_hyperparameters_become_the_scripts_arguments() -> None:
    # As SageMaker's training toolkit passes them: sorted by name, "-k" for one-letter names,
    # values as Python's str() writes them, mappings as k=v pairs.
    hyperparameters = encoded(
        lr=0.1,
        epochs=3,
        optimizer="adam",
        amp=True,
        layers=[1, 2],
        k=5,
        schedule={"warmup": 2, "decay": "cos"},
        sagemaker_program="train.py",
        sagemaker_region="us-east-1",
    )
    assert script_arguments(hyperparameters) == [
        "--amp",
        "True",
        "--epochs",
        "3",
        "-k",
        "5",
        "--layers",
        "[1, 2]",
        "--lr",
        "0.1",
        "--optimizer",
        "adam",
        "--schedule",
        "decay=cos,warmup=2",
    ]


def test_a_value_that_is_not_json_is_passed_as_it_is() -> None:
    assert script_arguments({"name": "plain text"}) == ["--name", "plain text"]


def test_sagemaker_program_in_a_local_source_directory(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("print('hi')\n")
    for directory in (str(source), f"file://{source}"):
        entry = entry_point_from_request(
            None,
            encoded(sagemaker_program="train.py", sagemaker_submit_directory=directory, epochs=2),
            cwd=str(tmp_path / "elsewhere"),
            unpack_to=str(tmp_path / "code"),
        )
        assert entry == EntryPoint(str(source / "train.py"), ("--epochs", "2"), str(source))
        assert entry.command("python") == [
            "python",
            "-m",
            "trainprobe.jobs.processes.training_entry",
            str(source / "train.py"),
            "--epochs",
            "2",
        ]


def test_a_packed_source_directory_is_unpacked(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    archive = tmp_path / "sourcedir.tar.gz"
    with tarfile.open(archive, "w:gz") as packed:
        packed.add(tmp_path / "train.py", arcname="train.py")
    entry = entry_point_from_request(
        {"TrainingImage": "pytorch", "TrainingInputMode": "File"},
        encoded(sagemaker_program="train.py", sagemaker_submit_directory=str(archive)),
        cwd=str(tmp_path),
        unpack_to=str(tmp_path / "code"),
    )
    assert entry.program == str(tmp_path / "code" / "train.py")
    assert (tmp_path / "code" / "train.py").read_text() == "print('hi')\n"


def test_the_container_entrypoint_shorthand(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    for command in (["train.py"], ["python", "train.py"], [str(tmp_path / "train.py")]):
        entry = entry_point_from_request(
            {"ContainerEntrypoint": command, "ContainerArguments": ["--epochs", "3"]},
            {},
            cwd=str(tmp_path),
            unpack_to=str(tmp_path / "code"),
        )
        assert entry == EntryPoint(str(tmp_path / "train.py"), ("--epochs", "3"), str(tmp_path))
    assert entry.command(sys.executable) == [
        sys.executable,
        "-m",
        "trainprobe.jobs.processes.training_entry",
        str(tmp_path / "train.py"),
        "--epochs",
        "3",
    ]


def test_an_executable_runs_as_it_is(tmp_path: Path) -> None:
    entry = entry_point_from_request(
        {"ContainerEntrypoint": ["/bin/sh", "-c", "exit 0"]},
        {},
        cwd=str(tmp_path),
        unpack_to=str(tmp_path / "code"),
    )
    assert not entry.python
    assert entry.command("python") == ["/bin/sh", "-c", "exit 0"]


@pytest.mark.parametrize(
    ("specification", "hyperparameters", "field", "says"),
    [
        (None, {}, "AlgorithmSpecification", "sagemaker_program"),
        ({"ContainerEntrypoint": ["missing.py"]}, {}, "ContainerEntrypoint[0]", "existing"),
        ({"ContainerEntrypoint": "train.py"}, {}, "ContainerEntrypoint", "a list of strings"),
        (None, encoded(sagemaker_program="missing.py"), "sagemaker_program", "source directory"),
        (
            None,
            encoded(sagemaker_program="t.py", sagemaker_submit_directory="s3://b/src.tar.gz"),
            "sagemaker_submit_directory",
            "file:// URL",
        ),
        (None, {"sagemaker_program": "3"}, "sagemaker_program", "JSON-encoded string"),
    ],
)
def test_an_entry_point_that_cannot_run_is_refused(
    tmp_path: Path, specification: object, hyperparameters: dict[str, str], field: str, says: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        entry_point_from_request(
            specification, hyperparameters, cwd=str(tmp_path), unpack_to=str(tmp_path / "c")
        )
    assert field in raised.value.field
    assert says in raised.value.allowed
