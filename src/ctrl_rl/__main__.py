"""``python -m ctrl_rl ...`` (and ``torchrun -m ctrl_rl train ...``): the ``ctrl-rl`` command."""

from ctrl_rl.app.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
