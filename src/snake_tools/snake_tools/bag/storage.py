"""Opening rosbag2 bags with rosbags: validation, summaries, message iteration, recovery.

A *bag* is a rosbag2 directory (``metadata.yaml`` plus ``.mcap`` or ``.db3`` files, as
``ros2 bag record`` and ``snake bag record`` write it, metadata versions 4 to 9) or a
bare ``.mcap`` / ``.db3`` file. Messages are deserialised with rosbags' typestore of
ROS 2 Kilted, extended by the definitions stored in the bag for types it lacks.

A directory without ``metadata.yaml`` whose storage files are there is an *incomplete*
bag (its recorder was killed): :func:`scan_incomplete` reads what was flushed (every
complete MCAP record up to the cut; every committed sqlite3 row) and
:func:`recover` writes it to a complete bag.
"""

from __future__ import annotations

import io
import sqlite3
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_STORAGE_SUFFIXES = {".mcap": "mcap", ".db3": "sqlite3"}
_MCAP_MAGIC = b"\x89MCAP0\r\n"
_OP_SCHEMA, _OP_CHANNEL, _OP_MESSAGE, _OP_CHUNK = 0x03, 0x04, 0x05, 0x06
_NS = 1e-9  # s per ns
_CHUNK_HEAD = 8 + 8 + 8 + 4 + 4  # bytes: chunk start/end time, size, CRC, compression string length


class BagError(ValueError):
    """A bag that cannot be read: the message names the path and what is wrong."""


@dataclass
class TopicSummary:
    """One topic of a bag.

    Attributes:
        type: Message type (``pkg/msg/Name``).
        count: Messages.
        msgdef: Message definition text stored in the bag ('' when absent).
        digest: Type hash stored in the bag ('' when absent).
        qos: Offered QoS profiles as stored (list of dicts; may be empty).
    """

    type: str
    count: int = 0
    msgdef: str = ""
    digest: str = ""
    qos: list[Any] = field(default_factory=list)


@dataclass
class BagSummary:
    """What a bag holds.

    Attributes:
        path: The bag.
        storage: ``mcap`` or ``sqlite3``.
        version: metadata.yaml version (0 for a bare file or an incomplete bag).
        ros_distro: As stored ('' when absent).
        start_ns: First receive time, ns since the epoch.
        end_ns: Last receive time, ns.
        topics: Topic name -> summary.
        files: Storage files.
        complete: The bag was closed (metadata.yaml present, or a readable bare file).
        note: For an incomplete bag: what can be recovered and how.
    """

    path: Path
    storage: str
    version: int
    ros_distro: str
    start_ns: int
    end_ns: int
    topics: dict[str, TopicSummary]
    files: list[Path]
    complete: bool = True
    note: str = ""

    @property
    def duration_s(self) -> float:
        """Receive-time span, s."""
        return max(0, self.end_ns - self.start_ns) * _NS

    @property
    def message_count(self) -> int:
        """Messages in all topics."""
        return sum(t.count for t in self.topics.values())

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (``snake bag info --json``)."""
        d = self.duration_s
        return {
            "path": str(self.path), "storage": self.storage, "version": self.version,
            "ros_distro": self.ros_distro, "complete": self.complete, "note": self.note,
            "start_s": self.start_ns * _NS, "end_s": self.end_ns * _NS, "duration_s": d,
            "message_count": self.message_count, "files": [str(f) for f in self.files],
            "topics": {name: {"type": t.type, "count": t.count,
                              "rate_hz": (t.count - 1) / d if d > 0 and t.count > 1 else None}
                       for name, t in sorted(self.topics.items())},
        }


def storage_files(path: Path) -> list[Path]:
    """Storage files of a bag directory (recursively, in name order), or the bare file itself."""
    if path.is_file():
        return [path] if path.suffix in _STORAGE_SUFFIXES else []
    return sorted(p for p in path.rglob("*") if p.suffix in _STORAGE_SUFFIXES and p.is_file())


def _check_path(path: Path) -> None:
    if not path.exists():
        raise BagError(f"{path}: no such bag (file or directory not found)")
    if path.is_file() and path.suffix not in _STORAGE_SUFFIXES:
        raise BagError(f"{path}: not a bag (expected a rosbag2 directory, or a .mcap or .db3 file)")
    if path.is_dir() and not (path / "metadata.yaml").is_file() and not storage_files(path):
        raise BagError(f"{path}: not a bag (no metadata.yaml and no .mcap or .db3 file)")


def is_incomplete(path: Path) -> bool:
    """A bag directory without metadata.yaml whose storage files are there (its recorder was killed)."""
    return path.is_dir() and not (path / "metadata.yaml").is_file() and bool(storage_files(path))


def is_truncated(path: Path) -> bool:
    """A storage file cut short: an ``.mcap`` without its closing magic, or one that cannot be opened.

    Such a bag may still have its ``metadata.yaml`` (the file was cut after closing, by a
    copy or a full disk); :func:`recover` reads it like an incomplete bag.
    """
    for f in storage_files(Path(path)):
        if f.suffix != ".mcap":
            continue
        size = f.stat().st_size
        if size < 2 * len(_MCAP_MAGIC):
            return True
        with f.open("rb") as fh:
            fh.seek(size - len(_MCAP_MAGIC))
            if fh.read() != _MCAP_MAGIC:
                return True
    return False


def open_reader(path: Path) -> Any:
    """An open :class:`rosbags.rosbag2.Reader` on a complete bag.

    Raises:
        BagError: Missing, not a bag, incomplete (with the recovery command), truncated
            or otherwise unreadable; the message names the path.
    """
    from rosbags.rosbag2 import Reader, ReaderError

    path = Path(path)
    _check_path(path)
    if is_incomplete(path):
        raise BagError(f"{path}: incomplete bag (no metadata.yaml: its recorder did not close it); "
                       f"`snake bag info {path}` shows what is recoverable, `snake bag recover {path}` keeps it")
    try:
        reader = Reader(path)
        reader.open()
    except (ReaderError, FileNotFoundError, OSError, KeyError, ValueError) as err:
        hint = ""
        if "magic" in str(err).lower() or "malformed" in str(err).lower():
            hint = " (truncated or corrupt storage file)"
        if is_truncated(path):
            hint = f" (truncated storage file; `snake bag recover {path}` keeps what it holds)"
        raise BagError(f"{path}: cannot read bag{hint}: {err}") from err
    return reader


def summarize(path: Path) -> BagSummary:
    """Summary of a complete or incomplete bag.

    Raises:
        BagError: Not a bag, or unreadable.
    """
    path = Path(path)
    _check_path(path)
    if is_incomplete(path) or is_truncated(path):
        return _summarize_incomplete(path)
    reader = open_reader(path)
    try:
        topics: dict[str, TopicSummary] = {}
        for c in reader.connections:
            t = topics.setdefault(c.topic, TopicSummary(type=c.msgtype, msgdef=c.msgdef.data or "",
                                                        digest=c.digest or ""))
            t.count += c.msgcount
            t.qos = list(getattr(c.ext, "offered_qos_profiles", []) or [])
        version = _metadata_version(path)
        storage = _storage_of(path, reader)
        start, end = (reader.start_time, reader.end_time) if reader.message_count else (0, 0)
        return BagSummary(path=path, storage=storage, version=version, ros_distro=str(reader.ros_distro or ""),
                          start_ns=int(start), end_ns=int(end), topics=topics, files=storage_files(path))
    finally:
        reader.close()


def _metadata(path: Path) -> dict[str, Any]:
    """``rosbag2_bagfile_information`` of a bag directory's metadata.yaml ({} for a bare file)."""
    import yaml

    if not path.is_dir():
        return {}
    try:
        data = yaml.safe_load((path / "metadata.yaml").read_text())
        return dict(data["rosbag2_bagfile_information"])
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as err:
        raise BagError(f"{path / 'metadata.yaml'}: unreadable metadata: {err}") from err


def _metadata_version(path: Path) -> int:
    """``version`` of a bag directory's metadata.yaml (0 for a bare file)."""
    try:
        return int(_metadata(path).get("version", 0))
    except (TypeError, ValueError) as err:
        raise BagError(f"{path / 'metadata.yaml'}: version: not a number") from err


def _storage_of(path: Path, reader: Any) -> str:
    files = storage_files(path)
    if files:
        return _STORAGE_SUFFIXES[files[0].suffix]
    return str(_metadata(path).get("storage_identifier") or "unknown")


def typestore_for(topics: Iterable[TopicSummary]) -> Any:
    """Rosbags' ROS 2 Kilted typestore plus the bag's own definitions of types it lacks."""
    from rosbags.typesys import Stores, TypesysError, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    for t in topics:
        if t.type in store.fielddefs or not t.msgdef:
            continue
        try:
            store.register(get_types_from_msg(t.msgdef, t.type))
        except (TypesysError, ValueError, KeyError):
            continue  # left unknown: the caller reports the topic as unreadable
    return store


def iter_raw(path: Path, topics: set[str] | None = None) -> Iterator[tuple[str, str, int, bytes]]:
    """(topic, type, receive time ns, serialised message) of a complete bag, in time order.

    Raises:
        BagError: Unreadable bag, or storage that ends early (truncated).
    """
    from rosbags.rosbag2 import ReaderError

    reader = open_reader(path)
    try:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        if conns:
            for conn, stamp, data in reader.messages(connections=conns):
                yield conn.topic, conn.msgtype, int(stamp), data
    except (ReaderError, sqlite3.DatabaseError, struct.error, OSError, EOFError) as err:
        raise BagError(f"{path}: cannot read messages (truncated or corrupt storage file): {err}") from err
    finally:
        reader.close()


# --- incomplete bags -------------------------------------------------------------------------------------
@dataclass
class _Scanned:
    topics: dict[str, TopicSummary] = field(default_factory=dict)
    messages: list[tuple[str, int, bytes]] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)


def _read_str(buf: memoryview, at: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<I", buf, at)
    return bytes(buf[at + 4: at + 4 + n]).decode(), at + 4 + n


def _mcap_records(buf: memoryview, tail: list[tuple[int, memoryview]] | None = None
                  ) -> Iterator[tuple[int, memoryview]]:
    """(opcode, content) of each complete record; stops at the first incomplete one.

    ``tail``, when given, receives (opcode, the bytes there are) of that incomplete record.
    """
    at = 0
    while at + 9 <= len(buf):
        op, length = struct.unpack_from("<BQ", buf, at)
        if at + 9 + length > len(buf):
            if tail is not None:
                tail.append((op, buf[at + 9:]))
            return
        yield op, buf[at + 9: at + 9 + length]
        at += 9 + length


def _scan_mcap(file: Path, out: _Scanned) -> None:
    data = memoryview(file.read_bytes())
    if bytes(data[:8]) != _MCAP_MAGIC:
        out.cut.append(f"{file.name}: not an MCAP file")
        return
    schemas: dict[int, tuple[str, str]] = {}
    channels: dict[int, tuple[str, str]] = {}
    complete_end = data[-8:] == _MCAP_MAGIC

    def handle(op: int, rec: memoryview) -> None:
        if op == _OP_SCHEMA:
            (sid,) = struct.unpack_from("<H", rec, 0)
            name, at = _read_str(rec, 2)
            _enc, at = _read_str(rec, at)
            (n,) = struct.unpack_from("<I", rec, at)
            schemas[sid] = (name, bytes(rec[at + 4: at + 4 + n]).decode())
        elif op == _OP_CHANNEL:
            cid, sid = struct.unpack_from("<HH", rec, 0)
            topic, _ = _read_str(rec, 4)
            name, msgdef = schemas.get(sid, ("", ""))
            channels[cid] = (topic, name)
            out.topics.setdefault(topic, TopicSummary(type=name, msgdef=msgdef))
        elif op == _OP_MESSAGE:
            cid, _seq, log_time = struct.unpack_from("<HIQ", rec, 0)
            if cid in channels:
                topic = channels[cid][0]
                out.topics[topic].count += 1
                out.messages.append((topic, int(log_time), bytes(rec[22:])))

    tail: list[tuple[int, memoryview]] = []
    for op, rec in _mcap_records(data[8:], tail):
        if op == _OP_CHUNK:
            at = 8 + 8 + 8 + 4
            compression, at = _read_str(rec, at)
            (size,) = struct.unpack_from("<Q", rec, at)
            payload = bytes(rec[at + 8: at + 8 + size])
            if compression == "zstd":
                from backports import zstd

                payload = zstd.decompress(payload)
            elif compression:
                out.cut.append(f"{file.name}: chunk compression {compression!r} not supported")
                continue
            for inner_op, inner in _mcap_records(memoryview(payload)):
                handle(inner_op, inner)
        else:
            handle(op, rec)
    if tail and tail[0][0] == _OP_CHUNK and len(tail[0][1]) >= _CHUNK_HEAD:
        # A chunk cut short: its records up to the cut are readable when it is not compressed.
        rec = tail[0][1]
        compression, at = _read_str(rec, _CHUNK_HEAD - 4)
        if compression:
            out.cut.append(f"{file.name}: last chunk ({compression}) cut short; its messages are lost")
        elif at + 8 <= len(rec):
            for inner_op, inner in _mcap_records(rec[at + 8:]):
                handle(inner_op, inner)
    if not complete_end:
        out.cut.append(f"{file.name}: cut short (no MCAP footer); read up to its last complete record")


def _scan_sqlite(file: Path, out: _Scanned) -> None:
    try:
        conn = sqlite3.connect(f"file:{file}", uri=True)
        try:
            types = dict(conn.execute("SELECT topic_type, encoded_message_definition FROM message_definitions"))
        except sqlite3.DatabaseError:
            types = {}
        topic_rows = {row[0]: (row[1], row[2]) for row in conn.execute("SELECT id, name, type FROM topics")}
        for name, typ in topic_rows.values():
            out.topics.setdefault(name, TopicSummary(type=typ, msgdef=types.get(typ, "")))
        for tid, stamp, data in conn.execute("SELECT topic_id, timestamp, data FROM messages ORDER BY timestamp"):
            if tid in topic_rows:
                name = topic_rows[tid][0]
                out.topics[name].count += 1
                out.messages.append((name, int(stamp), bytes(data)))
        conn.close()
    except sqlite3.DatabaseError as err:
        out.cut.append(f"{file.name}: unreadable sqlite3 database ({err}); nothing recovered from it")


def scan_incomplete(path: Path) -> _Scanned:
    """Every message recoverable from an incomplete bag's storage files."""
    out = _Scanned()
    for f in storage_files(path):
        (_scan_mcap if f.suffix == ".mcap" else _scan_sqlite)(f, out)
    out.messages.sort(key=lambda m: m[1])
    return out


def _summarize_incomplete(path: Path) -> BagSummary:
    scan = scan_incomplete(path)
    files = storage_files(path)
    stamps = [m[1] for m in scan.messages]
    n = len(scan.messages)
    why = ("its recorder did not close it (no metadata.yaml)" if is_incomplete(path)
           else "a storage file is cut short (truncated)")
    note = (f"incomplete bag: {why}; {n} messages in "
            f"{len(files)} file(s) are recoverable (everything up to the last closed split or flushed chunk)"
            + (f" [{'; '.join(scan.cut)}]" if scan.cut else "")
            + f"; `snake bag recover {path}` writes them to a complete bag")
    return BagSummary(path=path, storage=_STORAGE_SUFFIXES[files[0].suffix], version=0, ros_distro="",
                      start_ns=min(stamps, default=0), end_ns=max(stamps, default=0), topics=scan.topics,
                      files=files, complete=False, note=note)


def recover(path: Path, out: Path, storage: str = "mcap") -> BagSummary:
    """Write every recoverable message of an incomplete or truncated bag to a new complete bag ``out``.

    A truncated bag (:func:`is_truncated`) is read like an incomplete one, its
    ``metadata.yaml`` ignored: the storage files are what holds the messages.

    Raises:
        BagError: ``path`` is neither incomplete nor truncated, or ``out`` exists.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer

    path, out = Path(path), Path(out)
    _check_path(path)
    if not (is_incomplete(path) or is_truncated(path)):
        raise BagError(f"{path}: nothing to recover: a complete bag (metadata.yaml and storage files that end "
                       "properly); read it as it is")
    if out.exists():
        raise BagError(f"{out}: exists already; choose another --out")
    scan = scan_incomplete(path)
    store = typestore_for(scan.topics.values())
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(out, version=9, storage_plugin=plugin) as writer:
        conns = {}
        for name, t in scan.topics.items():
            try:
                conns[name] = writer.add_connection(name, t.type, typestore=store)
            except Exception:
                continue
        for topic, stamp, data in scan.messages:
            if topic in conns:
                writer.write(conns[topic], stamp, data)
    return summarize(out)


def human_summary(s: BagSummary) -> str:
    """Table of a bag's topics for humans."""
    buf = io.StringIO()
    buf.write(f"bag:       {s.path}\nstorage:   {s.storage} (metadata version {s.version or '-'}"
              f"{', ' + s.ros_distro if s.ros_distro else ''})\n")
    buf.write(f"duration:  {s.duration_s:.3f} s\nmessages:  {s.message_count}\n")
    if s.note:
        buf.write(f"WARNING:   {s.note}\n")
    d = s.as_dict()["topics"]
    width = max((len(k) for k in d), default=5)
    for name, t in d.items():
        rate = f"{t['rate_hz']:8.2f} Hz" if t["rate_hz"] else "       - Hz"
        buf.write(f"  {name:<{width}}  {t['count']:>8}  {rate}  {t['type']}\n")
    return buf.getvalue()
