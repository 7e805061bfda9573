"""`albert-tf pretrain` on real TFRecords made from the embedded corpus.

The data comes from `albert-tf create-data`'s code on 30 documents of the embedded
corpus (seq 64, 10 predictions). End-to-end runs go through the CLI in
subprocesses (as a user runs it, and so that kill -9 and logical devices work);
they are marked slow.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

TINY = ["albert.embedding_size=32", "albert.hidden_size=64", "albert.num_hidden_layers=2",
        "albert.num_attention_heads=2", "albert.intermediate_size=128"]
RUN_TIMEOUT = 300


@pytest.fixture(scope="module")
def records(tmp_path_factory, corpus_documents, spm_model_path):
    """Two shards of pretraining TFRecords: train (20 documents, ~400 instances) and
    eval (10). Small enough that a tiny model learns SOP (by memorizing) in 400 steps."""
    from albert_tf.training.data import create_data
    from albert_tf.training.data.corpus import write_corpus_file

    directory = tmp_path_factory.mktemp("pretrain_records")
    corpus = str(directory / "corpus.txt")
    write_corpus_file(corpus, iter(corpus_documents[:30]))
    code = create_data.main([
        "--input", corpus, "--output-dir", str(directory / "records"),
        "--spm-model", spm_model_path, "--max-seq-length", "64",
        "--max-predictions-per-seq", "10", "--dupe-factor", "1", "--processes", "1",
        "--documents-per-shard", "20"])
    assert code == 0
    return {"train": str(directory / "records" / "pretrain-00000.tfrecord"),
            "eval": str(directory / "records" / "pretrain-00001.tfrecord"),
            "spm": spm_model_path}


def _command(records, output_dir, *extra):
    # Imported here: this file also runs as a script (the mirrored run), outside the tests.
    from tests.helpers.cli import CLI

    return [*CLI, "pretrain",
            "--train-data", records["train"], "--spm-model", records["spm"],
            "--output-dir", str(output_dir), *TINY, *extra]


def _env(**extra):
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **extra}


def _run(command, **env):
    proc = subprocess.run(command, env=_env(**env), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stderr, _summary(proc.stderr)


def _summary(log: str) -> dict:
    found = re.findall(r"pretraining done: (\{.*\})", log)
    assert found, log[-3000:]
    return json.loads(found[-1])


def _weights(directory):
    from albert_tf import load_checkpoint

    return [np.asarray(w) for w in load_checkpoint(str(directory)).get_weights()]


# ----------------------------------------------------------------- fast tests
def test_config_file_then_options_then_overrides(tmp_path):
    from albert_tf.training.pretrain.config import load_config

    path = tmp_path / "run.json"
    path.write_text(json.dumps({"train_data": "a/*.tfrecord", "output_dir": "out",
                                "train_steps": 100, "learning_rate": 1, "albert": {
                                    "hidden_size": 64}}))
    cfg = load_config(str(path), ["steps_per_execution=10", "albert.num_hidden_layers=3",
                                  "jit_compile=true", "model=albert-large"],
                      global_batch_size=32, strategy=None)
    assert (cfg.train_data, cfg.train_steps, cfg.global_batch_size, cfg.strategy) == (
        "a/*.tfrecord", 100, 32, "default")
    assert cfg.learning_rate == 1.0 and isinstance(cfg.learning_rate, float)
    assert cfg.albert == {"hidden_size": 64, "num_hidden_layers": 3}
    assert (cfg.steps_per_execution, cfg.jit_compile, cfg.model) == (10, True, "albert-large")
    assert cfg.dropout == 0.0 and cfg.optimizer == "lamb"  # the paper's defaults

    path.write_text('{"train_data": "x", "output_dir": "o", "train_step": 5}')
    with pytest.raises(ValueError, match=r"run.json: unknown keys train_step"):
        load_config(str(path))
    path.write_text('{"train_data": "x",\n "output_dir": 3}')
    with pytest.raises(ValueError, match=r"run.json: output_dir=3 is not a str"):
        load_config(str(path))
    with pytest.raises(ValueError, match="train_steps=25 is not a multiple of "
                                         "steps_per_execution=10"):
        load_config(None, ["train_data=x", "output_dir=o", "train_steps=25",
                           "steps_per_execution=10", "checkpoint_every=10", "eval_steps=10"])


def test_cli_bad_input_is_one_line_and_status_2(tmp_path, capsys, records):
    from albert_tf.training.pretrain.run import main

    assert main(["--train-data", "x", "--output-dir", "o", "trian_steps=5"]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "override 'trian_steps': unknown key" in err

    assert main(["--train-data", str(tmp_path / "none-*.tfrecord"),
                 "--output-dir", str(tmp_path / "o")]) == 2
    assert "no TFRecord files match" in capsys.readouterr().err

    assert main(["--train-data", records["train"], "--output-dir", str(tmp_path / "o"),
                 "--global-batch-size", "10", "--gradient-accumulation-steps", "4"]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and ("global_batch_size=10 is not divisible by "
                                             "gradient_accumulation_steps=4") in err

    config = tmp_path / "albert_config.json"
    config.write_text(json.dumps({"vocab_size": 37, "embedding_size": 8, "hidden_size": 12,
                                  "num_hidden_layers": 1, "num_attention_heads": 3,
                                  "intermediate_size": 16}))
    assert main(["--train-data", records["train"], "--spm-model", records["spm"],
                 "--model", str(config), "--output-dir", str(tmp_path / "o")]) == 2
    assert "vocab_size=37" in capsys.readouterr().err


def _tiny_model(cfg_overrides=None):
    from albert_tf.training.pretrain.config import load_config

    return load_config(None, ["train_data=x", "output_dir=o", *TINY, "warmup_steps=2",
                              "train_steps=20", "learning_rate=0.02", *(cfg_overrides or [])])


def test_train_step_compiles_with_xla_and_matches(records):
    """The whole Keras train step (forward, loss, LAMB update) compiles with XLA on
    CPU, which is what TPUs need (no host ops), and computes the same update."""
    import keras
    import tensorflow as tf

    from albert_tf.training.pretrain.pipeline import pretraining_dataset
    from albert_tf.training.pretrain.run import build_model

    batch = next(iter(pretraining_dataset(records["train"], 6, 64, 10, seed=1)))
    results = []
    for jit in (False, True):
        model = build_model(_tiny_model(), tf.distribute.get_strategy(), 1000)
        step = tf.function(model.train_step, jit_compile=jit)
        logs = step(batch)
        logs = step(batch)
        results.append(([keras.ops.convert_to_numpy(w) for w in model.weights],
                        {k: float(v) for k, v in logs.items()}))
    (plain, plain_logs), (xla, xla_logs) = results
    assert np.isfinite(xla_logs["loss"]) and xla_logs.keys() == plain_logs.keys()
    for name in plain_logs:
        assert xla_logs[name] == pytest.approx(plain_logs[name], rel=1e-4), name
    for a, b in zip(plain, xla):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-5)


def test_init_checkpoint_weights_are_loaded(tmp_path):
    import keras
    import tensorflow as tf

    from albert_tf import AlbertPretrainer, save_checkpoint
    from albert_tf.training.pretrain.run import build_model, model_config

    cfg = _tiny_model()
    source = AlbertPretrainer(model_config(cfg, 1000).replace(hidden_dropout_prob=0.1))
    save_checkpoint(source, tmp_path / "init")
    cfg.init_checkpoint = str(tmp_path / "init")
    model = build_model(cfg, tf.distribute.get_strategy(), 1000)
    assert model.config.hidden_dropout_prob == 0.0  # dropout off for pretraining
    for a, b in zip(source.weights, model.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a),
                                      keras.ops.convert_to_numpy(b))


# ----------------------------------------------------------------- end to end
LEARN = ["--global-batch-size", "32", "--train-steps", "400", "--eval-data", None,
         "warmup_steps=60", "learning_rate=0.02", "steps_per_execution=20",
         "checkpoint_every=100", "eval_steps=20", "log_every=20", "shuffle_buffer=1000",
         "deterministic=true"]


def _learn_args(records):
    return [records["eval"] if a is None else a for a in LEARN]


@pytest.fixture(scope="module")
def reference_run(records, tmp_path_factory):
    output = tmp_path_factory.mktemp("reference")
    log, summary = _run(_command(records, output, *_learn_args(records)))
    return output, summary


def _scalars(directory) -> dict[str, list[tuple[int, float]]]:
    """TensorBoard scalars of the event files in `directory`: tag -> [(step, value)]."""
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    scalars: dict[str, list[tuple[int, float]]] = {}
    for name in os.listdir(directory):
        for record in tf.data.TFRecordDataset(os.path.join(directory, name)):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append(
                    (event.step, float(tf.make_ndarray(value.tensor))))
    return {tag: sorted(points) for tag, points in scalars.items()}


@pytest.mark.slow
def test_pretraining_learns_on_the_embedded_corpus(reference_run):
    output, summary = reference_run
    history = summary["history"]
    assert summary["step"] == 400 and len(history["mlm_loss"]) == 4
    train = _scalars(output / "tensorboard" / "train")
    # log(1000) = 6.9 at the start (the first point averages steps 1-20); unigram
    # statistics alone give ~5.
    first_step, first_mlm = train["mlm_loss"][0]
    assert first_step == 20 and first_mlm > 6.0, train["mlm_loss"]
    assert history["mlm_loss"][-1] < 4.0, history["mlm_loss"]
    assert history["mlm_accuracy"][-1] > 0.2
    # 3,200 SOP labels in the last epoch: chance is 0.5 +- 0.01 (seeds 1-3 gave 0.93-0.99).
    assert history["sop_accuracy"][-1] > 0.6, history["sop_accuracy"]
    assert all(np.isfinite(history["val_mlm_loss"]))
    assert {"mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy", "learning_rate",
            "examples_per_sec", "tokens_per_sec"} <= set(train)
    assert [step for step, _ in train["learning_rate"]] == list(range(20, 401, 20))
    evaluation = _scalars(output / "tensorboard" / "eval")
    assert [step for step, _ in evaluation["mlm_loss"]] == [100, 200, 300, 400]
    model_files = set(os.listdir(output / "model"))
    assert {"albert_config.json", "model.weights.h5", "spiece.model",
            "albert_task.json"} <= model_files


@pytest.mark.slow
def test_kill_9_then_rerun_resumes_at_the_recorded_step(reference_run, records, tmp_path):
    import tensorflow as tf

    reference, _ = reference_run
    command = _command(records, tmp_path, *_learn_args(records))
    proc = subprocess.Popen(command, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + RUN_TIMEOUT
    while tf.train.latest_checkpoint(str(tmp_path / "checkpoints")) is None:
        assert proc.poll() is None and time.time() < deadline, "no checkpoint before exit"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "model").exists(), "the run finished before it was killed"
    recorded = tf.train.load_variable(str(tmp_path / "checkpoints"), "step/.ATTRIBUTES/VARIABLE_VALUE")
    log, summary = _run(command)
    assert summary["start_step"] == recorded and 0 < recorded < 400
    assert f"at step {recorded}" in log and summary["step"] == 400
    # Optimizer state and schedule position: 400 updates, as uninterrupted.
    iterations = tf.train.load_variable(str(tmp_path / "checkpoints"),
                                        "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")
    assert int(iterations) == 400
    for resumed, uninterrupted in zip(_weights(tmp_path / "model"),
                                      _weights(reference / "model")):
        np.testing.assert_array_equal(resumed, uninterrupted)


SHORT = ["--global-batch-size", "16", "--train-steps", "20", "warmup_steps=4",
         "learning_rate=0.02", "steps_per_execution=2", "checkpoint_every=10",
         "log_every=2", "shuffle_buffer=200"]


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_runs_stay_finite(records, tmp_path, precision):
    import keras

    from albert_tf.training.pretrain.config import load_config
    from albert_tf.training.pretrain.run import run

    cfg = load_config(None, [*TINY, "train_steps=20", "global_batch_size=16",
                             "warmup_steps=4", "learning_rate=0.02", "checkpoint_every=10",
                             "steps_per_execution=2", "shuffle_buffer=200"],
                      train_data=records["train"], spm_model=records["spm"],
                      output_dir=str(tmp_path), precision=precision)
    try:
        summary = run(cfg)
    finally:
        keras.config.set_dtype_policy("float32")
    history = summary["history"]
    assert summary["step"] == 20
    for name in ("loss", "mlm_loss", "sop_loss"):
        assert np.all(np.isfinite(history[name])), (name, history[name])
    assert history["mlm_loss"][-1] < history["mlm_loss"][0]
    config = json.loads((tmp_path / "run_config.json").read_text())
    assert config["resolved"]["precision"] == precision
    import tensorflow as tf
    names = [n for n, _ in tf.train.list_variables(str(tmp_path / "checkpoints"))]
    # float16 trains through the loss-scale optimizer (its state is checkpointed).
    assert any("dynamic_scale" in n for n in names) == (precision == "mixed_float16")
    for weight in _weights(tmp_path / "model"):
        assert weight.dtype == np.float32 and np.all(np.isfinite(weight))


@pytest.mark.slow
def test_gradient_accumulation_runs_the_same_steps_from_the_cli(records, tmp_path):
    """`--gradient-accumulation-steps 4`: the run counts updates (steps, checkpoints, the
    learning rate) as without it, records the setting and exports a finite model."""
    _, summary = _run(_command(records, tmp_path, "--global-batch-size", "16",
                               "--train-steps", "6", "--gradient-accumulation-steps", "4",
                               "warmup_steps=2", "checkpoint_every=3", "log_every=3"))
    assert (summary["start_step"], summary["step"]) == (0, 6)
    assert np.isfinite(summary["history"]["loss"]).all() and len(summary["history"]["loss"]) == 2
    record = json.loads((tmp_path / "run_config.json").read_text())
    assert record["gradient_accumulation_steps"] == 4 and record["global_batch_size"] == 16
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("ckpt-*.index")) == [
        "ckpt-3.index", "ckpt-6.index"]
    for weight in _weights(tmp_path / "model"):
        assert np.all(np.isfinite(weight))


@pytest.mark.slow
def test_mirrored_two_devices_follow_the_single_device_trajectory(records, tmp_path):
    """2 logical CPUs, steps_per_execution=2, same global batch and seed.

    The MLM loss is normalized per replica by its own masked-token count (as the
    original on each TPU core), so replicas whose batches hold different numbers of
    masked tokens give a slightly different gradient than one device: the
    trajectories agree to ~1e-4 here, not bit for bit (test_distribute.py shows
    exact agreement when the loss normalization does not depend on the split).
    """
    proc = subprocess.run([sys.executable, __file__, "mirrored", records["train"],
                           records["spm"], str(tmp_path)], env=_env(),
                           capture_output=True, text=True, timeout=RUN_TIMEOUT)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    result = json.loads(lines[-1][len("RESULT "):])
    single, mirrored = result["default"], result["mirrored"]
    assert mirrored["replicas"] == 2 and single["replicas"] == 1
    for name in ("loss", "mlm_loss", "sop_loss", "mlm_accuracy"):
        np.testing.assert_allclose(mirrored["history"][name], single["history"][name],
                                   rtol=2e-3, err_msg=name)
    assert single["history"]["mlm_loss"][-1] < single["history"]["mlm_loss"][0]


@pytest.mark.slow
def test_multi_worker_trains_in_step_and_only_the_chief_writes(records, tmp_path):
    from tests.helpers.local_server import free_ports  # (this file also runs as a script)

    ports = free_ports(2)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    command = _command(records, tmp_path, "--strategy", "multi_worker", *SHORT)
    workers = [subprocess.Popen(command, env=_env(TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": i}})),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in range(2)]
    logs = [w.communicate(timeout=RUN_TIMEOUT)[1] for w in workers]
    for worker, log in zip(workers, logs):
        assert worker.returncode == 0, log[-4000:]
    chief, other = (_summary(log) for log in logs)
    assert chief["history"] == other["history"]  # identical metrics on both workers
    assert chief["step"] == other["step"] == 20
    assert chief["exported"] == str(tmp_path / "model") and other["exported"] is None
    assert sorted(os.listdir(tmp_path)) == ["checkpoints", "model", "run_config.json",
                                            "tensorboard"]


def _run_mirrored_scenario(train, spm, output):
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from albert_tf.training.pretrain.config import load_config
    from albert_tf.training.pretrain.run import run

    result = {}
    for strategy in ("default", "mirrored"):
        cfg = load_config(None, [*TINY, "train_steps=20", "global_batch_size=16",
                                 "warmup_steps=4", "learning_rate=0.02",
                                 "checkpoint_every=10", "steps_per_execution=2",
                                 "shuffle_buffer=200", "deterministic=true"],
                          train_data=train, spm_model=spm, strategy=strategy,
                          output_dir=os.path.join(output, strategy))
        summary = run(cfg)
        config = json.load(open(os.path.join(output, strategy, "run_config.json")))
        result[strategy] = {"history": summary["history"],
                            "replicas": config["resolved"]["replicas"]}
    return result


if __name__ == "__main__":
    scenario, *scenario_args = sys.argv[1:]
    assert scenario == "mirrored"
    print("RESULT " + json.dumps(_run_mirrored_scenario(*scenario_args)), flush=True)


# ---------------------------------------------------------------- whole checkpoints
def _small_checkpoints(directory):
    import keras

    from albert_tf.training.pretrain.progress import Checkpoints

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    return Checkpoints(model, str(directory), keep=2, chief=True)


def test_sigterm_during_a_checkpoint_save_lets_it_finish_whole(tmp_path, capsys):
    """SIGTERM that lands inside TensorFlow's save (its Python, between the shard write and
    the rename) used to leave ckpt-N_temp behind; the save now ends first."""
    from albert_tf.infra import cli

    checkpoints = _small_checkpoints(tmp_path)
    real_save = checkpoints.manager.save

    def save_with_sigterm_inside(**kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)  # the handler runs here, inside the manager's save
        return real_save(**kwargs)

    checkpoints.manager.save = save_with_sigterm_inside

    @cli.command("pretrain")
    def main():
        checkpoints.save(7)
        return 0

    assert main() == 128 + signal.SIGTERM
    assert capsys.readouterr().err.strip().endswith("albert-tf pretrain: terminated (SIGTERM)")
    names = sorted(os.listdir(tmp_path))
    assert "ckpt-7.index" in names and not [n for n in names if "_temp" in n], names
    restored = _small_checkpoints(tmp_path)
    assert restored.restore() == 7


def test_a_save_that_a_killed_run_left_half_written_is_removed(tmp_path):
    """kill -9 mid-save leaves TensorFlow's ckpt-N_temp directory; the next run (which holds
    the output directory) removes it and resumes from the last whole checkpoint."""
    first = _small_checkpoints(tmp_path)
    first.save(3)
    half = tmp_path / "ckpt-6_temp"
    half.mkdir()
    (half / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"\0" * 64)
    (tmp_path / "notes_temp").mkdir()  # not a checkpoint's: left alone
    again = _small_checkpoints(tmp_path)
    assert not half.exists() and (tmp_path / "notes_temp").is_dir()
    assert again.restore() == 3
