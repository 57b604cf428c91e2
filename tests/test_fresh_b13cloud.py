"""The real cloud-platform interruption excerpts of fixtures/fresh/b13cloud (public threads held out from the real
samples and from every other fresh set; sources and conclusions in its README.md), analyzed end to end: the
verdict's category is the one the thread concluded (`none` for the healthy logs), the culprit is the instance the
log names, the deciding evidence is the line a person would cite, and the restart decision is the thread's answer
where it states one."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b13cloud"

# case -> (category, or "none"; deciding signature; culprit fields; (file, line) of the deciding evidence;
# auto_recoverable, None where the thread states none)
CASES: dict[str, tuple[str, str | None, dict, tuple[str, int] | None, bool | None]] = {
    "translations964-gcp-metadata-termination-imminent": (
        "preemption", "cloud-preemption-notice",
        {"host": "translations-1-b-linux-v100-gpu-4-1tb-vvppjagzspgzcf58mfvmzw-1"}, ("worker.log", 1), True),
    "runson277-aws-spot-interruption-payload": (
        "preemption", "cloud-preemption-notice", {"host": "i-01f7ddd103dc478c0"}, ("cloud-init-output.log", 1), True),
    "kubeapps1141-gke-mig-recreateinstance-autorepair": (
        "host_hardware", "cloud-instance-replaced", {"host": "<>-cluster-default-pool-0d14fd5a-2vn6"},
        ("operation.yaml", 2), True),
    "hfnotebooks136-sagemaker-algorithmerror-exitcode1": (
        "user_code", "sagemaker-algorithm-error", {"host": None}, ("notebook-output.txt", 1), None),
    "sdk1225-sagemaker-executeuserscripterror-command": (
        "user_code", "pt-user-exception", {"host": None}, ("notebook-output.txt", 1), None),
    "sdk35-sagemaker-clienterror-assume-role": (
        "user_code", "sagemaker-client-error", {"host": None}, ("pytest.log", 9), False),
    "smexamples1316-sagemaker-internalservererror-pipe-timeout": (
        "storage", "sagemaker-pipe-channel-timeout", {"host": None}, ("cloudwatch-log.txt", 2), None),
    "aks3719-azure-freeze-heartbeat-healthy": ("none", None, {"host": None}, None, None),
    "smexamples717-sagemaker-status-completed-healthy": ("none", None, {"host": None}, None, None),
    "smexamples1237-sagemaker-managed-spot-completed-healthy": ("none", None, {"host": None}, None, None),
}

XFAIL: dict[str, str] = {}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(CASES)


@pytest.mark.fresh_cases
def test_fresh_b13cloud_verdict(case: str, tmp_path: Path, fresh_verdict_holds) -> None:
    category, signature, culprit, cite, restart = CASES[case]
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    fresh_verdict_holds(report, category, signature, culprit, cite, restart)


# variants of the families beyond the posted lines, end to end: (file name, text, kind, category, deciding signature)
VARIANTS = {
    # the IMDS spot/instance-action document as a poller prints it (unescaped)
    "aws-instance-action-stop": ("spot-poller.log", (
        '2024-05-01T10:00:00Z spot notice {"action": "stop", "time": "2024-05-01T10:02:00Z"}\n'),
        "preemption", "preemption", "cloud-preemption-notice"),
    # GCE metadata key polled by a shutdown script
    "gce-metadata-preempted-true": ("shutdown.log", (
        "2024-05-01T10:00:00Z curl http://metadata.google.internal/computeMetadata/v1/instance/preempted: TRUE\n"),
        "preemption", "preemption", "cloud-preemption-notice"),
    # a GPU VM stopped for host maintenance (it cannot live-migrate)
    "gce-terminate-on-maintenance": ("operations.txt", (
        "2024-05-01T10:00:00.000-07:00 compute.instances.terminateOnHostMaintenance "
        "projects/p/zones/us-central1-a/instances/a3-node-7\n"), "preemption", "preemption", "cloud-preemption-notice"),
    # Azure Spot eviction, printed as a Python dict by an agent
    "azure-preempt-dict": ("agent.log", (
        "2023-03-16 13:46:56,005 WARNING scheduled event: {'EventId': 'CA9C', 'EventStatus': 'Scheduled', "
        "'EventType': 'Preempt', 'ResourceType': 'VirtualMachine', 'Resources': ['gpu-vm-3']}\n"),
        "preemption", "preemption", "cloud-preemption-notice"),
    # GCE host error
    "gce-host-error": ("operations.txt", (
        "2024-05-01T10:00:00Z compute.instances.hostError projects/p/zones/us-central1-a/instances/a3-node-7\n"),
        "crash", "host_hardware", "cloud-instance-replaced"),
    # the API's FailureReason JSON field
    "sagemaker-failure-reason-json": ("describe.json", (
        '{\n  "TrainingJobStatus": "Failed",\n  "FailureReason": "ClientError: Data download failed:Could not '
        'download s3://b/train.csv"\n}\n'), "crash", "user_code", "sagemaker-client-error"),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_family_variants(variant: str, tmp_path: Path, job_of) -> None:
    name, text, kind, category, signature = VARIANTS[variant]
    v = analyze(job_of({name: text}), tmp_path / "out", html=False).report["verdict"]
    assert v["kind"] == kind and v["category"] == category, v["summary"]
    assert v["evidence"][0]["signature"] == signature


def test_gce_host_error_names_the_instance(tmp_path: Path, job_of) -> None:
    v = analyze(job_of({"operations.txt": VARIANTS["gce-host-error"][1]}), tmp_path / "out", html=False).report["verdict"]
    assert v["culprit"]["host"] == "a3-node-7"
    assert v["action"] == "exclude_node_and_restart"


@pytest.mark.parametrize("text", [
    # a scheduled reboot and a rebalance recommendation say what may come, not that it came
    '{"DocumentIncarnation":1,"Events":[{"EventId":"8A50","EventStatus":"Scheduled","EventType":"Reboot",'
    '"ResourceType":"VirtualMachine","Resources":["aks-nodepool1-34166363-1"],"NotBefore":"Mon, 26 Nov 2018 10:52:34 GMT"}]}\n',
    '2020-10-27T08:20:00Z rebalance: {"noticeTime": "2020-10-27T08:22:00Z"}\n',
    "2024-05-01T10:00:00Z compute.instances.migrateOnHostMaintenance projects/p/zones/z/instances/a3-node-7\n",
])
def test_notices_that_take_nothing_away_are_no_interruption(text: str, tmp_path: Path, job_of) -> None:
    rep = analyze(job_of({"notices.log": text}), tmp_path / "out", html=False).report
    assert rep["verdict"]["kind"] == "none" and not rep["interruptions"], rep["verdict"]["summary"]
