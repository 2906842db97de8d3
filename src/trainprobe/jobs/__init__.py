"""The control plane: the job store, the launcher, executors and the SageMaker-shaped API."""
