"""Remote logdirs and Dask: the rows of bench/README.md's "Scale" section.

1. The corpus (bench/corpus.py, 10M scalar events by default) is uploaded to moto's standalone
   S3 server on 127.0.0.1. Each measurement runs in a fresh subprocess (peak RSS is the child's
   VmHWM), median of --repeats:
   - local: ``tbscope.scan(logdir).scalars().to_arrow()`` with a warm page cache;
   - s3: the same over ``s3://`` with an empty mirror (every byte fetched);
   - raw-GET floor: the same listing and objects, the same ranged GETs (piece size and
     concurrency of tbscope's fetcher) through the client the s3 read uses (the native one, unless
     TBSCOPE_REMOTE_TRANSPORT=fsspec), bytes discarded; and the same through s3fs, the floor
     of the builds before the native transport;
   - the s3 read's fetch alone (a mirror refresh), which shows how the read splits into
     fetching and parsing;
   - the native floor with the local read running beside it in the same process: the fetch's
     and the parse's CPU on the same CPUs as the server, without the mirror (nothing written
     to disk or read back) and without waiting for bytes: about the least a read that parses
     what it fetches costs on this machine.
   Wall and CPU time (user + system, every thread) of the measured call, and the CPU time moto's
   server process spent meanwhile (it shares the machine's CPUs with the reader). Each ranged
   GET is timed from its start to its last byte: the rows give the mean number of requests in
   flight between the first start and the last end, and the time before the first request
   (listing, client set-up) and after the last byte (what the call still does then).
   ``--baseline PYTHON`` adds the s3 read and the fetch alone of another build (its venv's
   python), run in the same rounds, for an A/B on a loaded machine.
2. Dask on a warm LocalCluster (worker processes, nthreads=1, one tbscope thread each), median
   of 5 ``compute()``: ``read_scalars(...).map_partitions(len).sum()`` and ``to_parquet`` with
   1 and 2 workers.

``--one-file`` reads instead the corpus's event files concatenated into one (a TFRecord stream
stays one when concatenated): one large object, which the s3 read parses as its pieces arrive.

Usage: .venv/bin/python bench/remote.py [--events 1e6] [--repeats 3] [--skip-dask] [--baseline PYTHON] [--one-file]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from benchutil import human_bytes, warm_page_cache  # noqa: E402
from corpus import add_corpus_args, ensure_corpus, specs_from_args  # noqa: E402 - after the path

# The tests' moto start (one way to run the local S3 server for both).
sys.path.insert(0, str(BENCH_DIR.parent / "tests" / "python"))
from s3_util import start_moto  # noqa: E402 - after the path

AWS_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
BUCKET = "tbscope-bench"

CHILD = r"""
import json, os, resource, sys, time
mode, target, endpoint, mirror, local_logdir = sys.argv[1:6]
opts = {"endpoint_url": endpoint}
# Imports are not what is measured: pyarrow (and numpy under it) too, which the reads would
# otherwise import inside the timed call (and numpy's OpenBLAS threads spin for a while after).
import fsspec, s3fs, threading, tbscope, tbscope._mirror, pyarrow
# Each ranged GET's start and end (seconds from t0): requests in flight over time.
spans, spans_lock = [], threading.Lock()
def timed(get):
    def run(*args):
        a = time.perf_counter() - t0
        n = get(*args)
        with spans_lock:
            spans.append((a, time.perf_counter() - t0))
        return n
    return run
Mirror = tbscope._mirror.Mirror
if hasattr(Mirror, "_piece_writer"):
    # Whichever transport the mirror chose.
    writer = Mirror._piece_writer
    Mirror._piece_writer = lambda self: timed(writer(self))
else:  # a build before the native transport (--baseline): s3fs's streamer
    streamer = tbscope._mirror._streamer
    tbscope._mirror._streamer = lambda fs: (lambda f: f and timed(f))(streamer(fs))
t0, c0 = time.perf_counter(), time.process_time()
rows = 0
if mode == "mirror":
    # The fetch alone: the s3 read's first half (its second is a local read of the mirror).
    m = tbscope._mirror.Mirror(target, {**opts, "mirror": mirror})
    rows = m.sync(first=True).bytes_fetched
elif mode == "local":
    import tbscope
    rows = tbscope.scan(target).scalars().to_arrow().num_rows
elif mode == "s3":
    import tbscope
    rows = tbscope.scan(target, storage_options={**opts, "mirror": mirror}).scalars().to_arrow().num_rows
elif mode in ("floor", "floor-fsspec", "floor+parse"):
    # tbscope's fetcher without tbscope: one listing, the same pieces, the same concurrency,
    # through the client the read uses ("floor": the native one when the read is native,
    # writing into /dev/null) or s3fs ("floor-fsspec", bytes into memory and dropped).
    # "floor+parse": the native floor with a local read of the same corpus (page cache) in
    # the main thread meanwhile: both on the same CPUs as moto, no mirror written or read
    # back, and the parse never waiting for bytes to arrive.
    from concurrent.futures import ThreadPoolExecutor
    from tbscope import _mirror
    # The read's own listing (the mirror's, through the same transport), nothing fetched.
    listing = _mirror.Mirror(target, {**opts, "transport": "fsspec" if mode == "floor-fsspec" else "auto"})
    found = listing.list_files()
    root, native = listing.root, listing._native
    pieces = [(f"{root}/{rel}", s, min(s + _mirror.PIECE_BYTES, int(i["size"]))) for rel, i in sorted(found.items())
              for s in range(0, int(i["size"]), _mirror.PIECE_BYTES)]
    if native is not None:
        write = native.piece_writer(root.split("/", 1)[0])
        sink = os.open(os.devnull, os.O_WRONLY)
        @timed
        def get(piece):
            p, s, e = piece
            return write(p, s, e, sink)
    else:
        fs = listing.fs
        @timed
        def get(piece):
            p, s, e = piece
            return len(fs.cat_file(p, start=s, end=e))
    with ThreadPoolExecutor(_mirror.CONCURRENCY) as pool:
        fetched = pool.map(get, pieces)  # every piece submitted now
        if mode == "floor+parse":
            tbscope.scan(local_logdir).scalars().to_arrow()
        rows = sum(fetched)
    out_transport = "native" if native is not None else "fsspec"
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
# VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec from the forking parent (the bench,
# which held the uploaded corpus), while VmHWM belongs to this process's own memory.
hwm = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
out = {"seconds": seconds, "cpu": cpu, "rows": rows, "peak_rss": hwm}
if mode != "floor-fsspec" and mode.startswith("floor"):
    out["native"] = out_transport == "native"
if spans:
    # Mean requests in flight from the first request's start to the last one's end, and what
    # the measured call spent before the first and after the last byte.
    first, last = min(a for a, _ in spans), max(b for _, b in spans)
    out["in_flight"] = sum(b - a for a, b in spans) / (last - first)
    out["before_first"], out["after_last"] = first, seconds - last
print(json.dumps(out))
"""


def process_cpu(pid: int) -> float:
    """User + system seconds of a process so far, every thread (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child(
    mode: str,
    target: str,
    endpoint: str,
    mirror: str,
    server: int | None = None,
    python: str = sys.executable,
    local: str = "",
) -> dict[str, float]:
    """One measured read in a fresh process of ``python``; with ``server``, also that process's
    CPU time meanwhile (moto's share of the two CPUs)."""
    before = process_cpu(server) if server is not None else 0.0
    out = subprocess.run(
        [python, "-c", CHILD, mode, target, endpoint, mirror, local],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **AWS_ENV},
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    result["server_cpu"] = process_cpu(server) - before if server is not None else 0.0
    return result


def bench_s3(
    logdir: Path, repeats: int, log: list[str], baseline: str | None = None
) -> dict[str, list[dict[str, float]]]:
    import s3fs

    proc, endpoint = start_moto()
    results: dict[str, list[dict[str, float]]] = {
        "local": [],
        "s3": [],
        "floor": [],
        "floor-fsspec": [],
        "floor+parse": [],
        "mirror": [],
    }
    if baseline is not None:
        results.update({"s3@baseline": [], "mirror@baseline": []})
    try:
        os.environ.update(AWS_ENV)
        fs = s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True)
        fs.mkdir(BUCKET)
        t = time.perf_counter()
        fs.put(str(logdir) + "/", f"{BUCKET}/corpus", recursive=True)
        log.append(f"uploaded in {time.perf_counter() - t:.1f} s")
        url = f"s3://{BUCKET}/corpus"
        for i in range(repeats):
            warm_page_cache(logdir)
            results["local"].append(child("local", str(logdir), endpoint, ""))
            results["floor"].append(child("floor", url, endpoint, "", proc.pid))
            results["floor-fsspec"].append(child("floor-fsspec", url, endpoint, "", proc.pid))
            results["floor+parse"].append(child("floor+parse", url, endpoint, "", proc.pid, local=str(logdir)))
            reads = [key for key in results if key not in ("local", "floor", "floor-fsspec", "floor+parse")]
            # Every other round in reverse, so that neither build always runs first.
            for key in reads if i % 2 == 0 else reversed(reads):
                mode, _, other = key.partition("@")
                mirror = tempfile.mkdtemp(prefix="tbscope-bench-mirror-")
                try:
                    python = baseline if other and baseline is not None else sys.executable
                    results[key].append(child(mode, url, endpoint, mirror, proc.pid, python))
                finally:
                    shutil.rmtree(mirror, ignore_errors=True)
            print(
                f"  repeat {i + 1}: " + ", ".join(f"{k} {v[-1]['seconds']:.2f} s" for k, v in results.items()),
                file=sys.stderr,
            )
    finally:
        proc.kill()
        proc.wait()
    return results


def one_file_logdir(logdir: Path) -> Path:
    """A logdir beside the corpus holding one run with one event file: the corpus's files
    concatenated in the reader's order (made once, kept with the corpus)."""
    files = sorted(p for p in logdir.rglob("*tfevents*") if p.is_file())
    out = logdir.parent / "one-file" / "all" / "events.out.tfevents.1700000000.one-file"
    size = sum(p.stat().st_size for p in files)
    if not out.exists() or out.stat().st_size != size:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        with open(tmp, "wb") as dst:
            for p in files:
                with open(p, "rb") as src:
                    shutil.copyfileobj(src, dst, 16 << 20)
        tmp.rename(out)
    return out.parent.parent


def bench_dask(logdir: Path, repeats: int) -> dict[int, dict[str, float]]:
    import distributed
    import tbscope.dask as tdask

    out: dict[int, dict[str, float]] = {}
    for workers in (1, 2):
        env = {"TBSCOPE_NUM_THREADS": "1"}
        with (
            distributed.LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0", env=env
            ) as cluster,
            distributed.Client(cluster),
        ):
            ddf = tdask.read_scalars(str(logdir), threads=1)
            ddf.map_partitions(len).sum().compute()  # warm: workers import tbscope, page cache
            lens, parquet = [], []
            for _ in range(repeats):
                t = time.perf_counter()
                n = ddf.map_partitions(len).sum().compute()
                lens.append(time.perf_counter() - t)
                target = tempfile.mkdtemp(prefix="tbscope-bench-parquet-")
                shutil.rmtree(target)
                t = time.perf_counter()
                tdask.to_parquet(str(logdir), target, threads=1)
                parquet.append(time.perf_counter() - t)
                shutil.rmtree(target, ignore_errors=True)
            out[workers] = {
                "len": statistics.median(lens),
                "parquet": statistics.median(parquet),
                "rows": float(n),
                "partitions": float(ddf.npartitions),
            }
        print(
            f"  dask {workers} worker(s): len {out[workers]['len']:.2f} s, to_parquet {out[workers]['parquet']:.2f} s",
            file=sys.stderr,
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(parser)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument(
        "--baseline", metavar="PYTHON", help="another build's python: its s3 read and fetch run in the same rounds"
    )
    parser.add_argument(
        "--one-file", action="store_true", help="read the corpus's files concatenated into one event file instead"
    )
    args = parser.parse_args()
    spec, _ = specs_from_args(args)
    corpus = ensure_corpus(spec, root=args.corpus_root, jobs=args.jobs, log=lambda m: print(m, file=sys.stderr))
    log: list[str] = []
    load = os.getloadavg()
    logdir = one_file_logdir(corpus.logdir) if args.one_file else corpus.logdir
    s3 = bench_s3(logdir, args.repeats, log, args.baseline)

    def med(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in s3[kind])

    lines = [
        f"### Remote logdirs ({corpus.events:,} scalar events, "
        f"{'in one file (the corpus concatenated)' if args.one_file else f'{corpus.files} files'}, {human_bytes(corpus.bytes)}; "
        f"moto S3 server on loopback; load average {load[0]:.1f} at start, a shared 2-CPU machine)",
        "",
        "| read | time (s, median) | CPU (s, median) | moto's CPU meanwhile (s) | × raw-GET floor | peak RSS | × local peak RSS | requests in flight (mean) | before the first / after the last byte (s) | rows (floor, fetch: bytes) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    floor, local_rss = med("floor", "seconds"), med("local", "peak_rss")
    client = "tbscope's native client" if s3["floor"][0].get("native") else "s3fs"
    for kind, name in (
        ("floor", f"raw-GET floor ({client}: the read's; same pieces and concurrency, bytes discarded)"),
        ("floor-fsspec", "raw-GET floor through s3fs (fsspec's cat_file)"),
        ("floor+parse", "the floor with a local read of the corpus beside it (no mirror; parse never waits for bytes)"),
        ("s3", "tbscope over s3:// (empty mirror)"),
        ("mirror", "its fetch alone (mirror refresh, no read)"),
        ("local", "tbscope local (warm page cache)"),
        ("s3@baseline", f"baseline build ({args.baseline}): s3 read"),
        ("mirror@baseline", "baseline build: fetch alone"),
    ):
        if kind not in s3:
            continue
        t, cpu, rss = med(kind, "seconds"), med(kind, "cpu"), med(kind, "peak_rss")
        timeline = kind != "local"
        flight = f"{med(kind, 'in_flight'):.2f}" if timeline else "–"
        ends = f"{med(kind, 'before_first'):.2f} / {med(kind, 'after_last'):.2f}" if timeline else "–"
        lines.append(
            f"| {name} | {t:.2f} | {cpu:.2f} | {med(kind, 'server_cpu'):.2f} | {t / floor:.2f} | {human_bytes(rss)} | {rss / local_rss:.2f} | {flight} | {ends} | {int(med(kind, 'rows')):,} |"
        )
    floors = [r["seconds"] for r in s3["floor"]]
    for kind, runs in s3.items():
        # Each read against the floor of its own round: steadier than the medians under load.
        ratios = "/".join(f"{r['seconds'] / f:.2f}" for r, f in zip(runs, floors))
        walls = "/".join(f"{r['seconds']:.2f}" for r in runs)
        cpus = "/".join(f"{r['cpu']:.2f}" for r in runs)
        log.append(f"- {kind}: {walls} s, CPU {cpus} s, × the round's floor {ratios}")
    lines += ["", *log]
    if not args.skip_dask:
        d = bench_dask(corpus.logdir, 5)
        lines += [
            "",
            f"### Dask (LocalCluster, worker processes, nthreads=1, TBSCOPE_NUM_THREADS=1; {int(d[1]['partitions'])} partitions; median of 5)",
            "",
            "| workers | map_partitions(len).sum() (s) | speed-up | to_parquet (s) | speed-up |",
            "|---:|---:|---:|---:|---:|",
        ]
        for w in (1, 2):
            lines.append(
                f"| {w} | {d[w]['len']:.2f} | {d[1]['len'] / d[w]['len']:.2f} | {d[w]['parquet']:.2f} | {d[1]['parquet'] / d[w]['parquet']:.2f} |"
            )
    lines.append(f"\nLoad average at the end: {os.getloadavg()[0]:.1f}.")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
