"""Drop-in replacements for TensorBoard's ``EventAccumulator`` and tbparse's ``SummaryReader``.

Change one import and an existing script reads through tbscope::

    # from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tbscope.compat import EventAccumulator
    # from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tbscope.compat import PluginEventAccumulator as EventAccumulator
    # from tbparse import SummaryReader
    from tbscope.compat import SummaryReader

``import tbscope.compat as event_accumulator`` also works: the tag-type constants, the size
guidances and the event classes (``ScalarEvent``, ``TensorEvent``, ...) are exported here.

One module per emulated API: ``_accumulator`` (the legacy accumulator), ``_plugin_accumulator``
(the plugin one), ``_tbparse`` (``SummaryReader`` and its static helpers); what they share is in
``_loader`` (TensorBoard's loaders and purges, replayed), ``_reservoir`` (its seeded sampling),
``_run``, ``_wire`` and ``_events``. docs/compat.md says exactly how far "drop-in" goes: every
difference from the originals that remains is listed there, and tests/python/test_compat_diff.py
checks that no other exists.
"""

from __future__ import annotations

from tbscope.compat._accumulator import EventAccumulator
from tbscope.compat._events import (
    AUDIO,
    COMPRESSED_HISTOGRAMS,
    DEFAULT_SIZE_GUIDANCE,
    GRAPH,
    HISTOGRAMS,
    IMAGES,
    META_GRAPH,
    NORMAL_HISTOGRAM_BPS,
    RUN_METADATA,
    SCALARS,
    STORE_EVERYTHING_SIZE_GUIDANCE,
    TENSORS,
    AudioEvent,
    CompressedHistogramEvent,
    HistogramEvent,
    HistogramValue,
    ImageEvent,
    ScalarEvent,
    TensorEvent,
)
from tbscope.compat._loader import DirectoryDeletedError
from tbscope.compat._plugin_accumulator import PluginEventAccumulator
from tbscope.compat._reservoir import Reservoir
from tbscope.compat._tbparse import SummaryReader

__all__ = [
    "AUDIO",
    "COMPRESSED_HISTOGRAMS",
    "DEFAULT_SIZE_GUIDANCE",
    "GRAPH",
    "HISTOGRAMS",
    "IMAGES",
    "META_GRAPH",
    "NORMAL_HISTOGRAM_BPS",
    "RUN_METADATA",
    "SCALARS",
    "STORE_EVERYTHING_SIZE_GUIDANCE",
    "TENSORS",
    "AudioEvent",
    "CompressedHistogramEvent",
    "DirectoryDeletedError",
    "EventAccumulator",
    "HistogramEvent",
    "HistogramValue",
    "ImageEvent",
    "PluginEventAccumulator",
    "Reservoir",
    "ScalarEvent",
    "SummaryReader",
    "TensorEvent",
]
