// RUN: affinec gen conv --n 1 --c 4 --h 224 --w 224 --k 64 --r 7 --s 7 --stride 2 --pad 3 | affinec-opt -p 'affine-loop-tile{tile-sizes=1,64,16,16 reduction-tile-sizes=1,7,7},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate' > %t.mlir
// RUN: filecheck %s --input-file=%t.mlir
// RUN: affinec-opt %t.mlir | filecheck %s

// The reference design's shared-memory promotion of ResNet-50's first layer: a block
// of 64 filters x 16x16 outputs (stride 2, 7x7 taps) reads, per input channel,
// 1x1x37x37 of the input and 64x1x7x7 of the filter, copied by block-mapped bands
// into shared buffers (memory space 3) inside the channel's tile loop, the compute
// band reading them at index - origin.

// CHECK:      affine.parallel (%n0, %k0, %oh0, %ow0) = (0, 0, 0, 0) to (1, 1, 7, 7) {
// CHECK-NEXT:   %filter_shared = memref.alloc() : memref<64x1x7x7xf32, 3 : i64>
// CHECK-NEXT:   %input_shared = memref.alloc() : memref<1x1x37x37xf32, 3 : i64>
// CHECK:        affine.for %c0 = 0 to 4 {
// CHECK-NEXT:     affine.parallel (%[[F0:.*]], %[[F1:.*]], %[[F2:.*]], %[[F3:.*]]) = (0, 0, 0, 0) to (1, 1, 37, 37) {
// CHECK-NEXT:       %[[V:.*]] = affinec.padded_load %input[%n0 + %[[F0]], %c0 + %[[F1]], %oh0 * 32 + %[[F2]] - 3, %ow0 * 32 + %[[F3]] - 3] : memref<1x4x224x224xf32>
// CHECK-NEXT:       affine.store %[[V]], %input_shared[%[[F0]], %[[F1]], %[[F2]], %[[F3]]] : memref<1x1x37x37xf32, 3 : i64>
// CHECK-NEXT:     } {affinec.mapping = "block"}
// CHECK-NEXT:     affine.parallel ({{.*}}) = (0, 0, 0, 0) to (64, 1, 7, 7) {
// CHECK-NEXT:       %{{.*}} = affinec.padded_load %filter[%k0 * 64 + {{.*}}] : memref<64x4x7x7xf32>
// CHECK-NEXT:       affine.store %{{.*}}, %filter_shared[{{.*}}] : memref<64x1x7x7xf32, 3 : i64>
// CHECK-NEXT:     } {affinec.mapping = "block"}
// CHECK-NEXT:     affine.parallel (%n1_1, %k1_1, %oh1_1, %ow1_1) = (0, 0, 0, 0) to (1, 64, 16, 16) {
// CHECK-NEXT:       affine.for %r1 = 0 to 7 {
// CHECK-NEXT:         affine.for %s1 = 0 to 7 {
// CHECK-NEXT:           %a = affine.load %input_shared[%n1_1, 0, %oh1_1 * 2 + %r1, %ow1_1 * 2 + %s1] : memref<1x1x37x37xf32, 3 : i64>
// CHECK-NEXT:           %b = affine.load %filter_shared[%k1_1, 0, %r1, %s1] : memref<64x1x7x7xf32, 3 : i64>
