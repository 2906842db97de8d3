"""TFRecord framing: the CRCs, the two footers, and damaged records being caught."""

from __future__ import annotations

import struct

import pytest

from trainprobe.errors import TrainprobeError
from trainprobe.storage.tfrecord import (
    FAKE_DATA_CRC,
    OVERHEAD,
    RecordChecksumError,
    RecordError,
    crc32c,
    frame,
    iter_records,
    masked_crc32c,
    payload_checksum,
    unframe,
)


def test_crc32c_matches_the_standard_check_value() -> None:
    # CRC-32C (Castagnoli) check value from the CRC catalogue: crc("123456789").
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0


def test_the_fake_data_crc_is_smdebugs_constant() -> None:
    # reference/smdebug.md §2.2: footer bytes b3 c0 2d 06 for every record in events/ files.
    assert FAKE_DATA_CRC == 0x062DC0B3
    record = b"".join(frame([b"payload"]))
    assert record[-4:] == bytes.fromhex("b3c02d06")


def test_a_record_is_length_length_crc_payload_footer() -> None:
    payload = b"hello world"
    record = b"".join(frame([payload[:5], memoryview(payload[5:])], real_crc=True))
    assert len(record) == len(payload) + OVERHEAD
    (length,) = struct.unpack("<Q", record[:8])
    assert length == len(payload)
    assert struct.unpack("<I", record[8:12])[0] == masked_crc32c(record[:8])
    assert record[12:-4] == payload
    assert struct.unpack("<I", record[-4:])[0] == masked_crc32c(payload)


@pytest.mark.parametrize("real_crc", [False, True])
def test_records_read_back_with_either_footer(real_crc: bool) -> None:
    payloads = [b"", b"a", b"x" * 1000]
    data = b"".join(b"".join(frame([p], real_crc=real_crc)) for p in payloads)
    found = list(iter_records(data))
    assert [bytes(payload) for _, _, payload in found] == payloads
    assert [start for start, _, _ in found] == [0, 16, 33]
    assert [length for _, length, _ in found] == [16, 17, 1016]


def test_a_damaged_length_is_caught() -> None:
    record = bytearray(b"".join(frame([b"payload"])))
    record[0] ^= 1
    with pytest.raises(RecordError, match="length CRC"):
        unframe(record)


def test_a_damaged_payload_is_caught_when_the_crc_is_real() -> None:
    record = bytearray(b"".join(frame([b"payload"], real_crc=True)))
    record[13] ^= 1
    with pytest.raises(RecordChecksumError, match="does not match its checksum"):
        unframe(record)


def test_a_damaged_payload_is_caught_by_the_checksum_given_beside_smdebugs_footer() -> None:
    # events/ records keep smdebug's constant footer; their checksum travels in the index.
    payload = [b"pay", memoryview(b"load")]
    checksum = payload_checksum(payload)
    assert checksum == masked_crc32c(b"payload")
    record = bytearray(b"".join(frame(payload)))
    assert bytes(unframe(record, checksum=checksum)) == b"payload"
    record[13] ^= 0x40
    with pytest.raises(RecordChecksumError) as caught:
        unframe(record, checksum=checksum)
    assert caught.value.expected == checksum
    assert isinstance(caught.value, TrainprobeError)
    # Without a checksum (smdebug's output) the constant footer lets it through unverified.
    assert bytes(unframe(record)) == b"p!yload"


def test_a_truncated_file_is_caught() -> None:
    data = b"".join(frame([b"payload"]))
    with pytest.raises(RecordError, match="truncated"):
        list(iter_records(data[:-1]))
