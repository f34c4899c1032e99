// The copies' table of analytics/audit/java/ReplayWindow.java: per range, each (producer, epoch, first
// sequence, last sequence) group's rows so far and its first base offset.
package segaudit;

/**
 * The copies' groups of a range: (state_pid, epoch, base sequence, last sequence), a null a value of
 * its own as in a window group, to the rows seen and the first one's base offset. Open addressing
 * over arrays: a range may hold millions of groups, and an object per group would make each of
 * them garbage the collector copies. Emptied for the next range by a new generation, not a fill.
 */
final class CopyTable implements java.io.Serializable {
  int capacity = 1 << 12, size, generation = 1;
  long[] pids = new long[capacity], sequences = new long[capacity], firsts = new long[capacity];
  short[] epochs = new short[capacity];
  byte[] nulls = new byte[capacity], firstNulls = new byte[capacity];
  int[] rows = new int[capacity], stamps = new int[capacity];

  void clear() {
    size = 0;
    if (++generation == Integer.MAX_VALUE) {
      java.util.Arrays.fill(stamps, 0);
      generation = 1;
    }
  }

  static int hash(long pid, long sequences, short epoch, byte nulls) {
    long h = pid * 0x9E3779B97F4A7C15L ^ sequences * 0xC2B2AE3D27D4EB4FL ^ (epoch * 31L + nulls) * 0x165667B19E3779F9L;
    h ^= h >>> 29;
    h *= 0xBF58476D1CE4E5B9L;
    return (int) (h ^ (h >>> 32));
  }

  /** The group's slot, a new one (no rows) when the range has not seen the key. */
  int slot(long pid, long sequences, short epoch, byte nulls) {
    if (2 * (size + 1) > capacity) {
      grow();
    }
    int at = hash(pid, sequences, epoch, nulls) & (capacity - 1);
    while (stamps[at] == generation) {
      if (pids[at] == pid && this.sequences[at] == sequences && epochs[at] == epoch && this.nulls[at] == nulls) {
        return at;
      }
      at = (at + 1) & (capacity - 1);
    }
    stamps[at] = generation;
    pids[at] = pid;
    this.sequences[at] = sequences;
    epochs[at] = epoch;
    this.nulls[at] = nulls;
    rows[at] = 0;
    size++;
    return at;
  }

  void grow() {
    CopyTable bigger = new CopyTable();
    bigger.capacity = capacity * 2;
    bigger.pids = new long[bigger.capacity];
    bigger.sequences = new long[bigger.capacity];
    bigger.firsts = new long[bigger.capacity];
    bigger.epochs = new short[bigger.capacity];
    bigger.nulls = new byte[bigger.capacity];
    bigger.firstNulls = new byte[bigger.capacity];
    bigger.rows = new int[bigger.capacity];
    bigger.stamps = new int[bigger.capacity];
    for (int i = 0; i < capacity; i++) {
      if (stamps[i] == generation) {
        int at = bigger.slot(pids[i], sequences[i], epochs[i], nulls[i]);
        bigger.rows[at] = rows[i];
        bigger.firsts[at] = firsts[i];
        bigger.firstNulls[at] = firstNulls[i];
      }
    }
    capacity = bigger.capacity;
    size = bigger.size;
    generation = bigger.generation;
    pids = bigger.pids;
    sequences = bigger.sequences;
    firsts = bigger.firsts;
    epochs = bigger.epochs;
    nulls = bigger.nulls;
    firstNulls = bigger.firstNulls;
    rows = bigger.rows;
    stamps = bigger.stamps;
  }
}

