"""What TensorBoard shows of a logdir, as plain Python values, read with TensorBoard's own code.

``view(logdir)`` loads every run with TensorBoard's plugin EventMultiplexer (everything kept, no
sampling) and turns each tag into the values its dashboard plugin shows: scalars as floats,
histograms as (left, right, count) arrays, images and video as decoded pixels per frame, audio
as decoded samples, text as strings, PR curves, meshes and custom-scalar layouts as arrays and
parsed plugin protos, hparams as the parsed plugin data, graphs as GraphDefs and run metadata.
``projector(logdir)`` asks TensorBoard's projector plugin, through its HTTP routes, for the
embeddings it serves. Two logdirs look the same in TensorBoard when their views are equal.
"""

from __future__ import annotations

import io
import json
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import json_format
from PIL import Image
from tensorboard.backend.event_processing import plugin_event_multiplexer as pem
from tensorboard.util import tensor_util

#: Keep every event of every kind (TensorBoard's server would sample).
KEEP_ALL = {k: 0 for k in ("tensors", "scalars", "histograms", "images", "audio", "compressedHistograms")}


@dataclass
class Point:
    step: int
    wall_time: float
    value: Any


@dataclass
class Unreadable:
    """A point TensorBoard cannot decode (its ``make_ndarray`` raised this error)."""

    error: str


@dataclass
class Series:
    """One tag of one run: its plugin, decoded plugin content, and its points."""

    plugin: str
    content: Any
    display_name: str
    description: str
    points: list[Point] = field(default_factory=list)


@dataclass
class Run:
    series: dict[str, Series]
    graph: Any  # GraphDef or None
    run_metadata: dict[str, Any]  # tag -> RunMetadata


def view(logdir: str | Path) -> dict[str, Run]:
    """run name (as TensorBoard names it) -> what TensorBoard shows of that run."""
    mux = pem.EventMultiplexer(size_guidance=KEEP_ALL, purge_orphaned_data=False)
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    return {name: _run(mux.GetAccumulator(name)) for name in sorted(mux.Runs())}


def _run(acc: Any) -> Run:
    tags = acc.Tags()
    series = {}
    for tag in tags["tensors"]:
        md = acc.SummaryMetadata(tag)
        plugin = md.plugin_data.plugin_name
        s = Series(plugin, _content(plugin, md.plugin_data.content), md.display_name, md.summary_description)
        for e in acc.Tensors(tag):
            try:
                arr = tensor_util.make_ndarray(e.tensor_proto)
            except Exception as err:  # what TensorBoard cannot read is part of the view
                s.points.append(Point(e.step, e.wall_time, Unreadable(type(err).__name__)))
                continue
            s.points.append(Point(e.step, e.wall_time, _value(plugin, arr)))
        series[tag] = s
    graph = acc.Graph() if tags["graph"] else None
    return Run(series, graph, {t: acc.RunMetadata(t) for t in tags["run_metadata"]})


def _content(plugin: str, content: bytes) -> Any:
    """The plugin's own metadata proto, as a dict (empty for plugins without one)."""
    if plugin == "hparams":
        from tensorboard.plugins.hparams import plugin_data_pb2 as m

        return json_format.MessageToDict(m.HParamsPluginData.FromString(content))
    if plugin == "pr_curves":
        from tensorboard.plugins.pr_curve import plugin_data_pb2 as m

        return json_format.MessageToDict(m.PrCurvePluginData.FromString(content))
    if plugin == "mesh":
        from tensorboard.plugins.mesh import plugin_data_pb2 as m

        d = json_format.MessageToDict(m.MeshPluginData.FromString(content))
        if "jsonConfig" in d:
            d["jsonConfig"] = json.loads(d["jsonConfig"])
        return d
    if plugin == "text":
        from tensorboard.plugins.text import plugin_data_pb2 as m

        return json_format.MessageToDict(m.TextPluginData.FromString(content))
    return content


def _value(plugin: str, arr: np.ndarray) -> Any:
    if plugin == "scalars":
        return float(arr.item())
    if plugin == "images":
        # [width, height, encoded image, ...] as strings; each image decoded to its frames.
        return {"width": int(arr[0]), "height": int(arr[1]), "images": [decode_image(b) for b in arr[2:]]}
    if plugin == "audio":
        # Encoded clips; TensorBoard's dataclass_compat drops legacy audio's (empty) label column.
        return [decode_wav(clip) for clip in (arr if arr.ndim == 1 else arr[:, 0])]
    if plugin == "text":
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(arr) if arr.size else arr
    if plugin == "custom_scalars":
        from tensorboard.plugins.custom_scalar import layout_pb2

        return json_format.MessageToDict(layout_pb2.Layout.FromString(arr.item()))
    return arr


@dataclass
class Picture:
    """A decoded image: PIL's mode, its frames as RGBA arrays, and (GIF) the frame durations."""

    mode: str
    frames: list[np.ndarray]
    durations_ms: list[int]


def decode_image(data: bytes) -> Picture:
    img = Image.open(io.BytesIO(data))
    mode = img.mode  # of the first frame (Pillow may switch a GIF's later frames to RGB)
    frames, durations = [], []
    for i in range(getattr(img, "n_frames", 1)):
        img.seek(i)
        frames.append(np.asarray(img.convert("RGBA")))
        durations.append(img.info.get("duration", 0))
    return Picture(mode, frames, durations)


def decode_wav(data: bytes) -> dict[str, Any]:
    with wave.open(io.BytesIO(data)) as w:
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, w.getnchannels())
        return {"rate": w.getframerate(), "channels": w.getnchannels(), "width": w.getsampwidth(), "samples": samples}


# ------------------------------------------------------------------------------------------------
# The projector


@dataclass
class Embedding:
    config: dict[str, Any]  # the embedding's entry in the served config
    tensor: np.ndarray  # float32 [points, dims], as the projector receives it
    metadata: str | None  # the metadata TSV as served
    sprite: Picture | None


def projector(logdir: str | Path) -> dict[str, dict[str, Embedding]]:
    """run -> tensor_name -> what TensorBoard's projector plugin serves for it."""
    from tensorboard.backend.event_processing import data_provider
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.projector.projector_plugin import ProjectorPlugin
    from werkzeug.test import Client

    mux = pem.EventMultiplexer(size_guidance=KEEP_ALL)
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(logdir))
    plugin = ProjectorPlugin(base_plugin.TBContext(logdir=str(logdir), data_provider=provider))
    apps = plugin.get_plugin_apps()

    def get(route: str, **query: str) -> bytes:
        resp = Client(apps[route]).get(route, query_string=query)
        assert resp.status_code == 200, (route, query, resp.get_data(as_text=True))
        return resp.get_data()

    out: dict[str, dict[str, Embedding]] = {}
    for run in json.loads(get("/runs")):
        config = json.loads(get("/info", run=run))
        out[run] = {}
        for entry in config.get("embeddings", []):
            name = entry["tensorName"]
            dims = entry.get("tensorShape")
            tensor = np.frombuffer(get("/tensor", run=run, name=name), dtype="<f4")
            if dims:
                tensor = tensor.reshape([int(d) for d in dims])
            meta = get("/metadata", run=run, name=name).decode() if "metadataPath" in entry else None
            sprite = decode_image(get("/sprite_image", run=run, name=name)) if "sprite" in entry else None
            out[run][name] = Embedding(entry, tensor, meta, sprite)
    return out
