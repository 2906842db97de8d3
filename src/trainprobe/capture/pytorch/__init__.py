"""The PyTorch hook. The only package of ``capture`` that imports torch."""

from trainprobe.capture.pytorch.hook import Hook, get_hook

__all__ = ["Hook", "get_hook"]
