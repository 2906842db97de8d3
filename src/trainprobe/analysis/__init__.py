"""Reading a job's output back: the trial API over tensors, and the profiler data frames."""
