// RUN: affinec-opt %S/inputs/conv_split.mlir -p 'affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=8},affinec-convert-parallel-to-gpu' > %t.mlir
// RUN: filecheck %s --input-file=%t.mlir
// RUN: affinec-opt %t.mlir | filecheck %s
// RUN: affinec-opt %S/inputs/conv_split.mlir -p 'affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=8},affinec-convert-parallel-to-gpu' --print-op-generic | affinec-opt | filecheck %s
// RUN: affinec-opt %S/inputs/conv_split.mlir -p 'affinec-map-to-gpu' | filecheck %s --check-prefix=AUTO

// The grid band (1x2x2x2 blocks) becomes blockIdx.x, delinearized; each block band
// (1x2x4x4 = 32 iterations, partial tiles on three axes) is shared by 8 threads in 4
// turns, under one guard; the block-shaped accumulator, only ever indexed by the
// band's own variables, becomes 4 floats per thread indexed by the turn, whose loops
// are marked for full unrolling (so the floats stay in registers).

// CHECK:      %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[GRID:.*]] = arith.constant 8 : index
// CHECK-NEXT: %[[THREADS:.*]] = arith.constant 8 : index
// CHECK-NEXT: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[GRID]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]]) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[THREADS]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]]) {
// CHECK:        %[[K0:.*]] = affine.apply affine_map<(d0) -> (d0 floordiv 4)>(%[[BX]])
// CHECK-NEXT:   %[[OH0:.*]] = affine.apply affine_map<(d0) -> (d0 floordiv 2 mod 2)>(%[[BX]])
// CHECK-NEXT:   %[[OW0:.*]] = affine.apply affine_map<(d0) -> (d0 mod 2)>(%[[BX]])
// CHECK-NEXT:   %[[ACC:.*]] = memref.alloca() : memref<4xf32>
// CHECK-NEXT:   affine.for %[[J:.*]] = 0 to 4 {
// CHECK:          %[[K1:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + d1 * 8) floordiv 16)>(%[[TX]], %[[J]])
// CHECK-NEXT:     %[[OH1:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 floordiv 4 + d1 * 2) mod 4)>(%[[TX]], %[[J]])
// CHECK-NEXT:     %[[OW1:.*]] = affine.apply affine_map<(d0, d1) -> (d0 mod 4)>(%[[TX]], %[[J]])
// CHECK-NEXT:     affine.if affine_set<(d0, d1, d2, d3, d4, d5) : (-d0 - d1 * 2 + 2 >= 0, d2 * -4 - d4 + 4 >= 0, d3 * -4 - d5 + 4 >= 0)>(%[[K1]], %[[K0]], %[[OH0]], %[[OW0]], %[[OH1]], %[[OW1]]) {
// CHECK-NEXT:       affine.store %{{.*}}, %[[ACC]][%[[J]]] : memref<4xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   } {affinec.unroll}
// CHECK:        affine.for %s = 0 to 3 {
// CHECK-NEXT:     affine.for %[[J1:.*]] = 0 to 4 {
// CHECK:            affinec.padded_load %input
// CHECK:            %[[OLD:.*]] = affine.load %[[ACC]][%[[J1]]] : memref<4xf32>
// CHECK:            affine.store %{{.*}}, %[[ACC]][%[[J1]]] : memref<4xf32>
// CHECK:          } {affinec.unroll}
// CHECK:        affine.store %{{.*}}, %output[
// CHECK:        gpu.terminator
// CHECK-NEXT: }
// CHECK-NOT:  affinec.mapping
// CHECK-NOT:  gpu.barrier

// By default a block has as many threads as its largest band has iterations (32).
// AUTO: %[[T:.*]] = arith.constant 32 : index
// AUTO: gpu.launch {{.*}} threads(%{{.*}}) in (%{{.*}} = %[[T]],
// AUTO: memref.alloca() : memref<1xf32>
// AUTO-NOT: affine.for %j
