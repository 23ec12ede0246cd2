"""pytest set-up of simdev's JAX tests (simdev.jax over libsimdev_xla.so);
their helpers are in jaxutil.py.

These tests run JAX on CPU in the pytest process itself: libsimdev_xla.so
has no TensorFlow in it, and a JAX process must never load TensorFlow. The
`no_tensorflow` fixture (autouse, once per test module) asserts that
'tensorflow' is not in sys.modules before the module's first test and after
its last one, so every module proves it. Child processes (jaxutil.run_py)
assert it too.

What is tested is the copy installed in this interpreter's site-packages
(`make install`), like tests/tf.

The pytest process runs with no SIMDEV_* variable: they are removed from
os.environ here, before anything loads the library (which reads them when
it creates its device), so that a developer's setting cannot change what
is tested. Tests that need a setting (SIMDEV_SYNC=1, a bad or tiny
SIMDEV_MEMORY_MB) run a script in a fresh process (`run_py`), with exactly
the SIMDEV_* variables they give.

float64 tests need jax_enable_x64, switched on here for the whole process
(float32 inputs stay float32: the tests give every dtype explicitly).
"""
import os
import sys

for _k in [k for k in os.environ if k.startswith("SIMDEV_")]:
    del os.environ[_k]

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")


@pytest.fixture(scope="module", autouse=True)
def no_tensorflow():
    """No test module may import TensorFlow into the JAX process."""
    assert "tensorflow" not in sys.modules, "TensorFlow was imported before this module"
    yield
    assert "tensorflow" not in sys.modules, "TensorFlow was imported by this module"


@pytest.fixture(scope="session")
def sj():
    """simdev.jax, registered."""
    import simdev.jax as sj

    sj.register()
    return sj


def pytest_sessionstart(session):
    """Give the module name 'conftest' back to the other test folder's
    conftest (tests/tf's).

    conftest.py files outside Python packages all import as the module
    'conftest', and pytest drops the previous one from sys.modules before
    loading the next. tests/tf's test modules import helpers with `from
    conftest import ...`; when this file is loaded after tests/tf/conftest.py
    (e.g. `pytest tests/tf/test_x.py tests/jax`, as make test does), their
    imports would find this module. Nothing imports this one by name (the
    helpers are in jaxutil.py), so when it holds the name and exactly one
    other conftest module is loaded, that one gets the name back."""
    me = sys.modules.get(__name__)
    if __name__ != "conftest" or me is None or getattr(me, "__file__", None) != __file__:
        return
    others = [m for m in session.config.pluginmanager.get_plugins()
              if getattr(m, "__name__", None) == "conftest"
              and getattr(m, "__file__", None) != __file__]
    if len(others) == 1:
        sys.modules["conftest"] = others[0]
