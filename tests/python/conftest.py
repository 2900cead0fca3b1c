"""Shared pytest fixtures: logdirs written by third-party writers, once per session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # `import fixtures, oracle` under any --import-mode
    sys.path.insert(0, str(HERE))

import fixtures  # noqa: E402

REPO = HERE.parents[1]
#: Event files other people committed to public repositories (see SOURCES.md there).
WILD_DIR = Path(os.environ.get("TBSCOPE_WILD_DIR", REPO / ".." / "shared" / "data" / "wild"))


@pytest.fixture(scope="session")
def tbx_logdir_info(tmp_path_factory):
    """(path, description) of a logdir written by tensorboardX's SummaryWriter."""
    pytest.importorskip("tensorboardX")
    root = tmp_path_factory.mktemp("tbx_logdir")
    return root, fixtures.write_tbx_logdir(root)


@pytest.fixture(scope="session")
def tbx_logdir(tbx_logdir_info) -> Path:
    return tbx_logdir_info[0]


@pytest.fixture(scope="session")
def tb_logdir_info(tmp_path_factory):
    """(path, description) of a logdir written with TensorBoard's pure-Python EventFileWriter."""
    pytest.importorskip("tensorboard")
    root = tmp_path_factory.mktemp("tb_logdir")
    return root, fixtures.write_tb_tensor_logdir(root)


@pytest.fixture(scope="session")
def tb_logdir(tb_logdir_info) -> Path:
    return tb_logdir_info[0]


@pytest.fixture(scope="session")
def wild_logdir() -> Path:
    """The shared directory of real-world event files, used as one logdir (skip if absent)."""
    if not WILD_DIR.is_dir() or not any(WILD_DIR.rglob("*tfevents*")):
        pytest.skip(f"wild event files not found at {WILD_DIR}")
    return WILD_DIR.resolve()


LOGDIRS = ["tbx", "tb", "wild"]


@pytest.fixture(scope="session", params=LOGDIRS)
def any_logdir(request) -> Path:
    """Each logdir in turn: tensorboardX fixture, TensorBoard-writer fixture, wild files."""
    return request.getfixturevalue(f"{request.param}_logdir")
