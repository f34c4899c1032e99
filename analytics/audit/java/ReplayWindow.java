// The replay of each offset range as a window function on Spark's public API: an Aggregator
// evaluated over the range's rows in offset order, from the first to the current (ROWS BETWEEN
// UNBOUNDED PRECEDING AND CURRENT ROW), as the broker replays a log. Its buffer is the range's state:
// the partition's running spans, each producer's state in a map and the copies in a table
// (CopyTable.java); its result at each row, the columns analytics/audit/steps.py's window steps
// (duplicate_ranges, partition_facts, producer_state, running_state, sequence_mark) add, with the
// same values: one sort where those steps sort three times. Values follow SQL: a null input gives the
// null or the default the window expression gives. analytics/audit/rules.py (_in_window_function)
// calls it; tests/test_replay_pass.py holds both equal.
package segaudit;

import java.util.HashMap;
import java.util.List;

import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.expressions.Aggregator;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

public final class ReplayWindow {
  private ReplayWindow() {}

  /** The input columns, in the order the function takes them. */
  public static final List<String> INPUT = List.of("crc_valid", "base_offset", "last_offset", "is_control",
      "is_transactional", "max_timestamp", "producer_epoch", "base_sequence", "last_sequence", "coordinator_epoch",
      "state_pid", "expiry_candidate", "file_position");
  static final int CRC_VALID = 0, BASE = 1, LAST = 2, CONTROL = 3, TRANSACTIONAL = 4, TIMESTAMP = 5, EPOCH = 6,
      BASE_SEQ = 7, LAST_SEQ = 8, COORDINATOR = 9, STATE_PID = 10, EXPIRY = 11, POSITION = 12;

  /** The columns the replay adds, in the order the window steps add them. */
  public static StructType added() {
    StructType mark = new StructType().add("run", DataTypes.LongType).add("seq", DataTypes.LongType)
        .add("offset", DataTypes.LongType);
    return new StructType()
        .add("dup_rank", DataTypes.IntegerType).add("dup_original", DataTypes.LongType)
        .add("cum_holes", DataTypes.LongType).add("partition_first_offset", DataTypes.LongType)
        .add("offset_overlap", DataTypes.LongType).add("prev_epoch", DataTypes.ShortType)
        .add("prev_max_timestamp", DataTypes.LongType).add("prev_base_offset", DataTypes.LongType)
        .add("offset_holes", DataTypes.LongType).add("prev_coordinator_epoch", DataTypes.IntegerType)
        .add("last_txn_data", DataTypes.LongType).add("last_marker", DataTypes.LongType)
        .add("prev_data_seq", DataTypes.IntegerType).add("expired_offset", DataTypes.LongType)
        .add("state_last_seq", DataTypes.IntegerType).add("state_last_off", DataTypes.LongType)
        .add("epoch_run", DataTypes.LongType).add("seq_wraps", DataTypes.LongType, false)
        .add("mark", mark);
  }

  static final long SEQ_SPACE = 1L << 31;

  /** A partition's valid (or corrupt) batches so far: by partition_facts' window. */
  static final class Spans implements java.io.Serializable {
    long span;  // the offsets the earlier batches span (their sum; 0 for none)
    Long top;  // their highest last offset
    boolean started;
    Long first;  // the first batch's base offset
  }

  /** A producer's batches so far in the range: by the producer windows. */
  static final class Producer implements java.io.Serializable {
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
    // the aggregates of carry.producer_and_running_ranges not kept above (kept by Left only): the
    // latest row (by base offset, file position, then the struct's other fields, as Spark's max of
    // the struct), the latest data row's last sequence, the latest row that left a sequence
    boolean hasLast, hasDataSeq, hasLeft;
    Long lastBase, lastPosition, lastTimestamp, lastCumHoles, dataBase, dataPosition, leftBase, leftPosition, leftOff;
    Short lastEpoch;
    Integer dataSeq, leftSeq;

    /** The state's row (pid first, then the aggregates in {@link #STATE}'s order). */
    Row state(long pid) {
      return RowFactory.create(pid,
          hasLast ? RowFactory.create(lastBase, lastPosition, lastEpoch, lastTimestamp, lastCumHoles) : null,
          coordinator, lastTxnData, lastMarker,
          hasDataSeq ? RowFactory.create(dataBase, dataPosition, dataSeq) : null,
          expired,
          hasLeft ? RowFactory.create(leftBase, leftPosition, leftSeq, leftOff) : null,
          runs, wraps,
          marked ? RowFactory.create(markRun, markSeq, markOffset) : null);
    }
  }

  /** The columns of a producer's state as {@link Left} gives them, in order. */
  static final List<String> STATE = List.of("state_pid", "last", "coordinator_epoch", "txn_data", "marker",
      "data_seq", "expired", "left", "runs", "wraps", "mark");

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

  /**
   * The replay of a range's rows in offset order, as an aggregate Spark evaluates over a window
   * frame: its buffer the range's state ({@link State}), never merged (a window feeds its rows in
   * order, to one buffer). {@link Rows} and {@link Left} differ in what they give.
   */
  abstract static class Sweep extends Aggregator<Row, State, Row> {
    final long expirationMs;
    final boolean keep;
    final StructType out;

    Sweep(long expirationMs, boolean keep, StructType out) {
      this.expirationMs = expirationMs;
      this.keep = keep;
      this.out = out;
    }

    @Override
    public State zero() {
      State state = new State(expirationMs);
      state.keep = keep;
      return state;
    }

    @Override
    public State reduce(State state, Row row) {
      state.step(row);
      return state;
    }

    @Override
    public State merge(State a, State b) {
      throw new UnsupportedOperationException("the replay is a window function over rows in offset order");
    }

    @Override
    public Encoder<State> bufferEncoder() {
      return Encoders.javaSerialization(State.class);
    }

    @Override
    public Encoder<Row> outputEncoder() {
      return Encoders.row(out);
    }
  }

  /**
   * The replay's columns at each row ({@link #added()}), as a window function over the range's rows
   * from the first to the current (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW).
   */
  static final class Rows extends Sweep {
    Rows(long expirationMs) {
      super(expirationMs, false, added());
    }

    @Override
    public Row finish(State state) {
      return RowFactory.create(state.out);
    }
  }

  /**
   * The state each producer leaves at a range's end, as a window function over the range's rows in
   * offset order, from the first to the last (ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED
   * FOLLOWING): the same replay, whose result is the array of the range's stateful producers' rows
   * of the aggregates analytics/audit/carry.py's producer_and_running_ranges takes, its element
   * type {@code state} (the schema Spark gives that aggregate, so the two cannot drift apart
   * unnoticed: a column this replay does not fill is an error).
   */
  static final class Left extends Sweep {
    Left(long expirationMs, StructType state) {
      super(expirationMs, true, new StructType().add("producers", DataTypes.createArrayType(checked(state), false)));
    }

    static StructType checked(StructType state) {
      if (!List.of(state.fieldNames()).equals(STATE)) {
        throw new IllegalArgumentException("the producer state's columns are not the replay's: "
            + List.of(state.fieldNames()));
      }
      return state;
    }

    @Override
    public Row finish(State state) {
      List<Row> rows = new java.util.ArrayList<>();
      for (var entry : state.producers.entrySet()) {
        if (entry.getKey() != null) {  // the null producer, rows no state tracks, has none
          rows.add(entry.getValue().state(entry.getKey()));
        }
      }
      return RowFactory.create((Object) rows.toArray(new Row[0]));
    }
  }

  /** The replay's function ({@link Rows}) over {@code input}'s columns (their types as {@code input} gives them). */
  public static UserDefinedFunction function(StructType input, long expirationMs) {
    return functions.udaf(new Rows(expirationMs), Encoders.row(input));
  }

  /** The state function ({@link Left}) over {@code input}'s columns, its rows of type {@code state}. */
  public static UserDefinedFunction left(StructType input, long expirationMs, StructType state) {
    return functions.udaf(new Left(expirationMs, state), Encoders.row(input));
  }

  /** A range's state so far, and the last row's added columns. */
  public static final class State implements java.io.Serializable {
    final long expirationMs;
    final Spans[] spans = {new Spans(), new Spans(), new Spans()};
    final HashMap<Long, Producer> producers = new HashMap<>();
    final CopyTable copies = new CopyTable();
    final Object[] out = new Object[19];
    boolean keep;  // keep the aggregates of the state each producer leaves (Left)

    State(long expirationMs) {
      this.expirationMs = expirationMs;
    }

    /** The row's added columns; the state it leaves kept for the rows after it. */
    void step(Row row) {
      Boolean crcValid = (Boolean) row.get(CRC_VALID);
      Long base = (Long) row.get(BASE), last = (Long) row.get(LAST);
      Boolean control = (Boolean) row.get(CONTROL), transactional = (Boolean) row.get(TRANSACTIONAL);
      Boolean data = control == null ? null : !control;
      Long timestamp = (Long) row.get(TIMESTAMP);
      Short epoch = (Short) row.get(EPOCH);
      Integer baseSeq = (Integer) row.get(BASE_SEQ), lastSeq = (Integer) row.get(LAST_SEQ);
      Integer coordinator = (Integer) row.get(COORDINATOR);
      Long pid = (Long) row.get(STATE_PID);
      Boolean expiryTakes = (Boolean) row.get(EXPIRY);
      Object[] v = out;
      java.util.Arrays.fill(v, null);

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
        v[18] = RowFactory.create(p.markRun, p.markSeq, p.markOffset);
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
      if (keep) {
        keep(p, base, (Long) row.get(POSITION), epoch, timestamp, cumHoles, data, lastSeq, sequenceLeft, offsetLeft);
      }
    }

    static void keep(Producer p, Long base, Long position, Short epoch, Long timestamp, Long cumHoles, Boolean data,
        Integer lastSeq, Integer sequenceLeft, Long offsetLeft) {
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
    }
  }
}
