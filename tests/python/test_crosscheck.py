"""Cross-check tbscope against TensorBoard's own loaders, value for value.

Every logdir here was written by a writer we did not write (tensorboardX, TensorBoard's
EventFileWriter) or by other people (the shared "wild" files). Expected tables come from
``oracle.py`` (TensorBoard's EventAccumulators). Series are compared per (run, tag) in order:
tbscope returns a series' rows in file order, then record order, which is the accumulator's
arrival order when nothing is sampled or purged.
"""

from __future__ import annotations

import io
import math
import wave
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

tbscope = pytest.importorskip("tbscope")

import oracle  # noqa: E402

MAX_REPORTED = 12


# --------------------------------------------------------------------------------------------
# comparison helpers
# --------------------------------------------------------------------------------------------


def _is_null(x) -> bool:
    if x is None or x is pd.NA or x is pd.NaT:
        return True
    if isinstance(x, (float, np.floating)):
        return math.isnan(x)
    return False


def _same_float(a, b) -> bool:
    """Exact float64 equality; NaN/null equal each other; -0.0 != 0.0."""
    if _is_null(a) or _is_null(b):
        return _is_null(a) and _is_null(b)
    a, b = float(a), float(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _same_int(a, b) -> bool:
    if _is_null(a) or _is_null(b):
        return _is_null(a) and _is_null(b)
    return int(a) == int(b)


def _same_str(a, b) -> bool:
    if _is_null(a) or _is_null(b):
        return _is_null(a) and _is_null(b)
    return str(a) == str(b)


def _as_bytes(x):
    if _is_null(x):
        return None
    if isinstance(x, memoryview):
        return x.tobytes()
    return bytes(x)


def _same_bytes(a, b) -> bool:
    return _as_bytes(a) == _as_bytes(b)


def _same_f64_array(a, b) -> bool:
    if _is_null_list(a):
        return False
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    # bitwise: exact values, NaN == NaN, signed zeros distinguished
    return a.tobytes() == b.tobytes() or bool(np.array_equal(a, b, equal_nan=True) and np.all(
        np.signbit(a) == np.signbit(b)))


def _is_null_list(x) -> bool:
    return x is None or (not isinstance(x, (list, tuple, np.ndarray)) and _is_null(x))


def _same_strings(a, e) -> bool:
    """tbscope ``strings`` (list<binary>, null unless dtype is string) vs the oracle's list."""
    if e is None:
        return _is_null_list(a)
    if _is_null_list(a):
        return False
    return [_as_bytes(x) for x in a] == list(e)


def _same_shape(a, b) -> bool:
    return [int(x) for x in np.asarray(a).reshape(-1)] == [int(x) for x in b]


def _normalize(df: pd.DataFrame) -> pd.DataFrame:
    df = df.reset_index(drop=True)
    for c in ("run", "tag"):
        df[c] = df[c].astype(str)
    return df


def _groups(df: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    return {k: g.reset_index(drop=True)
            for k, g in df.groupby(["run", "tag"], sort=False, observed=True)}


def _null_mask(s: pd.Series) -> np.ndarray:
    return s.isna().to_numpy(dtype=bool)


def _vec_float(a: pd.Series, e: pd.Series) -> np.ndarray:
    na, ne = _null_mask(a), _null_mask(e)
    av = pd.to_numeric(a.astype(object).where(~na, np.nan), errors="coerce").to_numpy(
        dtype=np.float64)
    ev = pd.to_numeric(e.astype(object).where(~ne, np.nan), errors="coerce").to_numpy(
        dtype=np.float64)
    with np.errstate(invalid="ignore"):
        same = (av == ev) & (np.signbit(av) == np.signbit(ev))
    return np.where(na | ne, na & ne, same)


def _vec_int(a: pd.Series, e: pd.Series) -> np.ndarray:
    na, ne = _null_mask(a), _null_mask(e)
    av = a.astype(object).where(~na, 0).to_numpy()
    ev = e.astype(object).where(~ne, 0).to_numpy()
    same = np.array([int(x) == int(y) for x, y in zip(av, ev)], dtype=bool)
    return np.where(na | ne, na & ne, same)


def _vec_str(a: pd.Series, e: pd.Series) -> np.ndarray:
    na, ne = _null_mask(a), _null_mask(e)
    same = a.astype(object).astype(str).to_numpy() == e.astype(object).astype(str).to_numpy()
    return np.where(na | ne, na & ne, same)


def compare_tables(actual: pd.DataFrame, expected: pd.DataFrame, checks: dict, what: str):
    """Compare per (run, tag), row by row in order. ``checks``: column -> comparator(a, e, row)
    or comparator(a, e). Raises AssertionError listing the first mismatches."""
    actual, expected = _normalize(actual), _normalize(expected)
    missing = [c for c in checks if c not in actual.columns]
    assert not missing, f"{what}: tbscope table lacks columns {missing}; has {list(actual.columns)}"
    ga, ge = _groups(actual), _groups(expected)
    problems = []
    only_a, only_e = sorted(set(ga) - set(ge)), sorted(set(ge) - set(ga))
    if only_a:
        problems.append(f"series only in tbscope: {only_a[:MAX_REPORTED]}")
    if only_e:
        problems.append(f"series only in TensorBoard: {only_e[:MAX_REPORTED]}")
    keys = []
    for key in [k for k in ge if k in ga]:
        a, e = ga[key], ge[key]
        if len(a) != len(e):
            problems.append(
                f"{key}: {len(a)} rows in tbscope, {len(e)} in TensorBoard; steps "
                f"tbscope={a['step'].tolist()[:20]} tb={e['step'].tolist()[:20]}")
        else:
            keys.append(key)
    if keys:
        A = pd.concat([ga[k] for k in keys], ignore_index=True)
        E = pd.concat([ge[k] for k in keys], ignore_index=True)
        pos = E.groupby(["run", "tag"], sort=False).cumcount().to_numpy()
        vector = {_same_float: _vec_float, _same_int: _vec_int, _same_str: _vec_str}
        for col, cmp in checks.items():
            if cmp in vector:
                ok = vector[cmp](A[col], E[col])
            else:
                ok = np.ones(len(E), dtype=bool)
                three = cmp.__code__.co_argcount == 3
                for i in range(len(E)):
                    try:
                        ok[i] = bool(cmp(A.at[i, col], E.at[i, col], E.iloc[i]) if three
                                     else cmp(A.at[i, col], E.at[i, col]))
                    except Exception:  # a comparator crash is a mismatch
                        ok[i] = False
            for i in np.flatnonzero(~ok)[:MAX_REPORTED]:
                problems.append(
                    f"{(E.at[i, 'run'], E.at[i, 'tag'])} row {pos[i]} (step {E.at[i, 'step']}) "
                    f"column {col!r}: tbscope={_short(A.at[i, col])} tb={_short(E.at[i, col])}")
    assert not problems, f"{what}: {len(problems)} mismatches:\n  " + "\n  ".join(
        problems[:3 * MAX_REPORTED])


def _short(x, n: int = 120) -> str:
    s = repr(x)
    return s if len(s) <= n else s[:n] + "..."


BASE_CHECKS = {"step": _same_int, "wall_time": _same_float}


def _check_timestamps(df: pd.DataFrame, what: str):
    if "timestamp" not in df.columns or df.empty:
        return
    wt = df["wall_time"].astype("float64")
    ts = pd.to_datetime(df["timestamp"], utc=True)
    ok = wt.isna() == ts.isna()
    exp = pd.to_datetime(wt[~wt.isna()], unit="s", utc=True)
    delta = (ts[~wt.isna()] - exp).abs()
    assert ok.all(), f"{what}: timestamp null where wall_time is not (or vice versa)"
    assert (delta <= pd.Timedelta(microseconds=1)).all(), \
        f"{what}: timestamp differs from wall_time by up to {delta.max()}"


def _scan(logdir, **kw):
    return tbscope.scan(str(logdir), **kw)


# --------------------------------------------------------------------------------------------
# scalars
# --------------------------------------------------------------------------------------------


def test_scalars(any_logdir):
    actual = _scan(any_logdir).scalars().to_pandas()
    expected = oracle.load(any_logdir).scalars()
    compare_tables(actual, expected, {**BASE_CHECKS, "value": _same_float}, "scalars")
    _check_timestamps(actual, "scalars")
    assert actual["step"].dtype == np.int64
    assert actual["value"].dtype == np.float64


@pytest.mark.parametrize("table", ["scalars", "tensors", "histograms", "text", "images"])
def test_preempt(any_logdir, table):
    """restarts="preempt": a record at step s drops earlier records of its series with step >= s
    (RustBoard's reservoir rule with unlimited capacity)."""
    frame = getattr(_scan(any_logdir, restarts="preempt"), table)()
    actual = frame.to_pandas()
    expected = oracle.preempt(getattr(oracle.load(any_logdir), table)())
    compare_tables(actual, expected, dict(BASE_CHECKS), f"{table} (preempt)")
    for key, g in _groups(_normalize(actual)).items():
        steps = g.drop_duplicates(subset=["step", "wall_time"])["step"].to_numpy()
        assert (np.diff(steps) > 0).all(), f"{key}: steps not increasing after preempt: {steps}"


def test_preempt_changes_something(tbx_logdir, tb_logdir):
    """The fixtures do contain restarts and duplicate steps (so test_preempt is not vacuous)."""
    for ld in (tbx_logdir, tb_logdir):
        s = oracle.load(ld).scalars()
        assert len(oracle.preempt(s)) < len(s)
        lossless = _scan(ld).scalars().to_pandas()
        preempted = _scan(ld, restarts="preempt").scalars().to_pandas()
        assert len(lossless) == len(s)
        assert len(preempted) == len(oracle.preempt(s))


# --------------------------------------------------------------------------------------------
# tensors
# --------------------------------------------------------------------------------------------


def _bf16_to_f32(a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == np.uint16:  # raw bit patterns
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def _tensor_value_ok(av, ev, erow) -> bool:
    dt = erow["dtype"]
    if dt == "string":
        flat = np.asarray(av, dtype=object).reshape(-1)
        return ([_as_bytes(x) if not isinstance(x, str) else x.encode() for x in flat]
                == list(erow["strings"])) and _same_shape(np.shape(av), erow["shape"])
    a = np.asarray(av)
    if tuple(a.shape) != tuple(erow["shape"]):
        return False
    if dt == "bfloat16":
        return _bf16_to_f32(a).tobytes() == np.asarray(ev, dtype=np.float32).tobytes()
    if a.dtype != np.asarray(ev).dtype:
        return False
    return np.array_equal(a, ev, equal_nan=a.dtype.kind in "fc") and (
        a.dtype.kind not in "f" or bool(np.all(np.signbit(a) == np.signbit(ev))))


def test_tensors(any_logdir):
    actual = _scan(any_logdir).tensors().to_pandas()
    expected = oracle.load(any_logdir).tensors()
    checks = {**BASE_CHECKS, "plugin": _same_str, "dtype": _same_str, "shape": _same_shape}
    if "content" in actual.columns:
        checks["content"] = _same_bytes
    if "strings" in actual.columns:
        checks["strings"] = _same_strings
    if "value" in actual.columns:
        checks["value"] = _tensor_value_ok
    assert {"content", "value"} & set(actual.columns), "tensors: neither content nor value"
    compare_tables(actual, expected, checks, "tensors")
    _check_timestamps(actual, "tensors")


def test_tensor_fixture_covers_every_dtype_and_encoding(tb_logdir):
    exp = oracle.load(tb_logdir).tensors()
    mine = exp[exp["plugin"] == "my_plugin"]
    dtypes = set(mine["dtype"])
    assert set(oracle._DTYPE_NAME.values()) <= dtypes, set(oracle._DTYPE_NAME.values()) - dtypes
    assert {"fallback", "make_ndarray"} <= set(mine["decoder"])
    for enc in ("typed", "content", "fill", "mtp"):
        assert mine["tag"].str.endswith("/" + enc).any(), enc


# --------------------------------------------------------------------------------------------
# histograms
# --------------------------------------------------------------------------------------------


def test_histograms(any_logdir):
    actual = _scan(any_logdir).histograms().to_pandas()
    expected = oracle.load(any_logdir).histograms()
    checks = {**BASE_CHECKS, "left": _same_f64_array, "right": _same_f64_array,
              "count": _same_f64_array}
    for c in ("min", "max", "num", "sum", "sum_squares"):
        checks[c] = _same_float
    compare_tables(actual, expected, checks, "histograms")
    _check_timestamps(actual, "histograms")


def test_histogram_fixtures_cover_both_forms(tbx_logdir, tb_logdir):
    for ld, forms in ((tbx_logdir, {"legacy"}), (tb_logdir, {"legacy", "tensor"})):
        assert forms <= set(oracle.load(ld).histograms()["source"])


# --------------------------------------------------------------------------------------------
# images, audio, text, blobs
# --------------------------------------------------------------------------------------------


def _blob_consistent(actual: pd.DataFrame, what: str):
    if {"blob_length", "data"} <= set(actual.columns):
        lengths = actual["data"].map(lambda b: len(_as_bytes(b)))
        assert (lengths.to_numpy() == actual["blob_length"].to_numpy()).all(), \
            f"{what}: blob_length disagrees with len(data)"


def test_images(any_logdir):
    actual = _scan(any_logdir).images().to_pandas(blobs=True)
    expected = oracle.load(any_logdir).images()
    checks = {**BASE_CHECKS, "index": _same_int, "width": _same_int, "height": _same_int,
              "colorspace": _same_int, "content_type": _same_str, "data": _same_bytes}
    compare_tables(actual, expected, checks, "images")
    _blob_consistent(actual, "images")
    _check_timestamps(actual, "images")


def _wav_header(data: bytes):
    try:
        with wave.open(io.BytesIO(data)) as w:
            return float(w.getframerate()), w.getnchannels(), w.getnframes()
    except Exception:
        return None


def _audio_field(pos: int, same):
    """Where TensorBoard knows the value (legacy Summary.Audio) it must match; where it does not
    (tensor-form audio), tbscope may leave it null or report what the WAV header says."""

    def cmp(a, e, erow):
        if not _is_null(e):
            return same(a, e)
        if _is_null(a):
            return True
        hdr = _wav_header(erow["data"])
        return hdr is not None and same(a, hdr[pos])

    return cmp


def test_audio(any_logdir):
    actual = _scan(any_logdir).audio().to_pandas(blobs=True)
    expected = oracle.load(any_logdir).audio()
    checks = {
        **BASE_CHECKS, "index": _same_int, "data": _same_bytes, "content_type": _same_str,
        "sample_rate": _audio_field(0, _same_float),
        "num_channels": _audio_field(1, _same_int),
        "length_frames": _audio_field(2, _same_int),
        # legacy Summary.Audio has no label: accept null or ""
        "label": lambda a, e: _same_str(a, e) or (_is_null(e) and (_is_null(a) or a == "")),
    }
    compare_tables(actual, expected, checks, "audio")
    _blob_consistent(actual, "audio")
    _check_timestamps(actual, "audio")


def test_text(any_logdir):
    actual = _scan(any_logdir).text().to_pandas()
    expected = oracle.load(any_logdir).text()
    same_shape = lambda a, e: [int(x) for x in a] == [int(x) for x in e]  # noqa: E731 (a table entry)
    compare_tables(actual, expected, {**BASE_CHECKS, "index": _same_int, "text": _same_str,
                                      "shape": same_shape}, "text")
    _check_timestamps(actual, "text")


def test_blobs(any_logdir):
    ld = _scan(any_logdir)
    if not hasattr(ld, "blobs"):
        pytest.skip("tbscope has no blobs() table yet")
    frame = ld.blobs()
    try:
        actual = frame.to_pandas(blobs=True)
    except TypeError:
        actual = frame.to_pandas()
    expected = oracle.load(any_logdir).blobs()
    checks = {**BASE_CHECKS, "plugin": _same_str, "index": _same_int}
    if "data" in actual.columns:
        checks["data"] = _same_bytes
    compare_tables(actual, expected, checks, "blobs")


# --------------------------------------------------------------------------------------------
# series, provenance, run discovery
# --------------------------------------------------------------------------------------------


def test_series_kinds(any_logdir):
    ld = _scan(any_logdir)
    if not hasattr(ld, "series"):
        pytest.skip("tbscope has no series() table yet")
    actual = _normalize(ld.series().to_pandas()).set_index(["run", "tag"])
    expected = _normalize(oracle.load(any_logdir).series()).set_index(["run", "tag"])
    assert set(actual.index) == set(expected.index), (
        f"only tbscope: {sorted(set(actual.index) - set(expected.index))[:10]}; "
        f"only TB: {sorted(set(expected.index) - set(actual.index))[:10]}")
    bad = []
    for key, e in expected.iterrows():
        a = actual.loc[key]
        for col in ("kind", "plugin"):
            if str(a[col]) != str(e[col]):
                bad.append(f"{key} {col}: tbscope={a[col]!r} tb={e[col]!r}")
        if e["kind"] != "hparams" and int(a["points"]) != int(e["points"]):
            bad.append(f"{key} points: tbscope={a['points']} tb={e['points']}")
    assert not bad, "\n".join(bad[:MAX_REPORTED])


def test_run_names(any_logdir):
    """Runs with scalars are named as TensorBoard names them ('.', 'a/b')."""
    expected_runs = {n for n, _ in oracle.discover_runs(any_logdir)}
    actual = set(_scan(any_logdir).scalars().to_pandas()["run"].astype(str))
    assert actual <= expected_runs, actual - expected_runs
    assert actual == set(oracle.load(any_logdir).scalars()["run"].astype(str))


def test_rows_in_file_then_record_order(any_logdir):
    """With provenance, rows of one run come in (file name, offset) order."""
    df = _scan(any_logdir, provenance=True).scalars().to_pandas()
    df = _normalize(df)
    root = Path(any_logdir)
    for run, g in df.groupby("run", sort=False):
        files = g["file"].astype(str).tolist()
        for f in set(files):
            p = root / f
            assert p.is_file(), f"provenance file {f!r} does not exist"
            rel_dir = str(Path(f).parent).replace("\\", "/")
            assert rel_dir == run, f"file {f!r} is not in run {run!r}"
        order = list(zip(files, g["offset"].astype("int64")))
        assert order == sorted(order), f"run {run!r}: rows not in (file, offset) order"


def test_wild_has_scalars(wild_logdir):
    """The wild corpus is really exercised (tens of thousands of scalars)."""
    assert len(oracle.load(wild_logdir).scalars()) > 10_000
