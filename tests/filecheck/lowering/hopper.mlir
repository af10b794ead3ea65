// RUN: affinec-opt %s | affinec-opt | filecheck %s --check-prefix=ROUND
// RUN: affinec-opt %s -p 'nvvm-attach-target{chip=sm_90a},convert-nvgpu-to-nvvm' | filecheck %s --check-prefix=NVVM
// RUN: affinec-opt %s -p 'nvvm-attach-target{chip=sm_90a},convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' | filecheck %s --check-prefix=LLVM
// RUN: affinec-opt %s -p 'nvvm-attach-target{chip=sm_90a},convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' -t 'ptx{arch=sm_90a}' | filecheck %s --check-prefix=PTX
// RUN: affinec-opt %s -p 'nvvm-attach-target{chip=sm_90a},convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' -t llvm | filecheck %s --check-prefix=IR
// RUN: not affinec-opt %s -p 'nvvm-attach-target{chip=sm_90},convert-nvgpu-to-nvvm' 2>&1 | filecheck %s --check-prefix=SM90

// C = A x B on Hopper, one warpgroup: thread 0 announces the bytes and starts the
// TMA loads of A (64x64, K-major) and B (64x64, row-major: wgmma's transposed B),
// both swizzled by 128 B; every thread waits for the barrier's phase, the warpgroup
// multiplies from shared memory (one group left in flight, MLIR's default
// waitGroup), each thread stores its accumulator registers (after a wait for all).

!barriers = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 1>
!mapA = !nvgpu.tensormap.descriptor<tensor = memref<64x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!mapB = !nvgpu.tensormap.descriptor<tensor = memref<64x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!descA = !nvgpu.warpgroup.descriptor<tensor = memref<64x64xf16, 3>>
!descB = !nvgpu.warpgroup.descriptor<tensor = memref<64x64xf16, 3>>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<64x64xf32>>

module attributes {gpu.container_module} {
  func.func @matmul(%a: memref<64x64xf16>, %b: memref<64x64xf16>, %out: memref<64x64xf32>) {
    %c1 = arith.constant 1 : index
    %cm = arith.constant 64 : index
    %cn = arith.constant 64 : index
    %ck = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %ua = "memref.cast"(%a) : (memref<64x64xf16>) -> memref<*xf16>
    %ub = "memref.cast"(%b) : (memref<64x64xf16>) -> memref<*xf16>
    %mapA = nvgpu.tma.create.descriptor %ua box[%cm, %ck] : memref<*xf16> -> !mapA
    %mapB = nvgpu.tma.create.descriptor %ub box[%ck, %cn] : memref<*xf16> -> !mapB
    gpu.launch_func @kernels::@matmul_kernel blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1) args(%mapA : !mapA, %mapB : !mapB, %out : memref<64x64xf32>)
    return
  }
  gpu.module @kernels {
    gpu.func @matmul_kernel(%mapA: !mapA, %mapB: !mapB, %out: memref<64x64xf32>) workgroup(%sa0 : memref<64x64xf16, 3>, %sb0 : memref<64x64xf16, 3>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %k0 = arith.constant 0 : index
      %bytes = arith.constant 16384 : index
      %ticks = arith.constant 10000000 : index
      %false = arith.constant false
      %true = arith.constant true
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c0 : index
      %bar = nvgpu.mbarrier.create -> !barriers
      %zero = nvgpu.warpgroup.mma.init.accumulator -> !acc
      scf.if %first {
        nvgpu.mbarrier.init %bar[%c0], %c1 : !barriers
      }
      gpu.barrier  // the barriers' init, visible to every thread
      scf.if %first {
        nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %bytes : !barriers
        nvgpu.tma.async.load %mapA[%k0, %c0], %bar[%c0] to %sa0 : !mapA, !barriers -> memref<64x64xf16, 3>
        nvgpu.tma.async.load %mapB[%c0, %k0], %bar[%c0] to %sb0 : !mapB, !barriers -> memref<64x64xf16, 3>
      }
      nvgpu.mbarrier.try_wait.parity %bar[%c0], %false, %ticks : !barriers
      %da0 = nvgpu.warpgroup.generate.descriptor %sa0, %mapA : memref<64x64xf16, 3>, !mapA -> !descA
      %db0 = nvgpu.warpgroup.generate.descriptor %sb0, %mapB : memref<64x64xf16, 3>, !mapB -> !descB
      %acc0 = nvgpu.warpgroup.mma %da0, %db0, %zero {transposeB} : !descA, !descB, !acc -> !acc
      gpu.barrier  // stage 0 read: free for the next load
      nvgpu.warpgroup.mma.store %acc0, %out : !acc to memref<64x64xf32>
      gpu.return
    }
  }
}

// ROUND: nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
// ROUND: nvgpu.tma.async.load %mapA[%k0, %c0], %bar[%c0] to %sa0
// ROUND: nvgpu.warpgroup.mma %da0, %db0, %zero {transposeB}

// NVVM:      gpu.func @matmul_kernel(%mapA: !nvgpu.tensormap.descriptor<
// NVVM-SAME: workgroup({{.*}}%bar : memref<1xi64, 3 : i64>) kernel attributes {affinec.shared_alignments = array<i64: 1024, 1024, 16>}
// NVVM:      nvvm.mbarrier.init %{{.*}}, %{{.*}} : !llvm.ptr<3>, i32
// NVVM-NEXT: nvvm.fence.mbarrier.init
// NVVM:      nvvm.mbarrier.arrive.expect_tx %{{.*}}, %{{.*}} : !llvm.ptr<3>, i32
// NVVM:      builtin.unrealized_conversion_cast %mapA : !nvgpu.tensormap.descriptor<{{.*}}> to !llvm.ptr
// NVVM:      nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %{{.*}}, box[%{{.*}}, %{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// NVVM:      nvvm.mbarrier.try_wait.parity %{{.*}}, %{{.*}}, %{{.*}} : !llvm.ptr<3>, i32, i32
// NVVM:      llvm.ptrtoint
// NVVM:      nvvm.wgmma.fence.aligned
// NVVM:      nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>, <wrapped>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
// NVVM-NEXT: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>, <wrapped>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
// NVVM-NEXT: nvvm.wgmma.mma_async
// NVVM-NEXT: nvvm.wgmma.mma_async
// NVVM:      nvvm.wgmma.commit.group.sync.aligned
// NVVM-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// NVVM:      nvvm.wgmma.wait.group.sync.aligned 0
// NVVM:      memref.store

// LLVM: llvm.mlir.global internal @__shared_matmul_kernel_0() {addr_space = 3 : i32, alignment = 1024 : i64}
// LLVM: llvm.func @matmul_kernel(%mapA: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}

// The four MMAs accumulate into the same registers, one after the other: one inline
// PTX statement, its 32 outputs tied to the inputs, then four pairs of descriptors
// (LLVM's register coalescer is quadratic in a chain of statements tied one to the
// next).
// IR:      = call {float, {{.*}}} asm sideeffect "{
// IR-NEXT: .reg .pred scale_d;
// IR-NEXT: setp.ne.b32 scale_d, 0, 0;
// IR-NEXT: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, {{.*}}, $31}, $32, $33, scale_d, 1, 1, 0, 1;
// IR-NEXT: }
// IR-NEXT: {
// IR-NEXT: .reg .pred scale_d;
// IR-NEXT: setp.ne.b32 scale_d, 1, 0;
// IR-NEXT: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, {{.*}}, $31}, $34, $35, scale_d, 1, 1, 0, 1;
// IR-NEXT: }
// IR-NEXT: {
// IR-NEXT: .reg .pred scale_d;
// IR-NEXT: setp.ne.b32 scale_d, 1, 0;
// IR-NEXT: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, {{.*}}, $31}, $36, $37, scale_d, 1, 1, 0, 1;
// IR-NEXT: }
// IR-NEXT: {
// IR-NEXT: .reg .pred scale_d;
// IR-NEXT: setp.ne.b32 scale_d, 1, 0;
// IR-NEXT: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, {{.*}}, $31}, $38, $39, scale_d, 1, 1, 0, 1;
// IR-NEXT: }", "{{(=f,)+}}l,l,l,l,l,l,l,l,0,1,2,{{.*}},31"
// IR-NOT:  wgmma.mma_async

// PTX:      .target sm_90a
// PTX:      .param .align 64 .b8 matmul_kernel_param_0[128]
// PTX:      .shared .align 1024 .b8 __shared_matmul_kernel_0[8192]
// PTX:      mbarrier.init.shared.b64
// PTX:      cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX:      mbarrier.try_wait.parity.shared.b64
// PTX:      wgmma.fence.sync.aligned
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// PTX:      wgmma.commit_group.sync.aligned
// PTX:      wgmma.wait_group.sync.aligned 1
// PTX:      wgmma.wait_group.sync.aligned 0

// SM90: error: 'nvgpu.warpgroup.mma' op needs sm_90a (wgmma); the kernel is compiled for sm_90
