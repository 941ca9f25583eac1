"""TensorFlow imported at the least start-up cost: what a trainer's rank and a data server leave unloaded, and that
what they leave out still works when asked for (each in a fresh process: the test's own has imported much)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpc_train.bootstrap.tfimport import OnFirstUse, kept_out


def run_fresh(code: str) -> dict:
    """`code` run in a new interpreter; what it prints last, as JSON."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_kept_out_fails_an_import_inside_and_puts_it_back_after() -> None:
    assert "hpc_train_no_such_module" not in sys.modules
    with kept_out(("json", "hpc_train_no_such_module")):
        assert sys.modules["json"] is json  # imported before: left alone
        with pytest.raises(ImportError):
            import hpc_train_no_such_module  # noqa: F401
    assert "hpc_train_no_such_module" not in sys.modules


def test_a_stand_in_imports_its_module_at_its_first_use_and_not_before(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "hpc_train_lazy_probe.py").write_text("ANSWER = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "hpc_train_lazy_probe", raising=False)
    stand_in = OnFirstUse("hpc_train_lazy_probe")
    assert "hpc_train_lazy_probe" not in sys.modules
    assert stand_in.ANSWER == 42 and "hpc_train_lazy_probe" in sys.modules
    with pytest.raises(AttributeError):  # Python's own probes (copy, pickle) import nothing
        stand_in.__deepcopy__


def test_the_collector_is_off_while_tensorflow_loads_then_what_loaded_is_frozen_and_it_is_back_as_it_was() -> None:
    seen = run_fresh("""
        import gc, json
        from hpc_train.bootstrap.tfimport import collector_paused
        states = []
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            gc.unfreeze()
            with collector_paused():
                inside = gc.isenabled()
                made = []
            tracked = any(thing is made for thing in gc.get_objects())  # (a frozen object is no longer there)
            states.append({"inside": inside, "after": gc.isenabled(), "frozen": not tracked})
        gc.enable()
        gc.unfreeze()
        try:  # an import that fails: the collector back on, nothing frozen (a doctor carries on after it)
            with collector_paused():
                failed = []
                raise ImportError("no TensorFlow")
        except ImportError:
            pass
        states.append({"after": gc.isenabled(), "frozen": not any(thing is failed for thing in gc.get_objects())})
        print(json.dumps(states))
    """)
    assert seen == [{"inside": False, "after": True, "frozen": True}, {"inside": False, "after": False, "frozen": True},
                    {"after": True, "frozen": False}]


@pytest.mark.tensorflow
def test_a_ranks_keras_loads_without_pandas_and_scipys_linear_algebra_and_both_still_work_when_asked() -> None:
    seen = run_fresh("""
        import json, sys
        import hpc_train.training.keras as chosen
        loaded = sorted(name for name in ("pandas", "scipy", "scipy.linalg", "scipy.ndimage", "scipy.sparse")
                        if name in sys.modules)
        import numpy as np
        from tf_keras.src.preprocessing import image
        turned = image.apply_affine_transform(np.eye(8)[:, :, None], theta=90).shape
        import pandas
        print(json.dumps({"loaded": loaded, "keras": chosen.keras.__name__, "turned": list(turned),
                          "pandas": pandas.DataFrame({"a": [1]}).shape[0]}))
    """)
    assert seen == {"loaded": [], "keras": "tf_keras", "turned": [8, 8, 1], "pandas": 1}


@pytest.mark.tensorflow
def test_a_data_server_gets_tensorflow_without_keras() -> None:
    seen = run_fresh("""
        import json, sys
        from hpc_train.bootstrap.tfimport import tensorflow
        tf = tensorflow(with_keras=False)
        keras = sorted({name.split(".")[0] for name in sys.modules if name.split(".")[0] in ("keras", "tf_keras")})
        import gc
        print(json.dumps({"keras": keras, "sum": int(tf.reduce_sum(tf.range(4))),
                          "service": hasattr(tf.data.experimental.service, "DispatchServer"),
                          "collector": gc.isenabled(), "tensorflow_frozen": gc.get_freeze_count() > 100_000}))
    """)
    assert seen == {"keras": [], "sum": 6, "service": True, "collector": True, "tensorflow_frozen": True}


@pytest.mark.tensorflow
def test_a_users_keras_3_gets_tensorflow_as_it_comes() -> None:
    seen = run_fresh("""
        import json, os, sys
        os.environ["TF_USE_LEGACY_KERAS"] = "0"
        from hpc_train.bootstrap.tfimport import tensorflow
        tf = tensorflow(with_keras=True)
        from tensorflow.keras import layers  # (a package only when Keras loads with TensorFlow)
        print(json.dumps({"keras": layers.Dense.__module__.split(".")[0], "pandas": "pandas" in sys.modules}))
    """)
    assert seen == {"keras": "keras", "pandas": True}
