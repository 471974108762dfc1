"""Rough terrain: generated profiles, determinism, ray casts, the curriculum rules, the task."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from ctrl_rl.robots.robot import build_model, load_robot
from ctrl_rl.robots.terrain import TERRAIN_TYPES, TerrainConfig, add_to_spec, generate
from ctrl_rl.sims import make_env
from ctrl_rl.sims.mujoco_cpu import CpuPhysics
from ctrl_rl.tasks.locomotion.curriculum import TerrainCurriculum, next_levels

sys.path.insert(0, str(Path(__file__).parent))

H = 0.1  # the default horizontal scale


def _only(kind: str, **kw: object) -> TerrainConfig:
    return TerrainConfig(num_rows=3, num_cols=1, proportions={kind: 1.0}, border=1.0, **kw)


def _centre_line(terrain, row: int) -> np.ndarray:
    """Heights along x through the middle of sub-terrain (row, 0)."""
    sub = terrain.sub_terrain(row, 0)
    return sub[:, sub.shape[1] // 2]


# -- generated profiles ------------------------------------------------------------------------
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_stairs_have_the_configured_rise_and_run(sign: float) -> None:
    cfg = _only("stairs_up" if sign > 0 else "stairs_down", step_height=(0.05, 0.15), step_width=0.3)
    terrain = generate(cfg)
    for row, rise in ((0, 0.05), (1, 0.10), (2, 0.15)):
        line = _centre_line(terrain, row)
        half = line[: len(line) // 2]  # edge -> platform
        levels, runs = np.unique(np.round(half / rise, 9), return_counts=True)
        assert np.allclose(levels, np.arange(len(levels)) * sign if sign > 0 else -np.arange(len(levels))[::-1])
        steps = int((cfg.size - cfg.platform) / 2 // cfg.step_width)
        assert len(levels) == steps + 1  # ground + one level per step (the last is the platform)
        treads = runs[:-1] if sign > 0 else runs[1:]
        assert np.all(treads == round(cfg.step_width / H))  # every tread is step_width long
        assert np.isclose(np.abs(np.diff(half)).max(), rise)  # one rise per edge, never two
        assert np.isclose(abs(half).max(), steps * rise)


@pytest.mark.parametrize("kind,sign", [("slope_up", 1.0), ("slope_down", -1.0)])
def test_slopes_have_the_configured_angle(kind: str, sign: float) -> None:
    cfg = _only(kind, slope=(0.1, 0.4))
    terrain = generate(cfg)
    for row, grade in ((0, 0.1), (2, 0.4)):
        line = _centre_line(terrain, row)
        ramp = np.diff(line[: int((cfg.size - cfg.platform) / 2 / H)])
        assert np.allclose(ramp, sign * grade * H)
        assert math.isclose(math.degrees(math.atan(abs(ramp[0]) / H)), math.degrees(math.atan(grade)), abs_tol=1e-9)
        platform = terrain.sub_terrain(row, 0)[37:43, 37:43]
        assert np.allclose(platform, platform[0, 0])  # flat where robots spawn


def test_roughness_and_obstacles_stay_within_their_bounds() -> None:
    rough = generate(_only("rough", roughness=(0.02, 0.06)))
    for row, amp in ((0, 0.02), (2, 0.06)):
        sub = rough.sub_terrain(row, 0)
        assert np.abs(sub).max() <= amp + 1e-12
        assert np.abs(sub).max() > 0.8 * amp  # the noise uses its range
        assert np.all(sub[35:45, 35:45] == 0.0)  # the platform
    blocks = generate(_only("obstacles", obstacle_height=(0.1, 0.2)))
    sub = blocks.sub_terrain(2, 0)
    assert set(np.unique(sub)) <= {0.0, 0.2, -0.2, 0.1, -0.1}
    assert len(np.unique(sub)) >= 3


def test_columns_follow_proportions_and_rows_difficulty() -> None:
    cfg = TerrainConfig(num_rows=5, num_cols=10)
    assert cfg.column_types() == ["flat", "rough", "slope_up", "slope_up", "slope_down", "stairs_up", "stairs_up",
                                  "stairs_down", "stairs_down", "obstacles"]
    assert [cfg.row_difficulty(r) for r in range(5)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert TerrainConfig(num_rows=3, difficulty=(0.5, 0.5)).row_difficulty(2) == 0.5
    with pytest.raises(ValueError, match="unknown type"):
        TerrainConfig(proportions={"lava": 1.0})
    with pytest.raises(ValueError, match=r"terrain.step_height must be \[low, high\]"):
        TerrainConfig(step_height=(0.2, 0.1))
    with pytest.raises(ValueError, match="terrain has no parameter"):
        TerrainConfig.from_dict({"stair_height": 0.1})


def test_same_seed_same_terrain_other_seed_other_terrain() -> None:
    a, b = generate(TerrainConfig(num_rows=2, seed=3)), generate(TerrainConfig(num_rows=2, seed=3))
    assert np.array_equal(a.heights, b.heights) and np.array_equal(a.origins, b.origins)
    c = generate(TerrainConfig(num_rows=2, seed=4))
    assert not np.array_equal(a.heights, c.heights)
    assert set(TERRAIN_TYPES) == set(a.types)


# -- ray casts ---------------------------------------------------------------------------------
def _terrain_physics(cfg: TerrainConfig) -> tuple:
    terrain = generate(cfg)
    model, _ = build_model(load_robot("ctrl_quad"), lambda spec: add_to_spec(spec, terrain))
    return terrain, CpuPhysics(model, 1, nthread=1)


def test_rays_hit_the_analytic_profile_within_a_millimetre() -> None:
    """Stairs and slopes have closed-form heights: MuJoCo's rays (robot excluded) must find them."""
    cfg = TerrainConfig(num_rows=2, num_cols=2, proportions={"stairs_up": 1, "slope_up": 1}, border=1.0,
                        step_height=(0.1, 0.1), slope=(0.3, 0.3))
    terrain, physics = _terrain_physics(cfg)
    run = (cfg.size - cfg.platform) / 2
    rng = np.random.default_rng(0)
    for col, kind in enumerate(terrain.types):
        x0, y0 = cfg.size * 1, cfg.size * col  # sub-terrain (row 1, col)
        # points in the middle of treads / on the straight part of a pyramid face (not on a ridge or an edge)
        d = rng.uniform(0.05, run - 0.05, 200)
        if kind == "stairs_up":
            d = (np.floor(d / cfg.step_width) + rng.uniform(0.4, 0.6, 200)) * cfg.step_width
            expected = np.minimum(np.floor(d / cfg.step_width), run // cfg.step_width) * 0.1
        else:
            expected = 0.3 * d
        # on the face x = x0 + d (distance d to the -x edge), away from the diagonals
        x = x0 + d - H / 2
        y = y0 + cfg.size / 2 + rng.uniform(-0.2, 0.2, 200)
        start = torch.tensor(np.stack([x, y, np.full_like(x, 5.0)], -1)[None])
        hit = 5.0 - physics.cast_down(start)[0].numpy()
        assert np.abs(hit - expected).max() < 1e-3, kind
        assert np.abs(terrain.height_at(x, y) - expected).max() < 1e-3, kind
    physics.close()


def test_lookup_equals_rays_everywhere_on_the_grid() -> None:
    """The fast lookup is MuJoCo's own surface, between samples too (triangles, not bilinear)."""
    terrain, physics = _terrain_physics(TerrainConfig(num_rows=3, num_cols=7, border=1.0))
    nx, ny = terrain.heights.shape
    rng = np.random.default_rng(1)
    xy = rng.uniform([-1.0, -1.0], [(nx - 1) * H - 1.0, (ny - 1) * H - 1.0], size=(3000, 2))
    start = torch.tensor(np.concatenate([xy, np.full((3000, 1), 5.0)], -1))[None]
    hit = 5.0 - physics.cast_down(start)[0].numpy()
    assert np.abs(hit - terrain.height_at(xy[:, 0], xy[:, 1])).max() < 1e-6
    as_torch = terrain.height_at(torch.tensor(xy[:, 0]), torch.tensor(xy[:, 1])).numpy()
    assert np.abs(as_torch - terrain.height_at(xy[:, 0], xy[:, 1])).max() < 1e-12
    physics.close()


# -- curriculum --------------------------------------------------------------------------------
def test_curriculum_promotes_demotes_and_recycles_the_top() -> None:
    """Sub-terrains of 8 m: up past 4 m walked; down under half the commanded distance."""
    levels = torch.tensor([2, 2, 2, 0, 9, 3])
    walked = torch.tensor([4.5, 3.0, 1.0, 0.2, 6.0, 3.9])
    commanded = torch.tensor([10.0, 5.0, 5.0, 5.0, 10.0, 8.0])  # metres asked over an episode
    random_levels = torch.tensor([7, 7, 7, 7, 4, 7])
    new = next_levels(levels, walked, commanded, sub_size=8.0, num_levels=10, random_levels=random_levels)
    # 4.5 > 4: up; 3.0 >= 2.5: stay; 1.0 < 2.5: down; level 0 never below 0; 9 -> 10 = past the top: random;
    # 3.9 < 4 and 3.9 < 4.0 (half of 8 m): down
    assert new.tolist() == [3, 2, 1, 0, 4, 2]


def test_curriculum_only_moves_finished_envs_and_logs_per_type() -> None:
    gen = torch.Generator().manual_seed(0)
    cur = TerrainCurriculum(num_envs=8, num_levels=10, num_types=4, max_init_level=3, enabled=True,
                            device=torch.device("cpu"))
    cur.start(gen)
    assert cur.levels.max() <= 3 and cur.types.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    before = cur.levels.clone()
    rows = torch.tensor([True] + [False] * 7)
    cur.update(rows, torch.full((8,), 5.0), torch.zeros(8), 8.0, gen)
    assert cur.levels[0] == before[0] + 1 and torch.equal(cur.levels[1:], before[1:])
    log = cur.log(["flat", "stairs_up", "stairs_up", "rough"])
    assert set(log) == {"Curriculum/terrain_level", "Curriculum/terrain_level/flat",
                        "Curriculum/terrain_level/stairs_up", "Curriculum/terrain_level/rough"}
    assert torch.isclose(log["Curriculum/terrain_level/stairs_up"], cur.levels[2:6].float().mean())
    off = TerrainCurriculum(8, 10, 4, 3, enabled=False, device=torch.device("cpu"))
    off.start(gen)
    fixed = off.levels.clone()
    off.update(torch.ones(8, dtype=torch.bool), torch.full((8,), 9.0), torch.zeros(8), 8.0, gen)
    assert torch.equal(off.levels, fixed)


# -- the task ----------------------------------------------------------------------------------
SMALL = {"terrain": {"num_rows": 4, "num_cols": 7, "border": 2.0}}


def test_rough_task_spawns_on_platforms_and_moves_envs_between_levels() -> None:
    env = make_env("mujoco", "quadruped_velocity_rough", 14, seed=0, **SMALL)
    task = env.task
    origins = task.origins[task.curriculum.levels, task.curriculum.types]
    pos = env.physics.qpos[:, :3].float()
    assert torch.all((pos[:, :2] - origins[:, :2]).abs() <= 0.5 + 1e-6)
    ground = task.terrain.height_at(pos[:, 0], pos[:, 1])
    assert torch.allclose(pos[:, 2] - ground, torch.full((14,), task.robot.init_height))
    assert env.obs_dims["critic"] - 187 == env.obs_dims["policy"] + 3 + 1 + 4  # scan in the critic only
    # walk env 0 far from its spawn point and end its episode: it is promoted
    task.spawn_xy[0] = pos[0, :2] - torch.tensor([4.5, 0.0])
    level = int(task.curriculum.levels[0])
    rows = torch.zeros(14, dtype=torch.bool)
    rows[0] = True
    task.begin_reset(env.physics, rows, env._generator)
    assert int(task.curriculum.levels[0]) in (level + 1, *range(4))  # up, or recycled from the top
    env.close()


def test_leaving_the_grid_is_a_time_out_not_a_failure() -> None:
    env = make_env("mujoco", "quadruped_velocity_rough", 2, seed=0, **SMALL)
    qpos, qvel = env.physics.qpos.float().clone(), env.physics.qvel.float().clone()
    qpos[0, 0] = -2.5  # beyond the border, off the heightfield
    env.physics.write_rows(torch.tensor([True, False]), qpos, qvel)
    _, _, terminated, truncated, info = env.step(torch.zeros(2, 12))
    assert bool(truncated[0]) and not bool(terminated[0]) and not bool(truncated[1])
    assert "Curriculum/terrain_level" in info["log"]
    env.close()


def test_height_scan_reads_the_terrain_around_the_base() -> None:
    """On a stairs-up sub-terrain, the scan rises towards the platform; on flat ground it reads ~0."""
    kw = {"terrain": {"num_rows": 1, "num_cols": 1, "proportions": {"stairs_up": 1.0}, "difficulty": [1.0, 1.0],
                      "border": 1.0}, "spawn_radius": 0.0, "init_base_vel": 0.0, "init_joint_noise": 0.0}
    env = make_env("mujoco", "quadruped_velocity_rough", 1, seed=0, **kw)
    task = env.task
    s = task.signals(env.physics)
    assert torch.allclose(s["base_height"], torch.tensor([[task.robot.init_height]]), atol=1e-4)
    assert s["height_scan"].abs().max() < 1e-3  # 1.6 x 1.0 m grid inside the 2 m platform
    qpos, qvel = env.physics.qpos.float().clone(), env.physics.qvel.float().clone()
    qpos[0, :2] -= torch.tensor([2.0, 0.0])  # onto the steps, 2 m towards -x
    qpos[0, 3:7] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    env.physics.write_rows(torch.tensor([True]), qpos, qvel)
    scan = task.signals(env.physics)["height_scan"][0].reshape(17, 11)
    front, back = scan[-1].mean(), scan[0].mean()
    assert back > front  # lower ground behind: more clearance there
    ground = task.terrain.height_at(*task.scanner.points(qpos[:, :3], qpos[:, 3:7])[0].unbind(-1))
    assert torch.allclose(scan.flatten(), qpos[0, 2] - ground - task.scan_offset, atol=1e-5)
    env.close()


def test_rough_env_passes_the_vecenv_conformance_suite() -> None:
    from vecenv_conformance import check_vecenv

    def rough(**kw):
        return lambda n, seed: make_env("mujoco", "quadruped_velocity_rough", n, seed=seed,
                                        **{**SMALL, "episode_length_s": 0.4, **kw})

    check_vecenv(rough(), num_envs=4, seed=2, make_untruncated=rough(episode_length_s=1e9))


def test_rough_task_options_are_validated() -> None:
    with pytest.raises(ValueError, match="spawn_radius must be in"):
        make_env("mujoco", "quadruped_velocity_rough", 1, seed=0, spawn_radius=3.0)
    with pytest.raises(ValueError, match="height_scan.method must be"):
        make_env("mujoco", "quadruped_velocity_rough", 1, seed=0, height_scan={"method": "lidar"})
    env = make_env("mujoco", "quadruped_velocity_rough", 1, seed=0, actor_height_scan=True, **SMALL)
    assert env.obs_dims["policy"] == 45 + 187
    meta = env.deploy_metadata()
    assert meta["terrain"]["num_rows"] == 4 and len(meta["height_scan"]["points"]) == 187
    env.close()


def test_limb_collisions_follow_the_option() -> None:
    from ctrl_rl.tasks.locomotion.rough import RoughVelocityTask, RoughVelocityTaskConfig

    robot = load_robot("ctrl_quad")
    on, _ = RoughVelocityTask.build_model(RoughVelocityTaskConfig.from_kwargs(**SMALL), robot)
    off, _ = RoughVelocityTask.build_model(RoughVelocityTaskConfig.from_kwargs(limb_collisions=False, **SMALL),
                                           robot)
    robot_geoms = [i for i in range(off.ngeom) if off.geom_bodyid[i] > 0]
    assert sum(off.geom_contype[i] for i in robot_geoms) == 5  # feet and trunk only
    colliders = [i for i in range(on.ngeom) if (on.geom(i).name or "").startswith(("FR_calf_collider", "FR_thigh_"))]
    assert len(colliders) == 7 + 6 and all(on.geom_contype[i] == 1 and on.geom_type[i] == 2 for i in colliders)
    assert on.body_mass.sum() == pytest.approx(off.body_mass.sum())  # colliders add no mass
    assert on.nhfield == 1 and not any(on.geom_type[i] == mujoco.mjtGeom.mjGEOM_PLANE for i in range(on.ngeom))


def test_limb_colliders_of_a_body_with_several_capsules_are_named_apart() -> None:
    """The Go1's thigh holds more than one limb capsule: its colliders are numbered per body, not per
    capsule (the rough task failed to build for the Go1 with "repeated name 'FR_thigh_collider_0'")."""
    from ctrl_rl.tasks.locomotion.rough import RoughVelocityTask, RoughVelocityTaskConfig

    model, _ = RoughVelocityTask.build_model(RoughVelocityTaskConfig.from_kwargs(**SMALL), load_robot("unitree_go1"))
    names = [model.geom(i).name for i in range(model.ngeom) if "_collider_" in (model.geom(i).name or "")]
    assert len(names) == len(set(names)) and sum(n.startswith("FR_thigh_collider_") for n in names) > 1


@pytest.mark.slow
def test_same_terrain_and_scan_on_mujoco_warp() -> None:
    """sim=mjwarp builds the same heightfield, its ray kernel scans what the CPU lookup reads, and a
    robot standing on the terrain (limb colliders included) stays as it does on the CPU backend."""
    kw = {**SMALL, "push_velocity": 0.0}
    warp = make_env("mjwarp", "quadruped_velocity_rough", 8, seed=0, device="cpu", **kw)
    cpu = make_env("mujoco", "quadruped_velocity_rough", 8, seed=0, **kw)
    assert np.array_equal(warp.physics.model.hfield_data, cpu.physics.model.hfield_data)
    assert warp.task.scanner.method == "ray" and cpu.task.scanner.method == "lookup"
    for _ in range(15):
        warp.step(torch.zeros(8, 12))
        cpu.step(torch.zeros(8, 12))
    assert torch.equal(warp.episode_length, cpu.episode_length)  # nobody fell on either
    sw, sc = warp.task.signals(warp.physics), cpu.task.signals(cpu.physics)
    assert (sw["base_height"] - sc["base_height"]).abs().max() < 0.01
    xy = warp.task.scanner.points(sw["_base_pos"], sw["imu_quat"])
    rays = warp.task.scanner.ground(xy)
    assert (rays - warp.task.terrain.height_at(xy[..., 0], xy[..., 1])).abs().max() < 1e-5
    warp.close()
    cpu.close()


def test_a_bundle_whose_actor_needs_the_scan_is_refused_without_a_height_map_source(tmp_path: Path) -> None:
    """The scan reaches the bundle as a term; a robot without a height-map source refuses it up front,
    and with one the numpy runtime rebuilds the env's observation from the scan it is given."""
    from ctrl_rl.app.export import export
    from ctrl_rl.app.train import train
    from ctrl_rl.deploy.robot_policy import RobotPolicy
    from ctrl_rl.robots.terms import ROBOT_SIGNALS

    kw = ["task=quadruped_velocity_rough", "env.num_envs=16", "algo.num_steps_per_env=8", "runner.max_iterations=1",
          "runner.progress=false", f"runner.log_root={tmp_path}", "task.kwargs.actor_height_scan=true",
          "task.kwargs.obs_noise=0.0", "task.kwargs.terrain.num_rows=2", "task.kwargs.terrain.num_cols=7"]
    bundle = export(str(train(kw)), [])
    with pytest.raises(ValueError, match="needs a height-map source"):
        RobotPolicy(bundle)
    policy = RobotPolicy(bundle, sources=("height_scan",))
    assert [t.name for t in policy.terms][-1] == "height_scan"
    env = make_env("mujoco", "quadruped_velocity_rough", 1, seed=0, actor_height_scan=True, obs_noise=0.0,
                   terrain={"num_rows": 2, "num_cols": 7})
    s = env.task.signals(env.physics)
    signals = {k: v[0].double().numpy() for k, v in s.items() if k in ROBOT_SIGNALS or k == "height_scan"}
    obs = env.task.observe(env.physics, None)["policy"][0].numpy()
    assert np.abs(policy.frame(signals) - obs).max() < 1e-5
    env.close()


def test_sim2sim_bridge_rebuilds_the_training_terrain_and_starts_on_a_platform() -> None:
    """The bridge builds the bundle's terrain (numpy + mujoco only) with the limb colliders, and the
    robot starts standing on the chosen sub-terrain's platform, its ground under its feet."""
    import uuid
    from dataclasses import asdict

    from ctrl_rl.deploy.sim2sim import BridgeConfig, Sim2SimBridge
    from ctrl_rl.deploy.transports import make_transport

    cfg = TerrainConfig(num_rows=3, num_cols=7, border=2.0)
    terrain = generate(cfg)
    transport = make_transport("dds", namespace=f"/t{uuid.uuid4().hex[:8]}")
    bridge = Sim2SimBridge(BridgeConfig(terrain=asdict(cfg), terrain_cell=(2, 4), start="standing"), transport)
    try:
        assert np.array_equal(bridge.terrain.heights, terrain.heights)
        assert bridge.model.nhfield == 1 and any("_collider_" in (bridge.model.geom(i).name or "")
                                                 for i in range(bridge.model.ngeom))
        x, y, z = terrain.origins[2, 4]
        assert terrain.types[4] == "stairs_up" and z > 0.1  # the top of a stair pyramid
        assert np.allclose(bridge.data.qpos[:3], [x, y, z + load_robot("ctrl_quad").init_height])
        with pytest.raises(ValueError, match="outside the 3 x 7 grid"):
            Sim2SimBridge(BridgeConfig(terrain=asdict(cfg), terrain_cell=(3, 0), start="standing"), transport)
    finally:
        transport.close()
