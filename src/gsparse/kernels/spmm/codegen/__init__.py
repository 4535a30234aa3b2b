"""g-SpMM code generation: (algorithm, schedule) -> a :class:`~gsparse.kernels.source.Program`.

Pure: no GPU needed. The algorithm — the message ``a ⊕ b`` and the reducer Φ — is spliced
as inline device code into the skeleton the schedule's type names, whose loops its knobs
shape. One module per skeleton; :mod:`.walk` holds the pieces they share.
"""

from __future__ import annotations

import functools

from ..schedule import ColumnTiled, OnePass, OutputTiled, SplitRows, SpmmSchedule
from ..task import SpmmAlgorithm
from ...source import Program
from . import column_tiled, one_pass, output_tiled, split_rows

__all__ = ["program"]


def program(algorithm: SpmmAlgorithm, schedule: SpmmSchedule, num_features: int) -> Program:
    """The program that runs ``algorithm`` under ``schedule`` (validated first) for
    ``num_features`` features, generated once per distinct input.

    Only the output-tiled skeleton specialises its program on the feature count; the
    others share one program across feature counts.
    """
    if not isinstance(schedule, OutputTiled):
        num_features = 0
    return _program(algorithm, schedule, num_features)


@functools.lru_cache(maxsize=4096)
def _program(algorithm: SpmmAlgorithm, schedule: SpmmSchedule, num_features: int) -> Program:
    schedule.validate()
    if isinstance(schedule, OnePass):
        return one_pass.generate(algorithm, schedule)
    if isinstance(schedule, SplitRows):
        return split_rows.generate(algorithm, schedule)
    if isinstance(schedule, ColumnTiled):
        return column_tiled.generate(algorithm, schedule)
    if isinstance(schedule, OutputTiled):
        return output_tiled.generate(algorithm, schedule, num_features)
    raise TypeError(f"schedule must be a g-SpMM schedule, got {type(schedule).__name__}")
