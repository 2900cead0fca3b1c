"""The ``tbscope`` command line.

Every reading command takes the same filters (``--runs``, ``--tags``, ``--kinds``, ``--steps``,
mapped to :func:`tbscope.scan`) and the same ``--format table|csv|json``. Errors print as one
line with a hint; ``--debug`` shows tracebacks. ``docs/cli.md`` is generated from this module by
``python -m tbscope._cli.doc``, so help texts here are the reference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tbscope import __version__
from tbscope._cli.options import storage_option
from tbscope._reader import KINDS

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from tbscope._reader import Logdir
    from tbscope._report import Report

log = logging.getLogger("tbscope")

#: Exit statuses, shared by ``--help`` and the generated reference.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "success (check: no data lost; clean: every selected run was handled)"),
    (
        1,
        "check found lost data (with --strict, also a warning such as a stopped tail), clean could not remove a run, rewrite's output did not verify, or reading failed (a file or directory could not be read: printed on stderr, the output lacks its data; a missing optional package)",
    ),
    (
        2,
        "bad usage: unknown command or option, bad value or glob, SQL error, a path that does not exist, or an output that exists",
    ),
)

# Optional packages and what to install for them.
_EXTRAS = {"duckdb": "tbscope[sql]", "polars": "tbscope[polars]", "fsspec": "tbscope[remote]"}

F = TypeVar("F", bound=Callable[..., Any])


def _exit_epilog() -> str:
    lines = "\n".join(f"  {code}  {text}" for code, text in EXIT_CODES)
    return f"\b\nExit status:\n{lines}"


class _OneLineUsageError(click.UsageError):
    """A usage error printed as a single line: the message, then where to find help."""

    def show(self, file: Any = None) -> None:
        hint = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        click.echo(f"Error: {self.format_message()}{hint}", file=file, err=file is None)


def _one_line(e: click.UsageError) -> click.UsageError:
    # NoArgsIsHelpError prints the help text, which is what a bare `tbscope` should do.
    if isinstance(e, (_OneLineUsageError, click.exceptions.NoArgsIsHelpError)):
        return e
    # format_message() keeps click's "Invalid value for '--steps':" prefix.
    return _OneLineUsageError(e.format_message(), e.ctx)


class _Main(click.Group):
    """Turns exceptions into one-line errors (with a hint) unless --debug is given."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as e:
            raise _one_line(e) from e

    def invoke(self, ctx: click.Context) -> Any:
        try:
            rv = super().invoke(ctx)
            # Flush here, where a closed pipe is still ours to handle (not at interpreter exit).
            sys.stdout.flush()
            return rv
        except click.UsageError as e:
            raise _one_line(e) from e
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except SystemExit:
            # A command's own status (check: 1 when data was lost) survives a closed pipe.
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                _drop_stdout()
            raise
        except BrokenPipeError:
            # The reader of our output went away (`| head`): stop quietly, as cat does.
            _drop_stdout()
            raise click.exceptions.Exit(0) from None
        except Exception as e:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            raise _translate(e) from e


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush of what is still
    buffered does not fail on the closed pipe once more."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _sql_tables() -> list[str]:
    from tbscope._query import TABLES

    return list(TABLES)


def _translate(e: Exception) -> click.ClickException:
    """One line saying what went wrong and what to do about it."""
    from tbscope.errors import CorruptRecordError

    # Messages from libraries may span lines; the error line must not.
    msg = " ".join(str(e).split()) or type(e).__name__
    if type(e).__module__.split(".")[0] == "duckdb":
        return _OneLineUsageError(f"{msg}; check the query (tables: {', '.join(_sql_tables())})")
    if isinstance(e, (ValueError, TypeError)):
        # Bad filters, options and queries are usage errors.
        return _OneLineUsageError(msg)
    if isinstance(e, FileNotFoundError):
        return _OneLineUsageError(f"{msg}; check the path (a logdir or an event file)")
    if isinstance(e, FileExistsError):
        return _OneLineUsageError(msg.replace("force=True (tbscope export --force)", "--force"))
    if isinstance(e, ImportError):
        name = (e.name or "").split(".")[0]
        pkg = _EXTRAS.get(name, name)
        return click.ClickException(f"{msg}; install it with: pip install '{pkg}'" if pkg else msg)
    if isinstance(e, CorruptRecordError):
        return click.ClickException(f"{msg}; run 'tbscope check' for the full report")
    if isinstance(e, OSError):
        return click.ClickException(msg)
    return click.ClickException(f"{type(e).__name__}: {msg} (run with --debug for the traceback)")


class _StderrHandler(logging.Handler):
    """Log records to whatever ``sys.stderr`` is now (click's test runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            click.echo(self.format(record), err=True)


_handler = _StderrHandler()
_handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=_Main, context_settings=_CONTEXT, epilog=_exit_epilog())
@click.version_option(__version__, "--version", "-V", prog_name="tbscope")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging (goes before the command).")
@click.option("-v", "--verbose", is_flag=True, help="Log what was read and how long it took.")
@click.pass_context
def main(ctx: click.Context, debug: bool, verbose: bool) -> None:
    """Read, check, query, export, clean and rewrite TensorBoard event logs, fast and without TensorFlow.

    LOGDIR is a directory tree of runs (any directory holding event files is a run) or a single
    event file. Reading commands take the same filters and the same --format.

    \b
    Examples:
      tbscope ls runs/
      tbscope check runs/
      tbscope summary runs/ --format csv
    """
    ctx.obj = {"debug": debug}
    # tbscope's loggers print to stderr for the length of the command only, then are put back
    # as they were (the CLI can run inside another program, e.g. a test runner).
    saved = (log.level, log.propagate)
    log.addHandler(_handler)
    log.propagate = False
    log.setLevel(logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING)

    def restore() -> None:
        log.removeHandler(_handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]

    ctx.call_on_close(restore)


# --------------------------------------------------------------------------------------------
# shared options and output
# --------------------------------------------------------------------------------------------

_format = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="table: aligned columns (coloured on a terminal); csv: with a header row; json: an array of objects.",
)


def _split_kinds(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    out = tuple(k.strip() for v in value for k in v.split(",") if k.strip())
    bad = [k for k in out if k not in KINDS]
    if bad:
        raise click.BadParameter(f"unknown kind {bad[0]!r}; choose from {', '.join(KINDS)}")
    return out


def _parse_steps(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int | None, int | None] | None:
    if value is None:
        return None
    lo, sep, hi = value.partition(":")
    try:
        if not sep:
            raise ValueError
        return (int(lo) if lo.strip() else None, int(hi) if hi.strip() else None)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a step range; write A:B (A <= step < B), A: or :B, e.g. 0:1000"
        ) from None


def _filters(*, tags: bool = True, kinds: bool = True, steps: bool = True, remote: bool = True) -> Callable[[F], F]:
    """The scan filters a command takes, as click options (and --storage-option for a URL)."""

    def deco(f: F) -> F:
        opts = [
            click.option(
                "--runs", multiple=True, metavar="GLOB", help="Only runs matching the glob; repeat for several."
            )
        ]
        if remote:
            opts.append(storage_option)
        if tags:
            opts.append(
                click.option(
                    "--tags", multiple=True, metavar="GLOB", help="Only tags matching the glob; repeat for several."
                )
            )
        if kinds:
            opts.append(
                click.option(
                    "--kinds",
                    multiple=True,
                    metavar="KIND[,KIND]",
                    callback=_split_kinds,
                    help=f"Only these kinds ({', '.join(KINDS)}); comma-separated or repeated.",
                )
            )
        if steps:
            opts.append(
                click.option(
                    "--steps",
                    metavar="A:B",
                    callback=_parse_steps,
                    help="Only steps A <= step < B; A: and :B leave an end open.",
                )
            )
        for o in reversed(opts):
            f = o(f)
        return f

    return deco


def _scan_args(
    runs: tuple[str, ...] = (),
    tags: tuple[str, ...] = (),
    kinds: tuple[str, ...] = (),
    steps: tuple[int | None, int | None] | None = None,
) -> dict[str, Any]:
    """CLI filters as :func:`tbscope.scan` keyword arguments (left out when not given)."""
    out: dict[str, Any] = {}
    if runs:
        out["runs"] = list(runs)
    if tags:
        out["tags"] = list(tags)
    if kinds:
        out["kinds"] = list(kinds)
    if steps is not None:
        out["steps"] = steps
    return out


def _cache_options(f: F) -> F:
    """--cache/--no-cache and --cache-dir (the incremental cache, docs/cache.md)."""
    f = click.option(
        "--cache-dir",
        type=click.Path(file_okay=False),
        metavar="DIR",
        help="Keep the cache in DIR (implies --cache; the only way to put it inside LOGDIR).",
    )(f)
    return click.option(
        "--cache/--no-cache",
        "cache",
        default=None,
        help="Read through the incremental cache (default: off, on when TBSCOPE_CACHE=1): the next read of LOGDIR reads only what was written since. It lives in $TBSCOPE_CACHE_DIR or ~/.cache/tbscope.",
    )(f)


def _cache_arg(cache: bool | None, cache_dir: str | None) -> dict[str, Any]:
    """The --cache options as :func:`tbscope.scan`'s ``cache=`` (left out when off)."""
    from tbscope._cache import CLI_ENV

    if cache_dir is not None:
        if cache is False:
            raise click.UsageError("--no-cache and --cache-dir contradict each other; give one")
        return {"cache": cache_dir}
    if cache is None:
        cache = os.environ.get(CLI_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return {"cache": True} if cache else {}


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _stderr_is_tty() -> bool:
    return _is_tty(sys.stderr)


@contextlib.contextmanager
def _activity(what: str) -> Iterator[None]:
    """A spinner with elapsed time on stderr while a scan runs, when stderr is a terminal. The
    native load is one call that releases the GIL, so rich's refresh thread keeps it moving."""
    if not _stderr_is_tty():
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as p:
        p.add_task(what, total=None)
        yield


def _read(lg: Logdir) -> None:
    """Read a scan now (with a spinner on a terminal) and log what it cost."""
    t0 = time.perf_counter()
    with _activity(f"reading {lg.path}"):
        st = lg.reload()
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


# --------------------------------------------------------------------------------------------
# ls and tags
# --------------------------------------------------------------------------------------------


from tbscope.server.command import serve_command  # noqa: E402 - after main, which it joins

main.add_command(serve_command)


@main.command("ls")
@click.argument("logdir", type=click.Path())
@_filters()
@_format
@_cache_options
def ls_command(
    logdir: str,
    runs: tuple[str, ...],
    tags: tuple[str, ...],
    kinds: tuple[str, ...],
    steps: tuple[int | None, int | None] | None,
    fmt: str,
    cache: bool | None,
    cache_dir: str | None,
) -> None:
    """List runs: kinds present, number of tags and points, step range, last write, size.

    Columns: run, kinds (those with points), tags, points, first_step, last_step,
    last_write, files, bytes (shown as size in the table). last_write is the newest of the
    run's last event wall time and its event files' modification times, in UTC. With --tags,
    --kinds or --steps, the counts and steps are of what matched.

    \b
    Examples:
      tbscope ls runs/
      tbscope ls runs/ --runs 'lr=0.1/*' --format json
    """
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from tbscope._reader import scan

    lg = scan(logdir, **_scan_args(runs, tags, kinds, steps), **_cache_arg(cache, cache_dir))
    _read(lg)
    # Per run, natively: the runs table, its series' count and step range, its newest file
    # mtime (as stat'ed by the read: no second stat per file). A warm cache that found nothing
    # changed answers from the table it stored.
    facts = lg._run_facts()

    def floats(name: str) -> np.ndarray[Any, Any]:
        return np.asarray(facts.column(name).to_numpy(zero_copy_only=False), dtype="float64")

    def ints(name: str) -> np.ndarray[Any, Any]:
        return np.asarray(facts.column(name).to_numpy(), dtype=np.int64)

    def nullable_ints(name: str) -> pd.arrays.IntegerArray:
        col = facts.column(name).combine_chunks()
        if not col.null_count:
            return pd.arrays.IntegerArray(np.asarray(col.to_numpy(), dtype=np.int64), np.zeros(len(col), dtype=bool))
        missing = col.is_null().to_numpy(zero_copy_only=False)
        return pd.arrays.IntegerArray(np.asarray(col.fill_null(0).to_numpy(), dtype=np.int64), missing)

    # The newest of wall time and mtime; fmax skips a missing (NaN) one.
    last = pd.Series(np.fmax(floats("last_wall_time"), floats("last_modified")))
    counts = (
        np.column_stack([facts.column(k).to_numpy() for k in KINDS])
        if facts.num_rows
        else np.zeros((0, len(KINDS)), dtype=np.int64)
    )
    # One string per distinct set of kinds present, not one join per run.
    masks = (counts != 0).astype(np.int64) @ (1 << np.arange(len(KINDS), dtype=np.int64))
    uniq, inverse = np.unique(masks, return_inverse=True)
    names = pa.array([",".join(k for i, k in enumerate(KINDS) if int(m) >> i & 1) for m in uniq], type=pa.string())
    df = pd.DataFrame(
        {
            # Strings stay in Arrow: no Python object per run.
            "run": facts.column("run").to_pandas(),
            "kinds": names.take(pa.array(inverse.reshape(-1), type=pa.int64())).to_pandas(),
            "tags": ints("series"),
            "points": counts.sum(axis=1).astype("int64"),
            "first_step": nullable_ints("first_step"),
            "last_step": nullable_ints("last_step"),
            "last_write": pd.to_datetime(last, unit="s", utc=True),
            "files": ints("files"),
            "bytes": ints("bytes"),
        }
    )
    if fmt == "table":
        df = df.assign(bytes=df["bytes"].map(_human_bytes)).rename(columns={"bytes": "size"})
        df["last_write"] = df["last_write"].dt.strftime("%Y-%m-%d %H:%M")
    _emit(df, fmt, title=f"{len(df)} runs in {logdir}")
    _fail_if_unread(lg.report)


@main.command("tags")
@click.argument("logdir", type=click.Path())
@_filters()
@_format
@_cache_options
def tags_command(
    logdir: str,
    runs: tuple[str, ...],
    tags: tuple[str, ...],
    kinds: tuple[str, ...],
    steps: tuple[int | None, int | None] | None,
    fmt: str,
    cache: bool | None,
    cache_dir: str | None,
) -> None:
    """List series: one row per run and tag with its kind, points, step range and plugin.

    Columns: run, tag, kind, points, first_step, last_step, plugin. A tag's kind is decided
    by its first metadata, as in TensorBoard.

    \b
    Examples:
      tbscope tags runs/
      tbscope tags runs/ --kinds scalars --tags 'train/*' --format csv
    """
    from tbscope._reader import scan

    lg = scan(logdir, **_scan_args(runs, tags, kinds, steps), **_cache_arg(cache, cache_dir))
    _read(lg)
    ser = lg.series().to_pandas()
    df = ser[["run", "tag", "kind", "points", "first_step", "last_step", "plugin"]]
    _emit(df, fmt, title=f"{len(df)} series in {logdir}")
    _fail_if_unread(lg.report)


# --------------------------------------------------------------------------------------------
# check and summary
# --------------------------------------------------------------------------------------------


@main.command()
@click.argument("logdir", type=click.Path())
@_filters(tags=False, kinds=False, steps=False)
@click.option(
    "--strict-crc/--no-verify",
    "verify",
    default=True,
    help="Check data CRCs (default) or skip them; length CRCs are always checked.",
)
@click.option(
    "--final",
    is_flag=True,
    help="Read every file as finished, even one written to within --tail-timeout: a record cut short is then a torn record or a stopped tail, not a pending tail.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Also exit with 1 on warnings, such as a stopped tail (a record lost where a writer stopped).",
)
@click.option(
    "--tail-timeout",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="How long after its last change the newest file of a run may still be written.",
)
@_format
def check(
    logdir: str, runs: tuple[str, ...], verify: bool, final: bool, strict: bool, tail_timeout: float, fmt: str
) -> None:
    """Report corrupt records, unusable values and truncated files under LOGDIR.

    Exits with 1 when data was lost: a corrupt record (a torn record followed by whole records
    among them), an unusable value or a file that could not be read. A pending tail (the newest
    file of a run, changed within --tail-timeout, ends inside a record) does not count, nor
    does a stopped tail (a file no longer written ends inside a record: a warning) unless
    --strict is given. csv and json print one row per problem: run, file, severity, offset,
    length, reason.

    \b
    Examples:
      tbscope check runs/
      tbscope check runs/ --final --strict
      tbscope check runs/ --format json
    """
    import pandas as pd

    from tbscope._reader import scan

    lg = scan(logdir, verify=verify, tail_timeout=0.0 if final else tail_timeout, **_scan_args(runs))
    _read(lg)
    info = lg.run_info().to_pandas()
    report = lg.report
    if fmt == "table":
        from rich.console import Console
        from rich.markup import escape

        con = Console(file=sys.stdout, highlight=False)
        con.print(
            f"[bold]{len(info)}[/] runs, {int(info['files'].sum())} files, {int(info['records'].sum())} records, {int(info['bytes'].sum())} bytes"
        )
        if not report.problems:
            con.print("[green]no problems found[/]")
        for p in report.problems:
            color = {"corrupt": "red", "error": "red", "warning": "yellow"}.get(p.severity, "cyan")
            con.print(
                f"[{color}]{p.severity}[/] {escape(p.file or p.run)} @ {p.offset} ({p.length} bytes): {escape(p.reason)}"
            )
    else:
        df = pd.DataFrame(
            [p.__dict__ for p in report.problems], columns=["run", "file", "severity", "offset", "length", "reason"]
        )
        _emit(df, fmt)
    if not report.ok or (strict and report.by_severity("warning")):
        sys.exit(1)


def _split_list(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    out = tuple(v.strip() for v in value.split(",") if v.strip())
    if not out:
        raise click.BadParameter("give at least one name, comma-separated")
    return out


@main.command()
@click.argument("logdir", type=click.Path())
@_filters(kinds=False)
@click.option(
    "--stats",
    metavar="STAT[,STAT]",
    help="Statistics to compute, comma-separated. Per run: last, min, max, argmin, argmax (the default), also first, mean, count. With --group-by: mean, std, min, max, count (the default), also median, var, sem.",
)
@click.option(
    "--group-by",
    "group_by",
    metavar="REGEX|hparam:NAME",
    help="Aggregate runs that differ only by seed: one row per group, tag and step. A regex on run names whose match (or first group) names the group, or hparam:NAME to group runs whose hparams are equal except NAME.",
)
@click.option(
    "--hparams/--no-hparams", default=True, help="Join each run's hyperparameters (default) or leave them out."
)
@_format
@_cache_options
def summary(
    logdir: str,
    runs: tuple[str, ...],
    tags: tuple[str, ...],
    steps: tuple[int | None, int | None] | None,
    stats: str | None,
    group_by: str | None,
    hparams: bool,
    fmt: str,
    cache: bool | None,
    cache_dir: str | None,
) -> None:
    """One row per run: last/min/max (and argmin/argmax steps) of each scalar tag, with hparams.

    csv and json have every column: run, max_step, last_wall_time, hparam:<name>, then
    <tag>:<stat> for each tag and stat (argmin and argmax hold steps: <tag>:argmin_step).
    The table shows the last value of each tag under its plain name, unless --stats is given.

    \b
    Examples:
      tbscope summary runs/
      tbscope summary runs/ --tags 'eval/*' --stats last,max,argmax --format csv
      tbscope summary runs/ --tags train/loss --group-by 'lr=[^/]*' --format csv
    """
    import pandas as pd

    from tbscope._reader import scan

    stat_list = _split_list(stats)
    lg = scan(
        logdir, kinds=["scalars", "hparams"], **_scan_args(runs, tags, steps=steps), **_cache_arg(cache, cache_dir)
    )
    if group_by is not None:
        aggregate = getattr(lg, "aggregate", None)
        if aggregate is None:
            raise click.ClickException("this tbscope has no Logdir.aggregate(); --group-by needs a newer tbscope")
        _read(lg)
        agg_kwargs: dict[str, Any] = {} if stat_list is None else {"stats": stat_list}
        df = aggregate(group_by, **agg_kwargs)
        _emit(df, fmt, title=f"runs of {logdir} grouped by {group_by}")
        _fail_if_unread(lg.report)
        return
    kwargs: dict[str, Any] = {}
    if stat_list is not None:
        kwargs["stats"] = stat_list
    if not hparams:
        kwargs["hparams"] = False
    _read(lg)
    if fmt == "csv":
        # Straight from the columns: a DataFrame of 100,000 runs is not needed to write them.
        cols = lg._summary_columns(**kwargs)
        if _write_fast_csv(sys.stdout, cols, header=True):
            _fail_if_unread(lg.report)
            return
        df = pd.DataFrame(cols)
    else:
        df = lg.summary(**kwargs)
    if fmt == "table" and stat_list is None:
        # A terminal has room for the last values; csv and json carry every statistic.
        keep = [c for c in df.columns if c in ("run", "max_step") or c.startswith("hparam:") or c.endswith(":last")]
        df = df[keep].rename(columns=lambda c: c.removeprefix("hparam:").removesuffix(":last"))
    elif fmt == "table" and "last_wall_time" in df.columns:
        df = df.assign(
            last_wall_time=pd.to_datetime(df["last_wall_time"], unit="s", utc=True).dt.strftime("%Y-%m-%d %H:%M")
        )
    _emit(df, fmt, title=f"runs in {logdir}")
    _fail_if_unread(lg.report)


# --------------------------------------------------------------------------------------------
# sql and export
# --------------------------------------------------------------------------------------------


def _param_value(text: str) -> Any:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _parse_params(values: tuple[str, ...]) -> dict[str, Any] | list[Any] | None:
    if not values:
        return None
    named = ["=" in v for v in values]
    if all(named):
        return {k: _param_value(v) for k, _, v in (p.partition("=") for p in values)}
    if not any(named):
        return [_param_value(v) for v in values]
    raise click.BadParameter(
        "use NAME=VALUE for every --param (for $NAME in the query) or VALUE for every one (for ?), not a mix",
        param_hint="--param",
    )


@main.command("sql")
@click.argument("logdir", type=click.Path())
@click.argument("query")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A query parameter: NAME=VALUE for $NAME, or VALUE for each ? in order. Numbers are numbers; anything else is a string.",
)
@_filters(kinds=False)
@click.option(
    "--external-access",
    is_flag=True,
    help="Let the query read and write files (read_csv, COPY ... TO, ATTACH), install or load DuckDB extensions and change settings. Off by default: a query sees tbscope's tables only. Only for your own queries.",
)
@_format
@_cache_options
def sql_command(
    logdir: str,
    query: str,
    params: tuple[str, ...],
    runs: tuple[str, ...],
    tags: tuple[str, ...],
    steps: tuple[int | None, int | None] | None,
    external_access: bool,
    fmt: str,
    cache: bool | None,
    cache_dir: str | None,
) -> None:
    """Run an SQL query (DuckDB) over the logdir's tables; QUERY '-' reads it from stdin.

    Tables: scalars, tensors, histograms, images, audio, text, blobs, meshes, logs, profiles,
    embeddings, hparams, runs, series, summary. Only the tables
    the query names are read, and its run/tag/step conditions are applied while reading;
    --runs, --tags and --steps narrow the scan further.

    \b
    Examples:
      tbscope sql runs/ "SELECT run, max(value) AS best FROM scalars WHERE tag = 'eval/accuracy' GROUP BY run ORDER BY best DESC"
      tbscope sql runs/ "SELECT tag, count(*) AS points FROM scalars GROUP BY tag ORDER BY tag" --format json
    """
    from tbscope._sql import sql as run_sql

    if query == "-":
        query = sys.stdin.read()
    t0 = time.perf_counter()
    with _activity(f"querying {logdir}"):
        extra = {"external_access": True} if external_access else {}
        result = run_sql(
            logdir,
            query,
            params=_parse_params(params),
            **extra,
            **_scan_args(runs, tags, steps=steps),
            **_cache_arg(cache, cache_dir),
        )
    log.info("query ran in %.3f s", time.perf_counter() - t0)
    if fmt == "table":
        _emit(result.to_pandas(), fmt)
    else:
        _emit_chunks((b.to_pandas() for b in result.iter_batches()), fmt)
    report = getattr(result, "report", None)
    if report is not None:
        _fail_if_unread(report)


@main.command("export")
@click.argument("logdir", type=click.Path())
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    type=click.Path(),
    help="Where to write: a .csv, .parquet or .jsonl file, or a directory with --partition-by run.",
)
@click.option(
    "--to",
    "file_format",
    type=click.Choice(["csv", "parquet", "jsonl"]),
    help="File format (default: from the suffix of --output; parquet for a directory).",
)
@click.option(
    "--partition-by",
    type=click.Choice(["run"]),
    help="Write a Parquet dataset into the --output directory, one partition per run.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing --output: a file, or a directory holding an earlier export (never an event file of LOGDIR, nor a directory holding LOGDIR).",
)
@click.option(
    "--dask",
    "dask_address",
    metavar="SCHEDULER_ADDRESS",
    help="Read on this Dask cluster (tcp://host:8786) and write a Parquet dataset into the --output directory, one file per event file (needs tbscope[dask]).",
)
@_filters()
@_format
@_cache_options
def export_command(
    logdir: str,
    out: str,
    file_format: str | None,
    partition_by: str | None,
    force: bool,
    dask_address: str | None,
    runs: tuple[str, ...],
    tags: tuple[str, ...],
    kinds: tuple[str, ...],
    steps: tuple[int | None, int | None] | None,
    fmt: str,
    cache: bool | None,
    cache_dir: str | None,
) -> None:
    """Write tables to CSV, Parquet or JSON lines, streamed batch by batch (bounded memory).

    --kinds chooses the tables (default: scalars). The command prints what it wrote (output,
    rows, bytes) in the --format given. An existing --output is refused unless --force is
    given; the output is written under a hidden name and renamed into place, so a failed
    export leaves nothing behind. A new file inside LOGDIR is fine; an event file of LOGDIR
    (a name containing tfevents) is never written, even with --force.

    \b
    Examples:
      tbscope export runs/ -o scalars.parquet
      tbscope export runs/ -o scalars.csv --tags 'train/*' --steps 0:1000
      tbscope export runs/ -o dataset/ --partition-by run
    """
    if dask_address is not None:
        # On a Dask cluster: a Parquet dataset, one file per event file (tbscope.dask.to_parquet).
        if file_format not in (None, "parquet") or partition_by:
            raise click.UsageError(
                "--dask writes a Parquet dataset (a directory, one file per event file); drop --to and --partition-by"
            )
        from tbscope.dask import to_parquet

        written = to_parquet(
            logdir,
            out,
            kinds=tuple(kinds) or ("scalars",),
            scheduler=dask_address,
            **_scan_args(runs, tags, steps=steps),
        )
        import pandas as pd

        _emit(pd.DataFrame([{k: _flat(v) if fmt != "json" else v for k, v in written.items()}]), fmt)
        return
    from tbscope._export import export

    # Checked here so the message names this command's options, not the API's keywords.
    if partition_by and file_format not in (None, "parquet"):
        raise click.UsageError(
            f"--partition-by writes a Parquet dataset; --to {file_format} cannot be partitioned "
            "(drop --to, or use --to parquet)"
        )
    from tbscope._export import FORMATS

    known = {suffix for suffixes in FORMATS.values() for suffix in suffixes}
    if not partition_by and file_format is None and os.path.splitext(out)[1].lower() not in known:
        raise click.UsageError(
            f"cannot tell the file format from {out!r}: name it .csv, .parquet or .jsonl, "
            "or pass --to csv|parquet|jsonl"
        )
    progress = _stderr_is_tty()
    kwargs = {**_scan_args(runs, tags, steps=steps), **_cache_arg(cache, cache_dir)}
    t0 = time.perf_counter()
    if force:
        kwargs["force"] = True
    stats = export(
        logdir,
        out,
        format=file_format,
        kinds=tuple(kinds) or ("scalars",),
        partition_by=partition_by,
        progress=progress,
        **kwargs,
    )
    log.info("export took %.3f s", time.perf_counter() - t0)
    import pandas as pd

    if dataclasses.is_dataclass(stats) and not isinstance(stats, type):
        row = dataclasses.asdict(stats)
    elif isinstance(stats, dict):
        row = dict(stats)
    else:
        row = {k: v for k, v in vars(stats).items() if not k.startswith("_")}
    row = {
        "output": out,
        **{
            k: (str(v) if isinstance(v, os.PathLike) else v)
            for k, v in row.items()
            if k not in ("output", "out", "path", "report")
        },
    }
    if fmt != "json":
        # One flat row for a table or csv; json keeps lists and objects as they are.
        row = {k: _flat(v) for k, v in row.items()}
    _emit(pd.DataFrame([row]), fmt)
    report = getattr(stats, "report", None)
    if report is not None:
        _fail_if_unread(report)


def _flat(v: Any) -> Any:
    if isinstance(v, dict):
        return " ".join(f"{k}={x}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return " ".join(map(str, v))
    return v


# --------------------------------------------------------------------------------------------
# clean
# --------------------------------------------------------------------------------------------


@main.command("clean")
@click.argument("logdir", type=click.Path(exists=True, file_okay=False))
@click.option("--older-than", metavar="AGE", help="Runs idle for at least AGE: 30d, 12h, 90m (minutes), 2w, 1d12h.")
@click.option(
    "--before",
    metavar="DATE",
    help="Runs last active before DATE (ISO 8601; local time unless it has an offset): 2026-01-01.",
)
@click.option(
    "--empty",
    is_flag=True,
    help="Runs with no event data: zero-byte files, or only the header record each writer starts a file with.",
)
@click.option(
    "--no-data",
    "no_data",
    is_flag=True,
    help="Runs with no points of any kind (no scalars, tensors, histograms, images, audio, text, hparams, graphs).",
)
@_filters(tags=False, kinds=False, steps=False, remote=False)
@click.option("--delete", "delete", is_flag=True, help="Delete the selected runs' event files (the default action).")
@click.option(
    "--archive",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Move the selected runs' event files to DIR/<run>/ instead (DIR must be outside LOGDIR).",
)
@click.option("--dry-run", "dry_run", is_flag=True, help="Only list what would go and the bytes freed (the default).")
@click.option("--yes", "--apply", "apply", is_flag=True, help="Really delete or archive.")
@_format
def clean_command(
    logdir: str,
    older_than: str | None,
    before: str | None,
    empty: bool,
    no_data: bool,
    runs: tuple[str, ...],
    delete: bool,
    archive: str | None,
    dry_run: bool,
    apply: bool,
    fmt: str,
) -> None:
    """Delete or archive runs by age or content; lists what would go unless --yes is given.

    Rules combine with AND: '--empty --older-than 1d' spares a run that started an hour ago.
    A run's age counts from its last activity: the newest of its last event's wall time and
    its event files' modification times. Only a run's event files are removed, then its
    directory if that leaves it empty; other files and nested runs stay. Symlinks are never
    followed out of LOGDIR: a run or event file that resolves outside it (or is a symlink) is
    listed as skipped and left alone.

    A run with an event file that could not be read is never removed (that file may hold its
    data): it is listed as skipped, and the command exits with 1.

    Prints one row per selected run (run, reason, last_activity, files, bytes, action), then
    the total freed (on stderr with csv and json). --empty and --no-data also match a run that
    has just started: add --older-than to spare it.

    \b
    Examples:
      tbscope clean runs/ --older-than 90d
      tbscope clean runs/ --empty --older-than 1d --yes
      tbscope clean runs/ --no-data --archive old-runs/ --yes
    """
    import pandas as pd

    from tbscope import _clean as retention
    from tbscope._reader import scan

    if dry_run and apply:
        raise click.UsageError("--dry-run and --yes contradict each other; give one")
    if delete and archive:
        raise click.UsageError("--delete and --archive contradict each other; give one")
    rules = retention.Rules(
        older_than=retention.parse_age(older_than) if older_than is not None else None,
        before=retention.parse_date(before) if before is not None else None,
        empty=empty,
        no_data=no_data,
    )
    archive_real = retention.check_archive(archive, logdir) if archive else None
    lg = scan(logdir, **_scan_args(runs))
    _read(lg)
    # A run with a file that could not be read is never removed: that file may hold its data.
    unread = {p.run: p.reason for p in lg.report.by_severity("error") if p.run}
    facts = retention.survey(logdir, lg.run_info().to_pandas(), unread)
    chosen = retention.select(facts, rules, time.time())
    verb = "archive" if archive else "delete"
    rows = []
    failed = 0
    freed = 0
    for f, why in chosen:
        if f.refused:
            action = f"skipped: {f.refused}"
            log.warning("%s: %s", f.run, f.refused)
        elif not apply:
            action = f"would {verb}"
            freed += f.bytes
        else:
            try:
                retention.remove(f, logdir, archive_real)
                action = "archived" if archive else "deleted"
                freed += f.bytes
                log.info("%s %s (%d files, %d bytes)", action, f.run, len(f.files), f.bytes)
            except OSError as e:
                failed += 1
                action = f"failed: {e}"
                log.error("%s: %s", f.run, e)
        last = f.last_activity
        rows.append(
            {
                "run": f.run,
                "reason": "; ".join(why),
                "last_activity": last,
                "files": len(f.files),
                "bytes": f.bytes,
                "action": action,
            }
        )
    df = pd.DataFrame(rows, columns=["run", "reason", "last_activity", "files", "bytes", "action"])
    df["last_activity"] = pd.to_datetime(df["last_activity"].astype("float64"), unit="s", utc=True)
    handled = sum(1 for f, _ in chosen if not f.refused) - failed
    if not apply:
        summary_line = f"{handled} runs, {_human_bytes(freed)} ({freed} bytes) would be {'moved' if archive else 'freed'}; dry run: add --yes to {verb} them"
    else:
        summary_line = f"{handled} runs {'archived' if archive else 'deleted'}, {_human_bytes(freed)} ({freed} bytes) {'moved' if archive else 'freed'}"
        if failed:
            summary_line += f"; {failed} failed"
    if fmt == "table":
        shown = df.assign(bytes=df["bytes"].map(_human_bytes)).rename(columns={"bytes": "size"})
        shown["last_activity"] = shown["last_activity"].dt.strftime("%Y-%m-%d %H:%M")
        if len(shown):
            _emit(shown, fmt, title=f"runs to {verb} in {logdir}")
        click.echo(summary_line)
    else:
        _emit(df, fmt)
        click.echo(summary_line, err=True)
    _fail_if_unread(lg.report)
    if failed:
        sys.exit(1)


# --------------------------------------------------------------------------------------------
# rewrite
# --------------------------------------------------------------------------------------------


@main.command("rewrite")
@click.argument("logdir", type=click.Path())
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    type=click.Path(),
    help="The new logdir: a path that does not exist, or an empty directory (see --force). Not inside LOGDIR.",
)
@_filters(kinds=False, steps=False)
@click.option(
    "--drop-tags",
    multiple=True,
    metavar="GLOB",
    help="Drop tags matching the glob; repeat for several. Graph records are the tags __run_graph__ and __meta_graph__.",
)
@click.option(
    "--drop-steps",
    metavar="A:B",
    callback=_parse_steps,
    help="Drop every point with A <= step < B; A: and :B leave an end open.",
)
@click.option(
    "--restarts",
    type=click.Choice(["all", "preempt"]),
    default="all",
    show_default=True,
    help="preempt: drop what restarts superseded, TensorBoard's rule (a record at step s drops its tag's earlier records with step >= s).",
)
@click.option(
    "--merge/--no-merge",
    default=True,
    help="One file per run, records in TensorBoard's read order (the default), or one file per input file, under its name.",
)
@click.option(
    "--verify/--no-verify",
    default=True,
    help="Read the output back and compare it with the filtered input before it takes its name (the default).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace OUTPUT when it is a non-empty logdir, such as an earlier output (never one holding other files, LOGDIR or a directory holding LOGDIR).",
)
@_format
def rewrite_command(
    logdir: str,
    out: str,
    runs: tuple[str, ...],
    tags: tuple[str, ...],
    drop_tags: tuple[str, ...],
    drop_steps: tuple[int | None, int | None] | None,
    restarts: str,
    merge: bool,
    verify: bool,
    force: bool,
    fmt: str,
) -> None:
    """Write a new logdir with tags, steps or superseded records left out; LOGDIR is only read.

    Records are copied byte for byte unless some of their values are dropped; corrupt records
    and truncated tails are left out and listed as warnings, so the output reads cleanly in
    TensorBoard. Each run's files (restarts, ranks, many small files) become one file unless
    --no-merge is given. The output is written next to OUTPUT under a hidden name, checked
    against the filtered input (every kind, value for value) and renamed into place: an
    interrupted or failed rewrite leaves nothing under OUTPUT. --tags keeps only matching tags,
    --drop-tags removes matching ones.

    Prints one row: output, runs, files_in, files_out, records_in, records_out,
    records_rewritten, values_dropped, bytes_in, bytes_out, bytes_skipped, verified, seconds.

    \b
    Examples:
      tbscope rewrite runs/ -o trimmed/ --restarts preempt
      tbscope rewrite runs/ -o small/ --drop-tags samples --drop-steps 0:100
      tbscope rewrite runs/ -o lr01/ --runs 'lr=0.1/*' --no-merge --format json
    """
    import pandas as pd

    from tbscope._rewrite import RewriteError, rewrite

    if drop_steps == (None, None):
        raise click.BadParameter(
            "':' would drop every step; give at least one end, e.g. 0:100", param_hint="--drop-steps"
        )
    kwargs = _scan_args(runs, tags)
    if drop_tags:
        kwargs["drop_tags"] = list(drop_tags)
    try:
        with _activity(f"rewriting {logdir}"):
            stats = rewrite(
                logdir,
                out,
                drop_steps=drop_steps,
                restarts="preempt" if restarts == "preempt" else None,
                merge=merge,
                verify=verify,
                force=force,
                **kwargs,
            )
    except FileExistsError as e:
        raise _OneLineUsageError(" ".join(str(e).split()).replace("force=True", "--force")) from e
    except RewriteError as e:
        raise click.ClickException(" ".join(str(e).split())) from e
    for p in stats.report.problems:
        if p.severity != "error":
            log.warning("%s (not copied)", p)
    log.info(
        "rewrote %d records into %d, %d files into %d, in %.3f s",
        stats.records_in,
        stats.records_out,
        stats.files_in,
        len(stats.files_out),
        stats.seconds,
    )
    row: dict[str, Any] = {
        "output": stats.output,
        "runs": stats.runs,
        "files_in": stats.files_in,
        "files_out": len(stats.files_out),
        "records_in": stats.records_in,
        "records_out": stats.records_out,
        "records_rewritten": stats.records_rewritten,
        "values_dropped": stats.values_dropped,
        "bytes_in": stats.bytes_in,
        "bytes_out": stats.bytes_out,
        "bytes_skipped": stats.bytes_skipped,
        "verified": stats.verified,
        "seconds": round(stats.seconds, 3),
    }
    if fmt == "table":
        for k in ("bytes_in", "bytes_out", "bytes_skipped"):
            row[k] = _human_bytes(row[k])
    _emit(pd.DataFrame([row]), fmt)
    _fail_if_unread(stats.report)


# Every command's --help ends with the exit statuses too.
for _cmd in main.commands.values():
    _cmd.epilog = "Exit status: " + "; ".join(f"{code} {text.split(' (')[0]}" for code, text in EXIT_CODES) + "."


def _iter_commands() -> Iterable[tuple[str, click.Command]]:
    """Commands in the order the reference lists them."""
    order = ["ls", "tags", "summary", "sql", "export", "check", "clean", "rewrite"]
    names = sorted(main.commands, key=lambda n: (order.index(n) if n in order else len(order), n))
    return [(n, main.commands[n]) for n in names]


if __name__ == "__main__":
    main()
