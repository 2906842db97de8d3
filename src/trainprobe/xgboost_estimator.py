"""``XGBoost``: the SageMaker Python SDK's ``sagemaker.xgboost.XGBoost`` estimator, run locally.

Code written for the SDK's XGBoost framework estimator runs here with its arguments unchanged::

    from trainprobe.debugger import Rule, rule_configs
    from trainprobe.estimator import XGBoost

    estimator = XGBoost(
        entry_point="train.py",
        framework_version="1.7-1",
        hyperparameters={"num_round": 50},
        rules=[Rule.sagemaker(rule_configs.create_xgboost_report())],
    )
    estimator.fit()

It is ``Estimator`` (the script, its hyperparameters, the Debugger arguments) plus the framework:
``framework_version`` (required, as in the SDK) and ``py_version`` name the SageMaker XGBoost
container the SDK would use, sent as ``AlgorithmSpecification.TrainingImage``
(``sagemaker-xgboost:<version>``, or ``image_uri`` when given). The script runs on this
machine's XGBoost, and the hook goes into its ``xgb.train``/``fit`` as the container puts it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from trainprobe.config.errors import ConfigError
from trainprobe.config.sdk_request import TrainingJobSettings
from trainprobe.estimator import Estimator

__all__ = ["XGBoost"]

_VERSION = re.compile(r"^\d+\.\d+(-\d+)?$")
IMAGE_NAME = "sagemaker-xgboost"


class XGBoost(Estimator):
    """A training script using XGBoost, run as a local job (``sagemaker.xgboost.XGBoost``)."""

    def __init__(
        self,
        entry_point: str,
        framework_version: str | None = None,
        source_dir: str | None = None,
        hyperparameters: dict[str, Any] | None = None,
        py_version: str = "py3",
        image_uri: str | None = None,
        image_uri_region: str | None = None,
        **kwargs: Any,
    ) -> None:
        """As the SDK's (``image_uri_region``, the region of the SDK's image URI, is kept and
        changes nothing); the other keyword arguments are ``Estimator``'s."""
        if framework_version is None:
            raise ConfigError(
                "framework_version", None, "the XGBoost container's version, e.g. '1.7-1'"
            )
        if not isinstance(framework_version, str) or not _VERSION.match(framework_version):
            raise ConfigError(
                "framework_version", framework_version, "a version like '1.7-1' or '1.5-1'"
            )
        if py_version != "py3":
            raise ConfigError("py_version", py_version, "'py3' (the XGBoost containers' only one)")
        super().__init__(
            entry_point, source_dir=source_dir, hyperparameters=hyperparameters, **kwargs
        )
        self.framework_version = framework_version
        self.py_version = py_version
        self.image_uri = image_uri or f"{IMAGE_NAME}:{framework_version}"
        self.image_uri_region = image_uri_region

    def training_image_uri(self) -> str:
        """The container the SDK would train in (here, the framework hint of the request)."""
        return self.image_uri

    def _settings(self) -> TrainingJobSettings:
        return dataclasses.replace(super()._settings(), training_image=self.training_image_uri())
