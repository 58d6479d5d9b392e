"""``snake bag play``: publish a recording back into the graph at its recorded timing.

Each message is published as the serialised bytes stored in the bag (no
deserialisation) at ``start + (t_k - t_0) / rate`` of wall time, where ``t_k`` is its
receive time in the bag. With ``--clock``, ``/clock`` carries the bag's receive time of
every message just before the message itself (and any ``/clock`` recorded in the bag is
not replayed), so that nodes on ``use_sim_time`` see the recording's time line.
Publishers use the QoS the recording's publishers offered (reliability, durability).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from snake_tools.bag.storage import BagError, iter_raw, summarize

_PLAY_DEPTH = 100  # publisher queue, messages
_ACK_WAIT_S = 10.0  # bound on waiting for reliable subscribers to acknowledge the last messages, s
_WAIT_POLL_S = 0.05  # s between checks for matched subscribers


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bag play``."""
    p = subparsers.add_parser("play", help="publish a bag back into the graph at its recorded timing")
    p.add_argument("bag", type=Path)
    p.add_argument("--rate", type=float, default=1.0, help="playback speed factor (2: twice as fast)")
    p.add_argument("--loop", action="store_true", help="start again at the end (until Ctrl-C)")
    p.add_argument("--clock", action="store_true", help="publish the bag's time on /clock")
    p.add_argument("--topics", nargs="+", metavar="T", help="only these topics")
    p.add_argument("--remap", nargs="+", default=[], metavar="FROM:=TO", help="publish topic FROM as TO")
    p.add_argument("--wait-for-subscribers", action="store_true",
                   help="start only when every played topic has a matched subscriber")
    p.set_defaults(func=run)


def _qos(profiles: list[Any]) -> Any:
    """Publisher QoS from the recorded offered profiles (rosbags ``Qos``).

    Best effort or transient local when the first recorded publisher was.
    """
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    first = profiles[0] if profiles else None
    rel = getattr(getattr(first, "reliability", None), "name", "")
    dur = getattr(getattr(first, "durability", None), "name", "")
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=_PLAY_DEPTH,
                      reliability=ReliabilityPolicy.BEST_EFFORT if rel == "BEST_EFFORT" else ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if dur == "TRANSIENT_LOCAL"
                      else DurabilityPolicy.VOLATILE)


def parse_remaps(items: list[str]) -> dict[str, str]:
    """``FROM:=TO`` pairs as {absolute FROM: absolute TO}."""
    out = {}
    for item in items:
        if ":=" not in item:
            raise BagError(f"--remap: expected FROM:=TO, got {item!r}")
        a, b = item.split(":=", 1)
        out["/" + a.lstrip("/")] = "/" + b.lstrip("/")
    return out


def play(bag: Path, rate: float = 1.0, loop: bool = False, clock: bool = False, topics: list[str] | None = None,
         remap: dict[str, str] | None = None, wait_for_subscribers: bool = False) -> int:
    """Publish the bag; returns the number of messages published."""
    import rclpy
    from rclpy.duration import Duration
    from rosgraph_msgs.msg import Clock

    from snake_tools.bag.record import message_class

    if not rate > 0:
        raise BagError(f"--rate must be > 0, got {rate}")
    summary = summarize(bag)
    if not summary.complete:
        raise BagError(summary.note)
    wanted = set(summary.topics) if not topics else {"/" + t.lstrip("/") for t in topics}
    unknown = wanted - set(summary.topics)
    if unknown:
        raise BagError(f"--topics: not in {bag}: {sorted(unknown)}")
    if clock:
        wanted.discard("/clock")
    remap = remap or {}
    published = 0
    with rclpy.init():
        node = rclpy.create_node("snake_bag_player")
        pubs = {}
        for name in sorted(wanted):
            info = summary.topics[name]
            try:
                cls = message_class(info.type)
            except (ImportError, AttributeError, ValueError) as err:
                raise BagError(f"{bag}: topic {name}: cannot import message type {info.type}") from err
            pubs[name] = node.create_publisher(cls, remap.get(name, name), _qos(info.qos))
        clock_pub = node.create_publisher(Clock, "/clock", _qos([])) if clock else None
        everyone = list(pubs.values()) + ([clock_pub] if clock_pub else [])
        if wait_for_subscribers:
            while not all(p.get_subscription_count() > 0 for p in everyone):
                rclpy.spin_once(node, timeout_sec=_WAIT_POLL_S)
        try:
            while True:
                start_wall, t0 = time.monotonic(), None
                for topic, _type, stamp, data in iter_raw(bag, wanted):
                    t0 = stamp if t0 is None else t0
                    due = start_wall + (stamp - t0) * 1e-9 / rate
                    pause = due - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                    if clock_pub is not None:
                        msg = Clock()
                        msg.clock.sec, msg.clock.nanosec = divmod(int(stamp), 1_000_000_000)
                        clock_pub.publish(msg)
                    pubs[topic].publish(data)
                    published += 1
                if not loop:
                    break
            # Reliable subscribers may not have acknowledged the last messages yet; destroying
            # the writers now would drop them.
            for pub in everyone:
                pub.wait_for_all_acked(Duration(seconds=_ACK_WAIT_S))
        except KeyboardInterrupt:
            pass
        finally:
            node.destroy_node()
    return published


def run(args: argparse.Namespace) -> int:
    """Entry point of ``snake bag play``."""
    n = play(args.bag, args.rate, args.loop, args.clock, args.topics, parse_remaps(args.remap),
             args.wait_for_subscribers)
    print(f"snake bag play: published {n} messages")
    return 0
