"""Response bodies: JSON (orjson, numpy columns without a Python loop when they are finite) with
non-finite floats as the strings TensorBoard uses, and Arrow IPC streams."""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

if TYPE_CHECKING:
    import pyarrow as pa

ARROW = "application/vnd.apache.arrow.stream"
_NONFINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def floats(values: Any) -> Any:
    """A float column for JSON: the numpy array itself when every value is finite (orjson
    writes it natively), else a list with NaN, inf and -inf as strings."""
    import numpy as np

    arr = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(arr)
    if not bad.any():
        return arr
    out: list[Any] = arr.tolist()
    for i in np.flatnonzero(bad):
        v = arr[i]
        out[i] = "NaN" if v != v else _NONFINITE[float(v)]
    return out


def float_column(col: Any) -> Any:
    """A nullable Arrow float column for JSON: nulls as NaN, then as :func:`floats`."""
    return floats(col.fill_null(float("nan")).to_numpy())


def clean(obj: Any) -> Any:
    """Any JSON-able value with non-finite floats as strings (for small nested values)."""
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "NaN" if obj != obj else _NONFINITE[obj]
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    return obj


def _default(obj: Any) -> Any:
    """What orjson does not know: timestamps (pandas, numpy), decimals, anything else as text."""
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    if hasattr(obj, "__float__"):
        return clean(float(obj))
    return str(obj)


def dumps(obj: Any) -> bytes:
    import orjson

    return orjson.dumps(obj, default=_default, option=orjson.OPT_SERIALIZE_NUMPY)


#: What answers that follow the data say about caching: keep a copy, but revalidate it (ETag).
REVALIDATE = "no-cache"


class NotModified(Exception):
    """The client's copy is current: raised by :func:`fresh` and :func:`revalidate` before any
    work on the answer, and answered 304 by the app (:func:`tbscope.server.errors.install`) or
    by the front (:mod:`tbscope.server.front`)."""

    def __init__(self, tag: str, cache_control: str = REVALIDATE) -> None:
        super().__init__(tag)
        self.tag = tag
        self.cache_control = cache_control

    def response(self) -> Response:
        return Response(status_code=304, headers={"ETag": self.tag, "Cache-Control": self.cache_control})


def etag(request: Request, *state: object) -> str:
    """Entity tag of an answer: what it shows besides the request (the data generation, whether
    the first load is done, the stamps of the files it reads) and the request (path, query and
    Accept)."""
    key = "\0".join([*map(str, state), request.url.path, request.url.query, request.headers.get("accept", "")])
    return '"' + hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest() + '"'


def revalidate(request: Request, tag: str, cache_control: str = REVALIDATE) -> str:
    """``tag``, for the answer's ETag header; raises :class:`NotModified` when the request's
    If-None-Match holds it (a 304 with that header and ``cache_control``)."""
    if request.headers.get("if-none-match") == tag:
        raise NotModified(tag, cache_control)
    return tag


def fresh(request: Request, *state: object) -> str:
    """The ETag of an answer showing ``state`` (see :func:`etag`), checked against the
    request's copy: the preamble of every endpoint whose answer can be revalidated."""
    return revalidate(request, etag(request, *state))


def json_response(body: Any, tag: str | None = None, status: int = 200) -> Response:
    headers = {"Cache-Control": REVALIDATE}
    if tag:
        headers["ETag"] = tag
    return Response(dumps(body), status_code=status, media_type="application/json", headers=headers)


def arrow_bytes(table: pa.Table) -> pa.Buffer:
    """``table`` as one Arrow IPC stream."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


def arrow_response(table: pa.Table, tag: str | None = None) -> Response:
    return body_response(arrow_bytes(table), ARROW, tag)


def body_response(body: Any, media_type: str, tag: str | None = None) -> Response:
    """An encoded body (bytes or an Arrow buffer) as a response."""
    headers = {"Cache-Control": REVALIDATE}
    if tag:
        headers["ETag"] = tag
    # A buffer goes out as a memoryview: no copy into a bytes object.
    return Response(body if isinstance(body, bytes) else memoryview(body), media_type=media_type, headers=headers)


def wants_arrow(request: Request) -> bool:
    return ARROW in request.headers.get("accept", "")
