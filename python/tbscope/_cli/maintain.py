"""The commands that change logdirs: ``clean`` (retention) and ``rewrite`` (log surgery).
LOGDIR is only ever read by ``rewrite``; ``clean`` deletes or archives only with ``--yes``."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    pass

from tbscope._cli.app import _OneLineUsageError, log
from tbscope._cli.options import LogdirArgs, format_option, logdir_options, parse_steps
from tbscope._cli.output import (
    _activity,
    _emit,
    _fail_if_unread,
    _human_bytes,
    _read,
)


@click.command("clean")
@logdir_options(
    tags=False, kinds=False, steps=False, cache=False, remote=False, path=click.Path(exists=True, file_okay=False)
)
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
@click.option("--delete", "delete", is_flag=True, help="Delete the selected runs' event files (the default action).")
@click.option(
    "--archive",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Move the selected runs' event files to DIR/<run>/ instead (DIR must be outside LOGDIR).",
)
@click.option("--dry-run", "dry_run", is_flag=True, help="Only list what would go and the bytes freed (the default).")
@click.option("--yes", "--apply", "apply", is_flag=True, help="Really delete or archive.")
@format_option
def clean_command(
    logdir: LogdirArgs,
    older_than: str | None,
    before: str | None,
    empty: bool,
    no_data: bool,
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
    archive_real = retention.check_archive(archive, logdir.path) if archive else None
    lg = logdir.scan()
    _read(lg)
    # A run with a file that could not be read is never removed: that file may hold its data.
    unread = {p.run: p.reason for p in lg.report.by_severity("error") if p.run}
    facts = retention.survey(logdir.path, lg.run_info().to_pandas(), unread)
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
                retention.remove(f, logdir.path, archive_real)
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
            _emit(shown, fmt, title=f"runs to {verb} in {logdir.path}")
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


@click.command("rewrite")
@logdir_options(kinds=False, steps=False, cache=False)
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    type=click.Path(),
    help="The new logdir: a path that does not exist, or an empty directory (see --force). Not inside LOGDIR.",
)
@click.option(
    "--drop-tags",
    multiple=True,
    metavar="GLOB",
    help="Drop tags matching the glob; repeat for several. Graph records are the tags __run_graph__ and __meta_graph__.",
)
@click.option(
    "--drop-steps",
    metavar="A:B",
    callback=parse_steps,
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
@format_option
def rewrite_command(
    logdir: LogdirArgs,
    out: str,
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
    kwargs = logdir.filters()
    if drop_tags:
        kwargs["drop_tags"] = list(drop_tags)
    try:
        with _activity(f"rewriting {logdir.path}"):
            stats = rewrite(
                logdir.path,
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
