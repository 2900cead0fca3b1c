"""What tests of ``tbscope.torch.watch`` share, in tests/python and in tests/torch (which runs in
the torch venv and finds this folder through its conftest)."""

from __future__ import annotations

import numpy as np


class RecordingWriter:
    """The writer methods watch() calls, recording (step, value) per tag."""

    def __init__(self) -> None:
        self.histograms: dict[str, list] = {}
        self.scalars: dict[str, list] = {}
        self.tensors: dict[str, list] = {}

    def add_histogram(self, tag, values, global_step=None):
        self.histograms.setdefault(tag, []).append((global_step, np.array(values)))

    def add_scalar(self, tag, scalar_value, global_step=None):
        self.scalars.setdefault(tag, []).append((global_step, scalar_value))

    def add_tensor(self, tag, tensor, global_step=None):
        self.tensors.setdefault(tag, []).append((global_step, np.array(tensor)))
