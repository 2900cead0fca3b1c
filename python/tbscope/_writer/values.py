"""What ``SummaryWriter``'s methods accept, turned into what the encoders take: arrays (numpy,
lists, torch/jax tensors), steps and wall times, one scalar, protobuf messages or their bytes.
Off the fast path: ``add_scalar`` of a plain float never comes here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: Anything an ``add_*`` method turns into an array: numpy arrays, lists, torch/jax tensors.
ArrayLike = Any


def _to_numpy(x: ArrayLike) -> np.ndarray[Any, Any]:
    import numpy as np

    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (list, tuple, int, float, bool, np.generic)):
        return np.asarray(x)
    from tbscope._summary import to_numpy  # torch, jax, ... without importing them

    arr: np.ndarray[Any, Any] = to_numpy(x)
    return arr


def _step(step: Any) -> int | None:
    return None if step is None else int(step)


def _walltime(walltime: Any) -> float | None:
    return None if walltime is None else float(walltime)


def _need_mapping(method: str, name: str, value: object) -> None:
    if not isinstance(value, Mapping):
        raise TypeError(f"{method}: {name} must be a mapping of tag to value (a dict); got {type(value).__name__}")


def _scalar_or_raise(tag: str, value: Any, method: str) -> float:
    """One float from a scalar-like value (numbers, 0-d and one-element arrays and tensors)."""
    import numpy as np

    if isinstance(value, (str, bytes)):
        raise TypeError(
            f"{method}: the value for tag {tag!r} is a {type(value).__name__}; "
            "a scalar must be a number (use add_text() for text)"
        )
    if not isinstance(value, np.ndarray):
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    try:
        arr = _to_numpy(value)
    except Exception as e:  # noqa: BLE001
        raise TypeError(f"{method}: the value for tag {tag!r} ({type(value).__name__}) is not a number: {e}") from None
    if arr.size != 1 or arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{method}: the value for tag {tag!r} is an array of shape {tuple(arr.shape)} and dtype "
            f"{arr.dtype}; a scalar needs exactly one number (use add_histogram() or add_tensor() "
            "for arrays)"
        )
    return float(arr.reshape(-1)[0])


def _float_array(values: ArrayLike) -> np.ndarray[Any, Any]:
    """A C-contiguous 1-D float32 or float64 array (the native histogram's input)."""
    import numpy as np

    arr = _to_numpy(values).reshape(-1)
    if arr.dtype != np.float64 and arr.dtype != np.float32:
        arr = arr.astype(np.float64)  # ints, bools, float16, bfloat16, big-endian floats
    return np.ascontiguousarray(arr)


def _as_bytes(msg: Any, what: str) -> bytes:
    """Encoded bytes of a protobuf message object, or the bytes themselves."""
    if isinstance(msg, (bytes, bytearray, memoryview)):
        return bytes(msg)
    serialize = getattr(msg, "SerializeToString", None)
    if serialize is None:
        raise TypeError(f"{what} must be an encoded message (bytes) or a protobuf message, not {type(msg).__name__}")
    return bytes(serialize())
