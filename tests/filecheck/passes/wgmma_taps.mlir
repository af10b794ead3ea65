// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=1,4,4,16 reduction-tile-sizes=3,3,16 reassociate=true},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affinec-place-buffers,affinec-insert-barriers,affinec-wgmma' | filecheck %s
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=1,4,4,16 reduction-tile-sizes=3,3,16 reassociate=true},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affinec-place-buffers,affinec-insert-barriers,affinec-wgmma,affinec-map-threads,affinec-plan-shared-memory,affinec-convert-parallel-to-gpu,gpu-kernel-outlining,affinec-narrow-indices,lower-affine,cse,convert-nvgpu-to-nvvm' | filecheck %s --check-prefix=NVVM
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=1,4,4,16 reduction-tile-sizes=3,3,16 reassociate=true},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affinec-place-buffers,affinec-insert-barriers,affinec-wgmma,affinec-map-threads,affinec-plan-shared-memory,affinec-convert-parallel-to-gpu,gpu-kernel-outlining,affinec-narrow-indices,lower-affine,cse,convert-nvgpu-to-nvvm' | affinec-opt | filecheck %s --check-prefix=NVVM
// RUN: sed 's/sm_90a/sm_80/' %s | not affinec-opt - -p 'affine-loop-tile{tile-sizes=1,4,4,16 reduction-tile-sizes=3,3,16 reassociate=true},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affinec-place-buffers,affinec-insert-barriers,affinec-wgmma' 2>&1 | filecheck %s --check-prefix=SM80

// A 3x3 stride-2 f16 convolution (NHWC/RSCK, 16 -> 16 channels, 8x8 -> 4x4) on the
// tensor-core route for sm_90a, one block of its 16 pixels, a step of all 9 taps
// over the 16 channels. Its A is no 2-D tile (a tap is a strided, shifted read of
// the input window), so affinec-wgmma reads A from registers: each warp loads its
// 16 rows x k16 of each tap with affinec-mma-sync's ldmatrix (rows past the block's
// 16 pixels read its last one), and one affinec.warpgroup_mma_registers takes the 9
// fragments and the filter tile of the 9 taps (CHECK). The planner interleaves the
// filter tile as wgmma reads it (8 x 8 core matrices, 12 rows of 16 bytes apart)
// and pads the input window's rows for ldmatrix (16 -> 24 channels); the lowering
// writes one descriptor a tap, 768 bytes (48 x 16) apart (LBO 384 B, SBO 192 B:
// 51541180416), the threads' A registers from the fragments, a wgmma.fence right
// before the run of 9 wgmmas, then commit and wait (NVVM; it prints and re-parses).
// Another target is refused (SM80).

// CHECK:      %fragments = memref.alloc() : memref<1x2x4xf32, 5 : i64>
// CHECK:      affine.parallel (%[[TX:.+]]) = (0) to (128) {
// CHECK-COUNT-9: nvgpu.ldmatrix %input_shared[{{.+}}] {transpose = false, numTiles = 4 : i32} : memref<1x9x9x16xf16, 3 : i64> -> vector<4x2xf16>
// CHECK-NEXT: affinec.warpgroup_mma_registers %fragments, (%{{.+}}), %filter_shared[] {taps = 2 : i64} : memref<1x2x4xf32, 5 : i64>, memref<3x3x16x16xf16, 3 : i64>, (vector<4x2xf16>, vector<4x2xf16>, vector<4x2xf16>, vector<4x2xf16>, vector<4x2xf16>, vector<4x2xf16>, vector<4x2xf16>, vector<4x2xf16>, vector<4x2xf16>)
// CHECK-NEXT: } {affinec.mapping = "thread"}

// NVVM:      workgroup(%filter_shared : memref<3x3x2x2x12x8xf16, 3 : i64>, %input_shared : memref<1x9x9x24xf16, 3 : i64>)
// NVVM:      nvvm.fence.proxy.async.shared_cta
// NVVM:      %[[FIELDS:.+]] = arith.constant 51541180416 : i64
// NVVM:      arith.constant 48 : i64
// NVVM:      arith.constant 384 : i64
// NVVM:      nvvm.wgmma.fence.aligned
// NVVM-NEXT: nvvm.wgmma.mma_async.registers(%{{[^)]+}}), (%{{[^)]+}}), %{{.+}} {n = 16 : i64, kind = "f16", transposed_b} : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
// NVVM-NEXT: nvvm.wgmma.commit.group.sync.aligned
// NVVM-NEXT: nvvm.wgmma.wait.group.sync.aligned 0

// SM80: error: 'affine.parallel' op wgmma needs sm_90a; the module is compiled for sm_80

builtin.module attributes {affinec.spec = "conv n=1 c=16 h=8 w=8 k=16 r=3 s=3 stride=2,2 pad=1,1 dilation=1,1 layout=nhwc filter-layout=rsck dtype=f16 epilogue=none", affinec.target = #nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">} {
  func.func @conv(%input: memref<1x8x8x16xf16>, %filter: memref<3x3x16x16xf16>, %output: memref<1x4x4x16xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%n, %oh, %ow, %k) = (0, 0, 0, 0) to (1, 4, 4, 16) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %r = 0 to 3 {
        affine.for %s = 0 to 3 {
          affine.for %c = 0 to 16 {
            %a = affinec.padded_load %input[%n, %oh * 2 + %r - 1, %ow * 2 + %s - 1, %c] : memref<1x8x8x16xf16>
            %a32 = arith.extf %a : f16 to f32
            %b = affine.load %filter[%r, %s, %c, %k] : memref<3x3x16x16xf16>
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
      affine.store %out, %output[%n, %oh, %ow, %k] : memref<1x4x4x16xf16>
    }
    func.return
  }
}
