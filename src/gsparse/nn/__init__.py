"""Graph neural network layers on gsparse's operators, with PyG's interfaces.

Each layer takes node features and either a :class:`gsparse.Graph` or a PyG
``edge_index``; what it derives from the graph (normalisation, self loops) is built once
per graph and kept with it. For ``torch.compile(fullgraph=True)``, pass a ``Graph`` and run
the model once eagerly first (or call it once outside the compiled region), so that these
structures exist before tracing: building them is data-dependent and cannot be traced.
"""

from .gat_conv import GATConv
from .gcn_conv import GCNConv
from .sage_conv import SAGEConv

__all__ = ["GCNConv", "GATConv", "SAGEConv"]
