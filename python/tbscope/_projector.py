"""Projector embeddings: the files TensorBoard's projector plugin reads, and projections of them.

The projector reads files, not events. A run directory (or the logdir itself, as run ``.``) may
hold ``projector_config.pbtxt``, a text-format ``ProjectorConfig``; a copy under
``<run>/plugins/org_tensorflow_tensorboard_projector/`` takes precedence, as in TensorBoard.
Each ``embeddings`` entry names a tensor file (TSV of floats, one row per point, or raw
little-endian float32 with ``tensor_shape``), an optional metadata TSV (a header row exactly
when the first line has a tab) and an optional sprite (thumbnails tiled row by row,
``single_image_dim`` = width, height). Asset paths resolve against the config's directory and
may not leave it (TensorBoard's rule), so nothing outside the logdir is ever read.

Embeddings held only in a TensorFlow checkpoint (``model_checkpoint_path`` without a
``tensor_path``) need TensorFlow to read and are not listed.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa

__all__ = ["Embedding", "EmbeddingInfo", "embedding_infos", "parse_config", "project"]

CONFIG_NAME = "projector_config.pbtxt"
ASSETS_DIR = os.path.join("plugins", "org_tensorflow_tensorboard_projector")
METHODS = ("pca", "tsne", "umap")


# ------------------------------------------------------------------------------------------------
# Text-format protobuf: just what ProjectorConfig needs (messages, strings, integers, lists)


class ConfigError(ValueError):
    """A projector config that is not valid text format; the message has line and column."""


_TOKEN = re.compile(
    r"""(?P<space>[ \t\r\n]+|\#[^\n]*)
      |(?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      |(?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?)[fF]?)
      |(?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
      |(?P<punct>[:{}<>\[\],;])""",
    re.VERBOSE,
)

#: Nesting a config may have (ProjectorConfig needs 2): deeper is an error, not a stack overflow.
MAX_DEPTH = 32

_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def _unquote(tok: str) -> bytes:
    body = tok[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out += _ESCAPES[nxt].encode()
            i += 2
        elif nxt in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1 :])
            assert m is not None
            out.append(int(m.group(), 8) & 0xFF)
            i += 1 + len(m.group())
        elif nxt in "xX":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2 :])
            if m is None:
                raise ValueError(f"bad escape \\{nxt}")
            out.append(int(m.group(), 16))
            i += 2 + len(m.group())
        else:
            raise ValueError(f"unknown escape \\{nxt}")
    return bytes(out)


def _tokens(text: str) -> list[tuple[str, str, int]]:
    toks: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ConfigError(f"{_where(text, pos)}: unexpected {text[pos]!r}")
        kind = m.lastgroup
        assert kind is not None
        if kind != "space":
            toks.append((kind, m.group(), pos))
        pos = m.end()
    return toks


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {col}"


def parse_text_proto(text: str) -> dict[str, list[Any]]:
    """A text-format message as ``{field: [values]}`` (every field a list: repeated or not);
    nested messages are dicts of the same shape, strings ``str`` (``bytes`` when not UTF-8),
    numbers ``int``/``float``, bare identifiers (enums, true/false) ``str``."""
    toks = _tokens(text)
    pos = 0

    def peek() -> tuple[str, str, int] | None:
        return toks[pos] if pos < len(toks) else None

    def fail(msg: str) -> ConfigError:
        at = toks[pos][2] if pos < len(toks) else len(text)
        return ConfigError(f"{_where(text, at)}: {msg}")

    def scalar() -> Any:
        nonlocal pos
        tok = peek()
        if tok is None:
            raise fail("a value is missing at the end")
        kind, val, _ = tok
        if kind == "string":
            raw = b""
            while (t := peek()) is not None and t[0] == "string":  # "a" "b" is one string
                try:
                    raw += _unquote(t[1])
                except ValueError as e:
                    raise fail(str(e)) from None
                pos += 1
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                return raw
        pos += 1
        if kind == "number":
            v = val.rstrip("fF") if not val.lower().startswith(("0x", "-0x", "+0x")) else val
            try:
                return int(v, 0) if re.fullmatch(r"[-+]?(0[xX][0-9a-fA-F]+|[0-9]+)", v) else float(v)
            except ValueError:
                return float(v)
        if kind == "ident":
            return val
        pos -= 1
        raise fail(f"expected a value, got {val!r}")

    def message(close: str | None, depth: int = 0) -> dict[str, list[Any]]:
        nonlocal pos
        if depth > MAX_DEPTH:
            raise fail(f"messages nested more than {MAX_DEPTH} deep")
        out: dict[str, list[Any]] = {}
        while True:
            tok = peek()
            if tok is None:
                if close is not None:
                    raise fail(f"missing {close!r}: the file ends inside a message")
                return out
            kind, val, _ = tok
            if kind == "punct" and val == close:
                pos += 1
                return out
            if kind == "punct" and val in ",;":
                pos += 1
                continue
            if kind != "ident":
                raise fail(f"expected a field name, got {val!r}")
            name = val
            pos += 1
            colon = (t := peek()) is not None and t[1] == ":"
            if colon:
                pos += 1
            t = peek()
            if t is not None and t[1] in ("{", "<"):
                pos += 1
                out.setdefault(name, []).append(message("}" if t[1] == "{" else ">", depth + 1))
            elif not colon:
                raise fail(f"expected ':' or '{{' after {name!r}")
            elif t is not None and t[1] == "[":
                pos += 1
                while (t := peek()) is not None and t[1] != "]":
                    if t[1] == ",":
                        pos += 1
                        continue
                    if t[1] in ("{", "<"):
                        pos += 1
                        out.setdefault(name, []).append(message("}" if t[1] == "{" else ">", depth + 1))
                    else:
                        out.setdefault(name, []).append(scalar())
                if peek() is None:
                    raise fail("missing ']'")
                pos += 1
                out.setdefault(name, [])
            else:
                out.setdefault(name, []).append(scalar())

    return message(None)


@dataclass(frozen=True)
class SpriteInfo:
    image_path: str
    single_image_dim: tuple[int, ...]


@dataclass(frozen=True)
class EmbeddingEntry:
    """One ``embeddings { ... }`` entry of a config, fields as written."""

    tensor_name: str
    tensor_path: str
    metadata_path: str
    bookmarks_path: str
    tensor_shape: tuple[int, ...]
    sprite: SpriteInfo | None


def _str(msg: dict[str, list[Any]], name: str) -> str:
    vals = msg.get(name) or [""]
    v = vals[-1]  # a non-repeated field given twice: the last one wins (protobuf's rule)
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    if isinstance(v, dict):
        raise ConfigError(f"{name} must be a string, not a message")
    return str(v)


def _uints(msg: dict[str, list[Any]], name: str) -> tuple[int, ...]:
    vals = msg.get(name) or []
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in vals):
        raise ConfigError(f"{name} must be non-negative integers, got {vals!r}")
    return tuple(int(v) for v in vals)


def parse_config(text: str) -> tuple[list[EmbeddingEntry], str]:
    """The embeddings of a ``projector_config.pbtxt`` and its ``model_checkpoint_path``."""
    msg = parse_text_proto(text)
    out = []
    for e in msg.get("embeddings", []):
        if not isinstance(e, dict):
            raise ConfigError("embeddings must be messages: embeddings { tensor_name: ... }")
        sprite = None
        if e.get("sprite"):
            s = e["sprite"][-1]
            if not isinstance(s, dict):
                raise ConfigError("sprite must be a message: sprite { image_path: ... }")
            sprite = SpriteInfo(_str(s, "image_path"), _uints(s, "single_image_dim"))
        out.append(
            EmbeddingEntry(
                tensor_name=_str(e, "tensor_name"),
                tensor_path=_str(e, "tensor_path"),
                metadata_path=_str(e, "metadata_path"),
                bookmarks_path=_str(e, "bookmarks_path"),
                tensor_shape=_uints(e, "tensor_shape"),
                sprite=sprite,
            )
        )
    return out, _str(msg, "model_checkpoint_path")


# ------------------------------------------------------------------------------------------------
# Finding configs and their files


def _asset_path(path: str, config_dir: str) -> str:
    """``path`` resolved against the config's directory; it may not leave it (TensorBoard's
    rule: ``..`` and symlinks pointing out are refused)."""
    base = os.path.realpath(config_dir)
    cand = os.path.expanduser(path)
    if not os.path.isabs(cand):
        cand = os.path.join(base, cand)
    cand = os.path.realpath(cand)
    try:
        inside = os.path.commonpath([base, cand]) == base
    except ValueError:
        inside = False
    if not inside:
        raise ValueError(
            f"asset path {path!r} resolves outside the config's directory {config_dir}; TensorBoard refuses it too"
        )
    return cand


def local_root(path: str) -> str | None:
    """The directory a logdir's projector configs are looked for in (a run ``.`` is that
    directory): the logdir itself, the directory of a single event file, None for a logdir in
    an object store (its configs are not mirrored)."""
    if "://" in path and not path.startswith("file://"):
        return None
    path = path[len("file://") :] if path.startswith("file://") else path
    return path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))


def config_paths(root: str, runs: list[str]) -> dict[str, str]:
    """run -> the projector config TensorBoard would read for it: the run's directory, the
    logdir itself as run ``.``, and the plugin-assets copy over either."""
    out: dict[str, str] = {}
    names = list(runs) + ([] if "." in runs else ["."])
    for run in names:
        d = root if run == "." else os.path.join(root, *run.split("/"))
        for cand in (os.path.join(d, CONFIG_NAME), os.path.join(d, ASSETS_DIR, CONFIG_NAME)):
            if os.path.isfile(cand):
                out[run] = cand
    return out


@dataclass(frozen=True)
class EmbeddingInfo:
    """One embedding as listed: where its files are and what they hold."""

    run: str
    tag: str
    config: str
    tensor_path: str | None
    tensor_shape: tuple[int, ...]
    metadata_path: str | None
    sprite_path: str | None
    sprite_single_image_dim: tuple[int, ...]
    error: str | None = None
    # Filled by the listing: shape and metadata columns (read from the files' heads).
    points: int | None = None
    dimensions: int | None = None
    metadata_columns: tuple[str, ...] = field(default=())


def _canonical(name: str) -> str:
    return name if ":" in name else name + ":0"


def embedding_infos(root: str, runs: list[str]) -> list[EmbeddingInfo]:
    """Every embedding of the runs (and of the logdir itself), in run order then config order.
    A config or file that cannot be read gives a row with ``error`` set, never an exception."""
    out: list[EmbeddingInfo] = []
    for run, cfg in sorted(config_paths(root, runs).items()):
        cfg_dir = os.path.dirname(cfg)
        try:
            with open(cfg, encoding="utf-8") as f:
                entries, _ckpt = parse_config(f.read())
        except (OSError, UnicodeDecodeError, ConfigError) as e:
            out.append(EmbeddingInfo(run, "", cfg, None, (), None, None, (), error=f"{cfg}: {e}"))
            continue
        seen: set[str] = set()
        for entry in entries:
            if not entry.tensor_path:
                continue  # a checkpoint variable: TensorFlow reads it, tbscope does not
            # TensorBoard's naming: the file's name when there is no tensor name, ":0" dropped.
            name = entry.tensor_name or os.path.basename(entry.tensor_path)
            if name.endswith(":0"):
                name = name[:-2]
            if _canonical(name) in seen:
                continue  # TensorBoard serves the first entry of a name
            seen.add(_canonical(name))
            out.append(_describe(run, name, cfg, cfg_dir, entry))
    return out


def _describe(run: str, name: str, cfg: str, cfg_dir: str, entry: EmbeddingEntry) -> EmbeddingInfo:
    paths: dict[str, str | None] = {"tensor": None, "metadata": None, "sprite": None}
    errors = []
    for key, rel in (
        ("tensor", entry.tensor_path),
        ("metadata", entry.metadata_path),
        ("sprite", entry.sprite.image_path if entry.sprite else ""),
    ):
        if not rel:
            continue
        try:
            paths[key] = _asset_path(rel, cfg_dir)
        except ValueError as e:
            errors.append(str(e))
    info = EmbeddingInfo(
        run, name, cfg, paths["tensor"], entry.tensor_shape, paths["metadata"], paths["sprite"],
        entry.sprite.single_image_dim if entry.sprite else (), error="; ".join(errors) or None,
    )  # fmt: skip
    if info.tensor_path is None:
        return info
    try:
        points, dims = tensor_shape(info.tensor_path, entry.tensor_shape)
        columns = metadata_columns(info.metadata_path) if info.metadata_path else ()
    except (OSError, ValueError) as e:
        return _replace(info, error="; ".join([*errors, str(e)]))
    if info.metadata_path:
        rows = count_lines(info.metadata_path)[0] - (len(columns) > 1)  # less the header
        if rows != points:
            errors.append(
                f"{info.metadata_path} has {rows} rows for {points} points; the projector needs one per point"
            )
    return _replace(info, points=points, dimensions=dims, metadata_columns=columns, error="; ".join(errors) or None)


def _replace(info: EmbeddingInfo, **changes: Any) -> EmbeddingInfo:
    import dataclasses

    return dataclasses.replace(info, **changes)


# ------------------------------------------------------------------------------------------------
# Tensor files


def _is_text(path: str) -> bool:
    """TensorBoard reads a tensor file as TSV when it decodes as UTF-8, else as float32. The
    first MiB decides: a TSV of numbers is ASCII throughout."""
    import codecs

    with open(path, "rb") as f:
        head = f.read(1 << 20)
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    # Raw float32 can decode as UTF-8 (all-zero values do); text of numbers has no NUL.
    return b"\0" not in head


def _binary_shape(path: str, shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) != 2:
        raise ValueError(
            f"{path} is binary (float32), which needs tensor_shape [points, dimensions] in the config; it has {list(shape)}"
        )
    size = os.path.getsize(path)
    if size != 4 * shape[0] * shape[1]:
        raise ValueError(
            f"{path} has {size} bytes; tensor_shape {list(shape)} of float32 needs {4 * shape[0] * shape[1]}"
        )
    return shape[0], shape[1]


_EMPTY_LINE = re.compile(rb"(?<=\n)\r?\n")
#: Bytes read at a time when counting lines.
BLOCK = 1 << 24


def count_lines(path: str) -> tuple[int, int]:
    """(lines, empty lines) of a text file, in blocks (a listing must not hold a big file)."""
    lines = empty = 0
    carry = b""
    with open(path, "rb") as f:
        while block := f.read(BLOCK):
            buf = carry + block
            cut = buf.rfind(b"\n") + 1
            buf, carry = buf[:cut], buf[cut:]
            lines += buf.count(b"\n")
            # Every block starts at a line's start: an empty line there has no newline before it.
            empty += len(_EMPTY_LINE.findall(buf)) + (1 if buf.startswith((b"\n", b"\r\n")) else 0)
    if carry:
        lines += 1
        empty += carry == b"\r"
    return lines, empty


def tensor_shape(path: str, shape: tuple[int, ...]) -> tuple[int, int]:
    """(points, dimensions) of a tensor file, from its lines (TSV) or the config (binary)."""
    if not _is_text(path):
        return _binary_shape(path, shape)
    dims = 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip(b"\r\n"):
                dims = line.rstrip(b"\r\n").count(b"\t") + 1
                break
    lines, empty = count_lines(path)
    return lines - empty, dims


def read_tensor(path: str, shape: tuple[int, ...] = ()) -> np.ndarray:
    """The tensor: float64 from TSV (the text's values exactly), float32 from the binary form."""
    import numpy as np

    if not _is_text(path):
        points, dims = _binary_shape(path, shape)
        return np.fromfile(path, dtype="<f4").reshape(points, dims)
    import pyarrow as pa
    from pyarrow import csv

    try:
        # Arrow's CSV reader parses floats exactly (correctly rounded), fast on large files.
        table = csv.read_csv(
            path,
            read_options=csv.ReadOptions(autogenerate_column_names=True),
            parse_options=csv.ParseOptions(delimiter="\t", quote_char=False),
            convert_options=csv.ConvertOptions(
                column_types={}, strings_can_be_null=False, quoted_strings_can_be_null=False
            ),
        )
        if (
            table.num_columns
            and all(pa.types.is_floating(t) or pa.types.is_integer(t) for t in table.schema.types)
            and all(c.null_count == 0 for c in table.columns)
        ):
            return (
                np.column_stack([c.to_numpy().astype(np.float64) for c in table.columns])
                if table.num_rows
                else np.zeros((0, table.num_columns))
            )
    except pa.ArrowInvalid:
        pass  # empty, ragged or not numbers: the loop below says which line
    width: int | None = None
    rows: list[list[float]] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line:
                continue
            try:
                row = [float(v) for v in line.split("\t")]
            except ValueError:
                raise ValueError(f"{path}, line {n}: not tab-separated numbers: {line[:80]!r}") from None
            if width is not None and len(row) != width:
                raise ValueError(f"{path}, line {n}: {len(row)} values where the first line has {width}")
            width = len(row)
            rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(len(rows), width or 0)


# ------------------------------------------------------------------------------------------------
# Metadata


def _metadata_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def metadata_columns(path: str) -> tuple[str, ...]:
    """Column names: the header when the first line has a tab, else the one column ``label``."""
    with open(path, encoding="utf-8", errors="replace") as f:
        first = f.readline().rstrip("\r\n")
    return tuple(_unique(first.split("\t"))) if "\t" in first else ("label",)


def read_metadata(path: str) -> pd.DataFrame:
    """The metadata as text columns, one row per point (TensorBoard's header rule)."""
    import pandas as pd

    lines = _metadata_lines(path)
    if lines and "\t" in lines[0]:
        header = lines[0].split("\t")
        rows = [line.split("\t") for line in lines[1:]]
        for n, r in enumerate(rows, 2):
            if len(r) != len(header):
                raise ValueError(f"{path}, line {n}: {len(r)} columns where the header has {len(header)}")
        names = _unique(header)
        return pd.DataFrame({h: pd.array([r[i] for r in rows], dtype="string") for i, h in enumerate(names)})
    return pd.DataFrame({"label": pd.array(lines, dtype="string")})


def _unique(names: list[str]) -> list[str]:
    """Header names made unique (``name``, ``name (2)``, ...): a frame needs distinct columns."""
    out: list[str] = []
    for n in names:
        cand, k = n, 2
        while cand in out:
            cand, k = f"{n} ({k})", k + 1
        out.append(cand)
    return out


# ------------------------------------------------------------------------------------------------
# Projections


def project(values: np.ndarray, dims: int = 2, method: str = "pca", seed: int = 0) -> tuple[np.ndarray, dict[str, Any]]:
    """``values`` [points, dimensions] projected to ``dims`` (2 or 3) coordinates per point.

    ``pca`` (numpy, always available): principal components of the centred values, each signed
    so its largest loading is positive (the same picture every time); the info has
    ``explained_variance`` (the fraction of the variance along each axis). ``tsne`` needs
    scikit-learn and ``umap`` needs umap-learn (both seeded with ``seed``)."""
    import numpy as np

    if dims not in (2, 3):
        raise ValueError(f"dims must be 2 or 3, got {dims!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"values must be 2-D [points, dimensions], got shape {x.shape}")
    n, d = x.shape
    if n == 0:
        return np.zeros((0, dims)), {"method": method, "explained_variance": [0.0] * dims if method == "pca" else None}
    if not np.isfinite(x).all():
        raise ValueError("the embedding has NaN or infinite values; a projection needs finite numbers")
    if method == "pca":
        return _pca(x, dims)
    if method == "tsne":
        try:
            from sklearn.manifold import TSNE
        except ImportError:
            raise ImportError(
                "method='tsne' needs scikit-learn: pip install scikit-learn (or use method='pca')"
            ) from None
        if n < 3:
            raise ValueError(f"t-SNE needs at least 3 points, this embedding has {n}")
        perplexity = float(min(30.0, (n - 1) / 3))
        coords = TSNE(n_components=dims, perplexity=perplexity, init="pca", random_state=seed).fit_transform(x)
        return np.asarray(coords, dtype=np.float64), {"method": method, "explained_variance": None}
    try:
        import umap  # type: ignore[import-not-found,unused-ignore]  # optional, not in the venv
    except ImportError:
        raise ImportError("method='umap' needs umap-learn: pip install umap-learn (or use method='pca')") from None
    if n < 4:
        raise ValueError(f"UMAP needs at least 4 points, this embedding has {n}")
    coords = umap.UMAP(n_components=dims, n_neighbors=min(15, n - 1), random_state=seed).fit_transform(x)
    return np.asarray(coords, dtype=np.float64), {"method": method, "explained_variance": None}


def _pca(x: np.ndarray, dims: int) -> tuple[np.ndarray, dict[str, Any]]:
    import numpy as np

    n, d = x.shape
    xc = x - x.mean(axis=0)
    if n > d:
        # The covariance is d x d: cheap for many points of few dimensions.
        evals, evecs = np.linalg.eigh(xc.T @ xc)
        order = np.argsort(evals)[::-1]
        evals, evecs = np.clip(evals[order], 0, None), evecs[:, order]
    else:
        _u, s, vt = np.linalg.svd(xc, full_matrices=False)
        evals, evecs = s**2, vt.T
    k = min(dims, evecs.shape[1])
    comps = evecs[:, :k]
    # The sign of an eigenvector is arbitrary: fix it so the same data gives the same picture.
    signs = np.sign(comps[np.argmax(np.abs(comps), axis=0), np.arange(k)])
    comps = comps * np.where(signs == 0, 1, signs)
    coords = np.zeros((n, dims))
    coords[:, :k] = xc @ comps
    total = float(evals.sum())
    ratio = [float(v / total) if total > 0 else 0.0 for v in evals[:k]] + [0.0] * (dims - k)
    return coords, {"method": "pca", "explained_variance": ratio}


# ------------------------------------------------------------------------------------------------
# The public objects


@dataclass
class Embedding:
    """One projector embedding, loaded: ``values`` [points, dimensions] (float64 from TSV,
    float32 from the binary form), ``metadata`` (one text column per metadata column, one row
    per point; None without a metadata file) and the sprite's location."""

    run: str
    tag: str
    values: np.ndarray
    metadata: pd.DataFrame | None
    sprite_path: str | None = None
    sprite_single_image_dim: tuple[int, ...] = ()

    def __repr__(self) -> str:
        cols = [] if self.metadata is None else list(self.metadata.columns)
        return f"<tbscope.Embedding {self.run!r} {self.tag!r}: {self.values.shape[0]} x {self.values.shape[1]}, metadata {cols}>"

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.values.shape[0]), int(self.values.shape[1]))

    def project(self, dims: int = 2, method: str = "pca", seed: int = 0) -> pd.DataFrame:
        """The points in ``dims`` (2 or 3) coordinates ``x``, ``y`` [, ``z``], with the metadata
        columns alongside: ``method="pca"`` always, ``"tsne"`` with scikit-learn installed,
        ``"umap"`` with umap-learn. ``attrs["explained_variance"]`` holds PCA's fraction of the
        variance per axis.

        >>> emb = tbscope.scan("runs/").embedding("run", "default:00000")  # doctest: +SKIP
        >>> emb.project(3).plot.scatter("x", "y")  # doctest: +SKIP
        """
        import pandas as pd

        coords, info = project(self.values, dims, method, seed)
        df = pd.DataFrame(dict(zip("xyz", coords.T)))
        if self.metadata is not None and len(self.metadata) == len(df):
            for c in self.metadata.columns:
                if c not in df.columns:
                    df[c] = self.metadata[c].to_numpy()
        df.attrs.update(info)
        return df

    def images(self) -> np.ndarray:
        """The sprite cut into one thumbnail per point: uint8 [points, height, width, channels]
        (needs Pillow). Raises ``LookupError`` when the embedding has no sprite."""
        import numpy as np

        if self.sprite_path is None:
            raise LookupError(f"embedding {self.tag!r} of run {self.run!r} has no sprite image")
        try:
            from PIL import Image
        except ImportError:
            raise ImportError("reading the sprite needs Pillow: pip install 'tbscope[images]'") from None
        if len(self.sprite_single_image_dim) != 2:
            raise ValueError(
                f"the sprite of {self.tag!r} needs single_image_dim [width, height], the config has {list(self.sprite_single_image_dim)}"
            )
        w, h = self.sprite_single_image_dim
        with Image.open(self.sprite_path) as im:
            sheet = np.asarray(im)
        if sheet.ndim == 2:
            sheet = sheet[:, :, None]
        per_row = sheet.shape[1] // w if w else 0
        n = self.shape[0]
        if per_row == 0 or math.ceil(n / per_row) * h > sheet.shape[0]:
            raise ValueError(
                f"the sprite {self.sprite_path} ({sheet.shape[1]}x{sheet.shape[0]}) cannot hold {n} images of {w}x{h}"
            )
        out = np.empty((n, h, w, sheet.shape[2]), dtype=sheet.dtype)
        for i in range(n):
            r, c = divmod(i, per_row)
            out[i] = sheet[r * h : (r + 1) * h, c * w : (c + 1) * w]
        return out


def load(info: EmbeddingInfo) -> Embedding:
    """The embedding ``info`` lists, read from its files."""
    if info.tensor_path is None:
        raise ValueError(f"embedding {info.tag!r} of run {info.run!r} cannot be read: {info.error}")
    values = read_tensor(info.tensor_path, info.tensor_shape)
    metadata = read_metadata(info.metadata_path) if info.metadata_path else None
    if metadata is not None and len(metadata) != values.shape[0]:
        raise ValueError(
            f"{info.metadata_path} has {len(metadata)} rows for {values.shape[0]} points; the projector needs one per point"
        )
    return Embedding(info.run, info.tag, values, metadata, info.sprite_path, info.sprite_single_image_dim)


def listing(infos: list[EmbeddingInfo], root: str) -> pa.Table:
    """The rows of ``Logdir.embeddings()``."""
    import pyarrow as pa

    def rel(p: str | None) -> str | None:
        return None if p is None else os.path.relpath(p, os.path.realpath(root)).replace(os.sep, "/")

    return pa.table(
        {
            "run": pa.array([i.run for i in infos], pa.string()),
            "tag": pa.array([i.tag for i in infos], pa.string()),
            "points": pa.array([i.points for i in infos], pa.int64()),
            "dimensions": pa.array([i.dimensions for i in infos], pa.int64()),
            "metadata_columns": pa.array([list(i.metadata_columns) for i in infos], pa.list_(pa.string())),
            "sprite": pa.array([i.sprite_path is not None for i in infos], pa.bool_()),
            "sprite_width": pa.array(
                [i.sprite_single_image_dim[0] if len(i.sprite_single_image_dim) == 2 else None for i in infos],
                pa.int64(),
            ),
            "sprite_height": pa.array(
                [i.sprite_single_image_dim[1] if len(i.sprite_single_image_dim) == 2 else None for i in infos],
                pa.int64(),
            ),
            "tensor_file": pa.array([rel(i.tensor_path) for i in infos], pa.string()),
            "metadata_file": pa.array([rel(i.metadata_path) for i in infos], pa.string()),
            "sprite_file": pa.array([rel(i.sprite_path) for i in infos], pa.string()),
            "error": pa.array([i.error for i in infos], pa.string()),
        }
    )
