"""The velocity tasks' left/right mirror maps by name (``VelocityTask.mirror_parts``; ``algo.symmetry``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ctrl_rl.mirror import SignedPerm, pair_points


def mirror_parts(task: Any) -> dict[str, SignedPerm]:
    """The signed permutations :data:`~ctrl_rl.robots.terms.TERM_MIRRORS` refers to by name: the robot YAML's
    joint map (checked against the default pose, which actions are offsets from) and the feet paired by position."""
    joints = SignedPerm(*task.robot.mirror_map())
    q0 = task.default_pose.cpu().numpy()
    if not np.allclose(joints(q0), q0, atol=1e-6):
        raise ValueError(f"robot {task.robot.name}: its default_pose is not its own mirror image under the "
                         "YAML's `mirror` map, so joint_pos_rel cannot mirror; fix the pose or the map")
    feet = SignedPerm(pair_points(task.foot_points, tol=1e-4), np.ones(len(task.feet)))
    return {"joints": joints, "actions": joints.restrict(task.robot.action_index), "feet": feet}
