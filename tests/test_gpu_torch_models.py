"""ResNet-50 and MobileNetV2 (`affinec.torch.networks`, random weights and batch-norm
statistics) converted through `affinec.torch.convert` agree with the same models on
torch, in f16 at batch 1 and 32 (`make gpu-test`; skipped without a GPU).

Both are held to the float64 model: affinec's f16 error within a small factor of
torch's own f16 error (cuDNN's), and every convolution on affinec (no fallback
warning). `benchmarks/torch_models.py` times the same models.
"""

import warnings

import pytest

from affinec.frontend.reference import TOLERANCE

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

AS_TORCH = 3.0
"""How many times torch's own f16 error affinec's may be: both round every layer's
output to f16, in other orders of summation."""


@pytest.mark.parametrize("batch", [1, 32])
@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2"])
def test_converted_model_agrees_with_torch(name, batch):
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA GPU")
    import affinec.torch as at
    from affinec.torch.networks import TORCH_NETWORKS, randomize_batch_norms

    torch.manual_seed(batch)
    model = randomize_batch_norms(TORCH_NETWORKS[name]()).eval().cuda()
    half = TORCH_NETWORKS[name]()
    half.load_state_dict(model.state_dict())
    half = half.eval().cuda().half().to(memory_format=torch.channels_last)
    reference = model.double()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = at.convert(half)
        x = torch.randn(batch, 3, 224, 224, device="cuda")
        x16 = x.half().to(memory_format=torch.channels_last)
        with torch.no_grad():
            got = fast(x16)
    with torch.no_grad():
        expected = reference(x.double())
        ours = half(x16)
    fell_back = [str(w.message) for w in caught if "affinec.torch" in str(w.message)]
    assert not fell_back, fell_back  # every convolution on affinec
    assert got.shape == expected.shape and got.dtype == torch.float16
    assert bool(torch.isfinite(got).all())
    error = float((got.double() - expected).norm() / expected.norm())
    torch_error = float((ours.double() - expected).norm() / expected.norm())
    assert error <= TOLERANCE["f16"], f"{name} batch {batch}: {error:.2e}"
    assert error <= AS_TORCH * torch_error, (
        f"{name} batch {batch}: affinec {error:.2e}, torch {torch_error:.2e}"
    )
