"""The runtime's wrapper: every argument checked before launch, clear errors, and —
on a GPU — launches through numba.cuda with numpy, numba and torch arrays.

The GPU tests here use hand-written PTX, so the launch path is tested independently
of the compiler (tests/test_gpu.py runs compiled convolutions).
"""

import os

import numpy as np
import pytest

import affinec
from affinec.backend.runtime import (
    Kernel,
    KernelArgumentError,
    NoCudaGPU,
    Parameter,
    cuda_available,
)
from affinec.base.spec import ConvSpec

# out[i] = 2 * in[i] for i < 1000, in blocks of 128 threads.
SCALE_PTX = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry scale(.param .u64 in, .param .u64 out)
{
    .reg .pred %p;
    .reg .b32 %r<5>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r1, %r2, %r3;
    setp.ge.s32 %p, %r4, 1000;
    @%p bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.s32 %rd5, %r4, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.f32 %f1, [%rd6];
    add.f32 %f2, %f1, %f1;
    add.s64 %rd7, %rd4, %rd5;
    st.global.f32 [%rd7], %f2;
DONE:
    ret;
}
"""

# Each block stages 64 KiB through dynamic shared memory (more than the 48 KiB a
# kernel gets without asking): out[b, t] = in[b, t] + 1 for 16384 floats per block.
SHARED_PTX = """
.version 8.0
.target sm_80
.address_size 64

.extern .shared .align 16 .b8 smem[];

.visible .entry stage(.param .u64 in, .param .u64 out)
{
    .reg .pred %p;
    .reg .b32 %r<8>;
    .reg .b64 %rd<10>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %r2;
    mov.u32 %r7, smem;
LOAD:
    mad.lo.s32 %r4, %r1, 16384, %r3;
    mul.wide.s32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    shl.b32 %r5, %r3, 2;
    add.s32 %r6, %r7, %r5;
    st.shared.f32 [%r6], %f1;
    add.s32 %r3, %r3, 256;
    setp.lt.s32 %p, %r3, 16384;
    @%p bra LOAD;
    bar.sync 0;
    mov.u32 %r3, %r2;
STORE:
    shl.b32 %r5, %r3, 2;
    add.s32 %r6, %r7, %r5;
    ld.shared.f32 %f1, [%r6];
    add.f32 %f2, %f1, 0f3F800000;
    mad.lo.s32 %r4, %r1, 16384, %r3;
    mul.wide.s32 %rd3, %r4, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.f32 [%rd4], %f2;
    add.s32 %r3, %r3, 256;
    setp.lt.s32 %p, %r3, 16384;
    @%p bra STORE;
    ret;
}
"""

F32 = np.dtype(np.float32)


def scale_kernel() -> Kernel:
    return Kernel.single(
        ptx=SCALE_PTX,
        name="scale",
        grid=(8, 1, 1),
        block=(128, 1, 1),
        parameters=[
            Parameter("in", (1000,), F32),
            Parameter("out", (1000,), F32, True),
        ],
    )


class FakeDeviceArray:
    """Just enough of `__cuda_array_interface__` to exercise the checks."""

    def __init__(
        self, shape, typestr="<f4", strides=None, pointer=0x1000, readonly=False
    ):
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "data": (pointer, readonly),
            "version": 3,
        }


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            (),
            {},
            r"missing argument 'in' \(an array of shape \(1000,\) and dtype float32\)",
        ),
        (
            (np.zeros(999, np.float32),),
            {},
            r"argument 'in': expected an array of shape \(1000,\) and dtype float32, "
            r"got a numpy array of shape \(999,\) and dtype float32",
        ),
        (
            (np.zeros(1000, np.float64),),
            {},
            r"got a numpy array of shape \(1000,\) and dtype float64",
        ),
        (
            (np.zeros(2000, np.float32)[::2],),
            {},
            r"argument 'in': expected a C-contiguous array \(strides \(4,\)\), got strides \(8,\)",
        ),
        (([0.0] * 1000,), {}, "argument 'in': expected .* got list"),
        ((np.zeros(1000, np.float32),) * 3, {}, "takes 2 arrays"),
        ((np.zeros(1000, np.float32),), {"outt": 1}, "has no parameter 'outt'"),
        ((np.zeros(1000, np.float32),), {"in": 1}, "argument 'in' given twice"),
        (
            (FakeDeviceArray((1000,), "<f2"),),
            {},
            r"got a device array of shape \(1000,\) and dtype float16",
        ),
        (
            (np.zeros(1000, np.float32), FakeDeviceArray((1000,), readonly=True)),
            {},
            "argument 'out': the device array is read-only",
        ),
        (
            (FakeDeviceArray((1000,), pointer=0x1004),),
            {},
            r"argument 'in': its memory at 0x1004 is not 16-byte aligned .* pass an "
            r"aligned copy",
        ),
    ],
)
def test_bad_arguments_are_named(args, kwargs, message):
    with pytest.raises(KernelArgumentError, match=message):
        scale_kernel().check(*args, **kwargs)


def test_an_output_aliasing_an_input_is_refused():
    buffer = np.zeros(2000, np.float32)
    with pytest.raises(
        KernelArgumentError, match="'out' .* shares memory with argument 'in'"
    ):
        scale_kernel().check(buffer[:1000], buffer[500:1500])


@pytest.mark.skipif(cuda_available(), reason="fake device pointers fail the GPU check")
def test_device_arrays_overlapping_by_address_are_refused():
    device_in = FakeDeviceArray((1000,), pointer=0x10000)
    device_out = FakeDeviceArray((1000,), pointer=0x10000 + 3984)
    with pytest.raises(KernelArgumentError, match="shares memory"):
        scale_kernel().check(device_in, device_out)
    scale_kernel().check(device_in, FakeDeviceArray((1000,), pointer=0x10000 + 4000))


def test_a_missing_output_is_allocated():
    (_, out) = scale_kernel().check(np.zeros(1000, np.float32))
    assert out.host is not None and out.host.shape == (1000,)


@pytest.mark.skipif(cuda_available(), reason="checks the behaviour without a GPU")
def test_without_a_gpu_a_call_says_so():
    with pytest.raises(NoCudaGPU, match="no CUDA GPU available"):
        scale_kernel()(np.zeros(1000, np.float32))


def test_without_a_driver_library_numba_is_not_loaded_to_say_so():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from affinec.backend import cuda_launch\n"
        "cuda_launch._DRIVER_LIBRARIES = ('/nonexistent/libcuda.so.1',)\n"
        "assert cuda_launch.cuda_available() is False\n"
        "assert 'numba' not in sys.modules\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NUMBA_ENABLE_CUDASIM", "NUMBA_CUDA_DRIVER")
    }
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    # numba's simulator, or a driver numba is pointed at, is numba's to judge
    env["NUMBA_CUDA_DRIVER"] = "/opt/somewhere/libcuda.so"
    code = code.replace("is False", "is not None").replace(
        "assert 'numba' not in", "assert 'numba' in"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.mark.gpu
def test_numpy_arguments_are_copied_in_and_back():
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    out = np.full(1000, np.nan, np.float32)
    result = scale_kernel()(x, out)
    assert result is out
    np.testing.assert_array_equal(out, 2 * x)


@pytest.mark.gpu
def test_numba_and_torch_arrays_are_used_in_place():
    from numba import cuda

    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    d_in, d_out = cuda.to_device(x), cuda.device_array(1000, np.float32)
    scale_kernel()(d_in, d_out)
    np.testing.assert_array_equal(d_out.copy_to_host(), 2 * x)
    torch = pytest.importorskip("torch")
    t_in = torch.tensor(x, device="cuda")
    t_out = torch.full((1000,), float("nan"), device="cuda")
    scale_kernel()(t_in, t_out)
    np.testing.assert_array_equal(t_out.cpu().numpy(), 2 * x)
    with pytest.raises(KernelArgumentError, match="shares memory"):
        scale_kernel()(t_in, t_in)
    with pytest.raises(KernelArgumentError, match="got Tensor"):
        scale_kernel()(t_in.cpu(), t_out)


@pytest.mark.gpu
def test_host_memory_posing_as_device_memory_is_refused():
    x = np.zeros(1000, np.float32)
    fake = FakeDeviceArray((1000,), pointer=x.ctypes.data)
    with pytest.raises(KernelArgumentError, match="is not device memory"):
        scale_kernel()(fake, np.zeros(1000, np.float32))


@pytest.mark.gpu
def test_more_than_48_kib_of_dynamic_shared_memory():
    kernel = Kernel.single(
        ptx=SHARED_PTX,
        name="stage",
        grid=(4, 1, 1),
        block=(256, 1, 1),
        parameters=[
            Parameter("in", (4, 16384), F32),
            Parameter("out", (4, 16384), F32, True),
        ],
        shared_memory=16384 * 4,
    )
    x = np.random.default_rng(2).standard_normal((4, 16384)).astype(np.float32)
    np.testing.assert_array_equal(kernel(x), x + 1)


class _Tensor:
    """Named like torch's tensors, which `array_kind` goes by."""


_Tensor.__module__ = "torch"


def test_the_output_takes_the_inputs_kind():
    from affinec.backend.runtime import array_kind, new_output

    assert array_kind(np.zeros(3)) == "numpy"
    assert array_kind(_Tensor()) == "torch"
    assert array_kind(FakeDeviceArray((3,), pointer=0x1000)) == "numba"
    p = Parameter("out", (2, 3), np.dtype(np.float16), output=True)
    out = new_output(p, np.zeros(3))
    assert isinstance(out, np.ndarray) and out.shape == (2, 3) and out.dtype == p.dtype
    # A call on numpy arrays and device arrays alike returns numpy.
    (_, checked) = scale_kernel().check(np.zeros(1000, np.float32))
    assert checked.host is not None


def test_one_verdict_holds_a_result_to_the_kernels_own_tolerance():
    from affinec.base.spec import ConvSpec
    from affinec.frontend.reference import TOLERANCE, verdict

    spec = ConvSpec(1, 4, 5, 5, 4, 3, 3, dtype="f32")
    assert verdict(spec, 1e-9).ok and verdict(spec, 1e-9).tolerance == TOLERANCE["f32"]
    assert not verdict(spec, 1e-3).ok  # over f32's
    assert verdict(spec, 1e-3, TOLERANCE["tf32"]).ok  # a tf32 kernel's own
    assert not verdict(spec, float("nan"), 1.0).ok  # NaN never passes
    assert "WRONG" in verdict(spec, float("inf")).describe()


def test_affinec_compile_names_the_architecture_arch_as_the_compiler_does():
    spec = ConvSpec(1, 4, 6, 6, 4, 3, 3, padding=1)
    assert affinec.compile(spec, arch="sm_90").info["arch"] == "sm_90"
    assert affinec.compile(spec, target="sm_90").info["arch"] == "sm_90"  # older name
    with pytest.raises(ValueError, match="give one"):
        affinec.compile(spec, arch="sm_80", target="sm_90")
