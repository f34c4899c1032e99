// Aggregates taken of rows as they pass on to a write: per group of key columns, minima, maxima,
// sums, counts and the value at the lowest or highest ordering (Spark's min_by and max_by), each
// task's groups kept as the block of a persisted RDD, the way HistoryReplay keeps the producers'
// state. analytics/audit/tap.py taps the verdicts on their way to their write for the per-file rows
// (analytics/audit/tables.py per_file), which the audit would otherwise aggregate by reading the
// written verdicts again; tests/test_replay_pass.py holds both equal.
package segaudit;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.storage.RDDBlockId;
import org.apache.spark.storage.StorageLevel;
import scala.reflect.ClassTag$;
import scala.jdk.javaapi.CollectionConverters;

public final class FileTap {
  private FileTap() {}

  /**
   * {@code rows} (each Spark partition sorted by {@code sortedBy}) tapped: per group of {@code keys},
   * the aggregate {@code kinds[i]} ("min", "max", "sum", "count", "min_by", "max_by", "count_eq:N") of
   * the integral column {@code values[i]} (none for "count"), "min_by" and "max_by" at the row whose
   * {@code orders[i]} (one or two integral columns, compared in turn; a row whose first is null does
   * not count) is the lowest or the highest, the first such row on a tie, as Spark's; "count_eq:N"
   * the rows whose value is N (0 for none: Spark's sum of a 0-or-1 column), so that several counts
   * read one column.
   */
  public static Tapped tap(Dataset<Row> rows, List<String> keys, List<String> kinds, List<String> values,
      List<List<String>> orders, List<String> sortedBy) {
    return new Tapped(rows, keys, kinds, values, orders, sortedBy);
  }

  /** The tapped rows ({@link #rows(int)}) and what they left ({@link #groups()}). */
  public static final class Tapped {
    final SparkSession session;
    final StructType in, out;
    final List<String> sortedBy;
    final JavaRDD<InternalRow> passed, groups;

    Tapped(Dataset<Row> rows, List<String> keys, List<String> kinds, List<String> values, List<List<String>> orders,
        List<String> sortedBy) {
      session = rows.sparkSession();
      in = rows.schema();
      this.sortedBy = sortedBy;
      Spec spec = new Spec(in, keys, kinds, values, orders);
      StructType schema = new StructType();
      for (String key : keys) {
        schema = schema.add(in.fields()[in.fieldIndex(key)]);
      }
      for (int i = 0; i < kinds.size(); i++) {
        schema = schema.add("a" + i, DataTypes.LongType, true);
      }
      out = schema;
      JavaRDD<InternalRow> source = rows.queryExecution().toRdd().toJavaRDD();
      // a Spark partition whose block is missing (not read through yet, or lost) aggregates its rows again
      groups = source.mapPartitions(it -> {
        Groups g = new Groups(spec);
        while (it.hasNext()) {
          g.add(it.next());
        }
        return g.rows().iterator();
      }, true).setName(KEPT).persist(StorageLevel.MEMORY_AND_DISK());
      int blocks = groups.id();
      passed = source.mapPartitionsWithIndex((index, it) -> new Passing(it, new Groups(spec), blocks, index), true);
    }

    /**
     * The rows as they came, their order declared, as rows of their first {@code width} columns:
     * the columns after them (what only the tap reads) are still in each row, unread, so no
     * projection copies every row to drop them. Spark reads a column of a row at its position in the
     * schema, and each operator over these rows copies or projects what it keeps.
     */
    public Dataset<Row> rows(int width) throws ReflectiveOperationException {
      StructType prefix = new StructType(java.util.Arrays.copyOfRange(in.fields(), 0, width));
      return HistoryReplay.ordered(session, passed.rdd(), prefix, sortedBy);
    }

    /** A row per group: its keys, then each aggregate as a long named a0, a1, ... */
    public Dataset<Row> groups() throws ReflectiveOperationException {
      return HistoryReplay.ordered(session, groups.rdd(), out, new ArrayList<>());
    }

    /** The Spark partitions (tasks) of the rows. */
    public int tasks() {
      return groups.getNumPartitions();
    }

    /** How many of the groups' blocks (one a Spark partition) Spark's block manager holds. */
    public int keptBlocks() {
      return HistoryReplay.heldBlocks(groups);
    }

    /** The groups' blocks dropped, as a held DataFrame's. */
    public void unpersist() {
      groups.unpersist(true);
    }
  }

  /** A task's rows on their way, added to its groups; read through, the groups are kept as the block. */
  static final class Passing implements Iterator<InternalRow> {
    final Iterator<InternalRow> rows;
    final Groups groups;
    final int blocks, index;
    boolean stored;

    Passing(Iterator<InternalRow> rows, Groups groups, int blocks, int index) {
      this.rows = rows;
      this.groups = groups;
      this.blocks = blocks;
      this.index = index;
    }

    @Override
    public boolean hasNext() {
      if (rows.hasNext()) {
        return true;
      }
      if (!stored) {  // read through: the groups are whole
        stored = true;
        SparkEnv.get().blockManager().putIterator(RDDBlockId.apply(blocks, index),
            CollectionConverters.asScala(groups.rows().iterator()), StorageLevel.MEMORY_AND_DISK(), true,
            ClassTag$.MODULE$.apply(InternalRow.class));
      }
      return false;
    }

    @Override
    public InternalRow next() {
      InternalRow row = rows.next();
      groups.add(row);
      return row;
    }
  }

  /** The name of the groups' RDD, as Spark's UI shows it. */
  public static final String KEPT = "segaudit: aggregates kept by a write";

  static final int MIN = 0, MAX = 1, SUM = 2, COUNT = 3, MIN_BY = 4, MAX_BY = 5, COUNT_EQ = 6;
  static final List<String> KINDS = List.of("min", "max", "sum", "count", "min_by", "max_by", "count_eq");

  /** The tap's columns by position, and each aggregate's kind. */
  static final class Spec implements Serializable {
    final StructType in;
    final int[] keys, kinds, values, first, second;
    final long[] equal;
    final DataType[] valueTypes, firstTypes, secondTypes;

    Spec(StructType in, List<String> keys, List<String> kinds, List<String> values, List<List<String>> orders) {
      this.in = in;
      this.keys = keys.stream().mapToInt(in::fieldIndex).toArray();
      int n = kinds.size();
      this.kinds = new int[n];
      this.values = new int[n];
      equal = new long[n];
      first = new int[n];
      second = new int[n];
      valueTypes = new DataType[n];
      firstTypes = new DataType[n];
      secondTypes = new DataType[n];
      for (int i = 0; i < n; i++) {
        String[] kind = kinds.get(i).split(":", 2);  // count_eq:N
        this.kinds[i] = KINDS.indexOf(kind[0]);
        equal[i] = kind.length > 1 ? Long.parseLong(kind[1]) : 0;
        if (this.kinds[i] < 0) {
          throw new IllegalArgumentException("no such aggregate: " + kinds.get(i));
        }
        this.values[i] = values.get(i) == null ? -1 : in.fieldIndex(values.get(i));
        valueTypes[i] = this.values[i] < 0 ? null : in.fields()[this.values[i]].dataType();
        List<String> by = orders.get(i);
        first[i] = by.isEmpty() ? -1 : in.fieldIndex(by.get(0));
        second[i] = by.size() < 2 ? -1 : in.fieldIndex(by.get(1));
        firstTypes[i] = first[i] < 0 ? null : in.fields()[first[i]].dataType();
        secondTypes[i] = second[i] < 0 ? null : in.fields()[second[i]].dataType();
      }
    }

    StructType keySchema() {
      StructType schema = new StructType();
      for (int k : keys) {
        schema = schema.add(in.fields()[k]);
      }
      return schema;
    }
  }

  /** An integral column of a row, not null, as a long. */
  static long integral(InternalRow row, int at, DataType type) {
    if (type == DataTypes.LongType) {
      return row.getLong(at);
    }
    if (type == DataTypes.IntegerType) {
      return row.getInt(at);
    }
    if (type == DataTypes.ShortType) {
      return row.getShort(at);
    }
    if (type == DataTypes.ByteType) {
      return row.getByte(at);
    }
    throw new IllegalArgumentException("not an integral column: " + type);
  }

  /** The groups of one task's rows. */
  static final class Groups {
    final Spec spec;
    final UnsafeProjection key;
    final Map<UnsafeRow, Group> groups = new HashMap<>();

    Groups(Spec spec) {
      this.spec = spec;
      var attributes = new ArrayList<org.apache.spark.sql.catalyst.expressions.Expression>();
      for (int i = 0; i < spec.keys.length; i++) {
        var field = spec.in.fields()[spec.keys[i]];
        attributes.add(new org.apache.spark.sql.catalyst.expressions.BoundReference(spec.keys[i], field.dataType(),
            field.nullable()));
      }
      key = UnsafeProjection.create(HistoryReplay.seq(attributes));
    }

    void add(InternalRow row) {
      UnsafeRow k = key.apply(row);
      Group g = groups.get(k);
      if (g == null) {
        g = new Group(spec.kinds.length);
        groups.put(k.copy(), g);
      }
      g.add(spec, row);
    }

    List<InternalRow> rows() {
      List<InternalRow> out = new ArrayList<>(groups.size());
      int n = spec.keys.length;
      StructType keys = spec.keySchema();
      for (Map.Entry<UnsafeRow, Group> e : groups.entrySet()) {
        Object[] values = new Object[n + spec.kinds.length];
        for (int i = 0; i < n; i++) {
          values[i] = e.getKey().get(i, keys.fields()[i].dataType());
        }
        Group g = e.getValue();
        for (int i = 0; i < spec.kinds.length; i++) {
          values[n + i] = g.has[i] ? g.value[i] : null;
        }
        out.add(new GenericInternalRow(values));
      }
      return out;
    }
  }

  /** A group's aggregates so far (``has``: not null); for min_by and max_by, the value (which may be
   * null) at the extreme ordering so far. */
  static final class Group {
    final long[] value, first, second;
    final boolean[] has, ordered;

    Group(int n) {
      value = new long[n];
      first = new long[n];
      second = new long[n];
      has = new boolean[n];
      ordered = new boolean[n];
    }

    void add(Spec spec, InternalRow row) {
      for (int i = 0; i < spec.kinds.length; i++) {
        int kind = spec.kinds[i];
        if (kind == COUNT) {
          value[i] = has[i] ? value[i] + 1 : 1;
          has[i] = true;
          continue;
        }
        if (kind == MIN_BY || kind == MAX_BY) {
          if (row.isNullAt(spec.first[i])) {
            continue;
          }
          long a = integral(row, spec.first[i], spec.firstTypes[i]);
          // a null second ordering sorts first, as in Spark's ascending order of a struct
          long b = spec.second[i] < 0 || row.isNullAt(spec.second[i]) ? Long.MIN_VALUE
              : integral(row, spec.second[i], spec.secondTypes[i]);
          int c = !ordered[i] ? 0 : a != first[i] ? Long.compare(a, first[i]) : Long.compare(b, second[i]);
          if (!ordered[i] || (kind == MIN_BY ? c < 0 : c > 0)) {
            ordered[i] = true;
            first[i] = a;
            second[i] = b;
            has[i] = !row.isNullAt(spec.values[i]);
            value[i] = has[i] ? integral(row, spec.values[i], spec.valueTypes[i]) : 0;
          }
          continue;
        }
        if (kind == COUNT_EQ) {
          if (!has[i]) {
            value[i] = 0;
            has[i] = true;
          }
          if (!row.isNullAt(spec.values[i]) && integral(row, spec.values[i], spec.valueTypes[i]) == spec.equal[i]) {
            value[i]++;
          }
          continue;
        }
        if (row.isNullAt(spec.values[i])) {
          continue;
        }
        long v = integral(row, spec.values[i], spec.valueTypes[i]);
        if (!has[i]) {
          value[i] = v;
          has[i] = true;
        } else if (kind == MIN) {
          value[i] = Math.min(value[i], v);
        } else if (kind == MAX) {
          value[i] = Math.max(value[i], v);
        } else {
          value[i] += v;
        }
      }
    }
  }
}
