"""Per-run statistics: the columns of :meth:`tbscope.Logdir.summary` (computed natively; their
names and checks here) and :meth:`tbscope.Logdir.aggregate`'s grouping of runs that differ only
by seed, and its rows."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tbscope._filters import compile_filter

if TYPE_CHECKING:
    import pandas as pd

# --------------------------------------------------------------------------------------------
# summary(): per (run, tag) statistics in a few vectorised passes over the scalar columns.

SUMMARY_STATS = ("last", "first", "min", "max", "argmin", "argmax", "mean", "count")
_COLUMN_SUFFIX = {"argmin": "argmin_step", "argmax": "argmax_step"}


def summary_column(tag: str, stat: str) -> str:
    """The summary column of one tag and statistic: ``<tag>:<stat>``, ``<tag>:argmin_step``."""
    return f"{tag}:{_COLUMN_SUFFIX.get(stat, stat)}"


def check_stats(stats: Iterable[str], allowed: Sequence[str], what: str) -> tuple[str, ...]:
    if isinstance(stats, str):
        stats = (stats,)
    out = tuple(stats)
    bad = [s for s in out if s not in allowed]
    if bad:
        raise ValueError(f"unknown {what} statistic(s) {bad}; choose from {', '.join(allowed)}")
    if not out:
        raise ValueError(f"{what} stats= is empty; name at least one of {', '.join(allowed)}")
    return out


# --------------------------------------------------------------------------------------------
# aggregate(): statistics across runs that differ only by seed.

AGGREGATE_STATS = ("mean", "std", "min", "max", "count", "median", "var", "sem")


def tag_matcher(tags: Any) -> Callable[[str], bool]:
    """A Python predicate for a ``tags=`` filter (glob, compiled regex, or a list of them)."""
    native = compile_filter(tags, "tags")
    if native is None:
        return lambda _t: True
    # The native pattern is built from escapes and constructs Python's re reads the same way.
    rx = re.compile(native)
    return lambda t: rx.search(t) is not None


def group_runs(by: str | re.Pattern[str], runs: Sequence[str], hparams: pd.DataFrame | None) -> dict[str, str]:
    """Run name → group name for :meth:`Logdir.aggregate`; runs without a group are left out."""
    import pandas as pd

    if isinstance(by, str) and by.startswith("hparam:"):
        if hparams is None:
            raise ValueError("aggregate(by='hparam:...') needs hparams")
        seed = by
        cols = [c for c in hparams.columns if c.startswith("hparam:")]
        if seed not in cols:
            names = ", ".join(c.removeprefix("hparam:") for c in cols) or "none"
            raise ValueError(f"no hyperparameter named {seed.removeprefix('hparam:')!r}; the runs have: {names}")
        others = [c for c in cols if c != seed]
        out: dict[str, str] = {}
        for run, src, row in zip(hparams["run"], hparams["source"], hparams[others + [seed]].to_dict("records")):
            if src is None or pd.isna(row[seed]) and all(pd.isna(row[c]) for c in others):
                continue  # no hparams at all
            name = ", ".join(f"{c.removeprefix('hparam:')}={row[c]}" for c in others if not pd.isna(row[c]))
            # A Keras-style sub-run (run/train under the run holding the hparams) keeps its
            # place, so train and validation curves are not averaged together.
            suffix = run[len(src) + 1 :] if src not in (run, ".") else (run if src == "." and run != "." else "")
            out[run] = f"{name}/{suffix}" if suffix else name
        return out
    if isinstance(by, str):
        try:
            rx = re.compile(by)
        except re.error as e:
            raise ValueError(f"by= is neither 'hparam:<name>' nor a valid regex: {e}") from e
    elif isinstance(by, re.Pattern):
        rx = by
    else:
        raise TypeError(f"by= takes a regex on run names or 'hparam:<name>'; got {type(by).__name__}")
    out = {}
    for run in runs:
        m = rx.search(run)
        if m is None:
            continue
        out[run] = "".join(g or "" for g in m.groups()) if rx.groups else m.group(0)
    return out


def aggregate_scalars(
    sc: pd.DataFrame,
    groups: Mapping[str, str],
    children: Mapping[str, str],
    chosen: Sequence[str],
    tags: Any,
) -> pd.DataFrame:
    """:meth:`Logdir.aggregate`'s rows: ``sc``, the scalars (run, tag, step, value, with run
    and tag categorical), grouped by ``groups`` (run → group, see :func:`group_runs`), an
    hparams child's rows counted as its parent's run (``children``: child → parent), tags
    kept by ``tags`` (a filter as ``scan``'s), statistics ``chosen``."""
    import numpy as np
    import pandas as pd

    columns = ["group", "tag", "step", *chosen]
    if not len(sc) or not groups:
        return pd.DataFrame(
            {
                c: pd.Series(
                    [], dtype=object if c in ("group", "tag") else "int64" if c in ("step", "count") else "float64"
                )
                for c in columns
            }
        )
    keep_tag = tag_matcher(tags)
    names = sorted(set(groups.values()))
    code_of = {g: i for i, g in enumerate(names)}
    # Decided once per distinct run and tag name, then spread over the rows by their codes.
    run_group = np.array(
        [code_of.get(groups.get(str(r), ""), -1) for r in sc["run"].cat.categories] + [-1], dtype=np.int64
    )
    tag_keep = np.array([keep_tag(str(t)) for t in sc["tag"].cat.categories] + [False])
    gcode = run_group[sc["run"].cat.codes.to_numpy()]
    mask = (gcode >= 0) & tag_keep[sc["tag"].cat.codes.to_numpy()]
    sc = sc[mask].assign(group=pd.Categorical.from_codes(gcode[mask], categories=names))
    if children:
        # A child's rows count as its parent's run.
        merged = [children.get(str(c), str(c)) for c in sc["run"].cat.categories]
        uniq = sorted(set(merged))
        at = {name: i for i, name in enumerate(uniq)}
        remap = np.array([at[m] for m in merged] + [-1], dtype=np.int64)
        sc["run"] = pd.Categorical.from_codes(remap[sc["run"].cat.codes.to_numpy()], categories=uniq)
    # One value per run and step (the last written), so count counts runs.
    sc = sc.drop_duplicates(["run", "tag", "step"], keep="last")
    out = sc.groupby(["group", "tag", "step"], observed=True, sort=True)["value"].agg(list(chosen)).reset_index()
    out["tag"] = out["tag"].cat.remove_unused_categories()
    out["group"] = out["group"].cat.remove_unused_categories()
    return out[columns]
