"""The application layer: what each ``ctrl-rl`` command does, as plain functions.

One module per command (``train``, ``evaluate``, ``play``, ``export``, ``collect``), the config
composition they share (``configure``) and run directories, checkpoints and envs (``session``).
The training core (learners, runners, storage, nets) never imports from here.
"""
