"""The rule engine, the built-in debugging and profiler rules, custom rules and actions."""
