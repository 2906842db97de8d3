"""What runs inside a job's child processes: the training's entry (``training_entry``, which
installs the automatic hooks), a debugging rule's evaluator (``rule_process``), the profiler
rules' (``profiler_rules_process``), torchrun on the loopback interface (``local_torchrun``),
SageMaker's built-in XGBoost algorithm (``xgboost_algorithm``), and how each of them watches the
runner that started it (``runner_watch``, ``signal_relay``, ``rule_heartbeat``)."""
