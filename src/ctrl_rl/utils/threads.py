"""One CPU thread plan per process: torch's operator threads and MuJoCo's worker pool sized together.

A training iteration alternates phases: the physics step (MuJoCo's ``rollout`` pool on CPU), the
policy's inference, storage, then the update (torch's intra-op OpenMP team). They never run at the
same time, so each may use every core it is given. What does not work is torch's OpenMP team on a
machine where anything else is running: its workers wait for each other at every operator's
barrier, and a worker the kernel has descheduled stalls the whole team. Measured on this project's
2-core machine (pendulum, 20 PPO iterations, ``docs/experiments/threads.md``): idle, 1 thread 7.5 s
and 2 threads 6.7 s; beside two busy loops, 1 thread 11.9 s and 2 threads 90.8 s (28 s with
``OMP_WAIT_POLICY=PASSIVE``). MuJoCo's pool hands whole worlds to workers that block instead of
spinning, and degrades in proportion.

So the plan, unless ``threads=N`` says otherwise: torch's operators on 1 thread (at most ~10 %
slower on an idle machine, never 12x slower on a busy one), MuJoCo's pool on every core this
process may use, shared among the processes torchrun started on this machine
(``LOCAL_WORLD_SIZE``). ``threads=N``: both get ``N``. Busy threads never exceed the cores either
way, because the phases take turns.

``update_threads=N`` gives the learner's update alone ``N`` torch threads (:func:`for_update`), the
rollout's small per-step operators keeping theirs: the update's large batched matmuls are where a
second core pays on an idle machine (the gait recipe's PPO update on 2 cores: 1.28 s -> 0.74 s per
iteration, its rollout 0.85 s either way; ``docs/experiments/threads.md``). It is an option for a machine
one has to oneself (the gait recipe's preset leaves it off: its rows are measured at 1 thread, and the two
counts do not give bit-identical updates); on a busy one it is the team that stalls.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator

import torch


@dataclasses.dataclass(frozen=True)
class ThreadPlan:
    cores: int
    """CPUs this process may run on (its affinity mask: ``taskset``, cgroup cpusets)."""
    torch_threads: int
    """Threads of torch's CPU operators (``torch.set_num_threads``)."""
    physics_threads: int
    """Workers of MuJoCo's CPU rollout pool (``sim=mujoco``)."""
    requested: int | None = None
    """The ``threads`` key this came from (None: the plan's own choice)."""
    update_threads: int | None = None
    """Torch threads during the learner's update (``update_threads``; None: ``torch_threads``)."""

    def describe(self) -> str:
        how = f"threads={self.requested}" if self.requested else "auto; threads=N to change"
        update = f", {self.update_threads} torch in the update" if self.update_threads else ""
        return f"{self.torch_threads} torch, {self.physics_threads} physics of {self.cores} cores{update} ({how})"


def available_cores() -> int:
    """CPUs this process may run on."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # macOS / Windows: no affinity API
        return os.cpu_count() or 1


def _positive(key: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{key}: must be a positive integer or null, got {value!r} (e.g. {key}=2)")


def plan_threads(requested: int | None = None, cores: int | None = None, processes: int | None = None,
                 update: int | None = None) -> ThreadPlan:
    """The plan for ``threads=requested`` (and ``update_threads=update``) on a machine with ``cores`` usable
    CPUs shared by ``processes`` training processes (default: torchrun's ``LOCAL_WORLD_SIZE``, else 1);
    module docstring."""
    _positive("threads", requested)
    _positive("update_threads", update)
    cores = available_cores() if cores is None else cores
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1")) if processes is None else processes
    if requested is not None:
        return ThreadPlan(cores, requested, requested, requested, update)
    return ThreadPlan(cores, 1, max(1, cores // max(processes, 1)), None, update)


_PLAN: ThreadPlan | None = None


def configure(requested: int | None = None, update: int | None = None) -> ThreadPlan:
    """Choose this process's plan and apply torch's part; later calls re-apply a changed request."""
    global _PLAN
    _PLAN = plan_threads(requested, update=update)
    torch.set_num_threads(_PLAN.torch_threads)
    return _PLAN


@contextlib.contextmanager
def for_update() -> Iterator[None]:
    """The learner's update on the plan's ``update_threads`` (none: nothing changes), torch's own after."""
    want, before = current().update_threads, torch.get_num_threads()
    if want is None or want == before:
        yield
        return
    torch.set_num_threads(want)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def current() -> ThreadPlan:
    """The plan :func:`configure` chose, or the automatic one (not applied to torch) before that."""
    return _PLAN if _PLAN is not None else plan_threads()
