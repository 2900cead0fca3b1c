"""``tbscope cache ls`` / ``clear`` (and ``tbscope.cache.entries``) on real caches, made by real
reads with ``cache=True``, and a real mirror of a ``memory://`` logdir, through the CLI."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tbscope
from click.testing import CliRunner
from tbscope._cli.main import main

DAY = 86400.0


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache root, empty, of this test's own."""
    r = tmp_path / "cache-root"
    monkeypatch.setenv("TBSCOPE_CACHE_DIR", str(r))
    return r


@pytest.fixture
def logdirs(tbx_logdir: Path, tb_logdir: Path, tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(tbx_logdir, a)
    shutil.copytree(tb_logdir, b)
    return a, b


@pytest.fixture
def url(tbx_logdir: Path, tmp_path: Path) -> Iterator[str]:
    """A remote logdir: tbx_logdir in fsspec's in-memory store."""
    import fsspec

    mem = fsspec.filesystem("memory")
    name = f"/tbscope-cachecli-{tmp_path.name}"
    mem.put(str(tbx_logdir) + "/", name, recursive=True)
    try:
        yield "memory:/" + name
    finally:
        mem.rm(name, recursive=True)


def read(path: Any) -> None:
    """A read through the cache (and a remote logdir's mirror)."""
    lg = tbscope.scan(path, cache=True)
    assert len(lg.scalars().to_pandas()) > 0
    info = lg.cache_info
    assert info is not None and not info.warnings


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["cache", *args], prog_name="tbscope")


def ls() -> list[dict[str, Any]]:
    r = cli("ls", "--format", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def du(path: str) -> int:
    """Disk space used, by du itself."""
    return int(subprocess.run(["du", "-s", "-B1", path], capture_output=True, text=True, check=True).stdout.split()[0])


def regular_files(path: str) -> int:
    return len(
        {(p.stat().st_dev, p.stat().st_ino) for p in Path(path).rglob("*") if p.is_file() and not p.is_symlink()}
    )


def tree(path: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(path)), p.stat().st_size if p.is_file() else -1) for p in path.rglob("*"))


def age(path: str, days: float) -> None:
    """Every file and directory of the entry at ``path`` last touched ``days`` ago."""
    t = time.time() - days * DAY
    for top, _dirs, files in os.walk(path):
        for p in [top, *(os.path.join(top, n) for n in files)]:
            os.utime(p, (t, t))


@pytest.fixture
def filled(root: Path, logdirs: tuple[Path, Path], url: str) -> dict[str, dict[str, Any]]:
    """Two local caches, a mirror and its cache, by source (and kind)."""
    a, b = logdirs
    read(a)
    read(b)
    read(url)
    by = {(row["kind"], row["source"]): row for row in ls()}
    assert set(by) == {
        ("cache", str(a.resolve())),
        ("cache", str(b.resolve())),
        ("cache", url),
        ("mirror", url),
    }
    return {
        "a": by["cache", str(a.resolve())],
        "b": by["cache", str(b.resolve())],
        "mirror": by["mirror", url],
        "mirror_cache": by["cache", url],
    }


def test_ls_shows_every_cache_and_mirror_with_its_source_and_size(filled, root, url, logdirs):
    rows = ls()
    assert len(rows) == 4
    for row in rows:
        assert Path(row["path"]).parent in (root, root / "remote")
        assert row["bytes"] == du(row["path"]) > 0
        assert row["files"] == regular_files(row["path"]) > 0
        assert row["endpoint"] is None
    # The mirror holds the logdir's event files, byte for byte.
    mirror = filled["mirror"]
    events = sorted(
        p.relative_to(Path(mirror["path"]) / "logdir") for p in (Path(mirror["path"]) / "logdir").rglob("*tfevents*")
    )
    assert events == sorted(p.relative_to(logdirs[0]) for p in logdirs[0].rglob("*tfevents*"))
    # Newest first, by the last read through each: b is read again (a warm read, which
    # writes nothing to the cache, is a use too).
    age(filled["a"]["path"], 3)
    age(filled["mirror_cache"]["path"], 2.5)
    age(filled["mirror"]["path"], 2)
    age(filled["b"]["path"], 5)
    read(logdirs[1])
    rows = ls()
    assert [r["path"] for r in rows] == [filled[k]["path"] for k in ("b", "mirror", "mirror_cache", "a")]
    for r, days in zip(rows, (0, 2, 2.5, 3)):
        assert abs(iso_seconds(r["last_used"]) - (time.time() - days * DAY)) < 60
    # The table: sizes, "?" for a cache that does not say whose it is (an older tbscope's),
    # and the total.
    os.remove(Path(filled["a"]["path"]) / "source.json")
    age(filled["a"]["path"], 3)
    rows = ls()
    assert rows[3]["path"] == filled["a"]["path"] and rows[3]["source"] is None
    r = cli("ls")
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.splitlines() if filled["a"]["path"] in x)
    assert line.split()[:2] == ["cache", "?"]
    total = sum(du(x["path"]) for x in rows)
    assert r.stdout.splitlines()[-1].startswith("4 entries, ")
    assert r.stdout.splitlines()[-1].endswith(f"({total} bytes) in {root}")
    # The API gives the same records.
    assert [(e.kind, e.source, e.path, e.bytes) for e in tbscope.cache.entries()] == [
        (x["kind"], x["source"], x["path"], x["bytes"]) for x in rows
    ]


def iso_seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def test_clear_older_than_removes_only_the_old_ones_and_dry_run_nothing(filled, root, logdirs):
    before_logdirs = [tree(d) for d in logdirs]
    for key in ("a", "mirror", "mirror_cache"):
        age(filled[key]["path"], 10)
    age(filled["b"]["path"], 6)
    snapshot = tree(root)
    r = cli("clear", "--older-than", "7d", "--dry-run", "--format", "json")
    assert r.exit_code == 0, r.output
    listed = json.loads(r.stdout)
    assert {x["path"] for x in listed} == {filled[k]["path"] for k in ("a", "mirror", "mirror_cache")}
    assert {x["action"] for x in listed} == {"would delete"}
    assert "would be freed; dry run" in r.stderr
    assert tree(root) == snapshot
    r = cli("clear", "--older-than", "1w")
    assert r.exit_code == 0, r.output
    assert "3 entries deleted" in r.stdout
    assert [x["path"] for x in ls()] == [filled["b"]["path"]]
    for k in ("a", "mirror", "mirror_cache"):
        assert not os.path.exists(filled[k]["path"])
    assert [tree(d) for d in logdirs] == before_logdirs
    # What was cleared is made again by the next read.
    read(logdirs[0])
    assert len(ls()) == 2


def test_clear_all_empties_the_root_but_for_what_is_not_tbscopes(filled, root, url):
    (root / "notes.txt").write_text("mine")
    (root / "other").mkdir()
    (root / "other" / "CURRENT.txt").write_text("mine too")
    r = cli("clear", "--all")
    assert r.exit_code == 0, r.output
    assert "4 entries deleted" in r.stdout
    assert sorted(os.listdir(root)) == ["notes.txt", "other"]
    assert ls() == []
    # A mirror and caches cleared whole (lock files too) work again.
    read(url)
    assert {x["kind"] for x in ls()} == {"cache", "mirror"}


def test_clear_one_logdir_or_url(filled, logdirs, url):
    r = cli("clear", str(logdirs[0]))
    assert r.exit_code == 0, r.output
    assert {x["path"] for x in ls()} == {filled[k]["path"] for k in ("b", "mirror", "mirror_cache")}
    r = cli("clear", url, "--format", "csv")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == "kind,source,endpoint,bytes,files,last_used,path,action"
    assert len(r.stdout.splitlines()) == 3  # the mirror and its cache
    assert [x["path"] for x in ls()] == [filled["b"]["path"]]
    r = cli("clear", url)
    assert r.exit_code == 0 and f"nothing cached for {url}" in r.stdout


def test_an_entry_in_use_is_skipped(filled, logdirs, url):
    mirror = filled["mirror"]["path"]
    with open(os.path.join(mirror, "lock"), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a refresh in another process holds it
        r = cli("clear", url)
        assert r.exit_code == 1
        assert "skipped" in r.stdout and "in use by another process" in r.output
        assert os.path.exists(os.path.join(mirror, "manifest.json"))
        with pytest.raises(BlockingIOError):
            tbscope.cache.clear(url, wait=False)
    # A cache another process on this host is writing (its temporary directory, named after
    # its host and process id), and one whose generation is being published (its lock).
    host = "".join(c if c.isascii() and c.isalnum() else "_" for c in socket.gethostname())
    writing = Path(filled["a"]["path"]) / f"tmp-{host}-{os.getpid()}-1"
    writing.mkdir()
    publishing = open(os.path.join(filled["b"]["path"], ".lock"), "a")
    fcntl.flock(publishing, fcntl.LOCK_EX)
    try:
        r = cli("clear", "--all", "--format", "json")
        assert r.exit_code == 1
        actions = {x["path"]: x["action"] for x in json.loads(r.stdout)}
        assert actions[mirror] == "deleted"
        assert actions[filled["a"]["path"]].startswith("skipped: ") and "being written" in actions[filled["a"]["path"]]
        assert actions[filled["b"]["path"]].startswith("skipped: ")
        assert {x["path"] for x in ls()} == {filled["a"]["path"], filled["b"]["path"]}
        assert (
            os.path.isdir(Path(filled["b"]["path"]) / "CURRENT") is False
            and (Path(filled["b"]["path"]) / "CURRENT").exists()
        )
    finally:
        publishing.close()
    # A dead writer's directory is debris: it goes.
    writing.rename(writing.with_name(f"tmp-{host}-{dead_pid()}-1"))
    r = cli("clear", "--all")
    assert r.exit_code == 0, r.output
    assert ls() == []


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.mark.parametrize(
    "args, says",
    [
        (["runs/", "--all"], "LOGDIR_OR_URL and --all contradict each other"),
        (["runs/", "--older-than", "7d"], "LOGDIR_OR_URL and --older-than contradict each other"),
        (["--all", "--older-than", "7d"], "--all and --older-than contradict each other"),
        ([], "say what to clear: a LOGDIR_OR_URL, --older-than AGE or --all"),
        (["--older-than", "7 days"], "write a number and a unit (s, m, h, d, w)"),
        (["--all", "--storage-option", "anon=true"], "--storage-option goes with a URL"),
        (["runs/", "--storage-option", "anon=true"], "storage_options= is for URLs"),
        (["s3://b/x", "--storage-option", "anon"], "--storage-option takes KEY=VALUE"),
    ],
)
def test_wrong_arguments_say_what_to_do(root, args, says):
    (root / "x-0123456789abcdef").mkdir(parents=True)
    (root / "x-0123456789abcdef" / "CURRENT").write_text("gen-1\n")
    r = cli("clear", *args)
    assert r.exit_code == 2, r.output
    assert says in r.output and len(r.output.strip().splitlines()) == 1
    assert (root / "x-0123456789abcdef" / "CURRENT").exists()


def test_a_lock_file_removed_while_waited_for_is_taken_afresh(tmp_path):
    """Clearing an entry removes its lock file under the lock: whoever was waiting for it must
    then lock the file now at that path, or two processes would each hold "the" lock."""
    import threading

    from tbscope._cache_root import flocked

    path = str(tmp_path / "lock")
    holder = open(path, "a")
    fcntl.flock(holder, fcntl.LOCK_EX)
    inside: list[bool] = []

    def waiter() -> None:
        with flocked(path):
            # Held: a fresh open of the path cannot lock it.
            with open(path, "a") as other:
                try:
                    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    inside.append(False)
                except BlockingIOError:
                    inside.append(True)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)  # waiting for the holder's lock
    os.remove(path)
    holder.close()  # releases it
    t.join(10)
    assert inside == [True]


def test_an_s3_mirror_shows_its_endpoint_and_is_cleared_by_url_and_options(root, tbx_logdir):
    """Against a real S3 API (moto on loopback): the mirror of an s3:// logdir names its URL and
    endpoint, and `clear URL --storage-option endpoint_url=...` finds it by them."""
    from s3_util import AWS_ENV, environ, s3_server

    with environ(**AWS_ENV), s3_server() as server:
        fs = server.fs()
        fs.mkdir("tbscope-cachecli")
        fs.put(str(tbx_logdir) + "/", "tbscope-cachecli/tbx", recursive=True)
        url = "s3://tbscope-cachecli/tbx"
        local = tbscope.read_scalars(tbx_logdir)
        assert tbscope.read_scalars(url, storage_options=server.options).equals(local)
        (row,) = ls()
        assert (row["kind"], row["source"], row["endpoint"]) == ("mirror", url, server.endpoint)
        assert row["bytes"] == du(row["path"]) and row["bytes"] >= sum(
            p.stat().st_size for p in tbx_logdir.rglob("*tfevents*")
        )
        # Without the endpoint, the URL names another mirror (the same bucket on AWS): none here.
        r = cli("clear", url)
        assert r.exit_code == 0 and f"nothing cached for {url}" in r.stdout
        assert len(ls()) == 1
        r = cli("clear", url, "--storage-option", f"endpoint_url={server.endpoint}")
        assert r.exit_code == 0, r.output
        assert "1 entry deleted" in r.stdout and ls() == []
        # The next read fetches it again.
        assert tbscope.read_scalars(url, storage_options=server.options).equals(local)
        assert [x["endpoint"] for x in ls()] == [server.endpoint]


def test_clear_deletes_only_the_names_a_cache_writes(logdirs, tmp_path):
    """A cache put by hand where other things live (cache=DIR) is cleared name by name: a
    run directory named like a generation, and other files, stay."""
    a = logdirs[0]
    d = tmp_path / "shared"
    read_into = tbscope.scan(a, cache=str(d))
    read_into.runs
    (d / "gen-1").mkdir()
    (d / "gen-1" / "events.out.tfevents.1.host").write_bytes(b"")
    (d / "notes.txt").write_text("mine")
    assert tbscope.cache.clear(a, cache=str(d))
    assert sorted(p.name for p in d.iterdir()) == ["gen-1", "notes.txt"]
    assert not tbscope.cache.clear(a, cache=str(d))


def test_nothing_to_clear_is_said(root):
    for args, says in (
        (["--all"], f"nothing in {root}"),
        (["--older-than", "1d"], f"nothing unused for 1d in {root}"),
    ):
        r = cli("clear", *args)
        assert r.exit_code == 0 and r.stdout.strip() == says, r.output
    r = cli("ls")
    assert r.exit_code == 0 and r.stdout.strip() == f"0 entries, 0 B (0 bytes) in {root}"
