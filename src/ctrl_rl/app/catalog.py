"""What is registered, as ``ctrl-rl`` prints it: the learners, the tasks of each sim (marking the
sims that cannot run here), the robots, the tune presets, the training loops, and the keys of a
learner and task pair (``ctrl-rl train --help``).

Imports the sims and runners (torch); the parser in ``cli.py`` imports this module only for a
training command, so ``ctrl-rl deploy`` stays torch-free.
"""

from __future__ import annotations

from ctrl_rl.algos.registry import learners
from ctrl_rl.app.configure import available, load_train_config
from ctrl_rl.robots import ROBOTS
from ctrl_rl.runners import LOOPS
from ctrl_rl.sims import SIMS, task_parameters, unavailable
from ctrl_rl.tasks import MUJOCO_SIMS
from ctrl_rl.utils.docs import field_rows, help_table, value_text, wrap
from ctrl_rl.utils.extras import missing


def tasks_text() -> str:
    """``sim=<name>: task, task, ...`` per backend, sorted and wrapped; a backend that cannot run here
    is marked ``(unavailable: ...)``, naming what to install (its extra, or its own install line)."""
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


def algos_text() -> str:
    """The registered learners' names, sorted."""
    return ", ".join(sorted(learners()))


def train_help(overrides: list[str]) -> str:
    """Every key of the chosen learner and task with the value training will use (schema defaults
    plus the pair's tune file plus ``overrides``) and its description, within 100 columns."""
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
        rows += task_parameter_rows(cfg) if prefix == "task" else []
    lines = ["usage: ctrl-rl train [--checkpoint latest|PATH [--more N]] [--cfg] [key=value ...]", "",
             *wrap("--checkpoint resumes a run (latest, a run directory or a model_<it>.pt) up to "
                   "runner.max_iterations, the run's total; --more N trains N iterations past the checkpoint "
                   "instead. --cfg prints the resolved config."), "",
             *wrap(f"algorithms (algo=...): {algos_text()}"), "tasks (task=..., sim=...):", tasks_text(), "",
             *wrap(f"keys for algo={cfg.algo.name} task={cfg.task.name} sim={cfg.sim.name}, with the values "
                   "training will use (schema defaults, then the task's tune/<algo>_<task>.yaml, then your "
                   "overrides; `ctrl-rl train algo=<name> task=<id> --help` for another pair; task parameters "
                   "are task.kwargs.<name>=value; several processes: torchrun --nproc_per_node=K -m ctrl_rl "
                   "train ..., docs/training.md):"),
             *help_table(rows)]
    return "\n".join(lines)


def task_parameter_rows(cfg) -> list[tuple[str, str]]:
    """``(task.kwargs.<name>=<value>, description)`` for every parameter the task declares."""
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


def list_text() -> str:
    """``ctrl-rl list``: the learners with their summaries, the tasks per sim, the robots, the tune
    presets and the training loops."""
    return "\n".join((
        "algorithms (algo=...):",
        "\n".join(help_table(sorted((name, entry.summary) for name, entry in learners().items()))),
        "tasks (task=..., sim=...):",
        tasks_text(),
        "robots (robot=..., or a robot YAML path):",
        "\n".join(wrap(", ".join(sorted(ROBOTS)), indent=2)),
        "tuned settings (tune=...; a task's tune/<algo>_<task>.yaml is picked for its pair by itself):",
        "\n".join(wrap(", ".join(available("tune")), indent=2)),
        "training loops (a learner's loop=, register_learner):",
        "\n".join(wrap(", ".join(LOOPS), indent=2)),
    ))
