"""A tiny protobuf *encoder*: just enough wire format to build Summary, Event and plugin messages.

Writing summaries must not need the protobuf package (or TensorFlow), and the messages involved are
small and fixed, so each one is assembled by hand from the helpers below. Field numbers live next
to the code that uses them (``_summary.py``); this module only knows the wire format:

* a key is ``(field_number << 3) | wire_type`` as a varint;
* wire type 0 = varint (int32/int64/uint32/uint64/bool/enum), 1 = 64-bit little-endian
  (double, fixed64), 2 = length-delimited (string, bytes, sub-message, packed repeated),
  5 = 32-bit little-endian (float, fixed32).

Proto3 leaves scalar fields at their default value off the wire; the ``*_field`` helpers do the
same unless ``keep_default=True``, which fields inside a ``oneof`` need (a ``oneof`` member set to
0 or ``False`` must still be written, or the reader sees no member at all).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt

VARINT = 0
FIXED64 = 1
LEN = 2
FIXED32 = 5

_DOUBLE = struct.Struct("<d")
# Single-byte varints are by far the most common (keys, small lengths, enums): build them once.
_SMALL = [bytes([i]) for i in range(128)]


def varint(value: int) -> bytes:
    """Base-128 varint of an integer; negative values are written as 64-bit two's complement
    (ten bytes), which is how protobuf encodes negative int32/int64."""
    if 0 <= value < 128:
        return _SMALL[value]
    if value < 0:
        value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(field: int, wire_type: int) -> bytes:
    """The key that starts every field on the wire."""
    return varint((field << 3) | wire_type)


def int_field(field: int, value: int | bool, *, keep_default: bool = False) -> bytes:
    """An int32/int64/uint32/uint64/bool/enum field (wire type 0)."""
    value = int(value)
    if value == 0 and not keep_default:
        return b""
    return key(field, VARINT) + varint(value)


def double_field(field: int, value: float, *, keep_default: bool = False) -> bytes:
    """A double field (wire type 1). NaN is written (it is not the default 0.0)."""
    value = float(value)
    # `value == 0.0` is also true for -0.0, whose sign bit must survive: compare the bits.
    if not keep_default and _DOUBLE.pack(value) == b"\0" * 8:
        return b""
    return key(field, FIXED64) + _DOUBLE.pack(value)


def float_field(field: int, value: float, *, keep_default: bool = False) -> bytes:
    """A float field (wire type 5); the value is rounded to float32 as protobuf does."""
    # Out-of-range doubles become +-inf, as protobuf's own float conversion does.
    with np.errstate(over="ignore"):
        packed = np.array(value, dtype="<f4").tobytes()
    if not keep_default and packed == b"\0" * 4:
        return b""
    return key(field, FIXED32) + packed


def bytes_field(field: int, data: bytes | str, *, keep_default: bool = False) -> bytes:
    """A string (UTF-8 encoded here) or bytes field (wire type 2)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not data and not keep_default:
        return b""
    return key(field, LEN) + varint(len(data)) + data


def message_field(field: int, body: bytes) -> bytes:
    """A sub-message. Always written, even when empty: presence of a message is information
    (an empty ``tensor_shape`` means rank 0; an empty ``experiment`` selects that oneof member)."""
    return key(field, LEN) + varint(len(body)) + body


def repeated_bytes(field: int, items: Iterable[bytes | str]) -> bytes:
    """A repeated string/bytes/message field: one length-delimited entry per item, empty ones kept."""
    return b"".join(bytes_field(field, item, keep_default=True) for item in items)


def packed_varints(field: int, values: Iterable[int]) -> bytes:
    """A packed repeated varint field (int32/int64/uint32/bool...); nothing when empty."""
    body = b"".join(varint(int(v)) for v in values)
    return message_field(field, body) if body else b""


def packed_doubles(field: int, values: npt.ArrayLike) -> bytes:
    """A packed repeated double field, straight from the array's bytes; nothing when empty."""
    body = np.ascontiguousarray(values, dtype="<f8").tobytes()
    return message_field(field, body) if body else b""


def packed_floats(field: int, values: npt.ArrayLike) -> bytes:
    """A packed repeated float field (values rounded to float32); nothing when empty."""
    with np.errstate(over="ignore"):
        body = np.ascontiguousarray(values, dtype="<f4").tobytes()
    return message_field(field, body) if body else b""


# --------------------------------------------------------------------------------------------
# Decoding, for the few plugin messages read in Python (custom-scalar layouts). Event records
# are decoded in Rust; these are small messages found inside them.


def _read_varint(buf: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(buf) or shift > 63:
            raise ValueError("truncated or overlong varint")
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, at
        shift += 7


def walk(buf: bytes) -> Iterator[tuple[int, int, int, bytes]]:
    """The fields of one message, lazily: (field number, wire type, varint value, bytes value),
    varints as ints (bytes ``b""``), fixed-size and length-delimited values as their bytes
    (int 0). ValueError on malformed input."""
    at, end = 0, len(buf)
    while at < end:
        k, at = _read_varint(buf, at)
        field, wire = k >> 3, k & 7
        if wire == VARINT:
            value, at = _read_varint(buf, at)
            yield field, wire, value, b""
            continue
        if wire == FIXED64:
            size = 8
        elif wire == FIXED32:
            size = 4
        elif wire == LEN:
            size, at = _read_varint(buf, at)
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if at + size > end:
            raise ValueError(f"truncated field {field} (wire type {wire})")
        yield field, wire, 0, bytes(buf[at : at + size])
        at += size


def fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """The fields of one message: (field number, wire type, value), with varints and fixed-size
    values as unsigned ints and length-delimited ones as bytes. ValueError on malformed input."""
    return [
        (field, wire, value if wire == VARINT else int.from_bytes(raw, "little") if wire != LEN else raw)
        for field, wire, value, raw in walk(buf)
    ]
