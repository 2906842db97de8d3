"""The profiler report and the live dashboard."""
