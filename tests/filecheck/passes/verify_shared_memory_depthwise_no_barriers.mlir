// RUN: not affinec-opt %s -p 'affine-loop-tile,affinec-split,affinec-sink,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true},affinec-place-buffers,affinec-map-threads,affinec-plan-shared-memory,affinec-contract-fma,affinec-convert-parallel-to-gpu,gpu-kernel-outlining,affinec-narrow-indices,lower-affine,cse,convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{index-bitwidth=0 use-bare-ptr-memref-call-conv=true}' -t ptx 2>&1 | filecheck %s
// RUN: not affinec-opt %s -p 'affine-loop-tile,affinec-split,affinec-sink,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true},affinec-place-buffers,affinec-map-threads,affinec-verify-shared-memory' --disable-verify 2>&1 | filecheck %s
// RUN: affinec-opt %s -p 'affine-loop-tile,affinec-split,affinec-sink,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true},affinec-place-buffers,affinec-insert-barriers,affinec-map-threads,affinec-plan-shared-memory,affinec-contract-fma,affinec-convert-parallel-to-gpu,gpu-kernel-outlining,affinec-narrow-indices,lower-affine,cse,convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{index-bitwidth=0 use-bare-ptr-memref-call-conv=true}' -t ptx | filecheck %s --check-prefix=BARRIERS

// An f16 depthwise convolution through the default pipeline with
// affinec-insert-barriers left out: each thread copies input elements into
// %input_shared and then reads the 3 x 3 window of its own output pixel, which
// other threads copied. The copy and the compute are two thread bands of one loop
// (one thread's code in the kernel) with no gpu.barrier between them; the check
// refuses it at the read, naming the copy, the element and the two threads, before
// any PTX is written: affinec-map-threads' own check, or, where the passes' checks
// are left out (--disable-verify), affinec-verify-shared-memory after it. With the
// barriers placed, the same pipeline compiles.

// CHECK: :[[# @LINE + 14]]:18: error: 'affine.load' op reads %input_shared[0, 0..3, 0..6, 0..5], which 'affine.store %{{.*}}, %input_shared[{{.*}}] : memref<1x4x7x6xf16, 3 : i64>' wrote into %input_shared[0, 0..3, 0..6, 0..5] with no gpu.barrier between: other threads' writes may not be visible yet (thread ({{[0-9]+}}, 0, 0) writes %input_shared[{{[0-9, ]+}}], thread ({{[0-9]+}}, 0, 0) reads it)
// CHECK-NOT: .entry

// BARRIERS: .entry conv_kernel
// BARRIERS: bar.sync
builtin.module attributes {affinec.spec = "conv n=1 c=4 h=5 w=4 k=4 r=3 s=3 stride=1,1 pad=1,1 dilation=1,1 layout=nchw filter-layout=kcrs dtype=f16 epilogue=bias,relu6 groups=4"} {
  func.func @conv(%input: memref<1x4x5x4xf16>, %filter: memref<4x1x3x3xf16>, %bias: memref<4xf16>, %output: memref<1x4x5x4xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%n, %g, %k, %oh, %ow) = (0, 0, 0, 0, 0) to (1, 4, 1, 5, 4) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %c = 0 to 1 {
        affine.for %r = 0 to 3 {
          affine.for %s = 0 to 3 {
            %a = affinec.padded_load %input[%n, %g + %c, %oh + %r - 1, %ow + %s - 1] : memref<1x4x5x4xf16>
            %a32 = arith.extf %a : f16 to f32
            %b = affine.load %filter[%g + %k, %c, %r, %s] : memref<4x1x3x3xf16>
            %b32 = arith.extf %b : f16 to f32
            %prod = arith.mulf %a32, %b32 : f32
            %old = affine.load %acc[] : memref<f32>
            %new = arith.addf %old, %prod : f32
            affine.store %new, %acc[] : memref<f32>
          }
        }
      }
      %sum = affine.load %acc[] : memref<f32>
      %bval = affine.load %bias[%g + %k] : memref<4xf16>
      %bval32 = arith.extf %bval : f16 to f32
      %biased = arith.addf %sum, %bval32 : f32
      %relu = arith.maximumf %biased, %zero : f32
      %six = arith.constant 6.000000e+00 : f32
      %relu6 = arith.minimumf %relu, %six : f32
      %out = arith.truncf %relu6 : f32 to f16
      affine.store %out, %output[%n, %g + %k, %oh, %ow] : memref<1x4x5x4xf16>
    }
    func.return
  }
}
