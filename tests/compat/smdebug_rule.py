"""A custom rule as SageMaker Debugger's documentation writes it, unchanged."""

from smdebug.rules.rule import Rule


class LossAbove(Rule):
    def __init__(self, base_trial, threshold="1.0"):
        super().__init__(base_trial, action_str="")
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for name in self.base_trial.tensor_names(collection="losses"):
            if self.base_trial.tensor(name).value(step) > self.threshold:
                return True
        return False
