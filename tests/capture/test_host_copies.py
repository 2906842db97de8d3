"""Host copies of a step's tensors: each arrives with the value it had when the copy started.

On a GPU the tensors of one dtype travel together (one flat snapshot, one pinned buffer, one
copy); the values must still come back one by one, each in its shape, whatever the tensor's
layout, and unaffected by in-place updates made after the copy started.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainprobe.capture.pytorch import host_copy
from trainprobe.capture.pytorch.host_copy import start_copies

DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
    ),
]


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    return (
        tensor.detach().float().cpu().numpy()
        if tensor.is_floating_point()
        else tensor.cpu().numpy()
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch_bytes", [1 << 28, 64], ids=["one batch", "several batches"])
def test_each_copy_holds_its_tensor_as_it_was_when_the_copy_started(
    device: str, batch_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_copy, "BATCH_BYTES", batch_bytes)
    torch.manual_seed(0)
    tensors = [
        torch.randn(3, 5, device=device),
        torch.randn(7, device=device).to(torch.bfloat16),
        torch.randn(4, 6, device=device).t(),  # not contiguous
        torch.tensor(2.5, device=device),  # 0-d
        torch.arange(10, device=device),  # int64
        torch.randn(2, 3, 4, device=device),
        torch.randn(5, device=device).to(torch.bfloat16),
    ]
    expected = [as_numpy(tensor).copy() for tensor in tensors]
    copies = start_copies(tensors)
    for tensor in tensors:  # updates after the copy started must not reach it
        tensor.add_(1)
    assert len(copies) == len(tensors)
    for copy, want, tensor in zip(copies, expected, tensors, strict=True):
        got = copy.result()
        assert got.shape == tuple(tensor.shape)
        np.testing.assert_array_equal(got.astype(want.dtype), want)
        copy.release()
