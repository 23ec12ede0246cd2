"""scripts/tf_release.py: which TensorFlow `pip install .` builds against
and what the wheel then depends on (no TensorFlow import, no build).

The hooks run in made-up environments: a prefix whose site-packages holds a
tensorflow_cpu or tensorflow dist-info, SIMDEV_TF_VERSION, neither."""
import importlib.util
import os
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture()
def tfr(monkeypatch):
    monkeypatch.delenv("SIMDEV_TF_VERSION", raising=False)
    spec = importlib.util.spec_from_file_location(
        "tf_release", os.path.join(ROOT, "scripts", "tf_release.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fake_env(tmp_path, *dists):
    """A prefix whose purelib holds <name>-<version>.dist-info/METADATA."""
    purelib = sysconfig.get_paths(vars={"base": str(tmp_path),
                                        "platbase": str(tmp_path)})["purelib"]
    for name, version in dists:
        d = os.path.join(purelib, f"{name}-{version}.dist-info")
        os.makedirs(d)
        with open(os.path.join(d, "METADATA"), "w") as f:
            f.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return str(tmp_path)


def test_releases_are_cmakes_list(tfr):
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        assert "set(SIMDEV_TF_RELEASES " + " ".join(tfr.known_releases()) + ")" in f.read()
    assert tfr.known_releases()[0] == "2.16" and tfr.known_releases()[-1] == "2.21"


@pytest.mark.parametrize("name", ["tensorflow_cpu", "tensorflow"])
def test_target_environment_release_is_found(tfr, tmp_path, name):
    assert tfr.target_tf_version(fake_env(tmp_path, (name, "2.18.1"))) == "2.18.1"


def test_empty_environment_has_none(tfr, tmp_path):
    assert tfr.target_tf_version(fake_env(tmp_path)) is None


def test_two_releases_are_refused(tfr, tmp_path):
    env = fake_env(tmp_path, ("tensorflow_cpu", "2.18.1"), ("tensorflow", "2.19.1"))
    with pytest.raises(RuntimeError, match="several TensorFlow distributions"):
        tfr.target_tf_version(env)


@pytest.mark.parametrize("name", ["tensorflow_cpu", "tensorflow"])
def test_requirements_follow_the_target(tfr, tmp_path, monkeypatch, name):
    """The release and the distribution: a venv of `tensorflow` must not get
    tensorflow-cpu installed over it."""
    monkeypatch.setattr(tfr.sys, "prefix", fake_env(tmp_path, (name, "2.19.1")))
    assert tfr.get_requires_for_dynamic_metadata({}) == [
        f"{name.replace('_', '-')}==2.19.1", tfr.JAXLIB]


@pytest.mark.parametrize("version,jax", [("2.16.2", False), ("2.17.1", False),
                                         ("2.18.1", True), ("2.21.0", True)])
def test_override_and_jaxlib_where_it_fits(tfr, tmp_path, monkeypatch, version, jax):
    monkeypatch.setattr(tfr.sys, "prefix", fake_env(tmp_path))
    monkeypatch.setenv("SIMDEV_TF_VERSION", version)
    reqs = tfr.get_requires_for_dynamic_metadata({})
    assert reqs[0] == f"tensorflow-cpu=={version}"
    assert (tfr.JAXLIB in reqs) == jax


def test_default_without_tensorflow(tfr, tmp_path, monkeypatch):
    monkeypatch.setattr(tfr.sys, "prefix", fake_env(tmp_path))
    assert tfr.build_tf_version() == tfr.DEFAULT == "2.21.0"


@pytest.mark.parametrize("version", ["2.15.1", "2.22.0", "3.0.0", "garbage"])
def test_unknown_release_is_an_error(tfr, monkeypatch, version):
    monkeypatch.setenv("SIMDEV_TF_VERSION", version)
    with pytest.raises(RuntimeError, match="simdev builds against TensorFlow 2.16, 2.17"):
        tfr.get_requires_for_dynamic_metadata({})


def test_dependency_is_the_built_release(tfr, monkeypatch):
    versions = {"tensorflow-cpu": "2.18.1"}

    def version(dist):
        if dist not in versions:
            raise tfr.importlib.metadata.PackageNotFoundError(dist)
        return versions[dist]
    monkeypatch.setattr(tfr.importlib.metadata, "version", version)
    assert tfr.dynamic_metadata({}, {}) == {"dependencies": ["tensorflow-cpu==2.18.*"]}
    versions.clear()
    versions["tensorflow"] = "2.19.1"  # built in a venv of `tensorflow`
    assert tfr.dynamic_metadata({}, {}) == {"dependencies": ["tensorflow==2.19.*"]}
    versions.clear()
    with pytest.raises(RuntimeError, match="no TensorFlow in the build environment"):
        tfr.dynamic_metadata({}, {})
