"""The identification's batched rollout is the twin's own replay, bit for bit.

:class:`snake_tools.twin.rollout.LiftedRollout` rolls out many parameter sets in C
(``mujoco.rollout``) from controls computed at once (:meth:`SimTwin.control_sequence`);
:func:`snake_tools.twin.rollout.simulate` steps :class:`SimTwin` through the recorded
commands one event at a time, the path of replay and every experiment. The oracle is that
path: on a real rosbag2 recording of the lifted twin, with whole, fractional and mixed
latencies, and on random command streams (several commands at one physics step, irregular
stamps), the two agree exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from snake_core.excitation import JointBounds, plan_excitation
from snake_core.robot import load_robot
from snake_core.twin_params import TwinParams
from snake_hardware.sim.mjcf import SimOptions
from snake_hardware.sim.twin import SimTwin, is_stepwise
from snake_tools.bench.twin import hidden_params
from snake_tools.twin import rollout as rollout_module
from snake_tools.twin import rollout_pool
from snake_tools.twin.identify import (
    LiftedRollout,
    Recording,
    head_seconds,
    read_recording,
    recording_head,
    simulate,
)
from snake_tools.twin.recording import record_twin_run
from snake_tools.twin.replay import run_recorded
from snake_tools.twin.rollout_pool import Payload, stepped_on_workers, worker_cpu_s

_TYPES = ("dorsal", "twist", "lateral")


@pytest.fixture(scope="module")
def robot():
    return load_robot("tsnake")


def _latencies(dorsal: float, twist: float, lateral: float, **extra: float) -> TwinParams:
    values = {f"servo.{t}.latency_s": v for t, v in zip(_TYPES, (dorsal, twist, lateral), strict=True)}
    return TwinParams().with_flat(values | extra)


def test_lifted_rollout_equals_the_twins_replay_of_a_recording(robot, tmp_path, monkeypatch):
    duration = 6.0
    bounds = [JointBounds(j.lower, j.upper, j.velocity) for j in robot.joints]
    motion = plan_excitation([0.0] * len(robot.joints), bounds, variant="lifted", duration=duration)
    bag = record_twin_run(tmp_path / "lifted", robot, duration, twin_params=hidden_params(robot), world=None,
                          lifted=True, controller=lambda tw: motion.positions(np.array([tw.time]))[0])
    rec = read_recording(bag, robot)
    params = [TwinParams(), _latencies(0.04, 0.04, 0.04), _latencies(0.0413, 0.0021, 0.0),
              _latencies(0.013, 0.0, 0.0333, **{"servo.twist.kp": 3.0, "servo.dorsal.frictionloss": 0.02}),
              # gear play (two hinges per joint, the angle their sum), on one type and on all: other structures
              _latencies(0.013, 0.0, 0.0, **{"servo.dorsal.backlash_rad": 0.004}),
              _latencies(0.0, 0.0, 0.02, **{f"servo.{t}.backlash_rad": 0.006 for t in _TYPES}),
              _latencies(0.0, 0.0, 0.02)]
    got = LiftedRollout(rec, robot, nthread=2).joint_angles(params)
    monkeypatch.setattr(rollout_module, "_ROLLOUT_BYTES", 1)  # batches of one per thread
    assert all(np.array_equal(a, b) for a, b in zip(got, LiftedRollout(rec, robot, 2).joint_angles(params),
                                                     strict=True))
    for p, q in zip(params, got, strict=True):
        ref, _ = simulate(rec, robot, p, None, lifted=True)
        assert q.shape == ref.shape
        assert np.array_equal(q, ref), np.abs(q - ref).max()
    assert not np.array_equal(got[0], got[1])  # the latency reaches the rollout
    assert np.abs(got[5] - got[6]).max() > 1e-3  # and the play
    # The global stage's head of the recording rolls out as the first samples of the whole, bit for bit.
    head, keep = recording_head(rec, 2.5)
    assert 0 < keep.sum() < len(keep) and np.all(keep[:keep.sum()]) and head.duration <= 2.5
    for q_head, q in zip(LiftedRollout(head, robot, 2).joint_angles(params), got, strict=True):
        assert np.array_equal(q_head, q[keep])
    # A recording that begins at rest: the head counts its seconds from the first command that moves.
    t = np.arange(0.0, 10.0, 0.02)
    moving = np.where(t[:, None] < 3.0, 0.1, 0.1 + 0.5 * np.sin(t[:, None] - 3.0)) * np.ones((1, 18))
    at_rest = Recording(rec.path, t + 100.0, moving, t + 100.0, moving, np.empty(0), np.empty((0, 2)), "")
    assert head_seconds(at_rest, 4.0) == pytest.approx(3.0 + 0.02 + 4.0, abs=0.021)
    assert head_seconds(rec, 4.0) == pytest.approx(4.0, abs=0.3)   # the multisine moves from its first command
    twin = SimTwin(robot, None, options=SimOptions(lifted=True))   # the addresses LiftedRollout reads, by name
    assert twin.joint_qpos_addresses.tolist() == [int(twin.model.joint(n).qposadr[0]) for n in robot.joint_names]


def test_control_sequence_equals_stepping_through_set_targets(robot):
    rng = np.random.default_rng(3)
    choices = (0.0, 0.004, 0.006, 0.0413, 0.0979)
    for _ in range(12):
        params = _latencies(*(float(rng.choice(choices)) for _ in _TYPES))
        twin = SimTwin(robot, None, twin_params=params, options=SimOptions(lifted=True))
        q0 = rng.normal(0.0, 0.3, len(robot.joints))
        t_cmd = np.sort(rng.uniform(0.0, 0.5, 120))
        t_cmd[5] = t_cmd[4]                   # two commands at one stamp
        t_cmd[9] = t_cmd[8] + 0.0005          # and at one physics step
        q_cmd = rng.normal(0.0, 0.5, (len(t_cmd), len(robot.joints)))
        t_state = np.sort(rng.uniform(0.0, 0.6, 30))
        twin.reset(targets=q0)
        with twin.controls_only() as controls:
            run_recorded(twin, t_cmd, q_cmd, np.empty(0), t_state, 0.0)
            ref = controls()
        twin.reset(targets=q0)
        steps = np.array([round(t / twin.timestep) for t in t_cmd])
        nstep = max(steps.max(), *(round(t / twin.timestep) for t in t_state))
        got = twin.control_sequence(steps, q_cmd, nstep)
        assert got.shape == ref.shape
        assert np.array_equal(got, ref), np.abs(got - ref).max()
    with pytest.raises(ValueError, match=r"not all finite"):
        twin.control_sequence(np.array([0]), np.full((1, len(robot.joints)), np.nan), 5)


def test_lifted_rollout_with_load_dependent_friction_equals_the_twins_replay(robot, tmp_path, monkeypatch):
    # A twin whose friction grows with the actuator's torque (set before every physics step) is
    # stepped one physics step at a time; mixed in one call with sets that roll out in C, every
    # set still equals the twin's own replay, bit for bit: on worker processes (two threads
    # asked for), in the process (one), and where no worker may be started (a daemonic process).
    duration = 6.0
    bounds = [JointBounds(j.lower, j.upper, j.velocity) for j in robot.joints]
    motion = plan_excitation([0.0] * len(robot.joints), bounds, variant="lifted", duration=duration)
    truth = hidden_params(robot).with_flat({f"servo.{t}.load_friction": 0.1 for t in _TYPES})
    bag = record_twin_run(tmp_path / "loaded", robot, duration, twin_params=truth, world=None, lifted=True,
                          controller=lambda tw: motion.positions(np.array([tw.time]))[0])
    rec = read_recording(bag, robot)
    params = [_latencies(0.013, 0.0, 0.0333, **{f"servo.{t}.load_friction": 0.1 for t in _TYPES}),
              _latencies(0.013, 0.0, 0.0333),
              _latencies(0.0413, 0.0, 0.0, **{"servo.dorsal.load_friction": 0.3, "servo.dorsal.backlash_rad": 0.004}),
              TwinParams().with_flat({"joint.m2_lateral.load_friction": 0.2})]
    roller = LiftedRollout(rec, robot, nthread=2)
    for p in params:   # which sets go to the workers: those the twin steps from Python
        assert is_stepwise(robot, p) == SimTwin(robot, None, twin_params=p, options=SimOptions(lifted=True)).stepwise
    worker_cpu = worker_cpu_s()
    got = roller.joint_angles(params)
    assert worker_cpu_s() > worker_cpu   # the stepped sets ran on the worker processes
    for p, q in zip(params, got, strict=True):
        ref, _ = simulate(rec, robot, p, None, lifted=True)
        assert q.shape == ref.shape
        assert np.array_equal(q, ref), np.abs(q - ref).max()
    assert np.array_equal(got, LiftedRollout(rec, robot, nthread=1).joint_angles(params))  # on one thread: the same
    monkeypatch.setattr(rollout_module, "can_fork", lambda: False)
    worker_cpu = worker_cpu_s()
    assert np.array_equal(got, LiftedRollout(rec, robot, nthread=2).joint_angles(params))  # threads: the same
    assert worker_cpu_s() == worker_cpu
    assert np.abs(got[0] - got[1]).max() > 1e-4   # the load-dependent friction reaches the rollout
    twin = SimTwin(robot, None, twin_params=params[1], options=SimOptions(lifted=True))
    assert twin.load_friction is None   # none: the twin as before (several steps per C call)


def test_a_worker_that_dies_fails_its_batch_and_the_next_batch_starts_a_fresh_pool(robot, tmp_path):
    from concurrent.futures.process import BrokenProcessPool

    duration = 5.0
    bounds = [JointBounds(j.lower, j.upper, j.velocity) for j in robot.joints]
    motion = plan_excitation([0.0] * len(robot.joints), bounds, variant="lifted", duration=duration)
    bag = record_twin_run(tmp_path / "lifted", robot, duration, world=None, lifted=True,
                          controller=lambda tw: motion.positions(np.array([tw.time]))[0])
    rec = read_recording(bag, robot)
    params = [TwinParams().with_flat({f"servo.{t}.load_friction": 0.1 * (k + 1) for t in _TYPES}) for k in range(2)]
    payload = Payload(rec, robot)
    first = stepped_on_workers(payload, params, 2)
    for proc in list(rollout_pool.pool(2)._processes.values()):   # a worker killed (out of memory, say)
        proc.kill()
        proc.join()
    with pytest.raises(BrokenProcessPool):
        stepped_on_workers(payload, params, 2)
    again = stepped_on_workers(payload, params, 2)   # a fresh pool: the same angles
    assert len(again) == 2 and all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(again[0], again[1])


def test_ground_runs_on_worker_processes_are_the_runs_made_here(robot, tmp_path, monkeypatch):
    """The ground fit's batches (its scans, the contact model's candidates) split over processes change no run."""
    bag = record_twin_run(tmp_path / "ground", robot, 6.0, cmd_vel=lambda t: (0.05, 0.1 if t > 3.0 else 0.0))
    rec = read_recording(bag, robot)
    params = [TwinParams().with_flat({"contact.ground_friction": mu}) for mu in (0.5, 0.8, 1.1)]
    here = [rollout_module.simulate_path(rec, robot, p, "flat") for p in params]
    worker_cpu = worker_cpu_s()
    on_workers = rollout_module.simulate_paths(rec, robot, params, "flat", 2)
    assert worker_cpu_s() > worker_cpu   # they ran on the workers
    assert len(on_workers) == len(here)
    for mine, theirs in zip(here, on_workers, strict=True):
        assert all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))
    assert not np.array_equal(here[0][1], here[2][1])   # the friction reaches the head's path
    monkeypatch.setattr(rollout_module, "can_fork", lambda: False)   # a daemonic process: here, the same runs
    worker_cpu = worker_cpu_s()
    again = rollout_module.simulate_paths(rec, robot, params, "flat", 2)
    assert worker_cpu_s() == worker_cpu
    assert all(np.array_equal(a, b) for mine, theirs in zip(here, again, strict=True)
               for a, b in zip(mine, theirs, strict=True))
