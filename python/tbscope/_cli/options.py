"""Command-line options shared by ``tbscope``'s commands and ``tbscope serve`` (which lives in
the server package): imported by both, importing neither."""

from __future__ import annotations

import click

__all__ = ["storage_option"]


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
