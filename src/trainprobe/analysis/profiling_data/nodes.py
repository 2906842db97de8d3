"""Which host each training process ran on: lining framework nodes up with system-metric hosts.

System metrics name hosts ``algo-<n>``; framework files name processes ``<rank or pid>-<host>``
(``0-algo-1``, or ``19853-myhost`` outside SageMaker). A process belongs to:

1. the host ``hosts`` names for it, when given;
2. the host its own name ends with (``0-algo-1`` on ``algo-1``), or that it is (``algo-1``);
3. otherwise, when the system metrics have a single host and every process left over names the
   same machine, that host (a training on one machine, where the monitor writes ``algo-1``).

A host's samples are lined up with the steps of one of its processes: the one with the lowest
rank (ranks of a data-parallel job step together), by name when there is no rank.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["host_first", "host_of_nodes", "step_nodes"]

_RANKED = re.compile(r"^(\d+)-(.+)$")


def _machine(node_id: str) -> str:
    match = _RANKED.match(node_id)
    return match.group(2) if match else node_id


def host_first(node_id: str) -> str:
    """A process's name as smdebug's readers show it: a SageMaker host first (``0-algo-1`` is
    ``algo-1-0``), any other name as it is."""
    match = re.match(r"(.*)-(algo.*)", node_id)
    return f"{match.group(2)}-{match.group(1)}" if match else node_id


def host_of_nodes(
    node_ids: Iterable[str],
    system_hosts: Iterable[str],
    hosts: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The system host of each framework node that can be placed (see the module docstring)."""
    known = set(system_hosts)
    placed: dict[str, str] = {}
    left: list[str] = []
    for node_id in sorted(set(node_ids)):
        if hosts is not None and node_id in hosts:
            placed[node_id] = hosts[node_id]
        elif node_id in known:
            placed[node_id] = node_id
        elif _machine(node_id) in known:
            placed[node_id] = _machine(node_id)
        else:
            left.append(node_id)
    if left and len(known) == 1 and len({_machine(node_id) for node_id in left}) == 1:
        [only] = known
        placed.update(dict.fromkeys(left, only))
    return placed


def _rank_order(node_id: str) -> tuple[float, str]:
    match = _RANKED.match(node_id)
    rank = float(match.group(1)) if match else float("inf")
    return rank, node_id


def step_nodes(host_of: Mapping[str, str], with_steps: Iterable[str]) -> dict[str, str]:
    """For each host, the framework node (among ``with_steps``) whose steps its samples get."""
    chosen: dict[str, str] = {}
    for node_id in sorted(set(with_steps), key=_rank_order):
        host = host_of.get(node_id)
        if host is not None:
            chosen.setdefault(host, node_id)
    return chosen
