// RUN: affinec-opt %s | filecheck %s
// RUN: affinec-opt %s | affinec-opt | filecheck %s

// MLIR's forms of the result types of scf.for and scf.if: one type alone after
// `->`, or a list in parentheses (mlir-opt reads this file as the same IR: the
// tests compare).

// CHECK-LABEL: func.func @one_alone
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32) {
// CHECK: scf.if %{{.*}} -> (f32) {
func.func @one_alone(%lb: index, %ub: index, %s: index, %x: f32, %c: i1) -> f32 {
  %r = scf.for %i = %lb to %ub step %s iter_args(%a = %x) -> f32 {
    %b = arith.addf %a, %a : f32
    scf.yield %b : f32
  }
  %q = scf.if %c -> f32 {
    scf.yield %r : f32
  } else {
    scf.yield %x : f32
  }
  func.return %q : f32
}

// CHECK-LABEL: func.func @lists
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, i32) : i32 {
// CHECK: scf.if %{{.*}} {
func.func @lists(%lb: i32, %ub: i32, %x: f32, %n: i32, %c: i1) -> (f32, i32) {
  %r:2 = scf.for %i = %lb to %ub step %lb iter_args(%a = %x, %m = %n) -> (f32, i32) : i32 {
    scf.yield %a, %i : f32, i32
  }
  scf.if %c -> () {
  }
  func.return %r#0, %r#1 : f32, i32
}
