"""The notebook integration through IPython's own shell: %load_ext tbscope, %tbscope and
tbscope.notebook.display show the dashboard as an iframe on a real server."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("IPython")


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(tmp_path / "logs" / "run_a")) as w:
        for step in range(20):
            w.add_scalar("loss", 1 / (step + 1), step)
    return tmp_path / "logs"


@pytest.fixture
def shell() -> Iterator[Any]:
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    yield sh
    import tbscope.notebook

    tbscope.notebook.stop()
    InteractiveShell.clear_instance()


def iframe_src(cap: Any) -> str:
    html = [o.data["text/html"] for o in cap.outputs if "text/html" in o.data]
    assert len(html) == 1, cap.outputs
    m = re.search(r'<iframe[^>]*src="([^"]+)"', html[0])
    assert m, html[0]
    assert 'height="600"' in html[0]
    return m.group(1)


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()


def test_magic_serves_and_embeds_the_dashboard(shell: Any, logdir: Path) -> None:
    from IPython.utils.capture import capture_output

    assert shell.run_cell("%load_ext tbscope").success
    with capture_output() as cap:
        assert shell.run_cell(f"%tbscope --logdir {logdir} --height 600").success
    src = iframe_src(cap)
    assert src.startswith("http://127.0.0.1:")
    status, headers, body = get(src)
    assert status == 200 and b'id="app"' in body
    # Framing is allowed for notebooks on this machine, and only them.
    assert "frame-ancestors 'self' http://localhost:* http://127.0.0.1:*" in headers["content-security-policy"]
    runs = json.loads(get(src + "api/v1/runs")[2])["columns"]["run"]
    assert runs == ["run_a"]
    # The same logdir again reuses the server; --stop stops it.
    with capture_output() as cap2:
        shell.run_cell(f"%tbscope {logdir} --height 600")
    assert iframe_src(cap2) == src
    with capture_output() as cap3:
        shell.run_cell("%tbscope --stop")
    assert "stopped 1" in cap3.stdout
    with pytest.raises(urllib.error.URLError):
        get(src + "api/v1/status")


def test_magic_usage_errors_do_not_raise(shell: Any) -> None:
    from IPython.utils.capture import capture_output

    shell.run_cell("%load_ext tbscope")
    with capture_output() as cap:
        assert shell.run_cell("%tbscope").success
    assert "usage: %tbscope --logdir" in cap.stdout
    with capture_output() as cap:
        assert shell.run_cell("%tbscope --port notanumber").success
    assert "invalid int value" in cap.stderr


def test_display_from_code(shell: Any, logdir: Path) -> None:
    from IPython.utils.capture import capture_output

    import tbscope.notebook

    with capture_output() as cap:
        server = tbscope.notebook.display(logdir, height=600)
    assert iframe_src(cap) == server.url
    assert get(server.url + "api/v1/status")[0] == 200
    with pytest.raises(ValueError, match="height"):
        tbscope.notebook.display(logdir, height=10)
