"""Graph neural network layers on gsparse's operators, with PyG's interfaces.

Each layer takes node features and a graph: a :class:`gsparse.Graph`, a PyG ``edge_index``
``[2, E]`` or ``EdgeIndex``, a ``torch.sparse`` ``adj_t`` (COO, CSR or CSC; PyG's
transposed adjacency, rows are destinations) or a ``torch_sparse.SparseTensor``. What a
layer derives from the graph (normalisation, self loops) is built once per graph and kept
with it; a graph built from a PyG argument is kept while that tensor lives unmodified.

Under ``torch.compile`` pass a :class:`gsparse.Graph`, built outside the compiled model:
the derived structures are then built while the compiler traces (no eager warm-up run is
needed) and the model compiles with ``fullgraph=True``. Any other graph argument raises
:class:`gsparse.CompileError` there, since building a graph cannot be traced.
"""

from .captured import CapturedStep, StaticBlocks
from .features import gather_features
from .gat_conv import GATConv
from .gcn_conv import GCNConv
from .sage_conv import SAGEConv

__all__ = ["GCNConv", "GATConv", "SAGEConv", "StaticBlocks", "CapturedStep", "gather_features"]
