"""The CLI's native CSV writer (``tbscope._core.to_csv`` behind ``tbscope._cli.output._fast_csv``) against
pandas' ``DataFrame.to_csv``: byte for byte, or it must decline (None) and leave the table to
pandas. Floats are where it can go wrong (shortest round-trip digits, ties, Python's layout),
then timestamps (pandas picks their precision per chunk of rows) and quoting.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pandas as pd
import pytest
from tbscope._cli.output import _fast_csv


def pandas_csv(df: pd.DataFrame, header: bool = True) -> bytes:
    return df.to_csv(index=False, header=header, lineterminator="\n").encode()


def check(df: pd.DataFrame, header: bool = True) -> None:
    got = _fast_csv(df, header)
    assert got is not None, f"declined {dict(df.dtypes)}"
    want = pandas_csv(df, header)
    if got != want:
        a, b = got.decode().splitlines(), want.decode().splitlines()
        first = next(i for i, (x, y) in enumerate(zip(a + [""], b + [""])) if x != y)
        pytest.fail(f"line {first}: native {a[first]!r} != pandas {b[first]!r}")


def random_doubles(rng: np.random.Generator, n: int) -> np.ndarray:
    """Every kind of double: random bit patterns (all exponents), float32 values widened (short
    exact expansions, where two 17-digit strings can tie), small integers, decimals."""
    bits = rng.integers(0, 2**64, size=n, dtype=np.uint64).view(np.float64)
    bits = bits[np.isfinite(bits)]
    f32 = rng.standard_normal(n).astype(np.float32).astype(np.float64) * 10.0 ** rng.integers(-8, 9, n)
    f32 = f32.astype(np.float32).astype(np.float64)
    ints = rng.integers(-(10**17), 10**17, n).astype(np.float64)
    dec = np.round(rng.standard_normal(n) * 1000 * 10 ** rng.integers(0, 6, n)) / 10 ** rng.integers(0, 6, n)
    return np.concatenate([bits, f32, ints, dec])


def test_floats_match_numpy_str_and_repr() -> None:
    rng = np.random.default_rng(7)
    special = [
        0.0,
        -0.0,
        math.inf,
        -math.inf,
        math.nan,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        1e-5,
        1e-4,
        9.999999999999999e-5,
        1e15,
        1e16,
        9999999999999998.0,
        0.1,
        0.2 + 0.1,
        100.5,
        1.30591583251953125,
        123456789012345678.0,
    ]
    values = np.concatenate([np.array(special), random_doubles(rng, 100_000)])
    # ties: x exactly halfway between two 16- or 17-digit decimals (float32 values are exact
    # in few digits); check a few directly against repr too.
    for x in special[:-1]:
        if math.isfinite(x):
            assert str(x) == repr(x)
    df = pd.DataFrame({"x": values, "y": values[::-1].copy()})
    check(df)


def test_float_ties_round_to_even() -> None:
    # Values whose shortest repr has two equally near candidates.
    xs = [struct.unpack("<f", struct.pack("<I", b))[0] for b in range(0x3F800001, 0x3F800001 + 20000, 7)]
    check(pd.DataFrame({"v": np.array(xs, dtype=np.float64), "w": 1}))


def test_integers_booleans_and_missing() -> None:
    rng = np.random.default_rng(1)
    n = 5000
    df = pd.DataFrame(
        {
            "i64": np.concatenate(
                [[np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1], rng.integers(-(2**62), 2**62, n - 4)]
            ),
            "u64": np.concatenate([[np.iinfo(np.uint64).max, 0], rng.integers(0, 2**63, n - 2, dtype=np.uint64)]),
            "i32": rng.integers(-(2**31), 2**31, n, dtype=np.int32),
            "b": rng.integers(0, 2, n).astype(bool),
            "Int64": pd.array(
                [None if i % 3 == 0 else int(v) for i, v in enumerate(rng.integers(-1000, 1000, n))], dtype="Int64"
            ),
            "f_nan": np.where(rng.random(n) < 0.3, np.nan, rng.standard_normal(n)),
        }
    )
    check(df)
    check(df, header=False)
    check(df.iloc[:0])


def test_timestamps_take_their_precision_per_chunk() -> None:
    # 9 columns: pandas formats 11,111 rows at a time, and shows the finest precision any
    # value of a chunk needs (none, ms, us or ns) for all of that chunk.
    n = 30_000
    base = 1_700_000_000 * 10**9
    ns = np.full(n, base, dtype=np.int64) + np.arange(n, dtype=np.int64) * 10**9
    ns[12_000] += 1_500_000  # ms in the second chunk
    ns[25_000] += 7  # ns in the third
    ns[100] = np.iinfo(np.int64).min  # NaT
    cols = {"t": pd.to_datetime(ns, unit="ns", utc=True)}
    for i in range(8):
        cols[f"c{i}"] = np.arange(n)
    check(pd.DataFrame(cols))
    # and microsecond data, and times before 1970
    us = pd.Series(
        pd.to_datetime(np.array([-1_500_000, 0, 1_700_000_000_123_456], dtype=np.int64), unit="us", utc=True)
    )
    check(pd.DataFrame({"t": us, "x": 1}))
    f = pd.Series(pd.to_datetime(pd.Series([1.7e9, 1.7e9 + 0.25, np.nan]), unit="s", utc=True))
    check(pd.DataFrame({"t": f, "x": 1}))


def test_strings_are_quoted_like_the_csv_module() -> None:
    words = [
        "plain",
        "with,comma",
        'with"quote',
        "new\nline",
        "carriage\rreturn",
        "tab\there",
        " lead",
        "trail ",
        "",
        "ünïcödé ✓",
        "a;b|c",
        "'single'",
        "back\\slash",
    ]
    df = pd.DataFrame({"s": words, "o": pd.array(words, dtype=object), "n": range(len(words))})
    check(df)
    # one column: a row with nothing in it is written ""
    check(pd.DataFrame({"only": ["x", "", None, "y"]}))
    check(pd.DataFrame({"a,b": [1], 'q"': [2.5], "": [3]}))


def test_object_columns_of_python_scalars() -> None:
    df = pd.DataFrame({"hp": pd.array([True, None, False, 1.5, 3, "x", float("nan")], dtype=object), "k": range(7)})
    check(df)


@pytest.mark.parametrize(
    "column",
    [
        pd.Series([1.5, 2.5], dtype=np.float32),
        pd.Series(pd.to_datetime([0, 10**9], unit="ns")),  # no time zone
        pd.Series(pd.to_datetime([0, 10**9], unit="ns", utc=True)).dt.tz_convert("Europe/Paris"),
        pd.Series(pd.Categorical(["a", "b"])),
        pd.Series([[1], [2]], dtype=object),
        pd.Series([1.5, None], dtype="Float64"),
    ],
    ids=["float32", "naive-time", "other-zone", "category", "lists", "Float64"],
)
def test_declines_what_it_does_not_format(column: pd.Series) -> None:
    assert _fast_csv(pd.DataFrame({"c": column, "n": [1, 2]}), True) is None


def test_written_to_a_descriptor_as_it_is_formatted(tmp_path, monkeypatch) -> None:
    """Through a file descriptor the CLI's table is written chunk by chunk as the threads format
    it: the same bytes, in order."""
    import os

    from tbscope import _core
    from tbscope._cli.output import _csv_args, _csv_table

    monkeypatch.setenv("TBSCOPE_NUM_THREADS", "3")
    rng = np.random.default_rng(5)
    n = 60_000  # 23 columns: 14 chunks of 4,347 rows
    cols = {"run": [f"r{i}" for i in range(n)]} | {f"t{j}:last": rng.standard_normal(n) for j in range(20)}
    cols |= {"x:argmax_step": pd.array(rng.integers(0, 99, n), dtype="Int64"), "y:count": rng.integers(0, 9, n)}
    df = pd.DataFrame(cols)
    table = _csv_table(df)
    assert table is not None
    args = _csv_args(table, True)
    data = _core.to_csv(table, **args)
    assert data == pandas_csv(df)
    with open(tmp_path / "out.csv", "wb") as f:
        assert _core.to_csv(table, **args, fd=f.fileno()) is None
    assert (tmp_path / "out.csv").read_bytes() == data
    # A reader that went away: BrokenPipeError, as a write to the pipe would raise.
    r, w = os.pipe()
    os.close(r)
    try:
        with pytest.raises(BrokenPipeError):
            _core.to_csv(table, **args, fd=w)
    finally:
        os.close(w)


def test_cli_csv_through_a_real_file(tmp_path, tbx_logdir) -> None:
    """The console script writing to a file (the descriptor path) gives what the in-process
    runner captures (the bytes path)."""
    import os
    import subprocess
    import sys

    from click.testing import CliRunner
    from tbscope._cli.main import main

    for cmd in ("ls", "summary"):
        want = CliRunner().invoke(main, [cmd, str(tbx_logdir), "--format", "csv"]).output
        out = tmp_path / f"{cmd}.csv"
        with open(out, "w") as f:
            subprocess.run(
                [sys.executable, "-m", "tbscope", cmd, str(tbx_logdir), "--format", "csv"],
                stdout=f,
                check=True,
                env={**os.environ, "PYTHONIOENCODING": "utf-8"},
            )
        assert out.read_text() == want
