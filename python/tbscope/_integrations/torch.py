"""``watch(model, writer)``: histograms and norms of a torch model's activations, gradients and
weights, logged from module hooks every N forward calls.

torch is never imported here: the model is driven through the small part of the
``torch.nn.Module`` API that hooks need (``named_modules``, ``named_parameters``,
``register_forward_pre_hook``, ``register_forward_hook``, ``register_full_backward_hook`` and the
handles' ``remove``), and tensors go through :func:`tbscope._summary.to_numpy`.
"""

from __future__ import annotations

import fnmatch
import re
import warnings
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, Union

import numpy as np

from tbscope._summary import to_numpy

_KINDS = ("activations", "gradients", "weights")
# torch warns on every backward pass through a module with full backward hooks whose inputs need
# no gradient, which is every model's first layer (its input is the data). The hook still gets
# the gradient with respect to the module's output, which is all watch() logs.
_FIRST_LAYER_WARNING = "Full backward hook is firing when gradients are computed with respect to module outputs"
ModulePattern = Union[str, "re.Pattern[str]"]


class Handle:
    """What :func:`watch` returns: ``remove()`` takes every hook it registered off the model
    (idempotent). Also a context manager that removes them on exit."""

    def __init__(self, state: _State) -> None:
        self._state = state
        self._hooks: list[Any] = []

    @property
    def calls(self) -> int:
        """Forward calls of the model seen so far (the counter ``every`` applies to)."""
        return self._state.calls

    @property
    def modules(self) -> list[str]:
        """Names of the modules whose activations or gradients are hooked."""
        return list(self._state.module_names)

    @property
    def active(self) -> bool:
        """True until :meth:`remove` is called."""
        return bool(self._hooks)

    def remove(self) -> None:
        """Remove every hook from the model; nothing is logged afterwards."""
        hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook.remove()

    def __enter__(self) -> Handle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove()

    def __repr__(self) -> str:
        state = "active" if self._hooks else "removed"
        return f"<tbscope.torch.Handle {state}: {len(self._state.module_names)} modules, {self._state.calls} calls>"


class _State:
    """Counters shared by the hooks of one watch() call."""

    def __init__(self, writer: Any, every: int, what: frozenset[str], raw: bool) -> None:
        self.writer = writer
        self.every = every
        self.what = what
        self.raw = raw
        self.calls = 0
        # The step of the forward call in progress (and of its backward pass), or None when
        # that call is not one of every N.
        self.step: int | None = None
        self.module_names: list[str] = []
        self.parameters: list[tuple[str, Any]] = []

    def begin_call(self) -> None:
        call = self.calls
        self.calls += 1
        if call % self.every:
            self.step = None
            return
        self.step = self._resolve_step(call)
        if "weights" in self.what:
            for name, param in self.parameters:
                self.log("weights", name, param)

    def _resolve_step(self, call: int) -> int:
        # A writer that knows the training step says so through an int `global_step` attribute
        # (set it from the training loop); otherwise the forward-call count is the step.
        step = getattr(self.writer, "global_step", None)
        if isinstance(step, (int, np.integer)) and not isinstance(step, bool):
            return int(step)
        return call

    def log(self, kind: str, name: str, value: object) -> None:
        step = self.step
        if step is None:
            return
        for suffix, tensor in _tensors(value):
            arr = to_numpy(tensor)
            if arr.dtype.kind == "V" and arr.dtype.name.startswith(("bfloat16", "float8")):
                arr = arr.astype(np.float32)  # ml_dtypes' floats (numpy kind "V") hold exactly
            if arr.size == 0 or arr.dtype.kind not in "biuf":
                continue  # nothing to bin: empty, complex, strings
            tag = f"{name}{suffix}"
            self.writer.add_histogram(f"{kind}/{tag}", arr, global_step=step)
            wide = arr.astype(np.float64, copy=False).ravel()
            self.writer.add_scalar(f"{kind}_norm/{tag}", float(np.sqrt(np.dot(wide, wide))), global_step=step)
            if self.raw:
                # The tensor itself, in its own dtype: torch's writer takes only torch tensors
                # here, tbscope's takes both.
                detach = getattr(tensor, "detach", None)
                raw = detach() if callable(detach) else tensor
                self.writer.add_tensor(f"{kind}_raw/{tag}", raw, global_step=step)


def _is_tensor(x: object) -> bool:
    return isinstance(x, np.ndarray) or (hasattr(x, "detach") and hasattr(x, "shape"))


def _tensors(value: object, suffix: str = "") -> Iterator[tuple[str, object]]:
    """(tag suffix, tensor) for a module output or gradient: a tensor itself, or the tensors
    inside tuples/lists (``/0``, ``/1``...) and dicts (``/key``); None and the rest skipped.
    A one-element tuple (what a backward hook gets for a single output) needs no suffix."""
    if _is_tensor(value):
        yield suffix, value
    elif isinstance(value, (tuple, list)):
        if len(value) == 1:
            yield from _tensors(value[0], suffix)
        else:
            for i, item in enumerate(value):
                yield from _tensors(item, f"{suffix}/{i}")
    elif isinstance(value, dict):
        for k, item in value.items():
            yield from _tensors(item, f"{suffix}/{k}")


def _matcher(modules: ModulePattern | Iterable[ModulePattern]) -> Any:
    patterns: list[ModulePattern]
    if isinstance(modules, (str, re.Pattern)):
        patterns = [modules]
    else:
        patterns = list(modules)
    for p in patterns:
        if not isinstance(p, (str, re.Pattern)):
            raise TypeError(f"watch: modules= takes a glob string, a compiled re.Pattern, or a list of them; got {p!r}")

    def match(name: str) -> bool:
        # Globs match the whole dotted name (`*` crosses dots); a regex matches anywhere, as
        # re.search does: the same rules as tbscope's tag filters.
        return any(
            p.search(name) is not None if isinstance(p, re.Pattern) else fnmatch.fnmatchcase(name, p) for p in patterns
        )

    return match


def watch(
    model: Any,
    writer: Any,
    modules: ModulePattern | Iterable[ModulePattern] = "*",
    every: int = 1,
    what: str | Iterable[str] = ("activations", "gradients", "weights"),
    raw: bool = False,
) -> Handle:
    """Log histograms and L2 norms of a torch model's activations, gradients and weights.

    Parameters
    ----------
    model:
        A ``torch.nn.Module``. Its forward calls are counted; every ``every``-th call (the first
        one included) is logged.
    writer:
        Anything with ``add_histogram(tag, values, global_step=)`` and
        ``add_scalar(tag, value, global_step=)`` (``tbscope.SummaryWriter``, torch's or
        tensorboardX's), plus ``add_tensor`` when ``raw=True``.
    modules:
        Which submodules, by their dotted name from ``named_modules()``: a glob (whole name,
        ``*`` crosses dots), a compiled regex (matched anywhere), or a list of them. The model
        itself is never hooked (its output is the model's output); its own direct parameters
        count as the module named ``""``, which ``"*"`` matches.
    every:
        Log one forward call (and its backward pass) in ``every``.
    what:
        Any of ``"activations"`` (module outputs, from forward hooks), ``"gradients"`` (gradients
        with respect to module outputs, from full backward hooks; torch's warning that such a
        hook "is firing when gradients are computed with respect to module outputs", which the
        first layer triggers on every backward pass, is filtered out) and ``"weights"``
        (parameters of the matched modules, logged when a logged call starts).
    raw:
        Also log each tensor itself with ``writer.add_tensor`` (tags ``<kind>_raw/...``).

    Tags are ``activations/<module>``, ``activations_norm/<module>``, ``gradients/<module>``,
    ``gradients_norm/<module>``, ``weights/<parameter>`` and ``weights_norm/<parameter>``; a
    module returning a tuple or dict gets ``/<index>`` or ``/<key>`` appended. The step is the
    forward-call count, unless the writer has an int attribute ``global_step`` (set it in your
    loop: ``writer.global_step = step``), which is then used.

    Returns a :class:`Handle`; ``handle.remove()`` (or leaving ``with watch(...):``) takes
    every hook off again.
    """
    for method in ("named_modules", "named_parameters", "register_forward_pre_hook"):
        if not callable(getattr(model, method, None)):
            raise TypeError(
                f"watch: expected a torch.nn.Module, got {type(model).__module__}.{type(model).__qualname__} (no {method}())"
            )
    kinds = frozenset([what] if isinstance(what, str) else what)
    unknown = kinds - set(_KINDS)
    if unknown or not kinds:
        raise ValueError(
            f"watch: what= takes one or more of {', '.join(map(repr, _KINDS))}; got {sorted(unknown) or 'nothing'}"
        )
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise ValueError(f"watch: every must be an int >= 1 (log one forward call in `every`), got {every!r}")
    needed = ["add_histogram", "add_scalar"] + (["add_tensor"] if raw else [])
    missing = [m for m in needed if not callable(getattr(writer, m, None))]
    if missing:
        raise TypeError(
            f"watch: the writer has no {', '.join(missing)}(); pass a tbscope.SummaryWriter (or torch's/tensorboardX's)"
        )
    match = _matcher(modules)

    state = _State(writer, int(every), kinds, raw)
    named = [(name, module) for name, module in model.named_modules() if name and match(name)]
    state.module_names = [name for name, _ in named]
    if "weights" in kinds:
        for pname, param in model.named_parameters():
            owner = pname.rpartition(".")[0]
            if match(owner):
                state.parameters.append((pname, param))
    if not named and not state.parameters:
        names = [name for name, _ in model.named_modules() if name]
        listed = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
        raise ValueError(
            f"watch: modules={modules!r} matches no module of the model; its modules are: {listed or '(none)'}"
        )

    if "gradients" in kinds and named:
        warnings.filterwarnings("ignore", message=_FIRST_LAYER_WARNING, category=UserWarning)
    handle = Handle(state)
    handle._hooks.append(model.register_forward_pre_hook(lambda _module, _args: state.begin_call()))
    for name, module in named:
        if "activations" in kinds:
            handle._hooks.append(module.register_forward_hook(_forward_hook(state, name)))
        if "gradients" in kinds:
            handle._hooks.append(module.register_full_backward_hook(_backward_hook(state, name)))
    return handle


def _forward_hook(state: _State, name: str) -> Any:
    def hook(_module: Any, _args: Any, output: Any) -> None:
        state.log("activations", name, output)

    return hook


def _backward_hook(state: _State, name: str) -> Any:
    def hook(_module: Any, _grad_input: Any, grad_output: Any) -> None:
        state.log("gradients", name, grad_output)

    return hook
