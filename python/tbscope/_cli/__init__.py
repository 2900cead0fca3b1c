"""The ``tbscope`` command line.

Every reading command takes the same filters (``--runs``, ``--tags``, ``--kinds``, ``--steps``,
mapped to :func:`tbscope.scan`) and the same ``--format table|csv|json``. Errors print as one
line with a hint; ``--debug`` shows tracebacks. ``docs/cli.md`` is generated from this module by
``python -m tbscope._cli.doc``, so help texts here are the reference.
"""
