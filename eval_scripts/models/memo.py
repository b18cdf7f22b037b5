"""Per-clip memo shared by the adapters: derived values that live exactly as long as their clip."""

from __future__ import annotations

import threading
import weakref


class ClipMemo:
    """Values derived from clip arrays, kept exactly as long as each array lives (thread-safe).

    Keyed by the array's identity; a weakref finalizer drops an array's entries when it is
    freed, before its id can be reused. So there is no cache size to tune: round 2 finds
    round 1's clips, and work done ahead by the runner's loader thread is never evicted
    before use. The runner never modifies a clip in place.
    """

    def __init__(self) -> None:
        self._by_clip: dict[int, dict] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_clip)

    def get(self, clip, key):
        """The value stored for (clip, key), or None."""
        known = self._by_clip.get(id(clip))
        return None if known is None else known.get(key)

    def put(self, clip, key, value) -> None:
        """Store a value for (clip, key); objects that cannot be weakly referenced (lists) are not memoised."""
        with self._lock:
            known = self._by_clip.get(id(clip))
            if known is None:
                try:
                    weakref.finalize(clip, self._by_clip.pop, id(clip), None)
                except TypeError:
                    return
                known = self._by_clip[id(clip)] = {}
            known[key] = value
