"""Scheme tuning of the sparse triangular solve: the oracle, measured on the user's factor.

Every scheme of a space (the selector's 54 by default, the reduced space's 1,680 on request)
is planned for the factor, run on the caller's right-hand sides, checked against a float64
reference, and timed (CUDA events around its device work, the median of repeats), through
the tuning loop (:func:`gsparse.tune.tune`: a builder, a runner, the database). Every
sample goes to the tuning database (:mod:`~gsparse.tune.database`), failures with their
error, under a key of the GPU, the task, the factor's pattern and :data:`CODEGEN_VERSION`;
the best one too. An analysed solve of a factor with the same pattern and task then runs the
recorded scheme (:func:`recorded_scheme`, which :class:`~gsparse.TriangularSolver` hands
to its :class:`~gsparse.kernels.sptrsv.FactorPlans`) before asking the selector or the hand
rule.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch

from ..kernels.schedule import schedule_from_json
from ..kernels.sptrsv import FactorPlans
from ..kernels.sptrsv.schedule import SptrsvSchedule
from ..kernels.sptrsv.space import reduced_space, selection_space
from ..kernels.sptrsv.task import SptrsvTask
from ..target import Target
from .builder import ParallelBuilder
from .database import TuningDatabase, TuningKey
from .interfaces import Builder, Runner
from .loop import CONFIRM_FINALISTS, TuneResult, tune
from .runner import CallRunner
from .search import RandomSampling
from .select import current_database, spread_positions
from .space import CandidateSpace

__all__ = ["CODEGEN_VERSION", "SPACES", "factor_signature", "recorded_scheme", "tune_factor", "tuning_key"]

CODEGEN_VERSION = "sptrsv-2026-11-28"
"""The SpTRSV kernels' version, part of every key: a record of another version never
matches (change it with the generated code or the plans' layout)."""
SPACES = {"selection": selection_space, "reduced": reduced_space}
"""The spaces :func:`tune_factor` measures by name."""
# Entries of each index array in the signature's sample.
_SAMPLED = 4096


def factor_signature(plans: FactorPlans) -> str:
    """A digest of the factor's sizes, orientation and 4,096 entries of each of its CSR
    arrays spread over them: one transfer, the same on every device. Kept with ``plans``."""
    if plans.signature is None:
        picks = [array[spread_positions(array.numel(), _SAMPLED, array.device)] for array in (plans.crow, plans.col)
                 if array.numel()]
        sample = torch.cat(picks).cpu().numpy().tobytes() if picks else b""
        digest = hashlib.blake2b(digest_size=16)
        digest.update(f"{plans.n}:{plans.nnz}:{plans.lower}".encode())
        digest.update(sample)
        plans.signature = digest.hexdigest()
    return plans.signature


def tuning_key(plans: FactorPlans, task: SptrsvTask, target: Target) -> TuningKey:
    """The database key of ``task`` on the factor of ``plans`` and ``target``."""
    return TuningKey(target=f"{target.name}|{target.arch}|{target.sms}", operator=f"sptrsv:{task.algorithm}",
                     graph=factor_signature(plans), feature_shape=[task.num_rhs],
                     dtype=str(task.dtype).removeprefix("torch."), codegen=CODEGEN_VERSION)


def recorded_scheme(plans: FactorPlans, task: SptrsvTask, target: Target) -> SptrsvSchedule | None:
    """The scheme the tuning database records as the best for ``task`` on this factor and
    ``target``; None where there is no database, no record, or one this version cannot
    read. Without a database file nothing is read from the GPU."""
    database = current_database()
    if database is None:
        return None
    record = database.get_best(tuning_key(plans, task, target))
    if record is None:
        return None
    try:
        scheme = schedule_from_json(record.schedule_json)
    except ValueError:
        return None
    return scheme if isinstance(scheme, SptrsvSchedule) else None


def tune_factor(plans: FactorPlans, task: SptrsvTask, target: Target, values: torch.Tensor, b: torch.Tensor,
                reference: torch.Tensor, database: TuningDatabase, *,
                schemes: str | Sequence[SptrsvSchedule] = "selection", builder: Builder | None = None,
                runner: Runner | None = None, progress: bool | None = None) -> TuneResult:
    """Measure every scheme of ``schemes`` on ``task`` and record them; the fastest is the
    result's ``best``, after the fastest few (within 10% of it) were measured again side by
    side (``CONFIRM_FINALISTS`` of the tuning loop). Schemes measured before for the
    same key are read back, not measured again.

    Args:
        plans: the factor's plans (on ``b``'s GPU).
        task: the solve; ``values`` ``[nnz]`` (canonical order) and ``b`` ``[n]`` or
            ``[n, k]`` its inputs.
        reference: ``[n]`` or ``[n, k]`` as ``b``, the solution each scheme's output must
            match (``b``'s dtype; the runner's tolerance: 1e-10 relative in float64, 1e-4 in
            float32).
        schemes: ``"selection"``, ``"reduced"`` (:data:`SPACES`) or a list of schemes.
        builder, runner: replacements for the plan builder and the GPU runner (tests).
        progress: a progress bar on stderr; None: only when stderr is a terminal.
    """
    if isinstance(schemes, str):
        if schemes not in SPACES:
            raise ValueError(f"schemes must be one of {sorted(SPACES)} or a list of SptrsvSchedule, got {schemes!r}")
        candidates = SPACES[schemes]()
    else:
        candidates = list(schemes)
        if not candidates or not all(isinstance(s, SptrsvSchedule) for s in candidates):
            raise TypeError("schemes must be a non-empty list of SptrsvSchedule")
    space = CandidateSpace(dict.fromkeys(s.validate() for s in candidates))
    built: dict[SptrsvSchedule, object] = {}

    def plan_of(scheme: SptrsvSchedule) -> object:
        # A finalist read back from the database is confirmed without a build of this call.
        if scheme not in built:
            built[scheme] = plans.build_plan(task, scheme, target)
        return built[scheme]

    # One thread: plans are PyTorch ops on the factor's device, in order.
    builder = builder or ParallelBuilder(plan_of, workers=1)
    runner = runner or CallRunner(lambda scheme: plan_of(scheme)(values, b), reference, b.device)
    return tune(space, RandomSampling(space), builder, runner, database, tuning_key(plans, task, target),
                budget=len(space), progress=progress, confirm=CONFIRM_FINALISTS)
