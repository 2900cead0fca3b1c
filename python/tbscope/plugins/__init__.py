"""``tbscope.plugins``: the plugin helpers the docs show (docs/kinds.md); the implementation
is the private ``tbscope._plugins``.

A package rather than a ``plugins.py`` beside ``_plugins.py``: the implementation's rename then
stays a rename for git, and edits made to the old file on other branches follow it.
"""

from tbscope._plugins import merge_layouts, meshes

__all__ = ["merge_layouts", "meshes"]
