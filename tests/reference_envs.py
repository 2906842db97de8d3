"""Virtual environments holding the reference implementations trainprobe is checked against.

- the SageMaker Python SDK v2 (``sagemaker==2.257.7``): what ``sagemaker.debugger`` builds for
  the same calls, compared with what ``trainprobe.debugger`` builds;
- smdebug 1.0.34 with the dependencies it forgot to declare: it must read trainprobe's output, and
  trainprobe must read what smdebug's own hook wrote;
- the same with XGBoost instead of PyTorch ("smdebug-xgboost"): XGBoost 1.7, of smdebug's time
  (its TrainingCallback and ``xgboost.collective`` paths; smdebug asks pkg_resources for the
  ``xgboost`` distribution, which rules out the later ``xgboost-cpu`` wheels), for smdebug's own
  XGBoost hook.

Each is built once into the test cache (``$TRAINPROBE_TEST_CACHE``, default ``.cache/`` in the
repository) and reused; a test that needs one is skipped, with the reason, only if it cannot be
built.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

SAGEMAKER_SDK = ("sagemaker==2.257.7",)
SMDEBUG = (
    "smdebug==1.0.34",
    "numpy<2",
    "pandas<2.3",
    "requests",
    "psutil",
    "setuptools<81",
    "torch==2.13.0",
    # trainprobe's own record checksums, for the benchmarks that run trainprobe's src beside it
    "crc32c==2.9.post0",
)

SMDEBUG_XGBOOST = (
    "smdebug==1.0.34",
    "numpy<2",
    "pandas<2.3",
    "requests",
    "psutil",
    "setuptools<81",
    "xgboost==1.7.6",
)


def cache_dir() -> Path:
    path = Path(os.environ.get("TRAINPROBE_TEST_CACHE", REPO / ".cache"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _build(name: str, requirements: tuple[str, ...]) -> Path:
    """The python of the environment ``name``, built with ``requirements`` unless it exists."""
    root = cache_dir() / name
    python = root / "bin" / "python"
    done = root / ".complete"
    with open(cache_dir() / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists() and done.read_text() == "\n".join(requirements):
            return python
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *requirements],
            check=True,
            capture_output=True,
            text=True,
        )
        done.write_text("\n".join(requirements))
    return python


def reference_python(name: str) -> Path:
    """The python of a reference environment ("sagemaker", "smdebug" or "smdebug-xgboost"), or
    skip the test."""
    requirements = {
        "sagemaker": SAGEMAKER_SDK,
        "smdebug": SMDEBUG,
        "smdebug-xgboost": SMDEBUG_XGBOOST,
    }[name]
    try:
        return _build(name, requirements)
    except subprocess.CalledProcessError as error:
        pytest.skip(f"cannot build the {name} reference environment: {error.stderr or error}")


def run_reference(name: str, code: str, *, cwd: Path | None = None) -> object:
    """Run ``code`` in a reference environment and return what it printed, parsed as JSON.

    The code should ``print(json.dumps(...))`` its result as the last line it prints.
    """
    python = reference_python(name)
    result = subprocess.run(
        [str(python), "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        env={**os.environ, "SAGEMAKER_SUPPRESS_V2_WARNING": "1"},
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-4000:]
        raise AssertionError(f"the {name} reference failed (exit {result.returncode}):\n{output}")
    return json.loads(result.stdout.strip().splitlines()[-1])
