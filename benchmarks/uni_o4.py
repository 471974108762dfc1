"""Uni-O4 offline-to-online next to behavior cloning and PPO from scratch, several seeds.

1. Behavior policy: PPO with the task's tuned settings for ``--behavior-iterations`` (partially
   trained, seed ``--behavior-seed``); a dataset of ``--envs`` x ``--steps`` transitions of it with
   Gaussian action noise ``--noise`` (D4RL's "medium": the noisy policy is the behavior policy).
   With ``--behavior-per-seed`` every seed gets its own: the seed's PPO-from-scratch run is paused
   at ``--behavior-iterations``, its policy recorded, and the run goes on (one PPO run per seed is
   both the behavior source and the baseline; the dataset's RNG is separate, so PPO's run is the
   same as without the pause).
2. Per seed: BC (Gaussian, Uni-O4's policy network, ``--bc-iterations``) on the dataset; Uni-O4
   (``algo=uni_o4``, its tuned config) offline, then ``--online-iterations`` of online PPO; PPO from
   scratch for ``--scratch-iterations`` (default: as many) with the same env settings.

Every score is a deterministic evaluation like ``ctrl-rl eval``: ``--eval-episodes`` episodes from
fixed start states (eval seed ``--eval-seed``), the clock paused. Online runs are evaluated every
``--eval-every`` iterations. Reported: the offline policy against BC and the behavior policy, scored
deterministic and with its data's noise on the same starts (``offline_beats_behavior``: at or above
both), and against the mean return of the data's own episodes (``offline_beats_data``: other starts
and commands, episodes cut at the data's end included); the
env steps Uni-O4 and PPO need to reach PPO's final return (mean of its last 3 evaluations; Uni-O4's
count includes the hand-over's evaluation episodes); and the worst evaluation in the first 10% of
fine-tuning against the offline score (a collapse is more than 20% of |offline| below it).

With ``--stage DIR`` everything before the online phase (the PPO run and its curve, the dataset,
BC's score, Uni-O4's offline models and hand-over choice) is kept per seed in ``DIR/seed<N>/``; a
later run with the same ``--stage`` and the same settings for those parts only fine-tunes, so
online settings (``--override algo.online_init_std=... algo.schedule=...``) can be compared from
one hand-over. Settings that would change a kept part are refused by name.

Usage::

    python benchmarks/uni_o4.py                         # pendulum, 3 seeds (~40 min on 2 cores)
    python benchmarks/uni_o4.py --seeds 1 --behavior-iterations 2 --envs 4 --steps 300 --bc-iterations 1 \\
        --online-iterations 2 --eval-every 1 --eval-episodes 4 --override algo.pretrain_iterations=1 \\
        algo.improve_iterations=1 algo.updates_per_iteration=5 env.num_envs=16     # smoke
    python benchmarks/uni_o4.py --task quadruped_velocity_flat --seeds 1 --behavior-per-seed \
        --behavior-iterations 120 --scratch-iterations 240 --online-iterations 240 --noise 0.1 \
        --eval-every 15 --eval-episodes 32 --override-all env.num_envs=1024 --stage quad  # ctrl_quad, one seed
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import tempfile
import time
from pathlib import Path
from statistics import mean
from typing import Any

import torch

from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.session import build_env
from ctrl_rl.app.train import seed_everything
from ctrl_rl.nets.actor_critic import concat_groups
from ctrl_rl.runners import make_runner
from ctrl_rl.runners.episodes import collect_dataset, run_episodes, with_action_noise


class Bench:
    """Builds runners for the task and scores their deterministic policies on one eval env."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.eval_env = None

    def config(self, algo: str, seed: int, *extra: str):
        a = self.args
        return load_train_config([f"algo={algo}", f"task={a.task}", f"seed={seed}", "runner.progress=false",
                                  *a.override_all, *extra])

    def runner(self, algo: str, seed: int, *extra: str):
        a = self.args
        cfg = self.config(algo, seed, *extra)
        seed_everything(cfg.seed)
        if self.eval_env is None:
            self.eval_env = build_env(cfg, num_envs=a.eval_episodes, seed=a.eval_seed)
        return make_runner(build_env(cfg), cfg, log_dir=None)

    def score(self, alg, noise: tuple[float, int] | None = None) -> float:
        """Mean return of ``alg``'s deterministic policy on the eval starts; ``noise=(std, seed)``
        acts as a dataset's behavior policy does (``with_action_noise``)."""
        policy, groups = alg.inference_policy(), alg.model.actor_obs

        def act(obs):
            return policy(concat_groups(obs, groups))

        if noise:
            act = with_action_noise(self.eval_env, act, *noise)
        returns, _ = run_episodes(self.eval_env, act, self.args.eval_seed)
        return float(returns.mean())

    def online_curve(self, runner, start: int, total: int, steps_of) -> list[tuple[int, float]]:
        """``(env steps, eval return)`` every ``--eval-every`` iterations from ``start`` to ``total``."""
        curve = []
        while runner.iteration < total:
            runner.learn(min(total, runner.iteration + self.args.eval_every))
            if runner.iteration > start:
                curve.append((steps_of(runner), self.score(runner.alg)))
        return curve


def ppo_steps(runner) -> int:
    return runner.iteration * runner.steps_per_iteration


def record_behavior(bench: Bench, runner, seed: int) -> tuple[float, float, float, Path, str]:
    """Score ``runner``'s policy without and with the data's action noise (on the eval starts, as
    every other score), roll it with noise into a D4RL HDF5 file; returns ``(deterministic return,
    noisy return, the data's episode return, path, summary)``. Uses its own RNGs, so ``runner``'s
    training goes on as if it had not been paused."""
    a = bench.args
    with torch.random.fork_rng():
        det = bench.score(runner.alg)
        policy, groups = runner.alg.inference_policy(), runner.alg.model.actor_obs
        noisy = bench.score(runner.alg, noise=(a.noise, seed + 200))
        env = build_env(runner.cfg, num_envs=a.envs, seed=seed + 100)
        data = collect_dataset(env, lambda obs: policy(concat_groups(obs, groups)), a.steps, seed + 100, a.noise,
                               tuple(groups))
        env.close()
    # the data's own episodes: other starts and commands, and the episodes cut at its end count
    data_return = float(data.episode_returns().mean())
    path = Path(tempfile.mkdtemp(prefix="uni_o4_bench_")) / "data.hdf5"
    data.save_hdf5(path)
    text = (f"PPO {runner.iteration} it, deterministic {det:.1f}, with noise {a.noise} {noisy:.1f}, dataset "
            f"{len(data)} transitions: episode return {data_return:.1f}")
    return det, noisy, data_return, path, text


ONLINE_ONLY = {"num_steps_per_env", "num_learning_epochs", "num_minibatches", "learning_rate", "schedule", "desired_kl",
               "min_learning_rate", "max_learning_rate", "clip_param", "value_clip", "lam", "value_loss_coef",
               "entropy_coef", "max_grad_norm", "normalize_advantage", "critic_learning_rate", "critic_obs",
               "online_init_std", "online_critic", "critic_warmup", "online_update_normalizer", "compile",
               "cudagraphs", "sampling_error_steps", "sampling_error_interval", "eval_interval", "eval_episodes"}
"""Uni-O4 fields only the online phase reads: a kept stage serves any values of these."""
STAGE_ARGS = ("task", "behavior_seed", "behavior_iterations", "behavior_per_seed", "envs", "steps", "noise",
              "bc_iterations", "eval_every", "eval_episodes", "eval_seed", "override_all")
"""Arguments a kept stage depends on (besides PPO's length, resolved from ``--scratch-iterations``)."""


def stage_settings(args: argparse.Namespace, uni_cfg) -> dict[str, Any]:
    """What a kept stage depends on: the benchmark's arguments and Uni-O4's offline settings."""
    cfg = dataclasses.asdict(uni_cfg)
    cfg["algo"] = {k: v for k, v in cfg["algo"].items() if k not in ONLINE_ONLY}
    for key in ("runner", "dataset"):
        cfg.pop(key)
    scratch = args.scratch_iterations or args.online_iterations
    return json.loads(json.dumps({"args": {**{k: getattr(args, k) for k in STAGE_ARGS}, "scratch_iterations": scratch},
                                  "config": cfg}, default=str))


def flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def load_stage(folder: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The kept stage in ``folder`` (``None`` if there is none); refuses one made with other settings."""
    if not (folder / "stage.pt").exists():
        return None
    stage = torch.load(folder / "stage.pt", weights_only=False)
    if stage["settings"] != settings:
        old, new = flat(stage["settings"]), flat(settings)
        diff = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new))
                if old.get(k) != new.get(k)]
        raise SystemExit(f"{folder} was made with other settings ({'; '.join(diff)}): use another --stage folder")
    return stage


def save_stage(folder: Path, stage: dict[str, Any], dataset: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(dataset, folder / "data.hdf5")
    tmp = folder / "stage.pt.tmp"
    torch.save(stage, tmp)
    tmp.replace(folder / "stage.pt")


def offline_state(alg) -> dict[str, Any]:
    """Uni-O4's offline models and the hand-over's choice (what ``restore_offline`` puts back)."""
    return {"offline": alg.offline.state_dict(), "chosen": alg.chosen, "offline_iteration": alg.offline_iteration,
            "selection_returns": alg.selection_returns, "selection_env_steps": alg.selection_env_steps,
            "generator": alg.generator.get_state()}


def restore_offline(runner, state: dict[str, Any]) -> None:
    """Put a kept offline phase into a fresh Uni-O4 runner and hand over with its online settings."""
    alg = runner.alg
    alg.offline.load_state_dict(state["offline"])
    alg.offline_iteration = runner.iteration = state["offline_iteration"]
    alg.selection_returns, alg.selection_env_steps = state["selection_returns"], state["selection_env_steps"]
    alg.generator.set_state(state["generator"])  # the action noise goes on as in the run that made the stage
    alg.start_online(state["chosen"])


def uni_extra(args: argparse.Namespace, dataset: Path | str) -> list[str]:
    """Uni-O4's overrides on top of ``Bench.config``'s."""
    return [f"dataset={dataset}", f"runner.max_iterations={args.online_iterations}", "algo.eval_interval=0",
            *args.override]


def prepare(bench: Bench, seed: int, shared: list) -> dict[str, Any]:
    """Everything before the online phase for ``seed``: PPO from scratch (with ``--behavior-per-seed``
    paused to record the behavior policy), the dataset, BC, and Uni-O4's offline phase."""
    args = bench.args
    scratch_its = args.scratch_iterations or args.online_iterations
    if not args.behavior_per_seed and not shared:
        behavior = bench.runner("ppo", args.behavior_seed, f"runner.max_iterations={args.behavior_iterations}")
        behavior.learn()
        shared.extend(record_behavior(bench, behavior, args.behavior_seed))
        print(f"behavior: {shared[4]}", flush=True)
    ppo = bench.runner("ppo", seed, f"runner.max_iterations={scratch_its}")
    ppo_curve = []
    if args.behavior_per_seed:
        ppo_curve = bench.online_curve(ppo, 0, args.behavior_iterations, ppo_steps)
        behavior_det, behavior_noisy, behavior_data, path, text = record_behavior(bench, ppo, seed)
        print(f"  seed {seed} behavior: {text}", flush=True)
    else:
        behavior_det, behavior_noisy, behavior_data, path, _ = shared
    ppo_curve += bench.online_curve(ppo, ppo.iteration, scratch_its, ppo_steps)
    uni = bench.runner("uni_o4", seed, *uni_extra(args, path))
    hidden = ",".join(map(str, uni.cfg.algo.actor_hidden))  # BC with Uni-O4's policy network
    bc = bench.runner("bc", seed, f"dataset={path}", f"runner.max_iterations={args.bc_iterations}",
                      "algo.eval_interval=0", f"algo.actor_hidden=[{hidden}]")
    bc.learn()
    uni.learn(uni.cfg.algo.offline_iterations)
    return {"settings": stage_settings(args, uni.cfg), "dataset": str(path), "behavior_det": behavior_det,
            "behavior_noisy": behavior_noisy, "behavior_data": behavior_data, "ppo_curve": ppo_curve,
            "bc": bench.score(bc.alg),
            "offline": bench.score(uni.alg), "uni_o4": offline_state(uni.alg)}


def steps_to(curve: list[tuple[int, float]], target: float) -> float:
    return next((s for s, r in curve if r >= target), math.nan)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="pendulum")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--behavior-seed", type=int, default=1)
    p.add_argument("--behavior-iterations", type=int, default=12, help="PPO iterations of the behavior policy")
    p.add_argument("--behavior-per-seed", action="store_true",
                   help="each seed's behavior policy is its PPO-from-scratch run at --behavior-iterations")
    p.add_argument("--scratch-iterations", type=int, default=0, help="PPO from scratch (0: --online-iterations)")
    p.add_argument("--envs", type=int, default=64, help="dataset: envs")
    p.add_argument("--steps", type=int, default=1000, help="dataset: steps per env")
    p.add_argument("--noise", type=float, default=0.3, help="dataset: Gaussian action noise std")
    p.add_argument("--bc-iterations", type=int, default=25, help="BC iterations (200 gradient steps each)")
    p.add_argument("--online-iterations", type=int, default=60)
    p.add_argument("--eval-every", type=int, default=2)
    p.add_argument("--eval-episodes", type=int, default=50)
    p.add_argument("--eval-seed", type=int, default=2024)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--stage", type=Path, help="keep (or reuse) each seed's runs before the online phase here")
    p.add_argument("--override", nargs="*", default=[], help="extra overrides for Uni-O4")
    p.add_argument("--override-all", nargs="*", default=[], help="extra overrides for every learner")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    bench = Bench(args)
    t0 = time.perf_counter()

    shared: list = []  # the behavior policy every seed shares (without --behavior-per-seed), made when needed
    rows = []
    for seed in args.seeds:
        t = time.perf_counter()
        folder = args.stage / f"seed{seed}" if args.stage else None
        stage = None
        if folder is not None and (folder / "stage.pt").exists():
            cfg = bench.config("uni_o4", seed, *uni_extra(args, folder / "data.hdf5"))
            stage = load_stage(folder, stage_settings(args, cfg))
            print(f"  seed {seed}: kept stage {folder} (PPO, dataset, BC, Uni-O4 offline)", flush=True)
        if stage is None:
            stage = prepare(bench, seed, shared)
            if folder is not None:
                save_stage(folder, {**stage, "dataset": str(folder / "data.hdf5")}, Path(stage["dataset"]))
        uni = bench.runner("uni_o4", seed, *uni_extra(args, stage["dataset"]))
        restore_offline(uni, stage["uni_o4"])
        off, offline, selection = uni.iteration, stage["offline"], stage["uni_o4"]["selection_returns"]
        behavior_det, behavior_data, bc_score, ppo_curve = (stage[k] for k in ("behavior_det", "behavior_data", "bc",
                                                                               "ppo_curve"))
        behavior_noisy = stage.get("behavior_noisy", math.nan)  # stages kept before it was measured lack it

        def uni_steps(r, off=off):
            return (r.iteration - off) * r.steps_per_iteration + r.alg.selection_env_steps

        uni_curve = bench.online_curve(uni, off, off + args.online_iterations, uni_steps)
        ppo_final = mean(r for _, r in ppo_curve[-3:])
        early = [r for s, r in uni_curve if s - uni.alg.selection_env_steps
                 <= 0.1 * args.online_iterations * uni.steps_per_iteration] or [uni_curve[0][1]]
        row = {"seed": seed, "behavior_det": behavior_det, "behavior_noisy": behavior_noisy,
               "behavior_data": behavior_data, "bc": bc_score,
               "offline": offline, "selection": selection, "ppo_final": ppo_final,
               "uni_final": mean(r for _, r in uni_curve[-3:]), "uni_steps": steps_to(uni_curve, ppo_final),
               "ppo_steps": steps_to(ppo_curve, ppo_final), "early_min": min(early),
               "uni_curve": uni_curve, "ppo_curve": ppo_curve}
        row["collapse"] = row["early_min"] < offline - 0.2 * abs(offline)
        rows.append(row)
        print(f"  seed {seed}: BC {bc_score:.1f} | Uni-O4 offline {offline:.1f} (candidates "
              f"{[round(s, 1) for s in selection]}) | PPO final {ppo_final:.1f} reached by Uni-O4 at "
              f"{row['uni_steps']:,.0f}, PPO at {row['ppo_steps']:,.0f} env steps | early min {min(early):.1f} "
              f"({time.perf_counter() - t:.0f} s)", flush=True)

    behavior = {k: mean(r[k] for r in rows) for k in ("behavior_det", "behavior_noisy", "behavior_data")}
    print(f"\n### {args.task}: behavior (PPO {args.behavior_iterations} it) deterministic "
          f"{behavior['behavior_det']:.1f}, with its data's noise {behavior['behavior_noisy']:.1f}, "
          f"its data's episodes {behavior['behavior_data']:.1f}"
          f"{' (means over seeds)' if args.behavior_per_seed else ''}\n")
    print("| seed | behavior: deterministic | : with noise | : its data | BC | Uni-O4 offline | PPO final (scratch) "
          "| env steps to it: Uni-O4 | : PPO | Uni-O4 final | worst eval, first 10% | collapse |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['seed']} | {r['behavior_det']:.1f} | {r['behavior_noisy']:.1f} | {r['behavior_data']:.1f} | "
              f"{r['bc']:.1f} | "
              f"{r['offline']:.1f} | {r['ppo_final']:.1f} | {r['uni_steps']:,.0f} | "
              f"{r['ppo_steps']:,.0f} | {r['uni_final']:.1f} | {r['early_min']:.1f} | {r['collapse']} |")
    print("\ncurves (env steps: eval return):")
    for r in rows:
        for name in ("uni_curve", "ppo_curve"):
            pts = " ".join(f"{s / 1e3:.0f}k:{v:.0f}" for s, v in r[name])
            print(f"  seed {r['seed']} {name[:-6]}: {pts}")
    m = {k: mean(r[k] for r in rows) for k in ("bc", "offline", "ppo_final", "uni_final", "uni_steps", "ppo_steps")}
    print(f"\nRESULT task={args.task} seeds={len(rows)} behavior_det={behavior['behavior_det']:.1f} "
          f"behavior_noisy={behavior['behavior_noisy']:.1f} behavior_data={behavior['behavior_data']:.1f} "
          f"bc={m['bc']:.1f} uni_o4_offline={m['offline']:.1f} "
          f"offline_beats_behavior={sum(r['offline'] >= max(r['behavior_det'], r['behavior_noisy']) for r in rows)} "
          f"offline_beats_data={sum(r['offline'] >= r['behavior_data'] for r in rows)} "
          f"offline_beats_bc={sum(r['offline'] >= r['bc'] for r in rows)} ppo_final={m['ppo_final']:.1f} "
          f"uni_o4_steps={m['uni_steps']:.0f} ppo_steps={m['ppo_steps']:.0f} "
          f"fewer_steps={sum(r['uni_steps'] < r['ppo_steps'] for r in rows)} "
          f"collapses={sum(r['collapse'] for r in rows)} seconds={time.perf_counter() - t0:.0f}")


if __name__ == "__main__":
    main()
