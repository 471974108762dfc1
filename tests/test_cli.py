"""The command line: help texts, and bad configs failing fast with one actionable line."""

import os
import subprocess
import sys

import pytest
import torch

from ctrl_rl.algos.registry import learners


def ctrl_rl(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ctrl_rl", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize(
    "override,expected",
    [
        ("task=nope", "unknown task 'nope' for sim 'torch'; choose one of: bimodal_bandit, cartpole_balance, "
                      "cartpole_swingup, pendulum, point_mass (`ctrl-rl list` lists every task)"),
        ("task=quadruped_velocity_flta", "unknown task 'quadruped_velocity_flta' for sim 'torch'; did you mean "
                                         "task=quadruped_velocity_flat sim=mujoco? (`ctrl-rl list` lists every task"),
        ("env.num_envs=-4", "env.num_envs: must be a positive integer, got -4"),
        ("env.num_envs=abc", "env.num_envs: expected integer, got 'abc' (e.g. env.num_envs=4096)"),
        ("algo.learnin_rate=1e-3", "unknown config key 'algo.learnin_rate'"),
        ("num_envs=64", "unknown config key 'num_envs' (did you mean 'env.num_envs'?); top-level keys: algo, "),
        ("algo=sacc", "unknown algo 'sacc'; did you mean algo=sac? (`ctrl-rl list` lists every algo)"),
        ("algo.schedule=cosine", "algo.schedule: must be one of: adaptive, fixed"),
        ("sim=bullet", "unknown sim 'bullet'; choose one of: gymnasium, isaacgym, isaaclab, mjlab, mjwarp, mujoco, "
                       "torch"),
        ("algo.critic_obs=[privileged]", "names observation group(s) ['privileged']"),
        ("tune=fastest", "unknown tune 'fastest'; choose one of: cts_quadruped_velocity_flat, "),
        ("+task.kwargs.gravity=5",
         "task 'pendulum' has no parameter 'gravity' (task.kwargs); valid: max_episode_length, g, m, l"),
        ("env.num_envs=1 algo.num_steps_per_env=4", "algo.num_minibatches: a batch of 4 samples"),
        ("--more 2", "--more 2 trains past a checkpoint: add --checkpoint latest (or a run directory), or give a "
                     "new run its length with runner.max_iterations=2"),
        ("--checkpoint latest --more 0", "--more: must be a positive number of iterations, got 0 (e.g. --more 200)"),
        ("--checkpoint latest --more 2", "--more and runner.max_iterations both set the run's length: keep one"),
        pytest.param("device=cuda", "device: 'cuda' is not available on this machine",
                     marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")),
    ],
)
def test_bad_config_is_one_line_error_naming_the_fix(tmp_path, override, expected):
    r = ctrl_rl("train", *override.split(), f"runner.log_root={tmp_path}", "runner.max_iterations=1", cwd=tmp_path)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr, r.stderr
    lines = [line for line in r.stderr.strip().splitlines() if not line.startswith(("INFO", "WARNING"))]
    assert len(lines) == 1, r.stderr
    assert expected in lines[0], lines[0]
    assert not list(tmp_path.rglob("params"))  # failed before any work: no run directory


@pytest.mark.parametrize("override", ["env.num_envs=abc", "env.num_envs=1.5", "seed=abc", "threads=abc",
                                      "profile=maybe", "algo.learning_rate=abc", "algo.compile=maybe",
                                      "algo.actor_hidden=64", "algo.critic_obs=5", "sim.nconmax=abc",
                                      "runner.max_iterations=abc", "runner.progress=maybe"])
def test_every_type_error_of_an_override_carries_an_example_fix(override):
    """A value of the wrong type is refused with a value of the right one to copy (the key's default)."""
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.config import ConfigError

    key = override.split("=")[0]
    with pytest.raises(ConfigError) as refused:
        load_train_config(["task=pendulum", override])
    message = str(refused.value)
    assert message.startswith(f"{key}: expected ") and f" (e.g. {key}=" in message, message
    example = message.split(" (e.g. ", 1)[1].rstrip(")")
    load_train_config(["task=pendulum", example])  # the example is a value the key takes


@pytest.mark.parametrize("argv", [["task=pendulumm"], ["task=pendulumm", "sim=mujoco"], ["task=nope"],
                                  ["algo.learnin_rate=1e-3"], ["algo.zzz=1"], ["algo=sac", "algo.zzz=1"],
                                  ["num_envs=64"], ["tune=fastest"], ["tune=ppo_pendulumm"], ["algo=sacc"]])
def test_a_did_you_mean_line_stays_within_200_characters(argv, tmp_path):
    """Choices that do not fit are counted and left to the command that lists them all."""
    r = ctrl_rl("train", *argv, "--cfg", cwd=tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("ctrl-rl: error: "), r.stderr
    assert len(lines[0]) <= 200, (len(lines[0]), lines[0])
    if "... (" in lines[0]:
        assert lines[0].endswith(("more: `ctrl-rl list`)", "--help`)", "tasks: `ctrl-rl list`)")), lines[0]


def test_a_task_typo_names_the_task_and_where_every_task_is_listed(tmp_path):
    r = ctrl_rl("train", "task=pendulumm", "--cfg", cwd=tmp_path)
    assert r.stderr == ("ctrl-rl: error: unknown task 'pendulumm' for sim 'torch'; did you mean task=pendulum? "
                        "(`ctrl-rl list` lists every task)\n")
    r = ctrl_rl("train", "algo.learnin_rate=1e-3", "--cfg", cwd=tmp_path)
    assert "(did you mean 'algo.learning_rate'?); `ctrl-rl train algo=ppo --help` lists every key" in r.stderr


@pytest.mark.parametrize("algo", ["bc", "uni_o4", "distillation"])
def test_help_and_cfg_of_a_learner_print_without_its_inputs(algo):
    """``--help`` and ``--cfg`` need no ``dataset=`` (nor ``algo.teacher``); training still refuses without it."""
    helped = ctrl_rl("train", f"algo={algo}", "task=pendulum", "--help")
    assert helped.returncode == 0 and "runner.max_iterations=" in helped.stdout, helped.stderr
    if algo != "distillation":
        assert "dataset=null" in helped.stdout and f"Required by algo={algo}" in helped.stdout
    printed = ctrl_rl("train", f"algo={algo}", "task=pendulum", "--cfg")
    assert printed.returncode == 0 and f"name: {algo}" in printed.stdout, printed.stderr
    if algo == "bc":
        refused = ctrl_rl("train", "algo=bc", "task=pendulum")
        assert refused.returncode == 2 and refused.stderr.startswith("ctrl-rl: error: dataset: algo=bc trains from a "
                                                                      "dataset"), refused.stderr


def test_each_runner_key_is_described_for_the_learner_it_is_printed_for():
    """Uni-O4's runner.max_iterations counts only its online iterations (0: offline only); BC's applies
    with algo.num_passes=0; PPO's is the run's total."""
    flowing = {algo: " ".join(ctrl_rl("train", f"algo={algo}", "task=pendulum", "--help").stdout.split())
               for algo in ("ppo", "uni_o4", "bc")}
    assert "runner.max_iterations=60 Online PPO iterations only, after the algo.pretrain_iterations + " \
           "algo.improve_iterations offline ones" in flowing["uni_o4"]
    assert "0: stop after the offline stage" in flowing["uni_o4"]
    assert "when algo.num_passes=0" in flowing["bc"]
    assert "runner.max_iterations=300 The run's length in iterations" in flowing["ppo"]
    assert "a total" in flowing["ppo"] and "--more N" in flowing["ppo"]


def test_a_tune_preset_replaces_the_pairs_tuned_settings():
    """``tune=<file>`` picks other tuned settings (on top of what that file names as its base)."""
    from ctrl_rl.app.configure import apply_overrides, load_train_config
    from ctrl_rl.config import ConfigError

    base = load_train_config(["task=quadruped_velocity_flat"])
    fast = load_train_config(["task=quadruped_velocity_flat", "tune=ppo_quadruped_velocity_flat_fast",
                              "env.num_envs=256"])
    assert (base.env.num_envs, base.algo.desired_kl, base.algo.compile) == (1024, 0.01, False)
    assert (fast.env.num_envs, fast.algo.desired_kl, fast.algo.compile) == (256, 0.03, True)  # overrides still win
    assert fast.algo.actor_hidden == base.algo.actor_hidden and fast.algo.num_steps_per_env == 24
    assert (fast.algo.autocast, fast.task.kwargs["rewards"]) == ("auto", {"feet_air_time": 0.0})  # the gait recipe's
    with pytest.raises(ConfigError, match="a resumed run keeps its checkpoint's"):
        apply_overrides(base, ["tune=ppo_quadruped_velocity_flat_fast"])  # what a resume does with it


def test_unknown_key_lists_valid_keys(tmp_path):
    r = ctrl_rl("train", "algo.learnin_rate=1e-3", cwd=tmp_path)
    assert "learning_rate" in r.stderr  # the valid key is named


def test_help_lists_tasks_algos_and_documented_keys():
    top = ctrl_rl("--help")
    assert top.returncode == 0 and "pendulum" in top.stdout and "ppo" in top.stdout
    train = ctrl_rl("train", "--help")
    assert train.returncode == 0
    assert "algo.clip_param=0.2" in train.stdout and "Surrogate clip" in train.stdout
    assert "cartpole_swingup" in train.stdout
    listed = ctrl_rl("list")
    assert "sim=torch" in listed.stdout and "point_mass" in listed.stdout


def test_cfg_prints_resolved_config_with_task_overrides():
    r = ctrl_rl("train", "task=pendulum", "algo.learning_rate=3e-4", "--cfg")
    assert r.returncode == 0, r.stderr
    assert "learning_rate: 0.0003" in r.stdout and "name: pendulum" in r.stdout


def test_play_zero_agent_needs_no_checkpoint(tmp_path):
    r = ctrl_rl("play", "--agent", "zero", "task=cartpole_swingup", "--episodes", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "on cartpole_swingup" in r.stdout and r.stdout.strip().splitlines()[-1].startswith("RESULT mean_return=")


def test_eval_refuses_another_task_and_accepts_env_overrides(tmp_path):
    r = ctrl_rl("train", "task=pendulum", "env.num_envs=8", "algo.num_steps_per_env=8", "algo.actor_hidden=[8]",
                "algo.critic_hidden=[8]", "runner.max_iterations=1", "runner.progress=false", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    bad = ctrl_rl("eval", "latest", "--episodes", "2", "task=cartpole_balance", cwd=tmp_path)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "task=cartpole_balance conflicts with the checkpoint, which is for task 'pendulum'" in bad.stderr
    ok = ctrl_rl("eval", "latest", "--episodes", "2", "+task.kwargs.g=9.81", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().splitlines()[-1].startswith("RESULT mean_return=")


@pytest.mark.parametrize("algo", sorted(learners()))
def test_every_schema_field_is_overridable(algo, tmp_path):
    """``algo.<field>=v`` works for every field of the algorithm's schema."""
    import dataclasses
    import json

    from ctrl_rl.algos.registry import learner
    from ctrl_rl.app.configure import load_train_config

    default = learner(algo).config()
    if algo == "distillation":  # a key the schema leaves empty and a run needs (check_complete)
        default = dataclasses.replace(default, teacher=str(tmp_path / "teacher"))
    overrides = [f"algo={algo}", "task=pendulum", f"dataset={tmp_path / 'd.hdf5'}"]
    for f in dataclasses.fields(default):
        v = getattr(default, f.name)
        text = "null" if v is None else str(v).lower() if isinstance(v, bool) else v if isinstance(v, str) \
            else json.dumps(v)
        overrides.append(f"algo.{f.name}={text}")
    assert load_train_config(overrides).algo == default


def test_train_help_prints_every_task_parameter_and_config_refuses_a_wrong_one(capsys):
    """Task parameters are as visible as the algorithm's: value training will use and description."""
    import dataclasses

    from ctrl_rl.app.cli import main
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.config import ConfigError
    from ctrl_rl.tasks.locomotion.locomotion import VelocityTaskConfig
    from ctrl_rl.utils.docs import field_docs, plain

    with pytest.raises(SystemExit) as stop:
        main(["train", "task=quadruped_velocity_flat", "task.kwargs.decimation=2", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    docs, flowing = field_docs(VelocityTaskConfig), " ".join(out.split())  # descriptions wrap at 100 columns
    for f in dataclasses.fields(VelocityTaskConfig):
        line = next((row for row in out.splitlines() if row.strip().startswith(f"task.kwargs.{f.name}=")), None)
        assert line is not None, f.name
        assert " ".join(plain(docs[f.name]).split())[:40] in flowing, (f.name, line)
    assert "task.kwargs.decimation=2 " in out
    with pytest.raises(ConfigError, match="no parameter 'decimaton'.*valid: .*decimation"):
        load_train_config(["task=quadruped_velocity_flat", "task.kwargs.decimaton=2"])


@pytest.mark.parametrize("task", ["bimodal_bandit", "cartpole_balance", "pendulum", "point_mass"])
def test_every_torch_task_parameter_has_a_description_in_help(task, capsys):
    """The torch tasks' parameters are typed dataclass fields, each with its description in ``--help``."""
    import dataclasses

    from ctrl_rl.app.cli import main
    from ctrl_rl.sims.torch_backend import TASKS

    with pytest.raises(SystemExit) as stop:
        main(["train", f"task={task}", "--help"])
    assert stop.value.code == 0
    rows = {row.strip().split("=", 1)[0]: row for row in capsys.readouterr().out.splitlines()
            if row.strip().startswith("task.kwargs.")}
    for f in dataclasses.fields(TASKS[task].Params):
        name, value, doc = rows[f"task.kwargs.{f.name}"].strip().partition(" ")
        assert len(doc.strip()) > 10 and not doc.strip().startswith("("), (f.name, doc)


def test_checkpoint_errors_are_one_line_saying_what_the_folder_holds(tmp_path):
    """A missing ``model_<it>.pt`` lists the run's checkpoints; a task folder is not called a run."""
    run = tmp_path / "logs" / "ppo" / "pendulum" / "2026-01-01_00-00-00"
    (run / "params").mkdir(parents=True)
    for it in (50, 100, 7):
        (run / f"model_{it}.pt").write_bytes(b"not read here")
    r = ctrl_rl("eval", str(run / "model_99.pt"), cwd=tmp_path)
    assert r.returncode != 0 and r.stderr.count("\n") == 1, r.stderr
    held = "model_7.pt, model_50.pt, model_100.pt"
    assert f"checkpoint '{run / 'model_99.pt'}' not found; {run} holds: {held}" in r.stderr
    r = ctrl_rl("eval", str(run.parent), cwd=tmp_path)
    assert r.returncode != 0 and r.stderr.count("\n") == 1, r.stderr
    assert f"'{run.parent}' is a task folder holding 1 run(s), not a run directory; pass one run (newest: {run})" \
        in r.stderr


@pytest.mark.parametrize("argv,expected", [
    ("deploy sim2sim --cmd-vel 0.5 0", "ctrl-rl deploy sim2sim: error: argument --cmd-vel: expected 3 arguments"),
    ("deploy node --transport carrier-pigeon", "ctrl-rl deploy node: error: argument --transport: invalid choice"),
    ("deploy", "ctrl-rl deploy: error: the following arguments are required: command"),
    ("eval --episodes x", "ctrl-rl eval: error: argument --episodes: invalid int value: 'x'"),
    ("tarin", "ctrl-rl: error: argument {train,"),
])
def test_argument_errors_are_one_line_pointing_at_help(argv, expected):
    r = ctrl_rl(*argv.split())
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(expected) and "--help` lists the options" in r.stderr, r.stderr


def test_help_and_list_fit_100_columns_in_plain_text():
    """``ctrl-rl train --help`` (every learner's keys), ``ctrl-rl --help`` and ``ctrl-rl list``: no line over
    100 columns, no docstring markup, the value column aligned."""
    for argv in (["train", "--help"], ["train", "task=quadruped_velocity_flat", "--help"],
                 ["train", "algo=sac", "task=pendulum", "--help"], ["--help"], ["list"], ["eval", "--help"],
                 ["play", "--help"], ["export", "--help"], ["collect", "--help"], ["deploy", "--help"],
                 ["deploy", "node", "--help"], ["deploy", "sim2sim", "--help"], ["fetch-robots", "--help"]):
        out = ctrl_rl(*argv).stdout
        assert out.strip(), argv
        long = [line for line in out.splitlines() if len(line) > 100]
        assert not long, (argv, long[:3])
        assert "``" not in out and ":func:" not in out, argv
    rows = [line for line in ctrl_rl("train", "--help").stdout.splitlines() if line.startswith("  algo.")]
    starts = set()
    for line in rows:  # rows whose key=value has no space and fits the key column
        key, _, rest = line[2:].partition(" ")
        if rest and len(key) <= 34 and not key.endswith(","):
            starts.add(len(line) - len(rest.lstrip()))
    assert len(starts) == 1, starts  # one description column


def test_help_into_a_closed_pipe_stops_quietly():
    """``ctrl-rl train --help | head -1``: the reader has closed the pipe (here before the first write);
    the command stops with the shell's SIGPIPE status and no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run([sys.executable, "-m", "ctrl_rl", "train", "task=pendulum", "--help"], stdout=write_end,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert "Traceback" not in r.stderr and r.returncode == 141, r.stderr
