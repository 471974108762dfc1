"""Manipulation with fixed-base arms (``sim=mujoco``, ``sim=mjwarp``) on the arm robots of
``ctrl_rl.robots.arm`` (the YAM from mjlab's wheel: ``robots/i2rt_yam.yaml``): reach an end-effector pose
target (``reach.py``, its parameters in ``reach_config.py``, its reward terms and success rule in
``rewards.py``) and its tuned settings (``tune/``). docs/manipulation.md."""
