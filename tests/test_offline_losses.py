"""Uni-O4's offline losses against hand-computed values."""

import math

import numpy as np
import pytest
import torch

from ctrl_rl.algos.offline_losses import (
    decayed_clip,
    ensemble_bc_loss,
    expectile_loss,
    gaussian_nll_loss,
    td_target,
    weighted_advantage,
)
from ctrl_rl.algos.uni_o4_offline import transitions
from ctrl_rl.storage.dataset import Dataset, DatasetError


def test_ensemble_bc_loss_hand_computed():
    # K=2 members, B=2 samples; alpha 0.1. Member 0's "best other" is member 1 and vice versa:
    #   i=0: [1 - 0.1(-1+3), 2 - 0.1(-2+0.5)] = [0.8, 2.15] -> 1.475
    #   i=1: [3 - 0.1(-3+1), 0.5 - 0.1(-0.5+2)] = [3.2, 0.35] -> 1.775
    lp = torch.tensor([[-1.0, -2.0], [-3.0, -0.5]], requires_grad=True)
    loss = ensemble_bc_loss(lp, alpha=0.1)
    torch.testing.assert_close(loss, torch.tensor([1.475, 1.775]))
    loss.sum().backward()  # the other members' max is a constant: d/d lp = -(1 + alpha) / B
    torch.testing.assert_close(lp.grad, torch.full((2, 2), -1.1 / 2))


def test_ensemble_bc_loss_excludes_the_member_itself_and_handles_one_member():
    lp = torch.tensor([[-1.0], [-5.0], [-2.0]])
    # member 0 is the likeliest; its best other is member 2 (-2), not itself (-1)
    assert ensemble_bc_loss(lp, alpha=1.0)[0].item() == pytest.approx(1.0 - (-1.0 + 2.0))
    assert ensemble_bc_loss(lp, alpha=1.0)[1].item() == pytest.approx(5.0 - (-5.0 + 1.0))
    torch.testing.assert_close(ensemble_bc_loss(lp[:1], alpha=1.0), torch.tensor([1.0]))


def test_expectile_loss_weights_positive_errors_by_tau():
    diff = torch.tensor([1.0, -2.0])
    assert expectile_loss(diff, 0.7).item() == pytest.approx((0.7 * 1 + 0.3 * 4) / 2)
    assert expectile_loss(diff, 0.5).item() == pytest.approx(0.5 * (1 + 4) / 2)  # plain (halved) MSE


def test_td_target_bootstraps_unless_terminal():
    out = td_target(torch.tensor([1.0, 1.0]), torch.tensor([False, True]), torch.tensor([10.0, 10.0]), 0.9)
    torch.testing.assert_close(out, torch.tensor([10.0, 1.0]))


def test_weighted_advantage_is_asymmetric():
    torch.testing.assert_close(weighted_advantage(torch.tensor([2.0, -2.0, 0.0]), 0.7), torch.tensor([1.4, -0.6, 0.0]))


def test_gaussian_nll_loss_per_member():
    mean = torch.zeros(2, 1, 1)
    log_var = torch.tensor([0.0, math.log(4.0)]).reshape(2, 1, 1)
    target = torch.tensor([1.0, 2.0]).reshape(2, 1, 1)
    torch.testing.assert_close(gaussian_nll_loss(mean, log_var, target), torch.tensor([1.0, 1.0 + math.log(4.0)]))


def test_decayed_clip_is_geometric_in_the_step():
    assert decayed_clip(0.25, 0.96, 0) == 0.25
    assert decayed_clip(0.25, 0.96, 2) == pytest.approx(0.25 * 0.9216)
    assert decayed_clip(0.25, 1.0, 500) == 0.25


def _data(next_obs: bool) -> Dataset:
    # two episodes: rows 0-2 end by a timeout, rows 3-4 end by a terminal
    obs = np.arange(5, dtype=np.float32)[:, None]
    return Dataset(observations=obs, actions=np.zeros((5, 1)), rewards=np.arange(5), terminals=[0, 0, 0, 0, 1],
                   timeouts=[0, 0, 1, 0, 0], next_observations=obs + 10 if next_obs else None)


def test_transitions_use_next_observations_when_stored():
    t = transitions(_data(next_obs=True))
    assert t.observations.flatten().tolist() == [0, 1, 2, 3, 4]
    assert t.next_observations.flatten().tolist() == [10, 11, 12, 13, 14]


def test_transitions_without_next_observations_drop_rows_that_have_no_next_state():
    t = transitions(_data(next_obs=False))
    # row 2 ends by a timeout (next state unknown): dropped; row 4 is terminal: kept, its next
    # state is never used (the target does not bootstrap)
    assert t.observations.flatten().tolist() == [0, 1, 3, 4]
    assert t.next_observations.flatten().tolist()[:3] == [1, 2, 4]
    assert t.terminals.tolist() == [False, False, False, True]


def test_transitions_refuse_a_dataset_without_any_next_state():
    one = Dataset(observations=[[0.0]], actions=[[0.0]], rewards=[0.0], terminals=[False], timeouts=[True])
    with pytest.raises(DatasetError, match="next_observations"):
        transitions(one)
