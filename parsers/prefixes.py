"""The prefix layer: wrappers that launchers and collectors put in front of a log line, as data.

Each `Wrapper` is one shape a launcher/collector prints at the start of a line (mpirun's
`[1,12]<stdout>:`, pdsh's `node-017: `, docker's `2024-05-01T10:00:00.123Z `, ...), with the
hints it carries (host, rank, local rank, task, stamp) and examples that run as tests
(tests/parsers/test_prefixes.py). `peel` strips them from a whole column at once, in up to
MAX_PEELS rounds over the lines still wrapped (wrappers nest in any order). A round: one pass of
the whole table as one anchored alternation (no captures) keeps the lines some wrapper fits;
each is dispatched on its first character to the wrappers that can start with it, in table
order, and the first that matches wins (what the alternation would pick); the prefix is cut
with a capture-free replace, and the hints are read from the distinct prefixes only. No Python
work per line: a round costs a few polars passes over the lines it holds.

Hints: when two wrappers of one line name the same thing, the innermost (nearest the content)
wins. How parsers weigh them (DESIGN §3, docs/architecture.md): what the content itself says
first (an NCCL `host:pid:tid` prefix, a syslog host, `[rankN]:`), then the wrapper's hint, then
the path's (`records.line_host`).

Before the wrappers: a byte-order mark is dropped, and a JSON log record (a collector's line:
docker's json-file, fluentd, Elastic, CloudWatch, zap, GCP, Loki) is replaced by its message, its
time and node or pod kept as hints (`_json_records`).

Counter-examples (lines that must stay as they are) run as tests too: Python logging prefixes,
exception names (`RuntimeError: `), metric lines (`top-1: 76.5`), journald / syslog headers
(the kernel parser reads those), torchelastic's `[0]:` table rows, column-aligned tables.

Patterns are valid in both Python `re` and the Rust regex engine polars uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import polars as pl

from parsers.ascii_regex import ascii_classes

MAX_PEELS = 6  # wrappers peeled per line at most (the deepest nesting seen is four)
HINTS = ("host", "rank", "local_rank", "task", "stamp")


@dataclass(frozen=True)
class Wrapper:
    """One wrapper shape. `regex` is the prefix itself (named groups give the hints: host, rank,
    local_rank, task, stamp); `guard` what the text right after it must start with (not peeled);
    `veto` a pattern over the whole line that, when it matches, leaves the line alone; `stamp`
    how the stamp group reads (iso, ctime, epoch_ms); `first` the characters it can start with;
    `not_after` the names of the wrappers it cannot sit inside (a launcher's own label is put on
    outside the process's tags: what follows such a tag is the process's text, not this wrapper);
    `suffix` a pattern (anchored at the end) cut from the body of the lines this wrapper peeled (a
    column the layout prints after the message). `examples`: (line, body, hints)."""
    name: str
    regex: str
    first: str = r"."  # a character class: what the line's first character can be (dispatch)
    guard: str = ""
    veto: str = ""
    stamp: str = "iso"
    not_after: tuple[str, ...] = ()
    suffix: str = ""
    examples: tuple[tuple[str, str, dict], ...] = field(default_factory=tuple)


_ISO_Z = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)"
_ISO_OFF = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?[+-]\d\d:\d\d"
_CTIME = r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d \d{4}"
# rich's time column: strftime of "[%x %X]" / "[%X]" in any locale (digits and separators, maybe AM/PM)
_RICH_TIME = r"\[\d[\d/.:,\- ]{3,24}(?: ?[AaPp][Mm])?\]"
# rich's time column and the space after it: an ISO datefmt (a stamp hint), any other strftime, or blanked
_RICH_TIME_COLUMN = r"(?:\[(?P<stamp>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\]|" + _RICH_TIME + r"| {9,28}) "
# rich's path column after the message: `record.filename:lineno`, at least one space before it
_RICH_PATH = r"\s+[\w.<>-]+\.py:\d+\s*$"
# a line that looks like a log line (what a weak pdsh host needs after it)
_LOGLIKE = (r" *(?:\[|\(|<|\d{4}-\d\d-\d\d|[A-Z][a-z]{2} [ \d]?\d \d\d:|NVRM: |kernel: |NCCL |Traceback "
            r"|[EWIF]\d{4} |[^\s:]+:\d+:\d+ )")
# host-like tokens that are not hosts: exception/warning names, tool names, config and metric keys
_NOT_HOST = (
    r"^[A-Za-z0-9_.-]*(?:Error|Exception|Warning|Warn|Fault|Failure|Interrupt|Exit|Iteration|error|exception"
    r"|warning|failure): "
    r"|^(?:GPU|MIG)-|^0x"
    # rdma-core's user-space providers print `PFX "%s: got completion with error:"` with PFX "mlx5: " /
    # "mlx4: " (providers/mlx5/cq.c, providers/mlx4): the driver's name, then the host's
    r"|^mlx[45]: "
    # slurmstepd built with MULTIPLE_SLURMD logs as `slurmstepd-<NodeName>: ` (src/slurmd/slurmstepd/
    # slurmstepd.c, log_set_argv0): the daemon's name with its node, read by the Slurm parser, not pdsh
    r"|^slurmstepd-[^\s:]+: "
    r"|^(?i:python|pip|perl|ruby|gcc|g\+\+|clang|nvcc|cc1plus|ld|bash|sh|zsh)[\d._-]*: "
    r"|^(?i:fp\d+|bf16|tf32|int\d+|uint\d+|float\d+|sha\d+|md5|utf-?8|x86_64|aarch64|ipv[46]|http\d?"
    r"|top-?\d+|acc@?\d+|resnet\d+|vgg\d+|gpt-?\d\w*|t5|layer\d+|conv\d+|stage\d+|block\d+|cuda\d*|sm_?\d+"
    r"|rank\d+|step\d+|epoch\d+|iter\d+|batch\d+): "
    r"|^[^\s:]+: [-+]?\.?\d[\d.eE+-]*%?\s*$"  # key: number (a metric), not pdsh
    r"|^[^\s:]+: (?i:true|false|none|null)\s*$"  # key: bool (a config dump)
)

WRAPPERS: tuple[Wrapper, ...] = (
    Wrapper(
        "CloudWatch console export (<stamp with a numeric offset>, a tab or a run of spaces)",
        r"[ \t]*(?P<stamp>" + _ISO_OFF + r")(?:\t| {2,})[ \t]*",
        first=r"[0-9 \t]",
        examples=(
            ("2022-04-11T16:17:42.292+02:00   [2022-04-11 14:17:41,719][lightning][INFO] - Epoch 0",
             "[2022-04-11 14:17:41,719][lightning][INFO] - Epoch 0", {"stamp": "2022-04-11T16:17:42.292+02:00"}),
            ("    2022-04-11T16:36:41.905+02:00   [2022-04-11 14:36:41,197][lightning][INFO] - Epoch 1",
             "[2022-04-11 14:36:41,197][lightning][INFO] - Epoch 1", {"stamp": "2022-04-11T16:36:41.905+02:00"}),
        ),
    ),
    Wrapper(
        # gcloud's job log streamers print each Cloud Logging entry through a `value(...)` format (tab-separated
        # columns): `gcloud ai custom-jobs stream-logs` (command_lib/ai/log_util.py LOG_FORMAT: severity,
        # timestamp.date("%Y-%m-%d %H:%M:%S %z", tz=LOCAL), task_name, message) and `gcloud ai-platform jobs
        # stream-logs` (command_lib/ml_engine/log_utils.py: the same with trial_id before the message, empty
        # outside a tuning job); the console's log view copies the same columns. Tabs often arrive expanded to
        # spaces. The severity is Cloud Logging's LogSeverity, which for a container's plain text is the stream's
        # (stderr -> ERROR, stdout -> INFO: a tqdm bar reads `ERROR`), not the process's: it is peeled with the
        # columns, and whatever the message itself says stays for the parsers. The task (`workerpool0-0`,
        # `master-replica-0`) is a replica, one machine: the host hint
        "Cloud Logging via gcloud stream-logs / console (SEVERITY  <stamp +zzzz>  <task>  [trial]  message)",
        # the columns end at tab stops: a tab, or the spaces a tab expands to at 8 (severity to column 8, or 16
        # for CRITICAL / EMERGENCY; the 25-character stamp plus 7); a Python logging format such as
        # `%(levelname)-8s %(asctime)s %(name)s` pads otherwise, keeps its level word and stays whole
        r"(?:(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL|ALERT|EMERGENCY)\t|DEFAULT |DEBUG {3}|INFO {4}"
        r"|NOTICE {2}|WARNING |ERROR {3}|ALERT {3}|CRITICAL {8}|EMERGENCY {7})"
        r"(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4})(?:\t| {7})"
        r"(?P<host>[A-Za-z][\w.-]*)(?:\t\d{1,6}\t|\t{1,2}| {1,16})",
        stamp="zone_after_space", first=r"[A-Z]",
        examples=(
            # GoogleCloudPlatform/vertex-ai-samples#242 (tabs expanded at 8)
            ("ERROR   2022-01-26 14:19:41 +1100       workerpool0-0   Configuration saved in /tmp/ckpt-6000/config.json",
             "Configuration saved in /tmp/ckpt-6000/config.json",
             {"stamp": "2022-01-26 14:19:41+1100", "host": "workerpool0-0"}),
            ("INFO\t2022-01-26 14:19:41 +1100\tworkerpool0-0\t{'loss': 5.3862, 'epoch': 3.14}",
             "{'loss': 5.3862, 'epoch': 3.14}", {"stamp": "2022-01-26 14:19:41+1100", "host": "workerpool0-0"}),
            ("ERROR\t2019-03-01 10:00:00 -0800\tmaster-replica-0\t\tRuntimeError: CUDA error: out of memory",
             "RuntimeError: CUDA error: out of memory", {"stamp": "2019-03-01 10:00:00-0800", "host": "master-replica-0"}),
            ("INFO\t2019-03-01 10:00:00 -0800\tworker-replica-1\t7\tstep 10 loss 2.5", "step 10 loss 2.5",
             {"stamp": "2019-03-01 10:00:00-0800", "host": "worker-replica-1"}),
            ("CRITICAL        2019-03-01 10:00:00 -0800       master-replica-0        Segmentation fault",
             "Segmentation fault", {"stamp": "2019-03-01 10:00:00-0800", "host": "master-replica-0"}),
            # a Python logging line with its own level stays whole
            ("ERROR 2024-05-01 10:00:00,123 train.py:12 failed", "ERROR 2024-05-01 10:00:00,123 train.py:12 failed", {}),
            ("ERROR    2024-05-01 10:00:00 +0000 root boom", "ERROR    2024-05-01 10:00:00 +0000 root boom", {}),
            ("WARNING  2024-05-01 10:00:00 +0000       trainer    slow step",
             "WARNING  2024-05-01 10:00:00 +0000       trainer    slow step", {}),
            ("ERROR:root:2024-05-01 10:00:00 +0000 boom", "ERROR:root:2024-05-01 10:00:00 +0000 boom", {}),
        ),
    ),
    Wrapper(
        "kubectl logs / docker logs --timestamps, CRI log file (<stamp> stdout F ), mpirun ISO --timestamp-output",
        r"(?P<stamp>" + _ISO_Z + r")(?: (?:stdout|stderr) [FP] |: |:| )",
        # journald short-iso-precise (`<stamp> <host> kernel: ...`) is the kernel parser's
        veto=r"^[ \t]*\S+ [A-Za-z0-9][\w.-]* (?:kernel|[\w./-]+\[\d+\]): ",
        first=r"[0-9]",
        examples=(
            ("2024-05-01T10:00:00.123456789Z [12345.678] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
             "[12345.678] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
             {"stamp": "2024-05-01T10:00:00.123456789Z"}),
            ("2016-10-06T00:17:09.669794202Z stdout F step 10 loss 2.5",
             "step 10 loss 2.5", {"stamp": "2016-10-06T00:17:09.669794202Z"}),
            ("2019-06-02T16:13:44.884Z: [1,12]<stdout>:node1:815:864 [0] NCCL WARN NET/IB : Got async event : local catastrophic error",
             "node1:815:864 [0] NCCL WARN NET/IB : Got async event : local catastrophic error",
             {"stamp": "2019-06-02T16:13:44.884Z", "rank": 12}),
            ("2024-05-01T10:00:00.5Z   File \"train.py\", line 3, in <module>", "  File \"train.py\", line 3, in <module>",
             {"stamp": "2024-05-01T10:00:00.5Z"}),
            ("2024-05-01T10:00:00.123456+00:00 node-017 kernel: NVRM: Xid (PCI:0000:3b:00): 79",
             "2024-05-01T10:00:00.123456+00:00 node-017 kernel: NVRM: Xid (PCI:0000:3b:00): 79", {}),
            ("2024-05-01T10:00:00+0000 node-017 kernel: NVRM: Xid (PCI:0000:3b:00): 79",
             "2024-05-01T10:00:00+0000 node-017 kernel: NVRM: Xid (PCI:0000:3b:00): 79", {}),
            ("2024-05-01 10:00:00,123 - INFO - step 3", "2024-05-01 10:00:00,123 - INFO - step 3", {}),
        ),
    ),
    Wrapper(
        "OpenMPI / Horovod --timestamp-output (ctime, before the tag)",
        r"(?P<stamp>" + _CTIME + r")(?:: ?)?", guard=r"(?:\[\d+(?:,\d+)?\])?<std", stamp="ctime",
        first=r"[A-Z]",
        examples=(
            ("Mon Jun  3 16:13:44 2019[1,0]<stderr>:RuntimeError: CUDA error: an illegal memory access was encountered",
             "RuntimeError: CUDA error: an illegal memory access was encountered",
             {"stamp": "2019-06-03 16:13:44", "rank": 0}),
            ("Tue Jun 11 09:01:02 2024[3]<stdout>:Epoch 1 step 20", "Epoch 1 step 20",
             {"stamp": "2024-06-11 09:01:02", "rank": 3}),
        ),
    ),
    Wrapper(
        "mpirun --tag-output ([jobid,rank]<stream>:)",
        r"\[\d+,(?P<rank>\d+)\]<(?:stdout|stderr|stddiag)>:",
        first=r"\[",
        examples=(
            ("[1,3]<stdout>:smc-gpu-03:29881:30401 [0] NCCL INFO init.cc:903 -> 5",
             "smc-gpu-03:29881:30401 [0] NCCL INFO init.cc:903 -> 5", {"rank": 3}),
            ("[1,0]<stderr>:[rank0]: torch.OutOfMemoryError: CUDA out of memory.",
             "torch.OutOfMemoryError: CUDA out of memory.", {"rank": 0}),
            ("[1,2]<stdout>:", "", {"rank": 2}),
        ),
    ),
    Wrapper(
        "horovodrun / gloo ([rank]<stream>:)",
        r"\[(?P<rank>\d+)\]<(?:stdout|stderr)>:",
        first=r"\[",
        examples=(
            ("[5]<stderr>:Traceback (most recent call last):", "Traceback (most recent call last):", {"rank": 5}),
        ),
    ),
    Wrapper(
        # srun(1) `-l, --label`: "Prepend task number to lines of stdout/err": srun puts it on the lines it
        # relays, outside whatever the task printed, so it is never inside an MPI/gloo/Ray/torchrun/PyTorch
        # tag: after one, `0: [name]` is the process's own text (Horovod's stall inspector lists
        # `Missing ranks:` as `<rank>: [tensor, ...]`, horovod/common/stall_inspector.cc)
        "Slurm srun -l / --label (task id)",
        r" {0,4}(?P<task>\d{1,6}): ",
        first=r"[0-9 ]",
        # a whole line `R: [names]` (no `]:` tag inside, nothing after the list) is the stall inspector's
        # row printed bare, not a task's labelled line
        veto=r"^ {0,4}\d{1,6}: \[(?:[^\]]|\][^:])*\]\s*$",
        not_after=("mpirun --tag-output ([jobid,rank]<stream>:)", "horovodrun / gloo ([rank]<stream>:)",
                   "Ray worker/actor output ((Actor pid=N, ip=A.B.C.D), (raylet))",
                   "PyTorch >= 2.2 global rank ([rankN]:)",
                   "torchrun --tee / --log-dir local rank ([<role><local_rank>]:, role `default` unless set)",
                   "Lightning / Fabric rank_zero prefix ([rank: N] )"),
        examples=(
            ("1: compute-st-p4de24xlarge-2:4827:6900 [4] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4",
             "compute-st-p4de24xlarge-2:4827:6900 [4] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4",
             {"task": 1}),
            ("12: [default3]:[rank99]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 99] Watchdog caught",
             "[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 99] Watchdog caught",
             {"task": 12, "local_rank": 3, "rank": 99}),
            # inside a tag (OpenMPI --timestamp-output + gloo tag, horovod#2285): the stall inspector's row stays
            ("Fri Sep 18 03:11:09 2020[0]<stderr>:8: [broadcast_object_fn.sz]", "8: [broadcast_object_fn.sz]",
             {"stamp": "2020-09-18 03:11:09", "rank": 0}),
            ("[1,0]<stdout>:0: [allreduce.grad_0]", "0: [allreduce.grad_0]", {"rank": 0}),
            ("(WorkerDict pid=7) 3: step done", "3: step done", {}),
            ("0: [cond_1/then/_10/cond_1/SGD/PartitionedCall/DistributedSGD_Allreduce/cond/HorovodAllreduce_grads_0]",
             "0: [cond_1/then/_10/cond_1/SGD/PartitionedCall/DistributedSGD_Allreduce/cond/HorovodAllreduce_grads_0]", {}),
            ("3: [rank3]: RuntimeError: boom", "RuntimeError: boom", {"task": 3, "rank": 3}),
        ),
    ),
    Wrapper(
        # ray/_private/worker.py print_worker_logs: "({prefix}{pid}{, ip=...}) " where prefix_for gives
        # `<actor or task name> pid=` for a worker and nothing for the raylet and the autoscaler (whose pid
        # field is `raylet` / `autoscaler +<elapsed>`): `(raylet) `, `(raylet, ip=10.0.0.7) `
        "Ray worker/actor output ((Actor pid=N, ip=A.B.C.D), (raylet))",
        r"\((?:(?:[A-Za-z_][\w.]* )?pid=\d+|raylet|autoscaler \+[\dhms]+)(?:, ip=(?P<host>\d{1,3}(?:\.\d{1,3}){3}))?\) ",
        first=r"\(",
        examples=(
            ("(raylet) A worker died or was killed while executing a task by an unexpected system error.",
             "A worker died or was killed while executing a task by an unexpected system error.", {}),
            ("(raylet, ip=10.0.7.57) node_manager.cc:3040: 1 Workers (tasks / actors) killed due to memory pressure (OOM)",
             "node_manager.cc:3040: 1 Workers (tasks / actors) killed due to memory pressure (OOM)", {"host": "10.0.7.57"}),
            ("(RayTrainWorker pid=1234, ip=10.0.0.7) [rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] x",
             "[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] x", {"host": "10.0.0.7", "rank": 3}),
            ("(WorkerDict pid=63294) step 3", "step 3", {}),
            ("(pid=4242, ip=172.31.5.10) Epoch 1", "Epoch 1", {"host": "172.31.5.10"}),
        ),
    ),
    Wrapper(
        # `torchx log` / the runner's log tee (torchx/util/log_tee_helpers.py _print_log_lines_for_role_replica,
        # torchx/cli/cmd_log.py print_log_lines): prefix = f"{GREEN}{role}/{replica_id}{ENDC} ", the colour
        # only on a TTY. The replica id is the role's replica (a node's agent), not a rank: no hint
        "TorchX role/replica (<role>/<replica> )",
        r"(?:\x1b\[32m)?[A-Za-z][A-Za-z0-9_-]{0,62}/\d{1,5}(?:\x1b\[0m)? ", guard=r"\S",
        first=r"[A-Za-z\x1b]",
        examples=(
            ("ray/0 (CommandActor pid=494406) INFO:torch.distributed.elastic.agent.server.api:[] Starting worker group",
             "INFO:torch.distributed.elastic.agent.server.api:[] Starting worker group", {}),
            ("\x1b[32mtrainer/3\x1b[0m [rank3]:RuntimeError: CUDA error: an illegal memory access was encountered",
             "RuntimeError: CUDA error: an illegal memory access was encountered", {"rank": 3}),
            ("Epoch 1/10 loss 0.5", "Epoch 1/10 loss 0.5", {}),
            ("and/or 3 more", "and/or 3 more", {}),
        ),
    ),
    Wrapper(
        "tee / nl / per-process pid ([N] )",
        r"\[\d+\] ",
        first=r"\[",
        examples=(
            ("[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught",
             "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught", {"rank": 0}),
            ("[0]:", "[0]:", {}),  # a torchelastic ChildFailedError table row: content
            ("[12345.678] NVRM: Xid", "[12345.678] NVRM: Xid", {}),
        ),
    ),
    Wrapper(
        "PyTorch >= 2.2 global rank ([rankN]:)",
        r"\s*\[rank(?P<rank>\d+)\]: ?",
        first=r"[\[\s]",
        examples=(
            ("    [rank7]:[E816 01:45:40.183009389 ProcessGroupNCCL.cpp:607] [Rank 7] Watchdog caught",
             "[E816 01:45:40.183009389 ProcessGroupNCCL.cpp:607] [Rank 7] Watchdog caught", {"rank": 7}),
            ("[rank3]:     _verify_param_shape_across_processes(self.process_group, parameters)",
             "    _verify_param_shape_across_processes(self.process_group, parameters)", {"rank": 3}),
        ),
    ),
    Wrapper(
        "torchrun --tee / --log-dir local rank ([<role><local_rank>]:, role `default` unless set)",
        r"\[(?:[A-Za-z_][A-Za-z_-]*?)(?P<local_rank>\d+)\]:",
        first=r"\[",
        examples=(
            ("[default0]:=== Straggler Report at Step 10 ===", "=== Straggler Report at Step 10 ===", {"local_rank": 0}),
            ("[trainer5]:[rank13]:RuntimeError: NCCL communicator was aborted", "RuntimeError: NCCL communicator was aborted",
             {"local_rank": 5, "rank": 13}),
        ),
    ),
    Wrapper(
        "Lightning / Fabric rank_zero prefix ([rank: N] )",
        r"\[rank: (?P<rank>\d+)\] ",
        first=r"\[",
        examples=(
            ("[rank: 3] Seed set to 42", "Seed set to 42", {"rank": 3}),
        ),
    ),
    Wrapper(
        "kubectl logs --prefix ([pod/<pod>/<container>] )",
        r"\[pod/(?P<host>[^/\s\]]+)/[^\]\s]+\] ",
        first=r"\[",
        examples=(
            ("[pod/trainer-worker-3/pytorch] [rank3]: RuntimeError: CUDA error: unspecified launch failure",
             "RuntimeError: CUDA error: unspecified launch failure", {"host": "trainer-worker-3", "rank": 3}),
            ("2024-05-01T10:00:00.5Z [pod/w-0/main] x", "x", {"host": "w-0", "stamp": "2024-05-01T10:00:00.5Z"}),
        ),
    ),
    Wrapper(
        "workflow engine task log (<stamp> [run/step/task (pid N)] [id] )",
        r"(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) \[(?:[^\]\s/]+/)+[^\]\s]+ \(pid \d+\)\] "
        r"(?:\[[0-9a-fA-F-]{8,}\] )?",
        first=r"[0-9]",
        examples=(
            ("2024-03-02 11:22:33.456 [1709/train/7 (pid 4242)] [c0ffee00-1111-2222-3333-444455556666] "
             "[rank1]:[E302 11:22:33.000000000 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught",
             "[E302 11:22:33.000000000 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught",
             {"stamp": "2024-03-02 11:22:33.456", "rank": 1}),
            ("2024-03-02 11:22:33.456 [train/7 (pid 4242)] Task is starting.", "Task is starting.",
             {"stamp": "2024-03-02 11:22:33.456"}),
        ),
    ),
    Wrapper(
        # a log console's export stamped to the minute, one space before it (NVIDIA/nccl#1610: a cloud
        # training platform's viewer); only before a process's own tag (`[rankN]:`, `[E...`) or an NCCL
        # `host:pid:tid [dev]` prefix, so a record whose own stamp merely lacks seconds stays whole
        "log-console export stamped to the minute ( <YYYY-MM-DD HH:MM> , before a tag or an NCCL prefix)",
        r" ?\d{4}-\d\d-\d\d \d\d:\d\d ", guard=r"(?:\[|[A-Za-z0-9][\w.-]*:\d+:\d+ \[\d+\] )",
        first=r"[0-9 ]",
        examples=(
            (" 2025-02-18 12:54 [rank13]:[E218 04:54:22.864467604 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught",
             "[E218 04:54:22.864467604 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught", {"rank": 13}),
            (" 2025-02-18 12:54 ncivki7qpk7pmo1btv0h0:180:915 [7] NCCL INFO misc/socket.cc:47 -> 3",
             "ncivki7qpk7pmo1btv0h0:180:915 [7] NCCL INFO misc/socket.cc:47 -> 3", {}),
            ("2025-02-18 12:54 loss went down", "2025-02-18 12:54 loss went down", {}),
        ),
    ),
    Wrapper(
        "web-UI log export (<row> | <epoch ms> | )",
        r" *\d+ \| (?P<stamp>\d{13}) \| ", stamp="epoch_ms",
        first=r"[0-9 ]",
        examples=(
            ("17 | 1714557600123 | [rank2]:[E501 10:00:00.123 ProcessGroupNCCL.cpp:607] x",
             "[E501 10:00:00.123 ProcessGroupNCCL.cpp:607] x", {"stamp": "2024-05-01T10:00:00.123+00:00", "rank": 2}),
        ),
    ),
    Wrapper(
        # rich's RichHandler (rich/logging.py, rich/_log_render.py LogRender): a grid with padding 1 of the
        # columns time (`log_time_format`, default "[%x %X]"; the formatter's `datefmt` when it has one;
        # blanked to as many spaces when it repeats the previous record's, `omit_repeated_times`), level
        # (`level_name.ljust(8)`), message, then `record.filename:lineno` right-aligned at the console's
        # width. A message that wraps or has several lines continues under the message column, time and
        # level blank (those lines stay as they are: an indented text without a column to tell it by).
        # A format with `%(asctime)s` prints the time once more at the message's start: cut with it.
        # `[%x %X]` is month/day/year or day/month/year by locale: no stamp hint; an ISO datefmt gives one.
        # Below error level the columns go; an ERROR / CRITICAL record keeps its level word (next wrapper).
        "rich RichHandler columns below error level ([time] LEVEL-padded-to-8, file.py:N at the end)",
        _RICH_TIME_COLUMN +
        r"(?:DEBUG {4}|INFO {5}|WARNING {2}|NOTSET {3})(?:" + _RICH_TIME + r" )?",
        guard=r"\S", suffix=_RICH_PATH,
        first=r"[\[ ]",
        examples=(
            # so-vits-svc-fork#330 (RichHandler with datefmt "[%X]" and `%(asctime)s %(message)s`)
            ("[23:52:12] WARNING  [23:52:12] C:\\venv\\lib\\site-packages\\torch\\_utils.py:776: UserWarning:        "
             "warnings.py:109",
             "C:\\venv\\lib\\site-packages\\torch\\_utils.py:776: UserWarning:", {}),
            # rich 13 defaults (`[%x %X]`), the time blanked on a record in the same second
            ("[12/03/26 15:01:31] DEBUG    debug message                                       richgen.py:9",
             "debug message", {}),
            ("                    INFO     Epoch 1 step 20 loss 2.5                            richgen.py:9",
             "Epoch 1 step 20 loss 2.5", {}),
            ("           WARNING  [15:01:31] a warning                                        richgen.py:9",
             "a warning", {}),
            ("[2024-05-01 10:00:00] INFO     Epoch 1 step 20                                   train.py:88",
             "Epoch 1 step 20", {"stamp": "2024-05-01 10:00:00"}),
            ("[03:01:31 PM] INFO     saved checkpoint                              callbacks.py:140",
             "saved checkpoint", {}),
            # a continuation row (under the message column) and other layouts stay whole
            ("                    long message a very long message a very long message",
             "                    long message a very long message a very long message", {}),
            ("[15:01:31] INFO epoch 1", "[15:01:31] INFO epoch 1", {}),
            ("[2024-05-01 10:00:00] INFO: step 3", "[2024-05-01 10:00:00] INFO: step 3", {}),
        ),
    ),
    Wrapper(
        "rich RichHandler time column before an ERROR / CRITICAL record (the level word kept)",
        _RICH_TIME_COLUMN,
        guard=r"(?:ERROR {4}|CRITICAL )\S", suffix=_RICH_PATH,
        first=r"[\[ ]",
        examples=(
            ("           ERROR    [15:01:31] RuntimeError: CUDA error: an illegal memory access was encountered "
             "richgen.py:9",
             "ERROR    [15:01:31] RuntimeError: CUDA error: an illegal memory access was encountered", {}),
            ("[12/03/26 15:01:31] CRITICAL critical thing                                     richgen.py:10",
             "CRITICAL critical thing", {}),
            ("[15:01:31] ERROR failed", "[15:01:31] ERROR failed", {}),
        ),
    ),
    Wrapper(
        # loguru's default format (loguru/_defaults.py LOGURU_FORMAT: "{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} |
        # {name}:{function}:{line} - {message}", colours only on a TTY), and the same with `{level}` unpadded or
        # `| ` before the message. Below error level (TRACE, DEBUG, INFO, SUCCESS, WARNING) the columns go; an
        # ERROR / CRITICAL record stays whole (its level word is what marks it; the signatures read it anywhere)
        "loguru default columns below error level (<stamp> | LEVEL | name:function:line - )",
        r"(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?) \| (?:TRACE|DEBUG|INFO|SUCCESS|WARNING) *\| "
        r"[^\s|:]+:[^\s|:]+:\d+ [-|] ",
        first=r"[0-9]",
        examples=(
            ("2024-05-01 10:00:01.123 | INFO     | __main__:train:42 - Epoch 1/10: loss=2.31 acc=0.41",
             "Epoch 1/10: loss=2.31 acc=0.41", {"stamp": "2024-05-01 10:00:01.123"}),
            ("2024-05-01 10:00:00.123 | WARNING  | trainer.loop:<module>:7 - /opt/venv/lib/python3.10/site-packages/"
             "torch/_utils.py:831: UserWarning: TypedStorage is deprecated.",
             "/opt/venv/lib/python3.10/site-packages/torch/_utils.py:831: UserWarning: TypedStorage is deprecated.",
             {"stamp": "2024-05-01 10:00:00.123"}),
            ("2024-05-01 10:00:02 | SUCCESS | app:main:12 | saved checkpoint", "saved checkpoint",
             {"stamp": "2024-05-01 10:00:02"}),
            ("2024-05-01 10:00:03.123 | ERROR    | __main__:train:42 - RuntimeError: CUDA error: an illegal memory access",
             "2024-05-01 10:00:03.123 | ERROR    | __main__:train:42 - RuntimeError: CUDA error: an illegal memory access",
             {}),
            # fairseq's `stamp | LEVEL | logger | message` has no name:function:line: the steps parser reads it whole
            ("2021-03-01 10:00:00 | INFO | fairseq.trainer | begin training epoch 1",
             "2021-03-01 10:00:00 | INFO | fairseq.trainer | begin training epoch 1", {}),
        ),
    ),
    Wrapper(
        "pdsh / clush host (a host-like name without digits: only before a log-looking line)",
        r"(?P<host>[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)+): ", guard=_LOGLIKE, veto=_NOT_HOST,
        first=r"[A-Za-z]",
        examples=(
            ("head-node: [  123.456] NVRM: Xid (PCI:0000:3b:00): 48", "[  123.456] NVRM: Xid (PCI:0000:3b:00): 48",
             {"host": "head-node"}),
            ("non-fatal: retrying the operation", "non-fatal: retrying the operation", {}),
            # an MPIJob launcher pod's name in front of its mpirun output (LlamaFactory#5558)
            ("mpi-rc1ou1aw-launcher: [rank0]:[E ProcessGroupNCCL.cpp:1414] [PG 1 Rank 0] Process group watchdog",
             "[E ProcessGroupNCCL.cpp:1414] [PG 1 Rank 0] Process group watchdog",
             {"host": "mpi-rc1ou1aw-launcher", "rank": 0}),
        ),
    ),
    Wrapper(
        "pdsh / clush host (a host name: ends in a digit, optional domain; or an IPv4 address)",
        r"(?P<host>[A-Za-z][A-Za-z0-9_-]*\d(?:\.[A-Za-z0-9_-]+)*|\d{1,3}(?:\.\d{1,3}){3}): ",
        veto=_NOT_HOST,
        first=r"[A-Za-z0-9]",
        examples=(
            ("node-017: [12345.678] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
             "[12345.678] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", {"host": "node-017"}),
            ("gpu46.cluster.local: gpu46:78367:78492 [0] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
             "gpu46:78367:78492 [0] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
             {"host": "gpu46.cluster.local"}),
            ("10.0.0.5: Unable to determine the device handle for GPU0000:03:00.0: Unknown Error",
             "Unable to determine the device handle for GPU0000:03:00.0: Unknown Error", {"host": "10.0.0.5"}),
            ("RuntimeError: CUDA error: an illegal memory access was encountered",
             "RuntimeError: CUDA error: an illegal memory access was encountered", {}),
            ("Error: failed to initialize NVML", "Error: failed to initialize NVML", {}),
            ("warning: something", "warning: something", {}),
            ("Http2Error: stream reset", "Http2Error: stream reset", {}),
            ("python3: can't open file 'train.py': [Errno 2] No such file or directory",
             "python3: can't open file 'train.py': [Errno 2] No such file or directory", {}),
            ("top-1: 76.5", "top-1: 76.5", {}),
            ("fp16: true", "fp16: true", {}),
            ("node-017: ", "", {"host": "node-017"}),
            ("node-017:   File \"train.py\", line 3", "  File \"train.py\", line 3", {"host": "node-017"}),
            ("slurmstepd: error: execve(): /tmp/slurm_script: No such file or directory",
             "slurmstepd: error: execve(): /tmp/slurm_script: No such file or directory", {}),
            ("slurmstepd-gpu-node-07: error: Detected 1 oom_kill event in StepId=1234.batch.",
             "slurmstepd-gpu-node-07: error: Detected 1 oom_kill event in StepId=1234.batch.", {}),
            ("gpu-node-07: slurmstepd-gpu-node-07: error: *** STEP 1234.0 ON gpu-node-07 CANCELLED AT 2024",
             "slurmstepd-gpu-node-07: error: *** STEP 1234.0 ON gpu-node-07 CANCELLED AT 2024", {"host": "gpu-node-07"}),
            ("kp-ddp-worker-0:3468:3905 [4] NCCL INFO proxy.cc:698 -> 6",
             "kp-ddp-worker-0:3468:3905 [4] NCCL INFO proxy.cc:698 -> 6", {}),
            ("INFO:root:Epoch[0] Batch [20]   Speed: 2015.42 samples/sec",
             "INFO:root:Epoch[0] Batch [20]   Speed: 2015.42 samples/sec", {}),
            ("GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8: unhealthy", "GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8: unhealthy", {}),
            # rdma-core's mlx5 provider (PFX "mlx5: ", then the host name): the driver's message, not pdsh
            ("mlx5: host_unknown: got completion with error:", "mlx5: host_unknown: got completion with error:", {}),
            ("mlx4: gpu-node-3: got completion with error:", "mlx4: gpu-node-3: got completion with error:", {}),
        ),
    ),
    Wrapper(
        # tqdm (tqdm/std.py format_meter): `{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<
        # {remaining}, {rate_fmt}{postfix}]`, redrawn with `\r` and no newline, so a record another writer
        # (logging, print) emits meanwhile lands on the bar's line: `  0%|▋   | 98/24128 [00:40<2:40:10,
        # 2.50it/s][2021-11-27 00:36:55,194] [INFO] ...`. Peeled only when a log-looking record follows (a bar
        # alone, or one with the HF Trainer's `{'loss': ...}` dict behind it, stays for the steps parser)
        "tqdm progress bar with a log record glued behind it",
        r"[^|\r\n]{0,100}?\d{1,3}%\|[^|\r\n]{0,400}\| *\d+(?:\.\d+)?[kMGTPEZY]?/(?:\d+(?:\.\d+)?[kMGTPEZY]?|\?)"
        r" \[[^\]\r\n]{0,200}\]",
        guard=_LOGLIKE,
        examples=(
            ("  0%|▋          | 98/24128 [00:40<2:40:10,  2.50it/s][2021-11-27 00:36:55,194] [INFO] "
             "[stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1",
             "[2021-11-27 00:36:55,194] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. "
             "Attempted loss scale: 1, reducing to 1", {}),
            (" 14%|█▍        | 378/2724 [13:58:09<86:18:35, 132.44s/it][2023-06-07 22:16:00,018] [INFO] "
             "[loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step.",
             "[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 "
             "Skipping step.", {}),
            ("Training:  42%|####2     | 4.2k/10.0k [01:02<01:26, 67.1it/s, loss=2.31][rank3]:[E501 10:00:00.123 "
             "ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation timeout",
             "[E501 10:00:00.123 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation timeout",
             {"rank": 3}),
            (" 14%|█▍        | 380/2724 [14:02:33<86:01:24, 132.12s/it]",
             " 14%|█▍        | 380/2724 [14:02:33<86:01:24, 132.12s/it]", {}),
            (" 10%|█         | 10/100 [00:05<00:45,  2.00it/s]{'loss': 2.0491, 'learning_rate': 0.0002, 'epoch': 0.28}",
             " 10%|█         | 10/100 [00:05<00:45,  2.00it/s]{'loss': 2.0491, 'learning_rate': 0.0002, 'epoch': 0.28}",
             {}),
            ("Epoch 0:  50%|#####     | 5/10 [00:01<00:01, v_num=0, loss=2.3]",
             "Epoch 0:  50%|#####     | 5/10 [00:01<00:01, v_num=0, loss=2.3]", {}),
        ),
    ),
    Wrapper(
        "uniq -c count (right-aligned in 7 columns, one space)",
        r"(?: {6}\d| {5}\d\d| {4}\d{3}| {3}\d{4}| {2}\d{5}| \d{6}|\d{7,}) ", guard=r"\S",
        first=r"[0-9 ]",
        examples=(
            ("     12 node-017: [12345.678] NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception",
             "[12345.678] NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception", {"host": "node-017"}),
            ("     32          8            1        256      256", "     32          8            1        256      256", {}),
            ("    0         1        32         8       256       256   RUNNING      OK",
             "    0         1        32         8       256       256   RUNNING      OK", {}),
        ),
    ),
)

_GROUP = re.compile(r"\(\?P<(\w+)>")


def _anchored(w: Wrapper) -> str:
    return f"^(?P<_p>{w.regex}){w.guard}"


def _combined(wrappers: tuple[Wrapper, ...]) -> str:
    """All wrappers as one anchored alternation (wrapper i's groups renamed `w{i}_<name>`): the
    first that matches at a line's start is the one `peel` takes (tests check it on Python `re`)."""
    alts = []
    for i, w in enumerate(wrappers):
        body = _GROUP.sub(lambda m, i=i: f"(?P<w{i}_{m.group(1)}>", w.regex)
        alts.append(f"(?P<w{i}>{body}){w.guard}")
    return "^(?:" + "|".join(alts) + ")"


PATTERN = _combined(WRAPPERS)
_ANCHORED = [_anchored(w) for w in WRAPPERS]
_PREFIX_ONLY = ["^(?:" + w.regex + ")" for w in WRAPPERS]
_WHOLE = ["^(?:" + w.regex + ")$" for w in WRAPPERS]  # a prefix alone, for its hints
_NO_CAPTURE = frozenset(i for i, w in enumerate(WRAPPERS) if not _GROUP.search(w.regex))  # no hint
_BY_NAME = {w.name: i for i, w in enumerate(WRAPPERS)}
_NOT_AFTER = [frozenset(_BY_NAME[n] for n in w.not_after) for w in WRAPPERS]  # KeyError: a name not in the table
# what a wrapper can start with: a cheap pre-filter for the first round
_START = r"^(?:[ \t]*[\d\[(]|[A-Z]{4,9}(?:\t| {1,8})\d{4}-| {9,28} (?:DEBUG|INFO|WARNING|NOTSET|ERROR|CRITICAL) |[A-Za-z][A-Za-z0-9_.-]*: |[A-Z][a-z]{2} [A-Z][a-z]{2} |\x1b\[32m|[A-Za-z][A-Za-z0-9_-]*/\d)"


def _stamp_text(raw: pl.Expr, kind: str) -> pl.Expr:
    """A stamp as text `timestamps.iso` reads (ctime and epoch ms made ISO; ISO kept as printed)."""
    if kind == "ctime":
        return (raw.str.replace_all(r"\s+", " ").str.to_datetime("%a %b %d %H:%M:%S %Y", strict=False)
                .dt.strftime("%Y-%m-%d %H:%M:%S"))
    if kind == "zone_after_space":  # `2022-01-26 14:19:34 +1100` (strftime %z after a space)
        return raw.str.replace(ascii_classes(r" ([+-]\d{4})$"), "$1")
    if kind == "epoch_ms":
        return (raw.cast(pl.Int64, strict=False).cast(pl.Datetime("ms", "UTC"))
                .dt.strftime("%Y-%m-%dT%H:%M:%S%.3f+00:00"))
    return raw


@lru_cache(maxsize=4096)
def _candidates(first: str) -> tuple[int, ...]:
    """The wrappers (table order) that can start with this character."""
    return tuple(i for i, w in enumerate(WRAPPERS) if re.match(w.first, first))


def _which(df: pl.DataFrame) -> list[tuple[int, pl.DataFrame]]:
    """The rows of `df` by the first wrapper (table order) that matches at their start. Rows are
    dispatched on their first character, so each is tested only against the wrappers that can
    start with it, and only until one matches: few regex passes, none per line in Python."""
    out: list[tuple[int, pl.DataFrame]] = []
    first = df["_rest"].str.slice(0, 1)
    if first.n_unique() == 1:  # one wrapper's lines (a file behind one launcher): no partition to copy
        groups = {(first[0],): df}
    else:
        groups = df.with_columns(first.alias("_c")).partition_by("_c", as_dict=True, maintain_order=True,
                                                                 include_key=False)
    for (c,), rem in groups.items():
        for i in _candidates(c or ""):
            m = rem["_rest"].str.contains(ascii_classes(_ANCHORED[i]))
            if m.all():  # a file behind one wrapper: the usual case
                out.append((i, rem))
                break
            if m.any():
                out.append((i, rem.filter(m)))
                rem = rem.filter(~m)
    return out


def _hint_frame(prefix: pl.Series, i: int) -> pl.DataFrame:
    """Wrapper i's hint groups of each prefix; read once per distinct prefix when they repeat
    (a pdsh host, an mpirun tag, a rank: the same on many lines), else line by line."""
    uniq = prefix.unique()
    if 4 * uniq.len() > prefix.len():
        return prefix.to_frame().select(pl.col("_p").str.extract_groups(ascii_classes(_WHOLE[i])).alias("g")).unnest("g")
    g = uniq.to_frame().with_columns(pl.col("_p").str.extract_groups(ascii_classes(_WHOLE[i])).alias("g")).unnest("g")
    return prefix.to_frame().join(g, on="_p", how="left", maintain_order="left").drop("_p")


CUT_WIDTHS = 16  # a round's rows are cut width by width when their prefixes have at most this many widths


def _cut(rest: pl.Series, width: pl.Series) -> pl.Series:
    """Each string of `rest` without its first `width` characters. A slice of one width keeps the
    strings' bytes where they are (polars string views: a new view per row), a slice by a column
    copies every string, so the rows are cut width by width when the widths are few (one, for a
    file behind one launcher's wrapper)."""
    widths = width.unique().sort()
    if widths.len() > CUT_WIDTHS:
        return pl.DataFrame({"r": rest, "n": width}).select(pl.col("r").str.slice(pl.col("n")))["r"]
    out = rest.str.slice(int(widths[0]))
    for w in widths[1:]:
        out = rest.str.slice(int(w)).zip_with(width == w, out)
    return out


FEW_LEFT = 256  # a round that wrote all rows but this many or fewer puts them together from slices


def _update(cols: dict[str, pl.Series], idx: pl.Series, values: dict[str, pl.Series]) -> dict[str, pl.Series]:
    """Each `cols[k].scatter(idx, values[k])`. When every row is written in order (a round that peeled
    every line of a file behind one wrapper) the values themselves, when most rows are written the
    rows kept and the values put back in row order by one sort (views): a scatter copies every
    string."""
    n = next(iter(cols.values())).len()
    if idx.len() == n and (n == 0 or (idx[0] == 0 and idx[-1] == n - 1 and idx.is_sorted())):
        return {k: values[k].alias(c.name) for k, c in cols.items()}
    if 4 * idx.len() < n:
        return {k: c.scatter(idx, values[k]) for k, c in cols.items()}
    rows = idx.cast(pl.Int64).to_numpy()
    if rows.size > 1 and bool((rows[1:] > rows[:-1]).all()) and n - rows.size <= FEW_LEFT:
        # ascending, and few rows not written (a batch's separator lines): the runs of written rows are
        # slices of the values, the others of the column (no copy of the strings)
        keep = np.setdiff1d(np.arange(n, dtype=np.int64), rows, assume_unique=True)
        out = {}
        for k, c in cols.items():
            v = values[k]
            if v.null_count() == v.len() and c.null_count() == n:
                out[k] = c
                continue
            parts, at, done = [], 0, 0  # row, values used
            for g in keep.tolist():
                if g > at:
                    parts.append(v.slice(done, g - at))
                    done += g - at
                parts.append(c.slice(g, 1))
                at = g + 1
            if at < n:
                parts.append(v.slice(done, n - at))
            out[k] = pl.concat(parts, rechunk=True).alias(c.name)
        return out
    kept = pl.int_range(0, n, eager=True, dtype=pl.Int64)
    kept = kept.filter(~kept.is_in(idx.implode()))
    both = pl.DataFrame({"_at": pl.concat([kept, idx.cast(pl.Int64)]),
                         **{k: pl.concat([c.gather(kept), values[k]]) for k, c in cols.items()}}).sort("_at")
    return {k: both[k].alias(c.name) for k, c in cols.items()}


def _round(df: pl.DataFrame) -> pl.DataFrame:
    """One peel on the rows of `df` (columns _i, _rest and the hints): each row's first matching
    wrapper, unless its veto says no; only the peeled rows come back. The prefix is cut without
    a capture pass; the hints come from the prefixes alone (`_hint_frame`)."""
    rest = pl.col("_rest")
    parts = []
    for i, sub in _which(df):
        w = WRAPPERS[i]
        if _NOT_AFTER[i]:
            inside = sub["_w"].is_in(list(_NOT_AFTER[i]))
            if inside.any():
                sub = sub.filter(~inside)
        if w.veto:
            vetoed = sub["_rest"].str.contains(ascii_classes(w.veto))
            if vetoed.any():
                sub = sub.filter(~vetoed)
        if sub.is_empty():
            continue
        prefix = sub.select(rest.str.extract(ascii_classes(_PREFIX_ONLY[i]), 0).fill_null("").alias("_p"))["_p"]
        body = _cut(sub["_rest"], prefix.str.len_chars()).alias("_rest")
        if w.suffix:
            body = body.str.replace(ascii_classes(w.suffix), "")
        upd = [body, pl.lit(i, dtype=pl.Int32).alias("_w")]
        if i not in _NO_CAPTURE:
            g = _hint_frame(prefix, i)
            for h in HINTS:
                if h in g.columns:
                    v = g.select(_stamp_text(pl.col(h), w.stamp) if h == "stamp" else pl.col(h))[h]
                    upd.append(v.fill_null(sub[f"_{h}"]).alias(f"_{h}"))  # the inner wrapper's hint wins
        parts.append(sub.with_columns(upd))
    return pl.concat(parts) if parts else df.clear()


# Ray's log deduplication (ray/_private/ray_logging.py, DedupState.formatted): a line repeated by other
# workers within RAY_DEDUP_LOGS_AGG_WINDOW_S is printed once more as `line + _color(" [repeated {count}x
# across cluster]" + _warn_once())`: dim when colours are on, the first time followed by the note
# "(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see ...)".
# Ray's own suffix on its own prefixed lines: cut from the body (the count is not a hint).
RAY_DEDUP_SUFFIX = (r"(?:\x1b\[2m)? \[repeated \d+x across cluster\]"
                    r"(?: \(Ray deduplicates logs by default\.[^)]*\))?(?:\x1b\[0m)?[ \t]*$")
_RAY_DEDUP_HINT = "x across cluster]"

# pdsh(1): "output from each remote command is prefixed by the hostname" - every line of the host's
# output, continuation lines included. A host without a digit is only taken before a log-looking line
# (`_LOGLIKE`); once the file shows it so, the same `host: ` on the host's other lines is the prefix too.
_WEAK_HOST = r"^([A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)+): "
MAX_SAME_HOSTS = 256

# The CloudWatch Logs console's log-event table (Timestamp | Message) copied as text, as SageMaker job
# logs are posted: the event's ISO stamp alone on its line, the message on the next. The stamp line is
# the wrapper (its body empty), its stamp the next line's hint unless that line has its own.
_STAMP_ALONE = r"^[ \t]*(" + _ISO_Z + r")[ \t]*$"


def _same_host_prefix(text: pl.Series, body: pl.Series, host: pl.Series) -> tuple[pl.Series, pl.Series]:
    """The lines left unpeeled that start with a `host: ` some peeled line of this column carries as
    its outermost prefix (pdsh's host on a continuation line): peeled too, the host their hint."""
    peeled = host.is_not_null() & (body != text)
    if not peeled.any():
        return body, host
    lead = text.str.extract(ascii_classes(_WEAK_HOST), 1)
    hosts = lead.filter(peeled & (lead == host)).unique()
    if hosts.is_empty() or hosts.len() > MAX_SAME_HOSTS:
        return body, host
    more = (body == text) & lead.is_in(hosts.implode()) & ~text.str.contains(ascii_classes(_NOT_HOST))
    if not more.any():
        return body, host
    cut = text.str.slice(lead.str.len_chars() + 2)
    return cut.zip_with(more, body).alias(body.name), lead.zip_with(more, host).alias(host.name)


def _stamp_lines(body: pl.Series, stamp: pl.Series) -> tuple[pl.Series, pl.Series]:
    """A line that is an ISO stamp alone (a console copy's Timestamp cell): body empty, its stamp the
    hint of the line itself and of the next line (the Message cell) when that one has none."""
    alone = body.str.extract(ascii_classes(_STAMP_ALONE), 1)
    if alone.null_count() == alone.len():
        return body, stamp
    is_alone = alone.is_not_null()
    prev = alone.shift(1)
    give = prev.is_not_null() & ~is_alone & stamp.is_null()
    stamp = alone.zip_with(is_alone, prev.zip_with(give, stamp)).alias(stamp.name)
    body = pl.Series(body.name, [""] * body.len(), dtype=pl.Utf8).zip_with(is_alone, body).alias(body.name)
    return body, stamp


BOM = "\ufeff"  # U+FEFF before a line: the byte-order mark an editor or PowerShell writes at a file's start

# Structured log records, one JSON object a line, as collectors store and export them: the message under the
# first of these keys that holds a string (docker's json-file driver and fluentd `log`, Elastic / Filebeat /
# CloudWatch / zap `message`, logrus / slog / bunyan `msg`, GCP Cloud Logging `textPayload` or
# `jsonPayload.message`, Loki exports `line`), the record's time and its node (or pod). The message is read
# as the line (its own wrappers are peeled after, and their hints win); a line with none of these keys holding
# a string stays whole (a journald `-o json` record: the kernel parser reads those; torchelastic's status
# events and step-metric JSON lines: their parsers read the object). Newlines inside a message become spaces:
# one record is one line, cited by its line number.
JSON_MESSAGE = ("$.log", "$.message", "$.msg", "$.textPayload", "$.jsonPayload.message", "$.line")
JSON_TIME = ("$.time", "$.timestamp", "$['@timestamp']", "$.ts")
JSON_HOST = ("$.kubernetes.host", "$.host.name", "$.host", "$.hostname", "$.resource.labels.node_name",
             "$.kubernetes.pod_name", "$.resource.labels.pod_name")
# the line holds one of the message keys with a string value (a top-level one is then what the paths find)
_JSON_STRING_MESSAGE = r'^\s*\{.*"(?:log|message|msg|textPayload|line)"\s*:\s*"'
_EPOCH = r"^\d{9,19}(?:\.\d+)?$"  # seconds, ms, µs or ns since the epoch (zap's `ts`, CloudWatch's `timestamp`)


_JSON_NESTED = r'^(?:\{"[\s\S]*\}|\{\}|\[["{][\s\S]*\]|\[\])$'  # an object's or array's JSON text


def _json_value(text: pl.Expr, paths: tuple[str, ...], string: bool = True) -> pl.Expr:
    """The first of `paths` that holds a scalar: a string where `string` (its key followed by a quote in
    the line), never an object or an array (whose JSON text `json_path_match` gives). A string that is
    exactly a JSON object's text is taken for one (such a record stays whole)."""
    vals = []
    for p in paths:
        v = text.str.json_path_match(p)
        ok = ~v.str.contains(ascii_classes(_JSON_NESTED))
        if string:
            key = re.escape(p.rsplit(".", 1)[-1].strip("$[]'"))
            ok = ok & text.str.contains(f'"{key}"\\s*:\\s*"')
        vals.append(pl.when(ok).then(v))
    return pl.coalesce(vals)


def _epoch_iso(v: pl.Expr) -> pl.Expr:
    """An epoch number (its digit count says the unit) as ISO text; other text as it is."""
    whole = v.str.extract(ascii_classes(r"^(\d+)"), 1)
    digits = whole.str.len_chars()
    num = v.cast(pl.Float64, strict=False)
    us = (pl.when(digits <= 10).then(num * 1e6).when(digits <= 13).then(num * 1e3).when(digits <= 16).then(num)
          .otherwise(num / 1e3))
    iso = us.cast(pl.Int64, strict=False).cast(pl.Datetime("us", "UTC")).dt.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00")
    return pl.when(v.str.contains(ascii_classes(_EPOCH))).then(iso).otherwise(v)


def _json_records(text: pl.Series) -> tuple[pl.Series, pl.Series | None, pl.Series | None]:
    """`text` with each JSON log record's message in place of the record, and the records' host and
    stamp hints (None when no line is one)."""
    is_j = text.str.contains(ascii_classes(_JSON_STRING_MESSAGE))
    if not is_j.any():
        return text, None, None
    t = pl.col("text")
    got = pl.DataFrame({"text": text}).select(
        pl.when(is_j).then(_json_value(t, JSON_MESSAGE)).alias("msg"),
        pl.when(is_j).then(_epoch_iso(_json_value(t, JSON_TIME, string=False))).alias("stamp"),
        pl.when(is_j).then(_json_value(t, JSON_HOST)).alias("host"))
    msg = got["msg"].str.strip_chars_end("\r\n").str.replace_all(r"[\r\n]+", " ")
    out = pl.select(pl.when(msg.is_not_null()).then(msg).otherwise(text)).to_series().alias(text.name)
    keep = msg.is_not_null()
    return (out, pl.select(pl.when(keep).then(got["host"])).to_series(),
            pl.select(pl.when(keep).then(got["stamp"])).to_series())


def peel(text: pl.Series) -> pl.DataFrame:
    """Strip the byte-order mark and the wrappers from every line of `text`. Columns: body, prefix_host, prefix_rank,
    prefix_local_rank, prefix_task, prefix_ts (text `timestamps.iso` reads). Lines without a
    wrapper keep their text as body and null hints."""
    text = text.rechunk()  # one piece of views (cheap): several (a multi-threaded read) made peel copy the strings
    if text.str.starts_with(BOM).any():  # a file's first line as a Windows tool wrote it (or files concatenated)
        text = text.str.strip_prefix(BOM)
    text, json_host, json_stamp = _json_records(text)
    n = text.len()
    body = text.rename("body")
    nulls = {f"_{h}": pl.repeat(None, n, dtype=pl.Utf8, eager=True) for h in HINTS}
    cand = text.str.contains(ascii_classes(_START))
    live = pl.DataFrame({"_i": pl.int_range(0, n, eager=True, dtype=pl.Int64), "_rest": text}).filter(cand)
    live = live.with_columns(*[pl.lit(None, dtype=pl.Utf8).alias(f"_{h}") for h in HINTS],
                             pl.lit(-1, dtype=pl.Int32).alias("_w"))
    for _ in range(MAX_PEELS):
        # one pass of the whole table as one pattern (no captures) drops the rows no wrapper fits
        live = live.filter(pl.col("_rest").str.contains(ascii_classes(PATTERN)))
        if live.is_empty():
            break
        live = _round(live)
        if live.is_empty():
            break
        # each round writes the rows it peeled: a later (deeper) peel overwrites an earlier one
        got = _update({"_rest": body, **nulls}, live["_i"], {c: live[c] for c in ("_rest", *nulls)})
        body = got.pop("_rest")
        nulls.update(got)
    if json_host is not None:  # the record's fields, where no wrapper inside its message named them
        nulls["_host"] = nulls["_host"].fill_null(json_host)
        nulls["_stamp"] = nulls["_stamp"].fill_null(json_stamp)
    body, host = _same_host_prefix(text, body, nulls["_host"])
    nulls["_host"] = host
    body, stamp = _stamp_lines(body, nulls["_stamp"])
    nulls["_stamp"] = stamp
    if body.str.contains(_RAY_DEDUP_HINT, literal=True).any():
        body = body.str.replace(ascii_classes(RAY_DEDUP_SUFFIX), "")
    return pl.DataFrame({
        "body": body,
        "prefix_host": nulls["_host"],
        "prefix_rank": nulls["_rank"].cast(pl.Int64, strict=False),
        "prefix_local_rank": nulls["_local_rank"].cast(pl.Int64, strict=False),
        "prefix_task": nulls["_task"].cast(pl.Int64, strict=False),
        "prefix_ts": nulls["_stamp"],
    })
