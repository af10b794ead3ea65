// RUN: affinec-opt %s -p affinec-lower-linalg 2>&1 | filecheck %s
// RUN: affinec-opt %s --verify-diagnostics -p affinec-lower-linalg

// A depthwise convolution as torch-mlir writes it (after bufferization): the spec
// is a grouped convolution with a group a channel, and the filter's argument
// gains a unit dimension (R x S x 1 x C: the same elements in the same order).
// Its naive IR sums the window alone: the channel %g is an output dimension, the
// innermost, with no size-1 loop over a group's filters or channels.

// CHECK: remark: takes its filter as 3x3x1x16
// CHECK: builtin.module attributes {affinec.spec = "conv n=1 c=16 h=8 w=8 k=16 r=3 s=3 stride=2,2 pad=0,0 dilation=1,1 layout=nhwc filter-layout=rsck dtype=f16 epilogue=none groups=16"}
// CHECK: func.func @depthwise(%x: memref<1x8x8x16xf16>, %w: memref<3x3x1x16xf16>, %y: memref<1x3x3x16xf16>)
// CHECK: affine.parallel (%n, %oh, %ow, %g) = (0, 0, 0, 0) to (1, 3, 3, 16)
// CHECK: affine.load %w[%r, %s, 0, %g] : memref<3x3x1x16xf16>
// CHECK-NOT: linalg.

func.func @depthwise(%x: memref<1x8x8x16xf16>, %w: memref<3x3x16xf16>, %y: memref<1x3x3x16xf16>) {
  %zero = arith.constant 0.0 : f16
  linalg.fill ins(%zero : f16) outs(%y : memref<1x3x3x16xf16>)
  // expected-remark @+2 {{sums in f32 and rounds once to f16}}
  // expected-remark @+1 {{takes its filter as 3x3x1x16}}
  linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%x, %w : memref<1x8x8x16xf16>, memref<3x3x16xf16>) outs(%y : memref<1x3x3x16xf16>)
  func.return
}
