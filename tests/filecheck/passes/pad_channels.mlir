// RUN: affinec-opt %s -p 'affinec-pad-channels{multiple=4}' | filecheck %s

// ResNet-50's first layer has 3 input channels: padded to 4 with zeros (loads past
// the tensors read 0), a pixel's channels are 8 bytes of f16 and a stride-2 window's
// rows of k start on 16 bytes, as ldmatrix needs.

builtin.module attributes {affinec.spec = "conv n=1 c=3 h=8 w=8 k=8 r=3 s=3 stride=2,2 pad=1,1 dilation=1,1 layout=nhwc filter-layout=rsck dtype=f16 epilogue=none"} {
  func.func @conv(%input: memref<1x8x8x3xf16>, %filter: memref<3x3x3x8xf16>, %output: memref<1x4x4x8xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%n, %oh, %ow, %k) = (0, 0, 0, 0) to (1, 4, 4, 8) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %r = 0 to 3 {
        affine.for %s = 0 to 3 {
          affine.for %c = 0 to 3 {
            %a = affinec.padded_load %input[%n, %oh * 2 + %r - 1, %ow * 2 + %s - 1, %c] : memref<1x8x8x3xf16>
            %a32 = arith.extf %a : f16 to f32
            %b = affine.load %filter[%r, %s, %c, %k] : memref<3x3x3x8xf16>
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
      affine.store %out, %output[%n, %oh, %ow, %k] : memref<1x4x4x8xf16>
    }
    func.return
  }
}

// CHECK:      affine.for %c = 0 to 4 {
// CHECK-NEXT:   %a = affinec.padded_load %input[%n, %oh * 2 + %r - 1, %ow * 2 + %s - 1, %c] : memref<1x8x8x3xf16>
// CHECK:        %b = affinec.padded_load %filter[%r, %s, %c, %k] : memref<3x3x3x8xf16>
// CHECK:        %old = affine.load %acc[] : memref<f32>
