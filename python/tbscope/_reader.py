"""``scan`` (lazy) and ``read_*`` (eager): the reading API."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from tbscope import _mirror
from tbscope._experiments import hparams_children, join_children, name_experiments, run_hparams
from tbscope._filters import Filter, ScanArgs, compile_filter, kinds_list, parse_steps
from tbscope._frames import BlobFrame, Frame, MeshFrame, TensorFrame
from tbscope._report import LoadStats, Problem, Report
from tbscope.errors import CorruptRecordError

if TYPE_CHECKING:
    from tbscope._cache import Cache, CacheInfo

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from tbscope._profiles import Profile
    from tbscope._projector import Embedding
    from tbscope._query import Result

KINDS = ("scalars", "histograms", "images", "audio", "text", "hparams", "blobs", "tensors")
Restarts = Literal["all", "preempt"]
_T = TypeVar("_T")


class Logdir:
    """A logdir (or one event file) opened by :func:`scan`; reads on first use.

    Every table holds what the scan's filters selected, in run, file and record order. Call
    :meth:`reload` to pick up what writers appended since; only new bytes are read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        args: ScanArgs,
        strict: bool,
        remote: _mirror.Mirror | None = None,
    ) -> None:
        self._path = os.fspath(path)
        # A remote logdir is read from its local mirror (self.path); reloads refresh it first.
        self._remote = remote
        #: The URL given to scan() for a remote logdir, else None.
        self.url = remote.url if remote is not None else None
        # Kept to open more readers: iter_batches() streams with a reader of its own, and
        # summary() reads hparams records that this scan's filters may leave out. With a
        # cache, its directory travels along, so derived readers use the cache too.
        self._args = args
        self._native = args.open(self._path)
        self._strict = strict
        self._loaded = False
        self._seen_problems: set[Problem] = set()
        self._seen_cache_warnings = 0

    def __repr__(self) -> str:
        state = f"{len(self.runs)} runs" if self._loaded else "not read yet"
        return f"<tbscope.Logdir {self.url or self.path!r}: {state}>"

    @property
    def path(self) -> str:
        """The logdir or event file read: for a remote logdir, its local mirror (fetched whole
        before it is handed out)."""
        if self._remote is not None:
            self._remote.wait()
        return self._path

    def _load(self) -> LoadStats:
        if self._remote is not None and self._loaded:
            self._remote.sync()
        if self._remote is not None and not self._loaded:
            # The first read of a remote logdir parses files as they are fetched.
            parts = self._remote.follow(self._native.load)
            stats = LoadStats(*(sum(p[i] for p in parts) for i in range(5)))
        else:
            stats = LoadStats(*self._native.load())
        self._loaded = True
        self._log_cache(debug=True)
        self._note_cache_use()
        if self._strict:
            # By value, not by position: a reload may also drop an entry that no longer holds.
            problems = self.report.problems
            fresh = [p for p in problems if p not in self._seen_problems]
            self._seen_problems = set(problems)
            _raise_strict(fresh)
        return stats

    def _log_cache(self, debug: bool = False) -> None:
        """Logs the cache's new warnings: a cache that cannot be used or written is worth a
        warning, never an error (the data came from the logdir)."""
        info = self._native.cache_info()
        if info is None:
            return
        from tbscope._cache import log as cache_log

        warnings = info[5]
        for w in warnings[self._seen_cache_warnings :]:
            cache_log.warning("%s", w)
        self._seen_cache_warnings = len(warnings)
        if debug:
            cache_log.debug("cache %s: %s (generation %s, written: %s)", info[0], info[1], info[2], info[3])

    def _note_cache_use(self) -> None:
        """Records in the cache which logdir it holds and that it was used now (what
        ``tbscope cache ls`` shows, and ``clear --older-than`` goes by)."""
        if self._args.cache_dir is not None:
            from tbscope._cache_root import note_use

            note_use(self._args.cache_dir, self.url or os.path.realpath(self._path))

    def _logged(self, out: _T) -> _T:
        """``out``, what a native method returned, after logging the cache's news: through a
        cache, a warm open decodes what a method needs when it is first called, and falls back
        to reading the logdir if that fails."""
        if self._args.cache_dir is not None:
            self._log_cache()
        return out

    def _ensure(self) -> None:
        if not self._loaded:
            self._load()

    def _fold_scalars(self, piece_bytes: int | None = None) -> bool:
        """(For ``tbscope summary``.) Makes this scan, before its first read, keep statistics of
        its scalars instead of their rows: the read folds each piece of the logdir as it is
        parsed, so memory is bounded by a piece, not by the logdir, and :meth:`summary` gives
        the same table. Its scalar rows are then unavailable. Only without a cache (a cache
        stores the rows) and with ``restarts="all"`` (the restart rule needs the rows it drops);
        returns whether it applies. ``piece_bytes``: event file bytes read per piece (None: the
        default; tests cut a small logdir into many pieces with it)."""
        a = self._args
        if self._loaded or a.cache_dir is not None or a.restarts != "all" or a.byte_range is not None:
            return False
        self._native = a.open(self._path, fold_scalars=True, fold_piece_bytes=piece_bytes)
        return True

    def reload(self) -> LoadStats:
        """Read what was written since the last read; returns what was read."""
        return self._load()

    def _defer_cache_writes(self) -> None:
        """(For ``tbscope serve``.) Reads from now on publish their rows without writing the
        cache; :meth:`_write_cache` writes it afterwards, on another thread (docs/cache.md,
        "Written after the read"). A scan without a cache ignores it."""
        self._native.defer_cache_writes()

    def _write_cache(self) -> str | None:
        """Writes the cache generation that deferred reads left unwritten, without holding the
        reader but to copy its state (reads and tables go on meanwhile; the GIL is released).
        Returns the generation published, else None (nothing to write, abandoned, or failed:
        then a warning on the ``tbscope.cache`` logger)."""
        generation = self._native.write_cache()
        self._log_cache()
        if generation is not None:
            self._note_cache_use()
        return generation

    def _abandon_cache_write(self) -> None:
        """Stops a deferred cache write: one running publishes nothing and removes what it
        wrote (checked before each file), later ones do nothing."""
        self._native.abandon_cache_write()

    @property
    def cache_info(self) -> CacheInfo | None:
        """What the cache did on the last read (None when the scan has no cache)."""
        info = self._native.cache_info()
        if info is None:
            return None
        from tbscope._cache import CacheInfo

        d, status, generation, written, dropped, warnings, rechecked, listed = info
        return CacheInfo(d, status, generation, written, dropped, tuple(warnings), rechecked, listed)

    @property
    def runs(self) -> list[str]:
        """Run names: paths relative to the logdir with ``/``, ``.`` for the logdir itself."""
        self._ensure()
        return list(self._logged(self._native.run_names()))

    @property
    def report(self) -> Report:
        """Corrupt records, unusable values and truncated tails found so far."""
        self._ensure()
        return Report(self._problems(self._logged(self._native.report())))

    def _problems(self, native: list[tuple[str, str, str, int, int, str]]) -> tuple[Problem, ...]:
        """The native report, after a remote logdir's fetch failures (files named relative
        to the logdir, as the reader names them; the reason has the URL)."""
        problems = tuple(Problem(*p) for p in native)
        if self._remote is None:
            return problems
        return tuple(Problem(f.run, f.file, "error", 0, 0, f.reason) for f in self._remote.problems) + problems

    def _frame(self, kind: str) -> Frame:
        cls = {"tensors": TensorFrame, "images": BlobFrame, "audio": BlobFrame, "blobs": BlobFrame}.get(kind, Frame)
        self._ensure()
        return cls(self._logged(self._native.table(kind)), kind, self._blob_path)

    def iter_batches(
        self, kind: str = "scalars", max_rows: int = 1 << 20, max_bytes: int = 256 << 20
    ) -> Iterator[pa.RecordBatch]:
        """Stream one table in Arrow record batches, for logdirs bigger than memory.

        About ``max_bytes`` of event files are read at a time and nothing is kept, so memory
        stays bounded; rows come in the same order as from ``scalars()`` and siblings. This
        Logdir itself is left unread (streaming uses a reader of its own). With ``cache=``, the
        batches come from the cache: mapped from its files when warm, but a cache miss reads the
        logdir whole first (to write the cache).

        >>> for batch in tbscope.scan("runs/").iter_batches("scalars"):  # doctest: +SKIP
        ...     process(batch.to_pandas())
        """
        return self._iter_batches(kind, max_rows, max_bytes, None)

    def _iter_batches(
        self, kind: str, max_rows: int, max_bytes: int, on_report: Callable[[Report], None] | None
    ) -> Iterator[pa.RecordBatch]:
        """:meth:`iter_batches`, then ``on_report(report)`` with what the read reported."""
        import pyarrow as pa

        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
        if self._args.cache_dir is not None:
            # Through the cache, the rows are a mapping of its files: batches of the table cost
            # no memory of their own (the page cache holds them), so there is nothing to stream.
            other = Logdir(self.path, self._args, self._strict, self._remote)
            frame = other.hparams_records() if kind == "hparams" else other._frame(kind)
            yield from frame.to_arrow().to_batches(max_chunksize=max_rows)
            if on_report is not None:
                on_report(other.report)
            return
        native = self._args.open(self.path)
        for table in native.stream(kind, max_bytes):
            yield from pa.table(table).to_batches(max_chunksize=max_rows)
        problems = list(self._problems(native.report()))
        if self._strict:
            _raise_strict(problems)
        if on_report is not None:
            on_report(Report(tuple(problems)))

    def _blob_path(self, rel: str) -> str | None:
        p = self._logged(self._native.file_path(rel))
        return None if p is None else os.fspath(p)

    def scalars(self) -> Frame:
        """run, tag, step, wall_time, timestamp, value (float64)."""
        return self._frame("scalars")

    def tensors(self) -> TensorFrame:
        """Tensors of any dtype and shape that are not another kind (``plugin`` says whose)."""
        return self._frame("tensors")  # type: ignore[return-value]

    def histograms(self) -> Frame:
        """Bucket edges and counts as list columns, plus legacy min/max/num/sum/sum_squares."""
        return self._frame("histograms")

    def images(self) -> BlobFrame:
        return self._frame("images")  # type: ignore[return-value]

    def audio(self) -> BlobFrame:
        return self._frame("audio")  # type: ignore[return-value]

    def text(self) -> Frame:
        return self._frame("text")

    def blobs(self) -> BlobFrame:
        """Graphs, run metadata and other blob sequences."""
        return self._frame("blobs")  # type: ignore[return-value]

    def pr_curves(self) -> Frame:
        """PR curves (``add_pr_curve``) decoded: run, tag, step, wall_time, and per row the lists
        ``thresholds``, ``tp``, ``fp``, ``tn``, ``fn``, ``precision``, ``recall``, with the raw
        tensor (``dtype``, ``shape``, ``content``). See :mod:`tbscope._plugins`."""
        from tbscope._plugins import pr_curves

        return Frame(pr_curves(self.tensors().to_arrow()), "pr_curves")

    def meshes(self) -> MeshFrame:
        """Meshes (``add_mesh``) decoded: one row per run, mesh (``tag``: its name), step and
        sample (``index``) with ``vertices``, ``faces`` and ``colors``; ``to_pandas()`` gives
        them as numpy arrays of shape ``(n, 3)`` (float32, int32, uint8; None when absent) and
        ``config`` is the writer's three.js JSON. See :func:`tbscope.plugins.meshes`."""
        from tbscope._plugins import meshes

        return MeshFrame(meshes(self.tensors().to_arrow(), self.series().to_arrow()), "meshes")

    def custom_scalars(self) -> dict[str, dict[str, Any]]:
        """Each run's custom-scalar layout (``add_custom_scalars``) as a dict shaped like the
        ``Layout`` proto; ``tbscope.plugins.merge_layouts`` merges them as TensorBoard does."""
        from tbscope._plugins import custom_scalar_layouts

        return custom_scalar_layouts(self.tensors().to_arrow())

    def embeddings(self) -> Frame:
        """The projector's embeddings (``add_embedding``), one row per run and tag: ``points``,
        ``dimensions``, ``metadata_columns``, ``sprite`` (and its thumbnail size), the files
        (relative to the logdir) and ``error`` when one cannot be read. Read from each run's
        ``projector_config.pbtxt`` as TensorBoard's projector does; see docs/kinds.md."""
        from tbscope import _projector

        root = self._local_root()
        infos = [] if root is None else _projector.embedding_infos(root, self.runs)
        return Frame(_projector.listing(infos, root or "."), "embeddings")

    def embedding(self, run: str, tag: str) -> Embedding:
        """One embedding read into memory: ``values`` (numpy [points, dimensions]), ``metadata``
        (a pandas frame, one row per point) and ``project(dims, method)`` for a 2-D/3-D view.

        >>> emb = tbscope.scan("runs/").embedding(".", "default:00000")  # doctest: +SKIP
        >>> emb.project(2, method="pca")  # doctest: +SKIP
        """
        from tbscope import _projector

        root = self._local_root()
        infos = [] if root is None else _projector.embedding_infos(root, self.runs)
        for info in infos:
            if info.run == run and info.tag in (tag, tag[:-2] if tag.endswith(":0") else tag):
                return _projector.load(info)
        have = sorted({(i.run, i.tag) for i in infos if i.tag})
        hint = (
            f"; the embeddings are: {', '.join(f'{r!r} {t!r}' for r, t in have[:20])}"
            if have
            else "; this logdir has none (see embeddings())"
        )
        raise LookupError(f"no embedding {tag!r} in run {run!r}{hint}")

    def _local_root(self) -> str | None:
        """The directory projector configs are looked for in (None for an object store)."""
        from tbscope._projector import local_root

        return local_root(self.path)

    def hparams_records(self) -> Frame:
        """Raw hparams plugin records (experiment, session start and end) per run."""
        return self._frame("hparams")

    def hparams(self) -> Frame:
        """One row per experiment with hparams records: group_name, start/end time, status, a
        column ``hparam:<name>`` per hyperparameter (union of keys; float64, bool or string),
        and ``hparams_run``, the run the records are in.

        An experiment is a run, except for torch's and tensorboardX's ``add_hparams``, which
        write the hparams into a child run ``<run>/<timestamp>``: that row is named after the
        parent run holding the curves (see :mod:`tbscope._experiments` for the exact rule).
        """
        import pyarrow as pa

        self._ensure()
        table = pa.RecordBatchReader.from_stream(self._logged(self._native.hparams())).read_all()
        children = self._hparams_children(table.column("run").to_pylist()) if table.num_rows else {}
        return Frame(name_experiments(table, children), "hparams")

    def summary(
        self, stats: Iterable[str] = ("last", "min", "max", "argmin", "argmax"), hparams: bool = True
    ) -> pd.DataFrame:
        """One row per run (per experiment): ``run``, ``max_step``, ``last_wall_time``, the run's
        hparams (``hparam:<name>``) and, for every scalar tag (sorted by name), one column per
        statistic.

        ``stats`` (in the order given): ``last`` (the last point as written, NaN included: a
        diverged run must not look fine), ``first``, ``min``, ``max``, ``mean`` (these skip NaN),
        ``count`` (non-NaN points), ``argmin``/``argmax`` (the step of the first point holding the
        minimum/maximum, nullable ``Int64``). Columns are named ``<tag>:<stat>``, except
        ``<tag>:argmin_step`` and ``<tag>:argmax_step``. A run without hparams of its own takes
        those of the nearest enclosing run that has them (Keras writes ``run/train`` and
        ``run/validation`` under the run that holds the hparams); ``hparams=False`` leaves them out.

        The child run ``<run>/<timestamp>`` that torch's and tensorboardX's ``add_hparams`` write
        is joined to its parent: one row named ``<run>`` with the child's hparams, the parent's
        curves and the child's metrics (for tags the parent does not log itself). The rule is
        in :mod:`tbscope._experiments`; with ``hparams=False`` every run is a row.
        """
        import pandas as pd

        return pd.DataFrame(self._summary_columns(stats, hparams))

    def _summary_columns(
        self, stats: Iterable[str] = ("last", "min", "max", "argmin", "argmax"), hparams: bool = True
    ) -> dict[str, Any]:
        """The columns of :meth:`summary`, before they make a DataFrame (the CLI writes CSV from
        them directly)."""
        import pandas as pd
        import pyarrow as pa

        from tbscope._stats import SUMMARY_STATS, check_stats, summary_column

        chosen = check_stats(stats, SUMMARY_STATS, "summary")
        self._ensure()
        info = self.run_info().to_arrow()
        # Per run and tag, natively: a column "<tag>:<stat>" per tag (sorted) and statistic.
        table = pa.table(self._logged(self._native.summary_table([(s, summary_column("", s)[1:]) for s in chosen])))
        cols: dict[str, Any] = {
            "run": info.column("run").to_pandas(),
            "max_step": info.column("max_step").to_pandas(),
            "last_wall_time": info.column("last_wall_time").to_pandas(),
        }
        children: dict[str, str] = {}
        if hparams:
            hp_all = self._hparams_frame()
            children = self._hparams_children([str(r) for r in hp_all["run"]]) if len(hp_all) else {}
            if len(hp_all):
                hp = run_hparams(info.column("run"), hp_all, children)
                for c in hp.columns:
                    if c.startswith("hparam:"):
                        cols[c] = hp[c].to_numpy()
            else:
                # No run has hparams: their columns (if any) are empty.
                for c in hp_all.columns:
                    if c.startswith("hparam:"):
                        cols[c] = hp_all[c].iloc[:0].reindex(range(info.num_rows)).to_numpy()
        for i, name in enumerate(table.column_names):
            col = table.column(i).combine_chunks()
            if chosen[i % len(chosen)] in ("argmin", "argmax"):
                # Steps are int64; nullable Int64 keeps them exact where a run has no point.
                missing = col.is_null().to_numpy(zero_copy_only=False)
                cols[name] = pd.arrays.IntegerArray(col.fill_null(0).to_numpy(), missing)
            else:
                cols[name] = col.to_numpy()
        if children:
            cols = join_children(cols, children, self._logged_scalars)
        return cols

    def _logged_scalars(self) -> set[tuple[str, str]]:
        """The (run, tag) pairs of this scan's scalar series."""
        series = self.series().to_arrow().to_pandas()
        scalars = series[series["kind"] == "scalars"]
        return set(zip(scalars["run"].astype(str), scalars["tag"].astype(str)))

    def _hparams_children(self, hparams_runs: list[str]) -> dict[str, str]:
        """``{child: parent}``: the hparams child runs of this logdir (:mod:`tbscope._experiments`),
        decided on the whole logdir whatever this scan's filters. ``hparams_runs``: the runs with
        hparams records."""
        with_hp = set(hparams_runs)
        candidates = sorted(r for r in with_hp if "/" in r and r.rsplit("/", 1)[0] not in with_hp)
        if not candidates:
            return {}
        a = self._args
        if a.runs is None and a.tags is None and a.kinds is None and a.step_lo is None and a.step_hi is None:
            whole = self
        else:
            exact = [re.compile("^" + re.escape(r) + "$") for r in candidates]
            # The names of every run (discovery lists runs whatever the kinds), and the series
            # of the candidates only.
            names = self._rescan(kinds=["hparams"]).runs
            whole = self._rescan(runs=exact)
        if whole is self:
            names = self.runs
        series = whole.series().to_arrow()
        contents: dict[str, list[tuple[str, int]]] = {}
        for run, kind, points in zip(
            series.column("run").to_pylist(), series.column("kind").to_pylist(), series.column("points").to_pylist()
        ):
            if run in with_hp:
                contents.setdefault(run, []).append((kind, points))
        return hparams_children(names, with_hp, contents)

    def _rescan(self, runs: Filter = None, kinds: list[str] | None = None) -> Logdir:
        """The same logdir with this scan's reading options (verification, threads, record size
        limit, cache) but other filters: for the whole-logdir facts that its filters may hide."""
        a = self._args
        return scan(
            self.path,
            runs=runs,
            kinds=kinds,
            verify=a.verify,
            threads=a.threads or None,
            max_record_bytes=a.max_record_bytes,
            cache=a.cache_dir,
        )

    def _hparams_frame(self) -> pd.DataFrame:
        """``hparams()`` of the whole logdir (whatever this scan's tag, step and run filters)."""
        a = self._args
        reusable = (
            a.runs is None
            and a.tags is None
            and a.step_lo is None
            and a.step_hi is None
            and (a.kinds is None or "hparams" in a.kinds)
        )
        if reusable:
            hp = Frame(self._logged(self._native.hparams()), "hparams").to_pandas()
        else:
            # hparams records are run-level facts: tag and step filters (and a runs filter that
            # leaves out the enclosing session run) must not hide them.
            hp_scan = self._rescan(kinds=["hparams"])
            hp_scan._ensure()
            hp = Frame(hp_scan._logged(hp_scan._native.hparams()), "hparams").to_pandas()
        return hp

    def aggregate(
        self,
        by: str | re.Pattern[str],
        *,
        stats: Iterable[str] = ("mean", "std", "min", "max", "count"),
        tags: Filter = None,
    ) -> pd.DataFrame:
        """Statistics across runs that differ only by seed: one row per (group, tag, step).

        ``by`` says which runs form a group:

        - a regex on run names (``str`` or compiled), searched in each name: the group is named by
          its capture groups joined together (``r"(.*)_seed\\d+"`` puts ``lr=0.1_seed1`` and
          ``lr=0.1_seed2`` in group ``lr=0.1``; ``r"(.*)_seed\\d+(.*)"`` also keeps a ``/train``
          suffix apart), or by the whole match when it has none. Runs it does not match are left out.
        - ``"hparam:<name>"``: runs whose hparams are equal except ``<name>`` (the seed) form a
          group named ``a=1, b=x`` (the other hparams, sorted by name). A sub-run that takes its
          hparams from an enclosing run (``trial/train``) gets that suffix (``a=1, b=x/train``).
          Runs without hparams are left out.

        Each run contributes one value per (tag, step): the last one written at that step.
        ``stats`` from ``mean``, ``std`` (sample, ddof=1: NaN for a single run), ``min``, ``max``,
        ``count`` (runs with a non-NaN value), ``median``, ``var``, ``sem``; all skip NaN, like
        pandas. Steps that only some runs have are kept, with their count. Nothing is sampled.
        ``tags`` filters scalar tags like :func:`scan`'s ``tags=``.
        """
        from tbscope._stats import AGGREGATE_STATS, aggregate_scalars, check_stats, group_runs

        chosen = check_stats(stats, AGGREGATE_STATS, "aggregate")
        self._ensure()
        runs = self.runs
        children: dict[str, str] = {}
        if isinstance(by, str) and by.startswith("hparam:"):
            hp_all = self._hparams_frame()
            children = self._hparams_children([str(r) for r in hp_all["run"]]) if len(hp_all) else {}
            # An hparams child is part of its parent's experiment: its metrics join that group.
            mine = [r for r in runs if r not in children]
            groups = group_runs(by, mine, run_hparams(mine, hp_all, children))
            groups.update({c: groups[p] for c, p in children.items() if p in groups and c in runs})
        else:
            groups = group_runs(by, runs, None)
        sc = self.scalars().to_arrow().select(["run", "tag", "step", "value"]).to_pandas()
        return aggregate_scalars(sc, groups, children, chosen, tags)

    def sql(
        self,
        query: str,
        params: Any = None,
        *,
        max_rows: int | None = None,
        timeout: float | None = None,
        external_access: bool = False,
    ) -> Result:
        """Run a SQL query over this scan's tables: see :func:`tbscope.sql`. Returns a
        :class:`tbscope.Result` (``to_pandas()``, ``to_arrow()``, ``to_polars()``)."""
        from tbscope import _query

        checked = _query.limits(query, max_rows, timeout, external_access, time.monotonic())
        return _query.execute(self, query, params, checked)

    def _with_args(self, args: ScanArgs) -> Logdir:
        """This logdir, unread, scanned with other arguments (SQL's narrowed scans; a remote
        logdir's mirror is already fetched)."""
        return Logdir(self.path, args, self._strict)

    def _sql_table(self, name: str) -> pa.Table:
        """The SQL table ``name`` (``tbscope._query.TABLES``), read."""
        import pyarrow as pa

        if name == "summary":
            return pa.Table.from_pandas(self.summary(), preserve_index=False)
        tables: dict[str, Callable[[], Frame]] = {
            "runs": self.run_info,
            "series": self.series,
            "hparams": self.hparams,
            "meshes": self.meshes,
            "logs": self.logs,
            "profiles": self.profiles,
            "embeddings": self.embeddings,
        }
        frame = tables.get(name)
        return (frame() if frame is not None else self._frame(name)).to_arrow()

    def profiles(self) -> Frame:
        """Profile files under the logdir, one row each: run, session, host, time (UTC),
        size (bytes), format (``chrome_trace``, ``xplane``, ...), source (``torch`` or
        ``profile_plugin``) and path (relative to the logdir). See :mod:`tbscope._profiles`."""
        from tbscope._profiles import profiles_table

        return Frame(profiles_table(self.path), "profiles")

    def profile(self, which: str | int) -> Profile:
        """Opens one Chrome trace of :meth:`profiles` (its ``path``, or its row number): the
        events as a frame and :meth:`~tbscope._profiles.Profile.top_operations`."""
        from tbscope._profiles import open_profile

        return open_profile(self.path, which)

    def logs(self) -> Frame:
        """TF1's session logs and log messages, one row per event: run, step, wall_time,
        timestamp, ``source`` (``session_log`` or ``log_message``), ``status`` (START, STOP,
        CHECKPOINT; session logs), ``level`` (DEBUGGING, INFO, WARN, ERROR, FATAL; log
        messages), ``message`` and ``checkpoint_path`` (session logs)."""
        self._ensure()
        return Frame(self._logged(self._native.logs()), "logs")

    def series(self) -> Frame:
        """One row per (run, tag): kind, plugin, plugin content, display name, description, points."""
        self._ensure()
        return Frame(self._logged(self._native.series()), "series")

    def run_info(self) -> Frame:
        """One row per run: files, bytes, wall time range, max step, points per kind, data loss."""
        self._ensure()
        return Frame(self._logged(self._native.runs_table()), "runs")

    def _run_facts(self) -> pa.Table:
        """``run_info()``'s columns and, per run, ``last_modified`` (the newest mtime of its event
        files, as stat'ed by the last read), ``series`` (its rows in ``series()``) and
        ``first_step``/``last_step`` (their step range): what ``tbscope ls`` shows, computed
        natively (and, on a warm cache that found nothing changed, read from the cache)."""
        import pyarrow as pa

        self._ensure()
        return pa.table(self._logged(self._native.run_facts()))


def _raise_strict(problems: Iterable[Problem]) -> None:
    """``strict=True``: anything but a truncated tail or an info note is an error."""
    bad = [p for p in problems if p.severity not in ("truncated", "info")]
    if bad:
        raise CorruptRecordError(str(bad[0]) + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))


def scan(
    path: str | os.PathLike[str],
    *,
    runs: Filter = None,
    tags: Filter = None,
    kinds: str | Iterable[str] | None = None,
    steps: tuple[int | None, int | None] | range | None = None,
    restarts: Restarts = "all",
    strict: bool = False,
    verify: bool = True,
    provenance: bool = False,
    threads: int | None = None,
    max_record_bytes: int = 256 << 20,
    cache: Cache = None,
    tail_timeout: float = 600.0,
    storage_options: Mapping[str, Any] | None = None,
) -> Logdir:
    """Open a logdir, an event file or a directory tree of runs, lazily.

    Parameters
    ----------
    path: a logdir or a single event file.
    runs, tags: a glob (``"train/*"``; ``*`` crosses ``/``), a compiled ``re.Pattern``
        (matched anywhere, like ``re.search``), or a list of them.
    kinds: which kinds to read (``"scalars"``, ``"histograms"``, ...); default all.
    steps: ``(start, stop)``, half-open; either may be None.
    restarts: ``"all"`` keeps every record; ``"preempt"`` applies TensorBoard's rule (a record
        at step s drops earlier records of its series with step >= s).
    strict: raise :class:`CorruptRecordError` instead of skipping and reporting bad data. Every
        file is then read as finished (as with ``tail_timeout=0``), so a record cut short at
        the end of a file is a stopped tail, which raises too.
    verify: check data CRCs (length CRCs are always checked).
    provenance: add ``file`` and ``offset`` columns to every table.
    threads: worker threads; default ``TBSCOPE_NUM_THREADS`` or the number of CPUs.
    cache: ``True`` keeps the read in a cache directory outside the logdir
        (``$TBSCOPE_CACHE_DIR``, else ``~/.cache/tbscope``, one subdirectory per logdir), so that
        scanning it again reads only what was written since; a path puts the cache there. The
        cache holds the whole logdir: any filters are answered from it. See ``docs/cache.md``.
    tail_timeout: seconds after its last change during which the newest event file of a run may
        still be written. A record running past the end of such a file is a pending tail: no
        rows, read again on reload. Afterwards (or once a newer file appears in the run) it is
        a torn record: corruption when whole records follow it, which are then read, or a
        stopped tail. ``0`` reads every file as finished. See ``docs/robustness.md``.
    storage_options: for a URL path (``s3://``, ``gs://``, ``az://``, ``memory://``, any fsspec
        protocol), the filesystem's options as pandas and polars take them (``key``,
        ``secret``, ``endpoint_url``, ``anon``...); by default each store's own credential
        chain and environment variables (``AWS_ENDPOINT_URL``...). The event files are copied
        into a local mirror with concurrent ranged reads (only new bytes on a reload; fetch
        failures go to the report), which is what is read. See ``docs/scale.md``.

    >>> import tbscope
    >>> logdir = tbscope.scan("runs/", tags="loss*")  # doctest: +SKIP
    >>> logdir.scalars().to_pandas()                 # doctest: +SKIP
    """
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError("threads= takes a positive int (or None for all CPUs)")
    if isinstance(tail_timeout, bool) or not isinstance(tail_timeout, (int, float)) or not tail_timeout >= 0:
        raise ValueError(
            f"tail_timeout= takes a number of seconds >= 0 (0: every file is finished), not {tail_timeout!r}"
        )
    kl = kinds_list(kinds)
    if kl is not None:
        bad = [k for k in kl if k not in KINDS]
        if bad:
            raise ValueError(f"unknown kind(s) {bad}; choose from {', '.join(KINDS)}")
    lo, hi = parse_steps(steps)
    remote = None
    if _mirror.is_url(path):
        url, is_remote = _mirror.split_url(path)  # type: ignore[arg-type]
        if is_remote:
            # Listed and fetched now, so that a bad URL or credentials fail where they are given.
            # Without a cache, files are fetched in the background and the first read parses
            # each one as soon as it is whole (a cache is written from the whole mirror).
            remote = _mirror.open_mirror(url, storage_options, background=cache in (None, False))
            path = remote._path_now
        else:
            path = url
    elif storage_options:
        raise ValueError(f"storage_options= is for URLs (s3://..., gs://...); {os.fspath(path)!r} is a local path")
    from tbscope._cache import resolve

    cache_dir = resolve(path, cache)
    args = ScanArgs(
        runs=compile_filter(runs, "runs"),
        tags=compile_filter(tags, "tags"),
        kinds=None if kl is None else tuple(kl),
        step_lo=lo,
        step_hi=hi,
        restarts=restarts,
        verify=verify,
        max_record_bytes=max_record_bytes,
        provenance=provenance,
        threads=threads or 0,
        # strict=True asks for the final answer about every torn record.
        tail_timeout=0.0 if strict else float(tail_timeout),
        cache_dir=cache_dir,
    )
    return Logdir(path, args, strict, remote)


def _read(kind: str, path: str | os.PathLike[str], **filters: object) -> Frame:
    filters.setdefault("kinds", [kind])
    return scan(path, **filters)._frame(kind)  # type: ignore[arg-type]


def read_scalars(path: str | os.PathLike[str], **filters: object) -> pd.DataFrame:
    """All scalars under ``path`` as a pandas DataFrame; filters as in :func:`scan`."""
    return _read("scalars", path, **filters).to_pandas()


def read_tensors(path: str | os.PathLike[str], **filters: object) -> pd.DataFrame:
    return _read("tensors", path, **filters).to_pandas()


def read_histograms(path: str | os.PathLike[str], **filters: object) -> pd.DataFrame:
    return _read("histograms", path, **filters).to_pandas()


def read_images(path: str | os.PathLike[str], *, blobs: bool = True, **filters: object) -> pd.DataFrame:
    """Images with their encoded bytes in ``data`` (``blobs=False`` leaves them on disk)."""
    return _read("images", path, **filters).to_pandas(blobs=blobs)  # type: ignore[call-arg]


def read_audio(path: str | os.PathLike[str], *, blobs: bool = True, **filters: object) -> pd.DataFrame:
    return _read("audio", path, **filters).to_pandas(blobs=blobs)  # type: ignore[call-arg]


def read_text(path: str | os.PathLike[str], **filters: object) -> pd.DataFrame:
    return _read("text", path, **filters).to_pandas()


def read_logs(path: str | os.PathLike[str], **filters: object) -> pd.DataFrame:
    """TF1's session logs (start, stop, checkpoint) and log messages: see :meth:`Logdir.logs`."""
    filters.setdefault("kinds", ["hparams"])  # no rows of any kind are needed
    return scan(path, **filters).logs().to_pandas()  # type: ignore[arg-type]
