"""``tbscope.rewrite`` as a module: the names the docs show under it, kept working (the
function is ``tbscope.rewrite()``; its implementation is the private ``tbscope._rewrite``).

A package rather than a ``rewrite.py`` beside ``_rewrite.py``: the implementation's rename then
stays a rename for git, and edits made to the old file on other branches follow it.
"""

from tbscope._rewrite import RewriteStats, rewrite
from tbscope.errors import RewriteError

__all__ = ["RewriteError", "RewriteStats", "rewrite"]
