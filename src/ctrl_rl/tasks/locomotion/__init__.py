"""Velocity tracking on legged robots (``sim=mujoco``, ``sim=mjwarp``): the flat quadruped task
(``locomotion.py``), its rough-terrain and humanoid variants (``rough.py``, ``humanoid.py``), their
parameters (``velocity_config.py``), the helpers only they use, and their tuned settings (``tune/``)."""
