"""The reading commands: ``ls``, ``tags``, ``check``, ``summary``, ``sql`` and ``export``."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    import pandas as pd


from tbscope._cli.app import log
from tbscope._cli.options import LogdirArgs, format_option, logdir_options
from tbscope._cli.output import (
    _activity,
    _emit,
    _emit_chunks,
    _fail_if_unread,
    _human_bytes,
    _read,
    _stderr_is_tty,
    _write_fast_csv,
)
from tbscope._reader import KINDS


@click.command("ls")
@logdir_options()
@format_option
def ls_command(logdir: LogdirArgs, fmt: str) -> None:
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
    lg = logdir.scan()
    _read(lg)
    import numpy as np
    import pandas as pd
    import pyarrow as pa

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
    _emit(df, fmt, title=f"{len(df)} runs in {logdir.path}")
    _fail_if_unread(lg.report)


@click.command("tags")
@logdir_options()
@format_option
def tags_command(logdir: LogdirArgs, fmt: str) -> None:
    """List series: one row per run and tag with its kind, points, step range and plugin.

    Columns: run, tag, kind, points, first_step, last_step, plugin. A tag's kind is decided
    by its first metadata, as in TensorBoard.

    \b
    Examples:
      tbscope tags runs/
      tbscope tags runs/ --kinds scalars --tags 'train/*' --format csv
    """

    lg = logdir.scan()
    _read(lg)
    ser = lg.series().to_pandas()
    df = ser[["run", "tag", "kind", "points", "first_step", "last_step", "plugin"]]
    _emit(df, fmt, title=f"{len(df)} series in {logdir.path}")
    _fail_if_unread(lg.report)


# --------------------------------------------------------------------------------------------
# check and summary
# --------------------------------------------------------------------------------------------


@click.command()
@logdir_options(tags=False, kinds=False, steps=False, cache=False)
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
@format_option
def check(logdir: LogdirArgs, verify: bool, final: bool, strict: bool, tail_timeout: float, fmt: str) -> None:
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
    lg = logdir.scan(verify=verify, tail_timeout=0.0 if final else tail_timeout)
    _read(lg)
    import pandas as pd

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


@click.command()
@logdir_options(kinds=False)
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
@format_option
def summary(
    logdir: LogdirArgs,
    stats: str | None,
    group_by: str | None,
    hparams: bool,
    fmt: str,
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
    stat_list = _split_list(stats)
    lg = logdir.scan(kinds=["scalars", "hparams"])
    if group_by is not None:
        _read(lg)
        agg_kwargs: dict[str, Any] = {} if stat_list is None else {"stats": stat_list}
        df = lg.aggregate(group_by, **agg_kwargs)
        _emit(df, fmt, title=f"runs of {logdir.path} grouped by {group_by}")
        _fail_if_unread(lg.report)
        return
    kwargs: dict[str, Any] = {}
    if stat_list is not None:
        kwargs["stats"] = stat_list
    if not hparams:
        kwargs["hparams"] = False
    # Per-run statistics are all a summary shows: folded as the logdir is read, the scalar
    # rows are never all in memory (a cached scan answers from its stored statistics instead).
    lg._fold_scalars()
    _read(lg)
    import pandas as pd

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
    _emit(df, fmt, title=f"runs in {logdir.path}")
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


@click.command("sql")
@logdir_options(kinds=False)
@click.argument("query")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A query parameter: NAME=VALUE for $NAME, or VALUE for each ? in order. Numbers are numbers; anything else is a string.",
)
@click.option(
    "--external-access",
    is_flag=True,
    help="Let the query read and write files (read_csv, COPY ... TO, ATTACH), install or load DuckDB extensions and change settings. Off by default: a query sees tbscope's tables only. Only for your own queries.",
)
@format_option
def sql_command(
    logdir: LogdirArgs,
    query: str,
    params: tuple[str, ...],
    external_access: bool,
    fmt: str,
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
    with _activity(f"querying {logdir.path}"):
        extra = {"external_access": True} if external_access else {}
        result = run_sql(
            logdir.path,
            query,
            params=_parse_params(params),
            **extra,
            **logdir.scan_kwargs(),
        )
    log.info("query ran in %.3f s", time.perf_counter() - t0)
    if fmt == "table":
        _emit(result.to_pandas(), fmt)
    else:
        _emit_chunks((b.to_pandas() for b in result.iter_batches()), fmt)
    _fail_if_unread(result.report)


@click.command("export")
@logdir_options()
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
@format_option
def export_command(
    logdir: LogdirArgs,
    out: str,
    file_format: str | None,
    partition_by: str | None,
    force: bool,
    dask_address: str | None,
    fmt: str,
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
            logdir.path,
            out,
            kinds=logdir.kinds or ("scalars",),
            scheduler=dask_address,
            **logdir.filters(kinds=False),
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
    kwargs = logdir.scan_kwargs(kinds=False)
    t0 = time.perf_counter()
    if force:
        kwargs["force"] = True
    stats = export(
        logdir.path,
        out,
        format=file_format,
        kinds=logdir.kinds or ("scalars",),
        partition_by=partition_by,
        progress=progress,
        **kwargs,
    )
    log.info("export took %.3f s", time.perf_counter() - t0)
    import pandas as pd

    row = {"output": out, **{k: v for k, v in dataclasses.asdict(stats).items() if k != "report"}}
    if fmt != "json":
        # One flat row for a table or csv; json keeps lists and objects as they are.
        row = {k: _flat(v) for k, v in row.items()}
    _emit(pd.DataFrame([row]), fmt)
    _fail_if_unread(stats.report)


def _flat(v: Any) -> Any:
    if isinstance(v, dict):
        return " ".join(f"{k}={x}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return " ".join(map(str, v))
    return v
