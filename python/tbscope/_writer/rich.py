"""``SummaryWriter``'s rich kinds: images, video, audio, text, PR curves, custom-scalar layouts,
meshes, graphs and projector embeddings. Each is encoded by :mod:`tbscope._summary` (imported on
first use: a writer of scalars never loads Pillow or numpy's encoders) and written as one
``Summary`` (or event) into the writer's current run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tbscope._writer.sinks import _Sink
from tbscope._writer.values import ArrayLike, _step, _to_numpy, _walltime


class RichKinds:
    """The ``add_*`` methods of the rich kinds, a base of :class:`SummaryWriter`, which sets
    the attributes declared here."""

    log_dir: str
    layout: str
    _directory: str
    _remote: bool
    _w: _Sink

    def _summary(self, data: bytes, global_step: Any, walltime: Any) -> None:
        self._w.summary(data, _step(global_step), _walltime(walltime))

    def add_image(
        self,
        tag: str,
        img_tensor: ArrayLike,
        global_step: int | None = None,
        walltime: float | None = None,
        dataformats: str = "CHW",
    ) -> None:
        """Log an image (PNG-encoded; needs Pillow). ``dataformats``: CHW, HWC, HW, ..."""
        from tbscope import _summary

        self._summary(_summary.image(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_images(
        self,
        tag: str,
        img_tensor: ArrayLike,
        global_step: int | None = None,
        walltime: float | None = None,
        dataformats: str = "NCHW",
    ) -> None:
        """Log a batch of images as one grid image. ``dataformats``: NCHW, NHWC, ..."""
        from tbscope import _summary

        self._summary(_summary.images(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_image_with_boxes(
        self,
        tag: str,
        img_tensor: ArrayLike,
        box_tensor: ArrayLike,
        global_step: int | None = None,
        walltime: float | None = None,
        rescale: float = 1,
        dataformats: str = "CHW",
        labels: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Log an image with boxes ``[x1, y1, x2, y2]`` (one row per box) drawn on it."""
        from tbscope import _summary

        if isinstance(rescale, str):  # tensorboardX's positional order: dataformats, labels
            if dataformats != "CHW" and labels is None:
                labels = dataformats
            dataformats, rescale = rescale, 1
        if labels is not None:
            if isinstance(labels, str):
                labels = [labels]
            if len(labels) != _to_numpy(box_tensor).shape[0]:
                labels = None  # torch drops labels that do not match the boxes
        data = _summary.image_boxes(
            tag,
            img_tensor,
            box_tensor,
            rescale=rescale,
            dataformats=dataformats,
            labels=None if labels is None else list(labels),
        )
        self._summary(data, global_step, walltime)

    def add_figure(
        self, tag: str, figure: Any, global_step: int | None = None, close: bool = True, walltime: float | None = None
    ) -> None:
        """Log a matplotlib figure (or a list of them) as an image."""
        from tbscope import _summary

        self._summary(_summary.figure(tag, figure, close=close), global_step, walltime)

    def add_video(
        self,
        tag: str,
        vid_tensor: ArrayLike,
        global_step: int | None = None,
        fps: float = 4,
        walltime: float | None = None,
        dataformats: str = "NTCHW",
    ) -> None:
        """Log a video, shape (N, T, C, H, W) by default (``dataformats`` reorders)."""
        from tbscope import _summary

        order = dataformats.upper()
        if order != "NTCHW":
            if sorted(order) != sorted("NTCHW"):
                raise ValueError(f"add_video: dataformats must be a permutation of 'NTCHW', not {dataformats!r}")
            vid_tensor = _to_numpy(vid_tensor).transpose([order.index(c) for c in "NTCHW"])
        self._summary(_summary.video(tag, vid_tensor, fps=fps), global_step, walltime)

    def add_audio(
        self,
        tag: str,
        snd_tensor: ArrayLike,
        global_step: int | None = None,
        sample_rate: int = 44100,
        walltime: float | None = None,
    ) -> None:
        """Log audio samples in [-1, 1], shape (L,) or (1, L), as WAV."""
        from tbscope import _summary

        self._summary(_summary.audio(tag, snd_tensor, sample_rate=sample_rate), global_step, walltime)

    def add_text(
        self, tag: str, text_string: str, global_step: int | None = None, walltime: float | None = None
    ) -> None:
        """Log a (markdown) text. With ``layout="torch"`` the tag gets torch's ``/text_summary``
        suffix, so tools keyed on torch's tag names find it; by default the tag is kept as given."""
        from tbscope import _summary

        if self.layout == "torch":
            tag = f"{tag}/text_summary"
        self._summary(_summary.text(tag, text_string), global_step, walltime)

    def add_pr_curve(
        self,
        tag: str,
        labels: ArrayLike,
        predictions: ArrayLike,
        global_step: int | None = None,
        num_thresholds: int = 127,
        weights: ArrayLike | None = None,
        walltime: float | None = None,
    ) -> None:
        """Log a precision-recall curve from binary ``labels`` and ``predictions`` in [0, 1]."""
        from tbscope import _summary

        self._summary(
            _summary.pr_curve(tag, labels, predictions, num_thresholds=num_thresholds, weights=weights),
            global_step,
            walltime,
        )

    def add_pr_curve_raw(
        self,
        tag: str,
        true_positive_counts: ArrayLike,
        false_positive_counts: ArrayLike,
        true_negative_counts: ArrayLike,
        false_negative_counts: ArrayLike,
        precision: ArrayLike,
        recall: ArrayLike,
        global_step: int | None = None,
        num_thresholds: int = 127,
        weights: ArrayLike | None = None,
        walltime: float | None = None,
    ) -> None:
        """Log a precision-recall curve from counts you computed."""
        from tbscope import _summary

        data = _summary.pr_curve_raw(
            tag,
            true_positive_counts,
            false_positive_counts,
            true_negative_counts,
            false_negative_counts,
            precision,
            recall,
            num_thresholds=num_thresholds,
            weights=weights,
        )
        self._summary(data, global_step, walltime)

    def add_custom_scalars(self, layout: Mapping[str, Mapping[str, Sequence[Any]]]) -> None:
        """Lay out the Custom Scalars dashboard:
        ``{category: {chart: ["Multiline" | "Margin", [tags]]}}``."""
        from tbscope import _summary

        self._w.summary(_summary.custom_scalars(layout), None, None)

    def add_custom_scalars_multilinechart(
        self, tags: Sequence[str], category: str = "default", title: str = "untitled"
    ) -> None:
        """One Custom Scalars chart with a line per tag."""
        self.add_custom_scalars({category: {title: ["Multiline", list(tags)]}})

    def add_custom_scalars_marginchart(
        self, tags: Sequence[str], category: str = "default", title: str = "untitled"
    ) -> None:
        """One Custom Scalars margin chart: ``tags`` = [value, lower, upper]."""
        if len(tags) != 3:
            raise ValueError(f"add_custom_scalars_marginchart needs 3 tags (value, lower, upper), got {len(tags)}")
        self.add_custom_scalars({category: {title: ["Margin", list(tags)]}})

    def add_mesh(
        self,
        tag: str,
        vertices: ArrayLike,
        colors: ArrayLike | None = None,
        faces: ArrayLike | None = None,
        config_dict: dict[str, Any] | None = None,
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        """Log a 3-D mesh or point cloud: vertices (B, N, 3), colors (B, N, 3), faces (B, F, 3)."""
        from tbscope import _summary

        for data in _summary.mesh(tag, vertices, colors, faces, config_dict):
            self._summary(data, global_step, walltime)

    def add_graph(
        self, model: Any, input_to_model: Any = None, verbose: bool = False, use_strict_trace: bool = True
    ) -> None:
        """Log a model graph (a torch module traced with ``input_to_model`` by torch's tracer, or a
        GraphDef). A traced module also gets the tracer's run metadata, as torch writes it."""
        from tbscope import _summary

        for event in _summary.graph_events(model, input_to_model, verbose, use_strict_trace):
            self._w.event(event)

    def add_onnx_graph(self, onnx_model_file: Any = None, *, prototxt: Any = None) -> None:
        """Log the graph of an ONNX model file (a path), converted by torch's converter (or
        tensorboardX's), which needs the ``onnx`` package. ``prototxt`` is torch's name for
        the argument."""
        from tbscope import _summary

        path = onnx_model_file if onnx_model_file is not None else prototxt
        if path is None:
            raise TypeError("add_onnx_graph() needs the path of an ONNX model file")
        self._w.event(_summary.onnx_graph_event(path))

    def add_openvino_graph(self, xmlname: Any) -> None:
        """Not supported (tensorboardX converts OpenVINO XML with its own code)."""
        raise NotImplementedError(
            "tbscope.SummaryWriter cannot convert OpenVINO graphs; write it with tensorboardX's "
            "SummaryWriter.add_openvino_graph into the same log_dir (TensorBoard merges the files)"
        )

    def add_embedding(
        self,
        mat: ArrayLike,
        metadata: Sequence[Any] | None = None,
        label_img: ArrayLike | None = None,
        global_step: int | None = None,
        tag: str = "default",
        metadata_header: Sequence[str] | None = None,
    ) -> None:
        """Write projector files (tensors, metadata TSV, sprite) for TensorBoard's projector."""
        if self._remote:
            raise NotImplementedError(
                f"add_embedding writes projector files next to the event files, which needs a local "
                f"log_dir, not {self.log_dir!r}: write the embedding with a local SummaryWriter and upload it"
            )
        from tbscope import _summary

        _summary.write_embedding(self._directory, mat, metadata, label_img, global_step, tag, metadata_header)
