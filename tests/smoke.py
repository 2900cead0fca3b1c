"""Smoke test of an installed tbscope (wheel or sdist): write an event file by hand, read it back."""

import struct
import tempfile
from pathlib import Path

import tbscope
from tbscope._core import NativeReader  # noqa: F401  (the native module loads)


def masked_crc(data: bytes) -> int:
    # Table-free CRC-32C, slow but independent of tbscope.
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(payload: bytes) -> bytes:
    n = struct.pack("<Q", len(payload))
    return n + struct.pack("<I", masked_crc(n)) + payload + struct.pack("<I", masked_crc(payload))


def scalar_event(step: int, value: float) -> bytes:
    tag = b"loss"
    v = b"\x0a" + bytes([len(tag)]) + tag + b"\x15" + struct.pack("<f", value)
    summary = b"\x0a" + bytes([len(v)]) + v
    return b"\x09" + struct.pack("<d", 1000.0 + step) + b"\x10" + bytes([step]) + b"\x2a" + bytes([len(summary)]) + summary


with tempfile.TemporaryDirectory() as d:
    path = Path(d) / "run" / "events.out.tfevents.1.smoke"
    path.parent.mkdir()
    path.write_bytes(b"".join(record(scalar_event(s, s / 2)) for s in range(5)))
    df = tbscope.read_scalars(d)
    assert df["value"].tolist() == [0.0, 0.5, 1.0, 1.5, 2.0], df
    assert list(df["run"].astype(str).unique()) == ["run"]
    # The server from the wheel and its declared dependencies alone (pip install, then serve).
    import json
    import urllib.request

    with tbscope.serve(d, port=0, cache=False, reload_interval=0) as server:
        assert server.wait_loaded(60)
        with urllib.request.urlopen(server.url + "api/v1/runs") as r:
            assert json.load(r)["columns"]["run"] == ["run"]
    print(f"tbscope {tbscope.__version__}: smoke test passed ({len(df)} rows, and the server answered)")

# The wheel and the sdist carry the built dashboard (users never need Node).
static = Path(tbscope.__file__).parent / "server" / "static"
assert (static / "index.html").is_file(), f"the dashboard is missing from the install ({static})"
assert any(static.glob("assets/index-*.js")), "the dashboard's script is missing from the install"
print("dashboard assets present")
