"""Tests for parsers.k8s: Kubernetes termination reasons (reference/scheduler.md §2)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import k8s
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, Extraction, ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "k8s"


def run(text: str) -> Extraction:
    return k8s.parse(with_body(decode_lines(text.encode()).lines), ParseContext(path="pod.txt", host_hint="hint"))


def rows(ex: Extraction) -> list[tuple]:
    return [(r["line_no"], r["kind"], r["code"], r["host"]) for r in ex.events.iter_rows(named=True)]


def check_contract(ex: Extraction, n_lines: int) -> None:
    assert dict(ex.events.schema) == EVENT_SCHEMA
    for name, t in ex.tables.items():
        assert dict(t.schema) == TABLE_SCHEMAS[name]
    claimed, ignored = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not claimed & ignored
    assert all(1 <= n <= n_lines for n in claimed | ignored)
    assert set(ex.events["line_no"].to_list()) <= claimed


def test_describe_pod_last_state_oomkilled() -> None:
    ex = run((FIX / "describe_pod.txt").read_text())
    assert rows(ex) == [(14, "k8s_terminated", "OOMKilled", "gpu-node-17"),
                        (23, "k8s_pod_status", "BackOff", "gpu-node-17")]
    assert ex.events["ts"][0] == datetime(2024, 1, 1, 12, 4, 31, tzinfo=UTC)
    e = ex.tables["exits"].row(0, named=True)
    assert (e["line_no"], e["exitcode"], e["signal"], e["origin"]) == (14, 137, "SIGKILL", "k8s")
    check_contract(ex, 23)


def test_yaml_terminated_error_disruption_and_crashloop() -> None:
    ex = run((FIX / "pod_status.yaml").read_text())
    assert rows(ex) == [(12, "k8s_pod_status", "DeletionByTaintManager", "gpu-node-04"),
                        (22, "k8s_terminated", "Error", "gpu-node-04"),
                        (30, "k8s_pod_status", "CrashLoopBackOff", "gpu-node-04")]
    e = ex.tables["exits"].row(0, named=True)
    assert (e["exitcode"], e["signal"]) == (134, "SIGABRT")
    assert ex.events["ts"][1] == datetime(2024, 1, 1, 12, 4, 31, tzinfo=UTC)


def test_json_evicted_pod() -> None:
    ex = run((FIX / "pod_evicted.json").read_text())
    # the kubelet's eviction message names the node condition (memory -> MemoryPressure)
    assert rows(ex) == [(7, "k8s_pod_status", "MemoryPressure", "hint"), (9, "k8s_pod_status", "Evicted", "hint"),
                        (17, "k8s_terminated", "ContainerStatusUnknown", "hint")]
    assert ex.tables["exits"]["exitcode"].to_list() == [137]
    assert ex.tables["exits"]["message"].to_list() == [
        "The container could not be located when the pod was terminated"]


def test_get_pods_table() -> None:
    ex = run((FIX / "get_pods.txt").read_text())
    assert rows(ex) == [(3, "k8s_pod_status", "CrashLoopBackOff", "hint"), (4, "k8s_pod_status", "OOMKilled", "hint"),
                        (5, "k8s_pod_status", "Error", "hint")]


def test_reason_lines_without_kubernetes_context_are_left_alone() -> None:
    ex = run("Reason: OOMKilled\nexitCode: 137\n  reason: Evicted\n")
    assert ex.events.is_empty() and ex.claimed.is_empty() and ex.ignored.is_empty()


def test_sniff() -> None:
    for f in FIX.glob("*"):
        if f.name != "README.md":
            assert k8s.sniff(f.read_text()) >= 0.8, f.name
    assert k8s.sniff("NCCL INFO x\n") == 0.0


LINES = [ln for f in sorted(FIX.glob("*")) if f.name != "README.md" for ln in f.read_text().splitlines()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(max_size=100), st.sampled_from(LINES)), max_size=40))
def test_property_arbitrary_lines_never_raise(lines: list[str]) -> None:
    text = "\n".join(["kind: Pod", *lines])
    ex = run(text)
    check_contract(ex, len(decode_lines(text.encode()).lines))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(LINES), st.integers(0, 60), st.text(max_size=4)), max_size=30))
def test_property_mutated_lines(muts: list[tuple[str, int, str]]) -> None:
    text = "\n".join(["Namespace: x", *[ln[:i] + j + ln[i:] for ln, i, j in muts]])
    ex = run(text)
    check_contract(ex, len(decode_lines(text.encode()).lines))


def test_training_operator_job_condition() -> None:
    text = ("Status:\n  Conditions:\n    Last Transition Time:  2019-05-15T10:00:00Z\n"
            "    Message:               TFJob myjob has failed because 1 Worker replica(s) failed.\n"
            "    Reason:                TFJobFailed\n    Status:                True\n    Type:                  Failed\n")
    ex = run(text)
    assert [(e["line_no"], e["kind"], e["code"]) for e in ex.events.iter_rows(named=True)] == [
        (5, "k8s_job_status", "TFJobFailed")]
    check_contract(ex, 7)


def test_cloud_interruption_notices_need_no_pod_marker() -> None:
    text = (
        "2024/05/01 10:00:00 INF Adding new event to the event store event={\"Description\":\"Spot ITN received. "
        "Instance will be interrupted at 2024-05-01T10:02:00Z \\n\",\"Kind\":\"SPOT_ITN\"}\n"
        "{\"EventId\":\"A123\",\"EventType\":\"Preempt\",\"ResourceType\":\"VirtualMachine\",\"Resources\":[\"vm1\"]}\n"
        "2024-05-01T10:00:03.000Z compute.instances.preempted projects/p/zones/us-central1-a/instances/gke-pool-1-abcd\n"
        "an unrelated line\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["kind"], e["code"], e["ts"]) for e in ex.events.iter_rows(named=True)] == [
        (1, "cloud_preemption", "aws_spot", datetime(2024, 5, 1, 10, 0, tzinfo=UTC)),
        (2, "cloud_preemption", "azure_preempt", None),
        (3, "cloud_preemption", "gce_preempted", datetime(2024, 5, 1, 10, 0, 3, tzinfo=UTC))]
    assert ex.claimed.to_list() == [1, 2, 3]
    check_contract(ex, 4)


def test_cloud_notices_name_the_instance_and_tell_reclaim_from_pause() -> None:
    text = (
        '18:32:36.273 [i-01f7ddd103dc478c0/cloud-init-output] {"level":"warn","time":"2025-03-31T16:32:36Z",'
        '"message":"Spot interruption payload received: {\\"action\\":\\"terminate\\",\\"time\\":\\"2025-03-31T16:34:24Z\\"}"}\n'
        "Dec 17 16:03:58Z wk-gpu-1 start-worker 2024/12/17 16:03:58 GCP Metadata Service says termination is imminent\n"
        "  \\ initiated recreateInstance on instance 'projects/p/zones/us-east1-d/instances/gke-pool-2vn6'.\\\n"
        '{"EventType":"Freeze","DurationInSeconds":6,"Resources":["spot-node-vmss_24"]}\n'
        "{'EventType': 'Reboot', 'EventStatus': 'Scheduled', 'Resources': ['db-node-1']}\n"
        "2024-05-01T10:00:00Z compute.instances.terminateOnHostMaintenance projects/p/zones/z/instances/a3-7\n"
        "the action was to terminate the test\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["kind"], e["code"], e["host"], e["severity"]) for e in ex.events.iter_rows(named=True)] == [
        (1, "cloud_preemption", "aws_spot", "i-01f7ddd103dc478c0", "warning"),
        (2, "cloud_preemption", "gce_preempted", "wk-gpu-1", "warning"),
        (3, "cloud_event", "mig_recreate", "gke-pool-2vn6", "error"),
        (4, "cloud_event", "azure_freeze", "spot-node-vmss_24", "info"),
        (5, "cloud_event", "azure_reboot", "db-node-1", "info"),
        (6, "cloud_preemption", "gce_maintenance_terminate", "a3-7", "warning")]
    assert ex.events["ts"].to_list()[0] == datetime(2025, 3, 31, 16, 32, 36, tzinfo=UTC)
    assert ex.claimed.to_list() == [1, 2, 3, 4, 5, 6]
    check_contract(ex, 7)



def test_spot_tools_reclaim_notices_and_an_owners_own_stop() -> None:
    # EC2 Spot request status codes (interruption vs the owner's own end), StateReason, ECS/Fargate Spot, AWS Batch's
    # `Host EC2 (...) terminated.`, SkyPilot's spot controller (old and newer wording), an RFC 3339 syslog header's host
    text = (
        '"Code": "instance-terminated-no-capacity",\n'
        "2019-08-14T15:41:08+0000 : 2019-08-14T15:41:08+0000 : Spot Instance terminated due to user-initiated "
        "termination. [instance-terminated-by-user]\n"
        '"Message": "Server.SpotInstanceTermination: Spot instance termination"\n'
        '"stoppedReason": "Your Spot Task was interrupted.",\n'
        '        "StatusReason": "Host EC2 (instance i-0737c70432d64f82a) terminated.",\n'
        "(bert-qa pid=920210) I 05-04 00:52:46 controller.py:100] The cluster is preempted.\n"
        "(sky-x, pid=7) I 12-10 21:39:39 controller.py:118] Cluster is preempted (status: INIT). Recovering...\n"
        "I 03-12 15:33:49 controller.py:245] Cluster is preempted or failed (status: INIT). Recovering...\n"
        "2025-04-07T14:30:37.656982+00:00 tc-worker-3 start-worker[2361]: 2025/04/07 14:30:37 GCP Metadata Service "
        "says termination is imminent\n"
        "the cluster is healthy; instance-terminated-by-users is not a code\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["kind"], e["code"], e["host"], e["severity"]) for e in ex.events.iter_rows(named=True)] == [
        (1, "cloud_preemption", "aws_spot", "hint", "warning"),
        (2, "cloud_event", "aws_spot_closed", "hint", "info"),
        (3, "cloud_preemption", "aws_spot", "hint", "warning"),
        (4, "cloud_preemption", "aws_spot", "hint", "warning"),
        (5, "cloud_preemption", "aws_host_terminated", "i-0737c70432d64f82a", "warning"),
        (6, "cloud_preemption", "skypilot_preempted", "hint", "warning"),
        (7, "cloud_preemption", "skypilot_preempted", "hint", "warning"),
        (8, "cloud_event", "skypilot_preempted_or_failed", "hint", "warning"),
        (9, "cloud_preemption", "gce_preempted", "tc-worker-3", "warning")]
    assert ex.events["ts"].to_list()[8] == datetime(2025, 4, 7, 14, 30, 37, 656982, tzinfo=UTC)
    check_contract(ex, 11)

def pod_rows(ex: Extraction) -> list[tuple]:
    return ex.tables["pod_nodes"].rows()


def test_describe_of_two_pods_gives_each_pod_its_own_node() -> None:
    # before: every event of the file took the first `Node:` (worker-0's), inventing worker-1's node
    ex = run((FIX / "describe_pods_two_nodes.txt").read_text())
    assert rows(ex) == [(26, "k8s_terminated", "Error", "gke-a3-pool-7f3c")]
    assert pod_rows(ex) == [(5, "llm-train-worker-0", "default", "gke-a3-pool-91d2"),
                            (20, "llm-train-worker-1", "default", "gke-a3-pool-7f3c")]
    assert ex.tables["exits"]["host"].to_list() == ["gke-a3-pool-7f3c"]
    check_contract(ex, 31)


def test_yaml_pod_list_name_before_namespace_and_node_name() -> None:
    # an ownerReference's `name:` (no `namespace:` after it) starts no pod
    ex = run((FIX / "pods_list.yaml").read_text())
    assert pod_rows(ex) == [(21, "llm-train-worker-0-x7k2p", "training", "ip-10-0-12-34.ec2.internal"),
                            (44, "llm-train-worker-1-b9dqs", "training", "ip-10-0-12-77.ec2.internal")]
    assert rows(ex) == [(53, "k8s_terminated", "OOMKilled", "ip-10-0-12-77.ec2.internal")]


def test_json_pod_name_namespace_node_name() -> None:
    text = ('{\n    "apiVersion": "v1",\n    "kind": "Pod",\n    "metadata": {\n        "name": "trainer-worker-2",\n'
            '        "namespace": "ml",\n        "uid": "1c2d"\n    },\n    "spec": {\n        "nodeName": "a100-node-09"\n'
            '    },\n    "status": {\n        "containerStatuses": [\n            {\n                "state": {\n'
            '                    "terminated": {\n                        "exitCode": 1,\n'
            '                        "reason": "Error"\n                    }\n                }\n            }\n'
            '        ]\n    }\n}\n')
    ex = run(text)
    assert pod_rows(ex) == [(10, "trainer-worker-2", "ml", "a100-node-09")]
    assert rows(ex) == [(18, "k8s_terminated", "Error", "a100-node-09")]


def test_get_pods_wide_rows_name_their_node() -> None:
    # -A adds NAMESPACE; RESTARTS reads `2 (4m ago)`; a Pending pod's `<none>` node is no node
    ex = run((FIX / "get_pods_wide.txt").read_text())
    assert pod_rows(ex) == [(2, "llm-train-master-0", "training", "gke-a3-pool-91d2"),
                            (3, "llm-train-worker-0", "training", "gke-a3-pool-7f3c")]
    assert rows(ex) == [(3, "k8s_pod_status", "Error", "gke-a3-pool-7f3c")]
    narrow = run("NAME        READY   STATUS   RESTARTS   AGE   IP         NODE\n"
                 "trainer-0   0/1     Error    0          5m    10.1.2.3   node-a\n")
    assert pod_rows(narrow) == [(2, "trainer-0", None, "node-a")]
    # without -o wide there is no NODE column: the last column is AGE, never read as a node
    assert pod_rows(run((FIX / "get_pods.txt").read_text())) == []


def test_scheduled_event_assigns_a_pod_and_its_event_rows_take_that_node() -> None:
    ex = run((FIX / "events_scheduled.txt").read_text())
    assert pod_rows(ex) == [(2, "llm-train-worker-0", "training", "gke-a3-pool-7f3c")]
    assert rows(ex) == [(4, "k8s_pod_status", "BackOff", "gke-a3-pool-7f3c")]


def test_a_file_naming_several_nodes_outside_pod_blocks_keeps_the_paths_host() -> None:
    # two `Node:` lines whose `Name:` lines the excerpt cut: neither node is the event's
    text = ("Node:             node-a/10.0.0.1\nContainers:\n  c:\n    State:          Terminated\n"
            "      Reason:       OOMKilled\n      Exit Code:    137\nNamespace:        x\nNode:             node-b/10.0.0.2\n")
    assert rows(run(text)) == [(5, "k8s_terminated", "OOMKilled", "hint")]
    one = "Namespace:        x\nNode:             node-a/10.0.0.1\nContainers:\n  c:\n    State:          Terminated\n" \
          "      Reason:       OOMKilled\n      Exit Code:    137\n"
    assert rows(run(one)) == [(6, "k8s_terminated", "OOMKilled", "node-a")]


def test_kubelet_admission_errors_are_events_whatever_the_layout() -> None:
    """kubelet's `Allocate failed due to %v, which is unexpected` (reason UnexpectedAdmissionError): the
    describe `Reason:` / `Message:` pair, an Events row, a `get pods` STATUS, and the bare message (a marker
    by itself) are each a k8s_pod_status event of that code, the device manager's error kept in the message."""
    text = ("Status:              Failed\n"
            "Reason:            UnexpectedAdmissionError\n"
            "Message:         Pod Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
            "Requested:1, Available: 0, which is unexpected\n"
            "  Warning  UnexpectedAdmissionError  10s   kubelet  Allocate failed due to rpc error: code = Unavailable "
            "desc = error reading from server: EOF, which is unexpected\n")
    ex = run(text)
    assert [(r[0], r[1], r[2]) for r in rows(ex)] == [(2, "k8s_pod_status", "UnexpectedAdmissionError"),
                                                    (3, "k8s_pod_status", "UnexpectedAdmissionError"),
                                                    (4, "k8s_pod_status", "UnexpectedAdmissionError")]
    assert set(ex.events["severity"]) == {"error"}
    assert "Requested:1, Available: 0" in ex.events["message"][1]
    check_contract(ex, 4)
    bare = run("Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc error: code = "
               "Unknown desc = error creating nvml.Device 3: nvml: GPU is lost, which is unexpected\n")
    assert [(r[0], r[2]) for r in rows(bare)] == [(1, "UnexpectedAdmissionError")]
    table = run("NAME          READY   STATUS                     RESTARTS   AGE\n"
                "rojin-2q6ld   0/1     UnexpectedAdmissionError   0          4s\n")
    assert [(r[0], r[2]) for r in rows(table)] == [(2, "UnexpectedAdmissionError")]


def test_mpi_operator_evicted_condition_and_event() -> None:
    """mpi-operator fails an MPIJob with reason MPIJobEvicted (`%d/%d workers are evicted`), as a condition
    (yaml, a marker by itself) and as a Warning event row."""
    ex = run("status:\n  conditions:\n  - message: 1/8 workers are evicted\n    reason: MPIJobEvicted\n"
             "    status: \"True\"\n    type: Failed\n")
    assert [(r[0], r[1], r[2]) for r in rows(ex)] == [(4, "k8s_job_status", "MPIJobEvicted")]
    ev = run("LAST SEEN   TYPE      REASON          OBJECT          MESSAGE\n"
             "2m          Warning   MPIJobEvicted   mpijob/bench    1/8 workers are evicted\n")
    assert [(r[0], r[1], r[2]) for r in rows(ev)] == [(2, "k8s_job_status", "MPIJobEvicted")]
    running = run("status:\n  conditions:\n  - reason: MPIJobRunning\n    type: Running\n")
    assert rows(running) == []


def test_job_and_pod_deadline_exceeded() -> None:
    """The Job controller's and the kubelet's activeDeadlineSeconds messages are `DeadlineExceeded` wherever they are
    (a Job's conditions, an Events row), while OLM quoting its bundle-unpack Job's deadline is `OLMUnpackDeadline`,
    also in the two-line and the InstallPlan wordings and in `oc describe`'s fold (IBM/cloud-pak-deployer#287)."""
    text = (
        "status:\n  conditions:\n  - message: Job was active longer than specified deadline\n"
        "    reason: DeadlineExceeded\n    type: Failed\n"
        "5m43s  Warning  DeadlineExceeded  job/sample-introspector  Job was active longer than specified deadline\n"
        "Message:  Pod was active on the node longer than the specified deadline\n"
        "Bundle unpacking failed. Reason: DeadlineExceeded, and Message: Job\n"
        "      was active longer than specified deadline\n"
        "bundle unpacking failed.\n"
        "Reason: DeadlineExceeded, and Message: Job was active longer than specified deadline\n"
        "message: Bundle extract Job failed with Reason: DeadlineExceeded, and Message: Job was active longer\n"
        "Failed to pull image \"x:1\": rpc error: code = DeadlineExceeded desc = context deadline exceeded\n")
    ex = run(text)
    assert [(e["line_no"], e["kind"], e["code"]) for e in ex.events.iter_rows(named=True)] == [
        (3, "k8s_job_status", "DeadlineExceeded"), (6, "k8s_job_status", "DeadlineExceeded"),
        (7, "k8s_job_status", "DeadlineExceeded"), (8, "k8s_job_status", "OLMUnpackDeadline"),
        (11, "k8s_job_status", "OLMUnpackDeadline"), (12, "k8s_job_status", "OLMUnpackDeadline")]
