"""The deploy node's height-map input: the message layout, its checks, and the sim2sim bridge's map
against the scan the policy was trained on."""

from __future__ import annotations

import math
import uuid

import numpy as np
import pytest
import torch

from ctrl_rl.deploy import messages as m
from ctrl_rl.deploy.height_map import HeightMapSpec, grid_shape, yaw_points
from ctrl_rl.tasks.locomotion.height_scan import HeightScanConfig

GRID = HeightScanConfig().grid()
META = {"obs_terms": [{"name": "joint_pos_rel", "dim": 12}, {"name": "height_scan", "dim": len(GRID)}],
        "height_scan": {"points": GRID.tolist(), "offset": 0.3, "frame": "yaw"}}


def test_the_default_scan_is_a_17_by_11_x_major_grid() -> None:
    spec = HeightMapSpec.from_metadata(META)
    assert spec.size == 187 and spec.shape == (17, 11)
    assert spec.layout() == [("x", 17, 187), ("y", 11, 11)]
    assert np.allclose(GRID[:11, 0], -0.8) and np.allclose(GRID[:11, 1], np.linspace(-0.5, 0.5, 11))  # x-major
    assert grid_shape(GRID[::-1]) is None and grid_shape(GRID[:-1]) is None  # not a full x-major grid


def test_a_blind_bundle_has_no_spec_and_a_bundle_without_points_is_refused() -> None:
    assert HeightMapSpec.from_metadata({"obs_terms": [{"name": "joint_pos_rel", "dim": 12}]}) is None
    with pytest.raises(ValueError, match="lacks height_scan.points/offset: re-export"):
        HeightMapSpec.from_metadata({"obs_terms": META["obs_terms"]})
    with pytest.raises(ValueError, match="186 points for a term of 187"):
        HeightMapSpec.from_metadata({**META, "height_scan": {"points": GRID[:-1].tolist(), "offset": 0.3}})


def test_parse_subtracts_the_offset_and_accepts_an_empty_layout() -> None:
    spec = HeightMapSpec.from_metadata(META)
    clearance = np.linspace(0.1, 0.5, 187)
    np.testing.assert_allclose(spec.parse(spec.message(clearance), 3.0), clearance - 0.3)
    np.testing.assert_allclose(spec.parse(m.Float64MultiArray(clearance, []), 3.0), clearance - 0.3)
    np.testing.assert_allclose(spec.parse(m.Float64MultiArray(clearance, [("point", 187, 1)]), 3.0), clearance - 0.3)


@pytest.mark.parametrize("msg, match", [
    (m.Float64MultiArray(np.zeros(186), []), "186 values; the bundle's scan has 187 points"),
    (m.Float64MultiArray(np.zeros(0), []), "0 values"),
    (m.Float64MultiArray(np.zeros(187), [("x", 11, 187), ("y", 17, 17)]), r"layout sizes \[11, 17\]"),
    (m.Float64MultiArray(np.zeros(187), [], data_offset=3), "data_offset 3"),
    (m.Float64MultiArray(np.where(np.arange(187) == 40, np.nan, 0.3), []), "1 non-finite value.*point 40"),
    (m.Float64MultiArray(np.full(187, np.inf), []), "187 non-finite"),
    (m.Float64MultiArray(np.full(187, -3.5), []), "clearance 3.5 m exceeds safety.max_height_map 3.0"),
])
def test_a_bad_height_map_is_refused_by_name(msg, match) -> None:
    with pytest.raises(ValueError, match=match):
        HeightMapSpec.from_metadata(META).parse(msg, 3.0)


def test_yaw_points_turn_with_the_heading() -> None:
    pts = np.array([[1.0, 0.0], [0.0, 1.0]])
    xs, ys = yaw_points(pts, 2.0, 3.0, math.pi / 2)
    np.testing.assert_allclose(np.stack([xs, ys], -1), [[2.0, 4.0], [1.0, 3.0]], atol=1e-12)


def test_the_bridge_publishes_the_scan_the_policy_trained_on() -> None:
    """The sim2sim bridge's height map, parsed as the node parses it, equals the training env's
    scan (noise off) for the same robot pose on the same terrain."""
    from dataclasses import asdict

    from ctrl_rl.deploy.sim2sim import BridgeConfig, Sim2SimBridge
    from ctrl_rl.deploy.transports import make_transport
    from ctrl_rl.sims import make_env

    env = make_env("mujoco", "quadruped_velocity_rough", 4, seed=3, actor_height_scan=True, obs_noise=0.0,
                   terrain={"num_rows": 3, "num_cols": 7})
    env.reset(seed=3)
    for _ in range(5):  # off the spawn pose: some roll, pitch and heading
        env.step(torch.full((4, env.action_dim), 0.3))
    phys = env.physics  # sensors of the current qpos (after mj_step they lag it by one substep)
    phys.write_rows(torch.ones(4, dtype=torch.bool), phys.qpos.clone(), phys.qvel.clone())
    signals = env.task.signals(env.physics)
    meta = env.deploy_metadata()
    spec = HeightMapSpec.from_metadata(meta)
    transport = make_transport("dds", namespace=f"/t{uuid.uuid4().hex[:8]}")
    bridge = Sim2SimBridge(BridgeConfig(terrain=asdict(env.task.cfg.terrain), height_map=meta["height_scan"],
                                        start="standing"), transport)
    try:
        for i in range(4):  # each env's pose in the bridge's model (same robot, same terrain)
            bridge.data.qpos[:] = env.physics.qpos[i].double().numpy()
            bridge.mj.mj_forward(bridge.model, bridge.data)
            scan = spec.parse(bridge.height_map(), 3.0)
            np.testing.assert_allclose(scan, signals["height_scan"][i].double().numpy(), atol=1e-5)
    finally:
        transport.close()
        env.close()
