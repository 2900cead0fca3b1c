"""tbscope's exceptions: one base class, all of them pickle (a worker process can raise them to
its parent), and no panic of the native code reaches Python as ``PanicException``."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
import tbscope
from tbscope import _core
from tbscope.errors import (
    CorruptRecordError,
    QueryError,
    QueryTimeoutError,
    QueryTooLargeError,
    RewriteError,
    TbscopeError,
)


def test_one_base_class_and_the_old_names_still_work():
    import importlib

    query = importlib.import_module("tbscope.query")
    rewrite = importlib.import_module("tbscope.rewrite")  # the attribute tbscope.rewrite is the function
    assert tbscope.TbscopeError is TbscopeError
    assert tbscope.CorruptRecordError is CorruptRecordError
    assert query.QueryError is QueryError is tbscope.QueryError
    assert rewrite.RewriteError is RewriteError is tbscope.RewriteError
    for cls in (CorruptRecordError, QueryError, QueryTimeoutError, QueryTooLargeError, RewriteError):
        assert issubclass(cls, TbscopeError), cls
    # What they were before the base class existed, they still are.
    assert issubclass(QueryError, ValueError) and issubclass(RewriteError, RuntimeError)
    assert issubclass(QueryTimeoutError, QueryError) and issubclass(QueryTooLargeError, QueryError)
    # The native module raises the Python class (it used to define one of its own).
    assert not hasattr(_core, "CorruptRecordError")


@pytest.mark.parametrize(
    "exc",
    [
        TbscopeError("x"),
        CorruptRecordError("corrupt: run/f@40 (42 bytes): bad data crc"),
        QueryError("bad query"),
        QueryTimeoutError("too slow", 1.5),
        QueryTooLargeError("too many", 10),
        RewriteError("did not verify", "/tmp/.staging"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_every_exception_pickles_with_its_attributes(exc):
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and str(back) == str(exc)
    assert vars(back) == vars(exc)


def _damaged(root: Path) -> Path:
    w = tbscope.SummaryWriter(root / "run")
    for step in range(5):
        w.add_scalar("loss", float(step), step)
    w.close()
    path = next((root / "run").glob("*tfevents*"))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return root


def _strict_read(path: str) -> int:
    return len(tbscope.read_scalars(path, strict=True))


def test_strict_error_crosses_a_process_pool(tmp_path):
    # Before: CorruptRecordError came from the native module and could not be unpickled in the
    # parent, which got a PicklingError/TypeError instead of the error.
    root = _damaged(tmp_path)
    with ProcessPoolExecutor(1) as pool:
        with pytest.raises(CorruptRecordError, match=r"corrupt: run/events\.out\.tfevents.*@\d+"):
            pool.submit(_strict_read, str(root)).result()


def test_query_errors_are_tbscope_errors(tmp_path):
    pytest.importorskip("duckdb")
    root = _damaged(tmp_path)
    with pytest.raises(TbscopeError, match="no_such_table"):
        tbscope.sql(root, "SELECT * FROM no_such_table")


def test_a_bad_file_descriptor_is_an_error_not_a_panic():
    # Before: to_csv(fd=-1) panicked in Rust ("fd != -1"): PanicException, a BaseException.
    table = pa.table({"a": [1, 2]})
    with pytest.raises(ValueError, match="not a file descriptor"):
        _core.to_csv(table, fd=-1)
    with pytest.raises(OSError):
        _core.to_csv(table, fd=1 << 30)
