"""Running a script under torchrun, as the distributed tests do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def torchrun(script: Path, *arguments: str, processes: int = 2, timeout: float = 300) -> None:
    """Run ``script ARGUMENTS`` under torchrun with ``processes`` ranks on this host, one BLAS
    thread each; fail with the end of its error output if it fails. It runs in a session of its
    own, so that a hang is cleaned up with every rank, not just torchrun."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes)]
    command += ["--standalone", str(script), *arguments]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        start_new_session=True,
    )
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    assert process.returncode == 0, stderr[-4000:]
