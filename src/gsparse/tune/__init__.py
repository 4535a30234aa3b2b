"""The tuner: search spaces, search strategies, builders, runners, cost models, a database,
and how candidates are measured (``gsparse.tune.measure``).

Shaped like TVM MetaSchedule: each piece is a small protocol (``gsparse.tune.interfaces``) with one
or two implementations, and :func:`tune` ties them together::

    space = CandidateSpace(schedules)                  # or an operator's pruned space
    strategy = GeneticSearch(space, scorer=model_scorer(model, featurize))
    result = tune(space, strategy, ParallelBuilder(compile_fn), runner,
                  TuningDatabase(), key, budget=46)

A failure to build or run is a record with its error, never an exception that stops
tuning. Operators, features and the real builder and runner live with the kernels; this
package knows schedules only as frozen dataclasses with a JSON round trip.
"""

# Names load their module on first use: importing gsparse (whose CUDA backend asks
# gsparse.tune.select for schedules) must not pay for SciPy's statistics or the models.
_EXPORTS = {
    "BestRecord": ".database",
    "BuildResult": ".interfaces",
    "Builder": ".interfaces",
    "CandidateSpace": ".space",
    "CostModel": ".interfaces",
    "DnnCostModel": ".models",
    "Evaluation": ".metrics",
    "GeneticSearch": ".search",
    "ParallelBuilder": ".builder",
    "RandomSampling": ".search",
    "RankModel": ".models",
    "RunResult": ".interfaces",
    "Runner": ".interfaces",
    "Sample": ".database",
    "Schedule": ".interfaces",
    "Scorer": ".search",
    "SearchSpace": ".interfaces",
    "SearchStrategy": ".search",
    "SimulatedRunner": ".simulated",
    "SpaceIndex": ".space",
    "Timing": ".measure",
    "TuneResult": ".loop",
    "TuningDatabase": ".database",
    "TuningDatabaseWarning": ".database",
    "TuningKey": ".database",
    "compile_ahead": ".measure",
    "crossover": ".space",
    "default_database_path": ".database",
    "evaluate": ".metrics",
    "exhaustive_search": ".search",
    "model_scorer": ".search",
    "mutate": ".space",
    "pearson": ".metrics",
    "repair": ".space",
    "sample": ".space",
    "spearman": ".metrics",
    "time_calls": ".measure",
    "top_k_regret": ".metrics",
    "tune": ".loop",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'gsparse.tune' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value


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
