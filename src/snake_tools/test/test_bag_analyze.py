"""``snake bag info / analyze`` on bags in the layout ``ros2 bag record`` writes, with known motion.

The bags are written by rosbags (metadata.yaml version 8 as Jazzy writes it, 9 as
Kilted; MCAP and sqlite3) from :mod:`snake_tools.bag.synthetic`, whose motion and
signals are known in closed form; the expected values here are computed from that
closed form, not from the analysis code.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from snake_core.robot import load_robot
from snake_tools.bag.synthetic import SyntheticSession, write_session
from snake_tools.cli import main

_SESSION = SyntheticSession(clock_factor=2.0)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def robot():
    return load_robot("tsnake")


@pytest.mark.parametrize(("storage", "version"), [("mcap", 8), ("sqlite3", 9)])
def test_known_motion_is_analysed_to_known_values(tmp_path, capsys, robot, storage, version):
    bag = write_session(tmp_path / "bag", robot, _SESSION, storage=storage, version=version)
    meta = (bag / "metadata.yaml").read_text()
    assert f"version: {version}" in meta and f"storage_identifier: {storage}" in meta

    code, out, _ = _run(capsys, "bag", "info", str(bag), "--json")
    assert code == 0
    info = json.loads(out)
    n_cmd = round(_SESSION.duration * 50) + 1  # joint_commands at 50 Hz of simulated time, both ends
    assert info["storage"] == storage and info["version"] == version
    assert info["topics"]["/joint_commands"] == {"type": "sensor_msgs/msg/JointState", "count": n_cmd,
                                                 "rate_hz": pytest.approx(50 * _SESSION.clock_factor)}
    assert info["duration_s"] == pytest.approx(_SESSION.duration / _SESSION.clock_factor)

    code, out, _ = _run(capsys, "bag", "analyze", str(bag), "--out", str(tmp_path / "report"), "--json")
    assert code == 0
    s = json.loads(out)
    assert s == json.loads((tmp_path / "report" / "summary.json").read_text())
    assert s["time_base"] == "simulated (/clock)"
    assert s["duration_s"] == pytest.approx(_SESSION.duration)
    # Every commanded segment, measured per simulated second.
    assert [(g["v_cmd"], g["omega_cmd"]) for g in s["segments"]] == [(v, w) for v, w, _ in _SESSION.script]
    for g, (v, w, _) in zip(s["segments"], _SESSION.script, strict=True):
        assert g["v"] == pytest.approx(v, abs=1e-4)
        assert g["omega"] == pytest.approx(w, abs=1e-4)
    assert s["distance_m"] == pytest.approx(sum(abs(v) * d for v, _, d in _SESSION.script), rel=1e-4)
    assert s["heading_change_deg"] == pytest.approx(np.degrees(sum(w * d for _, w, d in _SESSION.script)), abs=0.01)
    # Tracking: states are the commands two command periods late.
    t = np.arange(n_cmd) / 50.0
    for k, j in enumerate(robot.joints):
        cmd = _SESSION.amplitude * np.sin(2 * np.pi * _SESSION.frequency * t + k) if j.type == "twist" \
            else np.zeros(n_cmd)
        state = cmd[np.maximum(np.arange(n_cmd) - _SESSION.lag_periods, 0)]
        assert s["joint_tracking_rms_rad"][j.name] == pytest.approx(np.sqrt(np.mean((state - cmd) ** 2)), abs=1e-12)
        if j.type == "twist":
            assert s["joint_tracking"][j.name]["lag_s"] == pytest.approx(_SESSION.lag_periods / 50.0)
    # gait_state strings parsed as numbers; servo health from diagnostics.
    assert s["gait_state"]["last"]["phi_h"] == pytest.approx(0.1 * _SESSION.duration)
    assert s["gait_state"]["resets"] == (n_cmd - 1) // 100
    servo = s["servo_health"]["servos"]["m3_twist"]
    assert servo["temperature_max_c"] == pytest.approx(30 + _SESSION.duration / 60, abs=1e-3)
    assert servo["voltage_min_v"] == 12.0 and servo["error_bits"] == 0
    assert set(s["missing"]) == {"singularity_margin", "slippage_ratio", "path_following", "bridge_states"}
    assert s["bridge_faults"] is None  # no bridge state recorded: unknown, not "none"
    assert s["unreadable_topics"] == {}
    for name in ("report.html", "trajectory.png", "joint_angles.png", "joint_tracking.png", "animation.gif"):
        assert (tmp_path / "report" / name).stat().st_size > 0


def _write(path: Path, topics: list[tuple[str, str, str | None]], count: int = 3) -> Path:
    """A bag with the given (topic, type, msgdef or None for the typestore's) connections."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_KILTED)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        for topic, typ, msgdef in topics:
            if msgdef is None:
                conn = w.add_connection(topic, typ, typestore=ts)
                msg = ts.types[typ](data=1.5)
                data = ts.serialize_cdr(msg, typ)
            else:
                conn = w.add_connection(topic, typ, msgdef=msgdef, rihs01="RIHS01_" + "0" * 64)
                data = bytes([0, 1, 0, 0]) + bytes(8)
            for k in range(count):
                w.write(conn, 1_000_000_000 + k, data)
    return path


def _not_a_bag_file(tmp: Path) -> Path:
    p = tmp / "notes.txt"
    p.write_text("hello")
    return p


def _not_a_bag_dir(tmp: Path) -> Path:
    p = tmp / "somewhere"
    p.mkdir()
    (p / "readme.md").write_text("nothing")
    return p


def _empty(tmp: Path) -> Path:
    return _write(tmp / "empty", [("/singularity_margin", "std_msgs/msg/Float64", None)], count=0)


def _truncated(tmp: Path) -> Path:
    bag = write_session(tmp / "cut", load_robot("tsnake"), SyntheticSession(script=((0.05, 0.0, 3.0),)))
    f = next(bag.glob("*.mcap"))
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    return bag


def _unknown_type(tmp: Path) -> Path:
    return _write(tmp / "odd", [("/joint_states", "acme_msgs/msg/Weird", "float64 x\n")])


def _nothing_known(tmp: Path) -> Path:
    return _write(tmp / "foreign", [("/acme", "acme_msgs/msg/Weird", "float64 x\n")])


@pytest.mark.parametrize(("make", "pattern"), [
    (_not_a_bag_file, "not a bag"), (_not_a_bag_dir, "not a bag"), (_empty, "empty bag"),
    (_truncated, "truncated"), (_unknown_type, r"/joint_states \(type acme_msgs/msg/Weird; the analysis reads"),
    (_nothing_known, "nothing to analyse"),
])
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path, capsys, make, pattern):
    bag = make(tmp_path)
    code, _out, err = _run(capsys, "bag", "analyze", str(bag), "--out", str(tmp_path / "r"), "--json")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(bag) in lines[0] and re.search(pattern, lines[0]), lines[0]
    assert not (tmp_path / "r" / "report.html").exists()


def test_a_topic_of_another_type_leaves_only_its_section_out(tmp_path, capsys):
    bag = _write(tmp_path / "mixed", [("/singularity_margin", "std_msgs/msg/Float64", None),
                                      ("/gait_state", "acme_msgs/msg/GaitState", "float64 v\n")])
    code, out, _ = _run(capsys, "bag", "analyze", str(bag), "--out", str(tmp_path / "r"), "--json")
    assert code == 0
    s = json.loads(out)
    assert s["singularity_margin"] == {"messages": 3, "min": 1.5, "mean": 1.5, "max": 1.5}
    assert "acme_msgs/msg/GaitState" in s["missing"]["gait_state"]
    assert "/gait_state" in s["unreadable_topics"]


def test_info_refuses_what_is_not_a_bag(tmp_path, capsys):
    for bag in (_not_a_bag_file(tmp_path), _not_a_bag_dir(tmp_path)):
        code, _, err = _run(capsys, "bag", "info", str(bag))
        assert code == 2 and len(err.strip().splitlines()) == 1 and str(bag) in err
    bag = _truncated(tmp_path)  # a bag, cut short: info says what is recoverable and how
    code, out, _ = _run(capsys, "bag", "info", str(bag), "--json")
    info = json.loads(out)
    assert code == 0 and not info["complete"] and info["message_count"] > 0
    assert "truncated" in info["note"] and f"snake bag recover {bag}" in info["note"]


def _messages(bag: Path) -> list[tuple[str, int, bytes]]:
    """(topic, receive time ns, CDR) of every message, read with rosbags alone, in time order."""
    from rosbags.rosbag2 import Reader

    with Reader(bag) as r:
        return [(c.topic, int(t), bytes(d)) for c, t, d in r.messages()]


def test_recover_keeps_the_readable_part_of_a_truncated_bag_with_its_metadata(tmp_path, capsys):
    whole = write_session(tmp_path / "whole", load_robot("tsnake"), SyntheticSession(script=((0.05, 0.0, 3.0),)))
    original = _messages(whole)
    bag = _truncated(tmp_path)  # the same session, its MCAP cut in half, metadata.yaml kept
    assert (bag / "metadata.yaml").is_file()
    code, out, err = _run(capsys, "bag", "recover", str(bag), "--out", str(tmp_path / "fixed"), "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["complete"]
    recovered = _messages(tmp_path / "fixed")
    # What survives the cut is the start of the recording, message for message.
    assert 0 < len(recovered) < len(original)
    assert recovered == original[: len(recovered)]
    assert s["message_count"] == len(recovered)
    code, _, err = _run(capsys, "bag", "recover", str(whole), "--out", str(tmp_path / "again"))
    assert code == 2 and "nothing to recover" in err and not (tmp_path / "again").exists()


def _segment_twists_match_the_script(s: dict, session: SyntheticSession) -> None:
    assert [(g["v_cmd"], g["omega_cmd"]) for g in s["segments"]] == [(v, w) for v, w, _ in session.script]
    for g, (v, w, _) in zip(s["segments"], session.script, strict=True):
        assert g["v"] == pytest.approx(v, abs=1e-4) and g["omega"] == pytest.approx(w, abs=1e-4)
    assert s["distance_m"] == pytest.approx(sum(abs(v) * d for v, _, d in session.script), rel=1e-4)


@pytest.mark.parametrize(("source", "flag"), [
    ("/vrpn_mocap/snake_head/pose", "/vrpn_mocap/snake_head/pose"),  # vrpn_mocap's per-body topic
    ("/vrpn_mocap/snake_head/pose", None),  # found by the default order
    ("tf:snake_head", "tf:snake_head"),  # a /tf child frame, next to another frame
    ("tf:snake_head", None),
])
def test_a_bag_whose_only_pose_is_a_mocap_driver_s_is_analysed(tmp_path, capsys, source, flag):
    session = SyntheticSession()
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), session, rates={"ground_truth": 0.0},
                        mocap_topic=source)
    topics = set(json.loads(_run(capsys, "bag", "info", str(bag), "--json")[1])["topics"])
    assert not topics & {"/mocap/head_pose", "/ground_truth/base_pose", "/ground_truth/head_pose"}
    argv = ["bag", "analyze", str(bag), "--out", str(tmp_path / "r"), "--json"]
    code, out, err = _run(capsys, *argv, *(["--pose-topic", flag] if flag else []))
    assert code == 0, err
    s = json.loads(out)
    assert s["trajectory"]["pose_topic"] == source
    assert "trajectory" not in s["missing"] and "segments" not in s["missing"]
    _segment_twists_match_the_script(s, session)


@pytest.mark.parametrize(("flag", "pattern"), [
    ("/vrpn_mocap/other/pose", r"--pose-topic /vrpn_mocap/other/pose: not in .*PoseStamped topics: /mocap/head_pose"),
    ("/cmd_vel", r"--pose-topic /cmd_vel: type geometry_msgs/msg/TwistStamped"),
    ("tf:snake_head", r"--pose-topic tf:snake_head: .* has no /tf"),
])
def test_a_pose_topic_the_bag_lacks_is_one_line_and_exit_2(tmp_path, capsys, flag, pattern):
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), SyntheticSession(script=((0.05, 0.0, 3.0),)),
                        rates={"ground_truth": 0.0})
    for command in ("analyze", "calibrate"):
        extra = ["--out", str(tmp_path / "r")] if command == "analyze" else ["--target", "twin"]
        code, _out, err = _run(capsys, "bag", command, str(bag), *extra, "--pose-topic", flag)
        assert code == 2 and len(err.strip().splitlines()) == 1 and re.search(pattern, err), err
    assert not (tmp_path / "r" / "report.html").exists()


_PROBE = """<script>
window.__probe = {errors: []};
window.addEventListener('error', function (e) {
  window.__probe.errors.push(e.message || ('resource failed: ' + (e.target && (e.target.src || e.target.href))));
}, true);
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({
    errors: window.__probe.errors,
    images: imgs.length,
    broken: imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                .map(function (i) { return i.alt; })
  });
  document.body.appendChild(out);
});
</script>"""


def test_report_opens_in_a_headless_browser(tmp_path, capsys):
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium: scripts/setup.sh installs it from the distribution when run as root with apt")
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), SyntheticSession(script=((0.05, 0.1, 4.0),)))
    code, _, _ = _run(capsys, "bag", "analyze", str(bag), "--out", str(tmp_path / "r"), "--json")
    assert code == 0
    html = (tmp_path / "r" / "report.html").read_text()
    assert "src=\"data:image/png;base64," in html and "src=\"data:image/gif;base64," in html
    assert not re.search(r"""src=["'](?!data:)""", html), "the report must not load external files"
    probed = tmp_path / "probed.html"
    probed.write_text(html.replace("<head>", "<head>" + _PROBE, 1))
    run = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=10000", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         probed.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    match = re.search(r'<pre id="probe">(.*?)</pre>', run.stdout, re.S)
    assert match, "the page never finished loading"
    result = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert result["errors"] == []
    assert result["broken"] == []
    assert result["images"] >= 5
    assert not re.search(r"CONSOLE[:(]\d+|Uncaught", run.stderr)


def test_fast_decoding_matches_rosbags(tmp_path):
    """The analysis' own CDR readers give what rosbags' deserialiser gives, message by message."""
    from rosbags.typesys import Stores, get_typestore

    from snake_tools.bag.series import _decode, _fast_decode

    ts = get_typestore(Stores.ROS2_KILTED)
    t = ts.types
    rng = np.random.default_rng(6)

    def header(k):
        return t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=k, nanosec=7 * k),
                                        frame_id="w" * (k % 5))

    cache: dict = {}
    for k in range(30):
        names = [f"j{i}" + "x" * (k % 3) for i in range(int(rng.integers(0, 6)))]
        msgs = [
            ("/joint_states", "sensor_msgs/msg/JointState", t["sensor_msgs/msg/JointState"](
                header=header(k), name=names, position=rng.normal(size=len(names)), velocity=rng.normal(size=k % 2),
                effort=np.zeros(0))),
            ("/mocap/head_pose", "geometry_msgs/msg/PoseStamped", t["geometry_msgs/msg/PoseStamped"](
                header=header(k), pose=t["geometry_msgs/msg/Pose"](
                    position=t["geometry_msgs/msg/Point"](x=rng.normal(), y=rng.normal(), z=rng.normal()),
                    orientation=t["geometry_msgs/msg/Quaternion"](x=rng.normal(), y=rng.normal(), z=rng.normal(),
                                                                  w=rng.normal())))),
            ("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", t["diagnostic_msgs/msg/DiagnosticArray"](
                header=header(k), status=[t["diagnostic_msgs/msg/DiagnosticStatus"](
                    level=k % 4, name=f"bridge: j{i}", message="ok" * i, hardware_id="h" * (k % 3),
                    values=[t["diagnostic_msgs/msg/KeyValue"](key=f"k{m}", value=f"{rng.normal():.5g}")
                            for m in range(i)]) for i in range(k % 4)])),
            ("/clock", "rosgraph_msgs/msg/Clock", t["rosgraph_msgs/msg/Clock"](
                clock=t["builtin_interfaces/msg/Time"](sec=k, nanosec=123 * k))),
            ("/singularity_margin", "std_msgs/msg/Float64", t["std_msgs/msg/Float64"](data=rng.normal())),
        ]
        for topic, typ, msg in msgs:
            data = bytes(ts.serialize_cdr(msg, typ))
            fast = _fast_decode(topic, typ, data, cache if topic == "/joint_states" else {})
            slow = _decode(topic, ts.deserialize_cdr(data, typ))
            if topic == "/joint_states":
                assert fast[0] == slow[0] and np.array_equal(fast[1], slow[1])
            else:
                assert fast == slow


def test_recomputed_singularity_margin_matches_the_reference_model(tmp_path, capsys):
    """--recompute: the monitor's margin at every joint_states sample, slipping links held from the bag."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    from snake_core.singularity.model import evaluate, make_params

    robot = load_robot("wheeled_snake")
    ts = get_typestore(Stores.ROS2_KILTED)
    t = ts.types
    rng = np.random.default_rng(11)
    phis = rng.uniform(-0.8, 0.8, (40, len(robot.joints)))
    js_type, slip_type = "sensor_msgs/msg/JointState", "std_msgs/msg/Int32MultiArray"
    with Writer(tmp_path / "bag", version=9, storage_plugin=StoragePlugin.MCAP) as w:
        cj = w.add_connection("/joint_states", js_type, typestore=ts)
        cs = w.add_connection("/slipping_links", slip_type, typestore=ts)
        layout = t["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
        w.write(cs, 1_000_000_000 + 20 * 10_000_000 - 1, ts.serialize_cdr(
            t[slip_type](layout=layout, data=np.array([2], dtype=np.int32)), slip_type))
        for k, phi in enumerate(phis):
            msg = t[js_type](header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=k, nanosec=0),
                                                             frame_id=""),
                             name=robot.joint_names, position=phi, velocity=np.zeros(0), effort=np.zeros(0))
            w.write(cj, 1_000_000_000 + k * 10_000_000, ts.serialize_cdr(msg, js_type))
    code, out, _ = _run(capsys, "bag", "analyze", str(tmp_path / "bag"), "--out", str(tmp_path / "r"), "--json",
                        "--robot", "wheeled_snake", "--recompute")
    assert code == 0
    got = json.loads(out)["singularity_margin_recomputed"]
    params = make_params(len(robot.joints) + 1, list(robot.wheel_d), list(robot.wheel_l))
    expected = [evaluate(params, phi, [2] if k >= 20 else []).margin for k, phi in enumerate(phis)]
    assert got["messages"] == 40
    assert got["min"] == pytest.approx(min(expected), rel=1e-9)
    assert got["mean"] == pytest.approx(np.mean(expected), rel=1e-9)
    assert got["max"] == pytest.approx(max(expected), rel=1e-9)


def test_a_segment_shorter_than_a_gait_period_is_flagged_and_left_out_of_the_means(tmp_path, capsys):
    session = SyntheticSession(script=((0.08, 0.0, 6.0), (0.0, 0.0, 0.1), (0.05, 0.1, 6.0)))
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), session)
    code, out, err = _run(capsys, "bag", "analyze", str(bag), "--out", str(tmp_path / "r"), "--json")
    assert code == 0, err
    s = json.loads(out)
    assert [(g["v_cmd"], g["omega_cmd"]) for g in s["segments"]] == [(v, w) for v, w, _ in session.script]
    short = s["segments"][1]
    assert not short["measured"] and short["v"] is None and short["omega"] is None
    assert "0.10 s, shorter than" in short["flag"]
    kept = [s["segments"][0], s["segments"][2]]
    assert all(g["measured"] and g["flag"] is None for g in kept)
    means = s["segment_means"]
    assert (means["measured"], means["flagged"]) == (2, 1)
    assert means["v_error_mean_m_s"] == pytest.approx(np.mean([g["v"] - g["v_cmd"] for g in kept]), abs=1e-12)
    assert means["omega_error_abs_mean_rad_s"] == pytest.approx(
        np.mean([abs(g["omega"] - g["omega_cmd"]) for g in kept]), abs=1e-12)
    for g, (v, w, _) in zip(kept, (session.script[0], session.script[2]), strict=True):
        assert g["v"] == pytest.approx(v, abs=1e-4) and g["omega"] == pytest.approx(w, abs=1e-4)
    assert "not measured: 0.10 s, shorter than" in (tmp_path / "r" / "report.html").read_text()


class _Cells(HTMLParser):
    """The title, and every table cell's text, of an HTML page (stdlib parser)."""

    def __init__(self) -> None:
        super().__init__()
        self.title, self.cells, self._in = "", [], None

    def handle_starttag(self, tag, attrs):
        if tag in ("title", "td"):
            self._in = tag
            if tag == "td":
                self.cells.append("")

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "title":
            self.title += data
        elif self._in == "td":
            self.cells[-1] += data


_UNIT_LABEL = re.compile(r"\[[^\]]+\]")


def _labelled(ax, name: str) -> str:
    """An axis' own label, or for x the label of a shared axis (stacked plots label the bottom one)."""
    label = ax.get_xlabel() if name == "x" else ax.get_ylabel()
    if name == "x" and not label:
        label = next((o.get_xlabel() for o in ax.get_shared_x_axes().get_siblings(ax) if o.get_xlabel()), "")
    return label


@pytest.mark.parametrize("robot_name", ["tsnake", "wheeled_snake"])
def test_report_is_fit_for_a_paper_draft(tmp_path, capsys, monkeypatch, robot_name):
    import snake_tools.bag.report as report

    figures = {}
    save = report._save

    def keep(fig, path):
        figures[path.name] = [(ax.get_title() or fig.get_suptitle(), _labelled(ax, "x"), _labelled(ax, "y"))
                              for ax in fig.axes]
        save(fig, path)

    monkeypatch.setattr(report, "_save", keep)
    session = SyntheticSession(script=((0.08, 0.0, 6.0), (0.0, 0.0, 0.1), (0.05, 0.1, 6.0)))
    bag = write_session(tmp_path / "bag", load_robot(robot_name), session)
    code, _out, err = _run(capsys, "bag", "analyze", str(bag), "--out", str(tmp_path / "r"), "--robot", robot_name,
                           "--recompute", "--json")
    assert code == 0, err
    expected = {"trajectory.png", "joint_angles.png", "joint_tracking.png", "gait_state.png", "servo_health.png"}
    assert expected <= set(figures) and (robot_name == "tsnake" or "monitors.png" in figures)
    for name, axes in figures.items():
        for title, xlabel, ylabel in axes:
            assert _UNIT_LABEL.search(ylabel), (name, title, ylabel)
            assert _UNIT_LABEL.search(xlabel) or (name == "joint_tracking.png" and xlabel == "joint"), (name, xlabel)
    page = _Cells()
    page.feed((tmp_path / "r" / "report.html").read_text())
    assert robot_name in page.title and "2023-11-14 22:13:20 UTC" in page.title  # SyntheticSession.start_ns
    assert page.cells and not [c for c in page.cells if "{" in c or "}" in c]
    # Twist table: commanded and achieved speeds to the millimetre per second, the flagged one as "-".
    first = next(k for k in range(len(page.cells) - 18)
                 if (page.cells[k], page.cells[k + 9], page.cells[k + 18]) == ("1", "2", "3"))
    rows = [page.cells[k: k + 9] for k in range(first, first + 27, 9)]
    for r in rows:
        assert re.fullmatch(r"-?\d+\.\d{3}", r[4]) and re.fullmatch(r"-?\d+\.\d{2}", r[2])
    assert rows[1][5] == "-" and rows[1][8].startswith("not measured")
    assert re.fullmatch(r"-?\d+\.\d{3}", rows[0][5])
