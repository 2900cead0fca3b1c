"""The shapes of the API's answers, for the OpenAPI document (and so for clients and tests).

Answers are encoded directly from Arrow and numpy columns (no model is built per request); these
classes only describe them. A float in a column may be the string ``"NaN"``, ``"Infinity"`` or
``"-Infinity"``.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, Field

Num = Union[float, Literal["NaN", "Infinity", "-Infinity"]]
OptNum = Optional[Num]


class ErrorBody(BaseModel):
    status: int = Field(description="the HTTP status")
    code: Literal[
        "bad_request",
        "unauthorized",
        "forbidden",
        "not_found",
        "method_not_allowed",
        "not_acceptable",
        "too_large",
        "unsupported_media_type",
        "timeout",
        "internal",
    ]
    message: str = Field(description="what went wrong and what to do")


class Error(BaseModel):
    error: ErrorBody


class Loading(BaseModel):
    done: bool
    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int


class LogdirInfo(BaseModel):
    name: str | None
    path: str
    exists: bool


class KindCounts(BaseModel):
    scalars: int
    histograms: int
    images: int
    audio: int
    text: int
    tensors: int
    pr_curves: int
    hparams: bool
    custom_scalars: bool
    embeddings: int = Field(description="the projector's embeddings (rows of api/v1/embeddings)")


class Status(BaseModel):
    version: str
    generation: int = Field(description="grows by one each time a reload finds something new")
    loading: Loading
    logdirs: list[LogdirInfo]
    token_required: bool
    reload_interval: float
    kinds: KindCounts


class Changes(BaseModel):
    generation: int
    runs: list[str]
    kinds: list[str]
    reset: bool = Field(description="true when the generation asked about is too old: refresh everything")


class RunColumns(BaseModel):
    run: list[str]
    color: list[str]
    start_time: list[OptNum]
    last_wall_time: list[OptNum]
    max_step: list[int | None]
    files: list[int | None]
    bytes: list[int | None]
    problems: list[int]


class Runs(BaseModel):
    total: int
    offset: int
    loading: bool
    columns: RunColumns


class TagColumns(BaseModel):
    tag: list[str]
    runs: list[int]
    points: list[int]


class Tags(BaseModel):
    kind: str
    loading: bool
    columns: TagColumns


class SeriesColumns(BaseModel):
    run: list[str]
    tag: list[str]
    kind: list[str]
    points: list[int]
    min_step: list[int | None]
    max_step: list[int | None]
    display_name: list[str]
    description: list[str]


class SeriesList(BaseModel):
    kind: str | None
    loading: bool
    columns: SeriesColumns


class ScalarColumns(BaseModel):
    step: list[int]
    wall_time: list[OptNum]
    value: list[Num]
    smoothed: list[Num] | None = None
    relative: list[OptNum] | None = None


class ScalarSeries(BaseModel):
    run: str
    color: str
    total_points: int = Field(description="points of the series (inside the window) before downsampling")
    columns: ScalarColumns


class Scalars(BaseModel):
    tag: str
    x: Literal["step", "relative", "wall_time"]
    loading: bool
    series: list[ScalarSeries]


class ScalarsQuery(BaseModel):
    """The body of ``POST scalars``: the query parameters of ``GET scalars``."""

    tag: str = Field(min_length=1)
    runs: list[str] | None = Field(default=None, max_length=100_000)
    runs_filter: str | None = None
    points: int = Field(default=1000, ge=0, le=100_000)
    x: Literal["step", "relative", "wall_time"] = "step"
    smoothing: float | None = Field(default=None, ge=0.0, lt=1.0)
    step_min: int | None = None
    step_max: int | None = None
    x_min: float | None = None
    x_max: float | None = None


class HistogramColumns(BaseModel):
    step: list[int]
    wall_time: list[OptNum]
    left: list[list[Num]]
    right: list[list[Num]]
    count: list[list[Num]]


class Histograms(BaseModel):
    run: str
    tag: str
    loading: bool
    columns: HistogramColumns


class DistributionColumns(BaseModel):
    step: list[int]
    wall_time: list[OptNum]
    values: list[list[Num]]


class Distributions(BaseModel):
    run: str
    tag: str
    loading: bool
    basis_points: list[int]
    columns: DistributionColumns


class ImageColumns(BaseModel):
    step: list[int]
    wall_time: list[OptNum]
    index: list[int]
    width: list[int]
    height: list[int]
    content_type: list[str]
    key: list[str]


class Images(BaseModel):
    run: str
    tag: str
    loading: bool
    columns: ImageColumns


class AudioColumns(BaseModel):
    step: list[int]
    wall_time: list[OptNum]
    index: list[int]
    sample_rate: list[OptNum]
    content_type: list[str]
    label: list[str]
    key: list[str]


class Audio(BaseModel):
    run: str
    tag: str
    loading: bool
    columns: AudioColumns


class TextColumns(BaseModel):
    step: list[int]
    wall_time: list[OptNum]
    text: list[str | list[str]]
    shape: list[list[int]]


class Text(BaseModel):
    run: str
    tag: str
    loading: bool
    columns: TextColumns


class TensorColumns(BaseModel):
    step: list[int]
    wall_time: list[OptNum]
    dtype: list[str]
    shape: list[list[int]]
    min: list[OptNum]
    max: list[OptNum]
    mean: list[OptNum]
    std: list[OptNum]
    values: list[list[Any] | None]


class Tensors(BaseModel):
    run: str
    tag: str
    loading: bool
    columns: TensorColumns


class PrCurveColumns(BaseModel):
    step: list[int]
    wall_time: list[OptNum]
    thresholds: list[list[Num]]
    precision: list[list[Num]]
    recall: list[list[Num]]
    tp: list[list[Num]]
    fp: list[list[Num]]
    tn: list[list[Num]]
    fn: list[list[Num]]


class PrCurves(BaseModel):
    run: str
    tag: str
    loading: bool
    columns: PrCurveColumns


class HparamInfo(BaseModel):
    name: str
    type: Literal["float", "int", "string", "bool"]
    values: list[str | bool | float | int] | None = None


class MetricInfo(BaseModel):
    tag: str
    run_suffix: str | None = None
    column: str


class Hparams(BaseModel):
    loading: bool
    hparams: list[HparamInfo]
    metrics: list[MetricInfo]
    columns: dict[str, list[Any]] = Field(description="run, hp:<name>..., metric:<...>...")


class CustomScalars(BaseModel):
    loading: bool
    layouts: dict[str, dict[str, Any]]
    merged: dict[str, Any]


class HealthColumns(BaseModel):
    file: list[str]
    run: list[str]
    offset: list[int]
    end: list[int]
    severity: list[str]
    reason: list[str]


class Health(BaseModel):
    ok: bool
    loading: bool
    columns: HealthColumns


class SqlQuery(BaseModel):
    q: str = Field(min_length=1, max_length=100_000, description="one SELECT statement")
    limit: int = Field(default=10_000, ge=1, le=100_000)


class SqlResult(BaseModel):
    columns: dict[str, list[Any]]
    truncated: bool
