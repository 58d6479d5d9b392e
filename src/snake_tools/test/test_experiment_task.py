"""The experiments' task interface: the runner steps any task on the twin and records what it saw.

Checked against the twin itself (its clock and its accessors after the run), not against the
runner's own bookkeeping.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

import numpy as np
import pytest

from snake_core.gait import Gait, make_gait
from snake_core.robot import RobotModel, load_robot
from snake_hardware.sim.twin import SimTwin
from snake_tools.experiment import motion_modes
from snake_tools.experiment.executor import map_trials
from snake_tools.experiment.task import CONTROL_DT, Command, GaitTask, Trace, run_gait, run_task, twin_at_spawn

_TRANSLATE = (2.0, 2.0, 1.0)  # rad/s, 003 Sec. IV-A.2's translating command


@dataclass
class _StopAfter(GaitTask[tuple[Trace, SimTwin]]):
    """Translate until ``stop_s``, then say done; the score keeps the trace and the twin for the checks."""

    stop_s: float
    limit_s: float
    _twin: SimTwin | None = field(default=None, init=False, repr=False)

    @property
    def time_limit(self) -> float:
        return self.limit_s

    def build_twin(self) -> SimTwin:
        return twin_at_spawn(load_robot("tsnake"), "flat")

    def build_gait(self, robot: RobotModel) -> Gait:
        return make_gait("rolling", robot, ramp_time=0.5)

    def reset(self, twin: SimTwin, gait: Gait) -> None:
        self._twin = twin

    def command(self, trace: Trace) -> Command | None:
        return None if trace.t[-1] >= self.stop_s else _TRANSLATE

    def score(self, outcome: Trace) -> tuple[Trace, SimTwin]:
        assert self._twin is not None
        return outcome, self._twin


def test_runner_records_one_row_per_control_period_until_the_task_is_done() -> None:
    trace, twin = run_task(_StopAfter(stop_s=1.0, limit_s=5.0))
    t = np.asarray(trace.t)
    # one command between consecutive rows, each advancing the twin's clock by one control period
    assert len(trace.command) == len(t) - 1 > 0
    assert all(c == _TRANSLATE for c in trace.command)
    np.testing.assert_allclose(np.diff(t), twin.timestep * twin.substeps, rtol=1e-9)
    assert twin.timestep * twin.substeps == pytest.approx(CONTROL_DT)
    # the episode ended at the first row at or after stop_s, and the twin was not stepped after it
    assert t[-1] >= 1.0 > t[-2]
    assert twin.time == t[-1]
    # the last row is what the twin shows now
    np.testing.assert_array_equal(trace.com[-1], twin.centre_of_mass()[:2])
    np.testing.assert_array_equal(trace.head[-1], twin.head_pose()[0][:2])
    assert trace.com_displacement() == pytest.approx(float(np.linalg.norm(twin.centre_of_mass()[:2] - trace.com[0])))
    assert trace.com_displacement(trace.now) == 0.0


def test_runner_stops_at_the_time_limit_with_a_last_row() -> None:
    trace, twin = run_task(_StopAfter(stop_s=np.inf, limit_s=0.5))
    assert 0.5 - 1e-9 <= trace.t[-1] < 0.5 + CONTROL_DT
    assert twin.time == trace.t[-1]
    assert len(trace.command) == len(trace.t) - 1


def test_run_gait_continues_a_trace_as_one_run() -> None:
    """Two calls sharing a trace step the same physics as one call of the summed length."""
    robot = load_robot("tsnake")
    one = run_gait(twin_at_spawn(robot, "flat"), make_gait("rolling", robot), lambda _tr: _TRANSLATE, 1.0)
    twin, gait = twin_at_spawn(robot, "flat"), make_gait("rolling", robot)
    split = run_gait(twin, gait, lambda _tr: _TRANSLATE, 0.4)
    split = run_gait(twin, gait, lambda _tr: _TRANSLATE, one.t[-1] - twin.time, trace=split)
    assert split.t[-1] == one.t[-1]
    np.testing.assert_array_equal(split.com[-1], one.com[-1])


def test_a_task_runs_the_same_in_a_worker_process() -> None:
    """Tasks are plain settings: pickled to a worker they give the same score as here."""
    task = motion_modes.MotionModeTask("turning_in_place", 3.0)
    assert pickle.loads(pickle.dumps(task)) == task
    here = run_task(task)
    there = map_trials(run_task, [(task,), (motion_modes.MotionModeTask("translating", 3.0),)], 2, progress=False)
    strip = lambda r: {k: v for k, v in r.items() if k != "_trace"}  # noqa: E731
    assert strip(there[0]) == strip(here)
    assert strip(there[1]) != strip(here)
