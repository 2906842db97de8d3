"""ReductionConfig: the reductions saved instead of (or beside) raw tensors; its string form."""

from __future__ import annotations

import pytest

from reference_envs import run_reference
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.config.errors import ConfigError


def test_the_string_form_splits_into_reductions_norms_and_their_abs_variants() -> None:
    config = ReductionConfig.parse("min, max,abs_mean,l2_norm,abs_l1_norm", save_shape="true")
    assert config.reductions == ["min", "max"]
    assert config.abs_reductions == ["mean"]
    assert config.norms == ["l2"]
    assert config.abs_norms == ["l1"]
    assert config.save_shape is True
    assert config.save_raw_tensor is False
    assert config.requested() == [
        ("min", False),
        ("max", False),
        ("l2", False),
        ("mean", True),
        ("l1", True),
    ]


def test_the_collections_file_form_round_trips() -> None:
    config = ReductionConfig(reductions=["mean"], abs_norms=["l2"], save_raw_tensor=True)
    document = config.to_json_dict()
    assert document == {
        "save_raw_tensor": True,
        "reductions": "mean,abs_l2_norm",
        "save_shape": False,
    }
    assert ReductionConfig.from_dict(document) == config


def test_median_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError) as raised:
        ReductionConfig.parse("min,median")
    assert raised.value.value == "median"
    assert "smdebug" in raised.value.allowed


def test_a_misspelt_reduction_gets_a_suggestion() -> None:
    with pytest.raises(ConfigError) as raised:
        ReductionConfig(reductions=["maxx"])
    assert raised.value.suggestion == "max"
    with pytest.raises(ConfigError) as raised:
        ReductionConfig.parse("abs_l2norm")
    assert raised.value.suggestion == "abs_l2_norm"


def test_booleans_must_be_booleans() -> None:
    with pytest.raises(ConfigError) as raised:
        ReductionConfig(save_raw_tensor="yes")
    assert raised.value.field == "ReductionConfig.save_raw_tensor"


@pytest.mark.slow
def test_smdebug_reads_the_string_form_the_same_way() -> None:
    text = "min,max,abs_mean,l2_norm,abs_l1_norm,variance,abs_prod"
    theirs = run_reference(
        "smdebug",
        f"""
        import json
        from smdebug import ReductionConfig
        config = ReductionConfig.from_dict({{"reductions": {text!r}, "save_raw_tensor": True}})
        print(json.dumps([config.reductions, config.abs_reductions, config.norms,
                          config.abs_norms, config.to_json_dict()]))
        """,
    )
    ours = ReductionConfig.parse(text, save_raw_tensor=True)
    assert theirs == [
        ours.reductions,
        ours.abs_reductions,
        ours.norms,
        ours.abs_norms,
        ours.to_json_dict(),
    ]
