"""Simulation core of the MuJoCo twin (headless, no rclpy).

:class:`SimTwin` wraps one ``mujoco.MjModel`` / ``mujoco.MjData`` built from a robot YAML
and a world file (:mod:`snake_hardware.sim.mjcf`). It takes joint position targets by
name or as an array in YAML joint order, steps the physics, and returns copies of the
state: joint positions / velocities / efforts in YAML order, simulated time, the base
(root body, which is the head) pose, the head pose and three head marker positions for
synthetic motion capture. Index arrays are computed once at construction so that the
per-step overhead is a few numpy fancy-index operations; several physics steps are run
in one C call (``mujoco.mj_step(..., nstep=n)``).

Quaternions are (w, x, y, z), positions in m, angles in rad, times in s.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import mujoco
import numpy as np

from snake_core.control import CONTROL_PERIOD_S
from snake_core.robot import JointSpec, RobotModel, load_robot
from snake_core.twin_params import TwinParams
from snake_hardware.command import ABSURD_TARGET_RAD
from snake_hardware.sim import mjcf
from snake_hardware.sim.worlds import World, load_world

_DEFAULT_CONTROL_DT = CONTROL_PERIOD_S  # s, control period of advance()
_STEP_EPS = 1e-9  # physics steps: a latency this close to a whole number of steps is that number

Controller = Callable[["SimTwin"], "Mapping[str, float] | Sequence[float] | np.ndarray | None"]


class SimTwin:
    """MuJoCo simulation of one robot in one world.

    Args:
        robot: A :class:`RobotModel`, a robot name (``tsnake``) or a YAML path.
        world: A :class:`World`, a world name (``flat``), a YAML path, or ``None`` for a
            flat plane.
        options: Solver settings (:class:`snake_hardware.sim.mjcf.SimOptions`).
        control_dt: Period at which :meth:`advance` calls its controller, s; rounded to a
            whole number of physics steps.
        twin_params: Servo and contact parameters (:mod:`snake_core.twin_params`; ``None``:
            the defaults). A servo's ``latency_s`` delays every target of its joints from
            :meth:`set_targets` to the actuator: d whole physics steps and a fraction f of one,
            over which old and new target are blended (1 - f : f), so the delay acts as a
            continuous quantity (the fit of ``snake twin identify`` needs that). A servo's
            ``load_friction`` ``l > 0`` makes its joint's dry friction ``frictionloss + l |tau|``
            (BAM's load-dependent Coulomb friction, m3; :class:`LoadFriction`), set before every
            physics step; a servo's ``backlash_rad`` > 0 puts a gear play between its motor and
            its joint, and its loop reads the joint (:class:`OutputLoop`), set before every step
            as well. With neither (:attr:`stepwise` false) the twin runs several steps per C call.

    Raises:
        RobotConfigError, WorldConfigError: A bad robot or world file (file and field named).
    """

    def __init__(
        self,
        robot: RobotModel | str | Path,
        world: World | str | Path | None = None,
        options: mjcf.SimOptions | None = None,
        control_dt: float = _DEFAULT_CONTROL_DT,
        twin_params: TwinParams | None = None,
    ) -> None:
        self.robot = robot if isinstance(robot, RobotModel) else load_robot(robot)
        self.world = world if isinstance(world, World) or world is None else load_world(world)
        self.options = options or mjcf.SimOptions()
        self.twin_params = twin_params or TwinParams()
        self.xml = mjcf.build_mjcf(self.robot, self.world, self.options, self.twin_params)
        self.model = mujoco.MjModel.from_xml_string(self.xml)
        self.data = mujoco.MjData(self.model)
        m = self.model
        if not (math.isfinite(control_dt) and control_dt > 0):
            raise ValueError(f"control_dt: must be a positive number of seconds, got {control_dt}")
        self.substeps = max(1, round(control_dt / m.opt.timestep))
        names = self.robot.joint_names
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in names]
        self._qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self._vadr = np.array([m.jnt_dofadr[j] for j in jids])
        self._act = np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in names])
        self._index = {n: i for i, n in enumerate(names)}
        # Joints with gear play (a servo's backlash_rad > 0): the joint's angle is the motor-side
        # hinge's plus the link-side play hinge's (mjcf, "Gear play").
        play_ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n + mjcf.PLAY_SUFFIX) for n in names]
        plays = [(i, p) for i, p in enumerate(play_ids) if p >= 0]
        self._play_idx = np.array([i for i, _ in plays], dtype=np.int64)
        self._play_qadr = np.array([m.jnt_qposadr[p] for _, p in plays], dtype=np.int64)
        self._play_vadr = np.array([m.jnt_dofadr[p] for _, p in plays], dtype=np.int64)
        free = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, mjcf.FREE_JOINT)
        self._free_q = int(m.jnt_qposadr[free]) if free >= 0 else None  # None: lifted, the head held
        self._head = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, mjcf.HEAD_BODY)
        self._markers = np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, s) for s in mjcf.HEAD_MARKER_SITES])
        self._targets = np.zeros(len(names))
        self._stale = False
        # Torque per joint (set_torque): with it off the actuator's gain and bias are 0 and the
        # motor-side hinge keeps only its limp damping; the values to restore are kept here.
        self._gain_on = m.actuator_gainprm[self._act, 0].copy()
        self._bias_on = m.actuator_biasprm[self._act, 1:3].copy()
        self._damping_on = m.dof_damping[self._vadr].copy()
        self._damping_off = np.array([self.twin_params.servo_model(j).limp_damping for j in self.robot.joints])
        self._torque = np.ones(len(names), dtype=bool)
        # Load-dependent dry friction (servo load_friction > 0): set before every physics step.
        load = np.array([self.twin_params.servo_model(j).load_friction for j in self.robot.joints])
        tendons = np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_TENDON, n + mjcf.OUTPUT_SUFFIX) for n in names])
        self.load_friction = LoadFriction(m, self._act, self._vadr, load, tendons) if np.any(load > 0) else None
        # Gear play: the position loop closed on the output shaft (the play hinge's angle added).
        self.output_loop = (OutputLoop(m, self._act[self._play_idx], self._play_qadr, self._play_vadr,
                                       [self.robot.joints[i] for i in self._play_idx])
                            if self._play_idx.size else None)
        # Command latency per joint, physics steps (d whole steps + a fraction f); targets wait in
        # _pending until they are due. A fraction f blends old and new target over step d (the
        # mean of a change f of a step later), then the new target holds.
        steps = np.array([self.twin_params.servo_model(j).latency_s / m.opt.timestep for j in self.robot.joints])
        whole = np.floor(steps + _STEP_EPS)
        frac = np.where(steps - whole < _STEP_EPS, 0.0, steps - whole)
        self._delay = whole + frac
        self._delay_groups = [(int(d), float(f), np.flatnonzero((whole == d) & (frac == f)))
                              for d, f in sorted(set(zip(whole.tolist(), frac.tolist(), strict=True)))
                              if d > 0 or f > 0]
        self._now_idx = np.flatnonzero(self._delay == 0)
        self._pending: list[tuple[int, np.ndarray, np.ndarray]] = []  # (due step, joint indices, targets)
        self._steps = 0  # physics steps since reset
        self._ctrl_log: list[tuple[int, np.ndarray]] | None = None  # controls_only(): (steps, ctrl) runs
        self.reset()

    # --- commands ----------------------------------------------------------------------
    @property
    def joint_names(self) -> list[str]:
        """Actuated joint names, YAML order."""
        return self.robot.joint_names

    def set_targets(self, targets: Mapping[str, float] | Sequence[float] | np.ndarray) -> None:
        """Set joint position targets, rad.

        Args:
            targets: ``{joint name: rad}`` (joints not named keep their target), or one
                value per joint in YAML order. Limited joints are clamped to their range
                by the actuator's control range; continuous (twist) joints take any angle.

        Raises:
            KeyError: An unknown joint name.
            ValueError: Wrong array length, or a non-finite or absurd value (magnitude
                above :data:`snake_hardware.command.ABSURD_TARGET_RAD`, which MuJoCo
                would turn into a bad-control reset of every joint). Nothing is applied
                when anything is refused.
        """
        before = self._targets.copy() if self._delay_groups else self._targets
        if isinstance(targets, Mapping):
            updates: dict[int, float] = {}
            for name, value in targets.items():
                if name not in self._index:
                    raise KeyError(f"no joint named {name!r} in {self.robot.name}")
                v = float(value)
                if not math.isfinite(v) or abs(v) > ABSURD_TARGET_RAD:
                    raise ValueError(f"target of {name}: not finite or absurd ({value})")
                updates[self._index[name]] = v
            for i, v in updates.items():
                self._targets[i] = v
        else:
            arr = np.asarray(targets, dtype=float)
            if arr.shape != self._targets.shape:
                raise ValueError(f"targets: need {self._targets.size} values (YAML joint order), got shape {arr.shape}")
            if not np.abs(arr).max() <= ABSURD_TARGET_RAD:  # NaN fails the comparison as well
                raise ValueError(f"targets: not all finite, or beyond {ABSURD_TARGET_RAD:g} rad")
            self._targets[:] = arr
        if not self._delay_groups:
            self.data.ctrl[self._act] = self._targets
            return
        self.data.ctrl[self._act[self._now_idx]] = self._targets[self._now_idx]
        for delay, frac, idx in self._delay_groups:
            if frac > 0:
                blend = (1.0 - frac) * self._targets[idx] + frac * before[idx]
                self._pending.append((self._steps + delay, idx, blend))
            self._pending.append((self._steps + delay + (frac > 0), idx, self._targets[idx].copy()))

    def control_sequence(self, steps: np.ndarray, targets: np.ndarray, nstep: int) -> np.ndarray:
        """The controls of the next ``nstep`` physics steps when ``targets[k]`` is set at step ``steps[k]``.

        What :meth:`controls_only` records when, from a reset, :meth:`step` runs to each
        ``steps[k]`` (in order of step; within one step in the given order) and calls
        :meth:`set_targets` with ``targets[k]``, computed at once: per group of joints of one
        latency (d whole steps, a fraction f), every target is due at step ``steps[k] + d`` (with
        f > 0: blended ``(1 - f) new + f old`` there, the new target one step later), and the
        control of a step is the last one due at or before it.

        Args:
            steps: Physics step of each target, from the reset (>= 0).
            targets: One row per step, YAML joint order, rad.
            nstep: Physics steps to return.

        Returns:
            ``data.ctrl`` before each physics step, shape (nstep, nu).

        Raises:
            ValueError: As :meth:`set_targets`, or the twin has stepped since its reset.
        """
        if self._steps or self._pending:
            raise ValueError("control_sequence: starts from a reset twin")
        arr = np.asarray(targets, dtype=float)
        if arr.ndim != 2 or arr.shape[1] != self._targets.size:
            raise ValueError(f"targets: need {self._targets.size} values per row (YAML joint order), got {arr.shape}")
        ctrl = np.repeat(self.data.ctrl[None, :], nstep, axis=0)
        if not len(arr):
            return ctrl
        if not np.abs(arr).max() <= ABSURD_TARGET_RAD:  # NaN fails the comparison as well
            raise ValueError(f"targets: not all finite, or beyond {ABSURD_TARGET_RAD:g} rad")
        order = np.argsort(np.asarray(steps), kind="stable")
        at, arr = np.asarray(steps, dtype=np.int64)[order], arr[order]
        before = np.vstack([self._targets[None, :], arr[:-1]])  # the targets each one replaces
        rows = np.arange(nstep)
        groups = [(0, 0.0, self._now_idx), *self._delay_groups]
        for delay, frac, idx in groups:
            if not len(idx):
                continue
            if frac > 0:
                blend = (1.0 - frac) * arr[:, idx] + frac * before[:, idx]
                due = np.concatenate([at + delay, at + delay + 1])
                rank = np.concatenate([2 * np.arange(len(at)), 2 * np.arange(len(at)) + 1])  # set order
                values = np.vstack([blend, arr[:, idx]])
            else:
                due, rank, values = at + delay, np.arange(len(at)), arr[:, idx]
            sort = np.lexsort((rank, due))
            last = np.searchsorted(due[sort], rows, side="right") - 1
            hit = last >= 0
            ctrl[np.ix_(rows[hit], self._act[idx])] = values[sort][last[hit]]
        return ctrl

    def set_torque(self, enabled: bool, names: Sequence[str] | None = None) -> None:
        """Switch the servos' torque on or off, as Torque Enable does on the robot.

        Off: the motor's terminals are open, so the joint is limp: no actuator force (MuJoCo's
        position actuator with gain and bias 0) and no back-EMF (the hinge's damping drops to
        :attr:`snake_core.twin_params.ServoModel.limp_damping`); its armature, dry friction and
        viscous friction remain, and gravity or the ground move it. Targets set meanwhile are
        kept. On: the gains and damping come back and the target becomes the present position
        at once, whatever the latency (the X-series firmware sets Goal Position to Present
        Position when torque comes on: no jump). The switch is the servo's, not the episode's:
        :meth:`reset` leaves it as it is.

        Args:
            enabled: Torque on (True) or off.
            names: Joints to switch (``None``: all).

        Raises:
            KeyError: An unknown joint name (nothing switched).
        """
        if names is None:
            idx = np.arange(len(self._torque))
        else:
            unknown = [n for n in names if n not in self._index]
            if unknown:
                raise KeyError(f"no joint named {unknown[0]!r} in {self.robot.name}")
            idx = np.array([self._index[n] for n in names], dtype=np.int64)
        if not idx.size:
            return
        m, act = self.model, self._act[idx]
        if enabled:
            turning_on = idx[~self._torque[idx]]
            m.actuator_gainprm[act, 0] = self._gain_on[idx]
            m.actuator_biasprm[act, 1:3] = self._bias_on[idx]
            m.dof_damping[self._vadr[idx]] = self._damping_on[idx]
            if turning_on.size:
                present = self.joint_positions()[turning_on]
                self._targets[turning_on] = present
                self.data.ctrl[self._act[turning_on]] = present
                self._pending = [(due, j[~np.isin(j, turning_on)], v[~np.isin(j, turning_on)])
                                 for due, j, v in self._pending]
                self._pending = [p for p in self._pending if p[1].size]
        else:
            m.actuator_gainprm[act, 0] = 0.0
            m.actuator_biasprm[act, 1:3] = 0.0
            m.dof_damping[self._vadr[idx]] = self._damping_off[idx]
        self._torque[idx] = enabled
        if self.load_friction is not None:
            self.load_friction.refresh()
        if self.output_loop is not None:
            self.output_loop.refresh()

    @property
    def torque_enabled(self) -> np.ndarray:
        """Whether each joint's servo holds torque, YAML order (a copy)."""
        return self._torque.copy()

    @property
    def latency_steps(self) -> np.ndarray:
        """Command latency of each joint, physics steps, possibly fractional (YAML order, a copy)."""
        return self._delay.copy()

    def _run(self, n: int) -> None:
        """``n`` physics steps, applying the delayed targets at the steps they are due."""
        if not self._pending:
            self._physics(n)
            self._steps += n
            return
        while n > 0:
            due = [p for p in self._pending if p[0] <= self._steps]
            if due:
                for _, idx, values in sorted(due, key=lambda p: p[0]):
                    self.data.ctrl[self._act[idx]] = values
                self._pending = [p for p in self._pending if p[0] > self._steps]
            k = min([n] + [p[0] - self._steps for p in self._pending])
            self._physics(k)
            self._steps += k
            n -= k

    def _physics(self, k: int) -> None:
        """``k`` physics steps with the controls held (recorded instead within :meth:`controls_only`)."""
        if self._ctrl_log is not None:
            self._ctrl_log.append((k, self.data.ctrl.copy()))
        elif not self.stepwise:
            mujoco.mj_step(self.model, self.data, nstep=k)
        else:
            held = self.data.ctrl.copy()   # the targets; an output loop shifts them each step
            for _ in range(k):
                self.data.ctrl[:] = held
                self.before_step(self.data)
                mujoco.mj_step(self.model, self.data)
            self.data.ctrl[:] = held

    @property
    def stepwise(self) -> bool:
        """Whether a physics step needs :meth:`before_step` (a load-dependent friction or a gear play).

        Such a twin's controls depend on its state: :meth:`control_sequence` and
        :meth:`controls_only` give the targets, not what reaches MuJoCo, and a rollout of them
        (``mujoco.rollout``) is not this twin's; step it, or step its model with
        :meth:`before_step` before each ``mj_step``.
        """
        return self.load_friction is not None or self.output_loop is not None

    def before_step(self, data: mujoco.MjData) -> None:
        """Set what the next physics step of ``data`` (of this twin's model) takes from its state.

        ``data.ctrl`` holds the targets: the joints with gear play get them shifted by the play
        (:class:`OutputLoop`), then each hinge its load-dependent friction (:class:`LoadFriction`,
        from the shifted controls: the force the actuator will apply).
        """
        if self.output_loop is not None:
            self.output_loop.apply(data)
        if self.load_friction is not None:
            self.load_friction.apply(data)

    @contextlib.contextmanager
    def controls_only(self) -> Iterator[Callable[[], np.ndarray]]:
        """Within: :meth:`step` and :meth:`advance` record the controls instead of stepping the physics.

        For an open-loop rollout (``mujoco.rollout``) of a command sequence that does not depend
        on the state: the commands go through :meth:`set_targets` (its checks, the per-joint
        latency and its blend) as they would when stepping, and ``data.ctrl`` before each
        physics step is recorded; the state (``qpos``, ``qvel``, time) is left as it is.
        Reset the twin before stepping it for real.

        Yields:
            A function returning the controls recorded so far, one row of ``data.ctrl`` per
            physics step, shape (steps, nu).
        """
        log: list[tuple[int, np.ndarray]] = []
        self._ctrl_log = log

        def controls() -> np.ndarray:
            if not log:
                return np.zeros((0, self.model.nu))
            return np.repeat(np.stack([c for _, c in log]), [k for k, _ in log], axis=0)

        try:
            yield controls
        finally:
            self._ctrl_log = None

    @property
    def targets(self) -> np.ndarray:
        """Current joint position targets, rad, YAML order (a copy)."""
        return self._targets.copy()

    # --- stepping ------------------------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps (of ``model.opt.timestep`` s) with the targets held."""
        if n > 0:
            self._run(int(n))
            self._stale = True

    def advance(self, duration: float, controller: Controller | None = None) -> None:
        """Advance by ``duration`` s, in control periods of ``substeps`` physics steps.

        Args:
            duration: Simulated seconds; rounded to whole physics steps.
            controller: Called as ``controller(twin)`` at the start of every control
                period; a non-``None`` return value is passed to :meth:`set_targets`.
        """
        remaining = round(duration / self.model.opt.timestep)
        while remaining > 0:
            if controller is not None:
                targets = controller(self)
                if targets is not None:
                    self.set_targets(targets)
            n = min(self.substeps, remaining)
            self._run(n)
            self._stale = True
            remaining -= n

    def reset(
        self,
        seed: int | None = None,
        targets: Sequence[float] | np.ndarray | None = None,
        pose: tuple[float, float, float] | None = None,
    ) -> None:
        """Put the robot at the world's spawn pose, at rest, time 0.

        Args:
            seed: Seed of the spawn jitter (``spawn.xy_jitter`` / ``spawn.yaw_jitter`` of
                the world file); without jitter the reset is deterministic whatever the seed.
            targets: Initial joint angles and targets, rad, YAML order (default zeros, a
                straight body; the spawn height is computed for the straight body).
            pose: ``(x m, y m, yaw rad)`` of the head frame instead of the world's spawn.
        """
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        spawn = self.world.spawn if self.world is not None else None
        x, y, yaw = (spawn.x, spawn.y, spawn.yaw) if spawn else (0.0, 0.0, 0.0)
        if pose is not None:
            x, y, yaw = (float(v) for v in pose)
        if spawn is not None and (spawn.xy_jitter > 0 or spawn.yaw_jitter > 0):
            rng = np.random.default_rng(seed)
            dx, dy = rng.normal(0.0, spawn.xy_jitter, 2)
            x, y, yaw = x + dx, y + dy, yaw + rng.normal(0.0, spawn.yaw_jitter)
        pos, quat = mjcf.spawn_pose(self.robot, self.world, x, y, yaw)
        if self._free_q is not None:  # a lifted robot's head stays where the model holds it
            d.qpos[self._free_q : self._free_q + 3] = pos
            d.qpos[self._free_q + 3 : self._free_q + 7] = quat
        q0 = np.zeros(len(self._qadr)) if targets is None else np.asarray(targets, dtype=float)
        d.qpos[self._qadr] = q0
        self.set_targets(q0)
        self._pending.clear()  # the initial targets act at once, whatever the latency
        self._steps = 0
        d.ctrl[self._act] = self._targets
        mujoco.mj_forward(m, d)
        self._stale = False

    def _kinematics(self) -> None:
        """Bring body / site poses up to the current qpos.

        ``mj_step`` leaves ``xpos`` / ``site_xpos`` at the start of the last step (one
        step behind ``qpos``); recompute them, only when a pose accessor asks.
        """
        if self._stale:
            mujoco.mj_kinematics(self.model, self.data)
            mujoco.mj_comPos(self.model, self.data)
            self._stale = False

    # --- state (copies) ------------------------------------------------------------------
    @property
    def time(self) -> float:
        """Simulated time, s."""
        return float(self.data.time)

    @property
    def timestep(self) -> float:
        """Physics step, s."""
        return float(self.model.opt.timestep)

    @property
    def joint_qpos_addresses(self) -> np.ndarray:
        """Index of each actuated joint's (motor-side) angle in ``data.qpos`` (and in a state's qpos part), YAML order.

        A joint with gear play adds its play hinge's angle (:attr:`joint_play_qpos_addresses`). A copy.
        """
        return self._qadr.copy()

    @property
    def joint_play_qpos_addresses(self) -> tuple[np.ndarray, np.ndarray]:
        """Joints with gear play: their indices (YAML order) and their play hinge's angle's index in ``data.qpos``.

        Empty arrays when no servo has a ``backlash_rad``. Copies.
        """
        return self._play_idx.copy(), self._play_qadr.copy()

    def joint_positions(self) -> np.ndarray:
        """Joint angles, rad, YAML order (twist joints unwrapped, not modulo 2 pi).

        With gear play: the output shaft's angle, the motor-side hinge's plus the play's.
        """
        return shaft_values(self.data.qpos, self._qadr, self._play_idx, self._play_qadr)

    def joint_velocities(self) -> np.ndarray:
        """Joint velocities, rad/s, YAML order (with gear play: the output shaft's)."""
        return shaft_values(self.data.qvel, self._vadr, self._play_idx, self._play_vadr)

    def joint_efforts(self) -> np.ndarray:
        """Servo torques, N m, YAML order (the actuator force, within +-effort)."""
        return self.data.actuator_force[self._act]

    def base_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Position (m) and quaternion (w, x, y, z) of the root body from its free joint.

        The root body is the head (T-Snake head segment, wheeled snake link 1); its
        origin is the head tip, s = 0. A lifted robot has no free joint: the head's pose is
        the one the model holds it at.
        """
        if self._free_q is None:
            return self.head_pose()
        q = self.data.qpos[self._free_q : self._free_q + 7]
        return q[:3].copy(), q[3:].copy()

    def head_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Position (m) and quaternion (w, x, y, z) of the head rigid body (the frame mocap tracks).

        Computed by forward kinematics (``data.xpos`` / ``data.xquat``), so it agrees
        with :meth:`base_pose` after any step.
        """
        self._kinematics()
        return self.data.xpos[self._head].copy(), self.data.xquat[self._head].copy()

    def head_markers(self) -> np.ndarray:
        """World positions of the three head markers, m, shape (3, 3)."""
        self._kinematics()
        return self.data.site_xpos[self._markers]

    def site_position(self, name: str) -> np.ndarray:
        """World position of a named site (e.g. ``head_tip``, ``tail_tip``), m."""
        self._kinematics()
        sid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, name)
        if sid < 0:
            raise KeyError(f"no site named {name!r}")
        return self.data.site_xpos[sid].copy()

    def centre_of_mass(self) -> np.ndarray:
        """Centre of mass of the robot, m."""
        self._kinematics()
        return self.data.subtree_com[self._head].copy()

    def total_mass(self) -> float:
        """Mass of the robot, kg."""
        return float(self.model.body_subtreemass[self._head])


_WAVE_FREQUENCY = 2.0  # rad/s, temporal frequency of the exercise wave
_WAVE_NUMBER = 5.0  # rad/m, spatial frequency of the exercise wave along the body
_WAVE_AMPLITUDE = 0.5  # rad, bending amplitude of the exercise wave
_WAVE_TWIST_RATE = 1.0  # rad/s, constant twist rate of the exercise wave


class LoadFriction:
    """Dry friction that rises with the actuator's torque, set in the model's ``frictionloss`` before each step.

    BAM's load-dependent Coulomb friction (model m3; Duclusaud & Passault, "Better Actuator
    Models"; Eq. (3) of :mod:`snake_core.servo.actuator` with its ``l``): the hinge of each
    actuated joint gets, before every physics step, the dry friction (N m)

        f = c + l |tau|,   tau = clamp(g clamp(u, ctrlrange) + b0 + b1 q + b2 qdot, forcerange)

    ``c`` the hinge's ``frictionloss`` as built (of a joint with gear play: its output tendon's,
    where the twin puts its dry friction; :mod:`snake_hardware.sim.mjcf`, "Gear play", and the
    friction ``f`` is set there), ``l`` the servo's ``load_friction``, ``tau`` the
    force MuJoCo's position actuator applies at the step's state (gain ``g = kp``, bias
    ``b1 = -kp``, ``b2 = -kv``; gain and bias 0 with torque off, so the friction falls to ``c``),
    read from the model's actuator arrays as they stand (:meth:`SimTwin.set_torque` changes them).

    Args:
        model: The twin's model (its ``dof_frictionloss`` and ``tendon_frictionloss`` as built are ``c``).
        act: Actuator of each joint.
        vadr: Each joint's (motor-side) hinge's dof address (the actuator's joint).
        load: ``l`` of each joint, dimensionless.
        tendon: Each joint's output tendon, -1 for a joint without gear play (``None``: none has one).
    """

    def __init__(self, model: mujoco.MjModel, act: np.ndarray, vadr: np.ndarray, load: np.ndarray,
                 tendon: np.ndarray | None = None) -> None:
        self.model = model
        self.act, self.vadr = np.asarray(act), np.asarray(vadr)
        self.load = np.asarray(load, dtype=float)
        tendon = np.full(len(self.act), -1) if tendon is None else np.asarray(tendon)
        self._on_hinge = np.flatnonzero(tendon < 0)      # the dry friction on the hinge ...
        self._on_tendon = np.flatnonzero(tendon >= 0)    # ... or on the output tendon
        self._tendon = tendon[self._on_tendon]
        self.coulomb = model.dof_frictionloss[self.vadr].copy()
        self.coulomb[self._on_tendon] = model.tendon_frictionloss[self._tendon]
        self.qadr = np.asarray(model.jnt_qposadr[model.actuator_trnid[self.act, 0]])
        ctrl_limited = model.actuator_ctrllimited[self.act].astype(bool)
        self.ctrl_lo = np.where(ctrl_limited, model.actuator_ctrlrange[self.act, 0], -np.inf)
        self.ctrl_hi = np.where(ctrl_limited, model.actuator_ctrlrange[self.act, 1], np.inf)
        force_limited = model.actuator_forcelimited[self.act].astype(bool)
        self.force_lo = np.where(force_limited, model.actuator_forcerange[self.act, 0], -np.inf)
        self.force_hi = np.where(force_limited, model.actuator_forcerange[self.act, 1], np.inf)
        self._frictionloss = model.dof_frictionloss   # a view: written in place
        self._act_at, self._q_at, self._v_at = _at(self.act), _at(self.qadr), _at(self.vadr)
        self._hinge_v_at = self._v_at if not self._on_tendon.size else _at(self.vadr[self._on_hinge])
        self.refresh()

    def refresh(self) -> None:
        """Read the actuators' gain and bias again (after :meth:`SimTwin.set_torque` changed them)."""
        m, act = self.model, self.act
        self._gain = m.actuator_gainprm[act, 0].copy()
        self._bias = [m.actuator_biasprm[act, k].copy() for k in range(3)]

    def torque(self, data: mujoco.MjData) -> np.ndarray:
        """The actuators' torque on their joints at ``data``'s state and controls, N m (the docstring's ``tau``)."""
        # np.minimum / np.maximum: the bare ufuncs (np.clip's wrapper costs more, every physics step)
        u = np.minimum(np.maximum(data.ctrl[self._act_at], self.ctrl_lo), self.ctrl_hi)
        b0, b1, b2 = self._bias
        force = self._gain * u + (b0 + b1 * data.qpos[self._q_at] + b2 * data.qvel[self._v_at])
        return np.minimum(np.maximum(force, self.force_lo), self.force_hi)

    def apply(self, data: mujoco.MjData) -> None:
        """Set each hinge's (or output tendon's) ``frictionloss`` to ``c + l |tau|`` for the next physics step."""
        friction = self.coulomb + self.load * np.abs(self.torque(data))
        if not self._on_tendon.size:
            self._frictionloss[self._v_at] = friction
            return
        self._frictionloss[self._hinge_v_at] = friction[self._on_hinge]
        self.model.tendon_frictionloss[self._tendon] = friction[self._on_tendon]


class OutputLoop:
    """The position loop of the joints with gear play, closed on the output shaft's angle.

    An X-series servo reads its angle on the output shaft (ROBOTIS e-Manual, X-series
    "Specifications": a 12-bit contactless absolute encoder, 4096 pulses per turn of the output,
    behind gear ratios of 150 to 350) and its firmware's PID acts on that reading, so the gear
    play lies inside the loop, between the motor that the loop drives and the angle that it
    holds. In the twin the motor-side hinge ``q_m`` carries the actuator and the play hinge
    ``q_p`` the link (:mod:`snake_hardware.sim.mjcf`, "Gear play"); MuJoCo's position actuator
    acts on its own hinge, ``kp (u - q_m) - kv qdot_m``. Before each step the control of such a joint becomes

        u' = clamp(u, lower, upper) - q_p - (kv / kp) qdot_p

    so that the actuator applies ``kp (u - (q_m + q_p)) - kv (qdot_m + qdot_p)``: its P and D
    terms on the output angle, its force on the motor. The gain and bias are read from the
    model's actuator arrays as they stand (torque off: both 0, the shift moot).

    Args:
        model: The twin's model.
        act: Actuator of each joint with play.
        play_qadr: Their play hinge's ``qpos`` address.
        play_vadr: Their play hinge's dof address.
        joints: Their joint specs (the range the target is clamped to; a continuous joint none).
    """

    def __init__(self, model: mujoco.MjModel, act: np.ndarray, play_qadr: np.ndarray, play_vadr: np.ndarray,
                 joints: Sequence[JointSpec]) -> None:
        self.model = model
        self.act = np.asarray(act)
        self._q_at, self._v_at, self._act_at = _at(np.asarray(play_qadr)), _at(np.asarray(play_vadr)), _at(self.act)
        self.lower = np.array([-np.inf if j.continuous else j.lower for j in joints])
        self.upper = np.array([np.inf if j.continuous else j.upper for j in joints])
        self.refresh()

    def refresh(self) -> None:
        """Read the actuators' gains again (after :meth:`SimTwin.set_torque` changed them)."""
        kp = self.model.actuator_gainprm[self.act, 0]
        kv = -self.model.actuator_biasprm[self.act, 2]
        self._kv_over_kp = np.divide(kv, kp, out=np.zeros(len(self.act)), where=kp > 0)

    def apply(self, data: mujoco.MjData) -> None:
        """Shift ``data.ctrl`` (the targets) of each joint with play by its play: the loop on the output."""
        u = np.minimum(np.maximum(data.ctrl[self._act_at], self.lower), self.upper)
        data.ctrl[self._act_at] = u - data.qpos[self._q_at] - self._kv_over_kp * data.qvel[self._v_at]


def _at(index: np.ndarray) -> slice | np.ndarray:
    """``index`` as a slice where it is a run of consecutive addresses (cheaper to index with), else itself."""
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return slice(int(index[0]), int(index[0]) + index.size)
    return index


def shaft_values(values: np.ndarray, adr: np.ndarray, play_idx: np.ndarray, play_adr: np.ndarray) -> np.ndarray:
    """Each joint's output-shaft value from a position or velocity vector, or from rows of them (a new array).

    The motor-side hinge's value at ``adr`` (one per joint, YAML order), plus, for the joints
    ``play_idx`` with gear play, their play hinge's value at ``play_adr``: the output shaft
    turns with both (see :mod:`snake_hardware.sim.mjcf`).
    """
    q = values[..., adr]
    if play_idx.size:
        q[..., play_idx] += values[..., play_adr]
    return q


def is_stepwise(robot: RobotModel, params: TwinParams) -> bool:
    """Whether the twin of ``robot`` with ``params`` is :attr:`SimTwin.stepwise`, without building it.

    A servo with a load-dependent friction gets a :class:`LoadFriction`; one with a gear play
    gets a play hinge (:mod:`snake_hardware.sim.mjcf`) and with it an :class:`OutputLoop`.
    """
    models = [params.servo_model(j) for j in robot.joints]
    return any(m.load_friction > 0 or m.backlash_rad > 0 for m in models)


def exercise_wave(twin: SimTwin) -> Controller:
    """A travelling bending wave with steady twisting, to exercise the model (not a gait).

    Every bending joint follows ``A sin(omega t - k s_i + phase)`` (dorsal and lateral a
    quarter period apart), twist joints turn at a constant rate: the body keeps moving and
    its ground contacts keep changing, which is what a real-time-factor measurement needs.

    Returns:
        A controller for :meth:`SimTwin.advance`.
    """
    robot = twin.robot
    s = robot.joint_arc_positions() if robot.kind == "tsnake" else np.cumsum(robot.link_lengths)[:-1]
    types = np.array([j.type for j in robot.joints])
    phase = np.where(types == "lateral", math.pi / 2, 0.0)
    bend = (types != "twist").astype(float)
    twist = (types == "twist").astype(float)

    def controller(tw: SimTwin) -> np.ndarray:
        t = tw.time
        return bend * _WAVE_AMPLITUDE * np.sin(_WAVE_FREQUENCY * t - _WAVE_NUMBER * s + phase) + twist * (
            _WAVE_TWIST_RATE * t
        )

    return controller


def measure_realtime_factor(twin: SimTwin, duration: float, controller: Controller | None = None) -> float:
    """Simulated seconds per wall-clock second while advancing ``duration`` s.

    Args:
        twin: The simulation (advanced from its current state).
        duration: Simulated time to run, s.
        controller: Passed to :meth:`SimTwin.advance` (e.g. :func:`exercise_wave`).

    Returns:
        The real-time factor (dimensionless).
    """
    start = time.perf_counter()
    twin.advance(duration, controller)
    return duration / max(time.perf_counter() - start, 1e-9)
