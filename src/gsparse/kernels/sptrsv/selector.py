r"""AG-SpTRSV's lightweight scheme selector (§4.5): an MLP from matrix features to schemes.

Input: the 10 features of :mod:`.features`, count-like ones through ``log1p`` (ours: raw
counts from 1e3 to 1e7, once squared, would swamp the standardisation), expanded to every
monomial of degree at most 2 (``1, f_i, f_i f_j``: 66 values), standardised with the
training set's mean and standard deviation. Two hidden layers of 32 with ReLU; one sigmoid
output per scheme of the space, read as "this scheme is satisfactory here". Trained with
binary cross-entropy on the labels "within 85% of the best performance", i.e.
``time <= best_time / 0.85``. The selected scheme is the one with the highest output.

Selection costs one small forward pass: well under a millisecond on a CPU (figures in
docs/sptrsv.md), after the features.

The selector is saved as one ``torch.save`` file of plain data (format name, schemes as
JSON, normalisation, weights), read back with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import torch

from .features import COUNT_FEATURES, FEATURE_NAMES
from .schedule import SptrsvSchedule

__all__ = ["expand", "satisfactory", "SchemeSelector", "train", "within_best"]

FORMAT = "gsparse-sptrsv-selector/1"
SATISFACTORY = 0.85  # a scheme is satisfactory when its performance is >= 85% of the best
HIDDEN = 32
_COUNT_COLUMNS = [FEATURE_NAMES.index(name) for name in COUNT_FEATURES]
_PAIRS = torch.triu_indices(len(FEATURE_NAMES), len(FEATURE_NAMES))


def expand(features: torch.Tensor) -> torch.Tensor:
    """``[B, 10]`` features -> ``[B, 66]``: ``log1p`` of the count features, then every monomial
    of degree <= 2 (a constant, the 10 features, their 55 pairwise products)."""
    f = features.to(torch.float64).clone()
    f[:, _COUNT_COLUMNS] = torch.log1p(f[:, _COUNT_COLUMNS].clamp(min=0))
    squares = f[:, _PAIRS[0]] * f[:, _PAIRS[1]]
    return torch.cat([torch.ones(len(f), 1, dtype=f.dtype), f, squares], dim=1)


def satisfactory(times: torch.Tensor) -> torch.Tensor:
    """``[B, S]`` 0/1 labels from measured times (``inf`` or ``nan``: failed, label 0): a
    scheme is satisfactory when ``best_time / time >= 0.85``."""
    times = torch.nan_to_num(times.to(torch.float64), nan=float("inf"))
    best = times.min(dim=1, keepdim=True).values
    return (times * SATISFACTORY <= best).to(torch.float64) * torch.isfinite(times)


class SchemeSelector(torch.nn.Module):
    """The MLP over one scheme space.

    Args:
        schemes: the scheme of each output, in order.
        mean, std: ``[66]`` normalisation of the expanded features.
    """

    def __init__(self, schemes: Sequence[SptrsvSchedule], mean: torch.Tensor, std: torch.Tensor) -> None:
        super().__init__()
        if not schemes:
            raise ValueError("schemes must not be empty")
        self.schemes = tuple(s.validate() for s in schemes)
        width = mean.numel()
        self.register_buffer("mean", mean.to(torch.float64).reshape(width))
        self.register_buffer("std", std.to(torch.float64).reshape(width))
        self.net = torch.nn.Sequential(
            torch.nn.Linear(width, HIDDEN, dtype=torch.float64), torch.nn.ReLU(),
            torch.nn.Linear(HIDDEN, HIDDEN, dtype=torch.float64), torch.nn.ReLU(),
            torch.nn.Linear(HIDDEN, len(self.schemes), dtype=torch.float64),
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """``[B, 10]`` features -> ``[B, S]`` logits (the sigmoid gives the scores)."""
        return self.net((expand(features) - self.mean) / self.std)

    @torch.no_grad()
    def scores(self, features: np.ndarray | torch.Tensor) -> torch.Tensor:
        """``[B, S]`` (or ``[S]`` for one matrix) predicted probability that each scheme is
        satisfactory."""
        f = torch.as_tensor(np.asarray(features, dtype=np.float64))
        single = f.dim() == 1
        if f.shape[-1] != len(FEATURE_NAMES):
            raise ValueError(f"features must have {len(FEATURE_NAMES)} values per matrix "
                             f"{FEATURE_NAMES}, got shape {tuple(f.shape)}")
        out = torch.sigmoid(self(f.reshape(-1, len(FEATURE_NAMES))))
        return out[0] if single else out

    def select(self, features: np.ndarray | torch.Tensor) -> SptrsvSchedule:
        """The scheme with the highest score for one matrix's ``[10]`` features."""
        return self.schemes[int(torch.argmax(self.scores(features)))]

    def save(self, path: str | os.PathLike[str]) -> None:
        torch.save({"format": FORMAT, "schemes": [s.to_json() for s in self.schemes],
                    "state": self.state_dict()}, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SchemeSelector:
        """A selector written by :meth:`save`; ValueError for another file format."""
        data = torch.load(path, weights_only=True)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"{os.fspath(path)} is not a {FORMAT} file (found {found!r})")
        state = data["state"]
        selector = cls([SptrsvSchedule.from_json(s) for s in data["schemes"]], state["mean"], state["std"])
        selector.load_state_dict(state)
        return selector


def train(features: np.ndarray | torch.Tensor, times: np.ndarray | torch.Tensor,
          schemes: Sequence[SptrsvSchedule], *, epochs: int = 600, lr: float = 1e-2,
          weight_decay: float = 1e-4, seed: int = 0) -> SchemeSelector:
    """Fit a selector on measurements.

    Args:
        features: ``[B, 10]`` features of the training matrices.
        times: ``[B, S]`` measured solve time of each scheme on each matrix (``inf`` or
            ``nan`` where a scheme failed).
        schemes: ``S`` schemes, the columns of ``times``.
        epochs, lr, weight_decay: full-batch Adam on the binary cross-entropy.
        seed: the initial weights' seed (the result is deterministic).
    """
    f = torch.as_tensor(np.asarray(features, dtype=np.float64))
    t = torch.as_tensor(np.asarray(times, dtype=np.float64))
    if f.dim() != 2 or f.shape[1] != len(FEATURE_NAMES):
        raise ValueError(f"features must be [B, {len(FEATURE_NAMES)}], got {tuple(f.shape)}")
    if t.shape != (f.shape[0], len(schemes)):
        raise ValueError(f"times must be [B, S] = [{f.shape[0]}, {len(schemes)}] (matrices x schemes), "
                         f"got {tuple(t.shape)}")
    x = expand(f)
    mean, std = x.mean(dim=0), x.std(dim=0, unbiased=False)
    std = torch.where(std > 0, std, torch.ones_like(std))
    labels = satisfactory(t)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        selector = SchemeSelector(schemes, mean, std)
    optimizer = torch.optim.Adam(selector.net.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = loss_fn(selector(f), labels)
        loss.backward()
        optimizer.step()
    return selector.eval()


def within_best(selector: SchemeSelector, features: np.ndarray | torch.Tensor,
                times: np.ndarray | torch.Tensor, tolerance: float = 1.1) -> float:
    """The fraction of matrices on which the selected scheme's time is at most ``tolerance``
    times the best measured one (the issue's "within 10% of the exhaustive best")."""
    t = torch.as_tensor(np.asarray(times, dtype=np.float64))
    picked = torch.argmax(selector.scores(features).reshape(len(t), -1), dim=1)
    chosen = t[torch.arange(len(t)), picked]
    best = torch.nan_to_num(t, nan=float("inf")).min(dim=1).values
    return float((chosen <= tolerance * best).to(torch.float64).mean())
