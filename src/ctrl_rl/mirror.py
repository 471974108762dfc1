"""Left/right mirror maps: signed permutations of observations and actions.

A robot that is symmetric about its sagittal (x-z) plane has a mirrored twin of every state: the
left legs do what the right legs did, lateral velocities and roll/yaw rates change sign. In a
vector that is a *signed permutation* ``mirror(x)[i] = sign[i] * x[perm[i]]``, and mirroring twice
gives ``x`` back. The env declares one per observation term and one for its actions
(:meth:`ctrl_rl.env.VecEnv.mirror`); the PPO family uses them to augment minibatches with mirrored
samples and/or to add a mirror loss on the actor (``algo.symmetry``, ``ctrl_rl.algos.symmetry``).

Numpy holds the maps; :meth:`SignedPerm.__call__` applies one to numpy arrays or torch tensors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class SignedPerm:
    """``x -> sign * x[..., perm]``: an involution (its own inverse), checked when built."""

    perm: np.ndarray
    """``[d]`` int64: output element ``i`` is input element ``perm[i]``."""
    sign: np.ndarray
    """``[d]`` float32 of +-1."""
    _cache: dict[Any, tuple[Any, Any]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        perm = np.asarray(self.perm, dtype=np.int64).reshape(-1)
        sign = np.asarray(self.sign, dtype=np.float32).reshape(-1)
        object.__setattr__(self, "perm", perm)
        object.__setattr__(self, "sign", sign)
        d = perm.size
        if sign.size != d or sorted(perm.tolist()) != list(range(d)):
            raise ValueError(f"a mirror map needs a permutation of 0..{d - 1} and one sign per element, got "
                             f"perm {perm.tolist()} and {sign.size} signs")
        if not np.all(np.abs(sign) == 1.0):
            raise ValueError(f"mirror signs must be +1 or -1, got {sign.tolist()}")
        if not (np.array_equal(perm[perm], np.arange(d)) and np.all(sign * sign[perm] == 1.0)):
            raise ValueError(f"mirror map perm {perm.tolist()} sign {sign.tolist()} is not its own inverse: "
                             "pairs must map to each other with the same sign")

    @property
    def dim(self) -> int:
        return int(self.perm.size)

    @classmethod
    def identity(cls, dim: int) -> SignedPerm:
        return cls(np.arange(dim), np.ones(dim))

    @classmethod
    def signs(cls, signs: Sequence[float]) -> SignedPerm:
        """Each element keeps its place and is multiplied by its sign (a vector reflected in y)."""
        return cls(np.arange(len(signs)), np.asarray(signs))

    @classmethod
    def concat(cls, parts: Sequence[SignedPerm]) -> SignedPerm:
        """The map of the concatenated vector: each part mirrored within its own slice."""
        offsets = np.cumsum([0, *[p.dim for p in parts]])
        if not parts:
            return cls.identity(0)
        return cls(np.concatenate([p.perm + o for p, o in zip(parts, offsets, strict=False)]),
                   np.concatenate([p.sign for p in parts]))

    def restrict(self, index: Sequence[int]) -> SignedPerm:
        """The map of the sub-vector ``x[..., index]`` (e.g. the joints a policy moves); the elements
        must map among themselves."""
        index = [int(i) for i in index]
        where = {j: k for k, j in enumerate(index)}
        outside = [j for j in index if int(self.perm[j]) not in where]
        if outside:
            raise ValueError(f"mirror map: element(s) {outside} map outside the selection {index}")
        return SignedPerm(np.array([where[int(self.perm[j])] for j in index]), self.sign[index])

    def tile(self, frames: int) -> SignedPerm:
        """The map of ``frames`` stacked copies (an observation history: every frame mirrored alike)."""
        return SignedPerm.concat([self] * frames)

    def __call__(self, x: Any) -> Any:
        """``x`` ``[..., dim]`` (numpy or torch) mirrored."""
        if type(x).__module__.startswith("torch"):
            import torch

            key = (x.device, x.dtype)
            if key not in self._cache:
                self._cache[key] = (torch.as_tensor(self.perm, device=x.device),
                                    torch.as_tensor(self.sign, device=x.device, dtype=x.dtype))
            perm, sign = self._cache[key]
            return x.index_select(-1, perm) * sign
        return np.asarray(x)[..., self.perm] * self.sign.astype(np.asarray(x).dtype, copy=False)


def pair_points(points: np.ndarray, tol: float = 1e-6) -> np.ndarray:
    """``perm`` with ``points[perm[i]]`` the reflection of ``points[i]`` in the x-z plane (``[n, k]`` with
    y in column 1): how a set of feet or scan points maps onto itself. Errors when one has no twin."""
    points = np.asarray(points, dtype=np.float64)
    reflected = points.copy()
    reflected[:, 1] *= -1.0
    dist = np.linalg.norm(reflected[:, None, :] - points[None, :, :], axis=-1)
    perm = dist.argmin(1)
    lonely = np.flatnonzero(dist[np.arange(len(points)), perm] > tol)
    if lonely.size:
        raise ValueError(f"point(s) {lonely.tolist()} ({points[lonely].tolist()}) have no mirror twin within {tol}: "
                         "the layout is not symmetric about the x-z plane")
    return perm


@dataclass(frozen=True)
class EnvMirror:
    """An env's mirror maps: per observation group, one map per term (as ``VecEnv.obs_terms()`` lists
    them, each term's history frames included), and one for the actions."""

    terms: Mapping[str, Sequence[SignedPerm]]
    actions: SignedPerm

    @classmethod
    def of_terms(cls, obs_terms: Mapping[str, Sequence[Any]], specs: Mapping[str, Any],
                 parts: Mapping[str, SignedPerm]) -> EnvMirror:
        """Each observation term's map (its history frames included) from ``specs``: term name -> a name in
        ``parts`` (``"joints"``) or a sign per element; the actions' is ``parts["actions"]``."""
        terms: dict[str, list[SignedPerm]] = {}
        for group, group_terms in obs_terms.items():
            terms[group] = []
            for t in group_terms:
                spec = specs[t.name]
                m = parts[spec] if isinstance(spec, str) else SignedPerm.signs(spec)
                if m.dim != t.dim:
                    raise ValueError(f"mirror of term {t.name!r} has {m.dim} elements, the term {t.dim}")
                terms[group].append(m.tile(t.history))
        return cls(terms, parts["actions"])

    def group(self, name: str) -> SignedPerm:
        if name not in self.terms:
            raise ValueError(f"the env declares no mirror for observation group {name!r}; it has {sorted(self.terms)}")
        return SignedPerm.concat(list(self.terms[name]))

    def input(self, groups: Sequence[str]) -> SignedPerm:
        """The map of a network input that concatenates ``groups`` in order (``algo.actor_obs``)."""
        return SignedPerm.concat([self.group(g) for g in groups])

    def with_history(self, lengths: Mapping[str, Sequence[int]]) -> EnvMirror:
        """The maps once the terms of ``lengths``' groups stack that many frames each."""
        terms = {g: [m.tile(h) for m, h in zip(maps, lengths[g], strict=True)] if g in lengths else list(maps)
                 for g, maps in self.terms.items()}
        return EnvMirror(terms, self.actions)
