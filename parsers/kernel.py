"""Kernel logs: dmesg (uptime, -T, -H/-e, -d, --time-format iso, -x, -r), journalctl (short,
short-iso, short-precise, short-monotonic, short-unix, short-full, json), syslog / kern.log (with
or without an uptime stamp), rsyslog RFC3339, talosctl dmesg, bare `kernel:` pastes and prefix-less NVRM lines.

Events: `xid`, `gpu_identity`, `gpu_fell_off_bus`, `gsp_error`, `nvrm_error`, `pcie_aer`,
`nvswitch_sxid`, `ib_port`, `mce`, `host_oom_kill`, `hung_task`, `hung_task_fs` (the first frame of a hung
task's call trace in a network or FUSE filesystem client: NFS/RPC, FUSE, CephFS, SMB, Lustre, GPFS, BeeGFS,
WekaFS; code = the filesystem), `kernel_lockup` (soft/hard lockup,
RCU stall), `fs_error` (ext4/XFS/NFS/Lustre/block I/O), `power_key`, `kernel_panic`, `boot`,
`user_fault` (a user process's segfault / trap / general protection fault, with the library it hit);
table `xid_events`. `power_key` also reads the systemd-logind / acpid lines of a journal or
syslog dump (the kernel itself prints nothing when the power button is pressed).

Every line that carries a kernel stamp/prefix (or starts with `NVRM:`) is understood: it becomes
an event, is claimed as the continuation of a multi-line record (RPC history tables, the 3-line
fallen-off-the-bus form, AER detail lines, OOM report headers, MCE detail; an OOM header with no
kill, task or reaper line of its record after it is the record's event), or is `ignored` as
kernel chatter. `claimed` and `ignored` are disjoint. Lines of a journal/syslog dump that come
from another process (`slurmd[12]:`) are left to other parsers.
"""

from __future__ import annotations

import csv
import re
from datetime import UTC
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.lines import literal_regex
from parsers.records import (
    UTC_DT,
    Extraction,
    ParseContext,
    empty_events,
    empty_table,
    events_frame,
    file_keys,
    line_host,
    normalize_pci,
    table_frame,
)
from parsers.spec import ParserSpec
from parsers.timestamps import iso, month_day_time

# --------------------------------------------------------------------------------------------
# Xid severity table (parsers/data/xid.csv, a copy of reference/xid.csv)

_DATA = Path(__file__).with_name("data")
_SEV_MAP = {"info": "info", "low": "info", "medium": "warning", "high": "error", "critical": "critical"}


@cache
def xid_severity_table() -> dict[int, str]:
    """Xid number -> severity, read from the CSV on the first kernel, nvidia-smi or DCGM parse (with
    the csv module: the table is 173 rows, and a first `pl.read_csv` in a process costs ~10 ms)."""
    with (_DATA / "xid.csv").open(newline="", encoding="utf-8") as f:
        return {int(r["xid"]): _SEV_MAP.get((r["severity"] or "").strip().lower(), "error")
                for r in csv.DictReader(f)}


def xid_severity(expr: pl.Expr) -> pl.Expr:
    """Xid number (Int64) -> severity; unknown codes are `error`."""
    return expr.replace_strict(xid_severity_table(), default="error", return_dtype=pl.Utf8)


# --------------------------------------------------------------------------------------------
# Regexes (Rust regex syntax: no look-around, no backreferences)

_HEX = "[0-9a-fA-F]"
_PCI_FN = rf"{_HEX}{{1,8}}:{_HEX}{{2}}:{_HEX}{{2}}\.{_HEX}"  # 0000:3b:00.0

# The prefix alone, in group `pre`: the message is the rest of the line (`_stamp_frame` slices it
# off). Capturing the message as a group (`(?P<msg>.*)$`) made the regex engine walk every byte
# of every line with its capture machinery: most of the time of a large kernel log.
# util-linux dmesg (sys-utils/dmesg.c print_record) prints, in this order: `-x` (--decode) facility
# and level (`kern  :err   : `), the time in the chosen --time-format (`[  155.100000]` default,
# `[Tue May 27 04:18:56 2025]` ctime/-T, `[May27 04:18]` + `[  +0.000123]` reltime/-e, `[<    0.000123>]`
# delta, `-d` appending ` <delta>` inside the brackets, `2025-05-27T04:18:56,089671+00:00` iso: comma
# before the microseconds), the caller id (`[T1234]`), the message; `-r` (--raw) prints `<N>[uptime] `.
DMESG_FACILITY = r"[a-z][a-z0-9]{1,8}"
DMESG_LEVEL = r"emerg|alert|crit|err|warn|notice|info|debug"
TALOS_LEVEL = r"emerg|alert|crit|err|warning|notice|info|debug"  # siderolabs/go-kmsg Priority.String()
_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)"
_DELTA = r"(?: <\s*-?\d+\.\d+>)?"
# journalctl's short output and syslog print the month with strftime's `%b`, in the host's LC_TIME
# locale: `11月 15 14:15:47 host nv-fabricmanager[4177]:` (zh_CN, ja_JP; NVIDIA/gpu-operator#610),
# `set 09 14:54:33 pop-os kernel:` (pt; pop-os/pop#3132), `фев 12 00:48:02 kernel:` (ru),
# `jan. 29 20:50:17 kevin kernel:` (nb_NO; hirschmann/nbfc#181). The abbreviations are glibc's
# `abmon` of those locales (localedata/locales/*); each maps to the English one the stamp is read with.
LOCAL_MONTHS: dict[str, str] = {}
for _names in (
    "jan feb mär apr mai jun jul aug sep okt nov dez",            # de
    "janv févr mars avr mai juin juil août sept oct nov déc",     # fr
    "ene feb mar abr may jun jul ago sep oct nov dic",            # es
    "jan fev mar abr mai jun jul ago set out nov dez",            # pt
    "gen feb mar apr mag giu lug ago set ott nov dic",            # it
    "jan feb mrt apr mei jun jul aug sep okt nov dec",            # nl
    "jan feb mars apr mai juni juli aug sep okt nov des",         # nb, da, sv (`maj`)
    "sty lut mar kwi maj cze lip sie wrz paź lis gru",            # pl
    "янв фев мар апр мая июн июл авг сен окт ноя дек",            # ru
    "січ лют бер кві тра чер лип сер вер жов лис гру",            # uk
    "led úno bře dub kvě čvn čvc srp zář říj lis pro",            # cs
):
    for _i, _n in enumerate(_names.split()):
        LOCAL_MONTHS.setdefault(_n, ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                     "Nov", "Dec")[_i])
for _i in range(12):  # zh_CN, ja_JP (`11月`), ko_KR (`11월`)
    LOCAL_MONTHS[f"{_i + 1}月"] = LOCAL_MONTHS[f"{_i + 1}월"] = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul",
                                                               "Aug", "Sep", "Oct", "Nov", "Dec")[_i]
# the localized names not spelled as the English ones (the English ones are matched case-sensitively,
# as before); longest first, a trailing `.` optional (nb, fr: `jan.`, `févr.`)
_LOCAL_MON = "|".join(re.escape(n) for n in sorted(
    {n for n in LOCAL_MONTHS if n.title() not in ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug",
                                                  "Sep", "Oct", "Nov", "Dec")}, key=lambda n: (-len(n), n)))
_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec|(?i:" + _LOCAL_MON + r"|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\.?)"

# `dmesg -T` in the host's locale: util-linux sys-utils/dmesg.c `record_ctime` prints
# strftime(_("%a %b %e %H:%M:%S %Y")), a format its translators reorder (po/*.po, util-linux 39465c780):
# "%a, %e. %b %Y, %H:%M:%S" (de), "%a %e %b %H:%M:%S %Y" (fr es ca hr nl pl ro), "%a %e. %b %Y %H:%M:%S"
# (cs), "%a %e %b %Y %H.%M.%S" (sv), "%a. %e. %b. %Y. %H:%M:%S" (sr), "%b%e日(%a) %H:%M:%S %Y" (ja),
# "%b %e일 (%a) %H:%M:%S" (ko: no year), and the English order with the locale's names where the
# format is untranslated (zh_CN, zh_TW, ru, it, pt_BR, uk, ...). The weekday, when it comes first, is
# skipped (a French `mar.` is Tuesday, not March); the month is a LOCAL_MONTHS name; the year stands
# before or after the time, or nowhere (then the reference year). The English form is `ctime` above.
_LOCAL_CTIME = (
    r"\[\s*(?P<lct>(?:[^\s\d\]]+\s+)?(?:"
    # month first (the English order, ja, ko): the year, if any, after the time (Fabric Manager's own
    # `[Jan 03 2025 10:00:01]`, year before the time, is no dmesg stamp)
    r"(?P<lmon1>" + _MON + r")\s*(?P<lday1>\d{1,2})[^\]\d]*?(?P<lhms1>\d\d[:.]\d\d[:.]\d\d)"
    r"(?:[^\]\d]*?(?P<lyear1>\d{4}))?"
    # day first: the year before or after the time
    r"|(?P<lday2>\d{1,2})\.?\s+(?P<lmon2>" + _MON + r")[^\]\d]*?(?:(?P<lyear2>\d{4})[^\]\d]*?)?"
    r"(?P<lhms2>\d\d[:.]\d\d[:.]\d\d)(?:[^\]\d]*?(?P<lyear3>\d{4}))?))"
    + _DELTA + r"\]")

PREFIX_RE = (
    r"^(?P<pre>(?:" + DMESG_FACILITY + r"\s*:(?:" + DMESG_LEVEL + r")\s*: )?(?:"
    r"\[(?P<ctime>[A-Z][a-z]{2} (?P<cmon>[A-Z][a-z]{2})\s+(?P<cday>\d{1,2}) (?P<chms>\d\d:\d\d:\d\d) (?P<cyear>\d{4}))"
    + _DELTA + r"\]"
    r"|" + _LOCAL_CTIME +
    r"|\[(?P<hmon>[A-Z][a-z]{2})(?P<hday>\d{1,2}) (?P<hhm>\d\d:\d\d(?::\d\d)?)\]"
    r"|\[\s*\+(?P<rel>\d+\.\d+)\]"
    r"|(?P<delta>\[<\s*-?\d+\.\d+>\])"
    r"|(?P<diso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:?\d\d) "
    # journalctl -o short-unix (`1684567890.123456 host ident[pid]: `) and -o short-full
    # (`Tue 2023-05-20 10:11:12 UTC host ident[pid]: `; the zone is the host's abbreviation)
    r"|(?P<unix>\d{9,11}\.\d{1,9}) (?:(?P<uhost>[^\s\[:]+) )?(?P<uproc>[^\s:\[]+)(?:\[\d+\])?:"
    r"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<full>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (?P<fzone>[A-Z]{2,5}|[+-]\d{4}) "
    r"(?:(?P<fhost>[^\s\[:]+) )?(?P<fproc>[^\s:\[]+)(?:\[\d+\])?:"
    r"|(?P<iso>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+"
    r"(?:(?P<ihost>[^\s\[:]+)\s+)?(?P<iproc>[^\s:\[]+)(?:\[\d+\])?:"
    r"|(?P<mon>" + _MON + r")\s+(?P<day>\d{1,2})\s+"
    r"(?P<hms>\d\d:\d\d:\d\d(?:\.\d+)?)\s+"
    r"(?:(?P<shost>[^\s\[:]+)\s+)?(?P<sproc>[^\s:\[]+)(?:\[\d+\])?:"
    # `kernel:` pasted bare, or `kernel[pid]:` as a journald wall broadcast prints the record (see WALL_RE)
    r"|(?P<bare>kernel)(?:\[\d+\])?:"
    # talosctl dmesg (Talos machined's Dmesg service, internal/app/machined/internal/server/v1alpha1/
    # v1alpha1_server.go: `"%s: %7s: [%s]: %s"` of the kmsg facility, the priority right-aligned to 7,
    # the time in Go's RFC3339Nano (trailing zeros of the fraction dropped), the message); talosctl puts
    # `<node>: ` before it, which the prefix layer peels as a host
    r"|" + DMESG_FACILITY + r": {1,7}(?:" + TALOS_LEVEL + r"): \[(?P<tiso>" + _RFC3339 + r")\]:"
    r")?"
    # `dmesg -r` (`--raw`) and raw kmsg dumps put the printk level (facility*8+level) before the stamp
    r"\s*(?:(?:<(?P<lvl>\d{1,3})>)?\[\s*(?P<up>\d{1,9}\.\d+)" + _DELTA + r"\])?"
    r"\s*(?:\[\s*(?P<caller>[TC]\d+)\])?"
    r"\s*)"
)

# what a line PREFIX_RE reads more of than its leading blanks starts with (each alternative's first
# characters, and the uptime's and caller's after blanks): on a line without it every group is null and
# the prefix is the blanks (tests/parsers/test_kernel.py checks it on every fixture line)
PREFIX_START_RE = (r"^(?:[a-z][a-z0-9]{1,8}\s*:|\d|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) "
                   r"|" + _MON + r"\s|\s*(?:<\d|\[(?:[A-Z][a-z]|\s*[+<\dTC]|[^\x00-\x7f]|[a-z]{2,4}[.,]? )))")
# the emergency-message wall broadcasts a terminal shows, whose header names the host of the record under it:
# rsyslog's RSYSLOG_WallFmt (runtime/conf.c / tools/rsyslogd.c template_WallFmt:
# `\r\n\7Message from syslogd@%HOSTNAME% at %timegenerated% ...\r\n %syslogtag%%msg%`, the record on the
# next line) and systemd-journald's ForwardToWall (`Broadcast message from systemd-journald@HOST (DATE):`,
# a blank line, then `IDENT[PID]: MSG`)
WALL_RE = (r"^\s*\x07?(?:Message from syslogd@(?P<wsys>[^\s]+) at "
           r"|Broadcast message from systemd-journald@(?P<wjrn>[^\s]+) \()")
# a journal's marker lines (kernel lines without a stamp)
MARKER_RE = r"-- (?:Boot [0-9a-f]+|Reboot|Logs begin at|Journal begins|No entries)"

MONOTONIC_RE = r"^([^\s\[:]+) kernel: "

XID_RE = (
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}(?:\.[0-9a-fA-F])?"
    r"|[^)\s]*)(?: GPU-I:(?P<gi>\d+))?(?: GPU-CI:(?P<ci>\d+))?\):\s*(?P<xid>\d+),?\s*"
    r"(?:pid=(?P<pid>'?<unknown>'?|\d+),?\s*)?(?:name=(?P<name>[^,]*),?\s*)?(?P<body>.*)$"
)
IDENT_RE = (
    r"NVRM: GPU at (?:PCI:)?(?P<pci>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}(?:\.[0-9a-fA-F])?):"
    r"\s*(?P<uuid>GPU-[0-9a-fA-F-]+)"
)
SXID_RE = (
    r"nvidia-nvswitch(?P<sw>\d+): SXid \((?:PCI:)?(?P<pci>[0-9a-fA-F:.]+)\):\s*(?P<sxid>\d+),\s*"
    r"(?P<sev>Non-fatal|Fatal)?"
)
# an address NVRM prints (`0000:3b:00`, `00000000:3B:00.0`, `PCI:0000:3b:00`): a domain of 4+ digits,
# never a time of day (`09:14:02`, `11:20:41.007` of a stamp the prefix did not take)
PCI_ANY_RE = rf"(?:PCI:)?({_HEX}{{4,8}}:{_HEX}{{2}}:{_HEX}{{2}}(?:\.{_HEX})?)"
PCI_FN_RE = rf"({_PCI_FN})"

AER_RECV_RE = r"AER: (?:Multiple )?(?P<sev>Corrected|Uncorrected \((?:Non-Fatal|Fatal)\)|Uncorrected) errors? received"
AER_RECOVERY_FAILED_RE = r"AER: (?:[Dd]evice recovery failed|can't recover)"
AER_BUS_RE = r"PCIe Bus Error: severity=(?P<sev>[^,]+), type=(?P<type>[^,]+)"
AER_BIT_RE = rf"^\S+ {_PCI_FN}:\s+\[\s*(?P<bit>\d+)\]\s+(?P<name>.*?)\s*(?:\(First\))?\s*$"
AER_CONT_RE = (
    r"error status/mask=|TLP Header|broadcast \w+ message|no AER-aware driver|Error of this Agent"
    r"|[Dd]evice recovery successful|AER: Multiple Corrected error received|device \[[0-9a-f]{4}:[0-9a-f]{4}\]"
)

IB_DEV_RE = r"(?:^|\s)(?:mlx\d_\w+|ib\d+|ibp\w+|ibs\w+|infiniband|ipoib|IPoIB|ib_core)[\s:]"
# mm/oom_kill.c: `<message>: Killed process <pid> (<comm>) total-vm:...`, message one of `Out of
# memory`, `Memory cgroup out of memory`, `Out of memory (oom_kill_allocating_task)`; before 4.19
# `Kill process <pid> (<comm>) score N or sacrifice child`
OOM_RE = (r"(?:Out of memory|Memory cgroup out of memory)(?: \([^)]*\))?: Kill(?:ed)? process (?P<pid>\d+) "
          r"\((?P<name>[^)]*)\)")
# the other lines of one OOM record, which stand for it when its `Killed process` line is missing
# (a cut dmesg, a memcg record on a kernel that logs the kill elsewhere): `oom-kill:constraint=...,
# task=<comm>,pid=<pid>,uid=...` and `oom_reaper: reaped process <pid> (<comm>), now anon-rss:...`
OOM_TASK_RE = r"oom-kill:constraint=\S*?task=(?P<name>[^,]*),pid=(?P<pid>\d+)"
OOM_NEAR = 3  # lines: how far a record's task / reaper line stands from its own (same pid) `Killed process` line
OOM_REAP_RE = r"oom_reaper: (?:reaped process |unable to reap pid:)(?P<pid>\d+) \((?P<name>[^)]*)\)"
# the record's header (dump_header: `<comm> invoked oom-killer: gfp_mask=..., order=N, oom_score_adj=N`):
# the kernel prints it only when it is about to kill, so it stands for its record when no kill, task or
# reaper line of that record follows it (a dmesg cut inside the call trace / task list); the victim is
# then unknown (code null)
OOM_HEADER_RE = r"\S invoked oom-killer: gfp_mask="
# kernel/hung_task.c; kernel/watchdog.c (pr_fmt "watchdog: "); kernel/rcu/tree_stall.h
HUNG_RE = r"INFO: task (?P<name>.+?):(?P<pid>\d+) blocked for more than (?P<secs>\d+) seconds"
# A hung task's call trace (sched_show_task after the HUNG_RE line: `Call Trace:` then one frame a line,
# `[<addr>] ? func+0xOFF/0xLEN [module]` before 4.14, ` func+0xOFF/0xLEN [module]` inside `<TASK>` after,
# ARM's `[<addr>] (caller) from [<addr>] (func+0xOFF/0xLEN)`) says where the task sleeps. A frame of a
# network or user-space filesystem client means it waits on that filesystem's server: the NFS client and
# its RPC layer (fs/nfs, fs/nfs_common, net/sunrpc: `nfs_*`, `nfs4_*`, `rpc_wait_bit_killable`,
# `__rpc_execute`; modules nfs, nfsv3, nfsv4, sunrpc, lockd), FUSE (fs/fuse: `fuse_*`,
# `request_wait_answer`: s3fs, gcsfuse, blobfuse, mountpoint-s3, sshfs), CephFS (fs/ceph, net/ceph:
# `ceph_*`; ceph, libceph), SMB (fs/smb/client: `cifs_*`, `smb2_*`), and the out-of-tree clients, always
# modules: Lustre (lustre, ptlrpc, osc, mdc, mgc, lov, lmv, fid, fld, obdclass, lnet, libcfs, ko2iblnd, ksocklnd),
# Spectrum Scale / GPFS (mmfs26, mmfslinux, tracedev; `cxiWaitEventWait`), BeeGFS (beegfs), WekaFS
# (wekafsio, wekafsgw). The first such frame of the record is a hung_task_fs event (code = the filesystem).
NETFS_FRAME_FUNCS = r"(?:nfs4?|fuse|ceph|cifs|smb2)_\w+|(?:__)?rpc_\w+|request_wait_answer|cxiWaitEventWait"
NETFS_MODULES = ("nfs", "nfsv3", "nfsv4", "sunrpc", "lockd", "lustre", "ptlrpc", "osc", "mdc", "mgc", "lov", "lmv",
                 "fid", "fld", "obdclass", "lnet", "libcfs", "ko2iblnd", "ksocklnd", "ceph", "libceph", "fuse",
                 "mmfs26", "mmfslinux", "tracedev", "beegfs", "wekafsio", "wekafsgw", "cifs")
NETFS_FRAME_MODS = "|".join(NETFS_MODULES)
# the literals a frame NETFS_FRAME_RE reads holds (the pre-filter's and the rules' own, below)
NETFS_FRAME_LITERALS = ["nfs_", "nfs4_", "rpc_", "fuse_", "ceph_", "cifs_", "smb2_", "request_wait_answer",
                        "cxiWaitEventWait", *[f"[{m}]" for m in NETFS_MODULES]]
NETFS_FRAME_RE = (rf"(?:^|[\s(])(?:\? )?(?P<fn>{NETFS_FRAME_FUNCS})\+0x[0-9a-f]+/0x[0-9a-f]+"
                  rf"|\+0x[0-9a-f]+/0x[0-9a-f]+ \[(?P<mod>{NETFS_FRAME_MODS})\]")
NETFS_FAMILY = {  # a frame's function prefix or module -> the filesystem (hung_task_fs code)
    "nfs": "nfs", "nfs4": "nfs", "rpc": "nfs", "__rpc": "nfs", "nfsv3": "nfs", "nfsv4": "nfs", "sunrpc": "nfs",
    "lockd": "nfs", "fuse": "fuse", "request": "fuse", "ceph": "ceph", "libceph": "ceph", "cifs": "cifs",
    "smb2": "cifs", "cxiWaitEventWait": "gpfs", "mmfs26": "gpfs", "mmfslinux": "gpfs", "tracedev": "gpfs",
    "lustre": "lustre", "ptlrpc": "lustre", "osc": "lustre", "mdc": "lustre", "mgc": "lustre", "lov": "lustre",
    "lmv": "lustre", "fid": "lustre", "fld": "lustre",
    "obdclass": "lustre", "lnet": "lustre", "libcfs": "lustre", "ko2iblnd": "lustre", "ksocklnd": "lustre",
    "beegfs": "beegfs", "wekafsio": "weka", "wekafsgw": "weka",
}
HUNG_STACK_LINES = 80  # a hung task's record (header, taint, hint, task line, trace) spans fewer lines
# a user-space process killed by a fault the kernel reports (arch/x86/mm/fault.c show_signal_msg:
# `comm[pid]: segfault at ADDR ip IP sp SP error N in LIB[BASE+SIZE]`; arch/x86/kernel/traps.c:
# `traps: comm[pid] trap invalid opcode ip:.. sp:.. error:0 in LIB[..]`, `traps: comm[pid] general
# protection fault ip:..`; arch/arm64 arm64_show_signal: `comm[pid]: unhandled level 2 translation
# fault (11) at 0x.., esr 0x.., in LIB[..]`). The library the fault hit follows ` in ` (kind user_fault,
# code the fault type); the process need not be the job's.
USER_FAULT_RE = (r"^(?:traps: )?(?P<comm>[^\[\s][^\[]*?)\[(?P<pid>\d+)\]:? "
                 r"(?P<what>segfault at |trap |general protection fault |unhandled )")
LOCKUP_RE = (r"BUG: soft lockup - CPU#\d+ stuck for|Watchdog detected hard LOCKUP on cpu"
             r"|detected (?:expedited )?stalls on CPUs/tasks|self-detected stall on CPU")
# filesystems and block devices: fs/ext4/super.c, fs/xfs/xfs_fsops.c + xfs_message.c, Lustre's CERROR
# (`LustreError: `), block/blk-core.c. A network filesystem's server going silent is printed by the RPC
# client, not by the filesystem: Linux net/sunrpc/clnt.c rpc_check_timeout() prints
# `"%s: server %s not responding, %s"` with the RPC program's name (`nfs`, `lockd` for NLM locks, `nfsacl`,
# `rpcbind`/`portmap`, `mount`, `status` for NSM) and `still trying` (hard mount) or `timed out` (soft),
# and call_decode() `"%s: server %s OK"` when it answers again; the Solaris/illumos and BSD-derived NFS
# clients (nfs_subr.c rfscall(), `cmn_err(CE_WARN, "NFS server %s not responding, %s", ...)` with
# `still trying` / `giving up`, and `NFS server %s ok`) print the same fact as `NFS server ...`.
NETFS_PROGS = r"(?:nfs|nfs4|lockd|nfsacl|nfs_acl|rpcbind|portmap|mount|status)"
NETFS_DOWN_RE = rf"(?:^|[\s:\]]){NETFS_PROGS}: server \S+ not responding|\bNFS server \S+ not responding"
NETFS_OK_RE = rf"(?:^|[\s:\]]){NETFS_PROGS}: server \S+ OK\b|\bNFS server \S+ ok\b"
# The server such a client line names (group 1: the RPC client's server name; group 2: a Lustre
# import's NID address, `Connection to <target> (at <addr>@<net>) was lost`): the host at fault
# is the silent server, not the client that reports it (forensics/attribution.py).
NETFS_SERVER_RE = (rf"(?:{NETFS_PROGS}: |NFS )server (\S+) not responding"
                   r"|Connection to \S+ \(at ([^)@\s]+)(?:@[^)\s]+)?\) was lost")
FS_CODES = (
    (r"EXT[234]-fs error", "EXT4_ERROR"),
    (r"Remounting filesystem read-only|remounted read-only|[Ff]ilesystem read-only", "READ_ONLY"),
    (r"Aborting journal on device|Detected aborted journal", "JOURNAL_ABORT"),
    (r"XFS \(\S+\):.*(?:[Cc]orruption|xfs_do_force_shutdown|[Ff]ilesystem has been shut down|"
     r"[Ss]hutting down filesystem|I/O error)", "XFS_ERROR"),
    (NETFS_DOWN_RE, "NFS_NOT_RESPONDING"),
    (NETFS_OK_RE, "NFS_OK"),
    (r"LustreError: ", "LUSTRE_ERROR"),
    (r"Lustre: .*(?:Connection to \S+ .*was lost|evicted)", "LUSTRE_LOST"),
    (r"(?:^|: )(?:I/O|critical (?:medium|target|nexus|space allocation|protection)) error, dev \S+, sector"
     r"|Buffer I/O error on (?:dev|device)|print_req_error: I/O error", "IO_ERROR"),
    (r"nvme\d+: I/O \d+ QID \d+ timeout|nvme\d+: controller is down", "NVME_TIMEOUT"),
)
# systemd-logind (`Power key pressed.`, since v251 `Power key pressed short.`), acpid
POWER_RE = r"Power key pressed|button/power PBTN"
POWER_PROCS = ["systemd-logind", "acpid"]
# NVIDIA Fabric Manager in a journal/syslog dump: its own stderr (`nv-fabricmanager[4177]: ...`), the
# start script of the 550+ packages (`nvidia-fabricmanager-start.sh[4756]: ...`) and systemd's lines
# about its unit (`systemd[1]: nvidia-fabricmanager.service: Control process exited ...`,
# `Starting NVIDIA fabric manager service...`). FM runs beside the driver on every NVSwitch node, so
# its journal lines are read here with the kernel's (signatures: nvml.toml, Fabric Manager family).
FM_PROCS = ["nv-fabricmanager", "nvidia-fabricmanager", "nvidia-fabricmanager-start.sh"]
FM_UNIT_RE = r"nvidia-fabricmanager\.service|(?i:NVIDIA fabric ?manager)"

# amdgpu (drivers/gpu/drm/amd/amdgpu), the AMD GPU kernel driver's fault, hang, reset and RAS records, as
# dev_err/dev_info print them (`amdgpu 0000:c6:00.0: amdgpu: <text>`, older kernels without the second
# `amdgpu:`, DRM_ERROR's `[drm:<func> [amdgpu]] *ERROR* <text>`, `[drm] <text>`); code = which record:
# - PAGE_FAULT: gmc_v9_0.c / gmc_v10_0.c / gmc_v11_0.c / gmc_v12_0.c process_interrupt, `[gfxhub0] no-retry
#   page fault (src_id:0 ring:24 vmid:3 pasid:32769, for process <comm> pid N thread <comm> pid N)` (gfx9:
#   `retry` / `no-retry`; gfx10+: `[gfxhub] page fault (...)`; since 6.9 the process on its own line, printed by
#   amdgpu_vm_print_task_info); the `in page starting at`, `*_L2_PROTECTION_FAULT_STATUS` and decoded-field
#   lines after it are continuations
# - RING_TIMEOUT: amdgpu_job.c amdgpu_job_timedout, `ring <name> timeout, signaled seq=N, emitted seq=N`
# - RAS_UE / RAS_UE_UMC / RAS_CE: amdgpu_ras.c, `uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT)
#   detected!` (the global RAS interrupt: a fatal error, the GPU is reset), `N uncorrectable hardware errors
#   detected in <block> block` / `socket: S, die: D, N new uncorrectable hardware errors detected in <block>
#   block` (umc = the GPU's memory), the correctable counterparts; amdgpu_aca.c's `[Hardware Error]:
#   Accelerator Check Architecture events logged` and its `aca entry[NN].STATUS=...` bank dump (ACA_LOGGED)
# - RESET_FAILED: amdgpu_device.c's failed recovery, `GPU mode1 reset failed`, `ASIC reset failed with error, N
#   for drm dev, <pci>`, `GPU reset(N) failed`, `GPU reset end with ret = -N`, the IP resume after a reset,
#   `resume of IP block <psp> failed -N`, psp_v*'s `PSP resume failed`: the GPU did not come back (node reboot)
# - MES_FAILED: mes_v11_0.c / mes_v12_0.c, `MES failed to respond to msg=REMOVE_QUEUE` (older `MES failed to
#   response msg=3`), `MES might be in unrecoverable state, issue a GPU reset`
# - GPU_LOST: `device lost from bus!` (the PCIe reads return all ones)
# - GPU_RESET: the recovery itself, `GPU reset begin!`, `GPU reset(N) succeeded!`, `GPU reset succeeded, trying to
#   resume`, `VRAM is lost due to GPU reset!`, `Ring <name> reset succeeded`, `device wedged, but recovered
#   through reset`
AMDGPU_CODES = [
    (r"\[(?:gfx|mm)hub\d*\] (?:(?:no-)?retry )?page fault \(src_id:", "PAGE_FAULT"),
    (r"ring \S+ timeout, signaled seq=\d+, emitted seq=\d+", "RING_TIMEOUT"),
    (r"\d+ (?:new )?uncorrectable hardware errors? detected in (?:umc|UMC) block", "RAS_UE_UMC"),
    (r"uncorrectable hardware error\(\w+\) detected|\d+ (?:new )?uncorrectable hardware errors? detected in \S+ block",
     "RAS_UE"),
    (r"\d+ (?:new )?correctable hardware errors? detected in \S+ block", "RAS_CE"),
    (r"\[Hardware Error\]: Accelerator Check Architecture events logged", "ACA_LOGGED"),
    (r"device lost from bus!", "GPU_LOST"),
    (r"GPU mode[12] reset failed|ASIC reset failed with error|GPU reset\(\d+\) failed|GPU reset end with ret = -\d"
     r"|resume of IP block <\w+> failed|PSP resume failed", "RESET_FAILED"),
    (r"MES failed to respon(?:d|se) (?:to )?msg=|MES might be in unrecoverable state", "MES_FAILED"),
    (r"GPU reset begin!|GPU reset\(\d+\) succeeded|GPU reset succeeded, trying to resume|VRAM is lost due to GPU reset"
     r"|Ring \S+ reset succeeded|device wedged, but recovered through reset", "GPU_RESET"),
]
# the page-fault record's continuation lines (same gmc_v*_0.c handlers and amdgpu_vm_print_task_info)
AMDGPU_CONT_RE = (r"(?:in page starting at address 0x|\bProcess \S.* pid \d+ thread |for process .* pid \d+ thread "
                  r"|VM_L2_PROTECTION_FAULT_STATUS:|Faulty UTCL2 client ID:|\bMORE_FAULTS: |\bWALKER_ERROR: "
                  r"|\bPERMISSION_FAULTS: |\bMAPPING_ERROR: |\bRW: 0x)")

# literal pre-filter: a line needs one of these to be worth a regex
KEYWORDS = [
    "NVRM", "SXid", "AER", "PCIe Bus Error", "pcieport", "error status/mask", "mlx", "ib", "IB",
    "carrier", "Hardware Error", "EDAC", "Machine check", "Machine Check", "Out of memory",
    "out of memory", "oom", "Kernel panic", "Oops", "BUG: unable", "general protection",
    "Linux version", "-- Boot", "-- Reboot", "Killed process", "fallen off the bus", "Timeout",
    "blocked for more than", "lockup", "LOCKUP", "stall", "-fs ", "XFS",
    *NETFS_FRAME_LITERALS,
    "nfs: server", "nfs4: server", "lockd: server", "nfsacl: server",
    "nfs_acl: server", "rpcbind: server", "portmap: server", "mount: server", "status: server", "NFS server",
    "Lustre",
    "read-only", "journal", "I/O error", "nvme", "Power key", "button/power", "Heartbeat", "Cable",
    "hung_task_timeout_secs", "segfault at ", "trap ", "unhandled ",
    "amdgpu", "page fault", "hardware error", "GPU reset", "VRAM is lost", "reset failed", "PSP resume",
    "resume of IP block", "MES ", "device lost from bus", "Ring ", "PROTECTION_FAULT", "UTCL2", "_FAULTS: ",
    "WALKER_ERROR", "MAPPING_ERROR", "RW: 0x", "Process ", "for process ",
]


# The rules' own literals: every test below that makes a line an event, a record's continuation or
# part of an OOM record holds one of these (RULE_LITERALS exactly, RULE_LITERALS_CI in any ASCII
# case) or is the AER bit form (AER_BIT_ANY_RE); tests/parsers/test_kernel.py checks each pattern of
# `parse` against them (`forensics.triage.literal_factor`). A KEYWORDS line without one (`EXT4-fs
# (nvme0n1p2): mounted filesystem`, `ib0: link becomes ready`) can become nothing and is not read.
RULE_LITERALS = [
    "NVRM", "nvidia-nvswitch", "AER: ", "PCIe Bus Error: severity=", ": Kill process ",
    "invoked oom-killer", "oom-kill:", "oom_reaper: ", "Killed process ", "state changed to ", "EDAC",
    "[Hardware Error]", "hung_task_timeout_secs", "is blocked on a ", "Power key pressed", "button/power PBTN",
    "error status/mask=", "TLP Header", "broadcast ", "no AER-aware driver", "Error of this Agent",
    "evice recovery successful", "device [", "_kgspRpcGspEventPmuHalted", "GSP-CrashCat", "NV_ERR_GPU_IS_LOST",
    "NV_ERR_RESET_REQUIRED", "rpcSendMessage failed", "s of waiting for RPC response",
    "Timeout waiting for RPC from GSP", "_kgspLogRpcTimeout", "* GSP Timeout *", "_kgspIsHeartbeatTimedOut",
    "GSP heartbeat timed out", "Heartbeat timed out", "GspRmFree failed", "API_GPU_ATTACHED_SANITY_CHECK failed",
    "_threadNodeCheckTimeout", "API mismatch", "uvm encountered global fatal error", "RmInitAdapter failed",
    "rm_init_adapter failed", "ncorrected hardware memory error", "Machine check events logged", "Machine Check",
    "Machine check", "Hardware error from APEI", "event severity: ", "BUG: soft lockup", "hard LOCKUP",
    "stalls on CPU", "stall on CPU", "Kernel panic - not syncing", "Oops:", "BUG: unable to handle",
    "general protection fault", " blocked for more than ", "Linux version ", "-- Boot ", "-- Reboot --",
    *NETFS_FRAME_LITERALS,
    "-fs error", "read-only", "Aborting journal on device", "Detected aborted journal", "orruption",
    "xfs_do_force_shutdown", "ilesystem has been shut down", "hutting down filesystem", "nfs: server ", "nfs4: server ",
    "lockd: server ", "nfsacl: server ", "nfs_acl: server ", "rpcbind: server ", "portmap: server ", "mount: server ",
    "status: server ", "NFS server ",
    " not responding", "LustreError: ", "Connection to ", "evicted", "I/O error", " error, dev ", " timeout", ": controller is down",
    " kgspHealthCheck", "RPC event history", "RPC history", "GSP RPC buffer contains",
    "segfault at ", "trap ", "general protection fault ", "unhandled ", "NV_WARN_", "NV_ERR_", "fabricmanager",
    "page fault (src_id:", " timeout, signaled seq=", "hardware error", "hardware errors detected",
    "Accelerator Check Architecture", "aca entry[", "device lost from bus!", "reset failed", "GPU reset",
    "resume of IP block <", "PSP resume failed", "MES failed to respon", "MES might be in unrecoverable state",
    "VRAM is lost due to GPU reset", "reset succeeded", "device wedged, but recovered",
    "in page starting at address 0x", "Process ", "for process ", " thread ", "VM_L2_PROTECTION_FAULT_STATUS:",
    "Faulty UTCL2 client ID:", "MORE_FAULTS: ", "WALKER_ERROR: ", "PERMISSION_FAULTS: ", "MAPPING_ERROR: ", "RW: 0x",
]
RULE_LITERALS_CI = [
    "NVIDIA fabric",
    "link is down", "link down", "link is up", "link up", "carrier lost", "lost carrier", "carrier off",
    "cable unplugged", "cable error", "Bad or shorted cable", "Port module event[error]", "health compromised",
    "fw_fatal", "firmware fatal", "fatal error", "syndrome", "Health issue observed", "handling bad device",
    "health recovery flow aborted",
]
# A line's literal screen (`_screened`): the rules run only on lines whose body holds one of the rules'
# literals, and the multi-line forms look at a neighbour only for these literals / this pattern (each
# is in every line the neighbour test it stands for matches: `_thegpu`, `_fell`, `_unsup`, `_aer_mask`
# are literal tests of the message, a suffix of the body; AER_BIT_RE's message holds AER_BIT_ANY_RE).
NEIGHBOUR_LITERALS = ["NVRM: The NVIDIA GPU", "fallen off the bus", "not supported", "error status/mask="]
AER_BIT_ANY_RE = rf"{_PCI_FN}:\s+\[\s*\d+\]"
# The uptime is at most 9 integer digits (printk's `[%5lu.%06lu]` seconds since boot: 10 digits would be
# 31.7 years up): a 10-digit `[1652739463.054681]` is a Unix epoch, UCX's ucs_log layout
# (`[<sec>.<usec>] [host:pid:tid] file.c:NNN UCX  ERROR ...`, src/ucs/debug/log.c), not a dmesg line.
# A line that starts with a plain uptime stamp (`[   12.345678]`, after optional blanks and a raw
# printk level `<6>`): PREFIX_RE matches none of its alternatives there (each starts with `[` and a
# capital, `[+`, `[<`, a digit, a day or month name, or `kernel`), so it reads `lvl`, `up` and `caller`
# alone, as FAST_PREFIX_RE does; the line is a kernel line (`_stamp_fast`).
UPTIME_LINE_RE = r"^\s*(?:<\d{1,3}>)?\[\s*\d{1,9}\.\d+\]"
FAST_PREFIX_RE = r"^(?P<pre>\s*(?:<(?P<lvl>\d{1,3})>)?\[\s*(?P<up>\d{1,9}\.\d+)\]\s*(?:\[\s*(?P<caller>[TC]\d+)\])?\s*)"
SCREEN = True  # the literal screen and the uptime fast path; tests turn it off to compare with the plain path


# --------------------------------------------------------------------------------------------
# helpers


def _english_month(mon: pl.Expr) -> pl.Expr:
    """A syslog month in any LOCAL_MONTHS locale as the English abbreviation `month_day_time` reads."""
    low = mon.str.strip_suffix(".").str.to_lowercase()
    return pl.when(low.is_in(list(LOCAL_MONTHS))).then(low.replace_strict(LOCAL_MONTHS, default=None)).otherwise(mon)


def _boot_expr(host: pl.Expr, ctx: ParseContext) -> pl.Expr:
    if not ctx.boot_times:
        return pl.lit(None, dtype=UTC_DT)
    keys = list(ctx.boot_times)
    vals = [v if v.tzinfo else v.replace(tzinfo=UTC) for v in ctx.boot_times.values()]
    return host.replace_strict(keys, pl.Series(vals, dtype=UTC_DT), default=None, return_dtype=UTC_DT)


def _seconds(expr: pl.Expr) -> pl.Expr:
    return pl.duration(microseconds=(expr.cast(pl.Float64, strict=False) * 1e6).round(0).cast(pl.Int64))


def _split_prefix(lines: pl.DataFrame, ctx: ParseContext, prefix_re: str) -> pl.DataFrame:
    """The lines with `prefix_re`'s groups (PREFIX_RE, or FAST_PREFIX_RE on plain uptime lines) and
    `msg`, the body after the prefix; `mhost` the host of a journalctl short-monotonic record, whose
    `host kernel: ` is cut from `msg` too (only the kernel's records are read here, so only that
    identifier is taken: `[ 5.1] usb 1-1: ...` stays a dmesg message; a second, anchored pass on the
    message is cheaper than one more optional group in PREFIX_RE)."""
    keep = ["hint_host", "hint_file"] if ctx.batched else []
    df = lines.select("line_no", "body", "prefix_host", *keep).with_columns(
        pl.col("body").str.extract_groups(ascii_classes(prefix_re)).alias("_g")).unnest("_g")
    df = df.with_columns(pl.col("body").str.slice(pl.col("pre").str.len_chars()).alias("msg"))
    df = df.with_columns(
        pl.when(pl.col("up").is_not_null()).then(pl.col("msg").str.extract(ascii_classes(MONOTONIC_RE), 1)).alias("mhost"))
    return df.with_columns(
        pl.when(pl.col("mhost").is_not_null())
        .then(pl.col("msg").str.slice(pl.col("mhost").str.len_chars() + len(" kernel: ")))
        .otherwise(pl.col("msg")).alias("msg"))


def _stamp_frame(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Every line with its prefix split off: msg, host, proc, ts, ts_raw, ts_quality, kernel flag."""
    df = _split_prefix(lines, ctx, PREFIX_RE)
    df = df.with_columns(pl.when(pl.col("mhost").is_not_null()).then(pl.lit("kernel")).alias("mproc"))
    tz = ctx.tz
    host = pl.coalesce(pl.col("ihost"), pl.col("shost"), pl.col("uhost"), pl.col("fhost"), pl.col("mhost"),
                       line_host(ctx))  # content, wrapper, path
    proc = pl.coalesce(pl.col("iproc"), pl.col("sproc"), pl.col("uproc"), pl.col("fproc"), pl.col("mproc"))
    unix_ts = (pl.col("unix").cast(pl.Float64, strict=False) * 1e6).round(0).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))
    full_ts = pl.when(pl.col("fzone").is_in(["UTC", "GMT"])).then(iso(pl.col("full") + "+00:00", tz)) \
        .when(pl.col("fzone").str.contains(ascii_classes(r"^[+-]\d{4}$"))).then(iso(pl.col("full") + pl.col("fzone"), tz)) \
        .otherwise(iso(pl.col("full"), tz))  # another zone name: the host's local time, read in the job's zone
    syslog_raw = pl.concat_str([pl.col("mon"), pl.col("day"), pl.col("hms")], separator=" ")
    ts_exact = pl.coalesce(
        month_day_time(pl.col("cmon"), pl.col("cday"), pl.col("chms"), pl.col("cyear"), tz),  # = ctime(ctime)
        month_day_time(_english_month(pl.coalesce(pl.col("lmon1"), pl.col("lmon2"))),
                       pl.coalesce(pl.col("lday1"), pl.col("lday2")),
                       pl.coalesce(pl.col("lhms1"), pl.col("lhms2")).str.replace_all(".", ":", literal=True),
                       pl.coalesce(pl.col("lyear1"), pl.col("lyear2"), pl.col("lyear3"),
                                   pl.lit(None if ctx.ref_year is None else str(ctx.ref_year), dtype=pl.Utf8)), tz),
        iso(pl.col("iso"), tz),
        iso(pl.col("diso"), tz),
        iso(pl.col("tiso"), tz),
        unix_ts.cast(UTC_DT),
        full_ts,
        month_day_time(_english_month(pl.col("mon")), pl.col("day"), pl.col("hms"), ctx.ref_year, tz),
    )
    hhm = pl.when(pl.col("hhm").str.len_chars() == 5).then(pl.col("hhm") + ":00").otherwise(pl.col("hhm"))
    df = df.with_columns(
        host.alias("host"),
        proc.alias("proc"),
        ts_exact.alias("_ts_exact"),
        month_day_time(pl.col("hmon"), pl.col("hday"), hhm, ctx.ref_year, tz).alias("_h_anchor"),
        pl.col("hmon").is_not_null().cum_sum().alias("_hgrp"),
        pl.col("rel").cast(pl.Float64, strict=False).fill_null(0.0).alias("_rel"),
    )
    df = df.with_columns(
        pl.col("_h_anchor").first().over(["_hgrp", *file_keys(ctx)]).alias("_h_anchor"),
        pl.col("_rel").cum_sum().over(["_hgrp", *file_keys(ctx)]).alias("_rel_cum"),
    )
    h_ts = pl.when(pl.col("hmon").is_not_null() | pl.col("rel").is_not_null()).then(
        pl.col("_h_anchor") + _seconds(pl.col("_rel_cum")))
    up_ts = _boot_expr(pl.col("host"), ctx) + _seconds(pl.col("up"))
    df = df.with_columns(
        pl.coalesce(pl.col("_ts_exact"), h_ts, up_ts).alias("ts"),
        pl.when(pl.col("_ts_exact").is_not_null()).then(pl.lit("exact"))
        .when(pl.col("hmon").is_not_null() & h_ts.is_not_null()).then(pl.lit("exact"))
        # uptime + the node's boot time (`uptime -s`) is the sum `dmesg -T` prints: as exact as that
        .when(h_ts.is_null() & up_ts.is_not_null()).then(pl.lit("exact"))
        .when(h_ts.is_not_null()).then(pl.lit("derived"))
        .when(pl.col("up").is_not_null() | pl.col("rel").is_not_null()).then(pl.lit("relative"))
        .otherwise(pl.lit("missing")).alias("ts_quality"),
        pl.when(pl.col("_ts_exact").is_not_null())
        .then(pl.coalesce(pl.col("ctime"), pl.col("lct"), pl.col("iso"), pl.col("diso"), pl.col("tiso"), pl.col("unix"),
                          pl.concat_str([pl.col("full"), pl.col("fzone")], separator=" "), syslog_raw))
        .otherwise(pl.coalesce(
            pl.col("up"), ("+" + pl.col("rel")),
            pl.concat_str([pl.col("hmon") + pl.col("hday"), pl.col("hhm")], separator=" "),
            pl.col("ctime"), pl.col("lct"), pl.col("iso"), syslog_raw,
        )).alias("ts_raw"),
    )
    stamped = (pl.col("ctime").is_not_null() | pl.col("lct").is_not_null()
               | pl.col("hmon").is_not_null() | pl.col("rel").is_not_null()
               | pl.col("up").is_not_null() | pl.col("bare").is_not_null() | pl.col("diso").is_not_null()
               | pl.col("delta").is_not_null() | pl.col("tiso").is_not_null())
    journal_kernel = pl.col("proc") == "kernel"
    marker = pl.col("msg").str.contains(ascii_classes("^" + MARKER_RE))
    df = df.with_columns(
        # a line from another process of a journal dump is not ours
        (pl.col("proc").is_null() | journal_kernel).alias("kernel_src"),
        ((stamped & pl.col("proc").is_null()) | journal_kernel | marker
         | pl.col("msg").str.starts_with("NVRM:")).fill_null(False).alias("kernel_line"),
    )
    return df.select("line_no", "body", "msg", "host", "proc", "ts", "ts_raw", "ts_quality", *file_keys(ctx),
                     "kernel_src", "kernel_line")


def _stamp_fast(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """`_stamp_frame` of lines that all match UPTIME_LINE_RE: the same columns, computed from the
    uptime stamp alone (the other groups of PREFIX_RE are null on such a line)."""
    df = _split_prefix(lines, ctx, FAST_PREFIX_RE)
    df = df.with_columns(
        pl.when(pl.col("mhost").is_not_null()).then(pl.lit("kernel")).alias("proc"),
        pl.coalesce(pl.col("mhost"), line_host(ctx)).alias("host"))
    up_ts = _boot_expr(pl.col("host"), ctx) + _seconds(pl.col("up"))
    df = df.with_columns(
        up_ts.alias("ts"),
        pl.when(up_ts.is_not_null()).then(pl.lit("exact"))
        .when(pl.col("up").is_not_null()).then(pl.lit("relative"))
        .otherwise(pl.lit("missing")).alias("ts_quality"),
        pl.col("up").alias("ts_raw"),
        pl.lit(True).alias("kernel_src"),
        pl.lit(True).alias("kernel_line"),
    )
    return df.select("line_no", "body", "msg", "host", "proc", "ts", "ts_raw", "ts_quality", *file_keys(ctx),
                     "kernel_src", "kernel_line")


def _screened(lines: pl.DataFrame, ctx: ParseContext) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """`_stamp_frame` of the lines the rules or a neighbour test may read (a KEYWORD, a
    NEIGHBOUR_LITERALS literal, AER_BIT_ANY_RE), and of every line not of the uptime shape (their
    kernel-line flag, and the `dmesg -H` groups, need the full prefix); with column `_row` (each row's
    position in `lines`). Also the kernel-line flag of every line and the rows' positions. The other
    lines (the uptime-stamped noise of a large dmesg: most of its lines) are kernel lines read no
    further: the rows left out have no `dmesg -H` anchor and add 0 to its running sum, so the rows
    kept get the values the whole frame would give them. So are the lines of other shapes without a
    prefix (PREFIX_START_RE) that no rule or neighbour test reads (most lines of a rank log): no group
    of PREFIX_RE, so no stamp, anchor, delta or process; their kernel-line flag is the marker test."""
    n = lines.height
    b = pl.col("body")
    if not SCREEN:
        df = _stamp_frame(lines, ctx).with_columns(pl.int_range(0, n, dtype=pl.Int64).alias("_row"))
        return df, df["kernel_line"].to_numpy(), np.arange(n, dtype=np.int64)
    # a rule reads KEYWORDS lines holding a rule literal only, every NEIGHBOUR_LITERALS literal holds a
    # KEYWORD but `not supported`: the lines holding a rule or neighbour literal are found first (one
    # regex alternation, whose case-insensitive part, Unicode's, matches a superset of ASCII's), and the
    # exact tests run on those alone
    fl = lines.select(
        b.str.contains(ascii_classes(UPTIME_LINE_RE)).fill_null(False).alias("fast"),
        b.str.contains(ascii_classes(_screen_re())).fill_null(True).alias("lit"),
        b.str.contains(ascii_classes(AER_BIT_ANY_RE)).fill_null(True).alias("aer"))
    fast, keep = fl["fast"].to_numpy(), fl["aer"].to_numpy()
    lit = np.flatnonzero(fl["lit"].to_numpy())
    if lit.size:
        keep[lit] |= lines.select("body")[lit].select(
            (b.str.contains_any([*KEYWORDS, "not supported"]) & (_rule_literal(b) | b.str.contains_any(NEIGHBOUR_LITERALS)))
            .fill_null(True))[:, 0].to_numpy()
    slow_rows = np.flatnonzero(~fast)
    fast_rows = np.flatnonzero(fast & keep)
    kline = fast.copy()
    # the other lines with no prefix but blanks (PREFIX_START_RE) and nothing a rule or a neighbour test
    # reads: no stamp, no `dmesg -H` anchor or delta, no process; a kernel line only if a journal marker
    if slow_rows.size:
        bare = lines.select("body")[slow_rows].select(
            b.str.contains(ascii_classes(PREFIX_START_RE)).fill_null(True).not_().alias("bare"),
            b.str.contains(ascii_classes(r"^\s*" + MARKER_RE)).fill_null(False).alias("marker"))
        drop = bare["bare"].to_numpy() & ~keep[slow_rows]
        if drop.any():
            kline[slow_rows[drop]] = bare["marker"].to_numpy()[drop]
            slow_rows = slow_rows[~drop]
    slow = _stamp_frame(lines[slow_rows] if slow_rows.size < n else lines, ctx)
    parts = [slow.with_columns(pl.Series("_row", slow_rows, dtype=pl.Int64))]
    if fast_rows.size:
        quick = _stamp_fast(lines[fast_rows], ctx).with_columns(pl.Series("_row", fast_rows, dtype=pl.Int64))
        parts.append(quick.select(parts[0].columns).cast(parts[0].schema))
    df = pl.concat(parts).sort("_row") if len(parts) > 1 else parts[0]
    kline[slow_rows] = slow["kernel_line"].to_numpy()
    return df, kline, df["_row"].to_numpy()


@cache
def _screen_re() -> str:
    """True on every line `_rule_literal` or a NEIGHBOUR_LITERALS test is true on (and a few more)."""
    return literal_regex([*RULE_LITERALS, *NEIGHBOUR_LITERALS]) + "|(?i:" + literal_regex(RULE_LITERALS_CI) + ")"


def _rule_literal(col: pl.Expr) -> pl.Expr:
    """Whether a line holds one of the rules' literals (see RULE_LITERALS)."""
    return col.str.contains_any(RULE_LITERALS) | col.str.contains_any(RULE_LITERALS_CI, ascii_case_insensitive=True)


def _rule_line(col: pl.Expr) -> pl.Expr:
    """Whether a line holds one of the rules' literals or the AER bit form (see RULE_LITERALS)."""
    return _rule_literal(col) | col.str.contains(ascii_classes(AER_BIT_ANY_RE))


def _next(a: np.ndarray, k: int) -> np.ndarray:
    """`a` shifted by k rows (k > 0: the value k rows below; k < 0: above), False past the ends."""
    out = np.zeros_like(a)
    if k > 0:
        out[:-k] = a[k:]
    else:
        out[-k:] = a[:k]
    return out


JOURNAL_JSON_RE = r'^\s*\{.*"MESSAGE"\s*:'


def _journal_json(lines: pl.DataFrame) -> pl.DataFrame:
    """`journalctl -o json` lines -> the short-iso line journalctl would have printed
    (`<iso> <host> <ident>: <MESSAGE>`), so that one grammar reads both. Time from
    `__REALTIME_TIMESTAMP` (µs since the epoch, UTC); kernel when `_TRANSPORT` or
    `SYSLOG_IDENTIFIER` says so."""
    is_j = pl.col("body").str.contains(ascii_classes(JOURNAL_JSON_RE))
    js = lines.filter(is_j)
    if js.is_empty():
        return lines
    b = pl.col("body")
    msg = b.str.json_path_match("$.MESSAGE")
    stamp = (b.str.json_path_match("$.__REALTIME_TIMESTAMP").cast(pl.Int64, strict=False)
             .cast(pl.Datetime("us", "UTC")).dt.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00"))
    host = b.str.json_path_match("$._HOSTNAME").str.replace_all(r"[\s\[:]", "_")
    ident = pl.when((b.str.json_path_match("$._TRANSPORT") == "kernel")
                    | (b.str.json_path_match("$.SYSLOG_IDENTIFIER") == "kernel")).then(pl.lit("kernel")) \
        .otherwise(pl.coalesce(b.str.json_path_match("$.SYSLOG_IDENTIFIER"), b.str.json_path_match("$._COMM"),
                               pl.lit("unknown")).str.replace_all(r"[\s\[:]", "_"))
    head = pl.concat_str([stamp, host, ident], separator=" ", ignore_nulls=True)
    js = js.with_columns(
        pl.when(msg.is_not_null() & stamp.is_not_null())
        .then(pl.concat_str([head, pl.lit(": "), msg.str.replace_all(r"[\r\n]+", " ")]))
        .otherwise(b).alias("body"))
    return pl.concat([lines.filter(~is_j), js]).sort("line_no")


PER_DISTINCT_ROWS = 4096  # a frame this tall or taller: its row-wise columns computed per distinct input,
PER_DISTINCT_SHARE = 4  # when its rows are this many times as many as the distinct inputs (tests force it)


def _per_distinct(df: pl.DataFrame, exprs: list[pl.Expr]) -> pl.DataFrame:
    """`df.with_columns(exprs)` for row-wise expressions (no window, no aggregation: each row's values
    a function of that row's values of the columns they read), computed once per distinct combination
    of those columns when they repeat (a large dmesg's 33k `nfs: server X OK` events are one message:
    the hundred-odd tests of the rules ran on each) and joined back in row order."""
    roots = sorted({c for e in exprs for c in e.meta.root_names()})
    if df.height < PER_DISTINCT_ROWS or not roots:
        return df.with_columns(exprs)
    keys = df.select(roots).unique(maintain_order=True)
    if PER_DISTINCT_SHARE * keys.height > df.height:
        return df.with_columns(exprs)
    names = [e.meta.output_name() for e in exprs]
    got = keys.with_columns([e.alias(f"__v{i}") for i, e in enumerate(exprs)])
    back = df.select(roots).join(got, on=roots, how="left", nulls_equal=True, maintain_order="left")
    if back.height != df.height:  # (keys are distinct: cannot happen)
        return df.with_columns(exprs)
    return df.with_columns([back[f"__v{i}"].alias(name) for i, name in enumerate(names)])


def _when_chain(conds: list[tuple[pl.Expr, pl.Expr]], default: pl.Expr | None = None) -> pl.Expr:
    expr = pl.when(conds[0][0]).then(conds[0][1])
    for c, v in conds[1:]:
        expr = expr.when(c).then(v)
    return expr.otherwise(default if default is not None else pl.lit(None))


# --------------------------------------------------------------------------------------------


def sniff(head: str) -> float:
    lines = [ln for ln in head.splitlines()[:4000] if ln.strip()]
    if not lines:
        return 0.0
    stamp = re.compile(
        r"^\s*(?:" + DMESG_FACILITY + r"\s*:(?:" + DMESG_LEVEL + r")\s*: )?"
        r"(?:" + _LOCAL_CTIME +
        r"|(?:<\d{1,3}>)?\[\s*\d{1,9}\.\d+(?: <\s*-?\d+\.\d+>)?\]|\[[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d \d{4}"
        r"(?: <\s*-?\d+\.\d+>)?\]|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:?\d\d |\[<\s*-?\d+\.\d+>\]"
        r"|\[\s*\+\d+\.\d+\]|\[[A-Z][a-z]{2}\d{1,2} \d\d:\d\d\]|.*\bkernel: |NVRM: "
        r"|" + DMESG_FACILITY + r": {1,7}(?:" + TALOS_LEVEL + r"): \[\d{4}-\d\d-\d\dT"
        r'|\{.*"_TRANSPORT"\s*:\s*"kernel")')
    k = sum(1 for ln in lines if stamp.match(ln) or re.search(r" (?:nv-fabricmanager|nvidia-fabricmanager\S*)\[\d+\]: |"
                                                           r"nvidia-fabricmanager\.service: ", ln))
    if k == 0:
        return 0.0
    score = 0.4 + 0.55 * (k / len(lines))
    if "NVRM: " in head or "SXid" in head:
        score = max(score, 0.85)
    return round(min(score, 0.95), 3)


def _no_candidates(kernel_nos: pl.Series) -> Extraction:
    """`parse`'s result when no line is a candidate of a rule: no event, no Xid row, nothing claimed;
    the kernel lines (`kernel_nos`) read and ignored."""
    return Extraction(events=empty_events(), tables={"xid_events": empty_table("xid_events")},
                      claimed=pl.Series("line_no", [], dtype=pl.Int64), ignored=kernel_nos.sort().alias("line_no"))


def _wall_hosts(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """`prefix_host` of a record under a wall broadcast header (WALL_RE): the host the header names, on the
    line right under rsyslog's, two lines under journald's (after its blank line), where no wrapper named one."""
    if not lines["body"].str.contains("essage from s", literal=True).any():
        return lines
    g = pl.col("body").str.extract_groups(ascii_classes(WALL_RE))
    keys = file_keys(ctx)
    sys1 = g.struct.field("wsys").shift(1)
    jrn2 = g.struct.field("wjrn").shift(2)
    if keys:
        sys1, jrn2 = sys1.over(keys), jrn2.over(keys)
    return lines.with_columns(pl.coalesce(pl.col("prefix_host"), sys1, jrn2).alias("prefix_host"))


def _hung_task_fs(cand: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The first network-filesystem frame (NETFS_FRAME_RE) of each hung task's call trace becomes a
    `hung_task_fs` event: code = the filesystem (NETFS_FAMILY), pid = the blocked task's. A frame belongs
    to the nearest hung task above it in the same file and host, within HUNG_STACK_LINES lines, when no
    other event lies between them."""
    m = pl.col("msg")
    g = m.str.extract_groups(ascii_classes(NETFS_FRAME_RE))
    fam = pl.coalesce(g.struct.field("mod"),
                      g.struct.field("fn").str.extract(ascii_classes(r"^(__rpc|nfs4|cxiWaitEventWait|[a-z]+\d?)"), 1))
    keys = [c for c in ("host",) if c in cand.columns] + file_keys(ctx)
    hung = pl.col("kind") == "hung_task"
    other = pl.col("kind").is_not_null() & ~hung
    last_hung = pl.when(hung).then(pl.col("line_no")).forward_fill()
    last_other = pl.when(other).then(pl.col("line_no")).forward_fill()
    hung_pid = pl.when(hung).then(pl.col("pid")).forward_fill()
    if keys:
        last_hung, last_other, hung_pid = last_hung.over(keys), last_other.over(keys), hung_pid.over(keys)
    cand = cand.with_columns(fam.replace_strict(NETFS_FAMILY, default=None).alias("_fs"),
                             last_hung.alias("_hung_at"), last_other.alias("_other_at"), hung_pid.alias("_hung_pid"))
    inrec = (pl.col("kind").is_null() & pl.col("_fs").is_not_null() & pl.col("_hung_at").is_not_null()
             & (pl.col("line_no") - pl.col("_hung_at") <= HUNG_STACK_LINES)
             & (pl.col("_other_at").is_null() | (pl.col("_other_at") < pl.col("_hung_at")))).fill_null(False)
    first = inrec & (inrec.cast(pl.Int32).cum_sum().over([*keys, "_hung_at"]) == 1)
    return cand.with_columns(
        pl.when(first).then(pl.lit("hung_task_fs")).otherwise(pl.col("kind")).alias("kind"),
        pl.when(first).then(pl.col("_fs")).otherwise(pl.col("code")).alias("code"),
        pl.when(first).then(pl.lit("error")).otherwise(pl.col("severity")).alias("severity"),
        pl.when(first).then(pl.col("_hung_pid")).otherwise(pl.col("pid")).alias("pid"),
    ).drop("_fs", "_hung_at", "_other_at", "_hung_pid")


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    if lines.is_empty():
        return Extraction(events=empty_events(), tables={"xid_events": empty_table("xid_events")})
    lines = _wall_hosts(_journal_json(lines), ctx)
    df, kernel_line, rows = _screened(lines, ctx)
    m = pl.col("msg")
    # neighbour flags for the multi-line forms (literal checks on the rows `_screened` kept; a line
    # left out holds none of their literals), shifted over the whole file's rows
    df = df.with_columns(
        m.str.starts_with("NVRM: The NVIDIA GPU").alias("_thegpu"),
        m.str.contains("fallen off the bus", literal=True).alias("_fell"),
        m.str.contains("not supported", literal=True).alias("_unsup"),
        m.str.contains("error status/mask=", literal=True).alias("_aer_mask"),
        m.str.contains(ascii_classes(AER_BIT_RE)).alias("_aer_bit_like"),
    )
    flag = {}
    for c in ("_thegpu", "_fell", "_unsup", "_aer_mask", "_aer_bit_like"):
        flag[c] = np.zeros(lines.height, dtype=bool)
        flag[c][rows] = df[c].fill_null(False).to_numpy()
    near = {
        "_fell_next": _next(flag["_fell"], 1) | _next(flag["_fell"], 2),
        "_unsup_next": _next(flag["_unsup"], 1) | _next(flag["_unsup"], 2),
        "_thegpu_prev": _next(flag["_thegpu"], -1) | _next(flag["_thegpu"], -2),
        "_after_mask": _next(flag["_aer_mask"] | flag["_aer_bit_like"], -1),
    }
    df = df.with_columns([pl.Series(c, a[rows]) for c, a in near.items()])
    power_src = pl.col("proc").is_in(POWER_PROCS).fill_null(False) & m.str.contains(ascii_classes(POWER_RE))
    rule = m.str.contains_any(KEYWORDS) & _rule_line(m) if SCREEN else m.str.contains_any(KEYWORDS)
    fm_src = (pl.col("proc").is_in(FM_PROCS) | ((pl.col("proc") == "systemd") & m.str.contains(ascii_classes(FM_UNIT_RE)))) \
        .fill_null(False)
    cand = df.filter((pl.col("kernel_src") & rule) | power_src | fm_src)
    if SCREEN and cand.is_empty():  # no line any rule reads (a rank log's lines): what the rules below give
        # for no candidate, without their hundred-odd polars calls on an empty frame (a small bundle's batch)
        return _no_candidates(lines["line_no"].filter(pl.Series(kernel_line)))
    warnings: list[str] = []

    xid = m.str.extract_groups(ascii_classes(XID_RE))
    ident = m.str.extract_groups(ascii_classes(IDENT_RE))
    sx = m.str.extract_groups(ascii_classes(SXID_RE))
    aer_recv = m.str.extract_groups(ascii_classes(AER_RECV_RE))
    aer_bus = m.str.extract_groups(ascii_classes(AER_BUS_RE))
    aer_bit = m.str.extract_groups(ascii_classes(AER_BIT_RE))
    oom = m.str.extract_groups(ascii_classes(OOM_RE))
    # an OOM record's task / reaper line stands for it only when no `Killed process` line is near
    # (the kill line comes right after `oom-kill:` and right before `oom_reaper:`)
    killed = m.str.contains(ascii_classes(OOM_RE))
    cand = cand.with_columns(
        xid.alias("_x"), ident.alias("_id"), sx.alias("_sx"), aer_recv.alias("_ar"), aer_bus.alias("_ab"),
        aer_bit.alias("_abit"), oom.alias("_oom"), m.str.extract_groups(ascii_classes(OOM_TASK_RE)).alias("_ot"),
        m.str.extract_groups(ascii_classes(OOM_REAP_RE)).alias("_or"), m.str.extract_groups(ascii_classes(HUNG_RE)).alias("_hung"),
        m.str.extract_groups(ascii_classes(USER_FAULT_RE)).alias("_uf"),
        killed.alias("_killed"),
    )
    # the nearest kill line above and below (its line and pid), within one file of a batch
    keys = file_keys(ctx)
    kill_ln = pl.when(pl.col("_killed")).then(pl.col("line_no"))
    kill_pid = pl.when(pl.col("_killed")).then(pl.col("_oom").struct.field("pid"))
    part_pid = pl.coalesce(pl.col("_ot").struct.field("pid"), pl.col("_or").struct.field("pid"))
    near = []
    for dist, pid in ((pl.col("line_no") - kill_ln.forward_fill(), kill_pid.forward_fill()),
                      (kill_ln.backward_fill() - pl.col("line_no"), kill_pid.backward_fill())):
        if keys:
            dist, pid = dist.over(keys), pid.over(keys)
        near.append((dist <= OOM_NEAR) & (pid == part_pid))
    cand = cand.with_columns(pl.any_horizontal(near).fill_null(False).alias("_killed_near"))
    # a header with no record line (kill / task / reaper) after it before the next header
    hdr = m.str.contains(ascii_classes(OOM_HEADER_RE))
    rec = pl.col("_killed") | part_pid.is_not_null()
    next_rec = pl.when(rec).then(pl.col("line_no")).backward_fill()
    next_hdr = pl.when(hdr).then(pl.col("line_no")).shift(-1).backward_fill()
    if keys:
        next_rec, next_hdr = next_rec.over(keys), next_hdr.over(keys)
    cand = cand.with_columns(
        (hdr & (next_rec.is_null() | (next_hdr.is_not_null() & (next_rec > next_hdr)))).fill_null(False)
        .alias("_hdr_alone"))
    F = pl.col  # noqa: N806 (short alias)
    is_xid = F("_x").struct.field("xid").is_not_null()
    is_sxid = F("_sx").struct.field("sxid").is_not_null()
    is_ident = F("_id").struct.field("uuid").is_not_null()
    is_fell_multi = F("_thegpu") & F("_fell_next")
    is_fell = (is_fell_multi | (F("_fell") & m.str.contains("NVRM:", literal=True)
                                & ~m.str.contains(r"NVRM: (?:\(PCI ID|fallen off the bus and)")))
    gsp_code = _when_chain([
        (m.str.contains("_kgspRpcGspEventPmuHalted", literal=True), pl.lit("PMU_HALTED")),
        (m.str.contains("GSP-CrashCat", literal=True), pl.lit("GSP_CRASHCAT")),
        (m.str.contains("NV_ERR_GPU_IS_LOST", literal=True), pl.lit("NV_ERR_GPU_IS_LOST")),
        (m.str.contains("NV_ERR_RESET_REQUIRED", literal=True), pl.lit("NV_ERR_RESET_REQUIRED")),
        (m.str.contains("rpcSendMessage failed", literal=True), pl.lit("RPC_SEND_FAILED")),
        (m.str.contains(ascii_classes(r"Timeout after \d+s of waiting for RPC response|Timeout waiting for RPC from GSP"
                        r"|_kgspLogRpcTimeout|\*+ GSP Timeout \*+")), pl.lit("RPC_TIMEOUT")),
        (m.str.contains(r"_kgspIsHeartbeatTimedOut|GSP heartbeat timed out|Heartbeat timed out"), pl.lit("HEARTBEAT_TIMEOUT")),
        (m.str.contains("GspRmFree failed", literal=True), pl.lit("GSP_RM_FREE_FAILED")),
    ])
    gsp_sev = _when_chain([
        (gsp_code.is_in(["PMU_HALTED", "GSP_CRASHCAT", "NV_ERR_GPU_IS_LOST"]), pl.lit("critical")),
    ], pl.lit("error"))
    nvrm_code = _when_chain([
        # thread_state.c: `API_GPU_ATTACHED_SANITY_CHECK failed!` (the GPU is gone) versus the RM
        # thread timeout itself (`currentTime: ... >= ...`, `Timeout was set to: N msecs!`)
        (m.str.contains("API_GPU_ATTACHED_SANITY_CHECK failed", literal=True), pl.lit("GPU_NOT_ATTACHED")),
        (m.str.contains("_threadNodeCheckTimeout", literal=True), pl.lit("THREAD_NODE_CHECK_TIMEOUT")),
        (m.str.contains("API mismatch", literal=True), pl.lit("API_MISMATCH")),
        (m.str.contains("uvm encountered global fatal error", literal=True), pl.lit("UVM_FATAL")),
        (m.str.contains(r"RmInitAdapter failed|rm_init_adapter failed"), pl.lit("INIT_ADAPTER_FAILED")),
        (F("_thegpu") & F("_unsup_next"), pl.lit("GPU_NOT_SUPPORTED")),
    ])
    nvrm_sev = pl.when(nvrm_code == "UVM_FATAL").then(pl.lit("critical")).when(
        nvrm_code == "GPU_NOT_SUPPORTED").then(pl.lit("warning")).otherwise(pl.lit("error"))
    # PCIe AER
    aer_sev_word = pl.coalesce(F("_ar").struct.field("sev"), F("_ab").struct.field("sev"))
    is_aer_bit = F("_abit").struct.field("bit").is_not_null() & F("_after_mask")
    # drivers/pci/pcie/err.c: the recovery outcome ("device recovery failed", older kernels capitalised;
    # "can't recover (no error_detected callback)" when the device's driver cannot take part)
    is_aer = aer_sev_word.is_not_null() | is_aer_bit | m.str.contains(ascii_classes(AER_RECOVERY_FAILED_RE))
    aer_sev_of = (pl.when(aer_sev_word.str.contains("Fatal") & ~aer_sev_word.str.contains("Non-Fatal"))
                  .then(pl.lit("critical"))
                  .when(aer_sev_word.str.starts_with("Uncorrected")).then(pl.lit("error"))
                  .when(aer_sev_word.is_not_null()).then(pl.lit("warning")))
    is_aer_cont = m.str.contains(ascii_classes(AER_CONT_RE)) & m.str.contains(ascii_classes(PCI_FN_RE))
    # IB / mlx
    ib_dev = m.str.contains(ascii_classes(IB_DEV_RE))
    ib_state = m.str.extract(r"state changed to ([A-Z_]+)", 1)
    ib_code = _when_chain([
        (m.str.contains(r"(?i)link (?:is )?down"), pl.lit("LINK_DOWN")),
        (m.str.contains(r"(?i)link (?:is )?up"), pl.lit("LINK_UP")),
        (ib_state.is_not_null(), ib_state),
        (m.str.contains(r"(?i)carrier lost|lost carrier|carrier off"), pl.lit("CARRIER_LOST")),
        (m.str.contains(r"(?i)cable unplugged"), pl.lit("CABLE_UNPLUGGED")),
        # mlx5 events.c: `Port module event[error]: module N, Cable error, <why>`
        (m.str.contains(r"(?i)cable error|Bad or shorted cable|Port module event\[error\]"), pl.lit("CABLE_ERROR")),
        # mlx5 health.c (poll_health, print_health_info, mlx5_health_try_recover) and fw fatal syndromes
        (m.str.contains(r"(?i)health compromised|fw_fatal|firmware fatal|fatal error|syndrome|Health issue observed"
                        r"|handling bad device|health recovery flow aborted"),
         pl.lit("FW_ERROR")),
    ])
    ib_sev = (pl.when(ib_code.is_in(["LINK_UP", "ACTIVE"])).then(pl.lit("info"))
              .when(ib_code.is_in(["LINK_DOWN", "DOWN", "FW_ERROR", "CABLE_UNPLUGGED", "CABLE_ERROR"])).then(pl.lit("error"))
              .otherwise(pl.lit("warning")))
    # MCE / EDAC
    edac = m.str.extract(ascii_classes(r"EDAC\b.*?\b\d+ (UE|CE)\b"), 1)
    hw_err = m.str.contains("[Hardware Error]", literal=True)
    mce_code = _when_chain([
        (edac.is_not_null(), edac),
        (m.str.contains(r"[Uu]ncorrected hardware memory error"), pl.lit("UE")),
        (hw_err & m.str.contains("Machine check events logged", literal=True), pl.lit("LOGGED")),
        (hw_err & m.str.contains(r"Machine [Cc]heck"), pl.lit("MCE")),
        (hw_err & m.str.contains("Hardware error from APEI", literal=True), pl.lit("APEI")),
        (hw_err & m.str.contains(r"event severity: (?:fatal|recoverable)"), pl.lit("APEI")),
    ])
    mce_sev = (pl.when(mce_code == "UE").then(pl.lit("critical"))
               .when(mce_code.is_in(["CE", "LOGGED"])).then(pl.lit("warning")).otherwise(pl.lit("error")))
    # OOM, panic, boot
    is_oom_kill = F("_oom").struct.field("pid").is_not_null()
    oom_part = pl.when(~F("_killed_near")).then(
        pl.coalesce(F("_ot").struct.field("pid"), F("_or").struct.field("pid")))
    is_oom = is_oom_kill | oom_part.is_not_null() | F("_hdr_alone")
    oom_pid = pl.coalesce(F("_oom").struct.field("pid"), oom_part)
    oom_name = pl.when(is_oom_kill).then(F("_oom").struct.field("name")).otherwise(
        pl.coalesce(F("_ot").struct.field("name"), F("_or").struct.field("name")))
    is_oom_cont = m.str.contains(ascii_classes(r"invoked oom-killer|oom-kill:|oom_reaper: |Killed process \d+ \("))
    # hung tasks, lockups, filesystems, power key
    is_hung = F("_hung").struct.field("pid").is_not_null()
    is_ufault = F("_uf").struct.field("pid").is_not_null()
    ufault_code = F("_uf").struct.field("what").str.strip_chars().replace_strict(
        {"segfault at": "segfault", "trap": "trap", "general protection fault": "general_protection",
         "unhandled": "unhandled"}, default=None)
    lockup_code = _when_chain([
        (m.str.contains("BUG: soft lockup", literal=True), pl.lit("soft_lockup")),
        (m.str.contains("hard LOCKUP", literal=True), pl.lit("hard_lockup")),
        (m.str.contains(r"stalls? on CPU"), pl.lit("rcu_stall")),
    ])
    lockup_code = pl.when(m.str.contains(ascii_classes(LOCKUP_RE))).then(lockup_code)
    fs_code = _when_chain([(m.str.contains(ascii_classes(rx)), pl.lit(code)) for rx, code in FS_CODES])
    is_power = m.str.contains(ascii_classes(POWER_RE)) & (pl.col("kernel_src") | pl.col("proc").is_in(POWER_PROCS)).fill_null(False)
    is_fm = fm_src & ~pl.col("kernel_src").fill_null(False)
    fm_code = m.str.extract(r"\[(NV_(?:ERR|WARN)_[A-Z_]+)\]", 1)
    # severity from FM's status code and the line's writer: FM's own stderr carries its errors, systemd's
    # and the start script's lines naming the unit say it exited, systemd's other lines (`Starting ...`)
    fm_sev = _when_chain([
        (m.str.contains("NV_WARN_", literal=True), pl.lit("warning")),
        (m.str.contains("NV_ERR_", literal=True), pl.lit("error")),
        (pl.col("proc") == "nv-fabricmanager", pl.lit("error")),
        (m.str.contains("fabricmanager", literal=True), pl.lit("warning")),
    ], pl.lit("info"))
    hung_cont = m.str.contains(r"hung_task_timeout_secs\" disables this message|is blocked on a (?:mutex|rw-semaphore)")
    panic_code = _when_chain([
        (m.str.starts_with("Kernel panic - not syncing"), pl.lit("panic")),
        (m.str.contains(r"^(?:Oops:|BUG: unable to handle|general protection fault)"), pl.lit("oops")),
    ])
    boot_code = _when_chain([
        (m.str.starts_with("Linux version "), m.str.extract(r"^Linux version (\S+)", 1)),
        (m.str.contains(r"^-- Boot [0-9a-f]+ --"), m.str.extract(r"^-- Boot ([0-9a-f]+) --", 1)),
        (m.str.starts_with("-- Reboot --"), pl.lit("reboot")),
    ])
    is_nvrm_cont = (
        m.str.contains(ascii_classes(r"NVRM: (?:GPU\d+ )?(?:RPC (?:event )?history|GSP RPC buffer contains)"))
        | m.str.contains(r"^NVRM:\s{2,}\S")
        | (m.str.contains(ascii_classes(r"NVRM: GPU\d+ kgspHealthCheck"), literal=False)
           & ~m.str.contains("GSP-CrashCat", literal=True))
        | m.str.contains("NVRM: GPU Board Serial Number", literal=True)
        | (F("_thegpu_prev") & m.str.contains(r"^NVRM: (?:\(PCI ID:|fallen off the bus)"))
    )
    mce_cont = hw_err
    amd_code = _when_chain([(m.str.contains(ascii_classes(rx)), pl.lit(code)) for rx, code in AMDGPU_CODES])
    amd_sev = _when_chain([
        (amd_code.is_in(["GPU_LOST", "RAS_UE", "RAS_UE_UMC", "RESET_FAILED"]), pl.lit("critical")),
        (amd_code.is_in(["RAS_CE", "ACA_LOGGED", "GPU_RESET"]), pl.lit("warning")),
    ], pl.lit("error"))
    amd_cont = m.str.contains(ascii_classes(AMDGPU_CONT_RE))
    oops_cont = pl.lit(False)

    kind = _when_chain([
        (is_xid, pl.lit("xid")),
        (is_sxid, pl.lit("nvswitch_sxid")),
        (is_ident, pl.lit("gpu_identity")),
        (is_fell, pl.lit("gpu_fell_off_bus")),
        (gsp_code.is_not_null(), pl.lit("gsp_error")),
        (nvrm_code.is_not_null(), pl.lit("nvrm_error")),
        (is_aer, pl.lit("pcie_aer")),
        (ib_dev & ib_code.is_not_null(), pl.lit("ib_port")),
        (mce_code.is_not_null(), pl.lit("mce")),
        (amd_code.is_not_null(), pl.lit("amdgpu")),
        (is_oom, pl.lit("host_oom_kill")),
        (panic_code.is_not_null(), pl.lit("kernel_panic")),
        (is_hung, pl.lit("hung_task")),
        (is_ufault, pl.lit("user_fault")),
        (lockup_code.is_not_null(), pl.lit("kernel_lockup")),
        (fs_code.is_not_null(), pl.lit("fs_error")),
        (is_power, pl.lit("power_key")),
        (boot_code.is_not_null(), pl.lit("boot")),
        (is_fm, pl.lit("fabric_manager")),
    ])
    cont = is_nvrm_cont | is_aer_cont | is_oom_cont | mce_cont | oops_cont | hung_cont | amd_cont
    xid_num = F("_x").struct.field("xid").cast(pl.Int64, strict=False)
    pci_raw = _when_chain([
        (is_xid, F("_x").struct.field("pci")),
        (is_sxid, F("_sx").struct.field("pci")),
        (is_ident, F("_id").struct.field("pci")),
    ], m.str.extract(ascii_classes(PCI_ANY_RE), 1))
    sxid_sev = (pl.when(F("_sx").struct.field("sev") == "Fatal").then(pl.lit("critical"))
                .when(F("_sx").struct.field("sev") == "Non-fatal").then(pl.lit("warning"))
                .otherwise(pl.lit("error")))
    cand = _per_distinct(cand, [
        kind.alias("kind"),
        cont.fill_null(False).alias("_cont"),
        _when_chain([
            (is_xid, xid_num.cast(pl.Utf8)),
            (is_sxid, F("_sx").struct.field("sxid")),
            (is_ident, F("_id").struct.field("uuid")),
            (is_fell, pl.lit("79")),
            (gsp_code.is_not_null(), gsp_code),
            (nvrm_code.is_not_null(), nvrm_code),
            (aer_sev_word.is_not_null() & F("_ab").struct.field("type").is_not_null(),
             F("_ab").struct.field("type").str.strip_chars()),
            (aer_sev_word.is_not_null(), aer_sev_word),
            (is_aer_bit, F("_abit").struct.field("name")),
            (is_aer, pl.lit("RECOVERY_FAILED")),
            (ib_dev & ib_code.is_not_null(), ib_code),
            (mce_code.is_not_null(), mce_code),
            (amd_code.is_not_null(), amd_code),
            (is_oom, oom_name),
            (panic_code.is_not_null(), panic_code),
            (is_hung, F("_hung").struct.field("name")),
            (is_ufault, ufault_code),
            (lockup_code.is_not_null(), lockup_code),
            (fs_code.is_not_null(), fs_code),
            (is_power, pl.lit("POWER_KEY")),
            (boot_code.is_not_null(), boot_code),
            (is_fm, fm_code),
        ]).alias("code"),
        _when_chain([
            (is_xid, xid_severity(xid_num)),
            (is_sxid, sxid_sev),
            (is_ident, pl.lit("info")),
            (is_fell, pl.lit("critical")),
            (gsp_code.is_not_null(), gsp_sev),
            (nvrm_code.is_not_null(), nvrm_sev),
            (aer_sev_word.is_not_null(), aer_sev_of),
            (is_aer_bit, pl.lit(None, dtype=pl.Utf8)),  # inherits the record's severity below
            (is_aer, pl.lit("error")),
            (ib_dev & ib_code.is_not_null(), ib_sev),
            (mce_code.is_not_null(), mce_sev),
            (amd_code.is_not_null(), amd_sev),
            (is_oom, pl.lit("error")),
            (panic_code == "panic", pl.lit("critical")),
            (panic_code.is_not_null(), pl.lit("error")),
            (is_hung, pl.lit("warning")),
            (is_ufault, pl.lit("error")),
            (lockup_code.is_not_null(), pl.lit("error")),
            (fs_code == "NFS_OK", pl.lit("info")),
            (fs_code.is_not_null(), pl.lit("error")),
            (is_power, pl.lit("warning")),
            (boot_code.is_not_null(), pl.lit("info")),
            (is_fm, fm_sev),
        ]).alias("severity"),
        normalize_pci(pci_raw).alias("pci_bus_id"),
        _when_chain([
            (is_xid, F("_x").struct.field("pid").cast(pl.Int64, strict=False)),
            (is_oom, oom_pid.cast(pl.Int64, strict=False)),
            (is_hung, F("_hung").struct.field("pid").cast(pl.Int64, strict=False)),
            (is_ufault, F("_uf").struct.field("pid").cast(pl.Int64, strict=False)),
        ]).alias("pid"),
    ])
    # AER bit lines take the severity of the record header above them (same device)
    cand = cand.with_columns(
        pl.when(pl.col("kind") == "pcie_aer").then(
            pl.col("severity").forward_fill().over(["pci_bus_id", *file_keys(ctx)])).otherwise(pl.col("severity"))
        .fill_null("warning").alias("severity")
    )
    cand = _hung_task_fs(cand, ctx)
    ev = cand.filter(pl.col("kind").is_not_null())
    events = events_frame(ev.with_columns(
        pl.lit(SPEC.name).alias("source"), pl.col("body").alias("message"),
    ))
    # xid_events table
    xr = ev.filter(pl.col("kind") == "xid")
    xid_tbl = table_frame("xid_events", xr.select(
        "line_no", "ts", "host", "pci_bus_id",
        F("_x").struct.field("xid").cast(pl.Int64, strict=False).alias("xid"),
        "pid",
        pl.when(F("_x").struct.field("name").str.strip_chars().is_in(["<unknown>", "'<unknown>'", ""]))
        .then(pl.lit(None, dtype=pl.Utf8)).otherwise(F("_x").struct.field("name").str.strip_chars())
        .alias("proc_name"),
        F("_x").struct.field("gi").cast(pl.Int64, strict=False).alias("gpu_instance"),
        F("_x").struct.field("body").str.extract(ascii_classes(r"caused by previous Xid (\d+)"), 1)
        .cast(pl.Int64, strict=False).alias("caused_by_xid"),
        F("_x").struct.field("body").alias("body"),
    ))
    n_redacted = xr.filter(pl.col("pci_bus_id").is_null()).height
    if n_redacted:
        warnings.append(f"{n_redacted} Xid line(s) without a usable PCI address (redacted or malformed)")
    claimed = pl.concat([
        ev["line_no"], cand.filter(pl.col("kind").is_null() & pl.col("_cont"))["line_no"]
    ]).unique().sort()
    kernel_nos = lines["line_no"].filter(pl.Series(kernel_line))
    ignored = kernel_nos.filter(~kernel_nos.is_in(claimed.implode()))
    n_rel = ev.filter(pl.col("ts_quality") == "relative").height
    if n_rel:
        warnings.append(f"{n_rel} event(s) with uptime/relative stamps and no boot time: ts left null")
    n_noyear = ev.filter(pl.col("ts").is_null() & (pl.col("ts_quality") == "missing")
                         & pl.col("ts_raw").is_not_null()).height
    if n_noyear:
        warnings.append(f"{n_noyear} event(s) with a syslog stamp but no reference year: ts left null")
    return Extraction(
        events=events,
        tables={"xid_events": xid_tbl},
        claimed=claimed.alias("line_no"),
        ignored=ignored.sort().alias("line_no"),
        warnings=warnings,
    )


SPEC = ParserSpec(
    name="kernel",
    scope="node",
    description="Kernel logs (dmesg/journalctl/syslog): NVRM Xid, GSP, PCIe AER, SXid, IB, MCE, amdgpu, OOM killer, "
                "hung tasks, lockups, filesystem / I/O errors, power key, Fabric Manager journal lines",
    formats=(
        "dmesg (uptime stamps, optional caller id)",
        "dmesg -T (the English and every translated util-linux format, localized names)",
        "dmesg -H / -e",
        "dmesg -d (deltas), --time-format iso, -x (facility:level), -r (raw printk level)",
        "journalctl short / short-iso / short-precise",
        "journalctl short-monotonic / short-unix / short-full",
        "syslog kern.log (wall clock + uptime)",
        "rsyslog RFC3339",
        "talosctl dmesg",
        "journalctl -o json",
        "bare kernel: / prefix-less NVRM lines",
    ),
    kinds=("xid", "gpu_identity", "gpu_fell_off_bus", "gsp_error", "nvrm_error", "pcie_aer", "nvswitch_sxid",
           "ib_port", "mce", "host_oom_kill", "hung_task", "hung_task_fs", "kernel_lockup", "fs_error", "power_key",
           "user_fault",
           "kernel_panic", "boot", "fabric_manager", "amdgpu"),
    tables=("xid_events",),
    batch=True,
    roles=("uptime_clock",),
    evidence="kernel logs (dmesg/journal)",
)
