"""tf_tutorial.timing.clock: the timers, and the description of the machine every record carries."""

import pytest
import torch

from tf_tutorial.timing.clock import (describe_machine, interleaved_medians, interleaved_times,
                                      machine_label, median_time, ratio_quartiles, timed)


def test_median_time_measures_the_call(monkeypatch):
    fn = _fake_clock(monkeypatch, [9.0, 9.0, 3.0, 1.0, 2.0])      # two warm-ups, then three timed calls
    calls = []
    t = median_time(lambda: calls.append(1) or fn(), repeat=3, warmup=2)
    assert len(calls) == 5
    assert t == 2.0                                                # the median of 3, 1, 2; warm-ups not counted


def test_median_time_bad_arguments():
    with pytest.raises(ValueError, match="^repeat must be a positive integer, but got 0$"):
        median_time(lambda: None, repeat=0)
    with pytest.raises(ValueError, match="^repeat must be a positive integer, but got 2.5$"):
        median_time(lambda: None, repeat=2.5)          # was range()'s TypeError
    with pytest.raises(ValueError, match="^warmup must be an integer >= 0, but got '1'$"):
        interleaved_medians({"a": lambda: None}, warmup="1")


def test_interleaved_medians_run_in_turns():
    order = []
    fns = {name: (lambda name=name: order.append(name)) for name in "abc"}
    times = interleaved_medians(fns, repeat=30, warmup=1)
    assert "".join(order[:3]) == "abc"                          # warm-up of each, then turns
    rounds = ["".join(order[i:i + 3]) for i in range(3, len(order), 3)]
    assert len(rounds) == 30 and all(sorted(r) == ["a", "b", "c"] for r in rounds)
    # a new order each round: every function is timed first, second and last
    assert all({r[place] for r in rounds} == set("abc") for place in range(3))
    assert list(times) == ["a", "b", "c"] and all(t >= 0 for t in times.values())


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_williams_orders_balance_places_and_predecessors(n):
    from collections import Counter

    from tf_tutorial.timing.clock import williams_orders
    rows = williams_orders(n)
    assert len(rows) == (2 * n if n % 2 and n > 1 else n)
    assert all(sorted(r) == list(range(n)) for r in rows)
    for place in range(n):
        assert Counter(r[place] for r in rows) == Counter({i: len(rows) // n for i in range(n)})
    pairs = Counter((r[i], r[i + 1]) for r in rows for i in range(n - 1))
    assert len(pairs) == n * (n - 1) and len(set(pairs.values())) <= 1   # every ordered pair, equally often


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_every_block_of_rounds_times_each_function_once_in_each_place(n):
    """Independent random orders could repeat: with 3 functions the fixed seed drew the same
    order in all 3 rounds of chapter 12's attention-path timing."""
    order = []
    names = "abcde"[:n]
    interleaved_times({k: (lambda k=k: order.append(k)) for k in names}, repeat=2 * n, warmup=0)
    rounds = [order[i:i + n] for i in range(0, len(order), n)]
    for block in (rounds[:n], rounds[n:]):
        for place in range(n):
            assert sorted(r[place] for r in block) == list(names)
    assert rounds[:n] != rounds[n:]                     # the next block starts from a new order


def test_interleaved_medians_do_not_favour_a_place_in_the_order(monkeypatch):
    """Whatever is timed second in a round runs slow (as a kernel may, after another that leaves
    the cache cold). In one fixed order that is always "b"; in a new order each round no function
    is second in most rounds, so no median is slow."""
    calls, clock = [0], [0.0]

    def fn():
        clock[0] += 3.0 if calls[0] % 3 == 1 else 1.0
        calls[0] += 1
    import types

    import tf_tutorial.timing.clock as clock_module
    monkeypatch.setattr(clock_module, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    times = interleaved_medians({k: fn for k in "abc"}, repeat=9, warmup=0)
    assert times == {"a": 1.0, "b": 1.0, "c": 1.0}


def _fake_clock(monkeypatch, durations):
    """perf_counter advances by the next of ``durations`` on each timed call."""
    import types

    import tf_tutorial.timing.clock as clock_module
    clock, it = [0.0], iter(durations)

    def fn():
        clock[0] += next(it)
    monkeypatch.setattr(clock_module, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    return fn


def test_interleaved_times_keep_one_entry_per_round_in_round_order(monkeypatch):
    order = []
    fns = {name: (lambda name=name: order.append(name)) for name in "ab"}
    times = interleaved_times(fns, repeat=4, warmup=0)
    assert list(times) == ["a", "b"] and all(len(t) == 4 for t in times.values())
    # the k-th call of each function is its k-th entry, whatever order a round drew
    fn = _fake_clock(monkeypatch, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    calls = []
    times = interleaved_times({k: (lambda k=k: calls.append(k) or fn()) for k in "ab"},
                              repeat=3, warmup=0)
    expected = {"a": [], "b": []}
    for k, d in zip(calls, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]):
        expected[k].append(d)
    assert times == expected
    assert interleaved_medians({"a": lambda: None}, repeat=3, warmup=0).keys() == {"a"}


def test_ratio_quartiles_divide_within_a_round():
    # b is exactly twice a in every round although both drift 10x between rounds:
    # the per-round ratio has no spread, the pooled times would
    times = {"a": [1.0, 10.0, 2.0, 5.0], "b": [2.0, 20.0, 4.0, 10.0]}
    q = ratio_quartiles(times, "a")
    assert q["a"] == (1.0, 1.0) and q["b"] == pytest.approx((2.0, 2.0))
    q = ratio_quartiles({"a": [1.0] * 5, "b": [1.0, 2.0, 3.0, 4.0, 5.0]}, "a")
    assert q["b"] == pytest.approx((2.0, 4.0))
    assert ratio_quartiles({"a": [2.0], "b": [3.0]}, "a")["b"] == (1.5, 1.5)
    with pytest.raises(KeyError, match="base='c' is not one of the timed names"):
        ratio_quartiles(times, "c")
    with pytest.raises(ValueError, match="'b' has 1 rounds but base='a' has 4"):
        ratio_quartiles({"a": [1.0] * 4, "b": [1.0]}, "a")


def test_timed_returns_the_result_and_the_seconds(monkeypatch):
    fn = _fake_clock(monkeypatch, [0.25])
    out, seconds = timed(lambda: fn() or 42)
    assert out == 42 and seconds == 0.25


def test_describe_machine_names_the_hardware_torch_and_date():
    m = describe_machine("cpu")
    assert m["device"] == "cpu" and m["torch"] == torch.__version__
    assert m["threads"] == torch.get_num_threads() and m["cpus"] >= 1
    assert m["slug"].startswith("cpu-") and m["slug"].endswith(f"-{m['cpus']}core")
    assert m["slug"] == m["slug"].lower() and " " not in m["slug"]
    assert m["date"][:2] == "20" and m["label"].startswith("CPU") and "torch" in m["label"]


def test_machine_label_names_the_hardware_and_torch():
    label = machine_label()
    assert label.startswith(("CPU", "GPU")) and "torch" in label
    assert machine_label("cpu") == describe_machine("cpu")["label"]


def test_the_label_shortens_the_cpus_model_name_to_fit_a_line():
    from tf_tutorial.timing.clock import _short_cpu_name
    assert _short_cpu_name("Intel(R) Xeon(R) Processor") == "Intel Xeon"
    assert _short_cpu_name("Intel(R) Core(TM) i7-10700 CPU @ 2.90GHz") == "Intel Core i7-10700"
    assert _short_cpu_name("AMD EPYC 7B13 64-Core Processor") == "AMD EPYC 7B13 64-Core"
    assert _short_cpu_name("AMD EPYC") == "AMD EPYC" and _short_cpu_name("Processor") == "Processor"


def test_a_gpu_record_names_the_cudnn_version(monkeypatch):
    # chapter 10's cuDNN-attention question needs it; the first H200 record lacked it
    from types import SimpleNamespace
    props = SimpleNamespace(name="NVIDIA H200", total_memory=140 * 2**30, major=9, minor=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda dev: props)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91500)
    m = describe_machine("cuda")
    assert (m["cudnn"], m["capability"], m["slug"]) == (91500, "9.0", "gpu-nvidia-h200")
