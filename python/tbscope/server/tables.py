"""Row selection in the readers' tables: the rows of one run and tag, through the dictionary
codes of their ``run`` and ``tag`` columns (each name is compared once per batch, never per row)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa


def codes_of(chunk: Any, names: set[str] | None) -> tuple[Any, Any]:
    """(row codes, code -> selected) of a dictionary chunk; ``names=None`` selects all."""
    import numpy as np
    import pyarrow as pa

    if isinstance(chunk, pa.DictionaryArray):
        values = chunk.dictionary.to_pylist()
        codes = chunk.indices.to_numpy(zero_copy_only=False)
    else:  # a plain string column (a table built in Python)
        values = sorted(set(chunk.to_pylist()))
        at = {v: i for i, v in enumerate(values)}
        codes = np.array([at[v] for v in chunk.to_pylist()], dtype=np.int32)
    pick = np.array([names is None or v in names for v in values] + [False], dtype=bool)
    return codes, pick


def select(table: pa.Table, runs: set[str] | None = None, tags: set[str] | None = None) -> Any:
    """Row numbers (int64) of ``table`` whose run is in ``runs`` and tag in ``tags``."""
    import numpy as np

    out = []
    base = 0
    run_chunks = table.column("run").chunks
    tag_chunks = table.column("tag").chunks if tags is not None else [None] * len(run_chunks)
    if table.column("run").num_chunks != (table.column("tag").num_chunks if tags is not None else len(run_chunks)):
        table = table.combine_chunks()
        run_chunks = table.column("run").chunks
        tag_chunks = table.column("tag").chunks if tags is not None else [None] * len(run_chunks)
    for rc, tc in zip(run_chunks, tag_chunks):
        n = len(rc)
        mask = np.ones(n, dtype=bool)
        if runs is not None:
            codes, pick = codes_of(rc, runs)
            if not pick.any():
                base += n
                continue
            mask &= pick[codes]
        if tc is not None:
            codes, pick = codes_of(tc, tags)
            if not pick.any():
                base += n
                continue
            mask &= pick[codes]
        out.append(np.flatnonzero(mask) + base)
        base += n
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def rows(table: pa.Table, run: str, tag: str) -> pa.Table:
    """The rows of one run and tag."""
    import pyarrow as pa

    idx = select(table, {run}, {tag})
    return table.take(pa.array(idx, pa.int64()))


def evenly(n: int, k: int) -> np.ndarray[Any, Any]:
    """``k`` positions out of ``n``, evenly spaced, first and last included (all if k == 0)."""
    import numpy as np

    if k <= 0 or n <= k:
        return np.arange(n)
    if k == 1:
        return np.array([n - 1])
    return np.unique(np.round(np.linspace(0, n - 1, k)).astype(np.int64))


def empty_kind_table(kind: str) -> pa.Table:
    """An empty table for a logdir that does not exist yet."""
    import pyarrow as pa

    d = pa.dictionary(pa.int32(), pa.string())
    base = {"run": pa.array([], d), "tag": pa.array([], d), "step": pa.array([], pa.int64()), "wall_time": pa.array([], pa.float64())}
    return pa.table(base)


# Arrow arrays from numpy and lists without pa.array()/pa.table(): those look for pandas
# objects first, which imports pandas (half a second) on the server's start-up path.


def numeric(values: Any) -> pa.Array:
    """A numpy int64/int32/float64 array as an Arrow array (no copy)."""
    import numpy as np
    import pyarrow as pa

    arr = np.ascontiguousarray(values)
    kind = {np.dtype(np.int64): pa.int64(), np.dtype(np.int32): pa.int32(), np.dtype(np.float64): pa.float64()}[arr.dtype]
    return pa.Array.from_buffers(kind, len(arr), [None, pa.py_buffer(arr)])


def strings(values: list[str]) -> pa.Array:
    """A list of str as an Arrow utf8 array."""
    import numpy as np
    import pyarrow as pa

    encoded = [v.encode("utf-8", "surrogatepass") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:]) if encoded else None
    return pa.Array.from_buffers(pa.string(), len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def table(columns: dict[str, Any]) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_arrays(list(columns.values()), names=list(columns))


def to_numpy(col: Any) -> Any:
    """A numeric Arrow array or chunked array as numpy, nulls as NaN (without pyarrow's
    conversion, which imports pandas)."""
    import numpy as np
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if col.null_count:
        import pyarrow.compute as pc

        col = pc.fill_null(col.cast(pa.float64()), float("nan"))
    dtype = np.dtype({"int32": np.int32, "int64": np.int64, "uint64": np.uint64, "double": np.float64, "float": np.float32}[str(col.type)])
    if not len(col):
        return np.zeros(0, dtype)
    return np.frombuffer(col.buffers()[1], dtype=dtype, count=len(col), offset=col.offset * dtype.itemsize)


def take(table: pa.Table, mask: Any) -> pa.Table:
    """The rows of ``table`` where ``mask`` (a list or numpy array of bool) holds."""
    import numpy as np

    return table.take(numeric(np.flatnonzero(np.asarray(mask, dtype=bool)).astype(np.int64)))
