"""``tbscope cache``: the caches and remote logdir mirrors under the cache root, listed
(``ls``) and deleted (``clear``) by logdir, by age or all at once (``tbscope._cache_root``)."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import TYPE_CHECKING

import click

from tbscope._cli.app import _CONTEXT, log
from tbscope._cli.options import format_option
from tbscope._cli.output import _emit, _human_bytes

if TYPE_CHECKING:
    import pandas as pd

    from tbscope._cache_root import CacheEntry

_COLUMNS = ["kind", "source", "endpoint", "bytes", "files", "last_used", "path"]


def _frame(found: list[CacheEntry], actions: list[str] | None = None) -> pd.DataFrame:
    import pandas as pd

    df = pd.DataFrame(
        [[e.kind, e.source, e.endpoint, e.bytes, e.files, e.last_used, e.path] for e in found], columns=_COLUMNS
    )
    df["bytes"] = df["bytes"].astype("int64")
    df["files"] = df["files"].astype("int64")
    df["last_used"] = pd.to_datetime(df["last_used"].astype("float64"), unit="s", utc=True)
    if actions is not None:
        df["action"] = actions
    return df


def _show(df: pd.DataFrame, fmt: str, total: str, title: str) -> None:
    """Rows, then the total line: under the table, or on stderr with csv and json (stdout
    holds only the data)."""
    if fmt != "table":
        _emit(df, fmt)
        click.echo(total, err=True)
        return
    if len(df):
        shown = df.assign(
            source=df["source"].fillna("?"),
            bytes=df["bytes"].map(_human_bytes),
            last_used=df["last_used"].dt.strftime("%Y-%m-%d %H:%M"),
        ).rename(columns={"bytes": "size"})
        if shown["endpoint"].isna().all():
            shown = shown.drop(columns="endpoint")
        _emit(shown, fmt, title=title)
    click.echo(total)


@click.group("cache", context_settings=_CONTEXT)
def cache_group() -> None:
    """See and clear the caches and remote logdir mirrors on this machine.

    Both live under the cache root: $TBSCOPE_CACHE_DIR, else $XDG_CACHE_HOME/tbscope, else
    ~/.cache/tbscope. A cache (--cache, scan(cache=True)) holds a logdir's rows so that the
    next read reads only what was written since; a mirror holds a remote logdir's event files
    (s3://, gs://...), fetched once and then only their new bytes. Nothing removes either on
    its own: 'tbscope cache clear' does, by logdir, by age or all at once, and only the files
    tbscope wrote there.

    \b
    Examples:
      tbscope cache ls
      tbscope cache clear --older-than 30d --dry-run
      tbscope cache clear runs/
    """


@cache_group.command("ls")
@format_option
def ls_command(fmt: str) -> None:
    """List the caches and mirrors under the cache root, the most recently used first.

    Columns: kind (cache or mirror), source (the logdir or URL it belongs to; ? when an older
    tbscope wrote it), endpoint (a mirror's S3-compatible server, when one was given), bytes
    (disk space used, as du counts it; size in the table), files, last_used (in UTC: the last
    read through it; for a cache an older tbscope wrote, the last time it was written; for a
    mirror, its last refresh), path. The table ends with the total.

    \b
    Examples:
      tbscope cache ls
      tbscope cache ls --format json
    """
    from tbscope import _cache_root

    root = _cache_root.default_root()
    found = _cache_root.entries(root)
    used = sum(e.bytes for e in found)
    total = f"{len(found)} {'entry' if len(found) == 1 else 'entries'}, {_human_bytes(used)} ({used} bytes) in {root}"
    _show(_frame(found), fmt, total, title=f"caches and mirrors in {root}")


@cache_group.command("clear")
@click.argument("target", metavar="[LOGDIR_OR_URL]", required=False)
@click.option(
    "--storage-option",
    "storage_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="For a URL: the storage options its reads took (those that choose the mirror: endpoint_url, mirror), as in the reading commands; repeatable.",
)
@click.option("--all", "everything", is_flag=True, help="Every cache and mirror under the cache root.")
@click.option(
    "--older-than",
    metavar="AGE",
    help="Every cache and mirror not used for AGE: 30d, 12h, 90m (minutes), 45s, 2w, 1d12h.",
)
@click.option("--dry-run", "dry_run", is_flag=True, help="Only list what would be deleted and the space freed.")
@format_option
def clear_command(
    target: str | None,
    storage_options: tuple[str, ...],
    everything: bool,
    older_than: str | None,
    dry_run: bool,
    fmt: str,
) -> None:
    """Delete the cache and mirror of one logdir or URL, those not used for a while, or all.

    Only the files tbscope writes in a cache or mirror are deleted, and with --all and
    --older-than only entries under the cache root (see 'tbscope cache ls'); a logdir is never
    touched. A mirror that another process is refreshing, or a cache that another process is
    writing, is skipped with a message (run the command again later). A reader using a cache
    meanwhile goes on: it keeps what it has and reads the rest from the logdir.

    Prints one row per entry (the columns of 'tbscope cache ls', then action), then the
    space freed (on stderr with csv and json).

    \b
    Examples:
      tbscope cache clear runs/
      tbscope cache clear --older-than 7d
      tbscope cache clear --all --dry-run
    """
    from tbscope import _cache_root, _clean, _mirror
    from tbscope.cache import _belonging_to

    if target is not None and (everything or older_than is not None):
        given = "--all" if everything else "--older-than"
        raise click.UsageError(
            f"LOGDIR_OR_URL and {given} contradict each other: give a logdir or URL to clear its cache, or {given} (without one) to clear entries under the cache root"
        )
    if everything and older_than is not None:
        raise click.UsageError("--all and --older-than contradict each other; give one")
    if target is None and not everything and older_than is None:
        raise click.UsageError(
            "say what to clear: a LOGDIR_OR_URL, --older-than AGE or --all (see what there is with 'tbscope cache ls')"
        )
    if storage_options and target is None:
        raise click.UsageError(
            "--storage-option goes with a URL (it chooses that URL's mirror), not --all or --older-than"
        )
    root = _cache_root.default_root()
    if target is not None:
        try:
            options = dict(_mirror.parse_storage_option(v) for v in storage_options)
        except ValueError as ex:
            raise click.BadParameter(str(ex), param_hint="--storage-option") from None
        found = _belonging_to(target, True, options or None)
        what = f"cached for {target}"
    else:
        found = _cache_root.entries(root)
        if older_than is not None:
            try:
                age = _clean.parse_age(older_than)
            except ValueError as ex:
                raise click.BadParameter(str(ex), param_hint="--older-than") from None
            cutoff = time.time() - age
            found = [item for item in found if item.last_used < cutoff]
            what = f"unused for {older_than} in {root}"
        else:
            what = f"in {root}"
    actions = []
    freed = left = 0
    for item in found:
        if dry_run:
            actions.append("would delete")
            freed += item.bytes
            continue
        try:
            _cache_root.remove(item, wait=False)
            actions.append("deleted")
            freed += item.bytes
        except BlockingIOError as ex:
            left += 1
            actions.append(f"skipped: {ex}")
            log.warning("skipped %s: %s; run the command again later", item.path, ex)
        except OSError as ex:
            left += 1
            actions.append(f"failed: {ex}")
            log.error("%s: %s", item.path, ex)
    if target is None and not dry_run:
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(root, _cache_root.REMOTE))  # when that emptied it
    n = len(found) - left
    noun = "entry" if n == 1 else "entries"
    if not found:
        total = f"nothing {what}"
    elif dry_run:
        total = (
            f"{n} {noun}, {_human_bytes(freed)} ({freed} bytes) would be freed; dry run: drop --dry-run to delete them"
        )
    else:
        total = f"{n} {noun} deleted, {_human_bytes(freed)} ({freed} bytes) freed"
        if left:
            total += f"; {left} left in place"
    _show(_frame(found, actions), fmt, total, title=f"caches and mirrors {what}")
    if left:
        sys.exit(1)
