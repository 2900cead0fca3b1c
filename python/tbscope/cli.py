"""The ``tbscope`` command line.

Exit codes: 0 success; 1 the logs have problems (``check`` found data loss); 2 bad usage or a
path that cannot be read. Errors print as one line with a hint; ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from tbscope import __version__

log = logging.getLogger("tbscope")


class _Main(click.Group):
    """Turns exceptions into one-line errors unless --debug is given."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except (ValueError, TypeError) as e:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            # Bad filters and options are usage errors: exit 2 with one line.
            raise click.UsageError(str(e)) from e
        except FileNotFoundError as e:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            raise click.UsageError(f"{e}; check the path (a logdir or an event file)") from e
        except OSError as e:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            raise click.ClickException(str(e)) from e


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="tbscope")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Read, check and summarise TensorBoard event logs, fast and without TensorFlow.

    \b
    Examples:
      tbscope check runs/
      tbscope summary runs/ --format csv > runs.csv
    """
    ctx.obj = {"debug": debug}
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def _emit(df: Any, fmt: str, title: str | None = None) -> None:
    if fmt == "csv":
        df.to_csv(sys.stdout, index=False)
    elif fmt == "json":
        click.echo(df.to_json(orient="records", date_format="iso"))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, show_lines=False)
        for col in df.columns:
            table.add_column(str(col), overflow="fold")
        for row in df.itertuples(index=False):
            table.add_row(*("" if v is None or (isinstance(v, float) and v != v) else f"{v:.6g}" if isinstance(v, float) else str(v) for v in row))
        Console(width=max(100, 14 * len(df.columns))).print(table)


_format = click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True, help="Output format.")


@main.command()
@click.argument("logdir", type=click.Path())
@click.option("--strict-crc/--no-verify", "verify", default=True, help="Check data CRCs (default) or skip them.")
@_format
def check(logdir: str, verify: bool, fmt: str) -> None:
    """Report corrupt records, unusable values and truncated files under LOGDIR.

    Exits with 1 when data was lost (truncated tails of files still being written do not count).

    \b
    Example:
      tbscope check runs/
    """
    import pandas as pd

    from tbscope.reader import scan

    lg = scan(logdir, verify=verify)
    info = lg.run_info().to_pandas()
    report = lg.report
    if fmt == "table":
        from rich.console import Console

        con = Console()
        con.print(f"[bold]{len(info)}[/] runs, {int(info['files'].sum())} files, {int(info['records'].sum())} records, {int(info['bytes'].sum())} bytes")
        if not report.problems:
            con.print("[green]no problems found[/]")
        for p in report.problems:
            color = {"corrupt": "red", "error": "red", "warning": "yellow"}.get(p.severity, "cyan")
            con.print(f"[{color}]{p.severity}[/] {p.file or p.run} @ {p.offset} ({p.length} bytes): {p.reason}")
    else:
        df = pd.DataFrame([p.__dict__ for p in report.problems], columns=["run", "file", "severity", "offset", "length", "reason"])
        _emit(df, fmt)
    if not report.ok:
        sys.exit(1)


@main.command()
@click.argument("logdir", type=click.Path())
@click.option("--runs", multiple=True, help="Glob of runs to include (repeatable).")
@click.option("--tags", multiple=True, help="Glob of scalar tags to include (repeatable).")
@_format
def summary(logdir: str, runs: tuple[str, ...], tags: tuple[str, ...], fmt: str) -> None:
    """One row per run: last/min/max of each scalar tag, with the run's hparams.

    \b
    Example:
      tbscope summary runs/ --tags 'loss*' --format csv
    """
    from tbscope.reader import scan

    lg = scan(logdir, runs=list(runs) or None, tags=list(tags) or None, kinds=["scalars", "hparams"])
    df = lg.summary()
    if fmt == "table":
        # A terminal has room for the last values; csv and json carry min and max too.
        keep = [c for c in df.columns if c in ("run", "max_step") or c.startswith("hparam:") or c.endswith(":last")]
        df = df[keep].rename(columns=lambda c: c.removeprefix("hparam:").removesuffix(":last"))
    _emit(df, fmt, title=f"runs in {logdir}")


if __name__ == "__main__":
    main()
