"""``snake optimize gait``: reproducible, resumable from its storage, better than the YAML's defaults."""

from __future__ import annotations

import html
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from snake_core.robot import load_robot
from snake_tools.cli import main
from snake_tools.commands.optimize import GaitTrial, defaults
from snake_tools.experiment.task import run_task

_DURATION = "3"  # simulated s per trial: short, the tests check the study's bookkeeping and the search
_WAIT_S = 300.0  # bound on waiting for finished trials on a loaded machine, s
_K_A_MID, _K_B_MID = 0.02, 0.06  # m, the middle of the searched k_a, k_b (the YAML's values; the speed study
#                                   holds the command, so the stand-in runs split the trials on a coefficient)


def _optimize(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    assert main(["optimize", "gait", "--robot", "tsnake", "--world", "flat", "--objective", "speed",
                 "--duration", _DURATION, "--json", *extra]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_same_seed_gives_the_same_study_and_beats_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    # Ten trials: the speed study holds the command, so only the helix can beat the defaults (4 did not).
    one = _optimize(capsys, "--trials", "10", "--seed", "1")
    two = _optimize(capsys, "--trials", "10", "--seed", "1", "--against-defaults")
    assert (one["best_params"], one["best_value"]) == (two["best_params"], two["best_value"])
    assert one["complete"] == 10
    # every trial ran at the defaults' command: the rolling gait's phase rates at half omega_max,
    # whose cmd_vel is 003 Eq. 10 with the YAML's reduction k (v = k (omega_h + omega_t) / 2)
    base = defaults(load_robot("tsnake"))
    k = float(load_robot("tsnake").gait("reduction")["k"])
    assert one["command"]["native"] == {"omega_h": base["omega_h"], "omega_t": base["omega_t"]}
    assert one["command"]["cmd_vel"] == {"v_m_s": pytest.approx(k * base["omega_h"]), "omega_rad_s": 0.0}
    assert {k: one["best_params"][k] for k in ("omega_h", "omega_t")} == one["command"]["native"]
    # re-measured outside the study, from the parameters alone
    best = run_task(GaitTrial("tsnake", "flat", one["best_params"], float(_DURATION)))
    assert best["speed"] == pytest.approx(one["best_value"], rel=1e-9)
    default = run_task(GaitTrial("tsnake", "flat", defaults(load_robot("tsnake")), float(_DURATION)))
    assert best["speed"] > default["speed"]
    # --against-defaults prints the same two re-measurements
    assert two["best_remeasured"]["value"] == pytest.approx(best["speed"], rel=1e-9)
    assert two["defaults"]["value"] == pytest.approx(default["speed"], rel=1e-9)
    assert two["defaults"]["params"] == defaults(load_robot("tsnake")) and two["beats_defaults"] is True
    # the gain is the gait's alone: both at one command, the command's share is one
    assert two["shares"]["command_ratio"] == 1.0
    assert two["shares"]["gait_ratio"] == pytest.approx(best["speed"] / default["speed"], rel=1e-9)


def test_the_same_command_adds_trials_to_the_stored_study_and_writes_a_preset(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'gait.db'}"
    first = _optimize(capsys, "--trials", "2", "--seed", "0", "--study", url)
    out = tmp_path / "tsnake_fast.yaml"
    second = _optimize(capsys, "--trials", "2", "--seed", "0", "--study", url,
                       "--write-preset", "rolling_fast", str(out), "--report", str(tmp_path / "study.html"))
    assert (first["trials_in_study"], second["trials_in_study"]) == (2, 4)
    assert second["best_value"] >= first["best_value"]
    page = (tmp_path / "study.html").read_text()
    # self-contained: history, importances and the best run as embedded PNGs, its animation as a GIF, nothing fetched
    assert page.count('src="data:image/png;base64,') == 3 and page.count('src="data:image/gif;base64,') == 1
    assert not re.search(r"""(src|href)\s*=\s*(?!["']?data:)""", page) and "<script" not in page
    # the best against the defaults at the study's command, the command's share apart (one: it was held)
    text = html.unescape(page)
    assert "at equal command" in text and "gait's share: best / defaults, same command" in text
    assert re.search(r"command's share: own command / compared command, same gait</td><td>1\.000<", text)
    # the copy loads like the robot file, its gaits.rolling holds the best helix, its header the command
    copy = load_robot(str(out))
    helix = {k: float(copy.gait("rolling")[k]) for k in ("k_a", "k_b", "k_theta")}
    assert helix == {k: second["best_params"][k] for k in ("k_a", "k_b", "k_theta")}
    assert out.read_text().startswith("# Gait preset rolling_fast:")
    # the command it was found at is in the file's data (its description), read back as written
    from snake_tools.optimize.command import preset_command

    found = preset_command(copy)
    assert found is not None and found.native == {k: second["best_params"][k] for k in ("omega_h", "omega_t")}
    cmd_vel = second["command"]["cmd_vel"]
    assert (found.v, found.omega) == (cmd_vel["v_m_s"], cmd_vel["omega_rad_s"])
    # the preset reproduces the study's best value, re-measured outside the study from the copy
    rates = {k: second["best_params"][k] for k in ("omega_h", "omega_t")}
    again = run_task(GaitTrial(str(out), "flat", {**helix, **rates}, float(_DURATION)))
    assert again["speed"] == pytest.approx(second["best_value"], rel=1e-9)


def _complete(url: str, name: str) -> list[tuple[int, dict[str, float], float]]:
    import optuna

    try:
        study = optuna.load_study(study_name=name, storage=url)
    except KeyError:  # not created yet
        return []
    return [(t.number, t.params, float(t.value or 0.0)) for t in study.trials
            if t.state == optuna.trial.TrialState.COMPLETE]


def test_a_study_killed_mid_run_resumes_without_losing_finished_trials(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'gait.db'}"
    proc = subprocess.Popen([sys.executable, "-m", "snake_tools.cli", "optimize", "gait", "--trials", "50",
                             "--duration", _DURATION, "--seed", "1", "--study", url, "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + _WAIT_S
        while len(_complete(url, "tsnake-flat-speed")) < 2:  # waits on the stored trials, not on a clock
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    before = _complete(url, "tsnake-flat-speed")
    assert 2 <= len(before) < 50
    after = _optimize(capsys, "--trials", "1", "--seed", "1", "--study", url)
    kept = _complete(url, "tsnake-flat-speed")
    assert before == kept[:len(before)]
    assert after["complete"] == len(before) + 1


def test_cost_of_transport_of_a_trial_matches_the_core_formula_on_its_own_samples() -> None:
    """The trial's COT is E / (m g d) of its sampled positive power, recomputed here by hand."""
    import numpy as np

    from snake_tools.commands.optimize import PoweredTrace
    from snake_tools.experiment.task import twin_at_spawn

    trial = GaitTrial("tsnake", "flat", defaults(load_robot("tsnake")), 2.0)
    twin = twin_at_spawn(load_robot("tsnake"), "flat")
    trace = trial.run_episode(twin, trial.build_gait(twin.robot))
    assert isinstance(trace, PoweredTrace) and len(trace.effort) == len(trace.t)
    t = np.asarray(trace.t)
    power = np.clip(np.asarray(trace.effort) * np.asarray(trace.velocity), 0.0, None).sum(axis=1)
    work = float(np.sum(0.5 * (power[1:] + power[:-1]) * np.diff(t)))
    com = np.asarray(trace.com)
    expected = work / (trace.mass_kg * 9.80665 * float(np.linalg.norm(com[-1] - com[0])))
    assert work > 0.0
    assert trial.score(trace)["cost_of_transport"] == pytest.approx(expected, rel=1e-9)


def test_a_failing_trial_is_told_as_fail_and_the_study_goes_on(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from snake_tools.commands import optimize

    def run_or_fail(task: GaitTrial) -> dict[str, float]:
        if task.params["k_a"] < _K_A_MID:  # stands in for a twin that fails
            raise RuntimeError("self-collision")
        return {"speed": task.params["k_a"], "turn_rate": 0.0, "cost_of_transport": 1.0}

    monkeypatch.setattr(optimize, "run_task", run_or_fail)
    out = _optimize(capsys, "--trials", "8", "--seed", "2")
    assert out["trials_in_study"] == 8
    assert out["failed"] >= 1 and out["complete"] >= 1 and out["failed"] + out["complete"] == 8
    assert out["best_params"]["k_a"] == pytest.approx(out["best_value"]) and out["best_value"] >= _K_A_MID


def test_a_run_with_a_failure_class_is_pruned_and_its_class_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import optuna

    from snake_tools.commands import optimize

    def run_or_fall(task: GaitTrial) -> dict[str, object]:
        flipped = task.params["k_b"] < _K_B_MID  # stands in for a run the classifier flags
        return {"speed": 1.0 + task.params["k_a"], "turn_rate": 0.0, "cost_of_transport": 1.0,
                "failures": ["airborne", "joint_limit"] if flipped else []}

    monkeypatch.setattr(optimize, "run_task", run_or_fall)
    url = f"sqlite:///{tmp_path / 'gait.db'}"
    out = _optimize(capsys, "--trials", "8", "--seed", "3", "--study", url)
    study = optuna.load_study(study_name="tsnake-flat-speed", storage=url)
    flagged = [t for t in study.trials if t.params["k_b"] < _K_B_MID]
    assert flagged and len(flagged) < 8
    # a run with failure classes has no objective value: pruned, its classes an attribute
    assert all(t.state == optuna.trial.TrialState.PRUNED and t.value is None for t in flagged)
    assert all(t.user_attrs["failures"] == ["airborne", "joint_limit"] for t in flagged)
    assert out["pruned"] == len(flagged) and out["complete"] == 8 - len(flagged)
    assert out["failure_classes"] == {"stuck": 0, "self_collision": 0, "joint_limit": len(flagged),
                                      "airborne": len(flagged)}
    # the best is the best of the runs that did not fail, even if a failed one scored higher
    clean = [t for t in study.trials if t.params["k_b"] >= _K_B_MID]
    assert out["best_value"] == pytest.approx(max(1.0 + t.params["k_a"] for t in clean))


def test_a_twin_run_that_does_not_move_is_classed_stuck_and_the_default_is_not() -> None:
    robot = load_robot("tsnake")
    still = run_task(GaitTrial("tsnake", "flat", {**defaults(robot), "omega_h": 0.0, "omega_t": 0.0}, 2.0))
    assert still["failures"] == ["stuck"]
    assert run_task(GaitTrial("tsnake", "flat", defaults(robot), 2.0))["failures"] == []


_PROBE = """<script>
window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push(String(e.message || e.type)); }, true);
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({errors: window.__errors, images: imgs.length,
    broken: imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                .map(function (i) { return i.alt; })});
  document.body.appendChild(out);
});
</script>"""


def test_the_study_report_loads_in_a_headless_browser_without_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium: scripts/setup.sh installs it from the distribution when run as root with apt")
    _optimize(capsys, "--trials", "2", "--seed", "0", "--report", str(tmp_path / "study.html"))
    probed = tmp_path / "probed.html"
    probed.write_text((tmp_path / "study.html").read_text().replace("<head>", "<head>" + _PROBE, 1))
    run = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=10000", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         probed.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    match = re.search(r'<pre id="probe">(.*?)</pre>', run.stdout, re.S)
    assert match, "the page never finished loading"
    result = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert result["errors"] == [] and result["broken"] == [] and result["images"] == 4
    assert not re.search(r"CONSOLE[:(]\d+|Uncaught", run.stderr)


def _yaml_limits(robot: str) -> dict[str, float]:
    import yaml

    data = yaml.safe_load((Path(__file__).resolve().parents[3] / "config" / "robots" / f"{robot}.yaml").read_text())
    return {name: min(-t["lower"], t["upper"]) for name, t in data["joint_types"].items() if not t.get("continuous")}


def test_each_gaits_search_space_holds_its_defaults_within_the_robots_limits() -> None:
    from snake_tools.commands.optimize import bounds

    tsnake, wheeled = load_robot("tsnake"), load_robot("wheeled_snake")
    for robot, gait in ((tsnake, "rolling"), (tsnake, "conical"), (wheeled, "serpenoid")):
        space, base = bounds(robot, gait), defaults(robot, gait)
        assert set(space) == set(base)
        assert all(lo <= base[k] <= hi for k, (lo, hi) in space.items()), gait
    limits = _yaml_limits("tsnake")  # the shipped file's joint ranges, read here from the YAML itself
    conical = bounds(tsnake, "conical")
    taper = conical["taper"][1]
    # the most tapered wave stays within the joint range: A (1 + taper_max) <= limit
    assert conical["amplitude_dorsal"][1] * (1 + taper) == pytest.approx(limits["dorsal"])
    assert conical["amplitude_lateral"][1] * (1 + taper) == pytest.approx(limits["lateral"])
    assert conical["omega_s"] == (-3.0, 3.0) and taper == 0.9
    serpenoid = bounds(wheeled, "serpenoid")
    assert serpenoid["amplitude"] == (0.0, pytest.approx(_yaml_limits("wheeled_snake")["lateral"]))
    assert serpenoid["omega"] == (-6.0, 6.0) and serpenoid["head_offset"] == (-0.8, 0.8)
    assert bounds(tsnake, "rolling")["omega_h"] == (-2.0, 2.0)


@pytest.mark.parametrize(("robot", "gait", "name"), [
    ("tsnake", "conical", "tsnake-conical-flat-speed"),
    ("wheeled_snake", "serpenoid", "wheeled_snake-serpenoid-flat-speed")])
def test_conical_and_serpenoid_studies_search_their_own_parameters(
        robot: str, gait: str, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    from snake_tools.commands.optimize import bounds

    argv = ["optimize", "gait", "--robot", robot, "--world", "flat", "--objective", "speed", "--duration", "1",
            "--trials", "2", "--seed", "0", "--json"]
    assert main([*argv, "--gait", gait] if robot == "tsnake" else argv) == 0  # serpenoid: the wheeled default
    out = json.loads(capsys.readouterr().out)
    assert out["gait"] == gait and out["trials_in_study"] == 2
    space = bounds(load_robot(robot), gait)
    assert set(out["best_params"]) == set(space)
    assert all(space[k][0] <= v <= space[k][1] for k, v in out["best_params"].items())
    assert out["study"] == name


def test_a_gait_the_robot_cannot_run_is_refused_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", "gait", "--robot", "wheeled_snake", "--gait", "rolling", "--trials", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--gait" in err and "serpenoid" in err


def test_a_study_on_two_workers_starts_one_cluster_for_all_its_rounds(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Six trials in rounds of two: one local cluster, and the same scores as the trials run here."""
    from snake_tools.experiment import executor

    started: list[int] = []
    real = executor.local_cluster

    def counting(workers: int) -> Any:
        started.append(workers)
        return real(workers)

    monkeypatch.setattr(executor, "local_cluster", counting)
    out = _optimize(capsys, "--trials", "6", "--seed", "4", "--workers", "2")
    assert started == [2]
    assert out["complete"] == 6
    best = run_task(GaitTrial("tsnake", "flat", out["best_params"], float(_DURATION)))
    assert best["speed"] == pytest.approx(out["best_value"], rel=1e-9)


def _states(url: str, name: str) -> list[str]:
    import optuna

    try:
        study = optuna.load_study(study_name=name, storage=url)
    except KeyError:  # the study is not created yet
        return []
    return [t.state.name for t in study.trials]


def test_ctrl_c_tells_running_trials_fail_and_says_where_the_study_is(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gait.db'}"
    proc = subprocess.Popen([sys.executable, "-m", "snake_tools.cli", "optimize", "gait", "--trials", "50",
                             "--duration", "60", "--seed", "1", "--study", url, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + _WAIT_S
        while "RUNNING" not in _states(url, "tsnake-flat-speed"):  # a trial has been asked and runs
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=_WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    states = _states(url, "tsnake-flat-speed")
    assert states and "RUNNING" not in states and states[-1] == "FAIL"
    assert f"study 'tsnake-flat-speed' kept in {url}" in err and "interrupted: 1 running trials told FAIL" in err


def test_ctrl_c_inside_an_ask_leaves_no_trial_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C after ``ask`` stored its trial but before it returned: the trial is still told FAIL."""
    import os

    import optuna

    ask = optuna.study.Study.ask

    def interrupted_ask(self: Any, *args: Any, **kwargs: Any) -> Any:
        trial = ask(self, *args, **kwargs)      # stored as RUNNING
        os.kill(os.getpid(), signal.SIGINT)     # Ctrl-C before the caller has it
        return trial

    monkeypatch.setattr(optuna.study.Study, "ask", interrupted_ask)
    url = f"sqlite:///{tmp_path / 'gait.db'}"
    code = main(["optimize", "gait", "--trials", "3", "--duration", "1", "--seed", "1", "--study", url, "--json"])
    assert code == 130
    assert _states(url, "tsnake-flat-speed") == ["FAIL"]
    assert "interrupted: 1 running trials told FAIL" in capsys.readouterr().err


def test_study_storage_folder_is_made_and_a_bad_url_is_one_line(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "no" / "such" / "dir" / "x.db"
    out = _optimize(capsys, "--trials", "1", "--seed", "0", "--study", f"sqlite:///{db}")
    assert db.is_file() and out["trials_in_study"] == 1
    for url in ("bogus://x", "not a url"):
        assert main(["optimize", "gait", "--trials", "1", "--duration", _DURATION, "--study", url]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"snake optimize gait: error: --study {url}: cannot open")


def test_a_preset_name_outside_the_name_rule_is_refused_before_any_trial(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.yaml"
    url = f"sqlite:///{tmp_path / 'gait.db'}"
    code = main(["optimize", "gait", "--robot", "tsnake", "--trials", "1", "--study", url,
                 "--write-preset", "fast\nk_a: 9", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--write-preset NAME" in err[0], err
    assert not out.exists() and not (tmp_path / "gait.db").exists()


def test_a_stored_study_is_resumed_only_at_its_own_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'gait.db'}"
    first = _optimize(capsys, "--trials", "1", "--seed", "0", "--study", url, "--cmd-vel", "0.03", "0.0")
    k = float(load_robot("tsnake").gait("reduction")["k"])
    assert first["command"]["native"] == {"omega_h": pytest.approx(0.03 / k), "omega_t": pytest.approx(0.03 / k)}
    assert main(["optimize", "gait", "--trials", "1", "--duration", _DURATION, "--study", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "compares gaits at cmd_vel v=0.03 m/s, omega=0 rad/s, not cmd_vel v=" in err


def test_a_searched_command_s_share_is_told_apart_from_the_gait_s(capsys: pytest.CaptureFixture[str]) -> None:
    out = _optimize(capsys, "--trials", "3", "--seed", "2", "--against-defaults", "--objective", "cost_of_transport")
    assert out["command"] == "searched"
    best = out["best_params"]
    base = defaults(load_robot("tsnake"))
    same = {**best, "omega_h": base["omega_h"], "omega_t": base["omega_t"]}
    runs = {name: run_task(GaitTrial("tsnake", "flat", p, float(_DURATION)))["cost_of_transport"]
            for name, p in (("defaults", base), ("best_at_default_command", same), ("best", best))}
    shares = out["shares"]
    assert out["equal_command"]["best_value"] == pytest.approx(runs["best_at_default_command"], rel=1e-9)
    assert shares["gait_ratio"] == pytest.approx(runs["best_at_default_command"] / runs["defaults"], rel=1e-9)
    assert shares["command_ratio"] == pytest.approx(runs["best"] / runs["best_at_default_command"], rel=1e-9)
