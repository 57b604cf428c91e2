"""The real GPU failure logs of fixtures/fresh/gpu/ (held out from shared/real-samples; sources in its
README) get the category their threads concluded, and the GPU the log names as the culprit."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "gpu"

# case -> (expected category, culprit PCI bus id where the log names one, the evidence line it must cite)
EXPECTED: dict[str, tuple[str, str | None, tuple[str, int]]] = {
    "accelerate-ecc-traceback": ("gpu_memory", None, ("train.log", 5)),
    "tf-cuda-error-ecc-uncorrectable": ("gpu_memory", None, ("train.log", 1)),
    "openacc-cuctxcreate-214-ecc": ("gpu_memory", None, ("slurm-syscheck.out", 1)),
    "nvsmi-unable-device-handle-reseat": ("gpu_lost", "0000:0b:00", ("nvidia-smi.txt", 1)),
    "dmesg-fallen-off-bus-no-xid": ("gpu_lost", "0000:b3:00", ("dmesg.log", 1)),
}


def test_every_fixture_dir_has_an_expectation() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_fresh_gpu_verdict(case: str, tmp_path: Path) -> None:
    category, pci, (fname, line) = EXPECTED[case]
    rep = analyze(FRESH / case, tmp_path / "out", html=False).report
    v = rep["verdict"]
    assert v["category"] == category
    if pci is not None:
        assert v["culprit"]["pci_bus_id"] == pci
    assert (fname, line) in {(Path(e["path"]).name, e["line"]) for e in v["evidence"]}
