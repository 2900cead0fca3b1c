"""The hparams plugin's summaries (tensorboard/plugins/hparams: api.proto, plugin_data.proto,
google.protobuf.Value): the experiment, a session's start (its hyperparameters) and its end.
Semantics follow ``torch.utils.tensorboard.summary.hparams``, with the differences listed in
``docs/writing-kinds.md``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tbscope import _pb
from tbscope._summary.builders import _is_torch_tensor, _summary, _value, tensor_metadata, to_numpy

_HPARAMS_PLUGIN = "hparams"
EXPERIMENT_TAG = "_hparams_/experiment"
SESSION_START_INFO_TAG = "_hparams_/session_start_info"
SESSION_END_INFO_TAG = "_hparams_/session_end_info"
_HP_TYPE = {str: 1, bool: 2, float: 3}  # DATA_TYPE_STRING, DATA_TYPE_BOOL, DATA_TYPE_FLOAT64
_STATUS_SUCCESS = 1


def _hparam_value(name: str, v: object) -> str | bool | float:
    """A hyperparameter as one of the three kinds TensorBoard knows: str, bool or float."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, str):
        return str(v)  # np.str_ → str, so the value's type names its kind
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if _is_torch_tensor(v) or hasattr(v, "__array__"):
        arr = to_numpy(v)
        if arr.size == 1:
            return _hparam_value(name, arr.reshape(()).item())
    if callable(v):
        # Like tensorboardX: an activation function or class is recorded by its name.
        return str(getattr(v, "__name__", v))
    raise TypeError(
        f"hparams: {name!r} is a {type(v).__name__}; a hyperparameter value must be a bool, int, float, "
        "str, a one-element tensor or array, or None (skipped)"
    )


def _struct_value(v: str | bool | float) -> bytes:
    # google.protobuf.Value: number_value=2, string_value=3, bool_value=4 (a oneof: keep defaults).
    if isinstance(v, bool):
        return _pb.int_field(4, v, keep_default=True)
    if isinstance(v, str):
        return _pb.bytes_field(3, v, keep_default=True)
    return _pb.double_field(2, v, keep_default=True)


def _hparams_summary(tag: str, member: int, body: bytes) -> bytes:
    # HParamsPluginData{version=1 (0, left out), experiment=2 | session_start_info=3 | session_end_info=4}
    content = _pb.message_field(member, body)
    return _summary(_value(tag, metadata=tensor_metadata(_HPARAMS_PLUGIN, content)))


def hparams(
    hparam_dict: Mapping[str, object],
    metric_dict: Mapping[str, object],
    hparam_domain_discrete: Mapping[str, Sequence[object]] | None = None,
) -> tuple[bytes, bytes, bytes]:
    """The three hparams-plugin summaries: (experiment, session_start_info, session_end_info).

    Values are typed: bool → DATA_TYPE_BOOL, int/float → DATA_TYPE_FLOAT64, str →
    DATA_TYPE_STRING (one-element tensors by their value, callables by their name; None is
    skipped). ``hparam_domain_discrete`` gives the allowed values of some hparams (same type as
    the value); other hparams get no domain, so TensorBoard computes it from all runs (a
    one-run interval would hide the other runs' values in its filters). Every key of
    ``metric_dict`` becomes a metric of the experiment; the session ends with STATUS_SUCCESS.
    """
    if not isinstance(hparam_dict, Mapping):
        raise TypeError(f"hparams: hparam_dict must be a dict of name -> value, got {type(hparam_dict).__name__}")
    if not isinstance(metric_dict, Mapping):
        raise TypeError(f"hparams: metric_dict must be a dict of metric tag -> value, got {type(metric_dict).__name__}")
    domains = hparam_domain_discrete or {}
    if not isinstance(domains, Mapping):
        raise TypeError(
            f"hparams: hparam_domain_discrete must be a dict of name -> list of values, got {type(domains).__name__}"
        )
    values: dict[str, str | bool | float] = {}
    for name, raw in hparam_dict.items():
        if not isinstance(name, str):
            raise TypeError(f"hparams: hyperparameter names must be str, got {name!r}")
        if raw is not None:
            values[name] = _hparam_value(name, raw)
    infos = []
    for name, value in values.items():
        kind = type(value)
        info = _pb.bytes_field(1, name) + _pb.int_field(4, _HP_TYPE[kind])  # HParamInfo.name, .type
        if name in domains:
            allowed = domains[name]
            if isinstance(allowed, (str, bytes)) or not isinstance(allowed, Sequence):
                raise TypeError(f"hparams: hparam_domain_discrete[{name!r}] must be a list of values, got {allowed!r}")
            typed = [_hparam_value(name, d) for d in allowed]
            if any(type(d) is not kind for d in typed):
                raise TypeError(
                    f"hparams: hparam_domain_discrete[{name!r}] = {list(allowed)!r} must hold values of the same "
                    f"type as hparam_dict[{name!r}] = {hparam_dict[name]!r}"
                )
            listed = b"".join(_pb.message_field(1, _struct_value(d)) for d in typed)  # ListValue.values
            info += _pb.message_field(5, listed)  # HParamInfo.domain_discrete
        infos.append(_pb.message_field(4, info))  # Experiment.hparam_infos
    for name in domains:
        if name not in values:
            raise ValueError(f"hparams: hparam_domain_discrete names {name!r}, which is not in hparam_dict")
    metrics = []
    for tag in metric_dict:
        if not isinstance(tag, str):
            raise TypeError(f"hparams: metric names must be str tags, got {tag!r}")
        # MetricInfo.name = MetricName{group=1, tag=2}
        metrics.append(_pb.message_field(5, _pb.message_field(1, _pb.bytes_field(2, tag))))
    experiment = _hparams_summary(EXPERIMENT_TAG, 2, b"".join(infos) + b"".join(metrics))
    entries = b"".join(
        # SessionStartInfo.hparams: map<string, Value>, each entry a message {key=1, value=2}.
        _pb.message_field(1, _pb.bytes_field(1, name) + _pb.message_field(2, _struct_value(value)))
        for name, value in values.items()
    )
    start = _hparams_summary(SESSION_START_INFO_TAG, 3, entries)
    end = _hparams_summary(SESSION_END_INFO_TAG, 4, _pb.int_field(1, _STATUS_SUCCESS))
    return experiment, start, end
