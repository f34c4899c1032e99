// The replay's window facts in one pass over each offset range, as the broker replays a log: the rows
// of a range in offset order, the partition's running spans, each producer's state in a map and the
// copies in a table of (producer, epoch, first sequence, last sequence). It adds exactly the columns
// analytics/audit/steps.py's window steps add (duplicate_ranges, partition_facts, producer_state,
// running_state, sequence_mark) to rows sorted within each task by (topic, rid, base_offset,
// file_position, file_id) whose histories are each one range with nothing carried in: one sort
// instead of three and no window operator. analytics/audit/rules.py (_in_one_pass) calls it;
// tests/test_replay_pass.py holds it equal to the windows. Values follow SQL: a null input gives the
// null or the default the window expression gives. The same pass also gives, per range and producer,
// the aggregates analytics/audit/carry.py's producer_and_running_ranges takes over the replayed rows
// (the state the audit leaves), at each range's end: no row kept, no aggregate for Spark to sort.
package segaudit;

import java.io.Serializable;
import java.lang.reflect.Constructor;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Ascending$;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.NullsFirst$;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.SpecificInternalRow;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.physical.UnknownPartitioning;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

public final class HistoryReplay {
  static final long SEQ_SPACE = 1L << 31;

  private HistoryReplay() {}

  /** The columns the pass adds, in the order the window steps add them. */
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

  /**
   * The rows of {@code sorted} (sorted by task, rid, base_offset, file_position within each Spark
   * partition, every rid in one partition) with {@link #added()}'s columns. {@code expiryTakes}: the
   * boolean column saying a tracked batch a forgotten producer could send (an expiry point when it
   * comes at least {@code expirationMs} after its producer's previous batch, no transaction open).
   */
  public static Dataset<Row> apply(Dataset<Row> sorted, String expiryTakes, long expirationMs, List<String> sortedBy)
      throws ReflectiveOperationException {
    StructType in = sorted.schema();
    StructType out = in;
    for (var field : added().fields()) {
      out = out.add(field);
    }
    Columns at = new Columns(in, expiryTakes);
    JavaRDD<InternalRow> rows = sorted.queryExecution().toRdd().toJavaRDD();
    JavaRDD<InternalRow> replayed = rows.mapPartitions(it -> new Pass(it, at, expirationMs), true);
    return ordered(sorted.sparkSession(), replayed.rdd(), out, sortedBy);
  }

  /**
   * Per range and stateful producer of {@code sorted} (as {@link #apply} takes it), the aggregates of
   * its replayed rows, as rows of {@code schemaJson}: the history (the column named by its first
   * field), the producer id, then {@link #STATE}. The schema is the one Spark gives the same
   * aggregate (analytics/audit/carry.py), so the two cannot drift apart unnoticed: a field this pass
   * does not fill is an error here.
   */
  public static Dataset<Row> state(Dataset<Row> sorted, String expiryTakes, long expirationMs, String schemaJson)
      throws ReflectiveOperationException {
    StructType out = (StructType) DataType.fromJson(schemaJson);
    List<String> names = new ArrayList<>(List.of(out.fieldNames()));
    if (!names.subList(2, names.size()).equals(STATE) || !"state_pid".equals(names.get(1))) {
      throw new IllegalArgumentException("the producer state's columns are not the pass's: " + names);
    }
    StructType in = sorted.schema();
    Columns at = new Columns(in, expiryTakes);
    int history = in.fieldIndex(names.get(0));
    DataType historyType = in.fields()[history].dataType();
    JavaRDD<InternalRow> rows = sorted.queryExecution().toRdd().toJavaRDD();
    JavaRDD<InternalRow> left = rows.mapPartitions(
        it -> new StatePass(new Pass(it, at, expirationMs), history, historyType), true);
    return ordered(sorted.sparkSession(), left.rdd(), out, new ArrayList<>());
  }

  /** The aggregates {@link #state} gives each producer, in order. */
  static final List<String> STATE = List.of("last", "coordinator_epoch", "txn_data", "marker", "data_seq", "expired",
      "left", "runs", "wraps", "mark");

  /**
   * The rows of {@code rdd} as a Dataset of schema {@code out} whose plan says that each partition's
   * rows are sorted by the columns {@code sortedBy} (ascending, nulls first), as they come: a write
   * partitioned by the first of them then needs no sort of its own. Spark's LogicalRDD takes the
   * ordering; its constructor's later parameters (a stream, the session, statistics) differ between
   * Spark versions, so it is called by their types.
   */
  static Dataset<Row> ordered(SparkSession session, RDD<InternalRow> rdd, StructType out, List<String> sortedBy)
      throws ReflectiveOperationException {
    Seq<AttributeReference> output = DataTypeUtils.toAttributes(out);
    List<AttributeReference> columns = CollectionConverters.asJava(output);
    List<SortOrder> ordering = new ArrayList<>();
    Seq<Expression> none = seq(new ArrayList<Expression>());
    for (String name : sortedBy) {
      ordering.add(new SortOrder(columns.get(out.fieldIndex(name)), Ascending$.MODULE$, NullsFirst$.MODULE$, none));
    }
    Constructor<?> make = LogicalRDD.class.getConstructors()[0];
    Object[] args = new Object[make.getParameterCount()];
    Class<?>[] types = make.getParameterTypes();
    args[0] = output;
    args[1] = rdd;
    args[2] = new UnknownPartitioning(0);
    args[3] = seq(ordering);
    args[4] = false;
    for (int i = 5; i < args.length; i++) {
      args[i] = types[i].isAssignableFrom(SparkSession.class) ? session : Option.empty();
    }
    return Dataset.ofRows(session, (LogicalPlan) make.newInstance(args));
  }

  static <T> Seq<T> seq(List<T> items) {
    return scala.collection.immutable.List$.MODULE$.from(CollectionConverters.asScala(items));
  }

  /** The input columns the pass reads, by position. */
  static final class Columns implements Serializable {
    final int rid, crcValid, base, last, control, transactional, timestamp, epoch, baseSeq, lastSeq;
    final int coordinator, statePid, expiry, position;

    Columns(StructType in, String expiryTakes) {
      rid = in.fieldIndex("rid");
      crcValid = in.fieldIndex("crc_valid");
      base = in.fieldIndex("base_offset");
      last = in.fieldIndex("last_offset");
      control = in.fieldIndex("is_control");
      transactional = in.fieldIndex("is_transactional");
      timestamp = in.fieldIndex("max_timestamp");
      epoch = in.fieldIndex("producer_epoch");
      baseSeq = in.fieldIndex("base_sequence");
      lastSeq = in.fieldIndex("last_sequence");
      coordinator = in.fieldIndex("coordinator_epoch");
      statePid = in.fieldIndex("state_pid");
      expiry = in.fieldIndex(expiryTakes);
      position = in.fieldIndex("file_position");
    }
  }

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

    /** The aggregates of the producer's rows (after the last), as {@link HistoryReplay#STATE} lists them. */
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

  /**
   * The producers' aggregates of each range as the pass leaves them, one row each (the null producer,
   * the rows no producer state tracks, has none), emitted when the next range starts and at the end.
   */
  static final class StatePass implements Iterator<InternalRow> {
    final Pass pass;
    final int history;
    final DataType historyType;
    Object historyValue;
    boolean ended;
    final ArrayDeque<InternalRow> out = new ArrayDeque<>();

    StatePass(Pass pass, int history, DataType historyType) {
      this.pass = pass;
      this.history = history;
      this.historyType = historyType;
    }

    @Override
    public boolean hasNext() {
      while (out.isEmpty() && !ended) {
        if (!pass.rows.hasNext()) {
          ended = true;
          leave();
          break;
        }
        InternalRow row = pass.rows.next();
        if (pass.started && row.getLong(pass.at.rid) != pass.rid) {
          leave();
        }
        pass.step(row);
        historyValue = row.get(history, historyType);
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

    void leave() {
      for (var entry : pass.producers.entrySet()) {
        if (entry.getKey() != null) {
          Object[] aggregates = entry.getValue().state();
          Object[] values = new Object[aggregates.length + 2];
          values[0] = historyValue;
          values[1] = entry.getKey();
          System.arraycopy(aggregates, 0, values, 2, aggregates.length);
          out.add(new GenericInternalRow(values));
        }
      }
    }
  }

  /**
   * The copies' groups of a range: (state_pid, epoch, base sequence, last sequence), a null a value of
   * its own as in a window group, to the rows seen and the first one's base offset. Open addressing
   * over arrays: a range may hold millions of groups, and an object per group would make each of
   * them garbage the collector copies. Emptied for the next range by a new generation, not a fill.
   */
  static final class CopyTable {
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

  static final class Pass implements Iterator<InternalRow> {
    final Iterator<InternalRow> rows;
    final Columns at;
    final long expirationMs;
    long rid = Long.MIN_VALUE;
    boolean started;
    final Spans[] spans = new Spans[3];  // crc_valid false, true, null
    final HashMap<Long, Producer> producers = new HashMap<>();
    final CopyTable copies = new CopyTable();
    // the added columns, refilled each row, and the row out: the consumer copies a row before the next
    final SpecificInternalRow added = new SpecificInternalRow(added());
    final JoinedRow joined = new JoinedRow();

    Pass(Iterator<InternalRow> rows, Columns at, long expirationMs) {
      this.rows = rows;
      this.at = at;
      this.expirationMs = expirationMs;
    }

    @Override
    public boolean hasNext() {
      return rows.hasNext();
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
        started = true;
        rid = r;
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
  }
}
