"""The tuner: search spaces, search strategies, builders, runners, cost models, a database,
and how candidates are measured (:mod:`.measure`).

Shaped like TVM MetaSchedule: each piece is a small protocol (:mod:`.interfaces`) with one
or two implementations, and :func:`tune` ties them together::

    space = CandidateSpace(schedules)                  # or an operator's pruned space
    strategy = GeneticSearch(space, scorer=model_scorer(model, featurize))
    result = tune(space, strategy, ParallelBuilder(compile_fn), runner,
                  TuningDatabase(), key, budget=46)

A failure to build or run is a record with its error, never an exception that stops
tuning. Operators, features and the real builder and runner live with the kernels; this
package knows schedules only as frozen dataclasses with a JSON round trip.
"""

from .builder import ParallelBuilder
from .database import (
    BestRecord,
    Sample,
    TuningDatabase,
    TuningDatabaseWarning,
    TuningKey,
    default_database_path,
)
from .interfaces import Builder, BuildResult, CostModel, Runner, RunResult, Schedule, SearchSpace
from .loop import TuneResult, tune
from .measure import Timing, compile_ahead, time_calls
from .metrics import Evaluation, evaluate, pearson, spearman, top_k_regret
from .models import DnnCostModel, RankModel
from .search import GeneticSearch, RandomSampling, Scorer, SearchStrategy, exhaustive_search, model_scorer
from .simulated import SimulatedRunner
from .space import CandidateSpace, SpaceIndex, crossover, mutate, repair, sample

__all__ = [
    "BestRecord",
    "BuildResult",
    "Builder",
    "CandidateSpace",
    "CostModel",
    "DnnCostModel",
    "Evaluation",
    "GeneticSearch",
    "ParallelBuilder",
    "RandomSampling",
    "RankModel",
    "RunResult",
    "Runner",
    "Sample",
    "Schedule",
    "Scorer",
    "SearchSpace",
    "SearchStrategy",
    "SimulatedRunner",
    "SpaceIndex",
    "Timing",
    "TuneResult",
    "TuningDatabase",
    "TuningDatabaseWarning",
    "TuningKey",
    "compile_ahead",
    "crossover",
    "default_database_path",
    "evaluate",
    "exhaustive_search",
    "model_scorer",
    "mutate",
    "pearson",
    "repair",
    "sample",
    "spearman",
    "time_calls",
    "top_k_regret",
    "tune",
]
