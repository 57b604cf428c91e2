"""Kubernetes pod status: `kubectl describe pod`, `kubectl get pod -o yaml` / `-o json`
(containerStatuses `state`/`lastState.terminated`, pod `status.reason`, `DisruptionTarget`
conditions), `kubectl get pods` tables and `kubectl get events` / describe event rows.

Events: `k8s_terminated` (a container's termination: code = reason such as `OOMKilled`, `Error`,
`Completed`; its exit code goes to `exits` with origin `k8s`), `k8s_pod_status` (pod-level reasons
and warning events: code = `Evicted`, `Preempting`, `CrashLoopBackOff`, `DeletionByTaintManager`,
`PreemptionByScheduler`, ...).

A Job's or pod's activeDeadlineSeconds running out (the Job controller's `Job was active longer than specified
deadline`, the kubelet's `Pod was active on the node longer than the specified deadline`) is a `k8s_job_status` event
code `DeadlineExceeded` on any line, markers or not; OLM quoting its own bundle-unpack Job's deadline (`Bundle unpacking
failed. Reason: DeadlineExceeded, and Message: ...`) is code `OLMUnpackDeadline` instead (K8S_DEADLINE).

A line parser gated by content: nothing is read unless the text carries a Kubernetes marker
(`kind: Pod`, `"kind": "Pod"`, `containerStatuses`, describe's `Containers:` + `Namespace:`, or a
`kubectl get pods` header), because `Reason:` / `reason:` alone is too common to trust.

Pods and nodes: which node each pod ran on, from what kubectl prints per pod (the `pod_nodes`
table; the analysis reads the pod names that NCCL and the pod logs give as hosts through it, so a
rank links to the node its dmesg and DCGM name). `kubectl describe pod` writes `Name:`,
`Namespace:`, then `Node: <nodeName>/<hostIP>` (`<none>` before scheduling; kubectl
pkg/describe/describe.go `describePod`); `-o yaml` / `-o json` give `metadata.name` then
`metadata.namespace` and `spec.nodeName`; `kubectl get pods -o wide` has a NODE column after IP
(pkg/printers/internalversion/printers.go, `podColumnDefinitions`; `-A` adds NAMESPACE first); the
scheduler's `Scheduled` event says `Successfully assigned <ns>/<pod> to <node>`. A pod's block
starts at its name (a `name` key directly followed by a `namespace` key, in all three layouts) and
its events take its node; a file that names several nodes but no blocks gives its events the path's
host, never another pod's node.

Training-operator jobs (`kubectl describe tfjob|pytorchjob|mpijob`): a condition `Reason:
TFJobFailed` / `PyTorchJobRestarting` / mpi-operator's `MPIJobEvicted` / ... is a marker by itself and a
`k8s_job_status` event (code = the reason).

Kubelet device admission failures (`Allocate failed due to <device manager error>, which is unexpected`, reason
`UnexpectedAdmissionError`) are a marker by themselves and a `k8s_pod_status` event of that code in any layout
(describe, Events row, `get pods` STATUS, the bare message), the device manager's error kept in the message.

Cloud interruption notices, wherever they appear (node-termination-handler logs, event dumps,
metadata polls), are `cloud_preemption` events without any Kubernetes marker: AWS `EC2 Spot
Instance Interruption Warning` (EventBridge), `Spot ITN received` (aws-node-termination-handler),
`spot/instance-action` and its document `{"action": "terminate"|"stop"|"hibernate", "time": ...}`
(EC2 user guide, "Spot Instance interruption notices"; quoted as is, escaped inside another JSON
string, or as a Python dict); GCE `compute.instances.preempted` / `Instance was preempted`, the
metadata key `instance/preempted` TRUE and Taskcluster generic-worker's `GCP Metadata Service says
termination is imminent`, and `compute.instances.terminateOnHostMaintenance` (a VM that cannot
live-migrate, as GPU VMs, stopped for host maintenance); Azure Scheduled Events `"EventType":
"Preempt"` and `"Terminate"` (the VM is deleted: Spot eviction, scale-in or a user). Code: `aws_spot`,
`gce_preempted`, `gce_maintenance_terminate`, `azure_preempt`, `azure_terminate`.

So are the reclaim notices of the tools that run a job on spot capacity. AWS, code `aws_spot`: the EC2 Spot
request status codes of an interruption (EC2 user guide, "Spot request status codes": `instance-terminated-by-price`,
`instance-terminated-no-capacity`, `instance-terminated-capacity-oversubscribed`,
`instance-terminated-launch-group-constraint`, their `instance-stopped-*` forms, the `*-by-experiment` of an FIS
test, the two-minute `marked-for-termination` / `marked-for-stop`), an instance's StateReason
`Server.SpotInstanceTermination` / `Server.SpotInstanceShutdown` (EC2 API reference, StateReason), ECS/Fargate's
`Your Spot Task was interrupted.` and StopCode `SpotInterruption`; code `aws_host_terminated`: AWS Batch's / ECS's
status reason `Host EC2 (instance i-...) terminated.` (or `stopped.`, StopCode `TerminationNotice`): the container
instance under the job went away, a Spot reclaim or a scale-in, and AWS's retry-strategy docs retry on `Host EC2*`.
SkyPilot's managed-job controller (sky/spot/controller.py, sky/jobs/controller.py), code `skypilot_preempted`: `The
cluster is preempted.` (0.1-0.2) and `Cluster is preempted (status: <S>). Recovering...` (to 0.5); its newer `Cluster
is preempted or failed (status: <S>). Recovering...` does not tell a reclaim from a failed cluster: a `cloud_event`,
code `skypilot_preempted_or_failed`. The EC2 Spot status codes of an instance its owner ended
(`instance-terminated-by-user`, `spot-instance-terminated-by-user`, `instance-stopped-by-user`,
`instance-terminated-by-schedule` (the request's valid-until passed)) and the StateReasons
`Client.UserInitiatedShutdown` / `Client.InstanceInitiatedShutdown` are no interruption: `cloud_event`, code
`aws_spot_closed` (a Spot Fleet that shuts its nodes down when the job is done prints them too).

The same sources' other notices are `cloud_event` events: the instance was replaced or its host failed
(GCE `compute.instances.hostError`; a managed instance group's `initiated recreateInstance on
instance '<instance>'`: GKE node auto-repair, MIG autohealing), code `gce_host_error`, `mig_recreate`;
and notices that do not take the instance away by themselves: EC2 `EC2 Instance Rebalance
Recommendation` / `noticeTime` (elevated risk only) and scheduled events (`"Code": "system-reboot"`,
`instance-retirement`, ...: a future date), GCE `compute.instances.migrateOnHostMaintenance` (a live
migration), Azure `Reboot` / `Redeploy` (scheduled) and `Freeze` (a pause of seconds, memory kept),
code `aws_rebalance`, `aws_scheduled`, `gce_migrate`, `azure_reboot`, `azure_freeze`. The host of a
cloud event is the instance the line names (an EC2 instance id, the GCE instance of an operation, the
first Azure `Resources` entry, a syslog header's host), else the path's.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import Extraction, ParseContext, empty_events, empty_table, events_frame, table_frame
from parsers.spec import ParserSpec
from parsers.timestamps import iso

TERM_REASONS = ["OOMKilled", "Error", "Completed", "ContainerCannotRun", "StartError", "DeadlineExceeded",
                "Evicted", "ContainerStatusUnknown"]
POD_REASONS = ["Evicted", "Preempting", "Preempted", "NodeShutdown", "Terminated", "DeadlineExceeded",
               "UnexpectedAdmissionError", "NodeLost"]
DISRUPTION = ["PreemptionByScheduler", "DeletionByTaintManager", "EvictionByEvictionAPI", "DeletionByPodGC",
              "TerminationByKubelet"]
WAITING = ["CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"]
SEVERITY = {"UnexpectedAdmissionError": "error", "MemoryPressure": "error", "DiskPressure": "error", "EphemeralStorageLimit": "error", "OOMKilled": "error", "Error": "error", "Completed": "info", "Evicted": "error",
            "CrashLoopBackOff": "error", "ContainerCannotRun": "error", "StartError": "error"}

# mpi-operator (kubeflow/mpi-operator v2 pkg/controller/mpi_job_controller.go) also fails the job with reason
# `MPIJobEvicted` (message `%d/%d workers are evicted`, and a Warning event of that reason) when worker pods
# were evicted: the cluster took the pods, as a pod's own `Evicted` says.
JOB_REASON_RE = r"^(?:TF|PyTorch|MPI|XGBoost|Paddle|JAX|MX)?Job(?:Failed|Restarting|Succeeded|Evicted)$"
MARKERS = r'(?m)^[ \t]*kind:[ \t]*Pod\b|"kind":\s*"Pod"|containerStatuses|^Namespace:\s+\S|^(?:NAMESPACE\s+)?NAME\s+READY\s+STATUS\b|' \
          r'^LAST SEEN\s+TYPE\s+REASON\b|The node was low on resource: |The node had condition: \[|' \
          r'exceeded its local ephemeral storage limit|ephemeral local storage usage exceeds the total limit|' \
          r'Usage of EmptyDir volume .* exceeds the limit|' \
          r'Allocate failed due to .*, which is unexpected|' \
          r'^[ \t]*"?[Rr]eason"?:[ \t]*"?(?:TF|PyTorch|MPI|XGBoost|Paddle|JAX|MX)Job(?:Failed|Restarting|Evicted)\b'
# kubelet's eviction manager (pkg/kubelet/eviction/helpers.go): the evicted pod's message names the
# starved resource (`The node was low on resource: %v. ` with memory, ephemeral-storage, pids or
# inodes; newer kubelets add `Threshold quantity: ..., available: ...`) or, when admission is refused
# under pressure, the node condition (`The node had condition: [%v]. `). The code is the node
# condition the resource maps to, so a memory eviction is not read as a scheduler preemption (pids /
# PIDPressure keep the plain `Evicted` code: no category of the taxonomy fits better).
# kubelet's device admission (pkg/kubelet/cm/topologymanager and the resourceAllocator admit handler:
# `Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)`, `Reason:
# "UnexpectedAdmissionError"`; the pod's status message prefixes `Pod `): the kubelet could not hand the pod its
# devices after the scheduler placed it. `%v` is the device manager's error (pkg/kubelet/cm/devicemanager/
# manager.go: `requested number of devices unavailable for %s. Requested: %d, Available: %d`, `no healthy devices
# present; cannot allocate unhealthy devices %s`, `cannot allocate unregistered device %s`, `unknown Device Plugin
# %s`, `device plugin GetPreferredAllocation rpc failed with err: %v`, `device plugin PreStartContainer rpc failed
# with err: %v`, or the plugin's Allocate rpc error verbatim), so the line names what failed; a marker by itself
# (an Events row or a pasted message), code `UnexpectedAdmissionError`. The signatures read the cause.
ADMISSION_RE = r"Allocate failed due to .*, which is unexpected"
EVICT_RESOURCE_RE = r"The node was low on resource: \[?([A-Za-z-]+)"
EVICT_CONDITION_RE = r"The node had condition: \[(MemoryPressure|DiskPressure)\]"
EVICT_PRESSURE = {"memory": "MemoryPressure", "ephemeral-storage": "DiskPressure", "inodes": "DiskPressure"}
# The eviction manager's local-storage limit checks (pkg/kubelet/eviction/eviction_manager.go
# localStorageEviction: containerEphemeralStorageMessageFmt "Container %s exceeded its local ephemeral
# storage limit %q. ", podEphemeralStorageMessageFmt "Pod ephemeral local storage usage exceeds the total
# limit of containers %s. ", emptyDirMessageFmt "Usage of EmptyDir volume %q exceeds the limit %q. "): the
# pod's own writes (container layer, logs, emptyDir) went past its ephemeral-storage limit, whatever the
# node had free. Marker by themselves (an Events row quoted without its header); code
# `EphemeralStorageLimit`, not DiskPressure: the node is fine, the pod's output is too big for its limit.
EVICT_LIMIT_RE = (r"exceeded its local ephemeral storage limit|ephemeral local storage usage exceeds the total limit"
                  r"|Usage of EmptyDir volume .* exceeds the limit")
_Q = r"\\?[\"']"  # a JSON or Python-dict quote, possibly escaped inside another JSON string
_AZ = _Q + r"EventType" + _Q + r"\s*:\s*" + _Q
# Kubernetes time limits, read wherever the line is (a Job's `status.conditions`, `kubectl describe job|pod`, an
# Events row, a controller's log): the Job controller (pkg/controller/job/job_controller.go: condition reason
# `DeadlineExceeded`, message `Job was active longer than specified deadline`, the Job's activeDeadlineSeconds) and
# the kubelet (pkg/kubelet/active_deadline.go: pod reason `DeadlineExceeded`, message `Pod was active on the node
# longer than the specified deadline`, the pod's activeDeadlineSeconds), code `DeadlineExceeded` as the pod reason
# already reads. Operator Lifecycle Manager quotes its own bundle-unpack Job's deadline (pkg/controller/bundle/
# bundle_unpacker.go and the catalog operator: `Bundle unpacking failed. Reason: %v, and Message: %v`, newer
# `bundle unpacking failed.` with `Reason: ...` on the next line, InstallPlan `Bundle extract Job failed with Reason:
# %v, and Message: %v`): OLM's internal timeout on pulling / unpacking an operator bundle, not the workload's time
# limit; code `OLMUnpackDeadline`, first so it wins over the quoted Job message.
K8S_DEADLINE = (
    (r"[Bb]undle (?:unpacking failed|extract Job failed)\b.*Reason: DeadlineExceeded|Reason: DeadlineExceeded, and "
     r"Message: ", "OLMUnpackDeadline", "k8s_job_status"),
    (r"\bJob was active longer than specified deadline|\bPod was active on the node longer than the specified deadline",
     "DeadlineExceeded", "k8s_job_status"),
)
# (regex, code, kind): the first that matches a line names it
CLOUD = K8S_DEADLINE + (
    (r"EC2 Spot Instance Interruption Warning|Spot ITN received|spot/instance-action|Spot Instance interruption notice|"
     + _Q + r"(?:instance-)?action" + _Q + r"\s*:\s*" + _Q + r"(?:terminate|stop|hibernate)" + _Q + r"\s*,\s*" + _Q
     + r"time" + _Q
     + r"|\binstance-(?:terminated|stopped)-(?:by-price|no-capacity|capacity-oversubscribed|launch-group-constraint"
       r"|by-experiment)\b|\bmarked-for-(?:termination|stop)\b|\bServer\.SpotInstance(?:Termination|Shutdown)\b"
       r"|Your Spot Task was interrupted|\bSpotInterruption\b", "aws_spot", "cloud_preemption"),
    (r"\bHost EC2 \(instance [^)\s]+\) (?:terminated|stopped)\b|" + _Q + r"?[Ss]topCode" + _Q + r"?\s*[:=]\s*" + _Q
     + r"?TerminationNotice\b", "aws_host_terminated", "cloud_preemption"),
    (r"\bThe cluster is preempted\.|\bCluster is preempted(?: \(status: [A-Z_]+\))?\. Recovering",
     "skypilot_preempted", "cloud_preemption"),
    (r"\bCluster is preempted or failed\b", "skypilot_preempted_or_failed", "cloud_event"),
    (r"\b(?:spot-)?instance-terminated-by-(?:user|schedule)\b|\binstance-stopped-by-user\b"
     r"|\bClient\.(?:UserInitiated|InstanceInitiated)Shutdown\b", "aws_spot_closed", "cloud_event"),
    (r"compute\.instances\.preempted|[Ii]nstance was preempted|GCP Metadata Service says termination is imminent"
     r"|instance/preempted\S*\s*(?:is\s+|=\s*|:\s*)?TRUE\b", "gce_preempted", "cloud_preemption"),
    (r"compute\.instances\.terminateOnHostMaintenance", "gce_maintenance_terminate", "cloud_preemption"),
    (_AZ + r"Preempt" + _Q, "azure_preempt", "cloud_preemption"),
    (_AZ + r"Terminate" + _Q, "azure_terminate", "cloud_preemption"),
    (r"compute\.instances\.hostError", "gce_host_error", "cloud_event"),
    (r"initiated recreateInstance on instance", "mig_recreate", "cloud_event"),
    (r"EC2 Instance Rebalance Recommendation|" + _Q + r"noticeTime" + _Q + r"\s*:", "aws_rebalance", "cloud_event"),
    (_Q + r"[Cc]ode" + _Q + r"\s*:\s*" + _Q
     + r"(?:instance-reboot|system-reboot|system-maintenance|instance-retirement|instance-stop)" + _Q,
     "aws_scheduled", "cloud_event"),
    (r"compute\.instances\.migrateOnHostMaintenance", "gce_migrate", "cloud_event"),
    (_AZ + r"(?:Reboot|Redeploy)" + _Q, "azure_reboot", "cloud_event"),
    (_AZ + r"Freeze" + _Q, "azure_freeze", "cloud_event"),
)
CLOUD_RE = "|".join(rx for rx, _, _ in CLOUD)
CLOUD_SEVERITY = {"aws_rebalance": "info", "gce_migrate": "info", "azure_freeze": "info", "aws_scheduled": "info",
                  "aws_spot_closed": "info",
                  "azure_reboot": "info", "gce_host_error": "error", "mig_recreate": "error"}
# the instance a cloud line names: an EC2 instance id, a GCE operation's `.../instances/<name>`, Azure's
# first `Resources` entry
CLOUD_HOST_RE = (r"\b(i-[0-9a-f]{17}|i-[0-9a-f]{8})\b|/instances/([^/\s'\"\\]+?)['\"\\]?(?:[\s.,]|$)"
                 r"|" + _Q + r"Resources" + _Q + r"\s*:\s*\[\s*" + _Q + r"([^\"'\\]+)"
                 r"|^\s*[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\dZ? ([A-Za-z0-9][-.A-Za-z0-9_]*) "  # a syslog header's host
                 # ... or an RFC 3339 one (rsyslog's RSYSLOG_FileFormat, RFC 5424 stamps): `<stamp> <host> <tag>[pid]: `
                 r"|^\s*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) ([A-Za-z0-9][-.A-Za-z0-9_]*) "
                 r"[\w./-]+(?:\[\d+\])?: ")
# `kubectl get pods -o wide` (optionally `-A`): the header, and a row's NAME and NODE (RESTARTS may
# read `3 (5m ago)`; IP and NODE may be `<none>`)
WIDE_HEADER_RE = r"^\s*(?:NAMESPACE\s+)?NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\b"
NARROW_HEADER_RE = r"^\s*(?:NAMESPACE\s+)?NAME\s+READY\s+STATUS\b"
WIDE_ROW_RE = (r"^\s*(?:(?P<ns>\S+)\s+)??(?P<pod>\S+)\s+\d+/\d+\s+\S+\s+\d+(?:\s+\([^)]*\))?\s+\S+\s+\S+\s+"
               r"(?P<node>\S+)")
# kube-scheduler's Scheduled event (pkg/scheduler/schedule_one.go): "Successfully assigned %v/%v to %v"
ASSIGNED_RE = r"Successfully assigned (?P<ns>[^/\s]+)/(?P<pod>\S+) to (?P<node>\S+)"
NO_NODE = "<none>"
# Parsed file by file (pod blocks run over lines), only in files with a line matching _TRIGGER.
_TRIGGER = MARKERS + "|" + CLOUD_RE
# key / value in any of the three shapes: `Reason:   OOMKilled`, `reason: OOMKilled`, `"reason": "OOMKilled",`
KV_RE = r'^\s*(?:-\s*)?"?(?P<key>[A-Za-z][A-Za-z ]*?)"?\s*:\s*(?:[{\[]\s*$|"?(?P<val>[^"{}\[]*?)"?\s*,?\s*$)'


def sniff(head: str) -> float:
    if re.search(MARKERS, head):
        return 0.85
    return 0.0


def _empty() -> Extraction:
    return Extraction(events=empty_events(), tables={"exits": empty_table("exits"), "pod_nodes": empty_table("pod_nodes")})


def _cloud(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    b = pl.col("body")
    code = pl.when(b.str.contains(ascii_classes(CLOUD[0][0]))).then(pl.lit(CLOUD[0][1]))
    for rx, c, _ in CLOUD[1:]:
        code = code.when(b.str.contains(ascii_classes(rx))).then(pl.lit(c))
    kind = code.replace_strict({c: k for _, c, k in CLOUD}, return_dtype=pl.Utf8)  # each code has one kind
    h = b.str.extract_groups(ascii_classes(CLOUD_HOST_RE))
    # the line's own leading stamp (ISO or Go's `2006/01/02 15:04:05`; a wrapper's, which the prefix
    # layer peeled off, counts as one), else the time the notice names
    wrapper = pl.col("prefix_ts") if "prefix_ts" in lines.columns else pl.lit(None, dtype=pl.Utf8)
    lead = pl.coalesce(wrapper, b.str.extract(ascii_classes(r"^\s*(\d{4}[-/]\d\d[-/]\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)"), 1))
    stamp_raw = pl.coalesce(lead.str.replace_all("/", "-"), b.str.extract(ascii_classes(
        r"(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)"), 1))
    return lines.filter(b.str.contains(ascii_classes(CLOUD_RE))).select(
        "line_no", kind.alias("kind"), code.alias("code"),
        code.replace_strict(CLOUD_SEVERITY, default="warning").alias("severity"),
        iso(stamp_raw, ctx.tz).alias("ts"), stamp_raw.alias("ts_raw"),
        pl.when(iso(stamp_raw, ctx.tz).is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing"))
        .alias("ts_quality"),
        pl.coalesce(h.struct.field("1"), h.struct.field("2"), h.struct.field("3"), h.struct.field("4"), h.struct.field("5"),
                    pl.lit(ctx.host_hint, dtype=pl.Utf8))
        .alias("host"), pl.lit(SPEC.name).alias("source"), b.alias("message"))


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    if lines.is_empty():
        return _empty()
    if not lines["body"].str.contains(ascii_classes(MARKERS)).any():
        cloud = _cloud(lines, ctx)
        if cloud.is_empty():
            return _empty()
        events = events_frame(cloud).sort("line_no")
        return Extraction(events=events, tables={"exits": empty_table("exits"), "pod_nodes": empty_table("pod_nodes")},
                          claimed=events["line_no"].alias("line_no"), ignored=pl.Series("line_no", [], dtype=pl.Int64))
    b = pl.col("body")
    kv = b.str.extract_groups(ascii_classes(KV_RE))
    df = lines.select("line_no", "body").with_columns(
        kv.struct.field("key").str.to_lowercase().str.replace_all(" ", "").alias("key"),
        kv.struct.field("val").str.strip_chars().alias("val"))
    key, val = pl.col("key"), pl.col("val")
    # a termination block starts at `terminated:` (yaml/json) or `State: Terminated` (describe)
    block_start = (key == "terminated") | (key.is_in(["state", "laststate"]) & (val == "Terminated"))
    block_end = key.is_in(["running", "waiting", "state", "laststate", "ready", "restartcount", "image", "name"]) & ~block_start
    df = df.with_columns(
        pl.when(block_start).then(pl.col("line_no")).when(block_end).then(pl.lit(-1)).otherwise(None)
        .forward_fill().alias("_blk"))
    in_blk = pl.col("_blk").is_not_null() & (pl.col("_blk") > 0)
    blk = df.filter(in_blk)
    agg = blk.group_by("_blk").agg(
        pl.col("line_no").filter(pl.col("key") == "reason").first().alias("line_no"),
        pl.col("val").filter(pl.col("key") == "reason").first().alias("code"),
        pl.col("val").filter(pl.col("key") == "exitcode").first().cast(pl.Int64, strict=False).alias("exitcode"),
        pl.col("val").filter(pl.col("key").is_in(["finished", "finishedat"])).first().alias("ts_raw"),
        pl.col("val").filter(pl.col("key") == "message").first().alias("detail"),
        pl.col("line_no").alias("_lines"),
    ).with_columns(pl.coalesce(pl.col("line_no"), pl.col("_blk")).alias("line_no"))
    stamp = pl.coalesce(iso(pl.col("ts_raw"), ctx.tz),
                        pl.col("ts_raw").str.to_datetime("%a, %d %b %Y %H:%M:%S %z", strict=False)
                        .dt.convert_time_zone("UTC"))
    term = agg.with_columns(
        stamp.alias("ts"), pl.lit("k8s_terminated").alias("kind"),
        pl.col("code").fill_null("Terminated").alias("code"))
    # pod-level reasons, disruption conditions, waiting reasons, event rows, get-pods rows
    pod_reason = (key == "reason") & ~in_blk & val.is_in(POD_REASONS + DISRUPTION + WAITING)
    job_reason = (key == "reason") & ~in_blk & val.str.contains(ascii_classes(JOB_REASON_RE))
    event_row = b.str.extract(ascii_classes(r"^\s*(?:\S+\s+)?Warning\s+(\w+)\s"), 1)
    table_row = b.str.extract(ascii_classes(r"^(?:\S+\s+)?\S+\s+\d+/\d+\s+(\w+)\s+\d+"), 1)
    pressure = pl.coalesce(
        b.str.extract(ascii_classes(EVICT_RESOURCE_RE), 1).replace_strict(EVICT_PRESSURE, default=None, return_dtype=pl.Utf8),
        b.str.extract(ascii_classes(EVICT_CONDITION_RE), 1),
        pl.when(b.str.contains(ascii_classes(EVICT_LIMIT_RE))).then(pl.lit("EphemeralStorageLimit")),
        pl.when(b.str.contains(ascii_classes(ADMISSION_RE))).then(pl.lit("UnexpectedAdmissionError")))
    other = df.with_columns(
        pl.when(pressure.is_not_null()).then(pressure)
        .when(pod_reason | job_reason).then(val)
        .when(event_row.is_in(POD_REASONS + ["BackOff", "Killing", "OOMKilling", "FailedScheduling", "NodeNotReady"]))
        .then(event_row)
        .when(event_row.str.contains(ascii_classes(JOB_REASON_RE))).then(event_row)
        .when(table_row.is_in(TERM_REASONS + WAITING + ["ContainerStatusUnknown", "UnexpectedAdmissionError"])
              & (table_row != "Completed"))
        .then(table_row).alias("code"),
        pl.lit(None, dtype=pl.Int64).alias("exitcode"),
    ).filter(pl.col("code").is_not_null()).with_columns(
        pl.when(pl.col("code").str.contains(ascii_classes(JOB_REASON_RE))).then(pl.lit("k8s_job_status"))
        .otherwise(pl.lit("k8s_pod_status")).alias("kind"), pl.lit(None, dtype=pl.Utf8).alias("ts_raw"),
        pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("ts"))
    msgs = lines.select("line_no", pl.col("body").alias("message"))
    cloud = _cloud(lines, ctx).select("line_no", "kind", "code", pl.lit(None, dtype=pl.Int64).alias("exitcode"),
                                      "ts", "ts_raw")
    ev = pl.concat([term.select("line_no", "kind", "code", "exitcode", "ts", "ts_raw"),
                    other.select("line_no", "kind", "code", "exitcode", "ts", "ts_raw"), cloud])
    pods, line_node = _pods(lines, df)
    ev = ev.join(msgs, on="line_no", how="left").join(line_node, on="line_no", how="left").with_columns(
        pl.lit(SPEC.name).alias("source"),
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        pl.coalesce(pl.col("node"), pl.lit(ctx.host_hint, dtype=pl.Utf8)).alias("host"),
        pl.lit(ctx.rank_hint, dtype=pl.Int64).alias("rank"),
        pl.col("code").replace_strict(SEVERITY, default="warning", return_dtype=pl.Utf8).alias("severity"),
    )
    events = events_frame(ev).sort("line_no")
    exits = table_frame("exits", term.join(msgs, on="line_no", how="left").join(line_node, on="line_no", how="left")
                        .with_columns(
        pl.coalesce(pl.col("node"), pl.lit(ctx.host_hint, dtype=pl.Utf8)).alias("host"), pl.lit("k8s").alias("origin"),
        pl.when(pl.col("exitcode") == 137).then(pl.lit("SIGKILL")).when(pl.col("exitcode") == 143)
        .then(pl.lit("SIGTERM")).when(pl.col("exitcode") == 134).then(pl.lit("SIGABRT"))
        .when(pl.col("exitcode") == 139).then(pl.lit("SIGSEGV")).alias("signal"),
        pl.coalesce(pl.col("detail"), pl.col("code")).alias("message")))
    claimed = pl.concat([events["line_no"], term.explode("_lines")["_lines"].alias("line_no")]).unique().sort()
    ignored = df.filter(key.is_not_null() | b.str.contains(r"^\s*[{}\[\],]*\s*$")
                        | b.str.contains(r"^NAME\s+READY|^LAST SEEN|^Events:|^\s+Type\s+Reason"))["line_no"]
    ignored = ignored.filter(~ignored.is_in(claimed.implode())).sort()
    return Extraction(events=events, tables={"exits": exits, "pod_nodes": pods}, claimed=claimed.alias("line_no"),
                      ignored=ignored.alias("line_no"))


def _pods(lines: pl.DataFrame, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The `pod_nodes` rows of a file, and each line's node (line_no, node): the node of the pod
    block the line is in, a `get pods -o wide` row's own node, else the one node the file names
    (null where it names several and the line is in no block)."""
    b, key, val = pl.col("body"), pl.col("key"), pl.col("val")
    section = (pl.when(b.str.contains(ascii_classes(WIDE_HEADER_RE))).then(pl.lit(True))
               .when(b.str.contains(ascii_classes(NARROW_HEADER_RE)) | b.str.contains(r"^\s*$")).then(pl.lit(False))
               .otherwise(None).forward_fill())
    row = b.str.extract_groups(ascii_classes(WIDE_ROW_RE))
    assigned = b.str.extract_groups(ascii_classes(ASSIGNED_RE))
    starts = (key == "name") & (key.shift(-1) == "namespace")
    x = df.with_columns(
        pl.when(starts).then(pl.col("line_no")).forward_fill().alias("_pod_blk"),
        pl.when(starts).then(val).forward_fill().alias("_pod"),
        pl.when(starts).then(val.shift(-1)).forward_fill().alias("_ns"),
        # describe's `Node: name/hostIP`, yaml/json's `nodeName`
        pl.when(key == "node").then(val.str.extract(r"^([^/\s]+)", 1)).when(key == "nodename").then(val)
        .alias("_node"),
        pl.when(section & ~b.str.contains(ascii_classes(WIDE_HEADER_RE))).then(row.struct.field("node")).alias("_row_node"),
        pl.when(section).then(row.struct.field("pod")).alias("_row_pod"),
        pl.when(section).then(row.struct.field("ns")).alias("_row_ns"),
        assigned.struct.field("pod").alias("_as_pod"), assigned.struct.field("ns").alias("_as_ns"),
        assigned.struct.field("node").alias("_as_node"),
    ).with_columns(*(pl.when(pl.col(c) != NO_NODE).then(pl.col(c)).alias(c) for c in ("_node", "_row_node", "_as_node")))
    blocks = (x.filter(pl.col("_pod_blk").is_not_null() & pl.col("_node").is_not_null())
              .group_by("_pod_blk").agg(pl.col("_node").first().alias("_blk_node"),
                                        pl.col("line_no").filter(pl.col("_node").is_not_null()).first().alias("_at")))
    x = x.join(blocks, on="_pod_blk", how="left")
    named = x.filter(pl.col("_node").is_not_null())["_node"].unique()
    only = named[0] if named.len() == 1 and x["_pod_blk"].is_null().all() else None
    pods = pl.concat([
        x.filter(pl.col("_pod_blk").is_not_null() & (pl.col("line_no") == pl.col("_at")))
        .select("line_no", pl.col("_pod").alias("pod"), pl.col("_ns").alias("namespace"), pl.col("_node").alias("node")),
        x.filter(pl.col("_row_node").is_not_null() & pl.col("_row_pod").is_not_null())
        .select("line_no", pl.col("_row_pod").alias("pod"), pl.col("_row_ns").alias("namespace"),
                pl.col("_row_node").alias("node")),
        x.filter(pl.col("_as_node").is_not_null())
        .select("line_no", pl.col("_as_pod").alias("pod"), pl.col("_as_ns").alias("namespace"),
                pl.col("_as_node").alias("node")),
    ]).unique(maintain_order=True).sort("line_no")
    # an event row's object (`pod/<name>`, kubectl get events) on the node the file shows that pod on
    on_one = (pods.group_by("pod").agg(pl.col("node").unique()).filter(pl.col("node").list.len() == 1)
              .select(pl.col("pod").alias("_obj"), pl.col("node").list.first().alias("_obj_node")))
    x = x.with_columns(b.str.extract(r"(?:^|\s)pods?/([a-z0-9][-a-z0-9.]*)(?:\s|$)", 1).alias("_obj"))
    x = x.join(on_one, on="_obj", how="left")
    line_node = x.select("line_no", pl.coalesce(pl.col("_row_node"), pl.col("_blk_node"), pl.col("_obj_node"),
                                                pl.lit(only, dtype=pl.Utf8)).alias("node"))
    return table_frame("pod_nodes", pods), line_node


SPEC = ParserSpec(
    name="k8s",
    scope="job",
    description="Kubernetes pod termination reasons: kubectl describe / get -o yaml|json / get pods / events",
    formats=("kubectl describe pod", "kubectl get pod -o yaml", "kubectl get pod -o json", "kubectl get pods",
             "kubectl get pods -o wide",
             "kubectl get events", "kubectl describe tfjob/pytorchjob conditions", "cloud spot/preemption notices"),
    kinds=("k8s_terminated", "k8s_pod_status", "k8s_job_status", "cloud_preemption", "cloud_event"),
    tables=("exits", "pod_nodes"),
    trigger=_TRIGGER,
)
