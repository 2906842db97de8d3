"""Rule and ProfilerRule, and what trainprobe builds compared with the SageMaker SDK.

``test_matches_the_sagemaker_sdk`` runs the same calls (``BUILD`` below, one piece of code run
against both APIs) in the SDK's reference environment, in one subprocess, and in trainprobe: every
``rule_configs`` function and profiler class, the actions' strings, ``Rule.sagemaker`` /
``Rule.custom`` / ``ProfilerRule`` request dictionaries with names, paths, collections, actions
and ``prepare_actions``, and the rule image URIs. The rest checks what trainprobe adds: checks at
construction and reading request dictionaries back.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from reference_envs import run_reference
from trainprobe.config import catalogue, rule_configs
from trainprobe.config.actions import ActionList, Email, StopTraining
from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.hook_config import CollectionConfig
from trainprobe.config.rules import (
    PLACEHOLDER_IMAGE,
    ProfilerRule,
    Rule,
    RuleBase,
    get_default_profiler_rule,
    get_rule_container_image_uri,
)

# The same code builds each case with the SDK (in its environment) and with trainprobe.
BUILD = """
import json


def make_actions(spec, api):
    kind, items = spec
    rc = api["rule_configs"]
    built = [getattr(rc, name)(*args, **kwargs) for name, args, kwargs in items]
    return rc.ActionList(*built) if kind == "list" else built[0]


def snapshot(value):
    # The SDK's request shares the rule's parameters dict; take it as it is now.
    return json.loads(json.dumps(value))


def attributes(rule):
    names = ("name", "image_uri", "instance_type", "container_local_output_path",
             "s3_output_path", "volume_size_in_gb", "rule_parameters")
    return {name: snapshot(getattr(rule, name)) for name in names}


def run(case, api):
    op, rc = case["op"], api["rule_configs"]
    if op == "rule_config":
        return getattr(rc, case["fn"])()
    if op == "get_collection":
        return rc.get_collection(case["name"])
    if op == "get_collection_parameters":
        # rulesconfig returns relu_input/relu_output without the CollectionName wrapper.
        found = rc.get_collection(case["name"])
        return found.get("CollectionParameters", found)
    if op == "profiler_config":
        config = api["profiler_class"](case["cls"])(*case.get("args", []), **case.get("kwargs", {}))
        return {"rule_name": config.rule_name, "rule_parameters": config.rule_parameters}
    if op == "actions":
        actions = make_actions(case["actions"], api)
        if "prepare" in case:
            actions.update_training_job_prefix_if_not_specified(case["prepare"])
        return actions.serialize()
    if op == "image_uri":
        try:
            return api["image_uri"](case["region"])
        except ValueError:
            return "ValueError"
    kwargs = dict(case.get("kwargs", {}))
    if "collections" in case:
        collection = api["CollectionConfig"]
        kwargs["collections_to_save"] = [collection(n, p) for n, p in case["collections"]]
    if "actions" in case:
        kwargs["actions"] = make_actions(case["actions"], api)
    if op == "rule":
        rule = api["Rule"].sagemaker(getattr(rc, case["fn"])(), **kwargs)
    elif op == "custom_rule":
        rule = api["Rule"].custom(**kwargs)
    elif op == "profiler_rule":
        config = api["profiler_class"](case["cls"])(**case.get("config", {}))
        rule = api["ProfilerRule"].sagemaker(config, **kwargs)
        return {"request": rule.to_profiler_rule_config_dict(), "name": rule.name}
    elif op == "custom_profiler_rule":
        rule = api["ProfilerRule"].custom(**kwargs)
        return {"request": rule.to_profiler_rule_config_dict(), **attributes(rule)}
    result = {
        "request": snapshot(rule.to_debugger_rule_config_dict()),
        "collections": [[c.name, c.parameters] for c in rule.collection_configs],
        **attributes(rule),
    }
    if "prepare" in case:
        rule.prepare_actions(case["prepare"])
        result["prepared"] = rule.to_debugger_rule_config_dict()
    return result
"""

SDK_PROGRAM = """
import json
from sagemaker.debugger import (
    CollectionConfig, ProfilerRule, Rule, get_rule_container_image_uri, rule_configs,
)
from smdebug_rulesconfig.profiler_rules import rules as profiler_rules
{build}
api = {{
    "Rule": Rule, "ProfilerRule": ProfilerRule, "rule_configs": rule_configs,
    "CollectionConfig": CollectionConfig,
    "image_uri": lambda region: get_rule_container_image_uri(None, region),
    # rule_configs does not export Dataloader; its module does.
    "profiler_class": lambda name: getattr(profiler_rules, name),
}}
cases = json.loads({cases!r})
print(json.dumps({{case["id"]: run(case, api) for case in cases}}))
"""

# The example configuration the spec gives for each debugging rule.
SPEC_EXAMPLES: dict[str, dict[str, str]] = {
    "dead_relu": {
        "tensor_regex": ".*relu_output|.*ReLU_output",
        "threshold_inactivity": "1.0",
        "threshold_layer": "50.0",
    },
    "exploding_tensor": {"tensor_regex": ".*gradient", "only_nan": "False"},
    "poor_weight_initialization": {
        "activation_inputs_regex": ".*relu_input|.*ReLU_input",
        "threshold": "10.0",
        "distribution_range": "0.001",
        "patience": "5",
        "steps": "10",
    },
    "saturated_activation": {
        "tensor_regex": ".*tanh_input|.*sigmoid_input",
        "threshold_tanh_min": "-9.4999",
        "threshold_tanh_max": "9.4999",
        "threshold_sigmoid_min": "-23",
        "threshold_sigmoid_max": "16.99999",
        "threshold_inactivity": "1.0",
        "threshold_layer": "50.0",
    },
    "vanishing_gradient": {"threshold": "0.0000001"},
    "weight_update_ratio": {
        "num_steps": "100",
        "large_threshold": "10.0",
        "small_threshold": "0.00000001",
        "epsilon": "0.000000001",
    },
    "all_zero": {"tensor_regex": ".*", "threshold": "100"},
    "class_imbalance": {
        "threshold_imbalance": "10",
        "threshold_misprediction": "0.7",
        "samples": "500",
        "argmax": "False",
        "labels_regex": ".*labels",
        "predictions_regex": ".*predictions",
    },
    "loss_not_decreasing": {
        "tensor_regex": ".*",
        "use_losses_collection": "True",
        "num_steps": "10",
        "diff_percent": "0.1",
        "increase_threshold_percent": "5",
        "mode": "GLOBAL",
    },
    "overfit": {"tensor_regex": ".*", "start_step": "0", "patience": "1", "ratio_threshold": "0.1"},
    "overtraining": {"patience_train": "5", "patience_validation": "10", "delta": "0.01"},
    "similar_across_runs": {
        "other_trial": "<specify-another-job-name>",
        "collection_names": "losses",
        "tensor_regex": ".*",
    },
    "stalled_training_rule": {
        "threshold": "1800",
        "stop_training_on_fire": "True",
        "training_job_name_prefix": "<specify-training-base-job-name>",
    },
    "tensor_variance": {
        "collection_names": "weights",
        "max_threshold": "10",
        "min_threshold": "0.00001",
    },
    "unchanged_tensor": {
        "collection_names": "losses",
        "tensor_regex": "",
        "num_steps": "3",
        "rtol": "1e-05",
        "atol": "1e-08",
        "equal_nan": "False",
    },
    "check_input_images": {
        "threshold_mean": "0.2",
        "threshold_samples": "500",
        "regex": ".*hybridsequential0_input_0",
        "channel": "1",
    },
    "nlp_sequence_ratio": {
        "tensor_regex": ".*embedding0_input_0",
        "token_values": "0",
        "token_thresholds_percent": "50",
    },
    "confusion": {
        "category_no": "10",
        "labels": "labels",
        "predictions": "predictions",
        "labels_collection": "labels",
        "predictions_collection": "predictions",
        "min_diag": "0.9",
        "max_off_diag": "0.1",
    },
    "feature_importance_overweight": {
        "threshold": "0.8",
        "nfeatures": "3",
        "tensor_regex": ".*feature_importance/weight",
    },
    "tree_depth": {"depth": "4"},
}
RULE_FUNCTIONS = [*SPEC_EXAMPLES, "create_xgboost_report"]
# The rules trainprobe refuses without parameters: they would inspect nothing.
NEED_PARAMETERS = {"all_zero", "tensor_variance", "unchanged_tensor", "similar_across_runs"}
PROFILER_CLASSES = [
    "BatchSize",
    "CPUBottleneck",
    "Dataloader",
    "GPUMemoryIncrease",
    "IOBottleneck",
    "LoadBalancing",
    "LowGPUUtilization",
    "MaxInitializationTime",
    "OverallSystemUsage",
    "StepOutlier",
]
PROFILER_ARGUMENTS: dict[str, dict[str, Any]] = {
    "BatchSize": {"cpu_threshold_p95": 60, "window": 100},
    "CPUBottleneck": {"threshold": 20, "gpu_threshold": 5.5, "patience": 10},
    "Dataloader": {"min_threshold": 50, "max_threshold": 150},
    "GPUMemoryIncrease": {"increase": 2, "window": 20},
    "IOBottleneck": {"io_threshold": 30, "patience": 50},
    "LoadBalancing": {"threshold": 0.3},
    "LowGPUUtilization": {"threshold_p95": 80, "threshold_p5": 5},
    "MaxInitializationTime": {"threshold": 5},
    "OverallSystemUsage": {"scan_interval_us": 1_000_000},
    "StepOutlier": {"stddev": 4, "mode": "TRAIN", "n_outliers": 3},
}
STOP = ["StopTraining", [], {}]
EMAIL = ["Email", ["someone@example.com"], {}]
SMS = ["SMS", ["+14155550100"], {}]
ALL_ACTIONS = ["list", [STOP, ["StopTraining", ["given-prefix"], {}], EMAIL, SMS]]
REGIONS = [
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-southeast-2",
    "ap-northeast-3",
    "cn-north-1",
    "cn-northwest-1",
    "us-gov-west-1",
    "me-south-1",
    "af-south-1",
    "sa-east-1",
    "xx-nowhere-1",
]


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []

    def add(case_id: str, **case: Any) -> None:
        cases.append({"id": case_id, **case})

    for fn in RULE_FUNCTIONS:
        add(f"rule_configs.{fn}", op="rule_config", fn=fn)
        if fn not in NEED_PARAMETERS:
            add(f"Rule.sagemaker.{fn}.defaults", op="rule", fn=fn)
        if fn in SPEC_EXAMPLES:
            add(
                f"Rule.sagemaker.{fn}.spec_example",
                op="rule",
                fn=fn,
                kwargs={"rule_parameters": SPEC_EXAMPLES[fn]},
            )
    for name in ("weights", "gradients", "losses", "input_image", "input_sequence"):
        add(f"get_collection.{name}", op="get_collection", name=name)
    for name in ("relu_input", "relu_output"):
        add(f"get_collection.{name}", op="get_collection_parameters", name=name)
    for cls in PROFILER_CLASSES:
        add(f"{cls}()", op="profiler_config", cls=cls)
        add(f"{cls}(**kwargs)", op="profiler_config", cls=cls, kwargs=PROFILER_ARGUMENTS[cls])
        add(f"ProfilerRule.sagemaker.{cls}", op="profiler_rule", cls=cls)
        add(
            f"ProfilerRule.sagemaker.{cls}(**kwargs)",
            op="profiler_rule",
            cls=cls,
            config=PROFILER_ARGUMENTS[cls],
        )
    add("CPUBottleneck(positional)", op="profiler_config", cls="CPUBottleneck", args=[40, 20])
    report = {
        "CPUBottleneck_cpu_threshold": 90,
        "IOBottleneck_threshold": 20,
        "StepOutlier_mode": "TRAIN",
        "LoadBalancing_threshold": 0.25,
        "Dataloader_min_threshold": 60,
    }
    add("ProfilerReport()", op="profiler_config", cls="ProfilerReport")
    add("ProfilerReport(overrides)", op="profiler_config", cls="ProfilerReport", kwargs=report)
    add("ProfilerRule.sagemaker.ProfilerReport", op="profiler_rule", cls="ProfilerReport")
    add(
        "ProfilerRule.sagemaker.ProfilerReport(overrides)",
        op="profiler_rule",
        cls="ProfilerReport",
        config=report,
        kwargs={
            "name": "my-report",
            "container_local_output_path": "/opt/ml/processing/output",
            "s3_output_path": "s3://bucket/reports",
            "instance_type": "ml.m5.xlarge",
            "volume_size_in_gb": 10,
        },
    )
    add(
        "ProfilerRule.custom",
        op="custom_profiler_rule",
        kwargs={
            "name": "my-profiler-rule",
            "image_uri": "111122223333.dkr.ecr.us-west-2.amazonaws.com/my-rules:latest",
            "instance_type": "ml.t3.medium",
            "volume_size_in_gb": 5,
            "source": "rules/my_rule.py",
            "rule_to_invoke": "MyProfilerRule",
            "rule_parameters": {"threshold": "3"},
            "s3_output_path": "s3://bucket/out",
        },
    )
    add("actions.StopTraining()", op="actions", actions=["single", [STOP]])
    add("actions.StopTraining().prepared", op="actions", actions=["single", [STOP]], prepare="j-1")
    add(
        "actions.StopTraining(prefix)",
        op="actions",
        actions=["single", [["StopTraining", [], {"training_job_prefix": "Abc-9"}]]],
        prepare="ignored",
    )
    add("actions.Email", op="actions", actions=["single", [EMAIL]])
    add("actions.SMS", op="actions", actions=["single", [SMS]])
    add("actions.ActionList", op="actions", actions=ALL_ACTIONS)
    add("actions.ActionList.prepared", op="actions", actions=ALL_ACTIONS, prepare="train-job-7")
    add("actions.ActionList()", op="actions", actions=["list", []])
    add(
        "Rule.sagemaker.everything",
        op="rule",
        fn="loss_not_decreasing",
        kwargs={
            "name": "loss-watch",
            "container_local_output_path": "/opt/ml/processing/output/rule",
            "s3_output_path": "s3://bucket/rule-output",
            "rule_parameters": {"num_steps": "20", "mode": "TRAIN"},
        },
        collections=[["losses", {"train.save_interval": "10"}], ["weights", {}]],
        actions=ALL_ACTIONS,
        prepare="job-2024",
    )
    add(
        "Rule.sagemaker.other_trials",
        op="rule",
        fn="similar_across_runs",
        kwargs={
            "other_trials_s3_input_paths": ["s3://bucket/a/debug-output", "s3://bucket/b"],
            "rule_parameters": {"collection_names": "weights"},
        },
    )
    add(
        "Rule.sagemaker.one_action",
        op="rule",
        fn="vanishing_gradient",
        actions=["single", [STOP]],
        prepare="job-x",
    )
    add(
        "Rule.sagemaker.no_actions_drops_action_json",
        op="rule",
        fn="vanishing_gradient",
        kwargs={"rule_parameters": {"action_json": '[{"name": "email", "endpoint": "a@b.com"}]'}},
        prepare="job-x",
    )
    add(
        "Rule.sagemaker.python_values",
        op="rule",
        fn="class_imbalance",
        kwargs={"rule_parameters": {"samples": 1000, "argmax": True, "threshold_imbalance": 2.5}},
    )
    custom = {
        "name": "my-rule",
        "image_uri": "111122223333.dkr.ecr.us-west-2.amazonaws.com/"
        "sagemaker-debugger-rule-evaluator:latest",
        "instance_type": "ml.t3.medium",
        "volume_size_in_gb": 30,
    }
    add(
        "Rule.custom.source",
        op="custom_rule",
        kwargs={
            **custom,
            "source": "s3://bucket/rules/custom_rule.py",
            "rule_to_invoke": "CustomGradientRule",
            "rule_parameters": {"threshold": "20.0"},
            "other_trials_s3_input_paths": ["s3://bucket/other"],
            "container_local_output_path": "/opt/ml/processing/output",
            "s3_output_path": "s3://bucket/custom-output",
        },
        collections=[["custom_collection", {"include_regex": ".*relu", "save_interval": "5"}]],
        actions=["list", [STOP, EMAIL]],
        prepare="job-9",
    )
    add("Rule.custom.bare", op="custom_rule", kwargs=custom)
    for region in REGIONS:
        add(f"image_uri.{region}", op="image_uri", region=region)
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def sdk_results() -> dict[str, Any]:
    program = SDK_PROGRAM.format(build=BUILD, cases=json.dumps(CASES))
    result = run_reference("sagemaker", program)
    assert isinstance(result, dict)
    return result


def trainprobe_result(case: dict[str, Any]) -> Any:
    namespace: dict[str, Any] = {}
    exec(BUILD, namespace)
    api = {
        "Rule": Rule,
        "ProfilerRule": ProfilerRule,
        "rule_configs": rule_configs,
        "CollectionConfig": CollectionConfig,
        "image_uri": get_rule_container_image_uri,
        "profiler_class": lambda name: getattr(rule_configs, name),
    }
    # Through JSON, as the SDK's result came.
    return json.loads(json.dumps(namespace["run"](case, api)))


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_matches_the_sagemaker_sdk(case: dict[str, Any], sdk_results: dict[str, Any]) -> None:
    assert trainprobe_result(case) == sdk_results[case["id"]]


def test_the_comparison_covers_every_rule_configs_name() -> None:
    functions = {case["fn"] for case in CASES if case["op"] == "rule_config"}
    # LossSpike, GradientNormSpike and ReplicaDivergence are trainprobe's own: the SDK has no
    # function for them.
    spikes = {spec.sdk_name for spec in catalogue.debugging_rules() if spec.in_training}
    assert spikes == {"loss_spike", "gradient_norm_spike"}
    ours = spikes | {"replica_divergence"}
    assert functions == {spec.sdk_name for spec in catalogue.debugging_rules()} - ours
    classes = {case["cls"] for case in CASES if case["op"] == "profiler_config"}
    # OverallFrameworkMetrics is trainprobe's own: smdebug-rulesconfig has no class for it.
    expected = {spec.sdk_name for spec in catalogue.profiler_rules()} - {"OverallFrameworkMetrics"}
    assert classes == expected


@pytest.mark.parametrize("fn", sorted(SPEC_EXAMPLES))
def test_every_spec_example_is_accepted(fn: str) -> None:
    rule = Rule.sagemaker(getattr(rule_configs, fn)(), rule_parameters=SPEC_EXAMPLES[fn])
    spec = rule.spec
    assert spec is not None
    assert set(rule.effective_parameters) == set(spec.parameter_names)


@pytest.mark.parametrize("fn", sorted(NEED_PARAMETERS))
def test_rules_that_would_inspect_nothing_are_refused(fn: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Rule.sagemaker(getattr(rule_configs, fn)())
    assert all(error.field.startswith("rule_parameters") for error in caught.value.problems())


def test_bad_built_in_parameters_fail_at_construction() -> None:
    with pytest.raises(ConfigErrors) as caught:
        Rule.sagemaker(
            rule_configs.loss_not_decreasing(),
            rule_parameters={"diff_percent": "200", "num_step": "3"},
        )
    assert [error.field for error in caught.value] == [
        "rule_parameters.diff_percent",
        "rule_parameters.num_step",
    ]
    assert caught.value.errors[1].suggestion == "num_steps"


def test_a_user_rule_to_invoke_is_refused_for_built_in_rules() -> None:
    with pytest.raises(ConfigError) as caught:
        Rule.sagemaker(rule_configs.dead_relu(), rule_parameters={"rule_to_invoke": "MyRule"})
    assert caught.value.field == "rule_parameters.rule_to_invoke"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [({"source": "rule.py"}, "rule_to_invoke"), ({"rule_to_invoke": "MyRule"}, "source")],
)
def test_a_custom_rule_needs_source_and_rule_to_invoke_together(
    arguments: dict[str, str], field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Rule.custom("mine", "my-image", "ml.t3.medium", 1, **arguments)  # type: ignore[arg-type]
    assert caught.value.field == field
    with pytest.raises(ConfigError) as caught:
        ProfilerRule.custom("mine", "my-image", "ml.t3.medium", 1, **arguments)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_custom_rule_parameters_are_not_checked_against_the_catalogue() -> None:
    rule = Rule.custom(
        "mine",
        "img",
        "ml.t3.medium",
        1,
        source="r.py",
        rule_to_invoke="VanishingGradient",
        rule_parameters={"anything": "goes"},
    )
    assert rule.spec is None
    assert rule.effective_parameters == {"anything": "goes"}


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Rule.sagemaker(rule_configs.vanishing_gradient(), actions="email"), "actions"),
        (
            lambda: Rule.sagemaker(rule_configs.vanishing_gradient(), actions=[Email("a@b.com")]),
            "actions",
        ),
        (lambda: Rule.sagemaker(rule_configs.CPUBottleneck()), "base_config"),
        (lambda: ProfilerRule.sagemaker(rule_configs.dead_relu()), "base_config"),
        (
            lambda: Rule.sagemaker(
                rule_configs.vanishing_gradient(), collections_to_save=["gradients"]
            ),
            "collections_to_save[0]",
        ),
        (
            lambda: Rule.sagemaker(
                rule_configs.vanishing_gradient(), rule_parameters={"action_json": "[{}]"}
            ),
            "rule_parameters.action_json[0].name",
        ),
        (
            lambda: Rule.sagemaker(
                rule_configs.similar_across_runs(), other_trials_s3_input_paths="s3://b"
            ),
            "other_trials_s3_input_paths",
        ),
        (lambda: Rule.custom("", "img", "ml.t3.medium", 1), "name"),
        (lambda: Rule.custom("mine", "img", "ml.t3.medium", -1), "volume_size_in_gb"),
    ],
)
def test_bad_arguments_name_the_field(build: Any, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build()
    assert caught.value.field == field


def test_a_debugging_rule_cannot_go_to_profiler_rule_and_back() -> None:
    with pytest.raises(ConfigError) as caught:
        ProfilerRule.from_request_dict(
            Rule.sagemaker(rule_configs.vanishing_gradient()).to_debugger_rule_config_dict()
        )
    assert caught.value.field == "RuleParameters.rule_to_invoke"
    assert "Rule" in caught.value.allowed


def test_rule_base_cannot_be_built() -> None:
    with pytest.raises(TypeError):
        RuleBase("n", PLACEHOLDER_IMAGE, None, None, None, None, {})  # type: ignore[abstract]


def _round_trip_rules() -> list[Rule]:
    actions = ActionList(StopTraining(), Email("a@b.com"))
    prepared = Rule.sagemaker(rule_configs.vanishing_gradient(), actions=actions)
    prepared.prepare_actions("job-1")
    return [
        Rule.sagemaker(rule_configs.dead_relu()),
        Rule.sagemaker(
            rule_configs.similar_across_runs(),
            name="compare",
            s3_output_path="s3://b/out",
            container_local_output_path="/opt/ml/processing/output",
            other_trials_s3_input_paths=["s3://b/other"],
        ),
        prepared,
        Rule.custom(
            "mine",
            "my-image",
            "ml.t3.medium",
            3,
            source="rules/mine.py",
            rule_to_invoke="Mine",
            rule_parameters={"x": "1"},
        ),
        Rule.custom("bare", "my-image", "ml.t3.medium", 1),
    ]


@pytest.mark.parametrize("rule", _round_trip_rules(), ids=lambda rule: rule.name)
def test_a_rule_reads_back_from_its_request_dict(rule: Rule) -> None:
    request = rule.to_debugger_rule_config_dict()
    parsed = Rule.from_request_dict(request)
    assert parsed == rule
    assert parsed.to_debugger_rule_config_dict() == request
    assert parsed.actions == rule.actions or "action_json" not in request
    if rule.spec is not None:
        assert parsed.collection_configs == rule.collection_configs


def test_a_request_dict_s_actions_become_actions() -> None:
    rule = _round_trip_rules()[2]
    parsed = Rule.from_request_dict(rule.to_debugger_rule_config_dict())
    assert parsed.actions == rule.actions
    assert isinstance(parsed.actions, ActionList)


@pytest.mark.parametrize(
    "config",
    [
        rule_configs.ProfilerReport(CPUBottleneck_cpu_threshold=90),
        rule_configs.StepOutlier(mode="EVAL"),
        rule_configs.LoadBalancing(),
    ],
    ids=repr,
)
def test_a_profiler_rule_reads_back_from_its_request_dict(config: Any) -> None:
    rule = ProfilerRule.sagemaker(config, s3_output_path="s3://b/p", instance_type="ml.m5.large")
    request = rule.to_profiler_rule_config_dict()
    parsed = ProfilerRule.from_request_dict(request)
    assert parsed == rule
    assert parsed.to_profiler_rule_config_dict() == request


def test_the_built_in_image_of_a_region_is_a_built_in_rule() -> None:
    request = {
        "RuleConfigurationName": "LossNotDecreasing",
        "RuleEvaluatorImage": get_rule_container_image_uri("us-west-2"),
        "InstanceType": "ml.t3.medium",
        "VolumeSizeInGB": 0,
        "RuleParameters": {"rule_to_invoke": "LossNotDecreasing", "num_steps": "20"},
    }
    rule = Rule.from_request_dict(request)
    assert rule.spec is catalogue.get("LossNotDecreasing")
    assert rule.effective_parameters["num_steps"] == 20
    assert rule.collection_configs == [CollectionConfig("losses", {"save_interval": "500"})]


def test_a_bad_request_dict_reports_every_field() -> None:
    request = {
        "RuleConfigurationName": "",
        "RuleEvaluatorImage": PLACEHOLDER_IMAGE,
        "InstanceTyp": "ml.t3.medium",
        "VolumeSizeInGB": "ten",
        "RuleParameters": {
            "rule_to_invoke": "VanishingGradient",
            "threshold": "tiny",
            "action_json": '[{"name": "sms", "endpoint": "555"}]',
        },
    }
    with pytest.raises(ConfigErrors) as caught:
        Rule.from_request_dict(request)
    fields = [error.field for error in caught.value]
    assert fields == [
        "InstanceTyp",
        "RuleConfigurationName",
        "VolumeSizeInGB",
        "RuleParameters.threshold",
        "RuleParameters.action_json[0].endpoint",
    ]
    assert caught.value.errors[0].suggestion == "InstanceType"


def test_an_unknown_built_in_rule_in_a_request_suggests_the_name() -> None:
    with pytest.raises(ConfigError) as caught:
        ProfilerRule.from_request_dict(
            {
                "RuleConfigurationName": "report",
                "RuleEvaluatorImage": PLACEHOLDER_IMAGE,
                "RuleParameters": {"rule_to_invoke": "ProfilerReprot"},
            }
        )
    assert caught.value.field == "RuleParameters.rule_to_invoke"
    assert caught.value.suggestion == "ProfilerReport"


def test_a_custom_rule_in_a_request_needs_its_rule_to_invoke() -> None:
    with pytest.raises(ConfigError) as caught:
        Rule.from_request_dict(
            {
                "RuleConfigurationName": "mine",
                "RuleEvaluatorImage": "my-image",
                "RuleParameters": {"source_s3_uri": "rules/mine.py"},
            }
        )
    assert caught.value.field == "RuleParameters.rule_to_invoke"


def test_prepare_actions_without_actions_removes_action_json() -> None:
    rule = Rule.sagemaker(
        rule_configs.overtraining(),
        rule_parameters={"action_json": StopTraining("x").serialize()},
    )
    rule.prepare_actions("job")
    assert "action_json" not in (rule.rule_parameters or {})


def test_the_default_profiler_rule_is_a_uniquely_named_profiler_report() -> None:
    before = int(time.time())
    first, second = get_default_profiler_rule(), get_default_profiler_rule()
    assert first.name != second.name
    for rule in (first, second):
        base, _, stamp = rule.name.partition("-")
        assert base == "ProfilerReport"
        assert int(stamp) >= before
        assert rule.to_profiler_rule_config_dict()["RuleParameters"] == {
            "rule_to_invoke": "ProfilerReport"
        }


def test_an_unknown_region_suggests_one() -> None:
    with pytest.raises(ConfigError) as caught:
        get_rule_container_image_uri("us-east-7")
    assert caught.value.field == "region"
    assert caught.value.suggestion in ("us-east-1", "us-east-2")
    assert get_rule_container_image_uri(None, "us-east-1") == get_rule_container_image_uri(
        "us-east-1"
    )
