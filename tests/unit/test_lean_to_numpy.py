"""The lean module-to-env step turns the module's tensors into numpy as RLlib's
convert_to_numpy does (the same values, the same reduced dtypes), without its tree walk."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.rllib.utils.numpy import convert_to_numpy

from tuner.rllib._lean_sampling import _to_numpy


@pytest.mark.parametrize(
    "dtype",
    [
        torch.float64,
        torch.float32,
        torch.float16,
        torch.int64,
        torch.int32,
        torch.uint8,
        torch.bool,
    ],
)
def test_each_dtype_as_convert_to_numpy_gives_it(dtype):
    batch = {"a": (torch.arange(6).reshape(3, 2) % 2).to(dtype), "b": torch.ones(3, dtype=dtype)}
    lean, rllib = _to_numpy(dict(batch)), convert_to_numpy(dict(batch))
    assert lean.keys() == rllib.keys()
    for key, value in rllib.items():
        assert lean[key].dtype == value.dtype, key
        np.testing.assert_array_equal(lean[key], value, err_msg=key)


def test_a_scalar_tensor_goes_through_convert_to_numpy():
    """A 0-d tensor becomes a Python number there: the lean step leaves it to RLlib."""
    out = _to_numpy({"a": torch.tensor(2.5), "b": torch.ones(2)})
    assert out["a"] == 2.5
    assert isinstance(out["a"], float)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_the_observations_become_the_tensor_numpy_to_tensor_makes(monkeypatch, dtype):
    """The lean env-to-module step's CPU path (taken where CUDA is absent) against
    RLlib's NumpyToTensor piece on the same observations."""
    from types import SimpleNamespace

    from ray.rllib.connectors.common.numpy_to_tensor import NumpyToTensor

    from tuner.rllib._lean_sampling import lean_to_module

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    observations = np.linspace(-1, 1, 12).reshape(3, 4).astype(dtype)
    module = SimpleNamespace(framework="torch")
    rllib = NumpyToTensor()(rl_module=module, batch={"obs": observations.copy()}, episodes=[])
    lean = lean_to_module(SimpleNamespace(module=module), observations.copy(), [], True, {})
    assert lean.keys() == rllib.keys() == {"obs"}
    assert lean["obs"].dtype == rllib["obs"].dtype
    assert torch.equal(lean["obs"], rllib["obs"])
