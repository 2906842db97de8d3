"""Test-wide settings. Reference environments live in tests/reference_envs.py."""

import sys
from pathlib import Path

# Let tests import their shared modules (reference_envs, browser) by name.
sys.path.insert(0, str(Path(__file__).resolve().parent))
