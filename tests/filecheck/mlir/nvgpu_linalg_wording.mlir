// RUN: affinec-opt %s -split-input-file -verify-diagnostics

// nvgpu and linalg IR that MLIR 22 refuses, refused in its words (MLIR's checks run
// first, in its order; affinec's own, stricter ones after them).
// tests/test_mlir_invalid.py runs this file through mlir-opt 22 as well.

func.func @ldmatrix_global(%g: memref<32x32xf16>, %i: index) -> vector<2x2xf16> {
  // expected-error @+1 {{expected nvgpu.ldmatrix srcMemref must have a memory space attribute of IntegerAttr(3) or gpu::AddressSpaceAttr(Workgroup)}}
  %x = nvgpu.ldmatrix %g[%i, %i] {numTiles = 2 : i32, transpose = false} : memref<32x32xf16> -> vector<2x2xf16>
  return %x : vector<2x2xf16>
}

// -----

func.func @ldmatrix_register_width(%s: memref<32x32xbf16, 3>, %i: index) -> vector<2x4xbf16> {
  // expected-error @+1 {{expected vector register shape[1] = 2}}
  %x = nvgpu.ldmatrix %s[%i, %i] {numTiles = 2 : i32, transpose = false} : memref<32x32xbf16, 3> -> vector<2x4xbf16>
  return %x : vector<2x4xbf16>
}

// -----

func.func @ldmatrix_tiles(%s: memref<32x32xf16, 3>, %i: index) -> vector<1x2xf16> {
  // expected-error @+1 {{expected vector register shape[0] and numTiles to match}}
  %x = nvgpu.ldmatrix %s[%i, %i] {numTiles = 2 : i32, transpose = false} : memref<32x32xf16, 3> -> vector<1x2xf16>
  return %x : vector<1x2xf16>
}

// -----

func.func @ldmatrix_transpose_8bit(%s: memref<32x32xi8, 3>, %i: index) -> vector<1x4xi8> {
  // expected-error @+1 {{nvgpu.ldmatrix transpose works only at 16b granularity}}
  %x = nvgpu.ldmatrix %s[%i, %i] {numTiles = 1 : i32, transpose = true} : memref<32x32xi8, 3> -> vector<1x4xi8>
  return %x : vector<1x4xi8>
}

// -----

func.func @ldmatrix_64bit(%s: memref<32x32xf64, 3>, %i: index) -> vector<1x1xf64> {
  // expected-error @+1 {{nvgpu.ldmatrix works for 32b or lower}}
  %x = nvgpu.ldmatrix %s[%i, %i] {numTiles = 1 : i32, transpose = false} : memref<32x32xf64, 3> -> vector<1x1xf64>
  return %x : vector<1x1xf64>
}

// -----

func.func @mma_bf16_a_count(%a: vector<2x2xbf16>, %b: vector<2x2xbf16>, %c: vector<2x2xf32>) -> vector<2x2xf32> {
  // expected-error @+1 {{'nvgpu.mma.sync' op expected 256 warp-wide matrix A elements}}
  %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]} : (vector<2x2xbf16>, vector<2x2xbf16>, vector<2x2xf32>) -> vector<2x2xf32>
  return %d : vector<2x2xf32>
}

// -----

func.func @mma_tf32_c_count(%a: vector<4x1xf32>, %b: vector<2x1xf32>, %c: vector<4x2xf32>) -> vector<4x2xf32> {
  // expected-error @+1 {{'nvgpu.mma.sync' op expected 128 warp-wide matrix C elements}}
  %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 8], tf32Enabled} : (vector<4x1xf32>, vector<2x1xf32>, vector<4x2xf32>) -> vector<4x2xf32>
  return %d : vector<4x2xf32>
}

// -----

func.func @mma_b_shape(%a: vector<4x2xf16>, %b: vector<1x4xf16>, %c: vector<2x2xf32>) -> vector<2x2xf32> {
  // expected-error @+1 {{'nvgpu.mma.sync' op expected matrix B to be shaped (2 x 2)}}
  %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<1x4xf16>, vector<2x2xf32>) -> vector<2x2xf32>
  return %d : vector<2x2xf32>
}

// -----

func.func @mma_tf32_on_bf16(%a: vector<4x2xbf16>, %b: vector<2x2xbf16>, %c: vector<2x2xf32>) -> vector<2x2xf32> {
  // expected-error @+1 {{'nvgpu.mma.sync' op expected tf32 tensor cores only for F32 operands}}
  %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16], tf32Enabled} : (vector<4x2xbf16>, vector<2x2xbf16>, vector<2x2xf32>) -> vector<2x2xf32>
  return %d : vector<2x2xf32>
}

// -----

func.func @mma_mixed(%a: vector<4x2xf16>, %b: vector<2x2xbf16>, %c: vector<2x2xf32>) -> vector<2x2xf32> {
  // expected-error @+1 {{'nvgpu.mma.sync' op failed to verify that matrixA and matrixB have same element type}}
  %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xbf16>, vector<2x2xf32>) -> vector<2x2xf32>
  return %d : vector<2x2xf32>
}

// -----

func.func @mma_i16(%a: vector<4x2xi16>, %b: vector<2x2xi16>, %c: vector<2x2xi32>) -> vector<2x2xi32> {
  // expected-error @+1 {{expected input data type (i4,i8,f16,bf16,tf32,f64) supported by nvgpu.mma.sync}}
  %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]} : (vector<4x2xi16>, vector<2x2xi16>, vector<2x2xi32>) -> vector<2x2xi32>
  return %d : vector<2x2xi32>
}

// -----

func.func @copy_strided_source(%g: memref<64x64xf16, strided<[128, 2]>>, %s: memref<64x64xf16, 3>, %i: index) {
  // expected-error @+1 {{source memref most minor dim must have unit stride}}
  %t = nvgpu.device_async_copy %g[%i, %i], %s[%i, %i], 8 : memref<64x64xf16, strided<[128, 2]>> to memref<64x64xf16, 3>
  return
}

// -----

func.func @copy_to_global(%g: memref<64x64xf16>, %h: memref<64x64xf16, 1>, %i: index) {
  // expected-error @+1 {{destination memref must have a memory space attribute of IntegerAttr(3) or gpu::AddressSpaceAttr(Workgroup)}}
  %t = nvgpu.device_async_copy %g[%i, %i], %h[%i, %i], 8 : memref<64x64xf16> to memref<64x64xf16, 1>
  return
}

// -----

func.func @copy_types(%g: memref<64x64xf16>, %s: memref<64x64xbf16, 3>, %i: index) {
  // expected-error @+1 {{source and destination must have the same element type}}
  %t = nvgpu.device_async_copy %g[%i, %i], %s[%i, %i], 8 : memref<64x64xf16> to memref<64x64xbf16, 3>
  return
}

// -----

func.func @copy_destination_indices(%g: memref<64x64xf16>, %s: memref<2x64x64xf16, 3>, %i: index) {
  // expected-error @+1 {{'nvgpu.device_async_copy' op expected 3 destination indices, got 2}}
  %t = nvgpu.device_async_copy %g[%i, %i], %s[%i, %i], 8 : memref<64x64xf16> to memref<2x64x64xf16, 3>
  return
}

// -----

func.func @copy_elements_i8(%g: memref<64x64xi8>, %s: memref<64x64xi8, 3>, %i: index) {
  // expected-error @+1 {{Requested copy elements is 6 with width 8. But copy elements could be one of 4, 8, 16.}}
  %t = nvgpu.device_async_copy %g[%i, %i], %s[%i, %i], 6 : memref<64x64xi8> to memref<64x64xi8, 3>
  return
}

// -----

func.func @copy_bypass_l1(%g: memref<64x64xf16>, %s: memref<64x64xf16, 3>, %i: index) {
  // expected-error @+1 {{'nvgpu.device_async_copy' op bypassL1 does not satify alignment for 'memref<64x64xf16, 3>' with destination element 2. Unset bypassL1, or set destination element to 8}}
  %t = nvgpu.device_async_copy %g[%i, %i], %s[%i, %i], 2 {bypassL1} : memref<64x64xf16> to memref<64x64xf16, 3>
  return
}

// -----

func.func @tma_swizzle_span(%g: memref<*xbf16>, %c: index) {
  // expected-error @+1 {{the tensormap descriptor must have last dimension of 64 bytes but it is 32 bytes}}
  %d = nvgpu.tma.create.descriptor %g box[%c, %c] : memref<*xbf16> -> <tensor = memref<64x16xbf16, 3>, swizzle = swizzle_64b, l2promo = none, oob = zero, interleave = none>
  return
}

// -----

func.func @tma_box_too_large(%g: memref<*xf32>, %c: index) {
  // expected-error @+1 {{the tensor map descriptor must have dimensions between 1 and 256 but it is 512}}
  %d = nvgpu.tma.create.descriptor %g box[%c, %c] : memref<*xf32> -> <tensor = memref<512x4xf32, 3>, swizzle = none, l2promo = none, oob = zero, interleave = none>
  return
}

// -----

func.func @tma_interleave(%g: memref<*xf16>, %c: index) {
  // expected-error @+1 {{Interleave options are not supported yet.}}
  %d = nvgpu.tma.create.descriptor %g box[%c, %c] : memref<*xf16> -> <tensor = memref<64x64xf16, 3>, swizzle = none, l2promo = none, oob = zero, interleave = interleave_32b>
  return
}

// -----

func.func @conv_float_strides(%x: memref<1x9x9x2xf32>, %w: memref<3x3x2x4xf32>, %y: memref<1x4x4x4xf32>) {
  // expected-error @+1 {{'linalg.conv_2d_nhwc_hwcf' op attribute 'strides' failed to satisfy constraint: 64-bit signless int elements attribute of shape [2]}}
  linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2.0> : tensor<2xf32>} ins(%x, %w : memref<1x9x9x2xf32>, memref<3x3x2x4xf32>) outs(%y : memref<1x4x4x4xf32>)
  func.return
}

// -----

func.func @conv_dilations_as_array(%x: memref<1x2x9x9xf16>, %w: memref<4x2x3x3xf16>, %y: memref<1x4x7x7xf16>) {
  // expected-error @+1 {{'linalg.conv_2d_nchw_fchw' op attribute 'dilations' failed to satisfy constraint: 64-bit signless int elements attribute of shape [2]}}
  linalg.conv_2d_nchw_fchw {dilations = [1, 1], strides = dense<1> : tensor<2xi64>} ins(%x, %w : memref<1x2x9x9xf16>, memref<4x2x3x3xf16>) outs(%y : memref<1x4x7x7xf16>)
  func.return
}

// -----

func.func @depthwise_strides_of_three(%x: memref<1x9x9x2xf32>, %w: memref<3x3x2xf32>, %y: memref<1x7x7x2xf32>) {
  // expected-error @+1 {{'linalg.depthwise_conv_2d_nhwc_hwc' op attribute 'strides' failed to satisfy constraint: 64-bit signless int elements attribute of shape [2]}}
  linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<3xi64>} ins(%x, %w : memref<1x9x9x2xf32>, memref<3x3x2xf32>) outs(%y : memref<1x7x7x2xf32>)
  func.return
}

// -----

func.func @sparse_selector(%a: vector<4x2xf16>, %b: vector<4x2xf16>, %c: vector<2x2xf16>, %m: vector<2xi16>) -> vector<2x2xf16> {
  // expected-error @+1 {{'nvgpu.mma.sp.sync' op sparsity selector should be 0 or 1}}
  %d = nvgpu.mma.sp.sync(%a, %b, %c) metadata(%m) {mmaShape = [16, 8, 32], sparsitySelector = 3 : i32} : (vector<4x2xf16>, vector<4x2xf16>, vector<2x2xf16>) -> vector<2x2xf16>
  return %d : vector<2x2xf16>
}

// -----

func.func @sparse_a_shape(%a: vector<2x4xf16>, %b: vector<4x2xf16>, %c: vector<2x2xf16>, %m: vector<2xi16>) -> vector<2x2xf16> {
  // expected-error @+1 {{'nvgpu.mma.sp.sync' op expected matrix A to be shaped (8 x 2)}}
  %d = nvgpu.mma.sp.sync(%a, %b, %c) metadata(%m) {mmaShape = [16, 8, 32]} : (vector<2x4xf16>, vector<4x2xf16>, vector<2x2xf16>) -> vector<2x2xf16>
  return %d : vector<2x2xf16>
}

// -----

func.func @sparse_f64(%a: vector<1x1xf64>, %b: vector<1x1xf64>, %c: vector<1x2xf64>, %m: vector<2xi16>) -> vector<1x2xf64> {
  // expected-error @+1 {{f64 is not supported for sparse mode}}
  %d = nvgpu.mma.sp.sync(%a, %b, %c) metadata(%m) {mmaShape = [8, 8, 4]} : (vector<1x1xf64>, vector<1x1xf64>, vector<1x2xf64>) -> vector<1x2xf64>
  return %d : vector<1x2xf64>
}

// -----

func.func @batch_matmul_rank(%a: memref<?x?x?xf16>, %b: memref<?x?xf16>, %c: memref<?x?x?xf32>) {
  // expected-error @+1 {{'linalg.batch_matmul' op expected operand #1 rank (2) to match the result rank of indexing_map (3)}}
  linalg.batch_matmul ins(%a, %b : memref<?x?x?xf16>, memref<?x?xf16>) outs(%c : memref<?x?x?xf32>)
  func.return
}

// -----

func.func @matmul_scalar_output(%a: memref<8x16xf32>, %b: memref<16x4xf32>, %c: f32) {
  // expected-error @+1 {{'linalg.matmul' op operand #2 must be variadic of shaped of any type values, but got 'f32'}}
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>) outs(%c : f32)
  func.return
}

// -----

func.func @matmul_scalar_input(%a: f16, %b: memref<16x4xf16>, %c: memref<8x4xf32>) {
  // expected-error @+1 {{'linalg.matmul' op expected operand #0 rank (0) to match the result rank of indexing_map (2)}}
  linalg.matmul ins(%a, %b : f16, memref<16x4xf16>) outs(%c : memref<8x4xf32>)
  func.return
}

// -----

func.func @matmul_inner_sizes(%a: memref<8x16xf32>, %b: memref<12x4xf32>, %c: memref<8x4xf32>) {
  // expected-error @+1 {{'linalg.matmul' op inferred input/output operand #1 has shape's dimension #0 to be 16, but found 12}}
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<12x4xf32>) outs(%c : memref<8x4xf32>)
  func.return
}

// -----

func.func @conv_window_too_small(%x: memref<2x3x9x9xf32>, %w: memref<4x3x3x3xf32>, %y: memref<2x4x5x8xf32>) {
  // expected-error @+1 {{'linalg.conv_2d_nchw_fchw' op inferred input/output operand #0 has shape's dimension #3 to be greater than or equal to 10, but found 9}}
  linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : memref<2x3x9x9xf32>, memref<4x3x3x3xf32>) outs(%y : memref<2x4x5x8xf32>)
  func.return
}
