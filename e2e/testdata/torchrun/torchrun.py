# torchrun for the e2e tests: torch.distributed.run's main, as the torchrun
# command runs it, with one workaround for Debian's torch 1.13 under
# Python 3.11. There Std.from_str("0") returns None, because iterating an
# IntFlag no longer yields its zero member, and to_map(None, n) then fails
# before any worker starts. The workaround belongs here, not in goddp: it
# is torch's bug, and the tests patch nothing else.
import sys

import torch.distributed.elastic.multiprocessing as elastic_mp
import torch.distributed.elastic.multiprocessing.api as elastic_api

_to_map = elastic_api.to_map


def to_map(val_or_map, local_world_size):
    if val_or_map is None:
        val_or_map = elastic_api.Std.NONE
    return _to_map(val_or_map, local_world_size)


elastic_api.to_map = to_map
elastic_mp.to_map = to_map

from torch.distributed.run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
