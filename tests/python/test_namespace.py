"""The package namespace: what ``import tbscope`` gives, whichever of its modules were
imported first, and what it leaves unimported until used."""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def test_functions_named_like_their_modules_stay_functions():
    # Importing the modules first (as the CLI does) must not leave the package's attribute a module.
    out = run(
        "import tbscope._rewrite, tbscope._export, tbscope._query, tbscope._curves, tbscope.rewrite, tbscope.query, tbscope.server; import tbscope, types; print([isinstance(getattr(tbscope, n), types.ModuleType) for n in ('rewrite', 'export', 'sql', 'downsample', 'serve')])"
    )
    assert out == "[False, False, False, False, False]"


def test_the_server_and_writer_load_on_first_use():
    out = run(
        "import sys, tbscope; before = [m in sys.modules for m in ('tbscope._writer.api', 'tbscope.server', 'tbscope._query')]; tbscope.SummaryWriter; tbscope.sql; print(before, 'tbscope._writer.api' in sys.modules, 'tbscope._query' in sys.modules, sorted(set(tbscope.__all__) - set(dir(tbscope))))"
    )
    assert out == "[False, False, False] True True []"


def test_public_modules_are_the_documented_ones():
    # Implementation modules are private (_reader, _query...); a new public module is a decision,
    # not an accident of naming a file.
    import pkgutil

    import tbscope

    public = sorted(m.name for m in pkgutil.iter_modules(tbscope.__path__) if not m.name.startswith("_"))
    assert public == ["cache", "compat", "dask", "errors", "notebook", "plugins", "query", "rewrite", "server", "torch"]


def test_names_the_docs_show_under_old_module_paths_still_work():
    # docs/cache.md, docs/kinds.md, docs/query.md and docs/errors.md name these.
    out = run(
        "import tbscope; from tbscope.cache import cache_dir, clear; from tbscope.plugins import merge_layouts, meshes; "
        "from tbscope.query import QueryError, QueryTimeoutError, QueryTooLargeError, pushdown; "
        "from tbscope.rewrite import RewriteError; from tbscope._cache import clear as c; "
        "print(clear is c, QueryError is tbscope.QueryError, RewriteError is tbscope.RewriteError, "
        "merge_layouts([{'category': []}]) == {'category': []}, sorted(pushdown('SELECT * FROM scalars')))"
    )
    assert out == "True True True True ['scalars']"
