"""Hydra composition + schema validation, turning every failure into a one-line ConfigError."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from ctrl_rl.config import ALGO_SCHEMAS, ConfigError, TrainConfig


def config_dir() -> Path:
    """The ``configs/`` folder (the source tree in editable installs, package data otherwise)."""
    import ctrl_rl.configs as pkg

    return Path(pkg.__file__).resolve().parent


def available(group: str) -> list[str]:
    """Config files in ``configs/<group>/`` (the choices hydra offers)."""
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml") if p.stem != "external")


def _route_external_task(overrides: list[str]) -> list[str]:
    """``task=<id>`` without a file of its own becomes ``task=external task.name=<id>``."""
    out = []
    for o in overrides:
        m = re.fullmatch(r"task=(.+)", o)
        if m and m.group(1) not in available("task"):
            out += ["task=external", f"task.name={m.group(1)}"]
        else:
            out.append(o)
    return out


def _schema_fields_always_overridable(overrides: list[str]) -> list[str]:
    """``group.field=v`` for a field of the group's schema becomes ``++group.field=v``: a field the
    group's yaml does not list (it takes the schema default) is still set from the command line."""
    algo = _algo_of(overrides)
    out = []
    for o in overrides:
        m = re.fullmatch(r"(\w+)\.(\w+)=(.*)", o, flags=re.S)
        if m and m.group(2) in _valid_keys(m.group(1), algo):
            out.append("++" + o)
        else:
            out.append(o)
    return out


_GROUP_SCHEMAS = {"task": "TaskConfig", "sim": "SimConfig", "env": "EnvConfig", "runner": "RunnerConfig"}


def _valid_keys(group: str, algo: str = "ppo") -> list[str]:
    """Field names of the schema behind a config group (``algo`` depends on the algorithm)."""
    from ctrl_rl import config as c

    schema = ALGO_SCHEMAS.get(algo) if group == "algo" else getattr(c, _GROUP_SCHEMAS.get(group, ""), None)
    return [f.name for f in dataclasses.fields(schema)] if schema else []


def _algo_of(overrides: list[str]) -> str:
    """The algorithm an override list asks for (for error messages before the config exists)."""
    for o in overrides:
        if o.startswith("algo="):
            return o.split("=", 1)[1]
    return "ppo"


def _explain(exc: Exception, algo: str = "ppo") -> str:
    """Map a hydra/OmegaConf error to one line naming the key and the fix."""
    full = str(exc)
    m = re.search(r"Could not find '(\w+)/([^']+)'", full)
    if m:
        return f"unknown {m.group(1)} '{m.group(2)}'; choose one of: {', '.join(available(m.group(1)))}"
    m = re.search(r"full_key: ([\w.\[\]]+)", full) or re.search(r"Could not override '([\w.]+)'", full)
    key = m.group(1) if m else None
    if key and ("not in struct" in full or "Could not override" in full or "ConfigKeyError" in full
                or "Key '" in full and "not in" in full):
        group, _, name = key.partition(".")
        if name and group not in ("algo", "dataset", *_GROUP_SCHEMAS):
            return (f"unknown config group '{group}' in '{key}'; groups: algo, task, sim, env, runner (and "
                    "top-level seed, device, profile, dataset)")
        if not name:
            return (f"unknown config key '{key}'; top-level keys: algo, task, sim, env, runner, seed, device, "
                    "profile, dataset")
        if key.startswith("task.kwargs."):
            return f"'{key}' is a new key: add it with a leading '+', e.g. +{key}=<value>"
        valid = _valid_keys(group, algo)
        close = difflib.get_close_matches(name, valid, n=1)
        hint = f" (did you mean '{group}.{close[0]}'?)" if close else ""
        return f"unknown config key '{key}'{hint}; valid keys: {', '.join(valid)}"
    if "is not a ListConfig, list or tuple" in full:
        return f"{key or 'value'}: expected a list, e.g. {key or 'key'}=[64,64]"
    m = re.search(r"Value '([^']*)' (?:of type '\w+' )?could not be converted to (\w+)", full)
    if m:
        return f"{key or 'value'}: expected {m.group(2).lower()}, got '{m.group(1)}'"
    if "Missing mandatory value" in full:
        return f"missing value for '{key}': set it on the command line, e.g. {key}=<value>"
    return full.strip().splitlines()[0] if full.strip() else type(exc).__name__


def load_train_config(overrides: list[str]) -> TrainConfig:
    """Compose ``configs/train.yaml`` with ``overrides`` and validate it against the schema."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"'{bad[0]}' is not an override; write key=value, e.g. env.num_envs=256")
    overrides = _schema_fields_always_overridable(_route_external_task(overrides))
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            raw = compose(config_name="train", overrides=overrides)
        algo_name = raw.algo.get("name", "ppo")
        if algo_name not in ALGO_SCHEMAS:
            raise ConfigError(f"algo.name: unknown algorithm '{algo_name}'; choose one of: {', '.join(ALGO_SCHEMAS)}")
        schema = OmegaConf.structured(TrainConfig(algo=ALGO_SCHEMAS[algo_name]()))
        merged = OmegaConf.merge(schema, raw)
        cfg = OmegaConf.to_object(merged)
    except ConfigError:
        raise
    except Exception as exc:  # hydra / omegaconf: unknown key, bad type, missing file
        raise ConfigError(_explain(exc, _algo_of(overrides))) from None
    finally:
        GlobalHydra.instance().clear()
    assert isinstance(cfg, TrainConfig)
    cfg.check_complete()
    return cfg


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
        saved = {"task": cfg.task.name, "algo": cfg.algo.name, "sim": cfg.sim.name}.get(key)
        if saved is not None:
            if value != saved:
                raise ConfigError(f"{key}={value} conflicts with the checkpoint, which is for {key} '{saved}'; "
                                  f"drop the override or pick a checkpoint of {key} '{value}'")
            continue
        dotted.append(f"{key}={value}")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(cfg), OmegaConf.from_dotlist(dotted))
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(_explain(exc, cfg.algo.name)) from None


def config_from_dict(d: dict[str, Any]) -> TrainConfig:
    """Rebuild a validated TrainConfig from ``dataclasses.asdict`` output (checkpoints)."""
    from omegaconf import OmegaConf

    schema = ALGO_SCHEMAS[d.get("algo", {}).get("name", "ppo")]()
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TrainConfig(algo=schema)), d))  # type: ignore


def config_hash(cfg: TrainConfig) -> str:
    """Short stable hash of the resolved config (goes into exported bundles)."""
    blob = json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def config_yaml(cfg: TrainConfig) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.structured(cfg))
