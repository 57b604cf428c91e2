"""Per-rank identities: host, local rank, pid, GPU bus ids."""

from __future__ import annotations

import random
from dataclasses import dataclass

from forensics.simulate.config import PCI_BUS, US, Config


@dataclass
class Identity:
    """Stable names for hosts, GPUs, processes (derived from the seed)."""

    seed: int
    cfg: Config

    def host(self, node: int) -> str:
        return f"{self.cfg.host_prefix}-{node:03d}"

    def ip(self, host: str) -> str:
        idx = int(host.rpartition("-")[2]) if host.rpartition("-")[2].isdigit() else 0
        return f"10.64.{idx // 200}.{idx % 200 + 11}"

    def uuid(self, host: str, gpu: int) -> str:
        r = random.Random(f"{self.seed}:uuid:{host}:{gpu}")
        h = f"{r.getrandbits(128):032x}"
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def serial(self, host: str, gpu: int) -> str:
        return str(1650000000000 + random.Random(f"{self.seed}:sn:{host}:{gpu}").randrange(10**9))

    @staticmethod
    def pci(gpu: int) -> str:
        return f"0000:{PCI_BUS[gpu % len(PCI_BUS)]}:00"

    def agent_pid(self, attempt: int, host: str) -> int:
        return random.Random(f"{self.seed}:pid:{attempt}:{host}").randrange(2000, 3_900_000)

    def pid(self, attempt: int, host: str, local: int) -> int:
        return self.agent_pid(attempt, host) + 17 + local

    def boot(self, host: str) -> int:
        """Boot time of a host in microseconds relative to the job start (negative)."""
        r = random.Random(f"{self.seed}:boot:{host}")
        return -r.randrange(2 * 86400, 40 * 86400) * US

    def comm_id(self, attempt: int) -> str:
        return f"0x{random.Random(f'{self.seed}:comm:{attempt}').getrandbits(64):016x}"

    def comm_ptr(self, attempt: int, rank: int) -> str:
        return f"0x{0x55d000000000 + random.Random(f'{self.seed}:ptr:{attempt}:{rank}').getrandbits(36):x}"
