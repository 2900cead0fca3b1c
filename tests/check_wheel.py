"""Check that a built wheel installs on every glibc from 2.17 (manylinux2014) on.

Two witnesses that do not share code: `auditwheel show` (PyPA's checker: the platform tag the
wheel is consistent with, from its external libraries and symbol versions), and the extension
module's own dynamic symbol table read with pyelftools (every GLIBC_x.y version it needs).
Also checks that the wheel's file name claims the same platform. Exits non-zero with a message
on the first thing that does not hold.

Usage: python tests/check_wheel.py dist/tbscope-*.whl [--max-glibc 2.17]
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection


def parse_version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def auditwheel_tag(wheel: Path) -> tuple[str, str]:
    """The platform tag `auditwheel show` says the wheel is consistent with, and its report."""
    exe = Path(sys.executable).with_name("auditwheel")
    proc = subprocess.run([str(exe), "show", str(wheel)], capture_output=True, text=True)
    report = proc.stdout + proc.stderr
    if proc.returncode != 0:
        sys.exit(f"auditwheel show failed ({proc.returncode}):\n{report}")
    found = re.search(r'platform tag:\s*"([^"]+)"', report)
    if found is None:
        sys.exit(f"auditwheel show named no platform tag:\n{report}")
    return found.group(1), report


def glibc_versions_needed(so_bytes: bytes) -> set[tuple[int, int]]:
    """Every GLIBC_x.y version the shared object's symbol references name (`objdump -T`'s list)."""
    needed: set[tuple[int, int]] = set()
    elf = ELFFile(io.BytesIO(so_bytes))
    for section in elf.iter_sections():
        if not isinstance(section, GNUVerNeedSection):
            continue
        for _library, auxes in section.iter_versions():
            for aux in auxes:
                name = aux.name
                if name.startswith("GLIBC_") and name[6:7].isdigit():
                    needed.add(parse_version(name[6:]))
    return needed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--max-glibc", default="2.17", help="newest glibc the wheel may need")
    args = parser.parse_args()
    limit = parse_version(args.max_glibc)
    wheel: Path = args.wheel

    tag, report = auditwheel_tag(wheel)
    print(report.strip())
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", tag)
    if m is None:
        sys.exit(f"auditwheel: {tag!r} is not a manylinux tag")
    if (int(m.group(1)), int(m.group(2))) > limit:
        sys.exit(f"auditwheel: the wheel needs glibc {m.group(1)}.{m.group(2)}, above {args.max_glibc}")

    # The file name is what pip matches against the machine: it must claim no newer glibc.
    name_tags = wheel.name[: -len(".whl")].split("-")[-1].split(".")
    legacy = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
    claimed = []
    for t in name_tags:
        mm = re.fullmatch(r"manylinux_(\d+)_(\d+)_\w+", t)
        if mm:
            claimed.append((int(mm.group(1)), int(mm.group(2))))
        elif t.split("_")[0] in legacy:
            claimed.append(legacy[t.split("_")[0]])
    if not claimed or max(claimed) > limit:
        sys.exit(f"wheel file name {wheel.name} does not claim glibc <= {args.max_glibc}")

    with zipfile.ZipFile(wheel) as z:
        modules = [n for n in z.namelist() if n.endswith(".so")]
        if not modules:
            sys.exit(f"{wheel.name} holds no extension module")
        for name in modules:
            versions = glibc_versions_needed(z.read(name))
            if not versions:
                sys.exit(f"{name}: no GLIBC symbol versions found (not a glibc-linked module?)")
            newest = max(versions)
            if newest > limit:
                sys.exit(f"{name} needs GLIBC_{newest[0]}.{newest[1]}, above {args.max_glibc}")
            print(f"{name}: newest glibc symbol version GLIBC_{newest[0]}.{newest[1]} "
                  f"(of {len(versions)} versions)")
    print(f"{wheel.name}: installs on glibc {args.max_glibc} and later ({tag})")


if __name__ == "__main__":
    main()
