"""``PyTorch``: the SageMaker Python SDK's ``sagemaker.pytorch.PyTorch``, for a local job.

``from trainprobe.estimator import PyTorch`` takes the SDK's PyTorch estimator arguments::

    estimator = PyTorch(
        entry_point="train.py", framework_version="2.1", py_version="py310",
        role=role, instance_count=1, instance_type="ml.g4dn.xlarge",
        rules=[Rule.sagemaker(rule_configs.vanishing_gradient())],
    )
    estimator.fit({"training": "data/"})

``framework_version``, ``py_version``, ``image_uri`` and ``distribution`` name an image and a
cluster that do not exist here: the installed PyTorch runs the script, and ``instance_count``
hosts are started with torchrun. They are accepted and logged once (``trainprobe.sdk_arguments``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainprobe.estimator import Estimator

__all__ = ["PyTorch"]


class PyTorch(Estimator):
    """``sagemaker.pytorch.PyTorch``: an ``Estimator`` with the SDK's PyTorch arguments."""

    def __init__(
        self,
        entry_point: str,
        framework_version: str | None = None,
        py_version: str | None = None,
        source_dir: str | None = None,
        hyperparameters: Mapping[str, Any] | None = None,
        image_uri: str | None = None,
        distribution: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """As the SDK's; see ``Estimator`` for the other arguments."""
        super().__init__(
            entry_point,
            source_dir=source_dir,
            hyperparameters=hyperparameters,
            framework_version=framework_version,
            py_version=py_version,
            image_uri=image_uri,
            distribution=distribution,
            **kwargs,
        )
