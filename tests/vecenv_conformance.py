"""Reusable conformance checks for :class:`ctrl_rl.env.VecEnv` (DESIGN.md, contract 1).

Every backend's tests call :func:`check_vecenv` with a factory ``make(num_envs, seed)``;
the smaller ``check_*`` functions can be called on their own. Checks that need
``get_state``/``set_state`` run only where ``env.supports_state``.

How ``final_obs`` is checked, from generic to exact:

* every backend: unfinished rows equal ``obs`` bit for bit; finished rows differ from the
  fresh ``obs`` and (optionally) the fresh rows satisfy ``is_initial_obs``;
* with state: a twin restored to the pre-step state and fed the same actions reproduces
  the step bit for bit (so the state really is everything);
* with state and ``make_untruncated`` (the same task with a time limit that never hits):
  the twin's ``obs`` after the step *is* the true last observation of every truncated row,
  computed without any of the env's reset bookkeeping;
* ``check_transition``: an env-specific reference (e.g. a gymnasium twin) sees every step.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ctrl_rl.env import Obs, VecEnv

MakeEnv = Callable[[int, "int | None"], VecEnv]
"""``make(num_envs, seed) -> env`` on the device under test."""


@dataclass
class Transition:
    """One checked step: what the env held before, what it was given, what it returned."""

    pre_state: dict[str, Any] | None  # env.get_state() before the step, if supported
    pre_obs: Obs
    actions: torch.Tensor
    obs: Obs
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    info: dict[str, Any]

    @property
    def done(self) -> torch.Tensor:
        return self.terminated | self.truncated


TransitionCheck = Callable[[Transition], None]
ActionSampler = Callable[[torch.Generator, int, int], torch.Tensor]


def default_actions(gen: torch.Generator, num_envs: int, action_dim: int) -> torch.Tensor:
    """Uniform in [-1.25, 1.25]: mostly in bounds, some clipped."""
    return torch.rand(num_envs, action_dim, generator=gen) * 2.5 - 1.25


def _same_device(t: torch.Tensor, device: torch.device) -> bool:
    return t.device.type == device.type and (device.index is None or t.device.index == device.index)


def _check_tensor(
    name: str, t: Any, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> None:
    assert isinstance(t, torch.Tensor), f"{name} is {type(t).__name__}, not a tensor"
    assert tuple(t.shape) == shape, f"{name} has shape {tuple(t.shape)}, expected {shape}"
    assert t.dtype == dtype, f"{name} has dtype {t.dtype}, expected {dtype}"
    assert _same_device(t, device), f"{name} is on {t.device}, env on {device}"
    if dtype.is_floating_point:
        assert torch.isfinite(t).all(), f"{name} contains NaN/inf"


def check_obs(env: VecEnv, obs: Obs, name: str = "obs") -> None:
    """Groups are exactly ``obs_dims`` (with ``"policy"``), float32 ``[N, dim]`` on device."""
    assert isinstance(obs, dict), f"{name} must be a dict of groups, got {type(obs).__name__}"
    assert "policy" in obs, f"{name} lacks the 'policy' group"
    assert set(obs) == set(env.obs_dims), f"{name} groups {sorted(obs)} != {sorted(env.obs_dims)}"
    for group, dim in env.obs_dims.items():
        _check_tensor(
            f"{name}[{group!r}]", obs[group], (env.num_envs, dim), torch.float32, env.device
        )


def check_spec(env: VecEnv, num_envs: int) -> None:
    """Static attributes of contract 1."""
    assert env.num_envs == num_envs
    assert isinstance(env.device, torch.device)
    assert isinstance(env.action_dim, int) and env.action_dim > 0
    assert isinstance(env.max_episode_length, int) and env.max_episode_length > 0
    assert env.step_dt > 0
    assert all(isinstance(d, int) and d > 0 for d in env.obs_dims.values())
    if env.action_bounds is not None:
        low, high = env.action_bounds
        assert low < high


def check_step_result(env: VecEnv, tr: Transition) -> None:
    """Shapes, dtypes, devices, finiteness and the final_obs / episode layout of one step."""
    n = env.num_envs
    check_obs(env, tr.obs)
    _check_tensor("reward", tr.reward, (n,), torch.float32, env.device)
    _check_tensor("terminated", tr.terminated, (n,), torch.bool, env.device)
    _check_tensor("truncated", tr.truncated, (n,), torch.bool, env.device)
    assert not (tr.terminated & tr.truncated).any(), "terminated and truncated both set"
    assert "final_obs" in tr.info, "info lacks 'final_obs'"
    check_obs(env, tr.info["final_obs"], "final_obs")
    episode = tr.info["episode"]
    _check_tensor("episode['return']", episode["return"], (n,), torch.float32, env.device)
    _check_tensor("episode['length']", episode["length"], (n,), torch.int64, env.device)
    for key, value in tr.info.get("log", {}).items():
        assert isinstance(value, (int, float)) or value.numel() == 1, f"log[{key!r}] not scalar"
    for key, value in tr.info.get("metrics", {}).items():
        assert value.shape == (n,) and value.device == env.device, f"metrics[{key!r}] is not [num_envs]"

    done = tr.done
    for group, final in tr.info["final_obs"].items():
        cur = tr.obs[group]
        assert torch.equal(final[~done], cur[~done]), (
            f"final_obs[{group!r}] != obs in unfinished rows"
        )
        if done.any():
            differs = (final[done] != cur[done]).any(dim=1)
            assert differs.all(), f"final_obs[{group!r}] == the reset obs in finished rows"


def _outputs(result: tuple) -> list[torch.Tensor]:
    """Flatten a step's outputs to a list of tensors for bitwise comparison."""
    obs, reward, terminated, truncated, info = result
    out = [obs[k] for k in sorted(obs)] + [reward, terminated, truncated]
    out += [info["final_obs"][k] for k in sorted(info["final_obs"])]
    return out + [info["episode"]["return"], info["episode"]["length"]]


def _assert_same(a: tuple, b: tuple, what: str) -> None:
    for i, (x, y) in enumerate(zip(_outputs(a), _outputs(b), strict=True)):
        assert torch.equal(x, y), f"{what}: output #{i} differs"


def check_rollout(
    make: MakeEnv,
    num_envs: int = 8,
    num_steps: int | None = None,
    seed: int = 0,
    *,
    sample_actions: ActionSampler = default_actions,
    check_transition: TransitionCheck | None = None,
    is_initial_obs: Callable[[Obs], torch.Tensor] | None = None,
    make_untruncated: MakeEnv | None = None,
    max_twin_checks: int = 5,
    require_done: bool = True,
) -> None:
    """Step ``num_steps`` (default: one episode + 10) and check every step's semantics.

    Tracks each row's length and return since its last reset and compares them with
    ``info["episode"]`` when the row finishes.
    """
    env = make(num_envs, seed)
    check_spec(env, num_envs)
    obs = env.reset(seed=seed)
    check_obs(env, obs, "reset obs")
    if is_initial_obs is not None:
        assert is_initial_obs(obs).all(), "reset obs is not an initial observation"
    steps = num_steps if num_steps is not None else env.max_episode_length + 10
    gen = torch.Generator().manual_seed(seed)
    length = torch.zeros(num_envs, dtype=torch.int64, device=env.device)
    ret = torch.zeros(num_envs, dtype=torch.float32, device=env.device)
    twin = make(num_envs, seed + 1) if env.supports_state else None
    untruncated = None
    if twin is not None and make_untruncated is not None:
        untruncated = make_untruncated(num_envs, seed + 2)
    twin_checks = truncation_checks = finished = 0
    for _ in range(steps):
        actions = sample_actions(gen, num_envs, env.action_dim).to(env.device)
        pre_state = env.get_state() if env.supports_state else None
        tr = Transition(pre_state, obs, actions, *env.step(actions))
        check_step_result(env, tr)
        done = tr.done
        length += 1
        ret += tr.reward
        episode = tr.info["episode"]
        assert torch.equal(episode["length"][done], length[done]), (
            "episode length != steps since reset"
        )
        torch.testing.assert_close(episode["return"][done], ret[done], rtol=1e-5, atol=1e-4)
        assert (length <= env.max_episode_length).all(), "an episode outlived max_episode_length"
        assert done[length == env.max_episode_length].all(), "no time limit at max_episode_length"
        if is_initial_obs is not None and done.any():
            fresh = {k: v[done] for k, v in tr.obs.items()}
            assert is_initial_obs(fresh).all(), "finished rows were not reset to an initial obs"
        if check_transition is not None:
            check_transition(tr)
        if twin is not None and done.any() and twin_checks < max_twin_checks:
            twin_checks += 1
            twin.set_state(pre_state)
            _assert_same(
                twin.step(actions),
                (tr.obs, tr.reward, tr.terminated, tr.truncated, tr.info),
                "twin restored to the pre-step state",
            )
        if untruncated is not None and tr.truncated.any() and truncation_checks < max_twin_checks:
            truncation_checks += 1
            _check_truncated_final_obs(untruncated, tr)
        finished += int(done.sum())
        length = torch.where(done, 0, length)
        ret = torch.where(done, 0.0, ret)
        obs = tr.obs
    if require_done:
        assert finished > 0, f"no episode finished in {steps} steps; the checks were vacuous"
    env.close()


def _check_truncated_final_obs(untruncated: VecEnv, tr: Transition) -> None:
    """The twin without a time limit, from the pre-step state, shows the true last obs."""
    untruncated.set_state(tr.pre_state)
    obs, reward, terminated, truncated, _ = untruncated.step(tr.actions)
    assert not truncated.any(), "make_untruncated env still truncated"
    assert torch.equal(reward, tr.reward) and torch.equal(terminated, tr.terminated)
    rows = tr.truncated
    for group, final in tr.info["final_obs"].items():
        assert torch.equal(final[rows], obs[group][rows]), (
            f"final_obs[{group!r}] of truncated rows is not the true last obs"
        )


def check_seeding(
    make: MakeEnv, num_envs: int = 8, num_steps: int | None = None, seed: int = 0
) -> None:
    """Same seed + same actions -> identical trajectories (through resets); other seed differs."""
    a, b, c = make(num_envs, seed), make(num_envs, seed + 7), make(num_envs, seed)
    obs_a, obs_b = a.reset(seed=seed), b.reset(seed=seed)
    for k in obs_a:
        assert torch.equal(obs_a[k], obs_b[k]), "reset(seed) is not reproducible"
    other = c.reset(seed=seed + 1)["policy"]
    assert not torch.equal(other, obs_a["policy"]), "different seeds gave the same reset obs"
    c.reset(seed=seed)
    steps = num_steps if num_steps is not None else a.max_episode_length + 5
    gen = torch.Generator().manual_seed(seed + 3)
    for t in range(steps):
        actions = default_actions(gen, num_envs, a.action_dim).to(a.device)
        _assert_same(a.step(actions), b.step(actions), f"same seed, step {t}")
    # A seed given at construction makes later unseeded resets reproducible too.
    d, e = make(num_envs, seed + 11), make(num_envs, seed + 11)
    d_obs, e_obs = d.reset(), e.reset()
    assert all(torch.equal(d_obs[k], e_obs[k]) for k in d_obs), "construction seed not reproducible"
    for env in (a, b, c, d, e):
        env.close()


def check_action_clipping(
    make: MakeEnv, num_envs: int = 8, num_steps: int = 50, seed: int = 0
) -> None:
    """Actions far outside the bounds act like the bound itself; nothing becomes NaN."""
    a, b = make(num_envs, seed), make(num_envs, seed)
    a.reset(seed=seed)
    b.reset(seed=seed)
    gen = torch.Generator().manual_seed(seed + 5)
    for t in range(num_steps):
        inside = torch.rand(num_envs, a.action_dim, generator=gen) * 2 - 1
        push = torch.rand(num_envs, a.action_dim, generator=gen) < 0.5
        if a.action_bounds is None:
            huge = torch.where(push, inside * 1e6, inside).to(a.device)
            tr = Transition(None, {}, huge, *a.step(huge))
            check_step_result(a, tr)
            continue
        low, high = a.action_bounds
        at_bound = torch.where(inside > 0, high, low)
        beyond = torch.where(inside > 0, high + 1e6, low - 1e6)
        scaled = low + (inside + 1) / 2 * (high - low)
        res_a = a.step(torch.where(push, beyond, scaled).to(a.device))
        res_b = b.step(torch.where(push, at_bound, scaled).to(b.device))
        check_step_result(a, Transition(None, {}, scaled, *res_a))
        _assert_same(res_a, res_b, f"clipped vs bound actions, step {t}")
    a.close()
    b.close()


def check_state_round_trip(
    make: MakeEnv, num_envs: int = 8, num_steps: int | None = None, seed: int = 0
) -> None:
    """get_state -> save/load -> set_state continues bit-exactly, in this env and a fresh one."""
    env = make(num_envs, seed)
    env.reset(seed=seed)
    gen = torch.Generator().manual_seed(seed + 9)
    for _ in range(7):
        env.step(default_actions(gen, num_envs, env.action_dim).to(env.device))
    snapshot = env.get_state()
    buf = io.BytesIO()
    torch.save(snapshot, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    steps = num_steps if num_steps is not None else env.max_episode_length + 5
    actions = [default_actions(gen, num_envs, env.action_dim).to(env.device) for _ in range(steps)]
    reference = [env.step(a) for a in actions]
    fresh = make(num_envs, seed + 1)
    fresh.set_state(loaded)
    env.set_state(snapshot)  # the snapshot must not have been aliased by the steps since
    for t, (a, ref) in enumerate(zip(actions, reference, strict=True)):
        _assert_same(fresh.step(a), ref, f"fresh env after set_state, step {t}")
        _assert_same(env.step(a), ref, f"same env after set_state, step {t}")
    env.close()
    fresh.close()


def check_vecenv(
    make: MakeEnv,
    num_envs: int = 8,
    num_steps: int | None = None,
    seed: int = 0,
    **rollout_kwargs: Any,
) -> None:
    """All of the above; ``rollout_kwargs`` go to :func:`check_rollout`."""
    check_rollout(make, num_envs, num_steps, seed, **rollout_kwargs)
    check_seeding(make, num_envs, num_steps, seed)
    check_action_clipping(make, num_envs, seed=seed)
    probe = make(num_envs, seed)
    supports_state = probe.supports_state
    probe.close()
    if supports_state:
        check_state_round_trip(make, num_envs, num_steps, seed)
