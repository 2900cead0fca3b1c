"""Helpers the tests share: TFRecord framing written independently of tbscope, and waiting on
a forked child without hanging the suite."""

from __future__ import annotations

import os
import select
import signal
import struct
import time

import pytest

# Tests that frame records themselves are skipped, not broken, without the crc32c package.
crc32c = pytest.importorskip("crc32c")


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC32C."""
    c = crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload: bytes) -> bytes:
    """One TFRecord: length, its masked CRC, payload, the payload's masked CRC."""
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", masked_crc(head)) + payload + struct.pack("<I", masked_crc(payload))


def child_result(pid: int, r: int, timeout: float = 60.0) -> tuple[bytes, int]:
    """What a forked child wrote to pipe ``r`` and its exit status; kills it if it hangs."""
    chunks = []
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            pytest.fail(f"the forked child did not finish within {timeout} s")
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return b"".join(chunks), status
