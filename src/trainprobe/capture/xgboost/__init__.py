"""The XGBoost hook. The only package of ``capture`` that imports xgboost."""

from trainprobe.capture.xgboost.hook import Hook, get_hook

__all__ = ["Hook", "get_hook"]
