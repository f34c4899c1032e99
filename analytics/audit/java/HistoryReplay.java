// The replay of histories each in one offset range by one pass in Java (Pass.java) over Spark's
// internal rows, sorted within each task by (topic, rid, base_offset, file_position, file_id): one
// sort where analytics/audit/steps.py's window steps (duplicate_ranges, partition_facts,
// producer_state, running_state, sequence_mark) sort three times, and no window operator. The rows
// come out with exactly the columns those steps add, and the producers' state per range with the
// aggregates analytics/audit/carry.py's producer_and_running_ranges takes. analytics/audit/rules.py
// (_in_one_pass) calls it; tests/test_replay_pass.py holds both equal to Spark's.
package segaudit;

import java.io.Serializable;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Ascending$;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NullsFirst$;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.physical.UnknownPartitioning;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.storage.RDDBlockId;
import org.apache.spark.storage.StorageLevel;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.reflect.ClassTag$;
import scala.jdk.javaapi.CollectionConverters;

public final class HistoryReplay {
  private HistoryReplay() {}

  /** The columns the pass adds, in the order the window steps add them (ReplayWindow's). */
  public static StructType added() {
    return ReplayWindow.added();
  }

  /**
   * The replay of {@code sorted} (sorted by topic, rid, base_offset, file_position within each Spark
   * partition, every rid in one partition, as {@code sortedBy} says). {@code expiryTakes}: the
   * boolean column saying a tracked batch a forgotten producer could send (an expiry point when it
   * comes at least {@code expirationMs} after its producer's previous batch, no transaction open).
   * {@code keep}: the pass over the rows also keeps the state it leaves, so that the state does not
   * replay again once the rows were read through.
   */
  public static Replayed replay(Dataset<Row> sorted, String expiryTakes, long expirationMs, List<String> sortedBy,
      boolean keep) {
    return new Replayed(sorted, expiryTakes, expirationMs, sortedBy, keep);
  }

  /**
   * A replay's two results over the same rows (the RDD of {@code sorted}'s plan, so one exchange):
   * {@link #rows()} and {@link #producers(String)}. Kept, the producers' state of each Spark
   * partition is stored as the block of the state's RDD (persisted) by the task that read that
   * partition's rows through to the end, the way Spark's cache stores a block, and a later job reads
   * it from there; a partition without its block (not read through yet, or lost) replays again.
   * {@link #unpersist()} drops the blocks.
   */
  public static final class Replayed {
    final SparkSession session;
    final StructType in;
    final List<String> sortedBy;
    final JavaRDD<InternalRow> replayed, left;

    Replayed(Dataset<Row> sorted, String expiryTakes, long expirationMs, List<String> sortedBy, boolean keep) {
      session = sorted.sparkSession();
      in = sorted.schema();
      this.sortedBy = sortedBy;
      Columns at = new Columns(in, expiryTakes);
      JavaRDD<InternalRow> rows = sorted.queryExecution().toRdd().toJavaRDD();
      left = rows.mapPartitions(it -> new Pass.Left(it, at, expirationMs), true);
      if (!keep) {
        replayed = rows.mapPartitions(it -> new Pass(it, at, expirationMs, null, null), true);
        return;
      }
      left.setName(KEPT).persist(StorageLevel.MEMORY_AND_DISK());
      int blocks = left.id();
      replayed = rows.mapPartitionsWithIndex((index, it) -> {
        List<InternalRow> state = new ArrayList<>();
        Runnable store = () -> SparkEnv.get().blockManager().putIterator(RDDBlockId.apply(blocks, index),
            CollectionConverters.asScala(state.iterator()), StorageLevel.MEMORY_AND_DISK(), true,
            ClassTag$.MODULE$.apply(InternalRow.class));
        return new Pass(it, at, expirationMs, state, store);
      }, true);
    }

    /** The rows with {@link #added()}'s columns, in their order. */
    public Dataset<Row> rows() throws ReflectiveOperationException {
      StructType out = in;
      for (var field : added().fields()) {
        out = out.add(field);
      }
      return ordered(session, replayed.rdd(), out, sortedBy);
    }

    /**
     * Per range and stateful producer, the aggregates of its replayed rows, as rows of {@code
     * schemaJson}: the history, the producer id, then what analytics/audit/carry.py's
     * producer_and_running_ranges aggregates ({@link #STATE}). The schema is the one Spark gives that
     * aggregate, so the two cannot drift apart unnoticed: a column this pass does not fill is an error.
     */
    public Dataset<Row> producers(String schemaJson) throws ReflectiveOperationException {
      StructType out = (StructType) DataType.fromJson(schemaJson);
      List<String> names = List.of(out.fieldNames());
      if (!names.equals(STATE)) {
        throw new IllegalArgumentException("the producer state's columns are not the pass's: " + names);
      }
      return ordered(session, left.rdd(), out, new ArrayList<>());
    }

    /** The Spark partitions (tasks) of the replay. */
    public int tasks() {
      return left.getNumPartitions();
    }

    /** How many of the kept state's blocks (one a Spark partition) Spark's block manager holds. */
    public int keptBlocks() {
      return heldBlocks(left);
    }

    /** The kept state's blocks dropped (at once: the caller's next job finds the memory free); named
     * as a held DataFrame's, for the caller that releases both alike. */
    public void unpersist() {
      left.unpersist(true);
    }
  }

  /** How many blocks of {@code rdd} (one a Spark partition) Spark's block manager holds. */
  static int heldBlocks(JavaRDD<?> rdd) {
    var master = SparkEnv.get().blockManager().master();
    int held = 0;
    for (int i = 0; i < rdd.getNumPartitions(); i++) {
      held += CollectionConverters.asJava(master.getLocations(RDDBlockId.apply(rdd.id(), i))).isEmpty() ? 0 : 1;
    }
    return held;
  }

  /** The name of the kept state's RDD, as Spark's UI shows it. */
  public static final String KEPT = "segaudit: producer state kept by the replay";

  /** The columns of {@link Replayed#producers}, in order. */
  static final List<String> STATE = List.of("history", "state_pid", "last", "coordinator_epoch", "txn_data", "marker",
      "data_seq", "expired", "left", "runs", "wraps", "mark");

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
      Method fallback = types[i].isAssignableFrom(SparkSession.class) ? null : parameterDefault(i + 1);
      if (fallback != null) {  // the value Scala gives a parameter left out (4.3's fromCheckpoint: false)
        args[i] = fallback.invoke(null, Arrays.copyOf(args, fallback.getParameterCount()));
      } else {  // a parameter with no default that is no session: refused here, and the audit falls back
        args[i] = types[i].isAssignableFrom(SparkSession.class) ? session : Option.empty();
      }
    }
    return Dataset.ofRows(session, (LogicalPlan) make.newInstance(args));
  }

  /** The static method in which Scala keeps the default of LogicalRDD's {@code n}th parameter (1-based), or null. */
  static Method parameterDefault(int n) {
    for (Method m : LogicalRDD.class.getMethods()) {
      if (m.getName().equals("$lessinit$greater$default$" + n) && Modifier.isStatic(m.getModifiers())) {
        return m;
      }
    }
    return null;
  }

  static <T> Seq<T> seq(List<T> items) {
    return scala.collection.immutable.List$.MODULE$.from(CollectionConverters.asScala(items));
  }

  /** The input columns the pass reads, by position. */
  static final class Columns implements Serializable {
    final int rid, crcValid, base, last, control, transactional, timestamp, epoch, baseSeq, lastSeq;
    final int coordinator, statePid, expiry, position, history;
    final DataType historyType;

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
      history = in.fieldIndex("history");
      historyType = in.fields()[history].dataType();
    }
  }
}
