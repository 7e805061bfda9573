"""Hub handles and released names: hf://, kaggle:// and `albert-tf presets`.

Nothing is downloaded: each test lays out the client's own cache as the client writes
it (huggingface_hub: models--ORG--NAME/{blobs,snapshots/SHA,refs/main}; kagglehub:
models/OWNER/MODEL/FRAMEWORK/VARIATION/VERSION + VERSION.complete) from the reference
fixtures, and runs in a fresh process with the clients pointed at the cache and kept
off the network (HF_HUB_OFFLINE=1; kagglehub's endpoint on localhost).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler

import numpy as np
import pytest

from albert_tf.checkpoint import CheckpointError, hub, open_checkpoint, released
from albert_tf.errors import UserError
from tests.helpers.cli import CLI
from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.local_server import LocalServer
from tests.helpers.paths import FIXTURES, TASK_FIXTURES

HF_SOURCE = os.path.join(TASK_FIXTURES, "seq_single", "hf")      # a classifier + spiece.model
KERASHUB_SOURCE = os.path.join(FIXTURES, "kerashub", "classifier", "preset")
SHA = "0123456789abcdef0123456789abcdef01234567"
OLD_SHA = "fedcba9876543210fedcba9876543210fedcba98"
TEXTS = ["a gripping, funny film", "dull."]

# KerasHub's published parameter counts for its four ALBERT presets (keras-hub's
# albert_presets.py metadata), an independent check of the table's computed counts.
KERASHUB_PARAMETERS = {"albert_base_en_uncased": 11683584, "albert_large_en_uncased": 17683968,
                       "albert_extra_large_en_uncased": 58724864,
                       "albert_extra_extra_large_en_uncased": 222595584}


def write_hf_cache(home, repo_id: str, source: str, sha: str = SHA, ref: str = "main") -> str:
    """`source`'s files as huggingface_hub caches a snapshot: content-addressed blobs,
    the snapshot's files as relative links to them, refs/<ref> holding the commit."""
    root = os.path.join(home, "hub", "models--" + repo_id.replace("/", "--"))
    snapshot = os.path.join(root, "snapshots", sha)
    os.makedirs(os.path.join(root, "blobs"), exist_ok=True)
    os.makedirs(snapshot, exist_ok=True)
    for name in sorted(os.listdir(source)):
        with open(os.path.join(source, name), "rb") as f:
            data = f.read()
        blob = os.path.join(root, "blobs", hashlib.sha256(data).hexdigest())
        with open(blob, "wb") as f:
            f.write(data)
        os.symlink(os.path.relpath(blob, snapshot), os.path.join(snapshot, name))
    os.makedirs(os.path.join(root, "refs"), exist_ok=True)
    with open(os.path.join(root, "refs", ref), "w") as f:
        f.write(sha)
    return snapshot


def write_older_snapshot(tmp_path, repo_id: str, labels: list[str], ref: str) -> None:
    """HF_SOURCE with other label names, cached as commit OLD_SHA on branch `ref`."""
    older = tmp_path / "older"
    shutil.copytree(HF_SOURCE, older)
    config = json.loads((older / "config.json").read_text())
    config["id2label"] = {str(i): name for i, name in enumerate(labels)}
    (older / "config.json").write_text(json.dumps(config))
    write_hf_cache(tmp_path / "hf", repo_id, str(older), OLD_SHA, ref=ref)


def write_kaggle_cache(cache, handle: str, version: int, source: str) -> str:
    folder = os.path.join(cache, "models", *handle.split("/"))
    target = os.path.join(folder, str(version))
    shutil.copytree(source, target)
    open(os.path.join(folder, f"{version}.complete"), "w").close()
    return target


def offline_env(tmp_path) -> dict:
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
               KAGGLEHUB_CACHE=str(tmp_path / "kaggle"), KAGGLE_API_ENVIRONMENT="TEST")
    env.pop("HF_HUB_CACHE", None)
    return env


PREDICT = r"""
import json, sys
import numpy as np
import albert_tf
texts = json.loads(sys.argv[2])
out = {}
for path in sys.argv[1].split("|"):
    model = albert_tf.AlbertSequenceClassifier.from_preset(path)
    logits = model.predict(texts, verbose=0)
    logits = logits["logits"] if isinstance(logits, dict) else logits
    out[path] = np.asarray(logits).tolist()
print("RESULT" + json.dumps(out))
"""


def run_python(script: str, args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          env=env, timeout=SAFETY_NET_S)


def predictions(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    line = [x for x in result.stdout.splitlines() if x.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def albert_tf_cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True,
                          text=True, env=env, timeout=SAFETY_NET_S)


# --- the table -------------------------------------------------------------------------

def test_table_holds_the_released_checkpoints_with_handles():
    names = {e.name for e in released.RELEASED}
    for size in ("base", "large", "xlarge", "xxlarge"):
        assert {f"albert_{size}_v1", f"albert_{size}_v2", f"albert_{size}_zh"} <= names
    assert len(released.RELEASED) >= 12
    for entry in released.RELEASED:
        assert entry.handles and all(hub.is_handle(h) for h in entry.handles), entry
        assert entry.tokenizer in (released.SENTENCEPIECE, released.WORDPIECE)
    assert {e.tokenizer for e in released.RELEASED if e.language == "zh"} == {released.WORDPIECE}
    assert len(names) == len(released.RELEASED)  # one entry per name


def test_parameter_counts_equal_kerashubs_published_counts():
    for alias, count in KERASHUB_PARAMETERS.items():
        entry = released.find_released(alias)
        assert entry is not None and alias in entry.aliases
        assert entry.parameters == count, (alias, entry.parameters)


def test_presets_command_lists_every_name_and_handle(tmp_path):
    result = albert_tf_cli(["presets"], offline_env(tmp_path))
    assert result.returncode == 0, result.stderr
    for entry in released.RELEASED:
        assert entry.name in result.stdout and entry.handle in result.stdout
    as_json = albert_tf_cli(["presets", "--json"], offline_env(tmp_path))
    rows = json.loads(as_json.stdout)
    assert [r["name"] for r in rows] == [e.name for e in released.RELEASED]
    assert rows[4]["parameters"] == 11683584


def test_a_typo_in_a_released_name_is_one_line_with_the_closest_names():
    with pytest.raises(CheckpointError, match=r"albert_bsae_v2: no such file or directory "
                                              r"\(did you mean albert_base_v2"):
        open_checkpoint("albert_bsae_v2")


def test_malformed_handles_say_the_expected_form():
    with pytest.raises(CheckpointError, match=r"hf://ORG/NAME or hf://ORG/NAME@REVISION"):
        hub.resolve_checkpoint("hf://albert")
    with pytest.raises(CheckpointError, match=r"OWNER/MODEL/FRAMEWORK/VARIATION\[/VERSION\]"):
        hub.resolve_checkpoint("kaggle://keras/albert")
    for handle in ("hf://", "hf:///name", "hf://org/", "hf://org/name/x", "hf://org/name@",
                   "kaggle://a/b/c", "kaggle://a/b/c/d/e/1", "kaggle://a/b/c/d/x1",
                   "kaggle://a//c/d"):
        with pytest.raises(CheckpointError, match=r"expected (hf|kaggle)://|is not a name"):
            hub.resolve_checkpoint(handle)


def test_a_local_directory_wins_over_a_released_name(tmp_path, monkeypatch):
    shutil.copytree(HF_SOURCE, tmp_path / "albert_base_v2")
    monkeypatch.chdir(tmp_path)
    assert hub.resolve_checkpoint("albert_base_v2") == "albert_base_v2"
    assert open_checkpoint("albert_base_v2").format == "hf"


# --- Hugging Face ----------------------------------------------------------------------

def test_hf_handle_loads_from_the_cache_offline_as_the_plain_directory(tmp_path):
    env = offline_env(tmp_path)
    write_hf_cache(tmp_path / "hf", "someorg/tiny-albert-classifier", HF_SOURCE)
    # An older commit on another branch: the bare handle must not pick it.
    write_older_snapshot(tmp_path, "someorg/tiny-albert-classifier", ["a", "b", "c"], "old-branch")
    paths = [HF_SOURCE, "hf://someorg/tiny-albert-classifier",
             f"hf://someorg/tiny-albert-classifier@{SHA}"]
    out = predictions(run_python(PREDICT, ["|".join(paths), json.dumps(TEXTS)], env))
    reference = np.array(out[HF_SOURCE])
    for path in paths[1:]:
        np.testing.assert_array_equal(np.array(out[path]), reference, err_msg=path)
    assert reference.shape == (2, 3)


def test_hf_revision_picks_that_snapshot(tmp_path):
    env = offline_env(tmp_path)
    write_hf_cache(tmp_path / "hf", "someorg/m", HF_SOURCE)
    write_older_snapshot(tmp_path, "someorg/m", ["x", "y", "z"], "v0")
    script = ("import sys; from albert_tf.checkpoint import open_checkpoint\n"
              "for h in sys.argv[1:]:\n"
              "    print('RESULT', h, open_checkpoint(h).task_record.label_names)")
    result = run_python(script, ["hf://someorg/m", "hf://someorg/m@v0", f"hf://someorg/m@{OLD_SHA}"],
                        env)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [x for x in result.stdout.splitlines() if x.startswith("RESULT")]
    assert "'negative', 'neutral', 'positive'" in lines[0]
    assert "'x', 'y', 'z'" in lines[1] and "'x', 'y', 'z'" in lines[2]


def test_hf_handle_offline_without_cache_is_one_line(tmp_path):
    env = offline_env(tmp_path)
    result = albert_tf_cli(["export", "--checkpoint", "hf://someorg/not-cached",
                            "--output", str(tmp_path / "out")], env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("albert-tf export: hf://someorg/not-cached: not in the Hugging "
                                "Face cache"), result.stderr
    assert "HF_HUB_OFFLINE is set" in lines[-1] and "Traceback" not in result.stderr
    assert not os.path.exists(tmp_path / "out")


def test_a_handle_without_its_client_names_the_extra(tmp_path):
    env = offline_env(tmp_path)
    script = ("import sys; sys.modules['huggingface_hub'] = None; sys.modules['kagglehub'] = None\n"
              "from albert_tf.checkpoint import hub, CheckpointError\n"
              "for h in ('hf://a/b', 'kaggle://a/b/c/d/1'):\n"
              "    try: hub.resolve_checkpoint(h)\n"
              "    except CheckpointError as e: print('RESULT', e)\n")
    result = run_python(script, [], env)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [x for x in result.stdout.splitlines() if x.startswith("RESULT")]
    assert lines == ["RESULT hf://a/b: reading this handle needs huggingface_hub, which is not "
                     "installed: pip install 'albert-tf[hub]'",
                     "RESULT kaggle://a/b/c/d/1: reading this handle needs kagglehub, which is "
                     "not installed: pip install 'albert-tf[hub]'"]


@pytest.mark.slow
def test_export_from_an_hf_handle_serves_what_the_directory_gives(tmp_path):
    env = offline_env(tmp_path)
    write_hf_cache(tmp_path / "hf", "someorg/tiny-albert-classifier", HF_SOURCE)
    result = albert_tf_cli(["export", "--checkpoint", "hf://someorg/tiny-albert-classifier",
                            "--output", str(tmp_path / "served")], env)
    assert result.returncode == 0, result.stderr[-3000:]
    script = ("import json, sys, numpy as np, tensorflow as tf, tensorflow_text\n"
              "m = tf.saved_model.load(sys.argv[1])\n"
              "out = m.signatures['serving_default'](text=tf.constant(json.loads(sys.argv[2])))\n"
              "print('RESULT' + json.dumps({'p': out['probabilities'].numpy().tolist()}))")
    served = predictions(run_python(script, [result.stdout.strip().splitlines()[-1],
                                             json.dumps(TEXTS)], env))
    direct = predictions(run_python(PREDICT, [HF_SOURCE, json.dumps(TEXTS)], env))
    logits = np.array(direct[HF_SOURCE])
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(np.array(served["p"]), expected, atol=1e-5)


# --- Kaggle ----------------------------------------------------------------------------

def test_kaggle_handle_loads_from_the_kagglehub_cache(tmp_path):
    env = offline_env(tmp_path)
    write_kaggle_cache(tmp_path / "kaggle", "someone/albert/keras/tiny_classifier", 2,
                       KERASHUB_SOURCE)
    script = ("import sys; from albert_tf.checkpoint import open_checkpoint\n"
              "for h in sys.argv[1:]:\n"
              "    c = open_checkpoint(h)\n"
              "    print('RESULT', c.format, c.path)")
    result = run_python(script, [KERASHUB_SOURCE, "kaggle://someone/albert/keras/tiny_classifier/2",
                                 "kaggle://someone/albert/keras/tiny_classifier"], env)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [x.split() for x in result.stdout.splitlines() if x.startswith("RESULT")]
    cached = os.path.join(tmp_path, "kaggle", "models", "someone", "albert", "keras",
                          "tiny_classifier", "2")
    assert lines[0][1] == "kerashub"
    # versioned: read from the cache; unversioned without network: the newest cached version
    assert lines[1][1:] == ["kerashub", cached] and lines[2][1:] == ["kerashub", cached]


def test_kaggle_handle_not_cached_and_unreachable_is_one_line(tmp_path):
    env = offline_env(tmp_path)
    result = albert_tf_cli(["convert", "kaggle://someone/albert/keras/missing/3",
                            str(tmp_path / "out")], env)
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("albert-tf convert: kaggle://someone/albert/keras/missing/3: Kaggle "
                           "Models could not give it") and "kagglehub cache" in last
    assert "Traceback" not in result.stderr and not os.path.exists(tmp_path / "out")


# --- handles are names, not paths -----------------------------------------------------

@pytest.fixture
def no_client(monkeypatch):
    """Any client call fails the test: a refused handle is refused before one is called."""
    def called(handle):
        raise AssertionError(f"a client was called for {handle!r}")
    monkeypatch.setattr(hub, "_huggingface_hub", called)
    monkeypatch.setattr(hub, "_kagglehub", called)


@pytest.mark.parametrize("handle, part", [
    ("kaggle://../../../x", "OWNER '..'"),
    ("kaggle://keras/albert/keras/./3", "VARIATION '.'"),
    ("kaggle://keras/albert/ker\\as/v/3", "FRAMEWORK 'ker\\\\\\\\as'"),
    ("kaggle://keras/albert/keras/v\t/3", "VARIATION 'v\\\\\\\\t'"),
    ("kaggle://keras/älbert/keras/v", "MODEL 'älbert'"),
    ("hf://../name", "ORG '..'"),
    ("hf://org/..", "NAME '..'"),
    ("hf://org/n\x00ame", "NAME 'n\\\\\\\\x00ame'"),
    ("hf://ōrg/name", "ORG 'ōrg'"),
    ("hf://org/name@../../models--org--other/refs/main", "REVISION '../../models--org--other"),
    ("hf://org/name@/etc/passwd", "REVISION '/etc/passwd'"),
    ("hf://org/name@refs//main", "REVISION 'refs//main'"),
    ("hf://org/name@a\\b", "REVISION 'a\\\\\\\\b'"),
    ("hf://org/name@main\n", "REVISION 'main\\\\\\\\n'"),
])
def test_a_handle_part_that_walks_a_path_is_refused_before_any_client(no_client, handle, part):
    with pytest.raises(CheckpointError, match=f"{part}.* is not a") as e:
        hub.resolve_checkpoint(handle)
    assert "\n" not in str(e.value)


def test_a_10kb_handle_is_one_short_line(no_client):
    with pytest.raises(CheckpointError) as e:
        hub.resolve_checkpoint("hf://org/" + "n" * 10240)
    message = str(e.value)
    assert len(message) < 400 and "(10,249 characters)" in message and "\n" not in message


def test_a_traversing_revision_does_not_read_another_repositorys_ref(tmp_path):
    """hf://org/name@../../models--org--other/refs/main would read org/other offline."""
    write_hf_cache(tmp_path / "hf", "someorg/m", HF_SOURCE)
    write_hf_cache(tmp_path / "hf", "someorg/other", HF_SOURCE, OLD_SHA)
    result = albert_tf_cli(["convert", "hf://someorg/m@../../models--someorg--other/refs/main",
                            str(tmp_path / "out")], offline_env(tmp_path))
    assert result.returncode == 2, result.stderr[-2000:]
    assert "REVISION '../../models--someorg--other/refs/main' is not a revision" in result.stderr
    assert "Traceback" not in result.stderr and not os.path.exists(tmp_path / "out")


def test_a_kaggle_handle_outside_the_cache_converts_nothing(tmp_path):
    """kaggle://../../../x named a directory outside kagglehub's cache and converted it."""
    os.makedirs(tmp_path / "x")
    shutil.copytree(HF_SOURCE, tmp_path / "x" / "1")
    open(tmp_path / "x" / "1.complete", "w").close()
    cache = tmp_path / "a" / "b" / "c"
    env = dict(offline_env(tmp_path), KAGGLEHUB_CACHE=str(cache))
    result = albert_tf_cli(["convert", "kaggle://../../../x", str(tmp_path / "out")], env)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "OWNER '..' is not a name" in result.stderr.strip().splitlines()[-1]
    assert not os.path.exists(tmp_path / "out")


def test_a_client_answer_outside_its_cache_is_refused(tmp_path, monkeypatch):
    import huggingface_hub.errors

    outside = tmp_path / "elsewhere"
    shutil.copytree(HF_SOURCE, outside)
    fake_hf = types.SimpleNamespace(
        errors=huggingface_hub.errors, snapshot_download=lambda *a, **k: str(outside),
        constants=types.SimpleNamespace(HF_HUB_CACHE=str(tmp_path / "hf"), HF_HUB_OFFLINE=True,
                                        ENDPOINT="http://127.0.0.1:9"),
        get_session=lambda: types.SimpleNamespace(event_hooks={"request": []}))
    fake_kaggle = types.SimpleNamespace(model_download=lambda name: str(outside))
    monkeypatch.setattr(hub, "_huggingface_hub", lambda handle: fake_hf)
    monkeypatch.setattr(hub, "_kagglehub", lambda handle: fake_kaggle)
    monkeypatch.setattr(hub, "_kaggle_cache", lambda: str(tmp_path / "kaggle"))
    with pytest.raises(CheckpointError, match="huggingface_hub gave .* outside its cache"):
        hub.resolve_checkpoint("hf://org/name")
    with pytest.raises(CheckpointError, match="kagglehub gave .* outside its cache"):
        hub.resolve_checkpoint("kaggle://a/b/c/d/1")


def test_names_the_hub_refuses_are_one_line(tmp_path):
    """A name our rule lets through but the Hub's does not ('--' inside) was an
    "unexpected error: HFValidationError" with the name echoed whole."""
    result = albert_tf_cli(["convert", "hf://org/a--" + "b" * 90, str(tmp_path / "out")],
                           offline_env(tmp_path))
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("albert-tf convert: hf://org/a--") and "refuses this name" in last
    assert "unexpected" not in last and len(last) < 400


# --- bounded waits ---------------------------------------------------------------------

def _silent(answer: threading.Event) -> type[BaseHTTPRequestHandler]:
    """A handler that accepts a request and never answers (until `answer` is set)."""
    class Silent(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            answer.wait(120)

        do_HEAD = do_GET

        def log_message(self, *args):
            pass
    return Silent


def test_an_endpoint_that_never_answers_is_one_line_within_the_timeout(tmp_path):
    """Such an endpoint hung hf:// for ever (huggingface_hub asks a repository's info with
    no timeout at all)."""
    answer = threading.Event()
    server = LocalServer(_silent(answer))
    env = dict(offline_env(tmp_path), HF_ENDPOINT=server.url, ALBERT_TF_HUB_TIMEOUT="1")
    env.pop("HF_HUB_OFFLINE")
    try:
        result = subprocess.run([*CLI, "convert",
                                 "hf://someorg/m", str(tmp_path / "out")], capture_output=True,
                                text=True, env=env, timeout=SAFETY_NET_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"albert-tf convert hf://... still waited after {SAFETY_NET_S} s")
    finally:
        answer.set()
        server.close()
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("albert-tf convert: hf://someorg/m: ") and server.url in last
    assert "did not answer within 1 s (ALBERT_TF_HUB_TIMEOUT" in last, last
    # the endpoint never answers: an answer at all is the timeout's (no clock verdict)
    assert "Traceback" not in result.stderr and not os.path.exists(tmp_path / "out")


def test_the_hub_timeout_setting_is_checked(monkeypatch):
    for bad in ("0", "-1", "nan", "soon", "7200"):
        monkeypatch.setenv("ALBERT_TF_HUB_TIMEOUT", bad)
        with pytest.raises(UserError, match="ALBERT_TF_HUB_TIMEOUT=.* must be a finite number"):
            hub.hub_timeout()
    monkeypatch.setenv("ALBERT_TF_HUB_TIMEOUT", "2.5")
    assert hub.hub_timeout() == 2.5
