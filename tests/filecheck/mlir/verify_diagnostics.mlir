// RUN: affinec-opt %s -split-input-file -verify-diagnostics
// RUN: affinec-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// MLIR's errors on affine maps and their operands, checked the way MLIR checks its
// own (each chunk alone, every `expected-error` met, nothing unexpected).

func.func @own_bound() {
  // expected-error @+2 {{region entry argument '%i' is already in use}}
  // expected-note @+1 {{previously referenced here}}
  affine.for %i = 0 to %i {
  }
  func.return
}

// -----

func.func @iv_as_symbol(%A: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    // expected-error @+1 {{'affine.for' op operand cannot be used as a symbol}}
    affine.for %j = 0 to %i {
    }
  }
  func.return
}

// -----

func.func @loaded_index(%A: memref<8xf32>, %I: memref<8xindex>) {
  affine.for %i = 0 to 8 {
    %k = affine.load %I[%i] : memref<8xindex>
    %v = affine.load %A[%k] : memref<8xf32>  // expected-error {{operand cannot be used as a dimension id}}
  }
  func.return
}

// -----

func.func @dim_as_symbol(%n: index) {
  affine.for %i = 0 to 8 {
    %z = affine.apply affine_map<(d0) -> (d0 + 1)>(%i)
    // expected-error @below {{dimensional operand cannot be used as a symbol}}
    %a = affine.apply affine_map<()[s0] -> (s0 * 2)>()[%z]
  }
  func.return
}

// -----

func.func @if_with_arguments(%n: index) {
  // expected-error @+1 {{region #0 should have no arguments}}
  "affine.if"(%n) <{condition = affine_set<(d0) : (d0 >= 0)>}> ({
  ^bb0(%x: index):
    "affine.yield"() : () -> ()
  }, {
  }) : (index) -> ()
  func.return
}

// -----

func.func @product_of_dims(%a: index) {
  // expected-error @+1 {{non-affine expression: at least one of the multiply operands has to be either a constant or symbolic}}
  %r = affine.apply affine_map<(d0, d1) -> (d0 * d1)>(%a, %a)
  func.return
}

// -----

func.func @division_by_a_dim(%A: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 1 to 8 {
      // expected-error @+1 {{right operand of floordiv has to be either a constant or symbolic}}
      %v = affine.load %A[%i floordiv %j] : memref<8xf32>
    }
  }
  func.return
}

// -----

func.func @semi_affine_is_fine(%A: memref<8xf32>, %n: index) {
  affine.for %i = 0 to 8 {
    %v = affine.load %A[%i mod symbol(%n)] : memref<8xf32>
  }
  func.return
}

// -----

func.func @unknown_op_of_a_known_dialect(%A: memref<8xf32>) {
  // expected-error @+1 {{unregistered operation 'affine.frobnicate' found in dialect ('affine') that does not allow unknown operations}}
  "affine.frobnicate"(%A) : (memref<8xf32>) -> ()
  func.return
}
