"""计时：与 ``torch.nn`` 并排、轮流测量、取中位数、报告比值（只打印和记录，从不断言）。

- ``clock``：计时的基本工具（``timed``、``median_time``、``interleaved_times``、``interleaved_medians``、
  ``ratio_quartiles``、
  ``describe_machine``、``machine_label``、``saved_activation_bytes``、``largest_tensor_bytes``、
  ``operation_names``）；各章的现场演示、
  ``scripts/gpu_run.py`` 和 ``compare`` 都用它们；
- ``compare``：附录 A 的各项比较（注意力、完整训练步及其 QKV 合并投影的消融、解码）和
  ``python -m benchmarks`` 的结果与记录（``run_all``、``write_record``）。
"""
from tf_tutorial.timing.clock import (describe_machine, interleaved_medians, interleaved_times,
                                      largest_tensor_bytes, machine_label, median_time, operation_names,
                                      ratio_quartiles, saved_activation_bytes, timed)

__all__ = ["describe_machine", "interleaved_medians", "interleaved_times", "largest_tensor_bytes",
           "machine_label", "median_time", "operation_names", "ratio_quartiles", "saved_activation_bytes",
           "timed"]
