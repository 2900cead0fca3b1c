"""Differential test: tbscope's compat classes against the originals, over their whole public
surface.

TensorBoard's two accumulators and tbparse's ``SummaryReader`` (the pinned releases in
constraints.txt) and tbscope's drop-ins read the same logs: tensorboardX's and TensorBoard's
writers (``fixtures.py``), crafted restarts, out-of-order steps, file versions 1, 2 and none,
changing source writers and more points than the size guidances keep (``compat_logs.py``), and
the real files in ``../shared/data/wild``. torch's writer is covered the same way in
tests/torch/test_compat_torch.py (torch lives in its own venv).

The public surface is enumerated from the installed classes (``dir()`` of the class and
``vars()`` of a loaded instance), and every name must have a probe here: a method or attribute
TensorBoard or tbparse adds makes this test fail until it is compared. Each probe calls the
name with every argument that has an answer (every tag of every type, every plugin, a missing
one) on both sides and compares the results exactly (protos as bytes, NaN equal to NaN,
order included), exceptions by class.

A difference passes only when it is one that docs/compat.md lists: each allowance below names
the ``[diff:ID]`` it stands for, and the test checks that docs/compat.md has that ID.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import compat_logs

compat = pytest.importorskip("tbscope.compat")
ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
pea = pytest.importorskip("tensorboard.backend.event_processing.plugin_event_accumulator")
tbparse = pytest.importorskip("tbparse")

logging.getLogger("tensorboard").setLevel(logging.ERROR)

REPO = Path(__file__).resolve().parents[2]
DOCS = (REPO / "docs" / "compat.md").read_text()

# --------------------------------------------------------------------------------------------
# what may differ: each allowance is one documented difference
# --------------------------------------------------------------------------------------------


def _inf_wall_is_nan(theirs: Any, ours: Any) -> bool:
    """[diff:wall-inf] a wall time of +-inf in the file is NaN in tbscope's tables."""
    return isinstance(theirs, float) and math.isinf(theirs) and isinstance(ours, float) and math.isnan(ours)


ALLOWED: dict[str, Callable[[Any, Any], bool]] = {
    "wall-inf": _inf_wall_is_nan,
}


def test_every_allowance_is_documented():
    """Each difference this test lets pass names its ``[diff:ID]``, and docs/compat.md lists it."""
    listed = set(re.findall(r"\[diff:([a-z0-9-]+)\]", DOCS))
    used = set(ALLOWED) | set(re.findall(r"\[diff:([a-z0-9-]+)\]", Path(__file__).read_text()))
    missing = used - listed
    assert not missing, f"allowances not listed in docs/compat.md: {missing}"


# --------------------------------------------------------------------------------------------
# comparing values
# --------------------------------------------------------------------------------------------

_RAISED = "raised"


def _norm(x: Any) -> Any:
    """A plain, exactly comparable form: protos as (type, bytes), events as tuples, floats with
    NaN made comparable, containers in order."""
    if hasattr(x, "SerializeToString") and hasattr(x, "DESCRIPTOR"):
        return ("proto", type(x).__name__, x.SerializeToString(deterministic=True))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, *(_norm(getattr(x, f.name)) for f in dataclasses.fields(x)))
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (type(x).__name__, *(_norm(v) for v in x))
    if isinstance(x, (float, np.floating)):
        return ("nan",) if math.isnan(x) else float(x)
    if isinstance(x, (list, tuple)):
        return [_norm(v) for v in x]
    if isinstance(x, dict):
        return [(k, _norm(v)) for k, v in x.items()]
    if isinstance(x, (set, frozenset)):
        return ("set", sorted(map(repr, x)))
    if isinstance(x, np.ndarray):
        return ("array", str(x.dtype), x.shape, _norm(x.tolist()))
    return x


def _call(fn: Callable[[], Any]) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except Exception as e:  # the class is compared, the message is not
        return (_RAISED, type(e).__name__)


def _diff(theirs: Any, ours: Any, where: str, out: list[str]) -> None:
    """Append where ``ours`` differs from ``theirs`` (recursively), unless an allowance covers it."""
    if len(out) > 40:
        return
    if any(ok(theirs, ours) for ok in ALLOWED.values()):
        return
    if dataclasses.is_dataclass(theirs) and dataclasses.is_dataclass(ours) and type(theirs).__name__ == type(ours).__name__:
        for f in dataclasses.fields(theirs):
            _diff(getattr(theirs, f.name), getattr(ours, f.name), f"{where}.{f.name}", out)
        return
    if isinstance(theirs, (list, tuple)) and isinstance(ours, (list, tuple)) and not hasattr(theirs, "_fields"):
        if len(theirs) != len(ours):
            out.append(f"{where}: {len(ours)} items, TensorBoard/tbparse {len(theirs)}: "
                       f"{_short(ours)} vs {_short(theirs)}")
            return
        for i, (a, b) in enumerate(zip(theirs, ours)):
            _diff(a, b, f"{where}[{i}]", out)
        return
    if isinstance(theirs, dict) and isinstance(ours, dict):
        if list(theirs) != list(ours):
            out.append(f"{where}: keys {list(ours)} vs {list(theirs)}")
            return
        for k in theirs:
            _diff(theirs[k], ours[k], f"{where}[{k!r}]", out)
        return
    if _norm(theirs) != _norm(ours):
        out.append(f"{where}: {_short(ours)} vs {_short(theirs)}")


def _short(x: Any) -> str:
    return repr(_norm(x))[:160]


# --------------------------------------------------------------------------------------------
# probes: one per public name of the originals
# --------------------------------------------------------------------------------------------

# each probe: (accumulator, the original accumulator) -> [(label, value)], asked of both sides
Probe = Callable[[Any, Any], list[tuple[str, Any]]]

_MISSING = "no/such/tag"


def _per_tag(method: str, tag_type: str) -> Probe:
    def probe(acc: Any, tb: Any) -> list[tuple[str, Any]]:
        tags = list(tb.Tags().get(tag_type, [])) + [_MISSING]
        return [(f"{method}({t!r})", _call(lambda t=t: getattr(acc, method)(t))) for t in tags]

    return probe


def _no_args(method: str) -> Probe:
    return lambda acc, tb: [(f"{method}()", _call(getattr(acc, method)))]


def _attr(name: str) -> Probe:
    return lambda acc, tb: [(name, getattr(acc, name))]


def _plugins(tb: Any) -> list[str]:
    names = set(tb._plugin_to_tag_to_content) | {"no_such_plugin"}
    plugins_dir = Path(tb.path) / "plugins"
    if plugins_dir.is_dir():
        names |= {p.name for p in plugins_dir.iterdir()}
    return sorted(names)


def _per_plugin(method: str) -> Probe:
    return lambda acc, tb: [(f"{method}({p!r})", _call(lambda p=p: getattr(acc, method)(p))) for p in _plugins(tb)]


def _assets(acc: Any, tb: Any) -> list[tuple[str, Any]]:
    out = []
    for p in _plugins(tb):
        for a in list(tb.PluginAssets(p)) + ["no_such_asset"]:
            out.append((f"RetrievePluginAsset({p!r}, {a!r})", _call(lambda p=p, a=a: acc.RetrievePluginAsset(p, a))))
    return out


def _summary_metadata(acc: Any, tb: Any) -> list[tuple[str, Any]]:
    tags = list(tb.summary_metadata) + [_MISSING]
    return [(f"SummaryMetadata({t!r})", _call(lambda t=t: acc.SummaryMetadata(t))) for t in tags]


def _reservoir_view(r: Any) -> dict[str, Any]:
    keys = r.Keys()
    view: dict[str, Any] = {"Keys()": keys, "size": r.size, "always_keep_last": r.always_keep_last}
    for k in keys:
        view[f"Items({k!r})"] = _call(lambda k=k: r.Items(k))
    view["Items(missing)"] = _call(lambda: r.Items(_MISSING))
    return view


def _reservoir(name: str) -> Probe:
    return lambda acc, tb: [(name, _reservoir_view(getattr(acc, name)))]


def _tensors_by_tag(acc: Any, tb: Any) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [("tensors_by_tag keys", list(acc.tensors_by_tag))]
    for t in tb.tensors_by_tag:
        r = acc.tensors_by_tag.get(t)
        out.append((f"tensors_by_tag[{t!r}]", None if r is None else _reservoir_view(r)))
    return out


def _path(acc: Any, tb: Any) -> list[tuple[str, Any]]:
    return [("path", str(acc.path))]


COMMON: dict[str, Probe] = {
    "Reload": lambda acc, tb: [("Reload() returns self", acc.Reload() is acc)],
    "Tags": _no_args("Tags"),
    "FirstEventTimestamp": _no_args("FirstEventTimestamp"),
    "GetSourceWriter": _no_args("GetSourceWriter"),
    "Graph": _no_args("Graph"),
    "MetaGraph": _no_args("MetaGraph"),
    "RunMetadata": _per_tag("RunMetadata", "run_metadata"),
    "Tensors": _per_tag("Tensors", "tensors"),
    "SummaryMetadata": _summary_metadata,
    "PluginTagToContent": _per_plugin("PluginTagToContent"),
    "PluginAssets": _per_plugin("PluginAssets"),
    "RetrievePluginAsset": _assets,
    "summary_metadata": _attr("summary_metadata"),
    "path": _path,
    "purge_orphaned_data": _attr("purge_orphaned_data"),
    "most_recent_step": _attr("most_recent_step"),
    "most_recent_wall_time": _attr("most_recent_wall_time"),
    "file_version": _attr("file_version"),
}

LEGACY: dict[str, Probe] = {
    **COMMON,
    "Scalars": _per_tag("Scalars", "scalars"),
    "Histograms": _per_tag("Histograms", "histograms"),
    "CompressedHistograms": _per_tag("CompressedHistograms", "distributions"),
    "Images": _per_tag("Images", "images"),
    "Audio": _per_tag("Audio", "audio"),
    "scalars": _reservoir("scalars"),
    "histograms": _reservoir("histograms"),
    "compressed_histograms": _reservoir("compressed_histograms"),
    "images": _reservoir("images"),
    "audios": _reservoir("audios"),
    "tensors": _reservoir("tensors"),
    "accumulated_attrs": _attr("accumulated_attrs"),
}

PLUGIN: dict[str, Probe] = {
    **COMMON,
    "SerializedGraph": _no_args("SerializedGraph"),
    "AllSummaryMetadata": _no_args("AllSummaryMetadata"),
    "ActivePlugins": _no_args("ActivePlugins"),
    "tensors_by_tag": _tensors_by_tag,
}


def _public(cls: type, inst: Any) -> list[str]:
    return sorted({n for n in dir(cls) if not n.startswith("_")} | {n for n in vars(inst) if not n.startswith("_")})


KINDS = {
    "legacy": (ea.EventAccumulator, compat.EventAccumulator, LEGACY, ea.STORE_EVERYTHING_SIZE_GUIDANCE),
    "plugin": (pea.EventAccumulator, compat.PluginEventAccumulator, PLUGIN, pea.STORE_EVERYTHING_SIZE_GUIDANCE),
}

#: small guidances, so every kind of bucket samples on the crafted ``big`` run
SMALL = {"scalars": 7, "histograms": 3, "distributions": 4, "images": 2, "audio": 1, "tensors": 5}
GUIDANCES = {"default": None, "everything": "everything", "small": SMALL}


def compare_accumulators(kind: str, path: Path, guidance: Any = None, purge: bool = True) -> list[str]:
    tb_cls, our_cls, probes, everything = KINDS[kind]
    size = everything if guidance == "everything" else guidance
    kw: dict[str, Any] = {"size_guidance": size, "purge_orphaned_data": purge}
    if kind == "plugin" and isinstance(size, dict):
        kw["size_guidance"] = {"tensors": size.get("tensors", 0)}
        kw["tensor_size_guidance"] = {"scalars": 4}
    theirs, ours = tb_cls(str(path), **kw), our_cls(str(path), **kw)
    problems: list[str] = []
    # before the first Reload: what reads the files on its own
    for name in ("FirstEventTimestamp", "GetSourceWriter"):
        _diff(_call(getattr(theirs, name)), _call(getattr(ours, name)), f"{name}() before Reload", problems)
    theirs.Reload()
    ours.Reload()
    names = _public(tb_cls, theirs)
    unknown = [n for n in names if n not in probes]
    assert not unknown, f"{tb_cls.__module__}.{tb_cls.__name__} has public names this test does not compare: {unknown}"
    missing = [n for n in names if not hasattr(ours, n)]
    problems += [f"missing: {n}" for n in missing]
    for n in names:
        if n in missing:
            continue
        for (label, a), (_, b) in zip(probes[n](theirs, theirs), probes[n](ours, theirs)):
            _diff(a, b, label, problems)
    return problems


def compare_edits(kind: str, path: Path) -> list[str]:
    """Scripts change reservoirs with FilterItems/AddItem: the same calls give the same state."""
    tb_cls, our_cls, _, _ = KINDS[kind]
    theirs = tb_cls(str(path), size_guidance=SMALL if kind == "legacy" else {"tensors": 5})
    ours = our_cls(str(path), size_guidance=SMALL if kind == "legacy" else {"tensors": 5})
    theirs.Reload()
    ours.Reload()
    problems: list[str] = []
    if kind == "legacy":
        pairs = [(getattr(theirs, n), getattr(ours, n)) for n in ("scalars", "histograms", "tensors", "images")]
    else:
        pairs = [(theirs.tensors_by_tag[t], ours.tensors_by_tag.get(t)) for t in theirs.tensors_by_tag]
    for i, (a, b) in enumerate(pairs):
        if b is None:
            problems.append(f"reservoir {i} missing")
            continue
        keys = a.Keys()
        _diff(a.FilterItems(lambda e: e.step % 3 != 0), b.FilterItems(lambda e: e.step % 3 != 0), f"[{i}] FilterItems", problems)
        for k in keys[:2]:
            items = a.Items(k)
            for j, item in enumerate(items * 4):
                a.AddItem(k, item)
                b.AddItem(k, item)
            _diff(a.Items(k), b.Items(k), f"[{i}] Items({k!r}) after AddItem", problems)
        a.AddItem("new-key", 1)
        b.AddItem("new-key", 1)
        _diff(a.Keys(), b.Keys(), f"[{i}] Keys() after AddItem", problems)
    return problems


# --------------------------------------------------------------------------------------------
# the logs
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def crafted_logdir(tmp_path_factory) -> Path:
    return compat_logs.write_crafted_logdir(tmp_path_factory.mktemp("crafted"))


def _runs(root: Path) -> list[Path]:
    """Every directory holding event files directly (one accumulator each)."""
    return sorted({p.parent for p in root.rglob("*tfevents*") if p.is_file()})


SOURCES = ["tbx", "tb", "crafted", "wild"]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("source", SOURCES)
def test_accumulators_match_the_originals(request, source, kind):
    root = request.getfixturevalue(f"{source}_logdir")
    problems = {}
    for run in _runs(root):
        for gname, guidance in GUIDANCES.items():
            for purge in (True, False):
                if source == "wild" and (gname, purge) not in (("default", True), ("everything", False)):
                    continue  # the real files: the default and keep-everything settings
                got = compare_accumulators(kind, run, guidance, purge)
                if got:
                    problems[f"{run.relative_to(root)} {gname} purge={purge}"] = got
    assert not problems, problems


@pytest.mark.parametrize("kind", list(KINDS))
def test_reservoir_edits_match(crafted_logdir, kind):
    problems = {run.name: compare_edits(kind, run) for run in _runs(crafted_logdir)}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, problems


@pytest.mark.parametrize("kind", list(KINDS))
def test_single_event_file_paths(crafted_logdir, kind):
    """A path to one event file reads that file alone, as TensorBoard's loader does."""
    problems = {}
    for f in sorted((crafted_logdir / "big").glob("*tfevents*")) + sorted((crafted_logdir / "writers").glob("*tfevents*")):
        got = compare_accumulators(kind, f, "everything", True)
        if got:
            problems[f.name] = got
    assert not problems, problems


@pytest.mark.parametrize("kind", list(KINDS))
def test_reload_after_appends_and_a_restart(tmp_path, kind):
    """Reload by Reload: the originals purge what they had already kept when a restart or an
    out-of-order step arrives in a later Reload; the drop-ins must keep the same points."""
    tb_cls, our_cls, probes, _ = KINDS[kind]
    for version in (1, 2):
        run = tmp_path / f"v{version}-{kind}"
        w = compat_logs.RawWriter(run / "events.out.tfevents.1.live")
        w.version(version)
        w.start(0)
        theirs, ours = tb_cls(str(run), size_guidance={"scalars": 6, "tensors": 6}), our_cls(str(run), size_guidance={"scalars": 6, "tensors": 6})
        problems: list[str] = []
        for rnd in range(4):
            base = rnd * 5
            if rnd == 2:
                w.start(3)
                base = 3
            for s in range(base, base + 7):
                w.values(s, compat_logs.scalar("x", s + rnd), compat_logs.tensor_scalar("y", s, first=s == 0))
            theirs.Reload()
            ours.Reload()
            for n in ("Tags", "Tensors") + (("Scalars",) if kind == "legacy" else ()):
                for (label, a), (_, b) in zip(probes[n](theirs, theirs), probes[n](ours, theirs)):
                    _diff(a, b, f"round {rnd} {label}", problems)
            for n in ("most_recent_step", "most_recent_wall_time", "file_version"):
                _diff(getattr(theirs, n), getattr(ours, n), f"round {rnd} {n}", problems)
        w.close()
        assert not problems, (version, problems)


@pytest.mark.parametrize("kind", list(KINDS))
def test_deleted_directory(tmp_path, kind):
    """TensorBoard raises its DirectoryDeletedError when a run's directory disappears."""
    tb_cls, our_cls, _, _ = KINDS[kind]
    run = tmp_path / "run"
    w = compat_logs.RawWriter(run / "events.out.tfevents.1.gone")
    w.version(2)
    w.values(0, compat_logs.scalar("x", 1))
    w.close()
    theirs, ours = tb_cls(str(run)), our_cls(str(run))
    theirs.Reload()
    ours.Reload()
    shutil.rmtree(run)
    a, b = _call(theirs.Reload), _call(ours.Reload)
    assert a == b, (a, b)
    assert b == (_RAISED, "DirectoryDeletedError")
    from tensorboard.backend.event_processing import directory_watcher

    assert compat.DirectoryDeletedError is directory_watcher.DirectoryDeletedError


# --------------------------------------------------------------------------------------------
# SummaryReader vs tbparse
# --------------------------------------------------------------------------------------------

#: tbparse needs TensorFlow for images and audio; those are compared through the accumulators
#: (the same bytes) and test_compat's decoder tests.
TBPARSE_TYPES = {"scalars", "tensors", "histograms", "hparams", "text"}


def _frames(reader: Any) -> list[tuple[str, Any]]:
    out = []
    for et in sorted(TBPARSE_TYPES):
        out.append((f"get_events({et!r})", _call(lambda et=et: reader.get_events(et))))
    return out


def _reader_probe(fn: Callable[[Any], list[tuple[str, Any]]]) -> Callable[[Any], list[tuple[str, Any]]]:
    return fn


def _keys_sorted(x: Any) -> Any:
    """[diff:tbparse-set-order] tbparse adds ``hparams`` and ``text`` to the raw tags by iterating
    a set of strings, an order that changes from process to process; compared sorted."""
    return dict(sorted(x.items())) if isinstance(x, dict) else x


def _raw(reader: Any) -> list[tuple[str, Any]]:
    """The raw views (only for a path to one event file; a directory raises ValueError)."""
    out: list[tuple[str, Any]] = [("get_raw_tags()", _keys_sorted(_call(reader.get_raw_tags)))]
    for et in ("scalars", "histograms", "tensors", "images", "audio", "hparams", "text", "nonsense"):
        out.append((f"get_raw_tags({et!r})", _call(lambda et=et: reader.get_raw_tags(et))))
        out.append((f"get_raw_events({et!r})", _call(lambda et=et: reader.get_raw_events(et))))
    return out


HIST_COUNTS = np.array([0.0, 3.0, 0.0, 5.0, 2.0, 0.0, 7.0])
HIST_LIMITS = np.array([-2.0, -1.0, -1.0, 0.5, 1.0, 1.0, 4.0])
XS = np.array([-3.0, -2.0, -1.5, -1.0, -0.999, 0.0, 0.5, 0.75, 1.0, 2.0, 4.0, 5.0])


def _helpers(cls: Any) -> list[tuple[str, Any]]:
    bucket_tensor = np.array([[-1.0, 0.0, 2.0], [0.0, 0.5, 3.0], [0.5, 3.0, 1.0]])
    out = [
        ("tensor_to_histogram", _call(lambda: cls.tensor_to_histogram(bucket_tensor))),
        ("buckets_to_histogram_dict", _call(lambda: cls.buckets_to_histogram_dict(bucket_tensor))),
        ("histogram_to_cdf", _call(lambda: cls.histogram_to_cdf(HIST_COUNTS, HIST_LIMITS, XS))),
        ("histogram_to_pdf", _call(lambda: cls.histogram_to_pdf(HIST_COUNTS, HIST_LIMITS, XS))),
    ]
    for lo, hi, n in [(None, None, 30), (-2.0, 4.0, 30), (-1.0, -1.0, 7), (-1.5, 1.0, 5), (0.0, 4.0, 8), (-5.0, 10.0, 3)]:
        out.append((f"histogram_to_bins({lo}, {hi}, {n})", _call(lambda lo=lo, hi=hi, n=n: cls.histogram_to_bins(HIST_COUNTS, HIST_LIMITS, lo, hi, n))))
    return out


#: tbparse's public names -> probe of a reader (both sides get the same calls)
READER: dict[str, Callable[[Any], list[tuple[str, Any]]]] = {
    "get_events": _frames,
    "scalars": lambda r: [("scalars", _call(lambda: r.scalars))],
    "tensors": lambda r: [("tensors", _call(lambda: r.tensors))],
    "histograms": lambda r: [("histograms", _call(lambda: r.histograms))],
    "hparams": lambda r: [("hparams", _call(lambda: r.hparams))],
    "text": lambda r: [("text", _call(lambda: r.text))],
    # images and audio: TensorFlow decodes them in tbparse; compared as tags and row counts
    "images": lambda r: [("images tags", _call(lambda: r.get_tags("images")))],
    "audio": lambda r: [("audio tags", _call(lambda: r.get_tags("audio")))],
    "tags": lambda r: [("tags", {k: sorted(v) if k == "hparams" else v for k, v in r.tags.items()})],
    "get_tags": lambda r: [(f"get_tags({t!r})", _call(lambda t=t: r.get_tags(t))) for t in sorted(TBPARSE_TYPES)],
    "log_path": lambda r: [("log_path", r.log_path)],
    "children": lambda r: [("children", sorted(r.children))],
    "raw_tags": lambda r: [("raw_tags", _keys_sorted(_call(lambda: r.raw_tags)))],
    "raw_events": lambda r: [("raw_events", _keys_sorted(_call(lambda: r.raw_events)))],
    "get_raw_tags": _raw,
    "get_raw_events": lambda r: [],  # in _raw
    "tensor_to_histogram": lambda r: _helpers(type(r)),
    "buckets_to_histogram_dict": lambda r: [],  # in _helpers
    "histogram_to_cdf": lambda r: [],
    "histogram_to_pdf": lambda r: [],
    "histogram_to_bins": lambda r: [],
    # these decode with TensorFlow in tbparse: test_compat_diff's image/audio helper tests
    "tensor_to_image": lambda r: [],
    "tensor_to_audio": lambda r: [],
}


def _frame_diff(theirs: Any, ours: Any, where: str, out: list[str], multiset: bool) -> None:
    import pandas as pd

    if isinstance(theirs, pd.DataFrame) and isinstance(ours, pd.DataFrame):
        from test_compat import _compare_frames

        out += [f"{where}: {m}" for m in _compare_frames(ours, theirs, multiset=multiset)]
    else:
        _diff(theirs, ours, where, out)


def compare_readers(path: Path, pivot: bool, extra: set[str]) -> list[str]:
    kw = dict(pivot=pivot, extra_columns=extra, event_types=TBPARSE_TYPES)
    theirs, ours = tbparse.SummaryReader(str(path), **kw), compat.SummaryReader(path, **kw)
    names = sorted(n for n in dir(tbparse.SummaryReader) if not n.startswith("_"))
    unknown = [n for n in names if n not in READER]
    assert not unknown, f"tbparse.SummaryReader has public names this test does not compare: {unknown}"
    # [diff:tbparse-pivot-order] several values of a tag at one step, in a pivot cell: tbparse
    # orders them with an unstable sort when step is its only sort key, so compared as multisets
    multiset = pivot and not ({"dir_name", "file_name"} & extra)
    problems: list[str] = []
    for n in names:
        if not hasattr(type(ours), n):
            problems.append(f"missing: {n}")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for (label, a), (_, b) in zip(READER[n](theirs), READER[n](ours)):
                _frame_diff(a, b, label, problems, multiset)
    return problems


@pytest.mark.parametrize("source", ["tbx", "crafted"])
@pytest.mark.parametrize("pivot", [False, True], ids=["long", "pivot"])
def test_summary_reader_matches_tbparse(request, source, pivot):
    """The whole logdir, then each event file alone (where the raw views answer)."""
    root = request.getfixturevalue(f"{source}_logdir")
    problems = {}
    paths = [root] + sorted(p for p in root.rglob("*tfevents*") if p.is_file())
    for path in paths:
        for extra in (set(), {"wall_time", "dir_name", "file_name"}):
            got = compare_readers(path, pivot and not extra, extra)
            if got:
                problems[f"{path.relative_to(root)} {sorted(extra)}"] = got
    assert not problems, problems


def test_tbparse_helpers_need_no_tbparse():
    """The static helpers are tbscope's own: with tbparse's class replaced by tbscope's (what a
    script that patches ``tbparse.SummaryReader`` does) they neither recurse nor import it."""
    original = tbparse.SummaryReader
    try:
        tbparse.SummaryReader = compat.SummaryReader
        got = _helpers(compat.SummaryReader)
    finally:
        tbparse.SummaryReader = original
    expected = _helpers(original)
    problems: list[str] = []
    for (label, a), (_, b) in zip(expected, got):
        _diff(a, b, label, problems)
    assert not problems, problems
