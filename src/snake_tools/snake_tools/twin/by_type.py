"""Each joint type's servo values refined on its own joints' residual, the other types' held.

A lifted body couples its joint types only weakly, but it does couple them: a change of one
type's values moves the other types' joints a little. With a friction set from the load every
physics step (a load-dependent friction), that little is rough: along the straight line from a
fit that missed the truth to the truth, the twist joints' own ``|r|^2`` falls all the way (2681
to 2652 on the coverage benchmark's case 0, no barrier), while the dorsal and lateral joints'
jump by 10 to 400. The refinement over every type at once sees the sum, whose finite
differences and trial steps that roughness masks, and stops where the twist type still has a
descent of its own (a Jacobian with the types' cross terms set to zero, on the sum, stops there
too: what stops it is the trial steps' sum, not the cross terms).

:func:`refine_by_type` fits each type's variables to its own joints' residual (one
least-squares problem per type, the others' variables held where they are): the same
estimator as the whole fit where the types do not couple, and one whose cost is as smooth as a
type's own joints make it. Its caller refines the mix of the types' results over every type
again, and keeps it only where the sum is lower than before.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Residuals = Callable[[list[np.ndarray]], list[np.ndarray]]
"""Residual vectors of a batch of points (each ``samples x joints``, raveled sample by sample)."""


def refine_by_type(residuals: Residuals, z: np.ndarray, var_type: np.ndarray, joint_type: np.ndarray,
                   bounds: tuple[np.ndarray, np.ndarray], x_scale: np.ndarray, diff_step: float,
                   max_nfev: int, rounds: int = 1, tol: float = 0.0) -> np.ndarray:
    """``z`` with each type's variables moved to the least of that type's own joints' ``|r|^2``.

    Every type starts from ``z`` and holds the other types' variables at ``z``; the types'
    results are put together. Per type, ``scipy.optimize.least_squares`` (trust-region
    reflective within ``bounds``, scaled by ``x_scale``, at most ``max_nfev`` evaluations),
    its Jacobian by forward differences of relative step ``diff_step`` (stepping down at an
    upper bound), each Jacobian's columns in one ``residuals`` batch; started again from where
    it ended, up to ``rounds`` times, while a round lowers the type's ``|r|^2`` by ``tol`` or
    more. On a rough cost the trust region shrinks to the roughness's scale and the run stops
    there; a new run starts with a trust region of the variables' scale again (on the coverage
    benchmark's case 6, a second run from the first one's end took the twist armature from 19 %
    to 12 % below the truth).

    Args:
        residuals: Residual vectors of a batch of points (:data:`Residuals`).
        z: The point to start from (every variable).
        var_type: Each variable's joint type.
        joint_type: Each joint's type, in the residual's joint order.
        bounds: Lower and upper bound of every variable.
        x_scale: Each variable's scale (``least_squares``'s ``x_scale``).
        diff_step: Relative step of the forward differences.
        max_nfev: Evaluations of each run of a type's refinement.
        rounds: Runs of a type's refinement at most.
        tol: The least lowering of a type's ``|r|^2`` by a run for another to follow.

    Returns:
        The types' results put together.
    """
    z = np.asarray(z, dtype=float)
    lower, upper = (np.asarray(b, dtype=float) for b in bounds)
    out = z.copy()
    for t in dict.fromkeys(var_type.tolist()):
        mine, cols = var_type == t, joint_type == t
        if cols.any():
            out[mine] = _refine_one(residuals, z, mine, cols, (lower[mine], upper[mine]), x_scale[mine], diff_step,
                                    max_nfev, rounds, tol)
    return out


def _refine_one(residuals: Residuals, z: np.ndarray, mine: np.ndarray, cols: np.ndarray,
                bounds: tuple[np.ndarray, np.ndarray], x_scale: np.ndarray, diff_step: float,
                max_nfev: int, rounds: int, tol: float) -> np.ndarray:
    """The variables ``mine`` of ``z`` refined on the residual of the joints ``cols``, the others held."""
    from scipy.optimize import least_squares

    lower, upper = bounds
    last: dict[bytes, np.ndarray] = {}   # the residual of the last point (least_squares asks for it again)

    def full(zt: np.ndarray) -> np.ndarray:
        point = z.copy()
        point[mine] = zt
        return point

    def own(r: np.ndarray) -> np.ndarray:
        return r.reshape(-1, cols.size)[:, cols].ravel()

    def fun(zt: np.ndarray) -> np.ndarray:
        zt = np.asarray(zt, dtype=float)
        key = zt.tobytes()
        if key not in last:
            last.clear()
            last[key] = own(residuals([full(zt)])[0])
        return last[key]

    def jac(zt: np.ndarray, *_: object) -> np.ndarray:
        zt = np.asarray(zt, dtype=float)
        f0 = fun(zt)
        h = diff_step * np.maximum(1.0, np.abs(zt))
        h = np.where(zt + h > upper, -h, h)   # stay within the bounds
        shifted = []
        for i in range(zt.size):
            zi = zt.copy()
            zi[i] += h[i]
            shifted.append(full(zi))
        return np.stack([(own(r) - f0) / h[i] for i, r in enumerate(residuals(shifted))], axis=1)

    x = np.clip(z[mine], lower, upper)
    f = fun(x)
    cost = float(f @ f)
    for _ in range(max(rounds, 1)):
        sol = least_squares(fun, x, jac=jac, bounds=(lower, upper), method="trf", x_scale=x_scale, max_nfev=max_nfev)
        lowered = cost - float(sol.fun @ sol.fun)
        if lowered > 0.0:
            x, cost = np.asarray(sol.x), cost - lowered
        if lowered < tol:
            break
    return x
