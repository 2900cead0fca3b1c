"""Structural comparison of two views (dicts, lists, dataclasses, numpy arrays, protos), listing
every place where they differ, so a failing drop-in test says what differs and where."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from google.protobuf import json_format
from google.protobuf.message import Message


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where ``a`` and ``b`` differ. Floats and arrays must be equal exactly (NaN equals
    NaN), arrays in dtype and shape too."""
    if isinstance(a, Message) or isinstance(b, Message):
        a = json_format.MessageToDict(a) if isinstance(a, Message) else a
        b = json_format.MessageToDict(b) if isinstance(b, Message) else b
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b) and type(a) is type(b):
        return [d for f in dataclasses.fields(a)
                for d in differences(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")]
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}: key {k!r} only in the first" for k in a.keys() - b.keys()]
        out += [f"{path}: key {k!r} only in the second" for k in b.keys() - a.keys()]
        for k in sorted(a.keys() & b.keys(), key=str):
            out += differences(a[k], b[k], f"{path}[{k!r}]")
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape:
            return [f"{path}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"]
        same = np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
        if not same:
            if a.dtype.kind in "biufc":
                bad = np.argwhere(~((a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind in "fc" else (a == b)))
                first = tuple(bad[0])
                return [f"{path}: {len(bad)} of {a.size} elements differ, first at {first}: {a[first]!r} vs {b[first]!r}"]
            return [f"{path}: {a!r} vs {b!r}"]
        return []
    if isinstance(a, float) and isinstance(b, float):
        return [] if a == b or (math.isnan(a) and math.isnan(b)) else [f"{path}: {a!r} vs {b!r}"]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def assert_same(a: Any, b: Any, what: str = "torch's vs tbscope's") -> None:
    diffs = differences(a, b)
    assert not diffs, f"{what}: {len(diffs)} differences:\n" + "\n".join(diffs[:40])
