// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=1,6,6,32 reduction-tile-sizes=3,3,16 reassociate=true},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=3},affinec-place-buffers,affinec-stage-output' | filecheck %s
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=1,6,6,32 reduction-tile-sizes=3,3,16 reassociate=true},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=3},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers' | filecheck %s --check-prefix=BARRIERS

// The write-back of a 6x6-pixel, 32-channel block (bias and ReLU) stores into a
// shared tile of pixels x channels, and a band copies it out 8 halves (16 bytes) an
// iteration, its turns to be unrolled; the tile may take the bytes of the block's
// other shared buffers (affinec.overlay), so the barriers fence it from them.

builtin.module attributes {affinec.spec = "conv n=1 c=16 h=6 w=6 k=32 r=3 s=3 stride=1,1 pad=1,1 dilation=1,1 layout=nhwc filter-layout=rsck dtype=f16 epilogue=bias-relu"} {
  func.func @conv(%input: memref<1x6x6x16xf16>, %filter: memref<3x3x16x32xf16>, %bias: memref<32xf16>, %output: memref<1x6x6x32xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%n, %oh, %ow, %k) = (0, 0, 0, 0) to (1, 6, 6, 32) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %r = 0 to 3 {
        affine.for %s = 0 to 3 {
          affine.for %c = 0 to 16 {
            %a = affinec.padded_load %input[%n, %oh + %r - 1, %ow + %s - 1, %c] : memref<1x6x6x16xf16>
            %a32 = arith.extf %a : f16 to f32
            %b = affine.load %filter[%r, %s, %c, %k] : memref<3x3x16x32xf16>
            %b32 = arith.extf %b : f16 to f32
            %prod = arith.mulf %a32, %b32 : f32
            %old = affine.load %acc[] : memref<f32>
            %new = arith.addf %old, %prod : f32
            affine.store %new, %acc[] : memref<f32>
          }
        }
      }
      %sum = affine.load %acc[] : memref<f32>
      %bval = affine.load %bias[%k] : memref<32xf16>
      %bval32 = arith.extf %bval : f16 to f32
      %biased = arith.addf %sum, %bval32 : f32
      %relu = arith.maximumf %biased, %zero : f32
      %out = arith.truncf %relu : f32 to f16
      affine.store %out, %output[%n, %oh, %ow, %k] : memref<1x6x6x32xf16>
    }
    func.return
  }
}

// CHECK:      %output_shared = memref.alloc() {affinec.overlay} : memref<36x32xf16, 3 : i64>
// CHECK:      affine.store %new, %acc
// CHECK:      affine.parallel (%[[N1:[a-z0-9_]+]], %[[OH1:[a-z0-9_]+]], %[[OW1:[a-z0-9_]+]], %[[K1:[a-z0-9_]+]]) = (0, 0, 0, 0) to (1, 6, 6, 32) {
// CHECK:        %relu = arith.maximumf
// CHECK:        %out = arith.truncf %relu : f32 to f16
// CHECK-NEXT:   affine.store %out, %output_shared[%[[OH1]] * 6 + %[[OW1]], %[[K1]]] : memref<36x32xf16, 3 : i64>
// CHECK-NEXT: } {affinec.mapping = "block"}
// CHECK-NEXT: affine.parallel (%m, %kv) = (0, 0) to (36, 4) {
// CHECK:        %[[OH:.*]] = affine.apply affine_map<(d0) -> (d0 floordiv 6)>(%m)
// CHECK-NEXT:   %[[OW:.*]] = affine.apply affine_map<(d0) -> (d0 mod 6)>(%m)
// CHECK-NEXT:   %[[K:.*]] = affine.apply affine_map<(d0) -> (d0 * 8)>(%kv)
// CHECK-NEXT:   %[[V:.*]] = affine.vector_load %output_shared[%m, %kv * 8] : memref<36x32xf16, 3 : i64>, vector<8xf16>
// CHECK-NEXT:   affine.vector_store %[[V]], %output[{{.*}}, %oh0 * 6 + %[[OH]], %ow0 * 6 + %[[OW]], %k0 * 32 + %[[K]]] : memref<1x6x6x32xf16>, vector<8xf16>
// CHECK-NEXT: } {affinec.mapping = "block", affinec.unroll}

// BARRIERS:      arith.maximumf
// BARRIERS:      gpu.barrier
// BARRIERS-NEXT: affine.parallel (%m, %kv)
// BARRIERS:      affinec.mapping = "grid"
