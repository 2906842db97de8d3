"""``capture.spike_window``'s judgement made on the tensor's device, with no read on the host.

A GPU training must not wait for its loss to reach the host every step just so that a spike rule
can judge it. This window keeps the last healthy values in a ring buffer on the value's device
and judges as ``SpikeWindow`` does (the same warm-up, two-sided z-score, ratio, non-finite
values always spikes, spikes left out of the window), in a constant number of small kernels.
The verdict stays a tensor: the flag can skip a fused optimizer's update on the device
(``found_inf``), and the numbers are copied to the host without blocking, to be read a step late.
"""

from __future__ import annotations

import torch

from trainprobe.capture.spike_window import SpikeSettings

__all__ = ["VERDICT_FIELDS", "DeviceSpikeWindow"]

VERDICT_FIELDS = ("spike", "value", "mean", "std", "z", "warm")
"""What a verdict tensor holds, in order (float64; ``spike`` and ``warm`` are 0 or 1)."""


class DeviceSpikeWindow:
    """The last ``settings.window`` healthy values of one series, on ``device``."""

    def __init__(self, settings: SpikeSettings, device: torch.device) -> None:
        self.settings = settings
        self.buffer = torch.zeros(settings.window, dtype=torch.float64, device=device)
        self.slots = torch.arange(settings.window, device=device)
        self.count = torch.zeros((), dtype=torch.int64, device=device)
        self.position = torch.zeros((), dtype=torch.int64, device=device)

    def judge(self, value: torch.Tensor) -> torch.Tensor:
        """The verdict on ``value`` (see ``VERDICT_FIELDS``); a healthy value enters the window."""
        settings = self.settings
        value = value.detach().reshape(()).to(self.buffer.device, torch.float64)
        held = torch.clamp(self.count, max=settings.window)
        inside = self.slots < held
        count = torch.clamp(held, min=1)
        mean = torch.where(inside, self.buffer, 0.0).sum() / count
        variance = torch.where(inside, (self.buffer - mean) ** 2, 0.0).sum() / count
        std = torch.maximum(variance.sqrt(), torch.clamp(mean.abs() * 1e-6, min=1e-12))
        z = (value - mean) / std
        warm = held >= max(settings.warmup, 2)
        outlying = z.abs() > settings.sigma
        if settings.ratio > 0:
            outlying = outlying | (value > settings.ratio * mean)
        spike = ~torch.isfinite(value) | (warm & outlying)
        healthy = ~spike
        index = self.position.reshape(1)
        kept = torch.where(healthy, value, self.buffer.index_select(0, index)[0])
        self.buffer.index_put_((index,), kept.reshape(1))
        entered = healthy.to(torch.int64)
        self.position = (self.position + entered) % settings.window
        self.count = self.count + entered
        return torch.stack([spike.double(), value, mean, std, z, warm.double()])
