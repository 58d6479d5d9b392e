"""The WebSocket handshake of ``snake view``: both names of the Foxglove protocol, one line per refusal.

The Foxglove WebSocket protocol is offered under two subprotocol names: ``foxglove.websocket.v1``
(its specification, github.com/foxglove/ws-protocol ``docs/spec.md``; Foxglove Studio up to 1.87,
Lichtblick before its PR #819, npm ``@foxglove/ws-protocol``'s client) and ``foxglove.sdk.v1``
(the ``foxglove-sdk`` server's name for the same protocol). The SDK's server (0.30) accepts only
its own names and answers any other offer with HTTP 400, logging "handshake failed" without the
offer. :class:`HandshakeRelay` listens in front of it: it reads a client's HTTP upgrade (RFC 6455
section 4.1), renames an offer of ``foxglove.websocket.v1`` to ``foxglove.sdk.v1`` for the SDK and
the SDK's choice back for the client, and from then on copies bytes both ways unchanged. A request
it cannot pass on (not an upgrade, no Foxglove subprotocol, garbage, a client gone before its
headers ended) is refused with one line naming the client and what it offered.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

SDK_SUBPROTOCOLS = ("foxglove.sdk.v1.1", "foxglove.sdk.v1")
"""The names the SDK's server accepts itself."""
LEGACY_SUBPROTOCOL = "foxglove.websocket.v1"
"""The protocol specification's name, renamed to ``foxglove.sdk.v1`` for the SDK."""
_MAX_HEADER_BYTES = 16384  # an upgrade request or answer longer than this is refused
_HEADER_TIMEOUT_S = 30.0  # s a client may take to send its upgrade request (idle sockets are closed)
_START_TIMEOUT_S = 30.0  # s to wait for the listening socket (a failure bound)
_CHUNK_BYTES = 65536  # bytes copied per read once the handshake is done
_PROTOCOL_HEADER = b"sec-websocket-protocol"


class HandshakeError(ValueError):
    """A client's upgrade request that the relay does not pass on."""


def _offers(head: bytes) -> list[str]:
    """The subprotocols an HTTP request head offers, in order (all ``Sec-WebSocket-Protocol`` lines)."""
    out: list[str] = []
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == _PROTOCOL_HEADER:
            out += [p.strip() for p in value.decode("latin-1").split(",") if p.strip()]
    return out


def rewrite_request(head: bytes) -> tuple[bytes, bool]:
    """The upgrade request to send to the SDK, and whether the legacy name was renamed.

    Args:
        head: The client's request line and headers, up to and with the blank line that ends them.

    Raises:
        HandshakeError: Not a WebSocket upgrade, or no Foxglove subprotocol offered (the message
            names what was offered).
    """
    lines = head.split(b"\r\n")
    request = lines[0].split(b" ")
    if len(request) != 3 or request[0] != b"GET" or not request[2].startswith(b"HTTP/1."):
        raise HandshakeError(f"not an HTTP GET request (first line {lines[0][:80]!r})")
    headers = {n.strip().lower() for n, sep, _v in (x.partition(b":") for x in lines[1:]) if sep}
    if b"upgrade" not in headers or b"sec-websocket-key" not in headers:
        raise HandshakeError("not a WebSocket upgrade request")
    offered = _offers(head)
    if any(p in SDK_SUBPROTOCOLS for p in offered):
        return head, False
    if LEGACY_SUBPROTOCOL not in offered:
        names = ", ".join(repr(p) for p in offered) or "none"
        raise HandshakeError(f"offered subprotocol(s) {names}; this server speaks "
                             f"{LEGACY_SUBPROTOCOL!r} and {SDK_SUBPROTOCOLS[-1]!r}")
    kept = [x for x in lines if x.partition(b":")[0].strip().lower() != _PROTOCOL_HEADER]
    kept.insert(1, b"Sec-WebSocket-Protocol: " + SDK_SUBPROTOCOLS[-1].encode())
    return b"\r\n".join(kept), True


def rewrite_response(head: bytes) -> bytes:
    """The SDK's upgrade answer with its chosen subprotocol named as the client offered it."""
    lines = head.split(b"\r\n")
    for k, line in enumerate(lines):
        if line.partition(b":")[0].strip().lower() == _PROTOCOL_HEADER:
            lines[k] = b"Sec-WebSocket-Protocol: " + LEGACY_SUBPROTOCOL.encode()
    return b"\r\n".join(lines)


class HandshakeRelay:
    """A TCP listener in front of the SDK's WebSocket server (see the module's docstring).

    Args:
        host: Address to listen on.
        port: TCP port to listen on (0: any free one).
        upstream_port: The SDK server's port on 127.0.0.1.
        log: Where the one-line reports go (a client refused, one that vanished mid-connection).
    """

    def __init__(self, host: str, port: int, upstream_port: int, log: Callable[[str], None]) -> None:
        """Keep the addresses; :meth:`start` listens."""
        self._host, self._port, self._upstream, self._log = host, port, upstream_port, log
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="snake-view-handshake", daemon=True)
        self._server: Any = None
        self.port = 0

    def start(self) -> int:
        """Listen; the bound port. Raises ``OSError`` when the address cannot be bound."""
        self._thread.start()
        bound: Future[Any] = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, self._host, self._port, limit=_MAX_HEADER_BYTES), self._loop)
        try:
            self._server = bound.result(timeout=_START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def stop(self) -> None:
        """Stop listening, close every relayed connection and end the thread."""
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=_START_TIMEOUT_S)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=_START_TIMEOUT_S)
        if not self._loop.is_running():
            self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        who = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        upstream: asyncio.StreamWriter | None = None
        try:
            try:
                sent, renamed = rewrite_request(await _read_head(reader))
            except HandshakeError as err:  # the line first: the client may read the answer at once
                self._log(f"snake view: refused client {who}: {err}")
                writer.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n"
                             + f"{err}\n".encode())
                return
            up_reader, upstream = await asyncio.open_connection("127.0.0.1", self._upstream,
                                                                limit=_MAX_HEADER_BYTES)
            upstream.write(sent)
            answer = await up_reader.readuntil(b"\r\n\r\n")
            writer.write(rewrite_response(answer) if renamed else answer)
            gone, _ = await asyncio.gather(_pipe(reader, upstream), _pipe(up_reader, writer))
            if gone is not None:  # a client that closes cleanly says nothing; one that vanishes, one line
                self._log(f"snake view: client {who} went away mid-connection ({type(gone).__name__}: {gone})")
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as err:
            self._log(f"snake view: dropped client {who}: {type(err).__name__}: {err}")
        finally:
            for w in (writer, upstream):
                if w is not None:
                    w.close()


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    """A client's request line and headers, up to and with the blank line that ends them.

    Raises:
        HandshakeError: The client closed, sent too much, or took too long before that line.
    """
    try:
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEADER_TIMEOUT_S)
    except asyncio.IncompleteReadError as err:
        raise HandshakeError(f"closed the connection after {len(err.partial)} bytes, "
                             "before its upgrade request ended") from err
    except asyncio.LimitOverrunError as err:
        raise HandshakeError(f"sent more than {_MAX_HEADER_BYTES} bytes without an upgrade request") from err
    except TimeoutError as err:
        raise HandshakeError(f"sent no upgrade request within {_HEADER_TIMEOUT_S:g} s") from err
    except OSError as err:
        raise HandshakeError(f"went away before its upgrade request ended ({err})") from err


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> OSError | None:
    """Copy ``src`` to ``dst`` until ``src`` ends, then end ``dst``'s side too; the error that ended it."""
    gone: OSError | None = None
    try:
        while chunk := await src.read(_CHUNK_BYTES):
            dst.write(chunk)
            await dst.drain()
    except OSError as err:
        gone = err  # one end is gone: closing both sides below is all there is to do
    finally:
        if dst.can_write_eof() and not dst.is_closing():
            try:
                dst.write_eof()
            except OSError:
                pass
    return gone
