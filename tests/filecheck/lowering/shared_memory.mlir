// RUN: affinec-opt %S/inputs/matmul_shared.mlir -p 'affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=4},affinec-convert-parallel-to-gpu' | filecheck %s

// A block buffer read at other indices than those it was written at is shared by
// the block's threads: a workgroup buffer in memory space 3. A barrier separates the
// copy from the band that reads it, and another the reads from the next trip's copy.

// CHECK: gpu.launch {{.*}} workgroup(%[[TILE:.*]] : memref<4x3xf32, 3 : i64>) {
// CHECK:   %[[ACC:.*]] = memref.alloca() : memref<3xf32>
// CHECK:   affine.for %{{.*}} = 0 to 2 {
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: affine.for
// CHECK:        affine.store %{{.*}}, %[[TILE]][%{{.*}}, %{{.*}}] : memref<4x3xf32, 3 : i64>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: affine.for
// CHECK:        affine.load %[[TILE]][
// CHECK-NOT: gpu.barrier
// CHECK:   gpu.terminator
