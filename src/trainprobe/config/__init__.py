"""What the user asked for: the SageMaker-compatible configuration objects and request shapes.

Pure Python: no I/O, no framework imports. ``trainprobe.debugger`` re-exports the SDK names.
"""
