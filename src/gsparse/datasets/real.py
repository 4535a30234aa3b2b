"""Real graphs: Cora, CiteSeer and PubMed (shipped with the package), and loaders for
``.npz``, Matrix Market and edge-list files."""

from __future__ import annotations

import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..graph import Graph

__all__ = ["Dataset", "load_npz", "load_graph", "REAL_GRAPHS", "DATA_DIR_ENV", "data_dirs",
           "real_graph", "cora", "citeseer", "pubmed"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """A real graph with its node data, on the CPU.

    Build a PyG-style ``edge_index`` with :attr:`edge_index`; ``graph`` is the same edges as
    a :class:`gsparse.Graph`.

    Attributes:
        name: file stem, e.g. ``"cora"``.
        graph: the graph (CSR over destination rows; edge ids follow the file's edge order).
        features: ``[N, F]`` float32 node features, or ``None``.
        labels: ``[N]`` int64 class of each node (``-1`` where unlabelled), or ``None``.
        train_idx, val_idx, test_idx: ``[k]`` int64 node ids of each split, or ``None``.
    """

    name: str
    graph: Graph
    features: torch.Tensor | None
    labels: torch.Tensor | None
    train_idx: torch.Tensor | None
    val_idx: torch.Tensor | None
    test_idx: torch.Tensor | None

    @property
    def num_classes(self) -> int | None:
        """``max(labels) + 1``, or ``None`` without labels."""
        return None if self.labels is None else int(self.labels.max()) + 1

    @property
    def num_nodes(self) -> int:
        """Number of nodes ``N`` (the graph is square)."""
        return self.graph.num_dst

    @property
    def num_features(self) -> int | None:
        """Size ``F`` of each node's features, or ``None`` without features."""
        return None if self.features is None else self.features.shape[1]

    @property
    def edge_index(self) -> torch.Tensor:
        """``[2, E]`` int64 edge list in the file's order (row 0 sources, row 1
        destinations), as PyG's ``data.edge_index``."""
        return torch.stack(self.graph.edges())


_FEATURE_KEYS = ("x_indptr", "x_indices", "x_data", "x_shape")
_EDGE_LIST_SUFFIXES = (".txt", ".csv", ".edges")
_SUFFIXES = (".npz", ".mtx", *_EDGE_LIST_SUFFIXES)


def _existing_file(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such graph file: {path}")
    return path


def _open_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path} is not a readable .npz file: {e}") from None


def _int_array(path: Path, key: str, arrays: dict[str, np.ndarray], shape: str) -> np.ndarray:
    a = arrays[key]
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{path}: '{key}' must hold integers, got dtype {a.dtype}")
    ndim = 0 if shape == "[]" else shape.count(",") + 1
    if a.ndim != ndim:
        raise ValueError(f"{path}: '{key}' must have shape {shape}, got {a.shape}")
    return a


def _node_ids(path: Path, key: str, arrays: dict[str, np.ndarray], num_nodes: int) -> torch.Tensor | None:
    if key not in arrays:
        return None
    ids = _int_array(path, key, arrays, "[k]")
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        raise ValueError(f"{path}: '{key}' holds node ids outside [0, {num_nodes})")
    return torch.from_numpy(ids.astype(np.int64))


def _features(path: Path, arrays: dict[str, np.ndarray], num_nodes: int) -> torch.Tensor | None:
    present = [key for key in _FEATURE_KEYS if key in arrays]
    if not present:
        return None
    if len(present) != len(_FEATURE_KEYS):
        missing = [key for key in _FEATURE_KEYS if key not in arrays]
        raise ValueError(f"{path}: node features need all of {_FEATURE_KEYS}, missing {missing}")
    import scipy.sparse as sp

    shape = tuple(int(s) for s in _int_array(path, "x_shape", arrays, "[2]"))
    if len(shape) != 2 or shape[0] != num_nodes:
        raise ValueError(f"{path}: 'x_shape' must be [{num_nodes}, F] (one row per node), got {list(shape)}")
    try:
        csr = sp.csr_matrix((arrays["x_data"], arrays["x_indices"], arrays["x_indptr"]), shape=shape)
    except ValueError as e:
        raise ValueError(f"{path}: malformed CSR node features: {e}") from None
    return torch.from_numpy(csr.toarray().astype(np.float32))


def load_npz(path: str | os.PathLike[str]) -> Dataset:
    """Read a graph from an ``.npz`` file in the layout of the copies shipped with gsparse.

    Arrays: ``edge_index`` ``[2, E]`` integers (row 0 sources, row 1 destinations);
    optional ``num_nodes`` (else ``max(edge_index) + 1``); optional node features as a CSR
    ``x_indptr``, ``x_indices``, ``x_data``, ``x_shape`` (returned dense); optional labels
    ``y`` and splits ``train_idx``, ``val_idx``, ``test_idx``.
    """
    path = _existing_file(path)
    arrays = _open_npz(path)
    if "edge_index" not in arrays:
        raise ValueError(f"{path} has no 'edge_index' array (it holds {sorted(arrays)}); "
                         f"a SciPy sparse matrix .npz loads with load_graph")
    edge_index = _int_array(path, "edge_index", arrays, "[2, E]")
    if edge_index.shape[0] != 2:
        raise ValueError(f"{path}: 'edge_index' must have shape [2, E], got {edge_index.shape}")
    if edge_index.size and edge_index.min() < 0:
        raise ValueError(f"{path}: 'edge_index' holds negative node ids")
    if "num_nodes" in arrays:
        num_nodes = int(_int_array(path, "num_nodes", arrays, "[]"))
    else:
        num_nodes = int(edge_index.max()) + 1 if edge_index.size else 0
    if edge_index.size and edge_index.max() >= num_nodes:
        raise ValueError(f"{path}: 'edge_index' holds node ids >= num_nodes = {num_nodes}")
    graph = Graph.from_edge_index(torch.from_numpy(edge_index.astype(np.int64)), num_nodes=num_nodes)

    labels = None
    if "y" in arrays:
        labels = torch.from_numpy(_int_array(path, "y", arrays, "[N]").astype(np.int64))
        if labels.numel() != num_nodes:
            raise ValueError(f"{path}: 'y' has {labels.numel()} labels but the graph has {num_nodes} nodes")
    return Dataset(
        name=path.stem,
        graph=graph,
        features=_features(path, arrays, num_nodes),
        labels=labels,
        train_idx=_node_ids(path, "train_idx", arrays, num_nodes),
        val_idx=_node_ids(path, "val_idx", arrays, num_nodes),
        test_idx=_node_ids(path, "test_idx", arrays, num_nodes),
    )


def _load_edge_list(path: Path) -> Graph:
    delimiter = "," if path.suffix == ".csv" else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns on an empty file; we raise below
            edges = np.loadtxt(path, dtype=np.int64, comments=("#", "%"), delimiter=delimiter,
                               usecols=(0, 1), ndmin=2)
    except ValueError as e:
        raise ValueError(f"{path} is not an edge list of integer pairs 'source destination': {e}") from None
    if edges.size == 0:
        raise ValueError(f"{path} holds no edges")
    if edges.min() < 0:
        raise ValueError(f"{path}: node ids must be non-negative, found {edges.min()}")
    return Graph.from_edge_index(torch.from_numpy(np.ascontiguousarray(edges.T)))


def _load_mtx(path: Path) -> Graph:
    import scipy.io
    import scipy.sparse as sp

    try:
        matrix = scipy.io.mmread(path)
    except (ValueError, IndexError, TypeError, OSError) as e:
        raise ValueError(f"{path} is not a readable Matrix Market file: {e}") from None
    if not sp.issparse(matrix):
        raise ValueError(f"{path} holds a dense Matrix Market array, not a sparse (coordinate) matrix")
    return Graph.from_scipy(matrix)


def _load_any_npz(path: Path) -> Graph:
    import scipy.sparse as sp

    keys = _open_npz(path)
    if "edge_index" in keys:
        return load_npz(path).graph
    if "format" in keys:  # written by scipy.sparse.save_npz
        return Graph.from_scipy(sp.load_npz(path))
    raise ValueError(f"{path} holds neither an 'edge_index' nor a SciPy sparse matrix "
                     f"(it holds {sorted(keys)})")


def load_graph(path: str | os.PathLike[str]) -> Graph:
    """Read a user's graph file, by extension.

    * ``.npz``: our layout (``edge_index``, see :func:`load_npz`) or ``scipy.sparse.save_npz``;
    * ``.mtx``: Matrix Market coordinate format;
    * ``.txt``, ``.csv``, ``.edges``: one edge per line, ``source destination`` (whitespace,
      or commas for ``.csv``), 0-based ids; lines starting with ``#`` or ``%`` are comments
      and further columns (weights, times) are ignored.

    Matrices follow DGL: rows are sources, columns destinations. Edge ids follow the file order.
    """
    path = _existing_file(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return _load_any_npz(path)
    if suffix == ".mtx":
        return _load_mtx(path)
    if suffix in _EDGE_LIST_SUFFIXES:
        return _load_edge_list(path)
    raise ValueError(f"{path}: unknown graph file extension {path.suffix!r}; expected one of {_SUFFIXES}")


REAL_GRAPHS = ("cora", "citeseer", "pubmed_cites")
"""The real graphs :func:`real_graph` reads by name (all three ship with gsparse)."""
DATA_DIR_ENV = "GSPARSE_DATA_DIR"
"""The environment variable naming the folder :func:`data_dirs` searches first."""
# The real graphs ship inside the package (about 520 KB), so that they load offline.
_PACKAGED = Path(__file__).resolve().parent / "data"


def data_dirs() -> list[Path]:
    """Folders searched for real graphs and workload files before the copies shipped with
    gsparse, in order: ``$GSPARSE_DATA_DIR`` when it is set, else ``./.data`` relative to the
    current directory (an ignored folder a GPU run can carry)."""
    env = os.environ.get(DATA_DIR_ENV)
    return [Path(env)] if env else [Path.cwd() / ".data"]


def real_graph(name: str, data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """One of :data:`REAL_GRAPHS`, read from ``<dir>/<name>.npz``.

    Args:
        name: ``"cora"``, ``"citeseer"`` or ``"pubmed_cites"``.
        data_dir: the folder that holds ``<name>.npz``. Without it, the first of
            :func:`data_dirs` that holds the file, else the copy shipped with gsparse.

    Raises:
        ValueError: ``name`` is not one of :data:`REAL_GRAPHS`.
        FileNotFoundError: ``data_dir`` was given and holds no ``<name>.npz``.
    """
    if name not in REAL_GRAPHS:
        raise ValueError(f"name must be one of {REAL_GRAPHS}, got {name!r}")
    candidates = [Path(data_dir)] if data_dir is not None else [*data_dirs(), _PACKAGED]
    for directory in candidates:
        if (directory / f"{name}.npz").is_file():
            return load_npz(directory / f"{name}.npz")
    raise FileNotFoundError(f"{name}.npz is in none of {[str(d) for d in candidates]}; "
                            f"pass data_dir or set {DATA_DIR_ENV} to the folder that holds it")


def cora() -> Dataset:
    """The Cora citation graph (Planetoid split), shipped with gsparse: works offline.

    2,708 nodes, 10,858 directed edges (each citation in both directions), ``features``
    ``[2708, 1433]`` float32 bag-of-words, ``labels`` ``[2708]`` int64 in 7 classes,
    ``train_idx`` ``[140]``, ``val_idx`` ``[500]``, ``test_idx`` ``[1000]``. The features
    and split are PyG's ``Planetoid(root, "Cora")``; the edges are the Planetoid files' as
    published, with the 302 repeated pairs kept as multi-edges, where PyG's loader merges
    them into 10,556 edges (:meth:`gsparse.Graph.coalesce` does the same).
    """
    return load_npz(_PACKAGED / "cora.npz")


def citeseer() -> Dataset:
    """The CiteSeer citation graph (Planetoid split), shipped with gsparse: works offline.

    3,327 nodes, 9,464 directed edges as published in the Planetoid files (236 repeated
    pairs and 248 self loops among them, kept), ``features`` ``[3327, 3703]``, ``labels``
    ``[3327]`` in 6 classes (-1 for the 15 isolated test nodes without a label),
    ``train_idx`` ``[120]``, ``val_idx`` ``[500]``, ``test_idx`` ``[1000]``.
    """
    return load_npz(_PACKAGED / "citeseer.npz")


def pubmed() -> Dataset:
    """The PubMed-Diabetes citation graph, shipped with gsparse: works offline.

    19,717 nodes and 44,338 directed citations; the shipped file holds the edges only
    (``features``, ``labels`` and the splits are ``None``). Its name is ``"pubmed_cites"``.
    """
    return load_npz(_PACKAGED / "pubmed_cites.npz")
