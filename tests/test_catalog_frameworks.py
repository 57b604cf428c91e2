"""End-to-end checks of the training-framework catalog (docs/catalog-cat-frameworks.md): a small job
directory per family, with the lines as the emitter prints them (launcher prefixes included), through
`analyze`; the verdict's category and the evidence citing the key line (path:line)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from forensics.analysis import analyze

TB = "Traceback (most recent call last):\n"

CASES = {
    "pytorch-oom": ({"rank3.log": (
        "[default3]:[2025-03-02 10:00:00,100] [INFO] [training] step 1200 loss 2.41\n"
        f"[default3]:{TB}"
        '[default3]:  File "/workspace/train.py", line 88, in <module>\n'
        "[default3]:    loss.backward()\n"
        "[default3]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
        "capacity of 79.11 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in use.\n"
    )}, "oom", "rank3.log", 5),
    "jax-resource-exhausted": ({"train.log": (
        "I1101 10:00:00.000000 140000 train.py:120] step 10\n"
        "2023-11-01 10:00:05.000000: W external/xla/xla/tsl/framework/bfc_allocator.cc:482] Allocator (GPU_0_bfc) "
        "ran out of memory trying to allocate 4.44GiB (rounded to 4770354432)requested by op \n"
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232 bytes.\n"
        "BufferAssignment OOM Debugging.\n"
        "BufferAssignment stats:\n"
        "             parameter allocation:  372.76MiB\n"
        "                 total allocation:   14.44GiB\n"
    )}, "oom", "train.log", 3),
    "tf-oom": ({"train.log": (
        "2019-05-01 10:00:00.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1115] Created TensorFlow device\n"
        "    self._traceback = self._graph._extract_stack()  # pylint: disable=protected-access\n"
        "\n"
        "ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[5760,4,4,2048]\n"
        "         [[Node: fc1/convolution/SpaceToBatchND = SpaceToBatchND[T=DT_FLOAT, "
        '_device="/job:localhost/replica:0/task:0/device:GPU:0"](res5c_relu)]]\n'
    )}, "oom", "train.log", 4),
    "deepspeed-loss-scale-floor": ({"train.log": "".join(
        f"[2021-12-19 16:54:{s:02d},098] [INFO] [unfused_optimizer.py:275:_update_scale] Grad overflow on iteration: {445299 + s}\n"
        f"[2021-12-19 16:54:{s:02d},098] [INFO] [unfused_optimizer.py:277:_update_scale] Reducing dynamic loss scale from 1 to 1\n"
        f"[2021-12-19 16:54:{s:02d},099] [INFO] [unfused_optimizer.py:202:step] [deepspeed] fp16 dynamic loss scale overflow! "
        "Skipping step. Attempted loss scale: 1, reducing to 1\n" for s in range(10, 14))
    }, "numerics", "train.log", 2),
    "fairseq-minimum-loss-scale": ({"train.log": (
        "2021-01-01 10:00:00 | INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 0.0002\n"
        f"{TB}"
        '  File "/opt/fairseq/fairseq/optim/dynamic_loss_scaler.py", line 61, in check_overflow\n'
        "    raise FloatingPointError(\n"
        "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the "
        "learning rate, using gradient clipping or increasing the batch size.\n"
    )}, "numerics", "train.log", 5),
    "port-in-use": ({"train.log": (
        "Start training ...\n"
        "[W socket.cpp:401] [c10d] The server socket has failed to bind to [::]:29400 (errno: 98 - Address already in use).\n"
        "[W socket.cpp:401] [c10d] The server socket has failed to bind to 0.0.0.0:29400 (errno: 98 - Address already in use).\n"
        "[E socket.cpp:435] [c10d] The server socket has failed to listen on any local network address.\n"
    )}, "user_code", "train.log", 2),
    "checkpoint-write": ({"rank0.log": (
        "[rank0]: [2025-06-01 08:00:00,000] saving checkpoint at iteration 2000 to /lustre/ckpt\n"
        f"[rank0]: {TB}"
        '[rank0]:   File "/workspace/megatron/training/checkpointing.py", line 410, in save_checkpoint\n'
        "[rank0]:     torch.save(state_dict, checkpoint_name)\n"
        '[rank0]:   File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 850, in save\n'
        "[rank0]:     _save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)\n"
        "[rank0]: RuntimeError: File /lustre/ckpt/iter_0002000/mp_rank_00/model_optim_rng.pt cannot be opened.\n"
    )}, "storage", "rank0.log", 7),
    "dataloader-shm": ({"train.log": (
        "Epoch 0: 6843.771 seconds\n"
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
        f"{TB}"
        '  File "/opt/conda/lib/python3.6/site-packages/torch/utils/data/dataloader.py", line 480, in _try_get_batch\n'
        "    data = self.data_queue.get(timeout=timeout)\n"
        "RuntimeError: DataLoader worker (pid 325) is killed by signal: Bus error.\n"
    )}, "oom", "train.log", 2),
    "glog-sigsegv": ({"train.log": (
        "I0101 11:59:59.000000 4242 train.py:10] step 5\n"
        '*** Aborted at 1700000000 (unix time) try "date -d @1700000000" if you are using GNU date ***\n'
        "PC: @     0x7f3a2b1c4d5e (unknown)\n"
        "*** SIGSEGV (@0x0) received by PID 4242 (TID 0x7f3a00000700) from PID 0; stack trace: ***\n"
        "    @     0x7f3a2b1c4d5e (unknown)\n"
        "Segmentation fault (core dumped)\n"
    )}, "framework_bug", "train.log", 4),
    "collective-mismatch": ({"train.log": (
        "[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=3104, OpType=ALLREDUCE, TensorShape=[195812480], TensorDtypes=BFloat16), "
        "but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=3104, OpType=ALLREDUCE, "
        "TensorShape=[51123456], TensorDtypes=BFloat16).Collectives differ in the following aspects:   "
        "Tensor Tensor shapes: 195812480vs 51123456\n"
    )}, "collective_desync", "train.log", 1),
    # JAX/TF coordination service (signatures/tsl.toml): the start-up registration barrier, srun-labelled,
    # newer wording; the older RegisterTask RPC deadline; a later user barrier (a hang signal); a task's own
    # root fault with the survivors' `another task died` teardown; TF's collective abort alone (teardown: unknown)
    "jax-coord-registration-failed-srun": ({"job.err": (
        "0: I1101 10:00:00.000000 140000 distributed.py:90] Connecting to JAX distributed service on 10.0.0.1:1234\n"
        "0: E1101 11:00:00.000000 140000 coordination_service.cc:1400] Stopping coordination service as cluster "
        "registration failed. This may be due to 1) some tasks crashed earlier before connecting, 2) some tasks were "
        "never scheduled, or 3) scheduling delays. Consider setting a longer initialization timeout if such delays "
        "are expected, the timeout is currently set to: 1h.\n"
    )}, "nccl_config", "job.err", 2),
    "jax-coord-registertask-deadline": ({"task1.log": (
        "Additional GRPC error information from remote target unknown_target_for_coordination_leader while calling "
        "/tensorflow.CoordinationService/RegisterTask:\n"
        ':{"created":"@1712965181.656280441","description":"Deadline Exceeded","grpc_status":4}\n'
        "2024-04-12 23:39:41.656900: E external/xla/xla/pjrt/distributed/client.cc:96] Coordination service agent "
        "in error status: DEADLINE_EXCEEDED: Deadline Exceeded\n"
    )}, "nccl_config", "task1.log", 1),
    "jax-user-barrier-timeout": ({"train.log": (
        '  File "/home/u/levanter/src/levanter/utils/jax_utils.py", line 75, in multihost_broadcast_sync\n'
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
        "multihost_broadcast_sync0. Timed out task names:\n"
        "/job:jax_worker/replica:0/task:3\n"
    )}, "comm_hang_unknown", "train.log", 2),
    "jax-task-oom-survivors-teardown": ({
        "task3.log": "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
                     "allocate 6291456 bytes.\n",
        "task0.log": (
            "E0926 17:26:32.075402  157988 coordination_service_agent.cc:332] Polled an error from coordination "
            "service (this can be an error from this or another task).\n"
            "F0926 17:26:32.075587  157988 client.h:77] Terminating process because the JAX distributed service "
            "detected fatal errors. This most likely indicates that another task died; see the other task logs for "
            "more details. absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):\n"
            "/job:jax_worker/replica:0/task:3\n")}, "oom", "task3.log", 1),
    "tf-collective-abort-alone": ({"worker.log": (
        "INFO:tensorflow:loss = 3.7297182, step = 10300 (50.581 sec)\n"
        "2019-05-19 15:08:13.128241: E tensorflow/core/common_runtime/ring_reducer.cc:369] Aborting RingReduce "
        "with Unavailable: Socket closed\n"
        "2019-05-19 15:08:13.128323: W tensorflow/core/common_runtime/base_collective_executor.cc:203] "
        "BaseCollectiveExecutor::StartAbort Unavailable: Socket closed\n"
    )}, "unknown", "worker.log", 2),
    # Gloo under ProcessGroupGloo (parsers/pytorch.py GLOO_BY_TEXT, signatures/pytorch.toml gloo-*): the address /
    # interface choice and the full mesh that never formed are configuration; a peer lost mid-run is a cascade of
    # the rank that died first; a size mismatch is ranks running different collectives
    "gloo-ifname-not-an-interface": ({"rank0.log": (
        "[default0]:Traceback (most recent call last):\n"
        '[default0]:  File "/workspace/train.py", line 30, in <module>\n'
        '[default0]:    dist.init_process_group("gloo")\n'
        "[default0]:RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != "
        "nullptr. Unable to find address for: ib0\n"
    )}, "nccl_config", "rank0.log", 4),
    "gloo-mesh-loopback-after-cascade": ({"worker.log": (
        "[rank9]:[W802 08:50:03.100000000 ProcessGroupGloo.cpp:721] Warning: Unable to resolve hostname to a (local) "
        "address. Using the loopback address as fallback. Manually set the network interface to bind to with "
        "GLOO_SOCKET_IFNAME. (function operator())\n"
        "[rank8]:[E802 08:50:03.200000000 ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed with "
        "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n"
        "ERROR 08-02 08:50:03 worker_base.py:382] Error executing method init_device. This might cause deadlock in "
        "distributed execution.\n"
        "RuntimeError: Engine core initialization failed\n"
    )}, "nccl_config", "worker.log", 2),
    "gloo-peer-closed-after-oom": ({
        "rank1.log": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
                     "capacity of 23.64 GiB of which 1.02 GiB is free.\n",
        "rank0.log": "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
                     "[10.0.0.2]:10895\n"}, "oom", "rank1.log", 1),
    "gloo-size-mismatch": ({"train.log": (
        "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] op.preamble.length <= "
        "op.nbytes. 881920 vs 58880. Received data size doesn't match expected size. Is there a distributed "
        "collective mismatch in your code?\n"
    )}, "collective_desync", "train.log", 1),
    # Open MPI (parsers/mpi.py, signatures/mpi.toml): a lost daemon names its node; a rank's SIGSEGV is the root
    "openmpi-remote-daemon-lost": ({"launcher.log": (
        "ORTE has lost communication with a remote daemon.\n\n"
        "  HNP daemon   : [[64112,0],0] on node wmaster-desktop\n"
        "  Remote daemon: [[64112,0],1] on node 10.126.10.10\n\n"
        "This is usually due to either a failure of the TCP network\n"
    )}, "host_hardware", "launcher.log", 1),
    "openmpi-rank-segfault": ({"out.log": (
        "[1,0]<stdout>:epoch 1 step 10 loss 0.5\n"
        "mpirun noticed that process rank 0 with PID 636815 on node fl98 exited on signal 11 (Segmentation fault).\n"
    )}, "framework_bug", "out.log", 2),
    # a DTensor-only method on a plain tensor inside a library's FSDP2 path (pytorch.toml
    # pt-dtensor-api-on-plain-tensor): a library bug, not the user's training code
    "dtensor-api-on-plain-tensor": ({"rank1.log": (
        f"[rank1]: {TB}"
        '[rank1]:   File "/usr/local/lib/python3.11/site-packages/accelerate/utils/fsdp_utils.py", line 601, in fsdp2_load_full_state_dict\n'
        "[rank1]:     device_mesh = sharded_param.device_mesh\n"
        "[rank1]:                   ^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "[rank1]: AttributeError: 'Tensor' object has no attribute 'device_mesh'\n"
    )}, "framework_bug", "rank1.log", 5),
    # the parallel layout does not fit the ranks launched (pytorch.toml parallel-layout-mismatch), through srun -l
    "megatron-world-size-not-divisible": ({"slurm-4242.out": (
        '1: [rank1]:   File "/opt/megatron-lm/megatron/core/parallel_state.py", line 532, in initialize_model_parallel\n'
        '1: [rank1]:     raise RuntimeError(f"world_size ({world_size}) is not divisible by {total_model_size}")\n'
        "1: [rank1]: RuntimeError: world_size (1) is not divisible by 2\n"
    )}, "user_code", "slurm-4242.out", 3),
    # a resume with another DP world size than the save (pytorch.toml ckpt-model-mismatch)
    "deepspeed-resume-other-dp-world-size": ({"train.log": (
        f"[rank0]: {TB}"
        '[rank0]:   File "/usr/local/lib/python3.10/dist-packages/deepspeed/runtime/engine.py", line 3068, in _load_zero_checkpoint\n'
        '[rank0]:     raise ZeRORuntimeException("The checkpoint being loaded used a DP " \\\n'
        "[rank0]: deepspeed.runtime.zero.utils.ZeRORuntimeException: The checkpoint being loaded used a DP world size of 8 "
        "but the current world size is 16. Automatic adjustment of ZeRO's optimizer state partitioning with a new world "
        "size is not currently supported.\n"
    )}, "user_code", "train.log", 4),
    # FSDP1 refusing a wrapped unit with frozen and trainable parameters (pytorch.toml fsdp-flatten-mixed-params)
    "fsdp1-flatten-requires-grad": ({"rank2.log": (
        '[rank2]:   File "/usr/lib/python3/dist-packages/torch/distributed/fsdp/_flat_param.py", line 761, in _validate_tensors_to_flatten\n'
        "[rank2]:     raise ValueError(\n"
        "[rank2]: ValueError: Must flatten tensors with uniform `requires_grad` when `use_orig_params=False`\n"
    )}, "user_code", "rank2.log", 3),
}


def _analyze(job_of: Callable[[dict[str, str]], Path], tmp_path: Path, files: dict[str, str]) -> dict:
    return analyze(job_of(files), tmp_path / "out", html=False).report


@pytest.mark.parametrize("case", sorted(CASES))
def test_family_end_to_end(tmp_path: Path, job_of: Callable[[dict[str, str]], Path], case: str) -> None:
    files, category, path, line = CASES[case]
    rep = _analyze(job_of, tmp_path, files)
    v = rep["verdict"]
    assert v["category"] == category, (case, v["category"], v["summary"])
    assert any(e["path"] == path and e["line"] == line for e in v["evidence"]), v["evidence"]


def test_loss_scale_warmup_is_not_a_numerics_failure(tmp_path: Path, job_of: Callable[[dict[str, str]], Path]) -> None:
    """The healthy control: dynamic loss scaling halving its scale at the start, then steady steps."""
    rep = _analyze(job_of, tmp_path, {"train.log": "".join(
        f"OVERFLOW! Skipping step. Attempted loss scale: {2.0 ** (23 - i)}\n" for i in range(7))
        + "Train iter       16 loss 49.316841 Grad Norm 10.800460 3.22s/it\n"
        + "OVERFLOW! Skipping step. Attempted loss scale: 65536.0\n"
        + "".join(f"Train iter       {i} loss {40.0 / (i - 16):.6f} Grad Norm 8.0 3.18s/it\n" for i in range(18, 25))})
    assert all(i["category"] != "numerics" for i in rep["interruptions"])
    assert rep["verdict"]["category"] != "numerics"


def test_openmpi_lost_daemon_blames_the_remote_node(tmp_path: Path, job_of: Callable[[dict[str, str]], Path]) -> None:
    files, *_ = CASES["openmpi-remote-daemon-lost"]
    v = _analyze(job_of, tmp_path, files)["verdict"]
    assert (v["culprit"]["host"], v["auto_recoverable"]) == ("10.126.10.10", True)


def test_gloo_loopback_warning_on_one_host_is_no_failure(tmp_path: Path, job_of: Callable[[dict[str, str]], Path]) -> None:
    """The healthy control: ProcessGroupGloo's loopback fallback on a single-node run that goes on serving."""
    rep = _analyze(job_of, tmp_path, {"serve.log": (
        "[rank0]:[W ProcessGroupGloo.cpp:721] Warning: Unable to resolve hostname to a (local) address. Using the "
        "loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. "
        "(function operator())\n"
        "INFO 05-04 14:43:20 model_runner.py:173] Loading model weights took 14.9595 GB\n"
        "INFO 05-04 14:43:29 model_runner.py:1057] Graph capturing finished in 5 secs.\n")})
    assert rep["verdict"]["kind"] == "none", rep["verdict"]
