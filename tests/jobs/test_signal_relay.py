"""A job's process stops on SIGTERM even when the signal lands while it holds the lock its
stop needs (the deadlock that left a rule process of a killed runner alive for good)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    from trainprobe.jobs.processes.signal_relay import relay_signals

    status_lock = threading.Lock()  # say, the lock a rule takes to write its status

    def stop(signum):
        with status_lock:
            print("stopped on", signal.Signals(signum).name, flush=True)
            os._exit(0)

    if sys.argv[1] == "relayed":
        relay_signals([signal.SIGTERM], stop)
    else:
        signal.signal(signal.SIGTERM, lambda signum, frame: stop(signum))
    with status_lock:
        print("ready", flush=True)
        time.sleep(1.0)
    time.sleep(60)
    """
)


def run_and_terminate(how: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, how], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    process.send_signal(signal.SIGTERM)  # while the main thread holds the lock
    return process


def test_a_relayed_sigterm_stops_the_process_once_the_lock_is_free() -> None:
    process = run_and_terminate("relayed")
    stdout, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    assert stdout == "stopped on SIGTERM\n"


def test_a_handler_taking_the_lock_in_the_signal_handler_hangs() -> None:
    process = run_and_terminate("direct")
    try:
        process.communicate(timeout=5)
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
    finally:
        process.kill()
        process.communicate()
    assert hung, "the direct handler was expected to deadlock; this test no longer shows why"
