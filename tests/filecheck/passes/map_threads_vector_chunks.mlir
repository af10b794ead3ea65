// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=1,2,4,16 reduction-tile-sizes=3,3},affinec-split,affinec-sink,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true},affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{register-tile=1,1,4,8 vector-width=8}' | filecheck %s
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=1,2,4,12 reduction-tile-sizes=3,3},affinec-split,affinec-sink,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true},affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{register-tile=1,1,4,4 vector-width=4}' | filecheck %s --check-prefix=PARTIAL
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=1,2,4,16 reduction-tile-sizes=3,3},affinec-split,affinec-sink,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true},affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{register-tile=1,1,4,8 vector-width=8},affinec-plan-shared-memory,affinec-contract-fma,affinec-convert-parallel-to-gpu,gpu-kernel-outlining,affinec-narrow-indices,lower-affine,cse,convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{index-bitwidth=0 use-bare-ptr-memref-call-conv=true}' -t ptx | filecheck %s --check-prefix=PTX

// A depthwise convolution (16 channels, bias) whose threads each own 4 pixels x 8
// channels, the 8 contiguous: each tap reads a pixel's 8 input channels and their
// 8 filter taps as one 16-byte vector each from the shared tiles, the
// accumulation element by element; the write-back of each pixel's chunk is 8 copies of
// the epilogue packed into one vector and stored once, the bias read as one vector;
// the chunk starts at a multiple of 8 channels (the block's 16, the thread's 8), so
// the store is aligned to its 16 bytes: one st.global.v4.b32 a pixel. With blocks of
// 12 channels (a partial tile over 16), a chunk may run past the channels: stored
// element by element, under the guard.

// CHECK:      %[[A:.*]] = affine.vector_load %input_shared[{{.*}}, %[[GA:.*]]] : memref<1x4x6x16xf16, 3 : i64>, vector<8xf16>
// CHECK-NEXT: vector.extract %[[A]][0] : f16 from vector<8xf16>
// CHECK:      %[[B:.*]] = affine.vector_load %filter_shared[%{{.*}}, %{{.*}}, 0, %[[GA]]] : memref<3x3x1x16xf16, 3 : i64>, vector<8xf16>
// CHECK:      affine.store %{{.*}}, %acc[0, 0, %{{.*}}, %e0]
// CHECK:      vector.extract %[[B]][7]
// CHECK-NOT:  affine.load %input_shared
// CHECK:      %[[ZERO:.*]] = vector.broadcast %{{.*}} : f16 to vector<8xf16>
// CHECK:      %[[BIAS:.*]] = affine.vector_load %bias[%g0 * 16 + %[[G:.*]]] : memref<16xf16>, vector<8xf16>
// CHECK-NEXT: vector.extract %[[BIAS]][0] : f16 from vector<8xf16>
// CHECK:      %[[P0:.*]] = vector.insert %{{.*}}, %[[ZERO]] [0] : f16 into vector<8xf16>
// CHECK:      vector.extract %[[BIAS]][7] : f16 from vector<8xf16>
// CHECK:      %[[P7:.*]] = vector.insert %{{.*}} [7] : f16 into vector<8xf16>
// CHECK-NEXT: affine.vector_store %[[P7]], %output[{{.*}}, %g0 * 16 + %[[G]]] : memref<1x4x4x16xf16>, vector<8xf16>
// CHECK-NOT:  affine.store %{{.*}}, %output

// PARTIAL-NOT: affine.vector_store
// PARTIAL:     affine.if
// PARTIAL:     affine.store %{{.*}}, %output

// PTX-COUNT-4: st.global.v4.b32
// PTX-NOT:     st.global.b16
builtin.module attributes {affinec.spec = "conv n=1 c=16 h=4 w=4 k=16 r=3 s=3 stride=1,1 pad=1,1 dilation=1,1 layout=nhwc filter-layout=rsck dtype=f16 epilogue=bias groups=16"} {
  func.func @conv(%input: memref<1x4x4x16xf16>, %filter: memref<3x3x1x16xf16>, %bias: memref<16xf16>, %output: memref<1x4x4x16xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%n, %oh, %ow, %g) = (0, 0, 0, 0) to (1, 4, 4, 16) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %r = 0 to 3 {
        affine.for %s = 0 to 3 {
          %a = affinec.padded_load %input[%n, %oh + %r - 1, %ow + %s - 1, %g] : memref<1x4x4x16xf16>
          %a32 = arith.extf %a : f16 to f32
          %b = affine.load %filter[%r, %s, 0, %g] : memref<3x3x1x16xf16>
          %b32 = arith.extf %b : f16 to f32
          %prod = arith.mulf %a32, %b32 : f32
          %old = affine.load %acc[] : memref<f32>
          %new = arith.addf %old, %prod : f32
          affine.store %new, %acc[] : memref<f32>
        }
      }
      %sum = affine.load %acc[] : memref<f32>
      %bval = affine.load %bias[%g] : memref<16xf16>
      %bval32 = arith.extf %bval : f16 to f32
      %biased = arith.addf %sum, %bval32 : f32
      %out = arith.truncf %biased : f32 to f16
      affine.store %out, %output[%n, %oh, %ow, %g] : memref<1x4x4x16xf16>
    }
    func.return
  }
}
