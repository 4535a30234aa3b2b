"""Cost models: G-Sparse's DNN and LO-SpMM's LambdaMART rank model.

Both train on ``(features [n, d], times_ms [n], groups [n])`` and predict a cost (lower is
faster) with NumPy alone; the rank model needs LightGBM only to train.
"""

from .dnn import DnnCostModel
from .rank import RankModel, relevance_grades
from .trees import TreeEnsemble

__all__ = ["DnnCostModel", "RankModel", "TreeEnsemble", "relevance_grades"]
