"""The gait report's files: the JSON (the command's summary with the report in it) and, next to it, a PNG
of one trajectory's traces: base height against the standing height and the 0.85 bar, forward and
lateral velocity against the command, torque as a fraction of the limits, and the feet's contacts (the
gait diagram). matplotlib is optional on a robot computer (``ctrl-rl[deploy]`` has none): without it
the PNG is skipped, and said."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from ctrl_rl.utils.files import atomic_write

from .gait_recorder import load
from .gait_report import MAX_TILT, GaitReport, GaitSpec, GaitTrace, ReportLine, gait_report, heading_velocity

OFF_BEAT = 0.10
"""The real-time bar: at most this fraction of the control periods without exactly one new command."""


def off_beat(beats: np.ndarray) -> float:
    """Fraction of control periods in which the bridge applied no new joint command or more than one
    (``beats``: commands applied per period): 0 when the node and the simulation kept step."""
    b = np.asarray(beats)
    return float(np.mean(b != 1)) if len(b) else float("nan")


def write_report(path: str | Path, data: dict[str, Any], report: GaitReport, trace: GaitTrace, spec: GaitSpec,
                 title: str) -> list[str]:
    """``data`` with ``data["gait"] = report`` as JSON at ``path``, ``trace`` plotted next to it
    (``<path stem>.png``); returns the lines to print (where each file went)."""
    path = Path(path)
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps({**data, "gait": report.to_dict()}, indent=1, default=_plain) + "\n")
    png = path.with_suffix(".png")
    try:
        plot_gait(trace, spec, png, title)
    except ModuleNotFoundError as e:
        return [f"gait report: {path.resolve()}",
                f"gait plot: skipped ({e.name} is not installed; pip install matplotlib, or ctrl-rl[train])"]
    return [f"gait report: {path.resolve()}", f"gait plot: {png.resolve()}"]


def sim2sim_report(args: Any, status: dict[str, Any], sim: dict[str, Any], gait_path: Path) -> GaitReport | None:
    """``ctrl-rl deploy sim2sim``'s gait report of the bridge's policy phase, printed and written into the
    ``--summary`` JSON (the node's status, the bridge's as ``bridge``, the report as ``gait``) with its PNG
    next to it; None when the bridge recorded no policy phase."""
    if not gait_path.exists():
        print("gait report: none (the bridge saved no traces)")
        return None
    trace, spec, clamps, beats = load(gait_path)
    if len(trace) < 2:
        print("gait report: none (the node never ran the policy on the simulated robot)")
        return None
    fault = str(status.get("fault") or "")
    # the node's tilt watchdog (safety.max_tilt) ends the policy phase of a fall before the bridge sees one;
    # after any other fault the robot is in the safe state, and a biped that falls there has fallen
    fell_after = bool(fault) and float(sim.get("max_tilt", 0.0)) > MAX_TILT
    trace.fell = trace.fell or fault.startswith("tilt") or fell_after
    report = gait_report([trace], spec, stand_up_clamps=clamps, node_fault=fault)
    if beats is not None and len(beats):
        late = off_beat(beats)
        report.lines.append(ReportLine("real_time", "control periods off the beat", late, "", f"<= {OFF_BEAT:.2f}",
                                       late <= OFF_BEAT, "0 or 2+ new commands"))
    walked = len(trace) * spec.dt
    noise = f", state noise {args.obs_noise:g} x training's" if args.obs_noise else ""
    command = list(args.cmd_vel or (0.0, 0.0, 0.0))
    print(textwrap.fill(f"measured: the policy phase of sim2sim, {walked:.1f} s after the node's "
                        f"stand-up, command (vx, vy, yaw rate) {command}, latency {args.latency:g} s state / "
                        f"{args.command_latency:g} s commands{noise}", 100, subsequent_indent="  "))
    if fault:
        simulated, duration = float(sim.get("sim_time", 0.0)), args.duration or 0.0
        late = (f"; the bridge simulated {simulated:.1f} s of the run's {duration:g} s (the machine fell behind "
                "real time, which can starve the node of state: rerun on a quieter one)"
                ) if simulated < 0.95 * duration else ""
        print(textwrap.fill(f"cut short: the node left policy mode after {walked:.1f} s: {fault}{late}", 100,
                            subsequent_indent="  "))
    print("\n".join(report.table()))
    title = f"sim2sim {'/'.join(Path(args.bundle).parts[-3:])}: command {command}"
    print("\n".join(write_report(args.summary_path, {**status, "bridge": sim}, report, trace, spec, title)))
    return report


def _plain(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"{type(x).__name__} is not JSON")


def plot_gait(trace: GaitTrace, spec: GaitSpec, path: str | Path, title: str) -> None:
    """Four stacked traces of one trajectory against time, written as a PNG."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a robot computer or in CI
    import matplotlib.pyplot as plt

    t = np.arange(len(trace)) * spec.dt
    v = heading_velocity(trace.base_quat, trace.base_lin_vel)
    fig, ax = plt.subplots(4, 1, figsize=(10, 9), sharex=True, gridspec_kw={"height_ratios": [1, 1, 1, 0.8]})
    h0 = spec.standing_height
    ax[0].plot(t, trace.base_height, label="base height")
    ax[0].axhline(h0, color="k", ls="--", lw=0.8, label=f"standing {h0:.2f} m")
    ax[0].axhline(0.85 * h0, color="r", ls=":", lw=0.8, label="bar 0.85 x standing")
    ax[0].set_ylabel("m")
    ax[0].set_ylim(0, 1.2 * max(h0, float(np.max(trace.base_height))))
    for col, name, color in ((0, "forward", "C0"), (1, "lateral", "C1")):
        ax[1].plot(t, v[:, col], color=color, label=f"{name} velocity")
        ax[1].plot(t, trace.command[:, col], color=color, ls="--", lw=0.8, label=f"{name} command")
    ax[1].set_ylabel("m/s")
    frac = np.abs(trace.torque) / np.asarray(spec.torque_limits)
    for j in range(frac.shape[1]):
        ax[2].plot(t, frac[:, j], lw=0.6, label=spec.joint_names[j] if spec.joint_names else None)
    ax[2].axhline(0.9, color="r", ls=":", lw=0.8, label="bar 0.9")
    ax[2].set_ylabel("|torque| / limit")
    ax[2].set_ylim(0, 1.05)
    feet = spec.foot_names or [f"foot {f}" for f in range(trace.foot_contact.shape[1])]
    for f in range(trace.foot_contact.shape[1]):
        down = trace.foot_contact[:, f].astype(float)
        ax[3].fill_between(t, f - 0.4 * down, f + 0.4 * down, step="mid", color="C2", lw=0)
    ax[3].set_yticks(range(len(feet)), feet)
    ax[3].set_ylabel("contact")
    ax[3].set_xlabel("s")
    for a in ax[:3]:
        a.legend(loc="upper right", fontsize=7, ncol=3 if a is not ax[2] else 6)
        a.grid(alpha=0.3)
    ax[0].set_title(title, fontsize=9)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
