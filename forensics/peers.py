"""The culprit graph (DESIGN §6.2): who reports whom. Network errors name their peer by address
(NCCL `peer 10.0.0.7<43213>`, socket `10.0.0.7:29500`), by host name (`closed by remote peer
node-b<45074>`) or by rank (`remote rank 12`); the job's own init lines map them to hosts (NCCL's
`NET/IB : Using ... OOB eth0:10.0.0.7<0>` interface lines, the rank map). Then, in order:
1. host evidence: a host of the graph whose own kernel / NVML / DCGM log holds a root (link down,
   Xid, AER) is the culprit, whatever its peers say;
2. a host that reports failures with many distinct peers is the culprit (its link is the common
   factor), not the peers it names;
3. a host that many others report is the culprit;
4. a single host named by the reports is the culprit.
The thresholds are in signatures/precedence.toml ([culprit_graph])."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from parsers import source_names
from parsers.ascii_regex import ascii_classes

IP_PORT = r"(\d{1,3}(?:\.\d{1,3}){3})(?:<\d+>|\]?:\d+)"
NAMED_PEER = r"(?i)(?:remote peer|from peer|to peer|peer) ([A-Za-z][\w.-]*)<\d+>"
PEER_RANK = r"(?i)(?:remote|peer) rank (\d+)"
HOST_SOURCES = source_names("node")  # a host's own logs (kernel, GPU telemetry, BMC), not what its peers say
HOST_DOMAINS = ("gpu_lost", "gpu_memory", "nvlink", "gpu_driver_firmware", "gpu_other_hardware", "network_fabric",
                "host_hardware")


@dataclass(frozen=True)
class GraphCulprit:
    host: str | None
    rule: str  # which rule decided, in words (for the summary)
    unmapped: tuple[str, ...] = ()  # peer addresses no init line maps to a host


def edges(hits: pl.DataFrame, ip_host: dict[str, str], rank_host: dict[int, str], hosts: set[str]) -> pl.DataFrame:
    """(reporter, peer) host pairs named by the hits' messages, and the addresses left unmapped
    (peer null, address set)."""
    h = hits.filter(pl.col("host").is_not_null()).select(
        "host",
        pl.col("message").str.extract_all(ascii_classes(IP_PORT)).alias("ips"),
        pl.col("message").str.extract(ascii_classes(NAMED_PEER), 1).alias("name"),
        pl.col("message").str.extract(ascii_classes(PEER_RANK), 1).cast(pl.Int64, strict=False).alias("prank"),
    )
    short = {x.split(".")[0]: x for x in sorted(hosts)}
    ips = h.select("host", "ips").explode("ips").drop_nulls("ips").with_columns(
        pl.col("ips").str.extract(ascii_classes(r"(\d{1,3}(?:\.\d{1,3}){3})"), 1).alias("addr")).with_columns(
        pl.col("addr").replace_strict(ip_host, default=None, return_dtype=pl.Utf8).alias("peer")).select(
        pl.col("host").alias("reporter"), "peer", "addr")
    names = h.drop_nulls("name").select(
        pl.col("host").alias("reporter"),
        pl.col("name").str.split(".").list.first().replace_strict(short, default=None, return_dtype=pl.Utf8).alias("peer"),
        pl.col("name").alias("addr"))
    ranks = h.drop_nulls("prank").select(
        pl.col("host").alias("reporter"),
        pl.col("prank").replace_strict(rank_host, default=None, return_dtype=pl.Utf8).alias("peer"),
        pl.col("prank").cast(pl.Utf8).alias("addr"))
    return pl.concat([ips, names, ranks]).filter(pl.col("peer").is_null() | (pl.col("peer") != pl.col("reporter")))


def decide(e: pl.DataFrame, host_roots: pl.DataFrame, many_peers: int, many_reporters: int) -> GraphCulprit | None:
    """The culprit of a graph of edges (see the module docstring); None when no peer is named."""
    if e.is_empty():
        return None
    unmapped = tuple(sorted(set(e.filter(pl.col("peer").is_null())["addr"].to_list())))
    m = e.drop_nulls("peer").unique(["reporter", "peer"])
    if m.is_empty():
        return GraphCulprit(None, "", unmapped)
    nodes = set(m["reporter"].to_list()) | set(m["peer"].to_list())
    own = host_roots.filter(pl.col("host").is_in(sorted(nodes)) & pl.col("source").is_in(list(HOST_SOURCES))
                            & pl.col("category").is_in(list(HOST_DOMAINS)))
    own_hosts = sorted(set(own["host"].to_list()))
    if len(own_hosts) == 1:
        r = own.sort("ts", "event_id", nulls_last=True).row(0, named=True)
        return GraphCulprit(own_hosts[0], f"its own {r['source']} log shows it ({r['path']}:{r['line_no']}), "
                                          "which outranks what its peers report", unmapped)
    out = m.group_by("reporter").agg(pl.col("peer").n_unique().alias("n")).sort(["n", "reporter"], descending=[True, False])
    top = out.row(0, named=True)
    if top["n"] >= many_peers and (out.height == 1 or out["n"][1] < top["n"]):
        return GraphCulprit(top["reporter"], f"it reports failures with {top['n']} distinct peers", unmapped)
    inc = m.group_by("peer").agg(pl.col("reporter").n_unique().alias("n"),
                                 pl.col("reporter").unique().sort().alias("by")).sort(["n", "peer"], descending=[True, False])
    top = inc.row(0, named=True)
    if inc.height == 1 or inc["n"][1] < top["n"]:
        rule = (f"{top['n']} hosts report it ({', '.join(top['by'])})" if top["n"] >= many_reporters
                else f"the unreachable peer named by {top['by'][0]}")
        return GraphCulprit(top["peer"], rule, unmapped)
    return GraphCulprit(None, "", unmapped)
