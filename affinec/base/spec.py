"""What the user asks to compute: a convolution, a matrix product or an outer product.

A spec is a frozen dataclass that checks itself on construction (a `ValueError` that
names the offending field) and has a one-line text form, the same words as the
`affinec gen` flags, which the naive IR records so a checker can rebuild the reference:

    conv n=1 c=8 h=8 w=8 k=8 r=3 s=3 stride=1,1 pad=1,1 dilation=1,1 layout=nchw
        filter-layout=kcrs dtype=f32 epilogue=none
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

LAYOUTS = ("nchw", "nhwc")
FILTER_LAYOUTS = ("kcrs", "rsck")
DTYPES = ("f32", "f16", "bf16")
EPILOGUE_OPERANDS = ("scale", "bias", "residual")
"""Epilogue steps that read an operand: `scale` and `bias` one value per output
channel (multiplied, added), `residual` an array in the output's layout (added)."""
ACTIVATIONS = ("relu", "relu6")
EPILOGUE_STEPS = (*EPILOGUE_OPERANDS, *ACTIVATIONS)
NAMED_EPILOGUES = {"none": (), "relu": ("relu",), "bias-relu": ("bias", "relu")}
"""The epilogues by their names of old (the text keeps these names)."""
EPILOGUES = tuple(NAMED_EPILOGUES)


def epilogue_steps(epilogue: str) -> tuple[str, ...]:
    """The steps of an epilogue, `out = act(sum * scale + bias + residual)` with the
    steps given present: a name of `NAMED_EPILOGUES` or a comma-separated list in
    that order (`bias,residual,relu`); a ValueError saying what is wrong."""
    if epilogue in NAMED_EPILOGUES:
        return NAMED_EPILOGUES[epilogue]
    steps = tuple(epilogue.split(","))
    for step in steps:
        if step not in EPILOGUE_STEPS:
            raise ValueError(
                f"unknown epilogue step {step!r} in {epilogue!r} (steps: "
                f"{', '.join(EPILOGUE_STEPS)}, comma-separated, or one of "
                f"{', '.join(NAMED_EPILOGUES)})"
            )
    order = [EPILOGUE_STEPS.index(x) for x in steps]
    if order != sorted(set(order)) or sum(x in ACTIVATIONS for x in steps) > 1:
        raise ValueError(
            f"epilogue {epilogue!r}: each step at most once, in the order "
            f"scale, bias, residual, then one activation (relu or relu6)"
        )
    return steps


def epilogue_text(steps: tuple[str, ...]) -> str:
    """The text of an epilogue: its old name where it has one, else the steps."""
    for name, named in NAMED_EPILOGUES.items():
        if steps == named:
            return name
    return ",".join(steps)


def _epilogue(owner: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{owner}.epilogue must be a string, got {value!r}")
    try:
        return epilogue_text(epilogue_steps(value))
    except ValueError as e:
        raise ValueError(f"{owner}.epilogue: {e}") from None


def _positive(owner: str, field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{owner}.{field} must be a positive integer, got {value!r}")


def _pair(owner: str, field: str, value: object, minimum: int) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    if (
        not isinstance(value, tuple | list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise ValueError(f"{owner}.{field} must be an integer or a pair, got {value!r}")
    if any(v < minimum for v in value):
        raise ValueError(
            f"{owner}.{field} must be at least {minimum} on each axis, got {tuple(value)}"
        )
    return (value[0], value[1])


MAX_BYTES = 2**63 - 1
"""The largest operand a kernel can address: its byte offsets are 64-bit integers."""


def _addressable(owner: str, dtype: str, operands: dict[str, tuple[int, ...]]) -> None:
    """Refuse operands whose bytes 64-bit offsets cannot reach (sizes like 10**23,
    which print as IR but cannot be indexed, allocated or lowered)."""
    # here, not at the top: a spec is plain Python until its bytes are counted
    from affinec.base.element_types import storage_bytes

    itemsize = storage_bytes(dtype)
    for name, shape in operands.items():
        size = math.prod(shape) * itemsize
        if size > MAX_BYTES:
            raise ValueError(
                f"{owner}: the {name} {'x'.join(map(str, shape))} takes {size:,} "
                f"bytes, more than 64-bit offsets reach ({MAX_BYTES:,})"
            )


def _choice(owner: str, field: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(
            f"{owner}.{field} must be one of {', '.join(choices)}, got {value!r}"
        )


@dataclass(frozen=True)
class ConvSpec:
    """A 2-D convolution: `N` images of `C` channels, `H`×`W`, by `K` filters `R`×`S`;
    in `groups` groups (each filter sees `C / groups` of the channels, the `g`-th
    `K / groups` filters the `g`-th channels; `groups = C = K` is depthwise)."""

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    layout: str = "nchw"
    """Input and output layout."""
    filter_layout: str = "kcrs"
    dtype: str = "f32"
    """Storage type of input, filter, the epilogue's operands and output; "f16" and
    "bf16" accumulate in f32."""
    epilogue: str = "none"
    """`epilogue_steps`: `out = act(conv * scale + bias + residual)` with the steps
    given (`bias,residual,relu`); scale and bias one per output channel, residual
    an array in the output's layout."""
    groups: int = 1
    dynamic_batch: bool = False
    """Compile one kernel for any batch (`memref<?x...>`, the grid computed at
    launch); `n` is then the batch it is configured and checked for."""

    kind: ClassVar[str] = "conv"

    def __post_init__(self) -> None:
        for f in ("n", "c", "h", "w", "k", "r", "s"):
            _positive("ConvSpec", f, getattr(self, f))
        object.__setattr__(self, "stride", _pair("ConvSpec", "stride", self.stride, 1))
        object.__setattr__(
            self, "padding", _pair("ConvSpec", "padding", self.padding, 0)
        )
        object.__setattr__(
            self, "dilation", _pair("ConvSpec", "dilation", self.dilation, 1)
        )
        _choice("ConvSpec", "layout", self.layout, LAYOUTS)
        _choice("ConvSpec", "filter_layout", self.filter_layout, FILTER_LAYOUTS)
        _choice("ConvSpec", "dtype", self.dtype, DTYPES)
        object.__setattr__(self, "epilogue", _epilogue("ConvSpec", self.epilogue))
        _positive("ConvSpec", "groups", self.groups)
        if not isinstance(self.dynamic_batch, bool):
            raise ValueError(
                f"ConvSpec.dynamic_batch must be True or False, got {self.dynamic_batch!r}"
            )
        if self.c % self.groups or self.k % self.groups:
            raise ValueError(
                f"ConvSpec.groups: {self.groups} groups do not divide the {self.c} "
                f"input channels and {self.k} filters"
            )
        for axis, size, extent, pad in (
            ("r", self.h, self.dilated_r, self.padding[0]),
            ("s", self.w, self.dilated_s, self.padding[1]),
        ):
            if extent > size + 2 * pad:
                raise ValueError(
                    f"ConvSpec.{axis}: the dilated filter extent {extent} is larger than "
                    f"the padded input extent {size + 2 * pad}"
                )
        _addressable(
            "ConvSpec",
            self.dtype,
            {
                "input": self.input_shape,
                "filter": self.filter_shape,
                "output": self.output_shape,
            },
        )

    @property
    def dilated_r(self) -> int:
        return self.dilation[0] * (self.r - 1) + 1

    @property
    def dilated_s(self) -> int:
        return self.dilation[1] * (self.s - 1) + 1

    @property
    def out_h(self) -> int:
        return (self.h + 2 * self.padding[0] - self.dilated_r) // self.stride[0] + 1

    @property
    def out_w(self) -> int:
        return (self.w + 2 * self.padding[1] - self.dilated_s) // self.stride[1] + 1

    @property
    def input_shape(self) -> tuple[int, ...]:
        if self.layout == "nchw":
            return (self.n, self.c, self.h, self.w)
        return (self.n, self.h, self.w, self.c)

    @property
    def group_channels(self) -> int:
        """Input channels a filter sees."""
        return self.c // self.groups

    @property
    def filter_shape(self) -> tuple[int, ...]:
        if self.filter_layout == "kcrs":
            return (self.k, self.group_channels, self.r, self.s)
        return (self.r, self.s, self.group_channels, self.k)

    @property
    def output_shape(self) -> tuple[int, ...]:
        if self.layout == "nchw":
            return (self.n, self.k, self.out_h, self.out_w)
        return (self.n, self.out_h, self.out_w, self.k)

    @property
    def flops(self) -> int:
        """Multiplies and adds of the contraction (2 per multiply-add)."""
        return (
            2 * self.n * self.k * self.out_h * self.out_w * self.group_channels
            * self.r * self.s
        )  # fmt: skip

    def to_text(self) -> str:
        return (
            f"conv n={self.n} c={self.c} h={self.h} w={self.w} k={self.k} "
            f"r={self.r} s={self.s} stride={_text_pair(self.stride)} "
            f"pad={_text_pair(self.padding)} dilation={_text_pair(self.dilation)} "
            f"layout={self.layout} filter-layout={self.filter_layout} "
            f"dtype={self.dtype} epilogue={self.epilogue}"
            + (f" groups={self.groups}" if self.groups > 1 else "")
            + (" batch=dynamic" if self.dynamic_batch else "")
        )

    def describe(self) -> str:
        """A short human label: `1x8x8x8 * 8x3x3 s1 p1 f32`."""
        extra = f" +{self.epilogue}" if self.epilogue != "none" else ""
        extra += f" g{self.groups}" if self.groups > 1 else ""
        extra += " (any batch)" if self.dynamic_batch else ""
        return (
            f"{self.n}x{self.c}x{self.h}x{self.w} * {self.k}x{self.r}x{self.s} "
            f"s{_text_pair(self.stride, 'x')} p{_text_pair(self.padding, 'x')} "
            f"{self.layout} {self.dtype}{extra}"
        )


@dataclass(frozen=True)
class MatmulSpec:
    """`C[m, n] = A[m, k] * B[k, n]`, all row-major."""

    m: int
    n: int
    k: int
    dtype: str = "f32"
    epilogue: str = "none"
    """`epilogue_steps`: scale and bias one per column, residual an m x n array."""

    kind: ClassVar[str] = "matmul"

    def __post_init__(self) -> None:
        for f in ("m", "n", "k"):
            _positive("MatmulSpec", f, getattr(self, f))
        _choice("MatmulSpec", "dtype", self.dtype, DTYPES)
        object.__setattr__(self, "epilogue", _epilogue("MatmulSpec", self.epilogue))
        _addressable(
            "MatmulSpec",
            self.dtype,
            {"A": (self.m, self.k), "B": (self.k, self.n), "C": (self.m, self.n)},
        )

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def to_text(self) -> str:
        return (
            f"matmul m={self.m} n={self.n} k={self.k} dtype={self.dtype} "
            f"epilogue={self.epilogue}"
        )

    def describe(self) -> str:
        return f"{self.m}x{self.k} @ {self.k}x{self.n} {self.dtype}"


@dataclass(frozen=True)
class OuterSpec:
    """The outer product `c[i, j] = a[i] * b[j]` (Loopy's rank-one update)."""

    m: int
    n: int
    dtype: str = "f32"

    kind: ClassVar[str] = "outer"

    def __post_init__(self) -> None:
        for f in ("m", "n"):
            _positive("OuterSpec", f, getattr(self, f))
        _choice("OuterSpec", "dtype", self.dtype, DTYPES)
        _addressable("OuterSpec", self.dtype, {"c": (self.m, self.n)})

    @property
    def flops(self) -> int:
        return self.m * self.n

    def to_text(self) -> str:
        return f"outer m={self.m} n={self.n} dtype={self.dtype}"

    def describe(self) -> str:
        return f"{self.m} (x) {self.n} {self.dtype}"


Spec = ConvSpec | MatmulSpec | OuterSpec
SPEC_KINDS: dict[str, type[Spec]] = {
    "conv": ConvSpec,
    "matmul": MatmulSpec,
    "outer": OuterSpec,
}


def not_a_spec(value: object, *, or_module: bool = False) -> TypeError:
    """The error for `value` given where a spec (or, `or_module`, a module of
    naive IR) belongs."""
    wanted = "a spec (ConvSpec, MatmulSpec or OuterSpec)"
    if or_module:
        wanted += " or a module of its naive IR"
    hint = ": parse_spec reads a spec from its text" if isinstance(value, str) else ""
    return TypeError(f"expected {wanted}, got {type(value).__name__}{hint}")


_TEXT_FIELDS = {
    "pad": "padding",
    "filter-layout": "filter_layout",
    "batch": "dynamic_batch",
}
BATCH_KINDS = {"dynamic": True, "static": False}
"""`batch=dynamic`: one kernel for any batch."""


def _text_pair(pair: tuple[int, int], sep: str = ",") -> str:
    return f"{pair[0]}{sep}{pair[1]}"


def parse_spec(text: str) -> Spec:
    """The spec whose `to_text()` is `text`; a ValueError saying what is wrong."""
    if not isinstance(text, str):
        raise TypeError(f"expected the text of a spec, got {type(text).__name__}")
    words = text.split()
    if not words or words[0] not in SPEC_KINDS:
        raise ValueError(
            f"a spec starts with one of {', '.join(SPEC_KINDS)}, got {text!r}"
        )
    cls = SPEC_KINDS[words[0]]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, object] = {}
    for word in words[1:]:
        key, eq, raw = word.partition("=")
        name = _TEXT_FIELDS.get(key, key.replace("-", "_"))
        if not eq or name not in fields:
            raise ValueError(f"unknown {cls.kind} spec field {key!r} in {text!r}")
        if name == "dynamic_batch":
            if raw not in BATCH_KINDS:
                raise ValueError(
                    f"{cls.__name__}.batch must be one of {', '.join(BATCH_KINDS)}, "
                    f"got {raw!r}"
                )
            values[name] = BATCH_KINDS[raw]
        elif name in ("stride", "padding", "dilation"):
            try:
                values[name] = tuple(int(v) for v in raw.split(","))
            except ValueError:
                raise ValueError(
                    f"{cls.__name__}.{name}: not integers: {raw!r}"
                ) from None
        elif fields[name].type in ("int", int):
            try:
                values[name] = int(raw)
            except ValueError:
                raise ValueError(
                    f"{cls.__name__}.{name}: not an integer: {raw!r}"
                ) from None
        else:
            values[name] = raw
    try:
        return cls(**values)  # pyright: ignore[reportArgumentType]
    except TypeError as e:
        raise ValueError(f"incomplete {cls.kind} spec {text!r}: {e}") from None


# -- a spec as another ----------------------------------------------------------------------


def flattened_spec(spec: Spec) -> MatmulSpec:
    """The matrix product a 1x1, stride-1, unpadded, ungrouped NHWC/RSCK convolution
    is over its pixels: `output[(n, h, w), k] = input[(n, h, w), c] x filter[c, k]`,
    the arrays the same bytes; a ValueError naming what stops another spec."""
    if not isinstance(spec, ConvSpec):
        raise ValueError(f"flatten-pixels takes a convolution, not a {spec.kind}")
    why = [
        what
        for what, bad in (
            ("a 1x1 filter", (spec.r, spec.s) != (1, 1)),
            ("stride 1", spec.stride != (1, 1)),
            ("no padding", spec.padding != (0, 0)),
            ("one group", spec.groups != 1),
            (
                "NHWC input and RSCK filter",
                (spec.layout, spec.filter_layout) != ("nhwc", "rsck"),
            ),
        )
        if bad
    ]
    if why:
        raise ValueError(
            f"flatten-pixels takes a convolution whose pixels are a matrix's rows: "
            f"{', '.join(why)} (this one is {spec.to_text()})"
        )
    return MatmulSpec(
        spec.n * spec.h * spec.w, spec.k, spec.c, spec.dtype, spec.epilogue
    )


def flattens(spec: Spec) -> bool:
    """Whether `flattened_spec` takes `spec`."""
    try:
        flattened_spec(spec)
    except ValueError:
        return False
    return True


def split_spec(spec: Spec, splits: int) -> Spec:
    """What one of `splits` splits of `spec`'s channel reduction computes: the same
    outputs over a share of the channels (rounded up: `affinec-split-reduction`
    pads the rest with zeros). A ValueError for a spec without channels to split or
    fewer channels than splits."""
    if isinstance(spec, ConvSpec):
        per_group = spec.c // spec.groups
        if per_group < splits:
            raise ValueError(
                f"splits={splits}: the reduction has {per_group} channels a group"
            )
        return dataclasses.replace(spec, c=-(-per_group // splits) * spec.groups)
    if isinstance(spec, MatmulSpec):
        if spec.k < splits:
            raise ValueError(f"splits={splits}: the reduction has {spec.k} steps")
        return dataclasses.replace(spec, k=-(-spec.k // splits))
    raise ValueError(f"a {spec.kind} has no reduction to split")
