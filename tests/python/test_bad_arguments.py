"""Bad arguments get documented exceptions, never a panic: a seeded fuzz of the public API and of
the native module (whose methods the public API calls) with values of every wrong kind.

Documented (docs/errors.md): tbscope's own exceptions (subclasses of TbscopeError, but not
TbscopeError itself, which stands for a bug), ValueError, TypeError, OverflowError (a number too
large for its field), OSError and KeyError-free lookups. Anything else, in particular
``pyo3_runtime.PanicException`` (a BaseException) and a bare TbscopeError, fails the test.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import tbscope
from tbscope import _core
from tbscope.errors import TbscopeError

DOCUMENTED = (TbscopeError, ValueError, TypeError, OverflowError, OSError)

BAD: list[Any] = [
    None,
    True,
    0,
    -1,
    2**31,
    2**63,
    -(2**63) - 1,
    2**64,
    1e308,
    -0.0,
    math.nan,
    math.inf,
    -math.inf,
    "",
    "\x00",
    "[",
    "((",
    "*" * 3,
    "ü" * 300,
    "../../etc",
    b"\xff\x00",
    [],
    [None],
    ["", "["],
    {},
    {"a": object()},
    object(),
    (),
    (5, 1),
    (None, None, None),
    range(3, 1),
    np.array([]),
    np.array([math.nan, math.inf]),
    np.zeros((2, 3)),
    np.zeros(3, dtype=np.float16),
    np.arange(10.0)[::2],
    np.array(["a"]),
    memoryview(b"abcd"),
    pa.table({"a": [1]}),
]


def _check(call: Callable[[], Any], what: str) -> None:
    try:
        call()
    except DOCUMENTED as e:
        assert type(e) is not TbscopeError, f"{what}: internal error {e}"
    except BaseException as e:
        pytest.fail(f"{what} raised {type(e).__module__}.{type(e).__name__}: {e}")


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    with tbscope.SummaryWriter(root / "run") as w:
        for step in range(20):
            w.add_scalar("loss", 1.0 / (step + 1), step)
            w.add_text("note", f"step {step}", step)
        w.add_histogram("h", np.arange(100.0), 0)
    return root


def _mutations(rng: random.Random, base: dict[str, Any], n: int):
    """``n`` variants of ``base`` with one or two arguments replaced by bad values."""
    names = list(base)
    for _ in range(n):
        kw = dict(base)
        for name in rng.sample(names, min(len(names), rng.choice((1, 1, 2)))):
            kw[name] = rng.choice(BAD)
        yield kw


def _text(kw: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}"[:80] for k, v in kw.items())


@pytest.fixture(autouse=True)
def no_panic_on_any_thread(capfd):
    """A panic on a background thread (the writer's) raises nothing here, but Rust prints it."""
    yield
    err = capfd.readouterr().err
    assert "panicked at" not in err, err


def test_reading_api(logdir, tmp_path):
    rng = random.Random(11)
    base = dict(
        path=logdir,
        runs="*",
        tags="*",
        kinds=None,
        steps=(0, 10),
        restarts="all",
        strict=False,
        verify=True,
        provenance=False,
        threads=None,
        max_record_bytes=1 << 20,
    )
    for kw in _mutations(rng, base, 150):
        path = kw.pop("path")

        def read(kw=kw, path=path) -> None:
            lg = tbscope.scan(path, **kw)
            lg.scalars().to_pandas()
            lg.report
            lg.series()

        _check(read, f"scan({path!r}, {_text(kw)})")
    lg = tbscope.scan(logdir)
    for value in BAD:
        _check(lambda v=value: lg.summary(stats=v), f"summary(stats={value!r})")
        _check(lambda v=value: lg.aggregate(v), f"aggregate({value!r})")
        _check(lambda v=value: list(lg.iter_batches(v)), f"iter_batches({value!r})")
        _check(lambda v=value: list(lg.iter_batches("scalars", max_rows=v)), f"iter_batches(max_rows={value!r})")
        _check(lambda v=value: list(lg.iter_batches("scalars", max_bytes=v)), f"iter_batches(max_bytes={value!r})")
        _check(lambda v=value: tbscope.read_text(v), f"read_text({value!r})")


def test_query_and_export_api(logdir, tmp_path):
    pytest.importorskip("duckdb")
    rng = random.Random(12)
    base = dict(
        query="SELECT count(*) FROM scalars WHERE step < ?",
        params=[5],
        max_rows=10,
        timeout=30.0,
        external_access=False,
    )
    for kw in _mutations(rng, base, 80):
        _check(lambda kw=kw: tbscope.sql(logdir, **kw), f"sql({_text(kw)})")
    base = dict(out=tmp_path / "x.csv", format=None, kinds="scalars", partition_by=None, max_rows=100, force=True)
    for i, kw in enumerate(_mutations(rng, base, 60)):
        if kw["out"] is base["out"]:
            kw["out"] = tmp_path / f"x{i}.csv"
        _check(lambda kw=kw: tbscope.export(logdir, **kw), f"export({_text(kw)})")


def test_writer_api(tmp_path):
    rng = random.Random(13)
    w = tbscope.SummaryWriter(tmp_path / "w")
    calls: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
        "add_scalar": (w.add_scalar, dict(tag="x", scalar_value=1.0, global_step=1, walltime=None)),
        "add_scalars": (w.add_scalars, dict(main_tag="m", tag_scalar_dict={"a": 1.0}, global_step=1)),
        "add_histogram": (
            w.add_histogram,
            dict(tag="h", values=np.arange(10.0), global_step=1, bins="tensorflow", max_bins=None),
        ),
        "add_histogram_raw": (
            w.add_histogram_raw,
            dict(
                tag="r",
                min=0.0,
                max=1.0,
                num=2,
                sum=1.0,
                sum_squares=1.0,
                bucket_limits=[0.5, 1.0],
                bucket_counts=[1, 1],
                global_step=1,
            ),
        ),
        "add_text": (w.add_text, dict(tag="t", text_string="hi", global_step=1)),
        "add_tensor": (w.add_tensor, dict(tag="tt", tensor=np.zeros(3), global_step=1)),
        "log": (w.log, dict(step=1, metrics={"a": 1.0})),
    }
    for name, (fn, base) in calls.items():
        for kw in _mutations(rng, base, 60):
            _check(lambda fn=fn, kw=kw: fn(**kw), f"{name}({_text(kw)})")
    w.close()
    for value in BAD:
        _check(lambda v=value: _write_one(tmp_path / "k", flush_secs=v), f"SummaryWriter(flush_secs={value!r})")
        _check(lambda v=value: _write_one(tmp_path / "k", max_queue=v), f"SummaryWriter(max_queue={value!r})")
        _check(
            lambda v=value: _write_one(tmp_path / "k", max_pending_bytes=v),
            f"SummaryWriter(max_pending_bytes={value!r})",
        )


def _write_one(path: Path, **kw: Any) -> None:
    with tbscope.SummaryWriter(path, **kw) as w:
        w.add_scalar("x", 1.0, 1)
        w.flush()


def test_native_module(logdir, tmp_path):
    """The native methods the public API uses, called directly with bad arguments."""
    rng = random.Random(14)
    reader_base = dict(
        runs=None,
        tags=None,
        kinds=None,
        step_lo=None,
        step_hi=None,
        restarts="all",
        verify=True,
        max_record_bytes=1 << 20,
        provenance=False,
        threads=0,
    )
    for kw in _mutations(rng, reader_base, 80):

        def read(kw=kw) -> None:
            r = _core.NativeReader(logdir, **kw)
            r.load()
            for kind in ("scalars", "text", "histograms"):
                r.table(kind)
            r.series(), r.hparams(), r.runs_table(), r.run_facts(), r.report(), r.run_names()
            r.summary_table([("last", "last"), ("max", "max")])
            list(r.stream("scalars", 1))

        _check(read, f"NativeReader({_text(kw)})")
    r = _core.NativeReader(logdir)
    r.load()
    for value in BAD:
        for method in ("table", "file_path", "summary_table"):
            _check(lambda m=method, v=value: getattr(r, m)(v), f"NativeReader.{method}({value!r})")
        _check(lambda v=value: list(r.stream("scalars", v)), f"stream(max_bytes={value!r})")
        _check(lambda v=value: list(r.stream(v, 1 << 20)), f"stream({value!r})")
        _check(lambda v=value: r.summary_table([(v, "x")]), f"summary_table([({value!r}, 'x')])")
    w = _core.EventWriter(None)
    writer_calls: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
        "scalar": (w.scalar, dict(tag="x", value=1.0, step=1, wall_time=None, new_style=False, double_precision=False)),
        "scalars": (w.scalars, dict(tags=["a", "b"], values=[1.0, 2.0], step=1, wall_time=None)),
        "scalars_dict": (w.scalars_dict, dict(metrics={"a": 1.0}, step=1, wall_time=None)),
        "histogram": (
            w.histogram,
            dict(tag="h", values=np.arange(10.0), step=1, wall_time=None, edges=None, max_bins=None),
        ),
        "histogram_raw": (
            w.histogram_raw,
            dict(
                tag="r",
                min=0.0,
                max=1.0,
                num=2.0,
                sum=1.0,
                sum_squares=1.0,
                bucket_limits=[0.5, 1.0],
                bucket_counts=[1.0, 1.0],
                step=1,
                wall_time=None,
            ),
        ),
        "tensor": (
            w.tensor,
            dict(tag="t", data=np.zeros(3), dtype=2, shape=[3], step=1, wall_time=None, metadata=None),
        ),
        "summary": (w.summary, dict(summary=b"", step=1, wall_time=None)),
        "event": (w.event, dict(event=b"")),
    }
    for name, (fn, base) in writer_calls.items():
        for kw in _mutations(rng, base, 60):
            _check(lambda fn=fn, kw=kw: fn(**kw), f"EventWriter.{name}({_text(kw)})")
    w.take()
    table = pa.table({"a": [1, 2], "b": ["x", "y"]})
    csv_base = dict(table=table, header=True, chunk_rows=10, quote_chars=None, quote_empty=False, fd=None)
    for kw in _mutations(rng, csv_base, 80):
        _check(lambda kw=kw: _core.to_csv(**kw), f"to_csv({_text(kw)})")
    x = np.arange(50, dtype=np.int64)
    y = np.linspace(0.0, 1.0, 50)
    ds_base = dict(
        x=x,
        y=y,
        n=10,
        starts=np.array([0, 20], dtype=np.int64),
        ends=np.array([20, 50], dtype=np.int64),
        x_lo=None,
        x_hi=None,
        smoothing=0.6,
    )
    for kw in _mutations(rng, ds_base, 80):
        _check(lambda kw=kw: _core.downsample(**kw), f"downsample({_text(kw)})")
    ema_base = dict(y=y, weight=0.6, out=np.zeros(50), starts=None, ends=None)
    for kw in _mutations(rng, ema_base, 60):
        _check(lambda kw=kw: _core.ema(**kw), f"ema({_text(kw)})")
    for value in BAD:
        _check(lambda v=value: tbscope.downsample(x, y, v), f"tbscope.downsample(n={value!r})")
        _check(lambda v=value: tbscope.ema(y, v), f"tbscope.ema(weight={value!r})")
    rw_base = dict(
        runs=None,
        tags=None,
        drop_tags=None,
        drop_steps=None,
        preempt=False,
        merge=True,
        force=False,
        commit=True,
        threads=0,
    )
    for i, kw in enumerate(_mutations(rng, rw_base, 40)):
        _check(lambda kw=kw, i=i: _core.rewrite(logdir, tmp_path / f"rw{i}", **kw), f"rewrite({_text(kw)})")
