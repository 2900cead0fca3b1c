"""A damaged cache never raises and never lies (docs/cache.md, "A cache never raises").

Every file of a generation is checked against the size and CRC-32C its manifest records
(the manifest against its own) before anything in it is used, and nothing of a cache is mapped:
one flipped bit anywhere is a warning and a read of the logdir, and a file truncated under a
reader that uses it cannot kill that reader (SIGBUS).

Truth is a fresh scan without a cache. The logdir holds every kind (tensorboardX's fixture and
TensorBoard's writer's side by side), so a generation has a segment file of each kind besides
its manifest, its two stored tables and CURRENT.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import tbscope
from test_cache import KINDS, _norm, assert_same, cold, current, event_files, frame_records, scalar_events, snapshot


def settle(root: Path) -> None:
    """Every directory's mtime an hour back: a warm open then proves "nothing changed" with
    stats alone and leaves the state and the rows encoded until they are asked for."""
    t = time.time() - 3600
    for d in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        os.utime(d, (t, t))


@pytest.fixture(scope="module")
def every_kind(tbx_logdir: Path, tb_logdir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("every_kind") / "logdir"
    shutil.copytree(tbx_logdir, root / "tbx")
    shutil.copytree(tb_logdir, root / "tb")
    settle(root)
    return root


@pytest.fixture(scope="module")
def truth(every_kind: Path) -> dict[str, Any]:
    return cold(every_kind)


@pytest.fixture(scope="module")
def pristine(every_kind: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache of `every_kind`, written once; tests damage copies of it."""
    d = tmp_path_factory.mktemp("pristine") / "cache"
    tbscope.scan(every_kind, cache=d).runs
    # A second open lists the settled directories once more and publishes that listing: the
    # generation tests copy is one a warm open checks with stats alone.
    tbscope.scan(every_kind, cache=d).runs
    return d


def generation_files(cache: Path) -> dict[str, Path]:
    """The files of the current generation by what they are: each kind's segment, `manifest`,
    `facts`, `stats`, and `CURRENT`."""
    gen = cache / current(cache)
    out: dict[str, Path] = {"CURRENT": cache / "CURRENT"}
    for p in gen.iterdir():
        parts = p.name.split(".")
        if p.name == "verified":
            # What opens checked already (test_a_verified_file_is_trusted_until_it_changes);
            # not read from a fresh copy of a cache (other inodes).
            continue
        if p.name == "manifest":
            out["manifest"] = p
        elif p.name in ("facts.arrow", "stats.arrow"):
            out[parts[0]] = p
        else:
            assert len(parts) == 3 and parts[2] == "arrow" and parts[1] in KINDS, p.name
            assert parts[1] not in out, "one segment per kind in a fresh cache"
            out[parts[1]] = p
    return out


FILES = ["manifest", "facts", "stats", "CURRENT", *KINDS]


def test_a_generation_has_every_file_kind(every_kind: Path, pristine: Path) -> None:
    # (so that the bit-flip test below covers every kind of file a cache holds)
    assert sorted(generation_files(pristine)) == sorted(FILES)


def flip(path: Path, pos: int, bit: int) -> None:
    b = bytearray(path.read_bytes())
    b[pos] ^= 1 << bit
    path.write_bytes(bytes(b))


@pytest.mark.parametrize("name", FILES)
def test_a_flipped_bit_anywhere_is_found(
    every_kind: Path, truth: dict[str, Any], pristine: Path, tmp_path: Path, name: str
) -> None:
    """One bit flipped in one file of the generation, at its first and last byte and at seeded
    random places, with the logdir unchanged: the warm open (which leaves the rows undecoded
    until they are asked for) and an open that decodes everything at once (the check cannot
    prove "nothing changed": a directory was just touched) both warn, read the logdir and
    rewrite the cache; no exception, no wrong value."""
    rng = random.Random(f"{name}-10")
    size = generation_files(pristine)[name].stat().st_size
    places = [0, size - 1, size // 2] + [rng.randrange(size) for _ in range(3)]
    cache = tmp_path / "cache"
    touched = every_kind / "tbx"
    st = touched.stat()
    for i, pos in enumerate(places):
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(pristine, cache)
        bit = rng.randrange(8)
        flip(generation_files(cache)[name], pos, bit)
        lazy = i % 2 == 0
        if not lazy:
            os.utime(touched)  # listed again: every part of the cache decoded at once
        where = f"{name} byte {pos} of {size}, bit {bit}, {'lazy' if lazy else 'eager'}"
        try:
            lg = tbscope.scan(every_kind, cache=cache)
            snap = snapshot(lg)
        except BaseException as e:  # a PanicException is not an Exception
            pytest.fail(f"{where}: {type(e).__name__}: {e}")
        info = lg.cache_info
        assert info is not None
        if name == "CURRENT" and info.status == "hit":
            # The flip left the name it holds intact (its newline became other white space).
            assert not info.warnings and (cache / current(cache)).is_dir(), where
        else:
            assert info.status == "miss" and info.written, (where, info)
            assert any("not used" in w for w in info.warnings), (where, info.warnings)
        assert_same(truth, snap)
        os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns))
        # The cache written instead serves the next open.
        again = tbscope.scan(every_kind, cache=cache)
        assert_same(truth, snapshot(again))
        assert again.cache_info is not None and not again.cache_info.warnings, where


def flip_in_place(path: Path) -> None:
    """One bit in the middle of `path` flipped by a write in place, its mtime put back as it was
    (only the ctime tells)."""
    st = path.stat()
    with open(path, "r+b") as fh:
        fh.seek(st.st_size // 2)
        b = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([b[0] ^ 0x08]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size


def held_files(err: str) -> dict[str, str]:
    """From `TBSCOPE_TRACE=1` output: per cache file name, whether its open `checked` its
    checksum or `trusted` its generation's stamp."""
    out: dict[str, str] = {}
    for line in err.splitlines():
        if line.startswith("tbscope cache file "):
            path, _, rest = line[len("tbscope cache file ") :].partition(": ")
            out[Path(path).name] = "trusted" if " trusted " in rest else "checked"
    return out


def test_a_verified_file_is_trusted_until_it_changes(
    every_kind: Path,
    truth: dict[str, Any],
    pristine: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The first open of a generation checks every file it uses and records that in the
    generation's stamp; later opens take those files unchecked while each is the same file,
    unwritten (its ctime unchanged). A byte changed in place, with its mtime put back as it was,
    is checked again and found: a warning and the logdir's values, never the damaged ones."""
    cache = tmp_path / "cache"
    shutil.copytree(pristine, cache)
    monkeypatch.setenv("TBSCOPE_TRACE", "1")
    # A file is stamped only once its last change (the copy) lies 2 s in the past.
    time.sleep(2.2)

    def open_all() -> tuple[tbscope.Logdir, dict[str, Any], dict[str, str]]:
        capfd.readouterr()
        lg = tbscope.scan(every_kind, cache=cache)
        snap = snapshot(lg)
        return lg, snap, held_files(capfd.readouterr().err)

    lg, snap, held = open_all()
    assert_same(truth, snap)
    assert lg.cache_info is not None and lg.cache_info.status == "hit" and not lg.cache_info.warnings
    files = generation_files(cache)
    segments = {p.name for k, p in files.items() if k in KINDS}
    assert segments <= set(held) and set(held.values()) == {"checked"}, held
    assert (files["manifest"].parent / "verified").is_file()

    lg, snap, held = open_all()
    assert_same(truth, snap)
    assert lg.cache_info is not None and lg.cache_info.status == "hit" and not lg.cache_info.warnings
    assert segments <= set(held) and set(held.values()) == {"trusted"}, held

    # One bit of the scalars segment flipped in place, its mtime restored.
    seg = files["scalars"]
    flip_in_place(seg)
    lg, snap, held = open_all()
    assert_same(truth, snap)
    info = lg.cache_info
    assert info is not None and info.status == "miss" and info.written, info
    assert any("not used" in w and seg.name in w and "checksum" in w for w in info.warnings), info.warnings


def test_a_segment_linked_into_the_next_generation_keeps_its_stamp(
    tbx_logdir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A refresh that reads appended bytes hard-links the segments it did not rewrite into
    its new generation. The link (and the removal of the generation before) moves their ctime;
    their stamp is carried with them, so the refresh after takes them unchecked, as the one
    before did (it used to check them again on every refresh). A byte changed in place later,
    its mtime put back, is still checked and found."""
    logdir = tmp_path / "logdir"
    shutil.copytree(tbx_logdir, logdir)
    cache = tmp_path / "cache"
    tbscope.scan(logdir, cache=cache).scalars()
    first = {p.name for p in (cache / current(cache)).glob("*.scalars.arrow")}
    assert len(first) == 1
    (seg,) = first
    if not leases(cache / current(cache) / seg):
        pytest.skip("no read leases on this filesystem: nothing is carried (docs/cache.md)")
    # Stamped only once its last change (the write) lies 2 s in the past.
    time.sleep(2.2)
    monkeypatch.setenv("TBSCOPE_TRACE", "1")
    run_file = event_files(logdir / "hp" / "trial_0")[-1]

    def append_and_open(start: int | None) -> tuple[tbscope.Logdir, dict[str, str]]:
        if start is not None:
            with open(run_file, "ab") as fh:
                fh.write(frame_records(scalar_events("appended", range(start, start + 10))))
        capfd.readouterr()
        lg = tbscope.scan(logdir, cache=cache)
        assert_same(cold(logdir), snapshot(lg))
        return lg, held_files(capfd.readouterr().err)

    _, held = append_and_open(None)
    assert held[seg] == "checked", held
    for start in (100, 200, 300):
        before = current(cache)
        lg, held = append_and_open(start)
        info = lg.cache_info
        assert info is not None and info.status == "updated" and info.written, info
        assert current(cache) != before
        # The first generation's scalars segment, linked into every generation since.
        assert (cache / current(cache) / seg).stat().st_nlink >= 2
        assert held[seg] == "trusted", (start, held)

    # One bit of the linked segment flipped in place, its mtime restored.
    flip_in_place(cache / current(cache) / seg)
    capfd.readouterr()
    lg = tbscope.scan(logdir, cache=cache)
    assert_same(cold(logdir), snapshot(lg))
    info = lg.cache_info
    assert info is not None and info.status == "miss" and info.written, info
    assert any("not used" in w and seg in w and "checksum" in w for w in info.warnings), info.warnings


# --------------------------------------------------------------------------------------------
# truncated in place while a reader uses it: never SIGBUS


CHILD = r"""
import json, math, sys
import tbscope

KINDS = ("scalars", "histograms", "images", "audio", "text", "hparams", "blobs", "tensors")


def norm(v):
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    return v


logdir, cache, when = sys.argv[1:]
lg = tbscope.scan(logdir, cache=cache)
lg.reload()
held = {}
if when == "after":
    # Every table taken (their buffers are what a mapping would have pointed into).
    for k in KINDS:
        held[k] = (lg.hparams_records() if k == "hparams" else getattr(lg, k)()).to_arrow()
    held["run_info"] = lg.run_info().to_arrow()
    held["series"] = lg.series().to_arrow()
status = lg.cache_info.status
print("ready", flush=True)
sys.stdin.readline()  # the parent truncates the cache's files now
# What a warm open answers from the generation's stored tables and its runs' state first.
for k in ("run_info", "series"):
    if k not in held:
        held[k] = getattr(lg, k)().to_arrow()
for k in KINDS:
    if k not in held:
        held[k] = (lg.hparams_records() if k == "hparams" else getattr(lg, k)()).to_arrow()
out = {k: repr([norm(r) for r in t.to_pylist()]) for k, t in held.items()}
info = lg.cache_info
print(json.dumps({"tables": out, "first": status, "status": info.status, "warnings": list(info.warnings)}), flush=True)
"""


def leases(path: Path) -> bool:
    """Whether the kernel grants this process a read lease on `path` (as tbscope asks for one
    before it maps a cache file)."""
    import fcntl

    with open(path, "rb") as f:
        try:
            fcntl.fcntl(f.fileno(), fcntl.F_SETLEASE, fcntl.F_RDLCK)
        except OSError:
            return False
        fcntl.fcntl(f.fileno(), fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return True


@pytest.mark.parametrize(
    "when,how,change",
    [
        ("before", "read", "truncate"),
        ("before", "mapped", "truncate"),
        ("after", "read", "truncate"),
        ("after", "mapped", "truncate"),
        ("after", "mapped", "rewrite"),
    ],
)
def test_changed_under_a_reader(
    every_kind: Path, truth: dict[str, Any], pristine: Path, tmp_path: Path, when: str, how: str, change: str
) -> None:
    """Another process truncates every file of the generation in place (or rewrites a byte of
    each) while a reader has it open: `before` the reader asked for any table (the warm open
    left the state and rows encoded; the manifest and the stored tables are in memory), or
    `after` it took every table. Files are `read` (small ones, by default) or `mapped`
    (`TBSCOPE_CACHE_MAP_BYTES=0`: every file, as large ones are) under a lease. The reader
    neither dies (SIGBUS) nor returns anything but the logdir's values; `before`, it says why
    it read the logdir again."""
    cache = tmp_path / "cache"
    shutil.copytree(pristine, cache)
    if how == "mapped" and not leases(cache / "CURRENT"):
        pytest.skip("the kernel grants no lease here: cache files are read (the `read` cases)")
    env = dict(os.environ, TBSCOPE_TRACE="1", TBSCOPE_CACHE_MAP_BYTES="0" if how == "mapped" else str(1 << 40))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(every_kind), str(cache), when],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        for name, f in generation_files(cache).items():
            if name == "CURRENT":
                continue
            if change == "truncate":
                os.truncate(f, 0)
            else:
                with open(f, "r+b") as fh:
                    fh.seek(f.stat().st_size // 2)
                    b = fh.read(1)
                    fh.seek(-1, os.SEEK_CUR)
                    fh.write(bytes([b[0] ^ 0x10]))
        out, err = proc.communicate("go\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, f"the reader died (exit {proc.returncode}): {err[-2000:]}"
    res = json.loads(out.strip().splitlines()[-1])
    # The open checked the logdir with stats alone and left everything encoded.
    first = next(
        x
        for x in err.splitlines()
        if x.startswith(("tbscope cache hit:", "tbscope cache miss:", "tbscope cache updated:"))
    )
    assert res["first"] == "hit" and "check" in first and "discover" not in first, err
    # Every cache file was held the way this case is about (a file the kernel grants no lease
    # on is read: then this case tests nothing new).
    held = [x for x in err.splitlines() if x.startswith("tbscope cache file ")]
    assert held and all(f" bytes {how} " in x for x in held), err
    want = {k: repr([_norm(r) for r in truth[k].to_pylist()]) for k in res["tables"]}
    for k, v in want.items():
        assert res["tables"][k] == v, k
    if when == "before":
        assert res["status"] == "miss" and any("not used" in w for w in res["warnings"]), res["warnings"]
    else:
        assert res["status"] == "hit" and not res["warnings"]
