"""``ctrl-rl``: train, play, eval, export and list, configured by hydra overrides."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from ctrl_rl.utils.arguments import OneLineParser

EPILOG = """examples:
  ctrl-rl train task=pendulum
  ctrl-rl train task=cartpole_balance algo.schedule=fixed algo.learning_rate=3e-4
  ctrl-rl train algo=sac task=pendulum                 # off-policy: SAC (replay, n-step, C51)
  ctrl-rl train task=pendulum --checkpoint latest      # resume the newest pendulum run
  ctrl-rl train task=pendulum --checkpoint latest --more 200   # and train 200 iterations past it
  ctrl-rl eval latest --episodes 100
  ctrl-rl export latest
  ctrl-rl collect latest --output data.hdf5 --noise 0.1   # a dataset from a policy
  ctrl-rl collect random task=pendulum --output minari:ctrl_rl/pendulum/random-v0   # Minari
  ctrl-rl train algo=bc dataset=data.hdf5 task=pendulum   # behavior cloning from it
  ctrl-rl train algo=residual algo.base=<bc run dir> task=pendulum   # residual PPO on a frozen base
  ctrl-rl play latest --agent zero                     # sanity-check an MDP without a policy
  ctrl-rl play latest --video out.mp4 --steps 500      # MP4 of env 0
  ctrl-rl deploy sim2sim <run>/exported/policy.onnx    # the ROS 2 node against a MuJoCo robot
"""


COLLECT_HELP = """Roll policies in parallel envs and write an offline dataset: D4RL-layout HDF5 or Minari.

Levels as in D4RL. medium-replay approximates a run's replay buffer up to that checkpoint by its
saved checkpoints, each collecting an equal share of the steps. Provenance (task, level, policy
per segment, noise, seed) is stored with the data.

examples:
  ctrl-rl collect latest --output expert.hdf5 --level expert --noise 0.1
  ctrl-rl collect <run>/model_50.pt --level medium --output minari:ctrl_rl/pendulum/medium-v0
  ctrl-rl collect random task=pendulum --output random.hdf5
  ctrl-rl collect logs/ppo/pendulum/<run> --level medium-replay --output replay.hdf5
  ctrl-rl collect --mix random=0.3,expert:latest=0.7 --output mixed.hdf5
  ctrl-rl collect <run>/exported/policy.onnx --output bundle.hdf5   # the task comes from the bundle
"""


def _die(msg: str, code: int = 2) -> None:
    print(f"ctrl-rl: error: {msg}", file=sys.stderr)
    raise SystemExit(code)


def _tasks_text() -> str:
    """``sim=<name>: task, task, ...`` per backend, sorted and wrapped; a backend that cannot run here
    is marked ``(unavailable: ...)``, naming what to install (its extra, or its own install line)."""
    from ctrl_rl.sims import SIMS, unavailable
    from ctrl_rl.utils.docs import help_table
    from ctrl_rl.utils.extras import missing

    rows = []
    for sim in sorted(SIMS):
        why = unavailable(sim)
        mark = f"(unavailable: {why})" if why else ""
        try:
            tasks = ", ".join(sorted(SIMS[sim].tasks()))
        except ModuleNotFoundError as exc:  # a backend whose extra is not installed: say which
            message = missing(exc, f"sim={sim}")
            if message is None:
                raise
            mark, tasks = f"(unavailable: {why or message})", ""
        rows.append((f"sim={sim}", " ".join(part for part in (mark, tasks) if part)))
    return "\n".join(help_table(rows))


def _algos_text() -> str:
    from ctrl_rl.algos.registry import learners

    return ", ".join(sorted(learners()))


def _train_help(overrides: list[str]) -> str:
    """Every key of the chosen learner and task with the value training will use (schema defaults
    plus the pair's tune file plus ``overrides``) and its description, within 100 columns."""
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.utils.docs import field_rows, help_table, value_text, wrap

    cfg = load_train_config(overrides, for_run=False)  # prints without the sim installed or dataset=
    top = [(f"seed={cfg.seed}", "Seeds torch, numpy, python and the envs."),
           (f"device={cfg.device}", "cpu, cuda, cuda:1, ..."),
           (f"threads={value_text(cfg.threads)}", "CPU threads: null = torch 1, MuJoCo every core (docs/training.md)."),
           (f"profile={value_text(cfg.profile)}", "Time each iteration's stages: sim, inference, storage, update, "
                                                   "logging.")]
    if cfg.algo.requires_dataset:
        top.append((f"dataset={value_text(cfg.dataset)}", f"Required by algo={cfg.algo.name}: a D4RL-layout .hdf5, "
                    "minari:<id> or robotlogs:<dir> (`ctrl-rl collect` writes one)."))
    rows = list(top)
    for obj, prefix in ((cfg.algo, "algo"), (cfg.task, "task"), (cfg.sim, "sim"), (cfg.env, "env"),
                        (cfg.runner, "runner")):
        docs = cfg.algo.runner_docs if prefix == "runner" else {}  # what a runner key means for this learner
        rows += [(key, docs.get(key.split("=", 1)[0].split(".", 1)[1], doc))
                 for key, doc in field_rows(type(obj), prefix, obj)]
        rows += _task_parameter_rows(cfg) if prefix == "task" else []
    lines = ["usage: ctrl-rl train [--checkpoint latest|PATH [--more N]] [--cfg] [key=value ...]", "",
             *wrap("--checkpoint resumes a run (latest, a run directory or a model_<it>.pt) up to "
                   "runner.max_iterations, the run's total; --more N trains N iterations past the checkpoint "
                   "instead. --cfg prints the resolved config."), "",
             *wrap(f"algorithms (algo=...): {_algos_text()}"), "tasks (task=..., sim=...):", _tasks_text(), "",
             *wrap(f"keys for algo={cfg.algo.name} task={cfg.task.name} sim={cfg.sim.name}, with the values "
                   "training will use (schema defaults, then configs/tune/<algo>_<task>.yaml, then your "
                   "overrides; `ctrl-rl train algo=<name> task=<id> --help` for another pair; task parameters "
                   "are task.kwargs.<name>=value; several processes: torchrun --nproc_per_node=K -m ctrl_rl "
                   "train ..., docs/training.md):"),
             *help_table(rows)]
    return "\n".join(lines)


def _task_parameter_rows(cfg) -> list[tuple[str, str]]:
    """``(task.kwargs.<name>=<value>, description)`` for every parameter the task declares."""
    from ctrl_rl.robots import MUJOCO_SIMS
    from ctrl_rl.sims import task_parameters, unavailable
    from ctrl_rl.utils.docs import value_text
    from ctrl_rl.utils.extras import missing

    try:
        params = task_parameters(cfg.sim.name, cfg.task.name, dict(cfg.task.kwargs))
    except ModuleNotFoundError as exc:
        if missing(exc) is None:
            raise
        params = None
    why = unavailable(cfg.sim.name) if cfg.sim.name in MUJOCO_SIMS else None
    if params is None and why:  # the robot tasks declare their parameters in modules that import MuJoCo
        return [("task.kwargs.*", f"The task's parameters, listed once sim={cfg.sim.name} can run here: {why}.")]
    if params is None:
        return [("task.kwargs.*", f"Passed to sim={cfg.sim.name}'s own task config (not declared here).")]
    return [(f"task.kwargs.{name}={value_text(value)}", doc) for name, value, doc in params]


def cmd_train(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.app.train import train

    train(overrides, checkpoint=args.checkpoint, print_cfg=args.cfg, more=args.more)


def cmd_eval(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.app.evaluate import evaluate

    evaluate(args.checkpoint, overrides, episodes=args.episodes, seed=args.seed, summary=args.summary,
             require_gait=args.require_gait)


def cmd_play(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.app.play import play

    if args.checkpoint and "=" in args.checkpoint:  # `play --agent zero task=X`: an override, not a path
        overrides, args.checkpoint = [args.checkpoint, *overrides], None

    play(args.checkpoint, overrides, agent=args.agent, episodes=args.episodes, seed=args.seed,
         video=args.video, realtime=args.realtime, steps=args.steps)


def cmd_export(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.app.export import export

    export(args.checkpoint, overrides, output=args.output)


def cmd_collect(args: argparse.Namespace, overrides: list[str]) -> None:
    from pathlib import Path

    from ctrl_rl.app.collect import collect

    if args.policy and "=" in args.policy and not Path(args.policy).exists():  # `collect task=X --level random`
        overrides, args.policy = [args.policy, *overrides], None
    collect(args.policy, overrides, args.output, steps=args.steps, envs=args.envs, noise=args.noise,
            seed=args.seed, level=args.level, mix=args.mix, fmt=args.format)


def cmd_fetch_robots(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.robots.packages import PACKAGED, fetch

    for dist in args.packages or sorted(PACKAGED):
        try:
            fetch(dist)
        except (ValueError, RuntimeError) as exc:
            _die(str(exc))


def cmd_list(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.algos.registry import learners
    from ctrl_rl.app.configure import available
    from ctrl_rl.robots import ROBOTS
    from ctrl_rl.runners import LOOPS
    from ctrl_rl.utils.docs import help_table, wrap

    print("algorithms (algo=...):")
    print("\n".join(help_table(sorted((name, entry.summary) for name, entry in learners().items()))))
    print("tasks (task=..., sim=...):")
    print(_tasks_text())
    print("robots (robot=..., or a robot YAML path):")
    print("\n".join(wrap(", ".join(sorted(ROBOTS)), indent=2)))
    print("tuned settings (tune=...; configs/tune/<algo>_<task>.yaml is picked for its pair by itself):")
    print("\n".join(wrap(", ".join(available("tune")), indent=2)))
    print("training loops (a learner's loop=, register_learner):")
    print("\n".join(wrap(", ".join(LOOPS), indent=2)))


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ctrl-rl", formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{EPILOG}\nalgorithms (algo=...): {_algos_text()}\ntasks (task=..., sim=...):\n{_tasks_text()}\n",
        description="Train, evaluate and export continuous-control policies. Configure with hydra overrides\n"
                    "(key=value); `ctrl-rl train --help` lists every key.")
    sub = parser.add_subparsers(dest="command", metavar="{train,play,eval,export,collect,deploy,fetch-robots,list}")

    p = sub.add_parser("train", add_help=False, help="train a policy (overrides: algo=, task=, key=value)")
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--checkpoint", default=None, help="resume: 'latest' or a run dir / model_<it>.pt")
    p.add_argument("--more", type=int, default=None, metavar="N",
                   help="with --checkpoint: train N iterations past the checkpoint's (runner.max_iterations is the "
                        "run's total)")
    p.add_argument("--cfg", action="store_true", help="print the resolved config and exit")
    p.set_defaults(func=cmd_train)

    for name, func, text in (("eval", cmd_eval, "deterministic episodes; ends with a RESULT line"),
                             ("play", cmd_play, "run a policy (or a zero/random agent) and print each episode")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("checkpoint", nargs="?" if name == "play" else None, default=None,
                       help="'latest', a run directory or a model_<it>.pt")
        if name == "eval":
            p.add_argument("--episodes", type=int, default=100)
        else:
            p.add_argument("--episodes", type=int, default=None,
                           help="envs side by side, one episode each (default 8; 1 with --video, which films env 0)")
        p.add_argument("--seed", type=int, default=12345, help="env seed for the episodes")
        if name == "eval":
            p.add_argument("--summary", default=None, metavar="PATH",
                           help="robot tasks: the gait report as JSON, a PNG of env 0 next to it (default: "
                                "<run dir>/eval/gait_<checkpoint>_<date_time>.json)")
            p.add_argument("--require-gait", action="store_true",
                           help="exit 1 when a bar of the gait report fails (robot tasks; docs/training.md)")
        if name == "play":
            p.add_argument("--agent", choices=("policy", "zero", "random"), default="policy")
            p.add_argument("--video", metavar="PATH", default=None,
                           help="record env 0 to an H.264 MP4, a frame per control step at the control rate "
                                "(MuJoCo sims, torch tasks in 2-D; needs the 'video' extra)")
            p.add_argument("--realtime", action="store_true", help="pace steps to the env's control dt")
            p.add_argument("--steps", type=int, default=None, metavar="N",
                           help="stop after N control steps (episodes continue across resets)")
        p.set_defaults(func=func)

    p = sub.add_parser("export", help="write exported/policy.onnx (parity-checked against torch)")
    p.add_argument("checkpoint", help="'latest', a run directory or a model_<it>.pt")
    p.add_argument("--output", default=None, help="default: <run dir>/exported/policy.onnx")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("collect", help="roll policies and write an offline dataset (D4RL HDF5 or Minari)",
                       description=COLLECT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("policy", nargs="?", default=None,
                   help="'latest', a run directory, a model_<it>.pt, an exported policy.onnx, or 'random'")
    p.add_argument("--output", required=True,
                   help="a .hdf5/.h5 file, or minari:<namespace>/<name>-vN (written under $MINARI_DATASETS_PATH, "
                        "default ~/.minari/datasets)")
    p.add_argument("--format", choices=("hdf5", "minari"), default=None, help="default: from --output's name")
    p.add_argument("--level", choices=("random", "medium", "expert", "medium-replay", "mixed"), default=None,
                   help="D4RL level: random = uniform actions (no policy; task=...), medium/expert = the given "
                        "policy (you choose which checkpoint is which), medium-replay = every model_*.pt of the "
                        "policy's run in order, an equal share of steps each, mixed = --mix")
    p.add_argument("--mix", default=None, metavar="SPEC=FRACTION,...",
                   help="concatenate segments by fraction of the steps, e.g. random=0.3,expert:latest=0.7; SPEC "
                        "is random, a policy (optionally level:policy) or medium-replay:<run>")
    p.add_argument("--steps", type=int, default=1000, help="steps per env (over all segments)")
    p.add_argument("--envs", type=int, default=16, help="parallel envs (transitions = envs x steps)")
    p.add_argument("--noise", type=float, default=0.0,
                   help="std of Gaussian noise added to the policies' actions (not to random ones)")
    p.add_argument("--seed", type=int, default=0, help="env and noise seed (segment i uses seed + i)")
    p.set_defaults(func=cmd_collect)

    sub.add_parser("deploy", help="run the deploy node or sim2sim (`ctrl-rl deploy --help`)", add_help=False)

    p = sub.add_parser("fetch-robots", help="fetch the robot models that ship in packages (mjlab's Unitree Go1 "
                       "and G1) into ~/.cache/ctrl_rl, once", description="Download each package's wheel (no "
                       "dependencies, nothing installed) and unpack its robot models into the cache.")
    p.add_argument("packages", nargs="*", help="distributions (default: all known: mjlab)")
    p.set_defaults(func=cmd_fetch_robots)

    p = sub.add_parser("list", help="list algorithms and tasks")
    p.set_defaults(func=cmd_list)
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["deploy"]:  # robot side: no torch, no hydra (ctrl-rl[deploy] only)
        from ctrl_rl.deploy.commands import main as deploy_main

        deploy_main(argv[1:])
        return
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for chatty in ("onnx_ir", "onnxscript", "torch.onnx", "matplotlib", "OpenGL"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    # torch's ONNX exporter: a note per missing torchvision op and a deprecation inside torch itself
    logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)
    import warnings

    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        raise SystemExit(0)
    if args.command == "train" and args.help:
        from ctrl_rl.config import ConfigError
        from ctrl_rl.utils.extras import missing

        try:
            print(_train_help(extra))
        except ConfigError as exc:
            _die(str(exc))
        except ModuleNotFoundError as exc:  # an optional dependency help itself needs: one line naming its extra
            message = missing(exc, "ctrl-rl train --help")
            if message is None:
                raise
            _die(message)
        raise SystemExit(0)
    unknown_flags = [e for e in extra if e.startswith("-")]
    if unknown_flags:
        _die(f"unknown option '{unknown_flags[0]}' for '{args.command}'; see ctrl-rl {args.command} --help")
    from ctrl_rl import distributed
    from ctrl_rl.config import ConfigError
    from ctrl_rl.deploy.gait_report import GaitCheckFailed
    from ctrl_rl.env import RenderUnavailableError, SimulationError
    from ctrl_rl.export.onnx_policy import ParityError
    from ctrl_rl.utils.extras import missing
    from ctrl_rl.utils.files import describe_os_error
    from ctrl_rl.utils.guards import NonFiniteError
    from ctrl_rl.utils.interrupts import Interrupted
    from ctrl_rl.utils.video import VideoUnavailableError

    if os.environ.get("CTRL_RL_DEBUG"):  # full tracebacks for bug reports
        try:
            args.func(args, extra)
        finally:
            distributed.shutdown()
        return
    try:
        args.func(args, extra)
    except ConfigError as exc:
        _die(str(exc))
    except (FileNotFoundError, ValueError, RenderUnavailableError, VideoUnavailableError) as exc:
        _die(str(exc))
    except OSError as exc:  # a full disk, a read-only log root: the path and what the system said
        _die(describe_os_error(exc))
    except (NonFiniteError, ParityError, SimulationError) as exc:
        _die(str(exc), code=3)
    except GaitCheckFailed as exc:  # the run worked; the gait it measured does not meet a bar
        print(f"ctrl-rl: gait check failed: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except Interrupted as exc:
        run = f"; resume with --checkpoint {Path(exc.path).parent}" if exc.path else ""
        print(f"ctrl-rl: {exc}{run}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except ModuleNotFoundError as exc:  # an optional dependency: one line naming its extra
        message = missing(exc, f"ctrl-rl {args.command}")
        if message is None:
            raise
        _die(message)
    finally:
        distributed.shutdown()  # under torchrun: leave the process group cleanly


if __name__ == "__main__":
    main()
