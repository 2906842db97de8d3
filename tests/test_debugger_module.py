"""Code written for sagemaker.debugger ports to trainprobe.debugger by changing the import."""

from __future__ import annotations

import json
import subprocess
import sys

from reference_envs import run_reference

# A SageMaker user's configuration, as they would write it; it prints every request dictionary.
SAGEMAKER_SCRIPT = """
import json
from sagemaker.debugger import (
    CollectionConfig, DataloaderProfilingConfig, DebuggerHookConfig, DetailedProfilingConfig,
    FrameworkProfile, ProfilerConfig, ProfilerRule, PythonProfiler, PythonProfilingConfig, Rule,
    TensorBoardOutputConfig, cProfileTimer, rule_configs,
)
from sagemaker.debugger.metrics_config import StepRange, TimeRange

actions = rule_configs.ActionList(
    rule_configs.StopTraining(), rule_configs.Email("mlteam@example.com"),
    rule_configs.SMS("+15555550100"),
)
rules = [
    Rule.sagemaker(rule_configs.vanishing_gradient(), rule_parameters={"threshold": "1e-6"}),
    Rule.sagemaker(rule_configs.loss_not_decreasing(), actions=actions),
    Rule.sagemaker(
        base_config=rule_configs.dead_relu(),
        rule_parameters={"tensor_regex": ".*relu_output|.*ReLU_output", "threshold_layer": "40.0"},
        collections_to_save=[
            CollectionConfig(
                name="custom_relu_collection",
                parameters={"include_regex": ".*relu_output|.*ReLU_output", "save_interval": "50"},
            )
        ],
    ),
    Rule.custom(
        name="improper-activation", image_uri="552407032007.dkr.ecr.ap-south-1.amazonaws.com/"
        "sagemaker-debugger-rule-evaluator:latest", instance_type="ml.c4.xlarge",
        volume_size_in_gb=400, source="custom_rules.py", rule_to_invoke="ImproperActivation",
        rule_parameters={"collection_names": "relu_activations"},
    ),
]
for rule in rules:
    rule.prepare_actions("my-training-job")
profiler_rules = [
    ProfilerRule.sagemaker(rule_configs.ProfilerReport(CPUBottleneck_cpu_threshold=90)),
    ProfilerRule.sagemaker(rule_configs.StepOutlier(stddev=4, n_outliers=5)),
    ProfilerRule.sagemaker(rule_configs.LowGPUUtilization(threshold_p95=60)),
]
hook = DebuggerHookConfig(
    s3_output_path="s3://bucket/debug",
    hook_parameters={"save_interval": "100"},
    collection_configs=[
        CollectionConfig("losses", {"train.save_interval": "10", "eval.save_interval": "5"}),
        CollectionConfig("weights", {"reductions": "mean,abs_l2_norm"}),
    ],
)
profiler = ProfilerConfig(
    system_monitor_interval_millis=100,
    framework_profile_params=FrameworkProfile(
        detailed_profiling_config=DetailedProfilingConfig(start_step=10, num_steps=2),
        dataloader_profiling_config=DataloaderProfilingConfig(start_step=3, num_steps=4),
        python_profiling_config=PythonProfilingConfig(
            start_step=12, num_steps=1, python_profiler=PythonProfiler.CPROFILE,
            cprofile_timer=cProfileTimer.CPU_TIME,
        ),
    ),
)
print(json.dumps({
    "rules": [rule.to_debugger_rule_config_dict() for rule in rules],
    "collections_to_save": [
        [c._to_request_dict() for c in rule.collection_configs or []] for rule in rules
    ],
    "profiler_rules": [rule.to_profiler_rule_config_dict() for rule in profiler_rules],
    "hook": hook._to_request_dict(),
    "tensorboard": TensorBoardOutputConfig("s3://bucket/tb")._to_request_dict(),
    "profiler": profiler._to_request_dict(),
    "ranges": [StepRange(3, 4).to_json(), TimeRange(1700000000, 2.5).to_json()],
}, sort_keys=True))
"""


def test_a_sagemaker_script_ports_by_changing_the_import(tmp_path) -> None:
    expected = run_reference("sagemaker", SAGEMAKER_SCRIPT)
    ported = SAGEMAKER_SCRIPT.replace("sagemaker.debugger", "trainprobe.debugger")
    result = subprocess.run(
        [sys.executable, "-c", ported], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected


def test_every_public_name_of_the_sdk_module_exists() -> None:
    sdk_names = run_reference(
        "sagemaker",
        """
import json, sagemaker.debugger as d, sagemaker.debugger.metrics_config as m
print(json.dumps({
    "debugger": sorted(n for n in dir(d) if not n.startswith("_") and n[0].isupper()),
    "metrics_config": sorted(n for n in ("StepRange", "TimeRange") if hasattr(m, n)),
}))
""",
    )
    import trainprobe.debugger as debugger
    import trainprobe.debugger.metrics_config as metrics_config

    # The SDK re-exports two module-level helpers that are not part of the spec's contract.
    missing = [name for name in sdk_names["debugger"] if not hasattr(debugger, name)]
    assert missing == []
    assert all(hasattr(metrics_config, name) for name in sdk_names["metrics_config"])
    # The spec's helper functions.
    assert debugger.get_default_profiler_rule().name.startswith("ProfilerReport")
    assert "sagemaker-debugger-rules" in debugger.get_rule_container_image_uri("us-east-1")
