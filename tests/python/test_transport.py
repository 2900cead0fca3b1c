"""The transport that fetches a remote logdir's bytes (``tbscope._transport``): native for
``s3://`` when the storage options map onto it, fsspec otherwise or when asked; the options
and the credential chain as s3fs takes them; throttled requests retried; against moto's real
S3 server on loopback."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pytest
import tbscope
from s3_util import AWS_ENV, environ, flaky_proxy, s3_server
from tbscope import _mirror, _transport

BUCKET = "tbscope-transport"


@pytest.fixture(scope="module")
def s3(tmp_path_factory, tbx_logdir):
    root = tmp_path_factory.mktemp("cache-root")
    with environ(TBSCOPE_CACHE_DIR=str(root), **AWS_ENV), s3_server() as server:
        fs = server.fs()
        fs.mkdir(BUCKET)
        fs.put(str(tbx_logdir) + "/", f"{BUCKET}/tbx", recursive=True)
        # A public copy (objects readable by anyone) for unsigned requests.
        for p in tbx_logdir.rglob("*tfevents*"):
            fs.pipe_file(f"{BUCKET}/public/{p.relative_to(tbx_logdir).as_posix()}", p.read_bytes(), ACL="public-read")
        yield server


def _scalars(url, options, tmp_path):
    lg = tbscope.scan(url, storage_options={**options, "mirror": str(tmp_path / "m")})
    return lg, lg.scalars().to_pandas()


def test_s3_reads_natively_and_other_stores_through_fsspec(s3, tbx_logdir):
    assert _mirror.Mirror(f"s3://{BUCKET}/tbx", s3.options).transport == "native"
    import fsspec

    fsspec.filesystem("memory").pipe_file("/tbscope-transport/run/events.out.tfevents.1.h", b"")
    assert _mirror.Mirror("memory://tbscope-transport", {}).transport == "fsspec"
    with pytest.raises(ValueError, match="native transport reads s3:// only, not memory://"):
        _mirror.Mirror("memory://tbscope-transport", {"transport": "native"})


def test_unmapped_options_fall_back_to_fsspec_or_say_why(s3):
    # An option the native client does not take (s3fs's extra request arguments): fsspec.
    extra = {**s3.options, "s3_additional_kwargs": {"RequestPayer": "requester"}}
    assert _mirror.Mirror(f"s3://{BUCKET}/tbx", extra).transport == "fsspec"
    odd = {**s3.options, "client_kwargs": {"verify": False}}
    assert _mirror.Mirror(f"s3://{BUCKET}/tbx", odd).transport == "fsspec"
    with pytest.raises(ValueError, match="s3_additional_kwargs are not mapped"):
        _mirror.Mirror(f"s3://{BUCKET}/tbx", {**extra, "transport": "native"})
    with pytest.raises(ValueError, match="use one of auto, native, fsspec"):
        _mirror.Mirror(f"s3://{BUCKET}/tbx", {**s3.options, "transport": "fast"})


def test_environment_forces_the_transport(s3, tbx_logdir, tmp_path):
    with environ(**{_transport.ENV: "fsspec"}):
        lg, df = _scalars(f"s3://{BUCKET}/tbx", s3.options, tmp_path)
    assert lg._remote.transport == "fsspec"
    pd.testing.assert_frame_equal(df, tbscope.read_scalars(tbx_logdir))


@pytest.mark.parametrize(
    "how",
    ["client_kwargs", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "profile", "anon"],
)
def test_storage_options_and_the_credential_chain_map_onto_the_native_client(s3, tbx_logdir, tmp_path, how):
    """Every way s3fs is told where and as whom, read natively, equals the local read."""
    env: dict[str, str] = {}
    options: dict = {}
    if how == "client_kwargs":
        options = {"client_kwargs": {"endpoint_url": s3.endpoint, "region_name": "eu-west-3"}}
    elif how in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        env = {how: s3.endpoint}
    elif how == "profile":
        # A named profile in files of ~/.aws's shape: credentials and the endpoint from there,
        # none in the environment.
        (tmp_path / "config").write_text(f"[profile lab]\nregion = ap-south-1\nendpoint_url = {s3.endpoint}\n")
        (tmp_path / "credentials").write_text("[lab]\naws_access_key_id = labkey\naws_secret_access_key = labsecret\n")
        env = {
            "AWS_CONFIG_FILE": str(tmp_path / "config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
            "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "",
            "AWS_DEFAULT_REGION": "",
        }
        options = {"profile": "lab"}
    else:
        options = {"endpoint_url": s3.endpoint, "anon": True}
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("AWS_ENDPOINT_URL")}
    # fsspec keeps filesystems by their options, not the environment: one made for {} in an
    # earlier test module (with another server in AWS_ENDPOINT_URL) would list here.
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    try:
        with environ(**env):
            for k, v in env.items():
                if v == "":
                    del os.environ[k]
            mirror = _mirror.Mirror(f"s3://{BUCKET}/tbx", {**options, "mirror": str(tmp_path / "m")})
            native = mirror._native
            assert mirror.transport == "native" and native is not None
            assert native.endpoint == s3.endpoint
            if how == "client_kwargs":
                assert native.region == "eu-west-3"
            if how == "profile":
                assert native.region == "ap-south-1" and native._identity() == ("labkey", "labsecret", None)
            if how == "anon":
                assert native.anonymous and native._identity() == (None, None, None)
            lg, df = _scalars(f"s3://{BUCKET}/{'public' if how == 'anon' else 'tbx'}", options, tmp_path)
            assert lg._remote.transport == "native" and lg._remote.last.bytes_fetched > 0
            assert lg.report.ok, lg.report
    finally:
        os.environ.update(saved)
    pd.testing.assert_frame_equal(df, tbscope.read_scalars(tbx_logdir))


@pytest.mark.parametrize("transport", ["native", "fsspec"])
def test_throttled_requests_are_retried(s3, tbx_logdir, tmp_path, transport):
    """S3 answers 503 SlowDown to the first ranged GETs: they are retried with backoff and
    the read is whole, with nothing reported."""
    with flaky_proxy(s3.endpoint, fail=3) as proxy:
        options = {**s3.options, "endpoint_url": proxy.endpoint, "transport": transport}
        lg, df = _scalars(f"s3://{BUCKET}/tbx", options, tmp_path)
    assert lg._remote.transport == transport
    files = len(list(tbx_logdir.rglob("*tfevents*")))
    assert proxy.failed == 3 and proxy.ranged >= files + 3
    assert lg.report.ok, lg.report
    pd.testing.assert_frame_equal(df, tbscope.read_scalars(tbx_logdir))


def test_a_request_that_keeps_failing_is_reported_and_the_rest_read(s3, tbx_logdir, tmp_path, monkeypatch):
    """Every try of the first file's GET is refused: that file is reported (why, how many
    tries) and rolled back, the other files are read."""
    monkeypatch.setattr(_mirror, "CONCURRENCY", 1)
    monkeypatch.setattr(_mirror, "BACKOFF", 0.01)
    files = sorted(tbx_logdir.rglob("*tfevents*"), key=lambda p: (str(p.parent), p.name))
    # The client's own tries (1 + 1 retry) times the mirror's per piece.
    refused = 2 * _mirror.TRIES
    with flaky_proxy(s3.endpoint, fail=refused, status=500) as proxy:
        options = {**s3.options, "endpoint_url": proxy.endpoint, "config_kwargs": {"retries": {"max_attempts": 2}}}
        lg = tbscope.scan(f"s3://{BUCKET}/tbx", storage_options={**options, "mirror": str(tmp_path / "m")})
        lg.scalars()
    assert lg._remote.transport == "native" and proxy.failed == refused
    errors = lg.report.by_severity("error")
    first = files[0].relative_to(tbx_logdir).as_posix()
    assert [p.file for p in errors] == [first], lg.report
    assert f"failed after {_mirror.TRIES} tries" in errors[0].reason and "500" in errors[0].reason
    assert not (Path(lg._remote.files_dir) / first).exists()
    # The store answers again: every other file was fetched whole and read.
    for p in files[1:]:
        rel = p.relative_to(tbx_logdir).as_posix()
        assert (Path(lg._remote.files_dir) / rel).read_bytes() == p.read_bytes(), rel
    assert set(lg.runs) == {p.parent.relative_to(tbx_logdir).as_posix() or "." for p in files[1:]}


def test_a_forked_child_fetches_with_its_own_client(s3, tbx_logdir, tmp_path):
    """A process that fetched natively and then forked (DataLoader workers, a pre-fork server):
    the child has none of the runtime's threads nor the client's connections; its fetches,
    through the parent's Mirror and through a new one, work all the same."""
    parent = _mirror.Mirror(f"s3://{BUCKET}/tbx", {**s3.options, "mirror": str(tmp_path / "parent")})
    parent.sync(first=True)
    assert parent.transport == "native" and parent.last.bytes_fetched > 0
    one = next(p for p in sorted(tbx_logdir.rglob("*tfevents*")))
    rel = one.relative_to(tbx_logdir).as_posix()
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 when both fetches gave the right bytes
        code = 3
        try:
            write = parent._piece_writer()
            fd = os.open(tmp_path / "piece", os.O_WRONLY | os.O_CREAT, 0o644)
            n = write(f"{parent.root}/{rel}", 0, one.stat().st_size, fd)
            os.close(fd)
            child = _mirror.Mirror(f"s3://{BUCKET}/tbx", {**s3.options, "mirror": str(tmp_path / "child")})
            stats = child.sync(first=True)
            good = n == one.stat().st_size and (tmp_path / "piece").read_bytes() == one.read_bytes()
            code = 0 if good and stats.bytes_fetched == parent.last.bytes_fetched and not stats.problems else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's fetch hung")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0


def test_dask_listing_takes_tbscope_s_own_storage_options(s3, tbx_logdir, tmp_path):
    """``transport`` and ``mirror`` are tbscope's options, not the store's: the Dask listing
    (fsspec) leaves them out."""
    from tbscope.dask import event_files

    url = f"s3://{BUCKET}/tbx"
    plain = event_files(url, storage_options=s3.options)
    assert len(plain) == len(list(tbx_logdir.rglob("*tfevents*")))
    own = {**s3.options, "transport": "fsspec", "mirror": str(tmp_path / "m")}
    assert event_files(url, storage_options=own) == plain


def _listing(mirror: _mirror.Mirror) -> dict[str, tuple[int, float]]:
    return {rel: (info["size"], info["mtime"]) for rel, info in mirror.list_files().items()}


def test_the_native_client_lists_as_fsspec_does(s3, tbx_logdir):
    """The listing goes through the transport that fetches: the same event files, sizes and
    times as s3fs's ``find``, for a logdir, for one event file by URL, and for a prefix that
    another key only begins with (``tbx`` is not ``tbx-other``); nothing there is
    FileNotFoundError either way."""
    fs = s3.fs()
    one = next(p for p in sorted(tbx_logdir.rglob("*tfevents*")))
    rel = one.relative_to(tbx_logdir).as_posix()
    fs.pipe_file(f"{BUCKET}/tbx-other/run/events.out.tfevents.1.h", one.read_bytes())
    for path in ("tbx", "tbx/", f"tbx/{rel}", "tbx-other"):
        native = _mirror.Mirror(f"s3://{BUCKET}/{path}", s3.options)
        through_fsspec = _mirror.Mirror(f"s3://{BUCKET}/{path}", {**s3.options, "transport": "fsspec"})
        assert native.transport == "native" and through_fsspec.transport == "fsspec"
        got, want = _listing(native), _listing(through_fsspec)
        assert native._fs is None, "the native listing made an fsspec filesystem"
        assert sorted(got) == sorted(want) and got, path
        for name, (size, mtime) in got.items():
            assert size == want[name][0] and mtime == pytest.approx(want[name][1], abs=1.0), name
        assert native.single == through_fsspec.single == path.endswith(rel)
    for mirror in (
        _mirror.Mirror(f"s3://{BUCKET}/nothing", s3.options),
        _mirror.Mirror(f"s3://{BUCKET}/tb", s3.options),
    ):
        with pytest.raises(FileNotFoundError):
            mirror.list_files()


def test_a_native_read_imports_no_s3fs(s3, tbx_logdir, tmp_path):
    """Reading ``s3://`` natively makes no fsspec filesystem: s3fs, aiobotocore and aiohttp
    are never imported (about half a second of a command's start), and the rows are the
    local read's."""
    import subprocess
    import sys

    code = (
        "import sys, tbscope\n"
        f"df = tbscope.read_scalars('s3://{BUCKET}/tbx', storage_options={{**{s3.options!r}, 'mirror': {str(tmp_path / 'm')!r}}})\n"
        f"df.to_pickle({str(tmp_path / 'df.pkl')!r})\n"
        "print(sorted(m for m in ('s3fs', 'aiobotocore', 'aiohttp') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    pd.testing.assert_frame_equal(pd.read_pickle(tmp_path / "df.pkl"), tbscope.read_scalars(tbx_logdir))


def test_keys_the_native_client_cannot_name_go_through_fsspec(s3, tmp_path):
    """Run names with characters object_store refuses in keys (``[``, ``#``, ``%``, common in
    run names that carry hyperparameters): the listing and those files' bytes go through
    fsspec, and the read equals the local one."""
    logdir = tmp_path / "logs"
    for run in ("lr[0.1]", "a#b", "50%", "plain"):
        with tbscope.SummaryWriter(logdir / run) as w:
            for i in range(5):
                w.add_scalar("loss", i / 2, i)
    s3.fs().put(str(logdir) + "/", f"{BUCKET}/odd", recursive=True)
    lg, df = _scalars(f"s3://{BUCKET}/odd", s3.options, tmp_path)
    assert lg.report.ok, lg.report
    pd.testing.assert_frame_equal(df, tbscope.read_scalars(logdir))
    assert sorted(lg.runs) == sorted(["lr[0.1]", "a#b", "50%", "plain"])
