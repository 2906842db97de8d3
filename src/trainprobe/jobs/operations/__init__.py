"""The job operations: CreateTrainingJob (``create``), DescribeTrainingJob (``describe``),
ListTrainingJobs (``listing``), StopTrainingJob, UpdateTrainingJob and a profile request
(``control``), the checks a request passes before a job is created (``admission``), and what they
read of a job: which job a user means (``locate``), its rules' statuses (``rule_statuses``), its
progress seen from outside (``progress``). ``trainprobe.jobs`` exports the operations."""
