"""How commands print: tables (rich, on a terminal), CSV (native writer when it can), JSON;
the progress bar while a scan runs; and the exit status when data could not be read."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from tbscope._reader import Logdir
    from tbscope._report import Report

from tbscope._cli.app import log


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _stderr_is_tty() -> bool:
    return _is_tty(sys.stderr)


@contextlib.contextmanager
def _activity(what: str) -> Iterator[None]:
    """A progress bar on stderr while a scan runs, when stderr is a terminal (nothing on a
    pipe): the pieces of event files read of those the load was given, with the elapsed time;
    a moving bar while it is still listing the logdir. The native load is one call that
    releases the GIL, so rich's refresh thread keeps the bar moving and a poller thread reads
    the core's counts (``_core.load_progress``) meanwhile."""
    if not _stderr_is_tty():
        yield
        return
    import threading

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tbscope import _core

    done0, total0 = _core.load_progress()
    stop = threading.Event()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("files"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as p:
        task = p.add_task(what, total=None)

        def show() -> None:
            done, total = _core.load_progress()
            if total > total0:
                p.update(task, completed=done - done0, total=total - total0)

        def poll() -> None:
            while not stop.wait(0.1):
                show()

        poller = threading.Thread(target=poll, name="tbscope-progress", daemon=True)
        poller.start()
        try:
            yield
        finally:
            stop.set()
            poller.join()
            # The final counts, even when the load took less than one poll.
            show()
            p.refresh()


def _import_meanwhile(*modules: str) -> Callable[[], None]:
    """Starts importing ``modules`` on another thread; returns what waits for that to end.

    Every reading command formats its output with pandas and pyarrow, whose imports take most
    of a second of CPU: imported while the native read (which releases the GIL) runs, they
    cost the command nothing on a machine with a core to spare. A failed import is left for
    the command's own ``import`` to raise."""
    import importlib
    import threading

    missing = [m for m in modules if m not in sys.modules]
    if not missing:
        return lambda: None

    def run() -> None:
        for m in missing:
            with contextlib.suppress(Exception):
                importlib.import_module(m)

    t = threading.Thread(target=run, name="tbscope-import", daemon=True)
    t.start()
    return t.join


def _read(lg: Logdir) -> None:
    """Read a scan now (with a progress bar on a terminal) and log what it cost; pandas and
    pyarrow are imported meanwhile (:func:`_import_meanwhile`)."""
    t0 = time.perf_counter()
    imported = _import_meanwhile("pandas", "pyarrow")
    try:
        with _activity(f"reading {lg.path}"):
            st = lg.reload()
    finally:
        imported()
    log.info(
        "read %d files, %d bytes, %d records, %d rows in %.3f s",
        st.files_read,
        st.bytes_read,
        st.records,
        st.rows,
        time.perf_counter() - t0,
    )
    info = lg.cache_info
    if info is not None:
        log.info("cache %s: %s%s", info.dir, info.status, ", new generation written" if info.written else "")


def _fail_if_unread(report: Report) -> None:
    """What every reading command does once its output is written: files and directories that
    could not be read (severity ``error``: no permission, a failed read) go to stderr, one
    line each, and the command exits with 1, since its output lacks their rows. Damaged
    records are not I/O errors: they stay in ``tbscope check``'s report."""
    unread = report.by_severity("error")
    if not unread:
        return
    sys.stdout.flush()
    for p in unread:
        click.echo(f"Error: cannot read {p.file or p.run or '.'}: {p.reason}", err=True)
    click.echo(
        f"Error: {len(unread)} {'file or directory' if len(unread) == 1 else 'files or directories'} could not be read; the output above lacks their data",
        err=True,
    )
    sys.exit(1)


def _human_bytes(n: Any) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return ""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{int(v)} B" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return str(n)  # pragma: no cover


def _cell(v: Any) -> str:
    import pandas as pd

    if v is None or v is pd.NA or v is pd.NaT:
        return ""
    if isinstance(v, float):
        # NaN shows: a diverged run must not look like a fine one.
        return f"{v:.6g}"
    if isinstance(v, pd.Timestamp):
        return str(v.strftime("%Y-%m-%d %H:%M:%S"))
    if isinstance(v, (bytes, bytearray)):
        return f"<{len(v)} bytes>"
    return str(v)


def _json_value(v: Any) -> Any:
    """A cell as plain JSON: NaN and +-inf become null (JSON has no such numbers), times ISO
    8601 to the microsecond, bytes base64, numpy scalars and arrays Python numbers and lists."""
    import numpy as np
    import pandas as pd

    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_json_value(x) for x in v]
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, pd.Timestamp):
        return v.floor("us").isoformat()
    if isinstance(v, (bytes, bytearray)):
        import base64

        return base64.b64encode(v).decode("ascii")
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v if isinstance(v, str) else str(v)


def _emit(df: pd.DataFrame, fmt: str, title: str | None = None) -> None:
    _emit_chunks(iter([df]), fmt, title)


def _emit_chunks(chunks: Iterator[pd.DataFrame], fmt: str, title: str | None = None) -> None:
    """Write DataFrames as one table. csv and json stream chunk by chunk (a large SQL result
    never sits in memory whole); a table needs every row to align its columns."""
    out = sys.stdout
    if fmt == "csv":
        first = True
        for df in chunks:
            if (first or len(df)) and not _write_fast_csv(out, df, header=first):
                out.write(df.to_csv(index=False, header=first, lineterminator="\n"))
            first = False
        return
    if fmt == "json":
        # One JSON array of objects, written row by row as chunks arrive.
        import json

        out.write("[")
        sep = ""
        for df in chunks:
            for rec in df.to_dict("records"):
                out.write(
                    sep
                    + json.dumps({str(k): _json_value(v) for k, v in rec.items()}, allow_nan=False, ensure_ascii=False)
                )
                sep = ",\n"
        out.write("]\n")
        return
    import pandas as pd

    df = pd.concat(list(chunks), ignore_index=True)
    _table(df, title)


@functools.lru_cache(maxsize=1)
def _csv_quoting() -> tuple[str, bool]:
    """What makes Python's ``csv`` module (which pandas writes CSV with) quote a field: the
    characters among those that can, and whether an empty field is quoted. Asked of the module
    itself, since Python versions differ."""
    import csv
    import io

    def written(field: str) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([field, "x"])
        return buf.getvalue()[: -len(",x\n")]

    chars = "".join(c for c in ",\"\n\r\t '\\;|" if written(f"a{c}b") != f"a{c}b")
    return chars, written("") != ""


def _utf8_fd(out: Any) -> int | None:
    """The file descriptor under a text stream that encodes UTF-8 and leaves newlines alone
    (its buffers flushed, so that what is written there comes after them), else None."""
    encoding = str(getattr(out, "encoding", "") or "").lower().replace("-", "").replace("_", "")
    if encoding != "utf8" or os.linesep != "\n":
        return None
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    out.flush()
    return int(fd)


def _write_fast_csv(out: Any, df: pd.DataFrame | Mapping[str, Any], header: bool) -> bool:
    """Writes :func:`_fast_csv` of ``df`` to ``out`` (to its descriptor as it is formatted,
    when it has one); False, writing nothing, when pandas has to write it."""
    from tbscope import _core

    table = _csv_table(df)
    if table is None:
        return False
    args = _csv_args(table, header)
    fd = _utf8_fd(out)
    try:
        if fd is not None:
            _core.to_csv(table, **args, fd=fd)
            return True
        data = _core.to_csv(table, **args)
    except ValueError:
        return False
    assert data is not None
    out.write(data.decode("utf-8"))
    return True


def _fast_csv(df: pd.DataFrame | Mapping[str, Any], header: bool) -> bytes | None:
    """``df.to_csv(index=False, header=header, lineterminator="\\n")``, byte for byte, written
    natively (a table of 100,000 runs takes pandas seconds to format); None for a frame with a
    column this does not handle (then pandas writes it). ``df`` may also be the columns a
    DataFrame would be made of (name: Series, array or list), to skip making it."""
    from tbscope import _core

    table = _csv_table(df)
    if table is None:
        return None
    try:
        return _core.to_csv(table, **_csv_args(table, header))
    except ValueError:
        return None


def _csv_args(table: pa.Table, header: bool) -> dict[str, Any]:
    chars, quote_empty = _csv_quoting()
    # pandas formats (and picks a timestamp resolution for) this many rows at a time.
    return dict(
        header=header, chunk_rows=max(100_000 // table.num_columns, 1), quote_chars=chars, quote_empty=quote_empty
    )


def _csv_table(df: pd.DataFrame | Mapping[str, Any]) -> pa.Table | None:
    """The columns of ``df`` as Arrow, as pandas would write them, or None for a column the
    native writer does not handle."""
    import pandas as pd
    import pyarrow as pa

    names = list(df.columns if isinstance(df, pd.DataFrame) else df.keys())
    if not names or not all(isinstance(c, str) for c in names) or len(set(names)) != len(names):
        return None
    arrays = []
    for name in names:
        value = df[name]
        # As a DataFrame would hold it (a list of str becomes a str column, and so on).
        col = value if isinstance(value, pd.Series) else pd.Series(value, copy=False)
        if len(col) != len(df[names[0]]):
            return None
        dtype = col.dtype
        if isinstance(dtype, pd.DatetimeTZDtype):
            if str(dtype.tz) != "UTC":
                return None
            arrays.append(pa.array(col))
        elif (
            isinstance(dtype, (pd.StringDtype, pd.Int64Dtype))
            or dtype.kind in "iufb"
            and not isinstance(dtype, pd.api.extensions.ExtensionDtype)
        ):
            if dtype.kind == "f" and dtype.itemsize != 8:
                return None
            arrays.append(pa.array(col))
        elif dtype == object:  # noqa: E721 - numpy dtypes compare equal to object; identity would not
            # Strings as they are, other Python scalars as str() makes them (what the csv module
            # does), missing values empty.
            values = col.to_numpy()
            missing = pd.isna(values)
            if not all(type(v) in (str, bool, int, float) for v in values[~missing]):
                return None
            arrays.append(
                pa.array(
                    [None if m else v if type(v) is str else str(v) for v, m in zip(values, missing)], type=pa.string()
                )
            )
        else:
            return None
    return pa.table(arrays, names=names)


def _table(df: pd.DataFrame, title: str | None) -> None:
    """A rich table: colours and a box on a terminal; plain aligned columns when piped, at the
    width of the content so that grep and awk see one line per row."""
    import pandas as pd
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    tty = _is_tty(sys.stdout)
    rows = [[_cell(v) for v in row] for row in df.itertuples(index=False)]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    table = Table(
        title=title if tty else None, box=box.ROUNDED if tty else None, header_style="bold cyan", pad_edge=False
    )
    # Text(), not str: a run or tag named like "[red]" is data, not console markup.
    for col, num in zip(df.columns, numeric):
        table.add_column(Text(str(col)), justify="right" if num else "left", overflow="fold", no_wrap=not tty)
    for r in rows:
        table.add_row(*(Text(c) for c in r))
    if tty:
        console = Console(file=sys.stdout)
    else:
        widths = [max([len(str(c)), *(len(r[i]) for r in rows)]) for i, c in enumerate(df.columns)]
        console = Console(
            width=max(80, sum(widths) + 2 * len(widths) + 2), force_terminal=False, no_color=True, highlight=False
        )
        with console.capture() as cap:
            console.print(table)
        # Without trailing padding, `awk '{print $NF}'` and diff see clean lines.
        sys.stdout.write("".join(line.rstrip() + "\n" for line in cap.get().splitlines()))
        return
    console.print(table)
