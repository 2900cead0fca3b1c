"""The ``tbscope`` command: the group with every command added (the entry point).

``tbscope._cli/__init__`` imports nothing, so that ``tbscope serve`` (the server package) can
share ``tbscope._cli.options`` without importing the commands that import it."""

from __future__ import annotations

from collections.abc import Iterable

import click

from tbscope._cli import cache, commands, maintain
from tbscope._cli.app import EXIT_CODES, command_epilog, main
from tbscope.server.command import serve_command

__all__ = ["EXIT_CODES", "main"]

for _cmd in (
    commands.ls_command,
    commands.tags_command,
    commands.check,
    commands.summary,
    commands.sql_command,
    commands.export_command,
    maintain.clean_command,
    maintain.rewrite_command,
    cache.cache_group,
    serve_command,
):
    main.add_command(_cmd)

# Every command's --help ends with its exit statuses too (a group's commands as well).
for _name, _group in main.commands.items():
    _group.epilog = command_epilog(_name)
    for _sub, _cmd in getattr(_group, "commands", {}).items():
        _cmd.epilog = command_epilog(f"{_name} {_sub}")


def _iter_commands() -> Iterable[tuple[str, click.Command]]:
    """Commands in the order the reference lists them."""
    order = ["ls", "tags", "summary", "sql", "export", "check", "clean", "rewrite", "cache"]
    names = sorted(main.commands, key=lambda n: (order.index(n) if n in order else len(order), n))
    return [(n, main.commands[n]) for n in names]


if __name__ == "__main__":
    main()
