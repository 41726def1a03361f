"""What a simulated node sends each tick: its ranks' training metrics, its GPUs' and its host's,
at levels no rule of the built-in pack fires on by itself (the load benchmarks share it)."""

GPUS = 8
#: Run-level training metrics come from rank 0, as in the vocabulary; timings from every rank.
RUN = ("train.loss", "train.grad_norm", "train.tokens_per_s")
TRAIN = ("train.step_time_s", "train.compute_time_s", "train.data_time_s", "train.comm_time_s")
GPU = ("gpu.util_pct", "gpu.mem_used_bytes", "gpu.mem_total_bytes", "gpu.temp_c",
       "gpu.power_w", "gpu.power_limit_w")  # fmt: skip
HOST = ("host.cpu_pct", "host.mem_used_bytes", "host.mem_total_bytes", "stepwatch.heartbeat_s")
#: Typical level and noise of each metric, so that no rule of the pack fires by itself.
LEVEL = {
    "train.loss": (2.0, 0.01), "train.grad_norm": (1.0, 0.05), "train.step_time_s": (0.5, 0.005),
    "train.compute_time_s": (0.35, 0.004), "train.data_time_s": (0.02, 0.001),
    "train.comm_time_s": (0.1, 0.002), "train.tokens_per_s": (250_000.0, 2_000.0),
    "gpu.util_pct": (97.0, 1.0), "gpu.mem_used_bytes": (60e9, 1e8),
    "gpu.mem_total_bytes": (80e9, 0.0), "gpu.temp_c": (65.0, 1.0), "gpu.power_w": (600.0, 10.0),
    "gpu.power_limit_w": (700.0, 0.0), "host.cpu_pct": (40.0, 3.0),
    "host.mem_used_bytes": (500e9, 1e8), "host.mem_total_bytes": (2e12, 0.0),
    "stepwatch.heartbeat_s": (1.0, 0.0),
}  # fmt: skip
