"""What the chips are: `chips` (one record a target: shared memory, registers,
warp size, the MMA shapes and copy mechanisms it has), `wgmma_layouts` (the
fragment and shared-tile layouts of Hopper's warpgroup MMA) and `tensor_maps`
(TMA descriptors, encoded and decoded as the hardware reads them).
"""
