"""Robot logs: writer -> loader round trips, terminal vs timeout, errors that name file and row,
reward functions by hand, no torch on the robot side, and the deploy node recording its policy
episodes (a scripted node with a stand-in bundle; the real node against sim2sim over DDS)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from ctrl_rl.deploy import messages as m
from ctrl_rl.deploy.commands import build_parser, resolve_params
from ctrl_rl.deploy.node import DeployNode, NodeParams
from ctrl_rl.deploy.recorder import EpisodeRecorder
from ctrl_rl.deploy.robot_policy import RobotPolicy
from ctrl_rl.deploy.runtime import OnnxPolicy
from ctrl_rl.deploy.safety import Mode
from ctrl_rl.robots import log_rewards
from ctrl_rl.storage import robot_log as rl
from ctrl_rl.storage.dataset import Dataset, DatasetError

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
PROPRIO = "ctrl_rl.robots.log_rewards:proprioceptive"


def write_episode(path: Path, t: int, end: str = "stopped", terminal: bool = False, seed: int = 0,
                  block_rows: int = 3) -> dict[str, np.ndarray]:
    """An episode of ``t`` steps with distinct rows (crosses block boundaries); returns its arrays."""
    rng = np.random.default_rng(seed)
    arrays = {"states": rng.normal(size=(t + 1, 4)).astype(np.float32),
              "actions": rng.normal(size=(t, 2)).astype(np.float32),
              "timestamps": np.arange(t + 1) * 0.02,
              "imu_gyro": rng.normal(size=(t + 1, 3)).astype(np.float32),
              "projected_gravity": np.tile(np.float32([0, 0, -1]), (t + 1, 1)),
              "command": np.tile(np.float32([0.5, 0, 0.2]), (t + 1, 1)),
              "joint_vel": rng.normal(size=(t + 1, 2)).astype(np.float32)}
    w = rl.RobotLogWriter({"task": "quadruped_velocity_flat", "joint_names": ["a", "b"], "rate_hz": 50.0}, block_rows)
    sig = ("imu_gyro", "projected_gravity", "command", "joint_vel")
    for i in range(t):
        w.add_step(arrays["states"][i], arrays["actions"][i], arrays["timestamps"][i], {k: arrays[k][i] for k in sig})
    w.end(arrays["states"][t], end, terminal, arrays["timestamps"][t], {k: arrays[k][t] for k in sig})
    w.write(path)
    return arrays


def by_hand(states, actions, next_states, signals):
    """Reward of the tests: next state's first feature plus the action sum."""
    return next_states[:, 0] + actions.sum(1)


# -- format ---------------------------------------------------------------------------------------
def test_writer_loader_round_trip_is_exact(tmp_path):
    a = write_episode(tmp_path / "ep.hdf5", 7)
    log = rl.read_robot_log(tmp_path / "ep.hdf5")
    for key in ("states", "actions", "timestamps"):
        assert np.array_equal(getattr(log, key), a[key]), key
    assert np.array_equal(log.signals["imu_gyro"], a["imu_gyro"])
    assert log.attrs["joint_names"] == ["a", "b"] and log.attrs["end"] == "stopped" and log.attrs["terminal"] is False
    assert [p.name for p in tmp_path.iterdir()] == ["ep.hdf5"]  # no temp file left behind
    data = rl.load_robot_logs(tmp_path / "ep.hdf5", by_hand)
    assert len(data) == 7
    np.testing.assert_array_equal(data.observations, a["states"][:-1])
    np.testing.assert_array_equal(data.next_observations, a["states"][1:])
    np.testing.assert_array_equal(data.actions, a["actions"])
    # row 2: the state after action 2 is states[3]; r = states[3, 0] + actions[2, 0] + actions[2, 1]
    assert data.rewards[2] == pytest.approx(a["states"][3, 0] + a["actions"][2, 0] + a["actions"][2, 1], abs=1e-6)
    assert data.terminals.tolist() == [False] * 7
    assert data.timeouts.tolist() == [False] * 6 + [True]  # a stop cuts the episode: a timeout


def test_directory_sorted_by_name_with_terminals_and_timeouts(tmp_path):
    b = write_episode(tmp_path / "episode_2.hdf5", 3, "fault:tilt 50 deg exceeds max_tilt 46 deg", True, seed=2)
    a = write_episode(tmp_path / "episode_1.h5", 2, "estop", False, seed=1)
    c = write_episode(tmp_path / "episode_3.hdf5", 4, "stopped", False, seed=3)
    (tmp_path / ".episode_4.hdf5.x.tmp").write_text("an interrupted write")  # never read
    data = rl.load_robot_logs(tmp_path, by_hand)
    np.testing.assert_array_equal(data.observations, np.concatenate([e["states"][:-1] for e in (a, b, c)]))
    # episode ends at rows 1 (estop: timeout), 4 (fault: terminal), 8 (stopped: timeout)
    assert np.flatnonzero(data.terminals).tolist() == [4]
    assert np.flatnonzero(data.timeouts).tolist() == [1, 8]
    never = rl.load_robot_logs(tmp_path, by_hand, terminal_from="never")
    assert not never.terminals.any() and np.flatnonzero(never.timeouts).tolist() == [1, 4, 8]
    falls = rl.load_robot_logs(tmp_path, by_hand, terminal_from=lambda attrs: "tilt" in attrs["end"])
    assert np.flatnonzero(falls.terminals).tolist() == [4]


def _raw(path: Path, states, actions, **extra) -> Path:
    with h5py.File(path, "w") as f:
        if states is not None:
            f["states"] = states
        if actions is not None:
            f["actions"] = actions
        for k, v in extra.items():
            f[k] = v
        f.attrs["terminal"] = False
    return path


S, A = np.zeros((4, 3)), np.zeros((3, 2))


@pytest.mark.parametrize("case, match", [
    ("no_states", r"bad\.hdf5: missing \['states'\]"),
    ("no_actions", r"bad\.hdf5: missing \['actions'\]"),
    ("rows", r"bad\.hdf5: 4 states and 4 actions; a robot log has one state more"),
    ("nan_state", r"bad\.hdf5: 'states' row 2 is non-finite"),
    ("inf_action", r"bad\.hdf5: 'actions' row 1 is non-finite"),
    ("nan_signal", r"bad\.hdf5: 'signals/joint_vel' row 3 is non-finite"),
    ("signal_rows", r"bad\.hdf5: 'signals/joint_vel' has 3 rows; it must have one per state \(4\)"),
    ("not_hdf5", r"bad\.hdf5: not a readable HDF5 file"),
])
def test_malformed_logs_are_refused_naming_file_and_row(tmp_path, case, match):
    p = tmp_path / "bad.hdf5"
    bad = S.copy()
    if case == "no_states":
        _raw(p, None, A)
    elif case == "no_actions":
        _raw(p, S, None)
    elif case == "rows":
        _raw(p, S, np.zeros((4, 2)))
    elif case == "nan_state":
        bad[2, 1] = np.nan
        _raw(p, bad, A)
    elif case == "inf_action":
        _raw(p, S, np.where(np.arange(3)[:, None] == 1, np.inf, A))
    elif case == "nan_signal":
        _raw(p, S, A, **{"signals/joint_vel": np.where(np.arange(4)[:, None] == 3, np.nan, np.zeros((4, 2)))})
    elif case == "signal_rows":
        _raw(p, S, A, **{"signals/joint_vel": np.zeros((3, 2))})
    else:
        p.write_text("not hdf5")
    with pytest.raises(DatasetError, match=match):
        rl.load_robot_logs(tmp_path, by_hand)


@pytest.mark.parametrize("fn, match", [
    (lambda s, a, ns, sig: np.zeros((len(a), 2)), r"ep\.hdf5: .* returned shape \(3, 2\); it must return one reward per action, shape \(3,\)"),  # noqa: E501
    (lambda s, a, ns, sig: np.zeros(len(a) + 1), r"returned shape \(4,\)"),
    (lambda s, a, ns, sig: np.where(np.arange(len(a)) == 1, np.nan, 0.0), r"ep\.hdf5: .* non-finite reward at row 1"),
    (log_rewards.velocity_tracking, r"ep\.hdf5: .*velocity_tracking failed: .*needs signals \['base_lin_vel'\]"),
])
def test_bad_rewards_are_refused_naming_the_file(tmp_path, fn, match):
    write_episode(tmp_path / "ep.hdf5", 3)
    with pytest.raises(DatasetError, match=match):
        rl.load_robot_logs(tmp_path, fn)


def test_other_load_errors(tmp_path):
    with pytest.raises(DatasetError, match="robot logs not found"):
        rl.load_robot_logs(tmp_path / "nope", by_hand)
    with pytest.raises(DatasetError, match="no robot logs"):
        rl.load_robot_logs(tmp_path, by_hand)
    write_episode(tmp_path / "a.hdf5", 3)
    with h5py.File(tmp_path / "b.hdf5", "w") as f:  # another policy's log: 5 state features
        f["states"], f["actions"] = np.zeros((3, 5)), np.zeros((2, 2))
        f.attrs["terminal"] = True
    with pytest.raises(DatasetError, match=r"b\.hdf5: state/action dims 5/2 differ from .*a\.hdf5's 4/2"):
        rl.load_robot_logs(tmp_path, by_hand)
    _raw(tmp_path / "b.hdf5", np.zeros((3, 4)), np.zeros((2, 2)))
    with h5py.File(tmp_path / "b.hdf5", "a") as f:
        del f.attrs["terminal"]
    with pytest.raises(DatasetError, match=r"b\.hdf5: no 'terminal' attribute .*terminal_from='never'"):
        rl.load_robot_logs(tmp_path, by_hand)
    assert len(rl.load_robot_logs(tmp_path, by_hand, terminal_from="never")) == 5


def test_writer_refuses_misuse(tmp_path):
    w = rl.RobotLogWriter()
    with pytest.raises(ValueError, match="at least one step"):
        w.end(np.zeros(3), "stopped", False)
    w.add_step(np.zeros(3), np.zeros(2), signals={"gyro": np.zeros(3)})
    with pytest.raises(ValueError, match=r"'states' has shape \(4,\) at step 1, \(3,\) before"):
        w.add_step(np.zeros(4), np.zeros(2), signals={"gyro": np.zeros(3)})
    with pytest.raises(ValueError, match="step 1 carries"):
        w.add_step(np.zeros(3), np.zeros(2))  # a signal went missing
    assert w.steps == 1  # refused steps left nothing behind
    with pytest.raises(ValueError, match="before write"):
        w.write(tmp_path / "x.hdf5")
    with pytest.raises(ValueError, match="end must be"):
        w.end(np.zeros(3), "crashed", True, signals={"gyro": np.zeros(3)})


def test_reward_fn_import_strings_and_dataset_spec(tmp_path):
    assert rl.resolve_reward_fn(PROPRIO) is log_rewards.proprioceptive
    for spec, match in ((None, "hold no rewards"), ("proprioceptive", "must be 'module:function'"),
                        ("no_such_mod:f", "cannot import module"),
                        ("ctrl_rl.robots.log_rewards:nope", "has no attribute 'nope'"),
                        ("ctrl_rl.robots.log_rewards:WEIGHTS", "is not callable")):
        with pytest.raises(ValueError, match=match):
            rl.resolve_reward_fn(spec)
    spec = rl.parse_robot_log_spec(f"robotlogs:{tmp_path}?reward={PROPRIO}&terminal=never")
    assert (spec.path, spec.reward, spec.terminal_from) == (str(tmp_path), PROPRIO, "never")
    assert rl.parse_robot_log_spec(f"robotlogs:{tmp_path}?reward={PROPRIO}").terminal_from == "attr"
    for bad, match in ((f"robotlogs:{tmp_path}", "hold no rewards"), ("robotlogs:?reward=a:b", "no path"),
                       (f"robotlogs:{tmp_path}?reward=a:b&terminal=maybe", "terminal must be"),
                       (f"robotlogs:{tmp_path}?reward=a:b&gamma=1", r"unknown option\(s\) \['gamma'\]"),
                       ("logs/robot", "starts with 'robotlogs:'")):
        with pytest.raises(ValueError, match=match):
            rl.parse_robot_log_spec(bad)
    write_episode(tmp_path / "ep.hdf5", 5, "fault:stale", True)
    assert rl.parse_robot_log_spec(f"robotlogs:{tmp_path}?reward={PROPRIO}").load().terminals[-1]


def test_convert_writes_a_d4rl_file_bc_can_read(tmp_path):
    logs = tmp_path / "logs"
    write_episode(logs / "episode_1.hdf5", 4, seed=1)
    write_episode(logs / "episode_2.hdf5", 6, "fault:tilt", True, seed=2)
    out = rl.convert_robot_logs(logs, PROPRIO, tmp_path / "robot.hdf5")
    back, direct = Dataset.load_hdf5(out), rl.load_robot_logs(logs, PROPRIO)
    for name in ("observations", "actions", "rewards", "terminals", "timeouts", "next_observations"):
        assert np.array_equal(getattr(back, name), getattr(direct, name)), name
    with h5py.File(out) as f:
        assert f.attrs["reward_fn"] == PROPRIO and f.attrs["episodes"] == "2" and f.attrs["source"] == "robot_logs"
    with pytest.raises(ValueError, match="would land among the robot logs"):
        rl.convert_robot_logs(logs, PROPRIO, logs / "robot.hdf5")


# -- reward functions ---------------------------------------------------------------------------
def test_proprioceptive_reward_by_hand():
    # one step, dt 0.02: yaw command 0.2 rad/s, the robot then turns at 0.7 rad/s and rolls at 0.1 rad/s
    signals = {"imu_gyro": np.array([[0, 0, 0], [0.1, 0, 0.7]]),
               "projected_gravity": np.array([[0, 0, -1], [0.1, 0, -1]]),
               "command": np.array([[0.5, 0, 0.2], [0.5, 0, 0.2]]), "joint_vel": np.array([[0.0, 0.0], [0.2, 0.0]])}
    actions = np.array([[0.3, -0.4]])
    terms = log_rewards.proprioceptive_terms(actions, signals)
    assert terms["track_ang_vel_z"][0] == pytest.approx(np.exp(-0.25 / 0.25))  # (0.2 - 0.7)^2 = 0.25
    assert terms["ang_vel_xy"][0] == pytest.approx(0.01)
    assert terms["orientation"][0] == pytest.approx(0.01)
    assert terms["joint_acc"][0] == pytest.approx((0.2 / 0.02) ** 2)  # 100
    assert terms["action_rate"][0] == pytest.approx(0.25)  # from a zero previous action: 0.09 + 0.16
    r = log_rewards.proprioceptive(None, actions, None, signals)
    expected = 0.02 * (0.5 * np.exp(-1) - 0.05 * 0.01 - 5.0 * 0.01 - 2.5e-7 * 100 - 0.01 * 0.25)
    assert r.shape == (1,) and r[0] == pytest.approx(expected)
    v = {**signals, "base_lin_vel": np.array([[0, 0, 0], [0.5, 0.5, 0.1]])}  # lateral error 0.5, vz 0.1
    extra = 0.02 * (1.0 * np.exp(-0.25 / 0.25) - 2.0 * 0.01)
    assert log_rewards.velocity_tracking(None, actions, None, v)[0] == pytest.approx(expected + extra)


def test_log_reward_weights_are_the_training_task_s():
    locomotion = pytest.importorskip("ctrl_rl.tasks.locomotion.locomotion")  # torch + mujoco (training side)
    assert log_rewards.TRACKING_SIGMA == locomotion.TRACKING_SIGMA
    assert all(locomotion.DEFAULT_REWARDS[k] == w for k, w in log_rewards.WEIGHTS.items())


def test_robot_side_imports_no_torch(tmp_path):
    code = f"""
import sys
import ctrl_rl.storage.robot_log
assert "torch" not in sys.modules, "robot_log pulled torch"
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked on the robot")
sys.meta_path.insert(0, Block())
import numpy as np
from ctrl_rl.deploy.recorder import EpisodeRecorder
from ctrl_rl.storage.robot_log import load_robot_logs
rec = EpisodeRecorder({str(tmp_path)!r}, {{"task": "t"}})
sig = dict(imu_gyro=np.zeros(3), projected_gravity=np.array([0, 0, -1.0]), command=np.zeros(3), joint_vel=np.zeros(2))
for t in range(3):
    rec.step(np.zeros(5, np.float32), np.zeros(2, np.float32), t * 0.02, sig)
rec.end(np.zeros(5, np.float32), "stopped", False, 0.06, sig)
rec.flush()
data = load_robot_logs({str(tmp_path)!r}, "{PROPRIO}")
assert len(data) == 3 and rec.status()["episodes"] == 1, rec.status()
assert "torch" not in sys.modules
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr


# -- the deploy node ----------------------------------------------------------------------------
class FakeBundle(OnnxPolicy):
    """A 2-joint stand-in for an exported bundle that remembers every observation it was fed."""

    def __init__(self) -> None:  # no onnxruntime session: metadata and a linear "network"
        terms = [("base_ang_vel", 3, 0.25), ("projected_gravity", 3, 1.0), ("velocity_commands", 3, 1.0),
                 ("joint_pos_rel", 2, 1.0), ("joint_vel", 2, 0.05), ("last_action", 2, 1.0)]
        self.metadata = {"obs_terms": [{"name": n, "dim": d, "scale": s, "clip": None} for n, d, s in terms],
                         "joint_names": ["j0", "j1"], "default_pose": [0.1, -0.2], "action_scale": 0.5,
                         "action_clip": 1.0, "kp": [20.0, 20.0], "kd": [0.5, 0.5], "control_dt": 0.02,
                         "joint_limits": [[-1.0, 1.0], [-1.0, 1.0]], "task": "fake"}
        self.obs_dim, self.noise_dim, self.action_dim = 15, 0, 2
        self.fed: list[np.ndarray] = []
        self.out: list[np.ndarray] = []

    def __call__(self, obs, noise=None):
        self.fed.append(np.array(obs))
        self.out.append((0.5 * obs[9:11] + 0.01 * len(self.fed)).astype(np.float32))
        return self.out[-1]


class FakeTransport:
    """Captures subscriptions so a test calls them as the robot's messages arrive."""

    name = "fake"

    def __init__(self) -> None:
        self.subs: dict = {}

    def publisher(self, topic, msg_type, qos=None):
        return lambda msg: None

    def subscribe(self, topic, msg_type, callback, sensor=False, qos=None):
        self.subs[topic] = callback


def robot_sends(tr: FakeTransport, k: int, upright: bool = True) -> None:
    pos, vel = np.array([0.1 + 0.01 * k, -0.2]), np.array([0.0, 0.1 * k])
    tr.subs["joint_states"](m.JointState(0.0, ["j1", "j0"], pos[::-1], vel[::-1], np.zeros(0)))  # by name
    quat = np.array([1.0, 0, 0, 0]) if upright else np.array([0.0, 1.0, 0, 0])  # upside down: a fall
    tr.subs["imu/data"](m.Imu(0.0, quat, np.array([0, 0, 0.01 * k]), np.zeros(3)))
    tr.subs["cmd_vel"](m.Twist(np.array([0.3, 0, 0]), np.array([0, 0, 0.2])))


def test_node_records_each_policy_episode_and_how_it_ended(tmp_path):
    tr, bundle = FakeTransport(), FakeBundle()
    params = NodeParams(record_dir=str(tmp_path / "logs"), safety={
        "stand_up_time": 0.0, "stand_hold_time": 0.0, "command_timeout": 0.0, "state_timeout": 30.0})
    node = DeployNode(params, tr, policy=RobotPolicy(bundle))
    k = 0

    def ticks(n: int, **kw) -> list[Mode]:
        nonlocal k
        out = []
        for _ in range(n):
            k += 1
            robot_sends(tr, k, **kw)
            out.append(node.tick())
        return out

    assert ticks(1) == [Mode.PASSIVE]  # the operator has not started it yet
    tr.subs["ctrl_rl/start"](m.Bool(True))
    assert ticks(6) == [Mode.STAND_UP] + [Mode.POLICY] * 5  # episode 1: 5 policy ticks ...
    assert ticks(1, upright=False) == [Mode.DAMPING]  # ... ended by a fall
    ticks(1)
    tr.subs["ctrl_rl/start"](m.Bool(True))
    assert ticks(4) == [Mode.STAND_UP] + [Mode.POLICY] * 3  # episode 2: 3 ticks, ended by an e-stop
    tr.subs["estop"](m.Bool(True))
    assert ticks(1) == [Mode.DAMPING]
    tr.subs["ctrl_rl/start"](m.Bool(True))
    assert ticks(3) == [Mode.STAND_UP] + [Mode.POLICY] * 2  # episode 3: 2 ticks, then run() stops
    node.run(duration=0.1)  # a few more policy ticks at 50 Hz; leaving run() ends the episode "stopped"
    files = sorted((tmp_path / "logs").iterdir())
    logs = [rl.read_robot_log(f) for f in files]
    assert [len(x) for x in logs][:2] == [5, 3] and len(logs) == 3 and len(logs[2]) >= 2
    assert [(x.attrs["end"].split(" ")[0], x.attrs["terminal"]) for x in logs] == [
        ("fault:tilt", True), ("estop", False), ("stopped", False)]
    assert sum(len(x) for x in logs) == len(bundle.fed)  # one row per policy tick
    fed, out = np.stack(bundle.fed), np.stack(bundle.out)
    np.testing.assert_array_equal(np.concatenate([x.states[:-1] for x in logs]), fed)  # what the policy consumed
    np.testing.assert_array_equal(np.concatenate([x.actions for x in logs]), out)  # its raw actions
    first = logs[0]
    np.testing.assert_array_equal(first.signals["joint_pos"][:, 0], np.float32(0.1 + 0.01 * np.arange(3, 9)))
    # the final state is the observation after the last action: last_action = the (clipped) last action
    np.testing.assert_allclose(first.states[-1, 13:15], np.clip(first.actions[-1], -1, 1), atol=1e-7)
    np.testing.assert_allclose(first.states[-1, 9:11], first.signals["joint_pos"][-1] - [0.1, -0.2], atol=1e-6)
    assert first.attrs["task"] == "fake" and first.attrs["joint_names"] == ["j0", "j1"]
    assert np.all(np.diff(first.timestamps) > 0) and first.timestamps[0] == 0.0
    rec = node.status()["recording"]
    assert (rec["episodes"], rec["steps"], rec["errors"], rec["pending"]) == (3, len(bundle.fed), 0, 0)
    data = rl.load_robot_logs(tmp_path / "logs", PROPRIO)
    assert len(data) == len(bundle.fed) and np.flatnonzero(data.terminals).tolist() == [4]
    assert np.flatnonzero(data.timeouts).tolist() == [7, len(data) - 1]


def test_recording_off_costs_nothing_and_problems_never_stop_the_node(tmp_path):
    node = DeployNode(NodeParams(), FakeTransport(), policy=RobotPolicy(FakeBundle()))
    assert node.recorder is None and node.status()["recording"] is None
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="record_dir .* is not writable"):
        EpisodeRecorder(tmp_path / "file" / "logs")
    rec = EpisodeRecorder(tmp_path / "logs")
    rec.step(np.zeros(3), np.zeros(2), 0.0, {})
    rec.step(np.zeros(4), np.zeros(2), 0.02, {})  # a shape change: the episode is dropped, nothing raised
    assert not rec.active and rec.status()["errors"] == 1 and "shape" in rec.status()["last_error"]


def test_record_flag_of_deploy_node_and_sim2sim(tmp_path):
    bundle = tmp_path / "policy.onnx"
    bundle.write_bytes(b"")
    for argv in (["node", "--bundle", str(bundle)], ["sim2sim", str(bundle)]):
        args = build_parser().parse_args([*argv, "--record", str(tmp_path / "logs")])
        args.bundle = args.bundle or getattr(args, "bundle_pos", None)
        assert resolve_params(args).record_dir == str(tmp_path / "logs")
    params = Path(__file__).parent.parent / "src" / "ctrl_rl" / "configs" / "deploy" / "node.yaml"
    assert NodeParams.from_yaml(params).record_dir == ""


# -- end to end: the real node over DDS against the sim2sim bridge --------------------------------
@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> str:
    """A short real training run of the quadruped, exported (parity-checked) to a bundle."""
    from bundles import quadruped_bundle

    return quadruped_bundle(tmp_path_factory.mktemp("runs"))


def _until(cond, timeout: float, every=None) -> bool:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        if every is not None:
            every()
        time.sleep(0.02)
    return True


@pytest.mark.slow
def test_sim2sim_recording_loads_as_a_dataset(bundle, tmp_path):
    """Policy, e-stop, start, policy, robot dies: every episode on disk, one row per policy tick."""
    from ctrl_rl.deploy.transports.dds import DdsTransport

    ns = f"rec_{os.getpid()}"
    bridge = subprocess.Popen([sys.executable, "-m", "ctrl_rl.deploy.sim2sim", "--transport", "dds", "--namespace",
                               ns, "--joint-order", "reversed", "--command-format", "position_gains",
                               "--cmd-vel", "0.3", "0.0", "0.0"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    transport, operator = DdsTransport(namespace=ns), DdsTransport(namespace=ns)
    try:
        policy = RobotPolicy(bundle)
        params = NodeParams(bundle=bundle, command_format="position_gains", record_dir=str(tmp_path / "logs"),
                            command_joint_names=policy.joint_names[::-1],
                            safety={"stand_up_time": 1.0, "stand_hold_time": 0.2, "state_timeout": 0.1})
        node = DeployNode(params, transport, policy=policy)
        policy_ticks = 0
        tick = node.tick

        def counted() -> Mode:
            nonlocal policy_ticks
            mode = tick()
            policy_ticks += mode == Mode.POLICY
            return mode

        node.tick = counted
        estop, start = operator.publisher("estop", m.Bool), operator.publisher("ctrl_rl/start", m.Bool)
        th = threading.Thread(target=node.run, daemon=True)
        th.start()
        mode = lambda: node.safety.mode.value  # noqa: E731
        assert _until(lambda: mode() == "policy", 40, lambda: start(m.Bool(True))), node.status()
        time.sleep(1.0)
        assert _until(lambda: mode() == "damping", 10, lambda: estop(m.Bool(True))), node.status()
        assert _until(lambda: mode() == "policy", 20, lambda: start(m.Bool(True))), node.status()
        time.sleep(1.0)
        bridge.kill()  # the robot's state stream dies: stale state, a terminal fault
        bridge.wait(10)
        assert _until(lambda: mode() == "damping", 5), node.status()
        node.stop()
        th.join(15)
        assert not th.is_alive()
    finally:
        transport.close()
        operator.close()
        if bridge.poll() is None:
            bridge.kill()
    status = node.status()
    ends = [why for _, md, why in node.safety.transitions if md == Mode.DAMPING]
    files = sorted((tmp_path / "logs").iterdir())
    logs = [rl.read_robot_log(f) for f in files]
    assert len(logs) == len(ends) == 2, (ends, files)  # two policy episodes, each ended by damping
    assert logs[0].attrs["end"] == "estop" and logs[0].attrs["terminal"] is False
    assert logs[1].attrs["end"].startswith("fault:robot state is stale") and logs[1].attrs["terminal"] is True
    data = rl.load_robot_logs(tmp_path / "logs", PROPRIO)
    assert data.obs_dim == policy.policy.obs_dim and data.action_dim == len(policy.joint_names)
    assert abs(len(data) - policy_ticks) <= 1, (len(data), policy_ticks)
    assert policy_ticks > 50  # about 2 s of policy at 50 Hz
    assert data.terminals.tolist().count(True) == 1 and data.terminals[-1] and data.timeouts.sum() == 1
    rec = status["recording"]
    assert (rec["episodes"], rec["steps"], rec["errors"]) == (2, len(data), 0), rec
    assert logs[0].attrs["task"] == "quadruped_velocity_flat" and logs[0].attrs["rate_hz"] == 50.0
    assert np.all(np.abs(logs[0].signals["command"][:, 0] - 0.3) < 1e-6)  # the bridge's command, clipped to range
