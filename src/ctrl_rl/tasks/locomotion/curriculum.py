"""The terrain curriculum of legged_gym: each env climbs or descends the difficulty rows.

At an episode's end an env moves **up** a row when it walked farther than half a sub-terrain
from where it spawned, and **down** when it walked less than half the distance its command
asked for over a full episode; an env that climbs past the hardest row is sent to a random
row (so the hardest terrain keeps being mixed with the rest instead of piling up). Columns
(terrain types) stay fixed per env, spread evenly over the grid.
"""

from __future__ import annotations

import torch


def next_levels(levels: torch.Tensor, distance: torch.Tensor, commanded: torch.Tensor, sub_size: float,
                num_levels: int, random_levels: torch.Tensor) -> torch.Tensor:
    """New levels after an episode: the promotion/demotion rule above, as a pure function.

    ``distance``: metres walked from the spawn point; ``commanded``: metres the command asked
    for over a whole episode; ``random_levels``: where envs past the top row go.
    """
    up = distance > sub_size / 2
    down = (distance < commanded * 0.5) & ~up
    new = levels + up.long() - down.long()
    return torch.where(new >= num_levels, random_levels, new.clamp(min=0))


class TerrainCurriculum:
    """Per-env row (level) and column (type) on the terrain grid."""

    def __init__(self, num_envs: int, num_levels: int, num_types: int, max_init_level: int, enabled: bool,
                 device: torch.device) -> None:
        self.num_envs, self.num_levels, self.num_types = num_envs, num_levels, num_types
        self.max_init_level = min(max(0, int(max_init_level)), num_levels - 1)
        self.enabled = enabled
        self.levels = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.types = torch.div(torch.arange(num_envs, device=device) * num_types, num_envs, rounding_mode="floor")
        """Column of each env: an even split of the envs over the columns, fixed for the run."""
        self._masks: dict[str, torch.Tensor] | None = None

    def start(self, gen: torch.Generator) -> None:
        """Initial rows: uniform in ``0..max_init_level`` (curriculum) or over every row (none)."""
        top = self.max_init_level + 1 if self.enabled else self.num_levels
        self.levels = torch.randint(0, top, (self.num_envs,), generator=gen, device=self.levels.device)

    def update(self, rows: torch.Tensor, distance: torch.Tensor, commanded: torch.Tensor, sub_size: float,
               gen: torch.Generator) -> None:
        """Move the envs in ``rows`` (bool ``[N]``) by :func:`next_levels`; no-op when disabled."""
        if not self.enabled:
            return
        random_levels = torch.randint(0, self.num_levels, (self.num_envs,), generator=gen, device=self.levels.device)
        new = next_levels(self.levels, distance, commanded, sub_size, self.num_levels, random_levels)
        self.levels = torch.where(rows, new, self.levels)

    def log(self, type_names: list[str]) -> dict[str, torch.Tensor]:
        """``Curriculum/terrain_level`` (mean row over envs) and one mean per terrain type present."""
        if self._masks is None:
            self._masks = {}
            for name in dict.fromkeys(type_names):
                cols = torch.tensor([i for i, t in enumerate(type_names) if t == name], device=self.types.device)
                mask = torch.isin(self.types, cols)
                if bool(mask.any()):
                    self._masks[name] = mask
        level = self.levels.float()
        out = {"Curriculum/terrain_level": level.mean()}
        out.update({f"Curriculum/terrain_level/{name}": level[mask].mean() for name, mask in self._masks.items()})
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"levels": self.levels.clone(), "types": self.types.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.levels = state["levels"].to(self.levels.device).clone()
        self.types = state["types"].to(self.types.device).clone()
        self._masks = None
