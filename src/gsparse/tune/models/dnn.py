"""G-Sparse's DNN cost model: trained with PyTorch, evaluated with NumPy.

For features ``x [n, d]``::

    z = sign(x) * log(1 + |x|)                      log input (signed: features may be < 0)
    z = (z - mu) / sqrt(var + eps) * gamma + beta   batch norm
    h = relu(z W1 + b1); h = relu(h W2 + b2)         three dense layers
    y = h W3 + b3                                    [n], the predicted cost

Trained with ``loss = MSE(normalise_g(y), normalise_g(log t))``, where ``normalise_g``
standardises within each group (zero mean, unit deviation over the rows of one
measurement set): the output normalisation layer of the paper. A group's scale is thus
never learnt, only the order and spacing of its schedules; ``predict`` returns ``y``,
whose order within a group is the predicted order of the times.

Minibatches are made of whole groups, so that each group is normalised over all its rows.
Training is deterministic for a seed and a number of threads (``threads``, 1 by default).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ..interfaces import check_features, check_training_data, group_rows

_FORMAT = "gsparse-dnn-cost-model"
_VERSION = 1
_EPS = 1e-5  # batch norm's


def signed_log(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log1p(np.abs(x))


def _normalise(y: torch.Tensor, segment: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """``y`` standardised within each segment (``segment[i]`` in ``0 .. len(count) - 1``)."""
    mean = torch.zeros_like(count).index_add_(0, segment, y) / count
    centred = y - mean[segment]
    var = torch.zeros_like(count).index_add_(0, segment, centred * centred) / count
    return centred / torch.sqrt(var[segment] + 1e-6)


class DnnCostModel:
    """The G-Sparse DNN (a :class:`~gsparse.tune.interfaces.CostModel`).

    Args:
        hidden: width of the two hidden dense layers.
        epochs: passes over the training groups.
        batch_groups: groups per minibatch.
        learning_rate: Adam's step size.
        weight_decay: Adam's L2 penalty.
        seed: seed of the initial weights and of the minibatch order.
        threads: PyTorch CPU threads while training (restored after). One is as fast for
            layers this small, is not slowed by busy-waiting threads on a loaded machine,
            and gives the same weights on any machine.
    """

    def __init__(self, *, hidden: int = 64, epochs: int = 40, batch_groups: int = 32,
                 learning_rate: float = 3e-3, weight_decay: float = 0.0, seed: int = 0,
                 threads: int = 1) -> None:
        for name, value in (("hidden", hidden), ("epochs", epochs), ("batch_groups", batch_groups),
                            ("threads", threads)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
        self.params = dict(hidden=hidden, epochs=epochs, batch_groups=batch_groups,
                           learning_rate=learning_rate, weight_decay=weight_decay, seed=seed,
                           threads=threads)
        self.weights: dict[str, np.ndarray] | None = None

    def _network(self, d: int) -> torch.nn.Sequential:
        h = self.params["hidden"]
        return torch.nn.Sequential(
            torch.nn.BatchNorm1d(d, eps=_EPS),
            torch.nn.Linear(d, h), torch.nn.ReLU(),
            torch.nn.Linear(h, h), torch.nn.ReLU(),
            torch.nn.Linear(h, 1),
        )

    def fit(self, features: np.ndarray, times_ms: np.ndarray, groups: np.ndarray) -> None:
        """Train on ``features`` ``[n, d]``, ``times_ms`` ``[n]`` and ``groups`` ``[n]`` (see
        :class:`gsparse.tune.CostModel`)."""
        x, t, g = check_training_data(features, times_ms, groups)
        before = torch.get_num_threads()
        torch.set_num_threads(self.params["threads"])
        try:
            self._train(x, t, g)
        finally:
            torch.set_num_threads(before)

    def _train(self, x: np.ndarray, t: np.ndarray, g: np.ndarray) -> None:
        p = self.params
        rng = np.random.default_rng(p["seed"])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(p["seed"])
            net = self._network(x.shape[1])
        inputs = torch.from_numpy(signed_log(x).astype(np.float32))
        target = torch.from_numpy(np.log(t).astype(np.float32))
        rows = group_rows(g)
        optimiser = torch.optim.Adam(net.parameters(), lr=p["learning_rate"], weight_decay=p["weight_decay"])
        net.train()
        for _ in range(p["epochs"]):
            order = rng.permutation(len(rows))
            for start in range(0, len(order), p["batch_groups"]):
                chosen = [rows[i] for i in order[start:start + p["batch_groups"]]]
                index = torch.from_numpy(np.concatenate(chosen))
                if len(index) < 2:
                    continue  # batch norm needs two rows
                segment = torch.from_numpy(np.repeat(np.arange(len(chosen)), [len(c) for c in chosen]))
                count = torch.bincount(segment).to(torch.float32)
                y = net(inputs[index]).squeeze(1)
                error = _normalise(y, segment, count) - _normalise(target[index], segment, count)
                loss = torch.mean(error * error)
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                optimiser.step()
        net.eval()
        self.weights = {name: value.detach().numpy().astype(np.float64).copy()
                        for name, value in net.state_dict().items() if value.dtype.is_floating_point}

    def to_torch(self) -> torch.nn.Sequential:
        """The trained network as a PyTorch module in eval mode (float64), e.g. to predict
        for many candidates on a GPU; its output is :meth:`predict`'s without the log input."""
        if self.weights is None:
            raise RuntimeError("the DNN cost model is not trained: call fit() or load() first")
        net = self._network(len(self.weights["0.running_mean"])).double()
        net.load_state_dict({k: torch.from_numpy(v) for k, v in self.weights.items()}, strict=False)
        return net.eval()

    def predict(self, features: np.ndarray) -> np.ndarray:
        """``[n]`` predicted costs (see the module doc), computed with NumPy."""
        if self.weights is None:
            raise RuntimeError("the DNN cost model is not trained: call fit() or load() first")
        w = self.weights
        z = signed_log(check_features(features, len(w["0.running_mean"])))
        z = (z - w["0.running_mean"]) / np.sqrt(w["0.running_var"] + _EPS) * w["0.weight"] + w["0.bias"]
        h = np.maximum(z @ w["1.weight"].T + w["1.bias"], 0.0)
        h = np.maximum(h @ w["3.weight"].T + w["3.bias"], 0.0)
        return (h @ w["5.weight"].T + w["5.bias"])[:, 0]

    def save(self, path: str | Path) -> None:
        """Write the trained weights to ``path`` as JSON."""
        if self.weights is None:
            raise RuntimeError("the DNN cost model is not trained: nothing to save")
        Path(path).write_text(json.dumps({
            "format": _FORMAT, "version": _VERSION, "params": self.params,
            "weights": {name: {"shape": list(v.shape), "values": v.ravel().tolist()}
                        for name, v in self.weights.items()},
        }))

    def load(self, path: str | Path) -> DnnCostModel:
        """Read the weights :meth:`save` wrote into this model, and return it."""
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or data.get("format") != _FORMAT or data.get("version") != _VERSION:
            raise ValueError(f"{path} is not a DNN cost model of format {_FORMAT!r} version {_VERSION}")
        self.params = data["params"]
        self.weights = {name: np.array(v["values"], dtype=np.float64).reshape(v["shape"])
                        for name, v in data["weights"].items()}
        return self
