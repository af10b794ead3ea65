// RUN: affinec-opt %s -p 'convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' | filecheck %s
// RUN: affinec-opt %s -p 'convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' -t ptx | filecheck %s --check-prefix=PTX

// Workgroup buffers of more than 48 KiB in all (54528 bytes here) cannot be static
// shared memory: they are placed in dynamic shared memory, at 16-byte aligned
// offsets (f16's 3001 elements take 6016 bytes), and every launch gives that much.

builtin.module attributes {gpu.container_module} {
  func.func @host(%a: memref<128xf32>) {
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1) args(%a : memref<128xf32>)
    func.return
  }
  gpu.module @kernels {
    gpu.func @k(%a: memref<128xf32>) workgroup(%x : memref<12000xf32, 3>, %y : memref<3001xf16, 3>, %z : memref<128xf32, 3>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %a[%t] : memref<128xf32>
      memref.store %v, %z[%t] : memref<128xf32, 3>
      gpu.barrier
      %w = memref.load %z[%t] : memref<128xf32, 3>
      memref.store %w, %a[%t] : memref<128xf32>
      gpu.return
    }
  }
}

// CHECK:      %[[SIZE:.*]] = arith.constant 54528 : i32
// CHECK-NEXT: gpu.launch_func @kernels::@k {{.*}} dynamic_shared_memory_size %[[SIZE]] args
// CHECK:      llvm.mlir.global external @__dynamic_shared_k() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK-NOT:  llvm.mlir.global
// CHECK:      %[[B0:.*]] = llvm.mlir.addressof @__dynamic_shared_k : !llvm.ptr<3>
// CHECK-NEXT: %x = llvm.getelementptr inbounds %[[B0]][0] : (!llvm.ptr<3>) -> !llvm.ptr<3>, f32
// CHECK-NEXT: %[[B1:.*]] = llvm.mlir.addressof @__dynamic_shared_k : !llvm.ptr<3>
// CHECK-NEXT: %y = llvm.getelementptr inbounds %[[B1]][24000] : (!llvm.ptr<3>) -> !llvm.ptr<3>, f16
// CHECK-NEXT: %[[B2:.*]] = llvm.mlir.addressof @__dynamic_shared_k : !llvm.ptr<3>
// CHECK-NEXT: %z = llvm.getelementptr inbounds %[[B2]][13504] : (!llvm.ptr<3>) -> !llvm.ptr<3>, f32

// PTX: .extern .shared .align 16 .b8 __dynamic_shared_k[];
// PTX: st.shared.b32 [%{{.*}}+54016]
