// RUN: affinec-opt %s -p "affine-loop-tile{tile-sizes=1,64,16,16}" > %t.mlir
// RUN: filecheck %s --input-file=%t.mlir --check-prefix=TILE
// RUN: filecheck %s --input-file=%t.mlir --check-prefix=NOOP
// RUN: affinec-opt %s -p "affine-loop-tile{tile-sizes=1,64,16,16},affinec-split" | filecheck %s --check-prefix=SPLIT
// RUN: affinec-opt %s -p "affine-loop-tile{tile-sizes=1,64,16,16},affinec-split,affinec-sink" | filecheck %s --check-prefix=SINK
// RUN: affinec-opt %s -p "affine-loop-tile{tile-sizes=1,64,16,16},affinec-split,affinec-sink{depth=6}" | filecheck %s --check-prefix=SINK6
// RUN: affinec-opt %s -p affinec-tile-split-sink | filecheck %s --check-prefix=DEFAULT

// The reference design's listings for ResNet-50's first layer (N=128, C=4, 224x224,
// K=64, 7x7, stride 2, pad 3), blocks of 1x64x16x16: after tiling, after splitting,
// after sinking. The reduction tile is the default: c in tiles of 1, r and s whole
// (the reference design has C=1 of vector<4xf16>: `(%c0, %fh0, %fw0) = 0 to 1`).
// Only the printed IR is checked: the full-size convolution is not interpreted.

builtin.module attributes {affinec.spec = "conv n=128 c=4 h=224 w=224 k=64 r=7 s=7 stride=2,2 pad=3,3 dilation=1,1 layout=nchw filter-layout=kcrs dtype=f32 epilogue=none"} {
  func.func @conv(%input: memref<128x4x224x224xf32>, %filter: memref<64x4x7x7xf32>, %output: memref<128x64x112x112xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%n, %k, %oh, %ow) = (0, 0, 0, 0) to (128, 64, 112, 112) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %c = 0 to 4 {
        affine.for %r = 0 to 7 {
          affine.for %s = 0 to 7 {
            %a = affinec.padded_load %input[%n, %c, %oh * 2 + %r - 3, %ow * 2 + %s - 3] : memref<128x4x224x224xf32>
            %b = affine.load %filter[%k, %c, %r, %s] : memref<64x4x7x7xf32>
            %prod = arith.mulf %a, %b : f32
            %old = affine.load %acc[] : memref<f32>
            %new = arith.addf %old, %prod : f32
            affine.store %new, %acc[] : memref<f32>
          }
        }
      }
      %sum = affine.load %acc[] : memref<f32>
      affine.store %sum, %output[%n, %k, %oh, %ow] : memref<128x64x112x112xf32>
    }
    func.return
  }
}

// After tiling: a grid of 128x1x7x7 blocks of 1x64x16x16; the reduction band tiled
// once; every index folded into its user's map, simplified (`%n0 + %n1`).
// TILE-LABEL: func.func @conv
// TILE:       affine.parallel (%[[N0:.*]], %[[K0:.*]], %[[OH0:.*]], %[[OW0:.*]]) = (0, 0, 0, 0) to (128, 1, 7, 7) {
// TILE-NEXT:    affine.parallel (%[[N1:.*]], %[[K1:.*]], %[[OH1:.*]], %[[OW1:.*]]) = (0, 0, 0, 0) to (1, 64, 16, 16) {
// TILE-NEXT:      %[[ACC:.*]] = memref.alloca() : memref<f32>
// TILE-NEXT:      affine.store %zero, %[[ACC]][] : memref<f32>
// TILE-NEXT:      affine.for %[[C0:.*]] = 0 to 4 {
// TILE-NEXT:        affine.for %[[R0:.*]] = 0 to 1 {
// TILE-NEXT:          affine.for %[[S0:.*]] = 0 to 1 {
// TILE-NEXT:            affine.for %[[C1:.*]] = 0 to 1 {
// TILE-NEXT:              affine.for %[[R1:.*]] = 0 to 7 {
// TILE-NEXT:                affine.for %[[S1:.*]] = 0 to 7 {
// TILE-NEXT:                  affinec.padded_load %input[%[[N0]] + %[[N1]], %[[C0]] + %[[C1]], %[[OH0]] * 32 + %[[OH1]] * 2 + %[[R0]] * 7 + %[[R1]] - 3, %[[OW0]] * 32 + %[[OW1]] * 2 + %[[S0]] * 7 + %[[S1]] - 3]
// TILE-NEXT:                  affine.load %filter[%[[K0]] * 64 + %[[K1]], %[[C0]] + %[[C1]], %[[R0]] * 7 + %[[R1]], %[[S0]] * 7 + %[[S1]]]
// TILE-NEXT:                  arith.mulf
// TILE-NEXT:                  affine.load %[[ACC]][]
// TILE-NEXT:                  arith.addf
// TILE-NEXT:                  affine.store %{{.*}}, %[[ACC]][]
// TILE-NEXT:                }
// TILE-NEXT:              }
// TILE-NEXT:            }
// TILE-NEXT:          } {affinec.tile}
// TILE-NEXT:        } {affinec.tile}
// TILE-NEXT:      } {affinec.tile}
// TILE-NEXT:      %[[SUM:.*]] = affine.load %[[ACC]][] : memref<f32>
// TILE-NEXT:      affine.store %[[SUM]], %output[%[[N0]] + %[[N1]], %[[K0]] * 64 + %[[K1]], %[[OH0]] * 16 + %[[OH1]], %[[OW0]] * 16 + %[[OW1]]]
// TILE-NEXT:    } {affinec.mapping = "block"}
// TILE-NEXT:  } {affinec.mapping = "grid"}

// Tiling adds no operation: every index is in a map, and no map multiplies by 1.
// NOOP:       func.func @conv
// NOOP-NOT:   affine.apply
// NOOP-NOT:   * 1 +
// NOOP:       func.return

// After splitting: the accumulator is a 1x64x16x16 buffer allocated in the grid
// loop; the block loop is three: zero, reduce, write back.
// SPLIT-LABEL: func.func @conv
// SPLIT:       affine.parallel (%[[N0:.*]], %[[K0:.*]], %[[OH0:.*]], %[[OW0:.*]]) = (0, 0, 0, 0) to (128, 1, 7, 7) {
// SPLIT-NEXT:    %[[ACC:.*]] = memref.alloc() : memref<1x64x16x16xf32>
// SPLIT-NEXT:    affine.parallel (%[[I:.*]], %[[J:.*]], %[[K:.*]], %[[L:.*]]) = (0, 0, 0, 0) to (1, 64, 16, 16) {
// SPLIT-NEXT:      affine.store %zero, %[[ACC]][%[[I]], %[[J]], %[[K]], %[[L]]] : memref<1x64x16x16xf32>
// SPLIT-NEXT:    } {affinec.mapping = "block"}
// SPLIT-NEXT:    affine.parallel (%[[N1:.*]], %[[K1:.*]], %[[OH1:.*]], %[[OW1:.*]]) = (0, 0, 0, 0) to (1, 64, 16, 16) {
// SPLIT-NEXT:      affine.for %[[C0:.*]] = 0 to 4 {
// SPLIT-NEXT:        affine.for %[[R0:.*]] = 0 to 1 {
// SPLIT-NEXT:          affine.for %[[S0:.*]] = 0 to 1 {
// SPLIT-NEXT:            affine.for %[[C1:.*]] = 0 to 1 {
// SPLIT-NEXT:              affine.for %[[R1:.*]] = 0 to 7 {
// SPLIT-NEXT:                affine.for %[[S1:.*]] = 0 to 7 {
// SPLIT-NEXT:                  affinec.padded_load %input[%[[N0]] + %[[N1]], %[[C0]] + %[[C1]], %[[OH0]] * 32 + %[[OH1]] * 2 + %[[R0]] * 7 + %[[R1]] - 3, %[[OW0]] * 32 + %[[OW1]] * 2 + %[[S0]] * 7 + %[[S1]] - 3]
// SPLIT-NEXT:                  affine.load %filter[%[[K0]] * 64 + %[[K1]], %[[C0]] + %[[C1]], %[[R0]] * 7 + %[[R1]], %[[S0]] * 7 + %[[S1]]]
// SPLIT-NEXT:                  arith.mulf
// SPLIT-NEXT:                  affine.load %[[ACC]][%[[N1]], %[[K1]], %[[OH1]], %[[OW1]]] : memref<1x64x16x16xf32>
// SPLIT-NEXT:                  arith.addf
// SPLIT-NEXT:                  affine.store %{{.*}}, %[[ACC]][%[[N1]], %[[K1]], %[[OH1]], %[[OW1]]] : memref<1x64x16x16xf32>
// SPLIT:               } {affinec.tile}
// SPLIT-NEXT:        } {affinec.tile}
// SPLIT-NEXT:      } {affinec.tile}
// SPLIT-NEXT:    } {affinec.mapping = "block"}
// SPLIT-NEXT:    affine.parallel (%[[A:.*]], %[[B:.*]], %[[C:.*]], %[[D:.*]]) = (0, 0, 0, 0) to (1, 64, 16, 16) {
// SPLIT-NEXT:      %[[V:.*]] = affine.load %[[ACC]][%[[A]], %[[B]], %[[C]], %[[D]]] : memref<1x64x16x16xf32>
// SPLIT-NEXT:      affine.store %[[V]], %output[%[[N0]] + %[[A]], %[[K0]] * 64 + %[[B]], %[[OH0]] * 16 + %[[C]], %[[OW0]] * 16 + %[[D]]]
// SPLIT-NEXT:    } {affinec.mapping = "block"}
// SPLIT-NEXT:  } {affinec.mapping = "grid"}
// SPLIT-NOT:   memref.alloca

// After sinking: the reduce loop moves below the tile loops (%c0, %r0, %s0); the
// point loops stay inside it.
// SINK-LABEL: func.func @conv
// SINK:       memref.alloc() : memref<1x64x16x16xf32>
// SINK:       } {affinec.mapping = "block"}
// SINK-NEXT:  affine.for %[[C0:.*]] = 0 to 4 {
// SINK-NEXT:    affine.for %[[R0:.*]] = 0 to 1 {
// SINK-NEXT:      affine.for %[[S0:.*]] = 0 to 1 {
// SINK-NEXT:        affine.parallel (%[[N1:.*]], %[[K1:.*]], %[[OH1:.*]], %[[OW1:.*]]) = (0, 0, 0, 0) to (1, 64, 16, 16) {
// SINK-NEXT:          affine.for %[[C1:.*]] = 0 to 1 {
// SINK-NEXT:            affine.for %[[R1:.*]] = 0 to 7 {
// SINK-NEXT:              affine.for %[[S1:.*]] = 0 to 7 {
// SINK-NEXT:                affinec.padded_load %input[%{{.*}} + %[[N1]], %[[C0]] + %[[C1]], %{{.*}} * 32 + %[[OH1]] * 2 + %[[R0]] * 7 + %[[R1]] - 3,
// SINK:                     affine.store %{{.*}}, %{{.*}}[%[[N1]], %[[K1]], %[[OH1]], %[[OW1]]] : memref<1x64x16x16xf32>
// SINK-NEXT:              }
// SINK-NEXT:            }
// SINK-NEXT:          }
// SINK-NEXT:        } {affinec.mapping = "block"}
// SINK-NEXT:      } {affinec.tile}
// SINK-NEXT:    } {affinec.tile}
// SINK-NEXT:  } {affinec.tile}
// SINK-NEXT:  affine.parallel
// SINK-NEXT:    affine.load
// SINK-NEXT:    affine.store %{{.*}}, %output

// With depth=6, below every reduction loop: the reference design's sinking listing.
// SINK6:      affine.for %{{.*}} = 0 to 4 {
// SINK6-NEXT:   affine.for %{{.*}} = 0 to 1 {
// SINK6-NEXT:     affine.for %{{.*}} = 0 to 1 {
// SINK6-NEXT:       affine.for %{{.*}} = 0 to 1 {
// SINK6-NEXT:         affine.for %{{.*}} = 0 to 7 {
// SINK6-NEXT:           affine.for %{{.*}} = 0 to 7 {
// SINK6-NEXT:             affine.parallel (%{{.*}}) = (0, 0, 0, 0) to (1, 64, 16, 16) {
// SINK6-NEXT:               affinec.padded_load

// The default pipeline (default sizes: blocks of 1x1x16x16, c in tiles of 1), with
// canonicalization: single-iteration loops gone.
// DEFAULT:      affine.parallel (%{{.*}}) = (0, 0, 0, 0) to (128, 64, 7, 7) {
// DEFAULT-NEXT:   memref.alloc() : memref<1x1x16x16xf32>
// DEFAULT:        affine.for %[[C0:.*]] = 0 to 4 {
// DEFAULT-NEXT:     affine.parallel (%{{.*}}) = (0, 0, 0, 0) to (1, 1, 16, 16) {
// DEFAULT-NEXT:       affine.for %[[R:.*]] = 0 to 7 {
// DEFAULT-NEXT:         affine.for %[[S:.*]] = 0 to 7 {
// DEFAULT-NEXT:           affinec.padded_load %input[%{{.*}}, %[[C0]], %{{.*}} * 32 + %{{.*}} * 2 + %[[R]] - 3, %{{.*}} * 32 + %{{.*}} * 2 + %[[S]] - 3]
// DEFAULT:            } {affinec.mapping = "block"}
// DEFAULT-NEXT:     } {affinec.tile}
