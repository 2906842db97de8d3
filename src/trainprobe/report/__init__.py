"""The profiler report: what a job did and what to change, as an HTML page and a JSON file.

::

    from trainprobe.report import build_report
    files = build_report("my-job")        # a job's directory, or its profiler-output
    print(files.html)   # <job>/rule-output/<ProfilerReport>/profiler-output/profiler-report.html

From the command line: ``trainprobe report JOB_OR_PATH`` (``python -m trainprobe.report PATH``).
"""

from trainprobe.report.build import HTML_FILE, JSON_FILE, ReportFiles, build_report
from trainprobe.report.job_files import JobFiles

__all__ = ["HTML_FILE", "JSON_FILE", "JobFiles", "ReportFiles", "build_report"]
