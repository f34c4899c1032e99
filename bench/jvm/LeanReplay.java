// The lean replay's window core as one pass over rows sorted in producer order (topic, partition,
// producer_id, base_offset, file_position): a Java mapPartitions over Rows, for bench/bench_floor.py.
// It computes what lean_replay.py's windows compute (dup_rank, prev_epoch, prev_last_sequence,
// idle_ms, high_water), so its time is the same facts on the same engine without window operators.
import java.util.HashMap;
import java.util.Iterator;

import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

public class LeanReplay {
  public static Dataset<Row> apply(Dataset<Row> sorted) {
    StructType in = sorted.schema();
    StructType out = in.add("dup_rank", DataTypes.IntegerType).add("prev_epoch", DataTypes.ShortType)
        .add("prev_last_sequence", DataTypes.IntegerType).add("idle_ms", DataTypes.LongType)
        .add("high_water", DataTypes.IntegerType);
    final int topicAt = in.fieldIndex("topic"), partitionAt = in.fieldIndex("partition");
    final int producerAt = in.fieldIndex("producer_id"), epochAt = in.fieldIndex("producer_epoch");
    final int baseAt = in.fieldIndex("base_sequence"), lastAt = in.fieldIndex("last_sequence");
    final int timestampAt = in.fieldIndex("max_timestamp");
    final int width = in.size();
    MapPartitionsFunction<Row, Row> replay = rows -> new Iterator<Row>() {
      String topic = null;
      int partition = -1;
      long producer = Long.MIN_VALUE;
      Short prevEpoch = null;
      Integer prevLast = null, highWater = null;
      Long prevTimestamp = null;
      final HashMap<String, Integer> seen = new HashMap<>();

      public boolean hasNext() {
        return rows.hasNext();
      }

      public Row next() {
        Row row = rows.next();
        String t = row.getString(topicAt);
        int p = row.getInt(partitionAt);
        long id = row.getLong(producerAt);
        if (!t.equals(topic) || p != partition || id != producer) {  // the next producer: its state starts empty
          topic = t;
          partition = p;
          producer = id;
          prevEpoch = null;
          prevLast = null;
          highWater = null;
          prevTimestamp = null;
          seen.clear();
        }
        short epoch = row.getShort(epochAt);
        int base = row.getInt(baseAt), last = row.getInt(lastAt);
        long timestamp = row.getLong(timestampAt);
        int rank = seen.merge(epoch + ":" + base + ":" + last, 1, Integer::sum);
        Object[] values = new Object[width + 5];
        for (int i = 0; i < width; i++) {
          values[i] = row.get(i);
        }
        values[width] = rank;
        values[width + 1] = prevEpoch;
        values[width + 2] = prevLast;
        values[width + 3] = prevTimestamp == null ? null : timestamp - prevTimestamp;
        values[width + 4] = highWater;
        prevEpoch = epoch;
        prevLast = last;
        prevTimestamp = timestamp;
        highWater = highWater == null ? last : Math.max(highWater, last);
        return RowFactory.create(values);
      }
    };
    return sorted.mapPartitions(replay, Encoders.row(out));
  }
}
