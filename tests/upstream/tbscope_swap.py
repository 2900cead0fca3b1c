"""A pytest plugin that runs the originals' own test suites against tbscope's drop-ins.

Not part of ``make test`` (the suites are not ours and are not copied here; they need TensorFlow):
see tests/upstream/README.md for how to fetch and run them. Loaded with ``-p tbscope_swap``,
it swaps, before any test module is imported:

* ``tbparse.SummaryReader`` for ``tbscope.compat.SummaryReader`` (so ``from tbparse import
  SummaryReader`` in a test module gets tbscope's class);
* ``event_accumulator.EventAccumulator`` and ``plugin_event_accumulator.EventAccumulator`` for
  tbscope's. TensorBoard's "mocking" tests hand the accumulator an in-memory event generator
  instead of a path; tbscope reads files, so such a generator's events are written, record by
  record with TensorBoard's own ``RecordWriter``, to an event file in a temporary directory
  whenever the accumulator is about to read (``Reload``, ``FirstEventTimestamp``,
  ``GetSourceWriter`` before the first ``Reload``), and the accumulator reads that directory.
  Tests that patch ``_GeneratorFromPath`` to hand over such a generator get the same.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any
from unittest import mock


def _from_generator(base: type, module: Any) -> type:
    class Swapped(base):  # type: ignore[misc, valid-type]
        def __init__(self, path: Any, *args: Any, **kwargs: Any) -> None:
            self._swap_gen = None
            self._swap_reloaded = False
            factory = getattr(module, "_GeneratorFromPath", None)
            if isinstance(factory, mock.Base) or hasattr(factory, "mock"):  # autospec wraps a function
                # the test patched TensorBoard's loader factory to hand over its generator
                path = factory(path)
            if hasattr(path, "Load") and not isinstance(path, (str, os.PathLike)):
                from tensorboard.summary.writer.record_writer import RecordWriter

                self._swap_gen = path
                directory = tempfile.mkdtemp(prefix="tbscope-swap-")
                self._swap_file = open(os.path.join(directory, "events.out.tfevents.0.swap"), "ab")
                self._swap_writer = RecordWriter(self._swap_file)
                path = directory
            super().__init__(path, *args, **kwargs)

        def _swap_flush(self) -> None:
            if self._swap_gen is not None:
                for event in self._swap_gen.Load():
                    self._swap_writer.write(event.SerializeToString())
                self._swap_file.flush()

        def Reload(self) -> Any:
            self._swap_flush()
            self._swap_reloaded = True
            return super().Reload()

        # before the first Reload these read the files; afterwards they do not (nor does
        # TensorBoard read its generator then)
        def FirstEventTimestamp(self) -> Any:
            if not self._swap_reloaded:
                self._swap_flush()
            return super().FirstEventTimestamp()

        def GetSourceWriter(self) -> Any:
            if not self._swap_reloaded:
                self._swap_flush()
            return super().GetSourceWriter()

    Swapped.__name__ = Swapped.__qualname__ = "EventAccumulator"
    return Swapped


def pytest_configure(config: Any) -> None:
    from tbscope import compat

    try:
        import tbparse
    except ImportError:
        pass
    else:
        tbparse.SummaryReader = compat.SummaryReader
    try:
        from tensorboard.backend.event_processing import event_accumulator, plugin_event_accumulator
    except ImportError:
        return
    event_accumulator.EventAccumulator = _from_generator(compat.EventAccumulator, event_accumulator)
    plugin_event_accumulator.EventAccumulator = _from_generator(compat.PluginEventAccumulator, plugin_event_accumulator)
