"""Which runs form one experiment: the hparams child runs of torch and tensorboardX.

``SummaryWriter.add_hparams`` in torch and tensorboardX does not write into the run: it opens a
second writer on ``<run>/<time.time()>`` (or ``<run>/<run_name>``) and puts the hparams records
and the metrics passed to it there, while the curves stay in ``<run>``. Taken run by run, an
experiment is then two rows: one with the curves and no hparams, one with the hparams and a
single point per metric. tbscope joins them back into one row, named by the parent:

A run ``C`` is the **hparams child** of run ``P`` when

1. ``C`` is ``P/<name>`` (one level down) and ``P`` is a run (it has event files);
2. ``C`` has hparams records and ``P`` has none;
3. ``C`` holds nothing else but scalars with at most one point per tag (what ``add_hparams``
   writes: its metrics);
4. ``P`` has exactly one such child (a writer that called ``add_hparams`` several times, as a
   sweep in one process does, made several experiments: they stay rows of their own).

The joined row has ``C``'s hparams and status, ``P``'s curves, and ``C``'s metrics for tags ``P``
does not log itself (a tag in both keeps ``P``'s full curve). Logs written with the hparams in
the run itself (tbscope's default, PyTorch Lightning, Keras' callback) have no child and are
unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["hparams_children", "join_children", "name_experiments", "nearest", "run_hparams"]


def hparams_children(
    runs: Iterable[str],
    hparams_runs: Iterable[str],
    contents: Mapping[str, Iterable[tuple[str, int]]],
) -> dict[str, str]:
    """``{child: parent}`` for every hparams child (see the module's rules).

    ``runs``: every run of the logdir; ``hparams_runs``: those with hparams records;
    ``contents``: for (at least) each run of ``hparams_runs``, its series as (kind, points).
    """
    all_runs = set(runs)
    with_hp = set(hparams_runs)
    found: dict[str, list[str]] = {}
    for child in sorted(with_hp):
        if "/" not in child:
            continue
        parent = child.rsplit("/", 1)[0]
        if parent not in all_runs or parent in with_hp:
            continue
        series = list(contents.get(child, ()))
        if all(kind == "hparams" or (kind == "scalars" and points <= 1) for kind, points in series):
            found.setdefault(parent, []).append(child)
    return {kids[0]: parent for parent, kids in found.items() if len(kids) == 1}


def name_experiments(table: pa.Table, children: Mapping[str, str]) -> pa.Table:
    """The hparams table with ``hparams_run`` (where the records are) and each hparams child's
    row named after its parent, sorted by run."""
    import pyarrow as pa
    import pyarrow.compute as pc

    runs = table.column("run").to_pylist()
    table = table.append_column("hparams_run", pa.array(runs, pa.string()))
    if not any(r in children for r in runs):
        return table
    named = pa.array([children.get(r, r) for r in runs], pa.string())
    table = table.set_column(table.schema.get_field_index("run"), "run", named)
    return table.take(pc.sort_indices(named))


def nearest(run: str, have: Mapping[str, object]) -> str | None:
    """The run itself, or the longest enclosing run, that has an entry in ``have``."""
    if run in have:
        return run
    parts = run.split("/")
    for i in range(len(parts) - 1, 0, -1):
        parent = "/".join(parts[:i])
        if parent in have:
            return parent
    return "." if "." in have and run != "." else None


def run_hparams(run_names: list[str] | pa.ChunkedArray, hp: pd.DataFrame, children: Mapping[str, str]) -> pd.DataFrame:
    """Per run: ``run``, ``source`` (the run whose hparams it takes, or None) and a
    ``hparam:<name>`` column per hyperparameter. ``hp``: the logdir's ``hparams()`` as pandas;
    ``children``: its hparams children (:func:`hparams_children`)."""
    import pandas as pd

    if not len(hp):
        # Nothing to look up (most logdirs of many runs): no walk over every run name.
        n = len(run_names)
        out = pd.DataFrame(
            {c: hp[c].iloc[:0].reindex(range(n)) for c in hp.columns if c.startswith("hparam:")}, index=range(n)
        )
        out.insert(0, "source", [None] * n)
        out.insert(0, "run", run_names if isinstance(run_names, list) else run_names.to_pandas())
        return out
    if not isinstance(run_names, list):
        run_names = run_names.to_pylist()
    hp_cols = [c for c in hp.columns if c.startswith("hparam:")]
    by_run = {str(r): row for r, row in zip(hp["run"], hp[hp_cols].to_dict("records"))}
    for child, parent in children.items():
        # The parent of an hparams child holds them as if they were its own.
        by_run[parent] = by_run[child]
    rows, sources = [], []
    for run in run_names:
        src = nearest(run, by_run)
        sources.append(src)
        rows.append(by_run[src] if src is not None else {})
    out = pd.DataFrame(rows, columns=hp_cols)
    for c in hp_cols:
        # A column that is all-missing for these runs keeps the dtype hparams() gave it.
        if c in hp and out[c].dtype != hp[c].dtype and out[c].notna().all():
            out[c] = out[c].astype(hp[c].dtype)
    out.insert(0, "source", sources)
    out.insert(0, "run", run_names)
    return out


def join_children(
    cols: dict[str, Any], children: Mapping[str, str], logged: Callable[[], set[tuple[str, str]]]
) -> dict[str, Any]:
    """Summary columns with each hparams child folded into its parent's row: the child's
    statistics fill the tags its parent does not log, then the child's row goes. ``logged()``:
    the (run, tag) pairs of the logdir's scalar series (asked only when a child and its parent
    are both rows)."""
    import numpy as np
    import pandas as pd

    runs = [str(r) for r in cols["run"]]
    row = {r: i for i, r in enumerate(runs)}
    pairs = [(row[c], row[p]) for c, p in children.items() if c in row and p in row]
    if not pairs:
        return cols
    have = logged()
    out = dict(cols)
    for name, col in cols.items():
        if name in ("run", "max_step", "last_wall_time") or name.startswith("hparam:"):
            continue
        tag = name.rsplit(":", 1)[0]
        fills = [(ic, ip) for ic, ip in pairs if (runs[ip], tag) not in have]
        if not fills:
            continue
        col = col.copy()  # numpy views of Arrow buffers are read-only
        for ic, ip in fills:
            col[ip] = col[ic]
        out[name] = col
    for name in ("max_step", "last_wall_time"):
        col = out[name].copy()
        for ic, ip in pairs:
            if pd.isna(col.iloc[ip]):
                col.iloc[ip] = col.iloc[ic]
        out[name] = col
    keep = np.ones(len(runs), dtype=bool)
    keep[[ic for ic, _ in pairs]] = False
    for name, col in out.items():
        out[name] = col[keep].reset_index(drop=True) if isinstance(col, pd.Series) else col[keep]
    return out
