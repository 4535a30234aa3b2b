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

A selector is fit to one number of right-hand sides (the schemes' times change with it) and
remembers the sizes of its training factors and, per scheme, the worst it did on them
(its time over the best). A :class:`SelectorSet` holds one per number of right-hand sides
measured, with the GPU they were measured on, and answers only for factors within its
training sizes on a GPU of that SM count, and only with a scheme that was within
:data:`TRUSTED_WORST` of the best on every training factor it was measured on. Elsewhere
the analysed default (:func:`.default.analysed_schedule`) falls back to the hand rule.

Why the last condition: on families held out of its training, the MLP's top score went to
schemes that are many times slower on other structures (a rows-merging scheme at 16
right-hand sides on held-out community factors, a thread per row on tree factors), and on
PubMed's citation graph, which no family resembles, to ``merge_fixed(4)``: 0.33 ms against
0.047 ms for the hand rule's warp per row (H200, 2026-11-28), 0.37x cuSPARSE. Held out one
family at a time over the 12-family sweep, the unguarded MLP was within 10% of the best on
86% of the factors with a geometric mean of 1.26 over the best; guarded, 89% and 1.05.

Selectors are saved as one ``torch.save`` file of plain data (format name, schemes as
JSON, normalisation, weights), read back with ``torch.load(weights_only=True)``. The set
gsparse ships (:data:`SHIPPED`, next to this module, when one has been trained) is what
:func:`default_selectors` returns unless ``$GSPARSE_SPTRSV_SELECTOR`` names another file
or ``off``.
"""

from __future__ import annotations

import functools
import math
import os
from importlib import resources
from typing import Sequence

import numpy as np
import torch

from .features import COUNT_FEATURES, FEATURE_NAMES
from .schedule import SptrsvSchedule

__all__ = ["expand", "satisfactory", "SchemeSelector", "SelectorSet", "train", "worst_ratios", "within_best",
           "load_selectors",
           "default_selectors", "shipped_path", "SHIPPED", "SELECTOR_ENV"]

FORMAT = "gsparse-sptrsv-selector/3"
SET_FORMAT = "gsparse-sptrsv-selectors/2"
SHIPPED = "selector-h100.pt"
"""The file name of the selector set shipped in this package (absent until trained)."""
SELECTOR_ENV = "GSPARSE_SPTRSV_SELECTOR"
"""The environment variable naming the selector file the analysed default uses (``off``: none)."""
# A selector answers only for factors within its training's rows (no slack): trained on 50K-300K
# rows, the shipped set picked an 8-lane subwarp for a 500K-row laplacian3d at 16 right-hand
# sides, 2.4x the warp scheme the hand rule runs there (H100, 2026-11-28).
ROWS_SLACK = 1.0
# A pick is trusted only if its scheme was within this factor of the best on every training
# factor it was measured on (see the module docstring).
TRUSTED_WORST = 3.0
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
    """The MLP over one scheme space, for one number of right-hand sides.

    Args:
        schemes: the scheme of each output, in order.
        mean, std: ``[66]`` normalisation of the expanded features.
        num_rhs: the right-hand sides of the solves it was trained on.
        rows: ``(fewest, most)`` rows of its training factors.
        worst: ``[S]`` each scheme's greatest time over the best on the training factors
            (``inf`` where it failed or was pruned on one); None: every scheme trusted.
    """

    def __init__(self, schemes: Sequence[SptrsvSchedule], mean: torch.Tensor, std: torch.Tensor, *,
                 num_rhs: int = 1, rows: tuple[float, float] = (0.0, math.inf),
                 worst: torch.Tensor | None = None) -> None:
        super().__init__()
        if not schemes:
            raise ValueError("schemes must not be empty")
        if isinstance(num_rhs, bool) or not isinstance(num_rhs, int) or num_rhs < 1:
            raise ValueError(f"num_rhs must be a positive int, got {num_rhs!r}")
        self.schemes = tuple(s.validate() for s in schemes)
        self.num_rhs = num_rhs
        self.rows = (float(rows[0]), float(rows[1]))
        width = mean.numel()
        self.register_buffer("mean", mean.to(torch.float64).reshape(width))
        self.register_buffer("std", std.to(torch.float64).reshape(width))
        worst = torch.ones(len(self.schemes)) if worst is None else torch.as_tensor(worst)
        if worst.shape != (len(self.schemes),):
            raise ValueError(f"worst must have one value per scheme ({len(self.schemes)}), got shape "
                             f"{tuple(worst.shape)}")
        self.register_buffer("worst", worst.to(torch.float64))
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

    @torch.no_grad()
    def select(self, features: np.ndarray | torch.Tensor) -> SptrsvSchedule:
        """The scheme with the highest score for one matrix's ``[10]`` features."""
        f = torch.as_tensor(np.asarray(features, dtype=np.float64))
        if f.shape != (len(FEATURE_NAMES),):
            raise ValueError(f"features must have {len(FEATURE_NAMES)} values per matrix "
                             f"{FEATURE_NAMES}, got shape {tuple(f.shape)}")
        return self.schemes[int(torch.argmax(self(f.reshape(1, -1))))]  # the sigmoid keeps the order

    def trusts(self, scheme: SptrsvSchedule) -> bool:
        """Whether ``scheme`` (one of :attr:`schemes`) was within :data:`TRUSTED_WORST` of the
        best on every training factor it was measured on."""
        return bool(self.worst[self.schemes.index(scheme)] <= TRUSTED_WORST)

    def covers(self, features: np.ndarray) -> bool:
        """Whether a factor with these ``[10]`` features has rows within :data:`ROWS_SLACK`
        times the range of the training factors'."""
        m = float(features[0])
        return self.rows[0] / ROWS_SLACK <= m <= self.rows[1] * ROWS_SLACK

    def _payload(self) -> dict:
        return {"schemes": [s.to_json() for s in self.schemes], "num_rhs": self.num_rhs, "rows": list(self.rows),
                "state": self.state_dict()}

    @classmethod
    def _from_payload(cls, data: dict) -> SchemeSelector:
        state = data["state"]
        selector = cls([SptrsvSchedule.from_json(s) for s in data["schemes"]], state["mean"], state["std"],
                       num_rhs=int(data["num_rhs"]), rows=tuple(data["rows"]))
        selector.load_state_dict(state)
        return selector.eval()

    def save(self, path: str | os.PathLike[str]) -> None:
        torch.save({"format": FORMAT, **self._payload()}, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SchemeSelector:
        """A selector written by :meth:`save`; ValueError for another file format."""
        return cls._from_payload(_read(path, FORMAT))


class SelectorSet:
    """Selectors for several numbers of right-hand sides, measured on one GPU model.

    Args:
        selectors: at most one per ``num_rhs``.
        sms: the SM count of the GPU whose measurements trained them (None: any GPU).
        device: that GPU's name, for the record.
    """

    def __init__(self, selectors: Sequence[SchemeSelector], *, sms: int | None = None, device: str = "") -> None:
        counts = [s.num_rhs for s in selectors]
        if not counts or len(set(counts)) != len(counts):
            raise ValueError(f"selectors must be one or more, each for its own num_rhs, got num_rhs {counts}")
        self.selectors = {s.num_rhs: s for s in sorted(selectors, key=lambda s: s.num_rhs)}
        self.sms, self.device = sms, device

    def for_rhs(self, num_rhs: int) -> SchemeSelector:
        """The selector trained on the number of right-hand sides nearest ``num_rhs`` (on a
        log scale, ties to the larger)."""
        return min(self.selectors.values(), key=lambda s: (abs(math.log2(s.num_rhs) - math.log2(num_rhs)), -s.num_rhs))

    def select(self, features: np.ndarray, num_rhs: int, sms: int | None = None) -> SptrsvSchedule | None:
        """The scheme for a factor with these ``[10]`` features solved with ``num_rhs``
        right-hand sides on a GPU of ``sms`` SMs; None where the set does not answer: another
        GPU model, a factor outside its training sizes, or a pick it does not trust
        (:meth:`SchemeSelector.trusts`)."""
        if self.sms is not None and sms is not None and sms != self.sms:
            return None
        selector = self.for_rhs(num_rhs)
        if not selector.covers(features):
            return None
        picked = selector.select(features)
        return picked if selector.trusts(picked) else None

    def save(self, path: str | os.PathLike[str]) -> None:
        torch.save({"format": SET_FORMAT, "sms": self.sms, "device": self.device,
                    "selectors": [s._payload() for s in self.selectors.values()]}, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SelectorSet:
        """A set written by :meth:`save`; ValueError for another file format."""
        data = _read(path, SET_FORMAT)
        return cls([SchemeSelector._from_payload(d) for d in data["selectors"]], sms=data["sms"],
                   device=data["device"])


def _read(path: str | os.PathLike[str], expected: str) -> dict:
    data = torch.load(path, weights_only=True)
    if not isinstance(data, dict) or data.get("format") != expected:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{os.fspath(path)} is not a {expected} file (found {found!r})")
    return data


def load_selectors(path: str | os.PathLike[str]) -> SelectorSet:
    """A :class:`SelectorSet` file, or a single :class:`SchemeSelector` file as a set of one
    (for any GPU)."""
    data = torch.load(path, weights_only=True)
    if isinstance(data, dict) and data.get("format") == FORMAT:
        return SelectorSet([SchemeSelector.load(path)])
    return SelectorSet.load(path)


def default_selectors() -> SelectorSet | None:
    """The selectors of the analysed default: the file ``$GSPARSE_SPTRSV_SELECTOR`` names
    (``off``: none), else the set shipped with gsparse (:data:`SHIPPED`), else none. Read
    once per process and setting."""
    setting = os.environ.get(SELECTOR_ENV)
    if setting is None:
        shipped = shipped_path()
        return _load_once(shipped) if os.path.isfile(shipped) else None
    if setting.strip().lower() in ("", "off"):
        return None
    return _load_once(os.path.abspath(setting))


def shipped_path() -> str:
    """Where the shipped selector set lives (or would): :data:`SHIPPED` in this package."""
    return str(resources.files(__package__).joinpath(SHIPPED))


@functools.lru_cache(maxsize=4)
def _load_once(path: str) -> SelectorSet:
    return load_selectors(path)


def train(features: np.ndarray | torch.Tensor, times: np.ndarray | torch.Tensor,
          schemes: Sequence[SptrsvSchedule], *, num_rhs: int = 1, epochs: int = 600, lr: float = 1e-2,
          weight_decay: float = 1e-4, seed: int = 0) -> SchemeSelector:
    """Fit a selector on measurements.

    Args:
        features: ``[B, 10]`` features of the training matrices.
        times: ``[B, S]`` measured solve time of each scheme on each matrix (``inf`` or
            ``nan`` where a scheme failed or was not measured).
        schemes: ``S`` schemes, the columns of ``times``.
        num_rhs: the right-hand sides of the measured solves.
        epochs, lr, weight_decay: full-batch Adam on the binary cross-entropy.
        seed: the initial weights' seed. The result is deterministic: training runs on one
            thread, so it does not depend on the machine's thread count either.
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
        selector = SchemeSelector(schemes, mean, std, num_rhs=num_rhs,
                                  rows=(float(f[:, 0].min()), float(f[:, 0].max())), worst=worst_ratios(t))
    optimizer = torch.optim.Adam(selector.net.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(epochs):
            optimizer.zero_grad()
            loss = loss_fn(selector(f), labels)
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return selector.eval()


def worst_ratios(times: np.ndarray | torch.Tensor) -> torch.Tensor:
    """``[S]`` each scheme's greatest time over its factor's best across ``[B, S]`` measured
    times: ``inf`` where it failed (``inf``) on some factor; factors where it was never
    measured (``nan``) do not count, and a scheme measured nowhere gets ``inf``."""
    t = torch.as_tensor(np.asarray(times, dtype=np.float64))
    measured = ~torch.isnan(t)
    best = torch.where(measured, t, torch.inf).min(dim=1, keepdim=True).values
    ratio = torch.where(measured, t / best, torch.nan)
    worst = torch.where(measured, ratio, -torch.inf).max(dim=0).values
    return torch.where(measured.any(dim=0), worst, torch.inf)


def within_best(selector: SchemeSelector, features: np.ndarray | torch.Tensor,
                times: np.ndarray | torch.Tensor, tolerance: float = 1.1) -> float:
    """The fraction of matrices on which the selected scheme's time is at most ``tolerance``
    times the best measured one (the issue's "within 10% of the exhaustive best")."""
    t = torch.as_tensor(np.asarray(times, dtype=np.float64))
    picked = torch.argmax(selector.scores(features).reshape(len(t), -1), dim=1)
    chosen = t[torch.arange(len(t)), picked]
    best = torch.nan_to_num(t, nan=float("inf")).min(dim=1).values
    return float((chosen <= tolerance * best).to(torch.float64).mean())
