"""What load ``trainprobe serve`` withstands: many calls at once, idle connections, big bodies.

It starts ``trainprobe serve --port 0`` in a fresh trainprobe home and, against it:

- 200 signed ListTrainingJobs at once, each on its own connection: how many got an answer
  (issue 11 saw 163 of 200 reset with http.server's backlog of 5);
- 1 500 idle connections: the server's threads and memory while they are held, and how many
  the server has closed once ``--request-timeout`` has passed (http.server held one thread each);
- 8 signed bodies of 16 MiB at once: the server's peak memory (http.server went from 57 to
  658 MB) and their answers (413).

Memory and threads are printed next to the idle server's, measured in the same run, as ratios.
Nothing is asserted.

    ulimit -n 8192; python benchmarks/serve_load.py [--request-timeout 3]

(the idle connections need about 1 600 open files in this process and in the server.)
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.jobs.api_calls import sign  # noqa: E402

from trainprobe.jobs.server.access_key import AccessKey, load_or_create  # noqa: E402


def _status(url: str, key: AccessKey, body: bytes, timeout: float = 120.0) -> int | str:
    """The status of one signed ListTrainingJobs with ``body``, or what went wrong."""
    port = int(url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = sign(url, "SageMaker.ListTrainingJobs", body, key)
        connection.request("POST", "/", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    except OSError as error:
        return type(error).__name__
    finally:
        connection.close()


def _at_once(count: int, call: Callable[[], int | str]) -> list[int | str]:
    results: list[int | str] = []
    threads = [threading.Thread(target=lambda: results.append(call())) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _summary(results: list[int | str]) -> str:
    counts: dict[str, int] = {}
    for result in results:
        counts[str(result)] = counts.get(str(result), 0) + 1
    return ", ".join(f"{count} x {result}" for result, count in sorted(counts.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--request-timeout", type=float, default=3.0)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="trainprobe-serve-load-")
    env = {**os.environ, "TRAINPROBE_HOME": home, "PYTHONPATH": str(REPO / "src")}
    os.environ["TRAINPROBE_HOME"] = home
    command = [sys.executable, "-m", "trainprobe.cli.main", "serve", "--port", "0"]
    command += ["--request-timeout", str(args.request_timeout)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        url = [server.stdout.readline(), server.stdout.readline()][1].split()[-1]
        key = load_or_create()
        process = psutil.Process(server.pid)
        _status(url, key, b"{}")
        idle_rss, idle_threads = process.memory_info().rss, process.num_threads()
        print(f"idle server: {idle_rss / 2**20:.0f} MiB, {idle_threads} threads")

        started = time.perf_counter()
        results = _at_once(200, lambda: _status(url, key, b"{}"))
        seconds = time.perf_counter() - started
        print(f"200 calls at once: {_summary(results)} in {seconds:.1f} s")

        port = int(url.rsplit(":", 1)[1])
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(1500)]
        time.sleep(0.5)
        rss, threads = process.memory_info().rss, process.num_threads()
        print(
            f"1500 idle connections held: {rss / 2**20:.0f} MiB ({rss / idle_rss:.2f} x idle), "
            f"{threads} threads ({threads / idle_threads:.2f} x idle)"
        )
        time.sleep(args.request_timeout + 1)
        closed = 0
        for connection in idle:
            connection.settimeout(5)
            try:
                closed += connection.recv(1) == b""
            except ConnectionResetError:
                closed += 1
            except TimeoutError:
                pass  # still open
            connection.close()
        print(f"  closed by the server after {args.request_timeout + 1:g} s: {closed} of 1500")

        big = json.dumps({"NextToken": "x" * (16 << 20)}).encode()
        peak = [idle_rss]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                peak[0] = max(peak[0], process.memory_info().rss)
                time.sleep(0.01)

        sampler = threading.Thread(target=sample)
        sampler.start()
        results = _at_once(8, lambda: _status(url, key, big))
        sampling.set()
        sampler.join()
        print(
            f"8 bodies of 16 MiB at once: {_summary(results)}; peak {peak[0] / 2**20:.0f} MiB "
            f"({peak[0] / idle_rss:.2f} x idle)"
        )
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
