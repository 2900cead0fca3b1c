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

from collections.abc import Iterable, Mapping

__all__ = ["hparams_children"]


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
