"""The web UI's pages, one module each, in datasette's shape: ``jobs`` (every job), ``job`` (one
job: its rules, charts, reports and actions), ``tensors`` (a job's saved tensors), ``compare``
(one scalar of several jobs); ``static`` serves what every page loads, ``base`` what they share.

Each page is a small class made with what it needs (the job views, the store for actions) whose
data methods return JSON-ready data and whose handlers answer HTTP; ``trainprobe.ui.app`` puts
their routes together behind ``trainprobe.ui.access``.
"""
