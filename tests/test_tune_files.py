"""Every default once: a tune file (``tasks/<family>/tune/*.yaml``) holds only values that differ from
what the schema, the sim's file and the task's registration already give; ``configs/`` has no learner files."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ctrl_rl.algos.registry import learners
from ctrl_rl.app.configure import config_dir, group_files, task_node, task_sims
from ctrl_rl.config import TrainConfig

CONFIGS = Path(config_dir())
TUNES = sorted(group_files("tune").values(), key=lambda p: p.stem)


def _body(path: Path) -> tuple[dict, str | None, list[str]]:
    """A config file's values, placed as hydra places them (``@package _global_``: at the root, else
    under its group), without its defaults list; the sim it picks (``override /sim``); the files of
    its own group it builds on (a preset's ``- ppo_quadruped_velocity_flat``)."""
    raw = OmegaConf.to_container(OmegaConf.load(path))
    if "@package _global_" not in path.read_text().split("\n", 1)[0]:
        raw = {path.parent.name: raw}
    sim, parents = None, []
    for entry in raw.pop("defaults", []) or []:
        if isinstance(entry, dict):
            sim = entry.get("override /sim", sim)
        elif entry != "_self_":
            parents.append(entry)
    return raw, sim, parents


def _leaves(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        out.update(_leaves(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
    return out


def _pair(stem: str) -> tuple[str, str]:
    """``<algo>_<task>[_<preset>]`` -> (algo, task), by the longest registered names."""
    algo = max((a for a in learners() if stem.startswith(a + "_")), key=len)
    rest = stem[len(algo) + 1:]
    tasks = [t for t in task_sims() if rest == t or rest.startswith(t + "_")]
    assert tasks, f"tune/{stem}.yaml names no registered task"
    return algo, max(tasks, key=len)


def restated(tune: Path) -> list[str]:
    """The keys of ``tune`` whose value is what the run would get without it."""
    algo, task = _pair(tune.stem)
    values, tune_sim, parents = _body(tune)
    task_values = task_node(task, task_sims()[task])
    task_sim = task_values.pop("defaults")[0]["override /sim"]
    sim_values = _body(CONFIGS / "sim" / f"{tune_sim or task_sim or 'torch'}.yaml")[0]
    layers = [sim_values, task_values]
    while parents:  # what a preset builds on, its parents' parents first
        values_of_parent, _, parents = _body(tune.parent / f"{parents[0]}.yaml")
        layers.insert(2, values_of_parent)
    base = OmegaConf.merge(OmegaConf.structured(TrainConfig(algo=learners()[algo].config())), *layers)
    return [f"{key}={value}" for key, value in _leaves(values).items()
            if OmegaConf.select(base, key, default="<absent>") == value]


@pytest.mark.parametrize("tune", TUNES, ids=[p.stem for p in TUNES])
def test_tune_file_holds_only_what_differs_from_the_defaults(tune):
    assert not restated(tune), f"{tune.name} restates defaults (drop them): {restated(tune)}"


def test_the_check_catches_a_restated_default(tmp_path):
    probe = tmp_path / "sac_pendulum.yaml"
    probe.write_text("# @package _global_\nrunner:\n  save_interval: 50\nalgo:\n  gamma: 0.99\n  tau: 0.01\n")
    assert restated(probe) == ["runner.save_interval=50", "algo.gamma=0.99"]


def test_no_learner_yaml_restates_the_schemas():
    """The schemas are hydra's ``algo/<name>`` options: ``configs/`` has no ``algo/`` folder."""
    assert not (CONFIGS / "algo").exists()
