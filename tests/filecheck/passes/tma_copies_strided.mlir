// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=1,8,8,64 reduction-tile-sizes=1,1,64 reassociate=true},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies' | filecheck %s
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=1,8,8,64 reduction-tile-sizes=1,1,64 reassociate=true},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies' | affinec-opt - | filecheck %s
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=1,8,8,64 reduction-tile-sizes=1,1,64 reassociate=true},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies,affinec-map-threads,affinec-plan-shared-memory,affinec-convert-parallel-to-gpu,gpu-kernel-outlining,affinec-narrow-indices,lower-affine,cse,convert-nvgpu-to-nvvm' | filecheck %s --check-prefix=NVVM

// A 3x3 stride-2 f16 convolution (NHWC/RSCK, 64 -> 64 channels, 16x16 -> 8x8) on
// the tensor-core route for sm_90a, one block of its 8 x 8 pixels, a step of one
// tap and 64 channels in two stages. The promotion copies, for each tap, the
// input rows and columns the tap reads: every other one from the tap's shifted
// origin (oh0 * 16 + r - 1, ow0 * 16 + s - 1); affinec-tma-copies proves that band
// a box of 1 x 8 x 8 x 64 with element strides 2 along the rows and columns, and
// its tensor map carries them (traversal = [1, 2, 2, 1]; the filter's, all 1, is
// MLIR's form). The box lands as 8192 bytes (8 x 8 x 64 f16) at each load's
// coordinates, innermost first (CHECK, also after printing and parsing again).
// The kernel takes the strided tensor map as a parameter (NVVM).

// CHECK:      %input_map = nvgpu.tma.create.descriptor %{{.+}} box[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : memref<*xf16> -> !nvgpu.tensormap.descriptor<tensor = memref<1x8x8x64xf16, 3 : i64>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none, traversal = [1, 2, 2, 1]>
// CHECK:      %filter_map = nvgpu.tma.create.descriptor %{{.+}} box[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : memref<*xf16> -> !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xf16, 3 : i64>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK:      %[[BYTES:.+]] = arith.constant 8192 : index
// CHECK-NEXT: nvgpu.mbarrier.arrive.expect_tx %stage_barriers[%{{.+}}], %[[BYTES]]
// CHECK-NEXT: %[[N:.+]] = affine.apply affine_map<(d0, d1, d2, d3, d4) -> (d0)>(%n0, %oh0, %r0, %ow0, %s0)
// CHECK-NEXT: %[[H:.+]] = affine.apply affine_map<(d0, d1, d2, d3, d4) -> (d1 * 16 + d2 - 1)>(%n0, %oh0, %r0, %ow0, %s0)
// CHECK-NEXT: %[[W:.+]] = affine.apply affine_map<(d0, d1, d2, d3, d4) -> (d3 * 16 + d4 - 1)>(%n0, %oh0, %r0, %ow0, %s0)
// CHECK:      nvgpu.tma.async.load %input_map[%{{.+}}, %[[W]], %[[H]], %[[N]]], %stage_barriers[%{{.+}}] to %{{.+}} : !nvgpu.tensormap.descriptor<tensor = memref<1x8x8x64xf16, 3 : i64>, {{.+}}, traversal = [1, 2, 2, 1]>

// NVVM:      gpu.func @conv_kernel(%output: memref<1x8x8x64xf16>, %input_map: !nvgpu.tensormap.descriptor<tensor = memref<1x8x8x64xf16, 3 : i64>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none, traversal = [1, 2, 2, 1]>
// NVVM:      nvvm.cp.async.bulk.tensor.shared.cluster.global

builtin.module attributes {affinec.spec = "conv n=1 c=64 h=16 w=16 k=64 r=3 s=3 stride=2,2 pad=1,1 dilation=1,1 layout=nhwc filter-layout=rsck dtype=f16 epilogue=none", affinec.target = #nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">} {
  func.func @conv(%input: memref<1x16x16x64xf16>, %filter: memref<3x3x64x64xf16>, %output: memref<1x8x8x64xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%n, %oh, %ow, %k) = (0, 0, 0, 0) to (1, 8, 8, 64) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %r = 0 to 3 {
        affine.for %s = 0 to 3 {
          affine.for %c = 0 to 64 {
            %a = affinec.padded_load %input[%n, %oh * 2 + %r - 1, %ow * 2 + %s - 1, %c] : memref<1x16x16x64xf16>
            %a32 = arith.extf %a : f16 to f32
            %b = affine.load %filter[%r, %s, %c, %k] : memref<3x3x64x64xf16>
            %b32 = arith.extf %b : f16 to f32
            %prod = arith.mulf %a32, %b32 : f32
            %old = affine.load %acc[] : memref<f32>
            %new = arith.addf %old, %prod : f32
            affine.store %new, %acc[] : memref<f32>
          }
        }
      }
      %sum = affine.load %acc[] : memref<f32>
      %out = arith.truncf %sum : f32 to f16
      affine.store %out, %output[%n, %oh, %ow, %k] : memref<1x8x8x64xf16>
    }
    func.return
  }
}
