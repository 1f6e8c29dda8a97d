"""Shared fixtures for the Python-side oracle tests.

The test command (scripts/test) exports LOOM_BIN (the built `loom`), LOOM_MODELS (folder of
provisioned real GGUF files), LOOM_BUILD (the CMake build folder) and LOOM_REQUIRE_ALL=1.

Missing inputs (an oracle package, a real model): under scripts/test (LOOM_REQUIRE_ALL=1) they
fail the test, so the oracle suite cannot pass without running; run by hand, they skip. Either
way the message says what is missing and how to get it. The C++ tests follow the same rule
(tests/support/real_models.h)."""
import importlib
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _plain_ggml_kernels():
    """Every llama_cpp.Llama the tests open uses ggml's plain CPU kernels, without the extra
    weight buffer types (CPU_REPACK, AMX). The AMX matmul of llama-cpp-python 0.3.36 crashes
    (SIGSEGV in ggml_backend_amx_mul_mat) on the AMX-capable Xeon this was developed on, and
    the repacked kernels change llama.cpp's accumulation order by CPU: without them the oracle
    computes the same way on every x86-64 machine this suite runs on, AMD or Intel."""
    try:
        import llama_cpp.llama_cpp as lib
    except ImportError:
        return
    default = lib.llama_model_default_params
    if getattr(default, "_loom_plain", False):
        return

    def params():
        p = default()
        p.use_extra_bufts = False
        return p

    params._loom_plain = True
    lib.llama_model_default_params = params


_plain_ggml_kernels()


def ggml_lib_dir():
    """The folder of llama-cpp-python's ggml libraries (libggml-base.so, libggml-cpu.so): the
    oracle's own kernels, loaded through ctypes by the tests that compare against them."""
    import importlib.util
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None:
        missing("Python package llama-cpp-python (import llama_cpp), which carries the ggml oracle",
                "run scripts/setup (pip install -r requirements.txt)")
    return pathlib.Path(spec.submodule_search_locations[0]) / "lib"


REQUIRE_ALL = os.environ.get("LOOM_REQUIRE_ALL") == "1"

# Import name -> the package that provides it (all pinned in requirements.txt).
ORACLE_PACKAGES = {"llama_cpp": "llama-cpp-python", "gguf": "gguf", "jinja2": "jinja2", "numpy": "numpy",
                   "jsonschema": "jsonschema"}


def missing(what, how):
    """An input the test needs is absent: a failure under scripts/test, a skip by hand. Works
    inside a test or fixture and at module level (a module-level failure is a collection
    error, which fails the run)."""
    msg = f"{what} is missing: {how}"
    if REQUIRE_ALL:
        pytest.fail(msg + " (LOOM_REQUIRE_ALL=1: scripts/test runs every check)", pytrace=False)
    pytest.skip(msg, allow_module_level=True)


def pytest_configure(config):
    """Under scripts/test, a missing oracle package stops the run at once with one message,
    before any test file fails to import it."""
    if not REQUIRE_ALL:
        return
    import importlib.util
    absent = [f"{pkg} (import {mod})" for mod, pkg in ORACLE_PACKAGES.items() if importlib.util.find_spec(mod) is None]
    if absent:
        raise pytest.UsageError(f"Python packages missing: {', '.join(absent)}; run scripts/setup "
                                "(pip install -r requirements.txt). LOOM_REQUIRE_ALL=1: scripts/test runs every check.")


def require_module(name):
    """The imported oracle package `name`, or missing() naming the pip package to install."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(f"Python package {ORACLE_PACKAGES.get(name, name)} (import {name})",
                "run scripts/setup (pip install -r requirements.txt)")


def _env_path(name, default):
    # Absolute, so tests may run commands from other working directories.
    return pathlib.Path(os.environ.get(name, default)).absolute()


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
        missing(f"real model {p}", "run scripts/provision-models (or scripts/setup), or point LOOM_MODELS "
                "at the folder that holds it")
    return p


@pytest.fixture(scope="session")
def smollm2(models_dir):
    return _model(models_dir, "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="session")
def gemma3(models_dir):
    return _model(models_dir, "gemma-3-270m-it-Q4_K_M.gguf")


def json_lines(text):
    """The records of JSON-lines output. Split on newlines only: str.splitlines() also breaks at
    U+0085, U+2028 and U+2029, which JSON strings may carry unescaped (a grammar's sampled
    string once did, and its record came back cut in two)."""
    return [json.loads(line) for line in text.split("\n") if line]


def run_loom(loom_bin, *args, check=True, **kw):
    """Runs `loom ARGS`, returns CompletedProcess with text output."""
    r = subprocess.run([str(loom_bin), *map(str, args)], capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"loom {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stderr}")
    return r
