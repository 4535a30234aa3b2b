"""Progress bars for long steps: on stderr, only when it is a terminal, quiet otherwise."""

from __future__ import annotations

import sys
from typing import Any


class Progress:
    """A progress bar over ``total`` units of work.

    A tqdm bar when tqdm is installed, else one rewritten line; nothing at all when stderr is
    not a terminal (logs, CI, pipes) unless ``show`` says otherwise. :meth:`write` prints a
    line above the bar (or plainly to stdout when there is no bar).

    Args:
        total: units of work, or ``None`` when unknown.
        desc: what is being done, e.g. ``"generating reddit-like"``.
        unit: the name of one unit, e.g. ``"cell"``.
        show: ``True`` / ``False`` to force; ``None``: only when stderr is a terminal.
    """

    def __init__(self, total: int | None, desc: str, unit: str = "step", show: bool | None = None) -> None:
        self.shown = _stderr_is_terminal() if show is None else show
        self.total, self.desc, self.unit, self.count = total, desc, unit, 0
        self._bar: Any = None
        if self.shown:
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self._bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False,
                             dynamic_ncols=True)

    def update(self, n: int = 1, note: str | None = None) -> None:
        """``n`` more units done; ``note`` (optional) says what comes next."""
        self.count += n
        if not self.shown:
            return
        if self._bar is not None:
            if note is not None:
                self._bar.set_postfix_str(note, refresh=False)
            self._bar.update(n)
        else:
            done = f"{self.count}/{self.total}" if self.total else str(self.count)
            sys.stderr.write(f"\r\033[K{self.desc}: {done} {self.unit}s" + (f" ({note})" if note else ""))
            sys.stderr.flush()

    def write(self, line: str) -> None:
        """Print ``line`` to stdout, above the bar."""
        if self._bar is not None:
            self._bar.write(line, file=sys.stdout)
        else:
            if self.shown and self.count:
                sys.stderr.write("\r\033[K")
            print(line, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.shown and self.count:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
        self.shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
