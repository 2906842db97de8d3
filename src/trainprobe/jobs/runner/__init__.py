"""The job runner: one process per job (``python -m trainprobe.jobs.runner.job_runner``) that
starts the training on each host (``hosts``, ``host_trainings``, ``training_process``), the
system monitor and the rule evaluators (``job_rules``, on a ``rule_executor``), watches them, and
stops them all when the job ends; ``liveness`` tells whether a job's runner is still alive, and
``host_runner`` runs one host of a job on a machine of its own."""
