"""The data sets the XGBoost hook predicts on: a DMatrix, or a file named with its content type.

As smdebug's hook takes them: ``xgboost.DMatrix(...)``, or ``(path, content_type)`` where the
content type is ``csv``/``text/csv`` (the label in the first column) or ``libsvm``/
``text/libsvm``/``text/x-libsvm``, of a local file.
"""

from __future__ import annotations

import os

import xgboost as xgb

from trainprobe.config.errors import ConfigError

__all__ = ["dmatrix_of"]

_FORMATS = {
    "csv": "csv",
    "text/csv": "csv",
    "libsvm": "libsvm",
    "text/libsvm": "libsvm",
    "text/x-libsvm": "libsvm",
}
_ALLOWED = "an xgboost.DMatrix or a (path, content type) pair, the type one of " + ", ".join(
    _FORMATS
)


def dmatrix_of(value: object, field: str) -> xgb.DMatrix | None:
    """``value`` as a DMatrix (None stays None); ConfigError naming ``field`` otherwise."""
    if value is None or isinstance(value, xgb.DMatrix):
        return value
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)):
        raise ConfigError(field, value, _ALLOWED)
    path, content_type = os.path.expanduser(value[0]), str(value[1]).strip().lower()
    if content_type not in _FORMATS:
        raise ConfigError(f"{field}[1]", value[1], _ALLOWED)
    if not os.path.isfile(path):
        raise ConfigError(f"{field}[0]", value[0], "an existing local file")
    kind = _FORMATS[content_type]
    uri = f"{path}?format=csv&label_column=0" if kind == "csv" else f"{path}?format=libsvm"
    return xgb.DMatrix(uri)
