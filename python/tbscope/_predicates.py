"""What a query's WHERE clauses say about the run, tag and step columns of the tables they
filter, read out of DuckDB's parse tree (``json_serialize_sql``), as a superset a native scan
can apply: the pushdown of :mod:`tbscope._query`.

A string column is None (anything), a finite set of names, or a tuple of anchored native
regexes (any may match). Steps are a half-open [lo, hi) with None for unbounded. Whatever is
not understood is no constraint (DuckDB applies the whole clause anyway).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Union

from tbscope._filters import _escape

_Str = Union[None, frozenset[str], tuple[str, ...]]


@dataclass(frozen=True)
class _Pred:
    run: _Str = None
    tag: _Str = None
    lo: int | None = None
    hi: int | None = None

    def get(self, col: str) -> _Str:
        return self.run if col == "run" else self.tag


_TOP = _Pred()


def _and_str(a: _Str, b: _Str) -> _Str:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        return a & b
    # A finite set is the most selective thing a scan can use; two patterns cannot be
    # intersected in one regex without lookahead, so one of them is kept (still a superset).
    if isinstance(a, frozenset):
        return a
    return b if isinstance(b, frozenset) else a


def _as_regexes(s: frozenset[str] | tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(s, tuple):
        return s
    return tuple("^" + _escape(x) + "$" for x in sorted(s))


def _or_str(a: _Str, b: _Str) -> _Str:
    if a is None or b is None:
        return None
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        return a | b
    return tuple(dict.fromkeys(_as_regexes(a) + _as_regexes(b)))


def _max_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _and(a: _Pred, b: _Pred) -> _Pred:
    return _Pred(_and_str(a.run, b.run), _and_str(a.tag, b.tag), _max_opt(a.lo, b.lo), _min_opt(a.hi, b.hi))


def _or(a: _Pred, b: _Pred) -> _Pred:
    # The union's hull: a bound survives only when both sides have one.
    lo = None if a.lo is None or b.lo is None else min(a.lo, b.lo)
    hi = None if a.hi is None or b.hi is None else max(a.hi, b.hi)
    return _Pred(_or_str(a.run, b.run), _or_str(a.tag, b.tag), lo, hi)


def _native_pattern(s: _Str) -> str | None:
    """One native regex for a constraint (None: no constraint, or one a scan cannot express)."""
    if s is None:
        return None
    if isinstance(s, frozenset) and not s:
        return None  # contradictory (tag = 'a' AND tag = 'b'): DuckDB returns nothing anyway
    alts = _as_regexes(s)
    return alts[0] if len(alts) == 1 else "|".join(f"(?:{a})" for a in alts)


# --------------------------------------------------------------------------------------------
# Reading predicates out of DuckDB's parse tree (json_serialize_sql).

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# Integers a double holds exactly: DuckDB compares a BIGINT step with a DOUBLE literal as
# doubles, so beyond this a bound derived from the literal could exclude a row DuckDB keeps.
_EXACT_DOUBLE = 1 << 52
_JOIN_REFS = {"REGULAR", "CROSS", "NATURAL"}  # ASOF and POSITIONAL pair rows by position or nearness
_FLIP = {
    "COMPARE_EQUAL": "COMPARE_EQUAL",
    "COMPARE_GREATERTHAN": "COMPARE_LESSTHAN",
    "COMPARE_LESSTHAN": "COMPARE_GREATERTHAN",
    "COMPARE_GREATERTHANOREQUALTO": "COMPARE_LESSTHANOREQUALTO",
    "COMPARE_LESSTHANOREQUALTO": "COMPARE_GREATERTHANOREQUALTO",
}


def _like_regex(pattern: str) -> str:
    """SQL LIKE (no ESCAPE clause: backslash is literal in DuckDB) as an anchored regex."""
    out = []
    for c in pattern:
        out.append(".*" if c == "%" else "." if c == "_" else _escape(c))
    # (?s): LIKE's % and _ match newlines too.
    return "^(?s:" + "".join(out) + ")$"


def _glob_regex(pattern: str) -> str | None:
    """DuckDB GLOB with only * and ? (its [...] sets and backslash escapes are left to DuckDB)."""
    if "[" in pattern or "\\" in pattern:
        return None
    out = []
    for c in pattern:
        out.append(".*" if c == "*" else "." if c == "?" else _escape(c))
    return "^(?s:" + "".join(out) + ")$"


class _Analyzer:
    """Walks one statement's parse tree; ``tables`` maps each table name a query can use to
    the columns a scan of it can filter."""

    def __init__(self, params: Sequence[Any] | Mapping[str, Any] | None, tables: Mapping[str, tuple[str, ...]]) -> None:
        self.params = params
        self.tables = tables
        # id() of each BASE_TABLE node that a WHERE clause constrains, with its constraint.
        self.attributed: dict[int, _Pred] = {}
        self.occurrences: list[tuple[str, dict[str, Any]]] = []
        # Names the query defines itself (WITH ...): one that shadows a tbscope table may
        # rename its columns, so that table gets no pushdown at all.
        self.ctes: set[str] = set()

    def walk(self, node: Any) -> None:
        if isinstance(node, dict):
            cte_map = node.get("cte_map")
            if isinstance(cte_map, dict):
                self.ctes.update(str(c.get("key", "")).lower() for c in cte_map.get("map", []) if isinstance(c, dict))
            if node.get("type") == "BASE_TABLE":
                name = str(node.get("table_name", "")).lower()
                if name in self.tables:
                    self.occurrences.append((name, node))
            if node.get("type") == "SELECT_NODE" and "from_table" in node:
                self.select(node)
            for v in node.values():
                self.walk(v)
        elif isinstance(node, list):
            for v in node:
                self.walk(v)

    def select(self, node: dict[str, Any]) -> None:
        where = node.get("where_clause")
        if where is None or node.get("sample"):
            return  # a sample drawn before WHERE would change with a pushed filter
        refs: list[dict[str, Any]] = []
        if not self._flatten(node["from_table"], refs):
            return
        single = len(refs) == 1
        for ref in refs:
            name = str(ref.get("table_name", "")).lower() if ref.get("type") == "BASE_TABLE" else ""
            # A sample drawn from the table, or columns renamed by AS t(a, b, ...), would make a
            # pushed filter select other rows.
            if name not in self.tables or ref.get("sample") or ref.get("column_name_alias"):
                continue
            refname = str(ref.get("alias") or ref.get("table_name")).lower()
            self.attributed[id(ref)] = self.expr(where, refname, single, self.tables[name])

    def _flatten(self, ref: Any, out: list[dict[str, Any]]) -> bool:
        """The table references of a FROM clause; False if a join pairs rows in a way that a
        filter applied before it would change (ASOF, POSITIONAL)."""
        if not isinstance(ref, dict):
            return False
        t = ref.get("type")
        if t == "JOIN":
            if ref.get("ref_type", "REGULAR") not in _JOIN_REFS:
                return False
            return self._flatten(ref.get("left"), out) and self._flatten(ref.get("right"), out)
        if t == "EMPTY_FROM" or t == "EMPTY":
            return True
        out.append(ref)
        return True

    # -- expressions ---------------------------------------------------------------------

    def expr(self, e: Any, ref: str, single: bool, cols: tuple[str, ...]) -> _Pred:
        if not isinstance(e, dict):
            return _TOP
        t = e.get("type")
        if t == "CONJUNCTION_AND":
            out = _TOP
            for c in e.get("children", []):
                out = _and(out, self.expr(c, ref, single, cols))
            return out
        if t == "CONJUNCTION_OR":
            kids = e.get("children", [])
            if not kids:
                return _TOP
            acc = self.expr(kids[0], ref, single, cols)
            for c in kids[1:]:
                acc = _or(acc, self.expr(c, ref, single, cols))
            return acc
        try:
            return self.atom(e, ref, single, cols)
        except (ValueError, TypeError, KeyError, IndexError, InvalidOperation, OverflowError):
            return _TOP  # anything odd in a predicate: leave it to DuckDB

    def column(self, e: Any, ref: str, single: bool, cols: tuple[str, ...]) -> str | None:
        if not isinstance(e, dict) or e.get("class") != "COLUMN_REF":
            return None
        names = [str(n).lower() for n in e.get("column_names", [])]
        if len(names) == 1 and single and names[0] in cols:
            return names[0]
        if len(names) == 2 and names[0] == ref and names[1] in cols:
            return names[1]
        return None

    def literal(self, e: Any) -> str | int | Decimal | None:
        """A constant's value: str, int (exact), or Decimal for a non-integer number."""
        if not isinstance(e, dict):
            return None
        if e.get("class") == "CONSTANT":
            lit = e.get("literal") or {}
            kind, text = lit.get("kind"), lit.get("text")
            if text is None:
                return None
            if kind == "STRING":
                return str(text)
            if kind in ("INTEGER", "BIGINT", "HUGEINT", "SMALLINT", "TINYINT", "UBIGINT", "UINTEGER"):
                return int(text)
            if kind in ("NUMERIC", "DOUBLE", "FLOAT") or str(kind).startswith("DECIMAL"):
                return Decimal(text)
            return None
        if e.get("class") == "PARAMETER" and self.params is not None:
            ident = str(e.get("identifier"))
            if isinstance(self.params, Mapping):
                v = self.params[ident]
            else:
                v = self.params[int(ident) - 1]
            if isinstance(v, bool):
                return None
            if isinstance(v, (str, int)):
                return v
            if isinstance(v, float) and math.isfinite(v):
                return Decimal(v)
        return None

    def atom(self, e: dict[str, Any], ref: str, single: bool, cols: tuple[str, ...]) -> _Pred:
        t = e.get("type")
        if e.get("class") == "COMPARISON" and t in _FLIP:
            col, lit = self.column(e.get("left"), ref, single, cols), self.literal(e.get("right"))
            if col is None:
                col, lit, t = self.column(e.get("right"), ref, single, cols), self.literal(e.get("left")), _FLIP[t]
            if col is None or lit is None:
                return _TOP
            if col == "step":
                return _step_bound(t, lit)
            if t == "COMPARE_EQUAL" and isinstance(lit, str):
                return _str_pred(col, frozenset([lit]))
            return _TOP
        if t == "COMPARE_BETWEEN":
            if self.column(e.get("input"), ref, single, cols) != "step":
                return _TOP
            return _and(
                _step_bound("COMPARE_GREATERTHANOREQUALTO", self.literal(e.get("lower"))),
                _step_bound("COMPARE_LESSTHANOREQUALTO", self.literal(e.get("upper"))),
            )
        if t == "COMPARE_IN":
            kids = e.get("children", [])
            col = self.column(kids[0], ref, single, cols) if kids else None
            values = [self.literal(k) for k in kids[1:]]
            if col is None or not values or any(v is None for v in values):
                return _TOP
            if col == "step":
                out: _Pred | None = None
                for v in values:
                    p = _step_bound("COMPARE_EQUAL", v)
                    if p is _TOP:
                        return _TOP
                    out = p if out is None else _or(out, p)
                return out or _TOP
            if all(isinstance(v, str) for v in values):
                return _str_pred(col, frozenset(str(v) for v in values))
            return _TOP
        if e.get("class") == "FUNCTION":
            name = str(e.get("function_name", "")).lower()
            args = [a.get("expression") for a in e.get("arguments", []) if isinstance(a, dict)]
            if len(args) != 2:
                return _TOP
            col, lit = self.column(args[0], ref, single, cols), self.literal(args[1])
            if col not in ("run", "tag") or not isinstance(lit, str):
                return _TOP
            if name == "~~":  # LIKE
                return _str_pred(col, (_like_regex(lit),))
            if name == "~~~":  # GLOB
                rx = _glob_regex(lit)
                return _TOP if rx is None else _str_pred(col, (rx,))
            if name in ("starts_with", "prefix"):
                return _str_pred(col, ("^(?s:" + _escape(lit) + ".*)$",))
        return _TOP


def _str_pred(col: str, s: frozenset[str] | tuple[str, ...]) -> _Pred:
    return _Pred(run=s) if col == "run" else _Pred(tag=s)


def _step_bound(op: str, lit: str | int | Decimal | None) -> _Pred:
    """The half-open step range a comparison of ``step`` with a number allows."""
    if lit is None or isinstance(lit, str):
        return _TOP
    x = Decimal(lit)
    if not x.is_finite() or (not isinstance(lit, int) and abs(x) >= _EXACT_DOUBLE):
        return _TOP
    lo: int | None = None
    hi: int | None = None
    if op == "COMPARE_EQUAL":
        if x != x.to_integral_value():
            return _TOP
        lo, hi = int(x), int(x) + 1
    elif op == "COMPARE_GREATERTHAN":
        lo = math.floor(x) + 1
    elif op == "COMPARE_GREATERTHANOREQUALTO":
        lo = math.ceil(x)
    elif op == "COMPARE_LESSTHAN":
        hi = math.ceil(x)
    elif op == "COMPARE_LESSTHANOREQUALTO":
        hi = math.floor(x) + 1
    else:
        return _TOP
    # Bounds outside int64 say nothing a scan can use (steps are int64 anyway).
    if lo is not None and lo < _INT64_MIN:
        lo = None
    if hi is not None and hi > _INT64_MAX:
        hi = None
    if (lo is not None and lo > _INT64_MAX) or (hi is not None and hi < _INT64_MIN) or (lo is None and hi is None):
        return _TOP
    return _Pred(lo=lo, hi=hi)
