"""The Keras hook. The only package of ``capture`` that imports keras."""

from trainprobe.capture.keras.hook import Hook, get_hook

__all__ = ["Hook", "get_hook"]
