"""The handshake relay of ``snake view`` in front of a real ``foxglove-sdk`` server, with real clients.

Clients are the ``websockets`` library (the subprotocol names are what Foxglove Studio 1.48 and
Lichtblick offer) and raw sockets for bad input. The server logs a message on one channel
all the while; a client "keeps being served" when it receives those messages after the
bad one has come and gone.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from snake_tools.command import snake_command
from snake_tools.view_handshake import HandshakeRelay, rewrite_request

_BOUND_S = 60.0  # failure bound on every wait, never a speed requirement
_TOPIC = "/tick"
_REQUEST = (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")


class Served:
    """A real SDK server logging on :data:`_TOPIC` until closed, and the relay in front of it."""

    def __init__(self) -> None:
        import foxglove

        self.context = foxglove.Context()
        self.channel = foxglove.Channel(_TOPIC, schema={"type": "object", "properties": {"n": {"type": "integer"}}},
                                        message_encoding="json", context=self.context)
        self.server = foxglove.start_server(host="127.0.0.1", port=0, context=self.context)
        self.lines: list[str] = []
        self._logged = threading.Condition()
        self.relay = HandshakeRelay("127.0.0.1", 0, self.server.port, self._log)
        self.port = self.relay.start()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._ticker.start()

    def _log(self, line: str) -> None:
        with self._logged:
            self.lines.append(line)
            self._logged.notify_all()

    def wait_lines(self, n: int) -> list[str]:
        """The relay's lines once there are ``n`` (a failure bound, never a speed requirement)."""
        with self._logged:
            assert self._logged.wait_for(lambda: len(self.lines) >= n, timeout=_BOUND_S), self.lines
            return list(self.lines)

    def _tick(self) -> None:
        n = 0
        while not self._stop.wait(0.01):  # a data stream to receive, not a synchronisation
            self.channel.log({"n": n})
            n += 1

    def close(self) -> None:
        self._stop.set()
        self._ticker.join()
        self.relay.stop()
        self.server.stop()


@pytest.fixture
def served() -> Iterator[Served]:
    s = Served()
    yield s
    s.close()


def _refusals(lines: list[str]) -> list[str]:
    """The lines about clients refused or dropped (a closing client's reset is another matter)."""
    return [x for x in lines if "refused client" in x or "dropped client" in x]


def _connect(port: int, subprotocols: list[str]) -> Any:
    from websockets.sync.client import connect

    # An unbounded receive queue: a client that stops reading still hears the close handshake.
    return connect(f"ws://127.0.0.1:{port}", subprotocols=subprotocols,  # type: ignore[arg-type]
                   open_timeout=_BOUND_S, max_queue=None)


def _receives_ticks(ws: Any) -> int:
    """Subscribe to :data:`_TOPIC` on an open connection; the ``n`` of the first message received."""
    channel = None
    while channel is None:
        frame = ws.recv(timeout=_BOUND_S)
        if isinstance(frame, str) and json.loads(frame)["op"] == "advertise":
            channel = next(c["id"] for c in json.loads(frame)["channels"] if c["topic"] == _TOPIC)
    ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": channel}]}))
    while True:
        frame = ws.recv(timeout=_BOUND_S)
        if isinstance(frame, bytes) and frame[0] == 0x01:
            assert struct.unpack_from("<I", frame, 1)[0] == 1
            return int(json.loads(frame[13:])["n"])


@pytest.mark.parametrize("offer", [["foxglove.websocket.v1"], ["foxglove.sdk.v1"], ["foxglove.sdk.v1.1"],
                                   ["foxglove.websocket.v1", "foxglove.sdk.v1"]])
def test_either_name_of_the_protocol_is_served(served: Served, offer: list[str]) -> None:
    with _connect(served.port, offer) as ws:
        assert ws.subprotocol in offer          # the client's own name comes back (RFC 6455 4.2.2)
        _receives_ticks(ws)
    assert _refusals(served.lines) == []


def test_a_refused_offer_is_one_line_naming_it(served: Served) -> None:
    from websockets.exceptions import InvalidStatus

    with pytest.raises(InvalidStatus) as refused:
        _connect(served.port, ["ros1.bridge", "foxglove.websocket.v2"])
    assert refused.value.response.status_code == 400
    assert len(served.lines) == 1
    assert "'ros1.bridge', 'foxglove.websocket.v2'" in served.lines[0]
    assert "foxglove.websocket.v1" in served.lines[0] and "refused client 127.0.0.1:" in served.lines[0]


def test_no_subprotocol_at_all_is_refused_by_name(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=_BOUND_S) as s:
        s.sendall(_REQUEST + b"\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 400")
    assert len(served.lines) == 1 and "subprotocol(s) none" in served.lines[0]


@pytest.mark.parametrize(("data", "said"), [
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(40)) + b"\r\n\r\n", "not an HTTP GET request"),
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "not a WebSocket upgrade"),
    (b"A" * 20000, "more than 16384 bytes"),
    (_REQUEST[:40], "closed the connection after 40 bytes"),
])
def test_bad_input_is_one_line_and_the_others_keep_being_served(served: Served, data: bytes, said: str) -> None:
    with _connect(served.port, ["foxglove.websocket.v1"]) as other:
        first = _receives_ticks(other)
        with socket.create_connection(("127.0.0.1", served.port), timeout=_BOUND_S) as bad:
            try:
                bad.sendall(data)
                bad.shutdown(socket.SHUT_WR)    # the client is gone (half of its request, or all of its garbage)
                while bad.recv(4096):           # until the relay has closed its side (after its line)
                    pass
            except ConnectionError:
                pass                            # the relay closed first, with our bytes unread: a reset
        assert len(served.lines) == 1 and said in served.lines[0], served.lines
        later = max(_receives_ticks_again(other) for _ in range(3))
        assert later > first


def _receives_ticks_again(ws: Any) -> int:
    while True:
        frame = ws.recv(timeout=_BOUND_S)
        if isinstance(frame, bytes) and frame[0] == 0x01:
            return int(json.loads(frame[13:])["n"])


def test_a_client_gone_mid_message_leaves_the_others_served(served: Served) -> None:
    with _connect(served.port, ["foxglove.websocket.v1"]) as other:
        first = _receives_ticks(other)
        raw = socket.create_connection(("127.0.0.1", served.port), timeout=_BOUND_S)
        raw.sendall(_REQUEST + b"Sec-WebSocket-Protocol: foxglove.websocket.v1\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += raw.recv(4096)
        assert answer.startswith(b"HTTP/1.1 101") and b"foxglove.websocket.v1" in answer
        # A masked text frame that announces 200 bytes, then only 10 of them, then the client vanishes (RST).
        raw.sendall(bytes([0x81, 0x80 | 126]) + struct.pack(">H", 200) + b"\x01\x02\x03\x04" + b"0123456789")
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        raw.close()
        (line,) = served.wait_lines(1)
        assert "went away mid-connection" in line and "ConnectionResetError" in line, line
        later = max(_receives_ticks_again(other) for _ in range(3))
        assert later > first
    with _connect(served.port, ["foxglove.websocket.v1"]) as fresh:     # and new clients are still welcome
        _receives_ticks(fresh)
    assert _refusals(served.lines) == []


def test_twenty_clients_at_once(served: Served) -> None:
    clients = [_connect(served.port, ["foxglove.websocket.v1" if k % 2 else "foxglove.sdk.v1"]) for k in range(20)]
    try:
        firsts = [_receives_ticks(ws) for ws in clients]
        assert len(firsts) == 20
    finally:
        for ws in clients:
            ws.close()
    assert _refusals(served.lines) == []


def test_the_relay_refuses_a_port_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        relay = HandshakeRelay("127.0.0.1", taken.getsockname()[1], 1, print)
        with pytest.raises(OSError):
            relay.start()


@pytest.mark.graph
def test_snake_view_on_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*snake_command(), "view", "--port", str(port)], capture_output=True, text=True,
                              timeout=_BOUND_S * 2, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--port {port}" in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_the_legacy_name_is_renamed_for_the_sdk_and_nothing_else_changes() -> None:
    head = _REQUEST + b"Sec-WebSocket-Protocol: foxglove.websocket.v1\r\nX-Other: 1\r\n\r\n"
    sent, renamed = rewrite_request(head)
    assert renamed
    assert sent.count(b"Sec-WebSocket-Protocol") == 1 and b"Sec-WebSocket-Protocol: foxglove.sdk.v1\r\n" in sent
    assert sent.replace(b"Sec-WebSocket-Protocol: foxglove.sdk.v1\r\n", b"") == _REQUEST + b"X-Other: 1\r\n\r\n"
    both = _REQUEST + b"Sec-WebSocket-Protocol: foxglove.websocket.v1, foxglove.sdk.v1\r\n\r\n"
    assert rewrite_request(both) == (both, False)   # the SDK's own name is left for the SDK to choose
