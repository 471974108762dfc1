"""Sim2sim for an arm bundle with an object (insert): episodes on the deploy node's topics, judged as training does.

The bridge rebuilds the arm and the task's scene from the bundle (``object`` metadata; the peg and the socket of
``ctrl_rl.robots.arm_scenes``, the very edit training made), publishes the arm's ``JointState`` and the
object's pose as ``geometry_msgs/PoseStamped`` in the bundle's object frame (what motion capture or a fiducial
tracker gives a robot), applies the node's joint commands, and plays the operator of a real cell, episode by
episode:

1. **Reset**: the arm at its default pose, the socket drawn uniformly in the task's ranges (position and
   yaw), the peg's friction and mass drawn in theirs. Between episodes the bridge holds the arm at that pose
   itself (the homing a cell's own controller does) and ignores the node, which is in damping.
2. **Start**: a start message (``std_msgs/Bool`` true); the node stands the arm up (to the bundle's rest
   targets) and runs the policy.
3. **Episode**: from the node's first policy tick, ``episode_length_s`` of control periods; the insert rule
   (``arm_scenes.inserted``: the tip ``success_depth`` down the hole, within ``clearance + success_margin`` of
   its axis) held for the last ``success_hold_steps`` periods is a success. An episode in which the node left
   policy mode (a fault) is a failure, counted as ``cut_short``.
4. **Stop**: an e-stop message (``std_msgs/Bool`` true); the node goes to damping; back to 1.

``success_rate`` over the episodes is the verdict, to set beside ``ctrl-rl eval``'s. Run by
``ctrl-rl deploy sim2sim <insert bundle>``. Needs numpy, mujoco, pyyaml; never torch.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import mujoco
import numpy as np

from ctrl_rl.robots.arm import build_arm_model, rest_qpos
from ctrl_rl.robots.arm_scenes import PEG, SOCKET, add_peg_and_socket, inserted, peg_in_hole

from . import messages as m
from .arm_sim2sim import ArmBridge, ArmBridgeConfig
from .arm_sim2sim import main as bridge_main

RESET_SETTLE_S = 0.3
"""Seconds the bridge holds a fresh reset (and waits for the node's damping) before it sends start."""


class InsertBridge(ArmBridge):
    """The insert task's cell: a socket on the table, a peg in the hand, episodes (the module docstring)."""

    def __init__(self, cfg: ArmBridgeConfig, transport: Any) -> None:
        if not cfg.object or cfg.object.get("kind") != "peg_socket":
            raise ValueError(f"the object bridge runs insert bundles (object.kind peg_socket), got object "
                             f"{cfg.object!r}; re-export the bundle with `ctrl-rl export <run>`")
        self.obj = SimpleNamespace(**cfg.object)
        super().__init__(cfg, transport)
        o = self.obj
        self.socket_qadr = int(self.model.joint(f"{SOCKET}_x").qposadr[0])
        self.socket_home = self.model.body(SOCKET).pos[:2].copy()
        self.peg_body, self.peg_geom = self.model.body(PEG).id, self.model.geom(f"{PEG}_geom").id
        self.nominal = (float(self.model.body_mass[self.peg_body]), self.model.body_inertia[self.peg_body].copy())
        self.episode_steps = max(1, round(o.episode_length_s / cfg.physics_dt))
        self.arm_qadr = np.array([self.model.joint(j).qposadr[0] for j in self.arm.joint_names])
        self.phase = "starting"
        """``starting`` (the node stands up; its commands apply), ``episode``, ``resetting`` (the bridge holds)."""
        self._phase_start = 0
        self._clean = True
        self.reset_world()
        self._pub_object = transport.publisher(cfg.object_pose_topic, m.PoseStamped)
        self._pub_estop = transport.publisher(cfg.estop_topic, m.Bool)
        self._pub_start = transport.publisher(cfg.start_topic, m.Bool)

    def build_model(self) -> tuple[mujoco.MjModel, Any]:
        """The arm with the peg and the socket, as the insert task built them."""
        return build_arm_model(self.arm, scene=lambda spec: add_peg_and_socket(spec, self.obj, self.arm.base_body,
                                                                                self.arm.ee_site))

    def reset_world(self) -> None:
        """The arm at its default pose and at rest, the socket and the peg's physics drawn (``InsertTask``'s
        draws), the arm held there by the bridge."""
        o, d, model = self.obj, self.data, self.model
        d.qpos[:] = rest_qpos(model, self.arm)
        d.qvel[:] = 0.0
        drawn = self.rng.uniform([o.socket_x[0], o.socket_y[0], o.socket_yaw[0]],
                                 [o.socket_x[1], o.socket_y[1], o.socket_yaw[1]])
        drawn[:2] -= self.socket_home
        d.qpos[self.socket_qadr:self.socket_qadr + 3] = drawn
        mass = self.rng.uniform(*o.object_mass)
        model.body_mass[self.peg_body] = mass
        model.body_inertia[self.peg_body] = self.nominal[1] * mass / self.nominal[0]
        model.geom_friction[self.peg_geom, 0] = self.rng.uniform(*o.object_friction)
        mujoco.mj_forward(model, d)
        super().apply(d.qpos[self.arm_qadr].copy(), None, None)

    def apply(self, pos: np.ndarray, kp: np.ndarray | None, kd: np.ndarray | None) -> None:
        """The node's command, except while the bridge holds the arm between episodes."""
        if self.phase != "resetting":
            super().apply(pos, kp, kd)

    def inserted_now(self) -> tuple[bool, float, float]:
        """Whether the insert rule holds this step, with the tip's depth down the hole and lateral error (m)."""
        o, sd = self.obj, self.data.sensordata
        lateral, depth = peg_in_hole(sd[self.sensors["peg_tip_pos"]], sd[self.sensors["socket_pos"]], o.hole_depth)
        ok = inserted(lateral, depth, o.success_depth * o.hole_depth, o.clearance + o.success_margin)
        return bool(ok), float(depth), float(lateral)

    def control_tick(self, k: int) -> None:
        """Publish the object's pose; run the episode's phases (the module docstring)."""
        sd = self.data.sensordata
        self._pub_object(m.PoseStamped(time.time(), sd[self.sensors["socket_pos"]].copy(),
                                       sd[self.sensors["socket_quat"]].copy(), self.obj.frame))
        if self.phase == "starting" and self.node_mode == "policy":
            self.phase, self._phase_start, self._clean, self.held = "episode", k, True, 0
        elif self.phase == "episode":
            self._clean = self._clean and self.node_mode == "policy"
            ok, depth, lateral = self.inserted_now()
            self.held = self.held + 1 if ok else 0
            if k - self._phase_start >= self.episode_steps:
                success = self._clean and self.held >= self.obj.success_hold_steps
                self.results.append({"success": float(success), "depth": depth, "lateral": lateral,
                                     "cut_short": float(not self._clean)})
                self._pub_estop(m.Bool(True))
                self.phase, self._phase_start = "resetting", k
                self.reset_world()
        elif self.phase == "resetting" and self.node_mode == "damping" and \
                (k - self._phase_start) * self.cfg.physics_dt >= RESET_SETTLE_S:
            self.phase = "starting"
            self._pub_start(m.Bool(True))

    def summary(self) -> dict[str, Any]:
        """Counters and the verdict: episodes judged, their success rate, the final depth and lateral error."""
        r = self.results
        mean = (lambda k: float(np.mean([x[k] for x in r])) if r else float("nan"))  # noqa: E731
        return {**self.stats, "sim_time": float(self.data.time), "episodes": len(r), "success_rate": mean("success"),
                "cut_short": int(sum(x["cut_short"] for x in r)), "insertion_depth": mean("depth"),
                "lateral_error": mean("lateral"), "phase": self.phase}


def main(argv: list[str] | None = None) -> None:
    bridge_main(argv, InsertBridge, "object_sim2sim", __doc__)


if __name__ == "__main__":
    main()
