"""How a receiver learns a feature's content hash after shared-memory transport.

``rehash`` (SHA-256 again on the receiver), ``forwarded`` (the sender's SHA-256 travels
with the pointer: nothing to compute), and the fast whole-pipeline hashes ``xxh3`` and
``blake3``, over features of 1, 16 and 64 MiB. ``setup`` does the sender's side (hash per
the path, copy into a real ``multiprocessing.shared_memory`` segment) and the pickle round
trip that attaches the segment; the timed call is only the receiver's ``receive``.
``peakmem_receive`` is asv's peak RSS of the whole benchmark process (setup included:
feature, segment), so differences between paths are the receiver's extra memory.
"""

from __future__ import annotations

from vlmpath.measure.shm import ShmLedger
from vlmpath.paths.hashing import HASH_PATHS, pickle_round_trip
from vlmpath.suite import cases

from . import _common


@_common.report_failures
class Receive:
    params = (list(cases.HASH_PATH_NAMES), list(cases.HASH_SIZES_MIB))
    param_names = ("path", "size_mib")
    timer = _common.TIMER
    repeat = (6, 10, 10.0)
    rounds = _common.ROUNDS
    number = 1

    def setup(self, path, size_mib):
        self.path = HASH_PATHS[path]
        self.ledger = ShmLedger()
        pointers = self.path.send([cases.hash_feature(size_mib)], self.ledger)
        self.received = pickle_round_trip(pointers)  # attaches, as the scheduler would

    def teardown(self, path, size_mib):
        for p in self.received:
            p.close()
        self.ledger.release()

    def time_receive(self, path, size_mib):
        self.path.receive(self.received)

    def peakmem_receive(self, path, size_mib):
        self.path.receive(self.received)
