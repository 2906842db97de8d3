"""The ``trainprobe`` command: it parses arguments and calls the layers below."""
