"""Tests for parsers.sagemaker: SageMaker training-job status history rows as scheduler states."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from forensics.analysis import analyze
from parsers import sagemaker
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, Extraction, ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "sagemaker"


def run(text: str, **ctx: object) -> Extraction:
    lines = with_body(decode_lines(text.encode()).lines)
    return sagemaker.parse(lines, ParseContext(path="scheduler.txt", **ctx))  # type: ignore[arg-type]


def rows(ex: Extraction) -> list[tuple]:
    return [(r["line_no"], r["code"], r["severity"], r["ts"]) for r in ex.events.iter_rows(named=True)]


def test_console_table_rows_in_progress_parsed_stop_is_the_event() -> None:
    ex = run((FIX / "status_history_stopped.txt").read_text())
    assert dict(ex.events.schema) == EVENT_SCHEMA
    assert rows(ex) == [(4, "Stopping", "warning", datetime(2022, 4, 12, 8, 51, tzinfo=UTC))]
    assert ex.claimed.to_list() == [1, 2, 3, 4, 5]
    assert ex.events["kind"].to_list() == ["sched_state"] and ex.events["source"].to_list() == ["sagemaker"]


def test_api_times_tab_cells_spot_interruption_restart_and_max_runtime() -> None:
    ex = run((FIX / "status_history_spot_api.tsv").read_text())
    assert rows(ex) == [
        (4, "Interrupted", "warning", datetime(2023, 6, 2, 13, 40, 11, 7000, tzinfo=UTC)),
        (5, "Restarting", "warning", datetime(2023, 6, 2, 13, 42, 30, 500000, tzinfo=UTC)),
        (7, "MaxRuntimeExceeded", "warning", datetime(2023, 6, 2, 18, 2, 47, 930000, tzinfo=UTC)),
    ]
    assert ex.claimed.to_list() == list(range(1, 8))


def test_console_time_without_zone_is_in_the_job_zone() -> None:
    ex = run("Failed | Jun 02, 2023 10:12 | - | Training job failed\n", tz=ZoneInfo("Europe/Berlin"))
    assert rows(ex) == [(1, "Failed", "error", datetime(2023, 6, 2, 8, 12, tzinfo=UTC))]


def test_sdk_status_lines_are_utc_status_rows() -> None:
    text = ("2019-04-09 21:40:57 Training - Training image download completed. Training in progress.......\n"
            "2019-04-09 21:42:19 Uploading - Uploading generated training model\n"
            "2019-04-09 21:42:25 Completed - Training job completed\n")
    ex = run(text, tz=ZoneInfo("Europe/Berlin"))  # the SDK prints UTC: the job's zone does not apply
    assert rows(ex) == [(3, "Completed", "info", datetime(2019, 4, 9, 21, 42, 25, tzinfo=UTC))]
    assert ex.claimed.to_list() == [1, 2, 3]
    assert sagemaker.sniff(text) == 0.9


@pytest.mark.parametrize(("line", "code"), [
    ("UnexpectedStatusException: Error for Training job j-1: Failed. Reason: AlgorithmError: ExecuteUserScriptError:",
     "AlgorithmError"),
    ("ValueError: Error training j-1: Failed Reason: ClientError: SageMaker was unable to assume the role 'r'",
     "ClientError"),
    ('  "FailureReason": "InternalServerError: We encountered an internal error.  Please try again.",',
     "InternalServerError"),
    ('FailureReason: "CapacityError: Unable to provision requested ML compute capacity."', "CapacityError"),
    ("| 1594116684946 | Platform Error: SageMaker pipe channel timed out.", "PlatformError"),
])
def test_failure_reasons_are_claimed_events(line: str, code: str) -> None:
    ex = run(line + "\n")
    assert [(e["kind"], e["code"], e["severity"]) for e in ex.events.iter_rows(named=True)] == [
        ("sched_failure", code, "error")]
    assert ex.claimed.to_list() == [1]  # read, so never also kept as an unparsed error line


@pytest.mark.parametrize("line", [
    "Training | the loss is going down | ok",  # no times
    "   1 | 07/23/2024 | 10:12:01 | Memory #0x01 | Uncorrectable ECC | Asserted",
    "Stopping the training job at Apr 12, 2022 08:51 UTC",
    "2019-04-09 21:42:25 the job Completed - fine",  # an SDK-like stamp, no status after it
    "Termination reason: Error. The replica master 0 exited",  # not a SageMaker FailureReason
])
def test_other_lines_are_not_status_rows(line: str) -> None:
    assert sagemaker.sniff(line) == 0.0
    assert run(line).claimed.is_empty()


def test_end_to_end_stopped_job_is_a_stop_not_a_healthy_finish(job_of, tmp_path: Path) -> None:
    job = job_of({"scheduler.txt": (FIX / "status_history_stopped.txt").read_text()})
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == "user_cancelled"
    assert v["culprit"]["host"] is None


def test_end_to_end_spot_job_cites_the_interruption_and_the_time_limit(job_of, tmp_path: Path) -> None:
    """A status table alone makes one attempt (no process log splits it at the restart): the verdict
    is the first root, the spot interruption; the later time limit is cited as evidence too."""
    job = job_of({"status.tsv": (FIX / "status_history_spot_api.tsv").read_text()})
    v = analyze(job, tmp_path / "out", html=False).report["verdict"]
    assert (v["kind"], v["category"]) == ("preemption", "preemption")
    cited = [(e["path"], e["line"], e["signature"]) for e in v["evidence"]]
    assert cited[:2] == [("status.tsv", 4, "sagemaker-interrupted"), ("status.tsv", 7, "sagemaker-max-runtime")]
