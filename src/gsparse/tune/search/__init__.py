"""Search strategies: ask/tell loops that propose schedules to measure, and exhaustive
search, the oracle they are judged against."""

from .base import Scorer, SearchStrategy, StrategyBase, model_scorer
from .exhaustive import FINALISTS, exhaustive_search
from .genetic import GeneticSearch
from .random_sampling import RandomSampling

__all__ = ["FINALISTS", "GeneticSearch", "RandomSampling", "Scorer", "SearchStrategy", "StrategyBase",
           "exhaustive_search", "model_scorer"]
