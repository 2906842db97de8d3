"""``smdebug.analysis``: helpers for reading trials."""
