#!/usr/bin/env python3
"""pymemcache workload: every Client method with asserted results, then PooledClient and
HashClient lightly. Usage: workload.py PORT. Prints one summary line; exits non-zero on the
first unexpected result."""
import sys

from pymemcache.client.base import Client, PooledClient
from pymemcache.client.hash import HashClient

port = int(sys.argv[1])
checks = 0


def eq(got, want, what):
    global checks
    checks += 1
    if got != want:
        print(f"FAIL {what}: got {got!r}, want {want!r}", file=sys.stderr)
        sys.exit(1)


c = Client(("127.0.0.1", port), connect_timeout=5, timeout=5)
eq(c.flush_all(noreply=False), True, "flush_all")

# set / get, flags through the default (no) serde: bytes back.
eq(c.set("a", "hello", noreply=False), True, "set")
eq(c.get("a"), b"hello", "get")
eq(c.get("missing"), None, "get missing")
eq(c.get("missing", default=b"dflt"), b"dflt", "get default")
eq(c.set("bin", b"\x00\x01\r\n\xff", noreply=False), True, "set binary")
eq(c.get("bin"), b"\x00\x01\r\n\xff", "get binary")
eq(c.set("empty", b"", noreply=False), True, "set empty")
eq(c.get("empty"), b"", "get empty")
big = b"v" * 500_000
eq(c.set("big", big, noreply=False), True, "set 500 KB")
eq(c.get("big"), big, "get 500 KB")
eq(c.set("nr", "x"), True, "set noreply (default)")
eq(c.get("nr"), b"x", "get after noreply set")

# set_many / get_many
eq(c.set_many({"m1": "1", "m2": "2", "m3": "3"}, noreply=False), [], "set_many")
eq(c.get_many(["m1", "m2", "nope", "m3"]), {"m1": b"1", "m2": b"2", "m3": b"3"}, "get_many")
eq(c.get_many([]), {}, "get_many empty")

# add / replace
eq(c.add("a", "other", noreply=False), False, "add existing")
eq(c.add("new", "n", noreply=False), True, "add new")
eq(c.replace("nope", "r", noreply=False), False, "replace missing")
eq(c.replace("new", "r", noreply=False), True, "replace existing")
eq(c.get("new"), b"r", "get replaced")

# append / prepend
eq(c.append("a", " world", noreply=False), True, "append")
eq(c.prepend("a", ">> ", noreply=False), True, "prepend")
eq(c.get("a"), b">> hello world", "get appended")
eq(c.append("nope", "x", noreply=False), False, "append missing")
eq(c.prepend("nope", "x", noreply=False), False, "prepend missing")

# gets / cas
v, cas = c.gets("a")
eq(v, b">> hello world", "gets value")
eq(isinstance(cas, bytes) and cas.isdigit(), True, "gets cas is a number")
eq(c.cas("a", "swapped", cas, noreply=False), True, "cas ok")
eq(c.cas("a", "again", cas, noreply=False), False, "cas stale")
eq(c.cas("nope", "x", cas, noreply=False), None, "cas missing")
eq(c.get("a"), b"swapped", "get after cas")
eq(c.gets("nope"), (None, None), "gets missing")
many = c.gets_many(["a", "m1", "nope"])
eq(sorted(many), ["a", "m1"], "gets_many keys")
eq(many["a"][0], b"swapped", "gets_many value")
eq(many["m1"][0], b"1", "gets_many value 2")
eq(many["a"][1] != many["m1"][1], True, "gets_many distinct cas")

# incr / decr
eq(c.set("n", "10", noreply=False), True, "set counter")
eq(c.incr("n", 5, noreply=False), 15, "incr")
eq(c.decr("n", 20, noreply=False), 0, "decr floors at 0")
eq(c.incr("n", 2**64 - 1, noreply=False), 2**64 - 1, "incr to max")
eq(c.incr("n", 1, noreply=False), 0, "incr wraps")
eq(c.incr("nope", 1, noreply=False), None, "incr missing")
eq(c.decr("nope", 1, noreply=False), None, "decr missing")
try:
    c.incr("a", 1, noreply=False)
    eq("no error", "MemcacheClientError", "incr non-numeric")
except Exception as e:  # pymemcache raises MemcacheClientError
    eq(type(e).__name__, "MemcacheClientError", "incr non-numeric error type")
    eq("non-numeric" in str(e), True, "incr non-numeric message")

# touch
eq(c.touch("a", 1000, noreply=False), True, "touch")
eq(c.touch("nope", 1000, noreply=False), False, "touch missing")
eq(c.touch("a", -1, noreply=False), True, "touch expire")
eq(c.get("a"), None, "touched to expire")

# expiry on set: negative means already gone
eq(c.set("gone", "x", expire=-1, noreply=False), True, "set expired")
eq(c.get("gone"), None, "expired item")

# delete / delete_many
eq(c.delete("new", noreply=False), True, "delete")
eq(c.delete("new", noreply=False), False, "delete missing")
eq(c.delete_many(["m1", "m2", "nope"], noreply=False), True, "delete_many")
eq(c.get_many(["m1", "m2", "m3"]), {"m3": b"3"}, "after delete_many")

# stats / version
st = c.stats()
for f in [b"pid", b"uptime", b"curr_connections", b"total_connections", b"cmd_get", b"cmd_set",
          b"get_hits", b"get_misses", b"curr_items", b"total_items", b"bytes", b"evictions",
          b"limit_maxbytes", b"threads"]:
    eq(f in st, True, f"stats has {f!r}")
eq(isinstance(st[b"cmd_get"], int) and st[b"cmd_get"] > 0, True, "stats cmd_get counts")
ver = c.version()
eq(isinstance(ver, bytes) and len(ver) > 0, True, "version")

# flush_all, then quit (the next call reconnects)
eq(c.flush_all(noreply=False), True, "flush_all")
eq(c.get("m3"), None, "flushed")
c.quit()
eq(c.set("after-quit", "ok", noreply=False), True, "reconnect after quit")
eq(c.get("after-quit"), b"ok", "get after quit")
c.close()

# PooledClient: a few threads' worth of work through one pool.
pc = PooledClient(("127.0.0.1", port), max_pool_size=4, connect_timeout=5, timeout=5)
for i in range(50):
    eq(pc.set(f"p{i}", str(i), noreply=False), True, "pooled set")
eq(pc.get_many([f"p{i}" for i in range(50)]), {f"p{i}": str(i).encode() for i in range(50)},
   "pooled get_many")
eq(pc.incr("p7", 3, noreply=False), 10, "pooled incr")
pc.close()

# HashClient over two "nodes" that are the same server: keys spread, results whole.
hc = HashClient([("127.0.0.1", port), ("localhost", port)], connect_timeout=5, timeout=5)
eq(hc.set_many({f"h{i}": f"v{i}" for i in range(40)}, noreply=False), [], "hash set_many")
eq(hc.get_many([f"h{i}" for i in range(40)]), {f"h{i}": f"v{i}".encode() for i in range(40)},
   "hash get_many")
eq(hc.delete("h1", noreply=False), True, "hash delete")
eq(hc.get("h1"), None, "hash get deleted")

print(f"pymemcache workload: {checks} checks passed")
