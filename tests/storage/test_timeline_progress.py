"""latest_timeline_step: how far a live training has got, from the end of its step timeline."""

from __future__ import annotations

import math
from pathlib import Path

from trainprobe.storage.trace_file import TraceFileWriter, latest_timeline_step

T0_US = 1_795_300_000_000_000.0


def write_steps(writer: TraceFileWriter, steps: range) -> None:
    for step in steps:
        args = {"step_num": str(step), "global_step": step, "mode": "TRAIN", "pid": 1}
        writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", T0_US + step * 1e4, 9e3, args)


def test_the_open_file_tells_the_step_a_few_steps_behind_and_the_finished_one_exactly(
    tmp_path: Path,
) -> None:
    assert latest_timeline_step(str(tmp_path)) is None
    writer = TraceFileWriter(str(tmp_path), "0-host", start_time_us=T0_US, close_interval=math.inf)
    write_steps(writer, range(300))
    live = latest_timeline_step(str(tmp_path))
    assert live is not None and 250 <= live <= 299  # what the writer has flushed so far
    writer.close()
    assert latest_timeline_step(str(tmp_path)) == 299

    # A newer file, still open, takes over from the finished one.
    later = TraceFileWriter(str(tmp_path), "0-host", start_time_us=T0_US, close_interval=math.inf)
    write_steps(later, range(300, 600))
    step = latest_timeline_step(str(tmp_path))
    assert step is not None and 550 <= step <= 599
    later.close()
    assert latest_timeline_step(str(tmp_path)) == 599
