"""Frames: what a scan returns, convertible to pandas, polars, Arrow and numpy.

A frame wraps Arrow record batches owned by the native reader. Conversions go through the Arrow
PyCapsule interface, so numeric columns reach pandas and polars without being copied.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import polars as pl
    import pyarrow as pa

    from tbscope._core import Table


class Frame:
    """Rows of one table (``scalars``, ``tensors``, ...), in run, file and record order.

    Implements ``__arrow_c_stream__``, so ``pyarrow.table(frame)``, ``polars.DataFrame(frame)``
    and DuckDB take it directly.
    """

    def __init__(self, table: Table, name: str, blob_path: Callable[[str], str | None] | None = None) -> None:
        self._table = table
        self.name = name
        self._blob_path = blob_path
        self._arrow: pa.Table | None = None

    def __repr__(self) -> str:
        return f"<tbscope.Frame {self.name}: {self.num_rows} rows>"

    def __len__(self) -> int:
        return self.num_rows

    @property
    def num_rows(self) -> int:
        return int(self._table.num_rows)

    @property
    def columns(self) -> list[str]:
        return list(self.to_arrow().column_names)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self._table.__arrow_c_stream__(requested_schema)

    def __arrow_c_schema__(self) -> object:
        return self._table.__arrow_c_schema__()

    def to_arrow(self) -> pa.Table:
        """The rows as a ``pyarrow.Table`` (no copy)."""
        if self._arrow is None:
            import pyarrow as pa

            # Not pa.table(): it checks for a pandas DataFrame, which imports pandas (half a
            # second) even where nothing else needs it, as on the server's start-up path.
            self._arrow = pa.RecordBatchReader.from_stream(self._table).read_all()
        return self._arrow

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame; run, tag and other dictionary columns are categorical."""
        # split_blocks keeps each column its own block, so numeric columns stay zero-copy.
        return self.to_arrow().to_pandas(split_blocks=True)

    def to_polars(self) -> pl.DataFrame:
        import polars as pl

        return pl.DataFrame(self.to_arrow())

    def to_numpy(self, column: str) -> np.ndarray[Any, Any]:
        """One column as a numpy array (zero-copy for numeric columns without nulls)."""
        arr: np.ndarray[Any, Any] = self.to_arrow().column(column).to_numpy()
        return arr

    def iter_batches(self, max_rows: int = 1 << 20) -> Iterator[pa.RecordBatch]:
        """The rows in Arrow record batches of at most ``max_rows`` rows. To stream a logdir
        bigger than memory without reading it whole, use :meth:`Logdir.iter_batches`."""
        yield from self.to_arrow().to_batches(max_chunksize=max_rows)

    # Blob access for images, audio and blobs: bytes stay on disk until asked for.
    def blob(self, i: int) -> bytes:
        """The bytes of row ``i``'s blob (image, audio clip or graph), read from its file."""
        t = self.to_arrow()
        if "blob_file" not in t.column_names:
            raise TypeError(f"{self.name} rows carry no blobs; blobs are in images, audio and blobs")
        rel = t.column("blob_file")[i].as_py()
        offset = t.column("blob_offset")[i].as_py()
        length = t.column("blob_length")[i].as_py()
        return self._read_blob(rel, offset, length)

    def _read_blob(self, rel: str, offset: int, length: int) -> bytes:
        path = self._blob_path(rel) if self._blob_path else None
        if path is None:
            raise FileNotFoundError(f"event file {rel!r} is no longer part of this logdir")
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        if len(data) != length:
            raise OSError(f"{path}: file is shorter than when it was read; blob at {offset} is gone")
        return data

    def _blobs_column(self) -> list[bytes]:
        t = self.to_arrow()
        files = t.column("blob_file").to_pylist()
        offsets = t.column("blob_offset").to_pylist()
        lengths = t.column("blob_length").to_pylist()
        # One open per distinct file, not per blob.
        fds: dict[str, int] = {}
        out = []
        try:
            for rel, off, n in zip(files, offsets, lengths):
                if rel not in fds:
                    path = self._blob_path(rel) if self._blob_path else None
                    if path is None:
                        raise FileNotFoundError(f"event file {rel!r} is no longer part of this logdir")
                    fds[rel] = os.open(path, os.O_RDONLY)
                out.append(os.pread(fds[rel], n, off))
        finally:
            for fd in fds.values():
                os.close(fd)
        return out


class BlobFrame(Frame):
    """Images, audio or blobs: ``to_pandas(blobs=True)`` adds a ``data`` column of bytes."""

    def to_pandas(self, blobs: bool = False) -> pd.DataFrame:
        df = super().to_pandas()
        if blobs:
            df["data"] = self._blobs_column()
        return df


class TensorFrame(Frame):
    """Tensors: ``to_pandas()`` has a ``value`` column of numpy arrays in their own dtype."""

    def values(self) -> list[np.ndarray[Any, Any]]:
        """Each row's tensor as a numpy array (bfloat16 as float32; strings as object arrays of bytes)."""

        t = self.to_arrow()
        dtypes = t.column("dtype").to_pylist()
        shapes = t.column("shape").to_pylist()
        contents = t.column("content").to_pylist()
        strings = t.column("strings").to_pylist()
        out: list[np.ndarray[Any, Any]] = []
        for dt, shape, content, strs in zip(dtypes, shapes, contents, strings):
            out.append(to_ndarray(dt, tuple(shape), content, strs))
        return out

    def to_pandas(self) -> pd.DataFrame:
        df = super().to_pandas()
        df["value"] = self.values()
        df["shape"] = [tuple(s) for s in df["shape"]]
        return df.drop(columns=["content", "strings"])


class MeshFrame(Frame):
    """Meshes: ``to_pandas()`` gives ``vertices``, ``faces`` and ``colors`` as ``(n, 3)`` arrays."""

    def to_pandas(self) -> pd.DataFrame:
        import numpy as np

        df = super().to_pandas()
        for part in ("vertices", "faces", "colors"):
            df[part] = [None if v is None else np.asarray(v).reshape(-1, 3) for v in df[part]]
        return df


_NUMPY_NAMES = {
    "qint8": "int8",
    "quint8": "uint8",
    "qint16": "int16",
    "quint16": "uint16",
    "qint32": "int32",
}


def to_ndarray(
    dtype: str, shape: tuple[int, ...], content: bytes | None, strings: list[bytes] | None
) -> np.ndarray[Any, Any]:
    """Build the numpy array of one tensor from its native columns."""
    import numpy as np

    if dtype == "string":
        arr = np.empty(len(strings or []), dtype=object)
        arr[:] = strings or []
        return arr.reshape(shape)
    raw = content or b""
    if dtype == "bfloat16":
        # numpy has no bfloat16; widening to float32 is exact.
        bits = np.frombuffer(raw, dtype="<u2").astype("<u4") << 16
        return bits.view("<f4").reshape(shape)
    if dtype.startswith("float8") or dtype in ("int4", "uint4", "int2", "uint2", "float4_e2m1fn"):
        # Without ml_dtypes these stay as their raw byte patterns.
        return np.frombuffer(raw, dtype=np.uint8).reshape(shape)
    np_dtype = np.dtype(_NUMPY_NAMES.get(dtype, dtype)).newbyteorder("<")
    return np.frombuffer(raw, dtype=np_dtype).reshape(shape)
