"""Deploy latency: the runtime's inference vs torch eager, and the node's loop jitter over DDS.

    python benchmarks/deploy_latency.py [--seconds 10] [--calls 20000]

1. Inference, batch 1, one thread each: onnxruntime through ``ctrl_rl.deploy`` (``OnnxPolicy``)
   vs the same actor in torch eager (``torch.no_grad``), for the quadruped policy network
   48 -> 512 -> 256 -> 128 -> 12 (ELU), exported by ``ctrl-rl export`` from a real checkpoint.
2. Loop period jitter: the deploy node (policy mode, the full tick: read, obs, inference, action,
   publish) against the sim2sim bridge over plain DDS on loopback, at 50 Hz and at 500 Hz, with
   normal scheduling and (where permitted) the control thread at SCHED_FIFO 80.
   Error = |actual - nominal| time between successive ticks.

Ends with ``RESULT ort_p50_us=… torch_p50_us=… loop_p99_err_ms_50hz=… loop_p99_err_ms_500hz=…``.
"""

from __future__ import annotations

import argparse
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
    from ctrl_rl.commands import export, train

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
    from ctrl_rl.deploy.runtime import OnnxPolicy

    from ctrl_rl.commands import _load_policy

    torch.set_num_threads(1)
    ort = OnnxPolicy(bundle, intra_op_threads=1)
    _, _, alg, _ = _load_policy(str(bundle.parent.parent), [])
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


def loop_jitter(bundle: Path, rate_hz: float, seconds: float, rt: int = 0) -> dict:
    """The node at ``rate_hz`` (policy mode) against the bridge (500 Hz physics and state);
    ``rt`` > 0: the control thread runs SCHED_FIFO at that priority."""
    from ctrl_rl.deploy.node import DeployNode, NodeParams
    from ctrl_rl.deploy.transports import make_transport

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    ns = f"bench{os.getpid()}_{int(rate_hz)}"
    bridge = subprocess.Popen([sys.executable, "-m", "ctrl_rl.deploy.sim2sim", "--namespace", ns,
                               "--command-format", "position_gains", "--cmd-vel", "0.3", "0", "0",
                               "--duration", str(seconds + 30)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    transport = make_transport("dds", namespace=ns)
    try:
        params = NodeParams(bundle=str(bundle), rate_hz=rate_hz, command_format="position_gains",
                            realtime_priority=rt,
                            safety={"stand_up_time": 1.0, "stand_hold_time": 0.2, "state_timeout": 0.05,
                                    "max_tilt": 3.0})
        node = DeployNode(params, transport)
        th = threading.Thread(target=node.run, daemon=True)
        th.start()
        deadline = time.monotonic() + 30
        while node.safety.mode.value != "policy" and time.monotonic() < deadline:
            time.sleep(0.05)
        if node.safety.mode.value != "policy":
            raise RuntimeError(f"node never reached policy mode: {node.status()}")
        node.timer.errors.n = 0  # measure policy-mode ticks only
        misses0 = node.timer.misses
        time.sleep(seconds)
        node.stop()
        th.join(5)
        err = np.abs(node.timer.errors.values()) * 1e3
        return {"rate_hz": rate_hz, "sched": f"FIFO {rt}" if rt else "normal", "ticks": len(err),
                "p50": float(np.percentile(err, 50)),
                "p99": float(np.percentile(err, 99)), "max": float(err.max()),
                "misses": node.timer.misses - misses0, "mode": node.safety.mode.value,
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
    ap.add_argument("--seconds", type=float, default=10.0, help="policy-mode seconds per loop rate")
    ap.add_argument("--calls", type=int, default=20000, help="timed inference calls per runtime")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = make_bundle(Path(tmp))
        inf = inference(bundle, args.calls)
        loops = [loop_jitter(bundle, hz, args.seconds) for hz in (50.0, 500.0)]
        if rt_allowed():
            loops += [loop_jitter(bundle, hz, args.seconds, rt=80) for hz in (50.0, 500.0)]
    print(f"\ninference, batch 1, 1 thread, MLP 48-512-256-128-12 ({args.calls} back-to-back calls; "
          "'one call / 20 ms': the weights are no longer in cache, as in a 50 Hz loop)")
    print(f"{'runtime':<32}{'calls':>7}{'p50 us':>10}{'p99 us':>10}{'mean us':>10}")
    for name, t in inf.items():
        print(f"{name:<32}{len(t):>7}{np.percentile(t, 50):>10.1f}{np.percentile(t, 99):>10.1f}{t.mean():>10.1f}")
    ort_p50, torch_p50, ort_cold, torch_cold = (float(np.percentile(t, 50)) for t in inf.values())
    print(f"speedup (torch p50 / ort p50): {torch_p50 / ort_p50:.2f}x")
    print(f"\nnode loop over DDS vs the sim2sim bridge ({args.seconds:.0f} s in policy mode each)")
    print(f"{'rate':>8}{'scheduling':>12}{'ticks':>8}{'err p50 ms':>12}{'err p99 ms':>12}{'err max ms':>12}"
          f"{'misses':>8}{'infer p50 us':>14}")
    for r in loops:
        print(f"{r['rate_hz']:>6.0f}Hz{r['sched']:>12}{r['ticks']:>8}{r['p50']:>12.3f}{r['p99']:>12.3f}"
              f"{r['max']:>12.3f}{r['misses']:>8}{r['inference_p50_us']:>14.1f}")
    rt = {f"loop_p99_err_ms_{r['rate_hz']:.0f}hz_fifo": r["p99"] for r in loops[2:]}
    print(f"RESULT ort_p50_us={ort_p50:.1f} torch_p50_us={torch_p50:.1f} speedup={torch_p50 / ort_p50:.2f} "
          f"ort_cold_p50_us={ort_cold:.1f} torch_cold_p50_us={torch_cold:.1f} "
          f"loop_p99_err_ms_50hz={loops[0]['p99']:.3f} loop_p99_err_ms_500hz={loops[1]['p99']:.3f} "
          f"misses_50hz={loops[0]['misses']} misses_500hz={loops[1]['misses']} "
          + " ".join(f"{k}={v:.3f}" for k, v in rt.items()))


if __name__ == "__main__":
    main()
