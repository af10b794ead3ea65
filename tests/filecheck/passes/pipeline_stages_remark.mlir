// RUN: affinec-opt %s --verify-diagnostics -p 'affine-loop-tile{tile-sizes=1,16,2,32 reduction-tile-sizes=3,3,16 reassociate=true},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=4}'

// Four stages asked for a reduction of two tiles (32 channels in steps of 16): the
// pass allocates two, the most that can be in flight, and says so.

builtin.module attributes {affinec.spec = "conv n=1 c=32 h=9 w=6 k=32 r=3 s=3 stride=1,1 pad=1,1 dilation=1,1 layout=nhwc filter-layout=rsck dtype=f16 epilogue=none"} {
  func.func @conv(%input: memref<1x9x6x32xf16>, %filter: memref<3x3x32x32xf16>, %output: memref<1x9x6x32xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%n, %oh, %ow, %k) = (0, 0, 0, 0) to (1, 9, 6, 32) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %r = 0 to 3 {
        affine.for %s = 0 to 3 {
        // expected-remark @+1 {{4 stages asked for 2 tiles: 2 stages (no more can be in flight)}}
          affine.for %c = 0 to 32 {
            %a = affinec.padded_load %input[%n, %oh + %r - 1, %ow + %s - 1, %c] : memref<1x9x6x32xf16>
            %a32 = arith.extf %a : f16 to f32
            %b = affine.load %filter[%r, %s, %c, %k] : memref<3x3x32x32xf16>
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
      affine.store %out, %output[%n, %oh, %ow, %k] : memref<1x9x6x32xf16>
    }
    func.return
  }
}
