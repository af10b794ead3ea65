// RUN: affinec-opt %s > %t.mlir
// RUN: filecheck %s --input-file=%t.mlir
// RUN: affinec-opt %t.mlir | filecheck %s
// RUN: affinec-opt %s --print-op-generic | affinec-opt | filecheck %s

// The gpu and nvvm ops in MLIR's syntax, printed and parsed back.

builtin.module attributes {gpu.container_module} {
  func.func @host(%a: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c32 = arith.constant 32 : index
    %s = arith.constant 0 : i32
    gpu.launch_func @kernels::@k blocks in (%c2, %c1, %c1) threads in (%c32, %c1, %c1) dynamic_shared_memory_size %s args(%a : memref<64xf32>)
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) workgroup(%w : memref<32xf32, 3>) {
      gpu.barrier
      gpu.terminator
    } {note = "inline"}
    func.return
  }
  gpu.module @kernels {
    gpu.func @k(%a: memref<64xf32>) workgroup(%tile : memref<32xf32, 3>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %tx = gpu.thread_id x upper_bound 32
      %bx = gpu.block_id y
      %n = gpu.block_dim z
      %g = gpu.grid_dim x
      %r = nvvm.read.ptx.sreg.tid.x : i32
      %l = nvvm.read.ptx.sreg.laneid : i32
      nvvm.barrier0
      gpu.return
    }
  }
}

// CHECK:      gpu.launch_func @kernels::@k blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%{{.*}}, %{{.*}}, %{{.*}}) dynamic_shared_memory_size %{{.*}} args(%{{.*}} : memref<64xf32>)
// CHECK-NEXT: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) workgroup(%{{.*}} : memref<32xf32, 3 : i64>) {
// CHECK-NEXT:   gpu.barrier
// CHECK-NEXT:   gpu.terminator
// CHECK-NEXT: } {note = "inline"}
// CHECK:      gpu.module @kernels {
// CHECK-NEXT:   gpu.func @k(%{{.*}}: memref<64xf32>) workgroup(%{{.*}} : memref<32xf32, 3 : i64>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
// CHECK-NEXT:     gpu.thread_id x upper_bound 32
// CHECK-NEXT:     gpu.block_id y
// CHECK-NEXT:     gpu.block_dim z
// CHECK-NEXT:     gpu.grid_dim x
// CHECK-NEXT:     nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT:     nvvm.read.ptx.sreg.laneid : i32
// CHECK-NEXT:     nvvm.barrier0
// CHECK-NEXT:     gpu.return
