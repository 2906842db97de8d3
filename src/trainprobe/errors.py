"""The root of every error trainprobe raises on purpose, and the kinds of error under it.

Catch ``TrainprobeError`` to handle anything trainprobe refused or could not do; catch one kind
to handle one layer's errors. Each error is defined beside the code that raises it::

    TrainprobeError
    ├── ConfigError (ValueError)        config/errors.py: a value trainprobe cannot accept
    │   ├── ConfigErrors                  every problem of one request, raised together
    │   ├── RequestFileError              config/request_json.py: a request file not read at all
    │   └── JobOperationError             jobs/errors.py: a job operation refused (also a JobError)
    │       ├── JobNotFound, JobNameInUse, JobStateError
    │       └── JobStartError               the job could not be made or started; nothing kept
    ├── FormatError (ValueError)        a file that is not in the format it should be in
    │   ├── RecordError                   storage/tfrecord.py: a TFRecord frame
    │   │   └── RecordChecksumError         its bytes changed after writing
    │   ├── IndexFileError                storage/index_file.py: a step's index file
    │   ├── WireError                     storage/protobuf_wire.py: protobuf bytes
    │   └── ProfileUnreadable             analysis/profiling_data/python_profiles.py
    ├── CaptureError (RuntimeError)     inside the training
    │   ├── ProfilerUnavailable           capture/pytorch/profiling/python_profiling.py
    │   └── TrainingStopRequested         capture/stop_request.py: a rule asked the training to stop
    ├── AnalysisError                   analysis/exceptions.py: reading a trial (smdebug's names)
    │   ├── TensorUnavailable, ShapeUnavailableForStep
    │   ├── TensorUnavailableForStep
    │   │   └── TensorRecordDamaged         saved at the step, but its record cannot be read back
    │   ├── StepUnavailable, StepNotYetAvailable, NoMoreData
    │   └── InvalidWorker, MissingCollectionFiles, IndexReaderException
    ├── RuleError                       rules/: evaluating a rule
    │   ├── RuleEvaluationConditionMet    rules/rule.py (smdebug's name)
    │   ├── InsufficientInformationForRuleInvocation
    │   └── CustomRuleError               rules/custom.py: a user's rule file cannot be used
    ├── JobError                        jobs/ and the estimator
    │   ├── JobOperationError             (above)
    │   └── UnexpectedStatusException     estimator.py (the SageMaker SDK's name; a ValueError)
    ├── ObjectStoreUnavailable          storage/object_store.py: no fsspec backend for the URL
    ├── ObjectStoreUnreachable          storage/object_store.py: its bucket cannot be reached
    ├── AccessKeyFileError              jobs/server/access_key.py: trainprobe serve's key file
    ├── SignatureRefused                jobs/server/request_signature.py: a request not signed
    ├── Refused                         ui/pages/base.py: a web UI request answered with an error
    └── StreamRefused                   ui/event_stream.py: a live page's data is gone

``trainprobe.exceptions`` re-exports the analysis errors where smdebug users import them.
"""

from __future__ import annotations

__all__ = [
    "AnalysisError",
    "CaptureError",
    "FormatError",
    "JobError",
    "RuleError",
    "TrainprobeError",
]


class TrainprobeError(Exception):
    """Something trainprobe refused or could not do; the message says what and why."""


class FormatError(TrainprobeError, ValueError):
    """A file (or its bytes) is not in the format it should be in: truncated, corrupt, foreign."""


class CaptureError(TrainprobeError, RuntimeError):
    """Something the hook or the profilers, inside the training, cannot do."""


class AnalysisError(TrainprobeError):
    """Reading a trial's tensors or profiling data cannot give what was asked."""


class RuleError(TrainprobeError):
    """Evaluating a rule: its condition was met, it cannot be judged, or it cannot be loaded."""


class JobError(TrainprobeError):
    """A training job cannot be created, changed or followed as asked."""
