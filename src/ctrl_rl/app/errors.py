"""How a command's failure reaches the person at the terminal: one line on stderr and an exit code
(2: a config or input error, 3: a numerical or parity failure, 1: a gait bar missed, 130: Ctrl-C),
naming the extra to install where an optional dependency is missing. ``CTRL_RL_DEBUG=1`` keeps the
full traceback.

Imports the parts whose errors it names (torch among them), so the parser in ``cli.py`` imports it
only for a training command; ``ctrl-rl deploy`` has its own.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ctrl_rl import distributed
from ctrl_rl.config import ConfigError
from ctrl_rl.deploy.gait_report import GaitCheckFailed
from ctrl_rl.env import RenderUnavailableError, SimulationError
from ctrl_rl.export.onnx_policy import ParityError
from ctrl_rl.utils.extras import missing
from ctrl_rl.utils.files import describe_os_error
from ctrl_rl.utils.guards import NonFiniteError
from ctrl_rl.utils.interrupts import Interrupted
from ctrl_rl.utils.video import VideoUnavailableError


def die(msg: str, code: int = 2) -> None:
    print(f"ctrl-rl: error: {msg}", file=sys.stderr)
    raise SystemExit(code)


def run_command(args: argparse.Namespace, extra: list[str]) -> None:
    """``args.func(args, extra)``, its known failures turned into one line and an exit code."""
    if os.environ.get("CTRL_RL_DEBUG"):  # full tracebacks for bug reports
        try:
            args.func(args, extra)
        finally:
            distributed.shutdown()
        return
    try:
        args.func(args, extra)
    except ConfigError as exc:
        die(str(exc))
    except (FileNotFoundError, ValueError, RenderUnavailableError, VideoUnavailableError) as exc:
        die(str(exc))
    except OSError as exc:  # a full disk, a read-only log root: the path and what the system said
        die(describe_os_error(exc))
    except (NonFiniteError, ParityError, SimulationError) as exc:
        die(str(exc), code=3)
    except GaitCheckFailed as exc:  # the run worked; the gait it measured does not meet a bar
        print(f"ctrl-rl: gait check failed: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except Interrupted as exc:
        run = f"; resume with --checkpoint {Path(exc.path).parent}" if exc.path else ""
        print(f"ctrl-rl: {exc}{run}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except ModuleNotFoundError as exc:  # an optional dependency: one line naming its extra
        message = missing(exc, f"ctrl-rl {args.command}")
        if message is None:
            raise
        die(message)
    finally:
        distributed.shutdown()  # under torchrun: leave the process group cleanly

