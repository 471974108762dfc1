"""Does ctrl_humanoid learn to walk on 2 CPU cores within 2 hours? Train, evaluate, film.

Trains ``task=humanoid_velocity_flat`` on ``sim=mujoco`` with the task's default config (or
``--iterations``), then evaluates the deterministic policy with every env commanded 0.5 m/s
forward for full 20 s episodes (pushes off, the rest of the randomization on), and records a
video. Pass bar (issue 25): mean forward velocity >= 0.4 m/s, no falls, training <= 120 min.
The same script as ``quadruped_walk.py``, on the humanoid, evaluated **without observation
noise**, as the deploy node feeds it (a probe policy walked with noise and stood still without).

Usage::

    python benchmarks/humanoid_walk.py                    # the default budget
    python benchmarks/humanoid_walk.py --iterations 5     # smoke run
    python benchmarks/humanoid_walk.py --checkpoint logs/ppo/humanoid_velocity_flat/<run>  # evaluate only
"""

from __future__ import annotations

from quadruped_walk import main

if __name__ == "__main__":
    main("humanoid_velocity_flat", budget_minutes=120.0, doc=__doc__, noise_free=True)
