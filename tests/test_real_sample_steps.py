"""Real samples that hold training steps (../shared/real-samples/): every attempt's first and
last step, the step number and the file:line it comes from, against a reading of the log by hand
(the literals below were read off the files with grep/less, not copied from the analyzer).

How each was read:
- 222 (MXNet Speedometer, `Epoch[e] Batch [b]`): 16 lines, no stamps, one attempt. MXNet prints
  no epoch length, so the step is the batch within its epoch as printed (parsers/steps.py). First
  step line 1, `Epoch[0] Batch [20]`: 20. Last step line 16, `Epoch[2] Batch [40]`: 40 (of epoch
  2; the counter going back at lines 8 and 15 is a new epoch, not a restart).
- 253 (Tacotron2 `Train iter N loss ... Grad Norm ... s/it`): first step line 10 `Train iter 16`,
  last line 20 `Train iter 24` (lines 1-7 and 13 are skipped overflow steps, not progress).
- 270 (Keras `1490/1490 - 106s - loss: ...` with `Epoch k/200` between): line 1 ends the epoch
  before `Epoch 12/200` (line 2), so 11 epochs of 1490 steps are done: step 16390. The last
  progress line, 21, ends epoch 21 (`Epoch 22/200` follows): 21 x 1490 = 31290.
- 273 (FlagScale straggler report): one step line, line 2 `Straggler Report at Step 10`.
- 272 (Lightning ModelCheckpoint, `Epoch 0, global step 2048: 'loss/val' reached ..., saving
  model to ...`): two lines, each names the global step the run had reached: 2048 at line 1,
  4096 at line 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

REAL = Path(__file__).resolve().parents[1].parent / "shared" / "real-samples"
if not REAL.is_dir():
    pytest.skip("../shared/real-samples is missing", allow_module_level=True)

# case prefix -> one (first, last) per attempt; each (file, line, step)
HAND: dict[str, list[tuple[tuple[str, int, int | None], tuple[str, int, int | None]]]] = {
    "222": [(("train.log", 1, 20), ("train.log", 16, 40))],
    "253": [(("train.log", 10, 16), ("train.log", 20, 24))],
    "270": [(("train.log", 1, 16390), ("train.log", 21, 31290))],
    "273": [(("train.log", 2, 10), ("train.log", 2, 10))],
    "272": [(("train.log", 1, 2048), ("train.log", 2, 4096))],
}
# (case, first|last) -> why the analyzer disagrees with the hand reading (a strict xfail); none now
DISAGREE: dict[tuple[str, str], str] = {}
CASES = [(c, w) for c in HAND for w in ("first", "last")]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    out: dict[str, dict] = {}
    tmp = tmp_path_factory.mktemp("steps")
    for c in HAND:
        (case,) = sorted(REAL.glob(f"{c}-*"))
        out[c] = analyze(case, tmp / c, html=False).report
    return out


@pytest.mark.parametrize(("case", "which"), [
    pytest.param(c, w, marks=pytest.mark.xfail(strict=True, reason=DISAGREE[(c, w)])) if (c, w) in DISAGREE
    else (c, w) for c, w in CASES])
def test_first_and_last_step_of_each_attempt_match_a_hand_reading(reports: dict[str, dict], case: str,
                                                                  which: str) -> None:
    rep = reports[case]
    want = [att[0 if which == "first" else 1] for att in HAND[case]]
    got = []
    for a in rep["attempts"]:
        ev = a["evidence"].get(f"{which}_step") or {}
        got.append((ev.get("path"), ev.get("line"), a[f"{which}_step"]))
    assert got == want
