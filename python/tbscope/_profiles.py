"""Profiles in a logdir: torch.profiler's Chrome traces and TensorBoard's profile plugin files.

Two layouts are found:

- **torch.profiler** (``torch.profiler.tensorboard_trace_handler``): ``<run>/<worker>.<time>
  .pt.trace.json`` (``.gz`` with ``use_gzip=True``), where ``<worker>`` is the host name and
  process id unless the caller named it, and ``<time>`` the moment it was written (nanoseconds
  since the epoch in recent torch, milliseconds in older ones).
- **TensorBoard's profile plugin** (TensorFlow's profiler, ``tf.profiler.experimental``,
  Keras' ``profile_batch``, JAX): ``<run>/plugins/profile/<session>/<host>.<tool file>``, where
  ``<session>`` is the capture's time (``2024_01_31_12_00_00``) and the tool files are
  ``trace.json.gz`` (a Chrome trace), ``xplane.pb`` (the raw XSpace protobuf the plugin converts
  on the fly), ``overview_page.pb``, ``input_pipeline.pb``, ``tensorflow_stats.pb``,
  ``kernel_stats.pb`` and ``memory_profile.json.gz``.

:meth:`tbscope.Logdir.profiles` lists them; :meth:`tbscope.Logdir.profile` opens a Chrome trace
(the Rust core parses it) as a :class:`Profile`: its events as a frame and a summary of the
operations that took the most time. The other tool files are listed, not decoded.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tbscope import _core
from tbscope._frames import Frame

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["PLUGIN_FILES", "Profile", "find_profiles", "open_profile", "top_operations"]

#: The profile plugin's files: suffix after ``<host>.`` → format.
PLUGIN_FILES = {
    "trace.json.gz": "chrome_trace",
    "trace.json": "chrome_trace",
    "xplane.pb": "xplane",
    "overview_page.pb": "overview_page",
    "input_pipeline.pb": "input_pipeline",
    "tensorflow_stats.pb": "tensorflow_stats",
    "kernel_stats.pb": "kernel_stats",
    "memory_profile.json.gz": "memory_profile",
    "pod_viewer.json": "pod_viewer",
    "op_profile.json": "op_profile",
}
_TORCH = re.compile(r"^(?P<worker>.+?)(?:\.(?P<time>\d{9,}))?\.pt\.trace\.json(?:\.gz)?$")
_SESSION = re.compile(r"^(\d{4})_(\d{2})_(\d{2})_(\d{2})_(\d{2})_(\d{2})$")
#: The listing's columns, in order.
COLUMNS = ("run", "session", "host", "time", "size", "format", "source", "path")


def _epoch_seconds(digits: str) -> float:
    """A file name's time stamp in seconds, whatever its unit (s, ms, us or ns)."""
    n = int(digits)
    for scale in (1e18, 1e15, 1e12):
        if n >= scale:
            return n / (scale / 1e9)
    return float(n)


def _session_time(name: str) -> float | None:
    import calendar

    m = _SESSION.match(name)
    if m is None:
        return None
    try:
        year, month, day, hour, minute, second = (int(g) for g in m.groups())
        return float(calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)))
    except (OverflowError, ValueError):
        return None


def find_profiles(logdir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every profile file under ``logdir``, one dict per file with the keys of ``COLUMNS``
    (``time`` in seconds since the epoch: from the file name when it carries one, else the
    file's modification time), sorted by run, time and path."""
    root = Path(logdir)
    if not root.is_dir():
        return []
    found: list[dict[str, Any]] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=None, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        rel_dir = here.relative_to(root)
        parts = rel_dir.parts
        in_plugin = len(parts) >= 3 and parts[-3:-1] == ("plugins", "profile")
        for name in sorted(filenames):
            entry: dict[str, Any] | None = None
            m = _TORCH.match(name)
            if m is not None:
                entry = {
                    "run": _core.run_name(rel_dir),
                    "session": "",
                    "host": m.group("worker"),
                    "time": _epoch_seconds(m.group("time")) if m.group("time") else None,
                    "format": "chrome_trace",
                    "source": "torch",
                }
            elif in_plugin:
                for suffix, fmt in PLUGIN_FILES.items():
                    if name.endswith("." + suffix) and len(name) > len(suffix) + 1:
                        entry = {
                            "run": _core.run_name(Path(*parts[:-3])),
                            "session": parts[-1],
                            "host": name[: -len(suffix) - 1],
                            "time": _session_time(parts[-1]),
                            "format": fmt,
                            "source": "profile_plugin",
                        }
                        break
            if entry is None:
                continue
            path = here / name
            try:
                st = path.stat()
            except OSError:
                continue  # removed while listing
            if entry["time"] is None:
                entry["time"] = st.st_mtime
            entry["size"] = st.st_size
            # Named by the reader's rule (as the `file` columns are); the file itself is kept
            # apart, for a name that is not UTF-8 is not its path.
            entry["path"] = _core.run_name(rel_dir / name)
            entry["_file"] = path
            found.append(entry)
    found.sort(key=lambda e: (e["run"], e["time"], e["path"]))
    return found


def profiles_table(logdir: str | os.PathLike[str]) -> pa.Table:
    """:func:`find_profiles` as an Arrow table (``time`` as a UTC timestamp)."""
    import pyarrow as pa

    rows = find_profiles(logdir)
    return pa.table(
        {
            "run": pa.array([r["run"] for r in rows], pa.string()),
            "session": pa.array([r["session"] for r in rows], pa.string()),
            "host": pa.array([r["host"] for r in rows], pa.string()),
            "time": pa.array([int(round(r["time"] * 1e9)) for r in rows], pa.timestamp("ns", tz="UTC")),
            "size": pa.array([r["size"] for r in rows], pa.int64()),
            "format": pa.array([r["format"] for r in rows], pa.string()),
            "source": pa.array([r["source"] for r in rows], pa.string()),
            "path": pa.array([r["path"] for r in rows], pa.string()),
        }
    )


def top_operations(events: pa.Table, n: int | None = 20) -> pd.DataFrame:
    """The operations that took the most time: one row per (name, category) of the events with
    a duration, with ``calls``, ``self_total`` (time in the operation itself, its children on
    the same thread excluded), ``total``, ``mean`` and ``max`` (microseconds) and
    ``self_share`` (of all self time), sorted by self time; the first ``n`` (all: ``None``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    timed = events.filter(pc.is_valid(events.column("duration"))) if events.num_rows else events
    names = timed.column("name").cast(pa.string())
    cats = timed.column("category").cast(pa.string())
    grouped = (
        pa.table(
            {
                "name": names,
                "category": cats,
                "duration": timed.column("duration"),
                "self": timed.column("self_duration"),
            }
        )
        .group_by(["name", "category"])
        .aggregate(
            [("duration", "count"), ("self", "sum"), ("duration", "sum"), ("duration", "mean"), ("duration", "max")]
        )
    )
    df = grouped.to_pandas().rename(
        columns={
            "duration_count": "calls",
            "self_sum": "self_total",
            "duration_sum": "total",
            "duration_mean": "mean",
            "duration_max": "max",
        }
    )
    whole = float(df["self_total"].sum()) if len(df) else 0.0
    df["self_share"] = df["self_total"] / whole if whole > 0 else 0.0
    df = df.sort_values(["self_total", "total", "name"], ascending=[False, False, True], kind="stable").reset_index(
        drop=True
    )
    df = df[["name", "category", "calls", "self_total", "total", "mean", "max", "self_share"]]
    return df if n is None else df.head(n)


@dataclass
class Profile:
    """One opened Chrome trace: ``events`` (a frame: name, category, phase, start, duration,
    self_duration, process, thread, pid, tid, args; times in microseconds as in the trace) and
    what the listing says about the file (``info``)."""

    events: Frame
    info: dict[str, Any]

    def top_operations(self, n: int | None = 20) -> pd.DataFrame:
        """See :func:`top_operations`."""
        return top_operations(self.events.to_arrow(), n)

    def __repr__(self) -> str:
        return f"<tbscope.Profile {self.info.get('path')!r}: {self.events.num_rows} events>"


def open_profile(logdir: str | os.PathLike[str], which: str | int) -> Profile:
    """The Chrome trace ``which`` (a ``path`` of the listing, relative to the logdir, or a row
    number of it) of ``logdir``. Only files the listing has can be opened."""
    listing = find_profiles(logdir)
    if isinstance(which, bool):
        raise TypeError("profile() takes a path of Logdir.profiles() or a row number, not a bool")
    if isinstance(which, int):
        if not -len(listing) <= which < len(listing):
            raise IndexError(
                f"profile {which} does not exist: this logdir has {len(listing)} profile files (see Logdir.profiles())"
            )
        info = listing[which]
    else:
        want_path = Path(os.fspath(which))
        root = Path(logdir).resolve()
        if want_path.is_absolute():
            try:
                want_path = want_path.resolve().relative_to(root)
            except ValueError:
                raise ValueError(f"{which} is not inside the logdir {os.fspath(logdir)}") from None
        want = _core.run_name(want_path)
        matches = [e for e in listing if e["path"] == want]
        if not matches:
            raise FileNotFoundError(f"no profile file {want!r} in {os.fspath(logdir)}; Logdir.profiles() lists them")
        info = matches[0]
    if info["format"] != "chrome_trace":
        raise ValueError(
            f"{info['path']} is a {info['format']} file of the profile plugin; tbscope opens Chrome traces "
            "(*.trace.json.gz, *.pt.trace.json): open the one of the same session"
        )
    table = _core.read_trace(info["_file"])
    return Profile(Frame(table, "profile"), {k: info[k] for k in COLUMNS})
