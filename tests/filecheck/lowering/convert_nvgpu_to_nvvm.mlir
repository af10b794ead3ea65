// RUN: affinec-opt %s | affinec-opt | filecheck %s --check-prefix=ROUNDTRIP
// RUN: affinec-opt %s -p convert-nvgpu-to-nvvm > %t.mlir
// RUN: filecheck %s --input-file=%t.mlir
// RUN: affinec-opt %t.mlir --print-op-generic | affinec-opt | filecheck %s
// RUN: affinec-opt %s -p 'convert-nvgpu-to-nvvm,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' | filecheck %s --check-prefix=LLVM
// RUN: affinec-opt %s -p 'convert-nvgpu-to-nvvm,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' -t ptx | filecheck %s --check-prefix=PTX
// RUN: not affinec-opt %s -p 'convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' 2>&1 | filecheck %s --check-prefix=ORDER

// One warp: copy A (16x16) and B ([n][k], 8x16) to shared memory asynchronously,
// load the fragments with ldmatrix, multiply-accumulate, store D (16x8) lane by lane.

builtin.module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @mma(%a: memref<16x16xf16>, %b: memref<8x16xf16>, %d: memref<16x8xf32>) workgroup(%sa : memref<16x16xf16, 3>, %sb : memref<8x16xf16, 3>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %c0 = arith.constant 0 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %lane = gpu.thread_id x
      %r = arith.divui %lane, %c2 : index
      %h = arith.remui %lane, %c2 : index
      %col = arith.muli %h, %c8 : index
      %ta = nvgpu.device_async_copy %a[%r, %col], %sa[%r, %col], 8 {bypassL1} : memref<16x16xf16> to memref<16x16xf16, 3>
      %rb = arith.remui %r, %c8 : index
      %tb = nvgpu.device_async_copy %b[%rb, %col], %sb[%rb, %col], 8 : memref<8x16xf16> to memref<8x16xf16, 3>
      %g = nvgpu.device_async_create_group %ta, %tb
      nvgpu.device_async_wait %g {numGroups = 0 : i32}
      gpu.barrier
      %arow = arith.remui %lane, %c16 : index
      %ahalf = arith.divui %lane, %c16 : index
      %acol = arith.muli %ahalf, %c8 : index
      %fa = nvgpu.ldmatrix %sa[%arow, %acol] {numTiles = 4 : i32, transpose = false} : memref<16x16xf16, 3> -> vector<4x2xf16>
      %bn = arith.remui %lane, %c8 : index
      %bq = arith.divui %lane, %c8 : index
      %bh = arith.remui %bq, %c2 : index
      %bk = arith.muli %bh, %c8 : index
      %fb = nvgpu.ldmatrix %sb[%bn, %bk] {numTiles = 2 : i32, transpose = false} : memref<8x16xf16, 3> -> vector<2x2xf16>
      %zero = arith.constant dense<0.0> : vector<2x2xf32>
      %fd = nvgpu.mma.sync (%fa, %fb, %zero) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
      %grp = arith.divui %lane, %c4 : index
      %tig = arith.remui %lane, %c4 : index
      %dcol = arith.muli %tig, %c2 : index
      %d00 = vector.extract %fd[0, 0] : f32 from vector<2x2xf32>
      memref.store %d00, %d[%grp, %dcol] : memref<16x8xf32>
      gpu.return
    }
  }
}

// ROUNDTRIP: nvgpu.device_async_copy %a[%r, %col], %sa[%r, %col], 8 {bypassL1} : memref<16x16xf16> to memref<16x16xf16, 3 : i64>
// ROUNDTRIP: %g = nvgpu.device_async_create_group %ta, %tb
// ROUNDTRIP: nvgpu.device_async_wait %g {numGroups = 0 : i32}
// ROUNDTRIP: nvgpu.ldmatrix %sa[%arow, %acol] {numTiles = 4 : i32, transpose = false} : memref<16x16xf16, 3 : i64> -> vector<4x2xf16>
// ROUNDTRIP: nvgpu.mma.sync(%fa, %fb, %zero) {mmaShape = [16 : i64, 8 : i64, 16 : i64]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>

// CHECK:      %[[DST:.*]] = affinec.element_pointer %sa[%r, %col] : memref<16x16xf16, 3 : i64> -> !llvm.ptr<3>
// CHECK-NEXT: %[[SRC:.*]] = affinec.element_pointer %a[%r, %col] : memref<16x16xf16> -> !llvm.ptr<1>
// CHECK-NEXT: nvvm.cp.async.shared.global %[[DST]], %[[SRC]], 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
// CHECK:      nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = ca : !llvm.ptr<3>, !llvm.ptr<1>
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.wait.group 0
// CHECK-NEXT: gpu.barrier
// CHECK:      %[[PA:.*]] = affinec.element_pointer %sa[%arow, %acol] : memref<16x16xf16, 3 : i64> -> !llvm.ptr<3>
// CHECK-NEXT: %[[LA:.*]] = nvvm.ldmatrix %[[PA]] {num = 4 : i32, layout = #nvvm.mma_layout<row>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
// CHECK-NEXT: %[[R0:.*]] = llvm.extractvalue %[[LA]][0] : !llvm.struct<(i32, i32, i32, i32)>
// CHECK-NEXT: %[[H0:.*]] = llvm.bitcast %[[R0]] : i32 to vector<2xf16>
// CHECK:      %[[P:.*]] = ub.poison : vector<4x2xf16>
// CHECK-NEXT: %{{.*}} = vector.insert %[[H0]], %[[P]] [0] : vector<2xf16> into vector<4x2xf16>
// CHECK:      nvvm.ldmatrix %{{.*}} {num = 2 : i32, layout = #nvvm.mma_layout<row>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32)>
// CHECK:      %{{.*}} = vector.extract %{{.*}}[3] : vector<2xf16> from vector<4x2xf16>
// CHECK:      %{{.*}} = vector.extract %zero[1, 1] : f32 from vector<2x2xf32>
// CHECK-NEXT: %[[D:.*]] = nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-NEXT: %{{.*}} = llvm.extractvalue %[[D]][0] : !llvm.struct<(f32, f32, f32, f32)>
// CHECK-NOT:  nvgpu.

// LLVM:      llvm.func @mma(
// LLVM:        nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
// LLVM:        nvvm.ldmatrix %{{.*}} {num = 4 : i32, layout = #nvvm.mma_layout<row>}
// LLVM:        llvm.mlir.undef : !llvm.array<4 x vector<2xf16>>
// LLVM:        llvm.insertvalue %{{.*}}, %{{.*}}[0] : !llvm.array<4 x vector<2xf16>>
// LLVM:        llvm.mlir.zero : !llvm.array<2 x vector<2xf32>>
// LLVM:        llvm.extractvalue %{{.*}}[3] : !llvm.array<4 x vector<2xf16>>
// LLVM:        nvvm.mma.sync A[
// LLVM:        llvm.extractelement %{{.*}}[%{{.*}} : i32] : vector<2xf32>
// LLVM-NOT:  vector.
// LLVM-NOT:  affinec.element_pointer

// PTX:     .target sm_80
// PTX:     cp.async.cg.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 16;
// PTX:     cp.async.ca.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 16;
// PTX:     cp.async.commit_group;
// PTX:     cp.async.wait_group {{.*}}0;
// PTX:     ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX:     ldmatrix.sync.aligned.m8n8.x2.shared.b16
// PTX:     mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX-NOT: call

// ORDER: error: 'nvgpu.device_async_copy' op convert-gpu-to-nvvm cannot lower 'nvgpu.device_async_copy' (run convert-nvgpu-to-nvvm first)
