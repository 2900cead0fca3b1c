"""Resynchronisation on a crafted file: the cost of damage that is built to be expensive.

A file of nothing but 12-byte record headers whose length CRCs hold, each claiming 1 MiB of
payload; the payload's CRC never does, and a real record comes last. A reader that checks each
candidate's data CRC by a pass over its payload does a MiB of CRC work per 12 bytes (a 4.6 MB
file took 25 s before); tbscope's stays linear in the bytes skipped.

    .venv/bin/python bench/crafted.py                # 100 MB, what `make bench` runs
    .venv/bin/python bench/crafted.py --mb 4.6 --repeat 5

Times, in fresh processes (median of --repeat): `tbscope check --final` on it and on a logdir
of one empty file (the command's fixed cost: imports), and the read alone inside a process
(`tbscope.scan(..., tail_timeout=0)` then its report). Prints the bytes the framing fed to
CRC-32C, read from the reader's trace (`TBSCOPE_TRACE=1`), against the file's size. Target:
100 MB checked in < 2 s.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLAIM = 1 << 20


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC-32C (Castagnoli), byte at a time: only short inputs here."""
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(payload: bytes) -> bytes:
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", masked_crc(head)) + payload + struct.pack("<I", masked_crc(payload))


def crafted(path: Path, size: int) -> None:
    head = struct.pack("<Q", CLAIM)
    header = head + struct.pack("<I", masked_crc(head))
    # Event { wall_time = 1, file_version = "brain.Event:2" }: found after all the damage.
    last = record(b"\x09" + struct.pack("<d", 1.0) + b"\x1a\x0dbrain.Event:2")
    n = max(1, (size - len(last)) // len(header))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        chunk = header * 65536
        for _ in range(n // 65536):
            f.write(chunk)
        f.write(header * (n % 65536))
        f.write(last)
    # An hour old: not a file that may still be written.
    old = time.time() - 3600
    os.utime(path, (old, old))


READ = """
import sys, time, tbscope
t0 = time.perf_counter()
tbscope.scan(sys.argv[1], tail_timeout=0).report
print(time.perf_counter() - t0)
"""


def timed(cmd: list[str], inner: bool = False) -> tuple[float, int | None]:
    env = dict(os.environ, TBSCOPE_TRACE="1")
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    took = time.perf_counter() - t0
    m = re.search(r"crc (\d+) bytes", p.stderr)
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    if inner:
        took = float(p.stdout.split()[-1])
    return took, int(m.group(1)) if m else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0, help="file size in MB (default 100)")
    ap.add_argument("--repeat", type=int, default=3, help="fresh-process runs per command (median)")
    args = ap.parse_args()
    tbscope_cli = str(Path(sys.executable).with_name("tbscope"))
    with tempfile.TemporaryDirectory(prefix="tbscope-crafted-") as d:
        logdir = str(Path(d) / "crafted")
        path = Path(logdir) / "run" / "events.out.tfevents.1700000000.crafted"
        crafted(path, int(args.mb * 1e6))
        size = path.stat().st_size
        empty = Path(d) / "empty"
        (empty / "run").mkdir(parents=True)
        (empty / "run" / "events.out.tfevents.1700000000.empty").touch()
        commands = {
            "tbscope check --final": ([tbscope_cli, "check", logdir, "--final", "--format", "json"], False),
            "tbscope check --final, empty logdir": ([tbscope_cli, "check", str(empty), "--final", "--format", "json"], False),
            "the read alone, in process": ([sys.executable, "-c", READ, logdir], True),
        }
        print(f"crafted file: {size / 1e6:.1f} MB of headers claiming {CLAIM} bytes each, every 12 bytes")
        print()
        print("| command | seconds (median) | all runs | CRC bytes | CRC bytes / file bytes |")
        print("|---|---:|---|---:|---:|")
        for name, (cmd, inner) in commands.items():
            runs = [timed(cmd, inner) for _ in range(args.repeat)]
            times = [t for t, _ in runs]
            crc = runs[-1][1]
            ratio = f"{crc / size:.1f}" if crc and "empty" not in name else "n/a"
            print(f"| {name} | {statistics.median(times):.2f} | {', '.join(f'{t:.2f}' for t in times)} | {crc if crc is not None else 'n/a'} | {ratio} |")


if __name__ == "__main__":
    main()
