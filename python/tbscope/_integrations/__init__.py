"""Glue for third-party frameworks, kept out of ``import tbscope``.

Each module here imports its framework lazily (or not at all: ``torch`` is duck-typed), and is
exposed under a short public name (``tbscope.torch`` re-exports :mod:`tbscope._integrations.torch`).
"""
