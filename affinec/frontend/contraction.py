"""The contraction a spec describes, in PlaidML's Tile style: an output index space, a
reduction index space, one affine access per operand, and `+` over `*`:

    O[n, k, oh, ow] = +(I[n, c, oh + r - 1, ow + s - 1] * F[k, c, r, s])

Plain data (no IR): the frontend builds the naive IR from it, the float64 reference
evaluates it, and checkers take the function name and operand shapes from it.
Convolution, matrix product and outer product are thin layers on top.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from xdsl.ir.affine import AffineExpr

from affinec.base.spec import (
    ACTIVATIONS,
    EPILOGUE_OPERANDS,
    ConvSpec,
    MatmulSpec,
    OuterSpec,
    Spec,
    epilogue_steps,
    not_a_spec,
)
from affinec.dialects.affine_syntax import format_expr
from affinec.ir.affine_exprs import expr_range


@dataclass(frozen=True)
class Access:
    """An operand and how the contraction indexes it.

    `indices` are affine expressions over the contraction's dims: output dims first,
    then reduction dims (`d0 ... d{n-1}`, `d{n} ...`).
    """

    name: str
    shape: tuple[int, ...]
    indices: tuple[AffineExpr, ...]

    def __post_init__(self) -> None:
        if len(self.indices) != len(self.shape):
            raise ValueError(
                f"operand {self.name} has rank {len(self.shape)} but "
                f"{len(self.indices)} indices"
            )


@dataclass(frozen=True)
class Contraction:
    """`output[...] = epilogue(+(factor0[...] * factor1[...] * ...))`."""

    name: str
    output_index: tuple[tuple[str, int], ...]
    reduction_index: tuple[tuple[str, int], ...]
    factors: tuple[Access, ...]
    output: Access
    dtype: str = "f32"
    epilogue: str = "none"
    """`affinec.base.spec.epilogue_steps`: the sum scaled, biased, a residual added, an
    activation, each where present."""
    epilogue_operands: tuple[Access, ...] = ()
    """The operands of the epilogue's steps that read one (scale, bias, residual), in
    that order, named after their step and indexed by output dims only."""
    dynamic: tuple[str, ...] = ()
    """Output dimensions whose extent is known only at run time (a dynamic batch):
    the outermost one, at most; an operand indexed by it alone there has a dynamic
    size (`memref<?x...>`) and the extent is read off the first such operand."""

    def __post_init__(self) -> None:
        if not self.factors:
            raise ValueError("a contraction needs at least one factor")
        wanted = [s for s in epilogue_steps(self.epilogue) if s in EPILOGUE_OPERANDS]
        if [a.name for a in self.epilogue_operands] != wanted:
            raise ValueError(
                f"the epilogue {self.epilogue!r} reads operands {wanted}, got "
                f"{[a.name for a in self.epilogue_operands]}"
            )
        names = [a.name for a in self.operands]
        if len(set(names)) != len(names):
            raise ValueError(f"operand names must differ, got {names}")
        if self.dynamic and (
            len(self.dynamic) > 1 or self.dynamic[0] != self.output_index[0][0]
        ):
            raise ValueError(
                f"only the outermost output dimension can be dynamic, got {self.dynamic}"
            )
        if self.dynamic and not any(self.dynamic_dims(a) for a in self.inputs):
            raise ValueError(
                f"the dynamic dimension {self.dynamic[0]} indexes no input by itself"
            )

    def dynamic_dims(self, access: Access) -> tuple[int, ...]:
        """The dimensions of `access` whose size is dynamic: indexed by a dynamic
        output dimension alone."""
        dims = {
            AffineExpr.dimension(k)
            for k, (name, _) in enumerate(self.output_index)
            if name in self.dynamic
        }
        return tuple(j for j, e in enumerate(access.indices) if e in dims)

    @property
    def steps(self) -> tuple[str, ...]:
        return epilogue_steps(self.epilogue)

    @property
    def inputs(self) -> tuple[Access, ...]:
        """The operands read: factors, then the epilogue's."""
        return (*self.factors, *self.epilogue_operands)

    @property
    def operands(self) -> tuple[Access, ...]:
        """In the order of the function's arguments: factors, the epilogue's, output."""
        return (*self.inputs, self.output)

    @property
    def dim_names(self) -> list[str]:
        return [n for n, _ in self.output_index + self.reduction_index]

    @property
    def extents(self) -> list[int]:
        return [e for _, e in self.output_index + self.reduction_index]

    def needs_padding(self, access: Access) -> bool:
        """Whether some point of the index space makes `access` leave its operand."""
        ranges = [(0, e - 1) for e in self.extents]
        for expr, size in zip(access.indices, access.shape, strict=True):
            lo, hi = expr_range(expr, ranges)  # pyright: ignore[reportGeneralTypeIssues]
            if lo < 0 or hi >= size:
                return True
        return False

    def __str__(self) -> str:
        """The Tile-language form: `O[i, j] = +(A[i, k] * B[k, j])`."""

        def ref(a: Access) -> str:
            return f"{a.name}[{', '.join(format_expr(e, self.dim_names) for e in a.indices)}]"

        product = " * ".join(ref(f) for f in self.factors)
        body = f"+({product})" if self.reduction_index else product
        for a in self.epilogue_operands:
            body = f"({body}) * {ref(a)}" if a.name == "scale" else f"{body} + {ref(a)}"
        for act in (x for x in self.steps if x in ACTIVATIONS):
            body = f"{act}({body})"
        return f"{ref(self.output)} = {body}"


def _dims(names: str) -> dict[str, AffineExpr]:
    return {n: AffineExpr.dimension(k) for k, n in enumerate(names.split())}


def is_depthwise(spec: Spec) -> bool:
    """Whether `spec` is a depthwise convolution: groups of one input channel and
    one filter each (`groups = C = K`, more than one)."""
    return (
        isinstance(spec, ConvSpec)
        and spec.groups > 1
        and spec.group_channels == 1
        and spec.k == spec.groups
    )


def conv_contraction(spec: ConvSpec) -> Contraction:
    """The convolution as a contraction; index order follows the layouts, so the
    innermost output dimension is the contiguous one. A grouped convolution has a
    group dimension `g` before the filters `k` of a group: output channel
    `g * K/G + k` sees input channels `g * C/G + c`. A depthwise convolution (one
    input channel and one filter a group, `is_depthwise`) has neither: its channel
    `g` is an output dimension (the innermost in NHWC), its reduction the window
    alone, `O[n, oh, ow, g] = +(I[n, oh + r, ow + s, g] * F[r, s, 0, g])`."""
    grouped = spec.groups > 1
    depthwise = is_depthwise(spec)
    filters = "g" if depthwise else ("g k" if grouped else "k")
    out_order = f"n {filters} oh ow" if spec.layout == "nchw" else f"n oh ow {filters}"
    red_order = "c r s" if spec.filter_layout == "kcrs" else "r s c"
    if depthwise:
        red_order = "r s"
    d = _dims(f"{out_order} {red_order}")
    (sh, sw), (ph, pw), (dh, dw) = spec.stride, spec.padding, spec.dilation
    ih = d["oh"] * sh + d["r"] * dh - ph
    iw = d["ow"] * sw + d["s"] * dw - pw
    n, r, s = d["n"], d["r"], d["s"]
    if depthwise:
        c = AffineExpr.constant(0)
        channel = k_out = d["g"]
    elif grouped:
        c = d["c"]
        channel = d["g"] * spec.group_channels + c
        k_out = d["g"] * (spec.k // spec.groups) + d["k"]
    else:
        c = d["c"]
        channel, k_out = c, d["k"]  # the input's channel, the output's
    if spec.layout == "nchw":
        inp = (n, channel, ih, iw)
        out = (n, k_out, d["oh"], d["ow"])
    else:
        inp = (n, ih, iw, channel)
        out = (n, d["oh"], d["ow"], k_out)
    flt = (k_out, c, r, s) if spec.filter_layout == "kcrs" else (r, s, c, k_out)
    extents = {
        "n": spec.n,
        "g": spec.groups,
        "k": spec.k // spec.groups,
        "oh": spec.out_h,
        "ow": spec.out_w,
        "c": spec.group_channels,
        "r": spec.r,
        "s": spec.s,
    }
    return Contraction(
        name="conv",
        output_index=tuple((x, extents[x]) for x in out_order.split()),
        reduction_index=tuple((x, extents[x]) for x in red_order.split()),
        factors=(
            Access("input", spec.input_shape, inp),
            Access("filter", spec.filter_shape, flt),
        ),
        output=Access("output", spec.output_shape, out),
        dtype=spec.dtype,
        epilogue=spec.epilogue,
        epilogue_operands=_epilogue_operands(
            spec.epilogue, (spec.k,), (k_out,), spec.output_shape, out
        ),
        dynamic=("n",) if spec.dynamic_batch else (),
    )


def matmul_contraction(spec: MatmulSpec) -> Contraction:
    d = _dims("i j p")
    i, j, p = d["i"], d["j"], d["p"]
    return Contraction(
        name="matmul",
        output_index=(("i", spec.m), ("j", spec.n)),
        reduction_index=(("p", spec.k),),
        factors=(
            Access("A", (spec.m, spec.k), (i, p)),
            Access("B", (spec.k, spec.n), (p, j)),
        ),
        output=Access("C", (spec.m, spec.n), (i, j)),
        dtype=spec.dtype,
        epilogue=spec.epilogue,
        epilogue_operands=_epilogue_operands(
            spec.epilogue, (spec.n,), (j,), (spec.m, spec.n), (i, j)
        ),
    )


def _epilogue_operands(
    epilogue: str,
    channels: tuple[int, ...],
    channel: tuple[AffineExpr, ...],
    output_shape: tuple[int, ...],
    output: tuple[AffineExpr, ...],
) -> tuple[Access, ...]:
    """The epilogue's operands: scale and bias one per output channel, the residual
    shaped and indexed as the output."""
    return tuple(
        Access(step, output_shape, output)
        if step == "residual"
        else Access(step, channels, channel)
        for step in epilogue_steps(epilogue)
        if step in EPILOGUE_OPERANDS
    )


def outer_contraction(spec: OuterSpec) -> Contraction:
    d = _dims("i j")
    return Contraction(
        name="outer",
        output_index=(("i", spec.m), ("j", spec.n)),
        reduction_index=(),
        factors=(Access("a", (spec.m,), (d["i"],)), Access("b", (spec.n,), (d["j"],))),
        output=Access("c", (spec.m, spec.n), (d["i"], d["j"])),
        dtype=spec.dtype,
    )


def contraction_of(spec: Spec) -> Contraction:
    """The contraction `spec` describes, built once a spec: specs and contractions
    are frozen, so every caller (the naive IR, the reference, the checkers, the
    configuration) shares the one recognition."""
    if not isinstance(spec, ConvSpec | MatmulSpec | OuterSpec):
        raise not_a_spec(spec)
    return _contraction_of(spec)


@lru_cache(maxsize=256)
def _contraction_of(spec: Spec) -> Contraction:
    if isinstance(spec, ConvSpec):
        return conv_contraction(spec)
    if isinstance(spec, MatmulSpec):
        return matmul_contraction(spec)
    return outer_contraction(spec)
