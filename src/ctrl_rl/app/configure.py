"""Config composition: the learner's schema, ``configs/`` (group choices), the registered tasks, their
tune deltas and the command line's overrides, validated into a :class:`~ctrl_rl.config.TrainConfig`.

Hydra searches ``configs/`` and then every task family's folder of the task tree (``ctrl_rl.tasks``), so
``tune=<file>`` finds ``tasks/<family>/tune/<file>.yaml``; each registered task's ``task/<id>`` option is
made from its registration (``task.name``, empty ``task.kwargs``, its sim), not read from a file.

Overrides are checked against the registry and the schemas before hydra composes them, so every
mistake is a one-line ``ConfigError`` naming the key and the fix, written here, not parsed out of
hydra's messages.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import ctrl_rl.configs as pkg
from ctrl_rl.algos import registry
from ctrl_rl.algos.checkpoints import find_checkpoint, load_checkpoint
from ctrl_rl.config import ConfigError, EnvConfig, LearnerConfig, RunnerConfig, SimConfig, TaskConfig, TrainConfig
from ctrl_rl.registry import UnknownNameError, closest, fit_choices
from ctrl_rl.sims import check_task, task_parameters
from ctrl_rl.sims.torch_backend import TASKS as TORCH_TASKS
from ctrl_rl.tasks import MUJOCO_SIMS, declared_tasks, families, tasks
from ctrl_rl.utils.extras import missing

log = logging.getLogger(__name__)


def config_dir() -> Path:
    """The ``configs/`` folder (the source tree in editable installs, package data otherwise)."""
    return Path(pkg.__file__).resolve().parent


def search_dirs() -> list[Path]:
    """The folders hydra reads config groups from, in its order (the first that has a file wins):
    ``configs/``, then each task family's folder (``ctrl_rl.tasks.families``: its ``tune/``)."""
    return [config_dir(), *families()]


GROUPS = ("algo", "task", "sim", "tune")
"""Config groups chosen by ``group=<choice>``; their keys are set by ``group.key=value``.
``tune=<file>`` picks other tuned settings than the task's ``tune/<algo>_<task>.yaml`` (a preset such
as ``ppo_quadruped_velocity_flat_fast``); it holds values of the sections, and has no keys of its own."""
SECTIONS = {"algo": None, "task": TaskConfig, "sim": SimConfig, "env": EnvConfig, "runner": RunnerConfig}
"""Top-level sections and their schemas (``algo``'s is the chosen learner's)."""
SCALARS = ("seed", "device", "threads", "update_threads", "profile", "dataset")
"""Top-level keys that are values."""


def available(group: str) -> list[str]:
    """The choices of a config group: the registered learners for ``algo``; the registered tasks for
    ``task`` (:func:`task_sims`); and the YAML files of the group's folder in every searched folder."""
    if group == "algo":
        return sorted(registry.learners())
    return sorted({*group_files(group), *(task_sims() if group == "task" else ())} - {"external"})


def group_files(group: str) -> dict[str, Path]:
    """``{choice: file}`` of a config group's YAML files, each choice from the first searched folder that
    has it (:func:`search_dirs`)."""
    found: dict[str, Path] = {}
    for folder in reversed(search_dirs()):
        found.update({p.stem: p for p in sorted((folder / group).glob("*.yaml"))})
    return found


def task_sims() -> dict[str, str]:
    """Every task id with the sim it runs on by default: the task tree's registrations, read from their
    source (an id stays known where its simulator is not installed: a run then names the extra), then
    the registries (a task registered from another module: a user's, a test's)."""
    return {**declared_tasks(), **dict.fromkeys(TORCH_TASKS, "torch"), **dict.fromkeys(tasks(), MUJOCO_SIMS[0])}


def task_node(name: str, sim: str) -> dict[str, Any]:
    """A registered task's ``task/<id>`` option, what a file ``configs/task/<id>.yaml`` would say:
    its name, no parameters set, its sim."""
    return {"defaults": [{"override /sim": sim}], "task": {"name": name, "kwargs": {}}}


def _store_schemas() -> None:
    """Give hydra the schemas as its ``algo/<name>`` options, the run defaults as ``train_base`` and each
    registered task as its ``task/<id>`` option: the dataclasses stay the only place a default lives, the
    registration the only place a task is (``configs/`` holds the other choices)."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    cs = ConfigStore.instance()
    for name, entry in registry.learners().items():
        cs.store(group="algo", name=name, node=entry.config)
    base = OmegaConf.to_container(OmegaConf.structured(TrainConfig(algo=LearnerConfig())))
    base.pop("algo")
    cs.store(name="train_base", node=base)
    files = group_files("task")
    for name, sim in task_sims().items():
        if name not in files:  # a file of that name would be its option
            cs.store(group="task", name=name, node=task_node(name, sim), package="_global_")


def _search_path() -> str:
    """The ``hydra.searchpath`` override that adds the task families' folders after ``configs/``."""
    quoted = ["'file://" + str(d).replace("\\", "\\\\").replace("'", "\\'") + "'" for d in families()]
    return f"hydra.searchpath=[{','.join(quoted)}]"


def _schema(section: str, algo: str) -> type | None:
    return registry.learner(algo).config if section == "algo" else SECTIONS.get(section)


def _field_names(section: str, algo: str) -> list[str]:
    schema = _schema(section, algo)
    return [f.name for f in dataclasses.fields(schema)] if schema else []


def _check_key(key: str, algo: str) -> None:
    """``ConfigError`` naming the valid keys when ``key`` (``section.field[.sub]``) is not one."""
    section, _, rest = key.partition(".")
    if section in SCALARS and not rest:
        return
    where = f"`ctrl-rl train algo={algo} --help`"
    if section not in SECTIONS:
        owners = [f"{group}.{key}" for group in SECTIONS if key.split(".")[0] in _field_names(group, algo)]
        hint = f" (did you mean '{owners[0]}'?)" if owners else ""
        raise ConfigError(fit_choices(f"unknown config key '{key}'{hint}; top-level keys: ", [*SECTIONS, *SCALARS],
                                      where))
    if not rest:
        return
    name = rest.split(".")[0]
    valid = _field_names(section, algo)
    if name not in valid:
        close = closest(name, valid)
        if close:
            raise ConfigError(f"unknown config key '{key}' (did you mean '{section}.{close}'?); {where} lists "
                              "every key")
        raise ConfigError(fit_choices(f"unknown config key '{key}'; valid keys: ", valid, where))


def _prepare(overrides: list[str]) -> tuple[list[str], str, dict[str, str]]:
    """Check every override against the groups and schemas before hydra sees it; returns the
    overrides for hydra (an unknown ``task=<id>`` goes to the ``external`` task with that name,
    ``task.kwargs.*`` are set or added), the algorithm, and each key's value as written."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"'{bad[0]}' is not an override; write key=value, e.g. env.num_envs=256")
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as exc:  # hydra's grammar: say which override
        raise ConfigError(f"cannot read the overrides: {str(exc).strip().splitlines()[0]}") from None
    values = {o.key_or_group: o.get_value_element_as_str() for o in parsed}
    algo = values.get("algo", registry.DEFAULT_LEARNER)
    out = []
    for o, text in zip(parsed, overrides, strict=True):
        key, value = o.key_or_group, values[o.key_or_group]
        if key in GROUPS:
            choices = available(key)
            if key == "task" and value not in choices:  # an outside id (gymnasium, Isaac Lab, ...)
                out += ["task=external", f"task.name={value}"]
                continue
            if value not in choices:
                raise UnknownNameError.of(key, value, choices)
            out.append(text)
            continue
        if key == "robot":  # shorthand of the robot tasks' parameter: robot=unitree_go1
            out.append(f"++task.kwargs.robot={value}")
            continue
        _check_key(key, algo)
        out.append(f"++{text.lstrip('+')}" if key.startswith("task.kwargs.") else text)
    if "algo" not in values:  # the default learner, named in one place (the registry)
        out.insert(0, f"algo={algo}")
    out += _registered_tune(values.get("task"), algo, values)
    return out, algo, values


def _robot_task(task: str | None) -> Any:
    """The registry entry of a MuJoCo-family task id (None for other ids, or without MuJoCo)."""
    return tasks().get(task) if task else None


def _registered_tune(task: str | None, algo: str, values: dict[str, str]) -> list[str]:
    """A registered task's tuned settings for ``algo`` (its registration's ``tune``), as overrides,
    where no ``tune/<algo>_<task>.yaml`` and no ``tune=`` is given; keys on the command line win."""
    if not task or "tune" in values or f"{algo}_{task}" in available("tune"):
        return []
    entry = _robot_task(task)
    settings = entry.tune.get(algo, {}) if entry is not None else {}
    return [f"{key}={_override_text(value)}" for key, value in settings.items() if key not in values]


def _override_text(value: Any) -> str:
    """``value`` in hydra's override grammar."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_override_text(v) for v in value) + "]"
    return str(value)


def _explain(exc: BaseException, algo: str, values: dict[str, str]) -> str:
    """One line for what the schema refused while composing: the key, the expected type, the value."""
    from omegaconf.errors import OmegaConfBaseException

    while exc is not None and not isinstance(exc, OmegaConfBaseException):
        exc = exc.__cause__ or exc.__context__
    key = getattr(exc, "full_key", None) if exc is not None else None
    if not key:
        return str(exc).strip().splitlines()[0] if exc is not None and str(exc).strip() else "invalid config"
    section, _, rest = key.partition(".")
    schema, name = (_schema(section, algo), rest.split(".")[0]) if section in SECTIONS else (TrainConfig, section)
    field = {f.name: f for f in dataclasses.fields(schema)}.get(name) if schema is not None and name else None
    got = values.get(key)
    text = f"{key}: expected {_type_words(field.type if field else None)}" + (f", got '{got}'" if got else "")
    example = _example(field)
    prefix = f"{section}." if section in SECTIONS else ""
    return text + (f" (e.g. {prefix}{name}={example})" if example is not None else "")


def _example(field: dataclasses.Field | None) -> str | None:
    """A value ``field`` takes, for the error's fix: its default as written on the command line."""
    if field is None:
        return None
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return None
    if dataclasses.is_dataclass(value) or isinstance(value, dict) or value == "":
        return None
    return _override_text(value)


def _type_words(t: Any) -> str:
    """``int`` -> ``integer``, ``List[int]`` -> ``a list`` (field annotations are strings)."""
    text = str(t or "")
    if text.startswith(("List", "list", "Optional[List")):
        return "a list"
    for name, words in (("int", "integer"), ("float", "float"), ("bool", "boolean (true/false)"), ("str", "string")):
        if text in (name, f"Optional[{name}]"):
            return words
    return text or "another value"


def load_train_config(overrides: list[str], for_run: bool = True) -> TrainConfig:
    """Compose ``configs/train.yaml`` (schema defaults, the chosen groups, the pair's tune delta) with
    ``overrides`` and validate it against the schema. ``for_run=False`` (``--help``, ``--cfg``): a config
    to print, so neither the run's inputs (``dataset=``, ``algo.teacher``) nor its simulator need to be
    there; the task is checked against the sim only where the sim's extra is installed."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    prepared, algo, values = _prepare(overrides)
    _store_schemas()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            raw = compose(config_name="train", overrides=[*prepared, _search_path()])
        schema = OmegaConf.structured(TrainConfig(algo=registry.learner(algo).config()))
        cfg = OmegaConf.to_object(OmegaConf.merge(schema, raw))
    except ConfigError:
        raise
    except Exception as exc:  # a value the schema refuses (type), a missing value
        raise ConfigError(_explain(exc, algo, values)) from None
    finally:
        GlobalHydra.instance().clear()
    assert isinstance(cfg, TrainConfig)
    cfg.check_complete(inputs=False)
    check_task_parameters(cfg, for_run=False)
    if for_run:
        check_runnable(cfg)
    return cfg


def check_runnable(cfg: TrainConfig) -> None:
    """What a run needs beyond a config to print: its inputs (``dataset=``, ``algo.teacher``) and its
    sim's extra (a ``ModuleNotFoundError`` the CLI turns into the extra to install)."""
    cfg.check_complete()
    check_task_parameters(cfg)


def check_task_parameters(cfg: TrainConfig, for_run: bool = True) -> None:
    """Refuse a task id the sim does not have (naming the ones it has) and a ``task.kwargs`` name or
    value the task's declared parameters do not take, before any env. A sim whose extra is missing
    raises ``ModuleNotFoundError`` (the CLI names the extra), unless ``for_run`` is false."""
    try:
        check_task(cfg.sim.name, cfg.task.name)
        task_parameters(cfg.sim.name, cfg.task.name, dict(cfg.task.kwargs))
    except ModuleNotFoundError as exc:
        if for_run or missing(exc) is None:
            raise
    except UnknownNameError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc) if "task" in str(exc) else f"task.kwargs: {exc}") from None


def apply_overrides(cfg: TrainConfig, overrides: list[str]) -> TrainConfig:
    """``key.sub=value`` overrides on top of a saved config (a checkpoint's), validated.

    Group choices (``task=pendulum``) must agree with the saved config: a checkpoint is for
    one task and algorithm. A leading ``+`` (hydra's "add a key") is accepted and ignored.
    """
    from omegaconf import OmegaConf

    dotted = []
    for o in overrides:
        key, sep, value = o.lstrip("+").partition("=")
        if not sep:
            raise ConfigError(f"'{o}' is not an override; write key=value, e.g. env.num_envs=256")
        if key == "tune":
            raise ConfigError(f"{key}={value} picks the settings of a new run; a resumed run keeps its checkpoint's: "
                              "drop it, or override the keys to change (e.g. runner.max_iterations=500)")
        saved = {"task": cfg.task.name, "algo": cfg.algo.name, "sim": cfg.sim.name}.get(key)
        if saved is not None:
            if value != saved:
                raise ConfigError(f"{key}={value} conflicts with the checkpoint, which is for {key} '{saved}'; "
                                  f"drop the override or pick a checkpoint of {key} '{value}'")
            continue
        _check_key(key, cfg.algo.name)
        dotted.append(f"{key}={value}")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(cfg), OmegaConf.from_dotlist(dotted))
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(_explain(exc, cfg.algo.name, dict(d.split('=', 1) for d in dotted))) from None


def config_hash(cfg: TrainConfig) -> str:
    """Short stable hash of the resolved config (goes into exported bundles)."""
    blob = json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def config_yaml(cfg: TrainConfig) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


LOCATING_KEYS = ("algo", "task", "sim", "runner.log_root")
"""The overrides that say where ``--checkpoint latest`` looks (``logs/<algo>/<task>/``)."""


def compose_run_config(overrides: list[str], checkpoint: str | None = None,
                       more: int | None = None) -> tuple[TrainConfig, Path | None]:
    """The config a run trains with and the checkpoint it resumes (None: a new run), checked to run.

    A resumed run takes its config from the checkpoint; ``overrides`` then change only the keys they
    name (a warning lists them, since changes make the resume inexact). ``more``: ``--more N``.
    """
    # A checkpoint given: its config is the base, so the overrides are checked against it below; here only the
    # keys that locate it count (task.kwargs.* of a robot task would be refused by the default task's config).
    locating = [o for o in overrides if o.lstrip("+").partition("=")[0] in LOCATING_KEYS] if checkpoint else overrides
    cfg = load_train_config(locating, for_run=False)
    checkpoint = checkpoint or cfg.runner.checkpoint
    check_more(more, checkpoint, overrides)
    path = find_checkpoint(checkpoint, cfg) if checkpoint else None
    if path is not None:  # the checkpoint's config holds the run's inputs (dataset=, algo.teacher)
        saved, _ = load_checkpoint(path)
        cfg = apply_overrides(saved, overrides)
        drift = report_config_drift(saved, cfg)
        if drift:
            log.warning("config differs from the checkpoint's (resume is exact only without changes): %s",
                        "; ".join(drift))
    check_runnable(cfg)
    return cfg, path


def check_more(more: int | None, checkpoint: str | None, overrides: list[str]) -> None:
    """Refuse ``--more`` that is not a positive count past a checkpoint, or that comes with a total."""
    if more is None:
        return
    if more < 1:
        raise ConfigError(f"--more: must be a positive number of iterations, got {more} (e.g. --more 200)")
    if not checkpoint:
        raise ConfigError(f"--more {more} trains past a checkpoint: add --checkpoint latest (or a run directory), "
                          f"or give a new run its length with runner.max_iterations={more}")
    if any(o.lstrip("+").split("=", 1)[0] == "runner.max_iterations" for o in overrides):
        raise ConfigError("--more and runner.max_iterations both set the run's length: keep one (--more N counts "
                          "past the checkpoint, runner.max_iterations is the run's total)")


def report_config_drift(saved: TrainConfig, current: TrainConfig) -> list[str]:
    """Keys whose value differs between a checkpoint's config and the one resuming it."""
    ignore = {"runner.checkpoint", "runner.max_iterations", "runner.progress"}

    def flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            key = f"{prefix}{k}"
            out.update(flat(v, key + ".") if isinstance(v, dict) else {key: v})
        return out

    a, b = flat(dataclasses.asdict(saved)), flat(dataclasses.asdict(current))
    return [f"{k}: {a.get(k)} -> {b.get(k)}" for k in sorted(set(a) | set(b))
            if k not in ignore and a.get(k) != b.get(k)]
