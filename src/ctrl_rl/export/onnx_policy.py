"""Checkpoint -> ``exported/policy.onnx``: normalizer, deterministic action head and clip in
the graph, metadata at full precision, and a parity check that refuses a bad bundle.

Needs torch (the ``train`` extra); the runtime side (:mod:`ctrl_rl.deploy.runtime`) does not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ctrl_rl.nets.memory import RecurrentPolicy
from ctrl_rl.nets.residual import OnnxBase, ResidualPolicy
from ctrl_rl.utils.files import atomic_write

PARITY_TOL = 1e-5
"""Max difference allowed between onnxruntime and torch actions, relative to the largest action's
magnitude when that exceeds 1 (float32 keeps ~7 digits: an unbounded policy whose means reach 20 differs
by ~1e-5 between two correct kernels; a different graph differs by far more)."""


def parity_bound(expected: np.ndarray, tol: float) -> float:
    """``tol`` times the largest ``|expected|``, at least ``tol``: the float32 rounding two correct
    runtimes may differ by."""
    return tol * max(1.0, float(np.abs(expected).max(initial=0.0)))


class ExportedPolicy(nn.Module):
    """``obs[batch, obs_dim] -> actions[batch, action_dim]``: the mean action, clipped.

    An actor with a ``noise_dim`` attribute (a flow policy) takes ``noise[batch, noise_dim]``
    as a second input: its initial noise, zeros for the deterministic action.
    """

    def __init__(self, actor: nn.Module, action_bounds: tuple[float, float] | None):
        super().__init__()
        self.actor = actor
        self.bounds = action_bounds

    def forward(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        actions = self.actor(obs) if noise is None else self.actor(obs, noise)
        if self.bounds is not None:
            actions = actions.clamp(self.bounds[0], self.bounds[1])
        return actions


class ExportedRecurrentPolicy(nn.Module):
    """``(obs, memory_in) -> (actions, memory_out)``: a recurrent policy's step, the action clipped.
    ``memory_in`` ``[batch, k, hidden]`` is the state the last step returned; zeros start an episode."""

    def __init__(self, policy: nn.Module, action_bounds: tuple[float, float] | None):
        super().__init__()
        self.policy = policy
        self.bounds = action_bounds

    def forward(self, obs: torch.Tensor, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        actions, memory = self.policy(obs, memory)
        if self.bounds is not None:
            actions = actions.clamp(self.bounds[0], self.bounds[1])
        return actions, memory


class _ResidualHead(nn.Module):
    """A residual actor on ``(obs, base_action)`` (the part of a residual policy torch can export)."""

    def __init__(self, actor: nn.Module):
        super().__init__()
        self.actor = actor

    def forward(self, obs: torch.Tensor, base_action: torch.Tensor) -> torch.Tensor:
        return self.actor(torch.cat([obs, base_action], dim=-1))


def _onnx_base_of(actor: nn.Module):
    """The :class:`~ctrl_rl.nets.residual.OnnxBase` of a residual policy, if it has one."""
    if isinstance(actor, ResidualPolicy) and isinstance(actor.base.policy, OnnxBase):
        return actor.base.policy
    return None


def _torch_to_onnx(policy: nn.Module, examples: tuple[torch.Tensor, ...], names: list[str], opset: int,
                   outputs: tuple[str, ...] = ("actions",)):
    batch = torch.export.Dim("batch", min=1, max=1 << 20)
    program = torch.onnx.export(
        policy, examples, input_names=names, output_names=list(outputs), opset_version=opset,
        dynamic_shapes=tuple({0: batch} for _ in examples), dynamo=True, external_data=False, verbose=False,
    )
    return program.model_proto


class ParityError(RuntimeError):
    """The ONNX graph does not reproduce the torch policy; no bundle was written."""


def _onnx_actions(model_bytes: bytes, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
    import onnxruntime as ort

    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    feeds = {"obs": obs.astype(np.float32)}
    if noise is not None:
        feeds["noise"] = noise.astype(np.float32)
    return sess.run(None, feeds)[0]


def check_parity(policy: nn.Module, model_bytes: bytes, observations: np.ndarray, tol: float = PARITY_TOL,
                 noise: np.ndarray | None = None) -> float:
    """Max abs diff between torch and onnxruntime on ``observations`` (and ``noise``, for a
    policy with a noise input); raises past :func:`parity_bound` (``tol``, relative beyond actions of 1)."""
    extra = () if noise is None else (torch.as_tensor(noise, dtype=torch.float32),)
    with torch.no_grad():
        expected = policy(torch.as_tensor(observations, dtype=torch.float32), *extra).numpy()
    got = _onnx_actions(model_bytes, observations, noise)
    diff, bound = float(np.abs(expected - got).max()), parity_bound(expected, tol)
    if not np.isfinite(diff) or diff > bound:
        raise ParityError(f"ONNX output differs from torch by {diff:.3g} (> {bound:.3g}); refusing to write the bundle")
    return diff


MEMORY_IO = ("memory_in", "memory_out")
"""Names of a recurrent bundle's state input and output (the metadata's ``memory`` entry repeats them)."""


def check_sequence_parity(policy: nn.Module, model_bytes: bytes, observations: np.ndarray, starts: np.ndarray,
                          state_shape: tuple[int, int], tol: float = PARITY_TOL) -> float:
    """Step torch and onnxruntime through ``observations`` ``[T, envs, obs_dim]``, each carrying its own
    state, zeroed where ``starts`` ``[T, envs]`` marks an episode's first step; the max abs diff of
    actions and states over every step. Raises past :func:`parity_bound` of the smallest step's outputs."""
    import onnxruntime as ort

    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    n = observations.shape[1]
    state_t, state_o = torch.zeros(n, *state_shape), np.zeros((n, *state_shape), np.float32)
    worst, bound = 0.0, np.inf
    with torch.no_grad():
        for obs, start in zip(observations.astype(np.float32), starts, strict=True):
            state_t[torch.as_tensor(start)] = 0.0
            state_o[start] = 0.0
            act_t, state_t = policy(torch.as_tensor(obs), state_t)
            act_o, state_o = sess.run(None, {"obs": obs, MEMORY_IO[0]: state_o})
            worst = max(worst, float(np.abs(act_t.numpy() - act_o).max()),
                        float(np.abs(state_t.numpy() - state_o).max()))
            bound = min(bound, parity_bound(np.concatenate([act_t.numpy().ravel(), state_t.numpy().ravel()]), tol))
            if not np.isfinite(worst) or worst > bound:
                raise ParityError(f"ONNX output differs from torch by {worst:.3g} (> {bound:.3g}) on a sequence; "
                                  "refusing to write the bundle")
    return worst


def _export_recurrent(policy: nn.Module, obs_dim: int, action_bounds: tuple[float, float] | None, opset: int,
                      rng: np.random.Generator, recorded: tuple[np.ndarray, np.ndarray] | None):
    """The ONNX model of a recurrent policy and its sequence parity (random sequences with resets inside
    and the recorded ones)."""
    exported = ExportedRecurrentPolicy(policy, action_bounds).cpu().eval()
    shape = tuple(policy.memory.state_shape)
    model = _torch_to_onnx(exported, (torch.zeros(2, obs_dim), torch.zeros(2, *shape)),
                           ["obs", MEMORY_IO[0]], opset, outputs=("actions", MEMORY_IO[1]))
    T, n = 256, 8
    starts = rng.random((T, n)) < 1.0 / 64  # about four episodes per sequence
    starts[0] = True
    sequences = [(rng.normal(size=(T, n, obs_dim)) * 3.0, starts)]
    if recorded is not None:
        sequences.append(recorded)
    bytes_ = model.SerializeToString()
    diffs = [check_sequence_parity(exported, bytes_, obs, st, shape) for obs, st in sequences]
    probes = sum(obs.shape[0] * obs.shape[1] for obs, _ in sequences)
    memory = {"input": MEMORY_IO[0], "output": MEMORY_IO[1], "shape": list(shape),
              "rnn_type": policy.memory.rnn_type, "num_layers": policy.memory.num_layers}
    return model, diffs, probes, memory


def export_onnx(
    actor: nn.Module,
    obs_dim: int,
    action_bounds: tuple[float, float] | None,
    output: Path,
    metadata: dict[str, Any],
    recorded_obs: np.ndarray | None = None,
    opset: int = 18,
    seed: int = 0,
    recorded_sequences: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Export ``actor`` (raw obs -> mean action) to a single-file ONNX model at ``output``.

    The file appears only after onnxruntime matched torch on recorded and random
    observations (batch sizes 1 and many: the batch dimension is dynamic); a policy with a
    noise input (``actor.noise_dim``) is checked with zero and random noise. A recurrent policy
    (:class:`~ctrl_rl.nets.memory.RecurrentPolicy`) takes and returns its state (``memory_in`` /
    ``memory_out``, described in the metadata's ``memory``) and is checked step by step on sequences
    with episode starts inside: random ones and ``recorded_sequences`` ``(obs [T, envs, dim], starts [T, envs])``.
    """
    import onnx


    rng = np.random.default_rng(seed)
    policy = ExportedPolicy(actor, action_bounds).cpu().eval()
    onnx_base = _onnx_base_of(actor)
    noise_dim = 0
    if isinstance(actor, RecurrentPolicy):
        model, diffs, num_probes, metadata["memory"] = _export_recurrent(actor, obs_dim, action_bounds, opset, rng,
                                                                         recorded_sequences)
    elif onnx_base is None:
        noise_dim = int(getattr(actor, "noise_dim", 0))
        examples = (torch.zeros(2, obs_dim),) + ((torch.zeros(2, noise_dim),) if noise_dim else ())
        model = _torch_to_onnx(policy, examples, ["obs", "noise"][: len(examples)], opset)
    else:  # residual on an ONNX base: export the head, splice the base graph in front of it
        from ctrl_rl.export.compose import compose_base_and_head  # optional: onnx, only for a residual's ONNX base

        noise_dim, action_dim = 0, actor.actor.action_dim
        head = ExportedPolicy(_ResidualHead(actor.actor), action_bounds).cpu().eval()
        head_model = _torch_to_onnx(head, (torch.zeros(2, obs_dim), torch.zeros(2, action_dim)),
                                    ["obs", "base_action"], opset)
        model = compose_base_and_head(onnx.load(onnx_base.path), head_model)
    for key, value in metadata.items():
        entry = model.metadata_props.add()
        entry.key = key
        entry.value = value if isinstance(value, str) else json.dumps(value)
    model_bytes = model.SerializeToString()

    if not isinstance(actor, RecurrentPolicy):
        scale = 3.0
        probes = [rng.normal(size=(1, obs_dim)) * scale, rng.normal(size=(257, obs_dim)) * scale]
        if recorded_obs is not None and len(recorded_obs):
            probes.append(np.asarray(recorded_obs, dtype=np.float32).reshape(-1, obs_dim))
        diffs = [check_parity(policy, model_bytes, p.astype(np.float32)) for p in probes] if not noise_dim else [
            check_parity(policy, model_bytes, p.astype(np.float32), noise=noise)
            for p in probes for noise in (np.zeros((len(p), noise_dim)), rng.normal(size=(len(p), noise_dim)))]
        num_probes = sum(len(p) for p in probes)

    onnx.checker.check_model(model)
    with atomic_write(output) as tmp:
        tmp.write_bytes(model_bytes)
    return {"path": str(output), "max_abs_diff": max(diffs), "num_probes": num_probes}
