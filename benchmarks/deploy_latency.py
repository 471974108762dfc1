"""Deploy latency: the runtime's inference vs torch eager, and the node's loop jitter over DDS.

    python benchmarks/deploy_latency.py [--seconds 10] [--calls 20000]

1. Inference, batch 1, one thread each: onnxruntime through ``ctrl_rl.deploy`` (``OnnxPolicy``)
   vs the same actor in torch eager (``torch.no_grad``), for the quadruped policy network
   48 -> 512 -> 256 -> 128 -> 12 (ELU), exported by ``ctrl-rl export`` from a real checkpoint.
2. Loop period jitter: the deploy node (policy mode, the full tick: read, obs, inference, action,
   publish) against the sim2sim bridge over plain DDS on loopback, at 50 Hz and at 500 Hz, with
   normal scheduling and (where permitted) the control thread at SCHED_FIFO 80, on an idle
   machine and on a loaded one (``--burners`` CPU-burning processes beside it, one per core by
   default). Error = |actual - nominal| time between successive ticks. Each row also reports
   the worst robot-state age the node saw (``max_state_age_ms``).
3. The default stale-state timeout (``safety.state_timeout = 0``: 2 control periods) on the
   loaded machine: ``--trials`` healthy policy-mode runs at 50 Hz with the bridge publishing state
   at 200 Hz; a run that ends in damping is a false trip.

Ends with ``RESULT ort_p50_us=… torch_p50_us=… loop_p99_err_ms_50hz=… loop_p99_err_ms_50hz_loaded=…
loop_p99_err_ms_50hz_loaded_fifo=… default_timeout_false_trips=…/…``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TASK = "quadruped_velocity_flat"


def make_bundle(root: Path) -> Path:
    from ctrl_rl.app.export import export
    from ctrl_rl.app.train import train

    run = train([f"task={TASK}", "env.num_envs=64", "algo.num_steps_per_env=8", "runner.max_iterations=1",
                 "algo.actor_hidden=[512,256,128]", "algo.critic_hidden=[64]", "runner.progress=false",
                 f"runner.log_root={root}"])
    return export(str(run), [])


def time_calls(fn, x, calls: int, gap: float = 0.0) -> np.ndarray:
    """Microseconds per call; ``gap`` > 0 waits that long between calls, as a control loop does."""
    for _ in range(200):
        fn(x)
    out = np.empty(calls)
    for i in range(calls):
        t0 = time.perf_counter_ns()
        fn(x)
        out[i] = time.perf_counter_ns() - t0
        if gap:
            time.sleep(gap)
    return out / 1e3


def inference(bundle: Path, calls: int) -> dict[str, np.ndarray]:
    import torch

    from ctrl_rl.app.session import load_policy
    from ctrl_rl.deploy.runtime import OnnxPolicy

    torch.set_num_threads(1)
    ort = OnnxPolicy(bundle, intra_op_threads=1)
    _, _, alg, _ = load_policy(str(bundle.parent.parent), [])
    actor = alg.model.actor.eval()
    obs = np.random.default_rng(0).normal(size=(ort.obs_dim,)).astype(np.float32)
    obs_t = torch.as_tensor(obs)[None]

    def torch_call(x):
        with torch.no_grad():
            return actor(x).numpy()

    np.testing.assert_allclose(ort(obs), torch_call(obs_t)[0], atol=1e-5)
    cold = max(100, calls // 40)
    return {"onnxruntime (ctrl_rl.deploy)": time_calls(ort, obs, calls),
            "torch eager": time_calls(torch_call, obs_t, calls),
            "onnxruntime, one call / 20 ms": time_calls(ort, obs, cold, gap=0.02),
            "torch eager, one call / 20 ms": time_calls(torch_call, obs_t, cold, gap=0.02)}


class Burners:
    """``n`` processes spinning on the CPU (a loaded robot computer), for the ``with`` block."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Burners:
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def loop_jitter(bundle: Path, rate_hz: float, seconds: float, rt: int = 0, burners: int = 0,
                state_timeout: float = 0.05, state_rate: float = 500.0) -> dict:
    """The node at ``rate_hz`` (policy mode) against the bridge (500 Hz physics, ``state_rate`` state);
    ``rt`` > 0: the control thread runs SCHED_FIFO at that priority; ``burners``: CPU load beside it;
    ``state_timeout`` 0: the node's default."""
    from ctrl_rl.deploy.node import DeployNode, NodeParams
    from ctrl_rl.deploy.transports import make_transport

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    ns = f"bench{os.getpid()}_{int(rate_hz)}_{rt}_{burners}_{time.monotonic_ns() % 10**6}"
    bridge = subprocess.Popen([sys.executable, "-m", "ctrl_rl.deploy.sim2sim", "--namespace", ns,
                               "--command-format", "position_gains", "--cmd-vel", "0.3", "0", "0",
                               "--state-rate", str(state_rate), "--duration", str(seconds + 40)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    transport = make_transport("dds", namespace=ns)
    try:
        params = NodeParams(bundle=str(bundle), rate_hz=rate_hz, command_format="position_gains",
                            realtime_priority=rt,
                            safety={"stand_up_time": 1.0, "stand_hold_time": 0.2, "state_timeout": 0.5,
                                    "max_tilt": 3.0, "auto_start": True})  # a simulated robot: no operator
        node = DeployNode(params, transport)
        th = threading.Thread(target=node.run, daemon=True)
        th.start()
        deadline = time.monotonic() + 30
        while node.safety.mode.value != "policy" and time.monotonic() < deadline:
            time.sleep(0.05)
        if node.safety.mode.value != "policy":
            raise RuntimeError(f"node never reached policy mode: {node.status()}")
        with Burners(burners):
            # measure policy-mode ticks only, under the timeout being measured
            node.apply_safety(dataclasses.replace(params.safety, state_timeout=state_timeout))
            node.timer.errors.n = 0
            node.max_state_age = 0.0
            misses0 = node.timer.misses
            time.sleep(seconds)
            mode = node.safety.mode.value
            fault = node.safety.fault
            node.stop()
            th.join(5)
        err = np.abs(node.timer.errors.values()) * 1e3
        return {"rate_hz": rate_hz, "sched": f"FIFO {rt}" if rt else "normal", "load": f"{burners} burners",
                "ticks": len(err), "p50": float(np.percentile(err, 50)),
                "p99": float(np.percentile(err, 99)), "max": float(err.max()),
                "misses": node.timer.misses - misses0, "mode": mode, "fault": fault,
                "max_state_age_ms": node.max_state_age * 1e3, "state_timeout_ms": node.safety_cfg.state_timeout * 1e3,
                "inference_p50_us": node.latency.summary()["inference"]["p50"]}
    finally:
        transport.close()
        bridge.terminate()
        bridge.wait(10)


def rt_allowed() -> bool:
    """Whether this process may use SCHED_FIFO (tried in a throwaway thread)."""
    import threading

    ok = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            ok.append(True)
        except (AttributeError, PermissionError, OSError):
            pass

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return bool(ok)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="policy-mode seconds per loop row")
    ap.add_argument("--calls", type=int, default=20000, help="timed inference calls per runtime")
    ap.add_argument("--burners", type=int, default=os.cpu_count() or 2, help="CPU-burning processes when loaded")
    ap.add_argument("--trials", type=int, default=15, help="loaded runs with the default state timeout")
    ap.add_argument("--trial-seconds", type=float, default=6.0)
    args = ap.parse_args()
    fifo = rt_allowed()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = make_bundle(Path(tmp))
        inf = inference(bundle, args.calls)
        plan = [(50.0, 0, 0), (500.0, 0, 0), (50.0, 0, args.burners)]
        if fifo:
            plan += [(50.0, 80, 0), (500.0, 80, 0), (50.0, 80, args.burners)]
        loops = {(hz, rt, b): loop_jitter(bundle, hz, args.seconds, rt=rt, burners=b) for hz, rt, b in plan}
        trials = [loop_jitter(bundle, 50.0, args.trial_seconds, burners=args.burners, state_timeout=0.0,
                              state_rate=200.0) for _ in range(args.trials)]
    print(f"\ninference, batch 1, 1 thread, MLP 48-512-256-128-12 ({args.calls} back-to-back calls; "
          "'one call / 20 ms': the weights are no longer in cache, as in a 50 Hz loop)")
    print(f"{'runtime':<32}{'calls':>7}{'p50 us':>10}{'p99 us':>10}{'mean us':>10}")
    for name, t in inf.items():
        print(f"{name:<32}{len(t):>7}{np.percentile(t, 50):>10.1f}{np.percentile(t, 99):>10.1f}{t.mean():>10.1f}")
    ort_p50, torch_p50, ort_cold, torch_cold = (float(np.percentile(t, 50)) for t in inf.values())
    print(f"speedup (torch p50 / ort p50): {torch_p50 / ort_p50:.2f}x")
    print(f"\nnode loop over DDS vs the sim2sim bridge ({args.seconds:.0f} s in policy mode each; "
          f"loaded: {args.burners} CPU-burning processes on {os.cpu_count()} cores)")
    print(f"{'rate':>8}{'scheduling':>12}{'load':>12}{'ticks':>8}{'err p50 ms':>12}{'err p99 ms':>12}"
          f"{'err max ms':>12}{'misses':>8}{'state age max ms':>18}{'infer p50 us':>14}")
    for r in loops.values():
        print(f"{r['rate_hz']:>6.0f}Hz{r['sched']:>12}{r['load']:>12}{r['ticks']:>8}{r['p50']:>12.3f}{r['p99']:>12.3f}"
              f"{r['max']:>12.3f}{r['misses']:>8}{r['max_state_age_ms']:>18.1f}{r['inference_p50_us']:>14.1f}")
    trips = [t for t in trials if t["mode"] != "policy"]
    ages = [t["max_state_age_ms"] for t in trials]
    print(f"\ndefault state timeout ({trials[0]['state_timeout_ms']:.0f} ms at 50 Hz), loaded, state at 200 Hz: "
          f"{len(trips)} false trips in {len(trials)} runs of {args.trial_seconds:.0f} s; worst state age per run "
          f"(ms): {', '.join(f'{a:.1f}' for a in ages)}")
    for t in trips:
        print(f"  tripped: {t['fault']}")
    key = {(50.0, 0, 0): "50hz", (500.0, 0, 0): "500hz", (50.0, 0, args.burners): "50hz_loaded",
           (50.0, 80, 0): "50hz_fifo", (500.0, 80, 0): "500hz_fifo", (50.0, 80, args.burners): "50hz_loaded_fifo"}
    print(f"RESULT ort_p50_us={ort_p50:.1f} torch_p50_us={torch_p50:.1f} speedup={torch_p50 / ort_p50:.2f} "
          f"ort_cold_p50_us={ort_cold:.1f} torch_cold_p50_us={torch_cold:.1f} "
          + " ".join(f"loop_p99_err_ms_{key[k]}={r['p99']:.3f}" for k, r in loops.items()) + " "
          + f"default_timeout_false_trips={len(trips)}/{len(trials)} worst_state_age_ms={max(ages):.1f}")


if __name__ == "__main__":
    main()
