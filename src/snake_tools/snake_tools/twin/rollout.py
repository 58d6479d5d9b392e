"""The twin driven by a recording: one run (:func:`simulate`), or many parameter sets at once in C.

:class:`LiftedRollout` rolls out the lifted twin for many parameter sets in one ``mujoco.rollout``
call, bit for bit :func:`simulate`'s joint angles (a twin with load-dependent friction, whose
friction changes every physics step, one physics step at a time: :meth:`LiftedRollout.joint_angles`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams
from snake_tools.twin.data import Recording
from snake_tools.twin.rollout_pool import Payload, can_fork, paths_on_workers, stepped_on_workers

_ROLLOUT_BYTES = 256 * 2 ** 20  # states one mujoco.rollout call may return (a longer batch is split)


def simulate(rec: Recording, robot: RobotModel, params: TwinParams, world: str | Path | None = "flat",
             lifted: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The twin driven by the recording: its joint angles at ``t_state`` and head xy at ``t_pose``."""
    q, xy, _ = simulate_path(rec, robot, params, world, lifted)
    return q, xy


def simulate_path(rec: Recording, robot: RobotModel, params: TwinParams, world: str | Path | None = "flat",
                  lifted: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`simulate`'s joint angles and head xy, and the head's heading at ``t_pose`` (rad, unwrapped)."""
    from snake_hardware.sim.mjcf import SimOptions  # mujoco: only when fitting
    from snake_hardware.sim.twin import SimTwin
    from snake_tools.twin.replay import heading_of, run_recorded

    twin = SimTwin(robot, None if lifted else world, twin_params=params, options=SimOptions(lifted=lifted))
    twin.reset(targets=rec.q_state[0])
    xy, quat, q, _ = run_recorded(twin, rec.t_cmd, rec.q_cmd, rec.t_pose, rec.t_state, rec.start)
    return q, xy, np.unwrap(heading_of(quat)) if len(quat) else np.empty(0)


def simulate_paths(rec: Recording, robot: RobotModel, params: list[TwinParams], world: str | Path | None,
                   workers: int, payload: Payload | None = None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`simulate_path` of each parameter set on the ground, on ``workers`` processes where it can.

    Several sets, ``workers`` above 1 and a process that may start workers: one chunk per worker
    (:func:`snake_tools.twin.rollout_pool.paths_on_workers`; ``payload``, the recording pickled
    once, is made where not given); else one after the other here. The runs are the same bit for bit.
    """
    if len(params) > 1 and workers > 1 and can_fork():
        return paths_on_workers(payload or Payload(rec, robot), params, world, workers)
    return [simulate_path(rec, robot, p, world) for p in params]


class LiftedRollout:
    """The lifted twin driven by a recording, many parameter sets at once in C (``mujoco.rollout``).

    A lifted run's commands do not depend on the state: the controls of every physics step
    (the recorded commands at their stamps rounded to the physics step, as :func:`simulate`
    applies them, through the per-type latency and its blend) are computed at once per
    parameter set (:meth:`SimTwin.control_sequence`), then every set is rolled out open loop
    from the twin's reset state by ``mujoco.rollout`` on ``nthread`` threads (it releases the
    GIL). The joint angles equal :func:`simulate`'s (``lifted=True``) bit for bit; that stays
    the reference for replay and experiments.

    A parameter set with a servo's ``load_friction`` > 0 changes the model (each hinge's
    ``frictionloss``, :class:`snake_hardware.sim.twin.LoadFriction`) before every physics step,
    and one with a gear play (``backlash_rad`` > 0) the controls (the loop closed on the output
    shaft, :class:`snake_hardware.sim.twin.OutputLoop`), which one ``mujoco.rollout`` call
    cannot (nor can a call per step: it returns no solver warm start, and the next step's
    constraint solve starts from it). Such a set is stepped as :class:`SimTwin` steps it, one
    ``mj_step`` at a time after :meth:`SimTwin.before_step`, from the same reset state and with
    the same controls. With ``nthread`` above 1, two or more such sets of a batch are stepped on
    ``nthread`` worker processes, one chunk each (:mod:`snake_tools.twin.rollout_pool`; bit for bit
    the same angles): 1.19 s on one core and 0.67 s on two for eight sets with a load-dependent
    friction, 20 s of the lifted multisine (host ``vm``, load average 0.3 to 0.5; the workers
    already started). In a process that may start none (a daemonic one), ``mj_step`` releases
    the GIL and the step's Python work holds it, so sets with a gear play (two hinges a joint
    and their limits: the step is mostly ``mj_step``) are stepped on ``nthread`` threads, each
    its own model and data, and the others one after the other. Measured on 2 cores (eight
    sets, 10 s of the lifted multisine, median of three, load
    average 0.1 to 0.5): with a play and a load-dependent friction on every joint, 1.30 s on one
    thread and 0.93 s on two; with the friction alone 0.57 s on one and 0.70 s on two (the GIL's
    hand-overs cost more than the second core gives). Bit for bit the same either way. On one
    thread a load-dependent friction costs 1.5 times the CPU of a rollout by ``mujoco.rollout``
    (20 s of the lifted tsnake with a friction loss: 118 against 80 ms); a play on every joint
    1.4 times (323 against 232 ms).

    Args:
        rec: The recording.
        robot: The robot recorded.
        nthread: Threads of the rollouts.
    """

    def __init__(self, rec: Recording, robot: RobotModel, nthread: int = 1) -> None:
        import mujoco

        from snake_hardware.sim.mjcf import SimOptions

        self.rec, self.robot, self.nthread = rec, robot, max(int(nthread), 1)
        self.options = SimOptions(lifted=True)
        self.t0 = rec.start
        self._mujoco = mujoco
        dt = self.options.timestep
        # Physics step of each command and sample, rounded as run_recorded rounds them.
        self._cmd_steps = np.array([round((t - self.t0) / dt) for t in rec.t_cmd], dtype=np.int64)
        self._state_steps = np.array([round((t - self.t0) / dt) for t in rec.t_state], dtype=np.int64)
        self._nstep = int(max(self._cmd_steps.max(), self._state_steps.max()))
        # MjData per thread, per model structure (joints with gear play and the state's size).
        self._datas: dict[tuple[Any, ...], list[Any]] = {}
        self._payload: Payload | None = None   # the recording as the worker processes get it, once pickled

    def _prepare(self, params: TwinParams) -> _Prepared:
        """One parameter set's model, initial state and warm start, controls, and where its joint angles are."""
        from snake_hardware.sim.twin import SimTwin

        mj = self._mujoco
        twin = SimTwin(self.robot, None, twin_params=params, options=self.options)
        twin.reset(targets=self.rec.q_state[0])
        spec = mj.mjtState.mjSTATE_FULLPHYSICS.value
        state0 = np.empty(mj.mj_stateSize(twin.model, spec))
        mj.mj_getState(twin.model, twin.data, state0, spec)
        ctrl = twin.control_sequence(self._cmd_steps, self.rec.q_cmd, self._nstep)
        # The state starts with the time, then qpos (mjSTATE_FULLPHYSICS).
        play_idx, play_qadr = twin.joint_play_qpos_addresses
        return _Prepared(twin.model, state0, twin.data.qacc_warmstart.copy(), ctrl, 1 + twin.joint_qpos_addresses,
                         play_idx, 1 + play_qadr, twin if twin.stepwise else None)

    def _stepped(self, p: _Prepared) -> np.ndarray:
        """Joint angles of a set whose steps depend on its state: its twin stepped one physics step at a time.

        What :class:`SimTwin` does within :func:`simulate` (a load-dependent friction, a gear
        play's loop on the output: :meth:`SimTwin.before_step` before each ``mj_step``), with the
        controls of :meth:`SimTwin.control_sequence`; the state after ``s`` steps is the sample at
        step ``s``.
        """
        mj = self._mujoco
        twin = p.twin
        assert twin is not None and twin.stepwise
        m, d = twin.model, twin.data
        steps = self._state_steps
        order = np.argsort(steps, kind="stable")
        at = steps[order]
        qpos = np.empty((len(steps), m.nq))
        k = 0
        for s in range(self._nstep + 1):
            while k < len(at) and at[k] == s:
                qpos[order[k]] = d.qpos
                k += 1
            if s == self._nstep:
                break
            d.ctrl[:] = p.ctrl[s]
            twin.before_step(d)
            mj.mj_step(m, d)
        return p.angles(np.hstack([np.zeros((len(steps), 1)), qpos]))

    def joint_angles(self, params_list: list[TwinParams]) -> list[np.ndarray]:
        """The twin's joint angles at the recording's ``joint_states`` stamps, one array per parameter set.

        Parameter sets of different model structures (gear play on some joint types, none on
        others) are rolled out in separate batches.
        """
        mj = self._mujoco
        from mujoco import rollout

        from snake_hardware.sim.twin import is_stepwise

        steps = self._state_steps
        if self._nstep == 0:
            return [np.tile(p.angles(p.state0[None, :])[0], (len(steps), 1))
                    for p in map(self._prepare, params_list)]
        out: list[np.ndarray | None] = [None] * len(params_list)
        stepped = [i for i, p in enumerate(params_list) if is_stepwise(self.robot, p)]
        if len(stepped) > 1 and self.nthread > 1 and can_fork():
            # Stepped sets on worker processes, one core each (:mod:`snake_tools.twin.rollout_pool`),
            # each set's twin built there only.
            if self._payload is None:
                self._payload = Payload(self.rec, self.robot)
            for i, q in zip(stepped, stepped_on_workers(self._payload, [params_list[i] for i in stepped],
                                                        self.nthread), strict=True):
                out[i] = q
        prepared = {i: self._prepare(p) for i, p in enumerate(params_list) if out[i] is None}
        # Else sets with a play on threads (each its own model and data; mj_step, the larger share
        # of their step, releases the GIL), the others one after the other (their step's Python
        # work, holding the GIL, is the larger share: threads made them slower).
        played = [i for i, p in prepared.items() if p.twin is not None and p.play_idx.size]
        if len(played) > 1 and self.nthread > 1:
            with ThreadPoolExecutor(max_workers=self.nthread) as pool:
                for i, q in zip(played, pool.map(self._stepped, [prepared[i] for i in played]), strict=True):
                    out[i] = q
        for i, p in prepared.items():
            if p.twin is not None and out[i] is None:
                out[i] = self._stepped(p)
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, p in prepared.items():
            if p.twin is None:
                groups.setdefault(p.structure, []).append(i)
        for key, members in groups.items():
            first = prepared[members[0]]
            datas = self._datas.get(key, [])
            if len(datas) < self.nthread:
                datas = self._datas[key] = [mj.MjData(first.model) for _ in range(self.nthread)]
            # Batches whose states (every step's) stay within _ROLLOUT_BYTES, at least one per thread.
            size = max(_ROLLOUT_BYTES // (self._nstep * first.state0.size * 8), self.nthread, 1)
            for lo in range(0, len(members), size):
                batch = [prepared[i] for i in members[lo:lo + size]]
                state, _ = rollout.rollout([p.model for p in batch], datas[:self.nthread],
                                           np.stack([p.state0 for p in batch]), np.stack([p.ctrl for p in batch]),
                                           initial_warmstart=np.stack([p.warmstart for p in batch]))
                # The state after step s is the rollout's row s - 1; a sample at step 0 is the initial state.
                for b, (i, p) in enumerate(zip(members[lo:lo + size], batch, strict=True)):
                    rows = state[b][np.maximum(steps - 1, 0)]
                    rows[steps == 0] = p.state0
                    out[i] = p.angles(rows)
        return [q for q in out if q is not None]


class Residuals:
    """A recording's joint angles against the lifted twin's, in the noise model's sigmas.

    ``residuals(params_list)`` gives one (samples, joints) array per parameter set, rolled out in
    one :meth:`LiftedRollout.joint_angles` call; :meth:`head` the same on the recording's first
    samples (a fit's iterations), sharing the count of rollouts (:attr:`rollouts`).
    """

    def __init__(self, rec: Recording, robot: RobotModel, sigma: np.ndarray, workers: int,
                 _count: list[int] | None = None) -> None:
        self.roller = LiftedRollout(rec, robot, max(workers, 1))
        self.q_rec = rec.q_state
        self.sigma = sigma
        self._robot, self._workers = robot, workers
        self._count = [0] if _count is None else _count

    @property
    def rollouts(self) -> int:
        """Parameter sets rolled out so far, by this and its :meth:`head`."""
        return self._count[0]

    def head(self, head: tuple[Recording, np.ndarray] | None) -> Residuals:
        """The residuals on ``head`` (the recording's first samples and their mask), or these for ``None``."""
        if head is None:
            return self
        return Residuals(head[0], self._robot, self.sigma[head[1]], self._workers, self._count)

    def __call__(self, params_list: list[TwinParams]) -> list[np.ndarray]:
        """One (samples, joints) residual per parameter set."""
        self._count[0] += len(params_list)
        return [(q - self.q_rec) / self.sigma for q in self.roller.joint_angles(params_list)]


@dataclass(frozen=True)
class _Prepared:
    """One parameter set ready for ``mujoco.rollout`` (:meth:`LiftedRollout.joint_angles`)."""

    model: Any
    state0: np.ndarray
    warmstart: np.ndarray
    ctrl: np.ndarray
    qadr: np.ndarray       # each joint's (motor-side) angle in the state
    play_idx: np.ndarray   # joints with gear play
    play_adr: np.ndarray   # their play hinge's angle in the state
    twin: Any = None       # a twin whose steps depend on its state, stepped one step at a time (else None)

    @property
    def structure(self) -> tuple[Any, ...]:
        """What sets share one batch: the joints with play and the state's size."""
        return (self.state0.size, *self.play_idx.tolist())

    def angles(self, states: np.ndarray) -> np.ndarray:
        """Joint angles of rows of states (with play: motor side plus play, as :meth:`SimTwin.joint_positions`)."""
        from snake_hardware.sim.twin import shaft_values  # mujoco: only when fitting

        return shaft_values(states, self.qadr, self.play_idx, self.play_adr)
