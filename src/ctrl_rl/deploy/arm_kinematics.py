"""An arm's forward kinematics in numpy, from the kinematic chain its bundle carries.

``ctrl-rl export`` writes the chain from the arm's base body to its end-effector site as the bundle's
``kinematic_chain`` metadata (:func:`chain_from_model`: each body's offset and rotation from its parent,
each joint's type, axis, anchor and reference), so the deploy node knows where a joint target puts the end
effector without MuJoCo or torch. :meth:`KinematicChain.ee_pose` follows MuJoCo's own rules
(``mj_kinematics``: a body's frame is its parent's moved by ``body_pos``/``body_quat``; a hinge turns it
about its anchor by ``qpos - qpos0``, a slide moves it along its axis by as much); tests/test_arm_deploy.py
checks it against MuJoCo's ``site_xpos`` and ``site_xmat`` on random joint configurations.

:class:`WorkspaceBox` is what the node checks every policy target against (docs/deploy.md, "Arms").

Numpy only (the model given to :func:`chain_from_model` is read by attribute, never imported).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

JOINT_TYPES = {2: "slide", 3: "hinge"}
"""MuJoCo's ``mjtJoint`` values of the one-dof joints an arm's chain may hold."""


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def axis_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation by ``angle`` (rad) about the unit ``axis`` (Rodrigues' formula)."""
    x, y, z = axis
    k = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


@dataclass(frozen=True)
class ChainJoint:
    """One joint on the chain: which of the bundle's joints drives it and how it moves its body."""

    index: int
    """Position of the joint in the bundle's ``joint_names``."""
    hinge: bool
    """A hinge turns its body about :attr:`axis` through :attr:`anchor`; a slide moves it along :attr:`axis`."""
    axis: np.ndarray
    """Unit axis in the body's frame."""
    anchor: np.ndarray
    """The joint's position in the body's frame (MuJoCo's ``jnt_pos``)."""
    ref: float
    """The joint position at which the body sits at its offset (MuJoCo's ``qpos0``)."""


@dataclass(frozen=True)
class ChainLink:
    """One body between the base and the end effector."""

    offset: np.ndarray
    """Position in the parent's frame (``body_pos``)."""
    rotation: np.ndarray
    """Orientation in the parent's frame (``body_quat`` as a matrix)."""
    joints: tuple[ChainJoint, ...]


class KinematicChain:
    """Forward kinematics of one end-effector site in its arm's base frame, for the bundle's joints."""

    def __init__(self, meta: dict[str, Any], joint_names: list[str]) -> None:
        """From a bundle's ``kinematic_chain`` metadata (:func:`chain_from_model`) and its ``joint_names``;
        a ``ValueError`` names what is missing or wrong."""
        where = "bundle metadata: kinematic_chain"
        try:
            self.links = tuple(ChainLink(_vector(link["pos"], 3), quat_to_matrix(_vector(link["quat"], 4)),
                                         tuple(self._joint(j, joint_names) for j in link["joints"]))
                               for link in meta["links"])
            self.site_offset = _vector(meta["site_pos"], 3)
            self.site_rotation = quat_to_matrix(_vector(meta["site_quat"], 4))
            self.base_body, self.site = str(meta["base_body"]), str(meta["site"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where} is malformed ({type(e).__name__}: {e}); re-export the bundle with "
                             "`ctrl-rl export <run>`") from None
        if not self.links:
            raise ValueError(f"{where} has no links: the end effector does not move with any joint")

    @staticmethod
    def _joint(j: dict[str, Any], joint_names: list[str]) -> ChainJoint:
        if j["joint"] not in joint_names:
            raise ValueError(f"joint {j['joint']!r} is not one of the bundle's joints {joint_names}")
        if j["type"] not in ("hinge", "slide"):
            raise ValueError(f"joint {j['joint']!r} has type {j['type']!r}; hinge or slide")
        axis = _vector(j["axis"], 3)
        return ChainJoint(joint_names.index(j["joint"]), j["type"] == "hinge", axis / np.linalg.norm(axis),
                          _vector(j["pos"], 3), float(j["ref"]))

    def ee_pose(self, joint_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The end effector's position ``[3]`` and rotation matrix ``[3, 3]`` in the base frame at joint
        positions ``joint_pos`` (the bundle's joint order)."""
        return self.pose_and_axes(joint_pos)[:2]

    def pose_and_axes(self, joint_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[tuple[ChainJoint, np.ndarray,
                                                                                                   np.ndarray]]]:
        """:meth:`ee_pose` and, from the same pass, each chain joint with its anchor and unit axis in the base
        frame (MuJoCo's ``xanchor``, ``xaxis``): what a Jacobian of a point the end effector carries needs
        (:meth:`point_jacobian`)."""
        q = np.asarray(joint_pos, dtype=np.float64)
        p, r, axes = np.zeros(3), np.eye(3), []
        for link in self.links:
            p, r = p + r @ link.offset, r @ link.rotation
            for j in link.joints:
                delta, anchor = q[j.index] - j.ref, p + r @ j.anchor
                axes.append((j, anchor, r @ j.axis))  # a hinge's axis is the same before and after its turn
                if j.hinge:  # turn about the anchor: the anchor stays where it is
                    r = r @ axis_rotation(j.axis, delta)
                    p = anchor - r @ j.anchor
                else:
                    p = p + r @ j.axis * delta
        return p + r @ self.site_offset, r @ self.site_rotation, axes

    def point_jacobian(self, axes: list[tuple[ChainJoint, np.ndarray, np.ndarray]], point: np.ndarray,
                       joints: list[int]) -> np.ndarray:
        """``[3, len(joints)]``: how ``point`` (base frame, carried by the end effector) moves per unit of each of
        the bundle's ``joints`` (indices into its ``joint_names``), from :meth:`pose_and_axes`'s ``axes``; a joint
        off the chain moves it not at all. The training side computes the same from sensors
        (``ctrl_rl.robots.terms.point_jacobian``)."""
        jac = np.zeros((3, len(joints)))
        column = {index: k for k, index in enumerate(joints)}
        for j, anchor, axis in axes:
            if j.index in column:
                jac[:, column[j.index]] += np.cross(axis, point - anchor) if j.hinge else axis
        return jac


def _vector(value: Any, n: int) -> np.ndarray:
    v = np.asarray(value, dtype=np.float64)
    if v.shape != (n,) or not np.all(np.isfinite(v)):
        raise ValueError(f"expected {n} finite numbers, got {value!r}")
    return v


def chain_from_model(model: Any, base_body: str, site: str, joint_names: list[str]) -> dict[str, Any]:
    """The ``kinematic_chain`` metadata of ``site`` below ``base_body`` in a compiled ``mujoco.MjModel``:
    plain JSON types. A ``ValueError`` when the site is not below the base or a joint on the way is not a
    hinge or slide among ``joint_names`` (the node could not know where it stands)."""
    base, sid = model.body(base_body).id, model.site(site).id
    path, b = [], int(model.site_bodyid[sid])
    while b != base:
        if b == 0:
            raise ValueError(f"site {site!r} is not below body {base_body!r}")
        path.append(b)
        b = int(model.body_parentid[b])
    links = []
    for b in reversed(path):
        joints = []
        for j in range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b]):
            name, kind = model.joint(j).name, JOINT_TYPES.get(int(model.jnt_type[j]))
            if kind is None or name not in joint_names:
                raise ValueError(f"joint {name!r} between {base_body!r} and {site!r} is not a hinge or slide the "
                                 f"bundle drives ({joint_names}); the end effector's pose would be unknown")
            joints.append({"joint": name, "type": kind, "axis": model.jnt_axis[j].tolist(),
                           "pos": model.jnt_pos[j].tolist(), "ref": float(model.qpos0[model.jnt_qposadr[j]])})
        links.append({"body": model.body(b).name, "pos": model.body_pos[b].tolist(),
                      "quat": model.body_quat[b].tolist(), "joints": joints})
    return {"base_body": base_body, "site": site, "links": links, "site_pos": model.site_pos[sid].tolist(),
            "site_quat": model.site_quat[sid].tolist()}


@dataclass(frozen=True)
class WorkspaceBox:
    """Where the node lets a policy target put the end effector: ``[[x_lo, x_hi], [y_lo, y_hi], [z_lo, z_hi]]``
    (m, base frame)."""

    bounds: np.ndarray

    @classmethod
    def around(cls, targets: Any, default_ee: np.ndarray, margin: float) -> WorkspaceBox:
        """The box of the task's targets (the bundle's ``pose_command.workspace``) stretched to hold the end
        effector at the default pose, then grown by ``margin`` on every side."""
        box = np.asarray(targets, dtype=np.float64)
        if box.shape != (3, 2) or not np.all(np.isfinite(box)) or np.any(box[:, 0] > box[:, 1]):
            raise ValueError(f"bundle metadata: pose_command.workspace must be [[x_lo, x_hi], [y_lo, y_hi], "
                             f"[z_lo, z_hi]] (m), got {targets!r}")
        lo, hi = np.minimum(box[:, 0], default_ee), np.maximum(box[:, 1], default_ee)
        return cls(np.stack([lo - margin, hi + margin], axis=1))

    def contains(self, point: np.ndarray) -> bool:
        return bool(np.all(point >= self.bounds[:, 0]) and np.all(point <= self.bounds[:, 1]))

    def distance_outside(self, point: np.ndarray) -> float:
        """How far ``point`` lies outside the box (m; 0 inside)."""
        gap = np.maximum(self.bounds[:, 0] - point, 0.0) + np.maximum(point - self.bounds[:, 1], 0.0)
        return float(np.linalg.norm(gap))
