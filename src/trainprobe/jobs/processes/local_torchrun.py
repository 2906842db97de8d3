"""``python -m trainprobe.jobs.processes.local_torchrun ARGS``: torchrun, with every store on
127.0.0.1.

A job with ``ResourceConfig.InstanceCount`` > 1 runs its hosts on this one machine, so
nothing it opens needs to be reached from elsewhere. torchrun's key-value stores (the rendezvous
store and the agent's store the workers share) listen on every interface, whatever address they
are given; here each store server is handed a socket already bound to ``127.0.0.1``
(``TCPStore``'s ``master_listen_fd``). The job runner also gives the workers
``MASTER_ADDR=127.0.0.1`` (``--local-addr``) and ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME``
``lo``, so the communication backends stay on the loopback interface too.

The arguments are torchrun's (``python -m torch.distributed.run``).
"""

from __future__ import annotations

import socket
import sys
from typing import Any

__all__ = ["LOOPBACK", "main"]

LOOPBACK = "127.0.0.1"
_BACKLOG = 2048


def _loopback_store_class() -> type:
    import torch.distributed as dist

    original: type = getattr(dist, "TCPStore")  # noqa: B009 (not in torch's stubs' exports)
    sockets: list[socket.socket] = []

    class LoopbackTCPStore(original):  # type: ignore[misc,valid-type]
        """A TCPStore whose server, when it is one, listens on 127.0.0.1 only."""

        _trainprobe_loopback = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            names = ("host_name", "port", "world_size", "is_master", "timeout")
            given = dict(zip(names, args, strict=False))
            given.update({key: kwargs[key] for key in names if key in kwargs})
            if given.get("is_master") and kwargs.get("master_listen_fd") is None:
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((LOOPBACK, int(given.get("port") or 0)))
                listener.listen(_BACKLOG)
                sockets.append(listener)  # the store serves on it for the process's life
                kwargs = {key: value for key, value in kwargs.items() if key not in names}
                kwargs["master_listen_fd"] = listener.fileno()
                kwargs["is_master"] = True
                kwargs["port"] = listener.getsockname()[1]
                kwargs["host_name"] = LOOPBACK
                for name in ("world_size", "timeout"):
                    if name in given:
                        kwargs[name] = given[name]
                args = ()
            super().__init__(*args, **kwargs)

    return LoopbackTCPStore


def _use_loopback_stores() -> None:
    """Make every module that names torch's TCPStore name the loopback one instead."""
    import torch.distributed as dist

    original = getattr(dist, "TCPStore")  # noqa: B009 (not in torch's stubs' exports)
    if getattr(original, "_trainprobe_loopback", False):
        return
    replacement = _loopback_store_class()
    for module in list(sys.modules.values()):
        if getattr(module, "TCPStore", None) is original:
            setattr(module, "TCPStore", replacement)  # noqa: B010


def main() -> None:
    """Run torchrun with ``sys.argv[1:]``, its stores on 127.0.0.1."""
    _use_loopback_stores()
    from torch.distributed import run

    sys.argv[0] = "torchrun"
    run.main()


if __name__ == "__main__":
    main()
