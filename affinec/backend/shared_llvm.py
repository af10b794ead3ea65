"""LLVM IR text to PTX through a shared LLVM library of the machine, in place of
llvmlite's own LLVM, where `AFFINEC_LIBLLVM` names one.

llvmlite's wheels carry an LLVM built with its assertions on (GVN, for one, checks
its tables after every instruction it removes); a distribution's release build of
the same LLVM version (Debian's `libllvm22`: `/lib/x86_64-linux-gnu/libLLVM.so.22.1`)
runs the same -O3 pipeline and the same NVPTX code generation without them, in
about 40 % less time on the tensor-core kernels, and gives the same PTX, byte for
byte, on every kernel `scripts/ptx_identical.py` compiles. The library is driven
through LLVM's C API (`ctypes`): the module parsed into a context of its own,
verified, optimized by the new pass manager's `default<On>` pipeline, and written
by the target machine, as `affinec.backend.nvptx` does with llvmlite.

Which LLVM compiles (`library_path`): the library `AFFINEC_LIBLLVM` names, checked
(it must be LLVM of llvmlite's major and minor version: an `EmitterError` says
which it is otherwise); where that variable is unset, the machine's release build
of llvmlite's version where a distribution installed one (`release_library`:
`libLLVM.so.22.1` in the system's library folders); `AFFINEC_LIBLLVM=llvmlite` (or
empty) llvmlite's own LLVM, always. `AFFINEC_FAST_CODEGEN` and
`AFFINEC_LEAN_CODEGEN` act on either as on llvmlite's.
"""

from __future__ import annotations

import ctypes
import os
import sysconfig
import threading
from functools import cache

import llvmlite.binding as llvm_binding

from affinec.backend.emitter_errors import EmitterError

LIBLLVM = "AFFINEC_LIBLLVM"
"""The environment variable naming the shared LLVM library to compile with (a
path, as `ctypes` loads it); unset or empty: llvmlite's LLVM."""

_P = ctypes.c_void_p
_ASSEMBLY_FILE = 0
"""`LLVMAssemblyFile`: the target machine writes assembly (PTX)."""
_RETURN_STATUS = 2
"""`LLVMReturnStatusAction`: the verifier reports, it does not abort."""


NVPTX_PARTS = ("TargetInfo", "Target", "TargetMC", "AsmPrinter")
"""The NVPTX target's parts a library initializes (LLVM's C API)."""

OWN = "llvmlite"
"""`AFFINEC_LIBLLVM=llvmlite`: llvmlite's own LLVM, even where a release build is
installed."""


def library_path() -> str | None:
    """The shared LLVM library to compile with: the one `AFFINEC_LIBLLVM` names;
    where it is unset, `release_library()`; None (llvmlite's own LLVM) where it is
    empty or `llvmlite`, or unset on a machine without a release build."""
    named = os.environ.get(LIBLLVM)
    if named is None:
        return release_library()
    return None if named in ("", OWN) else named


@cache
def release_library() -> str | None:
    """A release build of llvmlite's LLVM version that a distribution installed in
    the system's library folders (Debian's `libllvm22`:
    `/lib/x86_64-linux-gnu/libLLVM.so.22.1`), where it loads, is that version and
    has the NVPTX target; None otherwise."""
    major, minor = llvm_binding.llvm_version_info[:2]
    name = f"libLLVM.so.{major}.{minor}"
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    folders = [
        f"/lib/{multiarch}",
        f"/usr/lib/{multiarch}",
        f"/usr/lib/llvm-{major}/lib",
        "/usr/lib64",
        "/usr/lib",
    ]
    for folder in dict.fromkeys(folders):
        path = os.path.join(folder, name)
        if os.path.exists(path) and _compiles_for_us(path):
            return path
    return None


def _compiles_for_us(path: str) -> bool:
    """Whether the library at `path` loads, is LLVM of llvmlite's major and minor
    version and has the NVPTX target."""
    try:
        lib = ctypes.CDLL(path)
        version = _version(lib)
    except (OSError, AttributeError):
        return False
    has_nvptx = all(hasattr(lib, f"LLVMInitializeNVPTX{part}") for part in NVPTX_PARTS)
    return version[:2] == tuple(llvm_binding.llvm_version_info)[:2] and has_nvptx


def _version(lib: ctypes.CDLL) -> tuple[int, ...]:
    """The LLVM version of `lib` (major, minor, patch); an AttributeError where it
    has no `LLVMGetVersion`."""
    get_version = lib.LLVMGetVersion
    get_version.restype = None
    get_version.argtypes = [ctypes.POINTER(ctypes.c_uint)] * 3
    version = (ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint())
    get_version(*(ctypes.byref(v) for v in version))
    return tuple(v.value for v in version)


class SharedLLVM:
    """One shared LLVM library, set up for NVPTX (targets made once)."""

    def __init__(self, path: str, fast: bool) -> None:
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise EmitterError(
                None, f"{LIBLLVM}={path}: cannot load it ({e})"
            ) from None
        self.lib = lib
        self.path = path
        ours = ".".join(map(str, llvm_binding.llvm_version_info))
        try:
            self._declare()
        except AttributeError as e:
            raise EmitterError(
                None,
                f"{LIBLLVM}={path} is not an LLVM {ours} library (it lacks "
                f"{str(e).rsplit(' ', 1)[-1]})",
            ) from None
        self.version = _version(lib)
        if self.version[:2] != tuple(llvm_binding.llvm_version_info)[:2]:
            raise EmitterError(
                None,
                f"{LIBLLVM}={path} is LLVM {'.'.join(map(str, self.version))}; "
                f"llvmlite's is {ours}: the PTX would be another compiler's (give a "
                "library of the same major and minor version)",
            )
        for part in NVPTX_PARTS:
            try:
                initialize = getattr(lib, f"LLVMInitializeNVPTX{part}")
            except AttributeError:
                raise EmitterError(
                    None,
                    f"{LIBLLVM}={path} has no NVPTX target (LLVM built without it)",
                ) from None
            initialize()
        if fast:  # LLVM's options are per library, read before any pass runs
            argv = (ctypes.c_char_p * 2)(b"affinec", b"-opt-disable=slsr")
            lib.LLVMParseCommandLineOptions(2, argv, None)
        self.fast = fast
        self.lock = threading.Lock()
        """The target machines are shared: one compilation at a time."""
        self._machines: dict[tuple[str, int], int] = {}

    def _declare(self) -> None:
        lib = self.lib
        signatures = {
            "LLVMContextCreate": (_P, []),
            "LLVMContextDispose": (None, [_P]),
            "LLVMCreateMemoryBufferWithMemoryRangeCopy": (
                _P,
                [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p],
            ),
            "LLVMParseIRInContext": (
                ctypes.c_int,
                [_P, _P, ctypes.POINTER(_P), ctypes.POINTER(_P)],
            ),
            "LLVMVerifyModule": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(_P)]),
            "LLVMDisposeModule": (None, [_P]),
            "LLVMDisposeMessage": (None, [_P]),
            "LLVMGetTargetFromTriple": (
                ctypes.c_int,
                [ctypes.c_char_p, ctypes.POINTER(_P), ctypes.POINTER(_P)],
            ),
            "LLVMCreateTargetMachine": (
                _P,
                [
                    _P,
                    ctypes.c_char_p,
                    ctypes.c_char_p,
                    ctypes.c_char_p,
                    ctypes.c_int,
                    ctypes.c_int,
                    ctypes.c_int,
                ],
            ),
            "LLVMCreateTargetDataLayout": (_P, [_P]),
            "LLVMCopyStringRepOfTargetData": (_P, [_P]),
            "LLVMDisposeTargetData": (None, [_P]),
            "LLVMSetTarget": (None, [_P, ctypes.c_char_p]),
            "LLVMSetDataLayout": (None, [_P, ctypes.c_char_p]),
            "LLVMCreatePassBuilderOptions": (_P, []),
            "LLVMDisposePassBuilderOptions": (None, [_P]),
            "LLVMRunPasses": (_P, [_P, ctypes.c_char_p, _P, _P]),
            "LLVMGetErrorMessage": (_P, [_P]),
            "LLVMDisposeErrorMessage": (None, [_P]),
            "LLVMTargetMachineEmitToMemoryBuffer": (
                ctypes.c_int,
                [_P, _P, ctypes.c_int, ctypes.POINTER(_P), ctypes.POINTER(_P)],
            ),
            "LLVMGetBufferStart": (_P, [_P]),
            "LLVMGetBufferSize": (ctypes.c_size_t, [_P]),
            "LLVMDisposeMemoryBuffer": (None, [_P]),
            "LLVMGetVersion": (None, [ctypes.POINTER(ctypes.c_uint)] * 3),
            "LLVMParseCommandLineOptions": (
                None,
                [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_char_p],
            ),
        }
        for name, (result, arguments) in signatures.items():
            function = getattr(lib, name)
            function.restype = result
            function.argtypes = arguments

    def _message(self, pointer: _P | int | None, dispose: str) -> str:
        if not pointer:
            return ""
        text = ctypes.string_at(pointer).decode(errors="replace")
        getattr(self.lib, dispose)(pointer)
        return text.strip()

    def machine(self, triple: str, arch: str, features: str, level: int) -> int:
        """The target machine for `arch` at code generation `level`, made once."""
        key = (arch, level)
        if key not in self._machines:
            target, error = _P(), _P()
            if self.lib.LLVMGetTargetFromTriple(
                triple.encode(), ctypes.byref(target), ctypes.byref(error)
            ):
                why = self._message(error.value, "LLVMDisposeMessage")
                raise EmitterError(None, f"{self.path}: no NVPTX target ({why})")
            machine = self.lib.LLVMCreateTargetMachine(
                target, triple.encode(), arch.encode(), features.encode(), level, 0, 0
            )
            if not machine:
                raise EmitterError(None, f"{self.path}: no target machine for {arch}")
            self._machines[key] = machine
        return self._machines[key]

    def optimized(
        self,
        text: str,
        triple: str,
        arch: str,
        features: str,
        opt_level: int,
        level: int,
    ) -> _Module:
        """`text` parsed, verified and optimized at `opt_level` for `arch` (with
        the target machine of code generation `level`; an `EmitterError` if LLVM
        rejects it); `emit` writes it, `close` frees it."""
        lib = self.lib
        with self.lock:
            machine = self.machine(triple, arch, features, level)
            layout = lib.LLVMCreateTargetDataLayout(machine)
            rep = lib.LLVMCopyStringRepOfTargetData(layout)
            data_layout = ctypes.string_at(rep)
            lib.LLVMDisposeMessage(rep)
            lib.LLVMDisposeTargetData(layout)
            handle = _Module(self, lib.LLVMContextCreate())
            try:
                data = text.encode()
                buffer = lib.LLVMCreateMemoryBufferWithMemoryRangeCopy(
                    data, len(data), b"affinec"
                )
                error = _P()
                # (the parser takes the buffer)
                if lib.LLVMParseIRInContext(
                    handle.context,
                    buffer,
                    ctypes.byref(handle.module),
                    ctypes.byref(error),
                ):
                    why = self._message(error.value, "LLVMDisposeMessage")
                    raise EmitterError(None, f"LLVM rejected the IR: {why}")
                module = handle.module
                if lib.LLVMVerifyModule(module, _RETURN_STATUS, ctypes.byref(error)):
                    why = self._message(error.value, "LLVMDisposeMessage")
                    raise EmitterError(None, f"LLVM rejected the IR: {why}")
                self._message(error.value, "LLVMDisposeMessage")
                lib.LLVMSetTarget(module, triple.encode())
                lib.LLVMSetDataLayout(module, data_layout)
                if opt_level:
                    options = lib.LLVMCreatePassBuilderOptions()
                    try:
                        failed = lib.LLVMRunPasses(
                            module, f"default<O{opt_level}>".encode(), machine, options
                        )
                    finally:
                        lib.LLVMDisposePassBuilderOptions(options)
                    if failed:
                        why = self._message(
                            lib.LLVMGetErrorMessage(failed), "LLVMDisposeErrorMessage"
                        )
                        raise EmitterError(None, f"LLVM's optimization failed: {why}")
            except BaseException:
                handle.close()
                raise
        return handle

    def emit(
        self, handle: _Module, triple: str, arch: str, features: str, level: int
    ) -> str:
        """The PTX of an optimized module, code generation at `level`."""
        lib = self.lib
        with self.lock:
            machine = self.machine(triple, arch, features, level)
            error, out = _P(), _P()
            if lib.LLVMTargetMachineEmitToMemoryBuffer(
                machine,
                handle.module,
                _ASSEMBLY_FILE,
                ctypes.byref(error),
                ctypes.byref(out),
            ):
                why = self._message(error.value, "LLVMDisposeMessage")
                raise EmitterError(None, f"LLVM could not write PTX: {why}")
            try:
                size = lib.LLVMGetBufferSize(out)
                return ctypes.string_at(lib.LLVMGetBufferStart(out), size).decode()
            finally:
                lib.LLVMDisposeMemoryBuffer(out)


class _Module:
    """A module of a `SharedLLVM` and its own context (disposed in that order)."""

    def __init__(self, llvm: SharedLLVM, context: int) -> None:
        self.llvm = llvm
        self.context = context
        self.module = _P()

    def close(self) -> None:
        lib = self.llvm.lib
        if self.module.value:
            lib.LLVMDisposeModule(self.module)
            self.module = _P()
        if self.context:
            lib.LLVMContextDispose(self.context)
            self.context = 0


@cache
def shared_llvm(path: str, fast: bool) -> SharedLLVM:
    """The library at `path`, loaded and set up once."""
    return SharedLLVM(path, fast)


__all__ = [
    "LIBLLVM",
    "OWN",
    "SharedLLVM",
    "library_path",
    "release_library",
    "shared_llvm",
]
