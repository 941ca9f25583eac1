from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.tensorflow


@pytest.mark.parametrize("name, layer_types, parameters", [
    ("cnn", ["Conv2D", "MaxPooling2D", "Flatten", "Dense", "Dense"],
     (3 * 3 * 32 + 32) + (13 * 13 * 32 * 64 + 64) + (64 * 10 + 10)),
    ("deep", ["Conv2D", "MaxPooling2D", "Conv2D", "MaxPooling2D", "Flatten", "Dense", "Dropout", "Dense"],
     (5 * 5 * 32 + 32) + (5 * 5 * 32 * 64 + 64) + (7 * 7 * 64 * 1024 + 1024) + (1024 * 10 + 10)),
])
def test_models_are_the_seeds_designs(name: str, layer_types: list[str], parameters: int) -> None:
    from hpc_train.training.model import build_model

    model = build_model(name)
    assert [type(layer).__name__ for layer in model.layers] == layer_types
    assert model.count_params() == parameters
    assert model(np.zeros((2, 28, 28, 1), np.float32)).shape == (2, 10)
