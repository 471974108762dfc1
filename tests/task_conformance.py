"""Conformance checks for the MuJoCo-family task contract (``ctrl_rl.task``; docs/architecture.md).

:func:`check_task` builds a registered task's env a few times at a tiny size and checks, in order:

* the registration (:func:`check_registration`): the config a dataclass of documented fields with
  ``from_kwargs``, ``robot`` and ``apply_physics``; the class's ``build_model``, constructor and hooks
  take what ``make_mujoco_env`` and ``MjVecEnv`` pass;
* the task (:func:`check_members`): every member of ``MjTask`` present and none a stub of the protocol;
* its spaces (:func:`check_spaces`): the terms of each group sum to its width, ``step_dt`` is the
  model's timestep times ``decimation``;
* one step's hooks called in the env's order (:func:`check_hook_outputs`): ``ctrl [N, nu]``, reward
  finite float32 ``[N]``, terminated and ``out_of_bounds`` bool ``[N]``, ``metrics`` ``[N]``, the
  observation as wide as ``obs_dims``;
* steps through the env (:func:`check_steps`): contract 1's checks of each
  (``vecenv_conformance.check_step_result``, ``final_obs`` included);
* a reset of some rows (:func:`check_reset_rows`): the other rows' state and observation unchanged;
* ``vecenv_conformance``'s seeding, action clipping and state round trip (``get_state``, save, load,
  ``set_state``: the next steps repeat bit for bit), on this task;
* what the commands read (:func:`check_command_reads`): ``deploy_metadata`` JSON-serialisable,
  ``mirror`` maps as wide as the groups, ``record_gait``'s signals ``[N, ...]``, ``render_model``'s joints.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable
from functools import partial
from typing import Any

import mujoco
import torch
from vecenv_conformance import (
    Transition,
    check_action_clipping,
    check_obs,
    check_seeding,
    check_state_round_trip,
    check_step_result,
    default_actions,
)

from ctrl_rl.sims import make_env
from ctrl_rl.sims.mujoco_env import MjVecEnv
from ctrl_rl.task import MjTask, MjTaskClass, MjTaskExtras, PhysicsView
from ctrl_rl.tasks import TASKS, RobotTask
from ctrl_rl.utils.docs import field_docs


def _hooks(protocol: type) -> dict[str, inspect.Signature]:
    """The protocol's methods and their signatures, ``self`` left out."""
    out = {}
    for name, value in vars(protocol).items():
        if callable(value) and not name.startswith("_"):
            sig = inspect.signature(value)
            out[name] = sig.replace(parameters=list(sig.parameters.values())[1:])
    return out


def _check_accepts(call: str, fn: Callable[..., Any], *counts: int, extra: int = 0) -> None:
    """``fn`` can be called with each of ``counts`` positional arguments (after ``extra`` more: ``self`` of
    a class's function), as the env calls ``call``."""
    for count in counts:
        try:
            inspect.signature(fn).bind(*[None] * (extra + count))
        except TypeError as e:
            raise AssertionError(f"{call} cannot take {count} positional arguments: {e}") from None


def _check_hooks(owner: str, where: Any, extra: int) -> None:
    """The hooks of ``MjTask`` and the optional ones of ``MjTaskExtras`` that ``where`` (a task, or with
    ``extra=1`` its class) has, each callable with the protocol's positional arguments (the required ones
    alone, and all of them) and none the protocol's stub."""
    optional = _hooks(MjTaskExtras)
    for name, sig in {**_hooks(MjTask), **optional}.items():
        if not hasattr(where, name) or (name in optional and getattr(where, name) is None):
            continue  # a hook set in __init__ is checked on the task; None: the env's default
        fn = getattr(where, name)
        assert callable(fn), f"{owner}.{name} is {fn!r}, not a method"
        assert not getattr(fn, "__qualname__", "").startswith(("MjTask.", "MjTaskExtras.")), \
            f"{owner}.{name} is the protocol's stub: implement it"
        params = list(sig.parameters.values())
        required = sum(p.default is inspect.Parameter.empty for p in params)
        _check_accepts(f"{owner}.{name}({', '.join(sig.parameters)})", fn, required, len(params), extra=extra)


def check_registration(entry: RobotTask) -> None:
    """The config and the class take what ``make_mujoco_env`` and ``--help`` give them."""
    cfg_cls, name = entry.config, entry.name
    assert dataclasses.is_dataclass(cfg_cls), f"task {name}: config {cfg_cls.__name__} is not a dataclass"
    undocumented = [f.name for f in dataclasses.fields(cfg_cls) if not field_docs(cfg_cls).get(f.name)]
    assert not undocumented, f"task {name}: parameters without a docstring under their declaration: {undocumented}"
    cfg = entry.make_config()
    assert hasattr(cfg, "robot"), f"task {name}: config {cfg_cls.__name__} has no `robot` (None: no robot)"
    assert callable(getattr(cfg, "apply_physics", None)), f"task {name}: config lacks apply_physics(model, robot)"
    _check_accepts(f"{cfg_cls.__name__}.apply_physics(model, robot)", cfg.apply_physics, 2)
    cls = entry.task
    assert isinstance(cls, MjTaskClass), f"task {name}: {cls!r} has no build_model"
    _check_accepts(f"{cls.__name__}.build_model(cfg, robot) (a classmethod)", cls.build_model, 2)
    _check_accepts(f"{cls.__name__}(cfg, robot, model, layout, num_envs, device)", cls, 6)
    _check_hooks(cls.__name__, cls, extra=1)  # before any env is built: a clear message, not a crash in a step


SET_BY_EVALUATE = ("out_of_bounds", "post_step_signals", "metrics")
"""The members ``MjTask`` documents as set by ``evaluate``: a task may lack them before its first step."""


def check_members(task: Any, evaluated: bool = True) -> None:
    """Every ``MjTask`` member present (those of :data:`SET_BY_EVALUATE` only once ``evaluated``) and
    implemented, every hook callable as ``MjVecEnv`` calls it."""
    owner = type(task).__name__
    wanted = [n for n in (*MjTask.__annotations__, *_hooks(MjTask)) if evaluated or n not in SET_BY_EVALUATE]
    missing = [n for n in wanted if not hasattr(task, n)]
    assert not missing, f"{owner} lacks {missing} of ctrl_rl.task.MjTask"
    _check_hooks(owner, task, extra=0)
    assert isinstance(getattr(task, "graph_safe", False), bool), f"{owner}.graph_safe must be a bool"
    assert not evaluated or isinstance(task, MjTask)


def check_spaces(env: MjVecEnv) -> None:
    """Widths, terms and timing agree with each other and with the model."""
    task, model = env.task, env.physics.model
    check_members(task, evaluated=False)
    assert isinstance(task.decimation, int) and task.decimation >= 1, f"decimation {task.decimation!r}"
    assert abs(task.step_dt - model.opt.timestep * task.decimation) < 1e-9, (
        f"step_dt {task.step_dt} != timestep {model.opt.timestep} x decimation {task.decimation}")
    assert set(task.obs_terms) == set(task.obs_dims), f"obs_terms {sorted(task.obs_terms)} != {sorted(task.obs_dims)}"
    for group, terms in task.obs_terms.items():
        names = [t.name for t in terms]
        assert len(set(names)) == len(names), f"group {group!r} repeats a term: {names}"
        width, dim = sum(t.dim for t in terms), task.obs_dims[group]
        assert width == dim, f"group {group!r}: terms {names} are {width} wide, the group {dim}"
    assert isinstance(env.physics, PhysicsView)


def check_hook_outputs(env: MjVecEnv, seed: int) -> None:
    """One step's hooks called in the env's order, each output checked: a clear message where a wrong one
    would crash the env's step, or be broadcast into something else."""
    task, physics, n = env.task, env.physics, env.num_envs
    gen = torch.Generator(device=env.device).manual_seed(seed)
    noise = task.sample_obs_noise(gen)
    ctrl = task.joint_targets(torch.ones(n, env.action_dim, device=env.device) * 2, gen)
    assert ctrl.shape == (n, physics.model.nu) and torch.isfinite(ctrl).all(), f"joint_targets: {tuple(ctrl.shape)}"
    physics.step(ctrl, task.decimation)
    length = torch.ones(n, dtype=torch.long, device=env.device)
    reward, terminated, log = task.evaluate(physics, length, gen)
    for what, value, dtype in (("reward", reward, torch.float32), ("terminated", terminated, torch.bool),
                               ("out_of_bounds", task.out_of_bounds, torch.bool),
                               *((f"metrics[{k!r}]", v, v.dtype) for k, v in task.metrics.items())):
        assert value.shape == (n,) and value.dtype == dtype, f"{what} is {value.dtype} {tuple(value.shape)}, " \
                                                             f"not {dtype} [{n}]"
        assert not dtype.is_floating_point or torch.isfinite(value).all(), f"{what} is not finite"
    assert all(torch.as_tensor(v).numel() == 1 for v in log.values()), "evaluate's log holds a non-scalar"
    check_obs(env, task.observe(physics, noise, task.post_step_signals), "observe(.., post_step_signals)")
    assert task.perturb(physics, length, gen) in (True, False, None), "perturb returns a bool or None"
    check_members(task)


def check_steps(env: MjVecEnv, steps: int, seed: int) -> None:
    """Contract 1's checks of every step through the env."""
    gen = torch.Generator().manual_seed(seed)
    obs = env.reset(seed=seed)
    for _ in range(steps):
        actions = default_actions(gen, env.num_envs, env.action_dim).to(env.device)
        tr = Transition(None, obs, actions, *env.step(actions))
        check_step_result(env, tr)
        obs = tr.obs


def check_reset_rows(env: MjVecEnv, seed: int) -> None:
    """Resetting some rows (the env's hooks, in its order) leaves every other row as it was."""
    task, physics, n = env.task, env.physics, env.num_envs
    gen = torch.Generator(device=env.device).manual_seed(seed)
    env.step(torch.zeros(n, env.action_dim, device=env.device))
    rows = torch.arange(n, device=env.device) % 2 == 0
    keep = ~rows
    before, qpos0, qvel0 = task.observe(physics, None), physics.qpos.clone(), physics.qvel.clone()
    task.begin_reset(physics, rows, gen)
    qpos, qvel = task.sample_initial_state(physics, gen)
    m = physics.model
    assert qpos.shape == (n, m.nq) and qvel.shape == (n, m.nv), "sample_initial_state: not [N, nq], [N, nv]"
    physics.write_rows(rows, qpos, qvel)
    task.reset_rows(rows, gen)
    after = task.observe(physics, None)
    assert torch.equal(physics.qpos[keep], qpos0[keep]) and torch.equal(physics.qvel[keep], qvel0[keep])
    torch.testing.assert_close(physics.qpos[rows], qpos[rows].to(physics.qpos), msg="reset rows' qpos not written")
    for group, value in after.items():
        assert torch.equal(value[keep], before[group][keep]), f"resetting rows {rows.tolist()} changed the " \
                                                              f"other rows' {group!r} observation"


def check_command_reads(env: MjVecEnv) -> None:
    """What export, symmetry, the gait report and rendering read of the task."""
    meta = env.deploy_metadata()
    try:
        json.dumps(meta)  # the bundle's metadata_props hold it as JSON
    except TypeError as e:
        raise AssertionError(f"deploy_metadata is not JSON-serialisable: {e}") from None
    mirror = env.mirror()
    if mirror is not None:
        assert mirror.actions.dim == env.action_dim, "the actions' mirror map is not action_dim wide"
        for group, dim in env.obs_dims.items():
            assert mirror.group(group).dim == dim, f"the mirror of group {group!r} is not {dim} wide"
    if env.record_gait() is not None:
        info = env.step(torch.zeros(env.num_envs, env.action_dim, device=env.device))[-1]
        assert all(v.shape[0] == env.num_envs for v in info["gait"].values()), "gait signals are not [N, ...]"
    make = getattr(env.task, "render_model", None)
    if make is not None:
        shown, model = make(), env.physics.model
        assert isinstance(shown, mujoco.MjModel) and (shown.nq, shown.nv) == (model.nq, model.nv), \
            "render_model has other joints than the physics' model"


def check_task(name: str, sim: str = "mujoco", device: str = "cpu", num_envs: int = 3, steps: int = 4, seed: int = 0,
               **task_kwargs: Any) -> None:
    """All of the above for registered task ``name`` on ``sim`` and ``device`` (``task_kwargs``: its
    ``task.kwargs``)."""
    check_registration(TASKS[name])

    def make(n: int, s: int | None) -> MjVecEnv:
        env = make_env(sim, name, n, device, seed=s, **task_kwargs)
        assert isinstance(env, MjVecEnv), f"task {name} on {sim} is a {type(env).__name__}"
        return env

    for check in (check_spaces, partial(check_hook_outputs, seed=seed), partial(check_steps, steps=steps, seed=seed),
                  partial(check_reset_rows, seed=seed), check_command_reads):
        env = make(num_envs, seed)
        check(env)
        env.close()
    check_seeding(make, num_envs, steps, seed)
    check_action_clipping(make, num_envs, steps, seed)
    check_state_round_trip(make, num_envs, steps, seed)
