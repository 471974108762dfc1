"""Multi-layer perceptrons."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from ctrl_rl.config import ACTIVATIONS as ACTIVATION_NAMES

ACTIVATIONS: dict[str, type[nn.Module]] = dict(zip(
    ACTIVATION_NAMES, (nn.ELU, nn.ReLU, nn.Tanh, nn.SiLU, nn.GELU, nn.LeakyReLU), strict=True))


def mlp(
    in_dim: int,
    hidden: Sequence[int],
    out_dim: int,
    activation: str = "elu",
    out_gain: float | None = None,
) -> nn.Sequential:
    """``in -> hidden... -> out`` with ``activation`` between layers, none after the last.

    ``out_gain`` scales the last layer's orthogonal init (small for policy means, as in
    Andrychowicz et al. 2021, "What Matters in On-Policy RL"); ``None`` keeps torch's default.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation '{activation}'; choose one of: {', '.join(ACTIVATIONS)}")
    layers: list[nn.Module] = []
    dims = [in_dim, *hidden]
    for d_in, d_out in zip(dims[:-1], dims[1:], strict=True):
        layers += [nn.Linear(d_in, d_out), ACTIVATIONS[activation]()]
    last = nn.Linear(dims[-1], out_dim)
    if out_gain is not None:
        nn.init.orthogonal_(last.weight, gain=out_gain)
        nn.init.zeros_(last.bias)
    layers.append(last)
    return nn.Sequential(*layers)
