"""The ``tbscope`` group: exit statuses, one-line errors with a hint (tracebacks with
``--debug``), and tbscope's log on stderr for the length of a command."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    pass

from tbscope._core import __version__

log = logging.getLogger("tbscope")

#: Exit statuses, shared by ``--help`` and the generated reference.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "success (check: no data lost; clean: every selected run was handled)"),
    (
        1,
        "check found lost data (with --strict, also a warning such as a stopped tail), clean could not remove a run, cache clear left an entry in place (in use by another process, or failed), rewrite's output did not verify, or reading failed (a file or directory could not be read: printed on stderr, the output lacks its data; a missing optional package)",
    ),
    (
        2,
        "bad usage: unknown command or option, bad value or glob, SQL error, a path that does not exist, or an output that exists",
    ),
)

#: What exit status 1 means for each command that has a reason of its own; every command that
#: reads a logdir can also end with 1 because a read failed (``EXIT_READ_FAILED``).
EXIT_1: dict[str, str] = {
    "check": "found lost data (with --strict, also a warning such as a stopped tail)",
    "clean": "could not remove a run",
    "cache clear": "left an entry in place (in use by another process, or failed)",
    "rewrite": "the output did not verify",
}
EXIT_READ_FAILED = "reading failed (printed on stderr, the output lacks its data)"
#: Commands that read no logdir: status 1 is only what ``EXIT_1`` names for them, if anything.
_READS_NOTHING = {"cache", "cache ls", "cache clear"}


def command_epilog(name: str) -> str:
    """The exit statuses at the end of ``tbscope NAME --help`` ("cache ls" for a group's command):
    what 1 means for that command, not the whole list of the top-level help."""
    one = [EXIT_1[name]] if name in EXIT_1 else []
    if name not in _READS_NOTHING:
        one.append(EXIT_READ_FAILED)
    codes = ["0 success", *(["1 " + ", or ".join(one)] if one else []), "2 bad usage"]
    return "Exit status: " + "; ".join(codes) + "."


# Optional packages and what to install for them.
_EXTRAS = {"duckdb": "tbscope[sql]", "polars": "tbscope[polars]", "fsspec": "tbscope[remote]"}


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
