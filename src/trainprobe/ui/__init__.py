"""The live web UI (``trainprobe ui``): every job of the job store, its rules, tensors and
profile in the browser, updated as the training runs.

It reads what the report reads, through the same readers (the job store, the trial, the rules'
output, the step timeline and system metrics), and acts on a job only through the control plane
(StopTrainingJob, UpdateTrainingJob). ``access`` says who may use it, ``app`` serves it (one
module per page in ``pages``), ``event_stream`` pushes changes to its pages, ``job_view`` and
``tensor_view`` read a job for it, ``server`` runs it and ``address_file`` says where it runs.
"""
