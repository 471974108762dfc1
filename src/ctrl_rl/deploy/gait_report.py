"""The gait report an owner reads: what a walking policy does to the robot, each line against a bar.

``ctrl-rl eval`` (robot tasks) and ``ctrl-rl deploy sim2sim`` end with it. Velocity and falls do not
say whether a gait is one to put on a robot: a policy can hold 0.5 m/s without falling on bent knees,
drifting a metre sideways every few metres, at the torque clamp. Each line below has a bar and a
PASS/FAIL verdict (``info`` lines have none); ``--require-gait`` makes the command exit 1 when a bar
fails.

Pure numpy (the robot side imports it; no torch). Input: one :class:`GaitTrace` per trajectory, every
array per control step ``[T, ...]``, and the robot's :class:`GaitSpec`. Several trajectories (eval's
envs) are combined per line as the line says: averages are the mean over trajectories (each weighted
once, whatever its length), peaks the worst trajectory, counts the sum.

The bars (why each, in :data:`BARS`) and the quantities (each a small function below, tested against
hand-computed cases in ``tests/test_gait_report.py``):

================================  ===========================  =====================================
line                              bar                          combined over trajectories
================================  ===========================  =====================================
falls                             = 0                          sum
forward velocity (vs command)     info                         mean
base height / standing height     >= 0.85                      mean
lateral drift per 10 m            <= 0.5 m                     mean (FAIL if one did not walk)
heading error per 10 m            <= 10 deg                    mean (FAIL if one did not walk)
tracking error vx, vy             <= max(0.1, 20 % of |cmd|)   mean
tracking error yaw rate           <= max(0.2, 20 % of |cmd|)   mean
peak torque / limit               <= 0.90                      max (worst joint and step, walking)
hand-over peak torque / limit     <= 0.99 (below the clamp)    max over each trajectory's first 1 s
RMS torque / limit                <= 0.50                      worst joint over the walking samples
joint-limit margin                >= 0.05 rad                  min
foot slip                         <= 0.10 m/s                  mean
stance time, swing time           0.10-1.00 s, 0.10-0.60 s     mean (walking commanded only)
action smoothness                 <= 0.20                      mean
cost of transport                 <= 2.0                       mean (moving trajectories)
stand-up clamps (sim2sim)         = 0                          sum
node faults (sim2sim)             = 0                          the node's fault, named
================================  ===========================  =====================================
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

G = 9.81
SETTLE_S = 1.0
"""Tracking errors skip each trajectory's first second (at most half of it): a robot starting at rest
needs a moment to reach the commanded speed, and that is not a tracking error."""
MOVING = 0.1
"""A command (m/s) above which the robot is asked to walk (legged_gym's ``feet_air_time`` threshold)."""
MIN_COMMANDED_TRAVEL = 1.0
"""Drift and heading per 10 m need at least this much commanded forward travel (m)."""
MIN_TRAVEL_FRACTION = 0.25
"""A robot that covered less than this share of its commanded forward travel did not move forward:
drift and heading are undefined for it, and the line fails."""
MAX_TILT = math.radians(60.0)
"""sim2sim counts a fall when the base tilts past this (the training task's ``max_tilt_deg``)."""


class GaitCheckFailed(RuntimeError):
    """``--require-gait``: a bar of the gait report failed (the command exits 1)."""


BARS: dict[str, str] = {
    "falls": "A fall in simulation is a fall on the robot.",
    "forward_velocity": "Information: the mean forward speed (heading frame) beside the mean command; the "
                        "tracking lines judge it.",
    "base_height": "At >= 0.85 of the standing height the knees bend slightly; below it the robot walks "
                   "crouched, which costs torque on every step (the clamp) and ground clearance.",
    "lateral_drift": "Without a turn or side step commanded, an owner steers the rest: 0.5 m per 10 m "
                     "(5 %) is what a joystick corrects without noticing; metres are not.",
    "heading_error": "10 deg per 10 m: the robot keeps the heading it was given within what an operator "
                     "corrects without noticing.",
    "tracking_vx": "The commanded speed within 0.1 m/s (or 20 % of a faster command): what the command "
                   "means to its owner.",
    "tracking_vy": "As vx, sideways.",
    "tracking_yaw": "The commanded turn rate within 0.2 rad/s (or 20 % of a faster command).",
    "peak_torque": "10 % headroom: a real motor's torque falls with speed, temperature and battery, so a "
                   "gait that reaches the clamp in simulation saturates on the robot. Measured while walking: "
                   "after each trajectory's first second, which the hand-over line judges.",
    "handover_torque": "The first second of the policy (its hand-over from the stand-up, or from a reset) "
                       "may lift the robot from where the stand-up left it, but not at the clamp: a motor "
                       "at its limit no longer does what the policy asked.",
    "rms_torque": "Motors are rated for continuous torque at about half their peak; a gait above it "
                  "overheats them within minutes.",
    "joint_limit_margin": "0.05 rad (3 deg) from every hard stop: a joint that reaches its stop in "
                          "simulation hits it on the robot, and the deploy node faults near it.",
    "foot_slip": "A foot in contact should stand: 0.1 m/s of horizontal foot speed in stance allows "
                 "touch-down and roll-off; above it the gait depends on friction it will not find.",
    "stance_time": "While walking, a foot stays down 0.1-1 s: shorter is tapping (5 ticks at 50 Hz), "
                   "longer is shuffling.",
    "swing_time": "While walking, a foot swings 0.1-0.6 s: shorter is tapping, longer is a hop or a "
                  "leg held up.",
    "action_smoothness": "RMS second difference of the actions (action units per step): a 2.5 Hz gait of "
                         "amplitude 1 at 50 Hz has 0.07; above 0.2 the targets jitter tick to tick, "
                         "which the motors turn into vibration and heat.",
    "cost_of_transport": "Mechanical power / (m g v): legged robots that walk well stay below 1; above 2 "
                         "the legs fight each other or the ground.",
    "stand_up_clamps": "Control ticks of the stand-up with a motor at its torque limit: a stand-up at the "
                       "clamp has no margin for a payload, a weak battery or a cold motor.",
    "real_time": "sim2sim only: control periods in which the bridge applied no new command or more than one "
                 "(the node and the simulation lost step on a machine behind real time). Above 10 % the actions "
                 "and their smoothness are the machine's, not the policy's: rerun on idle cores.",
    "node_faults": "The node left policy mode before the run's end (stale or malformed state, a safety "
                   "limit): the policy phase was cut short, and on the robot the walk ends in the safe state. "
                   "Whatever the cause, a walk the node did not finish is not a walk to judge as passed.",
}
"""Why each bar is where it is (the report's JSON carries these; docs/deploy.md repeats them)."""


@dataclass
class GaitSpec:
    """The robot's constants the report needs."""

    standing_height: float
    """Base height of the default pose standing on flat ground (m): the robot's ``init_height``."""
    mass: float
    """Total mass (kg), for the cost of transport."""
    torque_limits: np.ndarray
    """``[J]`` motor torque limits (N m)."""
    joint_limits: np.ndarray
    """``[J, 2]`` hard joint limits (rad); a row with lo >= hi is an unlimited joint."""
    dt: float
    """Control period of the traces (s)."""
    joint_names: list[str] = field(default_factory=list)
    foot_names: list[str] = field(default_factory=list)


@dataclass
class GaitTrace:
    """One trajectory of one robot, per control step."""

    base_pos: np.ndarray
    """``[T, 3]`` base position in the world (m)."""
    base_height: np.ndarray
    """``[T]`` base height over the ground below it (m)."""
    base_quat: np.ndarray
    """``[T, 4]`` base orientation (w, x, y, z), world frame."""
    base_lin_vel: np.ndarray
    """``[T, 3]`` base linear velocity in the body frame (m/s)."""
    gyro: np.ndarray
    """``[T, 3]`` base angular velocity in the body frame (rad/s)."""
    command: np.ndarray
    """``[T, 3]`` velocity command (vx, vy, yaw rate) the policy was given."""
    joint_pos: np.ndarray
    """``[T, J]`` (rad)."""
    joint_vel: np.ndarray
    """``[T, J]`` (rad/s)."""
    torque: np.ndarray
    """``[T, J]`` actuator torque (N m)."""
    foot_contact: np.ndarray
    """``[T, F]`` bool."""
    foot_vel: np.ndarray
    """``[T, F, 3]`` foot velocity in the world frame (m/s)."""
    actions: np.ndarray
    """``[T, A]`` the policy's actions."""
    fell: bool = False
    """The trajectory ended in a fall."""

    def __len__(self) -> int:
        return len(self.base_pos)


# -- the quantities, one function each ------------------------------------------------------------
def yaw_of(quat: np.ndarray) -> np.ndarray:
    """``[T]`` heading (rad) of ``[T, 4]`` (w, x, y, z) orientations."""
    w, x, y, z = np.moveaxis(np.asarray(quat, dtype=np.float64), -1, 0)
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def body_to_world(quat: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``[T, 3]`` body-frame vectors ``v`` in world axes."""
    w, x, y, z = np.moveaxis(np.asarray(quat, dtype=np.float64), -1, 0)
    r = np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)
    return (r @ np.asarray(v, dtype=np.float64)[..., None])[..., 0]


def heading_velocity(quat: np.ndarray, v_body: np.ndarray) -> np.ndarray:
    """``[T, 3]`` velocity in the heading frame (world axes turned by the yaw only): forward and
    sideways as the command means them, whatever the base's pitch and roll."""
    v = body_to_world(quat, v_body)
    c, s = np.cos(yaw_of(quat)), np.sin(yaw_of(quat))
    return np.stack([c * v[:, 0] + s * v[:, 1], -s * v[:, 0] + c * v[:, 1], v[:, 2]], -1)


def path_error(pos_xy: np.ndarray, yaw: np.ndarray, command: np.ndarray, dt: float) -> dict[str, float]:
    """Where the robot ended against where its command would have taken it.

    The commanded path starts at the first pose and integrates the command (``command[k]`` drives the
    step from sample k-1 to k): ``yaw_c += wz dt``, ``p_c += R(yaw_c) (vx, vy) dt``. Returns ``lateral``:
    the end-point error sideways of the commanded heading at the end (m; for a straight command, the
    displacement sideways in the frame of the initial heading); ``heading``: the heading change minus
    the commanded one (rad); ``travel``: the distance walked forward, each step's displacement along
    the heading of the robot at its start (m); ``commanded``: the commanded forward travel (m).
    """
    pos_xy, cmd = np.asarray(pos_xy, dtype=np.float64), np.asarray(command, dtype=np.float64)
    yaw = np.unwrap(np.asarray(yaw, dtype=np.float64))
    yaw_c = yaw[0] + np.concatenate([[0.0], np.cumsum(cmd[1:, 2] * dt)])
    c, s = np.cos(yaw_c[:-1]), np.sin(yaw_c[:-1])
    step = np.stack([c * cmd[1:, 0] - s * cmd[1:, 1], s * cmd[1:, 0] + c * cmd[1:, 1]], -1) * dt
    end_c = pos_xy[0] + step.sum(0)
    e = pos_xy[-1] - end_c
    lateral = -math.sin(yaw_c[-1]) * e[0] + math.cos(yaw_c[-1]) * e[1]
    d = np.diff(pos_xy, axis=0)
    travel = float((d[:, 0] * np.cos(yaw[:-1]) + d[:, 1] * np.sin(yaw[:-1])).sum())
    return {"lateral": float(lateral), "heading": float(yaw[-1] - yaw_c[-1]), "travel": travel,
            "commanded": float(cmd[1:, 0].sum() * dt)}


def per_10m(err: dict[str, float]) -> tuple[float, float] | None:
    """``(|lateral| m, |heading| deg)`` per 10 m of forward travel; None when the trajectory was not
    asked to walk forward (less than :data:`MIN_COMMANDED_TRAVEL`); NaN when it was and did not move
    (less than :data:`MIN_TRAVEL_FRACTION` of it)."""
    if abs(err["commanded"]) < MIN_COMMANDED_TRAVEL:
        return None
    travel = err["travel"] * math.copysign(1.0, err["commanded"])
    if travel < MIN_TRAVEL_FRACTION * abs(err["commanded"]):
        return math.nan, math.nan
    return abs(err["lateral"]) * 10.0 / travel, math.degrees(abs(err["heading"])) * 10.0 / travel


def settled(n: int, dt: float) -> slice:
    """The samples after :data:`SETTLE_S` (at most half the trajectory skipped)."""
    return slice(min(int(round(SETTLE_S / dt)), n // 2), n)


def tracking_error(measured: np.ndarray, commanded: np.ndarray) -> tuple[float, float]:
    """``(mean |measured - commanded|, mean |commanded|)`` over the samples given."""
    return float(np.abs(measured - commanded).mean()), float(np.abs(commanded).mean())


def torque_fractions(torque: np.ndarray, limits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per joint: ``(peak |tau| / limit, RMS of tau / limit)`` over the samples ``[T, J]``."""
    f = np.abs(np.asarray(torque, dtype=np.float64)) / np.asarray(limits, dtype=np.float64)
    return f.max(0), np.sqrt((f ** 2).mean(0))


def joint_limit_margin(joint_pos: np.ndarray, limits: np.ndarray) -> float:
    """The closest any limited joint came to a hard limit (rad; negative: past it)."""
    limits = np.asarray(limits, dtype=np.float64)
    limited = limits[:, 0] < limits[:, 1]
    if not limited.any():
        return math.inf
    q = np.asarray(joint_pos, dtype=np.float64)[:, limited]
    return float(np.minimum(q - limits[limited, 0], limits[limited, 1] - q).min())


def foot_slip(contact: np.ndarray, foot_vel: np.ndarray) -> float:
    """Mean horizontal foot speed over the samples where the foot is in contact (m/s); NaN without any."""
    contact = np.asarray(contact, dtype=bool)
    if not contact.any():
        return math.nan
    return float(np.linalg.norm(np.asarray(foot_vel)[..., :2], axis=-1)[contact].mean())


def phase_durations(contact: np.ndarray, dt: float) -> tuple[list[float], list[float]]:
    """``(stance, swing)`` durations (s) of one foot's complete phases: runs of contact / no contact
    that begin and end inside the trace (the first and last run are cut by the trace, not by a step)."""
    c = np.asarray(contact, dtype=bool)
    edges = np.flatnonzero(c[1:] != c[:-1]) + 1  # index where each new run starts
    stance, swing = [], []
    for start, end in zip(edges[:-1], edges[1:], strict=True):
        (stance if c[start] else swing).append(float((end - start) * dt))
    return stance, swing


def action_smoothness(actions: np.ndarray) -> float:
    """RMS of the actions' second difference ``a[t] - 2 a[t-1] + a[t-2]`` (action units)."""
    a = np.asarray(actions, dtype=np.float64)
    if len(a) < 3:
        return math.nan
    return float(np.sqrt((np.diff(a, n=2, axis=0) ** 2).mean()))


def cost_of_transport(torque: np.ndarray, joint_vel: np.ndarray, mass: float, speed: np.ndarray) -> float:
    """Mean mechanical power ``sum_j |tau_j qdot_j|`` over ``m g`` times the mean speed (dimensionless;
    NaN below :data:`MOVING` m/s: standing still has no distance to divide by)."""
    v = float(np.mean(speed))
    if v < MOVING:
        return math.nan
    power = np.abs(np.asarray(torque) * np.asarray(joint_vel)).sum(-1).mean()
    return float(power / (mass * G * v))


# -- the report -----------------------------------------------------------------------------------
@dataclass
class ReportLine:
    """One line of the report."""

    name: str
    label: str
    value: float
    unit: str
    bar: str
    passed: bool | None
    """None: information only (no bar), or the line does not apply to these trajectories."""
    note: str = ""


@dataclass
class GaitReport:
    """The lines in order, and what they were measured over."""

    lines: list[ReportLine]
    trajectories: int
    duration_s: float
    """Seconds of traces over all trajectories."""
    dt: float

    @property
    def passed(self) -> bool:
        return all(line.passed is not False for line in self.lines)

    @property
    def tracked(self) -> bool:
        """Whether the command was tracked: the tracking errors in x, y and yaw rate are within their bars."""
        names = ("tracking_vx", "tracking_vy", "tracking_yaw")
        return all(line.passed is not False for line in self.lines if line.name in names)

    def line(self, name: str) -> ReportLine | None:
        return next((line for line in self.lines if line.name == name), None)

    def failed(self) -> list[str]:
        return [line.label for line in self.lines if line.passed is False]

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "tracked": self.tracked, "trajectories": self.trajectories,
                "duration_s": self.duration_s, "dt": self.dt,
                "lines": [{**asdict(line), "value": _json_number(line.value), "why": BARS.get(line.name, "")}
                          for line in self.lines]}

    def table(self) -> list[str]:
        """The report as aligned lines within 100 columns, ending with the verdict."""
        head = (f"gait report: {self.trajectories} trajector{'y' if self.trajectories == 1 else 'ies'}, "
                f"{self.duration_s:.1f} s at {1 / self.dt:.0f} Hz")
        rows = [f"  {'measure':<26}{'value':>12}  {'bar':<18}{'verdict':<8}note"]
        for line in self.lines:
            verdict = "info" if line.passed is None else "PASS" if line.passed else "FAIL"
            value = _text(line.value)
            value = f"{value} {line.unit}".rstrip() if value != "n/a" else value
            rows.append(f"  {line.label:<26}{value:>12}  {line.bar:<18}{verdict:<8}{line.note}"[:100].rstrip())
        failed = self.failed()
        bars = sum(line.passed is not None for line in self.lines)
        verdict = f"FAIL ({len(failed)} of {bars} bars: {', '.join(failed)})" if failed else "PASS"
        tracked = "yes" if self.tracked else "no"
        return [head, *rows, f"command tracked: {tracked}",
                *textwrap.wrap(f"gait: {verdict}", 100, subsequent_indent="  ")]

    def result_fields(self) -> dict[str, Any]:
        """Key figures for the command's ``RESULT`` line."""
        value = lambda name: self.line(name).value if self.line(name) else math.nan  # noqa: E731
        return {"gait": "PASS" if self.passed else "FAIL", "tracked": "yes" if self.tracked else "no",
                "height_ratio": value("base_height"), "drift_per_10m": value("lateral_drift"),
                "peak_torque_frac": value("peak_torque")}


def _text(v: float) -> str:
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if math.isnan(v):
        return "n/a"
    v = 0.0 if abs(v) < 5e-3 else v  # no "-0.00"
    return f"{v:.3g}" if abs(v) >= 1000 else f"{v:.2f}"


def _json_number(v: float) -> float | None:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _mean(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.mean(finite)) if finite else math.nan


def _check(value: float, lo: float = -math.inf, hi: float = math.inf) -> bool:
    """Whether ``value`` is inside the bar; an undefined (NaN) value fails."""
    return not math.isnan(value) and lo <= value <= hi


def gait_report(traces: list[GaitTrace], spec: GaitSpec, stand_up_clamps: int | None = None,
                node_fault: str | None = None) -> GaitReport:
    """The report of ``traces`` (one or more trajectories of the robot ``spec``); ``stand_up_clamps``:
    control ticks of the stand-up with a motor at its torque limit (sim2sim; None: no stand-up);
    ``node_fault``: the fault that ended the node's policy phase, "" for none (sim2sim; None: no node)."""
    falls = sum(int(t.fell) for t in traces)
    lines = [ReportLine("falls", "falls", falls, "", "= 0", falls == 0, f"of {len(traces)}")]
    traces = [t for t in traces if len(t) >= 2]  # a fall on the first step has no gait to measure
    if not traces:
        raise ValueError("the gait report needs at least one trajectory of two or more control steps")
    dt = spec.dt
    lines += _motion_lines(traces, spec)
    lines += _torque_lines(traces, spec)
    lines += _foot_lines(traces, dt)
    smooth = _mean([action_smoothness(t.actions) for t in traces])
    lines.append(ReportLine("action_smoothness", "action smoothness", smooth, "", "<= 0.20", _check(smooth, hi=0.2),
                            "RMS 2nd difference"))
    cot = _mean([cost_of_transport(t.torque, t.joint_vel, spec.mass,
                                   np.linalg.norm(heading_velocity(t.base_quat, t.base_lin_vel)[:, :2], axis=-1))
                 for t in traces])
    lines.append(ReportLine("cost_of_transport", "cost of transport", cot, "", "<= 2.0",
                            None if math.isnan(cot) and not _walking(traces) else _check(cot, hi=2.0),
                            "not moving" if math.isnan(cot) else "mechanical"))
    if stand_up_clamps is not None:
        lines.append(ReportLine("stand_up_clamps", "stand-up clamps", int(stand_up_clamps), "ticks", "= 0",
                                stand_up_clamps == 0, "motor at its torque limit"))
    if node_fault is not None:
        lines.append(ReportLine("node_faults", "node faults", int(bool(node_fault)), "", "= 0", not node_fault,
                                node_fault.split(":")[0][:32] if node_fault else "policy mode to the end"))
    return GaitReport(lines, len(traces), float(sum(len(t) for t in traces) * dt), dt)


def _walking(traces: list[GaitTrace]) -> bool:
    """Whether any trajectory was asked to walk (mean commanded planar speed above :data:`MOVING`)."""
    return any(np.linalg.norm(t.command[:, :2], axis=-1).mean() > MOVING for t in traces)


def _motion_lines(traces: list[GaitTrace], spec: GaitSpec) -> list[ReportLine]:
    dt = spec.dt
    v = [heading_velocity(t.base_quat, t.base_lin_vel) for t in traces]
    wz = [body_to_world(t.base_quat, t.gyro)[:, 2] for t in traces]
    vx, cmd_vx = _mean([float(x[:, 0].mean()) for x in v]), _mean([float(t.command[:, 0].mean()) for t in traces])
    lines = [ReportLine("forward_velocity", "forward velocity", vx, "m/s", f"command {cmd_vx:.2f} m/s", None)]
    height = _mean([float(t.base_height.mean()) / spec.standing_height for t in traces])
    lines.append(ReportLine("base_height", "base height / standing", height, "", ">= 0.85", _check(height, lo=0.85),
                            f"standing {spec.standing_height:.2f} m"))
    drift = [per_10m(path_error(t.base_pos[:, :2], yaw_of(t.base_quat), t.command, dt)) for t in traces]
    asked = [d for d in drift if d is not None]
    still = sum(math.isnan(d[0]) for d in asked)
    for i, (name, label, unit, hi) in enumerate((("lateral_drift", "lateral drift per 10 m", "m", 0.5),
                                                 ("heading_error", "heading error per 10 m", "deg", 10.0))):
        bar = f"<= {hi:g} {unit}"
        if not asked:
            lines.append(ReportLine(name, label, math.nan, unit, bar, None, "no forward command of >= 1 m"))
            continue
        value = math.nan if still else _mean([d[i] for d in asked])
        note = f"{still} of {len(asked)} did not walk forward" if still else f"{len(asked)} walked forward"
        lines.append(ReportLine(name, label, value, unit, bar, _check(value, hi=hi), note))
    tracked = {"vx": ([x[:, 0] for x in v], 0, "m/s", 0.1), "vy": ([x[:, 1] for x in v], 1, "m/s", 0.1),
               "yaw rate": (wz, 2, "rad/s", 0.2)}
    for what, (measured, col, unit, floor) in tracked.items():
        errs = [tracking_error(m[settled(len(m), dt)], t.command[settled(len(m), dt), col])
                for m, t in zip(measured, traces, strict=True)]
        err, cmd = _mean([e for e, _ in errs]), _mean([c for _, c in errs])
        bar = max(floor, 0.2 * cmd)
        lines.append(ReportLine(f"tracking_{what.split()[0]}", f"tracking error {what}", err, unit,
                                f"<= {bar:.2f} {unit}", _check(err, hi=bar), f"mean |command| {cmd:.2f}"))
    return lines


def _torque_lines(traces: list[GaitTrace], spec: GaitSpec) -> list[ReportLine]:
    names = spec.joint_names or [f"joint {j}" for j in range(len(spec.torque_limits))]
    walking = np.concatenate([t.torque[settled(len(t), spec.dt)] for t in traces])
    first = np.concatenate([t.torque[:settled(len(t), spec.dt).start] for t in traces])
    peak, rms = torque_fractions(walking, spec.torque_limits)
    handover = torque_fractions(first, spec.torque_limits)[0] if len(first) else np.zeros(1)
    q = np.concatenate([t.joint_pos for t in traces])
    per_joint = [joint_limit_margin(q[:, [j]], spec.joint_limits[[j]]) for j in range(len(names))]
    margin, worst_q = min(per_joint), names[int(np.argmin(per_joint))]
    top, rms_top = float(peak.max()), float(rms.max())
    return [ReportLine("peak_torque", "peak torque / limit", top, "", "<= 0.90", _check(top, hi=0.9),
                       f"worst: {names[int(peak.argmax())]}"),
            ReportLine("handover_torque", "hand-over peak torque", float(handover.max()), "", "<= 0.99",
                       _check(float(handover.max()), hi=0.99), f"first {SETTLE_S:g} s: {names[handover.argmax()]}"),
            ReportLine("rms_torque", "RMS torque / limit", rms_top, "", "<= 0.50", _check(rms_top, hi=0.5),
                       f"worst: {names[int(rms.argmax())]}"),
            ReportLine("joint_limit_margin", "joint-limit margin", margin, "rad", ">= 0.05 rad",
                       _check(margin, lo=0.05), f"worst: {worst_q}" if math.isfinite(margin) else "no limited joints")]


def _foot_lines(traces: list[GaitTrace], dt: float) -> list[ReportLine]:
    slip = _mean([foot_slip(t.foot_contact, t.foot_vel) for t in traces])
    lines = [ReportLine("foot_slip", "foot slip", slip, "m/s", "<= 0.10 m/s", _check(slip, hi=0.1), "in contact")]
    walking = [t for t in traces if np.linalg.norm(t.command[:, :2], axis=-1).mean() > MOVING]
    for i, (name, label, lo, hi) in enumerate((("stance_time", "stance time", 0.1, 1.0),
                                               ("swing_time", "swing time", 0.1, 0.6))):
        per = []
        for t in walking:
            phases = [d for f in range(t.foot_contact.shape[1]) for d in phase_durations(t.foot_contact[:, f], dt)[i]]
            per.append(float(np.mean(phases)) if phases else math.nan)
        value = _mean(per)
        bar = f"{lo:.2f}-{hi:.2f} s"
        if not walking:
            lines.append(ReportLine(name, label, value, "s", bar, None, "no walking command"))
        else:
            none = sum(math.isnan(p) for p in per)
            lines.append(ReportLine(name, label, math.nan if none else value, "s", bar,
                                    not none and _check(value, lo=lo, hi=hi),
                                    f"{none} of {len(per)} took no step" if none else "complete phases"))
    return lines
