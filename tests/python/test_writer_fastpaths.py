"""The writer's fast paths give what the plain paths give.

``SummaryWriter.log`` reads a dict natively and keeps the encoded Summary of the last call (a
dict with the same key objects only has its values rewritten); ``add_histogram`` hands
native-order float arrays straight to the native binning (integer keys, lookup tables, two
threads for large inputs) and keeps the last custom edges. Truth comes from outside: TensorBoard's
EventAccumulator and event loader, numpy's ``histogram``, ``math.fsum``, tensorboardX.
"""

from __future__ import annotations

import math
import threading
import types
from pathlib import Path

import numpy as np
import pytest
from fixtures import tf_default_edges
from tbscope import _core

if not hasattr(_core, "EventWriter") or not hasattr(_core.EventWriter, "scalars_dict"):
    pytest.skip("the native EventWriter is not built yet (make build)", allow_module_level=True)

from tbscope import SummaryWriter

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:tensorboard.*")


def summary_events(run_dir) -> list:
    """Every Event with a summary, in file order, as TensorBoard's loader reads them."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    files = sorted(p for p in Path(run_dir).rglob("*") if "tfevents" in p.name and p.is_file())
    return [ev for f in files for ev in LegacyEventFileLoader(str(f)).Load() if ev.HasField("summary")]


def logged(run_dir) -> list[tuple[int, list[tuple[str, float]]]]:
    """(step, [(tag, simple_value) in the event's order]) per event."""
    return [(ev.step, [(v.tag, v.simple_value) for v in ev.summary.value]) for ev in summary_events(run_dir)]


def f32(x: float) -> float:
    return float(np.float32(x))


def expect(step: int, d: dict) -> tuple[int, list[tuple[str, float]]]:
    return step, [(k, f32(float(v))) for k, v in d.items()]


# --------------------------------------------------------------------------------------------
# log(step, dict)


def test_log_follows_dicts_that_change_from_step_to_step(tmp_path):
    keys = [f"train/m{i}" for i in range(20)]
    base = {k: i * 0.5 for i, k in enumerate(keys)}
    same_objects = {k: -v for k, v in base.items()}
    equal_strings = {"".join(list(k)): v + 1 for k, v in base.items()}  # equal text, new objects
    reordered = dict(reversed(list(base.items())))
    grown = {**base, "extra": 3.0}
    shrunk = {k: v for k, v in base.items() if k != keys[7]}
    mixed = {
        "int": 7,
        "big": 2**70,
        "bool": True,
        "np32": np.float32(1.25),
        "np64": np.float64(-2.5),
        "zero_d": np.array(4.5),
        "npint": np.int64(-3),
        "nan": float("nan"),
        "inf": -math.inf,
    }
    steps = [base, base, same_objects, equal_strings, reordered, grown, shrunk, base, mixed, mixed, {}, base]
    want = []
    with SummaryWriter(tmp_path) as w:
        for i, d in enumerate(steps):
            w.log(i, d)
            want.append(expect(i, d))
            if i == 1:
                base["train/m3"] = 99.0  # the same dict object, a value changed in place
    got = logged(tmp_path)
    assert len(got) == len(want)
    for g, e in zip(got, want):
        assert g[0] == e[0] and [t for t, _ in g[1]] == [t for t, _ in e[1]]
        for (_, a), (_, b) in zip(g[1], e[1]):
            assert a == b or (math.isnan(a) and math.isnan(b))


def test_a_bad_value_queues_nothing_and_the_next_step_is_whole(tmp_path):
    d = {"a": 1.0, "b": 2.0, "c": 3.0}
    with SummaryWriter(tmp_path) as w:
        w.log(0, d)
        with pytest.raises(TypeError, match=r"log.*'b'"):
            w.log(1, {"a": 10.0, "b": np.ones(3), "c": 30.0})  # same key objects, bad middle value
        with pytest.raises(TypeError, match="tags must be str"):
            w.log(1, {"a": 10.0, 5: 1.0})
        w.log(2, {"a": 100.0, "b": 200.0, "c": 300.0})
        w.log(3, d)
    assert logged(tmp_path) == [expect(0, d), expect(2, {"a": 100.0, "b": 200.0, "c": 300.0}), expect(3, d)]


class LogsWhileConverted:
    """A number whose float() logs through the same writer (re-entrant use)."""

    def __init__(self, writer, value: float) -> None:
        self.writer, self.value = writer, value

    def __float__(self) -> float:
        self.writer.log(100, {"inner": 5.0})
        return self.value


class ChangesTheDict:
    """A number whose float() changes the dict being logged."""

    def __init__(self, d: dict, value: float) -> None:
        self.d, self.value = d, value

    def __float__(self) -> float:
        self.d.clear()
        self.d.update({f"new{i}": float(i) for i in range(50)})
        return self.value


def test_log_survives_values_that_run_python(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.log(0, {"x": 1.0, "y": 2.0})
        w.log(1, {"x": LogsWhileConverted(w, 3.0), "y": 4.0})
        d = {"x": 1.0, "y": 2.0}
        d["z"] = ChangesTheDict(d, 0.5)
        try:
            w.log(2, d)  # whatever it logs, it must not crash or corrupt the file
        except (RuntimeError, TypeError):
            pass
        w.log(3, {"x": 6.0, "y": 7.0})
    got = logged(tmp_path)
    assert got[:3] == [expect(0, {"x": 1.0, "y": 2.0}), expect(100, {"inner": 5.0}), expect(1, {"x": 3.0, "y": 4.0})]
    assert got[-1] == expect(3, {"x": 6.0, "y": 7.0})


class Counted:
    """A number that counts how often it is converted."""

    calls = 0

    def __init__(self, value: float) -> None:
        self.value = float(value)

    def __float__(self) -> float:
        Counted.calls += 1
        return self.value


def test_each_value_is_converted_once(tmp_path):
    # Same keys, then the same first keys and a different tail, then fewer keys: the reused
    # prefix and the fresh tail together convert every value exactly once.
    steps = [
        {"a": Counted(1), "b": Counted(2), "c": Counted(3)},
        {"a": Counted(4), "b": Counted(5), "c": Counted(6)},
        {"a": Counted(7), "b": Counted(8), "z": Counted(9), "c": Counted(10)},
        {"a": Counted(11)},
    ]
    Counted.calls = 0
    with SummaryWriter(tmp_path) as w:
        for i, d in enumerate(steps):
            w.log(i, d)
    assert Counted.calls == sum(len(d) for d in steps)
    assert logged(tmp_path) == [expect(i, d) for i, d in enumerate(steps)]


def test_log_takes_any_mapping(tmp_path):
    d = {"p": 1.0, "q": 2.0}
    with SummaryWriter(tmp_path) as w:
        w.log(0, types.MappingProxyType(d))
        w.log(1, d, walltime=5.5)
        w.log(np.int64(2), d)
        w.log(3.0, d)  # a float step is taken as int, as before
    assert logged(tmp_path) == [expect(s, d) for s in range(4)]
    assert summary_events(tmp_path)[1].wall_time == 5.5


def test_log_from_two_threads(tmp_path):
    def worker(w, offset: int) -> None:
        for i in range(300):
            w.log(offset + i, {f"t{offset}/a": float(i), f"t{offset}/b": float(-i)})

    with SummaryWriter(tmp_path) as w:
        threads = [threading.Thread(target=worker, args=(w, o)) for o in (0, 1000)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    got = sorted(logged(tmp_path))
    want = sorted(expect(o + i, {f"t{o}/a": float(i), f"t{o}/b": float(-i)}) for o in (0, 1000) for i in range(300))
    assert got == want


def test_log_without_a_file(tmp_path):
    # write_to_disk=False has no native writer: log still accepts everything.
    w = SummaryWriter(tmp_path, write_to_disk=False)
    w.log(0, {"a": 1.0})
    w.close()
    assert summary_events(tmp_path) == []


# --------------------------------------------------------------------------------------------
# add_histogram


def histos(run_dir, tag: str) -> list:
    return [ev.summary.value[0].histo for ev in summary_events(run_dir) if ev.summary.value[0].tag == tag]


def assert_like_numpy(h, values, edges) -> None:
    """Counts and limits exactly as numpy (torch's make_histogram trimming); sums to rounding."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    counts, _ = np.histogram(v, bins=edges)
    nz = np.flatnonzero(counts)
    first, last = int(nz[0]), int(nz[-1])
    bucket = counts[first - 1 : last + 1] if first > 0 else np.concatenate([[0], counts[: last + 1]])
    assert list(h.bucket) == [float(c) for c in bucket]
    assert [x.hex() for x in h.bucket_limit] == [float(x).hex() for x in edges[first : last + 2]]
    assert h.num == v.size
    if np.isnan(v).any():
        assert math.isnan(h.min) and math.isnan(h.max)
    else:
        assert (h.min, h.max) == (v.min(), v.max())
    if not np.isfinite(v).all():  # inf (or inf - inf = nan), as numpy's
        with np.errstate(invalid="ignore", over="ignore"):
            sums = ((h.sum, v.sum()), (h.sum_squares, v.dot(v)))
        for got, want in sums:
            assert got == want or (math.isnan(got) and math.isnan(want))
    elif v.size:
        scale = float(np.abs(v).sum()) or 1.0
        assert abs(h.sum - math.fsum(v)) <= 1e-12 * scale
        assert abs(h.sum_squares - math.fsum(v * v)) <= 1e-12 * (float(v.dot(v)) or 1.0)


def special_values(edges: np.ndarray) -> np.ndarray:
    e = edges[np.isfinite(edges)]
    picks = e[:: max(1, len(e) // 50)]
    return np.concatenate(
        [
            picks,
            np.nextafter(picks, np.inf),
            np.nextafter(picks, -np.inf),
            [0.0, -0.0, 5e-324, -5e-324, 1e-45, np.inf, -np.inf, 3e38, -3e38],
        ]
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_million_values_like_numpy(tmp_path, dtype):
    rng = np.random.default_rng(42)
    edges = tf_default_edges()
    values = np.concatenate([rng.standard_normal(1_000_000) * 3, special_values(edges)]).astype(dtype)
    values = rng.permutation(values)
    square = values[: 1000 * 1000].reshape(1000, 1000)  # any shape goes to the native call as is
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("flat", values, 0)
        w.add_histogram("square", square, 0)
    assert_like_numpy(histos(tmp_path, "flat")[0], values, edges)
    assert_like_numpy(histos(tmp_path, "square")[0], square, edges)


def test_nan_inputs(tmp_path):
    values = np.random.default_rng(1).standard_normal(300_000).astype(np.float32)
    values[12345] = np.nan
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("h", values, 0)
    assert_like_numpy(histos(tmp_path, "h")[0], values, tf_default_edges())


def test_arrays_the_native_call_cannot_take_directly(tmp_path):
    rng = np.random.default_rng(7)
    base = rng.standard_normal((600, 500))
    inputs = {
        "big_endian": base.astype(">f8"),
        "big_endian32": base.astype(">f4"),
        "strided": base[:, ::2],
        "fortran": np.asfortranarray(base.astype(np.float32)),
        "float16": base.astype(np.float16),
        "ints": (base * 100).astype(np.int32),
        "list": base[0].tolist(),
    }
    with SummaryWriter(tmp_path) as w:
        for tag, v in inputs.items():
            w.add_histogram(tag, v, 0)
    for tag, v in inputs.items():
        assert_like_numpy(histos(tmp_path, tag)[0], np.asarray(v, dtype=np.float64), tf_default_edges())


def test_custom_edges_kept_and_replaced(tmp_path):
    rng = np.random.default_rng(3)
    values = (rng.standard_normal(400_000) * 2).astype(np.float32)
    a = np.linspace(-3, 3, 31)
    b = np.linspace(-3, 3, 31) + 0.01  # same length, other edges
    signed = np.array([-3.0, -1.0, -0.0, 1.0, 3.0])  # -0.0 must come back as -0.0, not the cached 0.0
    plain = np.array([-3.0, -1.0, 0.0, 1.0, 3.0])
    seq = [a, a, b, a, plain, signed, plain, np.linspace(-8, 8, 1001)]
    with SummaryWriter(tmp_path) as w:
        for i, edges in enumerate(seq):
            w.add_histogram("h", values, i, bins=edges)
        w.add_histogram("auto", values, 0, bins="auto")
        w.add_histogram("grouped", values, 0, bins=100, max_bins=7)
    for h, edges in zip(histos(tmp_path, "h"), seq):
        assert_like_numpy(h, values, edges)
    assert_like_numpy(histos(tmp_path, "auto")[0], values, np.histogram_bin_edges(values.astype(np.float64), "auto"))


def test_same_as_tensorboardx_on_a_million_float32(tmp_path):
    from tensorboardX import SummaryWriter as TbxWriter

    values = np.random.default_rng(9).standard_normal(1_000_000).astype(np.float32)
    with SummaryWriter(tmp_path / "ours") as w, TbxWriter(str(tmp_path / "tbx")) as x:
        w.add_histogram("h", values, 1)
        x.add_histogram("h", values, 1)
    (ours,), (theirs,) = histos(tmp_path / "ours", "h"), histos(tmp_path / "tbx", "h")
    assert list(ours.bucket) == list(theirs.bucket) and list(ours.bucket_limit) == list(theirs.bucket_limit)
    assert (ours.min, ours.max, ours.num) == (theirs.min, theirs.max, theirs.num)
    assert ours.sum == pytest.approx(theirs.sum, rel=1e-9) and ours.sum_squares == pytest.approx(
        theirs.sum_squares, rel=1e-12
    )
