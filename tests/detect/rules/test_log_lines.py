"""The built-in log rules on lines as PyTorch, NCCL, CUDA, the NVIDIA driver, Hugging Face,
DeepSpeed and Megatron-LM print them: each fatal line raises its kind, no benign line any."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from stepwatch.collect import LineGrouper
from stepwatch.detect import Alert, Engine, RuleSet, builtin_rules
from stepwatch.model import Event, SampleBatch

OOM, NCCL, IO, NAN, GPU = "log_oom", "log_nccl", "log_io_error", "log_nonfinite", "log_gpu_error"


@dataclass(frozen=True)
class Line:
    """A line as ``tool`` prints it and the log kinds it must raise (none: benign)."""

    tool: str
    text: str
    kinds: tuple[str, ...] = ()


FATAL = [
    # --- out of memory
    Line("torch 2.5 caching allocator", "torch.OutOfMemoryError: CUDA out of memory. Tried to "
         "allocate 1.95 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.58 GiB is free. "
         "Including non-PyTorch memory, this process has 77.50 GiB memory in use. Of the "
         "allocated memory 75.12 GiB is allocated by PyTorch, and 1.21 GiB is reserved by "
         "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.", (OOM,)),
    Line("torch 1.13 caching allocator", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried "
         "to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated; "
         "3.44 MiB free; 14.60 GiB reserved in total by PyTorch) If reserved memory is >> "
         "allocated memory try setting max_split_size_mb to avoid fragmentation.", (OOM,)),
    Line("torch 1.x caching allocator", "RuntimeError: CUDA out of memory. Tried to allocate "
         "36.00 MiB (GPU 0; 7.93 GiB total capacity; 130.35 MiB already allocated; 47.06 MiB "
         "free; 188.00 MiB reserved in total by PyTorch)", (OOM,)),
    Line("CUDA runtime (cudaErrorMemoryAllocation)", "RuntimeError: CUDA error: out of memory",
         (OOM,)),
    Line("torch.compile (Triton)", "RuntimeError: Triton Error [CUDA]: out of memory", (OOM,)),
    Line("cuBLAS", "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
         "`cublasCreate(handle)`", (OOM,)),
    Line("torch host allocator", "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. "
         "DefaultCPUAllocator: not enough memory: you tried to allocate 37984010240 bytes.",
         (OOM,)),
    Line("torch host allocator (old)", "RuntimeError: [enforce fail at CPUAllocator.cpp:71] . "
         "DefaultCPUAllocator: can't allocate memory: you tried to allocate 3221225472 bytes. "
         "Error code 12 (Cannot allocate memory)", (OOM,)),
    Line("kernel OOM killer", "Out of memory: Killed process 48213 (python) total-vm:98765432kB, "
         "anon-rss:87654321kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:171234kB "
         "oom_score_adj:0", (OOM,)),
    Line("kernel OOM killer (cgroup)", "Memory cgroup out of memory: Killed process 48213 "
         "(python) total-vm:98765432kB, anon-rss:87654321kB, file-rss:0kB", (OOM,)),
    Line("accelerate find_executable_batch_size",
         "RuntimeError: No executable batch size found, reached zero.", (OOM,)),
    Line("NCCL", "node3:48213:48290 [0] include/alloc.h:103 NCCL WARN Cuda failure 2 "
         "'out of memory'", (OOM, NCCL)),
    Line("NCCL", "node3:48213:48290 [0] include/alloc.h:125 NCCL WARN Failed to CUDA calloc "
         "6291456 bytes", (OOM, NCCL)),
    Line("NCCL via torch", "ncclUnhandledCudaError: Failed to CUDA calloc async 2432 bytes",
         (OOM, NCCL)),
    # --- collectives
    Line("torch watchdog", "[rank3]:[E1023 10:11:12.345678901 ProcessGroupNCCL.cpp:632] "
         "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12345, "
         "OpType=ALLREDUCE, NumelIn=52, NumelOut=52, Timeout(ms)=600000) ran for 600097 "
         "milliseconds before timing out.", (NCCL,)),
    Line("torch watchdog", "[rank1]:[E ProcessGroupNCCL.cpp:577] [Rank 1] Some NCCL operations "
         "have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent "
         "GPU operations might run on corrupted/incomplete data.", (NCCL,)),
    Line("torch watchdog", "[rank1]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 1] Process group "
         "watchdog thread terminated with exception: NCCL error: remote process exited or there "
         "was a network error, NCCL version 2.20.5", (NCCL,)),
    Line("torch watchdog", "[rank1]:[E ProcessGroupNCCL.cpp:1182] [PG 0 Rank 1] "
         "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in "
         "monitoring enqueued collectives.", (NCCL,)),
    Line("torch heartbeat monitor", "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] "
         "Heartbeat monitor timed out! Process will be terminated after dumping debug info. "
         "workMetaList_.size()=1", (NCCL,)),
    Line("torch NCCL result", "ncclRemoteError: A call failed possibly due to a network error "
         "or a remote process exiting prematurely.", (NCCL,)),
    Line("torch NCCL result", "torch.distributed.DistBackendError: NCCL error in: "
         "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error "
         "(run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3", (NCCL,)),
    Line("torch NCCL result", "ncclSystemError: System call (e.g. socket, malloc) or external "
         "library call failed or device error.", (NCCL,)),
    Line("torch NCCL result", "ncclInternalError: Internal check failed.", (NCCL,)),
    Line("torch", "RuntimeError: NCCL communicator was aborted on rank 3.", (NCCL,)),
    Line("torch NCCL result", "ncclUnhandledCudaError: Call to CUDA function failed.", (NCCL,)),
    Line("NCCL", "node1:1234:5678 [0] misc/socket.cc:47 NCCL WARN socketProgress: Connection "
         "closed by remote peer node2<51234>", (NCCL,)),
    Line("NCCL", "node1:1234:5678 [0] misc/socket.cc:538 NCCL WARN socketProgressOpt: Call to "
         "recv from 10.0.0.2<45074> failed : Connection reset by peer", (NCCL,)),
    Line("NCCL", "node1:1234:5678 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got "
         "completion from peer 10.0.0.2<45678> with error 12, opcode 32753, len 0, vendor err "
         "129 (Recv) localGid ::ffff:10.0.0.1 remoteGid ::ffff:10.0.0.2", (NCCL,)),
    Line("NCCL", "node1:1234:5678 [6] proxy.cc:1458 NCCL WARN [Service thread] Accept failed "
         "Resource temporarily unavailable", (NCCL,)),
    Line("NCCL (last error)", "socketProgress: Connection closed by remote peer "
         "gpu-node1<45074>", (NCCL,)),
    Line("c10d rendezvous", "torch.distributed.DistBackendError: [3] is setting up NCCL "
         "communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', "
         "but store->get('0') got error: wait timeout after 600000ms", (NCCL,)),
    Line("c10d rendezvous", "RuntimeError: [1] is setting up NCCL communicator and retrieving "
         "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got "
         "error: RPC failed", (NCCL,)),
    Line("c10d store", "torch.distributed.DistStoreError: Timed out after 901 seconds waiting "
         "for clients. 7/8 clients joined.", (NCCL,)),
    Line("c10d store", "torch.distributed.DistNetworkError: The client socket has timed out "
         "after 1800000ms while trying to connect to (node0, 29500).", (NCCL,)),
    Line("gloo", "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
         "closed by peer [10.0.0.2]:7107", (NCCL,)),
    # --- storage
    Line("Python", "OSError: [Errno 28] No space left on device: "
         "'/checkpoints/step_1200/model.safetensors'", (IO,)),
    Line("Python", "OSError: [Errno 122] Disk quota exceeded: '/checkpoints/step_300/model.pt'",
         (IO,)),
    Line("Python", "OSError: [Errno 5] Input/output error: '/mnt/shared/ckpt'", (IO,)),
    Line("Python", "OSError: [Errno 30] Read-only file system: '/checkpoints/step_900'", (IO,)),
    Line("Python (NFS)", "OSError: [Errno 116] Stale file handle", (IO,)),
    Line("torch.save", "RuntimeError: [enforce fail at inline_container.cc:588] . "
         "PytorchStreamWriter failed writing file data/12: file write failed", (IO,)),
    Line("torch.save", "RuntimeError: [enforce fail at inline_container.cc:664] . unexpected "
         "pos 56833600 vs 56833492", (IO,)),
    Line("safetensors", 'safetensors_rust.SafetensorError: Error while serializing: IoError(Os '
         '{ code: 28, kind: StorageFull, message: "No space left on device" })', (IO,)),
    Line("huggingface_hub (xet)", "RuntimeError: Data processing error: CAS service error : IO "
         "Error: No space left on device (os error 28)", (IO,)),
    Line("torch.distributed.checkpoint", "torch.distributed.checkpoint.api.CheckpointException: "
         "CheckpointException ranks:dict_keys([0, 1])", (IO,)),
    Line("kernel block layer", "blk_update_request: I/O error, dev nvme0n1, sector 123456 op "
         "0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0", (IO,)),
    Line("kernel ext4", "EXT4-fs error (device nvme0n1p1): ext4_find_entry:1455: inode #2: comm "
         "python: reading directory lblock 0", (IO,)),
    Line("kernel ext4", "EXT4-fs (nvme0n1p1): Remounting filesystem read-only", (IO,)),
    # --- non-finite loss
    Line("a training script's own check", "step 412: loss is nan, skipping update", (NAN,)),
    Line("torchvision references", "Loss is nan, stopping training", (NAN,)),
    Line("torchvision references", "Loss is inf, stopping training", (NAN,)),
    Line("Trainer", "{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.8e-05, 'epoch': 0.12}",
         (NAN,)),
    Line("JSON lines", '{"loss": NaN, "learning_rate": 4.8e-05, "epoch": 0.12, "step": 1200}',
         (NAN,)),
    Line("JSON lines", '{"loss": Infinity, "step": 1200}', (NAN,)),
    Line("Lightning progress bar", "Epoch 3:  42%|████▏     | 420/1000 [01:10<01:37,  "
         "5.95it/s, v_num=0, train_loss=nan]", (NAN,)),
    Line("Lightning EarlyStopping", "Monitored metric val_loss = nan is not finite. Previous "
         "best value was 2.315. Signaling Trainer to stop.", (NAN,)),
    Line("print(loss)", "tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)", (NAN,)),
    Line("Python's E format", "iter 1200 | loss=NAN | lr=3.0000E-04", (NAN,)),
    Line("a training script", "step 1200 | loss: -inf", (NAN,)),
    Line("a training script", "nan loss detected at step 1200", (NAN,)),
    Line("a training script", "Non-finite loss, ending training", (NAN,)),
    Line("detectron2", "FloatingPointError: Loss became infinite or NaN at iteration=1200!",
         (NAN,)),
    Line("Megatron-LM", "RuntimeError: Rank 3, node node07, device 3, iteration 1200: "
         "Unexpected result nan (message='found NaN in local forward loss calculation')",
         (NAN,)),
    Line("Megatron-LM", "AssertionError: Rank 13: found NaN in local grad norm in backward pass "
         "before data-parallel communication collective. Device: 5, node: node-15-11", (NAN,)),
    Line("Megatron-LM", " iteration     1200/  500000 | consumed samples:      1228800 | "
         "elapsed time per iteration (ms): 1532.4 | learning rate: 2.999E-04 | global batch "
         "size:  1024 | loss scale: 65536.0 | number of skipped iterations:   1 | number of nan "
         "iterations:   1 |", (NAN,)),
    Line("an iteration line in Megatron's format", " iteration     1200/  500000 | lm loss: "
         "NAN | loss scale: 1.0 |", (NAN,)),
    Line("torch clip_grad_norm_", "RuntimeError: The total norm of order 2.0 for gradients from "
         "`parameters` is non-finite, so it cannot be clipped. To disable this error and scale "
         "the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`", (NAN,)),
    Line("torch anomaly mode", "RuntimeError: Function 'LogSoftmaxBackward0' returned nan "
         "values in its 0th output.", (NAN,)),
    Line("Lightning detect_nan_parameters", "ValueError: Detected nan and/or inf values in "
         "`layer.weight`. Check your forward pass for numerically unstable operations.", (NAN,)),
    Line("DeepSpeed", "Exception: Current loss scale already at minimum - cannot decrease scale "
         "anymore. Exiting run.", (NAN,)),
    Line("fairseq", "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is "
         "probably exploding. Try lowering the learning rate, using gradient clipping or "
         "increasing the batch size.", (NAN,)),
    # --- GPU and driver
    Line("driver Xid 79", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1122, name=python, GPU has "
         "fallen off the bus.", (GPU,)),
    Line("driver", "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.", (GPU,)),
    Line("driver Xid 13", "kernel: [103859.498995] NVRM: Xid (PCI:0002:00:00): 13, "
         "pid=2519562, name=python3, Graphics Exception: ChID 000c, Class 0000cbc0, Offset "
         "00000000, Data 00000000", (GPU,)),
    Line("driver Xid 31", "NVRM: Xid (PCI:0000:00:06): 31, pid=79749, name=exe, Ch 0000000a, "
         "intr 00000000. MMU Fault: ENGINE GRAPHICS GPC2 GPCCLIENT_T1_7 faulted @ "
         "0x2b57_b3000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE", (GPU,)),
    Line("driver Xid 48", "[ 901.000] NVRM: Xid (PCI:0000:af:00): 48, An uncorrectable double "
         "bit error (DBE) has been detected on GPU in the framebuffer at partition 6, "
         "subpartition 0.", (GPU,)),
    Line("driver Xid 63", "NVRM: Xid (PCI:0000:86:00): 63, pid='<unknown>', name=<unknown>, "
         "Row Remapper: New row (0x0000000000000ce2) marked for remapping, reset gpu to "
         "activate.", (GPU,)),
    Line("driver Xid 94", "[168429.114550] NVRM: Xid (PCI:0000:65:00): 94, pid='<unknown>', "
         "name=<unknown>, Contained: CE User Channel (0x9). RST: No, D-RST: No", (GPU,)),
    Line("driver Xid 94 (MIG)", "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: "
         "CE User Channel (0x9). RST: No, D-RST: No", (GPU,)),
    Line("driver Xid 95", "NVRM: Xid (PCI:0000:65:00): 95, pid='<unknown>', name=<unknown>, "
         "Uncontained: FBHUB. RST: Yes, D-RST: No", (GPU,)),
    Line("driver", "NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x26:0x65:1601)", (GPU,)),
    Line("NVSwitch", "nvidia-nvswitch3: SXid (PCI:0000:07:00.0): 24007, Fatal, Link 36 "
         "sourcetrack TCEN0 crumbstore ECC DBE Error", (GPU,)),
    Line("nvidia-smi", "Unable to determine the device handle for gpu 0000:3B:00.0: GPU is "
         "lost.  Reboot the system to recover this GPU", (GPU,)),
    Line("CUDA via torch", "RuntimeError: CUDA error: an illegal memory access was encountered",
         (GPU,)),
    Line("CUDA via torch", "RuntimeError: CUDA error: unspecified launch failure", (GPU,)),
    Line("CUDA via torch", "RuntimeError: CUDA error: uncorrectable ECC error encountered",
         (GPU,)),
    Line("NCCL", "node1:1234:5678 [0] enqueue.cc:1556 NCCL WARN Cuda failure 'an illegal memory "
         "access was encountered'", (GPU, NCCL)),
]  # fmt: skip

BENIGN = [
    # torch and CUDA
    Line("torch", "[W ProcessGroupNCCL.cpp:1234] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is "
         "the default now"),
    Line("torch", "[rank0]:[W1105 10:12:13.123456 ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 "
         "Rank 0]  using GPU 0 to perform barrier as devices used by this process are currently "
         "unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect."),
    Line("torch", "[rank0]:[W ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has "
         "NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the "
         "application should call destroy_process_group to ensure that any pending NCCL "
         "operations have finished in this process."),
    Line("torch", "[W Utils.hpp:133] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is "
         "deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarInt)"),
    Line("torch", "[I ProcessGroupNCCL.cpp:686] [Rank 0] ProcessGroupNCCL initialization "
         "options: NCCL version: 2.19.3, TORCH_NCCL_ASYNC_ERROR_HANDLING: 1, "
         "TORCH_NCCL_DUMP_ON_TIMEOUT: 0, TORCH_NCCL_DESYNC_DEBUG: 0, TORCH_NCCL_BLOCKING_WAIT: "
         "0, TIMEOUT(ms): 600000, USE_HIGH_PRIORITY_STREAM: 0, NCCL_DEBUG: WARN"),
    Line("torch c10d (retrying)", "[W socket.cpp:663] [c10d] The client socket has failed to "
         "connect to [node0]:29500 (errno: 99 - Cannot assign requested address)."),
    Line("torch", "UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be "
         "passed explicitly"),
    Line("torch", "FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. Please "
         "use `torch.amp.GradScaler('cuda', args...)` instead."),
    Line("torch", "[W CUDAAllocatorConfig.h:28] Warning: expandable_segments not supported on "
         "this platform (function operator())"),
    Line("CUDA via torch (the program's own assert)",
         "RuntimeError: CUDA error: device-side assert triggered"),
    Line("a traceback naming loss code", "Traceback (most recent call last):\n  File "
         '"train.py", line 88, in <module>\n    print("Loss is {}, stopping training".format('
         "loss_value))\nKeyboardInterrupt"),
    # NCCL
    Line("NCCL", "node0:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"),
    Line("NCCL", "node0:1234:1290 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot "
         "open shared object file: No such file or directory No plugin found (libnccl-net.so), "
         "using internal implementation"),
    Line("NCCL", "node0:1234:1290 [0] NCCL INFO Failed to open libibverbs.so[.1]"),
    Line("NCCL", "node0:1234:1290 [0] NCCL INFO NCCL_IB_TIMEOUT set by environment to 22."),
    Line("NCCL", "node0:1234:1290 [0] NCCL INFO Call to connect returned Connection refused, "
         "retrying"),
    Line("NCCL", "node0:1234:1290 [0] NCCL INFO [Service thread] Connection closed by "
         "localRank 1"),
    Line("NCCL", "node0:1234:1290 [0] NCCL INFO comm 0x5581234 rank 0 nranks 16 cudaDev 0 "
         "nvmlDev 0 busId 18000 commId 0x1234abcd - Init COMPLETE"),
    Line("NCCL", "NCCL version 2.19.3+cuda12.3"),
    Line("NCCL fastsocket plugin", "node0:4024:4048 [0] net_fastsocket.cc:765 NCCL WARN Cannot "
         "get incoming CPU."),
    Line("NCCL fastsocket plugin", "node0:4300:4325 [0] net_fastsocket.cc:785 NCCL WARN Maximum "
         "retry reached for accept 3."),
    # Hugging Face
    Line("Trainer", "There were missing keys in the checkpoint model loaded: ['lm_head.weight']."),
    Line("transformers", "Some weights of BertForSequenceClassification were not initialized "
         "from the model checkpoint at bert-base-uncased and are newly initialized: "
         "['classifier.bias', 'classifier.weight']"),
    Line("transformers", "`loss_type=None` was set in the config but it is unrecognised.Using "
         "the default loss: `ForCausalLMLoss`."),
    Line("transformers", "`use_cache=True` is incompatible with gradient checkpointing. Setting "
         "`use_cache=False`."),
    Line("Trainer", "{'eval_loss': 2.31, 'eval_runtime': 12.34, 'eval_samples_per_second': "
         "81.03, 'eval_steps_per_second': 5.07, 'epoch': 1.0}"),
    Line("Trainer (fp16 step skipped by the grad scaler)",
         "{'loss': 1.9832, 'grad_norm': inf, 'learning_rate': 4.8e-05, 'epoch': 0.12}"),
    Line("huggingface_hub", "UserWarning: Not enough free disk space to download the file. The "
         "expected file size is: 4999.80 MB. The target location /mnt/azureml/model only has "
         "0.00 MB free disk space."),
    Line("huggingface_hub (retrying)", "'(MaxRetryError(\"HTTPSConnectionPool(host="
         "'huggingface.co', port=443): Max retries exceeded with url: /gpt2/resolve/main/"
         "config.json (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object "
         "at 0x7f2b>: Failed to establish a new connection: [Errno 101] Network is "
         "unreachable'))\"), '(Request ID: 1b2c)')' thrown while requesting HEAD "
         "https://huggingface.co/gpt2/resolve/main/config.json"),
    Line("datasets (retrying)", "Got disconnected from remote data host. Retrying in 5sec "
         "[1/20]"),
    Line("accelerate", "Detected kernel version 5.4.0, which is below the recommended minimum "
         "of 5.5.0; this can cause the process to hang. It is recommended to upgrade the kernel "
         "to the minimum version or higher."),
    # DeepSpeed and apex: dynamic loss scaling backs off by design
    Line("DeepSpeed", "[2023-07-24 13:21:32,378] [INFO] [loss_scaler.py:183:update_scale] "
         "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4294967296, "
         "reducing to 2147483648"),
    Line("DeepSpeed", "[2023-11-06 11:54:09,446] [INFO] [logging.py:96:log_dist] [Rank 0] "
         "Overflow detected. Skipping step. Attempted loss scale: 65536, reducing to 32768.0"),
    Line("DeepSpeed", "[2023-11-06 11:54:09,446] [INFO] [fused_optimizer.py:348:_update_scale] "
         "Reducing dynamic loss scale from 65536 to 32768.0"),
    Line("DeepSpeed", "Grad overflow on iteration 0"),
    Line("DeepSpeed", "[2024-01-10 10:00:00,000] [WARNING] [stage3.py:2069:step] 4 pytorch "
         "allocator cache flushes since last step. this happens when there is high memory "
         "pressure and is detrimental to performance."),
    Line("DeepSpeed", "[2024-01-10 10:00:00,000] [INFO] [torch_checkpoint_engine.py:33:commit] "
         "[Torch] Checkpoint global_step1200 is ready now!"),
    Line("apex amp", "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to "
         "32768.0"),
    # Megatron-LM
    Line("Megatron-LM", " iteration       50/    1000 | consumed samples:          200 | "
         "elapsed time per iteration (ms): 661.3 | learning rate: 1.497E-04 | global batch "
         "size:     4 | lm loss: 8.238016E+00 | loss scale: 16384.0 | grad norm: 2.555 | "
         "number of skipped iterations:   1 | number of nan iterations:   0 |"),
    Line("Megatron-LM", "validation loss at iteration 1000 | lm loss value: 2.345678E+00 | "
         "lm loss PPL: 1.043923E+01 |"),
    Line("Megatron-LM arguments", "  check_for_nan_in_loss_and_grad .................. True"),
    # metrics that name nan in prose
    Line("torchmetrics", "UserWarning: Encountered `nan` values in tensor. Will be removed."),
    Line("a per-class metric (a class absent from the batch)",
         "val_acc_per_class: tensor([0.9100, nan, 0.8800])"),
    Line("a settings dump", "NaN loss guard: enabled (skip_nan_loss=True)"),
    Line("tensorboardX (a logged scalar; the metric rules judge the values)",
         "Warning: NaN or Inf found in input tensor."),
    # the driver
    Line("driver Xid 45 (cleanup after a process exits)",
         "NVRM: Xid (PCI:0000:3b:00): 45, pid=4242, name=python3, Ch 00000008"),
    Line("driver Xid 45", "NVRM: Xid (PCI:0000:90:00): 45, pid=31462, Preemptive cleanup, due to "
         "previous errors"),
    Line("driver Xid (non-fatal)", "NVRM: Xid (PCI:0000:1b:00): 145, RLW_SRC_TRACK Nonfatal XC1 "
         "i0 Link 10"),
    Line("NVSwitch (non-fatal)", "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, "
         "Link 44 MC TS crumbstore MCTO (First)"),
    Line("driver", "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 "
         "18:56:32 UTC 2023"),
    Line("driver", "NVRM: GPU at PCI:0000:3b:00: GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7"),
    Line("driver", "NVRM: Persistence mode is deprecated and will be removed in a future "
         "release. Please use nvidia-persistenced instead."),
    # storage: an OSError alone is not a storage fault
    Line("a training script's own retry", "WARNING: retrying shard fetch after OSError: "
         "[Errno 104] Connection reset by peer (attempt 1 of 5)"),
    Line("a training script's own retry", "INFO: retrying data shard fetch (attempt 1 of 5): "
         "connection reset, recovered"),
    Line("Python (a wrong path)", "FileNotFoundError: [Errno 2] No such file or directory: "
         "'data/train.bin'"),
    Line("a training script", "saved checkpoint to /checkpoints/step_1200 (errors: 0)"),
    Line("kernel (a virtual CD-ROM)", "blk_update_request: I/O error, dev sr0, sector 0 op "
         "0x0:(READ) flags 0x0 phys_seg 1 prio class 0"),
    Line("kernel (a virtual CD-ROM)", "Buffer I/O error on dev sr0, logical block 0, async page "
         "read"),
    # what every run prints
    Line("a training script", "step 100 | loss 3.2041 | lr 3.000e-04 | grad_norm 0.812"),
    Line("a training script", "eval at step 500: val_loss 2.4410"),
    Line("a tokenizer", "WARNING: tokenizer: 3 samples were truncated to max_length=4096"),
    Line("a health check", "no error"),
]  # fmt: skip


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    return builtin_rules()


def _logs(*events: Event) -> SampleBatch:
    """A batch of log events and no samples."""
    none = np.empty(0)
    return SampleBatch("test", 0, [], none.astype(np.uint32), none, none.astype(np.int64), none,
                       list(events))  # fmt: skip


def _fired(rules: RuleSet, text: str) -> list[Alert]:
    """The alerts one log event with ``text`` raises in a fresh engine on the built-in pack."""
    event = Event(10.0, "log", text, {"run": "r", "node": "node1", "rank": "3"})
    return Engine(rules).process(_logs(event))


@pytest.mark.parametrize("line", FATAL + BENIGN, ids=lambda line: line.tool)
def test_a_line_raises_what_its_tool_means_by_it(rules: RuleSet, line: Line) -> None:
    alerts = _fired(rules, line.text)
    assert sorted(a.kind for a in alerts) == sorted(line.kinds), line.text
    assert all(a.annotations["line"] == line.text for a in alerts)


def test_every_log_rule_has_real_lines_that_raise_it(rules: RuleSet) -> None:
    log_kinds = {rule.kind for rule in rules.rules if rule.signal.log is not None}
    assert {kind for line in FATAL for kind in line.kinds} == log_kinds


def test_an_excluded_xid_does_not_hide_the_fault_that_follows_it(rules: RuleSet) -> None:
    engine = Engine(rules)
    labels = {"run": "r", "node": "node1"}
    cleanup = Event(10.0, "log", "NVRM: Xid (PCI:0000:3b:00): 45, pid=4242, Ch 00000008", labels)
    lost = Event(11.0, "log", "NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.",
                 labels)  # fmt: skip
    assert [(a.kind, a.ts) for a in engine.process(_logs(cleanup, lost))] == [(GPU, 11.0)]


OOM_TRACEBACK = [
    "[rank3]: Traceback (most recent call last):",
    '[rank3]:   File "/workspace/train.py", line 212, in <module>',
    "[rank3]:     loss = model(**batch).loss",
    '[rank3]:   File "/usr/lib/python3.11/site-packages/torch/nn/functional.py", line 2567, in '
    "embedding",
    "[rank3]:     return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)",
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 3 has a "
    "total capacity of 79.10 GiB of which 1.58 GiB is free.",
    "[rank3]: step 1201 | loss 2.3140 | lr 3.000e-04 | grad_norm 0.812",
]


def test_a_traceback_is_judged_as_the_one_event_it_arrives_as(rules: RuleSet) -> None:
    grouper = LineGrouper({"run": "r", "node": "node1"})
    events = [e for i, line in enumerate(OOM_TRACEBACK) for e in grouper.feed(line, 10.0 + i)]
    events += grouper.flush()
    assert [e.data.get("traceback", False) for e in events] == [True, False]
    alerts = Engine(rules).process(_logs(*events))
    assert [(a.kind, a.ts, a.labels) for a in alerts] == [
        (OOM, 10.0, {"run": "r", "node": "node1"})
    ]
    assert alerts[0].annotations["line"].endswith("1.58 GiB is free.")
