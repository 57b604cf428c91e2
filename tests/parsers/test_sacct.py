"""Tests for parsers.sacct: -P, -p and fixed-width output."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import dcgm, kernel, sacct, slurm
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, Extraction, ParseContext

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures" / "sacct"


def run(text: str, **ctx: object) -> Extraction:
    return sacct.parse(with_body(decode_lines(text.encode()).lines), ParseContext(path="sacct.txt", **ctx))  # type: ignore[arg-type]


def fixture(name: str, **ctx: object) -> Extraction:
    return run((FIX / name).read_text(), **ctx)


def check_contract(ex: Extraction, n_lines: int) -> None:
    assert dict(ex.events.schema) == EVENT_SCHEMA
    assert dict(ex.tables["sched_records"].schema) == TABLE_SCHEMAS["sched_records"]
    claimed, ignored = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not claimed & ignored
    assert all(1 <= n <= n_lines for n in claimed | ignored)


def test_sacct_parsable2() -> None:
    ex = fixture("sacct_P.txt")
    r = ex.tables["sched_records"].to_dicts()
    assert [(x["line_no"], x["job_id"], x["step_id"], x["state"]) for x in r] == [
        (2, "1234", None, "NODE_FAIL"), (3, "1234", "batch", "CANCELLED"), (4, "1234", "extern", "COMPLETED"),
        (5, "1234", "0", "FAILED")]
    assert r[0]["failed_node"] == "node03" and r[0]["node_list"] == "node[01-04]" and r[0]["restarts"] == 0
    assert (r[1]["exit_code"], r[1]["signal"]) == (0, 15)
    assert r[3]["end"] is None and r[3]["start"] == datetime(2026, 5, 1, 10, 0, 5, tzinfo=UTC)
    assert r[0]["reason"] is None
    e = ex.events.to_dicts()
    assert [(x["code"], x["severity"]) for x in e] == [
        ("NODE_FAIL", "error"), ("CANCELLED", "warning"), ("COMPLETED", "info"), ("FAILED", "error")]
    assert e[0]["ts"] == datetime(2026, 5, 1, 12, 0, tzinfo=UTC) and e[0]["host"] == "node03"
    assert e[3]["ts"] == datetime(2026, 5, 1, 10, 0, 5, tzinfo=UTC)  # End Unknown -> Start
    assert ex.ignored.to_list() == [1]
    check_contract(ex, 5)


def test_sacct_parsable_trailing_pipe_and_cancelled_by() -> None:
    r = fixture("sacct_p_trailing.txt").tables["sched_records"].to_dicts()
    assert (r[0]["state"], r[0]["reason"]) == ("CANCELLED", "by 1234")
    assert (r[1]["state"], r[1]["exit_code"], r[1]["signal"]) == ("OUT_OF_MEMORY", 0, 125)
    assert r[1]["node_list"] == "gpu-001"


def test_sacct_local_time_zone() -> None:
    r = fixture("sacct_P.txt", tz=ZoneInfo("America/New_York")).tables["sched_records"].to_dicts()
    assert r[0]["end"] == datetime(2026, 5, 1, 16, 0, tzinfo=UTC)


def test_sacct_fixed_width() -> None:
    ex = fixture("sacct_fixed_width.txt")
    r = ex.tables["sched_records"].to_dicts()
    assert [(x["line_no"], x["job_id"], x["step_id"], x["name"], x["state"]) for x in r] == [
        (3, "9012", None, "llm-70b", "TIMEOUT"), (4, "9012", "batch", "batch", "CANCELLED"),
        (5, "9012", "0", "python", "CANCELLED"), (6, "9013", None, "llm-70b", "PENDING")]
    assert r[0]["end"] == datetime(2026, 5, 4, 0, 0, 5, tzinfo=UTC)
    assert r[3]["start"] is None and r[3]["node_list"] is None
    assert ex.events["code"].to_list() == ["TIMEOUT", "CANCELLED", "CANCELLED", "PENDING"]
    assert ex.ignored.to_list() == [1, 2]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=100), max_size=12))
def test_property_arbitrary_lines_never_raise(lines: list[str]) -> None:
    text = "\n".join(ln.replace("\n", " ").replace("\r", " ") for ln in lines)
    check_contract(run(text), decode_lines(text.encode()).lines.height)


REAL_LINES = [ln for f in sorted(FIX.glob("*.txt")) for ln in f.read_text().splitlines()]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(REAL_LINES), st.integers(0, 120), st.text(max_size=4)), max_size=10))
def test_property_mutated_real_lines(muts: list[tuple[str, int, str]]) -> None:
    text = "\n".join((ln[:i] + s + ln[i + len(s):]) for ln, i, s in muts)
    check_contract(run(text), decode_lines(text.encode()).lines.height)


def test_sniff_ranks_sacct_fixtures_first() -> None:
    for f in sorted(FIX.glob("*.txt")):
        head = f.read_text()
        assert sacct.sniff(head) > max(m.sniff(head) for m in (kernel, dcgm, slurm)), f.name


def test_sacct_json_data_parser_v0040_wrapped_numbers() -> None:
    ex = fixture("sacct_json_v0040.json")
    rec = ex.tables["sched_records"]
    assert rec.select("line_no", "job_id", "step_id", "state", "exit_code", "signal", "node_list", "restarts").rows() == [
        (5, "4242", None, "NODE_FAIL", 0, 9, "node[01-04]", 1),
        (15, "4242", "batch", "CANCELLED", 0, 15, "node01", None),
        (22, "4242", "0", "NODE_FAIL", 0, 9, "node[01-04]", None),
    ]
    assert rec["end"][2] == datetime(2024, 5, 1, 12, 59, 50, tzinfo=UTC)
    assert ex.events.select("line_no", "code", "severity").rows() == [
        (5, "NODE_FAIL", "error"), (15, "CANCELLED", "warning"), (22, "NODE_FAIL", "error")]
    assert sacct.sniff((FIX / "sacct_json_v0040.json").read_text()) >= 0.9
    check_contract(ex, 31)


def test_sacct_json_old_plain_numbers_single_line() -> None:
    ex = fixture("sacct_json_v0037.json")
    rec = ex.tables["sched_records"]
    assert rec.select("job_id", "step_id", "state", "signal", "node_list").rows() == [
        ("777", None, "TIMEOUT", 15, "gpu-a7"), ("777", "0", "CANCELLED", 15, "gpu-a7")]
    assert ex.events["host"].to_list() == ["gpu-a7", "gpu-a7"]
    assert ex.events["ts"][0] == datetime(2023, 11, 15, 22, 13, 20, tzinfo=UTC)


def test_sacct_json_invalid_gives_a_warning() -> None:
    ex = run('{"jobs": [ {"job_id": 1, \n')
    assert ex.events.is_empty() and "could not be read" in ex.warnings[0]


def test_scontrol_show_job_cut_before_its_jobid_line() -> None:
    """A real excerpt (fixtures/sacct/README.md) that starts at `UserId=`: the record is still read,
    its job id null, every line claimed."""
    ex = fixture("scontrol_show_job_headerless.txt")
    r = ex.tables["sched_records"].to_dicts()
    assert [(x["line_no"], x["job_id"], x["state"], x["reason"], x["exit_code"], x["signal"], x["restarts"],
             x["node_list"]) for x in r] == [(3, None, "FAILED", "NonZeroExitCode", 1, 0, 0, "asus")]
    assert r[0]["start"] == r[0]["end"] == datetime(2018, 11, 1, 14, 54, 3, tzinfo=UTC)
    e = ex.events.to_dicts()
    assert [(x["line_no"], x["code"], x["severity"], x["host"]) for x in e] == [(3, "FAILED", "error", "asus")]
    assert e[0]["message"] == "JobState=FAILED Reason=NonZeroExitCode Dependency=(null)"
    assert ex.claimed.to_list() == list(range(1, 18)) and ex.ignored.to_list() == []
    check_contract(ex, 17)


def test_scontrol_show_job_multi_line_and_one_liner() -> None:
    ex = fixture("scontrol_show_job_two.txt")
    r = ex.tables["sched_records"].to_dicts()
    assert [(x["line_no"], x["job_id"], x["name"], x["state"], x["reason"], x["restarts"], x["node_list"])
            for x in r] == [(4, "48213", "llama pretrain", "NODE_FAIL", "NodeDown", 2, "gpu-[017-018]"),
                            (18, "48300", "eval", "TIMEOUT", "TimeLimit", 0, "gpu-021")]
    assert (r[1]["exit_code"], r[1]["signal"]) == (0, 15)
    assert r[0]["end"] == datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    e = ex.events.to_dicts()
    # a two-node list names no host; a one-node list does
    assert [(x["code"], x["host"], x["ts"]) for x in e] == [
        ("NODE_FAIL", None, datetime(2026, 5, 1, 12, 0, tzinfo=UTC)),
        ("TIMEOUT", "gpu-021", datetime(2026, 5, 1, 14, 0, 5, tzinfo=UTC))]
    assert ex.ignored.to_list() == [17]  # the blank line between the records
    check_contract(ex, 18)


def test_scontrol_sniff_and_not_sacct_lookalikes() -> None:
    assert sacct.sniff((FIX / "scontrol_show_job_two.txt").read_text()) == 0.9
    assert sacct.sniff((FIX / "scontrol_show_job_headerless.txt").read_text()) == 0.9
    # a log line that mentions a state word is not a record
    assert sacct.sniff("2026-05-01 12:00:00 INFO job state FAILED after 3 retries\n") == 0.0


def test_header_of_field_names_without_jobid() -> None:
    """`sacct --format` / `--fields` without JobID still prints a header of field names (a fixed-width one cuts a
    name to its column, `TimelimitR`): the table is read by name, State and all (neilmunday/slurm-mail#103's
    `--fields=Start,End,State,NNodes,Elapsed,ExitCode,TimeLimit,TimelimitRaw`); a `|` form too."""
    text = (
        "              Start                 End      State   NNodes    Elapsed ExitCode  Timelimit TimelimitR\n"
        "------------------- ------------------- ---------- -------- ---------- -------- ---------- ----------\n"
        "2023-12-12T21:52:11 2023-12-12T22:03:46  COMPLETED        1   00:11:35      0:0   02:00:00        120\n"
        "2023-12-12T21:52:11 2023-12-12T22:03:46  TIMEOUT          1   00:11:35      0:15\n")
    assert sacct.sniff(text) == 0.95
    ex = run(text)
    r = ex.tables["sched_records"].to_dicts()
    assert [(x["line_no"], x["job_id"], x["state"], x["exit_code"], x["signal"]) for x in r] == [
        (3, None, "COMPLETED", 0, 0), (4, None, "TIMEOUT", 0, 15)]
    assert r[0]["end"] == datetime(2023, 12, 12, 22, 3, 46, tzinfo=UTC)
    assert ex.events["code"].to_list() == ["COMPLETED", "TIMEOUT"]
    check_contract(ex, 4)
    pipe = run("User|State|ExitCode|NodeList\nalice|CANCELLED by 1001|0:15|gpu-3\n")
    assert [(x["state"], x["node_list"], x["reason"]) for x in pipe.tables["sched_records"].to_dicts()] == [
        ("CANCELLED", "gpu-3", "by 1001")]


def test_a_table_of_other_names_is_not_a_sacct_header() -> None:
    # sinfo's header has a State column too, but AVAIL is no sacct field
    sinfo = ("PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
             "gpu*         up 1-00:00:00      4  alloc gpu-[1-4]\n")
    assert sacct.sniff(sinfo) == 0.0
    assert run(sinfo).events.is_empty()
