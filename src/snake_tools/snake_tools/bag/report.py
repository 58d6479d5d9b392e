"""Figures (PNG), ``summary.json`` and one self-contained ``report.html`` of an analysis.

The HTML embeds every figure as a base64 PNG and an animated GIF of the body seen from
above (drawn with Pillow), so the one file can be mailed or archived on its own.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from snake_tools.bag.analyze import TRAJECTORY_POINT, Analysis
from snake_tools.output import _jsonable as jsonable

_DPI = 110
_ANIMATION_FRAMES = 120  # frames of the body animation at most
_ANIMATION_PX = 480  # px, square
_ANIMATION_FRAME_MS = 80  # ms per frame
_PLOT_POINTS = 3000  # samples drawn per time series at most (every k-th of a long bag)


def _every(n: int) -> slice:
    """Stride that leaves at most ``_PLOT_POINTS`` of ``n`` samples."""
    return slice(None, None, max(1, -(-n // _PLOT_POINTS)))


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_UNIT = re.compile(r"\[[^\]]+\]")  # "[m/s]" in an axis label
_MONITOR_LABELS = {"singularity_margin": "singularity margin sigma_2/sigma_1 [-]",
                   "singularity_margin_recomputed": "margin recomputed [-]",
                   "slippage_ratio": "slippage ratio [-]"}
_GAIT_GROUPS = (  # gait_state keys drawn together, and the axis label with their units
    (("v", "yaw_rate"), "v [m/s], yaw_rate [rad/s]"),
    (("omega_h", "omega_t", "omega_c"), "native rates [rad/s]"),
    (("phi_h", "phi_t"), "phase [rad]"),
    (("resets", "twist_cycles", "rejected_commands"), "count [-]"),
)
_DECIMALS = {"mm": 2, "m/s": 3, "rad/s": 3, "m": 3, "s": 2, "deg": 2, "rad": 4, "Hz": 1, "C": 1, "V": 2, "ms": 1,
             "W": 3, "J": 2, "kg": 3}
"""Decimals shown per unit in the report's tables (the precision of the measurement behind them)."""


def axes_without_units(fig: Any) -> list[str]:
    """Axes of a matplotlib figure whose x or y label lacks a unit in brackets (``time [s]``).

    An x axis shared with an axis below it counts as labelled by that axis; a categorical
    axis (text tick labels, e.g. joint names) needs a label but no unit.

    Returns:
        One description per offending axis label ([] when every axis is labelled).
    """
    bad = []
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for name, own in (("x", ax.xaxis), ("y", ax.yaxis)):
            axis, label = own, own.get_label_text()
            if name == "x" and not label:
                owner = next((o for o in ax.get_shared_x_axes().get_siblings(ax) if o.get_xlabel()), ax)
                label, axis = owner.get_xlabel(), owner.xaxis
            ticks = [t.get_text() for t in axis.get_ticklabels()]
            categorical = any(t and not re.fullmatch(r"[\s\-\u2212+0-9.,eE%]+", t) for t in ticks)
            if not _UNIT.search(label) and not (categorical and label):
                bad.append(f"axes {k} ({ax.get_title() or fig.get_suptitle()}): {name} label {label!r} has no unit")
    return bad


def _save(fig: Any, path: Path) -> None:
    """Save a figure after checking that every axis is labelled with its unit.

    Raises:
        RuntimeError: An axis lacks a unit (a programming error in this module).
    """
    bad = axes_without_units(fig)
    if bad:
        raise RuntimeError(f"{path.name}: " + "; ".join(bad))
    fig.savefig(path, dpi=_DPI)


def _segment_lines(ax: Any, an: Analysis) -> None:
    """A dotted line at each command segment's start."""
    for seg in an.arrays.get("segments", []):
        ax.axvline(seg.start_s, color="k", lw=0.5, ls=":")


SEGMENT_LABEL_GID = "segment-label"
"""``gid`` of the segment numbers drawn on a figure (tests find them by it)."""


def _label_segments(ax: Any, an: Analysis) -> None:
    """Number each command segment at its start (the number of the twist table), labels never overlapping.

    Called once the figure's layout is final (text sizes are in pixels, positions in
    data): each number goes on the first of ``_LABEL_ROWS`` rows below the top where it
    overlaps no number already placed and no legend; a number with no free row is left out
    (the table lists every segment).
    """
    segs = an.arrays.get("segments", [])
    if not segs:
        return
    from matplotlib.legend import Legend

    renderer = ax.figure.canvas.get_renderer()
    lo, hi = ax.get_xlim()
    legends = [a.get_window_extent(renderer) for a in ax.get_children() if isinstance(a, Legend)]
    rows: list[list[Any]] = [list(legends) for _ in range(_LABEL_ROWS)]
    for k, seg in enumerate(segs):
        if not lo <= seg.start_s <= hi:
            continue
        for r, placed in enumerate(rows):
            text = ax.text(seg.start_s, 1.0 - r * _LABEL_ROW_STEP, f" {k + 1}", transform=ax.get_xaxis_transform(),
                           va="top", fontsize=7, gid=SEGMENT_LABEL_GID,
                           bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7})
            box = text.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in placed):
                placed.append(box)
                break
            text.remove()


_LABEL_ROWS = 3  # rows of segment numbers below a figure's top
_LABEL_ROW_STEP = 0.11  # axes fraction between two rows
_STATE_COLOURS = {"DISARMED": "#9e9e9e", "ARMING": "#ffd54f", "HOLDING": "#ff9800", "ESTOPPED": "#8e24aa",
                  "FAULT": "#e53935", "STOPPED": "#424242"}
"""Band colour of each bridge state that is not ARMED (ARMED: no band)."""


def _bridge_band(ax: Any, an: Analysis, legend: bool) -> None:
    """Shade the spans in which the bridge was not ARMED; one legend entry per state on ``legend``."""
    from matplotlib.legend import Legend
    from matplotlib.patches import Patch

    spans = [sp for sp in an.arrays.get("bridge_spans", []) if sp.state != "ARMED"]
    for sp in spans:
        ax.axvspan(sp.start_s, sp.end_s, color=_STATE_COLOURS.get(sp.state, "#bdbdbd"), alpha=0.25, lw=0)
    if legend and spans:
        states = list(dict.fromkeys(sp.state for sp in spans))
        handles = [Patch(color=_STATE_COLOURS.get(st, "#bdbdbd"), alpha=0.4) for st in states]
        # An artist of its own: the axes' legend (the joints') stays.
        ax.add_artist(Legend(ax, handles, [f"bridge {st}" for st in states], fontsize=6, loc="lower right",
                             title="not following commands", title_fontsize=6))


def figures(an: Analysis, out: Path) -> dict[str, str]:
    """Write the figures the analysis has data for; returns {file name: caption}."""
    plt = _plt()
    made: dict[str, str] = {}
    a, s = an.arrays, an.summary
    if "centre" in a:
        fig, ax = plt.subplots(figsize=(7, 7))
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        t, centre, t_pts, pts = a["t_body"], a["centre"], a["t_points"], a["points"]
        step = _every(len(t))
        t, centre = t[step], centre[step]
        segs = a.get("segments") or []
        if segs:
            for k, seg in enumerate(segs):
                sel = (t >= seg.start_s) & (t <= seg.end_s)
                if not sel.any():
                    continue
                c = colours[k % len(colours)]
                ax.plot(centre[sel, 0], centre[sel, 1], color=c, lw=2, label=f"{k + 1}: {seg.label}")
                in_seg = np.flatnonzero((t_pts >= seg.start_s) & (t_pts <= seg.end_s))
                if not len(in_seg):
                    continue
                body = pts[int(in_seg[-1])]
                ax.plot(body[:, 0], body[:, 1], color=c, lw=1, alpha=0.6)
                ax.plot(*body[0], "o", color=c, ms=4)
        else:
            ax.plot(centre[:, 0], centre[:, 1], lw=2, label=TRAJECTORY_POINT)
        ax.plot(*pts[0].T, "k-", lw=1, alpha=0.5, label="start pose (head: dot)")
        ax.plot(*pts[0][0], "ko", ms=4)
        ax.set_aspect("equal")
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        ax.legend(fontsize=8)
        tr = s["trajectory"]
        ax.set_title(f"{an.robot.name}, {TRAJECTORY_POINT} ({tr['pose_topic']}):\n"
                     f"net displacement {tr['displacement_m']:.2f} m, path {tr['distance_m']:.2f} m; "
                     f"head path {tr['head_path_length_m']:.2f} m; {tr['heading_change_deg']:.0f} deg turned",
                     fontsize=10)
        fig.tight_layout()
        _save(fig, out / "trajectory.png")
        plt.close(fig)
        made["trajectory.png"] = (f"The {TRAJECTORY_POINT} per command segment, with the body at each segment's "
                                  "end; net displacement and path length are the centre's, the head's path length "
                                  "is given beside them.")
    if "q_cmd" in a or "q_state" in a:
        key, tkey, what = ("q_cmd", "t_cmd", "joint_commands") if "q_cmd" in a else ("q_state", "t_state",
                                                                                       "joint_states")
        types = list(dict.fromkeys(j.type for j in an.robot.joints))
        fig, axes = plt.subplots(len(types), 1, figsize=(10, 2.6 * len(types)), sharex=True, squeeze=False)
        step = _every(len(a[tkey]))
        for ax, jt in zip(axes[:, 0], types, strict=True):
            for k, j in enumerate(an.robot.joints):
                if j.type == jt:
                    ax.plot(a[tkey][step], a[key][step, k], lw=0.8, label=j.name)
            ax.set_ylabel(f"{jt} [rad]")
            _segment_lines(ax, an)
            ax.legend(fontsize=6, ncol=6, loc="lower left")
            _bridge_band(ax, an, jt == types[0])
        axes[-1, 0].set_xlabel(f"time [s] ({s['time_base']})")
        fig.suptitle(f"{what} per joint")
        fig.tight_layout()
        _label_segments(axes[0, 0], an)
        _save(fig, out / "joint_angles.png")
        plt.close(fig)
        made["joint_angles.png"] = (f"{what} per joint, grouped by joint type; dotted lines: command segments, "
                                    "numbered as in the twist table; shaded: the bridge not ARMED.")
    if "joint_tracking" in s:
        names = list(s["joint_tracking"])
        rms = [s["joint_tracking"][n]["rms_rad"] for n in names]
        mx = [s["joint_tracking"][n]["max_rad"] for n in names]
        lag = [s["joint_tracking"][n]["lag_s"] for n in names]
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
        x = np.arange(len(names))
        ax1.bar(x - 0.2, np.degrees(rms), 0.4, label="RMS")
        ax1.bar(x + 0.2, np.degrees(mx), 0.4, label="max")
        ax1.set_ylabel("state - command [deg]")
        ax1.legend(fontsize=8)
        ax2.bar(x, np.asarray(lag) * 1e3)
        ax2.set_ylabel("lag [ms]")
        ax2.set_xticks(x, names, rotation=60, fontsize=7)
        ax2.set_xlabel("joint")
        fig.suptitle("joint tracking: joint_states vs held joint_commands")
        fig.tight_layout()
        _save(fig, out / "joint_tracking.png")
        plt.close(fig)
        made["joint_tracking.png"] = ("Per-joint tracking error (RMS, max) and the lag that best aligns state "
                                      "and command.")
    gait_keys = set(a["gait"][1]) if "gait" in a else set()
    if any(k in gait_keys for g, _label in _GAIT_GROUPS for k in g):
        t, values = a["gait"]
        step = _every(len(t))
        t, values = t[step], {k: v[step] for k, v in values.items()}
        groups = [(tuple(k for k in g if k in values), label) for g, label in _GAIT_GROUPS]
        groups = [(g, label) for g, label in groups if g]
        fig, axes = plt.subplots(len(groups), 1, figsize=(10, 2.2 * len(groups)), sharex=True, squeeze=False)
        for ax, (g, label) in zip(axes[:, 0], groups, strict=True):
            for field in g:
                ax.plot(t, values[field], lw=0.9, label=field)
            ax.set_ylabel(label, fontsize=8)
            ax.legend(fontsize=7, loc="center left")
            _segment_lines(ax, an)
            _bridge_band(ax, an, ax is axes[0, 0])
        axes[-1, 0].set_xlabel(f"time [s] ({s['time_base']})")
        fig.suptitle("gait_state")
        fig.tight_layout()
        _label_segments(axes[0, 0], an)
        _save(fig, out / "gait_state.png")
        plt.close(fig)
        made["gait_state.png"] = ("Gait node state: twist, native command, phases, counters; shaded: the bridge "
                                  "not ARMED.")
    if a.get("servo_traces"):
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
        for name, trace in a["servo_traces"].items():
            tr = trace[_every(len(trace))]
            ax1.plot(tr[:, 0], tr[:, 1], lw=0.8, label=name)
            ax2.plot(tr[:, 0], tr[:, 2], lw=0.8)
        ax1.set_ylabel("temperature [C]")
        ax2.set_ylabel("voltage [V]")
        ax1.legend(fontsize=6, ncol=6)
        _bridge_band(ax1, an, True)
        _bridge_band(ax2, an, False)
        ax2.set_xlabel(f"time [s] ({s['time_base']})")
        fig.suptitle("servo health (diagnostics)")
        fig.tight_layout()
        _save(fig, out / "servo_health.png")
        plt.close(fig)
        made["servo_health.png"] = ("Servo temperature and input voltage from the bridge's diagnostics; shaded: the "
                                    "bridge not ARMED.")
    monitors = [k for k in ("singularity_margin", "singularity_margin_recomputed", "slippage_ratio") if k in a]
    if monitors:
        fig, axes = plt.subplots(len(monitors), 1, figsize=(10, 2.6 * len(monitors)), sharex=True, squeeze=False)
        for ax, monitor in zip(axes[:, 0], monitors, strict=True):
            mt, mv = a[monitor]
            ax.plot(mt[_every(len(mt))], mv[_every(len(mv))], lw=0.9)
            ax.set_ylabel(_MONITOR_LABELS[monitor], fontsize=8)
            _bridge_band(ax, an, ax is axes[0, 0])
        axes[-1, 0].set_xlabel(f"time [s] ({s['time_base']})")
        fig.tight_layout()
        _save(fig, out / "monitors.png")
        plt.close(fig)
        made["monitors.png"] = "Monitor outputs (as recorded, and recomputed with --recompute)."
    if "path" in a:
        plan, xy = a["path"]
        fig, ax = plt.subplots(figsize=(7, 7))
        ax.plot(plan[:, 0], plan[:, 1], "k--", lw=1.5, label="plan")
        ax.plot(xy[:, 0], xy[:, 1], lw=1.5, label="head")
        ax.set_aspect("equal")
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        ax.legend(fontsize=8)
        pf = s["path_following"]
        ax.set_title(f"cross-track RMS {pf['cross_track_rms_m']:.3f} m, max {pf['cross_track_max_m']:.3f} m",
                     fontsize=10)
        fig.tight_layout()
        _save(fig, out / "path_following.png")
        plt.close(fig)
        made["path_following.png"] = "Last recorded plan and the head's path after the first plan."
    return made


def animation_gif(an: Analysis) -> bytes | None:
    """Animated GIF of the body seen from above (head red), or None without a body trajectory."""
    from PIL import Image, ImageDraw

    if "points" not in an.arrays:
        return None
    pts, t = an.arrays["points"], an.arrays["t_points"]
    idx = np.unique(np.linspace(0, len(pts) - 1, min(_ANIMATION_FRAMES, len(pts))).round().astype(int))
    lo, hi = pts.reshape(-1, 2).min(axis=0), pts.reshape(-1, 2).max(axis=0)
    span = float(max(hi - lo)) or 1.0
    margin = 20
    scale = (_ANIMATION_PX - 2 * margin) / span

    def px(p: np.ndarray) -> list[tuple[float, float]]:
        q = (p - lo) * scale + margin
        return [(float(x), float(_ANIMATION_PX - y)) for x, y in q]

    centre = an.arrays["centre"]
    trail = px(centre[np.unique(np.linspace(0, len(centre) - 1, min(2000, len(centre))).round().astype(int))])
    palette = [255, 255, 255, 200, 200, 200, 40, 90, 160, 200, 30, 30, 0, 0, 0]  # white, grey, body, head, text

    def frame(k: int) -> Any:
        img = Image.new("P", (_ANIMATION_PX, _ANIMATION_PX), 0)
        img.putpalette(palette)
        d = ImageDraw.Draw(img)
        d.line(trail, fill=1, width=1)
        body = px(pts[k])
        d.line(body, fill=2, width=4)
        hx, hy = body[0]
        d.ellipse((hx - 5, hy - 5, hx + 5, hy + 5), fill=3)
        d.text((8, 6), f"t = {t[k]:6.2f} s   scale: {span:.2f} m across", fill=4)
        return img

    buf = io.BytesIO()
    # Frames drawn as the writer asks for them: it keeps only each frame's change from the last.
    frame(int(idx[0])).save(buf, format="GIF", save_all=True, append_images=(frame(int(k)) for k in idx[1:]),
                            duration=_ANIMATION_FRAME_MS, loop=0)
    return buf.getvalue()


SUMMARY_BLOCKS: list[tuple[str, str]] = [
    ("gait_state", "Gait state"), ("singularity_margin", "Singularity margin"),
    ("singularity_margin_recomputed", "Singularity margin recomputed from joint_states"),
    ("slippage_ratio", "Slippage ratio"), ("path_following", "Path following"),
    ("twin_vs_robot", "Twin vs robot"),
    ("cost_of_transport", "Actuator power and cost of transport"),
]
"""(summary key, heading) of the blocks shown as tables of named values, in this order. Keys
name their unit by suffix (``_m``, ``_s``, ``_m_s``, ``_rad_s``, ``_deg`` ...): see ``_SUFFIX_UNITS``."""

_SUFFIX_UNITS = (("_rad_s", "rad/s"), ("_m_s", "m/s"), ("_seconds", "s"), ("_deg", "deg"), ("_rad", "rad"),
                 ("_hz", "Hz"), ("_ms", "ms"), ("_mm", "mm"), ("_m", "m"), ("_s", "s"), ("_c", "C"), ("_v", "V"),
                 ("_w", "W"), ("_j", "J"), ("_kg", "kg"))


def _fmt(v: Any, unit: str = "") -> str:
    """A value as text, floats to the decimals of their unit (4 significant digits without one)."""
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (float, np.floating)):
        return f"{v:.{_DECIMALS[unit]}f}" if unit in _DECIMALS else f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x, unit) for x in v)
    return str(v)


_KEY_UNITS = {"omega_h": "rad/s", "omega_t": "rad/s", "omega_c": "rad/s", "omega_s": "rad/s", "omega": "rad/s",
              "omega_cmd": "rad/s", "v": "m/s", "v_cmd": "m/s", "yaw_rate": "rad/s", "head_offset": "rad",
              "phi_h": "rad", "phi_t": "rad", "phase_difference": "rad", "wave_phase": "rad", "time": "s",
              "amplitude": "-", "cost_of_transport": "-", "worst_level": "level", "error_bits": "bitmask",
              "start": "s", "end": "s"}
"""Units of keys named after their symbol, not by a unit suffix (``omega_c`` is rad/s, not C). ``-``:
dimensionless (``amplitude`` is the gait's start-up envelope in [0, 1]); ``level``: a diagnostic level
(0 OK, 1 WARN, 2 ERROR, 3 STALE); ``count``: a number of things (the unit of every other unitless number)."""

_NAMED_DISTANCES = {"distance_m": "body centre path length", "displacement_m": "body centre net displacement",
                    "head_path_length_m": "head path length"}
"""Summary keys shown under a name that says which point moved how."""


def _name_unit(key: str) -> tuple[str, str]:
    """``distance_m`` -> (``body centre path length``, ``m``): a summary key's name and unit."""
    if key in _KEY_UNITS:
        return key.replace("_", " "), _KEY_UNITS[key]
    if key in _NAMED_DISTANCES:
        return _NAMED_DISTANCES[key], "m"
    for suffix, unit in _SUFFIX_UNITS:
        if key.endswith(suffix):
            return key[: -len(suffix)].replace("_", " "), unit
    return key.replace("_", " "), ""


def _table(rows: list[list[Any]], header: list[str]) -> str:
    """HTML table; a column whose header ends in ``, <unit>`` is rounded to that unit's decimals."""
    units = [h.rsplit(", ", 1)[1] if ", " in h else "" for h in header]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(v, u))}</td>" for v, u in zip(r, units, strict=True))
                   + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _unit_of(v: Any, unit: str) -> str:
    """``unit``, or ``count`` for a number without one (every unitless number the summary holds counts things)."""
    numbers = [x for x in (v if isinstance(v, (list, tuple)) else [v]) if _is_number(x)]
    return unit or ("count" if numbers else "")


def _named_values(d: dict[str, Any], prefix: str = "") -> list[list[Any]]:
    """(quantity, value, unit) rows of a summary block; nested blocks become ``parent / child`` rows."""
    rows: list[list[Any]] = []
    for key, v in d.items():
        name, unit = _name_unit(key)
        if isinstance(v, dict):
            for sub, sv in v.items():
                sub_name, sub_unit = _name_unit(str(sub))
                if isinstance(sv, dict):
                    rows += _named_values(sv, f"{prefix}{name} / {sub_name} / ")
                else:
                    u = _unit_of(sv, sub_unit or unit)
                    rows.append([f"{prefix}{name} / {sub_name}", _fmt(sv, u), u])
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for k, item in enumerate(v):
                rows += _named_values(item, f"{prefix}{name} {k + 1} / ")
        else:
            u = _unit_of(v, unit)
            rows.append([prefix + name, _fmt(v, u), u])
    return rows


def _kv_table(d: dict[str, Any]) -> str:
    return _table(_named_values(d), ["quantity", "value", "unit"])


def report_title(summary: dict[str, Any]) -> str:
    """``<robot> session, <start> UTC (<folder>/<bag>)``: the report's title.

    The bag's own name with the folder holding it: a bag is often named just ``bag`` inside
    the run's folder (``out/demo/bag``), which alone names nothing.
    """
    start = summary.get("start_utc") or "start unknown"
    path = Path(summary["bag"])
    name = f"{path.parent.name}/{path.name}" if path.parent.name else path.name
    return f"{summary['robot']} session, {start} ({name})"


def _segment_note(g: dict[str, Any]) -> str:
    """The note of a row of the twist table: why it is not measured, or nothing."""
    if not g.get("flag"):
        return ""
    return ("left out of the means: " if g.get("left_out") else "not measured: ") + str(g["flag"])


def _bridge_html(s: dict[str, Any]) -> str:
    """The bridge's states: every span in which it was not ARMED, with its reason."""
    if "bridge_states" not in s:
        return ("<h2>Bridge states</h2><p>Unknown: the bag holds no bridge state (no 'bridge: bus' status on "
                "/diagnostics, no state change on /rosout); bridge_faults is null.</p>")
    b = s["bridge_states"]
    faults = s.get("bridge_faults") or []
    head = (f"<h2>Bridge states</h2><p>From {html.escape(', '.join(b['sources']))}. "
            + (f"<strong>{len(faults)} FAULT span(s)</strong>; " if faults else "No FAULT; ")
            + ("segments overlapping a span below are left out of the means.</p>" if b["not_armed"]
               else "ARMED throughout.</p>"))
    seconds = _table([[st, sec] for st, sec in b["seconds"].items()], ["state", "time, s"])
    spans = _table([[sp["state"], sp["start_s"], sp["end_s"], sp["duration_s"], sp["reason"], sp["source"]]
                    for sp in b["not_armed"]],
                   ["state", "start, s", "end, s", "duration, s", "reason", "source"]) if b["not_armed"] else ""
    return head + seconds + spans


def write_report(an: Analysis, out: Path) -> dict[str, Path]:
    """Write figures, ``summary.json``, ``animation.gif`` and ``report.html`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    made = figures(an, out)
    s = jsonable(an.summary)
    (out / "summary.json").write_text(json.dumps(s, indent=2))
    gif = animation_gif(an)
    if gif:
        (out / "animation.gif").write_bytes(gif)
    title = report_title(s)
    parts = [f"<h1>{html.escape(title)}</h1>"]
    parts.append("<h2>Bag</h2>" + _table([
        ["path", s["bag"], ""], ["storage", s["storage"], ""], ["metadata version", s["metadata_version"], "-"],
        ["ROS distro", s["ros_distro"], ""], ["robot", s["robot"], ""], ["start (UTC)", s.get("start_utc"), ""],
        ["messages", s["message_count"], "count"],
        ["duration (analysis time base)", _fmt(s["duration_s"], "s"), "s"],
        ["receive-time span", _fmt(s["receive_duration_s"], "s"), "s"],
        ["time base", s["time_base"], ""]], ["quantity", "value", "unit"]))
    parts.append("<h3>Topics</h3>" + _table([[k, v["type"], v["count"], v["rate_hz"]] for k, v in s["topics"].items()],
                                            ["topic", "type", "messages, count", "rate, Hz"]))
    if s["unreadable_topics"]:
        parts.append("<p>Not analysed: " + html.escape("; ".join(f"{k}: {v}" for k, v in
                                                                 s["unreadable_topics"].items())) + "</p>")
    parts.append(_bridge_html(s))
    if s["segments"]:
        parts.append("<h2>Commanded vs achieved twist</h2>" + _table(
            [[k + 1, g["label"], g["start_s"], g["end_s"], g["v_cmd"], g["v"], g["omega_cmd"], g["omega"],
              _segment_note(g)]
             for k, g in enumerate(s["segments"])],
            ["#", "segment", "start, s", "end, s", "v cmd, m/s", "v, m/s", "omega cmd, rad/s", "omega, rad/s",
             "note"]))
    if s.get("segment_means"):
        parts.append("<h3>Means over measured segments</h3>" + _kv_table(s["segment_means"]))
    if s.get("segments_bridge_not_armed"):
        parts.append("<h3>Segments while the bridge was not ARMED (left out of the means)</h3>" + _table(
            [[g["index"], g["label"], g["start_s"], g["end_s"], g["v_cmd"], g["v"], g["omega_cmd"], g["omega"],
              g["why"]] for g in s["segments_bridge_not_armed"]],
            ["#", "segment", "start, s", "end, s", "v cmd, m/s", "v, m/s", "omega cmd, rad/s", "omega, rad/s",
             "bridge"]))
    if "trajectory" in s:
        parts.append("<h2>Trajectory</h2>" + _kv_table(s["trajectory"]))
    if s.get("head_paths"):
        parts.append("<h3>Head path per pose source (measurement noise removed)</h3>" + _table(
            [[topic, h["samples"], h["rate_hz"], h["path_length_m"], h["displacement_m"], h["noise_sigma_mm"],
              h["path_length_raw_polyline_m"], h["outliers"]] for topic, h in s["head_paths"].items()],
            ["pose source", "samples, count", "rate, Hz", "path length, m", "net displacement, m",
             "noise sigma, mm", "raw polyline length, m", "outliers left out, count"]))
    if gif:
        parts.append('<h3>Body from above</h3><img alt="body animation" src="data:image/gif;base64,'
                     + base64.b64encode(gif).decode() + '">')
    if "joint_tracking" in s:
        parts.append("<h2>Joint tracking</h2>" + _table(
            [[n, np.degrees(v["rms_rad"]) if v["rms_rad"] is not None else None,
              np.degrees(v["max_rad"]) if v["max_rad"] is not None else None, v["lag_s"]]
             for n, v in s["joint_tracking"].items()], ["joint", "RMS, deg", "max, deg", "lag, s"]))
    for key, heading in SUMMARY_BLOCKS:
        if key in s:
            parts.append(f"<h2>{heading}</h2>" + _kv_table(s[key]))
    if "servo_health" in s:
        sh = s["servo_health"]
        parts.append("<h2>Servo health</h2>" + _kv_table(sh["bus"])
                     + _table([[n, v["worst_level"], v["error_bits"], v["temperature_max_c"], v["voltage_min_v"],
                                v["voltage_max_v"], "; ".join(v["messages"])] for n, v in sh["servos"].items()],
                              ["servo", "worst level, level", "error bits, bitmask", "max temperature, C",
                               "min voltage, V", "max voltage, V", "messages"]))
    for name, caption in made.items():
        data = base64.b64encode((out / name).read_bytes()).decode()
        parts.append(f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{data}">'
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    if s["missing"]:
        parts.append("<h2>Sections without data</h2>" + _table([[k, v] for k, v in s["missing"].items()],
                                                               ["section", "what it needs"]))
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
             "table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;"
             "font-size:13px}img{max-width:100%}figcaption{font-size:13px;color:#444}")
    doc = (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
           f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")
    (out / "report.html").write_text(doc, encoding="utf-8")
    return {"report": out / "report.html", "summary": out / "summary.json"}
