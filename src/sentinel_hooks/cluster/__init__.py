"""Scale-out on Redis: several replicas share one deployment (SPEC.md §11).

* ``membership`` — replicas heartbeat into a sorted set; who is live;
* ``rendezvous`` — who *should* own each watcher (pure, highest-random-weight hashing);
* ``leases`` — who *does* own it: ``SET NX PX`` leases with fencing tokens, renewed by CAS;
* ``keeper`` — the loop that renews, hands off and acquires leases, calling back the manager;
* ``changes`` — API changes made on one replica, published to the one that runs the watcher;
* ``ownership`` — the four behind the small interface ``WatcherManager`` uses in cluster mode.

Design notes and guarantees: docs/scaling.md, "Watcher ownership".
"""

from __future__ import annotations

from sentinel_hooks.cluster.keeper import LeaseKeeper
from sentinel_hooks.cluster.leases import Leases
from sentinel_hooks.cluster.membership import Membership
from sentinel_hooks.cluster.ownership import ClusterOwnership

__all__ = ["ClusterOwnership", "LeaseKeeper", "Leases", "Membership"]
