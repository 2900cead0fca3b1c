"""What a read could not read cleanly (:class:`Report` of :class:`Problem` entries) and what it
read (:class:`LoadStats`): shared by the reader, SQL, export and rewrite, and below all of them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One entry of the health report."""

    run: str
    file: str
    severity: str  # "corrupt" | "error" | "warning" | "truncated" | "info"
    # A pending tail is "truncated"; a stopped tail is a "warning" whose reason starts with
    # "stopped tail" (see docs/robustness.md).
    offset: int
    length: int
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}@{self.offset}" if self.file else self.run
        span = f" ({self.length} bytes)" if self.length else ""
        return f"{self.severity}: {where}{span}: {self.reason}"


@dataclass(frozen=True)
class Report:
    """What could not be read cleanly.

    Severities: ``corrupt`` (bytes or values skipped: data lost), ``error`` (a file or directory
    could not be read), ``warning`` (data kept but suspect, e.g. a NaN wall time, or a stopped
    tail: a file no longer written ends inside a record, one record lost), ``truncated`` (a
    pending tail: a file that may still be written ends inside a record, read again on reload)
    and ``info``.
    """

    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """True when nothing was lost or unreadable: no "corrupt" or "error" entries. Warnings
        (points kept with a null wall time, empty files) and truncated tails do not count."""
        return not any(p.severity in ("corrupt", "error") for p in self.problems)

    def by_severity(self, severity: str) -> list[Problem]:
        return [p for p in self.problems if p.severity == severity]

    def __len__(self) -> int:
        return len(self.problems)

    def __str__(self) -> str:
        if not self.problems:
            return "no problems"
        return "\n".join(str(p) for p in self.problems)


@dataclass(frozen=True)
class LoadStats:
    files_read: int
    bytes_read: int
    records: int
    rows: int
    #: Directories of the logdir this read listed (read): every one on a first read, on a
    #: reload only those whose entries changed (docs/scale.md, "Reloading many runs"); a
    #: cached read counts as ``CacheInfo.dirs_listed`` does.
    dirs_listed: int = 0
