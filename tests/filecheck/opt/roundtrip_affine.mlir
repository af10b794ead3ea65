// RUN: affinec-opt %s | filecheck %s
// RUN: affinec-opt %s | affinec-opt | filecheck %s
// RUN: affinec-opt %s --print-op-generic | affinec-opt | filecheck %s

// MLIR's affine syntax: induction variables are dims, `symbol(%x)` marks symbols,
// min/max bound groups, steps, reductions, and affine.if with an else branch.

func.func @syntax(%A: memref<8x8xf32>, %n: index) {
  affine.for %i = 0 to 8 {
    affine.for %j = max affine_map<(d0) -> (0, d0 - 2)>(%i) to min affine_map<(d0)[s0] -> (8, d0 + 3, s0)>(%i)[%n] step 2 {
      %v = affine.load %A[%i, %j + symbol(%n) - 3] : memref<8x8xf32>
      %x = affine.apply affine_map<(d0, d1)[s0] -> (d0 * 2 + d1 - 3)>(%i, %j)[%n]
      %y = affine.max affine_map<(d0, d1)[s0] -> (d0 floordiv 4, s0 - d1)>(%i, %j)[%n]
      %p = affinec.padded_load %A[%i * 2 - 1, %j] : memref<8x8xf32>
    }
  }
  %r = affine.parallel (%a, %b) = (0, max(%n, 2)) to (8, min(%n + 4, 16)) step (1, 2) reduce ("addf") -> (f32) {
    %v = affine.load %A[%a, %b] : memref<8x8xf32>
    affine.yield %v : f32
  } {affinec.mapping = "grid"}
  affine.parallel (%a, %b) = (0, 0) to (8, 8) {
    affine.if affine_set<(d0, d1)[s0] : (d0 - d1 >= 0, s0 - 3 == 0)>(%a, %b)[%n] {
      %v = affine.load %A[%a, %b] : memref<8x8xf32>
    } else {
      %v = affine.load %A[%b, %a] : memref<8x8xf32>
    }
  }
  func.return
}

// CHECK-LABEL: func.func @syntax
// CHECK:       affine.for %{{.*}} = 0 to 8 {
// CHECK:       affine.for %[[J:.*]] = max affine_map<(d0) -> (0, d0 - 2)>(%[[I:.*]]) to min affine_map<(d0)[s0] -> (8, d0 + 3, s0)>(%[[I]])[%[[N:.*]]] step 2 {
// CHECK:       affine.load %{{.*}}[%[[I]], %[[J]] + symbol(%[[N]]) - 3] : memref<8x8xf32>
// CHECK:       affine.apply affine_map<(d0, d1)[s0] -> (d0 * 2 + d1 - 3)>(%[[I]], %[[J]])[%[[N]]]
// CHECK:       affine.max affine_map<(d0, d1)[s0] -> (d0 floordiv 4, -d1 + s0)>
// CHECK:       affinec.padded_load %{{.*}}[%[[I]] * 2 - 1, %[[J]]]
// CHECK:       affine.parallel (%{{.*}}, %{{.*}}) = (0, max(%[[N]], 2)) to (8, min(%[[N]] + 4, 16)) step (1, 2) reduce ("addf") -> (f32) {
// CHECK:       affine.yield %{{.*}} : f32
// CHECK:       } {affinec.mapping = "grid"}
// CHECK:       affine.if affine_set<(d0, d1)[s0] : (d0 - d1 >= 0, s0 - 3 == 0)>(%{{.*}}, %{{.*}})[%[[N]]] {
// CHECK:       } else {
