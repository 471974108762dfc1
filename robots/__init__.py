"""Robot descriptions and tasks (``ctrl_rl.robots``).

Backend-neutral robot definitions (MJCF, joint order, default pose, PD gains) and tasks
written against a state view shared by every MuJoCo-family backend. The classic-control
tasks of the foundation live with their pure-torch dynamics in ``ctrl_rl.sims.torch_envs``.
"""
