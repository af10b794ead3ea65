// RUN: affinec-opt %s -p 'affinec-map-to-gpu' -verify-diagnostics
// RUN: not affinec-opt %s -p 'affinec-map-threads{threads-per-block=4096}' 2>&1 | filecheck %s --check-prefix=THREADS
// RUN: not affinec-opt %s -p 'lower-affine' 2>&1 | filecheck %s --check-prefix=UNMAPPED
// RUN: not affinec-opt %s -t ptx 2>&1 | filecheck %s --check-prefix=PTX

// Every refusal is one located line, before anything is rewritten; no traceback. (The
// first as MLIR tests errors, with -verify-diagnostics and `expected-error`.)

func.func @f(%A: memref<8xf32>) {
  %z = arith.constant 0.0 : f32
  affine.parallel (%i) = (0) to (2) {
    affine.store %z, %A[%i] : memref<8xf32>  // expected-error {{'affine.store' op every thread of a block would run this op}}
    affine.parallel (%t) = (0) to (4) {
      affine.store %z, %A[%i * 4 + %t] : memref<8xf32>
    } {affinec.mapping = "block"}
  } {affinec.mapping = "grid"}
  func.return
}

// THREADS: errors.mlir:11:3: error: 'affine.parallel' op threads-per-block must be between 1 and 1024 (0 picks one), got 4096

// UNMAPPED: errors.mlir:11:3: error: 'affine.parallel' op a grid-mapped affine.parallel must be mapped to the GPU first (affinec-map-to-gpu)

// PTX: error: 'builtin.module' op the module has no gpu.module: map it to the GPU and lower it first (the default pipeline does)
