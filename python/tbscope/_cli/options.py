"""Command-line options shared by ``tbscope``'s commands and ``tbscope serve`` (which lives in
the server package): one :func:`logdir_options` for every command that reads a logdir, the
output ``--format``, ``--storage-option``. Imported by both, importing neither."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from tbscope._reader import KINDS

if TYPE_CHECKING:
    from tbscope._reader import Logdir

__all__ = ["LogdirArgs", "logdir_options", "storage_option"]


def _use_storage_options(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> None:
    from tbscope import _mirror

    if not value:
        return
    try:
        options = dict(_mirror.parse_storage_option(v) for v in value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    # Every read of a URL during the command (the server's reload thread too) takes them.
    ctx.with_resource(_mirror.use_storage_options(options))


#: ``--storage-option KEY=VALUE`` for commands that read a LOGDIR that may be a URL.
storage_option = click.option(
    "--storage-option",
    multiple=True,
    metavar="KEY=VALUE",
    expose_value=False,
    callback=_use_storage_options,
    help="For a LOGDIR URL (s3://, gs://, az://, memory://...): an option of its filesystem, e.g. endpoint_url=http://127.0.0.1:9000 or anon=true (VALUE is JSON when it parses as JSON); repeatable. The store's usual environment variables (AWS_ENDPOINT_URL, AWS_PROFILE...) apply too.",
)

format_option = click.option(
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


def parse_steps(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int | None, int | None] | None:
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


@dataclasses.dataclass(frozen=True)
class LogdirArgs:
    """A command's LOGDIR and the scan options it was given (see :func:`logdir_options`)."""

    path: str
    runs: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    steps: tuple[int | None, int | None] | None = None
    cache: bool | None = None
    cache_dir: str | None = None

    def filters(self, *, kinds: bool = True) -> dict[str, Any]:
        """The filters as :func:`tbscope.scan` keyword arguments (left out when not given);
        ``kinds=False`` for a command whose --kinds chooses tables rather than filters."""
        out: dict[str, Any] = {}
        if self.runs:
            out["runs"] = list(self.runs)
        if self.tags:
            out["tags"] = list(self.tags)
        if kinds and self.kinds:
            out["kinds"] = list(self.kinds)
        if self.steps is not None:
            out["steps"] = self.steps
        return out

    def cache_arg(self) -> dict[str, Any]:
        """The --cache options as :func:`tbscope.scan`'s ``cache=`` (left out when off)."""
        from tbscope._cache import CLI_ENV

        if self.cache_dir is not None:
            if self.cache is False:
                raise click.UsageError("--no-cache and --cache-dir contradict each other; give one")
            return {"cache": self.cache_dir}
        cache = self.cache
        if cache is None:
            cache = os.environ.get(CLI_ENV, "").strip().lower() in ("1", "true", "yes", "on")
        return {"cache": True} if cache else {}

    def scan_kwargs(self, *, kinds: bool = True) -> dict[str, Any]:
        """:meth:`filters` and :meth:`cache_arg` together."""
        return {**self.filters(kinds=kinds), **self.cache_arg()}

    def scan(self, **options: Any) -> Logdir:
        """:func:`tbscope.scan` of LOGDIR with these options, and ``options`` on top."""
        from tbscope._reader import scan

        return scan(self.path, **self.scan_kwargs(), **options)


def logdir_options(
    *,
    tags: bool = True,
    kinds: bool = True,
    steps: bool = True,
    cache: bool = True,
    remote: bool = True,
    path: click.Path | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The LOGDIR argument and the scan options of a command that reads a logdir: ``--runs``,
    ``--tags``, ``--kinds``, ``--steps``, ``--storage-option`` (for a URL), ``--cache/--no-cache``
    and ``--cache-dir``, each unless turned off here. The command receives them as one
    ``logdir: LogdirArgs``. Put it first under ``@click.command``: LOGDIR is then the first
    argument, and these options come first in ``--help``."""
    opts: list[Callable[[Any], Any]] = [
        click.argument("logdir", type=path or click.Path()),
        click.option("--runs", multiple=True, metavar="GLOB", help="Only runs matching the glob; repeat for several."),
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
                callback=parse_steps,
                help="Only steps A <= step < B; A: and :B leave an end open.",
            )
        )
    if cache:
        opts.append(
            click.option(
                "--cache/--no-cache",
                "cache",
                default=None,
                help="Read through the incremental cache (default: off, on when TBSCOPE_CACHE=1): the next read of LOGDIR reads only what was written since. It lives in $TBSCOPE_CACHE_DIR or ~/.cache/tbscope.",
            )
        )
        opts.append(
            click.option(
                "--cache-dir",
                type=click.Path(file_okay=False),
                metavar="DIR",
                help="Keep the cache in DIR (implies --cache; the only way to put it inside LOGDIR).",
            )
        )
    names = [f.name for f in dataclasses.fields(LogdirArgs) if f.name != "path"]

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def command(**kwargs: Any) -> Any:
            given = {n: kwargs.pop(n) for n in names if n in kwargs}
            return f(logdir=LogdirArgs(kwargs.pop("logdir"), **given), **kwargs)

        # Applied last, so that click (which lists parameters in reverse order of application)
        # puts LOGDIR before the command's own arguments and these options first.
        for o in reversed(opts):
            command = o(command)
        return command

    return deco
