import time

import pytest

from tf_tutorial.bench import machine_label, median_time


def test_median_time_measures_the_call():
    calls = []

    def work():
        calls.append(1)
        time.sleep(0.01)

    t = median_time(work, repeat=3, warmup=2)
    assert len(calls) == 5
    assert 0.009 < t < 1.0


def test_median_time_bad_arguments():
    with pytest.raises(ValueError, match="repeat >= 1.*repeat=0"):
        median_time(lambda: None, repeat=0)


def test_machine_label_names_the_hardware_and_torch():
    label = machine_label()
    assert label.startswith(("CPU", "GPU")) and "torch" in label
