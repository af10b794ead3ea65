"""IR utilities every level shares: affine expressions (`affine_exprs`), value
ranges (`ranges`), index sets (`index_sets`), memory effects read off the ops
(`effects`), the op registry (`op_table`), blocks in reverse post-order (`cfg`),
the lane-to-element layouts of MMA fragments (`mma_layouts`), constants as the
lowering builds them (`constants`), the shared-memory
layout rule the lowering follows (`shared_memory_layout`), and the xDSL context
with affinec's dialects (`context`).
"""
