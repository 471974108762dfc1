"""``--transport unitree``: Unitree's LowCmd/LowState (unitree_go and unitree_hg) over real cyclonedds.

The CRC against vectors computed with Unitree's own compiled ``crc32_core`` (unitree_sdk2_python's
``crc_amd64.so``); the node side and the robot side against each other and against a raw DDS peer
that writes tampered messages; then the whole path, ``ctrl-rl deploy sim2sim --transport unitree``,
watched on the wire: every LowCmd the node sends carries a right CRC and finite targets within the
joints' limits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from ctrl_rl.deploy import messages as m
from ctrl_rl.deploy.transports.dds import DdsTransport
from ctrl_rl.deploy.transports.unitree import LOWCMD, LOWSTATE, UnitreeTransport
from ctrl_rl.deploy.unitree_msgs import G1_MOTORS, GO, GO_MOTORS, HG, POS_STOP, VEL_STOP, family_for

DOMAIN = 40 + os.getpid() % 50


def test_crc_and_layout_match_unitrees_vectors() -> None:
    assert [x.size for x in (GO.low_cmd, GO.low_state, HG.low_cmd, HG.low_state)] == [812, 1180, 1004, 2092]
    assert GO.low_cmd.crc(GO.low_cmd.zero()) == 0x4B5A4880
    assert HG.low_cmd.crc(HG.low_cmd.zero()) == 0xFE172F9F
    assert GO.low_state.crc(GO.low_state.zero()) == 0x85F11EA6
    assert HG.low_state.crc(HG.low_state.zero()) == 0xD64BB04A
    cmd = GO.low_cmd.zero()  # header set, every motor in servo mode without a target
    cmd.head, cmd.level_flag = [0xFE, 0xEF], 0xFF
    for motor in cmd.motor_cmd:
        motor.mode, motor.q, motor.dq = 1, POS_STOP, VEL_STOP
    assert GO.low_cmd.crc(cmd) == 0x06E577CD
    assert GO.low_cmd.idl.__idl_typename__ == "unitree_go::msg::dds_::LowCmd_"
    assert HG.low_state.idl.__idl_typename__ == "unitree_hg::msg::dds_::LowState_"
    assert (family_for("unitree_go1", 12), family_for("unitree_g1", 29), family_for("ctrl_quad", 12)) == \
        ("go", "hg", "go")


def _pair(family, joints):
    node = UnitreeTransport(family, joints, side="node", domain_id=DOMAIN, localhost_only=True)
    robot = UnitreeTransport(family, joints, side="robot", domain_id=DOMAIN, localhost_only=True)
    return node, robot


def _wait(pred, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("family, motors", [(GO, GO_MOTORS), (HG, G1_MOTORS)])
def test_state_and_commands_cross_between_node_and_robot(family, motors) -> None:
    joints = list(motors)[::-1]  # the bundle's order need not be the motors'
    node, robot = _pair(family, joints)
    got: dict[str, list] = {"js": [], "imu": [], "cmd": []}
    try:
        node.subscribe("joint_states", m.JointState, got["js"].append)
        node.subscribe("imu/data", m.Imu, got["imu"].append)
        send_cmd = node.publisher("joint_commands", m.Float64MultiArray)
        robot.subscribe("joint_commands", m.Float64MultiArray, got["cmd"].append)
        send_js, send_imu = robot.publisher("joint_states", m.JointState), robot.publisher("imu/data", m.Imu)
        raw = DdsTransport(domain_id=DOMAIN, localhost_only=True)  # what is on the wire
        wire: list = []
        raw.subscribe(LOWCMD, family.low_cmd.idl, wire.append)
        assert _wait(lambda: node.dds.wait_for_publishers(1, 0.1) and robot.dds.wait_for_publishers(1, 0.1)
                     and raw.wait_for_publishers(1, 0.1))
        n = len(joints)
        q = np.linspace(-0.5, 0.5, n)
        quat = np.array([0.9, 0.1, -0.2, 0.3]) / np.linalg.norm([0.9, 0.1, -0.2, 0.3])

        def publish_state() -> None:
            send_js(m.JointState(name=joints, position=q, velocity=2 * q, effort=3 * q))
            send_imu(m.Imu(orientation=quat, angular_velocity=np.array([0.1, 0.2, 0.3]),
                           linear_acceleration=np.array([0.0, 0.0, 9.81])))

        assert _wait(lambda: (publish_state(), got["js"])[1])
        js, imu = got["js"][-1], got["imu"][-1]
        assert js.name == joints and np.allclose(js.position, q, atol=1e-6) and np.allclose(js.effort, 3 * q, atol=1e-5)
        assert np.allclose(imu.orientation, quat, atol=1e-6)  # w, x, y, z on both sides
        command = np.concatenate([q / 2, np.full(n, 20.0), np.full(n, 0.5)])
        assert _wait(lambda: (send_cmd(m.Float64MultiArray(data=command)), got["cmd"] and wire)[1])
        assert np.allclose(got["cmd"][-1].data, command, atol=1e-6)  # same joint order back
        low = wire[-1]
        assert low.crc == family.low_cmd.crc(low)
        driven = {motors.index(j) for j in joints}
        for i, motor in enumerate(low.motor_cmd):
            if i in driven:
                assert motor.mode == 1 and motor.kp == pytest.approx(20.0) and motor.kd == pytest.approx(0.5)
            else:  # a motor the bundle does not drive is stopped, never stiff
                assert motor.mode == 0 and motor.kp == 0 and motor.kd == 0
                if family is GO:
                    assert motor.q == pytest.approx(POS_STOP) and motor.dq == pytest.approx(VEL_STOP)
        if family is GO:
            assert list(low.head) == [0xFE, 0xEF] and low.level_flag == 0xFF
        else:
            assert low.mode_machine == 5  # echoed from the robot's LowState
        raw.close()
    finally:
        node.close()
        robot.close()


def test_lowstate_with_a_bad_crc_or_a_stale_tick_is_refused() -> None:
    joints = list(GO_MOTORS)
    node = UnitreeTransport(GO, joints, side="node", domain_id=DOMAIN + 1, localhost_only=True)
    raw = DdsTransport(domain_id=DOMAIN + 1, localhost_only=True)
    got: list = []
    try:
        node.subscribe("joint_states", m.JointState, got.append)
        write = raw.publisher(LOWSTATE, GO.low_state.idl)
        assert raw.wait_for_subscribers(1, 5)

        def state(tick: int, crc_delta: int = 0):
            s = GO.low_state.zero()
            s.tick = tick
            s.motor_state[0].q = 0.25
            s.crc = (GO.low_state.crc(s) + crc_delta) & 0xFFFFFFFF
            return s

        assert _wait(lambda: (write(state(10)), got)[1])  # a good one first: the link is up
        before = len(got)
        write(state(11, crc_delta=1))  # wrong CRC
        write(state(10))               # tick did not advance
        write(state(9))                # went back
        time.sleep(0.3)
        assert len(got) == before and node.stats["bad_crc"] == 1 and node.stats["stale_tick"] >= 2
        write(state(12))
        assert _wait(lambda: len(got) > before) and got[-1].position[0] == pytest.approx(0.25)
    finally:
        raw.close()
        node.close()


def test_a_command_it_cannot_send_whole_is_never_sent() -> None:
    node = UnitreeTransport(GO, list(GO_MOTORS), side="node", domain_id=DOMAIN + 2, localhost_only=True)
    try:
        for data in (np.zeros(12), np.full(36, np.nan), np.r_[np.zeros(35), np.inf]):
            with pytest.raises(ValueError, match="position-gains"):
                node.low_cmd(m.Float64MultiArray(data=data))
        assert node.stats["lowcmd"] == 0
        with pytest.raises(ValueError, match="no motor index in unitree_go"):
            UnitreeTransport(GO, ["left_knee_joint"], side="node", domain_id=DOMAIN + 2, localhost_only=True)
    finally:
        node.close()


@pytest.mark.slow
def test_sim2sim_over_the_unitree_protocol_sends_only_checked_lowcmds(tmp_path) -> None:
    """The Go1 bundle, node and bridge over rt/lowcmd and rt/lowstate: the policy drives the simulated
    robot, and a raw peer sees every LowCmd with its CRC right and its targets finite and in range."""
    from ctrl_rl.app.export import export
    from ctrl_rl.app.train import train
    from ctrl_rl.robots.robot import load_robot

    run = train(["task=quadruped_velocity_flat", "robot=unitree_go1", "env.num_envs=8", "algo.num_steps_per_env=8",
                 "runner.max_iterations=1", f"runner.log_root={tmp_path}", "runner.progress=false"])
    bundle = export(str(run), [])
    robot = load_robot("unitree_go1")
    lo, hi = np.array(robot_limits(robot)).T
    domain = DOMAIN + 3
    raw = DdsTransport(domain_id=domain, localhost_only=True)
    wire: list = []
    lock = threading.Lock()

    def seen(s) -> None:
        with lock:
            wire.append(s)

    raw.subscribe(LOWCMD, GO.low_cmd.idl, seen)
    try:
        proc = subprocess.run([sys.executable, "-m", "ctrl_rl", "deploy", "sim2sim", str(bundle), "--transport",
                               "unitree", "--duration", "4", "--set", "safety.stand_up_time=0.5",
                               "--cmd-vel", "0", "0", "0"], capture_output=True, text=True, timeout=180,
                              env={**os.environ, "ROS_DOMAIN_ID": str(domain), "ROS_LOCALHOST_ONLY": "1"})
    finally:
        raw.close()
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    node = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT mode="))
    status = dict(kv.split("=") for kv in node.split()[1:])
    assert int(status["policy_ticks"]) > 0 and int(status["published"]) > 50, node
    assert len(wire) > 50
    index = [GO_MOTORS.index(j) for j in robot.joint_names]
    for s in wire:
        assert s.crc == GO.low_cmd.crc(s)
        q = np.array([s.motor_cmd[i].q for i in index])
        assert np.all(np.isfinite(q)) and np.all(q >= lo - 0.1) and np.all(q <= hi + 0.1)


def robot_limits(robot) -> list[tuple[float, float]]:
    """The joints' hard ranges from the model, in the YAML's order."""
    from ctrl_rl.robots.robot import build_model

    model, _ = build_model(robot)
    return [tuple(model.jnt_range[model.joint(j).id]) for j in robot.joint_names]
