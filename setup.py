"""albert-tf: ALBERT for TensorFlow and Keras 3."""

import os
import re

from setuptools import setup

# `training/` and `serving/` are installed as subpackages of `albert_tf` so that
# nothing lands in site-packages under a generic top-level name. The model
# package itself (`albert_tf/`) never imports them.
ROOMS = {"albert_tf": "albert_tf", "albert_tf.training": "training", "albert_tf.serving": "serving"}


def _packages() -> dict[str, str]:
    """Every package under the three rooms: installed name -> source folder."""
    here = os.path.dirname(os.path.abspath(__file__))
    packages = {}
    for name, folder in ROOMS.items():
        for parent, _, files in os.walk(os.path.join(here, folder)):
            if "__init__.py" in files:
                rel = os.path.relpath(parent, here).replace(os.sep, "/")
                suffix = os.path.relpath(parent, os.path.join(here, folder))
                dotted = name if suffix == "." else f"{name}.{suffix.replace(os.sep, '.')}"
                packages[dotted] = rel
    return packages


PACKAGES = _packages()

TF_VERSION = "2.21"


def _keras_requirement() -> str:
    """The tested Keras range, declared once in albert_tf/keras_compat.py."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "albert_tf", "keras_compat.py")
    with open(path, encoding="utf-8") as f:
        return re.search(r'^KERAS_REQUIREMENT = "([^"]+)"', f.read(), re.M).group(1)


setup(
    name="albert-tf",
    version="0.1.0",
    description="ALBERT (A Lite BERT) for TensorFlow and Keras 3: pretraining, fine-tuning, serving.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    # Apache-2.0, as the original google-research/albert.
    license="Apache-2.0",
    license_files=["LICENSE"],
    python_requires=">=3.10",
    packages=list(PACKAGES),
    package_dir=PACKAGES,
    package_data={"albert_tf.serving": ["models.config.example"]},
    install_requires=[
        f"tensorflow=={TF_VERSION}.*",
        f"tensorflow-text=={TF_VERSION}.*",
        _keras_requirement(),
        # Export writes TF Serving warmup requests (PredictionLog protos) and the
        # gRPC client speaks its API: part of the core job, not an extra. It needs
        # nothing TensorFlow does not already pull in (grpcio, protobuf).
        f"tensorflow-serving-api=={TF_VERSION}.*",
        "sentencepiece>=0.2",
        "tensorflow-datasets>=4.9",
        # tensorflow-datasets imports it when it builds a dataset but does not declare it.
        "importlib_resources",
        f"tensorboard=={TF_VERSION}.*",
        "safetensors>=0.4",
        "h5py",
        "tqdm",
        "matplotlib",
    ],
    # Each extra declares what its code imports, nothing else (the serving client speaks
    # HTTP with the standard library and gRPC with tensorflow-serving-api: no extra).
    extras_require={
        # jax: the backend-agnostic tests; scikit-learn, scipy, seqeval (entity F1): independent
        # metric checks; pytest-xdist: make test's workers; the hub clients: the hub tests;
        # ruff: the linter make test runs first (ruff.toml)
        "test": ["pytest>=8", "pytest-xdist>=3", "jax", "scikit-learn", "scipy", "seqeval>=1.2",
                 "huggingface_hub>=0.30", "kagglehub>=0.3", "ruff>=0.6"],
        # hf:// and kaggle:// checkpoint handles (albert_tf/checkpoint/hub.py)
        "hub": ["huggingface_hub>=0.30", "kagglehub>=0.3"],
        "beam": ["apache-beam>=2.60"],
        "reference": ["transformers", "torch"],
        # The benchmarks' peers (benchmarks/bench_serving.py, bench_model.py): never needed by
        # the package or its tests. Install a CPU build of torch first (see docs/benchmarks.md).
        "bench": ["keras-hub", "transformers", "torch", "onnx", "onnxruntime"],
    },
    entry_points={"console_scripts": ["albert-tf=albert_tf.infra.cli:main"]},
)
