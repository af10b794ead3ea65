// RUN: affinec gen conv --n 1 --c 4 --h 20 --w 20 --k 16 --r 7 --s 7 --stride 2 --pad 3 --layout nhwc --filter-layout rsck --dtype f16 | affinec-opt -p 'affine-loop-tile{tile-sizes=1,4,4,16 reduction-tile-sizes=7,7,4 reassociate=true},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{generate-dma=true reduction-innermost=true},affinec-coalesce-reduction' > %t.mlir
// RUN: filecheck %s --input-file=%t.mlir
// RUN: affinec-opt %t.mlir | filecheck %s

// ResNet-50's first layer in small: 4 channels, 7x7 taps, stride 2. The shared
// tiles' columns x channels (input) and columns x channels (filter) are collapsed
// into one dimension each, the copies into them write there, and the loops over a
// filter row's columns and the channels become one loop of 28 over both: the k of
// the tensor cores, read with unit stride in both tiles.

// CHECK:      %filter_shared = memref.alloc() : memref<7x28x16xf16, 3 : i64>
// CHECK-NEXT: %input_shared = memref.alloc() : memref<1x13x52xf16, 3 : i64>
// CHECK:      %[[W:.*]] = affine.apply affine_map<(d0, d1, d2, d3) -> (d2)>
// CHECK-NEXT: %[[C:.*]] = affine.apply affine_map<(d0, d1, d2, d3) -> (d3 * 4)>
// CHECK-NEXT: %[[FLAT:.*]] = affine.apply affine_map<(d0, d1) -> (d0 * 4 + d1)>(%[[W]], %[[C]])
// CHECK-NEXT: nvgpu.device_async_copy %input[{{.*}}], %input_shared[%{{.*}}, %{{.*}}, %[[FLAT]]], 4, %{{.*}} : memref<1x20x20x4xf16> to memref<1x13x52xf16, 3 : i64>
// CHECK:      nvgpu.device_async_copy %filter[{{.*}}], %filter_shared[{{.*}}], 8, %{{.*}} : memref<7x7x4x16xf16> to memref<7x28x16xf16, 3 : i64>
// CHECK:      affine.for %r1 = 0 to 7 {
// CHECK-NEXT:   affine.for %sc = 0 to 28 {
// CHECK-NEXT:     %a = affine.load %input_shared[%n1_1, %oh1_1 * 2 + %r1, %ow1_1 * 8 + %sc] : memref<1x13x52xf16, 3 : i64>
// CHECK-NEXT:     %a32 = arith.extf %a : f16 to f32
// CHECK-NEXT:     %b = affine.load %filter_shared[%r1, %sc, %k1_1] : memref<7x28x16xf16, 3 : i64>
