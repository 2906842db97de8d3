"""A training that only reads its input channel: it prints what SM_CHANNEL_TRAINING holds."""

import os

channel = os.environ["SM_CHANNEL_TRAINING"]
print("training channel:", sorted(os.listdir(channel)), flush=True)
