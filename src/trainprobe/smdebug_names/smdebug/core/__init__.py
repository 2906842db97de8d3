"""``smdebug.core``: the configuration names scripts import from smdebug's core modules."""
