"""Sim2sim for an arm bundle with an object (insert, lift): episodes on the deploy node's topics, judged as
training does.

The bridge rebuilds the arm and the task's scene from the bundle (``object`` metadata; the peg and socket or
the cube of ``ctrl_rl.robots.arm_scenes``, the very edit training made, under the contact model the task
trained on where the bundle names it), publishes the arm's ``JointState`` and the object's pose as
``geometry_msgs/PoseStamped`` in the bundle's object frame (what motion capture or a fiducial tracker gives a
robot), applies the node's joint commands, and plays the operator of a real cell, episode by episode:

1. **Reset**: the arm at its default pose, the object drawn uniformly in the task's ranges (the socket's
   position and yaw; the cube's position and yaw and, for lift, the episode's target height, which it sends
   on ``lift_command`` as ``std_msgs/Float64``), the object's friction and mass drawn in theirs. Between
   episodes the bridge holds the arm at that pose itself (the homing a cell's own controller does) and
   ignores the node, which is in damping.
2. **Start**: a start message (``std_msgs/Bool`` true); the node stands the arm up (to the bundle's rest
   targets) and runs the policy.
3. **Episode**: from the node's first policy tick, ``episode_length_s`` of control periods; the task's rule
   held for the last ``success_hold_steps`` periods is a success (insert, ``arm_scenes.inserted``: the tip
   ``success_depth`` down the hole, within ``clearance + success_margin`` of its axis; lift: the cube's centre
   within ``success_tolerance`` of the target height). An episode in which the node left policy mode (a
   fault) is a failure, counted as ``cut_short``; one the run's end stopped (the node's status names a stop,
   not a fault) is not judged.
4. **Stop**: an e-stop message (``std_msgs/Bool`` true); the node goes to damping; back to 1.

``success_rate`` over the episodes is the verdict, to set beside ``ctrl-rl eval``'s. Run by
``ctrl-rl deploy sim2sim <bundle>``. Needs numpy, mujoco, pyyaml; never torch.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, ClassVar

import mujoco
import numpy as np

from ctrl_rl.robots.arm import build_arm_model, rest_qpos
from ctrl_rl.robots.arm_scenes import CUBE, PEG, SOCKET, add_cube, add_peg_and_socket, inserted, peg_in_hole
from ctrl_rl.robots.physics import CONES

from . import messages as m
from .arm_sim2sim import ArmBridge, ArmBridgeConfig
from .arm_sim2sim import main as bridge_main

RESET_SETTLE_S = 0.3
"""Seconds the bridge holds a fresh reset (and waits for the node's damping) before it sends start."""


class ObjectBridge(ArmBridge):
    """A cell with an object, run in episodes (the module docstring); a task's bridge says what the object is
    (:meth:`scene`), how a reset draws it (:meth:`draw`), where it is (:meth:`object_pose`) and how a step is
    judged (:meth:`judge`)."""

    KIND: ClassVar[str]
    """The bundle's ``object.kind`` this bridge runs."""

    def __init__(self, cfg: ArmBridgeConfig, transport: Any) -> None:
        if not cfg.object or cfg.object.get("kind") != self.KIND:
            raise ValueError(f"{type(self).__name__} runs bundles whose object.kind is {self.KIND!r}, got object "
                             f"{cfg.object!r}; re-export the bundle with `ctrl-rl export <run>`")
        self.obj = SimpleNamespace(**cfg.object)
        super().__init__(cfg, transport)
        self.episode_steps = max(1, round(self.obj.episode_length_s / cfg.physics_dt))
        self.arm_qadr = np.array([self.model.joint(j).qposadr[0] for j in self.arm.joint_names])
        self.phase = "starting"
        """``starting`` (the node stands up; its commands apply), ``episode``, ``resetting`` (the bridge holds),
        ``ended`` (the node was stopped, the run is over)."""
        self._phase_start = 0
        self._clean = True
        self._nominal: dict[int, tuple[float, np.ndarray]] = {}
        """Each drawn body's mass and inertia as built, which every draw scales from."""
        self.last: dict[str, float] = {}
        """The latest step's measures (:meth:`judge`): an episode's are its last step's."""
        self.reset_world()
        self._pub_object = transport.publisher(cfg.object_pose_topic, m.PoseStamped)
        self._pub_estop = transport.publisher(cfg.estop_topic, m.Bool)
        self._pub_start = transport.publisher(cfg.start_topic, m.Bool)

    # -- what a task's bridge says ------------------------------------------------------------------
    def scene(self, spec: mujoco.MjSpec) -> None:
        raise NotImplementedError

    def draw(self) -> None:
        """Put the object where a reset puts it (``self.data.qpos``) and draw its physics."""
        raise NotImplementedError

    def object_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """The object's position and quaternion in the object frame, as the sensors give them."""
        raise NotImplementedError

    def judge(self) -> tuple[bool, dict[str, float]]:
        """Whether the task's rule holds this step, and the measures reported with it."""
        raise NotImplementedError

    def rule(self) -> str:
        """The success rule in words (the verdict's sentence)."""
        raise NotImplementedError

    def held_for(self) -> str:
        return f"for the last {self.obj.success_hold_steps * self.cfg.control_dt:.2f} s"

    # -- the cell -----------------------------------------------------------------------------------
    def build_model(self) -> tuple[mujoco.MjModel, Any]:
        """The arm with the task's scene, as training built it, and the contact model the bundle names."""
        model, sensors = build_arm_model(self.arm, scene=self.scene)
        contact = getattr(self.obj, "contact", None)
        if contact:
            model.opt.cone, model.opt.impratio = CONES[contact["cone"]], float(contact["impratio"])
        return model, sensors

    def draw_physics(self, body: int, geom: int) -> None:
        """The object's mass (its inertia scaled with it) and sliding friction, uniform in the task's ranges."""
        model = self.model
        built = (float(model.body_mass[body]), model.body_inertia[body].copy())
        mass0, inertia0 = self._nominal.setdefault(body, built)
        mass = self.rng.uniform(*self.obj.object_mass)
        model.body_mass[body] = mass
        model.body_inertia[body] = inertia0 * mass / mass0
        model.geom_friction[geom, 0] = self.rng.uniform(*self.obj.object_friction)

    def reset_world(self) -> None:
        """The arm at its default pose and at rest, the object drawn (the task's draws), the arm held there by
        the bridge."""
        d = self.data
        d.qpos[:] = rest_qpos(self.model, self.arm)
        d.qvel[:] = 0.0
        self.draw()
        mujoco.mj_forward(self.model, d)
        super().apply(d.qpos[self.arm_qadr].copy(), None, None)

    def apply(self, pos: np.ndarray, kp: np.ndarray | None, kd: np.ndarray | None) -> None:
        """The node's command, except while the bridge holds the arm between episodes."""
        if self.phase != "resetting":
            super().apply(pos, kp, kd)

    def control_tick(self, k: int) -> None:
        """Publish the object's pose; run the episode's phases (the module docstring)."""
        self._pub_object(m.PoseStamped(time.time(), *self.object_pose(), self.obj.frame))
        if self.phase == "starting" and self.node_mode == "policy":
            self.phase, self._phase_start, self._clean, self.held = "episode", k, True, 0
        elif self.phase == "episode" and self.node_stop and self.node_mode != "policy":
            self.phase = "ended"  # the run's end stopped the node mid-episode: not judged (a fault would be)
        elif self.phase == "episode":
            self._clean = self._clean and self.node_mode == "policy"
            ok, self.last = self.judge()
            self.held = self.held + 1 if ok else 0
            if k - self._phase_start >= self.episode_steps:
                success = self._clean and self.held >= self.obj.success_hold_steps
                self.results.append({"success": float(success), **self.last, "cut_short": float(not self._clean)})
                self._pub_estop(m.Bool(True))
                self.phase, self._phase_start = "resetting", k
                self.reset_world()
        elif self.phase == "resetting" and self.node_mode == "damping" and \
                (k - self._phase_start) * self.cfg.physics_dt >= RESET_SETTLE_S:
            self.phase = "starting"
            self._pub_start(m.Bool(True))

    def summary(self) -> dict[str, Any]:
        """Counters and the verdict: episodes judged, their success rate and the mean of each final measure."""
        r = self.results
        measures = {k: float(np.mean([x[k] for x in r])) if r else float("nan") for k in self.last or {}}
        return {**self.stats, "sim_time": float(self.data.time), "task": self.KIND, "rule": self.rule(),
                "episodes": len(r), "success_rate": float(np.mean([x["success"] for x in r])) if r else float("nan"),
                "cut_short": int(sum(x["cut_short"] for x in r)), "measures": measures, "phase": self.phase}


class InsertBridge(ObjectBridge):
    """The insert task's cell: a socket on the table, a peg in the hand."""

    KIND = "peg_socket"

    def rule(self) -> str:
        return f"the peg down the hole {self.held_for()}"

    def scene(self, spec: mujoco.MjSpec) -> None:
        add_peg_and_socket(spec, self.obj, self.arm.base_body, self.arm.ee_site)

    def draw(self) -> None:
        """The socket's position and yaw and the peg's physics (``InsertTask``'s draws)."""
        o, model = self.obj, self.model
        qadr = int(model.joint(f"{SOCKET}_x").qposadr[0])
        drawn = self.rng.uniform([o.socket_x[0], o.socket_y[0], o.socket_yaw[0]],
                                 [o.socket_x[1], o.socket_y[1], o.socket_yaw[1]])
        drawn[:2] -= model.body(SOCKET).pos[:2]  # the joints move the socket from its home
        self.data.qpos[qadr:qadr + 3] = drawn
        self.draw_physics(model.body(PEG).id, model.geom(f"{PEG}_geom").id)

    def object_pose(self) -> tuple[np.ndarray, np.ndarray]:
        sd = self.data.sensordata
        return sd[self.sensors["socket_pos"]].copy(), sd[self.sensors["socket_quat"]].copy()

    def judge(self) -> tuple[bool, dict[str, float]]:
        o, sd = self.obj, self.data.sensordata
        lateral, depth = peg_in_hole(sd[self.sensors["peg_tip_pos"]], sd[self.sensors["socket_pos"]], o.hole_depth)
        ok = inserted(lateral, depth, o.success_depth * o.hole_depth, o.clearance + o.success_margin)
        return bool(ok), {"insertion_depth": float(depth), "lateral_error": float(lateral)}


class LiftBridge(ObjectBridge):
    """The lift task's cell: a cube on the table and, each episode, a target height sent on ``lift_command``."""

    KIND = "cube"

    def __init__(self, cfg: ArmBridgeConfig, transport: Any) -> None:
        self.lift_target = 0.0
        """This episode's target height of the cube's centre above the table (m)."""
        super().__init__(cfg, transport)
        self._pub_lift = transport.publisher(cfg.lift_command_topic, m.Float64)

    def scene(self, spec: mujoco.MjSpec) -> None:
        add_cube(spec, self.obj.half_size, sum(self.obj.object_mass) / 2, self.arm.base_body)

    def draw(self) -> None:
        """The cube at rest on the table, its position and yaw uniform, its physics, and the target height
        (``LiftTask``'s draws)."""
        o, model = self.obj, self.model
        x, y, yaw = self.rng.uniform([o.cube_x[0], o.cube_y[0], o.cube_yaw[0]],
                                     [o.cube_x[1], o.cube_y[1], o.cube_yaw[1]])
        a = int(model.joint(f"{CUBE}_joint").qposadr[0])
        self.data.qpos[a:a + 7] = [x, y, o.half_size, np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
        self.draw_physics(model.body(CUBE).id, model.geom(f"{CUBE}_geom").id)
        self.lift_target = float(self.rng.uniform(*o.lift_height))

    def object_pose(self) -> tuple[np.ndarray, np.ndarray]:
        sd = self.data.sensordata
        return sd[self.sensors["object_pos"]].copy(), sd[self.sensors["object_quat"]].copy()

    def control_tick(self, k: int) -> None:
        """The target height with every object pose (a set point the node holds), then the episode's phases."""
        self._pub_lift(m.Float64(self.lift_target))
        super().control_tick(k)

    def rule(self) -> str:
        tolerance = self.obj.success_tolerance * 100
        return f"the cube's centre within {tolerance:g} cm of its target height {self.held_for()}"

    def judge(self) -> tuple[bool, dict[str, float]]:
        height = float(self.data.sensordata[self.sensors["object_pos"]][2])
        error = abs(height - self.lift_target)
        return error < self.obj.success_tolerance, {"object_height": height, "height_error": error}


BRIDGES = {b.KIND: b for b in (InsertBridge, LiftBridge)}
"""The bridge of each ``object.kind``."""


def main(argv: list[str] | None = None) -> None:
    def bridge(cfg: ArmBridgeConfig, transport: Any) -> ObjectBridge:
        kind = (cfg.object or {}).get("kind")
        if kind not in BRIDGES:
            raise ValueError(f"no sim2sim cell for object.kind {kind!r}; there are {sorted(BRIDGES)}")
        return BRIDGES[kind](cfg, transport)
    bridge_main(argv, bridge, "object_sim2sim", __doc__)


if __name__ == "__main__":
    main()
