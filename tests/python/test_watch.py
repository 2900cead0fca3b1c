"""tbscope.torch.watch: hooks that log activations, gradients and weights.

The main venv has no torch, so these tests drive watch() through small stand-ins that implement
exactly the torch.nn.Module API it uses (named_modules, named_parameters, the three hook
registrations and the handles' remove) with numpy arithmetic, so every expected value is
computed independently; the tests at the end go through tensorboardX's and tbscope's writers,
read back with TensorBoard's EventAccumulator and tbscope.scan. The same behaviour on real torch
modules is tested in tests/torch/test_watch.py (the torch venv, `make test-torch`).
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import tbscope
import tbscope.torch
from tbscope.torch import Handle, watch
from watch_util import RecordingWriter

RNG = np.random.default_rng(7)
_ids = itertools.count()


# --- stand-ins for the torch API surface watch() uses -------------------------------------------


class Tensor:
    """torch.Tensor's surface used on the way to numpy: shape, detach(), __array__."""

    def __init__(self, data) -> None:
        self.data = np.asarray(data, dtype=np.float32)

    @property
    def shape(self):
        return self.data.shape

    def detach(self):
        return self

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)


class RemovableHandle:
    def __init__(self, hooks: dict, key: int) -> None:
        self.hooks, self.key = hooks, key

    def remove(self) -> None:
        self.hooks.pop(self.key, None)


class Module:
    """torch.nn.Module's hook API: pre-hooks and forward hooks around forward(), full backward
    hooks called with (module, grad_input, grad_output) tuples during the backward pass."""

    def __init__(self) -> None:
        self.children: dict[str, Module] = {}
        self.params: dict[str, Tensor] = {}
        self.pre_hooks: dict[int, object] = {}
        self.forward_hooks: dict[int, object] = {}
        self.backward_hooks: dict[int, object] = {}

    def named_modules(self, prefix: str = ""):
        yield prefix, self
        for name, child in self.children.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def named_parameters(self, prefix: str = ""):
        for name, p in self.params.items():
            yield (f"{prefix}.{name}" if prefix else name), p
        for name, child in self.children.items():
            yield from child.named_parameters(f"{prefix}.{name}" if prefix else name)

    @staticmethod
    def _register(hooks: dict, fn) -> RemovableHandle:
        key = next(_ids)
        hooks[key] = fn
        return RemovableHandle(hooks, key)

    def register_forward_pre_hook(self, fn):
        return self._register(self.pre_hooks, fn)

    def register_forward_hook(self, fn):
        return self._register(self.forward_hooks, fn)

    def register_full_backward_hook(self, fn):
        return self._register(self.backward_hooks, fn)

    def __call__(self, x):
        for hook in list(self.pre_hooks.values()):
            hook(self, (x,))
        self.last_input = x
        out = self.forward(x)
        for hook in list(self.forward_hooks.values()):
            hook(self, (x,), out)
        return out

    def backward(self, grad_output: Tensor) -> Tensor:
        grad_input = self.input_grad(grad_output)
        for hook in list(self.backward_hooks.values()):
            hook(self, (grad_input,), (grad_output,))
        return grad_input

    def hook_count(self) -> int:
        return sum(len(m.pre_hooks) + len(m.forward_hooks) + len(m.backward_hooks) for _, m in self.named_modules())


class Linear(Module):
    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.params = {"weight": Tensor(RNG.normal(size=(n_out, n_in))), "bias": Tensor(RNG.normal(size=n_out))}

    def forward(self, x):
        return Tensor(x.data @ self.params["weight"].data.T + self.params["bias"].data)

    def input_grad(self, g):
        return Tensor(g.data @ self.params["weight"].data)


class ReLU(Module):
    def forward(self, x):
        return Tensor(np.maximum(x.data, 0))

    def input_grad(self, g):
        return Tensor(g.data * (self.last_input.data > 0))


class Sequential(Module):
    def __init__(self, *modules: Module, names: list[str] | None = None) -> None:
        super().__init__()
        self.children = dict(zip(names or map(str, range(len(modules))), modules))

    def forward(self, x):
        for child in self.children.values():
            x = child(x)
        return x

    def input_grad(self, g):
        for child in reversed(self.children.values()):
            g = child.backward(g)
        return g


class Split(Module):
    """A module whose output is a tuple, a dict and a None."""

    def forward(self, x):
        return (Tensor(x.data * 2), {"half": Tensor(x.data / 2), "none": None})


class HistogramOnlyWriter:
    def add_histogram(self, tag, values, global_step=None):
        pass

    def add_scalar(self, tag, scalar_value, global_step=None):
        pass


def mlp() -> Sequential:
    return Sequential(Linear(4, 3), ReLU(), Linear(3, 2))


def forward_backward(model: Sequential, batch: int = 5) -> tuple[Tensor, Tensor]:
    x = Tensor(RNG.normal(size=(batch, 4)))
    out = model(x)
    model.backward(Tensor(np.ones_like(out.data)))
    return x, out


# --- the hook logic -----------------------------------------------------------------------------


def test_first_call_logs_every_kind_with_exact_values():
    model, writer = mlp(), RecordingWriter()
    handle = watch(model, writer)
    x, _ = forward_backward(model)
    w0, b0 = model.children["0"].params["weight"].data, model.children["0"].params["bias"].data
    w2, b2 = model.children["2"].params["weight"].data, model.children["2"].params["bias"].data
    h0 = x.data @ w0.T + b0
    h1 = np.maximum(h0, 0)
    h2 = h1 @ w2.T + b2
    expected = {
        "activations/0": h0,
        "activations/1": h1,
        "activations/2": h2,
        # Gradients with respect to each module's output, for d(sum(out))/d(out) = 1.
        "gradients/2": np.ones_like(h2),
        "gradients/1": np.ones_like(h2) @ w2,
        "gradients/0": (np.ones_like(h2) @ w2) * (h0 > 0),
        "weights/0.weight": w0,
        "weights/0.bias": b0,
        "weights/2.weight": w2,
        "weights/2.bias": b2,
    }
    assert set(writer.histograms) == set(expected)
    for tag, value in expected.items():
        ((step, logged),) = writer.histograms[tag]
        assert step == 0
        np.testing.assert_allclose(logged, value, rtol=1e-6)
        kind, name = tag.split("/", 1)
        ((step, norm),) = writer.scalars[f"{kind}_norm/{name}"]
        assert step == 0
        assert norm == pytest.approx(np.linalg.norm(value.astype(np.float64)), rel=1e-6)
    assert writer.tensors == {}
    assert handle.calls == 1 and handle.modules == ["0", "1", "2"]


def test_every_counts_forward_calls_and_backward_follows_its_call():
    model, writer = mlp(), RecordingWriter()
    watch(model, writer, every=3)
    for _ in range(7):
        forward_backward(model)
    assert [s for s, _ in writer.histograms["activations/0"]] == [0, 3, 6]
    assert [s for s, _ in writer.histograms["gradients/0"]] == [0, 3, 6]
    assert [s for s, _ in writer.histograms["weights/2.bias"]] == [0, 3, 6]
    # A forward call that is not logged silences the backward pass that follows it.
    model(Tensor(RNG.normal(size=(2, 4))))  # call 7
    model.backward(Tensor(np.ones((2, 2))))
    assert len(writer.histograms["gradients/0"]) == 3


def test_writer_global_step_is_the_step():
    model, writer = mlp(), RecordingWriter()
    watch(model, writer, what="activations")
    writer.global_step = 1000
    forward_backward(model)
    writer.global_step = True  # a bool is not a step: the call count is used
    forward_backward(model)
    assert [s for s, _ in writer.histograms["activations/1"]] == [1000, 1]


def test_module_selection_by_glob_regex_and_list():
    model = Sequential(Sequential(Linear(4, 4), ReLU(), names=["fc", "act"]), Linear(4, 2), names=["block", "head"])
    cases = {
        "block.*": (["block.act", "block.fc"], ["block.fc.bias", "block.fc.weight"]),
        "head": (["head"], ["head.bias", "head.weight"]),
        re.compile(r"fc|head"): (
            ["block.fc", "head"],
            ["block.fc.bias", "block.fc.weight", "head.bias", "head.weight"],
        ),
        ("block", "head"): (["block", "head"], ["head.bias", "head.weight"]),
    }
    for pattern, (modules, params) in cases.items():
        writer = RecordingWriter()
        with watch(model, writer, modules=pattern, what=("activations", "weights")) as handle:
            model(Tensor(RNG.normal(size=(1, 4))))
        assert sorted(handle.modules) == modules, pattern
        assert sorted(t.split("/", 1)[1] for t in writer.histograms if t.startswith("activations/")) == modules
        assert sorted(t.split("/", 1)[1] for t in writer.histograms if t.startswith("weights/")) == params
        assert model.hook_count() == 0
    with pytest.raises(ValueError, match="matches no module.*block, block.fc, block.act, head"):
        watch(model, RecordingWriter(), modules="decoder.*")


def test_what_selects_hooks_and_raw_logs_tensors():
    model, writer = mlp(), RecordingWriter()
    handle = watch(model, writer, what="weights", raw=True)
    assert model.hook_count() == 1  # only the call counter on the model itself
    forward_backward(model)
    assert {t.split("/")[0] for t in writer.histograms} == {"weights"}
    np.testing.assert_array_equal(
        writer.tensors["weights_raw/0.weight"][0][1], model.children["0"].params["weight"].data
    )
    handle.remove()
    with pytest.raises(ValueError, match="what= takes one or more of"):
        watch(model, writer, what=("activations", "outputs"))
    with pytest.raises(TypeError, match="no add_tensor"):
        watch(model, HistogramOnlyWriter(), raw=True)
    with pytest.raises(ValueError, match="every must be an int >= 1"):
        watch(model, writer, every=0)
    with pytest.raises(TypeError, match="expected a torch.nn.Module"):
        watch(object(), writer)
    with pytest.raises(TypeError, match="glob string"):
        watch(model, writer, modules=[3])


def test_handle_removes_every_hook_once():
    model, writer = mlp(), RecordingWriter()
    handle = watch(model, writer)
    assert model.hook_count() == 1 + 3 * 2
    assert handle.active and "active" in repr(handle)
    handle.remove()
    handle.remove()  # idempotent
    assert model.hook_count() == 0 and not handle.active
    forward_backward(model)
    assert writer.histograms == {} and handle.calls == 0
    with watch(model, writer) as scoped:
        assert isinstance(scoped, Handle)
        forward_backward(model)
    assert model.hook_count() == 0
    assert len(writer.histograms["activations/0"]) == 1


def test_structured_outputs_get_suffixes():
    model, writer = Sequential(Split(), names=["split"]), RecordingWriter()
    watch(model, writer, what="activations")
    x = Tensor([[1.0, -2.0]])
    model(x)
    assert sorted(writer.histograms) == ["activations/split/0", "activations/split/1/half"]
    np.testing.assert_array_equal(writer.histograms["activations/split/1/half"][0][1], x.data / 2)


def test_public_module_does_not_import_torch():
    import subprocess
    import sys

    assert tbscope.torch.watch is watch
    # In a fresh interpreter: importing tbscope.torch (and the encoders) must not import torch.
    code = "import sys, tbscope.torch, tbscope._summary; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# --- end to end through real writers ------------------------------------------------------------


def test_with_tensorboardx_writer_read_by_tensorboard(tmp_path):
    tbx = pytest.importorskip("tensorboardX")
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea
    from tensorboard.util import tensor_util

    model = mlp()
    writer = tbx.SummaryWriter(str(tmp_path))
    with watch(model, writer, modules="2", what=("activations", "gradients")):
        _, out = forward_backward(model)
        forward_backward(model)
    writer.close()
    acc = pea.EventAccumulator(str(tmp_path), size_guidance={pea.TENSORS: 0})
    acc.Reload()
    norms = acc.Tensors("activations_norm/2")
    assert [e.step for e in norms] == [0, 1]
    assert tensor_util.make_ndarray(norms[0].tensor_proto).item() == pytest.approx(np.linalg.norm(out.data), rel=1e-6)
    buckets = tensor_util.make_ndarray(acc.Tensors("activations/2")[0].tensor_proto)
    assert buckets[:, 2].sum() == out.data.size
    assert acc.SummaryMetadata("gradients/2").plugin_data.plugin_name == "histograms"


def _tbscope_writer():
    writer_class = getattr(tbscope, "SummaryWriter", None)
    if writer_class is None:
        try:
            from tbscope._writer.api import SummaryWriter as writer_class
        except ImportError as err:
            pytest.skip(f"tbscope.SummaryWriter is not importable yet: {err}")
    return writer_class


def test_with_tbscope_writer_read_by_tbscope(tmp_path):
    summary_writer = _tbscope_writer()
    model = mlp()
    with summary_writer(str(tmp_path)) as writer, watch(model, writer, every=2):
        outputs = [forward_backward(model)[1] for _ in range(4)]
    logdir = tbscope.scan(tmp_path)
    scalars = logdir.scalars().to_pandas()
    norms = scalars[scalars["tag"] == "activations_norm/2"]
    assert norms["step"].tolist() == [0, 2]
    np.testing.assert_allclose(
        norms["value"], [np.linalg.norm(outputs[0].data), np.linalg.norm(outputs[2].data)], rtol=1e-6
    )
    hist = logdir.histograms().to_pandas()
    assert set(hist["tag"]) >= {"activations/0", "gradients/1", "weights/2.weight"}
    first = hist[(hist["tag"] == "activations/2") & (hist["step"] == 0)].iloc[0]
    assert sum(first["count"]) == outputs[0].data.size
