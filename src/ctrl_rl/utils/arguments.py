"""An ``argparse`` parser whose errors are one line naming the fix, for every ``ctrl-rl`` command.

argparse prints the whole usage block before its error (12 lines for ``deploy sim2sim``); here the
error comes alone, with the subcommand and where to read its options.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """``error()`` prints ``<prog>: error: <message> (<prog> --help lists the options)`` and exits 2;
    subparsers made by :meth:`add_subparsers` are of this class too."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")
        raise SystemExit(2)
