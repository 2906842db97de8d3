"""``trainprobe run --collection``: the collections a user asks for go into the request's
DebugHookConfig, beside the rules' own, and a malformed option is refused naming it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from trainprobe.cli import run_command
from trainprobe.config.errors import ConfigError

SCRIPT = Path(__file__).resolve().parent.parent / "capture" / "xgboost_training.py"


def request(*arguments: str) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    run_command.register(parser.add_subparsers())
    options = argparse.ArgumentParser(add_help=False)
    run_command._add_options(options)
    args = parser.parse_args(["run", str(SCRIPT), *arguments])
    run_command._split_arguments(args, options)
    return run_command.build_request(args)


def test_collections_are_added_beside_the_rules_own() -> None:
    built = request(
        "--rule", "TreeDepth",
        "--rule", "FeatureImportanceOverweight",
        "--collection", "trees:save_interval=5",
        "--collection", "labels",
        "--save-interval", "2",
        "--no-profiler",
    )  # fmt: skip
    collections = {
        entry["CollectionName"]: entry.get("CollectionParameters")
        for entry in built["DebugHookConfig"]["CollectionConfigurations"]
    }
    # The user's parameters stand; the rule's collection takes --save-interval.
    assert collections == {
        "trees": {"save_interval": "5"},
        "labels": None,
        "feature_importance": {"save_interval": "2"},
    }


@pytest.mark.parametrize(
    ("option", "problem"),
    [(":save_interval=5", "--collection"), ("trees:5", "--collection")],
)
def test_a_bad_collection_option_names_it(option: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        request("--collection", option)
