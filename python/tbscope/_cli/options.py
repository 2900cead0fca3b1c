"""Command-line options shared by ``tbscope``'s commands and ``tbscope serve`` (which lives in
the server package): imported by both, importing neither."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from tbscope._reader import KINDS

__all__ = ["storage_option"]

F = TypeVar("F", bound=Callable[..., Any])


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
