"""User errors of the ``gsparse`` commands: one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
from typing import NoReturn


class UsageError(Exception):
    """A user error of a command (a bad flag value, a missing file): printed as one line."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors raised as :class:`UsageError` (no usage block)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def one_line(error: UsageError) -> str:
    """The error's message on one line."""
    return " ".join(str(error).split())
