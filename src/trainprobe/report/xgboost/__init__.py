"""The XGBoost training report (SageMaker's CreateXgboostReport), as an HTML page and JSON.

::

    from trainprobe.report.xgboost import build_xgboost_report
    files = build_xgboost_report("<job>/debug-output", "<job>/rule-output/CreateXgboostReport")
    print(files.html)   # <job>/rule-output/CreateXgboostReport/xgboost_report.html

From the command line: ``trainprobe report JOB`` writes it for an XGBoost job, beside the profiler
report; the job runner writes it when a job with a CreateXgboostReport rule ends.
"""

from trainprobe.report.xgboost.build import (
    HTML_FILE,
    JSON_FILE,
    RULE_NAME,
    build_xgboost_report,
    is_xgboost_output,
)

__all__ = ["HTML_FILE", "JSON_FILE", "RULE_NAME", "build_xgboost_report", "is_xgboost_output"]
