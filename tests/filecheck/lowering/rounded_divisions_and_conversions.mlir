// RUN: affinec-opt %s -p 'convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' | filecheck %s
// RUN: affinec-opt %s -p 'convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' --print-op-generic | affinec-opt | filecheck %s
// RUN: affinec-opt %s -p 'convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' -t ptx | filecheck %s --check-prefix=PTX

// A quotient rounded toward minus or plus infinity becomes the one rounded toward
// zero and a correction; the conversions between integers and floats become
// llvm.uitofp, llvm.fptosi and llvm.fptoui (and PTX's cvt).

builtin.module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f(%a: i32, %b: i32, %x: f32, %out: memref<5xi32>, %fout: memref<1xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %floor = arith.floordivsi %a, %b : i32
      %ceil = arith.ceildivsi %a, %b : i32
      %ceilu = arith.ceildivui %a, %b : i32
      %s = arith.fptosi %x : f32 to i32
      %u = arith.fptoui %x : f32 to i32
      %f = arith.uitofp %a : i32 to f32
      memref.store %floor, %out[%c0] : memref<5xi32>
      memref.store %ceil, %out[%c1] : memref<5xi32>
      memref.store %ceilu, %out[%c2] : memref<5xi32>
      memref.store %s, %out[%c3] : memref<5xi32>
      memref.store %u, %out[%c4] : memref<5xi32>
      memref.store %f, %fout[%c0] : memref<1xf32>
      gpu.return
    }
  }
}

// CHECK:      llvm.func @f(%[[A:.*]]: i32, %[[B:.*]]: i32, %[[X:.*]]: f32,
// CHECK:        %[[Q:.*]] = llvm.sdiv %[[A]], %[[B]] : i32
// CHECK-NEXT:   %[[P:.*]] = llvm.mul %[[Q]], %[[B]] : i32
// CHECK-NEXT:   %[[INEXACT:.*]] = llvm.icmp "ne" %[[A]], %[[P]] : i32
// CHECK-NEXT:   %[[AN:.*]] = llvm.icmp "slt" %[[A]], %{{.*}} : i32
// CHECK-NEXT:   %[[BN:.*]] = llvm.icmp "slt" %[[B]], %{{.*}} : i32
// CHECK-NEXT:   %[[OPPOSITE:.*]] = llvm.icmp "ne" %[[AN]], %[[BN]] : i1
// CHECK-NEXT:   %[[DOWN:.*]] = llvm.and %[[INEXACT]], %[[OPPOSITE]] : i1
// CHECK-NEXT:   %[[LESS:.*]] = llvm.add %[[Q]], %{{.*}} : i32
// CHECK-NEXT:   %floor = llvm.select %[[DOWN]], %[[LESS]], %[[Q]] : i1, i32
// CHECK:        llvm.icmp "eq" %{{.*}}, %{{.*}} : i1
// CHECK:        %ceil = llvm.select
// CHECK:        llvm.udiv
// CHECK:        %ceilu = llvm.select
// CHECK-NEXT:   %s = llvm.fptosi %[[X]] : f32 to i32
// CHECK-NEXT:   %u = llvm.fptoui %[[X]] : f32 to i32
// CHECK-NEXT:   %f = llvm.uitofp %[[A]] : i32 to f32

// PTX:      div.s32
// PTX:      div.u32
// PTX:      cvt.rzi.s32.f32
// PTX-NEXT: cvt.rzi.u32.f32
// PTX-NEXT: cvt.rn.f32.u32
