"""Manipulation with fixed-base arms (``sim=mujoco``, ``sim=mjwarp``) on the arm robots of
``ctrl_rl.robots.arm`` (the YAM from mjlab's wheel: ``robots/i2rt_yam.yaml``), on one base (``arm_task.py``,
``arm_config.py``): reach an end-effector pose target (``reach.py``, its parameters in ``reach_config.py``)
lift a cube to a target height (``lift.py``, ``lift_config.py``) and insert a held peg into a hole with 1 mm of
clearance per side (``insert.py``, ``insert_config.py``), their reward terms and success rules
(``rewards.py``), their scripted experts for demonstrations (``experts.py``: ``ctrl-rl collect scripted``) and
their tuned settings (``tune/``). docs/manipulation.md."""
