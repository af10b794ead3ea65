"""The API reference builds from the docstrings (`scripts/build_api_docs.py`, pdoc)
without a warning, for every public module, so it cannot rot."""

import pytest
from repository_scripts import load_script

pytest.importorskip("pdoc")


def _builder():
    return load_script("scripts/build_api_docs.py")


def test_the_api_reference_builds_without_a_warning(tmp_path):
    builder = _builder()
    assert builder.build(tmp_path) == []
    for name in builder.PUBLIC_MODULES:
        page = tmp_path / (name.replace(".", "/") + ".html")
        assert page.is_file(), f"no page for {name}"
    pages = {
        "affinec/driver/config.html": ["config_for", "splits"],
        "affinec/driver/compiler.html": ["compile_to_ptx", "CompiledKernel"],
        "affinec/torch.html": ["conv2d", "convert", "fold_batch_norm"],
        "affinec/testing.html": ["assert_equivalent", "conv_specs"],
        "affinec/passes/affinec_split_reduction.html": ["AffinecSplitReduction"],
        "affinec.html": ["ConvSpec", "compile"],
    }
    for page, names in pages.items():
        text = (tmp_path / page).read_text()
        for name in names:
            assert name in text, f"{page} does not mention {name}"
