"""Line dialects: the shapes one source can print, as data tables, drawn per host and per source.

A real job's logs differ from cluster to cluster in how each line is wrapped and stamped: a
launcher or collector in front of every process line (srun `-l`, pdsh, `kubectl logs
--timestamps`, mpirun `--tag-output`, a workflow engine), the kernel log's stamp (dmesg, `dmesg
-T`, syslog, `journalctl -o short-iso`), the DCGM export's CSV layout (long, quoted, wide) and
the step-log style. Each table below is one source's variants; `draw` picks one per host (per job
for the step log) from a seeded RNG, so a (scenario, seed, dialect seed) triple gives the same
bytes every time.

The default (no dialect) is today's output: the scenario's own `launcher_prefix`,
`kernel_log_style`, the long DCGM CSV and the framework's own step lines (`dialect = None`
everywhere; pinned by a digest test).

Templates are `str.format` strings over the fields their source offers:
- rank-log prefixes: `rank`, `local_rank`, `host`, `pid`, `job`, `iso` (UTC, ms, `Z`), `stamp`
  (local `YYYY-MM-DD HH:MM:SS.mmm`);
- kernel stamps: `upt` (`[ uptime.us]`), `ctime` (dmesg -T), `iso` (local, `+hhmm`), `mon`,
  `day` (right-aligned in 2), `hms`, `host`;
- step styles: the line header, `stamp` (local; `,mmm` for pylogging) and `logger` (fairseq).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Variant:
    """One shape a source prints: `name`, the `template` (see the module docstring) and the
    tool or emitter it comes from (`source`)."""
    name: str
    template: str
    source: str


# what a launcher / collector puts in front of every line of a process log (parsers/prefixes.py
# peels these); applied outside the scenario's own `launcher_prefix`
RANK_PREFIXES: tuple[Variant, ...] = (
    Variant("none", "", "the process's own output, unwrapped"),
    Variant("srun_label", "{rank}: ", "srun -l / --label (task id = global rank)"),
    Variant("pdsh", "{host}: ", "pdsh / clush -L"),
    Variant("kubectl", "{iso} ", "kubectl logs --timestamps / docker logs -t (RFC 3339, UTC)"),
    Variant("mpirun", "[1,{rank}]<stdout>:", "mpirun --tag-output"),
    Variant("workflow", "{stamp} [{job}/train/{rank} (pid {pid})] ", "workflow-engine task log (Metaflow-style)"),
)

# the stamp in front of a kernel message (parsers/kernel.py reads these)
KERNEL_STAMPS: tuple[Variant, ...] = (
    Variant("dmesg_T", "[{ctime}] ", "dmesg -T (local ctime)"),
    Variant("uptime", "{upt} ", "dmesg (seconds since boot; uptime_since.txt beside it)"),
    Variant("syslog", "{mon} {day} {hms} {host} kernel: {upt} ", "rsyslog /var/log/kern.log (no year)"),
    Variant("journal_iso", "{iso} {host} kernel: ", "journalctl -k -o short-iso"),
)

# the layout of a DCGM CSV export (reference/dcgm_formats.md): the header and one row
DCGM_LAYOUTS: tuple[Variant, ...] = (
    Variant("long", "timestamp,metric,gpu,UUID,pci_bus_id,Hostname,value", "one row per sample"),
    Variant("quoted", '"timestamp","metric","gpu","UUID","pci_bus_id","Hostname","value"',
            "one row per sample, every cell quoted (pandas QUOTE_ALL / a spreadsheet export)"),
    Variant("wide", "timestamp,gpu,UUID,pci_bus_id,Hostname,{fields}",
            "one row per GPU and stamp, one column per field (a pivoted export)"),
)

# the training script's log (parsers/steps.py: named frameworks, then its generic readers); a
# non-native style replaces the framework's lines (steps, saves, loads): frameworks.custom_lines
STEP_STYLES: tuple[Variant, ...] = (
    Variant("native", "", "the framework's own lines (Megatron, DeepSpeed, torchtitan, HF Trainer)"),
    Variant("pylogging", "{stamp} - INFO - ",
            "a custom loop logging through Python logging: `step 120/5000 | loss 2.3100 | ... | 2.02 s/step`"),
    Variant("fairseq", "{stamp} | INFO | {logger} | ",
            "fairseq-train: `train_inner` progress (`epoch 001:    120 / 5000 loss=2.31, ups=0.5, num_updates=120`)"),
)

TABLES: dict[str, tuple[Variant, ...]] = {"rank_prefix": RANK_PREFIXES, "kernel": KERNEL_STAMPS,
                                          "dcgm": DCGM_LAYOUTS, "steps": STEP_STYLES}


def variant(table: str, name: str) -> Variant:
    for v in TABLES[table]:
        if v.name == name:
            return v
    raise ValueError(f"unknown {table} dialect {name!r}; one of {', '.join(v.name for v in TABLES[table])}")


@dataclass(frozen=True)
class Dialect:
    """The variants drawn for one job: per host for the rank logs, the kernel log and DCGM; one
    step style for the job (one training script)."""
    seed: int
    rank_prefix: dict[str, Variant] = field(default_factory=dict)
    kernel: dict[str, Variant] = field(default_factory=dict)
    dcgm: dict[str, Variant] = field(default_factory=dict)
    steps: Variant = STEP_STYLES[0]

    def describe(self) -> dict[str, object]:
        """What was drawn, by source (host -> variant name), for the record and for tests."""
        return {"seed": self.seed, "steps": self.steps.name,
                **{src: {h: v.name for h, v in sorted(getattr(self, src).items())}
                   for src in ("rank_prefix", "kernel", "dcgm")}}


def draw(hosts: list[str], seed: int, job: str = "") -> Dialect:
    """A random dialect: each host draws its rank-log prefix, kernel stamp and DCGM layout from its
    own RNG (keyed by the dialect seed, the source and the host), the job (keyed by its name) one
    step style."""
    def pick(src: str, key: str) -> Variant:
        return random.Random(f"dialect:{seed}:{src}:{key}").choice(TABLES[src])

    return Dialect(seed=seed,
                   rank_prefix={h: pick("rank_prefix", h) for h in hosts},
                   kernel={h: pick("kernel", h) for h in hosts},
                   dcgm={h: pick("dcgm", h) for h in hosts},
                   steps=pick("steps", job))
