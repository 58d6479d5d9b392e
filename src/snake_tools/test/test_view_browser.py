"""``snake view`` in a real Foxglove app: Foxglove Studio 1.48 in headless Chromium.

The app is npm ``@foxglove/studio-base@1.48.0`` (its prebuilt web bundle, MPL-2.0) on a small
host page (``foxglove_app/``) with React 17, driven by npm ``puppeteer-core`` in Debian's
``chromium``. The npm packages are fetched once into ``~/.cache/snake-stack/npm`` (or
``$SNAKE_NPM_CACHE``); the test is skipped, saying why, only where ``npm``, ``node`` or
``chromium`` is missing (``scripts/setup.sh`` installs them). Studio 1.48 offers the subprotocol
``foxglove.websocket.v1`` only, so the connection also proves the handshake relay.

The twin, the gait (driven forward by ``cmd_vel``) and ``snake view`` run as in the stack; the
app opens ``?ds=foxglove-websocket&ds.url=ws://127.0.0.1:PORT`` with the shipped layout, and
the checks read the page (``foxglove_app/drive.mjs``): every channel listed with its type, no
problem (a schema the app cannot parse is one), every joint's plot legend showing a value and
the values changing, the Diagnostics panel naming the gait node, the 3D panel drawing the
body's blue. With ``SNAKE_VIEW_SCREENSHOT=path`` the last page is also saved there (the docs'
``docs/figures/snake_view_foxglove.png`` is made so).
"""

from __future__ import annotations

import fcntl
import http.server
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from snake_core.robot import load_robot
from snake_tools.command import snake_command
from snake_tools.live_view import CHANNELS

pytestmark = pytest.mark.graph

ROOT = Path(__file__).resolve().parents[3]
_HOST = Path(__file__).resolve().parent / "foxglove_app"
_CACHE = Path(os.environ.get("SNAKE_NPM_CACHE", Path.home() / ".cache" / "snake-stack" / "npm"))
_PACKS = {"studio": "@foxglove/studio-base@1.48.0", "react": "react@17.0.2", "react-dom": "react-dom@17.0.2"}
_PUPPETEER = "puppeteer-core@23.11.1"
_CHROMIUM = os.environ.get("SNAKE_CHROMIUM", "/usr/bin/chromium")
_BOUND_S = 180.0  # failure bound on each wait of the page and the stack, never a speed requirement
_NPM_TIMEOUT_S = 900.0  # failure bound on fetching the packages once
_MIN_BODY_PIXELS = 1000  # the body's blue in the 3D panel (some 4800 pixels at the layout's camera; 0 without the body)
_ROBOT = load_robot("tsnake")


def _npm_packages() -> dict[str, Path]:
    """The unpacked npm packages and puppeteer-core's entry, fetched into the cache on first use."""
    for tool in ("npm", "node"):
        if shutil.which(tool) is None:
            pytest.skip(f"`{tool}` is not installed (scripts/setup.sh installs Debian's nodejs and npm)")
    if not Path(_CHROMIUM).exists():
        pytest.skip(f"no Chromium at {_CHROMIUM} (scripts/setup.sh installs Debian's chromium)")
    _CACHE.mkdir(parents=True, exist_ok=True)
    with (_CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one fetch at a time across test workers
        out = {}
        for name, spec in _PACKS.items():
            where = _CACHE / spec.replace("/", "+")
            if not (where / "package" / "package.json").exists():
                with tempfile.TemporaryDirectory(dir=_CACHE) as tmp:
                    done = subprocess.run(["npm", "pack", spec, "--pack-destination", tmp], capture_output=True,
                                          text=True, timeout=_NPM_TIMEOUT_S, check=False)
                    assert done.returncode == 0, f"npm pack {spec}: {done.stderr[-2000:]}"
                    (tgz,) = Path(tmp).glob("*.tgz")
                    with tarfile.open(tgz) as tar:
                        tar.extractall(Path(tmp) / "x", filter="data")
                    shutil.rmtree(where, ignore_errors=True)
                    (Path(tmp) / "x").rename(where)
            out[name] = where / "package"
        node = _CACHE / _PUPPETEER.replace("/", "+")
        entry = node / "node_modules" / "puppeteer-core" / "lib" / "esm" / "puppeteer" / "puppeteer-core.js"
        if not entry.exists():
            done = subprocess.run(["npm", "install", "--prefix", str(node), "--no-audit", "--no-fund",
                                   "--no-save", _PUPPETEER], capture_output=True, text=True,
                                  timeout=_NPM_TIMEOUT_S, check=False)
            assert done.returncode == 0 and entry.exists(), f"npm install {_PUPPETEER}: {done.stderr[-2000:]}"
        out["puppeteer"] = entry
        return out


class _Files(http.server.SimpleHTTPRequestHandler):
    """The host page, the shipped layout and the npm packages, by URL prefix."""

    roots: ClassVar[dict[str, Path]] = {}

    def translate_path(self, path: str) -> str:
        path = path.split("?", 1)[0].split("#", 1)[0]
        if path in ("/", "/index.html"):
            return str(_HOST / "index.html")
        if path == "/boot.js":
            return str(_HOST / "boot.js")
        if path == "/layout.json":
            return str(ROOT / "config" / "foxglove_layout.json")
        prefix, _, rest = path.lstrip("/").partition("/")
        root = self.roots.get(prefix)
        if root is None:
            return str(_HOST / "missing")
        target = (root / rest).resolve()
        return str(target) if target.is_relative_to(root.resolve()) else str(_HOST / "missing")

    def end_headers(self) -> None:
        self.send_header("Accept-Ranges", "bytes")  # the app reads a remote bag by ranges
        super().end_headers()

    def send_head(self) -> Any:
        """A ``Range: bytes=a-b`` request answered with 206 and those bytes; others as the base class."""
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", "").strip())
        if wanted is None:
            return super().send_head()
        path = Path(self.translate_path(self.path))
        size = path.stat().st_size
        start, end = int(wanted[1]), min(int(wanted[2] or size - 1), size - 1)
        with path.open("rb") as f:
            f.seek(start)
            body = f.read(end - start + 1)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # the app aborts its first read of a bag
            super().handle_error(request, client_address)


@pytest.fixture
def app_server() -> Iterator[tuple[int, dict[str, Path]]]:
    packages = _npm_packages()
    _Files.roots = {"studio": packages["studio"], "react": packages["react"], "react-dom": packages["react-dom"]}
    server = _Server(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1]), packages
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def _start_view(tmp: Path) -> tuple[subprocess.Popen[bytes], Path, int]:
    """``snake view`` on a free port; returns once it says it serves (a bounded wait on its log)."""
    log = tmp / "view.log"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(snake_command("view", "--port", str(port)), stdout=log.open("wb"),
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + _BOUND_S
    while "serving" not in log.read_text(errors="replace"):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.1)  # polling the log file for its line, not a synchronisation by time
    return proc, log, port


def test_foxglove_studio_shows_the_live_robot(ros: Any, app_server: tuple[int, dict[str, Path]],
                                              tmp_path: Path) -> None:
    from geometry_msgs.msg import TwistStamped

    from snake_ros.qos import COMMAND_QOS

    http_port, packages = app_server
    ros.start("twin_node", {"robot": "tsnake", "world": "flat"})
    ros.start("gait_node", {"use_sim_time": True, "robot": "tsnake", "gait": "rolling", "rate_hz": 50})
    cmd = ros.node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
    stop = threading.Event()

    def drive() -> None:  # forward, slowly, all along (the gait stops without commands)
        while not stop.wait(0.1):
            msg = TwistStamped()
            msg.twist.linear.x = 0.05
            cmd.publish(msg)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    view, view_log, port = _start_view(tmp_path)
    shot = tmp_path / "snake_view_foxglove.png"
    cfg = {
        "url": f"http://127.0.0.1:{http_port}/?ds=foxglove-websocket&ds.url=ws://127.0.0.1:{port}&layoutId=snake",
        "screenshot": str(shot), "puppeteer": str(packages["puppeteer"]), "chromium": _CHROMIUM,
        "timeout_ms": int(_BOUND_S * 1000), "topics": CHANNELS, "joints": list(_ROBOT.joint_names),
        "diagnostic": "gait_node: gait", "min_body_pixels": _MIN_BODY_PIXELS,
    }
    try:
        done = subprocess.run(["node", str(_HOST / "drive.mjs"), json.dumps(cfg)], capture_output=True, text=True,
                              timeout=_BOUND_S * 10, check=False)
    finally:
        stop.set()
        driver.join()
        view.send_signal(2)
        view.wait(timeout=_BOUND_S)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if os.environ.get("SNAKE_VIEW_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["SNAKE_VIEW_SCREENSHOT"])
    assert report["failed"] is None, (json.dumps(report["failed"], indent=1), view_log.read_text())
    assert report["problems"] == []
    assert set(report["joints"]) == set(_ROBOT.joint_names) and None not in report["joints"].values()
    assert report["body_pixels"] >= _MIN_BODY_PIXELS
    assert "refused" not in view_log.read_text()          # Studio 1.48's foxglove.websocket.v1 was accepted


def test_foxglove_studio_opens_the_demo_bag(app_server: tuple[int, dict[str, Path]], tmp_path: Path) -> None:
    """The demo's rosbag2 MCAP bag (``snake demo``: the twin and the gait over DDS, recorded by the
    stack's recorder), opened from loopback with the shipped layout: every topic listed with its
    type and decoded (no problem), every joint plotted with a value at the bag's middle."""
    from datetime import UTC, datetime

    from rosbags.rosbag2 import Reader

    http_port, packages = app_server
    demo = subprocess.run(snake_command("demo", "--speed-factor", "10", "--out", str(tmp_path / "demo")),
                          capture_output=True, text=True, timeout=_BOUND_S * 5, check=False)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    bag = tmp_path / "demo" / "bag"
    (mcap,) = bag.glob("*.mcap")
    with Reader(bag) as reader:
        topics = {c.topic: c.msgtype for c in reader.connections}
        middle_ns = (reader.start_time + reader.end_time) // 2
    _Files.roots["bag"] = bag
    sec, nsec = divmod(middle_ns, 1_000_000_000)
    when = datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{nsec:09d}Z"
    shot = tmp_path / "bag.png"
    cfg = {
        "url": f"http://127.0.0.1:{http_port}/?ds=remote-file&ds.url=http://127.0.0.1:{http_port}/bag/{mcap.name}"
               f"&layoutId=snake&time={when}",
        "screenshot": str(shot), "puppeteer": str(packages["puppeteer"]), "chromium": _CHROMIUM,
        "timeout_ms": int(_BOUND_S * 1000), "topics": topics, "joints": list(_ROBOT.joint_names),
        "diagnostic": "", "min_body_pixels": 0,
        "skip": ["joint values changing", "diagnostics show the gait node", "3D panel draws the body"],
    }
    done = subprocess.run(["node", str(_HOST / "drive.mjs"), json.dumps(cfg)], capture_output=True, text=True,
                          timeout=_BOUND_S * 10, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failed"] is None, json.dumps(report["failed"], indent=1)
    assert report["problems"] == [] and {"/joint_states", "/mocap/head_pose", "/cmd_vel"} <= set(topics)
    assert set(report["joints"]) == set(_ROBOT.joint_names) and None not in report["joints"].values()
