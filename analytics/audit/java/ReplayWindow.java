// The replay as a window function on Spark's public API: an Aggregator evaluated over each range's
// rows in offset order (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), its buffer the range's
// state (the partition's spans, each producer's state, the copies' table), its result at each row
// the columns the window steps add (HistoryReplay.added()).
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

public final class ReplayWindow extends Aggregator<Row, ReplayWindow.State, Row> {
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

  final long expirationMs;

  ReplayWindow(long expirationMs) {
    this.expirationMs = expirationMs;
  }

  /** The function over {@code input}'s columns (their types as {@code input} gives them). */
  public static UserDefinedFunction function(StructType input, long expirationMs) {
    return functions.udaf(new ReplayWindow(expirationMs), Encoders.row(input));
  }

  @Override
  public State zero() {
    return new State(expirationMs);
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
  public Row finish(State state) {
    return RowFactory.create(state.out);
  }

  @Override
  public Encoder<State> bufferEncoder() {
    return Encoders.javaSerialization(State.class);
  }

  @Override
  public Encoder<Row> outputEncoder() {
    return Encoders.row(added());
  }

  /** A range's state so far, and the last row's added columns. */
  public static final class State implements java.io.Serializable {
    final long expirationMs;
    final Pass.Spans[] spans = {new Pass.Spans(), new Pass.Spans(), new Pass.Spans()};
    final HashMap<Long, Pass.Producer> producers = new HashMap<>();
    final transient CopyTable copies = new CopyTable();
    final Object[] out = new Object[19];

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
      Pass.Spans s = spans[crcValid == null ? 2 : crcValid ? 1 : 0];
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
      Pass.Producer p = producers.computeIfAbsent(pid, k -> new Pass.Producer());
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
        long step = Pass.pmod((long) lastSeq - prevDataSeq, Pass.SEQ_SPACE);
        if (step > Pass.SEQ_SPACE / 2) {
          step -= Pass.SEQ_SPACE;
        }
        p.wraps += (prevDataSeq + step - lastSeq) / Pass.SEQ_SPACE;
      }
      v[17] = p.wraps;
  
      // sequence_mark: the max over the earlier data rows of (epoch run, sequence on the line, last offset)
      if (p.marked) {
        v[18] = RowFactory.create(p.markRun, p.markSeq, p.markOffset);
      }
      if (Boolean.TRUE.equals(data)) {
        Long seq = lastSeq == null ? null : lastSeq + p.wraps * Pass.SEQ_SPACE;
        int c = !p.marked ? 1 : Pass.compare(epochRun, p.markRun);
        if (c == 0) {
          c = Pass.compare(seq, p.markSeq);
        }
        if (c == 0) {
          c = Pass.compare(last, p.markOffset);
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
      Long position = (Long) row.get(POSITION);
      if (!p.hasLast || Pass.later(base, position, epoch, timestamp, cumHoles, p)) {
        p.hasLast = true;
        p.lastBase = base;
        p.lastPosition = position;
        p.lastEpoch = epoch;
        p.lastTimestamp = timestamp;
        p.lastCumHoles = cumHoles;
      }
      if (Boolean.TRUE.equals(data) && (!p.hasDataSeq || Pass.laterData(base, position, lastSeq, p))) {
        p.hasDataSeq = true;
        p.dataBase = base;
        p.dataPosition = position;
        p.dataSeq = lastSeq;
      }
      if (sequenceLeft != null && (!p.hasLeft || Pass.laterLeft(base, position, sequenceLeft, offsetLeft, p))) {
        p.hasLeft = true;
        p.leftBase = base;
        p.leftPosition = position;
        p.leftSeq = sequenceLeft;
        p.leftOff = offsetLeft;
      }
    }
  }
}
