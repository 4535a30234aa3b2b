"""Search strategies: ask/tell loops that propose schedules to measure."""

from .base import Scorer, SearchStrategy, StrategyBase, model_scorer
from .genetic import GeneticSearch
from .random_sampling import RandomSampling

__all__ = ["GeneticSearch", "RandomSampling", "Scorer", "SearchStrategy", "StrategyBase", "model_scorer"]
