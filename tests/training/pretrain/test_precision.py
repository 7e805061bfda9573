"""`--precision auto` on a CPU: the candidates this CPU offers, timed, the fastest trains."""

import json
import time

import keras
import pytest

from tests.training.pretrain.test_run import TINY, records  # noqa: F401, F811 (a fixture: tests take it by name)


def test_candidates_follow_the_cpu_flags():
    from albert_tf.training.runtime import distribute

    candidates = distribute.cpu_training_candidates
    bf16 = [("float32", True), ("mixed_bfloat16", False)]
    assert candidates("auto", None, frozenset({"avx512f", "avx512_bf16"})) == bf16
    assert candidates("auto", None, frozenset({"amx_tile", "amx_bf16"})) == bf16
    assert candidates("auto", None, frozenset({"avx512f", "avx512_vnni"})) == [("float32", True)]
    assert candidates("auto", None, frozenset()) == [("float32", True)]
    # An XLA setting given by the run applies to every candidate.
    assert candidates("auto", False, frozenset({"amx_bf16"})) == [
        ("float32", False), ("mixed_bfloat16", False)]
    # An explicit precision is the one candidate, its alias resolved, XLA as given.
    assert candidates("bf16", None, frozenset({"amx_bf16"})) == [("mixed_bfloat16", None)]
    assert candidates("fp32", True, frozenset()) == [("float32", True)]
    with pytest.raises(ValueError, match="precision='int8'"):
        candidates("int8")
    assert distribute.candidate_name("float32", True) == "float32+xla"
    assert distribute.candidate_name("mixed_bfloat16", False) == "mixed_bfloat16"


class _Timed:
    """A stand-in training step that takes `seconds` (the first call `compile_s`)."""

    def __init__(self, seconds, compile_s=0.05):
        self.seconds, self.compile_s, self.calls, self.policy = seconds, compile_s, 0, None

    def __call__(self):
        self.calls += 1
        time.sleep(self.compile_s if self.calls == 1 else self.seconds)


def test_choose_times_every_candidate_and_takes_the_fastest():
    from albert_tf.training.pretrain import precision

    built = {}

    def build(policy, jit):
        built[policy] = model = _Timed({"float32": 0.02, "mixed_bfloat16": 0.005}[policy])
        model.policy = keras.config.dtype_policy().name  # the policy it was built under
        return model

    keras.config.set_dtype_policy("float32")
    choice = precision.choose([("float32", True), ("mixed_bfloat16", False)], build, steps=3)
    assert (choice.precision, choice.jit_compile) == ("mixed_bfloat16", False)
    assert choice.name == "mixed_bfloat16"
    assert set(choice.candidates) == {"float32+xla", "mixed_bfloat16"}
    # Each timed over its steps, the compiling first step left out.
    assert choice.candidates["float32+xla"] == pytest.approx(0.02, abs=0.015)
    assert choice.candidates["mixed_bfloat16"] < choice.candidates["float32+xla"]
    assert built["float32"].calls == built["mixed_bfloat16"].calls == 4
    assert built["mixed_bfloat16"].policy == "mixed_bfloat16"
    assert keras.config.dtype_policy().name == "float32"  # the global policy is restored
    # The slower one wins when it is the faster.
    def build_slow_bf16(policy, jit):
        return _Timed({"float32": 0.002, "mixed_bfloat16": 0.02}[policy])

    choice = precision.choose([("float32", True), ("mixed_bfloat16", False)], build_slow_bf16,
                              steps=3)
    assert choice.name == "float32+xla" and choice.jit_compile is True


def test_one_candidate_is_not_timed():
    from albert_tf.training.pretrain import precision

    def build(policy, jit):
        raise AssertionError("nothing to time")

    choice = precision.choose([("float32", True)], build)
    assert (choice.precision, choice.jit_compile, choice.candidates) == ("float32", True, {})


def _config(records, tmp_path, **changes):
    from albert_tf.training.pretrain.config import load_config

    options = dict(train_data=records["train"], spm_model=records["spm"],
                   output_dir=str(tmp_path / "run"), precision="auto")
    options.update(changes)
    return load_config(None, [*TINY, "global_batch_size=8", "shuffle_buffer=100"], **options)


def test_a_short_or_resumed_auto_run_is_not_measured(records, tmp_path, monkeypatch):
    from albert_tf.training.pretrain import precision, run
    from albert_tf.training.runtime import distribute

    monkeypatch.setattr(precision, "choose", lambda *a, **k: pytest.fail("measured"))
    strategy = distribute.create_strategy("default")
    short = _config(records, tmp_path, train_steps=precision.MEASURE_MIN_STEPS - 1)
    choice = run.resolve_precision(short, strategy, None, None, (64, 10), resuming=False)
    assert (choice.precision, choice.candidates) == ("auto", {})
    # A resumed run keeps what its run_config.json recorded.
    long = _config(records, tmp_path, train_steps=10_000)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run_config.json").write_text(json.dumps({"resolved": {
        "precision": "mixed_bfloat16", "xla": False,
        "precision_candidates": {"float32+xla": 0.3, "mixed_bfloat16": 0.2}}}))
    choice = run.resolve_precision(long, strategy, None, None, (64, 10), resuming=True)
    assert (choice.precision, choice.jit_compile) == ("mixed_bfloat16", False)
    assert choice.candidates == {"float32+xla": 0.3, "mixed_bfloat16": 0.2}


@pytest.mark.slow
def test_auto_times_this_cpus_candidates_on_the_runs_model(records, tmp_path):
    """The real trial: the run's model and data in each precision this CPU offers."""
    from albert_tf.training.pretrain import run
    from albert_tf.training.runtime import distribute

    try:
        choice = run.choose_precision(_config(records, tmp_path, train_steps=10_000))
    finally:
        keras.config.set_dtype_policy("float32")
    offered = distribute.cpu_training_candidates("auto")
    names = [distribute.candidate_name(*c) for c in offered]
    if len(offered) == 1:
        assert choice.candidates == {} and choice.name == names[0]
    else:
        assert list(choice.candidates) == names
        assert all(0 < seconds < 10 for seconds in choice.candidates.values())
        assert choice.candidates[choice.name] == min(choice.candidates.values())
