"""The float64 reference, random inputs, and the error measure results are judged by.

`reference(spec, *inputs)` computes the exact (float64) answer for any spec the
frontend accepts. Convolutions and matrix products take fast paths (one float64 matrix
product per filter tap); anything else goes through the generic contraction evaluator,
which the tests hold the fast paths to.

Results are compared as ‖out − ref‖ / ‖ref‖ in float64. f32 lands far under 1e-5;
f16 storage with f32 accumulation under 1e-2, bf16 under 8e-2 (see
`TOLERANCE`). NaN never passes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
)

from affinec.base.dtypes import storage_numpy_dtype
from affinec.base.element_types import storage_bytes
from affinec.base.spec import (
    EPILOGUE_OPERANDS,
    ConvSpec,
    MatmulSpec,
    Spec,
    epilogue_steps,
)
from affinec.frontend.contraction import Access, Contraction, contraction_of

UNIT_ROUNDOFF = {"f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}
"""Largest relative error of rounding a real number to each storage type (to
nearest): f32 keeps 24 significant bits, f16 11, bf16 8."""

TOLERANCE = {
    "f32": 1e-5,
    "f16": 1e-2,
    # With products and sums in f32, the error of a 16-bit result is its final
    # rounding to storage: at most the unit roundoff per element, hence norm-wise
    # (the inputs are the reference's inputs, already rounded). f16's 1e-2 is about
    # 20 of its unit roundoffs (2**-11); bf16 keeps 3 bits fewer (2**-8), so the
    # same margin is 8 times f16's tolerance.
    "bf16": 1e-2 * UNIT_ROUNDOFF["bf16"] / UNIT_ROUNDOFF["f16"],
    # f32 operands on tf32 tensor cores keep 10 bits of mantissa, as f16 does, and
    # are truncated, not rounded (twice f16's unit roundoff per operand): f16's
    # margin, doubled.
    "tf32": 2e-2,
}
"""Largest relative error a result of each storage type may have."""


def storage_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of arrays of the spec dtype `dtype` (bf16: `ml_dtypes`')."""
    return storage_numpy_dtype(dtype)


def random_inputs(spec: Spec, rng: np.random.Generator) -> list[np.ndarray]:
    """Fresh standard-normal inputs (factors, then the epilogue's operands), in the
    spec's storage type."""
    c = contraction_of(spec)
    inputs = c.inputs
    dtype = storage_dtype(spec.dtype)
    return [rng.standard_normal(a.shape).astype(dtype) for a in inputs]


def host_bytes(spec: Spec) -> int:
    """About the bytes checking or running `spec` holds on the host, to refuse before
    allocating what would not fit: every operand in its storage type, and twice in
    float64 (the reference's copies)."""
    c = contraction_of(spec)
    operands = c.operands
    elements = sum(math.prod(a.shape) for a in operands)
    return elements * (storage_bytes(spec.dtype) + 16)


def poisoned_output(spec: Spec) -> np.ndarray:
    """An output buffer full of NaN: any element left unwritten fails the check."""
    c = contraction_of(spec)
    return np.full(c.output.shape, np.nan, storage_dtype(spec.dtype))


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """‖out − ref‖ / ‖ref‖ in float64; infinite if `out` holds a NaN or an infinity."""
    out64 = np.asarray(out, np.float64)
    if not np.all(np.isfinite(out64)):
        return float("inf")
    denom = np.linalg.norm(ref)
    diff = np.linalg.norm(out64 - ref)
    if denom == 0:
        return float(diff)
    return float(diff / denom)


@dataclass(frozen=True)
class Verdict:
    """A result against its float64 reference: its relative error and the tolerance
    it is held to (NaN or infinity never passes)."""

    error: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance

    def describe(self) -> str:
        return (
            f"relative error {self.error:.2e} "
            f"({'ok' if self.ok else 'WRONG'}: tolerance {self.tolerance:g})"
        )


def verdict(spec: Spec, error: float, tolerance: float | None = None) -> Verdict:
    """`error` held to `tolerance` (a kernel's own: tf32's where its passes compute
    in tf32) or, when it has none, to the tolerance of `spec`'s storage type. The
    one pass/fail rule of `affinec run`, `bench`, `tune` and the demo."""
    return Verdict(error, tolerance or TOLERANCE[spec.dtype])


def reference(spec: Spec, *inputs: np.ndarray) -> np.ndarray:
    """The float64 result of `spec` on `inputs` (factors, then the epilogue's
    operands)."""
    if isinstance(spec, ConvSpec):
        return conv_reference(spec, *inputs)
    if isinstance(spec, MatmulSpec):
        return _epilogue(
            inputs[0].astype(np.float64) @ inputs[1].astype(np.float64),
            spec.epilogue,
            inputs[2:],
            channel_axis=1,
        )
    return contraction_reference(contraction_of(spec), *inputs)


def _epilogue(
    out: np.ndarray, epilogue: str, operands, channel_axis: int, residual_order=None
) -> np.ndarray:
    """`epilogue_steps` in float64 on `out`: scale and bias along `channel_axis`, the
    residual (transposed by `residual_order` into `out`'s order), an activation."""
    steps = epilogue_steps(epilogue)
    shape = [1] * out.ndim
    shape[channel_axis] = -1
    values = {}
    for step, value in zip(
        (s for s in steps if s in EPILOGUE_OPERANDS), operands, strict=True
    ):
        value = value.astype(np.float64)
        if step != "residual":
            values[step] = value.reshape(shape)
        elif residual_order is not None:
            values[step] = value.transpose(residual_order)
        else:
            values[step] = value
    return _apply_steps(out, steps, values)


def _apply_steps(out: np.ndarray, steps, values: dict[str, np.ndarray]) -> np.ndarray:
    """The epilogue's steps on `out`, each operand's `values` already in its shape."""
    for step in steps:
        if step == "scale":
            out = out * values[step]
        elif step in values:
            out = out + values[step]
        else:
            out = np.maximum(out, 0.0)
            if step == "relu6":
                out = np.minimum(out, 6.0)
    return out


def conv_reference(
    spec: ConvSpec, x: np.ndarray, f: np.ndarray, *operands: np.ndarray
) -> np.ndarray:
    """The convolution in float64: for every filter tap, one matrix product over
    channels of the strided input window it sees."""
    x64 = x.astype(np.float64)
    f64 = f.astype(np.float64)
    if spec.layout == "nhwc":
        x64 = x64.transpose(0, 3, 1, 2)
    if spec.filter_layout == "rsck":
        f64 = f64.transpose(3, 2, 0, 1)
    (sh, sw), (ph, pw), (dh, dw) = spec.stride, spec.padding, spec.dilation
    padded = np.pad(x64, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh, ow = spec.out_h, spec.out_w
    out = np.zeros((spec.n, oh, ow, spec.k))
    cg, kg = spec.group_channels, spec.k // spec.groups
    for g in range(spec.groups):  # group g: channels g*cg.., filters g*kg..
        channels, filters = slice(g * cg, (g + 1) * cg), slice(g * kg, (g + 1) * kg)
        for r in range(spec.r):
            for s in range(spec.s):
                window = padded[
                    :,
                    channels,
                    r * dh : r * dh + (oh - 1) * sh + 1 : sh,
                    s * dw : s * dw + (ow - 1) * sw + 1 : sw,
                ]
                # (n, oh, ow, c) @ (c, k)
                out[..., filters] += (
                    window.transpose(0, 2, 3, 1) @ f64[filters, :, r, s].T
                )
    nchw = (0, 2, 3, 1) if spec.layout == "nchw" else None  # into (n, oh, ow, k)
    out = _epilogue(out, spec.epilogue, operands, channel_axis=3, residual_order=nchw)
    return out.transpose(0, 3, 1, 2) if spec.layout == "nchw" else out


def _evaluate(expr: AffineExpr, dims: list) -> np.ndarray | int:
    """An affine expression over numpy index grids (and plain ints)."""
    match expr:
        case AffineConstantExpr(value=v):
            return v
        case AffineDimExpr(position=p):
            return dims[p]
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            a, b = _evaluate(lhs, dims), _evaluate(rhs, dims)
            match kind:
                case AffineBinaryOpKind.Add:
                    return a + b
                case AffineBinaryOpKind.Mul:
                    return a * b
                case AffineBinaryOpKind.FloorDiv:
                    return a // b
                case AffineBinaryOpKind.Mod:
                    return a % b
                case AffineBinaryOpKind.CeilDiv:
                    return -(-a // b)
    raise ValueError(f"cannot evaluate {expr}")


def _gather(array: np.ndarray, access: Access, dims: list, shape) -> np.ndarray:
    """`array[access.indices]` at every point of the output grid, zero outside."""
    index = [np.broadcast_to(_evaluate(e, dims), shape) for e in access.indices]
    inside = np.ones(shape, bool)
    for i, size in zip(index, array.shape, strict=True):
        inside &= (i >= 0) & (i < size)
    clipped = tuple(
        np.clip(i, 0, size - 1) for i, size in zip(index, array.shape, strict=True)
    )
    return np.where(inside, array.astype(np.float64)[clipped], 0.0)


def contraction_reference(c: Contraction, *inputs: np.ndarray) -> np.ndarray:
    """Any contraction in float64, straight from its definition: for each point of
    the reduction space, the product of the factors over the whole output grid."""
    shape = tuple(e for _, e in c.output_index)
    grid = list(np.indices(shape)) if shape else []
    total = np.zeros(shape)
    factors = inputs[: len(c.factors)]
    for point in itertools.product(*(range(e) for _, e in c.reduction_index)):
        dims = grid + list(point)
        term = np.ones(shape)
        for array, access in zip(factors, c.factors, strict=True):
            term = term * _gather(array, access, dims, shape)
        total += term
    values = {
        a.name: _gather(array, a, grid, shape)
        for a, array in zip(c.epilogue_operands, inputs[len(c.factors) :], strict=True)
    }
    total = _apply_steps(total, c.steps, values)
    out = np.zeros(c.output.shape)
    index = tuple(np.broadcast_to(_evaluate(e, grid), shape) for e in c.output.indices)
    out[index] = total
    return out
