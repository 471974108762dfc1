"""``ctrl-rl``: train, play, eval, export and list, configured by hydra overrides."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from ctrl_rl.config import ConfigError
from ctrl_rl.robots.packages import PACKAGED, fetch
from ctrl_rl.utils.arguments import OneLineParser
from ctrl_rl.utils.extras import missing

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
saved checkpoints, each collecting an equal share of the steps. scripted = the task's scripted
expert (arm tasks: inverse kinematics; lift: a grasp state machine); --episodes N collects whole
episodes, --successful-only keeps those the task scores a success. Provenance (task, level, policy
per segment, noise, seed; episodes tried, succeeded and kept) is stored with the data.

examples:
  ctrl-rl collect latest --output expert.hdf5 --level expert --noise 0.1
  ctrl-rl collect <run>/model_50.pt --level medium --output minari:ctrl_rl/pendulum/medium-v0
  ctrl-rl collect random task=pendulum --output random.hdf5
  ctrl-rl collect logs/ppo/pendulum/<run> --level medium-replay --output replay.hdf5
  ctrl-rl collect --mix random=0.3,expert:latest=0.7 --output mixed.hdf5
  ctrl-rl collect <run>/exported/policy.onnx --output bundle.hdf5   # the task comes from the bundle
  ctrl-rl collect scripted task=lift --episodes 50 --noise 0.05 --successful-only --output lift.hdf5
"""


def _die(msg: str, code: int = 2) -> None:
    print(f"ctrl-rl: error: {msg}", file=sys.stderr)
    raise SystemExit(code)


def _algos_and_tasks() -> str:
    """The epilog's registered learners and tasks (``catalog.py``)."""
    from ctrl_rl.app.catalog import algos_text, tasks_text  # start-up and deploy: the sims import torch

    return f"algorithms (algo=...): {algos_text()}\ntasks (task=..., sim=...):\n{tasks_text()}\n"


def cmd_train(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.app.train import train  # start-up: each command imports its own parts (torch)

    train(overrides, checkpoint=args.checkpoint, print_cfg=args.cfg, more=args.more)


def cmd_eval(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.app.evaluate import evaluate  # start-up: each command imports its own parts (torch)

    evaluate(args.checkpoint, overrides, episodes=args.episodes, seed=args.seed, summary=args.summary,
             require_gait=args.require_gait)


def cmd_play(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.app.play import play  # start-up: each command imports its own parts (torch)

    if args.checkpoint and "=" in args.checkpoint:  # `play --agent zero task=X`: an override, not a path
        overrides, args.checkpoint = [args.checkpoint, *overrides], None

    play(args.checkpoint, overrides, agent=args.agent, episodes=args.episodes, seed=args.seed,
         video=args.video, realtime=args.realtime, steps=args.steps)


def cmd_export(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.app.export import export  # start-up: each command imports its own parts (torch)

    export(args.checkpoint, overrides, output=args.output)


def cmd_collect(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.app.collect import collect  # start-up: each command imports its own parts (torch)

    if args.policy and "=" in args.policy and not Path(args.policy).exists():  # `collect task=X --level random`
        overrides, args.policy = [args.policy, *overrides], None
    collect(args.policy, overrides, args.output, steps=args.steps, envs=args.envs, noise=args.noise,
            seed=args.seed, level=args.level, mix=args.mix, fmt=args.format, episodes=args.episodes,
            successful_only=args.successful_only)


def cmd_fetch_robots(args: argparse.Namespace, overrides: list[str]) -> None:
    for dist in args.packages or sorted(PACKAGED):
        try:
            fetch(dist)
        except (ValueError, RuntimeError) as exc:
            _die(str(exc))


def cmd_list(args: argparse.Namespace, overrides: list[str]) -> None:
    from ctrl_rl.app.catalog import list_text  # start-up and deploy: the sims and runners import torch

    print(list_text())


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ctrl-rl", formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{EPILOG}\n{_algos_and_tasks()}",
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
                   help="'latest', a run directory, a model_<it>.pt, an exported policy.onnx, 'random', or "
                        "'scripted' (the task's scripted expert: reach, lift, insert)")
    p.add_argument("--output", required=True,
                   help="a .hdf5/.h5 file, or minari:<namespace>/<name>-vN (written under $MINARI_DATASETS_PATH, "
                        "default ~/.minari/datasets)")
    p.add_argument("--format", choices=("hdf5", "minari"), default=None, help="default: from --output's name")
    p.add_argument("--level", choices=("random", "medium", "expert", "medium-replay", "mixed", "scripted"),
                   default=None,
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
    p.add_argument("--episodes", type=int, default=None,
                   help="collect whole episodes of one source until this many are kept (instead of --steps)")
    p.add_argument("--successful-only", action="store_true",
                   help="with --episodes: keep only the episodes the task scores a success (success_rate)")
    p.set_defaults(func=cmd_collect)

    sub.add_parser("deploy", help="run the deploy node or sim2sim (`ctrl-rl deploy --help`)", add_help=False)

    p = sub.add_parser("fetch-robots", help="fetch the robot models that ship in packages (mjlab's Unitree Go1 "
                       "and G1, i2rt's YAM arm) into ~/.cache/ctrl_rl, once",
                       description="Download each package's wheel (no dependencies, nothing installed) and unpack "
                       "its robot models into the cache.")
    p.add_argument("packages", nargs="*", help="distributions (default: all known: mjlab)")
    p.set_defaults(func=cmd_fetch_robots)

    p = sub.add_parser("list", help="list algorithms and tasks")
    p.set_defaults(func=cmd_list)
    return parser


def main(argv: list[str] | None = None) -> None:
    try:
        _main(sys.argv[1:] if argv is None else list(argv))
    except BrokenPipeError:  # `ctrl-rl ... | head` closed our stdout: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        raise SystemExit(141) from None  # 128 + SIGPIPE, what a shell reports for `yes | head`


def _main(argv: list[str]) -> None:
    if argv[:1] == ["deploy"]:  # robot side: no torch, no hydra (ctrl-rl[deploy] only)
        from ctrl_rl.deploy.commands import main as deploy_main  # start-up: the robot side, on its own

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
        from ctrl_rl.app.catalog import train_help  # start-up and deploy: the sims import torch

        try:
            print(train_help(extra))
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
    from ctrl_rl.app.errors import run_command  # start-up and deploy: the parts it names import torch

    run_command(args, extra)


if __name__ == "__main__":
    main()
