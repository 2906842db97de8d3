"""The hand-written Event encoding: every dtype, shape and mode reads back as it was written."""

from __future__ import annotations

import numpy as np
import pytest

from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.tensor_event import (
    decode_tensor_event,
    decode_tensor_value,
    encode_tensor_event,
)

ARRAYS = {
    "float32": np.arange(12, dtype=np.float32).reshape(3, 4),
    "float64": np.linspace(-1, 1, 7),
    "float16": np.array([0.5, -2.0], dtype=np.float16),
    "int8": np.array([-128, 0, 127], dtype=np.int8),
    "int16": np.array([-3, 4], dtype=np.int16),
    "int32": np.array([[1, -2], [3, -4]], dtype=np.int32),
    "int64": np.array([-(2**40), 2**40], dtype=np.int64),
    "uint8": np.array([0, 255], dtype=np.uint8),
    "uint16": np.array([65535], dtype=np.uint16),
    "uint32": np.array([2**32 - 1], dtype=np.uint32),
    "uint64": np.array([2**64 - 1], dtype=np.uint64),
    "bool": np.array([True, False, True]),
    "complex64": np.array([1 + 2j], dtype=np.complex64),
    "complex128": np.array([[3 - 4j]], dtype=np.complex128),
    "scalar": np.array(2.5, dtype=np.float32),
    "empty": np.zeros((0, 3), dtype=np.float32),
    "four_d": np.ones((2, 1, 3, 2), dtype=np.float64),
}


def _roundtrip(name: str, array: np.ndarray, **kwargs: object) -> np.ndarray:
    options: dict[str, object] = {"step": 7, "mode": ModeKeys.TRAIN, "mode_step": 3}
    options |= {"wall_time": 1.5} | kwargs
    chunks = encode_tensor_event(name, array, **options)  # type: ignore[arg-type]
    payload = b"".join(chunks)
    event = decode_tensor_event(payload)
    quick = decode_tensor_value(bytearray(payload))
    np.testing.assert_array_equal(quick, event.value())
    assert quick.dtype == event.value().dtype and quick.shape == event.value().shape
    assert event.name == name
    assert event.step == options["step"]
    assert event.mode == options["mode"]
    assert event.mode_step == options["mode_step"]
    assert event.wall_time == options["wall_time"]
    return event.value()


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_every_dtype_and_shape_reads_back(name: str) -> None:
    array = ARRAYS[name]
    value = _roundtrip(name, array)
    assert value.dtype == array.dtype
    assert value.shape == array.shape
    np.testing.assert_array_equal(value, array)


def test_strings_go_in_string_val() -> None:
    value = _roundtrip("labels", np.array(["cat", "dög", ""]))
    assert value.tolist() == ["cat", "dög", ""]


def test_non_contiguous_and_big_endian_arrays_are_saved_in_c_order() -> None:
    transposed = np.arange(6, dtype=np.int32).reshape(2, 3).T
    np.testing.assert_array_equal(_roundtrip("t", transposed), transposed)
    big = np.arange(4, dtype=">f8")
    value = _roundtrip("b", big)
    assert value.dtype == np.dtype("<f8")
    np.testing.assert_array_equal(value, big)


def test_step_zero_negative_and_large_steps() -> None:
    for step in (0, 1, 2**40):
        _roundtrip("x", np.zeros(1), step=step, mode_step=step)
    _roundtrip("x", np.zeros(1), step=5, mode=ModeKeys.GLOBAL, mode_step=5, wall_time=0.0)


def test_the_tensor_bytes_are_not_copied() -> None:
    array = np.arange(1000, dtype=np.float64)
    chunks = encode_tensor_event("w", array, step=1, mode=ModeKeys.TRAIN, mode_step=1, wall_time=1)
    content = [chunk for chunk in chunks if isinstance(chunk, memoryview)]
    assert len(content) == 1
    assert np.shares_memory(np.frombuffer(content[0], dtype=np.uint8), array)


def test_the_original_dtype_is_kept() -> None:
    array = np.array([1.0, 2.0], dtype=np.float32)
    chunks = encode_tensor_event(
        "w", array, step=1, mode=ModeKeys.EVAL, mode_step=0, wall_time=1, original_dtype="bfloat16"
    )
    event = decode_tensor_event(b"".join(chunks))
    assert event.original_dtype == "bfloat16"
    assert event.mode == ModeKeys.EVAL
    plain = decode_tensor_event(
        b"".join(
            encode_tensor_event("w", array, step=1, mode=ModeKeys.EVAL, mode_step=0, wall_time=1)
        )
    )
    assert plain.original_dtype is None


def test_an_unsupported_dtype_is_refused_with_the_allowed_ones() -> None:
    with pytest.raises(TypeError, match="float32"):
        encode_tensor_event(
            "d",
            np.array(["2020-01-01"], dtype="datetime64[D]"),
            step=1,
            mode=ModeKeys.TRAIN,
            mode_step=1,
            wall_time=1,
        )


def test_a_message_without_a_tensor_is_refused() -> None:
    with pytest.raises(ValueError, match="no tensor"):
        decode_tensor_event(b"\x10\x05")  # an Event with only step=5
