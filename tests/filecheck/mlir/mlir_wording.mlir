// RUN: affinec-opt %s -split-input-file -verify-diagnostics

// Invalid IR refused in MLIR's words, so that an `expected-error` line written
// against mlir-opt meets affinec-opt too. tests/test_mlir_interop.py runs this file
// through mlir-opt 22 as well: every case here is met by both.

func.func @index_operand(%x: i32) {
  // expected-error @+1 {{'affine.apply' op operand #0 must be variadic of index, but got 'i32'}}
  %0 = "affine.apply"(%x) <{map = affine_map<(d0) -> (d0 + 1)>}> : (i32) -> index
  func.return
}

// -----

func.func @index_result(%x: index) {
  // expected-error @+1 {{'affine.apply' op result #0 must be index, but got 'i64'}}
  %0 = "affine.apply"(%x) <{map = affine_map<(d0) -> (d0 + 1)>}> : (index) -> i64
  func.return
}

// -----

func.func @missing_to(%A: memref<4xf32>) {
  // expected-error @+1 {{custom op 'affine.for' expected 'to' between bounds}}
  affine.for %i = 0 until 4 {
  }
  func.return
}

// -----

func.func @missing_equals() {
  // expected-error @+1 {{expected '='}}
  affine.for %i : 0 to 4 {
  }
  func.return
}

// -----

func.func @map_operands(%x: index) {
  // expected-error @+1 {{operand count and affine map dimension and symbol count must match}}
  %0 = affine.min affine_map<(d0, d1) -> (d0 + d1)>(%x)
  func.return
}

// -----

func.func @empty_min(%x: index) {
  // expected-error @+1 {{'affine.min' op affine map expect at least one result}}
  %0 = affine.min affine_map<(d0) -> ()>(%x)
  func.return
}

// -----

func.func @subscripts(%A: memref<4x4xf32>, %i: index) {
  // expected-error @+1 {{'affine.load' op expects as many subscripts as affine map inputs}}
  %v = "affine.load"(%A, %i) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (memref<4x4xf32>, index) -> f32
  func.return
}

// -----

func.func @no_terminator_after_a_bad_op(%A: memref<4x4xf32>, %i: index) {
  // The load's own error comes first, as in MLIR, not the block's missing return.
  // expected-error @+1 {{'affine.load' op affine map num results must equal memref rank}}
  %v = "affine.load"(%A, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<4x4xf32>, index) -> f32
}

// -----

func.func @parallel_counts() {
  // expected-error @+1 {{the number of region arguments (2) and the number of map groups for lower (2) and upper bound (1), and the number of steps (2) must all match}}
  affine.parallel (%i, %j) = (0, 0) to (8) {
  }
  func.return
}

// -----

func.func @parallel_without_reduction() {
  // expected-error @+1 {{'affine.parallel' op a reduction must be specified for each output}}
  %r = affine.parallel (%i) = (0) to (8) -> (f32) {
    %c = arith.constant 1.0 : f32
    affine.yield %c : f32
  }
  func.return
}

// -----

func.func @parallel_yield_type() {
  %r = affine.parallel (%i) = (0) to (8) reduce ("addf") -> (f32) {
    %c = arith.constant 1 : i32
    // expected-error @+1 {{types mismatch between yield op and its parent}}
    affine.yield %c : i32
  }
  func.return
}

// -----

func.func @for_step() {
  // expected-error @+1 {{expected step to be representable as a positive signed integer}}
  affine.for %i = 0 to 8 step -1 {
  }
  func.return
}

// -----

func.func @for_bound_prefix(%n: index) {
  // expected-error @+1 {{upper loop bound affine map with multiple results requires 'min' prefix}}
  affine.for %i = 0 to affine_map<(d0) -> (d0, 8)>(%n) {
  }
  func.return
}

// -----

func.func @launch_outside_a_container(%n: index) {
  // expected-error @+1 {{expected the closest surrounding module to have the 'gpu.container_module' attribute}}
  gpu.launch_func @kernels::@k blocks in (%n, %n, %n) threads in (%n, %n, %n)
  return
}

// -----

module attributes {gpu.container_module} {
  func.func @no_container(%n: index) {
    // expected-error @+1 {{kernel container 'kernels' is undefined}}
    gpu.launch_func @kernels::@k blocks in (%n, %n, %n) threads in (%n, %n, %n)
    return
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @kernels {
  }
  func.func @no_kernel(%n: index) {
    // expected-error @+1 {{kernel function '@kernels::@k' is undefined}}
    gpu.launch_func @kernels::@k blocks in (%n, %n, %n) threads in (%n, %n, %n)
    return
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%x: f32) {
      gpu.return
    }
  }
  func.func @not_a_kernel(%n: index, %x: f32) {
    // expected-error @+1 {{kernel function is missing the 'gpu.kernel' attribute}}
    gpu.launch_func @kernels::@k blocks in (%n, %n, %n) threads in (%n, %n, %n) args(%x : f32)
    return
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%x: f32) kernel {
      gpu.return
    }
  }
  func.func @operand_count(%n: index, %x: f32) {
    // expected-error @+1 {{got 0 kernel operands but expected 1}}
    gpu.launch_func @kernels::@k blocks in (%n, %n, %n) threads in (%n, %n, %n)
    return
  }
}

// -----

module {
  gpu.module @kernels {
    // expected-error @+1 {{'gpu.func' op expected void return type for kernel function}}
    gpu.func @k() -> f32 kernel {
      %c = arith.constant 0.0 : f32
      gpu.return %c : f32
    }
  }
}

// -----

module {
  gpu.module @kernels {
    // expected-error @+1 {{'gpu.func' op expected memory space workgroup in attribution}}
    gpu.func @k() workgroup(%t: memref<8xf32, #gpu.address_space<private>>) kernel {
      gpu.return
    }
  }
}

// -----

func.func @shuffle_index(%v: index, %o: i32, %w: i32) {
  // expected-error @+1 {{op operand #0 must be Integer or Float or fixed-length vector of Integer or Float values of ranks 1, but got 'index'}}
  %r, %ok = gpu.shuffle xor %v, %o, %w : index
  return
}

// -----

func.func @float_and(%v: f32) {
  // expected-error @+1 {{`and` reduction operation is not compatible with type 'f32'}}
  %r = gpu.subgroup_reduce and %v : (f32) -> f32
  return
}

// -----

func.func @rotate_offset(%v: f32) {
  // expected-error @+1 {{op offset must be in the range [0, 8)}}
  %r, %ok = gpu.rotate %v, 9, 8 : f32
  return
}

// -----

func.func @alloc_sizes(%n: index) {
  // expected-error @+1 {{incorrect number of dynamic sizes, has 1, expected 2}}
  %m = gpu.alloc(%n) : memref<?x?xf32, 1>
  return
}

// -----

func.func @launch_sizes(%n: index) {
  // expected-error @+1 {{expected 6 or more operands, but found 3}}
  "gpu.launch"(%n, %n, %n) ({
    gpu.terminator
  }) {operandSegmentSizes = array<i32: 0, 1, 1, 1, 0, 0, 0, 0>} : (index, index, index) -> ()
  return
}

// -----

module {
  // expected-error @+1 {{'gpu.module' op attribute 'targets' failed to satisfy constraint: array of GPU target attributes with at least 1 elements}}
  gpu.module @kernels [] {
  }
}

// -----

func.func @named_void() {
  // expected-error @+1 {{cannot name an operation with no results}}
  %t = gpu.barrier
  return
}

// -----

func.func @apply_operands(%x: index) {
  // expected-error @+1 {{custom op 'affine.apply' dimension or symbol index mismatch}}
  %0 = affine.apply affine_map<(d0, d1) -> (d0 + d1)>(%x)
  func.return
}

// -----

func.func @bound_operands(%a: index, %b: index) {
  // expected-error @+1 {{custom op 'affine.for' dim operand count and affine map dim count must match}}
  affine.for %i = 0 to affine_map<(d0) -> (d0)>(%a, %b) {
  }
  func.return
}

// -----

func.func @set_operands(%a: index, %b: index) {
  // expected-error @+1 {{custom op 'affine.if' dim operand count and integer set dim count must match}}
  affine.if affine_set<(d0) : (d0 >= 0)>(%a, %b) {
  }
  func.return
}

// -----

// expected-error @+1 {{'memref.global' op initial value shape expected to be 2 but was 3}}
"memref.global"() <{initial_value = dense<1.0> : tensor<3xf32>, sym_name = "g", sym_visibility = "private", type = memref<2xf32>}> : () -> ()

// -----

// expected-error @+1 {{'memref.global' op initial value element expected to be of type 'f32', but was of type 'f16'}}
"memref.global"() <{initial_value = dense<1.0> : tensor<2xf16>, sym_name = "h", sym_visibility = "private", type = memref<2xf32>}> : () -> ()

// -----

func.func @warp_distribution(%lane: index) {
  // expected-error @+1 {{'gpu.warp_execute_on_lane_0' op incompatible distribution dimensions from 'vector<64xf32>' to 'vector<4xf32>' with warp size = 32}}
  %r = gpu.warp_execute_on_lane_0(%lane)[32] -> (vector<4xf32>) {
    %v = arith.constant dense<1.0> : vector<64xf32>
    gpu.yield %v : vector<64xf32>
  }
  return
}

// -----

module {
  gpu.module @kernels {
    // expected-error @+1 {{custom op 'gpu.func' gpu.func requires named arguments}}
    gpu.func @k(f32) {
      gpu.return
    }
  }
}

// -----

module {
  // expected-error @+1 {{'func.func' op gpu.known_block_size must contain exactly 3 elements}}
  func.func @sizes() attributes {gpu.known_block_size = array<i32: 32, 1>} {
    func.return
  }
}

// -----

func.func @arrow_without_a_type(%lb: index, %x: f32) {
  // expected-error @+1 {{expected non-function type}}
  %r = scf.for %i = %lb to %lb step %lb iter_args(%a = %x) -> %x {
    scf.yield %a : f32
  }
  func.return
}

// -----

// An unknown op in its custom form, at its name (not at the next line's token).
// (Of an unknown dialect, mlir-opt adds a note listing its dialects.)
func.func @unknown_op_of_a_known_dialect(%x: i32) {
  // expected-error @+1 {{custom op 'arith.frobnicate' is unknown}}
  %0 = arith.frobnicate %x : i32
  return
}

// -----

func.func @unknown_op_without_a_dialect() {
  // expected-error @+1 {{custom op 'frobnicate' is unknown (tried 'func.frobnicate' as well)}}
  frobnicate
  return
}

// -----

func.func @more_results_bound_than_defined(%a: i32) -> i32 {
  // expected-error @+1 {{operation defines 1 results but was provided 2 to bind}}
  %0, %1 = arith.addi %a, %a : i32
  return %0 : i32
}

// -----

func.func @a_load_of_too_few_indices(%m: memref<4x4xf32>, %i: index) -> f32 {
  // expected-error @+1 {{'memref.load' op incorrect number of indices for load, expected 2 but got 1}}
  %0 = memref.load %m[%i] : memref<4x4xf32>
  return %0 : f32
}

// -----

func.func @a_store_of_too_few_indices(%m: memref<4x4xf32>, %i: index, %v: f32) {
  // expected-error @+1 {{'memref.store' op store index operand count not equal to memref rank}}
  memref.store %v, %m[%i] : memref<4x4xf32>
  return
}

// -----

func.func @a_return_of_too_few_values(%a: i32) -> (i32, i32) {
  // expected-error @+1 {{'func.return' op has 1 operands, but enclosing function (@a_return_of_too_few_values) returns 2}}
  return %a : i32
}

// -----

func.func @a_return_of_another_type(%a: i32) -> i64 {
  // expected-error @+1 {{type of return operand 0 ('i32') doesn't match function result type ('i64') in function @a_return_of_another_type}}
  return %a : i32
}

// -----

func.func @a_branch_to_no_block() {
  // expected-error @+1 {{reference to an undefined block}}
  cf.br ^bb1
}

// -----

func.func @an_extract_past_the_vector(%v: vector<4xf32>) -> f32 {
  // expected-error @+1 {{'vector.extract' op expected position attribute #1 to be a non-negative integer smaller than the corresponding vector dimension or poison (-1)}}
  %0 = vector.extract %v[7] : f32 from vector<4xf32>
  return %0 : f32
}

// -----

func.func @an_insert_past_the_vector(%v: vector<4x2xf32>, %s: f32) -> vector<4x2xf32> {
  // expected-error @+1 {{'vector.insert' op expected position attribute #2 to be a non-negative integer smaller than the corresponding dest vector dimension}}
  %0 = vector.insert %s, %v[1, 2] : f32 into vector<4x2xf32>
  return %0 : vector<4x2xf32>
}

// -----

func.func @poison_positions(%v: vector<4x2xf32>, %s: f32) -> (f32, vector<4x2xf32>) {
  %0 = vector.extract %v[-1, 1] : f32 from vector<4x2xf32>
  %1 = vector.insert %s, %v[3, -1] : f32 into vector<4x2xf32>
  return %0, %1 : f32, vector<4x2xf32>
}

// -----

func.func @results_without_an_else(%c: i1, %a: i32) -> i32 {
  // expected-error @+1 {{'scf.if' op must have an else block if defining values}}
  %0 = scf.if %c -> i32 {
    scf.yield %a : i32
  }
  return %0 : i32
}

// -----

func.func @a_branch_passing_more_than_its_block_takes(%c: i1, %x: i32) {
  // expected-error @+1 {{branch has 1 operands for successor #0, but target block has 0}}
  cf.cond_br %c, ^bb1(%x : i32), ^bb2
^bb1:
  return
^bb2:
  return
}

// -----

func.func @a_branch_passing_another_type(%x: i32) {
  // expected-error @+1 {{type mismatch for bb argument #0 of successor #0}}
  cf.br ^bb1(%x : i32)
^bb1(%y: i64):
  return
}

// -----

// expected-note @+1 {{see existing symbol definition here}}
func.func @twice() {
  func.return
}
// expected-error @+1 {{redefinition of symbol named 'twice'}}
func.func @twice() {
  func.return
}

// -----

gpu.module @kernels {
  // expected-note @+1 {{see existing symbol definition here}}
  gpu.func @k() kernel {
    gpu.return
  }
  // expected-error @+1 {{redefinition of symbol named 'k'}}
  gpu.func @k() kernel {
    gpu.return
  }
}

// -----

func.func @if_yields_two(%c: i1) -> i32 {
  // expected-error @+1 {{'scf.if' op along control flow edge from Operation scf.yield to parent: region branch point has 2 operands, but region successor needs 1 inputs}}
  %r = scf.if %c -> (i32) {
    %a = arith.constant 1 : i32
    // expected-note @+1 {{region branch point}}
    scf.yield %a, %a : i32, i32
  } else {
    %b = arith.constant 2 : i32
    scf.yield %b : i32
  }
  func.return %r : i32
}

// -----

func.func @if_yields_another_type(%c: i1) -> i32 {
  // expected-error @+1 {{'scf.if' op along control flow edge from Operation scf.yield to parent: successor operand type #0 'i64' should match successor input type #0 'i32'}}
  %r = scf.if %c -> (i32) {
    %a = arith.constant 1 : i64
    // expected-note @+1 {{region branch point}}
    scf.yield %a : i64
  } else {
    %b = arith.constant 2 : i32
    scf.yield %b : i32
  }
  func.return %r : i32
}

// -----

func.func @execute_region_yields_another_type() -> i32 {
  // expected-error @+1 {{'scf.execute_region' op along control flow edge from Operation scf.yield to parent: successor operand type #0 'i64' should match successor input type #0 'i32'}}
  %r = scf.execute_region -> i32 {
    %a = arith.constant 1 : i64
    // expected-note @+1 {{region branch point}}
    scf.yield %a : i64
  }
  func.return %r : i32
}

// -----

func.func @condition_passes_two(%x: i32) -> i32 {
  // expected-error @+1 {{'scf.while' op along control flow edge from Operation scf.condition to parent: region branch point has 2 operands, but region successor needs 1 inputs}}
  %r = scf.while (%a = %x) : (i32) -> i32 {
    %c = arith.constant true
    // expected-note @+1 {{region branch point}}
    scf.condition(%c) %a, %a : i32, i32
  } do {
  ^bb0(%b: i32):
    scf.yield %b : i32
  }
  func.return %r : i32
}

// -----

func.func @while_body_yields_two(%x: i32) -> i32 {
  // expected-error @+1 {{'scf.while' op along control flow edge from Operation scf.yield to Region #0: region branch point has 2 operands, but region successor needs 1 inputs}}
  %r = scf.while (%a = %x) : (i32) -> i32 {
    %c = arith.constant true
    scf.condition(%c) %a : i32
  } do {
  ^bb0(%b: i32):
    // expected-note @+1 {{region branch point}}
    scf.yield %b, %b : i32, i32
  }
  func.return %r : i32
}

// -----

func.func @outer() {
  // expected-error @+1 {{'func.func' op symbol's parent must have the SymbolTable trait}}
  func.func @inner() {
    func.return
  }
  func.return
}

// -----

module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%a: memref<4xf32>) kernel {
      gpu.return
    }
  }
  func.func @launch_another_array(%m: memref<8xf32>) {
    %c1 = arith.constant 1 : index
    // expected-error @+1 {{'gpu.launch_func' op type of function argument 0 does not match}}
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<8xf32>)
    func.return
  }
}

// -----

func.func @cast_to_another_size(%m: memref<8xf32>) {
  // expected-error @+1 {{'memref.cast' op operand type 'memref<8xf32>' and result type 'memref<4xf32>' are cast incompatible}}
  %s = memref.cast %m : memref<8xf32> to memref<4xf32>
  func.return
}

// -----

func.func @subview_of_another_layout(%m: memref<8x8xf32>) {
  // expected-error @+1 {{expected result type to be 'memref<4x4xf32, strided<[8, 1], offset: 10>>' or a rank-reduced version. (mismatch of result layout), but got 'memref<4x4xf32>'}}
  %s = memref.subview %m[1, 2] [4, 4] [1, 1] : memref<8x8xf32> to memref<4x4xf32>
  func.return
}

// -----

func.func @subview_past_the_end(%m: memref<8x8xf32>) {
  // expected-error @+1 {{slice along dimension 1 runs out-of-bounds: 8 >= 8}}
  %s = memref.subview %m[1, 2] [4, 4] [1, 2] : memref<8x8xf32> to memref<4x4xf32, strided<[8, 2], offset: 10>>
  func.return
}

// -----

func.func @subview_rank_reduced(%m: memref<8x8xf32>) {
  %s = memref.subview %m[1, 2] [1, 4] [1, 1] : memref<8x8xf32> to memref<4xf32, strided<[1], offset: 10>>
  func.return
}

// -----

func.func @extf_narrows(%x: f32) {
  // expected-error @+1 {{'arith.extf' op operand type 'f32' and result type 'f16' are cast incompatible}}
  %h = arith.extf %x : f32 to f16
  func.return
}

// -----

func.func @truncf_of_another_shape(%v: vector<2xf32>) {
  // expected-error @+1 {{'arith.truncf' op requires the same shape for all operands and results}}
  %h = arith.truncf %v : vector<2xf32> to vector<4xf16>
  func.return
}

// -----

llvm.func @callee(%a: i32) -> i32 {
  llvm.return %a : i32
}
llvm.func @call_with_an_i64(%x: i64) {
  // expected-error @+1 {{'llvm.call' op operand type mismatch for operand 0: 'i64' != 'i32'}}
  %r = llvm.call @callee(%x) : (i64) -> i32
  llvm.return
}

// -----

// expected-note @+1 {{when returning from function}}
llvm.func @return_an_i64(%x: i64) -> i32 {
  // expected-error @+1 {{'llvm.return' op mismatching result types}}
  llvm.return %x : i64
}

// -----

func.func @broadcast_to_another_size(%v: vector<4xf32>) {
  // expected-error @+1 {{'vector.broadcast' op dimension mismatch (4 vs. 2)}}
  %w = vector.broadcast %v : vector<4xf32> to vector<2xf32>
  func.return
}

// -----

func.func @reinterpret_with_another_stride(%m: memref<8xf32>) {
  // expected-error @+1 {{expected result type with stride = 2 instead of 1 in dim = 0}}
  %r = memref.reinterpret_cast %m to offset: [0], sizes: [4], strides: [2] : memref<8xf32> to memref<4xf32>
  func.return
}

// -----

memref.global "private" @table : memref<4xf32>
func.func @get_global_of_another_type() {
  // expected-error @+1 {{'memref.get_global' op result type 'memref<8xf32>' does not match type 'memref<4xf32>' of the global memref @table}}
  %r = memref.get_global @table : memref<8xf32>
  func.return
}

// -----

func.func @get_global_of_nothing() {
  // expected-error @+1 {{'memref.get_global' op 'nowhere' does not reference a valid global memref}}
  %r = memref.get_global @nowhere : memref<8xf32>
  func.return
}

// -----

llvm.func @load_a_memref(%p: !llvm.ptr) {
  // expected-error @+1 {{'llvm.load' op result #0 must be LLVM type with size, but got 'memref<4xf32>'}}
  %r = llvm.load %p : !llvm.ptr -> memref<4xf32>
  llvm.return
}

// -----

llvm.func @extract_the_wrong_type(%s: !llvm.struct<(i32, f32)>) {
  // expected-error @+1 {{'llvm.extractvalue' op Type mismatch: extracting from '!llvm.struct<(i32, f32)>' should produce 'i32' but this op returns 'f32'}}
  %r = "llvm.extractvalue"(%s) {position = array<i64: 0>} : (!llvm.struct<(i32, f32)>) -> f32
  llvm.return
}

// -----

llvm.func @insert_past_the_end(%s: !llvm.struct<(i32, f32)>, %a: f32) {
  // expected-error @+1 {{'llvm.insertvalue' op position out of bounds: 3}}
  %r = "llvm.insertvalue"(%s, %a) {position = array<i64: 3>} : (!llvm.struct<(i32, f32)>, f32) -> !llvm.struct<(i32, f32)>
  llvm.return
}

// -----

// expected-error @+1 {{'func.func' op type of entry block argument #0('f32') must match the type of the corresponding argument in function signature('i32')}}
"func.func"() <{sym_name = "entry_block_of_another_type", function_type = (i32) -> ()}> ({
^bb0(%a: f32):
  "func.return"() : () -> ()
}) : () -> ()

// -----

func.func @gpu_return_in_a_launch() {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{'gpu.return' op expects parent op 'gpu.func'}}
    gpu.return
  }
  func.return
}

// -----

func.func @alloc_without_its_size() {
  // expected-error @+1 {{'memref.alloc' op incorrect number of dynamic sizes, has 0, expected 1}}
  %m = memref.alloc() : memref<?xf32>
  func.return
}

// -----

func.func @vector_load_with_two_indices(%m: memref<8xf32>, %x: index) {
  // expected-error @+1 {{'vector.load' op requires 1 indices}}
  %r = vector.load %m[%x, %x] : memref<8xf32>, vector<4xf32>
  func.return
}

// -----

// expected-error @+1 {{expected the number of strides to match the rank}}
func.func @strides_of_another_rank(%m: memref<2xf32, strided<[8, 1]>>) {
  func.return
}

// -----

func.func @subview_of_too_few_offsets(%m: memref<8x8xf32>) {
  // expected-error @+1 {{expected 2 offset values, got 1}}
  %s = memref.subview %m[1] [4] [1] : memref<8x8xf32> to memref<4xf32>
  func.return
}

// -----

func.func @load_a_matrix_from_a_row(%m: memref<8xf32>, %x: index) {
  // expected-error @+1 {{'vector.load' op destination memref has lower rank than the result vector}}
  %r = vector.load %m[%x] : memref<8xf32>, vector<2x2xf32>
  func.return
}

// -----

func.func @reduce_to_another_type(%a: f32) {
  // expected-error @+1 {{'gpu.subgroup_reduce' op requires the same type for all operands and results}}
  %r = gpu.subgroup_reduce add %a : (f32) -> f16
  func.return
}

// -----

func.func @cmpi_of_no_predicate(%i: i32) {
  // expected-error @+1 {{'arith.cmpi' op attribute 'predicate' failed to satisfy constraint: allowed 64-bit signless integer cases: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}
  %r = "arith.cmpi"(%i, %i) {predicate = 42 : i64} : (i32, i32) -> i1
  func.return
}

// -----

llvm.func @fcmp_of_no_predicate(%a: f32) {
  // expected-error @+1 {{'llvm.fcmp' op attribute 'predicate' failed to satisfy constraint: llvm.fcmp comparison predicate}}
  %r = "llvm.fcmp"(%a, %a) {predicate = 99 : i64} : (f32, f32) -> i1
  llvm.return
}

// -----

// expected-error @+1 {{'func.func' op symbol declaration cannot have public visibility}}
func.func @public_declaration(i32) -> i32
