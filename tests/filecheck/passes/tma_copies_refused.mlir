// RUN: not affinec-opt %s -p 'affine-loop-tile{tile-sizes=64,64 reduction-tile-sizes=32},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies' 2>&1 | filecheck %s

// A 128x64x60 f16 product: A's rows are 120 bytes apart, which TMA's global strides
// (multiples of 16 bytes) cannot describe; affinec-tma-copies refuses the copy of A
// located, saying so (KernelConfig(tma=False), affinec compile --no-tma, keeps the
// cp.async copies there).

// CHECK: tma_copies_refused.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'nvgpu.device_async_copy' op the rows of memref<128x60xf16> are 120 bytes apart: TMA needs a multiple of 16

builtin.module attributes {affinec.spec = "matmul m=128 n=64 k=60 dtype=f16 epilogue=none", affinec.target = #nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">} {
  func.func @matmul(%A: memref<128x60xf16>, %B: memref<60x64xf16>, %C: memref<128x64xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%i, %j) = (0, 0) to (128, 64) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %p = 0 to 60 {
        %a = affine.load %A[%i, %p] : memref<128x60xf16>
        %a32 = arith.extf %a : f16 to f32
        %b = affine.load %B[%p, %j] : memref<60x64xf16>
        %b32 = arith.extf %b : f16 to f32
        %prod = arith.mulf %a32, %b32 : f32
        %old = affine.load %acc[] : memref<f32>
        %new = arith.addf %old, %prod : f32
        affine.store %new, %acc[] : memref<f32>
      }
      %sum = affine.load %acc[] : memref<f32>
      %out = arith.truncf %sum : f32 to f16
      affine.store %out, %C[%i, %j] : memref<128x64xf16>
    }
    func.return
  }
}
