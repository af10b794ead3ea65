// RUN: affinec-opt %S/inputs/matmul_shared.mlir -p 'affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=4},affinec-convert-parallel-to-gpu,affinec-lower-to-nvvm' | filecheck %s
// RUN: affinec-opt %S/inputs/matmul_shared.mlir -p 'affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=4},affinec-convert-parallel-to-gpu,affinec-lower-to-nvvm' --print-op-generic | affinec-opt | filecheck %s

// The kernel in the llvm dialect: bare pointers in global memory (address space 1)
// for its arguments, a shared global (address space 3) for the workgroup buffer,
// NVVM special registers for the ids, nvvm.barrier0 for gpu.barrier. The host
// function is left as it is.

// CHECK:      func.func @matmul(
// CHECK:        gpu.launch_func @matmul_kernel::@matmul_kernel
// CHECK:      gpu.module @matmul_kernel {
// CHECK-NEXT:   llvm.mlir.global internal @__shared_matmul_kernel_0() {addr_space = 3 : i32, alignment = 16 : i64{{.*}}} : !llvm.array<12 x f32>
// CHECK-NEXT:   llvm.func @matmul_kernel(%{{.*}}: !llvm.ptr<1> {llvm.noalias}, %{{.*}}: !llvm.ptr<1> {llvm.noalias}, %{{.*}}: !llvm.ptr<1> {llvm.noalias}) attributes {nvvm.kernel, nvvm.maxntid = array<i32: 4, 1, 1>, nvvm.minctasm = 1 : i32, affinec.launch = {
// CHECK-NEXT:     %[[TILE:.*]] = llvm.mlir.addressof @__shared_matmul_kernel_0 : !llvm.ptr<3>
// CHECK-NEXT:     %[[N:.*]] = llvm.mlir.constant(3) : i64
// CHECK-NEXT:     %[[ACC:.*]] = llvm.alloca %[[N]] x f32 {alignment = 4 : i64} : (i64) -> !llvm.ptr
// CHECK-NEXT:     %[[CTAID:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK-NEXT:     %{{.*}} = llvm.zext nneg %[[CTAID]] : i32 to i64
// CHECK-NEXT:     %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT:     %{{.*}} = llvm.zext nneg %[[TID]] : i32 to i64
// CHECK:          nvvm.barrier0
// CHECK:          llvm.getelementptr inbounds %[[TILE]][%{{.*}}] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, f32
// CHECK:          llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK:          llvm.br ^{{.*}} {affinec.unroll}
// CHECK:          llvm.return
