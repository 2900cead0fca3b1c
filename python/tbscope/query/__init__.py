"""``tbscope.query``: the names the docs show under this module, kept working (the SQL engine
is the private ``tbscope._query``; use ``tbscope.sql`` and ``tbscope.QueryError``).

A package rather than a ``query.py`` beside ``_query.py``: the implementation's rename then
stays a rename for git, and edits made to the old file on other branches follow it.
"""

from tbscope._query import Pushdown, Result, pushdown
from tbscope._sql import sql
from tbscope.errors import QueryError, QueryTimeoutError, QueryTooLargeError

__all__ = ["Pushdown", "QueryError", "QueryTimeoutError", "QueryTooLargeError", "Result", "pushdown", "sql"]
