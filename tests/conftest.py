"""Test-wide settings. Reference environments live in tests/reference_envs.py."""

import sys
from pathlib import Path

# Let tests import their shared modules (reference_envs, browser) by name.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The S3 server (SeaweedFS) the storage tests write to: fixtures s3_server and s3_url.
from seaweedfs import s3_server, s3_url  # noqa: F401
