"""Plain-DDS transport: ROS 2 wire format (checked byte by byte), round trips in and across processes.

Every transport here is localhost-only (loopback, no multicast: works in containers and CI) on a
per-process domain id, so concurrent test runs on one machine do not see each other's samples.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from cyclonedds.core import Policy

from ctrl_rl.deploy import messages as m
from ctrl_rl.deploy.transports import make_transport
from ctrl_rl.deploy.transports.dds import (
    COMPAT_CONFIG,
    CONVERTERS,
    LOCALHOST_CONFIG,
    WRITER_QOS,
    DdsTransport,
    dds_topic_name,
    domain_config,
)
from ctrl_rl.deploy.transports.ros_idl import Bool_, Header_, JointState_, Time_, stamp_to_time, time_to_stamp

DOMAIN = 100 + os.getpid() % 100  # 7400 + 250 * domain stays below 65535 up to 232
CDR_LE = b"\x00\x01\x00\x00"  # encapsulation: plain CDR (XCDR1) little endian, options 0


class Inbox:
    """Thread-safe message sink with deadline-based waiting (callbacks run on cyclonedds' thread)."""

    def __init__(self):
        self.msgs: list = []
        self.times: list[float] = []
        self._cond = threading.Condition()

    def __call__(self, msg) -> None:
        with self._cond:
            self.msgs.append(msg)
            self.times.append(time.perf_counter())
            self._cond.notify_all()

    def wait(self, n: int, timeout: float = 5.0) -> bool:
        return self.wait_until(lambda msgs: len(msgs) >= n, timeout)

    def wait_until(self, pred, timeout: float = 5.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: bool(self.msgs) and pred(self.msgs), timeout)


@pytest.fixture
def pair():
    a = DdsTransport(namespace="/robot", domain_id=DOMAIN, localhost_only=True)
    b = DdsTransport(namespace="robot", domain_id=DOMAIN, localhost_only=True)
    yield a, b
    a.close()
    b.close()


# ---------------------------------------------------------------------------------------------- names


def test_topic_name_mapping():
    assert dds_topic_name("joint_states", "/robot") == "rt/robot/joint_states"
    assert dds_topic_name("joint_states", "robot/") == "rt/robot/joint_states"
    assert dds_topic_name("joint_states", "/a/b") == "rt/a/b/joint_states"
    assert dds_topic_name("joint_states", "") == "rt/joint_states"
    assert dds_topic_name("joint_states", "/") == "rt/joint_states"
    assert dds_topic_name("/imu/data", "/robot") == "rt/imu/data"  # absolute: namespace ignored
    assert dds_topic_name("cmd/vel", "/robot") == "rt/robot/cmd/vel"
    for bad in ("", "~/private", "trailing/"):
        with pytest.raises(ValueError):
            dds_topic_name(bad)


def test_type_names_match_ros2():
    assert set(CONVERTERS) == set(m.MESSAGE_TYPES.values())
    for ros_name, cls in m.MESSAGE_TYPES.items():
        pkg, _, msg = ros_name.split("/")
        assert CONVERTERS[cls][0].__idl__.idl_transformed_typename == f"{pkg}::msg::dds_::{msg}_"
    assert Header_.__idl__.idl_transformed_typename == "std_msgs::msg::dds_::Header_"
    assert Time_.__idl__.idl_transformed_typename == "builtin_interfaces::msg::dds_::Time_"


# ------------------------------------------------------------------------------------------ wire format


def test_writers_offer_xcdr1_only():
    rep = WRITER_QOS[Policy.DataRepresentation]
    assert rep.use_cdrv0_representation and not rep.use_xcdrv2_representation
    with DdsTransport(domain_id=DOMAIN, localhost_only=True) as t:
        t.publisher("wire_check", m.Bool)
        rep = t._writers[0].get_qos()[Policy.DataRepresentation]
        assert rep.use_cdrv0_representation and not rep.use_xcdrv2_representation


def test_wire_bool():
    assert Bool_(data=True).serialize(use_version_2=False) == CDR_LE + b"\x01"
    assert Bool_(data=False).serialize(use_version_2=False) == CDR_LE + b"\x00"


def test_wire_joint_state_layout():
    """XCDR1: alignment relative to the end of the 4-byte encapsulation header, doubles aligned to 8,
    strings as uint32 length including the NUL, then bytes and NUL; sequences as uint32 count."""
    to_idl = CONVERTERS[m.JointState][1]
    msg = m.JointState(stamp=12.000000005, name=["j1"], position=np.array([1.5]), velocity=np.array([-2.0]),
                       effort=np.array([0.25]), frame_id="base")
    data = to_idl(msg).serialize(use_version_2=False)

    def u32(v):
        return struct.pack("<I", v)

    def f64(v):
        return struct.pack("<d", v)

    pad = b"\x00"
    body = (
        struct.pack("<iI", 12, 5)  # 0: header.stamp sec, nanosec
        + u32(5) + b"base\x00" + pad * 3  # 8: frame_id (len 5 incl. NUL) -> 20
        + u32(1) + u32(3) + b"j1\x00" + pad  # 20: name: count, len, bytes -> 32
        + u32(1) + pad * 4 + f64(1.5)  # 32: position count, pad to 40, double -> 48
        + u32(1) + pad * 4 + f64(-2.0)  # 48: velocity -> 64
        + u32(1) + pad * 4 + f64(0.25)  # 64: effort -> 80
    )
    assert data == CDR_LE + body
    assert CONVERTERS[m.JointState][2](JointState_.deserialize(data)).name == ["j1"]


def test_wire_imu_quaternion_order_and_size():
    to_idl = CONVERTERS[m.Imu][1]
    msg = m.Imu(orientation=np.array([0.1, 0.2, 0.3, 0.4]))  # neutral w, x, y, z
    data = to_idl(msg).serialize(use_version_2=False)
    # header: 8 (stamp) + 4 + 1 ("" = NUL only) -> 13, padded to 16; then x, y, z, w doubles.
    assert struct.unpack_from("<4d", data, 4 + 16) == (0.2, 0.3, 0.4, 0.1)
    # + 9 covariance + 3 + 9 + 3 + 9 doubles: 16 + 8 * (4 + 9 + 3 + 9 + 3 + 9)
    assert len(data) == 4 + 16 + 8 * 37


def test_stamp_conversion_exact_to_the_ns():
    t = stamp_to_time(12.000000001)
    assert (t.sec, t.nanosec) == (12, 1)
    t = stamp_to_time(1.9999999999)  # rounds up into the next second
    assert (t.sec, t.nanosec) == (2, 0)
    now = 1_750_000_000.123456789  # a time.time() stamp: float resolution ~238 ns, round trip exact
    t = stamp_to_time(now)
    assert t.sec == 1_750_000_000 and abs(t.nanosec - 123456789) < 300
    assert time_to_stamp(t) == now
    assert time_to_stamp(Time_(sec=5, nanosec=999_999_999)) == 5.999999999


# ----------------------------------------------------------------------------------------- round trips


def _samples() -> list:
    return [
        m.JointState(stamp=1_750_000_000.5, name=["hip", "knee", "ünïcode"], position=np.array([0.1, -0.2, 1e-300]),
                     velocity=np.array([1.0, 2.0, np.inf]), effort=np.array([-3.5, 0.0, 7.25]), frame_id="base"),
        m.Imu(stamp=3.000000007, orientation=np.array([0.9, 0.1, -0.2, 0.3]), angular_velocity=np.array([1.0, 2, 3]),
              linear_acceleration=np.array([0.0, 0.5, -9.81]), frame_id="imu_link"),
        m.Twist(linear=np.array([0.5, -0.25, 0.0]), angular=np.array([0.0, 0.0, 1.25])),
        m.PoseStamped(stamp=7.5, position=np.array([0.28, -0.05, 0.0]), orientation=np.array([0.9, 0.1, -0.2, 0.3]),
                      frame_id="base_link"),
        m.Float64MultiArray(data=np.arange(6.0) / 7, dims=[("rows", 2, 6), ("cols", 3, 3)], data_offset=1),
        m.Float64(data=0.1234567890123),
        m.Bool(data=True),
        m.String(data='{"state": "running", "ünï": 1}'),
        m.DiagnosticArray(stamp=5.25, status=[m.DiagnosticStatus(2, "ctrl_rl_node: safety", "damping: x", "quad",
                                                                  [("mode", "damping"), ("fault", "x")])],
                          frame_id=""),
    ]


def _assert_same(a, b):
    assert type(a) is type(b)
    for k, va in vars(a).items():
        vb = getattr(b, k)
        if isinstance(va, np.ndarray):
            assert isinstance(vb, np.ndarray) and vb.dtype == np.float64 and np.array_equal(va, vb), k
        else:
            assert va == vb and type(va) is type(vb), k


def test_round_trip_every_type(pair):
    a, b = pair
    sent = _samples()
    inboxes, pubs = [], []
    for i, msg in enumerate(sent):
        inboxes.append(Inbox())
        b.subscribe(f"rt_{i}", type(msg), inboxes[-1])
        pubs.append(a.publisher(f"rt_{i}" if i % 2 else f"/robot/rt_{i}", type(msg)))  # relative == absolute
    assert a.wait_for_subscribers(1, timeout=5) and b.wait_for_publishers(1, timeout=5)
    for pub, msg in zip(pubs, sent, strict=True):
        pub(msg)
    for inbox, msg in zip(inboxes, sent, strict=True):
        assert inbox.wait(1), type(msg).__name__
        _assert_same(msg, inbox.msgs[0])
    assert time_to_stamp(stamp_to_time(sent[1].stamp)) == inboxes[1].msgs[0].stamp


def test_same_transport_pub_and_sub_and_rate():
    """One transport both ways (the bridge does this); 12 joints at 500 Hz arrive complete and in order."""
    t = DdsTransport(namespace="/robot", domain_id=DOMAIN, localhost_only=True)
    try:
        inbox = Inbox()
        t.subscribe("joint_states", m.JointState, inbox)
        pub = t.publisher("joint_states", m.JointState)
        assert t.wait_for_subscribers(1)
        names = [f"joint_{i}" for i in range(12)]
        n, period = 250, 1 / 500
        start = time.perf_counter()
        for i in range(n):
            pub(m.JointState(stamp=time.time(), name=names, position=np.full(12, float(i)), velocity=np.ones(12),
                             effort=np.zeros(12)))
            time.sleep(max(0.0, start + (i + 1) * period - time.perf_counter()))
        assert inbox.wait(n, timeout=5), len(inbox.msgs)
        assert [int(x.position[0]) for x in inbox.msgs] == list(range(n))
    finally:
        t.close()


def test_env_resolution_and_close(monkeypatch):
    monkeypatch.setenv("ROS_DOMAIN_ID", str(DOMAIN))
    monkeypatch.setenv("ROS_LOCALHOST_ONLY", "1")
    t = make_transport("dds", namespace="/robot")
    assert (t.name, t.domain_id, t.localhost_only) == ("dds", DOMAIN, True)
    pub = t.publisher("x", m.Bool)
    t.close()
    t.close()  # idempotent
    with pytest.raises(RuntimeError):
        t.publisher("x", m.Bool)
    with pytest.raises(RuntimeError):
        pub(m.Bool(data=True))
    monkeypatch.delenv("ROS_LOCALHOST_ONLY")
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    with DdsTransport() as t2:
        assert t2.localhost_only and t2.domain_id == DOMAIN
        with pytest.raises(KeyError):
            t2.publisher("x", dict)


# ------------------------------------------------------------------------------------- cross-process

PUBLISHER = textwrap.dedent("""
    import sys, threading, time
    import numpy as np
    from ctrl_rl.deploy import messages as m
    from ctrl_rl.deploy.transports.dds import DdsTransport

    go, done = threading.Event(), threading.Event()
    def stdin_reader():
        sys.stdin.readline()
        go.set()
        sys.stdin.read()
        done.set()
    threading.Thread(target=stdin_reader, daemon=True).start()

    t0 = time.perf_counter()
    t = DdsTransport(namespace="/robot")  # domain and localhost-only from the environment
    pub = t.publisher("joint_states", m.JointState)
    assert t.wait_for_subscribers(1, timeout=10), "no subscriber discovered"
    print(f"discovered {time.perf_counter() - t0:.3f}", flush=True)
    names = [f"joint_{i}" for i in range(12)]
    def msg(i):
        return m.JointState(stamp=1_750_000_000.0 + i * 0.002, name=names, position=np.full(12, float(i)),
                            velocity=np.arange(12.0), effort=np.zeros(12), frame_id="base")
    while not go.wait(0.01):  # warm-up until the parent got one: samples right after matching may be lost
        pub(msg(-1))
    start = time.perf_counter()
    for i in range(int(sys.argv[1])):
        pub(msg(i))
        time.sleep(max(0.0, start + (i + 1) / 500 - time.perf_counter()))
    done.wait(30)  # keep the writer alive until the parent has everything (EOF on stdin)
    t.close()
""")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROS_", "CYCLONEDDS"))}
    return {**env, "ROS_DOMAIN_ID": str(DOMAIN), "ROS_LOCALHOST_ONLY": "1", **extra}


def test_cross_process_round_trip():
    n = 200
    with DdsTransport(namespace="/robot", domain_id=DOMAIN, localhost_only=True) as t:
        inbox = Inbox()
        t.subscribe("joint_states", m.JointState, inbox)
        proc = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(n)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        try:
            warm = inbox.wait(1, timeout=15)
            proc.stdin.write("go\n")
            proc.stdin.flush()
            ok = warm and inbox.wait_until(lambda msgs: msgs[-1].position[0] == n - 1, timeout=10)
            out, err = proc.communicate(input="", timeout=10)
        finally:
            proc.kill()
        got = [int(x.position[0]) for x in inbox.msgs if x.position[0] >= 0]
        assert ok, f"got {len(got)}/{n}; publisher said: {out} {err}"
        assert proc.returncode == 0, err
        discovery = float(out.split()[1])
        print(f"cross-process discovery {discovery:.3f} s")
        assert discovery < 5.0
        assert got == list(range(n))
        last = inbox.msgs[-1]
        assert last.name == [f"joint_{i}" for i in range(12)] and last.frame_id == "base"
        assert last.stamp == 1_750_000_000.0 + (n - 1) * 0.002
        assert np.array_equal(last.velocity, np.arange(12.0))


def test_localhost_config_applied_and_user_uri_appended(tmp_path):
    """The domain really is loopback + unicast only, and a user's CYCLONEDDS_URI still applies (tracing).
    Interop with a real ROS 2 node (rclpy + Fast DDS) is tests/test_rclpy_transport.py's interop test."""
    log = tmp_path / "cdds.log"
    tracing = f"<Tracing><Verbosity>config</Verbosity><OutputFile>{log}</OutputFile></Tracing>"
    uri = f"<CycloneDDS><Domain>{tracing}</Domain></CycloneDDS>"
    code = "from ctrl_rl.deploy.transports.dds import DdsTransport; DdsTransport().close()"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30, env=_env(CYCLONEDDS_URI=uri))
    text = log.read_text()
    assert "General/AllowMulticast/#text: false" in text
    assert "NetworkInterface[@address]: 127.0.0.1" in text
    assert "Discovery/Peers/Peer[@Address]: 127.0.0.1" in text
    assert "Discovery/ParticipantIndex/#text: auto" in text
    assert "Compatibility/IgnoreTypeInformation/#text: 1.1,1.15" in text  # Fast DDS 3 / Connext: match by name


def test_domain_config_composition(monkeypatch):
    monkeypatch.delenv("CYCLONEDDS_URI", raising=False)
    assert domain_config(False) == COMPAT_CONFIG  # type-name matching with Fast DDS peers, always
    assert domain_config(True) == f"{COMPAT_CONFIG},{LOCALHOST_CONFIG}"
    monkeypatch.setenv("CYCLONEDDS_URI", "file:///etc/cyclone.xml")
    assert domain_config(True) == f"{COMPAT_CONFIG},{LOCALHOST_CONFIG},file:///etc/cyclone.xml"  # user's last: wins
