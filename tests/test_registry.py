"""The registry is the one place a learner or a task is added: a learner and a torch task defined
in this file alone train, resume, evaluate and export through the real CLI, and every registered
learner's config is its schema's defaults plus the shipped tune file, as ``--help`` prints it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch
import yaml

from ctrl_rl.algos.heads import GaussianHead
from ctrl_rl.algos.ppo import PPO
from ctrl_rl.algos.registry import LEARNERS, learner, learners, register_learner
from ctrl_rl.app import cli
from ctrl_rl.app.configure import group_files, load_train_config, task_node, task_sims
from ctrl_rl.config import ConfigError
from ctrl_rl.config_onpolicy import PPOConfig
from ctrl_rl.registry import UnknownNameError
from ctrl_rl.robots import ROBOTS
from ctrl_rl.runners import runner_class
from ctrl_rl.sims import SIMS, make_env
from ctrl_rl.sims.torch_backend import TASKS, State, TaskParams, TorchVecEnv, register_torch_task
from ctrl_rl.tasks import task_entry
from ctrl_rl.utils.docs import field_docs

# ---- a learner: vanilla policy gradient with a baseline (A2C's loss), on PPO's machinery ----------


@dataclasses.dataclass
class A2CConfig(PPOConfig):
    """A2C: the policy-gradient loss -log π(a|s) A, one epoch per rollout."""

    name: str = "a2c_test"
    num_learning_epochs: int = 1


class PolicyGradientHead(GaussianHead):
    def loss(self, actor, mb, cfg):
        mean, std = actor.distribution(mb.actor_obs)
        from ctrl_rl.nets.distributions import gaussian_entropy, gaussian_log_prob

        surrogate = -(gaussian_log_prob(mb.actions, mean, std) * mb.advantages).mean()
        return surrogate, gaussian_entropy(std).mean(), {}


def make_a2c(cfg, obs_dims, action_dim, num_envs, device, **kw):
    return PPO(cfg, obs_dims, action_dim, num_envs, device, seed=kw.get("seed", 0), head=PolicyGradientHead())


# ---- a task: drive a 1-D point to the origin -----------------------------------------------------


@dataclasses.dataclass
class Reach1DParams(TaskParams):
    speed: float = 0.1
    """Distance moved per unit action and step."""


class Reach1D(TorchVecEnv):
    """A point at x in [-1, 1] moved by 0.1 a per step; reward -|x|."""

    action_dim = 1
    obs_dims = {"policy": 1}
    max_episode_length = 20
    step_dt = 0.1
    Params = Reach1DParams

    def _configure(self, params: Reach1DParams) -> None:
        self.speed = params.speed

    def _initial_state(self) -> State:
        return {"x": self._uniform(-1.0, 1.0, 1)}

    def _dynamics(self, state: State, action: torch.Tensor):
        x = (state["x"] + self.speed * action.clamp(-1, 1)).clamp(-1, 1)
        done = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return {"x": x}, -x.abs().squeeze(-1), done

    def _observe(self, state: State):
        return {"policy": state["x"].clone()}


def ctrl_rl(*argv: str) -> None:
    """The real command line, in this process (where the registrations above live); ``--help``
    exits 0, every other exit is a failure."""
    try:
        cli.main(list(argv))
    except SystemExit as exc:
        assert exc.code == 0 and "--help" in argv, f"ctrl-rl {' '.join(argv)} exited with {exc.code}"


@pytest.fixture
def a2c_and_reach_1d():
    """This file's learner and task, registered for one test and taken out after it."""
    register_learner("a2c_test", config=A2CConfig, build=make_a2c, loop="online")
    register_torch_task("reach_1d", Reach1D)
    yield
    del LEARNERS["a2c_test"], TASKS["reach_1d"]


def test_a_learner_and_a_task_from_this_file_alone_go_through_every_command(a2c_and_reach_1d, tmp_path, monkeypatch,
                                                                            capsys):
    monkeypatch.chdir(tmp_path)
    small = ["algo=a2c_test", "task=reach_1d", "env.num_envs=16", "algo.num_steps_per_env=20",
             "algo.actor_hidden=[16]", "algo.critic_hidden=[16]", "runner.progress=false"]
    assert "a2c_test" in dict(learners())
    ctrl_rl("train", *small, "runner.max_iterations=2")
    run = next((tmp_path / "logs" / "a2c_test" / "reach_1d").iterdir())
    assert (run / "model_2.pt").is_file()
    ctrl_rl("train", *small, "runner.max_iterations=4", "--checkpoint", "latest")
    assert (run / "model_4.pt").is_file()  # resumed into the same run
    capsys.readouterr()
    ctrl_rl("eval", "latest", "--episodes", "4")
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("RESULT mean_return=")
    ctrl_rl("export", "latest")
    assert (run / "exported" / "policy.onnx").is_file()
    ctrl_rl("train", "algo=a2c_test", "task=reach_1d", "--help")
    text = capsys.readouterr().out
    assert "algo.num_learning_epochs=1" in text and "Passes over the batch" in text  # inherited docs
    assert "task.kwargs.speed=0.1" in text and "Distance moved per unit action" in text  # the task's own


# ---- one place per default -----------------------------------------------------------------------


def _tune_files() -> list[tuple[str, str, str | None]]:
    """(algo, task, preset) per tune file: ``<algo>_<task>`` is the pair's own delta, and a file
    named ``<algo>_<task>_<suffix>`` is a preset picked with ``tune=<file>`` (preset = its stem)."""
    tasks = sorted(task_sims(), key=len, reverse=True)
    out = []
    for stem in sorted(group_files("tune")):
        algo = next(a for a in sorted(learners(), key=len, reverse=True) if stem.startswith(a + "_"))
        rest = stem[len(algo) + 1:]
        task = next(t for t in tasks if rest == t or rest.startswith(t + "_"))
        out.append((algo, task, None if rest == task else stem))
    return out


def _flat(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _tune_delta(path: Path) -> dict[str, object]:
    """A tune file's keys, after those of the tune files its ``defaults`` list names."""
    if not path.is_file():
        return {}
    raw = yaml.safe_load(path.read_text()) or {}
    out: dict[str, object] = {}
    for entry in raw.pop("defaults", []):
        if entry != "_self_":
            out.update(_tune_delta(path.parent / f"{entry}.yaml"))
    out.update(_flat(raw))
    return out


def _expected(algo: str, task: str | None, preset: str | None = None) -> dict[str, object]:
    """Schema defaults, then the tune file's delta (the preset's, when one is picked): what
    ``train`` must use."""
    from ctrl_rl.config import TrainConfig

    task = task or "pendulum"
    want = _flat(dataclasses.asdict(TrainConfig(algo=learner(algo).config())))
    want["task.name"] = task
    for entry in task_node(task, task_sims()[task])["defaults"]:  # the registration picks the task's backend
        want["sim.name"] = entry["override /sim"]
    # the tune file comes later in train.yaml's defaults: a preset may move the task to another backend
    tune = group_files("tune").get(preset or f"{algo}_{task}")
    want.update(_tune_delta(tune) if tune else {})
    return want


@pytest.mark.parametrize("algo,task,preset", [(a, None, None) for a in sorted(learners())] + _tune_files())
def test_train_config_is_schema_defaults_plus_tune_delta_and_help_prints_it(algo, task, preset, capsys):
    overrides = [f"algo={algo}", "dataset=d.hdf5"] + ([f"task={task}"] if task else [])
    overrides += [f"tune={preset}"] if preset else []
    if algo == "distillation":  # the one key a run needs that the schema leaves empty (check_complete)
        overrides.append("algo.teacher=logs/teacher")
    cfg = load_train_config(overrides)
    got = _flat(dataclasses.asdict(cfg))
    for key, value in _expected(algo, task, preset).items():
        if key == "algo.critic_obs" and value is None and got[key] is not None:
            continue  # a schema that resolves it from the actor's groups (Uni-O4's offline V)
        if key in ("dataset", "algo.teacher"):  # set above
            continue
        assert got[key] == pytest.approx(value) if isinstance(value, float) else got[key] == value, key
    ctrl_rl("train", *overrides, "--help")
    text = capsys.readouterr().out
    flowing = f" {' '.join(text.split())} "  # a long key=value wraps over lines at its spaces
    docs = {**field_docs(type(cfg.algo))}
    for f in dataclasses.fields(cfg.algo):
        value = getattr(cfg.algo, f.name)
        shown = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        assert f" algo.{f.name}={' '.join(shown.split())} " in flowing, f.name
        assert docs.get(f.name), f"algo.{f.name} has no description"
    for section in ("env", "runner", "task", "sim"):
        for f in dataclasses.fields(getattr(cfg, section)):
            assert f"  {section}.{f.name}=" in text


# ---- one lookup, one error ----------------------------------------------------------------------


def _lookups() -> dict[str, tuple]:
    """Every registry's lookup as a command reaches it: ``(kind, lookup, a typo, what it means)``."""
    return {
        "algo": ("algo", learner, "sacc", "sac"),
        "algo (command line)": ("algo", lambda name: load_train_config([f"algo={name}"]), "sacc", "sac"),
        "torch task": ("task", lambda name: make_env("torch", name, 2), "pendulumm", "pendulum"),
        "task (command line)": ("task", lambda name: load_train_config([f"task={name}"]), "pendulumm", "pendulum"),
        "MuJoCo task": ("task", task_entry, "quadruped_velocity_flta", "quadruped_velocity_flat"),
        "sim": ("sim", lambda name: SIMS[name], "mujocoo", "mujoco"),
        "sim (command line)": ("sim", lambda name: load_train_config([f"sim={name}"]), "mujocoo", "mujoco"),
        "robot": ("robot", lambda name: ROBOTS[name], "ctrl_qaud", "ctrl_quad"),
        "loop": ("loop", runner_class, "onlin", "online"),
    }


@pytest.mark.parametrize("which", list(_lookups()))
def test_every_unknown_name_fails_with_one_error_in_one_shape(which):
    """A typo names the closest registered name as the command line writes it; a name close to none
    lists the choices; both end by pointing at `ctrl-rl list`, in one line of at most 200 characters."""
    kind, lookup, typo, meant = _lookups()[which]
    with pytest.raises(UnknownNameError) as close:
        lookup(typo)
    scope = r"( for sim [^;]+)?"  # which sim's tasks
    assert re.fullmatch(rf"unknown {kind} '{typo}'{scope}; did you mean {kind}={meant}\? "
                        rf"\(`ctrl-rl list` lists every {kind}\)", str(close.value)), str(close.value)
    with pytest.raises(UnknownNameError) as far:
        lookup("zzz")
    assert re.fullmatch(rf"unknown {kind} 'zzz'{scope}; choose (a [^;]+ or )?one of: [^;]+ "
                        rf"\((`ctrl-rl list` lists every {kind}|\d+ more: `ctrl-rl list`)\)", str(far.value)), \
        str(far.value)
    assert isinstance(far.value, ConfigError) and isinstance(far.value, ValueError)  # what callers catch
    assert len(f"ctrl-rl: error: {far.value}") <= 200 and "\n" not in str(far.value)


def test_one_lookup_implementation():
    """Guessing the meant name (difflib) lives in ``ctrl_rl/registry.py`` alone: every registry and
    every unknown-name check goes through it."""
    src = Path(__file__).resolve().parent.parent / "src" / "ctrl_rl"
    users = sorted(str(p.relative_to(src)) for p in src.rglob("*.py") if "difflib" in p.read_text())
    assert users == ["registry.py"], users
