"""Shared fixtures for the Python-side oracle tests.

The test command (scripts/test) exports LOOM_BIN (the built `loom`), LOOM_MODELS (folder of
provisioned real GGUF files) and LOOM_BUILD (the CMake build folder)."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _env_path(name, default):
    return pathlib.Path(os.environ.get(name, default))


@pytest.fixture(scope="session")
def loom_bin():
    p = _env_path("LOOM_BIN", ROOT / "build" / "bin" / "loom")
    if not p.exists():
        pytest.fail(f"loom binary not found at {p}; build first (scripts/test does)")
    return p


@pytest.fixture(scope="session")
def build_dir():
    return _env_path("LOOM_BUILD", ROOT / "build")


@pytest.fixture(scope="session")
def models_dir():
    return _env_path("LOOM_MODELS", pathlib.Path.home() / ".cache" / "loom" / "models")


def _model(models_dir, name):
    p = models_dir / name
    if not p.exists():
        pytest.fail(f"model {p} missing; run scripts/provision-models")
    return p


@pytest.fixture(scope="session")
def smollm2(models_dir):
    return _model(models_dir, "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="session")
def gemma3(models_dir):
    return _model(models_dir, "gemma-3-270m-it-Q4_K_M.gguf")


def run_loom(loom_bin, *args, check=True, **kw):
    """Runs `loom ARGS`, returns CompletedProcess with text output."""
    r = subprocess.run([str(loom_bin), *map(str, args)], capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"loom {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stderr}")
    return r
