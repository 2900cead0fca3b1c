"""Native module: the Rust reader and Arrow tables. Use the ``tbscope`` API instead."""

from os import PathLike
from typing import final

__all__ = ["CorruptRecordError", "NativeReader", "Stream", "Table", "__version__"]

__version__: str

class CorruptRecordError(Exception): ...

@final
class Table:
    """Record batches exported through the Arrow PyCapsule interface."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __arrow_c_schema__(self) -> object: ...
    @property
    def num_rows(self) -> int: ...
    @property
    def num_batches(self) -> int: ...

@final
class Stream:
    """Pieces of one table, read a group of files at a time; nothing is kept."""

    def __iter__(self) -> Stream: ...
    def __next__(self) -> Table: ...

@final
class NativeReader:
    def __new__(
        cls,
        path: str | PathLike[str],
        *,
        runs: str | None = None,
        tags: str | None = None,
        kinds: list[str] | None = None,
        step_lo: int | None = None,
        step_hi: int | None = None,
        restarts: str = "all",
        verify: bool = True,
        max_record_bytes: int = ...,
        provenance: bool = False,
        threads: int = 0,
    ) -> NativeReader: ...
    def load(self) -> tuple[int, int, int, int]:
        """Read what is new: (files read, bytes read, records, rows)."""
    def table(self, kind_name: str) -> Table: ...
    def stream(self, kind_name: str, max_bytes: int) -> Stream: ...
    def series(self) -> Table: ...
    def hparams(self) -> Table: ...
    def runs_table(self) -> Table: ...
    def run_names(self) -> list[str]: ...
    def report(self) -> list[tuple[str, str, str, int, int, str]]: ...
    def file_path(self, rel: str) -> str | None: ...
