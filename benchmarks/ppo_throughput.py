"""PPO training throughput (env-steps/s including the update): ctrl_rl next to rsl_rl and SB3.

All three train on the *same* environment (the pure-torch ``pendulum`` of ``ctrl_rl.sims``),
wrapped for rsl_rl 5.x (``rsl_rl.env.VecEnv``, TensorDict observations) and for
Stable-Baselines3 (its numpy ``VecEnv``). Each framework runs alone in a fresh subprocess (this
script with ``--only <name>``), one after another, with ``torch.set_num_threads(--threads)``.
One warm-up iteration, then ``--iterations`` iterations timed by wall clock around the
framework's own training call (``learn``); env-steps/s = timed env steps / timed seconds.

Matched (everything that sets the compute): task and env implementation, ``num_envs``, rollout
length, epochs, minibatches (SB3: ``batch_size = num_envs * steps / minibatches``), separate
actor and critic MLPs of ``--hidden`` sizes, ELU, Adam at lr 1e-3, clip 0.2, value clipping,
gamma 0.99, lambda 0.95, value-loss coef 1, entropy coef 0.01, grad-norm clip 1, float32, CPU (except the
rows named ``bf16``, whose update runs in bfloat16).

Not matched (each framework's normal way of working, measured as is):

* observation normalization: ours and rsl_rl on; SB3 has none built in (no VecNormalize);
* adaptive-KL learning rate: ours and rsl_rl; SB3 has no such schedule (its ``target_kl``
  stops epochs early, so it stays off and every epoch runs);
* rsl_rl runs with ``log_dir=None``, which also skips its per-step episode bookkeeping; ours
  keeps its on-device episode statistics; rsl_rl keeps its default per-step NaN check;
* SB3 moves data numpy <-> torch every step, builds a list of per-env info dicts, evaluates
  the critic on each truncated env's terminal observation one env at a time, and computes
  GAE in numpy; rsl_rl and SB3 evaluate the critic every step, ours once per rollout;
* all envs start together, so all hit pendulum's 200-step time limit in the same step: with
  24-step rollouts the timed window (steps 24..264) holds one such wave for every framework
  as long as all run the same number of iterations (mind ``--sb3-iterations``).

``ours`` runs with ``runner.keep_heap=true``, its default on CPU: glibc keeps freed memory in the
heap, so the update's large tensors do not page-fault at every use (``src/ctrl_rl/utils/heap.py``).
``ours_no_keep_heap`` turns that off, and ``rsl_rl_keep_heap`` gives rsl_rl's process the same
setting, so the table separates what the allocator buys from what the code does.
``ours_compiled`` is ours with ``algo.compile=true``. Its children run with
``TORCHINDUCTOR_CACHE_DIR`` set to a fresh directory: the warm-up iteration of the first run
traces and generates code (``compile_s`` = that iteration less a timed one), a second one-iteration
run loads it from the cache (``compile_s_cached``), which is what every later run on the machine pays.
RESULT's ``vs_rsl_rl`` / ``vs_sb3`` are the compiled path's ratios, ``eager_vs_rsl_rl`` the eager one's.

Keep ``--threads`` at or below the idle cores: on a busy machine, OpenMP threads competing
for cores slow small updates by orders of magnitude.

Usage::

    python benchmarks/ppo_throughput.py --num-envs 4096 --steps 24 --iterations 10
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import torch

FRAMEWORKS = ("ours", "ours_compiled", "ours_no_keep_heap", "rsl_rl", "rsl_rl_keep_heap", "sb3",
              "ours_cudagraphs", "ours_cudagraphs_fp32", "ours_cudagraphs_bf16", "rsl_rl_tf32", "ours_compiled_bf16")
CPU_FRAMEWORKS = FRAMEWORKS[:6]
"""The default CPU rows; ``ours_compiled_bf16`` (the compiled update in bfloat16, for CPUs with bfloat16
instructions) is asked for by name, e.g. ``--frameworks ours_compiled ours_compiled_bf16 rsl_rl``."""
GPU_FRAMEWORKS = ("ours", "ours_cudagraphs", "ours_cudagraphs_fp32", "ours_cudagraphs_bf16", "rsl_rl", "rsl_rl_tf32")
"""The ``--device cuda`` rows: ours (TF32 by default on CUDA) eager and with ``algo.cudagraphs``, the
latter in full float32 and with bf16 autocast; rsl_rl as it ships (float32) and with TF32 on."""
MARK = "BENCH_JSON "
OBS_NORM = {**{n: "on" for n in FRAMEWORKS}, "sb3": "off (none built in)"}
HPARAMS = {"learning_rate": 1e-3, "clip": 0.2, "gamma": 0.99, "lam": 0.95, "value_coef": 1.0,
           "entropy_coef": 0.01, "max_grad_norm": 1.0}
"""The PPO hyperparameters all three get (rsl_rl's defaults)."""


def _make_env(args: argparse.Namespace) -> Any:
    from ctrl_rl.sims import make_env

    return make_env("torch", "pendulum", args.num_envs, device=args.device, seed=args.seed)


def _result(args: argparse.Namespace, iters: int, wall: float, collect: float,
            update: float) -> dict:
    """Timed numbers; ``collect_s`` / ``update_s`` are seconds per iteration."""
    sps = iters * args.num_envs * args.steps / wall
    return {"sps": sps, "iterations": iters, "wall_s": wall, "collect_s": collect,
            "update_s": update}


def bench_ours(args: argparse.Namespace, compile: bool = False, keep_heap: bool = True,
               extra: tuple[str, ...] = ()) -> dict:
    """Ours, eager or with ``algo.compile=true``; ``first_s`` is the warm-up iteration's wall clock
    (with compile: tracing and code generation, or loading them from the inductor cache)."""
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.runners import make_runner

    hidden = "[" + ",".join(map(str, args.hidden)) + "]"
    cfg = load_train_config([
        "task=pendulum", f"env.num_envs={args.num_envs}", f"seed={args.seed}",
        "runner.progress=false", f"algo.num_steps_per_env={args.steps}",
        f"algo.num_learning_epochs={args.epochs}", f"algo.num_minibatches={args.minibatches}",
        f"algo.actor_hidden={hidden}", f"algo.critic_hidden={hidden}", "algo.activation=elu",
        "algo.normalize_obs=true", "algo.schedule=adaptive", "algo.value_clip=true",
        f"algo.learning_rate={HPARAMS['learning_rate']}", f"algo.clip_param={HPARAMS['clip']}",
        f"algo.gamma={HPARAMS['gamma']}", f"algo.lam={HPARAMS['lam']}",
        f"algo.value_loss_coef={HPARAMS['value_coef']}",
        f"algo.entropy_coef={HPARAMS['entropy_coef']}",
        f"algo.max_grad_norm={HPARAMS['max_grad_norm']}", f"algo.compile={str(compile).lower()}",
        f"runner.keep_heap={str(keep_heap).lower()}", f"device={args.device}", *extra,
    ])
    runner = make_runner(_make_env(args), cfg, log_dir=None)
    start = time.perf_counter()
    runner.learn(1)  # warm-up
    first = time.perf_counter() - start
    start = time.perf_counter()
    runner.learn(1 + args.iterations)  # a total, not a count to add
    wall = time.perf_counter() - start
    rows = runner.history[-args.iterations:]
    collect = sum(r["collection_time"] for r in rows) / len(rows)
    return {**_result(args, args.iterations, wall, collect, sum(r["learning_time"] for r in rows) / len(rows)),
            "first_s": first}


def rsl_rl_env(env: Any, seed: int) -> Any:
    """Our VecEnv behind rsl_rl 5.x's interface: TensorDict obs, int dones, ``time_outs``."""
    from rsl_rl.env import VecEnv as RslVecEnv
    from tensordict import TensorDict

    class RslRlEnv(RslVecEnv):
        def __init__(self) -> None:
            self.env, self.num_envs, self.num_actions = env, env.num_envs, env.action_dim
            self.max_episode_length, self.device, self.cfg = env.max_episode_length, env.device, {}
            self.episode_length_buf = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
            self._obs = self._td(env.reset(seed=seed))

        def _td(self, obs: dict[str, torch.Tensor]) -> TensorDict:
            return TensorDict(obs, batch_size=[self.num_envs], device=self.device)

        def get_observations(self) -> TensorDict:
            return self._obs

        def step(
            self, actions: torch.Tensor
        ) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
            obs, reward, terminated, truncated, _ = self.env.step(actions)
            dones = terminated | truncated
            self.episode_length_buf = torch.where(dones, 0, self.episode_length_buf + 1)
            self._obs = self._td(obs)
            return self._obs, reward, dones.long(), {"time_outs": truncated}

    return RslRlEnv()


def bench_rsl_rl(args: argparse.Namespace, keep_heap: bool = False, tf32: bool = False) -> dict:
    from rsl_rl.runners import OnPolicyRunner as RslRunner

    if tf32:  # what Isaac Lab's and mjlab's train scripts set around rsl_rl
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    if keep_heap:  # the allocator setting our runner makes on CPU, given to rsl_rl's process
        from ctrl_rl.utils.heap import keep_freed_memory

        keep_freed_memory()

    mlp = {"class_name": "MLPModel", "hidden_dims": list(args.hidden), "activation": "elu",
           "obs_normalization": True}
    gaussian = {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"}
    cfg = {
        "num_steps_per_env": args.steps, "save_interval": 10**9,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "actor": {**mlp, "distribution_cfg": gaussian}, "critic": dict(mlp),
        "algorithm": {
            "class_name": "PPO", "num_learning_epochs": args.epochs,
            "num_mini_batches": args.minibatches, "schedule": "adaptive", "desired_kl": 0.01,
            "learning_rate": HPARAMS["learning_rate"], "clip_param": HPARAMS["clip"],
            "use_clipped_value_loss": True, "gamma": HPARAMS["gamma"], "lam": HPARAMS["lam"],
            "value_loss_coef": HPARAMS["value_coef"], "entropy_coef": HPARAMS["entropy_coef"],
            "max_grad_norm": HPARAMS["max_grad_norm"], "normalize_advantage_per_mini_batch": False,
            "rnd_cfg": None, "symmetry_cfg": None,
        },
    }
    torch.manual_seed(args.seed)
    runner = RslRunner(rsl_rl_env(_make_env(args), args.seed), cfg, log_dir=None, device=args.device)
    times: list[tuple[float, float]] = []
    log = runner.logger.log

    def timed_log(*a: Any, **kw: Any) -> None:  # rsl_rl times both phases itself: keep them
        times.append((kw["collect_time"], kw["learn_time"]))
        log(*a, **kw)

    runner.logger.log = timed_log  # type: ignore[method-assign]
    runner.learn(num_learning_iterations=1)  # warm-up
    start = time.perf_counter()
    runner.learn(num_learning_iterations=args.iterations)
    wall = time.perf_counter() - start
    timed = times[1:]
    return _result(args, args.iterations, wall, sum(c for c, _ in timed) / len(timed),
                   sum(u for _, u in timed) / len(timed))


def bench_sb3(args: argparse.Namespace) -> dict:
    import numpy as np
    from gymnasium import spaces
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.vec_env import VecEnv as SB3VecEnv

    class SB3Env(SB3VecEnv):
        """Our VecEnv as an SB3 VecEnv: numpy in/out; finished envs' infos hold
        ``terminal_observation``, ``TimeLimit.truncated`` and ``episode`` (as Monitor writes)."""

        def __init__(self, env: Any) -> None:
            self.env, self._actions = env, torch.empty(0)
            obs_space = spaces.Box(-np.inf, np.inf, (env.obs_dims["policy"],), np.float32)
            act_space = spaces.Box(-1.0, 1.0, (env.action_dim,), np.float32)
            super().__init__(env.num_envs, obs_space, act_space)

        def reset(self) -> np.ndarray:
            seed = self._seeds[0] if self._seeds[0] is not None else args.seed
            self._reset_seeds()
            return self.env.reset(seed=seed)["policy"].numpy()

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = torch.as_tensor(actions, dtype=torch.float32)

        def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
            obs, reward, terminated, truncated, info = self.env.step(self._actions)
            dones = (terminated | truncated).numpy()
            infos: list[dict] = [{} for _ in range(self.num_envs)]
            ended = np.flatnonzero(dones)
            if ended.size:
                final, trunc = info["final_obs"]["policy"].numpy(), truncated.numpy()
                ret, length = info["episode"]["return"].numpy(), info["episode"]["length"].numpy()
                for i in ended:
                    infos[i] = {"terminal_observation": final[i],
                                "TimeLimit.truncated": bool(trunc[i]),
                                "episode": {"r": float(ret[i]), "l": int(length[i]), "t": 0.0}}
            return obs["policy"].numpy(), reward.numpy(), dones, infos

        def close(self) -> None:
            self.env.close()

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            if attr_name == "render_mode":
                return [None] * self.num_envs
            raise AttributeError(attr_name)

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            raise AttributeError(attr_name)

        def env_method(self, name: str, *a: Any, indices: Any = None, **kw: Any) -> list[Any]:
            raise AttributeError(name)

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            return [False] * self.num_envs

    batch = args.num_envs * args.steps
    model = SB3PPO(
        "MlpPolicy", SB3Env(_make_env(args)), n_steps=args.steps,
        batch_size=batch // args.minibatches, n_epochs=args.epochs,
        learning_rate=HPARAMS["learning_rate"], clip_range=HPARAMS["clip"], gamma=HPARAMS["gamma"],
        gae_lambda=HPARAMS["lam"], vf_coef=HPARAMS["value_coef"], ent_coef=HPARAMS["entropy_coef"],
        max_grad_norm=HPARAMS["max_grad_norm"], seed=args.seed, device="cpu", verbose=0,
        policy_kwargs={"net_arch": {"pi": list(args.hidden), "vf": list(args.hidden)},
                       "activation_fn": torch.nn.ELU, "log_std_init": 0.0},
    )
    update_times: list[float] = []
    train = model.train

    def timed_train() -> None:  # SB3 does not report its phases: time its update call
        t = time.perf_counter()
        train()
        update_times.append(time.perf_counter() - t)

    model.train = timed_train  # type: ignore[method-assign]
    model.learn(total_timesteps=batch)  # warm-up
    iters = args.sb3_iterations or args.iterations
    start = time.perf_counter()
    model.learn(total_timesteps=iters * batch, reset_num_timesteps=False)  # adds to the count
    wall = time.perf_counter() - start
    update = sum(update_times[1:]) / iters
    return _result(args, iters, wall, wall / iters - update, update)


BENCHES = {"ours": bench_ours, "ours_compiled": lambda args: bench_ours(args, compile=True),
           "ours_no_keep_heap": lambda args: bench_ours(args, keep_heap=False),
           "rsl_rl": bench_rsl_rl, "rsl_rl_keep_heap": lambda args: bench_rsl_rl(args, keep_heap=True),
           "sb3": bench_sb3, "ours_cudagraphs": lambda args: bench_ours(args, extra=("algo.cudagraphs=true",)),
           "ours_cudagraphs_fp32": lambda args: bench_ours(args, extra=("algo.cudagraphs=true", "algo.tf32=false")),
           "ours_cudagraphs_bf16": lambda args: bench_ours(args, extra=("algo.cudagraphs=true", "algo.autocast=bf16")),
           "rsl_rl_tf32": lambda args: bench_rsl_rl(args, tf32=True),
           "ours_compiled_bf16": lambda args: bench_ours(args, compile=True, extra=("algo.autocast=bf16",))}


def run_child(name: str, args: argparse.Namespace, iterations: int | None = None,
              env: dict[str, str] | None = None) -> dict:
    """Run one framework in a fresh interpreter; its numbers, or ``{"error": why}``."""
    cmd = [sys.executable, __file__, "--only", name, "--num-envs", str(args.num_envs),
           "--steps", str(args.steps), "--epochs", str(args.epochs),
           "--minibatches", str(args.minibatches), "--iterations", str(iterations or args.iterations),
           "--threads", str(args.threads), "--seed", str(args.seed), "--device", args.device,
           "--hidden", *map(str, args.hidden)]
    if args.sb3_iterations:
        cmd += ["--sb3-iterations", str(args.sb3_iterations)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                              env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return {"error": tail[-1] if tail else f"exit code {proc.returncode}"}


def child_main(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    try:
        out = BENCHES[args.only](args)
    except ImportError as exc:
        out = {"error": f"not installed: {exc}"}
    except Exception as exc:  # report it, so the table says why instead of the script crashing
        out = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    print(MARK + json.dumps(out), flush=True)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--steps", type=int, default=24, help="rollout length per env and iteration")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--hidden", type=int, nargs="+", default=[512, 256, 128], help="both MLPs")
    p.add_argument("--iterations", type=int, default=10, help="timed iterations, after 1 warm-up")
    p.add_argument("--sb3-iterations", type=int, default=None, help="default: --iterations")
    p.add_argument("--threads", type=int, default=2, help="torch threads per framework process")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="torch device of env and learners (cuda: see GPU_FRAMEWORKS)")
    p.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(CPU_FRAMEWORKS))
    p.add_argument("--timeout", type=float, default=None, help="seconds allowed per framework")
    p.add_argument("--only", choices=FRAMEWORKS, help=argparse.SUPPRESS)  # the child process
    args = p.parse_args(argv)
    if args.only:
        return child_main(args)

    print(f"torch={torch.__version__} rsl-rl-lib={_version('rsl-rl-lib')} "
          f"stable-baselines3={_version('stable-baselines3')} device={args.device} threads={args.threads} "
          f"task=pendulum epochs={args.epochs} minibatches={args.minibatches}", flush=True)
    results: dict[str, dict] = {}
    cache = tempfile.mkdtemp(prefix="inductor_cache_")  # compile times: from an empty cache, then from it
    warm_first = math.nan
    for name in args.frameworks:  # one after another, never side by side
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results[name] = run_child(name, args, env={"TORCHINDUCTOR_CACHE_DIR": cache})
        if name == "ours_compiled" and "error" not in results[name]:
            warm_first = run_child(name, args, iterations=1, env={"TORCHINDUCTOR_CACHE_DIR": cache}).get(
                "first_s", math.nan)
    sps = {n: results.get(n, {}).get("sps", math.nan) for n in FRAMEWORKS}

    hidden = "x".join(map(str, args.hidden))
    print()
    print("| framework | num_envs | rollout | hidden | obs norm | env-steps/s (incl. update) "
          "| collection s/it | update s/it | first it s | ours ÷ this | compiled ÷ this |")
    print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for name in args.frameworks:
        r = results[name]
        if "error" in r:
            cells = ["failed: " + r["error"].replace("|", "\\|"), "—", "—", "—", "—", "—"]
        else:
            ratios = ["n/a" if math.isnan(sps[o]) else f"{sps[o] / r['sps']:.2f}x" for o in ("ours", "ours_compiled")]
            first = f"{r['first_s']:.1f}" if "first_s" in r else "—"
            if name == "ours_compiled":
                first += f" (cache warm: {warm_first:.1f})"
            cells = [f"{r['sps']:,.0f} ({r['iterations']} it)", f"{r['collect_s']:.3f}",
                     f"{r['update_s']:.3f}", first, *ratios]
        row = [name, str(args.num_envs), str(args.steps), hidden, OBS_NORM[name], *cells]
        print("| " + " | ".join(row) + " |")
    print()
    comp = results.get("ours_compiled", {})
    per_it = comp.get("wall_s", math.nan) / max(comp.get("iterations", 1), 1)
    first, warm = comp.get("first_s", math.nan) - per_it, warm_first - per_it
    print(f"RESULT ours_sps={sps['ours']:.0f} compiled_sps={sps['ours_compiled']:.0f} "
          f"rsl_rl_sps={sps['rsl_rl']:.0f} sb3_sps={sps['sb3']:.0f} compiled_bf16_sps={sps['ours_compiled_bf16']:.0f} "
          f"vs_rsl_rl={sps['ours_compiled'] / sps['rsl_rl']:.3g} eager_vs_rsl_rl={sps['ours'] / sps['rsl_rl']:.3g} "
          f"vs_sb3={sps['ours_compiled'] / sps['sb3']:.3g} compile_s={first:.1f} compile_s_cached={warm:.1f}",
          flush=True)


if __name__ == "__main__":
    main()
