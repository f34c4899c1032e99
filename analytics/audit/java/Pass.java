// The replay's window facts in one pass over each offset range, as the broker replays a log: the rows
// of a range in offset order, the partition's running spans, each producer's state in a map and the
// copies in a table (CopyTable.java). It adds the columns of HistoryReplay.added() to each row and,
// when asked, leaves at each range's end a row per producer of the aggregates
// analytics/audit/carry.py's producer_and_running_ranges takes over the range's replayed rows.
// Values follow SQL: a null input gives the null or the default the window expression gives.
package segaudit;

import static segaudit.HistoryReplay.added;

import segaudit.HistoryReplay.Columns;

import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.SpecificInternalRow;

final class Pass implements Iterator<InternalRow> {
  static final long SEQ_SPACE = 1L << 31;

  /** A partition's valid (or corrupt) batches so far: by partition_facts' window. */
  static final class Spans {
    long span;  // the offsets the earlier batches span (their sum; 0 for none)
    Long top;  // their highest last offset
    boolean started;
    Long first;  // the first batch's base offset
  }

  /** A producer's batches so far in the range: by the producer windows. */
  static final class Producer {
    boolean seen;
    Short prevEpoch;
    Long prevTimestamp, prevBase, prevCumHoles;
    Integer coordinator, prevDataSeq, stateSeq;
    Long lastTxnData, lastMarker, expired, stateOff;
    long runs;
    boolean anyRun;
    long wraps;
    boolean marked;
    Long markRun, markSeq, markOffset;
    // the aggregates of carry.producer_and_running_ranges not kept above: the latest row (by base
    // offset, file position, then the struct's other fields, as Spark's max of the struct), the
    // latest data row's last sequence, the latest row that left a sequence
    boolean hasLast, hasDataSeq, hasLeft;
    Long lastBase, lastPosition, lastTimestamp, lastCumHoles, dataBase, dataPosition, leftBase, leftPosition, leftOff;
    Short lastEpoch;
    Integer dataSeq, leftSeq;

    /** The aggregates of the producer's rows (after its last), as {@link HistoryReplay#STATE} lists them. */
    Object[] state() {
      return new Object[] {
          hasLast ? new GenericInternalRow(new Object[] {lastBase, lastPosition, lastEpoch, lastTimestamp, lastCumHoles}) : null,
          coordinator, lastTxnData, lastMarker,
          hasDataSeq ? new GenericInternalRow(new Object[] {dataBase, dataPosition, dataSeq}) : null,
          expired,
          hasLeft ? new GenericInternalRow(new Object[] {leftBase, leftPosition, leftSeq, leftOff}) : null,
          runs, wraps,
          marked ? new GenericInternalRow(new Object[] {markRun, markSeq, markOffset}) : null};
    }
  }

  final Iterator<InternalRow> rows;
  final Columns at;
  final long expirationMs;
  // where each range's producers go at its end, as rows of the state (null: not kept), and what is
  // done once the rows are all read (null: nothing)
  final Collection<InternalRow> left;
  final Runnable whenDone;
  long rid = Long.MIN_VALUE;
  Object history;
  boolean started, done;
  final Spans[] spans = new Spans[3];  // crc_valid false, true, null
  final HashMap<Long, Producer> producers = new HashMap<>();
  final CopyTable copies = new CopyTable();
  // the added columns, refilled each row, and the row out: the consumer copies a row before the next
  final SpecificInternalRow added = new SpecificInternalRow(added());
  final JoinedRow joined = new JoinedRow();

  Pass(Iterator<InternalRow> rows, Columns at, long expirationMs, Collection<InternalRow> left, Runnable whenDone) {
    this.rows = rows;
    this.at = at;
    this.expirationMs = expirationMs;
    this.left = left;
    this.whenDone = whenDone;
  }

  @Override
  public boolean hasNext() {
    if (rows.hasNext()) {
      return true;
    }
    if (!done) {  // the last range ends
      done = true;
      leave();
      if (whenDone != null) {
        whenDone.run();
      }
    }
    return false;
  }

  /** The range's producers as rows of the state (the null producer, rows no state tracks, has none). */
  void leave() {
    if (left == null || !started) {
      return;
    }
    for (var entry : producers.entrySet()) {
      if (entry.getKey() != null) {
        Object[] aggregates = entry.getValue().state();
        Object[] values = new Object[aggregates.length + 2];
        values[0] = history;
        values[1] = entry.getKey();
        System.arraycopy(aggregates, 0, values, 2, aggregates.length);
        left.add(new GenericInternalRow(values));
      }
    }
  }

  static Long getLong(InternalRow row, int i) {
    return row.isNullAt(i) ? null : row.getLong(i);
  }

  static Integer getInt(InternalRow row, int i) {
    return row.isNullAt(i) ? null : row.getInt(i);
  }

  static Boolean getBoolean(InternalRow row, int i) {
    return row.isNullAt(i) ? null : row.getBoolean(i);
  }

  static long pmod(long a, long n) {
    long r = a % n;
    return r < 0 ? r + n : r;
  }

  /** Struct order as Spark's max takes it: field by field, null first. */
  static int compare(Long a, Long b) {
    if (a == null || b == null) {
      return a == null ? (b == null ? 0 : -1) : 1;
    }
    return Long.compare(a, b);
  }

  @Override
  public InternalRow next() {
    InternalRow row = rows.next();
    Object[] v = step(row);
    for (int i = 0; i < v.length; i++) {
      added.update(i, v[i]);
    }
    return joined.apply(row, added);
  }

  /** The row's added columns; the state it leaves kept for the rows after it. */
  Object[] step(InternalRow row) {
    long r = row.getLong(at.rid);
    if (!started || r != rid) {  // a new range: every state starts empty
      leave();
      started = true;
      rid = r;
      history = row.get(at.history, at.historyType);
      spans[0] = new Spans();
      spans[1] = new Spans();
      spans[2] = new Spans();
      producers.clear();
      copies.clear();
    }
    Boolean crcValid = getBoolean(row, at.crcValid);
    Long base = getLong(row, at.base), last = getLong(row, at.last);
    Boolean control = getBoolean(row, at.control), transactional = getBoolean(row, at.transactional);
    Boolean data = control == null ? null : !control;
    Long timestamp = getLong(row, at.timestamp);
    Short epoch = row.isNullAt(at.epoch) ? null : row.getShort(at.epoch);
    Integer baseSeq = getInt(row, at.baseSeq), lastSeq = getInt(row, at.lastSeq);
    Integer coordinator = getInt(row, at.coordinator);
    Long pid = getLong(row, at.statePid);
    Boolean expiryTakes = getBoolean(row, at.expiry);
    Object[] v = new Object[19];

    // duplicate_ranges: the row's rank in its copies' group and the group's first base offset
    byte nulls = (byte) ((pid == null ? 1 : 0) | (epoch == null ? 2 : 0) | (baseSeq == null ? 4 : 0)
        | (lastSeq == null ? 8 : 0));
    long sequences = ((long) (baseSeq == null ? 0 : baseSeq) << 32) | ((lastSeq == null ? 0 : lastSeq) & 0xFFFFFFFFL);
    int group = copies.slot(pid == null ? 0 : pid, sequences, epoch == null ? 0 : epoch, nulls);
    if (copies.rows[group]++ == 0) {
      copies.firsts[group] = base == null ? 0 : base;
      copies.firstNulls[group] = (byte) (base == null ? 1 : 0);
    }
    if (Boolean.TRUE.equals(data)) {
      v[0] = copies.rows[group];
      v[1] = copies.firstNulls[group] != 0 ? null : copies.firsts[group];
    }

    // partition_facts
    Spans s = spans[crcValid == null ? 2 : crcValid ? 1 : 0];
    Long cumHoles = base == null ? null : base - s.span;
    if (!s.started) {
      s.started = true;
      s.first = base;
    }
    v[2] = cumHoles;
    v[3] = s.first;
    if (Boolean.TRUE.equals(crcValid)) {
      long overlap = s.top != null && base != null ? s.top - base + 1 : 0;
      v[4] = Math.max(overlap, 0L);
    }
    if (base != null && last != null) {
      s.span += last - base + 1;
    }
    if (last != null && (s.top == null || last > s.top)) {
      s.top = last;
    }

    // producer_state: the previous row of the producer, and the latest of some over its earlier rows
    Producer p = producers.computeIfAbsent(pid, k -> new Producer());
    Short prevEpoch = p.seen ? p.prevEpoch : null;
    Long prevTimestamp = p.seen ? p.prevTimestamp : null;
    Long prevCumHoles = p.seen ? p.prevCumHoles : null;
    v[5] = prevEpoch;
    v[6] = prevTimestamp;
    v[7] = p.seen ? p.prevBase : null;
    v[8] = cumHoles == null || prevCumHoles == null ? null : cumHoles - prevCumHoles;
    v[9] = p.coordinator;
    Long lastTxnData = p.lastTxnData, lastMarker = p.lastMarker;
    Integer prevDataSeq = p.prevDataSeq;
    v[10] = lastTxnData;
    v[11] = lastMarker;
    v[12] = prevDataSeq;

    // running_state
    Boolean epochChanged = prevEpoch == null ? Boolean.TRUE : epoch == null ? null : !epoch.equals(prevEpoch);
    Long idle = timestamp == null || prevTimestamp == null ? null : timestamp - prevTimestamp;
    boolean txnOpen = lastTxnData != null && (lastMarker == null || lastTxnData > lastMarker);
    if (Boolean.TRUE.equals(expiryTakes) && idle != null && idle >= expirationMs && !txnOpen && base != null) {
      p.expired = base;
    }
    v[13] = p.expired;
    Integer sequenceLeft = null;
    Long offsetLeft = null;
    if (Boolean.TRUE.equals(data)) {
      sequenceLeft = lastSeq;
      offsetLeft = last;
    } else if (Boolean.TRUE.equals(epochChanged)) {
      sequenceLeft = -1;
      offsetLeft = -1L;
    }
    v[14] = p.stateSeq;
    v[15] = p.stateOff;
    if (sequenceLeft != null) {
      p.stateSeq = sequenceLeft;
    }
    if (offsetLeft != null) {
      p.stateOff = offsetLeft;
    }
    if (epochChanged != null) {
      p.anyRun = true;
      p.runs += epochChanged ? 1 : 0;
    }
    Long epochRun = p.anyRun ? p.runs : null;
    v[16] = epochRun;
    if (Boolean.TRUE.equals(data) && prevDataSeq != null && lastSeq != null) {
      long step = pmod((long) lastSeq - prevDataSeq, SEQ_SPACE);
      if (step > SEQ_SPACE / 2) {
        step -= SEQ_SPACE;
      }
      p.wraps += (prevDataSeq + step - lastSeq) / SEQ_SPACE;
    }
    v[17] = p.wraps;

    // sequence_mark: the max over the earlier data rows of (epoch run, sequence on the line, last offset)
    if (p.marked) {
      v[18] = new GenericInternalRow(new Object[] {p.markRun, p.markSeq, p.markOffset});
    }
    if (Boolean.TRUE.equals(data)) {
      Long seq = lastSeq == null ? null : lastSeq + p.wraps * SEQ_SPACE;
      int c = !p.marked ? 1 : compare(epochRun, p.markRun);
      if (c == 0) {
        c = compare(seq, p.markSeq);
      }
      if (c == 0) {
        c = compare(last, p.markOffset);
      }
      if (c > 0) {
        p.marked = true;
        p.markRun = epochRun;
        p.markSeq = seq;
        p.markOffset = last;
      }
    }

    // what this row leaves for the producer's next
    p.seen = true;
    p.prevEpoch = epoch;
    p.prevTimestamp = timestamp;
    p.prevBase = base;
    p.prevCumHoles = cumHoles;
    if (coordinator != null && (p.coordinator == null || coordinator > p.coordinator)) {
      p.coordinator = coordinator;
    }
    if (Boolean.TRUE.equals(data) && Boolean.TRUE.equals(transactional) && base != null) {
      p.lastTxnData = base;
    }
    if (Boolean.TRUE.equals(control) && base != null) {
      p.lastMarker = base;
    }
    if (Boolean.TRUE.equals(data) && lastSeq != null) {
      p.prevDataSeq = lastSeq;
    }
    Long position = getLong(row, at.position);
    if (!p.hasLast || later(base, position, epoch, timestamp, cumHoles, p)) {
      p.hasLast = true;
      p.lastBase = base;
      p.lastPosition = position;
      p.lastEpoch = epoch;
      p.lastTimestamp = timestamp;
      p.lastCumHoles = cumHoles;
    }
    if (Boolean.TRUE.equals(data) && (!p.hasDataSeq || laterData(base, position, lastSeq, p))) {
      p.hasDataSeq = true;
      p.dataBase = base;
      p.dataPosition = position;
      p.dataSeq = lastSeq;
    }
    if (sequenceLeft != null && (!p.hasLeft || laterLeft(base, position, sequenceLeft, offsetLeft, p))) {
      p.hasLeft = true;
      p.leftBase = base;
      p.leftPosition = position;
      p.leftSeq = sequenceLeft;
      p.leftOff = offsetLeft;
    }
    return v;
  }

  static int compare(Short a, Short b) {
    return compare(a == null ? null : (long) a, b == null ? null : (long) b);
  }

  static int compare(Integer a, Integer b) {
    return compare(a == null ? null : (long) a, b == null ? null : (long) b);
  }

  /** The row's (base, position, epoch, timestamp, cum_holes) above the producer's latest, as Spark's max orders structs. */
  static boolean later(Long base, Long position, Short epoch, Long timestamp, Long cumHoles, Producer p) {
    int c = compare(base, p.lastBase);
    c = c != 0 ? c : compare(position, p.lastPosition);
    c = c != 0 ? c : compare(epoch, p.lastEpoch);
    c = c != 0 ? c : compare(timestamp, p.lastTimestamp);
    c = c != 0 ? c : compare(cumHoles, p.lastCumHoles);
    return c > 0;
  }

  static boolean laterData(Long base, Long position, Integer seq, Producer p) {
    int c = compare(base, p.dataBase);
    c = c != 0 ? c : compare(position, p.dataPosition);
    c = c != 0 ? c : compare(seq, p.dataSeq);
    return c > 0;
  }

  static boolean laterLeft(Long base, Long position, Integer seq, Long off, Producer p) {
    int c = compare(base, p.leftBase);
    c = c != 0 ? c : compare(position, p.leftPosition);
    c = c != 0 ? c : compare(seq, p.leftSeq);
    c = c != 0 ? c : compare(off, p.leftOff);
    return c > 0;
  }

  /** The rows of the state alone: each range's producers at its end, the replayed rows dropped. */
  static final class Left implements Iterator<InternalRow> {
    final java.util.ArrayDeque<InternalRow> out = new java.util.ArrayDeque<>();
    final Pass pass;

    Left(Iterator<InternalRow> rows, Columns at, long expirationMs) {
      pass = new Pass(rows, at, expirationMs, out, null);
    }

    @Override
    public boolean hasNext() {
      while (out.isEmpty() && pass.hasNext()) {
        pass.step(pass.rows.next());
      }
      return !out.isEmpty();
    }

    @Override
    public InternalRow next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException();
      }
      return out.poll();
    }
  }
}
