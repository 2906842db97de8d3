"""``python -m trainprobe.jobs.host_runner``: run one host of a job, on the machine it is run on.

The command the README gives for spreading a job's hosts over several machines; the host's
runner itself is ``trainprobe.jobs.runner.host_runner``.
"""

from __future__ import annotations

import sys

from trainprobe.jobs.runner.host_runner import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
