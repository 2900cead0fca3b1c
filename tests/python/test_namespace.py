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
        "print(clear.__module__ == 'tbscope.cache' and callable(c), QueryError is tbscope.QueryError, RewriteError is tbscope.RewriteError, "
        "merge_layouts([{'category': []}]) == {'category': []}, sorted(pushdown('SELECT * FROM scalars')))"
    )
    assert out == "True True True True ['scalars']"


def _imports_of(path, module, package_dir):
    """The tbscope modules that ``module`` (file ``path``) imports, at module level or inside
    functions (a lazy import is still a dependency)."""
    import ast

    out = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("tbscope"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("tbscope"):
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                rel = sub.split(".")[1:]
                # A submodule: a .py, a package, or the native module (_core.*.so, _core.pyi).
                if package_dir.joinpath(*rel).is_dir() or any(package_dir.joinpath(*rel[:-1]).glob(rel[-1] + ".*")):
                    out.add(sub)
                elif not (target == "tbscope" and a.name == "__version__"):
                    out.add(target)
    return out


def test_the_package_has_no_import_circles():
    # Layers import downwards only (docs/architecture.md): a circle means two modules that can
    # only be understood, tested and changed together.
    import pathlib

    import tbscope

    root = pathlib.Path(tbscope.__file__).parent
    graph = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).with_suffix("")
        parts = ["tbscope", *rel.parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        graph[name] = _imports_of(path, name, root)
    graph = {m: {t for t in ts if t in graph and t != m} for m, ts in graph.items()}
    seen, stack, cycles = set(), [], []

    def visit(m):
        if m in stack:
            cycles.append(stack[stack.index(m) :] + [m])
            return
        if m in seen:
            return
        seen.add(m)
        stack.append(m)
        for t in sorted(graph[m]):
            visit(t)
        stack.pop()

    for m in sorted(graph):
        visit(m)
    assert cycles == []
