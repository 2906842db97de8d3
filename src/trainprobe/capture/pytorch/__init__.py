"""The PyTorch hook. The only package of ``capture`` that imports torch."""

from trainprobe.capture.pytorch.hook import Hook, del_hook, get_hook, set_hook

__all__ = ["Hook", "del_hook", "get_hook", "set_hook"]
