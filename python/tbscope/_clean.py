"""Retention for ``tbscope clean``: pick runs by age or content, then delete or archive them.

What counts as a run is what a scan finds: a directory holding event files (names containing
``tfevents``). Removing a run removes **its event files only**; its directory goes too when
that leaves it empty (and so do parents left empty, up to but never including the logdir).
Checkpoints, configs and nested runs next to the event files are never touched.

Safety rules, checked for every run before anything happens and again for every file just
before it is removed:

* every path is resolved (symlinks followed) and must lie inside the resolved logdir; a run
  reached through a symlink that points outside is left alone, and so is its target;
* an event file that is itself a symlink is left alone (deleting the link frees nothing, and
  following it could delete data that belongs elsewhere);
* a file that is not a regular file is left alone;
* archiving never overwrites: a run whose destination already holds a file of the same name
  is not moved at all.

A run's age counts from its **last activity**: the newest of its last event's wall time and its
event files' modification times. Taking the newer of the two means neither a copied file
(fresh mtime, old events) nor a bogus wall time makes a run look older than it is.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# Event file names as the scan recognises them (TensorBoard's rule).
EVENT_INFIX = "tfevents"
KIND_COLUMNS = ("scalars", "histograms", "images", "audio", "text", "hparams", "blobs", "tensors")

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_AGE_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_age(text: str) -> float:
    """``"30d"``, ``"12h"``, ``"90m"`` (minutes), ``"45s"``, ``"2w"`` or a sum such as
    ``"1d12h"``, in seconds. There is no month unit: "m" is minutes, so write ``30d``."""
    s = text.strip().lower().replace(" ", "")
    total, pos = 0.0, 0
    for m in _AGE_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(
            f"age {text!r} not understood; write a number and a unit (s, m, h, d, w), e.g. 30d, 12h, 90m or 1d12h"
        )
    return total


def parse_date(text: str) -> float:
    """An ISO 8601 date or date-time as epoch seconds. Without a UTC offset it is local time,
    as in ``find -newermt``: ``2026-01-01`` is local midnight."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"date {text!r} not understood; use ISO 8601, e.g. 2026-01-01 or 2026-01-01T12:00+00:00"
        ) from None
    return when.timestamp()


@dataclass(frozen=True)
class RunFacts:
    """What retention rules look at for one run."""

    run: str
    path: str  # the run directory, resolved
    files: tuple[str, ...]  # its event files, resolved (empty when refused)
    bytes: int  # sizes of those files
    last_wall_time: float | None  # newest event wall time
    last_mtime: float | None  # newest event file modification time
    points: int  # rows of every kind
    empty: bool  # nothing but zero-byte files and file headers
    refused: str | None  # why the run must be left alone, or None

    @property
    def last_activity(self) -> float | None:
        """The newer of the last event wall time and the newest file mtime."""
        known = [t for t in (self.last_wall_time, self.last_mtime) if t is not None]
        return max(known) if known else None


@dataclass(frozen=True)
class Rules:
    """Which runs go. Every rule given must hold (they combine with AND), so
    ``Rules(empty=True, older_than=7 * 86400)`` spares a run that started a minute ago."""

    older_than: float | None = None  # seconds
    before: float | None = None  # epoch seconds
    empty: bool = False
    no_data: bool = False

    def __post_init__(self) -> None:
        if self.older_than is None and self.before is None and not self.empty and not self.no_data:
            raise ValueError("say which runs go: give at least one of --older-than, --before, --empty, --no-data")
        if self.older_than is not None and self.older_than < 0:
            raise ValueError("--older-than takes a positive age, e.g. 30d")

    def reasons(self, facts: RunFacts, now: float) -> list[str] | None:
        """Why the run matches (one phrase per rule), or None when a rule does not hold."""
        out = []
        last = facts.last_activity
        if self.older_than is not None:
            if last is None or now - last < self.older_than:
                return None
            out.append(f"idle {_span(now - last)}")
        if self.before is not None:
            if last is None or last >= self.before:
                return None
            out.append("last active before " + datetime.fromtimestamp(self.before).isoformat(" ", "minutes"))
        if self.empty:
            if not facts.empty:
                return None
            out.append("empty")
        if self.no_data:
            if facts.points:
                return None
            out.append("no data")
        return out


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def inside(path: str, root: str) -> bool:
    """True when the resolved ``path`` is ``root`` or below it (both already resolved)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def run_dir(root: str, run: str) -> str:
    """The directory of a run as the scan names it (``.`` is the logdir itself)."""
    return root if run == "." else os.path.join(root, *run.split("/"))


def event_files(directory: str) -> list[os.DirEntry[str]]:
    """Entries of ``directory`` (not below it) named like event files, in name order;
    directories are skipped (a scan treats them as nested runs)."""
    with os.scandir(directory) as it:
        found = [e for e in it if EVENT_INFIX in e.name and not e.is_dir(follow_symlinks=False)]
    return sorted(found, key=lambda e: e.name)


def _finite(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) or math.isinf(f) else f


def survey(
    logdir: str | os.PathLike[str], info: pd.DataFrame, unreadable: Mapping[str, str] | None = None
) -> list[RunFacts]:
    """The facts of every run of ``info`` (a ``Logdir.run_info()`` of an unfiltered-kinds scan
    of ``logdir``, as pandas), with the safety checks applied. ``unreadable`` maps runs the scan
    could not read whole to why: they are refused (an unreadable file may hold the data that
    would make the run worth keeping)."""
    root = os.fspath(logdir)
    if not os.path.isdir(root):
        if os.path.exists(root):
            raise ValueError(f"{root} is a file; clean works on a logdir (a directory of runs)")
        raise FileNotFoundError(f"{root}: no such directory")
    root_real = os.path.realpath(root)
    out = []
    for row in info.to_dict("records"):
        run = str(row["run"])
        where = run_dir(root, run)
        real = os.path.realpath(where)
        points = sum(int(row.get(k) or 0) for k in KIND_COLUMNS)
        refused: str | None = None
        files: list[str] = []
        size = 0
        mtime: float | None = None
        if not inside(real, root_real):
            refused = f"resolves to {real}, outside the logdir (a symlink); left alone"
        elif unreadable and run in unreadable:
            refused = f"could not be read whole ({unreadable[run]}); left alone"
        else:
            try:
                entries = event_files(where)
            except OSError as e:
                entries, refused = [], f"cannot list: {e.strerror or e}"
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    refused = f"event file {entry.name} is a symlink; left alone"
                elif not stat.S_ISREG(st.st_mode):
                    refused = f"{entry.name} is not a regular file; left alone"
                else:
                    files.append(os.path.join(real, entry.name))
                    size += st.st_size
                    mtime = st.st_mtime if mtime is None else max(mtime, st.st_mtime)
        records = int(row.get("records") or 0)
        # A writer's first record is a file_version header with no step; a file holding that
        # alone (or nothing) has no data. Damaged or truncated bytes might be data, so they
        # make a run non-empty.
        empty = (
            points == 0
            and _finite(row.get("max_step")) is None
            and records <= int(row.get("files") or 0)
            and not int(row.get("corrupt_records") or 0)
            and not int(row.get("truncated_bytes") or 0)
        )
        out.append(
            RunFacts(
                run=run,
                path=real,
                files=tuple(files) if refused is None else (),
                bytes=size if refused is None else 0,
                last_wall_time=_finite(row.get("last_wall_time")),
                last_mtime=mtime,
                points=points,
                empty=empty,
                refused=refused,
            )
        )
    return out


def select(facts: Iterable[RunFacts], rules: Rules, now: float) -> list[tuple[RunFacts, list[str]]]:
    """The runs the rules pick, each with the reasons; refused runs are included (the caller
    reports them) but :func:`remove` will not touch them."""
    out = []
    for f in facts:
        why = rules.reasons(f, now)
        if why is not None:
            out.append((f, why))
    return out


def check_archive(archive: str | os.PathLike[str], logdir: str | os.PathLike[str]) -> str:
    """The resolved archive directory; it must not be inside the logdir, where archived runs
    would be found again as runs."""
    real = os.path.realpath(archive)
    root_real = os.path.realpath(logdir)
    if inside(real, root_real):
        raise ValueError(
            f"--archive {os.fspath(archive)} is inside the logdir; archived runs would still be read as runs there. Choose a directory outside it"
        )
    if os.path.exists(real) and not os.path.isdir(real):
        raise ValueError(f"--archive {os.fspath(archive)} is a file; give a directory (it is created if missing)")
    return real


def remove(facts: RunFacts, logdir: str | os.PathLike[str], archive: str | None = None) -> None:
    """Delete the run's event files, or move them to ``archive/<run>/``, then remove the
    directories that leaves empty. Raises (and changes nothing) if a safety check fails."""
    root_real = os.path.realpath(logdir)
    if facts.refused:
        raise PermissionError(f"{facts.run}: {facts.refused}")
    # Re-check just before acting: a file may have been swapped for a link since the survey.
    for f in facts.files:
        st = os.lstat(f)
        if not stat.S_ISREG(st.st_mode) or not inside(os.path.realpath(f), root_real) or not inside(f, root_real):
            raise PermissionError(
                f"{f} changed since it was surveyed (no longer a regular file inside the logdir); left alone"
            )
    if archive is not None:
        dest = run_dir(archive, facts.run)
        clash = [
            os.path.join(dest, os.path.basename(f))
            for f in facts.files
            if os.path.lexists(os.path.join(dest, os.path.basename(f)))
        ]
        if clash:
            raise FileExistsError(f"{clash[0]} already exists; archive into another directory or move it away first")
        os.makedirs(dest, exist_ok=True)
        for f in facts.files:
            shutil.move(f, os.path.join(dest, os.path.basename(f)))
    else:
        for f in facts.files:
            os.unlink(f)
    _prune(facts.path, root_real)


def _prune(directory: str, root_real: str) -> None:
    """Remove ``directory`` and its parents while they are empty, stopping at the logdir."""
    d = directory
    while d != root_real and inside(d, root_real):
        try:
            os.rmdir(d)  # fails on a non-empty directory, which is the stop signal
        except OSError:
            return
        d = os.path.dirname(d)
