"""Turning user filters (globs, compiled regexes, lists of both) into one native pattern.

The pattern runs inside the Rust scan, so records of unwanted runs and tags are skipped before
their values are decoded. Globs match the whole name and their ``*`` crosses ``/`` (tags such as
``train/loss`` are one name, not a path); a compiled ``re.Pattern`` matches anywhere in the name,
like ``re.search``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union

from tbscope import _core

Pattern = Union[str, "re.Pattern[str]"]
Filter = Union[Pattern, Iterable[Pattern], None]

# Characters the Rust regex syntax treats as special; everything else in a glob is literal.
_META = set("\\.+*?()|[]{}^$#&-~")


def _escape(text: str) -> str:
    return "".join("\\" + c if c in _META else c for c in text)


def glob_to_regex(glob: str) -> str:
    """Translate a glob to an anchored regex: ``*`` any run of characters, ``?`` one, ``[..]`` a set.

    Sets follow ``fnmatch``: ``[!..]`` negates, a ``]`` first in the set is a member (``[]x]``),
    any other character in it stands for itself (``[[]`` is a literal ``[``, the usual escape),
    ``a-z`` is a range (a reversed one is a ValueError), and a ``[`` without its ``]`` is a
    literal ``[``.
    """
    out = []
    i = 0
    n = len(glob)
    while i < n:
        c = glob[i]
        i += 1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i
            if j < n and glob[j] in "!^":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            end = glob.find("]", j)
            if end == -1:
                out.append(_escape(c))
            else:
                out.append(_char_set(glob[i:end]))
                i = end + 1
        else:
            out.append(_escape(c))
    return "^(?:" + "".join(out) + ")$"


def _char_set(body: str) -> str:
    """A glob set's body (between the brackets) as a regex class whose members are escaped, so
    that ``[``, ``&&``, ``--`` and ``~~`` (class syntax in the native regex) are plain members."""
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    items = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            lo, hi = body[k], body[k + 2]
            if lo > hi:
                # fnmatch would match nothing here; a typo is likelier than that wish.
                raise ValueError(f"the range {lo}-{hi} in [{body}] is reversed; write {hi}-{lo}")
            items.append(_escape(lo) + "-" + _escape(hi))
            k += 3
        else:
            items.append(_escape(body[k]))
            k += 1
    return "[" + ("^" if negate else "") + "".join(items) + "]"


# Python regex flags the native matcher can honour, and its spelling of each.
_FLAGS = {re.IGNORECASE: "i", re.DOTALL: "s", re.MULTILINE: "m", re.VERBOSE: "x"}


def _one(p: object, what: str) -> str:
    if isinstance(p, re.Pattern):
        if not isinstance(p.pattern, str):
            raise TypeError(
                f"{what}= takes a glob string, a compiled re.Pattern of str, or a list of them; got bytes pattern {p.pattern!r}"
            )
        flags = "".join(c for f, c in _FLAGS.items() if p.flags & f)
        # re.UNICODE is implied for str patterns; anything else would silently change meaning.
        other = p.flags & ~(re.UNICODE | sum(_FLAGS))
        if other:
            raise ValueError(
                f"{what}= pattern uses regex flags tbscope cannot apply ({re.RegexFlag(other)!r}); use IGNORECASE, DOTALL, MULTILINE or VERBOSE"
            )
        # A scoped group keeps the flags to this pattern; the newline ends a trailing VERBOSE
        # comment, which would otherwise swallow the closing parenthesis.
        return f"(?{flags}:{p.pattern}\n)" if "x" in flags else f"(?{flags}:{p.pattern})"
    if isinstance(p, str):
        try:
            return glob_to_regex(p)
        except ValueError as e:
            raise ValueError(f"{what}= glob {p!r}: {e}") from None
    raise TypeError(f"{what}= takes a glob string, a compiled re.Pattern, or a list of them; got {type(p).__name__}")


def compile_filter(value: Filter, what: str) -> str | None:
    """One native regex for a filter, or None for "everything"."""
    if value is None:
        return None
    if isinstance(value, (str, re.Pattern)):
        return _one(value, what)
    if isinstance(value, (bytes, bytearray)) or not isinstance(value, Iterable):
        raise TypeError(
            f"{what}= takes a glob string, a compiled re.Pattern, or a list of them; got {type(value).__name__}"
        )
    parts = [_one(p, what) for p in value]
    if not parts:
        # An empty list selects nothing, which is rarely meant: say so.
        raise ValueError(f"{what}= is an empty list; pass None to select everything")
    return "|".join(f"(?:{p})" for p in parts)


def parse_steps(steps: object) -> tuple[int | None, int | None]:
    """``steps=(start, stop)``, half-open; either end may be None."""
    if steps is None:
        return None, None
    if isinstance(steps, range):
        if steps.step != 1:
            raise ValueError("steps= takes a range with step 1, or a (start, stop) pair")
        return steps.start, steps.stop
    if isinstance(steps, tuple) and len(steps) == 2:
        lo, hi = steps
        for v in (lo, hi):
            if v is not None and not isinstance(v, int):
                raise TypeError("steps= takes (start, stop) with ints or None, e.g. steps=(1000, None)")
        return lo, hi
    raise TypeError("steps= takes a (start, stop) pair, half-open, e.g. steps=(0, 1000)")


def kinds_list(kinds: str | Iterable[str] | None) -> list[str] | None:
    if kinds is None:
        return None
    if isinstance(kinds, str):
        return [kinds]
    if not isinstance(kinds, Iterable):
        raise TypeError(f"kinds= takes a kind name or a list of them; got {type(kinds).__name__}")
    out = list(kinds)
    if not out:
        raise ValueError("kinds= is an empty list; pass None to read every kind")
    bad = [k for k in out if not isinstance(k, str)]
    if bad:
        raise TypeError(f"kinds= takes kind names (str); got {bad[0]!r}")
    return out


@dataclass(frozen=True)
class ScanArgs:
    """The native reader's arguments of one scan, as :func:`tbscope.scan` resolved them: kept
    by a Logdir to open more readers with the same filters (streaming, the narrowed scans of
    SQL), and hashable, so that SQL can group tables whose scans would be the same."""

    runs: str | None
    tags: str | None
    kinds: tuple[str, ...] | None
    step_lo: int | None
    step_hi: int | None
    restarts: str
    verify: bool
    max_record_bytes: int
    provenance: bool
    threads: int
    tail_timeout: float
    cache_dir: str | None
    #: Only the records starting in [start, end) of a single event file (end None: to its end).
    byte_range: tuple[int, int | None] | None = None

    def open(self, path: str, fold_scalars: bool = False, fold_piece_bytes: int | None = None) -> _core.NativeReader:
        """The native reader of this scan; ``fold_scalars``: one that keeps statistics of its
        scalars instead of their rows, reading ``fold_piece_bytes`` at a time (see
        :meth:`tbscope.Logdir._fold_scalars`)."""
        return _core.NativeReader(
            path,
            runs=self.runs,
            tags=self.tags,
            kinds=None if self.kinds is None else list(self.kinds),
            step_lo=self.step_lo,
            step_hi=self.step_hi,
            restarts=self.restarts,
            verify=self.verify,
            max_record_bytes=self.max_record_bytes,
            provenance=self.provenance,
            threads=self.threads,
            tail_timeout=self.tail_timeout,
            cache_dir=self.cache_dir,
            byte_range=self.byte_range,
            fold_scalars=fold_scalars,
            fold_piece_bytes=fold_piece_bytes,
        )
