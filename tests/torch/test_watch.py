"""tbscope.torch.watch on real torch modules, with real autograd.

Expected values come from torch itself (the modules run again without hooks, gradients from
autograd with retain_grad), and what the writers wrote is read back with TensorBoard's
EventMultiplexer. tests/python/test_watch.py checks the hook logic on stand-ins; these check it
against the real Module API, whose hook calling conventions are what matter.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tbscope
import torch
from compare import assert_same
from tbscope import SummaryWriter
from tbscope.torch import watch
from tensorboard_view import Unreadable, view
from torch.utils.tensorboard import SummaryWriter as TorchWriter
from watch_util import RecordingWriter


def mlp() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def test_values_are_the_modules_outputs_gradients_and_parameters():
    model, writer = mlp(), RecordingWriter()
    handle = watch(model, writer)
    x = torch.randn(5, 4)
    out = model(x)
    (out**2).sum().backward()
    with torch.no_grad():  # the same forward pass again, by hand, without hooks
        h0 = x @ model[0].weight.T + model[0].bias
        h1 = h0.clamp(min=0)
        h2 = h1 @ model[2].weight.T + model[2].bias
    # d(sum(out^2))/d(out) = 2*out, then back through the layers by hand.
    g2 = 2 * h2
    g1 = g2 @ model[2].weight.detach()
    g0 = g1 * (h0 > 0)
    expected = {
        "activations/0": h0,
        "activations/1": h1,
        "activations/2": h2,
        "gradients/2": g2,
        "gradients/1": g1,
        "gradients/0": g0,
    }
    for name, p in model.named_parameters():
        expected[f"weights/{name}"] = p.detach()
    assert set(writer.histograms) == set(expected)
    for tag, value in expected.items():
        ((step, logged),) = writer.histograms[tag]
        assert step == 0
        np.testing.assert_allclose(logged, value.numpy(), rtol=1e-6, atol=1e-7, err_msg=tag)
        kind, name = tag.split("/", 1)
        ((_, norm),) = writer.scalars[f"{kind}_norm/{name}"]
        assert norm == pytest.approx(float(torch.linalg.vector_norm(value.double())), rel=1e-6)
    handle.remove()
    for module in model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks and not module._backward_hooks


def test_training_loop_read_back_by_tensorboard(tmp_path):
    """A real loop: SGD steps, every=5, the writer's global_step, raw tensors; TensorBoard reads
    exactly the parameters the model had at each logged step."""
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    snapshots = {}
    with SummaryWriter(tmp_path) as writer, watch(model, writer, modules="2", every=5, raw=True) as handle:
        for step in range(12):
            writer.global_step = 100 + step
            if step % 5 == 0:
                snapshots[100 + step] = model[2].weight.detach().clone()
            loss = model(torch.randn(8, 4)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert handle.calls == 12 and not handle.active
    run = view(tmp_path)["."]
    assert sorted(run.series) == sorted(
        f"{kind}/{name}"
        for kind in (
            "activations",
            "activations_norm",
            "activations_raw",
            "gradients",
            "gradients_norm",
            "gradients_raw",
            "weights",
            "weights_norm",
            "weights_raw",
        )
        for name in (("2.weight", "2.bias") if kind.startswith("weights") else ("2",))
    )
    raw = run.series["weights_raw/2.weight"]
    assert raw.plugin == "tensor"
    assert [p.step for p in raw.points] == [100, 105, 110]
    for p in raw.points:
        np.testing.assert_array_equal(p.value, snapshots[p.step].numpy())
    norms = run.series["weights_norm/2.weight"]
    assert [p.value for p in norms.points] == [
        pytest.approx(float(torch.linalg.vector_norm(snapshots[s].double())), rel=1e-6) for s in (100, 105, 110)
    ]
    hist = run.series["weights/2.weight"]
    assert hist.plugin == "histograms" and all(p.value[:, 2].sum() == 6 for p in hist.points)
    # tbscope's reader agrees.
    scalars = tbscope.read_scalars(tmp_path)
    assert scalars[scalars["tag"] == "weights_norm/2.weight"]["step"].tolist() == [100, 105, 110]


def test_torchs_writer_and_tbscopes_write_the_same(tmp_path):
    """watch() with torch's own SummaryWriter and with tbscope's: the same model and data give
    the same values in TensorBoard (histograms bucketed alike, norms, raw tensors)."""
    data = [torch.randn(6, 4, generator=torch.Generator().manual_seed(i)) for i in range(4)]

    def run(writer) -> None:
        model = mlp()
        with watch(model, writer, every=2, raw=True):
            for x in data:
                model(x).sum().backward()
        writer.close()

    run(TorchWriter(str(tmp_path / "torch")))
    run(SummaryWriter(tmp_path / "ours"))
    theirs, ours = view(tmp_path / "torch"), view(tmp_path / "ours")
    for v in (theirs, ours):  # each writer stamps its own wall times
        for s in v["."].series.values():
            for p in s.points:
                p.wall_time = None
    assert_same(theirs, ours)
    # 3 modules x (activations, gradients) x (histogram, norm, raw) + 4 parameters x 3 forms
    assert len(theirs["."].series) == 3 * 2 * 3 + 4 * 3


def test_structured_outputs_of_real_modules():
    """An LSTM returns (output, (h, c)): one tag per tensor, /0, /1/0, /1/1; its backward hook
    gets a gradient for each output."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4, batch_first=True)
    model = torch.nn.Sequential()
    model.add_module("lstm", lstm)
    writer = RecordingWriter()
    watch(model, writer, what="activations")
    x = torch.randn(2, 5, 3)
    out, (h, c) = model(x)
    assert sorted(writer.histograms) == ["activations/lstm/0", "activations/lstm/1/0", "activations/lstm/1/1"]
    np.testing.assert_array_equal(writer.histograms["activations/lstm/1/1"][0][1], c.detach().numpy())
    np.testing.assert_array_equal(writer.histograms["activations/lstm/0"][0][1], out.detach().numpy())


def test_inplace_activation_limit_is_torchs_and_the_documented_way_around_works():
    """docs/writing-kinds.md: full backward hooks make torch raise during the forward pass when a
    later in-place op changes a hooked module's output; watching activations and weights only
    works."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(inplace=True), torch.nn.Linear(4, 1))
    with watch(model, RecordingWriter()), pytest.raises(RuntimeError, match="modified inplace"):
        model(torch.randn(2, 4))  # the forward pass already raises
    writer = RecordingWriter()
    with watch(model, writer, what=("activations", "weights")):
        model(torch.randn(2, 4)).sum().backward()
    assert "activations/1" in writer.histograms and "weights/0.weight" in writer.histograms


def test_first_layer_backward_warning_is_filtered_and_nothing_else():
    model = mlp()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with watch(model, RecordingWriter()):
            model(torch.randn(2, 4)).sum().backward()
            warnings.warn("another warning", UserWarning, stacklevel=2)
    assert [str(w.message) for w in caught] == ["another warning"]


def test_bfloat16_and_half_models(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3)).to(torch.bfloat16)
    with SummaryWriter(tmp_path) as writer, watch(model, writer, raw=True):
        x = torch.randn(2, 4, dtype=torch.bfloat16)
        out = model(x)
        out.float().sum().backward()
    run = view(tmp_path)["."]
    counts = run.series["activations/0"].points[0].value[:, 2]
    assert counts.sum() == 6
    norm = run.series["activations_norm/0"].points[0].value
    assert norm == pytest.approx(float(torch.linalg.vector_norm(out.detach().double())), rel=1e-6)
    # TensorBoard cannot decode bfloat16 tensors without TensorFlow; tbscope's reader can.
    assert isinstance(run.series["activations_raw/0"].points[0].value, Unreadable)
    tensors = tbscope.scan(tmp_path, tags="activations_raw/0").tensors()
    assert tensors.to_arrow().column("dtype").to_pylist() == ["bfloat16"]
    np.testing.assert_array_equal(tensors.values()[0], out.detach().float().numpy())  # widened exactly


def test_to_numpy_on_real_tensors():
    from tbscope._summary import to_numpy

    t = torch.tensor([1.5, -2.0], dtype=torch.bfloat16, requires_grad=True)
    arr = to_numpy(t)
    assert arr.dtype.name == "bfloat16"  # ml_dtypes is installed here
    np.testing.assert_array_equal(arr.astype(np.float32), [1.5, -2.0])
    z = torch.tensor([1 + 2j, 3 - 1j]).conj()  # a lazily conjugated view
    np.testing.assert_array_equal(to_numpy(z), [1 - 2j, 3 + 1j])
    strided = torch.arange(12.0).reshape(3, 4).T
    np.testing.assert_array_equal(to_numpy(strided), np.arange(12.0).reshape(3, 4).T)
    f8 = torch.tensor([0.5, -2.0, 448.0]).to(torch.float8_e4m3fn)
    np.testing.assert_array_equal(to_numpy(f8), np.array([0.5, -2.0, 448.0], dtype=np.float32))
    assert to_numpy([torch.tensor(1.0), torch.tensor(2.0)]).tolist() == [1.0, 2.0]
