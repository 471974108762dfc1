"""Pure-torch tasks: contract-1 conformance, parity with gymnasium, task-specific physics."""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest
import torch
from vecenv_conformance import Transition, check_vecenv

from ctrl_rl.sims import list_tasks, make_env
from ctrl_rl.sims.torch_backend import TASKS, wrap_to_pi
from ctrl_rl.tasks.classic.cartpole import THETA_THRESHOLD, X_THRESHOLD

TORCH_TASKS = sorted(TASKS)
CONFORMANCE_TASKS = [t for t in TORCH_TASKS if t != "bimodal_bandit"]
"""The bandit has one fixed start state, which the seeding checks refuse: tested on its own."""
UNKNOWN_SIM = "unknown sim 'bullet'; choose one of: gymnasium, isaacgym, isaaclab, mjlab, mjwarp, mujoco, torch"


def _maker(task: str, **kw):
    return lambda n, seed: make_env("torch", task, n, seed=seed, **kw)


# ---- env-specific references for the conformance rollout ---------------------------------
def _pendulum_reference(tr: Transition) -> None:
    """Each row's step against gymnasium's Pendulum-v1 from the same pre-step state."""
    ref = gymnasium.make("Pendulum-v1").unwrapped
    ref.reset(seed=0)
    state = tr.pre_state["state"]
    # float64 torques: gymnasium folds 3.0 * u in the action's dtype (see pendulum.py).
    torque = 2.0 * tr.actions.clamp(-1, 1).double().cpu().numpy()
    final = tr.info["final_obs"]["policy"].cpu().numpy()
    for i in range(len(torque)):
        ref.state = np.array([float(state["th"][i]), float(state["thdot"][i])])
        obs, reward, *_ = ref.step(torque[i])
        np.testing.assert_allclose(final[i], obs, atol=1e-5, rtol=0)
        assert abs(float(tr.reward[i]) - reward) < 1e-5


def _cartpole_reference(tr: Transition) -> None:
    """Rows with a = +-1 against gymnasium's CartPole-v1 from the same pre-step state."""
    ref = gymnasium.make("CartPole-v1").unwrapped
    ref.reset(seed=0)
    state = tr.pre_state["state"]
    pre = torch.stack([state[k] for k in ("x", "x_dot", "theta", "theta_dot")], 1).double().cpu()
    action = tr.actions[:, 0].clamp(-1, 1).cpu()
    final = tr.info["final_obs"]["policy"].cpu().numpy()
    for i in range(len(action)):
        ref.state, ref.steps_beyond_terminated = pre[i].numpy().copy(), None
        obs, reward, terminated, *_ = ref.step(int(action[i] > 0))
        np.testing.assert_allclose(final[i], obs, atol=1e-6, rtol=0)
        assert reward == float(tr.reward[i]) == 1.0
        margin = min(abs(abs(obs[0]) - X_THRESHOLD), abs(abs(obs[2]) - THETA_THRESHOLD))
        if margin > 1e-5:  # float32 vs float64 may disagree exactly at a threshold
            assert terminated == bool(tr.terminated[i])


def _swingup_reference(tr: Transition) -> None:
    """Terminal only off the track; the last obs shows the cart beyond 2.4 m."""
    x_final = tr.info["final_obs"]["policy"][:, 0]
    assert torch.equal(tr.terminated, x_final.abs() > X_THRESHOLD)
    assert ((tr.reward >= 0) & (tr.reward <= 1)).all()


def _bang_bang(gen: torch.Generator, n: int, dim: int) -> torch.Tensor:
    """+-1 (gymnasium's two pushes), sometimes far beyond so clipping is exercised."""
    sign = torch.randint(0, 2, (n, dim), generator=gen) * 2.0 - 1.0
    return sign * torch.where(torch.rand(n, dim, generator=gen) < 0.2, 5.0, 1.0)


def _point_mass_reference(tr: Transition) -> None:
    """Critic group = policy group + absolute position and target."""
    for obs in (tr.obs, tr.info["final_obs"]):
        assert torch.equal(obs["critic"][:, :4], obs["policy"])
        target = obs["critic"][:, 6:]
        torch.testing.assert_close(obs["critic"][:, 4:6] - target, obs["policy"][:, :2])


ROLLOUT_KWARGS = {
    "pendulum": {
        "check_transition": _pendulum_reference,
        "is_initial_obs": lambda o: o["policy"][:, 2].abs() <= 1.0,
    },
    "cartpole_balance": {
        "check_transition": _cartpole_reference,
        "sample_actions": _bang_bang,
        "is_initial_obs": lambda o: (o["policy"].abs() <= 0.05).all(dim=1),
    },
    "cartpole_swingup": {
        "check_transition": _swingup_reference,
        "is_initial_obs": lambda o: (
            (o["policy"][:, 2] < -0.998) & (o["policy"][:, 0].abs() <= 0.05)
        ),
    },
    "point_mass": {
        "check_transition": _point_mass_reference,
        "is_initial_obs": lambda o: (o["policy"][:, 2:] == 0).all(dim=1),
    },
}


@pytest.mark.parametrize("task", CONFORMANCE_TASKS)
def test_conformance_small_batch(task: str) -> None:
    kw = ROLLOUT_KWARGS[task]
    check_vecenv(
        _maker(task),
        num_envs=6,
        seed=3,
        make_untruncated=_maker(task, max_episode_length=10**9),
        **kw,
    )


@pytest.mark.parametrize("task", CONFORMANCE_TASKS)
def test_conformance_large_batch(task: str) -> None:
    kw = {
        k: v for k, v in ROLLOUT_KWARGS[task].items() if k != "check_transition"
    }  # per-row refs are slow
    check_vecenv(
        _maker(task),
        num_envs=1024,
        seed=5,
        make_untruncated=_maker(task, max_episode_length=10**9),
        **kw,
    )


# ---- pendulum = gymnasium Pendulum-v1 ----------------------------------------------------
def test_pendulum_matches_gymnasium_over_full_episodes() -> None:
    """Free-running (never re-synced) for two 200-step episodes, obs/reward within 1e-5."""
    n = 256
    env = make_env("torch", "pendulum", n, seed=11)
    refs = [gymnasium.make("Pendulum-v1") for _ in range(n)]  # with its 200-step TimeLimit
    gen = torch.Generator().manual_seed(0)
    worst = 0.0
    for episode in range(2):
        state = env.get_state()["state"]
        for i, ref in enumerate(refs):
            ref.reset(seed=i)
            ref.unwrapped.state = np.array([float(state["th"][i]), float(state["thdot"][i])])
        for t in range(200):
            actions = torch.rand(n, 1, generator=gen) * 2 - 1
            torque = 2.0 * actions.double().numpy()  # the same physical torque, float64
            obs, reward, terminated, truncated, info = env.step(actions)
            final = info["final_obs"]["policy"].numpy()
            for i, ref in enumerate(refs):
                r_obs, r_rew, r_term, r_trunc, _ = ref.step(torque[i])
                worst = max(worst, float(np.abs(final[i] - r_obs).max()))
                assert abs(float(reward[i]) - r_rew) < 1e-5, (episode, t, i)
                assert (bool(terminated[i]), bool(truncated[i])) == (r_term, r_trunc)
            assert not terminated.any()
            assert truncated.all() == (t == 199) and truncated.any() == (t == 199)
        # After the time limit every row restarted: fresh obs, counters back to zero.
        assert (obs["policy"][:, 2].abs() <= 1.0).all()
        assert (info["episode"]["length"] == 200).all()
    assert worst < 1e-5, worst


def test_pendulum_hand_computed_step() -> None:
    """th = pi/2 (horizontal), thdot = 0, a = 0.5 -> u = 1:
    thdot' = (15 * 1 + 3 * 1) * 0.05 = 0.9, th' = pi/2 + 0.045, reward = -(pi^2/4 + 0.001)."""
    env = make_env("torch", "pendulum", 1, seed=0)
    state = env.get_state()
    state["state"] = {
        "th": torch.tensor([math.pi / 2], dtype=torch.float64),
        "thdot": torch.zeros(1, dtype=torch.float64),
    }
    env.set_state(state)
    obs, reward, *_ = env.step(torch.tensor([[0.5]]))
    th = math.pi / 2 + 0.045
    torch.testing.assert_close(obs["policy"], torch.tensor([[math.cos(th), math.sin(th), 0.9]]))
    torch.testing.assert_close(reward, torch.tensor([-(math.pi**2 / 4 + 0.001)]))


def test_pendulum_float32_physics_option() -> None:
    """``physics_dtype=float32`` is the same MDP, faster and without the gymnasium parity."""
    fast = make_env("torch", "pendulum", 64, seed=2, physics_dtype=torch.float32)
    exact = make_env("torch", "pendulum", 64, seed=2)
    fast.set_state(exact.get_state())  # same start (set_state casts to the task's dtype)
    assert fast.get_state()["state"]["th"].dtype == torch.float32
    actions = torch.rand(64, 1, generator=torch.Generator().manual_seed(0)) * 2 - 1
    for _ in range(5):  # a few steps, before the upright instability amplifies rounding
        obs_fast, rew_fast, *_ = fast.step(actions)
        obs_exact, rew_exact, *_ = exact.step(actions)
        torch.testing.assert_close(obs_fast, obs_exact, rtol=0, atol=1e-5)
        torch.testing.assert_close(rew_fast, rew_exact, rtol=0, atol=1e-5)


def test_wrap_to_pi_exact_inside_and_wraps_outside() -> None:
    x = torch.linspace(-math.pi, math.pi, 1001, dtype=torch.float32)
    assert torch.equal(wrap_to_pi(x), x)  # bit-exact identity on [-pi, pi]
    y = torch.tensor([math.pi + 0.3, -math.pi - 0.3, 7.0], dtype=torch.float64)
    expected = torch.tensor([-math.pi + 0.3, math.pi - 0.3, 7.0 - 2 * math.pi], dtype=torch.float64)
    torch.testing.assert_close(wrap_to_pi(y), expected, rtol=0, atol=1e-15)


# ---- cartpole ---------------------------------------------------------------------------
def test_cartpole_plus_minus_one_equals_gymnasium_transitions() -> None:
    """4096 random states, a = +-1, against CartPole-v1 stepped from the same float32 state."""
    n = 4096
    env = make_env("torch", "cartpole_balance", n, seed=0)
    gen = torch.Generator().manual_seed(1)
    scale = torch.tensor([2.3, 2.0, 0.2, 2.0])
    pre = (torch.rand(n, 4, generator=gen) * 2 - 1) * scale
    snapshot = env.get_state()
    snapshot["state"] = dict(zip(("x", "x_dot", "theta", "theta_dot"), pre.unbind(1), strict=True))
    env.set_state(snapshot)
    actions = torch.randint(0, 2, (n, 1), generator=gen) * 2.0 - 1.0
    _, reward, terminated, truncated, info = env.step(actions)
    final = info["final_obs"]["policy"].numpy()
    ref = gymnasium.make("CartPole-v1").unwrapped
    ref.reset(seed=0)
    for i in range(n):
        ref.state, ref.steps_beyond_terminated = pre[i].double().numpy(), None
        obs, r, term, *_ = ref.step(int(actions[i, 0] > 0))
        assert r == 1.0
        np.testing.assert_allclose(final[i], obs, atol=1e-6, rtol=0)
        margin = min(abs(abs(obs[0]) - X_THRESHOLD), abs(abs(obs[2]) - THETA_THRESHOLD))
        if margin > 1e-5:
            assert term == bool(terminated[i]), i
    assert terminated.any() and not terminated.all()  # both branches were exercised
    assert (reward == 1.0).all() and not truncated.any()


def test_cartpole_balance_pd_controller_reaches_max_return() -> None:
    """A PD controller balances for all 500 steps: truncated (not terminated), return 500."""
    env = make_env("torch", "cartpole_balance", 256, seed=0)
    obs = env.reset(seed=0)["policy"]
    for t in range(500):
        x, x_dot, th, th_dot = obs.unbind(1)
        a = (5 * th + 1 * th_dot + 0.2 * x + 0.5 * x_dot).clamp(-1, 1)[:, None]
        o, _, terminated, truncated, info = env.step(a)
        obs = o["policy"]
        assert not terminated.any()
        assert truncated.all() == (t == 499) and truncated.any() == (t == 499)
    assert (info["episode"]["return"] == 500.0).all()
    assert (info["episode"]["length"] == 500).all()


def test_terminal_on_last_step_is_terminated_not_truncated() -> None:
    """Pole about to fall with one step left: terminated wins over the time limit."""
    env = make_env("torch", "cartpole_balance", 2, seed=0, max_episode_length=10)
    state = env.get_state()
    theta = torch.tensor([THETA_THRESHOLD - 1e-3, 0.0])
    state["state"] = {
        "x": torch.zeros(2),
        "x_dot": torch.zeros(2),
        "theta": theta,
        "theta_dot": torch.tensor([1.0, 0.0]),
    }
    state["episode_length"] = torch.tensor([9, 9])
    env.set_state(state)
    _, _, terminated, truncated, info = env.step(torch.zeros(2, 1))
    assert terminated.tolist() == [True, False]
    assert truncated.tolist() == [False, True]
    assert info["episode"]["length"].tolist() == [10, 10]


def test_truncation_at_max_episode_length() -> None:
    env = make_env("torch", "pendulum", 3, seed=0, max_episode_length=7)
    for t in range(1, 22):
        _, _, terminated, truncated, info = env.step(torch.zeros(3, 1))
        assert not terminated.any()
        assert truncated.tolist() == [t % 7 == 0] * 3, t
        if t % 7 == 0:
            assert info["episode"]["length"].tolist() == [7, 7, 7]


def test_cartpole_swingup_upright_reward_and_start() -> None:
    env = make_env("torch", "cartpole_swingup", 4, seed=0)
    cos_theta = env.reset(seed=0)["policy"][:, 2]
    assert (cos_theta < -0.99).all()  # starts hanging down
    state = env.get_state()
    state["state"] = {k: torch.zeros(4) for k in ("x", "x_dot", "theta", "theta_dot")}
    env.set_state(state)
    # Upright, centred, at rest, no force: every factor is 1 (up to the 1-step drift).
    _, reward, terminated, *_ = env.step(torch.zeros(4, 1))
    torch.testing.assert_close(reward, torch.ones(4))
    # Full force: small_control = (4 + 0) / 5 = 0.8, and the pole picks up
    # thdot' = tau * thacc, thacc = -(10 / 1.1) / (0.5 (4/3 - 0.1 / 1.1)) = -14.63 rad/s^2.
    env.set_state(state)
    _, reward, *_ = env.step(torch.ones(4, 1))
    th_dot = 0.02 * -(10 / 1.1) / (0.5 * (4 / 3 - 0.1 / 1.1))
    expected = 0.8 * (1 + 0.1 ** ((th_dot / 5) ** 2)) / 2
    torch.testing.assert_close(reward, torch.full((4,), expected))
    assert not terminated.any()


def test_cartpole_swingup_terminates_only_off_track() -> None:
    env = make_env("torch", "cartpole_swingup", 2, seed=0)
    for steps in range(1, 501):  # noqa: B007 - read after the loop
        _, _, terminated, truncated, info = env.step(torch.ones(2, 1))  # full push right
        if terminated.any():
            break
    # From rest, x = a t^2 / 2 with a ~ 10 / 1.1 m/s^2 reaches 2.4 m after ~0.73 s = ~37 steps.
    assert terminated.all() and not truncated.any() and 30 < steps < 45, steps
    assert (info["final_obs"]["policy"][:, 0] > X_THRESHOLD).all()


# ---- point mass -------------------------------------------------------------------------
def test_point_mass_hand_computed_step_and_wall() -> None:
    env = make_env("torch", "point_mass", 2, seed=0)
    state = env.get_state()
    state["state"] = {
        "pos": torch.tensor([[0.3, -0.2], [0.999, 0.0]]),
        "vel": torch.tensor([[0.0, 0.0], [1.0, 0.5]]),
        "target": torch.tensor([[0.3, -0.2], [0.0, 0.0]]),
    }
    env.set_state(state)
    obs, reward, *_ = env.step(torch.tensor([[0.0, 0.0], [0.0, 0.0]]))
    # Row 0 rests on its target: reward 0. Row 1: v' = v (1 - 0.5 * 0.05) = (0.975, 0.4875);
    # x hits the wall at 1.0 and stops; y moves 0.05 * 0.4875.
    assert reward[0].item() == 0.0
    critic = obs["critic"][1]
    torch.testing.assert_close(critic[4:6], torch.tensor([1.0, 0.05 * 0.4875]))
    torch.testing.assert_close(critic[2:4], torch.tensor([0.0, 0.4875]))
    torch.testing.assert_close(reward[1], -torch.linalg.vector_norm(critic[4:6]))


# ---- registry ---------------------------------------------------------------------------
def test_list_tasks() -> None:
    tasks = list_tasks()
    assert tasks["torch"] == ["bimodal_bandit", "cartpole_balance", "cartpole_swingup", "pendulum", "point_mass"]
    assert "Pendulum-v1" in tasks["gymnasium"]
    assert list_tasks("torch") == {"torch": tasks["torch"]}


@pytest.mark.parametrize(
    ("sim", "task", "num_envs", "message"),
    [
        (
            "torch",
            "foo",
            2,
            "unknown task 'foo' for sim 'torch'; choose one of: "
            "bimodal_bandit, cartpole_balance, cartpole_swingup, pendulum, point_mass",
        ),
        ("bullet", "pendulum", 2, UNKNOWN_SIM),
        ("torch", "pendulum", 0, "num_envs must be >= 1"),
        ("gymnasium", "NoSuchEnv-v0", 2, "unknown task 'NoSuchEnv-v0' for sim 'gymnasium'"),
    ],
)
def test_make_env_errors(sim: str, task: str, num_envs: int, message: str) -> None:
    with pytest.raises(ValueError) as err:
        make_env(sim, task, num_envs)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_list_tasks_unknown_sim() -> None:
    with pytest.raises(ValueError, match=UNKNOWN_SIM):
        list_tasks("bullet")


def test_wrong_action_shape_is_rejected() -> None:
    env = make_env("torch", "point_mass", 4, seed=0)
    with pytest.raises(ValueError, match=r"actions must have shape \(4, 2\)"):
        env.step(torch.zeros(4, 1))


def test_generator_is_private() -> None:
    """Stepping with auto-resets never touches torch's global RNG."""
    torch.manual_seed(123)
    before = torch.get_rng_state()
    env = make_env("torch", "pendulum", 8, seed=0, max_episode_length=3)
    for _ in range(10):
        env.step(torch.zeros(8, 1))
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize("task", TORCH_TASKS)
def test_step_never_syncs_with_the_host(task: str) -> None:
    """Under FakeTensorMode tensors hold no data: ``.item()``, ``if tensor``, boolean-mask
    indexing and any other data-dependent shape raise, so a passing step has no host sync."""
    fake_tensor = pytest.importorskip("torch._subclasses.fake_tensor")
    with fake_tensor.FakeTensorMode():
        env = make_env("torch", task, 16, seed=0, max_episode_length=2)
        for _ in range(3):  # crosses a time limit, so the reset path runs too
            obs, *_, info = env.step(torch.zeros(16, env.action_dim))
        assert isinstance(obs["policy"], fake_tensor.FakeTensor)
        with pytest.raises(RuntimeError):  # the mode does catch a sync
            info["episode"]["length"].sum().item()


def test_set_state_rejects_another_batch_size() -> None:
    state = make_env("torch", "pendulum", 4, seed=0).get_state()
    with pytest.raises(ValueError, match="state is for 4 envs, this env has 3"):
        make_env("torch", "pendulum", 3, seed=0).set_state(state)


def test_bimodal_bandit_rewards_both_peaks_and_ends_every_episode() -> None:
    env = make_env("torch", "bimodal_bandit", 5, seed=0)
    assert torch.equal(env.reset(seed=1)["policy"], torch.ones(5, 1))
    actions = torch.tensor([[0.6], [-0.6], [0.0], [0.3], [7.0]])  # 7 is clipped to 1
    obs, reward, terminated, truncated, info = env.step(actions)
    a = actions.clamp(-1, 1)[:, 0]
    expected = torch.exp(-0.5 * ((a - 0.6) / 0.2) ** 2) + torch.exp(-0.5 * ((a + 0.6) / 0.2) ** 2)
    torch.testing.assert_close(reward, expected)
    assert reward[0] == reward[1] and reward[2] < 0.03  # equal peaks, a valley between them
    assert terminated.all() and not truncated.any()
    assert torch.equal(info["final_obs"]["policy"], torch.zeros(5, 1)) and torch.equal(obs["policy"], torch.ones(5, 1))
