"""Fit a servo model to bench logs of one servo on a pendulum (:mod:`snake_core.servo.pendulum`).

The fitted variables are the servo's physical constants: the motor's torque constant
``k_t`` and resistance ``R`` (Eq. (2) of :mod:`snake_core.servo.actuator`), the armature,
the firmware's P-gain divisor (Eq. (1): the e-Manual's 128 is not what every model does), the
H-bridge's slow-decay fraction ``s`` (Eq. (2): how much of the PWM off-time the back-EMF brakes;
started at 1, the averaged motor), the drive's current limit ``I_max`` (Eq. (2b): started at the
top of its range, no limit), the friction of the chosen structure (Eq. (3)) and the rig's
mounting offset ``q_0``. Each is bounded by :data:`RANGES` (the motor and the divisor by
:data:`RELATIVE_RANGES` of the servo model's datasheet values, the current limit by
:data:`CURRENT_RANGE` of the datasheet's stall current); the positive scale-like ones are fitted as logarithms.

Objective: the mean absolute error of the rollout's angle over every sample of every
training log (what BAM scores by), closed loop from the first sample
(:func:`snake_core.servo.pendulum.rollout`), plus a log-normal prior that keeps the motor
constants and the gain divisor near the servo model's datasheet values: ``PRIOR_WEIGHT_RAD
sum_k (ln(p_k / p_k,datasheet) / PRIOR_LOG_SPREAD)^2`` (a maximum a posteriori estimate). On a
pendulum that stalls most of the time ``k_t`` and ``R`` trade against each other along a
valley that the logs barely bound; the prior picks the point of the valley nearest the
datasheet. Its weight (:data:`PRIOR_WEIGHT_RAD`) was chosen on the eight XL330 logs of
``data/bench_logs/xl330/`` (docs/twin_identification.md gives the figures with and without
it). The global stage (:func:`fit_structure`) is differential evolution, its whole
population rolled out in one batch per generation; the local stage is
``scipy.optimize.least_squares`` with the ``soft_l1`` loss at :data:`ERROR_SCALE_RAD` (close to
an absolute error, smooth for the trust region), its Jacobian's columns rolled out in one batch.

Structure (:func:`choose`): each friction structure of
:data:`snake_core.servo.model.FRICTION_STRUCTURES` is fitted; with :data:`MIN_CV_LOGS` logs
or more, the one of the least leave-one-log-out error wins (:func:`cross_validate`), with
fewer the one of the least Bayesian information criterion of a Laplace likelihood
(``2 n ln MAE + k ln n``), ``n`` being the effective number of samples of the residual: its
count over the residual's integrated autocorrelation time (:func:`effective_samples`), so
that a rollout's smooth, correlated error does not buy parameters. The structures' fits and
the held-out fits are independent tasks, run on one process or several (:func:`fit`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.optimize import differential_evolution, least_squares

from snake_core.servo.model import FRICTION_STRUCTURES, Friction, Motor, ServoSpec
from snake_core.servo.pendulum import PARAMETERS, Batch, batch, mean_absolute_error, rollout

MIN_CV_LOGS = 3
"""Logs needed to choose a structure by leave-one-log-out cross-validation."""
PRIOR_LOG_SPREAD = 0.3
"""Spread of the datasheet prior on the motor constants and the gain divisor, in natural log (about 30 %)."""
PRIOR_WEIGHT_RAD = 0.003
"""Mean absolute error, rad, that a value one :data:`PRIOR_LOG_SPREAD` from the datasheet's costs."""
_PRIOR = ("torque_constant", "resistance", "armature", "p_gain_divisor")
ERROR_SCALE_RAD = 0.005
"""Angle error below which the loss is quadratic, rad (the ``soft_l1`` loss's ``f_scale``)."""
RELATIVE_RANGES: dict[str, tuple[float, float]] = {
    "torque_constant": (0.25, 4.0), "resistance": (0.25, 4.0), "armature": (0.1, 10.0), "p_gain_divisor": (0.25, 4.0),
}
"""Range of the motor's constants and the gain divisor as factors of the servo model's datasheet values."""
CURRENT_RANGE = (0.25, 4.0)
"""Range of the drive's current limit as factors of the datasheet's stall current (``V_nom / R``)."""
RANGES: dict[str, tuple[float, float]] = {
    "coulomb": (0.0, 0.5), "viscous": (0.0, 1.0), "load": (0.0, 0.8),
    "stribeck_torque": (0.0, 0.5), "stribeck_load": (0.0, 1.0), "stribeck_velocity": (0.01, 5.0),
    "offset": (-0.15, 0.15), "slow_decay": (0.0, 1.0),
}
"""Physical range of the friction and the rig's offset (units of :data:`snake_core.servo.pendulum.PARAMETERS`)."""
_LOG = frozenset({"torque_constant", "resistance", "armature", "p_gain_divisor", "max_current", "stribeck_velocity"})
_COMMON = ("torque_constant", "resistance", "armature", "p_gain_divisor", "slow_decay", "max_current", "coulomb",
           "viscous", "offset")
FREE: dict[str, tuple[str, ...]] = {
    "coulomb_viscous": _COMMON,
    "stribeck": (*_COMMON, "stribeck_torque", "stribeck_velocity"),
    "load_dependent": (*_COMMON, "load"),
    "load_stribeck": (*_COMMON, "load", "stribeck_torque", "stribeck_load", "stribeck_velocity"),
}
"""The variables each friction structure fits."""
_START_FRICTION = {"coulomb": 0.01, "viscous": 0.005, "load": 0.1, "stribeck_torque": 0.01, "stribeck_load": 0.05,
                   "stribeck_velocity": 0.3, "offset": 0.0}
_GENERATIONS = 600   # differential evolution's generations at most
_POPULATION = 15     # members per variable
_DE_TOL = 1e-6       # relative spread of the population's costs that ends the global stage
_DIVERGED = 10.0     # rad: the cost of a parameter set whose rollout diverged
_REPORT_EVERY = 50   # generations between progress lines
_CV_GENERATIONS = 150  # generations of a held-out fit, started around the fit on every log
_RESTART_SPREAD = 0.05  # spread of that start's population, as a fraction of each variable's range
_DIFF_STEP = 1e-4    # relative step of the forward differences
_MAX_NFEV = 60       # trust-region evaluations of the local stage
_FTOL = 1e-4


@dataclass(frozen=True)
class StructureFit:
    """One friction structure fitted.

    Attributes:
        structure: The friction structure.
        values: Every rollout parameter at the optimum.
        train_mae_rad: Mean over the training logs of each log's mean absolute error, rad.
        per_log_mae_rad: Each training log's mean absolute error, rad.
        bic: Information criterion (lower is better).
        effective_samples: The ``n`` of the criterion.
        seconds: Wall time of the fit, s.
        cv_mae_rad: Leave-one-log-out mean absolute error, rad (NaN: not cross-validated).
        cv_per_log_mae_rad: Each log's error when left out, rad (empty: not cross-validated).
    """

    structure: str
    values: Mapping[str, float]
    train_mae_rad: float
    per_log_mae_rad: Sequence[float]
    bic: float
    effective_samples: float
    seconds: float
    cv_mae_rad: float = math.nan
    cv_per_log_mae_rad: Sequence[float] = ()


@dataclass(frozen=True)
class ServoFit:
    """The result: every structure tried and the one chosen.

    Attributes:
        model: The servo model fitted.
        chosen: The structure of the least criterion.
        fits: Structure -> its fit.
        spec: The servo model with the chosen fit's values (what ``--write`` stores).
        offset_rad: The rig's fitted mounting offset (not the servo's; not stored).
        margins: Structure -> its held-out comparison with the chosen one (:func:`margins`; empty: not
            cross-validated).
    """

    model: str
    chosen: StructureFit
    fits: Mapping[str, StructureFit] = field(default_factory=dict)
    spec: ServoSpec | None = None
    offset_rad: float = 0.0
    margins: Mapping[str, Margin] = field(default_factory=dict)

    @property
    def not_told_apart(self) -> list[str]:
        """The structures that the held-out logs do not tell from the chosen one (:attr:`Margin.told_apart`)."""
        return [s for s, m in self.margins.items() if not m.told_apart]


@dataclass(frozen=True)
class Margin:
    """How much worse a structure predicted the left-out logs than the chosen one did.

    Attributes:
        difference_rad: Mean over the logs of its held-out error less the chosen structure's, rad.
        standard_error_rad: That mean's standard error (the per-log differences' spread over
            ``sqrt(logs)``), rad.
    """

    difference_rad: float
    standard_error_rad: float

    @property
    def told_apart(self) -> bool:
        """Whether the difference exceeds its standard error (the one-standard-error rule's margin)."""
        return self.difference_rad > self.standard_error_rad


@dataclass(frozen=True)
class Search:
    """How far each fit searches: the sizes of its global and local stages.

    Attributes:
        generations: Differential evolution's generations at most, of a fit from scratch.
        cv_generations: Generations of a held-out fit, started around the fit on every log.
        population: Members of the population per variable.
        max_nfev: Trust-region evaluations of the local stage.
    """

    generations: int
    cv_generations: int
    population: int
    max_nfev: int

    @classmethod
    def current(cls) -> Search:
        """The module's sizes as this process has them now (handed to every worker with its task)."""
        return cls(_GENERATIONS, _CV_GENERATIONS, _POPULATION, _MAX_NFEV)


def _stall_current(spec: ServoSpec) -> float:
    """The datasheet's stall current at the nominal voltage, ``V_nom / R``, A."""
    return spec.motor.nominal_voltage / spec.motor.resistance


def start_values(spec: ServoSpec) -> dict[str, float]:
    """The rollout parameters of ``spec``'s datasheet motor and firmware, with neutral friction.

    A model with no current limit of its own starts at the top of :data:`CURRENT_RANGE`: no limit.
    """
    limit = spec.firmware.max_current_a
    return {"torque_constant": spec.motor.torque_constant, "resistance": spec.motor.resistance,
            "armature": spec.motor.armature, "p_gain_divisor": spec.firmware.p_gain_divisor,
            "slow_decay": spec.firmware.slow_decay,
            "max_current": limit if math.isfinite(limit) else CURRENT_RANGE[1] * _stall_current(spec),
            **_START_FRICTION}


def ranges(spec: ServoSpec) -> dict[str, tuple[float, float]]:
    """Every variable's range for ``spec`` (:data:`RANGES`, :data:`RELATIVE_RANGES`, :data:`CURRENT_RANGE`)."""
    base, stall = start_values(spec), _stall_current(spec)
    return {**RANGES, **{k: (base[k] * lo, base[k] * hi) for k, (lo, hi) in RELATIVE_RANGES.items()},
            "max_current": (CURRENT_RANGE[0] * stall, CURRENT_RANGE[1] * stall)}


def _to_x(values: Mapping[str, float], free: Sequence[str], bounds: Mapping[str, tuple[float, float]]) -> np.ndarray:
    out = []
    for k in free:
        lo, hi = bounds[k]
        v = min(max(values[k], lo), hi)
        out.append(math.log(v) if k in _LOG else v)
    return np.array(out)


def _bounds(free: Sequence[str], bounds: Mapping[str, tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    lo = [math.log(bounds[k][0]) if k in _LOG else bounds[k][0] for k in free]
    hi = [math.log(bounds[k][1]) if k in _LOG else bounds[k][1] for k in free]
    return np.array(lo), np.array(hi)


def _sets(base: Mapping[str, float], free: Sequence[str], xs: np.ndarray) -> dict[str, np.ndarray]:
    """Rollout parameter arrays for each row of ``xs`` (the free variables), the rest from ``base``."""
    out = {k: np.full(len(xs), float(base.get(k, 0.0))) for k in PARAMETERS}
    for j, k in enumerate(free):
        out[k] = np.exp(xs[:, j]) if k in _LOG else xs[:, j].copy()
    return out


class _Problem:
    """Residuals and their batched forward-difference Jacobian for ``least_squares``."""

    def __init__(self, data: Batch, base: Mapping[str, float], free: Sequence[str], spec: ServoSpec) -> None:
        self.data, self.base, self.free, self.pwm_full = data, base, tuple(free), spec.firmware.pwm_full
        self.bounds = ranges(spec)
        self.lo, self.hi = _bounds(free, self.bounds)
        self._cache: tuple[bytes, np.ndarray] | None = None

    def _residuals(self, xs: np.ndarray) -> np.ndarray:
        q = rollout(self.data, _sets(self.base, self.free, xs), pwm_full=self.pwm_full)
        return ((q - self.data.position[None]) * self.data.mask[None]).reshape(len(xs), -1)

    def fun(self, x: np.ndarray) -> np.ndarray:
        key = x.tobytes()
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self._residuals(x[None])[0])
        return self._cache[1]

    def jac(self, x: np.ndarray) -> np.ndarray:
        steps = _DIFF_STEP * np.maximum(1.0, np.abs(x))
        xs = np.repeat(x[None], len(x) + 1, axis=0)
        for j in range(len(x)):  # step inwards at an upper bound
            steps[j] = -steps[j] if x[j] + steps[j] > self.hi[j] else steps[j]
            xs[j + 1, j] += steps[j]
        r = self._residuals(xs)
        self._cache = (x.tobytes(), r[0])
        return ((r[1:] - r[0]) / steps[:, None]).T


def _free(structure: str) -> tuple[str, ...]:
    """The variables ``structure`` fits.

    Raises:
        ValueError: An unknown structure.
    """
    if structure not in FREE:
        raise ValueError(f"--structure: unknown friction structure {structure!r}; valid: {', '.join(FREE)}")
    return FREE[structure]


def fit_structure(data: Batch, spec: ServoSpec, structure: str, seed: int = 0,
                  progress: Callable[[str], None] | None = None, start: Mapping[str, float] | None = None,
                  generations: int | None = None, search: Search | None = None) -> StructureFit:
    """Fit one friction structure: a global stage on the mean absolute error, then a local refinement.

    The global stage is ``scipy.optimize.differential_evolution`` over the variables' ranges,
    its whole population rolled out in one batch per generation (``vectorized``), seeded, from
    a population that holds the datasheet's values; the local stage is ``least_squares`` from
    its best and from the datasheet's values, each kept only when it lowers the mean absolute
    error. Given a ``start`` (a fit of the same structure on more logs), the population is
    drawn around it instead, for ``generations`` generations. ``search`` sizes the search
    (default: :meth:`Search.current`).

    Raises:
        ValueError: An unknown structure.
    """
    free = _free(structure)
    search = search or Search.current()
    t0 = time.monotonic()
    base = {**start_values(spec), **{k: 0.0 for k in _START_FRICTION if k not in free and k != "stribeck_velocity"}}
    problem = _Problem(data, base, free, spec)

    def mae_of(xs: np.ndarray) -> np.ndarray:
        sets = _sets(base, free, xs)
        q = rollout(data, sets, pwm_full=spec.firmware.pwm_full)
        with np.errstate(invalid="ignore"):
            mae = np.nan_to_num(mean_absolute_error(data, q).mean(axis=1), nan=_DIVERGED, posinf=_DIVERGED)
        prior = sum(np.square(np.log(sets[k] / base[k]) / PRIOR_LOG_SPREAD) for k in _PRIOR)
        return mae + PRIOR_WEIGHT_RAD * prior

    generation = [0]

    def report(intermediate_result: Any) -> None:
        generation[0] += 1
        if progress is not None and generation[0] % _REPORT_EVERY == 0:
            progress(f"{structure}: global stage, generation {generation[0]}, "
                     f"MAE {intermediate_result.fun * 1e3:.1f} mrad ({time.monotonic() - t0:.0f} s)")

    x0 = np.clip(_to_x(base, free, problem.bounds), problem.lo + 1e-9, problem.hi - 1e-9)
    init: Any = "latinhypercube"
    if start is not None:
        centre = np.clip(_to_x(start, free, problem.bounds), problem.lo, problem.hi)
        spread = _RESTART_SPREAD * (problem.hi - problem.lo)
        rng = np.random.default_rng(seed)
        init = np.clip(centre + spread * rng.standard_normal((search.population * len(free), len(free))),
                       problem.lo, problem.hi)
        init[0] = centre
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        bounds = list(zip(problem.lo, problem.hi, strict=True))
        glob = differential_evolution(lambda x: mae_of(np.atleast_2d(x.T)), bounds, vectorized=True,
                                      x0=x0 if start is None else None, init=init, updating="deferred",
                                      polish=False, maxiter=generations or search.generations,
                                      popsize=search.population, tol=_DE_TOL, rng=seed, callback=report)
        best_x, best = glob.x, float(glob.fun)
        if progress is not None:
            progress(f"{structure}: global stage done, MAE {best * 1e3:.1f} mrad after {glob.nit} generations "
                     f"({time.monotonic() - t0:.0f} s); refining it and the datasheet's values")
        for origin in (glob.x, x0):
            local = least_squares(problem.fun, np.clip(origin, problem.lo, problem.hi), jac=problem.jac,
                                  bounds=(problem.lo, problem.hi), loss="soft_l1", f_scale=ERROR_SCALE_RAD,
                                  max_nfev=search.max_nfev, ftol=_FTOL, xtol=1e-6)
            refined = float(mae_of(local.x[None])[0])
            if refined < best:
                best_x, best = local.x, refined
    if progress is not None:
        progress(f"{structure}: refined, MAE {best * 1e3:.1f} mrad ({time.monotonic() - t0:.0f} s)")
    values = {k: float(v[0]) for k, v in _sets(base, free, best_x[None]).items()}
    q = rollout(data, {k: np.array([v]) for k, v in values.items()}, pwm_full=spec.firmware.pwm_full)
    per_log = mean_absolute_error(data, q)[0]
    n_eff = effective_samples(data, q[0])
    mae = float(per_log.mean())
    bic = information_criterion(mae, len(free), n_eff)
    return StructureFit(structure=structure, values=values, train_mae_rad=mae,
                        per_log_mae_rad=[float(v) for v in per_log], bic=bic, effective_samples=n_eff,
                        seconds=time.monotonic() - t0)


def information_criterion(mae: float, parameters: int, samples: float) -> float:
    """Bayesian information criterion of a Laplace likelihood: ``2 n ln MAE + k ln n`` (lower is better)."""
    return 2.0 * samples * math.log(max(mae, 1e-12)) + parameters * math.log(samples)


def effective_samples(data: Batch, angles: np.ndarray) -> float:
    """Samples of the residual over its integrated autocorrelation time (at least one per log).

    ``tau = 1 + 2 sum_k rho_k``, the pooled autocorrelations ``rho_k`` summed up to the first
    that is not positive (Sokal's window; Geyer 1992): a rollout's error is smooth, so that a
    sample says little that its neighbour did not.
    """
    e = (angles - data.position) * data.mask
    den = float(np.sum(e * e))
    tau = 1.0
    if den > 0.0:
        for k in range(1, e.shape[1] // 2):
            rho = float(np.sum(e[:, k:] * e[:, :-k])) / den
            if rho <= 0.0:
                break
            tau += 2.0 * rho
    return max(float(data.mask.sum()) / tau, float(len(data.logs)))


def fit(logs: Sequence[Any], spec: ServoSpec, structures: Sequence[str] = FRICTION_STRUCTURES, seed: int = 0,
        progress: Callable[[str], None] | None = None, workers: int = 1) -> ServoFit:
    """Fit ``spec`` to bench ``logs`` with each of ``structures``; keep the one that predicts best.

    With several structures and at least :data:`MIN_CV_LOGS` logs, each structure is also
    judged by leave-one-log-out cross-validation (:func:`cross_validate`) and the least
    held-out error wins; otherwise the least information criterion.

    The structures' fits, then every held-out fit, are independent tasks: with ``workers``
    above 1 they run on that many processes
    (:class:`snake_tools.experiment.executor.TrialExecutor`), each seeded and sized
    (:class:`Search`) as in this process, so the result is the one of ``workers`` 1.
    """
    from snake_tools.experiment.executor import TrialExecutor

    for structure in structures:  # here, before any task: a task's error would reach the caller wrapped
        _free(structure)
    search = Search.current()
    cv = len(structures) > 1 and len(logs) >= MIN_CV_LOGS
    tasks = len(structures) * (len(logs) if cv else 1)
    t0 = time.monotonic()
    with TrialExecutor(max(1, min(int(workers), tasks))) as executor:
        here = progress if executor.local else None  # a worker's stage lines stay in the worker

        def done(i: int, f: StructureFit) -> None:
            if progress is not None and not executor.local:
                progress(f"{f.structure}: fitted, MAE {f.train_mae_rad * 1e3:.1f} mrad ({f.seconds:.0f} s of a "
                         f"worker; {time.monotonic() - t0:.0f} s in all)")

        # The structures of most variables take longest: handed out first, they leave the short ones to
        # fill the workers' ends (the result does not depend on the order).
        order = sorted(structures, key=lambda s: -len(FREE[s]))
        full = executor.map(_structure_task, [(logs, spec, s, seed, search, here) for s in order],
                            desc="structures", progress=False, each=done)
        by_name = {f.structure: f for f in full}
        fits = common_criterion({s: by_name[s] for s in structures})
        if cv:
            per_log = cross_validate(logs, spec, [fits[s] for s in order], seed, progress, executor, search)
            fits = {s: replace(f, cv_mae_rad=float(np.mean(per_log[s])), cv_per_log_mae_rad=per_log[s])
                    for s, f in fits.items()}
    chosen = choose(fits)
    result = ServoFit(model=spec.model, chosen=chosen, fits=fits, spec=fitted_spec(spec, chosen),
                      offset_rad=chosen.values["offset"], margins=margins(fits, chosen))
    if progress is not None and result.not_told_apart:
        progress(f"the left-out logs do not tell {chosen.structure} from {', '.join(result.not_told_apart)} "
                 f"(held-out errors within one standard error of each other, log by log): more logs, of other "
                 f"trajectories, are what could tell them apart")
    return result


def _structure_task(logs: Sequence[Any], spec: ServoSpec, structure: str, seed: int, search: Search,
                    progress: Callable[[str], None] | None) -> StructureFit:
    """One structure fitted on every log (a task of :func:`fit`)."""
    return fit_structure(batch(logs), spec, structure, seed, progress, search=search)


def _held_out_task(logs: Sequence[Any], i: int, spec: ServoSpec, full: StructureFit, seed: int,
                   search: Search) -> float:
    """Log ``i``'s error, rad, predicted by ``full``'s structure fitted on the other logs (a task of :func:`fit`)."""
    rest = batch([log for j, log in enumerate(logs) if j != i])
    part = fit_structure(rest, spec, full.structure, seed, start=full.values, generations=search.cv_generations,
                         search=search)
    return validate([logs[i]], fitted_spec(spec, part), part.values["offset"])[0]


def margins(fits: Mapping[str, StructureFit], chosen: StructureFit) -> dict[str, Margin]:
    """Each other cross-validated structure's held-out error against ``chosen``'s, paired log by log.

    The logs differ far more from one another than the structures do on one log (a trajectory
    the model handles badly is bad for every structure), so the comparison is of the
    differences on each log: their mean and its standard error. A structure within one
    standard error of the chosen one is not told apart from it by these logs (the margin of
    the one-standard-error rule: Hastie, Tibshirani and Friedman, The Elements of Statistical
    Learning, 2nd ed., Sec. 7.10).
    """
    out: dict[str, Margin] = {}
    base = np.asarray(chosen.cv_per_log_mae_rad, dtype=float)
    if len(base) < 2:
        return out
    for s, f in fits.items():
        if s == chosen.structure or len(f.cv_per_log_mae_rad) != len(base):
            continue
        d = np.asarray(f.cv_per_log_mae_rad, dtype=float) - base
        out[s] = Margin(float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d))))
    return out


def common_criterion(fits: Mapping[str, StructureFit]) -> dict[str, StructureFit]:
    """The fits with their criterion on one sample count, the least of their effective samples.

    Criteria compare only on the same data: each residual's own autocorrelation would count
    the samples differently per structure; the least count is the cautious one (it charges a
    parameter the most against the fit it buys).
    """
    n = min(f.effective_samples for f in fits.values())
    return {s: replace(f, effective_samples=n,
                       bic=information_criterion(f.train_mae_rad, len(FREE[s]), n))
            for s, f in fits.items()}


def cross_validate(logs: Sequence[Any], spec: ServoSpec, fulls: Sequence[StructureFit], seed: int,
                   progress: Callable[[str], None] | None, executor: Any, search: Search) -> dict[str, list[float]]:
    """Leave-one-log-out error of each structure: each log's, predicted by a fit on the others, rad.

    Each held-out fit starts its population around the structure's fit on every log (one of
    ``fulls``) and runs :attr:`Search.cv_generations` generations: the logs left in move the
    optimum a little, and a search from scratch per log would cost a whole fit each. The
    fits run on ``executor`` (a :class:`snake_tools.experiment.executor.TrialExecutor`).

    Returns:
        Structure -> each log's held-out error, in the order of ``logs``.
    """
    t0 = time.monotonic()
    n = len(logs)
    tasks = [(logs, i, spec, full, seed, search) for full in fulls for i in range(n)]
    ended: dict[str, list[float]] = {f.structure: [] for f in fulls}

    def done(k: int, error: float) -> None:  # a structure's line once its last log's fit ends
        s = fulls[k // n].structure
        ended[s].append(error)
        if progress is not None and len(ended[s]) == n:
            progress(f"{s}: leave-one-log-out MAE {np.mean(ended[s]) * 1e3:.1f} mrad ({time.monotonic() - t0:.0f} s)")

    errors = executor.map(_held_out_task, tasks, desc="held-out fits", progress=False, each=done)
    return {f.structure: errors[k * n:(k + 1) * n] for k, f in enumerate(fulls)}


def choose(fits: Mapping[str, StructureFit]) -> StructureFit:
    """The fit of the least held-out error where cross-validated, else of the least information criterion."""
    if all(math.isfinite(f.cv_mae_rad) for f in fits.values()):
        return min(fits.values(), key=lambda f: f.cv_mae_rad)
    return min(fits.values(), key=lambda f: f.bic)


def fitted_spec(spec: ServoSpec, chosen: StructureFit) -> ServoSpec:
    """``spec`` with the fitted motor, firmware divisor and friction (the datasheet's voltage kept)."""
    v = chosen.values
    motor = Motor.from_constants(v["torque_constant"], v["resistance"], spec.motor.nominal_voltage,
                                 spec.motor.gear_ratio, v["armature"])
    friction = Friction(structure=chosen.structure, coulomb=v["coulomb"], viscous=v["viscous"],
                        load=v["load"] if "load" in FREE[chosen.structure] else 0.0,
                        stribeck_torque=v["stribeck_torque"] if "stribeck_torque" in FREE[chosen.structure] else 0.0,
                        stribeck_load=v["stribeck_load"] if "stribeck_load" in FREE[chosen.structure] else 0.0,
                        stribeck_velocity=(v["stribeck_velocity"] if "stribeck_velocity" in FREE[chosen.structure]
                                           else Friction().stribeck_velocity))
    return replace(spec, motor=motor, firmware=replace(spec.firmware, p_gain_divisor=v["p_gain_divisor"],
                                                       slow_decay=v["slow_decay"], max_current_a=v["max_current"]),
                   friction=friction)


def spec_values(spec: ServoSpec, offset_rad: float = 0.0) -> dict[str, float]:
    """The rollout parameters of a servo model as it stands (to judge a stored model on logs)."""
    f = spec.friction
    return {"torque_constant": spec.motor.torque_constant, "resistance": spec.motor.resistance,
            "armature": spec.motor.armature, "p_gain_divisor": spec.firmware.p_gain_divisor,
            "slow_decay": spec.firmware.slow_decay, "max_current": spec.firmware.max_current_a,
            "coulomb": f.coulomb, "viscous": f.viscous, "load": f.load, "stribeck_torque": f.stribeck_torque,
            "stribeck_load": f.stribeck_load, "stribeck_velocity": f.stribeck_velocity, "offset": offset_rad}


def validate(logs: Sequence[Any], spec: ServoSpec, offset_rad: float = 0.0) -> list[float]:
    """Each log's mean absolute error, rad, under ``spec`` (and the rig's offset)."""
    data = batch(logs)
    values = spec_values(spec, offset_rad)
    q = rollout(data, {k: np.array([v]) for k, v in values.items()}, pwm_full=spec.firmware.pwm_full)
    return [float(v) for v in mean_absolute_error(data, q)[0]]

