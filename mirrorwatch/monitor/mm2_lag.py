"""True lag of a MirrorMaker 2 flow from the target side (pure, numpy; -1 = unknown).

MM2 publishes no acknowledged position, and its offset syncs are sparse (one per ``offset.lag.max`` records, and
at every gap in the source offsets). So the position is read off the target: the newest sync says source offset
``u`` is at target offset ``d``; every record the target holds after ``d`` is one more source record, so

    acked_next ≈ u + (target_end − d)

capped by the source end, and never below MM2's committed position (it commits only acknowledged records).

Bounds (docs/mirrormaker2.md):
- The target end is read *before* the source end, so the estimate describes an earlier moment: true lag is never
  under-reported; it is over-reported by at most the records mirrored between the two reads.
- Source gaps after the newest sync (a transaction's commit marker at the tail, compacted offsets) have no target
  record: each over-reports by one offset until MM2's next sync (MM2 writes a sync at every gap it mirrors past).
- Under the identity policy, records written to the target topic by anything but MM2 count as mirrored (they
  raise the target end): true lag can then be under-reported by that many records. With the default (prefix)
  policy only MM2 writes the target topic, and the estimate is never above the truth.
"""

from __future__ import annotations

import numpy as np


def target_side_acked_next(source_end, committed_next, sync_upstream, sync_downstream, target_end) -> np.ndarray:
    end, com = np.asarray(source_end, np.int64), np.asarray(committed_next, np.int64)
    up, down, tend = (np.asarray(x, np.int64) for x in (sync_upstream, sync_downstream, target_end))
    known = (up >= 0) & (down >= 0) & (tend > down)
    est = np.where(known, up + (tend - down), -1)
    est = np.where((end >= 0) & (est >= 0), np.minimum(est, end), est)
    acked = np.maximum(est, com)  # -1 loses to any known value
    return np.where((end >= 0) & (acked >= 0), np.minimum(acked, end), acked)
