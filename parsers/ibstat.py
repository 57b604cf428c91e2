"""`ibstat` output (rdma-core, infiniband-diags/ibstat.c): the state of each InfiniBand / RoCE port
of a host, as a support bundle or a post-mortem script captures it.

What ibstat prints (its `ca_dump` and `port_dump`): a header per device, `CA 'mlx5_0'` (or
`Switch`, `Router`, `iWARP RNIC`), its `CA type`, `Number of ports`, firmware and hardware
versions and GUIDs, one tab deeper; then per port `Port N:` and, one tab deeper again, `State:`
(one of `???`, `Down`, `Initializing`, `Armed`, `Active`), `Physical state:` (`No state change`,
`Sleep`, `Polling`, `Disabled`, `PortConfigurationTraining`, `LinkUp`, `LinkErrorRecovery`,
`PhyTest`), `Rate`, `Base lid`, `LMC`, `SM lid`, `Capability mask`, `Port GUID`, `Link layer`.
`ibstat <ca> <port>` prints `CA: 'mlx5_0'` and one port's lines without indentation.

A port that is not `Active`, or whose physical state is not `LinkUp`, is an `ib_port_state` event
at its `State:` line (`code` = the physical state; claimed with its `Physical state:` line); every
other line of the output is recognised and ignored. The output carries no time stamp (`ts` null,
`ts_quality` missing) and no host name: the host comes from the file's path.

The same port states from iproute2's `rdma link show` (rdma/link.c `link_parse_cb`): one line per
port, `link mlx5_7/1 subnet_prefix fe80:... lid 3403 sm_lid 1 lmc 0 state DOWN physical_state
POLLING [netdev ib0]` (older releases: `0/1: mlx5_0/1: subnet_prefix ...`; RoCE ports print no
subnet_prefix/lid fields). `state` is one of `NOP DOWN INIT ARMED ACTIVE ACTIVE_DEFER UNKNOWN`,
`physical_state` of `NOP SLEEP POLLING DISABLED ARMED LINK_UP LINK_ERROR_RECOVER PHY_TEST UNKNOWN
OPA_OFFLINE OPA_TEST`. A port not ACTIVE, or not LINK_UP, is an `ib_port_state` event at its line
(`code` = the physical state as printed); the others are ignored.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import Extraction, ParseContext, empty_events, events_frame
from parsers.spec import ParserSpec

DEVICE_RE = r"^\s*(?:CA|Switch|Router|iWARP RNIC|\?\?\?):? '([^']+)'\s*$"
PORT_RE = r"^\s*Port (\d+):\s*$"
FIELDS = ("CA type", "Switch type", "Router type", "iWARP RNIC type", "Number of ports", "Firmware version",
          "Hardware version", "Node GUID", "System image GUID", "State", "Physical state", "Rate", "Base lid",
          "LMC", "SM lid", "Capability mask", "Port GUID", "Link layer")
FIELD_RE = r"^\s*(" + "|".join(re.escape(f) for f in FIELDS) + r"): ?(.*?)\s*$"
PORT_STATES = ("???", "Down", "Initializing", "Armed", "Active")
PHYS_STATES = ("No state change", "Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp",
               "LinkErrorRecovery", "PhyTest")
# a port that can carry traffic is Active; Initializing/Armed wait for the subnet manager
WARN_STATES = ("Initializing", "Armed")
RDMA_STATES = ("NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER", "UNKNOWN")
RDMA_WARN_STATES = ("INIT", "ARMED")
RDMA_LINK_RE = (r"^\s*(?:link |\d+/\d+: )(?P<dev>[^\s/]+)/(?P<port>\d+):? .*?\bstate (?P<state>"
                + "|".join(RDMA_STATES) + r")\b(?: physical_state (?P<phys>[A-Z_]+))?")


# Every head `sniff` scores above 0 holds one of these (ingest skips the sniff on a head without
# any): DEVICE_RE's " '" before the device name, RDMA_LINK_RE's "state "
SNIFF_NEEDS = ((" '", False), ("state ", False))


def sniff(head: str) -> float:
    """ibstat's device header with its port lines; 0.95 when both port-state lines follow."""
    if " '" not in head or not re.search(r"(?m)" + DEVICE_RE, head):
        # `rdma link` output is one line per port: the file is that output only when most lines are
        # (the parser reads a file alone, so a log that quotes one such line stays with its own parser)
        if "state " not in head or not re.search(r"(?m)" + RDMA_LINK_RE, head):
            return 0.0  # no such line at all (the cheap exit for every other log)
        lines = [ln for ln in head.splitlines() if ln.strip()]
        rd = sum(1 for ln in lines if re.match(RDMA_LINK_RE, ln))
        return 0.95 if lines and rd * 2 >= len(lines) else 0.0
    has_state = re.search(r"(?m)^\s*State: (?:" + "|".join(re.escape(s) for s in PORT_STATES) + r")\s*$", head)
    has_phys = re.search(r"(?m)^\s*Physical state: (?:" + "|".join(re.escape(s) for s in PHYS_STATES) + r")\s*$",
                         head)
    if has_state and has_phys:
        return 0.95
    if re.search(r"(?m)^\s*(?:CA type|Number of ports|Node GUID): ", head):
        return 0.6
    return 0.0


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    if lines.is_empty():
        return Extraction(empty_events())
    body = pl.col("body") if "body" in lines.columns else pl.col("text")
    df = lines.select(
        "line_no",
        body.alias("b"),
        body.str.extract(ascii_classes(DEVICE_RE), 1).alias("device"),
        body.str.extract(ascii_classes(PORT_RE), 1).cast(pl.Int64, strict=False).alias("port"),
        body.str.extract(ascii_classes(FIELD_RE), 1).alias("key"),
        body.str.extract(ascii_classes(FIELD_RE), 2).alias("val"),
    ).with_columns(
        pl.col("device").forward_fill().alias("dev_f"),
        # a port's lines belong to it until the next device header
        pl.col("port").forward_fill().over(pl.col("device").is_not_null().cum_sum()).alias("port_f"),
    )
    known = df.filter(pl.col("device").is_not_null() | pl.col("port").is_not_null() | pl.col("key").is_not_null())
    ports = known.filter(pl.col("key").is_in(["State", "Physical state"]) & pl.col("port_f").is_not_null())
    wide = ports.group_by("dev_f", "port_f", maintain_order=True).agg(
        pl.col("line_no").filter(pl.col("key") == "State").first().alias("state_line"),
        pl.col("line_no").filter(pl.col("key") == "Physical state").first().alias("phys_line"),
        pl.col("val").filter(pl.col("key") == "State").first().alias("state"),
        pl.col("val").filter(pl.col("key") == "Physical state").first().alias("phys"),
        pl.col("b").filter(pl.col("key") == "State").first().alias("message"),
    )
    bad = wide.filter(pl.col("state_line").is_not_null()
                      & ((pl.col("state") != "Active") | (pl.col("phys").fill_null("LinkUp") != "LinkUp")))
    events = events_frame(bad.select(
        pl.col("state_line").alias("line_no"),
        pl.lit(SPEC.name).alias("source"),
        pl.lit("ib_port_state").alias("kind"),
        pl.lit("missing").alias("ts_quality"),
        pl.lit(ctx.host_hint, dtype=pl.Utf8).alias("host"),
        pl.lit(ctx.rank_hint, dtype=pl.Int64).alias("rank"),
        pl.when(pl.col("state").is_in(WARN_STATES) & (pl.col("phys").fill_null("LinkUp") == "LinkUp"))
        .then(pl.lit("warning")).otherwise(pl.lit("error")).alias("severity"),
        pl.col("phys").alias("code"),
        pl.col("message"),
    )) if not bad.is_empty() else empty_events()
    claimed = pl.concat([bad["state_line"], bad["phys_line"].drop_nulls()]).unique().sort().alias("line_no")
    ignored = known.filter(~pl.col("line_no").is_in(claimed.implode()))["line_no"].sort()
    rd_events, rd_claimed, rd_ignored = _rdma_link(lines.select("line_no", body.alias("b")), ctx)
    if not rd_events.is_empty():
        events = pl.concat([events, rd_events]).sort("line_no") if not events.is_empty() else rd_events
    claimed = pl.concat([claimed, rd_claimed]).unique().sort()
    ignored = pl.concat([ignored, rd_ignored]).unique().sort()
    return Extraction(events=events, claimed=claimed, ignored=ignored)


def _rdma_link(df: pl.DataFrame, ctx: ParseContext) -> tuple[pl.DataFrame, pl.Series, pl.Series]:
    """`rdma link show` lines: events for the ports not ACTIVE / LINK_UP, the rest ignored."""
    g = df.with_columns(pl.col("b").str.extract_groups(ascii_classes(RDMA_LINK_RE)).alias("_g")).unnest("_g") \
        .filter(pl.col("state").is_not_null())
    bad = g.filter((pl.col("state") != "ACTIVE") | (pl.col("phys").fill_null("LINK_UP") != "LINK_UP"))
    events = events_frame(bad.select(
        "line_no",
        pl.lit(SPEC.name).alias("source"),
        pl.lit("ib_port_state").alias("kind"),
        pl.lit("missing").alias("ts_quality"),
        pl.lit(ctx.host_hint, dtype=pl.Utf8).alias("host"),
        pl.lit(ctx.rank_hint, dtype=pl.Int64).alias("rank"),
        pl.when(pl.col("state").is_in(RDMA_WARN_STATES) & (pl.col("phys").fill_null("LINK_UP") == "LINK_UP"))
        .then(pl.lit("warning")).otherwise(pl.lit("error")).alias("severity"),
        pl.col("phys").alias("code"),
        pl.col("b").alias("message"),
    )) if not bad.is_empty() else empty_events()
    claimed = bad["line_no"].cast(pl.Int64).alias("line_no")
    ignored = g.filter(~pl.col("line_no").is_in(claimed.implode()))["line_no"].cast(pl.Int64).alias("line_no")
    return events, claimed, ignored


SPEC = ParserSpec(
    name="ibstat",
    scope="node",
    description="InfiniBand port state: ibstat output (rdma-core) and iproute2 `rdma link`, ports not Active or not LinkUp",
    formats=("ibstat (all devices)", "ibstat <ca> <port>", "rdma link show"),
    kinds=("ib_port_state",),
    exclusive=True,
)
