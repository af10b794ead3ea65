"""The spec strategies the tests draw from: affinec's public ones
(`affinec.testing`), which users testing their own passes use too."""

from affinec.testing import conv_specs, matmul_specs, outer_specs, specs

__all__ = ["conv_specs", "matmul_specs", "outer_specs", "specs"]
