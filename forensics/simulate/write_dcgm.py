"""Writer of the per-node DCGM exports."""

from __future__ import annotations

import random
from pathlib import Path

from forensics.simulate.config import JOB_WIDE_FAULTS, STRAGGLER_FAULTS, US
from forensics.simulate.dialects import variant
from forensics.simulate.timeline import Case, SlowEpisode

DCGM_METRICS = ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_SM_ACTIVE",
                "DCGM_FI_DEV_PCIE_REPLAY_COUNTER")
DCGM_LINK_METRICS = ("DCGM_FI_DEV_PCIE_LINK_GEN", "DCGM_FI_DEV_PCIE_LINK_WIDTH")  # with dcgm_pcie_link = true
BLANK_INT = "9223372036854775792"
BLANK_DBL = "140737488355328.000"


def _link_values(state: str, ep: SlowEpisode | None) -> list[str]:
    """Current PCIe link generation and width (Gen5 x16 when healthy; idle GPUs drop to Gen1)."""
    if state == "lost":
        return [BLANK_INT, BLANK_INT]
    if state == "pcie" and ep is not None:
        return [str(int(ep.fault.params.get("link_gen", 4))), str(int(ep.fault.params.get("link_width", 8)))]
    return ["1" if state == "idle" else "5", "16"]


def _gpu_state_ep(case: Case, host: str, gpu: int, t: int) -> tuple[str, SlowEpisode | None]:
    """DCGM state of one GPU at t, with the straggler episode that causes it (if any)."""
    for s, _e, st in case.gpu_states.get((host, gpu), []):
        if st == "lost" and s <= t:
            return "lost", None
    for ep in case.slow:
        if (ep.straggler and ep.host == host and (ep.rank or 0) % case.cfg.gpus_per_node == gpu
                and ep.start <= t < ep.end):
            return STRAGGLER_FAULTS[ep.fault.type][1], ep
    st = _gpu_state_plain(case, host, gpu, t)
    return st, None


def _gpu_state_plain(case: Case, host: str, gpu: int, t: int) -> str:
    for s, e, st in case.gpu_states.get((host, gpu), []):
        if s <= t < e:
            return st
    for a in case.attempts:
        if host in a.hosts and a.start <= t < a.end:
            return "train" if t >= a.first_step_start else "init"
    return "idle"


def _slow_clock(slowdown: float, rng: random.Random) -> str:
    """SM clock of a GPU whose steps are `slowdown` slower (clocks drop more than step time rises)."""
    return str(int(1980 * (1.0 - min(0.6, 1.4 * slowdown))) + rng.randrange(-25, 26))


def straggler_values(state: str, ep: SlowEpisode, rng: random.Random, base_temp: int) -> tuple[str, ...]:
    """DCGM values of a straggler GPU other than thermal (power cap/brake, clocks stuck low, PCIe)."""
    p = ep.fault.params
    if state == "power":
        cap = float(p.get("power_limit_w", 450.0))
        bits = 0x84 if p.get("power_brake", False) else 0x4
        return (_slow_clock(ep.slowdown, rng), str(base_temp + rng.randrange(-2, 4)),
                f"{cap * rng.uniform(0.985, 1.0):.3f}", str(bits), "", f"{rng.uniform(0.80, 0.88):.4f}", "")
    if state == "clocks_low":
        return (_slow_clock(ep.slowdown, rng), str(base_temp - 3 + rng.randrange(-2, 3)),
                f"{rng.uniform(430, 500):.3f}", "0", "", f"{rng.uniform(0.80, 0.88):.4f}", "")
    # pcie: clocks and power as when training, the link retries (replay counter) and is downtrained
    return ("1980" if rng.random() < 0.8 else str(rng.randrange(1950, 1980)),
            str(base_temp + rng.randrange(-2, 4)), f"{rng.uniform(560, 640):.3f}",
            "4" if rng.random() < 0.2 else "0", "", f"{rng.uniform(0.66, 0.74):.4f}", "")


def dcgm_values(state: str, rng: random.Random, base_temp: int) -> tuple[str, ...]:
    if state == "lost":
        return (BLANK_INT, BLANK_INT, BLANK_DBL, BLANK_INT, "", BLANK_DBL, BLANK_INT)
    if state == "noisy":
        return (str(rng.randrange(1080, 1160)), str(base_temp + rng.randrange(-2, 4)),
                f"{rng.uniform(600, 690):.3f}", "0", "", f"{rng.uniform(0.74, 0.82):.4f}", "")
    if state == "thermal":
        return (str(rng.randrange(1260, 1340)), str(rng.randrange(88, 93)), f"{rng.uniform(480, 540):.3f}",
                str(0x60 | (4 if rng.random() < 0.3 else 0)), "", f"{rng.uniform(0.70, 0.80):.4f}", "")
    if state == "train":
        return ("1980" if rng.random() < 0.8 else str(rng.randrange(1950, 1980)),
                str(base_temp + rng.randrange(-2, 4)), f"{rng.uniform(600, 690):.3f}",
                "4" if rng.random() < 0.2 else "0", "", f"{rng.uniform(0.74, 0.82):.4f}", "")
    if state in ("hung", "init"):
        return ("1980", str(base_temp - 15 + rng.randrange(-1, 2)), f"{rng.uniform(110, 140):.3f}", "0", "",
                f"{rng.uniform(0.005, 0.03):.4f}", "")
    return ("345", str(32 + rng.randrange(0, 4)), f"{rng.uniform(65, 75):.3f}", "1", "", "0.0000", "")


def write_dcgm(case: Case, job: Path) -> None:
    if not case.cfg.dcgm:
        return
    start = case.attempts[0].start
    end = case.attempts[-1].end
    step = case.cfg.dcgm_interval_s * US
    for host in case.hosts:
        rng = random.Random(f"{case.seed}:dcgm:{host}")
        metrics = DCGM_METRICS + (DCGM_LINK_METRICS if case.cfg.dcgm_pcie_link else ())
        layout = case.dialect.dcgm[host].name if case.dialect is not None else "long"
        rows = [variant("dcgm", layout).template.format(fields=",".join(metrics))]
        gpus = range(case.cfg.gpus_per_node)
        meta = {g: (case.ids.uuid(host, g), f"0000{case.ids.pci(g).upper()}.0", 58 + rng.randrange(0, 8))
                for g in gpus}
        replay = dict.fromkeys(gpus, 0)
        wide = [ep for ep in case.slow if ep.fault.type in JOB_WIDE_FAULTS]
        t = start - start % step
        while t <= end + step:
            stamp = case.clock.iso_s(t)
            for g in gpus:
                uuid, pci, base = meta[g]
                replay[g] += sum(n for bt, n in case.replay_bumps.get((host, g), []) if t - step < bt <= t)
                state, ep = _gpu_state_ep(case, host, g, t)
                if ep is not None and state != "thermal":
                    vals = list(straggler_values(state, ep, rng, base))
                    if state == "pcie":
                        replay[g] += rng.randrange(40, 400)
                else:
                    vals = list(dcgm_values(state, rng, base))
                if state == "train" and wide:
                    # job-wide slowdown: every GPU waits longer in communication, none deviates
                    f = max((w.slowdown for w in wide if w.start <= t < w.end), default=0.0)
                    if f:
                        vals[5] = f"{float(vals[5]) / (1.0 + f):.4f}"
                xids = sorted(case.xids.get((host, g), []))
                vals[4] = str(next((x for bt, x in reversed(xids) if bt <= t), 0))
                if vals[6] == "":
                    vals[6] = str(replay[g])
                if case.cfg.dcgm_pcie_link:
                    vals += _link_values(state, ep)
                if layout == "wide":
                    rows.append(",".join([stamp, str(g), uuid, pci, host, *vals]))
                    continue
                for metric, v in zip(metrics, vals, strict=True):
                    if layout == "quoted":
                        rows.append(f'"{stamp}","{metric}","{g}","{uuid}","{pci}","{host}","{v}"')
                    else:
                        rows.append(f"{stamp},{metric},{g},{uuid},{pci},{host},{v}")
            t += step
        d = job / "nodes" / host
        d.mkdir(parents=True, exist_ok=True)
        (d / "dcgm.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
