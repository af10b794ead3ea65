// RUN: affinec-opt %s | filecheck %s
// RUN: affinec-opt %s --print-op-generic | affinec-opt | filecheck %s
// RUN: affinec-opt %s -t ptx | filecheck %s --check-prefix=PTX

// The intrinsics MLIR's convert-arith-to-llvm and convert-math-to-llvm write as ops
// of their own: read, printed back as they came, and compiled as calls of the
// intrinsics (LLVM's names mangled for the type); and an aggregate started from
// llvm.mlir.poison, as MLIR's lowerings build one.

builtin.module attributes {gpu.container_module} {
  gpu.module @k {
    llvm.func @f(%p: !llvm.ptr<1>, %h: !llvm.ptr<1>) attributes {gpu.kernel, nvvm.kernel} {
      %a = llvm.load %p {alignment = 4 : i64} : !llvm.ptr<1> -> f32
      %q = llvm.getelementptr %p[1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, f32
      %b = llvm.load %q {alignment = 4 : i64} : !llvm.ptr<1> -> f32
      %0 = llvm.intr.maximum(%a, %b) : (f32, f32) -> f32
      %1 = llvm.intr.minimum(%0, %b) : (f32, f32) -> f32
      %2 = llvm.intr.maxnum(%1, %a) : (f32, f32) -> f32
      %3 = llvm.intr.minnum(%2, %b) : (f32, f32) -> f32
      %4 = llvm.intr.fma(%3, %a, %b) : (f32, f32, f32) -> f32
      %s = llvm.mlir.poison : !llvm.struct<(f32, f32)>
      %t = llvm.insertvalue %4, %s[1] : !llvm.struct<(f32, f32)>
      %e = llvm.extractvalue %t[1] : !llvm.struct<(f32, f32)>
      llvm.store %e, %p {alignment = 4 : i64} : f32, !llvm.ptr<1>
      %v = llvm.load %h {alignment = 4 : i64} : !llvm.ptr<1> -> vector<2xf16>
      %r = llvm.getelementptr %h[1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, vector<2xf16>
      %w = llvm.load %r {alignment = 4 : i64} : !llvm.ptr<1> -> vector<2xf16>
      %5 = llvm.intr.maximum(%v, %w) : (vector<2xf16>, vector<2xf16>) -> vector<2xf16>
      llvm.store %5, %h {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<1>
      llvm.return
    }
  }
}

// CHECK:      %0 = llvm.intr.maximum(%a, %b) : (f32, f32) -> f32
// CHECK-NEXT: %1 = llvm.intr.minimum(%0, %b) : (f32, f32) -> f32
// CHECK-NEXT: %2 = llvm.intr.maxnum(%1, %a) : (f32, f32) -> f32
// CHECK-NEXT: %3 = llvm.intr.minnum(%2, %b) : (f32, f32) -> f32
// CHECK-NEXT: %4 = llvm.intr.fma(%3, %a, %b) : (f32, f32, f32) -> f32
// CHECK-NEXT: %s = llvm.mlir.poison : !llvm.struct<(f32, f32)>
// CHECK:      %5 = llvm.intr.maximum(%v, %w) : (vector<2xf16>, vector<2xf16>) -> vector<2xf16>

// PTX:      max.NaN.f32
// PTX-NEXT: min.NaN.f32
// PTX-NEXT: max.f32
// PTX-NEXT: min.f32
// PTX-NEXT: fma.rn.f32
// PTX-NEXT: st.global.b32
// PTX:      max.NaN.f16x2
