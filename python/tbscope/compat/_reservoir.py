"""TensorBoard's deterministic reservoir (``reservoir.Reservoir``): the same seed and algorithm,
so the same points are kept, replayed over positions instead of items."""

from __future__ import annotations

import random
from typing import Any

import numpy as np


class _Sampled:
    """One reservoir bucket after TensorBoard's ``_ReservoirBucket`` saw a tag's items and purges:
    which items it keeps (indices into the item list), how many it has seen, its generator."""

    def __init__(self, kept: list[int], seen: int, rng: random.Random) -> None:
        self.kept = kept
        self.seen = seen
        self.rng = rng


def _sample(
    size: int,
    keep_last: bool,
    item_pos: np.ndarray[Any, Any],
    item_step: np.ndarray[Any, Any],
    op_pos: np.ndarray[Any, Any],
    op_step: np.ndarray[Any, Any],
    exact_state: bool = False,
) -> _Sampled:
    """Replay ``_ReservoirBucket.AddItem`` / ``FilterItems`` (purges) for one tag.

    Items and purges are by position; a purge at position *q* drops kept items with step >= its
    step that arrived before *q*. With no more items than the bucket holds (or size 0) nothing
    is ever sampled, so the kept items are those no later purge drops (vectorised); otherwise
    the bucket is replayed item by item with its own ``random.Random(0)``, as TensorBoard does.
    ``exact_state`` replays anyway, for the item count and generator a script may go on from.
    """
    n = len(item_pos)
    order = np.argsort(op_pos, kind="stable")
    op_pos, op_step = op_pos[order], op_step[order]
    if not exact_state and (size == 0 or n <= size):
        if not len(op_pos):
            return _Sampled(list(range(n)), n, random.Random(0))
        suffix_min = np.minimum.accumulate(op_step[::-1])[::-1]
        j = np.searchsorted(op_pos, item_pos, side="right")
        later = np.where(j < len(op_pos), suffix_min[np.minimum(j, len(op_pos) - 1)], np.iinfo(np.int64).max)
        keep = item_step < later
        return _Sampled(np.flatnonzero(keep).tolist(), n, random.Random(0))
    rng = random.Random(0)
    items: list[int] = []
    seen = 0
    steps = item_step.tolist()
    ops = list(zip(op_pos.tolist(), op_step.tolist()))
    k = 0

    def purge(s: int) -> None:
        nonlocal items, seen
        before = len(items)
        items = [x for x in items if steps[x] < s]
        seen = int(round(seen * (len(items) / float(before) if before > 0 else 0)))

    for i, p in enumerate(item_pos.tolist()):
        while k < len(ops) and ops[k][0] <= p:
            purge(ops[k][1])
            k += 1
        if len(items) < size or size == 0:
            items.append(i)
        else:
            r = rng.randint(0, seen)
            if r < size:
                items.pop(r)
                items.append(i)
            elif keep_last:
                items[-1] = i
        seen += 1
    while k < len(ops):
        purge(ops[k][1])
        k += 1
    return _Sampled(items, seen, rng)


# --------------------------------------------------------------------------------------------
# Reservoirs
# --------------------------------------------------------------------------------------------


def _check_size(size: Any) -> None:
    """``reservoir.Reservoir``'s check, with its message."""
    if size < 0 or size != round(size):
        raise ValueError("size must be nonnegative integer, was %s" % size)


class _OwnBucket:
    """A bucket a script changed with ``AddItem``/``FilterItems``: TensorBoard's
    ``_ReservoirBucket`` algorithm, continued from the replayed state."""

    def __init__(self, items: list[Any], seen: int, rng: random.Random, size: int, keep_last: bool) -> None:
        self.items = items
        self.seen = seen
        self.rng = rng
        self.size = size
        self.keep_last = keep_last

    def add(self, item: Any, f: Any) -> None:
        if len(self.items) < self.size or self.size == 0:
            self.items.append(f(item))
        else:
            r = self.rng.randint(0, self.seen)
            if r < self.size:
                self.items.pop(r)
                self.items.append(f(item))
            elif self.keep_last:
                self.items[-1] = f(item)
        self.seen += 1

    def filter(self, fn: Any) -> int:
        before = len(self.items)
        self.items = list(filter(fn, self.items))
        diff = before - len(self.items)
        self.seen = int(round(self.seen * (len(self.items) / float(before) if before > 0 else 0)))
        return diff


class Reservoir:
    """TensorBoard's ``reservoir.Reservoir`` as an accumulator's public attribute (``scalars``,
    ``histograms``, ``compressed_histograms``, ``images``, ``audios``, ``tensors``; the plugin
    accumulator's ``tensors_by_tag[tag]``): ``Keys()``, ``Items(key)``, ``AddItem`` and
    ``FilterItems``, with ``size`` and ``always_keep_last``.

    Its keys and items are what TensorBoard's reservoir holds after the same records (same
    seed, same replacements, same purges); items are built when asked for. A bucket a script
    changes with ``AddItem``/``FilterItems`` continues from that state, as TensorBoard's would,
    until the next ``Reload``, which rebuilds every bucket from the files.
    """

    def __init__(self, owner: Any, bucket: str, size: int, always_keep_last: bool = True) -> None:
        _check_size(size)
        self.size = size
        self.always_keep_last = always_keep_last
        self._owner = owner
        self._bucket = bucket
        self._own: dict[str, _OwnBucket] = {}

    def __repr__(self) -> str:
        return f"<tbscope.compat.Reservoir {self._bucket!r} size={self.size}>"

    def _reset(self) -> None:
        self._own.clear()

    def _replayed_keys(self) -> list[str]:
        keys: list[str] = self._owner._keys(self._bucket)
        return keys

    def Keys(self) -> list[str]:
        keys = self._replayed_keys()
        return keys + [k for k in self._own if k not in keys]

    def Items(self, key: str) -> list[Any]:
        own = self._own.get(key)
        if own is not None:
            return list(own.items)
        if key not in self._replayed_keys():
            raise KeyError("Key %s was not found in Reservoir" % key)
        items: list[Any] = self._owner._items(self._bucket, key)
        return items

    def _materialise(self, key: str) -> _OwnBucket:
        own = self._own.get(key)
        if own is None:
            if key in self._replayed_keys():
                state = self._owner._sampled(self._bucket, key, exact_state=True)
                items = self._owner._items(self._bucket, key)
                own = _OwnBucket(items, state.seen, state.rng, self.size, self.always_keep_last)
            else:
                own = _OwnBucket([], 0, random.Random(0), self.size, self.always_keep_last)
            self._own[key] = own
        return own

    def AddItem(self, key: str, item: Any, f: Any = lambda x: x) -> None:
        self._materialise(key).add(item, f)

    def FilterItems(self, filterFn: Any, key: str | None = None) -> int:
        if key:
            return self._materialise(key).filter(filterFn) if key in self.Keys() else 0
        return sum(self._materialise(k).filter(filterFn) for k in self.Keys())


class _TagReservoir(Reservoir):
    """The plugin accumulator's per-tag reservoir: one key, ``"."``."""

    def __init__(self, owner: Any, tag: str, size: int) -> None:
        super().__init__(owner, tag, size)

    def _replayed_keys(self) -> list[str]:
        return [_TENSOR_RESERVOIR_KEY]

    def Items(self, key: str) -> list[Any]:
        own = self._own.get(key)
        if own is not None:
            return list(own.items)
        if key != _TENSOR_RESERVOIR_KEY:
            raise KeyError("Key %s was not found in Reservoir" % key)
        items: list[Any] = self._owner._items(self._bucket, key)
        return items


_TENSOR_RESERVOIR_KEY = "."
