"""RobotPolicy: a bundle driven from robot signals reproduces the training env, without torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from toy_robot import write_toy_robot

from ctrl_rl.app.export import export
from ctrl_rl.app.train import train
from ctrl_rl.deploy.robot_policy import RobotPolicy, joint_index_map
from ctrl_rl.robots.action_filter import lowpass_coefficients
from ctrl_rl.robots.terms import ROBOT_SIGNALS
from ctrl_rl.sims import make_env

TASK = "quadruped_velocity_flat"
EXACT = {"obs_noise": 0.0, "max_action_delay": 0, "push_velocity": 0.0}  # what a robot never gets in training


def tiny_bundle(root, task: str, *overrides: str):
    run = train([f"task={task}", "env.num_envs=8", "algo.num_steps_per_env=8", "runner.max_iterations=1",
                 "algo.actor_hidden=[32]", "algo.critic_hidden=[32]", "runner.progress=false",
                 f"runner.log_root={root}", *overrides])
    return export(str(run), [])


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return tiny_bundle(tmp_path_factory.mktemp("runs"), TASK)


def test_robot_policy_reproduces_env_observations_and_targets(bundle):
    """Signals reported in a shuffled joint order, mapped by name: same obs and joint targets
    as the env computes, step after step (so last_action bookkeeping matches too)."""
    reproduce(RobotPolicy(bundle), TASK, steps=60)


@pytest.mark.parametrize("acting", [None, [".*_knee"]])
def test_per_joint_action_scales_and_acting_joints_reach_the_bundle(tmp_path, acting):
    """A robot YAML may scale each joint's action (hips 0.25, knees 0.1 here) and let the policy move only
    some joints (the knees; the hips hold their default pose): the env and the bundle turn the same
    actions into the same targets, and the network has one output per acting joint."""
    yaml = write_toy_robot(tmp_path / "robot")
    text = yaml.read_text().replace("action_scale: 0.25", "action_scale: [0.25, 0.1]")  # per leg
    yaml.write_text(text + (f"action_joints: {acting}\n" if acting else ""))
    rp = RobotPolicy(tiny_bundle(tmp_path, TASK, f"task.kwargs.robot={yaml}"))
    np.testing.assert_allclose(rp.action_scale, [0.25, 0.1] * 4)
    assert rp.policy.action_dim == (4 if acting else 8) == len(rp.last_action)
    assert [rp.joint_names[i] for i in rp.action_index] == \
        ([j for j in rp.joint_names if j.endswith("_knee")] if acting else rp.joint_names)
    reproduce(rp, TASK, steps=20, robot=str(yaml))


def test_a_humanoid_bundle_runs_the_gait_clock_as_training_did(tmp_path):
    """The humanoid observes a gait clock that restarts with each episode: the bundle carries its period
    and RobotPolicy counts its own ticks, equal to the env's through falls and resets."""
    rp = RobotPolicy(tiny_bundle(tmp_path, "humanoid_velocity_flat"))
    assert rp.gait_period == 0.8 and any(t.name == "gait_clock" for t in rp.terms)
    # 1 s episodes: the clock restarts twice in 150 steps, mid-period (1.0 s is 1.25 periods)
    assert reproduce(rp, "humanoid_velocity_flat", steps=150, episode_length_s=1.0) >= 2


def test_a_clocked_quadruped_bundle_runs_its_trot_clock_as_training_did(tmp_path):
    """``task.kwargs.gait_period`` on a quadruped: the bundle carries the period and RobotPolicy's clock
    restarts with each episode, tick for tick with the env's (0.5 s episodes: two restarts in 60 steps)."""
    rp = RobotPolicy(tiny_bundle(tmp_path, TASK, "task.kwargs.gait_period=0.5"))
    assert rp.gait_period == 0.5 and rp.terms[-1].name == "gait_clock"
    assert reproduce(rp, TASK, steps=60, gait_period=0.5, episode_length_s=0.5) >= 2


@pytest.mark.parametrize("value", [1.0, -0.1, float("nan")])
def test_an_action_filter_outside_0_1_is_refused_when_the_config_is_built(tmp_path, value):
    with pytest.raises(ValueError, match=r"action_filter must be in \[0, 1\)"):
        make_env("mujoco", TASK, 1, action_filter=value)


def test_a_filtered_bundle_filters_as_training_did(tmp_path):
    """``task.kwargs.action_filter``: the env applies (1 - f) a_t + f a_(t-1), observes the applied action
    as last_action, and the bundle carries f so RobotPolicy turns the same actions into the same targets
    (checked against the filter written out by hand in :func:`reproduce`), through resets."""
    rp = RobotPolicy(tiny_bundle(tmp_path, TASK, "task.kwargs.action_filter=0.5"))
    assert rp.filter.weight == 0.5
    reproduce(rp, TASK, steps=60, action_filter=0.5)


def test_a_low_passed_bundle_filters_as_training_did(tmp_path):
    """``task.kwargs.action_lowpass_hz``: the env runs the Butterworth recursion on the clipped actions, and
    RobotPolicy, from the bundle's cutoff, turns the same actions into the same targets (checked against
    the recursion written out by hand in :func:`reproduce`), through resets."""
    rp = RobotPolicy(tiny_bundle(tmp_path, TASK, "task.kwargs.action_lowpass_hz=8"))
    assert rp.filter.coefficients == pytest.approx(lowpass_coefficients(8.0, rp.control_dt))
    reproduce(rp, TASK, steps=60, action_lowpass_hz=8.0, episode_length_s=0.5)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"action_lowpass_hz": 25.0}, r"action_lowpass_hz must be in \[0, 25\) Hz at a 50 Hz control rate"),
    ({"action_lowpass_hz": -1.0}, r"action_lowpass_hz must be in \[0, 25\)"),
    ({"action_lowpass_hz": 8.0, "action_filter": 0.5}, "two filters on the same actions; set one of them to 0"),
])
def test_a_low_pass_that_cannot_run_is_refused_when_the_config_is_built(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_env("mujoco", TASK, 1, **kwargs)


def reproduce(rp: RobotPolicy, task: str, steps: int, **task_kwargs) -> int:
    """Drive ``rp`` and the env side by side from the env's signals; returns the episodes ended."""
    env = make_env("mujoco", task, 1, seed=3, **EXACT, **task_kwargs)
    f = task_kwargs.get("action_filter", 0.0)
    hz = task_kwargs.get("action_lowpass_hz", 0.0)
    applied = torch.zeros(1, env.task.action_dim)  # the filter's state: the last applied action
    inputs = [torch.zeros_like(applied)] * 2  # the low-pass's: the last two clipped actions and outputs
    outputs = [torch.zeros_like(applied)] * 2
    robot_order = list(reversed(rp.joint_names))  # the robot's driver lists joints its own way
    to_policy = joint_index_map(rp.joint_names, robot_order)
    from_policy = np.argsort(to_policy)
    obs = env.reset(seed=3)
    ended = 0
    for _ in range(steps):
        s = {k: v[0].double().numpy() for k, v in env.task.signals(env.physics).items() if k in ROBOT_SIGNALS}
        s["command"] = env.task.user_commands[0].double().numpy()  # the operator's; the bundle holds the heading
        robot = {**s, "joint_pos": s["joint_pos"][from_policy], "joint_vel": s["joint_vel"][from_policy]}
        mapped = {**robot, "joint_pos": robot["joint_pos"][to_policy], "joint_vel": robot["joint_vel"][to_policy]}
        observed = rp.observation(mapped)  # once per tick, as the node calls it (the clock advances)
        np.testing.assert_allclose(observed, obs["policy"][0].numpy(), atol=1e-5)
        targets = rp.targets(rp.policy(observed))
        actions = torch.as_tensor(rp.policy(obs["policy"][0].numpy()))[None]
        offsets = torch.zeros(1, len(rp.joint_names))  # the joints the policy does not move stay at default
        if hz:
            b0, b1, b2, a1, a2 = lowpass_coefficients(hz, env.task.step_dt)
            x = actions.clamp(-10, 10)
            applied = b0 * x + b1 * inputs[0] + b2 * inputs[1] - a1 * outputs[0] - a2 * outputs[1]
            inputs, outputs = [x, inputs[0]], [applied, outputs[0]]
        else:
            applied = (1 - f) * actions.clamp(-10, 10) + f * applied
        offsets[:, env.task.action_index] = applied
        expected = env.task.default_pose + env.task.action_scale * offsets
        np.testing.assert_allclose(targets, expected[0].numpy(), atol=1e-5)
        obs, _, terminated, truncated, _ = env.step(actions)
        if bool(terminated | truncated):
            rp.reset()
            applied = torch.zeros_like(applied)
            inputs = outputs = [applied, applied]
            ended += 1
    env.close()
    return ended


def test_joint_map_errors_name_the_joints():
    with pytest.raises(ValueError, match=r"does not report joint\(s\) \['b'\]"):
        joint_index_map(["a", "b"], ["a", "c"])
    with pytest.raises(ValueError, match=r"\['a'\] more than once"):
        joint_index_map(["a"], ["a", "a"])
    np.testing.assert_array_equal(joint_index_map(["a", "b", "c"], ["c", "a", "b", "extra"]), [1, 2, 0])


def test_bundle_without_robot_metadata_is_refused(tmp_path):
    run = train(["task=pendulum", "env.num_envs=8", "algo.num_steps_per_env=8", "runner.max_iterations=1",
                 "runner.progress=false", f"runner.log_root={tmp_path}"])
    with pytest.raises(ValueError, match="not exported from a robot task"):
        RobotPolicy(export(str(run), []))


def test_robot_policy_imports_without_torch(bundle):
    code = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked on the robot")
sys.meta_path.insert(0, Block())
import numpy as np
from ctrl_rl.deploy.robot_policy import RobotPolicy
rp = RobotPolicy({str(bundle)!r})
s = dict(imu_quat=[1, 0, 0, 0], imu_gyro=np.zeros(3), joint_pos=rp.default_pose, joint_vel=np.zeros(12),
         command=[0.5, 0, 0])
t = rp.step(s)
assert t.shape == (12,)
# the whole robot side: node, safety, plain-DDS transport, sim2sim bridge, `ctrl-rl deploy`
import ctrl_rl.deploy.node, ctrl_rl.deploy.safety, ctrl_rl.deploy.sim2sim, ctrl_rl.deploy.transports.dds
import ctrl_rl.deploy.gait_files, ctrl_rl.deploy.gait_recorder, ctrl_rl.deploy.gait_report  # the gait report
from ctrl_rl.app.cli import main
try:
    main(["deploy", "node", "--help"])
except SystemExit as e:
    assert e.code == 0
assert "torch" not in sys.modules
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr


BLIND = ["projected_gravity", "velocity_commands", "joint_pos_rel", "joint_vel", "last_action"]
"""The quadruped's policy terms without base velocities: IMU gravity, command, joints, last action."""


@pytest.fixture(scope="module")
def memory_bundle(tmp_path_factory):
    """An LSTM policy on frame stacks of the velocity-free terms: everything the robot side must keep."""
    root = tmp_path_factory.mktemp("memory_runs")
    run = train([f"task={TASK}", "env.num_envs=8", "algo.num_steps_per_env=8", "runner.max_iterations=1",
                 "algo.actor_hidden=[32]", "algo.critic_hidden=[32]", "runner.progress=false",
                 "algo.rnn_type=lstm", "algo.rnn_hidden_size=16", "algo.num_minibatches=2",
                 f"task.kwargs.policy_terms=[{','.join(BLIND)}]",
                 "task.kwargs.term_history={joint_pos_rel:3,joint_vel:3,projected_gravity:2}",
                 f"runner.log_root={root}"])
    return run, export(str(run), [])


def test_numpy_history_and_memory_rebuild_the_env_from_the_bundle_alone(memory_bundle):
    """100 closed-loop steps with resets (0.5 s episodes): the robot side's stacked observation equals
    the env's (1e-5) and its ONNX actions with their carried state equal the torch policy's."""
    from ctrl_rl.app.session import load_policy, policy_fn
    from ctrl_rl.runners.episodes import episodes_ended

    run, bundle = memory_bundle
    rp = RobotPolicy(bundle)
    assert rp.policy.recurrent and rp.history is not None
    assert [t.history for t in rp.terms] == [2, 1, 3, 3, 1]
    _, _, alg, _ = load_policy(str(run), [])
    torch_policy = policy_fn(alg)
    env = make_env("mujoco", TASK, 1, seed=5, episode_length_s=0.5, policy_terms=BLIND,
                   term_history={"joint_pos_rel": 3, "joint_vel": 3, "projected_gravity": 2}, **EXACT)
    obs = env.reset(seed=5)
    episodes_ended(torch_policy, None)
    rp.reset()
    resets = 0
    for _ in range(100):
        s = {k: v[0].double().numpy() for k, v in env.task.signals(env.physics).items() if k in ROBOT_SIGNALS}
        s["command"] = env.task.user_commands[0].double().numpy()  # the operator's; the bundle holds the heading
        np.testing.assert_allclose(rp.observation(s), obs["policy"][0].numpy(), atol=1e-5)
        actions = rp.policy(obs["policy"][0].numpy())
        with torch.no_grad():
            expected = torch_policy(obs)
        np.testing.assert_allclose(actions, expected[0].numpy(), atol=1e-5)
        rp.targets(actions)  # the last_action term follows what the robot was sent
        obs, _, terminated, truncated, _ = env.step(torch.as_tensor(actions)[None])
        done = terminated | truncated
        episodes_ended(torch_policy, done)
        if bool(done):
            resets += 1
            rp.reset()
    assert resets >= 3


def test_peek_observation_does_not_advance_the_history(memory_bundle):
    """The node records an episode's last observation with ``peek_observation``: what the next tick
    would see, with the stacks and the memory left as they were."""
    _, bundle = memory_bundle
    rp = RobotPolicy(bundle)
    rng = np.random.default_rng(0)
    n = len(rp.joint_names)

    def signals():
        q = rng.normal(size=4)
        return dict(imu_quat=q / np.linalg.norm(q), imu_gyro=rng.normal(size=3), command=rng.normal(size=3),
                    joint_pos=rp.default_pose + 0.1 * rng.normal(size=n), joint_vel=rng.normal(size=n))

    rp.reset()
    first = signals()
    np.testing.assert_array_equal(rp.peek_observation(first), rp.observation(first))  # a fresh start
    for _ in range(3):
        rp.observation(signals())
    stacks = [s.copy() for s in rp.history.stacks]
    nxt = signals()
    peeked = rp.peek_observation(nxt)
    assert all(np.array_equal(a, b) for a, b in zip(stacks, rp.history.stacks, strict=True))
    np.testing.assert_array_equal(peeked, rp.observation(nxt))
