"""How much contact and constraint memory a MuJoCo Warp world gets, and what happens when it is not enough.

MuJoCo Warp preallocates ``nconmax`` contacts and ``njmax`` constraint rows per world; the
collision and solver kernels loop over those buffers, so their size is speed (MuJoCo Warp's
performance guide; mjlab sizes both per task). Too small is worse than slow: a contact that does
not fit is dropped and the step is wrong. Here:

* :func:`allocation` sizes both from the model itself where that gives a true upper bound: for
  flat ground, every colliding geom pair has at most a known number of contacts (sphere-plane 1,
  capsule-plane 2, box-plane 8: MuJoCo Warp gave a humanoid foot 7 at once, ...), and each
  contact at most ``2 (condim - 1)`` pyramidal rows (``condim`` elliptic ones), plus one row per
  limited joint or tendon, per equality constraint row and per DoF with friction loss. A pair
  whose count has no small bound (height fields, meshes against meshes) falls back to MuJoCo
  Warp's own estimate. ``sim.nconmax`` / ``sim.njmax`` override either.
* :func:`overflow_error` turns MuJoCo Warp's per-world overflow bits into an error that names the
  setting to raise: :class:`~ctrl_rl.sims.mujoco_warp.WarpPhysics` reads them every few steps and
  a run whose physics dropped contacts stops instead of training on it.
"""

from __future__ import annotations

import mujoco
import numpy as np

from ctrl_rl.env import SimulationError

G = mujoco.mjtGeom
PLANE_CONTACTS = {G.mjGEOM_SPHERE: 1, G.mjGEOM_CAPSULE: 2, G.mjGEOM_ELLIPSOID: 1, G.mjGEOM_CYLINDER: 4,
                  G.mjGEOM_BOX: 8, G.mjGEOM_MESH: 8}
"""Most contacts MuJoCo (C and Warp) makes between a plane and a geom of this type (a box: one per
penetrating corner; measured: 7 for a humanoid foot box on MuJoCo Warp)."""
PAIR_CONTACTS = {frozenset({G.mjGEOM_SPHERE}): 1, frozenset({G.mjGEOM_SPHERE, G.mjGEOM_CAPSULE}): 1,
                 frozenset({G.mjGEOM_CAPSULE}): 2, frozenset({G.mjGEOM_SPHERE, G.mjGEOM_BOX}): 1,
                 frozenset({G.mjGEOM_CAPSULE, G.mjGEOM_BOX}): 2, frozenset({G.mjGEOM_BOX}): 8}
"""Most contacts between two non-plane geoms of these types; other convex pairs: :data:`CONVEX_PAIR`."""
CONVEX_PAIR = 4
"""MuJoCo Warp's multi-contact convex collision makes at most this many (mjMAXCONPAIR caps MuJoCo C higher)."""

FIXES = {  # OverflowType bit name -> (what overflowed, the setting that fixes it)
    "NEFC": ("constraint rows (njmax)", "sim.njmax"),
    "NJMAX_NNZ": ("constraint Jacobian non-zeros (njmax)", "sim.njmax"),
    "BROADPHASE": ("collision candidates (nconmax)", "sim.nconmax"),
    "NARROWPHASE": ("contacts (nconmax)", "sim.nconmax"),
    "CCD": ("convex-collision contacts (nconmax)", "sim.nconmax"),
    "HFIELD": ("height-field contacts of one geom pair", "the terrain's resolution (fewer, larger cells)"),
    "NVMAX": ("active DoFs (nvmax)", "nvmax"),
}
"""Overflows that make a step wrong (contacts or rows dropped). The solver's iteration-limit bits
(ITERATIONS, LS_ITERATIONS) are not errors: the step is the best the budget allows."""


def _parent(model: mujoco.MjModel, body: int) -> int:
    return int(model.body_parentid[body])


def _can_collide(model: mujoco.MjModel, a: int, b: int) -> bool:
    """MuJoCo's dynamic filter: contype/conaffinity, same body, parent-child (unless disabled)."""
    if not (model.geom_contype[a] & model.geom_conaffinity[b] or model.geom_contype[b] & model.geom_conaffinity[a]):
        return False
    ba, bb = int(model.geom_bodyid[a]), int(model.geom_bodyid[b])
    if ba == bb:
        return False
    filter_parent = not model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT
    weld = model.body_weldid
    if weld[ba] == weld[bb]:
        return False
    return not (filter_parent and ba != 0 and bb != 0 and (weld[_parent(model, weld[ba])] == weld[bb]
                                                          or weld[_parent(model, weld[bb])] == weld[ba]))


def contact_bound(model: mujoco.MjModel) -> int | None:
    """Most contacts one world of ``model`` can have at once, or None where no small bound exists
    (a height field, or a pair of geom types without a table entry)."""
    total = 0
    ngeom = model.ngeom
    pairs = [(a, b) for a in range(ngeom) for b in range(a + 1, ngeom) if _can_collide(model, a, b)]
    pairs += [(int(model.pair_geom1[i]), int(model.pair_geom2[i])) for i in range(model.npair)]
    for a, b in pairs:
        ta, tb = int(model.geom_type[a]), int(model.geom_type[b])
        if G.mjGEOM_HFIELD in (ta, tb) or G.mjGEOM_SDF in (ta, tb):
            return None
        if G.mjGEOM_PLANE in (ta, tb):
            other = tb if ta == G.mjGEOM_PLANE else ta
            if other == G.mjGEOM_PLANE:
                continue
            count = PLANE_CONTACTS.get(other)
        elif G.mjGEOM_MESH in (ta, tb):
            count = CONVEX_PAIR if not (ta == tb == G.mjGEOM_MESH) else None
        else:
            count = PAIR_CONTACTS.get(frozenset({ta, tb}), CONVEX_PAIR)
        if count is None:
            return None
        total += count
    return total


def rows_per_contact(model: mujoco.MjModel) -> int:
    """Most constraint rows one contact takes (pyramidal: 2 (condim - 1), condim 1: 1; elliptic: condim)."""
    condim = int(max([1, *model.geom_condim, *model.pair_dim]))
    if model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC or condim == 1:
        return condim
    return 2 * (condim - 1)


def other_rows(model: mujoco.MjModel) -> int:
    """Rows besides contacts: limited joints and tendons, equality constraints, friction loss."""
    eq_rows = {mujoco.mjtEq.mjEQ_CONNECT: 3, mujoco.mjtEq.mjEQ_WELD: 6}
    rows = int(np.count_nonzero(model.jnt_limited)) + int(np.count_nonzero(model.tendon_limited))
    rows += sum(eq_rows.get(int(t), 1) for t in model.eq_type)
    rows += int(np.count_nonzero(model.dof_frictionloss)) + int(np.count_nonzero(model.tendon_frictionloss))
    return rows


def allocation(model: mujoco.MjModel, nconmax: int | None = None, njmax: int | None = None) -> tuple[int, int, str]:
    """``(nconmax, njmax, how)`` per world: the given values, else the model's bounds, else MuJoCo
    Warp's own estimate (``how`` says which, for the run header and the GPU suite)."""
    from mujoco_warp._src.io import _default_nconmax, _default_njmax

    bound = contact_bound(model)
    how = []
    if nconmax is None:
        nconmax = max(bound, 1) if bound is not None else _default_nconmax(model)
        how.append("nconmax: bound from the model" if bound is not None else "nconmax: MuJoCo Warp's estimate")
    else:
        how.append("nconmax: sim.nconmax")
    if njmax is None:
        if bound is not None:
            njmax = max(nconmax * rows_per_contact(model) + other_rows(model), 1)
            how.append("njmax: bound from the model")
        else:
            njmax = _default_njmax(model)
            how.append("njmax: MuJoCo Warp's estimate")
    else:
        how.append("njmax: sim.njmax")
    return int(nconmax), int(njmax), "; ".join(how)


def overflow_error(bits: list[int], nworld: int, nconmax: int, njmax: int) -> RuntimeError | None:
    """The error for per-world overflow bitmasks ``bits`` (MuJoCo Warp's ``Data.overflow``), or
    None when no world overflowed a buffer (solver iteration limits are not overflows)."""
    from mujoco_warp import OverflowType

    for name, (what, setting) in FIXES.items():
        flag = int(getattr(OverflowType, name, 0))
        worlds = sum(1 for b in bits if b & flag)
        if flag and worlds:
            now = {"sim.nconmax": f" (now {nconmax} per world)",
                   "sim.njmax": f" (now {njmax} per world)"}.get(setting, "")
            example = {"sim.nconmax": f"; e.g. sim.nconmax={2 * nconmax}",
                       "sim.njmax": f"; e.g. sim.njmax={2 * njmax}"}.get(setting, "")
            return PhysicsOverflowError(
                f"MuJoCo Warp: {worlds} of {nworld} worlds needed more {what} than allocated{now}; those "
                f"steps dropped contacts or constraints and are wrong, so the run stops. Raise {setting}{example}")
    return None


class PhysicsOverflowError(SimulationError):
    """A physics buffer overflowed: the simulation of those steps cannot be right."""
