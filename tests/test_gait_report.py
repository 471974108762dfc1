"""The gait report (``ctrl_rl.deploy.gait_report``): each quantity against a hand-computed case, the bars
and the verdict; then ``ctrl-rl eval`` on a tiny untrained run ends with the report and ``--require-gait``
exits 1 (an untrained policy does not track the command)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from ctrl_rl.deploy.gait_report import (
    GaitSpec,
    GaitTrace,
    action_smoothness,
    cost_of_transport,
    foot_slip,
    gait_report,
    heading_velocity,
    joint_limit_margin,
    path_error,
    per_10m,
    phase_durations,
    settled,
    torque_fractions,
    tracking_error,
    yaw_of,
)


def yaw_quat(yaw: np.ndarray) -> np.ndarray:
    return np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], -1)


SPEC = GaitSpec(standing_height=0.3, mass=10.0, torque_limits=np.array([20.0, 20.0]),
                joint_limits=np.array([[-1.0, 1.0], [-1.0, 1.0]]), dt=0.02, joint_names=["hip", "knee"],
                foot_names=["left", "right"])


def walk(seconds: float = 10.0, vx: float = 0.5, vy_drift: float = 0.0, height: float = 0.3,
         cmd: tuple[float, float, float] = (0.5, 0.0, 0.0), torque: float = 8.0) -> GaitTrace:
    """A clean trot at ``vx`` (sideways at ``vy_drift``): feet alternating every 0.3 s, a sinusoidal gait,
    joints at +-0.5 rad, ``torque`` N m at most."""
    dt = SPEC.dt
    t = np.arange(int(round(seconds / dt)) + 1) * dt
    n = len(t)
    phase = np.sin(2 * np.pi * t / 0.6)
    contact = np.stack([phase >= 0, phase < 0], -1)
    return GaitTrace(base_pos=np.stack([vx * t, vy_drift * t, np.full(n, height)], -1), base_height=np.full(n, height),
                     base_quat=yaw_quat(np.zeros(n)), base_lin_vel=np.tile([vx, vy_drift, 0.0], (n, 1)),
                     gyro=np.zeros((n, 3)), command=np.tile(cmd, (n, 1)),
                     joint_pos=np.stack([0.5 * phase, -0.5 * phase], -1), joint_vel=np.zeros((n, 2)),
                     torque=np.stack([torque * phase, -torque * phase], -1), foot_contact=contact,
                     foot_vel=np.zeros((n, 2, 3)), actions=np.stack([phase, -phase], -1))


# -- each quantity ----------------------------------------------------------------------------------
def test_a_straight_line_with_known_drift_is_1_m_per_10_m():
    # 10 s at 0.5 m/s forward and 0.05 m/s sideways, no turn commanded: 5 m forward, 0.5 m sideways
    t = np.arange(101) * 0.1
    err = path_error(np.stack([0.5 * t, 0.05 * t], -1), np.zeros(101), np.tile([0.5, 0, 0], (101, 1)), 0.1)
    assert err["lateral"] == pytest.approx(0.5) and err["heading"] == pytest.approx(0.0)
    assert err["travel"] == pytest.approx(5.0) and err["commanded"] == pytest.approx(5.0)
    assert per_10m(err) == pytest.approx((1.0, 0.0))  # 0.5 m over 5 m = 1 m per 10 m


def test_drift_is_in_the_frame_of_the_initial_heading():
    # the same walk facing +y (yaw 90 deg): forward is +y, sideways is -x
    t = np.arange(101) * 0.1
    err = path_error(np.stack([-0.05 * t, 0.5 * t], -1), np.full(101, np.pi / 2), np.tile([0.5, 0, 0], (101, 1)), 0.1)
    assert err["lateral"] == pytest.approx(0.5) and err["travel"] == pytest.approx(5.0)


def test_an_uncommanded_turn_is_heading_error_and_a_commanded_one_is_not():
    t = np.arange(101) * 0.1
    straight = np.stack([0.5 * t, 0 * t], -1)
    # yaw grows 0.01 rad/s without a turn commanded: 0.1 rad = 5.73 deg over ~5 m = 11.5 deg per 10 m
    err = path_error(straight, 0.01 * t, np.tile([0.5, 0, 0], (101, 1)), 0.1)
    assert err["heading"] == pytest.approx(0.1)
    assert per_10m(err)[1] == pytest.approx(math.degrees(0.1) * 10 / err["travel"])
    # a robot that follows a commanded turn (0.5 m/s, 0.1 rad/s) exactly: no drift, no heading error
    cmd = np.tile([0.5, 0.0, 0.1], (101, 1))
    yaw = 0.1 * t
    steps = np.stack([np.cos(yaw[:-1]), np.sin(yaw[:-1])], -1) * 0.5 * 0.1
    pos = np.concatenate([[[0.0, 0.0]], np.cumsum(steps, 0)])
    err = path_error(pos, yaw, cmd, 0.1)
    assert err["lateral"] == pytest.approx(0.0, abs=1e-12) and err["heading"] == pytest.approx(0.0, abs=1e-12)


def test_drift_is_undefined_when_commanded_forward_and_standing_still_and_absent_without_a_command():
    t = np.arange(101) * 0.1
    still = np.zeros((101, 2))
    assert all(math.isnan(v) for v in per_10m(path_error(still, 0 * t, np.tile([0.5, 0, 0], (101, 1)), 0.1)))
    assert per_10m(path_error(still, 0 * t, np.zeros((101, 3)), 0.1)) is None  # not asked to walk


def test_heading_velocity_turns_body_velocity_by_the_yaw_only():
    # facing +y, moving along the body's x: forward in the heading frame, +y in the world
    q = yaw_quat(np.array([np.pi / 2]))
    assert yaw_of(q) == pytest.approx([np.pi / 2])
    assert heading_velocity(q, np.array([[0.5, 0.0, 0.0]])) == pytest.approx(np.array([[0.5, 0.0, 0.0]]))


def test_tracking_error_skips_the_first_second():
    dt = 0.02
    v = np.r_[np.zeros(50), np.full(150, 0.5)]  # at rest for 1 s, then at the command
    window = settled(len(v), dt)
    assert window.start == 50
    assert tracking_error(v[window], np.full(200, 0.5)[window]) == (0.0, 0.5)
    assert tracking_error(np.full(4, 0.35), np.full(4, 0.5)) == pytest.approx((0.15, 0.5))


def test_torque_fractions_of_a_known_trace():
    # joint 0: 10, -20, 0, 0 N m against 25 N m: peak 0.8, RMS sqrt((0.16 + 0.64) / 4) = 0.447
    peak, rms = torque_fractions(np.array([[10.0, 1.0], [-20.0, 1.0], [0.0, 1.0], [0.0, 1.0]]), np.array([25.0, 10.0]))
    assert peak == pytest.approx([0.8, 0.1]) and rms == pytest.approx([math.sqrt(0.2), 0.1])


def test_joint_limit_margin_ignores_unlimited_joints():
    q = np.array([[0.9, 5.0], [-0.7, -5.0]])
    assert joint_limit_margin(q, np.array([[-1.0, 1.0], [0.0, 0.0]])) == pytest.approx(0.1)
    assert joint_limit_margin(q, np.array([[0.0, 0.0], [0.0, 0.0]])) == math.inf


def test_foot_slip_is_the_mean_horizontal_foot_speed_in_contact():
    contact = np.array([[True, False], [True, True]])
    vel = np.array([[[0.1, 0.0, 5.0], [9.0, 9.0, 9.0]], [[0.3, 0.4, 0.0], [0.0, 0.2, 0.0]]])
    assert foot_slip(contact, vel) == pytest.approx((0.1 + 0.5 + 0.2) / 3)  # the swinging foot's 9 m/s is not slip


def test_stance_and_swing_count_complete_phases_only():
    # 11 | 000 | 111 | 0 | 1: the first and last runs are cut by the trace
    stance, swing = phase_durations(np.array([1, 1, 0, 0, 0, 1, 1, 1, 0, 1], dtype=bool), 0.1)
    assert stance == pytest.approx([0.3]) and swing == pytest.approx([0.3, 0.1])


def test_action_smoothness_is_zero_for_a_ramp_and_two_for_alternation():
    assert action_smoothness(np.arange(10.0)[:, None]) == 0.0
    assert action_smoothness(np.array([[0.0], [1.0], [0.0], [1.0]])) == pytest.approx(2.0)  # +-2 second differences


def test_cost_of_transport():
    # |2 * 3| + |-1 * 4| = 10 W at 0.5 m/s for 10 kg: 10 / (10 * 9.81 * 0.5)
    assert cost_of_transport(np.array([[2.0, -1.0]]), np.array([[3.0, 4.0]]), 10.0, np.array([0.5])) == \
        pytest.approx(10 / (10 * 9.81 * 0.5))
    assert math.isnan(cost_of_transport(np.ones((1, 2)), np.ones((1, 2)), 10.0, np.array([0.05])))  # standing


# -- the report -------------------------------------------------------------------------------------
def test_a_clean_walk_passes_every_bar():
    report = gait_report([walk(), walk()], SPEC, stand_up_clamps=0)
    assert report.passed and report.tracked, report.table()
    line = {ln.name: ln for ln in report.lines}
    assert line["peak_torque"].value == pytest.approx(0.4, abs=0.01) and line["peak_torque"].note == "worst: hip"
    # 0.3 s each, to a sample (sin crosses zero on the samples)
    stance, swing = line["stance_time"].value, line["swing_time"].value
    assert stance == pytest.approx(0.3, abs=0.02) and swing == pytest.approx(0.3, abs=0.02)
    assert line["base_height"].value == pytest.approx(1.0) and line["lateral_drift"].value == pytest.approx(0.0)
    assert line["forward_velocity"].passed is None  # information: the velocity against the command
    assert report.trajectories == 2 and report.duration_s == pytest.approx(2 * 501 * 0.02)


def test_the_required_bars_crouch_drift_and_torque_fail():
    """The owner's case: a deep crouch (0.19 m against 0.3 m), 3 m sideways over 7.5 m forward, the torque clamp."""
    report = gait_report([walk(seconds=15.0, height=0.19, vy_drift=0.2, torque=20.0)], SPEC)
    line = {ln.name: ln for ln in report.lines}
    assert line["base_height"].bar == ">= 0.85" and line["base_height"].passed is False
    assert line["base_height"].value == pytest.approx(0.19 / 0.3)
    assert line["lateral_drift"].bar == "<= 0.5 m" and line["lateral_drift"].value == pytest.approx(4.0)
    assert line["peak_torque"].bar == "<= 0.90" and line["peak_torque"].value == pytest.approx(1.0, abs=0.01)
    assert {"base height / standing", "lateral drift per 10 m", "peak torque / limit"} <= set(report.failed())
    assert not report.passed and any(row.startswith("gait: FAIL") for row in report.table())


def test_a_hand_over_spike_is_its_own_line_and_walking_peaks_start_after_the_first_second():
    """A 19.6 N m kick (0.98 of 20) in the first second, as a soft robot lifted from its stand-up gives:
    the hand-over line has it (below the clamp: PASS), the walking peak is the trot's 8 N m (0.4)."""
    trace = walk()
    trace.torque[10, 0] = 19.6  # 0.2 s in
    line = {ln.name: ln for ln in gait_report([trace], SPEC).lines}
    assert line["handover_torque"].value == pytest.approx(0.98) and line["handover_torque"].passed
    assert line["peak_torque"].value == pytest.approx(0.4, abs=0.01) and line["peak_torque"].passed
    trace.torque[10, 0] = 20.0  # at the clamp
    assert not {ln.name: ln for ln in gait_report([trace], SPEC).lines}["handover_torque"].passed


def test_standing_still_against_a_command_is_not_tracked():
    report = gait_report([walk(vx=0.0)], SPEC)
    line = {ln.name: ln for ln in report.lines}
    assert not report.tracked and line["tracking_vx"].passed is False
    assert line["lateral_drift"].passed is False and "did not walk forward" in line["lateral_drift"].note
    assert report.result_fields()["tracked"] == "no" and "command tracked: no" in report.table()


def test_falls_and_stand_up_clamps_fail_and_lines_without_a_walking_command_are_information():
    fell = walk(cmd=(0.0, 0.0, 0.0), vx=0.0)
    fell.fell = True
    report = gait_report([fell], SPEC, stand_up_clamps=3)
    line = {ln.name: ln for ln in report.lines}
    assert line["falls"].passed is False and line["stand_up_clamps"].passed is False
    assert line["lateral_drift"].passed is None and line["stance_time"].passed is None  # not asked to walk
    assert "stand_up_clamps" not in {ln.name for ln in gait_report([walk()], SPEC).lines}  # eval: no stand-up


def test_the_table_fits_100_columns_and_the_json_names_every_bar():
    report = gait_report([walk(vx=0.0)], SPEC, stand_up_clamps=1)
    assert all(len(row) <= 100 for row in report.table())
    d = report.to_dict()
    assert all(ln["why"] for ln in d["lines"]) and d["passed"] is False
    assert any(ln["value"] is None for ln in d["lines"])  # NaN is null in JSON


# -- ctrl-rl eval ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def quad_run(tmp_path_factory) -> str:
    """ctrl_quad after 1 iteration of 8 envs x 8 steps: a policy that does not walk."""
    from ctrl_rl.app.train import train

    root = tmp_path_factory.mktemp("runs")
    return str(train(["task=quadruped_velocity_flat", "env.num_envs=8", "algo.num_steps_per_env=8",
                      "runner.max_iterations=1", "runner.progress=false", f"runner.log_root={root}"]))


def test_eval_ends_with_the_gait_report_and_require_gait_exits_1(quad_run, tmp_path):
    args = [sys.executable, "-m", "ctrl_rl", "eval", quad_run, "--episodes", "2", "--summary", str(tmp_path / "g.json"),
            "task.kwargs.episode_length_s=3", "task.kwargs.fixed_command=[0.5,0.0,0.0]"]
    ok = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-3000:]
    out = ok.stdout.splitlines()
    assert out[-1].startswith("RESULT ") and "gait=FAIL" in out[-1] and "tracked=no" in out[-1]
    assert any(ln.startswith("measured: 2 episodes") for ln in out), ok.stdout
    assert any(ln.startswith("  base height / standing") and ">= 0.85" in ln for ln in out)
    assert "command tracked: no" in out and (tmp_path / "g.json").exists()
    strict = subprocess.run([*args, "--require-gait"], capture_output=True, text=True, timeout=300)
    assert strict.returncode == 1 and "gait check failed" in strict.stderr, strict.stderr[-2000:]
    assert strict.stdout.splitlines()[-1].startswith("RESULT ")


# -- ctrl-rl deploy sim2sim --------------------------------------------------------------------------
@pytest.mark.slow
def test_sim2sim_ends_with_the_gait_report_and_require_gait_exits_1(tmp_path):
    """The node against the MuJoCo robot, 0.5 m/s commanded: the untrained policy stands still, the report
    says the command was not tracked, the JSON carries it and the PNG lies next to it; --require-gait exits 1
    with the RESULT line still last. The bridge's state noise and latency options reach it."""
    from bundles import quadruped_bundle

    bundle = quadruped_bundle(tmp_path / "runs")
    summary = tmp_path / "sim2sim.json"
    proc = subprocess.run([sys.executable, "-m", "ctrl_rl", "deploy", "sim2sim", bundle, "--duration", "5",
                           "--set", "safety.stand_up_time=1.0", "--cmd-vel", "0.5", "0", "0", "--summary", str(summary),
                           "--obs-noise", "1", "--latency", "0.002", "--command-latency", "0.002", "--require-gait",
                           "--namespace", f"gait_{os.getpid()}"],  # topics of its own: other runs may share the host
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)
    out, why = proc.stdout.splitlines(), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 1 and "gait check failed" in proc.stderr, why
    assert out[-1].startswith("RESULT sim2sim ") and "gait=FAIL" in out[-1] and "tracked=no" in out[-1], why
    assert "command tracked: no" in out and any(ln.startswith("  stand-up clamps") for ln in out)
    assert any(ln.startswith("measured: the policy phase of sim2sim") for ln in out)
    gait = json.loads(summary.read_text())["gait"]
    lines = {ln["name"]: ln for ln in gait["lines"]}
    assert lines["tracking_vx"]["passed"] is False and lines["base_height"]["bar"] == ">= 0.85"
    assert lines["peak_torque"]["bar"] == "<= 0.90" and lines["lateral_drift"]["bar"] == "<= 0.5 m"
    assert lines["real_time"]["bar"] == "<= 0.10" and 0.0 <= lines["real_time"]["value"] <= 1.0  # the bridge counted
    assert summary.with_suffix(".png").exists()


# -- a node fault ------------------------------------------------------------------------------------
def test_a_node_fault_is_its_own_failing_line_and_no_fault_passes():
    ok = {ln.name: ln for ln in gait_report([walk()], SPEC, node_fault="").lines}["node_faults"]
    assert ok.passed and ok.value == 0 and ok.note == "policy mode to the end"
    report = gait_report([walk()], SPEC, node_fault="robot state is stale: last JointState/Imu 409.1 ms ago")
    line = {ln.name: ln for ln in report.lines}["node_faults"]
    assert line.passed is False and line.value == 1 and line.note == "robot state is stale"
    assert report.failed() == ["node faults"] and not report.passed  # every other bar of the clean walk passes
    assert "node_faults" not in {ln.name for ln in gait_report([walk()], SPEC).lines}  # eval: no node


def test_sim2sim_counts_a_fall_in_the_safe_state_after_a_fault(tmp_path, capsys):
    """The G1 at iteration 1,450 (2026-12-03): the bridge stalled 409 ms, the node went to damping after 10.8 s
    of walking and the robot fell there (the bridge saw 70 deg of tilt). The report had said 0 falls and
    failed only vx tracking; now it names the fault and counts the fall. Without a fault, the same tilt after
    the run's end is no fall."""
    from types import SimpleNamespace

    from ctrl_rl.deploy.gait_files import sim2sim_report
    from ctrl_rl.deploy.gait_recorder import save

    save(tmp_path / "gait.npz", walk(), SPEC, stand_up_ticks=50, stand_up_clamps=0)
    args = SimpleNamespace(obs_noise=0.0, cmd_vel=(0.5, 0.0, 0.0), latency=0.0, command_latency=0.0,
                           bundle=str(tmp_path / "exported"), summary_path=tmp_path / "s.json", duration=20.0)
    fault = "robot state is stale: last JointState/Imu 409.1 ms ago (> 400.0 ms)"
    bridge = {"max_tilt": 1.22, "sim_time": 18.51}
    report = sim2sim_report(args, {"fault": fault}, bridge, tmp_path / "gait.npz")
    line = {ln.name: ln for ln in report.lines}
    assert line["falls"].value == 1 and line["node_faults"].passed is False
    assert set(report.failed()) == {"falls", "node faults"}
    out = " ".join(capsys.readouterr().out.split())
    assert "cut short: the node left policy mode after 10.0 s: robot state is stale" in out
    assert "the bridge simulated 18.5 s of the run's 20 s (the machine fell behind real time" in out
    assert json.loads((tmp_path / "s.json").read_text())["gait"]["passed"] is False
    report = sim2sim_report(args, {"fault": None}, {"max_tilt": 1.22}, tmp_path / "gait.npz")
    assert report.passed, report.table()


# -- real time ---------------------------------------------------------------------------------------
def test_off_beat_counts_the_control_periods_without_exactly_one_new_command():
    from ctrl_rl.deploy.gait_files import off_beat

    assert off_beat(np.ones(50, dtype=int)) == 0.0
    assert off_beat(np.array([1, 0, 2, 1])) == 0.5  # one held target, then two in one period: both off
    assert off_beat(np.array([1, 1, 3, 0, 0, 1, 1, 1, 1, 1])) == pytest.approx(0.3)
    assert math.isnan(off_beat(np.array([], dtype=int)))


def test_sim2sim_fails_a_run_the_machine_could_not_keep_in_step(tmp_path, capsys):
    """2026-12-03: one bundle, sim2sim smoothness 0.18 and 0.19 on idle cores, 0.23-0.33 beside two trainings,
    where 17 % of the control periods got no new command or two. The walk's own bars pass either way; the
    real-time line says which measurement is the machine's."""
    from types import SimpleNamespace

    from ctrl_rl.deploy.gait_files import sim2sim_report
    from ctrl_rl.deploy.gait_recorder import save

    args = SimpleNamespace(obs_noise=0.0, cmd_vel=(0.5, 0.0, 0.0), latency=0.0, command_latency=0.0,
                           bundle=str(tmp_path / "exported"), summary_path=tmp_path / "s.json", duration=20.0)
    n = len(walk())
    save(tmp_path / "kept.npz", walk(), SPEC, stand_up_ticks=50, stand_up_clamps=0, beats=np.ones(n, dtype=int))
    kept = sim2sim_report(args, {"fault": None}, {}, tmp_path / "kept.npz")
    assert kept.passed and kept.line("real_time").value == 0.0, kept.table()
    beats = np.ones(n, dtype=int)
    beats[::10], beats[1::10] = 0, 2  # every tenth period held, the next one doubled: 20 % off the beat
    save(tmp_path / "lost.npz", walk(), SPEC, stand_up_ticks=50, stand_up_clamps=0, beats=beats)
    lost = sim2sim_report(args, {"fault": None}, {}, tmp_path / "lost.npz")
    assert lost.failed() == ["control periods off the beat"], lost.table()
    assert lost.line("real_time").value == pytest.approx(0.2, abs=0.01)
    save(tmp_path / "old.npz", walk(), SPEC, stand_up_ticks=50, stand_up_clamps=0)  # traces from before the count
    assert sim2sim_report(args, {"fault": None}, {}, tmp_path / "old.npz").line("real_time") is None
