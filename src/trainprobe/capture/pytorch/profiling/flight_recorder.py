"""The flight recorder: torch.profiler over the steps that matter, when they happen.

Armed wherever framework profiling runs (``TRAINPROBE_FLIGHT_RECORDER=no`` disarms it), it is
told of every step start by the ``FrameworkProfiler``. Three triggers start a capture of the next
``steps`` steps (default 2):

- a slow step: the step that just ended took more than k times the median of its mode's recent
  steps (``trainprobe.capture.slow_step``); one ordinary step after the capture is profiled too,
  for its operators. The slow step itself is explained against ``ordinary``, the last step of its
  mode before it that was not slow, which no profiler ran in;
- a request in the profiler output (``profile_request.json``: ``trainprobe profile JOB --steps
  N``, UpdateTrainingJob, a rule's ProfileNextSteps action), looked for at most every
  ``request_interval`` seconds.

A slow step the training did not run for (its thread spent most of the excess waiting for a
core, and would not have been slow without that wait: ``trainprobe.capture.contention``) is not
profiled: a profile would show nothing that
differs. It is noted instead ("the machine was busy", ``storage.contention_notes``), consecutive
such steps in one note.

The recorder never triggers on its own work. The steps a capture profiles are not judged, nor the
step after (its trace is written at that step's start), nor the steps the scheduled detailed or
Python profiling covers; the median is of the steps judged and found ordinary. Its own time in a
step (starting and stopping torch.profiler, writing a trace) is measured and left out of the
step's duration. After a capture, a refractory window: no step is judged for ``refractory_steps``
steps and for as long as the capture took, from its first step to its last trace written (memory
and caches settle after a profile; a later stall is a new one).

Captures are written as ``trainprobe.storage.flight_captures`` lays them out, with the detailed
profiler's torch.profiler settings less the memory events (nobody asked for this capture: it must
add nothing to the training's output, where PyTorch's allocator reports frees it cannot size
while memory is profiled). Bounds: one capture in flight at a time (a trigger meanwhile
is ignored; a request waits), a trace over ``max_bytes`` is not kept (its manifest says so), and
at most ``max_traces`` traces a process: the oldest comparison goes first, then new triggers are
refused.

On a step with nothing to do the cost is one ``pread`` of the thread's scheduler statistics, a
subtraction, a dictionary look-up, an append and a comparison, all on the host: no device
synchronisation.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field

from trainprobe.capture.contention import Contention, ThreadClock, ThreadTimes, contention
from trainprobe.capture.pytorch.profiling.detailed import DetailedProfiling
from trainprobe.capture.slow_step import SlowStep, SlowSteps
from trainprobe.storage.contention_notes import (
    MAX_NOTES,
    ContentionNote,
    write_contention_notes,
)
from trainprobe.storage.flight_captures import (
    PROFILE_REQUEST_FILE,
    Capture,
    CapturedStep,
    ProfileRequest,
    capture_dir,
    comparison_trace_name,
    load_profile_request,
    steps_trace_name,
    write_capture,
)
from trainprobe.storage.locations import join

__all__ = ["FlightRecorder"]

log = logging.getLogger(__name__)

MEGABYTE = 1024 * 1024


@dataclass
class _Started:
    """A step that started: its numbers, when, the training thread's times then, and the
    recorder's own time in it so far."""

    step: int
    mode: str
    mode_step: int | None
    start_us: float
    times: ThreadTimes | None
    own_s: float = 0.0

    def ended_at(self, end_us: float) -> CapturedStep:
        return CapturedStep(self.step, self.mode, self.start_us, end_us, self.mode_step)


@dataclass
class _InFlight:
    """The capture being recorded: its manifest, the steps' starts, and where it stops."""

    capture: Capture
    stop_at: int
    compare: bool
    began_us: float
    comparing: bool = False
    starts: list[_Started] = field(default_factory=list)


class FlightRecorder:
    """Captures the next steps with torch.profiler when a trigger fires (module docstring)."""

    def __init__(
        self,
        out_dir: str,
        node_id: str,
        *,
        steps: int = 2,
        slow_steps: SlowSteps | None = None,
        max_bytes: int = 50 * MEGABYTE,
        max_traces: int = 10,
        request_interval: float = 0.5,
        refractory_steps: int = 10,
        since_us: float,
    ) -> None:
        self.out_dir = out_dir
        self.node_id = node_id
        self.steps = steps
        self.slow_steps = slow_steps if slow_steps is not None else SlowSteps()
        self.max_bytes = max_bytes
        self.max_traces = max_traces
        self.request_interval_us = request_interval * 1e6
        self.refractory_steps = refractory_steps
        self.captures: list[Capture] = []
        """The captures this process made, oldest first."""
        self.traces: list[tuple[Capture, str]] = []
        """The traces kept, oldest first, with the capture each belongs to."""
        self.notes: list[ContentionNote] = []
        """The contention notes this process made, oldest first (``MAX_NOTES`` at most)."""
        self.clock = ThreadClock()
        self._noted_beyond = 0
        self._profile = DetailedProfiling(out_dir, node_id, memory=False)
        self._in_flight: _InFlight | None = None
        self._last: _Started | None = None
        self._ordinary: dict[str, CapturedStep] = {}
        self._quiet_until = -1
        self._quiet_until_us = 0.0
        self._pending: ProfileRequest | None = None
        self._request_path = join(out_dir, PROFILE_REQUEST_FILE)
        self._request_mtime: int | None = None
        self._next_look_us = 0.0
        self._since_s = since_us / 1e6
        self._said_full = False

    @property
    def in_flight(self) -> bool:
        """Whether a capture is being recorded."""
        return self._in_flight is not None

    def step_in_progress(self) -> tuple[int, float] | None:
        """The global step running now and when it started (microseconds since the epoch)."""
        last = self._last
        return None if last is None else (last.step, last.start_us)

    def step_started(
        self, step: int, mode: str, start_us: float, *, busy: bool, mode_step: int | None = None
    ) -> None:
        """Global step ``step`` of ``mode`` (its ``mode_step``-th) starts at ``start_us``
        (microseconds since the epoch). ``busy``: the scheduled detailed or Python profiling
        covers this step or the one before, so the recorder neither judges nor starts anything
        now. The recorder's own time here counts as the new step's, left out when it is judged."""
        entered = time.perf_counter()
        last = self._last
        current = self._last = _Started(step, mode, mode_step, start_us, self.clock.read())
        try:
            self._step_started(last, current, busy)
        finally:
            current.own_s += time.perf_counter() - entered

    def _step_started(self, last: _Started | None, current: _Started, busy: bool) -> None:
        flight = self._in_flight
        if flight is not None:
            self._continue(flight, current, busy)
            return
        if current.start_us >= self._next_look_us:
            self._next_look_us = current.start_us + self.request_interval_us
            self._look_for_request()
        if busy:
            self._quiet_until = max(self._quiet_until, current.step + 1)
            return
        if self._pending is not None:
            request, self._pending = self._pending, None
            reason = request_reason(request)
            self._begin(request.trigger, reason, current, request.steps, False)
            return
        if (
            last is None
            or last.mode != current.mode
            or current.step <= self._quiet_until
            or current.start_us < self._quiet_until_us
        ):
            return
        duration = (current.start_us - last.start_us) / 1e6 - last.own_s
        slow = self.slow_steps.judge(current.mode, duration)
        ended = last.ended_at(current.start_us)
        if slow is None:
            self._ordinary[current.mode] = ended
            return
        busy_machine = contention(
            last.times, current.times, slow.duration_s, slow.median_s, slow.threshold_s
        )
        if busy_machine is not None:
            self._note(ended, busy_machine)
        else:
            self._begin_after_slow(slow, ended, current)

    def finish(self, end_us: float) -> None:
        """The training's profiling ends (or the scheduled profiler needs torch.profiler):
        write what the capture in flight has."""
        flight, self._in_flight = self._in_flight, None
        if flight is None:
            return
        started = time.perf_counter()
        if flight.comparing:
            self._write_comparison(flight, end_us)
        else:
            self._write_steps(flight, end_us)
        # The refractory window, from the last trace written: as many steps, and as long again
        # as the capture took (its steps, and writing the last trace).
        written_at_us = end_us + (time.perf_counter() - started) * 1e6
        took_us = written_at_us - flight.began_us
        step = self._last.step if self._last is not None else flight.stop_at
        self._quiet_until = max(self._quiet_until, step + self.refractory_steps)
        self._quiet_until_us = max(self._quiet_until_us, written_at_us + took_us)

    def abandon(self) -> None:
        """Stop the capture in flight without writing it (after a failure)."""
        self._in_flight = None
        self._profile.abandon()

    def close(self) -> None:
        """The training's profiling ends for good: the files kept open are closed."""
        self.clock.close()

    # ----- triggers -----

    def _begin_after_slow(self, slow: SlowStep, ended: CapturedStep, current: _Started) -> None:
        times = f"{slow.duration_s / slow.median_s:.1f} x " if slow.median_s > 0 else ""
        reason = (
            f"{ended.words()} took {slow.duration_s:.3f} s, {times}the median "
            f"{slow.median_s:.3f} s of its mode's recent steps (the threshold was "
            f"{slow.threshold_s:.3f} s)"
        )
        capture = self._begin("slow_step", reason, current, self.steps, True, ended.step)
        if capture is not None:
            capture.slow_step = ended
            capture.ordinary = self._ordinary.get(ended.mode)
            capture.median_s = slow.median_s
            capture.threshold_s = slow.threshold_s

    def _begin(
        self,
        trigger: str,
        reason: str,
        current: _Started,
        steps: int,
        compare: bool,
        named_step: int | None = None,
    ) -> Capture | None:
        if not self._make_room(2 if compare else 1):
            return None
        step = current.step
        named = step if named_step is None else named_step
        capture = Capture(
            trigger, reason, named, self.node_id, capture_dir(trigger, named), written_at=0.0
        )
        self._profile.start(step)
        self._in_flight = _InFlight(
            capture, step + steps, compare, current.start_us, starts=[current]
        )
        self.captures.append(capture)
        last = step + steps - 1
        log.info("trainprobe: flight recorder: capturing steps %d-%d: %s", step, last, reason)
        return capture

    def _look_for_request(self) -> None:
        try:
            mtime = os.stat(self._request_path).st_mtime_ns
        except OSError:
            return
        if mtime == self._request_mtime:
            return
        self._request_mtime = mtime
        try:
            request = load_profile_request(self.out_dir)
        except (OSError, ValueError) as error:
            log.warning(
                "trainprobe: ignoring the profile request %s: %s", self._request_path, error
            )
            return
        if request.time >= self._since_s:
            self._pending = request

    # ----- contention -----

    def _note(self, ended: CapturedStep, busy: Contention) -> None:
        """A slow step the training waited for a core through: noted, not profiled; a step
        right after the last one noted lengthens that note."""
        notes = self.notes
        previous = notes[-1] if notes else None
        if (
            previous is not None
            and previous.mode == ended.mode
            and previous.last_step == ended.step - 1
        ):
            previous.last_step, previous.last_mode_step = ended.step, ended.mode_step
            previous.end_us = ended.end_us
            previous.duration_s += busy.duration_s
            previous.ran_s += busy.ran_s
            previous.waited_s += busy.waited_s
            previous.load = busy.load
        elif len(notes) < MAX_NOTES:
            note = ContentionNote(
                node=self.node_id,
                mode=ended.mode,
                first_step=ended.step,
                last_step=ended.step,
                first_mode_step=ended.mode_step,
                last_mode_step=ended.mode_step,
                start_us=ended.start_us,
                end_us=ended.end_us,
                duration_s=busy.duration_s,
                median_s=busy.median_s,
                ran_s=busy.ran_s,
                waited_s=busy.waited_s,
                load=busy.load,
                cores=busy.cores,
            )
            notes.append(note)
            log.info("trainprobe: flight recorder: not profiled: %s", note.words())
        else:
            self._noted_beyond += 1
        write_contention_notes(self.out_dir, self.node_id, notes, self._noted_beyond)

    # ----- a capture in flight -----

    def _continue(self, flight: _InFlight, current: _Started, busy: bool) -> None:
        step = current.step
        self._quiet_until = max(self._quiet_until, step + 1)
        if busy:  # the scheduled detailed profiling wants torch.profiler: it has priority
            self.finish(current.start_us)
            return
        if step < flight.stop_at:
            flight.starts.append(current)
            self._profile.step_started(step)
            return
        if step == flight.stop_at and flight.compare:
            self._write_steps(flight, current.start_us)
            flight.comparing, flight.starts = True, [current]
            self._profile.start(step)
            return
        self.finish(current.start_us)

    def _write_steps(self, flight: _InFlight, end_us: float) -> None:
        capture = flight.capture
        capture.steps = _steps_of(flight.starts, end_us)
        first, last = capture.steps[0].step, capture.steps[-1].step
        name = steps_trace_name(self.node_id, capture.trigger, first, last)
        capture.trace = self._keep(capture, name)
        self._write_manifest(capture)

    def _write_comparison(self, flight: _InFlight, end_us: float) -> None:
        capture = flight.capture
        capture.comparison = _steps_of(flight.starts, end_us)[0]
        name = comparison_trace_name(self.node_id, capture.comparison.step)
        capture.comparison_trace = self._keep(capture, name)
        self._write_manifest(capture)

    def _keep(self, capture: Capture, name: str) -> str | None:
        """Write the trace running now as ``name``; None when it was too large to keep."""
        path = join(self.out_dir, f"{capture.folder}/{name}")
        size = self._profile.stop_into(path, self.max_bytes)
        if size > self.max_bytes:
            capture.dropped.append(
                f"{name}: {size:,} bytes, over the {self.max_bytes:,} bytes a trace may take"
            )
            return None
        self.traces.append((capture, name))
        return name

    def _write_manifest(self, capture: Capture) -> None:
        capture.written_at = time.time()
        write_capture(self.out_dir, capture)

    def _make_room(self, traces: int) -> bool:
        """Room for ``traces`` more traces within ``max_traces``, the oldest comparisons going
        first; False (nothing dropped) when even without any comparison there is none."""
        excess = len(self.traces) + traces - self.max_traces
        comparisons = [
            (capture, name) for capture, name in self.traces if name == capture.comparison_trace
        ]
        if excess > len(comparisons):
            if not self._said_full:
                self._said_full = True
                log.warning(
                    "trainprobe: flight recorder: %d traces kept, the most a training process "
                    "keeps; later triggers are not captured",
                    len(self.traces),
                )
            return False
        for capture, name in comparisons[: max(0, excess)]:
            self.traces.remove((capture, name))
            with contextlib.suppress(OSError):
                os.remove(join(self.out_dir, f"{capture.folder}/{name}"))
            capture.comparison_trace = None
            capture.dropped.append(f"{name}: dropped to keep at most {self.max_traces} traces")
            self._write_manifest(capture)
        return True


def request_reason(request: ProfileRequest) -> str:
    """A request in words, for a capture's reason."""
    return f"{request.requested_by} asked for {request.steps} step(s)"


def _steps_of(starts: list[_Started], end_us: float) -> list[CapturedStep]:
    ends = [start.start_us for start in starts[1:]] + [end_us]
    return [start.ended_at(end) for start, end in zip(starts, ends, strict=True)]
