# Hosts a torch TCPStore on loopback for the Go tests of package c10d and
# prints its port. With "serve" it only hosts the store until stdin closes.
# With "worker PREFIX" a torch worker's own store (a TCPStore client under
# PrefixStore(PREFIX), as torch's env:// rendezvous builds it under an agent)
# then exchanges keys with the Go side:
#   sets from_torch, waits for from_go and prints it, adds 5 to counter,
#   compare-sets cas from "go" to "torch", and prints its num_keys.
import sys
from datetime import timedelta

import torch.distributed as dist

store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=30), wait_for_workers=False)
print(store.port, flush=True)
if sys.argv[1] == "worker":
    w = dist.PrefixStore(sys.argv[2], dist.TCPStore("127.0.0.1", store.port, is_master=False, timeout=timedelta(seconds=30)))
    w.set("from_torch", b"hello from torch")
    print("from_go=" + w.get("from_go").decode(), flush=True)
    print("counter=%d" % w.add("counter", 5), flush=True)
    print("cas=" + w.compare_set("cas", b"go", b"torch").decode(), flush=True)
    w.set("torch_done", b"1")
sys.stdin.read()
