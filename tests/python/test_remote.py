"""Remote logdirs against a real S3 API (moto's standalone server on loopback), memory:// and
file://: every reading entry point gives what it gives on the local logdir."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tbscope
from click.testing import CliRunner
from s3_util import AWS_ENV, environ, s3_server
from server_util import get_json
from tbscope import _mirror
from tbscope._cli.main import main
from tbscope._reader import KINDS

BUCKET = "tbscope-tests"


@pytest.fixture(scope="module")
def mirrors(tmp_path_factory):
    """Mirrors (under the cache root) in a directory of the tests' own."""
    root = tmp_path_factory.mktemp("cache-root")
    with environ(TBSCOPE_CACHE_DIR=str(root), **AWS_ENV):
        yield root


@pytest.fixture(scope="module")
def s3(mirrors, tbx_logdir, tb_logdir):
    with s3_server() as server:
        fs = server.fs()
        fs.mkdir(BUCKET)
        fs.put(str(tbx_logdir) + "/", f"{BUCKET}/tbx", recursive=True)
        fs.put(str(tb_logdir) + "/", f"{BUCKET}/tb", recursive=True)
        yield server


TRANSPORTS = ["native", "fsspec"]


def watch_pieces(monkeypatch, mirror, around):
    """Every ranged request of the mirror's fetch, whichever transport makes it, goes through
    ``around(start, end, request)`` (in the fetching thread), which calls ``request()``."""
    make = mirror._piece_writer

    def wrapped():
        write = make()

        def watched(path, start, end, fd):
            return around(start, end, lambda: write(path, start, end, fd))

        return watched

    monkeypatch.setattr(mirror, "_piece_writer", wrapped)


def _ipc(table: pa.Table) -> bytes:
    # Dictionary columns by their values: a remote read parses files in rounds as they arrive,
    # as a reload does, so its tables are chunked with a dictionary per chunk.
    table = table.cast(
        pa.schema(
            [f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f for f in table.schema],
            metadata=table.schema.metadata,
        )
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table.combine_chunks())
    return sink.getvalue().to_pybytes()


def same_table(a: pa.Table, b: pa.Table) -> bool:
    """Equal schemas and values, NaN equal to NaN (Table.equals says NaN != NaN)."""
    return a.schema == b.schema and _ipc(a) == _ipc(b)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("which", ["tbx", "tb"])
def test_every_kind_over_s3_equals_local(s3, which, transport, tbx_logdir, tb_logdir, tmp_path):
    local_dir = {"tbx": tbx_logdir, "tb": tb_logdir}[which]
    url = f"s3://{BUCKET}/{which}"
    options = {**s3.options, "transport": transport}
    remote = tbscope.scan(url, storage_options={**options, "mirror": str(tmp_path / "m")})
    assert remote._remote.transport == transport
    local = tbscope.scan(local_dir)
    assert remote.runs == local.runs and len(remote.runs) > 0
    for kind in KINDS:
        got = remote._frame(kind).to_arrow()
        want = local._frame(kind).to_arrow()
        assert same_table(got, want), kind
    pd.testing.assert_frame_equal(remote.summary(), local.summary())
    pd.testing.assert_frame_equal(remote.hparams().to_pandas(), local.hparams().to_pandas())
    assert remote.report == local.report
    assert remote.url == url and url in repr(remote)
    # The eager readers and SQL take the URL and the options too.
    pd.testing.assert_frame_equal(tbscope.read_scalars(url, storage_options=options), tbscope.read_scalars(local_dir))
    q = "SELECT run, tag, count(*) AS n, max(value) AS top FROM scalars GROUP BY run, tag ORDER BY run, tag"
    pd.testing.assert_frame_equal(
        tbscope.sql(url, q, storage_options=options).to_pandas(), tbscope.sql(local_dir, q).to_pandas()
    )


def test_export_over_s3_equals_local(s3, tbx_logdir, tmp_path):
    url = f"s3://{BUCKET}/tbx"
    tbscope.export(
        url, tmp_path / "remote", format="parquet", kinds=("scalars", "histograms"), storage_options=s3.options
    )
    tbscope.export(tbx_logdir, tmp_path / "local", format="parquet", kinds=("scalars", "histograms"))
    for kind in ("scalars", "histograms"):
        assert same_table(
            pq.read_table(tmp_path / "remote" / f"{kind}.parquet"),
            pq.read_table(tmp_path / "local" / f"{kind}.parquet"),
        )


def test_cli_over_s3_equals_local(s3, tbx_logdir):
    url = f"s3://{BUCKET}/tbx"
    runner = CliRunner()
    for args in (
        ["summary", "--format", "csv"],
        ["ls", "--format", "csv"],
        ["tags", "--format", "csv"],
        ["check", "--format", "json"],
    ):
        remote = runner.invoke(
            main,
            [
                args[0],
                url,
                *args[1:],
                "--storage-option",
                f"endpoint_url={s3.endpoint}",
                "--storage-option",
                "anon=false",
            ],
        )
        local = runner.invoke(main, [args[0], str(tbx_logdir), *args[1:]])
        assert remote.exit_code == local.exit_code, remote.output
        if args[0] in ("ls", "check"):
            # They show the logdir's name or modification times; compare what is about the data.
            assert remote.output.count("\n") == local.output.count("\n"), remote.output
        else:
            assert remote.output == local.output
    sql = "SELECT count(*) AS n FROM scalars"
    remote = runner.invoke(
        main, ["sql", url, sql, "--format", "csv", "--storage-option", f"endpoint_url={s3.endpoint}"]
    )
    assert (
        remote.exit_code == 0
        and remote.output == runner.invoke(main, ["sql", str(tbx_logdir), sql, "--format", "csv"]).output
    )
    bad = runner.invoke(main, ["summary", url, "--storage-option", "endpoint_url"])
    assert bad.exit_code == 2 and "KEY=VALUE" in bad.output


def test_cli_endpoint_from_the_environment(s3, tbx_logdir):
    """AWS_ENDPOINT_URL alone points the store at an S3-compatible server."""
    env = {**os.environ, "AWS_ENDPOINT_URL": s3.endpoint}
    cmd = [sys.executable, "-m", "tbscope", "summary", f"s3://{BUCKET}/tbx", "--format", "csv"]
    remote = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    local = subprocess.run([*cmd[:4], str(tbx_logdir), *cmd[5:]], capture_output=True, text=True, timeout=120)
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout


def test_serve_over_s3_equals_local(s3, tbx_logdir):
    url = f"s3://{BUCKET}/tbx"
    remote = tbscope.serve(url, port=0, cache=False, reload_interval=1.0, storage_options=s3.options)
    local = tbscope.serve(tbx_logdir, port=0, cache=False, reload_interval=0)
    try:
        # Remote logdirs are listed (a billed request) at most every 30 s.
        assert remote.config.reload_interval == 30.0
        assert remote.wait_loaded(60) and local.wait_loaded(60)
        for path in ("api/v1/runs", "api/v1/tags?kind=scalars", "api/v1/series?kind=histograms", "api/v1/hparams"):
            assert get_json(remote.url, path) == get_json(local.url, path), path
        tags = get_json(local.url, "api/v1/tags?kind=scalars")["columns"]["tag"]
        for tag in tags[:3]:
            assert get_json(remote.url, f"api/v1/scalars?tag={tag}&points=50") == get_json(
                local.url, f"api/v1/scalars?tag={tag}&points=50"
            )
    finally:
        remote.stop()
        local.stop()


def test_reload_fetches_only_the_grown_bytes(s3, tbx_logdir, tmp_path):
    fs = s3.fs()
    src = next(p for p in sorted(tbx_logdir.rglob("*tfevents*")) if p.stat().st_size > 4096)
    data = src.read_bytes()
    cut = len(data) // 2
    key = f"{BUCKET}/grow/run/{src.name}"
    fs.pipe_file(key, data[:cut])
    lg = tbscope.scan(f"s3://{BUCKET}/grow", storage_options=s3.options, tail_timeout=0)
    before = lg.scalars().num_rows if hasattr(lg.scalars(), "num_rows") else len(lg.scalars().to_pandas())
    assert lg._remote.last.bytes_fetched == cut
    fs.pipe_file(key, data)  # a store cannot append: the writer uploads the longer object
    lg.reload()
    assert lg._remote.last.bytes_fetched == len(data) - cut and lg._remote.last.files_fetched == 1
    (tmp_path / "run").mkdir()
    shutil.copy(src, tmp_path / "run" / src.name)
    local = tbscope.scan(tmp_path, tail_timeout=0)
    for kind in KINDS:
        assert same_table(lg._frame(kind).to_arrow(), local._frame(kind).to_arrow()), kind
    assert len(lg.scalars().to_pandas()) >= before
    # Nothing changed: nothing is fetched.
    lg.reload()
    assert lg._remote.last.bytes_fetched == 0 and lg._remote.last.files_fetched == 0
    # A new process (a new scan) reuses the mirror: nothing to fetch either.
    again = tbscope.scan(f"s3://{BUCKET}/grow", storage_options=s3.options, tail_timeout=0)
    assert again._remote.last.bytes_fetched == 0
    # A removed object leaves the mirror; the rows read stay, as for a local file removed
    # under a reader, and a new scan says the logdir is gone.
    fs.rm(key)
    lg.reload()
    assert not list(Path(lg._remote.files_dir).rglob("*tfevents*")) and lg.runs == ["run"]
    with pytest.raises(FileNotFoundError, match="no such logdir"):
        tbscope.scan(f"s3://{BUCKET}/grow", storage_options=s3.options)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_large_objects_are_fetched_in_bounded_concurrent_ranges(s3, tmp_path, monkeypatch, transport):
    """An object several pieces long is fetched as ranged requests of at most PIECE_BYTES,
    several in flight at once, that cover it exactly; never one whole-object request."""
    with tbscope.SummaryWriter(tmp_path / "big") as w:
        for i in range(30_000):
            w.add_scalar("loss", i * 0.5, i)
    src = next((tmp_path / "big").glob("*tfevents*"))
    size = src.stat().st_size
    piece = 64 << 10
    assert size > 8 * piece
    monkeypatch.setattr(_mirror, "PIECE_BYTES", piece)
    monkeypatch.setattr(_mirror, "CONCURRENCY", 4)
    s3.fs().put(str(tmp_path / "big") + "/", f"{BUCKET}/big-{transport}", recursive=True)
    mirror = _mirror.Mirror(f"s3://{BUCKET}/big-{transport}", {**s3.options, "transport": transport})
    assert mirror.transport == transport
    requests: list[tuple[int, int]] = []
    in_flight, most = [0], [0]
    lock = threading.Lock()

    def watched(start, end, request):
        with lock:
            requests.append((start, end))
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        try:
            time.sleep(0.02)  # a store's latency, so that requests overlap
            return request()
        finally:
            with lock:
                in_flight[0] -= 1

    watch_pieces(monkeypatch, mirror, watched)
    mirror.sync(first=True)
    assert all(s is not None and e is not None and 0 < e - s <= piece for s, e in requests)
    assert sorted(requests) == [(s, min(s + piece, size)) for s in range(0, size, piece)]
    assert 1 < most[0] <= 4
    assert (Path(mirror.files_dir) / src.name).read_bytes() == src.read_bytes()
    pd.testing.assert_frame_equal(tbscope.read_scalars(mirror.path), tbscope.read_scalars(tmp_path / "big"))


def test_first_read_parses_files_while_others_are_fetched(s3, tbx_logdir, tmp_path, monkeypatch):
    """scan() returns once the logdir is listed; the first read reads the mirror in rounds as
    whole files arrive (in the reader's order) and gives what a read of the local logdir does."""
    monkeypatch.setattr(_mirror, "CONCURRENCY", 1)
    mirror = _mirror.Mirror(f"s3://{BUCKET}/tbx", {**s3.options, "mirror": str(tmp_path / "m")})

    def slow(start, end, request):
        time.sleep(0.05)  # a store's latency: the fetch outlasts the first rounds
        return request()

    watch_pieces(monkeypatch, mirror, slow)
    seen: list[list[str]] = []  # the mirror's files at each read of it
    mirror.start()
    assert mirror._thread is not None  # fetching in the background
    # A Logdir of the mirror, with scan()'s arguments, as scan() makes it.
    lg = tbscope._reader.Logdir(mirror._path_now, tbscope.scan(tbx_logdir)._args, False, mirror)
    load = lg._native.load

    def watched_load(fetching):
        seen.append(sorted(str(p.relative_to(mirror.files_dir)) for p in Path(mirror.files_dir).rglob("*tfevents*")))
        return load(fetching)

    rounds = mirror.follow(watched_load)
    lg._loaded = True
    files = len(list(tbx_logdir.rglob("*tfevents*")))
    assert len(rounds) == len(seen) > 2 and len(seen[0]) < files and len(seen[-1]) == files
    # Each read saw a prefix of the files in (run, file) order: nothing after a missing file.
    order = sorted(seen[-1], key=lambda r: (os.path.dirname(r) or ".", os.path.basename(r)))
    assert all(set(s) == set(order[: len(s)]) for s in seen)
    local = tbscope.scan(tbx_logdir)
    assert lg.runs == local.runs and lg.report == local.report
    for kind in KINDS:
        assert same_table(lg._frame(kind).to_arrow(), local._frame(kind).to_arrow()), kind


def test_first_read_parses_each_file_as_soon_as_it_arrives(s3, tmp_path, monkeypatch):
    """The first read reads the mirror again whenever a file has arrived since its last read
    (not after a fixed share of the files): once the last byte is in, only what arrived during
    the last read is left to parse. Each request here waits until the read that follows the
    file before it has returned, so every read finds exactly one new file."""
    logdir = tmp_path / "logs"
    for i in range(12):  # more than 8 files: fixed steps would be of 2 files or more
        with tbscope.SummaryWriter(logdir / f"run{i:02d}") as w:
            w.add_scalar("x", float(i), i)
    s3.fs().put(str(logdir) + "/", f"{BUCKET}/each", recursive=True)
    monkeypatch.setattr(_mirror, "CONCURRENCY", 1)
    mirror = _mirror.Mirror(f"s3://{BUCKET}/each", {**s3.options, "mirror": str(tmp_path / "m")})
    loaded = threading.Semaphore(0)
    first = [True]

    def gated(start, end, request):
        if not first[0]:
            # Bounded, so that a reader that never reads before the end still finishes.
            loaded.acquire(True, 5)
        first[0] = False
        return request()

    watch_pieces(monkeypatch, mirror, gated)
    mirror.start()
    lg = tbscope._reader.Logdir(mirror._path_now, tbscope.scan(logdir)._args, False, mirror)
    load = lg._native.load
    seen: list[list[str]] = []

    def watched_load(fetching):
        seen.append(sorted(p.parent.name for p in Path(mirror.files_dir).rglob("*tfevents*")))
        try:
            return load(fetching)
        finally:
            loaded.release()

    mirror.follow(watched_load)
    lg._loaded = True
    runs = [f"run{i:02d}" for i in range(12)]
    # One read per file as it arrives, then the read after the fetch (which finds nothing new,
    # or the last file when the fetch was over before a read of it began).
    assert seen[:11] == [runs[: i + 1] for i in range(11)] and seen[11:] in ([runs, runs], [runs]), seen
    pd.testing.assert_frame_equal(lg.scalars().to_pandas(), tbscope.read_scalars(logdir))


@pytest.mark.parametrize("single", [False, True], ids=["logdir", "event-file-url"])
def test_large_file_is_parsed_as_its_bytes_arrive(s3, tmp_path, monkeypatch, single):
    """A file many pieces long is parsed while it is fetched, not once it is whole: a read of
    the mirror follows the pieces as they arrive in order (told how many bytes are there, so
    never reading a hole), and the whole read equals the local one. The same for a URL that
    names one event file."""
    logdir = tmp_path / "logs"
    with tbscope.SummaryWriter(logdir / "big") as w:
        for i in range(30_000):
            w.add_scalar("loss", i * 0.5, i)
            if i % 7 == 0:
                w.add_scalar("acc", 1.0 / (i + 1), i)
    src = next((logdir / "big").glob("*tfevents*"))
    piece = 64 << 10
    assert src.stat().st_size > 10 * piece
    monkeypatch.setattr(_mirror, "PIECE_BYTES", piece)
    monkeypatch.setattr(_mirror, "CONCURRENCY", 3)
    key = f"{BUCKET}/arrive-{'file' if single else 'dir'}"
    s3.fs().put(str(logdir) + "/", key, recursive=True)
    url = f"s3://{key}/big/{src.name}" if single else f"s3://{key}"
    mirror = _mirror.Mirror(url, {**s3.options, "mirror": str(tmp_path / "m")})

    partial_read = threading.Event()

    def slow(start, end, request):
        time.sleep(0.01)  # a store's latency: pieces arrive out of order
        if start >= 4 * piece:
            # The rest waits for a read of the first pieces (bounded: a reader that never
            # read a partial file fails the assertions below, not by hanging).
            partial_read.wait(10)
        return request()

    watch_pieces(monkeypatch, mirror, slow)
    mirror.start()
    local = tbscope.scan(src if single else logdir)
    lg = tbscope._reader.Logdir(mirror._path_now, local._args, False, mirror)
    load = lg._native.load
    rounds: list[tuple[dict[str, int], int, int]] = []  # (fetching, bytes read, rows)

    def watched_load(fetching):
        if fetching:
            ((path, there),) = fetching.items()
            # What the read is told is there is there, byte for byte.
            with open(path, "rb") as f:
                assert f.read(there) == src.read_bytes()[:there]
        got = load(fetching)
        rounds.append((fetching, got[1], got[3]))
        if fetching and got[3]:
            partial_read.set()
        return got

    mirror.follow(watched_load)
    lg._loaded = True
    partial = [r for r in rounds if r[0]]
    # Rounds read the file while it was partial, each no further than it was told.
    assert partial_read.is_set() and sum(rows for _, _, rows in partial) > 0, rounds
    assert all(n <= next(iter(f.values())) for f, n, _ in partial)
    assert rounds[-1][0] == {}
    assert lg.report == local.report and lg.runs == local.runs
    for kind in KINDS:
        assert same_table(lg._frame(kind).to_arrow(), local._frame(kind).to_arrow()), kind
    assert Path(mirror.path).is_file() == single
    assert not list((Path(mirror.dir) / "partial").rglob("*tfevents*"))


def test_partly_read_file_whose_fetch_failed_is_read_whole_on_reload(s3, tmp_path, monkeypatch):
    """A large file read while it arrived and whose fetch then failed keeps what was read and
    is reported; the next refresh fetches it whole and the read goes on from where it stopped:
    the rows and report are then a local read's."""
    logdir = tmp_path / "logs"
    with tbscope.SummaryWriter(logdir / "big") as w:
        for i in range(30_000):
            w.add_scalar("loss", i * 0.5, i)
    piece = 64 << 10
    monkeypatch.setattr(_mirror, "PIECE_BYTES", piece)
    monkeypatch.setattr(_mirror, "CONCURRENCY", 1)
    monkeypatch.setattr(_mirror, "BACKOFF", 0.001)
    s3.fs().put(str(logdir) + "/", f"{BUCKET}/fails", recursive=True)
    mirror = _mirror.Mirror(f"s3://{BUCKET}/fails", {**s3.options, "mirror": str(tmp_path / "m")})
    broken = [True]

    def failing(start, end, request):
        time.sleep(0.02)  # the first pieces are read before the failure
        if broken[0] and start >= 4 * piece:
            raise OSError("the store went away")
        return request()

    watch_pieces(monkeypatch, mirror, failing)
    mirror.start()
    local = tbscope.scan(logdir)
    lg = tbscope._reader.Logdir(mirror._path_now, local._args, False, mirror)
    lg._load()
    rows = len(lg.scalars().to_pandas())
    assert 0 < rows < len(local.scalars().to_pandas())
    (problem,) = lg.report.by_severity("error")
    assert problem.run == "big" and "the store went away" in problem.reason
    broken[0] = False
    lg.reload()
    assert lg.report == local.report
    pd.testing.assert_frame_equal(lg.scalars().to_pandas(), local.scalars().to_pandas())


@pytest.mark.parametrize("single", [False, True], ids=["logdir", "event-file-url"])
def test_cache_clear_deletes_a_remote_logdirs_mirror_and_cache(s3, tbx_logdir, tmp_path, single):
    """tbscope.cache.clear(URL) deletes the local mirror (and the cache of a scan with
    cache=True): the next scan fetches everything again and reads what the store holds."""
    cache_root = tmp_path / "caches"
    src = sorted(tbx_logdir.rglob("*tfevents*"))[0]
    url = f"s3://{BUCKET}/tbx/{src.relative_to(tbx_logdir).as_posix()}" if single else f"s3://{BUCKET}/tbx"
    options = {**s3.options, "mirror": str(tmp_path / "m")}
    with environ(TBSCOPE_CACHE_DIR=str(cache_root)):
        first = tbscope.scan(url, storage_options=options, cache=True)
        rows = first.scalars().to_pandas()
        assert first.cache_info is not None and Path(first.cache_info.dir).is_dir()
        fetched = [p for p in (tmp_path / "m" / "logdir").rglob("*") if p.is_file()]
        assert fetched and (tmp_path / "m" / "manifest.json").exists()
        assert tbscope.cache.clear(url, storage_options=options)
        assert not (tmp_path / "m" / "logdir").exists() and not (tmp_path / "m" / "manifest.json").exists()
        assert not Path(first.cache_info.dir).exists()
        assert not tbscope.cache.clear(url, storage_options=options)  # nothing left
        again = tbscope.scan(url, storage_options=options, cache=True)
        pd.testing.assert_frame_equal(again.scalars().to_pandas(), rows)
        assert again.cache_info is not None and again.cache_info.status == "miss"
    with pytest.raises(ValueError, match="storage_options= is for URLs"):
        tbscope.cache.clear(tbx_logdir, storage_options=options)


def test_event_file_url_read_through_scan(s3, tmp_path, monkeypatch):
    """scan() of a URL naming one event file several pieces long: fetched in the background and
    parsed as it arrives; rows and report as the local file's."""
    with tbscope.SummaryWriter(tmp_path / "one") as w:
        for i in range(20_000):
            w.add_scalar("loss", i * 0.25, i)
    src = next((tmp_path / "one").glob("*tfevents*"))
    monkeypatch.setattr(_mirror, "PIECE_BYTES", 32 << 10)
    s3.fs().put(str(src), f"{BUCKET}/one-file/{src.name}")
    lg = tbscope.scan(
        f"s3://{BUCKET}/one-file/{src.name}", storage_options={**s3.options, "mirror": str(tmp_path / "m")}
    )
    pd.testing.assert_frame_equal(lg.scalars().to_pandas(), tbscope.read_scalars(src))
    assert lg.report == tbscope.scan(src).report


def test_new_mirror_files_are_created_not_truncated(s3, tbx_logdir, tmp_path, monkeypatch):
    """A new file is created afresh beside the mirror, never truncated to zero (ext4 writes back
    a file truncated to zero and then written when it is closed: a few ms per file, all in the
    fetch's tail), and whatever an interrupted refresh left there is replaced, not reused."""
    mirror = _mirror.Mirror(f"s3://{BUCKET}/tbx", {**s3.options, "mirror": str(tmp_path / "m")})
    files = sorted(p.relative_to(tbx_logdir).as_posix() for p in tbx_logdir.rglob("*tfevents*"))
    stale = Path(mirror.dir) / "partial" / files[0]
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"\xff" * ((tbx_logdir / files[0]).stat().st_size + 4096))
    truncated: list[int] = []
    ftruncate = os.ftruncate

    def watched(fd, length):
        truncated.append(length)
        return ftruncate(fd, length)

    monkeypatch.setattr(os, "ftruncate", watched)
    mirror.sync(first=True)
    assert 0 not in truncated
    for rel in files:
        assert (Path(mirror.files_dir) / rel).read_bytes() == (tbx_logdir / rel).read_bytes(), rel
    assert not list((Path(mirror.dir) / "partial").rglob("*tfevents*"))


def test_empty_event_files_over_urls(mirrors, tmp_path):
    """A logdir whose new files are all empty (writers that have not flushed yet) is read like
    the local one; empty files among others too."""
    import fsspec

    mem = fsspec.filesystem("memory")
    logdir = tmp_path / "logs"
    (logdir / "a").mkdir(parents=True)
    (logdir / "a" / "events.out.tfevents.1.host").write_bytes(b"")
    try:
        for step in ("only empty files", "an empty file before a run's other file"):
            if step != "only empty files":
                with tbscope.SummaryWriter(logdir / "b") as w:
                    w.add_scalar("x", 1.0, 0)
                (logdir / "b" / "events.out.tfevents.0.host").write_bytes(b"")
            mem.put(str(logdir) + "/", "/tbscope-empty", recursive=True)
            lg = tbscope.scan("memory://tbscope-empty", storage_options={"mirror": str(tmp_path / "m")})
            local = tbscope.scan(logdir)
            assert lg.runs == local.runs and lg.report == local.report, step
            pd.testing.assert_frame_equal(lg.scalars().to_pandas(), local.scalars().to_pandas())
    finally:
        mem.rm("/tbscope-empty", recursive=True)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_killed_server_mid_read_reports_and_keeps_the_rest(mirrors, tmp_path, monkeypatch, transport):
    """The S3 server dies after the first file is fetched and the first piece of the second is
    in: the first file is read, the second up to its last whole piece (it was being read as it
    arrived), every file not fetched whole is reported (its URL, why), and nothing past the
    bytes fetched is read."""
    logdir = tmp_path / "logs"
    with tbscope.SummaryWriter(logdir / "a") as w:
        w.add_scalar("x", 1.0, 0)
    for run in "bcdef":
        with tbscope.SummaryWriter(logdir / run) as w:
            for i in range(20_000):
                w.add_scalar("loss", i * 0.25, i)
    monkeypatch.setattr(_mirror, "CONCURRENCY", 1)
    monkeypatch.setattr(_mirror, "PIECE_BYTES", 64 << 10)
    with s3_server() as server:
        fs = server.fs()
        fs.mkdir(BUCKET)
        fs.put(str(logdir) + "/", f"{BUCKET}/logs", recursive=True)
        options = {**server.options, "config_kwargs": {"retries": {"max_attempts": 1}}, "transport": transport}
        mirror = _mirror.Mirror(f"s3://{BUCKET}/logs", options)
        assert mirror.transport == transport

        def kill_when_b_arrives() -> None:
            deadline = time.monotonic() + 60
            # A new file is written beside the mirror until it is whole.
            b = [Path(mirror.files_dir) / "b", Path(mirror.dir) / "partial" / "b"]

            def arrived(f: Path) -> bool:
                try:
                    return f.stat().st_size > 0
                except FileNotFoundError:  # moved into the mirror since it was listed
                    return False

            while time.monotonic() < deadline:
                if any(arrived(f) for d in b for f in d.glob("*tfevents*")):
                    server.kill()
                    return
                time.sleep(0.001)

        killer = threading.Thread(target=kill_when_b_arrives)
        killer.start()
        t0 = time.monotonic()
        lg = tbscope.scan(
            f"s3://{BUCKET}/logs",
            storage_options={**options, "mirror": mirror.dir},
        )
        killer.join()
        took = time.monotonic() - t0
    errors = lg.report.by_severity("error")
    assert sorted(p.run for p in errors) == list("bcdef") and all(p.file.startswith(p.run + "/") for p in errors), (
        lg.report
    )
    assert all(
        p.reason.startswith(f"s3://{BUCKET}/logs/{p.file}: fetching bytes") and "failed" in p.reason for p in errors
    )
    assert not lg.report.ok
    assert lg.runs in (["a"], ["a", "b"])
    # Nothing half-fetched is left beside the mirror; in it, only what was read of b, whole
    # pieces from its start, which the manifest does not name (a later refresh fetches it whole).
    assert not list((Path(mirror.dir) / "partial").rglob("*tfevents*"))
    got = lg.scalars().to_pandas()
    pd.testing.assert_frame_equal(got[got.run == "a"], tbscope.read_scalars(logdir, runs="a"), check_categorical=False)
    b_local = tbscope.read_scalars(logdir, runs="b")
    b_read = got[got.run == "b"].reset_index(drop=True)
    assert len(b_read) < len(b_local)
    pd.testing.assert_frame_equal(b_read, b_local.iloc[: len(b_read)], check_categorical=False)
    b_files = list((Path(mirror.files_dir) / "b").glob("*tfevents*"))
    b_src = next((logdir / "b").glob("*tfevents*")).read_bytes()
    assert all(f.stat().st_size % (64 << 10) == 0 and b_src.startswith(f.read_bytes()) for f in b_files)
    assert all(not rel.startswith("b/") for rel in mirror._read_manifest())
    # Besides the failure, at most the record the cut ran into: a pending tail, read on reload.
    ends = {f"b/{f.name}": f.stat().st_size for f in b_files}
    assert all(
        p.severity == "truncated" and p.offset + p.length == ends[p.file]
        for p in lg.report.problems
        if p.severity != "error" and p.run == "b"
    ), lg.report
    assert took < 60
    # Reading again with the server gone: the listing fails, the rows read before stay.
    runs = lg.runs
    lg.reload()
    assert lg.runs == runs and f"error: .: listing s3://{BUCKET}/logs failed" in str(lg.report)
    # A new scan with nothing fetched before cannot show anything: it raises, saying why.
    with pytest.raises(OSError, match="could not list"):
        tbscope.scan(
            f"s3://{BUCKET}/other",
            storage_options={**server.options, "config_kwargs": {"retries": {"max_attempts": 1}}},
        )


def test_writer_upload_reads_back(s3):
    url = f"s3://{BUCKET}/written/run1"
    with environ(AWS_ENDPOINT_URL=s3.endpoint):
        w = tbscope.SummaryWriter(url, flush_secs=3600)
        for i in range(50):
            w.add_scalar("loss", 1.0 / (i + 1), i)
        w.flush()
        for i in range(50, 80):
            w.add_scalar("loss", 1.0 / (i + 1), i)
        w.close()
        df = tbscope.read_scalars(f"s3://{BUCKET}/written")
    assert list(df["step"]) == list(range(80)) and set(df["run"]) == {"run1"}
    assert df["value"].tolist() == pytest.approx([1.0 / (i + 1) for i in range(80)])


def test_missing_remote_logdir_and_bad_arguments(s3, tbx_logdir):
    with pytest.raises(FileNotFoundError, match="no such logdir"):
        tbscope.scan(f"s3://{BUCKET}/nothing-here", storage_options=s3.options)
    with pytest.raises(ValueError, match="storage_options= is for URLs"):
        tbscope.scan(tbx_logdir, storage_options={"anon": True})


def test_memory_and_file_urls(mirrors, tbx_logdir):
    import fsspec

    mem = fsspec.filesystem("memory")
    mem.put(str(tbx_logdir) + "/", "/tbscope-tbx", recursive=True)
    try:
        local = tbscope.scan(tbx_logdir)
        for url in ("memory://tbscope-tbx", tbx_logdir.as_uri()):
            lg = tbscope.scan(url)
            assert lg.runs == local.runs
            for kind in KINDS:
                assert same_table(lg._frame(kind).to_arrow(), local._frame(kind).to_arrow()), (url, kind)
        # One event file by URL.
        one = next(p for p in sorted(tbx_logdir.rglob("*tfevents*")))
        rel = one.relative_to(tbx_logdir).as_posix()
        assert tbscope.read_scalars(f"memory://tbscope-tbx/{rel}").equals(tbscope.read_scalars(one))
    finally:
        mem.rm("/tbscope-tbx", recursive=True)


def test_serve_parses_urls():
    from tbscope.server.config import parse_logdirs

    assert [s.path for s in parse_logdirs("s3://b/logs")] == ["s3://b/logs"]
    assert [(s.name, s.path) for s in parse_logdirs("x:s3://b/a,y:gs://c/d")] == [("x", "s3://b/a"), ("y", "gs://c/d")]


def test_storage_option_values_parse():
    assert _mirror.parse_storage_option("anon=true") == ("anon", True)
    assert _mirror.parse_storage_option("endpoint_url=http://h:9000") == ("endpoint_url", "http://h:9000")
    assert _mirror.parse_storage_option('client_kwargs={"region_name": "x"}') == ("client_kwargs", {"region_name": "x"})
    with pytest.raises(ValueError):
        _mirror.parse_storage_option("novalue")


def test_compat_readers_over_s3(s3, tbx_logdir):
    from tbscope.compat import EventAccumulator, SummaryReader

    run = next(p.parent for p in sorted(tbx_logdir.rglob("*tfevents*")))
    rel = run.relative_to(tbx_logdir).as_posix()
    with environ(AWS_ENDPOINT_URL=s3.endpoint):
        remote = EventAccumulator(f"s3://{BUCKET}/tbx/{rel}").Reload()
        local = EventAccumulator(str(run)).Reload()
        assert remote.Tags() == local.Tags()
        for tag in local.Tags()["scalars"]:
            assert [(e.step, e.value) for e in remote.Scalars(tag)] == [(e.step, e.value) for e in local.Scalars(tag)]
        remote.Reload()  # refreshes the mirror, finds nothing new
        assert remote.Tags() == local.Tags()
        pd.testing.assert_frame_equal(
            SummaryReader(f"s3://{BUCKET}/tbx").scalars, SummaryReader(str(tbx_logdir)).scalars
        )
