"""The edge softmax hand rule: a row's lanes sized to its heads and mean length, loads in
flight to the edges each lane walks.

Measured on an H200 (``scripts/softmax_grad_probe.py``, docs/performance.md, "The edge
softmax: rows' lanes and loads in flight"): a warp a row with one edge's loads in flight a
lane ran long rows at 0.9-1.6 TB/s and left most lanes idle on short rows with one head; the
best schedules gave each lane about four edges of a row, narrowed the row's group down to
four lanes, and kept 4-8 edges' loads in flight a lane. GAT's backward does more a row (the
destination's score loaded, its gradient reduced and stored besides the softmax's sum) and
an edge (a source score gathered): its best schedules gave a lane about eight edges, in
groups down to two lanes (``scripts/gat_attention_probe.py --schedules``, "GAT's attention:
logits kept between passes").
"""

from __future__ import annotations

from ...graph import GraphStats
from ...target import Target
from ..operands import pow2_at_least
from .codegen import resident_threads
from .schedule import WarpPerRow
from .task import SoftmaxTask

__all__ = ["default_schedule"]

# Edges a lane should walk of a mean row (fewer leaves lanes idle, more lengthens the walk)
# and the narrowest group of a row's lanes: the edge softmax's, and GAT's backward's.
_EDGES_PER_LANE, _NARROWEST_GROUP = 4, 4
_GAT_BACKWARD_EDGES_PER_LANE, _GAT_BACKWARD_NARROWEST_GROUP = 8, 2


def default_schedule(task: SoftmaxTask, stats: GraphStats, target: Target) -> WarpPerRow:
    """8 warps a block. A row's lanes: its heads' lanes times a quarter of the mean row
    length (an eighth for GAT's backward), rounded up to a power of two, between 4 (2) and
    32, and never so few that the rows fill less than half of the warps ``target`` keeps
    resident (a few long rows still get a warp each). Loads in flight: 8 edges' where a lane
    walks 8 or more of a mean row, else 4. GAT's forward keeps its logits in the output where
    they stay in the L2. Reads only what the host knows of a sampled block (its mean row
    length)."""
    heads = task.lanes
    mean = stats.rows.mean
    rows = max(stats.num_dst, 1)
    resident_half = target.sms * target.warps_per_sm // 2
    per_lane, narrowest = ((_GAT_BACKWARD_EDGES_PER_LANE, _GAT_BACKWARD_NARROWEST_GROUP)
                           if (task.logits, task.direction) == ("gat", "backward")
                           else (_EDGES_PER_LANE, _NARROWEST_GROUP))
    lanes = min(32, max(narrowest, heads, pow2_at_least(heads * mean / per_lane),
                        pow2_at_least(32 * resident_half / rows)))
    edges_per_lane = mean * heads / lanes
    return WarpPerRow(lanes_per_row=lanes, edges_in_flight=8 if edges_per_lane >= 8 else 4,
                      logits_in_output=_logits_stay_in_l2(task, stats, target, lanes))


def _logits_stay_in_l2(task: SoftmaxTask, stats: GraphStats, target: Target, lanes: int) -> bool:
    """Whether GAT's forward leaves its logits in the output between its passes: where the
    logits of the rows in flight (the mean row's, as many rows as the SMs hold) fit in half
    of the L2, the second pass reads them back from there; where they do not, the written
    lines go out to memory and come back, and gathering the (L2-resident) source scores
    again costs less (H200, ``scripts/gat_attention_probe.py --schedules``: reddit-like
    at 8 float32 heads, some 50 MB in flight, 1.06x slower kept; at 8 bfloat16 heads, 25 MB,
    1.12x faster)."""
    if not task.computes_logits_once:
        return False
    rows = min(max(stats.num_dst, 1), target.sms * resident_threads(task) // lanes)
    row_bytes = stats.rows.mean * task.num_heads * task.dtype.itemsize
    return rows * row_bytes <= target.l2_bytes // 2
