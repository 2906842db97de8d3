"""The name a training process's framework profiling files carry: ``<rank or pid>-<host>``.

smdebug's node ids (reference/smdebug.md §5.1): the rank in a distributed run, else the process
id, then the host: SageMaker's ``current_host`` (``algo-1``) where its resource configuration
exists, else ``$SM_CURRENT_HOST`` (a trainprobe job's ``algo-1``, the name its system metrics
carry), else the machine's host name; ``_`` becomes ``-`` (it separates the parts of a trace file
name). smdebug's readers turn ``0-algo-1`` into ``algo-1-0`` to line it up with the host's system
metrics.
"""

from __future__ import annotations

import json
import os
import re
import socket

from trainprobe import settings
from trainprobe.capture.pytorch.distributed import this_worker

__all__ = ["RESOURCE_CONFIG_PATH", "default_node_id"]

RESOURCE_CONFIG_PATH = "/opt/ml/input/config/resourceconfig.json"
"""Where SageMaker describes the cluster inside a training container."""


def _host() -> str:
    try:
        with open(RESOURCE_CONFIG_PATH, encoding="utf-8") as file:
            host = json.load(file).get("current_host")
        if isinstance(host, str) and host:
            return host
    except (OSError, ValueError, AttributeError):
        pass
    return settings.CURRENT_HOST.get() or socket.gethostname()


def default_node_id() -> str:
    """This process's node id, as smdebug names it (``0-algo-1``, ``19853-myhost``)."""
    worker = this_worker()
    rank = worker.rank if worker.world_size > 1 else os.getpid()
    node_id = re.sub(r"[^A-Za-z0-9.\-]+", "-", f"{rank}-{_host()}").strip("-.")
    return node_id or str(rank)
