"""PyTorch helpers: :func:`watch` logs activations, gradients and weights of a model's modules.

>>> import tbscope.torch                          # doctest: +SKIP
>>> with tbscope.torch.watch(model, writer, modules="encoder.*", every=100):  # doctest: +SKIP
...     train(model)

Importing this module does not import torch.
"""

from __future__ import annotations

from tbscope._integrations.torch import Handle, watch

__all__ = ["Handle", "watch"]
