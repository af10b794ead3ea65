// RUN: affinec-opt %S/inputs/matmul_shared.mlir -p 'affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=4},affinec-convert-parallel-to-gpu,gpu-kernel-outlining' > %t.mlir
// RUN: filecheck %s --input-file=%t.mlir
// RUN: affinec-opt %t.mlir | filecheck %s

// The launch body becomes a kernel in its own gpu.module; the host function keeps
// its name and launches it; the kernel records what the host needs to launch it.

// CHECK:      builtin.module attributes {{{.*}}gpu.container_module} {
// CHECK:      func.func @matmul(%[[A:.*]]: memref<6x7xf32>, %[[B:.*]]: memref<7x5xf32>, %[[C:.*]]: memref<6x5xf32>) {
// CHECK:        gpu.launch_func @matmul_kernel::@matmul_kernel blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%{{.*}}, %{{.*}}, %{{.*}}) args(%[[A]] : memref<6x7xf32>, %[[B]] : memref<7x5xf32>, %[[C]] : memref<6x5xf32>)
// CHECK-NEXT:   func.return
// CHECK:      gpu.module @matmul_kernel {
// CHECK-NEXT:   gpu.func @matmul_kernel(%{{.*}}: memref<6x7xf32>, %{{.*}}: memref<7x5xf32>, %{{.*}}: memref<6x5xf32>) workgroup(%{{.*}} : memref<4x3xf32, 3 : i64>) kernel attributes {affinec.launch = {kernel = "matmul_kernel", host = "matmul", grid = array<i64: 4, 1, 1>, block = array<i64: 4, 1, 1>, dynamic_shared_memory = 0 : i64, arguments = ["A", "B", "C"], argument_types = [memref<6x7xf32>, memref<7x5xf32>, memref<6x5xf32>], outputs = ["C"]}, known_block_size = array<i32: 4, 1, 1>, known_grid_size = array<i32: 4, 1, 1>} {
// CHECK-NEXT:     %{{.*}} = gpu.block_id x upper_bound 4
// CHECK-NEXT:     %{{.*}} = gpu.thread_id x upper_bound 4
// CHECK-NEXT:     arith.constant 0.000000e+00 : f32
// CHECK:          gpu.barrier
// CHECK:          gpu.return
// CHECK-NEXT:   }
// CHECK-NEXT: }
