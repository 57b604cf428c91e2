"""forensics/analysis.py: DCGM samples that wait on disk (ingest.SPILL_ROWS) give the same report,
the same store and the same straggler as samples held in memory, whether their Parquet file was
written beside attribution (outputs.EarlySinks) or, that having failed, by the store; the spill
folder is removed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import duckdb
import pytest

import forensics.ingest as ingest_mod
import forensics.parquet_tables as parquet_tables
from forensics.analysis import analyze
from forensics.simulate import load_scenario, simulate
from forensics.store import Store

SCENARIOS = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"


@pytest.mark.parametrize("scenario", ["thermal_straggler", "pcie_straggler", "gpu_lost"])
def test_spilled_dcgm_samples_give_the_same_analysis(scenario: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    name = "gpu_fell_off_bus" if scenario == "gpu_lost" else scenario
    simulate(load_scenario(SCENARIOS / f"{name}.toml"), tmp_path / "case", 3)
    job = tmp_path / "case" / "job"
    monkeypatch.setattr(ingest_mod, "SPILL_ROWS", 10**12)
    held = analyze(job, tmp_path / "held", html=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setattr(ingest_mod, "SPILL_ROWS", 1)
    real_spill, n_spilled = ingest_mod._spill, []

    def counting(i, res, spill_dir):  # noqa: ANN001, ANN202
        out = real_spill(i, res, spill_dir)
        n_spilled.extend(out.spilled)
        return out

    monkeypatch.setattr(ingest_mod, "_spill", counting)
    real_adopt, adopted = Store.adopt_parquet, []

    def adopting(self, table, written):  # noqa: ANN001, ANN202
        adopted.append((table, Path(written).name))
        return real_adopt(self, table, written)

    monkeypatch.setattr(Store, "adopt_parquet", adopting)
    spilled = analyze(job, tmp_path / "spilled", html=True)
    assert n_spilled and set(n_spilled) == {"dcgm_samples"}
    # encoded beside attribution (outputs.EarlySinks), before the verdict; the store moved the file in
    assert adopted == [("dcgm_samples", "early-dcgm_samples.parquet")]
    assert list(scratch.iterdir()) == []  # the spill folder is gone
    a = json.loads((tmp_path / "held" / "report.json").read_text())
    b = json.loads((tmp_path / "spilled" / "report.json").read_text())
    assert a == b
    if name != "gpu_fell_off_bus":
        assert b["stragglers"] and b["stragglers"][0]["host"]
    q = "SELECT * FROM dcgm_samples ORDER BY file_id, line_no, field"
    sa, sb = Store(held.store_path, create=False, read_only=True), Store(spilled.store_path, create=False, read_only=True)
    try:
        ra, rb = sa.sql(q), sb.sql(q)
    finally:
        sa.close()
        sb.close()
    assert ra.height > 1000 and ra.equals(rb)
    # held in memory: a table; waited on disk: Parquet beside the database, a view over it by its path
    assert not (tmp_path / "held" / "dcgm_samples.parquet").exists()
    assert (tmp_path / "spilled" / "dcgm_samples.parquet").exists()
    con = duckdb.connect(str(spilled.store_path), read_only=True)
    try:
        kinds = dict(con.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall())
        assert kinds["dcgm_samples"] == "VIEW" and kinds["events"] == "BASE TABLE"
        assert con.execute("SELECT count(*) FROM dcgm_samples").fetchone()[0] == ra.height
    finally:
        con.close()
    assert (tmp_path / "spilled" / "plots" / "straggler_heatmap.png").read_bytes() == \
        (tmp_path / "held" / "plots" / "straggler_heatmap.png").read_bytes()


def test_a_failed_early_sink_leaves_the_samples_to_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread that encodes the samples before the verdict fails (its folder's disk full, say): the
    store writes them itself after the verdict, the same rows, and nothing of the failed file is left."""
    simulate(load_scenario(SCENARIOS / "thermal_straggler.toml"), tmp_path / "case", 3)
    job = tmp_path / "case" / "job"
    monkeypatch.setattr(ingest_mod, "SPILL_ROWS", 1)
    early = analyze(job, tmp_path / "early", html=False)
    real_sink, tried = parquet_tables.sink, []

    def failing(table, df, file):  # noqa: ANN001, ANN202
        if file.name.startswith("early-"):
            tried.append(file.name)
            raise OSError(28, "No space left on device")
        return real_sink(table, df, file)

    monkeypatch.setattr(parquet_tables, "sink", failing)
    import forensics.store as store_mod
    monkeypatch.setattr(store_mod, "sink", failing)
    late = analyze(job, tmp_path / "late", html=False)
    assert tried == ["early-dcgm_samples.parquet"]
    assert json.loads((tmp_path / "late" / "report.json").read_text()) == \
        json.loads((tmp_path / "early" / "report.json").read_text())
    q = "SELECT * FROM dcgm_samples ORDER BY file_id, line_no, field"
    sa, sb = Store(early.store_path, create=False, read_only=True), Store(late.store_path, create=False, read_only=True)
    try:
        ra, rb = sa.sql(q), sb.sql(q)
    finally:
        sa.close()
        sb.close()
    assert ra.height > 1000 and ra.equals(rb)
    assert sorted(p.name for p in (tmp_path / "late").iterdir()) == [
        "dcgm_samples.parquet", "forensics.duckdb", "report.json", "report.md"]


LATE_NODE = ("INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group\n"
             "torch.distributed.elastic.rendezvous.api.RendezvousClosedError\n")
SUCCEEDED = ('{"name": "torchelastic.worker.status.SUCCEEDED", "source": "WORKER", "timestamp": 0, "metadata": '
             '{"run_id": "job-7", "global_rank": 0, "group_rank": 0, "worker_id": "311", "role": "default", '
             '"hostname": "node-0", "state": "SUCCEEDED", "total_run_time": 3600, "rdzv_backend": "c10d", '
             '"raw_error": null, "metadata": "{\\"local_rank\\": [0]}", "agent_restarts": 0}}\n')


@pytest.mark.parametrize("finished", [
    SUCCEEDED,  # the other agent's worker-status event
    "[INFO|trainer.py:2381] 2024-05-08 08:47:31,877 >> \n\nTraining completed. Do not forget to share your model "
    "on huggingface.co/models =)\n",  # the trainer's own end line
])
def test_a_late_agents_closed_rendezvous_is_no_failure_of_a_finished_job(finished: str, job_of, tmp_path: Path) -> None:
    """_completed_attempts with precedence.toml [after_completion]: RendezvousClosedError signals completion to
    nodes that arrive late (torch/distributed/elastic/rendezvous/api.py): beside the job's own end it is no
    failure; without one it stays the root (framework_bug)."""
    job = job_of({"node-0/train.log": finished, "node-1/agent.log": LATE_NODE})
    report = analyze(job, tmp_path / "out", html=False).report
    assert report["verdict"]["kind"] == "completed" and not report["interruptions"], report["verdict"]["summary"]
    alone = analyze(job_of({"node-0/train.log": "", "node-1/agent.log": LATE_NODE}), tmp_path / "out2",
                    html=False).report["verdict"]
    assert alone["category"] == "framework_bug", alone["summary"]
