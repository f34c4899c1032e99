"""Every size threshold of the pipeline, each with the measurement behind it.

A threshold decides how a stage runs (in this process or in Spark, planned once or stage by
stage, held or recomputed, broadcast or shuffled), never what it finds: every verdict and table is
the same on both sides of each line. The plans (:mod:`analytics.export_plan`, :mod:`analytics.audit.audit_plan`) and the modules that do the
work import them from here; a new threshold goes here too, with its measurement
(``docs/benchmarks.md``). Imports nothing of segaudit: every layer may read it.
"""

from __future__ import annotations

MIB = 1024 * 1024

# -- the export ---------------------------------------------------------------------------------

# An export of a local input up to this size runs the data source's tasks in the command's own
# process, without a JVM: starting Spark and its Python workers costs some 10 s, reading 64 MiB of
# segments about half a second (analytics.export_plan.export_plan).
IN_PROCESS_BYTES = 64 * MIB
# Tasks of such an export run at once in that process: a task's writes wait on the store (one
# ``PutObject`` a small file in a bucket, 73 files a table for the bundled sample), not the CPU.
IN_PROCESS_THREADS = 4
# The segment bytes one task of the kafka-segments data source reads, and the fewest tasks it makes
# of a log that has files enough (analytics.spark.source).
DEFAULT_TASK_BYTES = 128 * MIB
DEFAULT_MIN_TASKS = 2
# Threads hashing the edges of segment files for an incremental export's fingerprints (analytics.reuse):
# reads of 64 KiB at both ends of each file, bound by the disk's latency, not the CPU; and reading the
# footers of an export's Parquet files for its row counts (a request or two a file in a bucket).
FINGERPRINT_THREADS = 16

# -- the export of a live cluster ---------------------------------------------------------------

# Offsets of a partition fetched by one task, and the tasks a broker serves at once (analytics.cluster.capture).
DEFAULT_RANGE_OFFSETS = 2_000_000
DEFAULT_PER_BROKER = 2
# The bytes one Fetch asks a broker for (analytics.cluster.fetch).
DEFAULT_FETCH_BYTES = 8 * MIB

# -- the audit ----------------------------------------------------------------------------------

# Batches of a partition's history replayed in one task (analytics.audit.ranges): work, not results;
# every verdict is the same whatever the cut. The audit's plan sizes the ranges from the memory a
# task may use (analytics.audit.audit_plan.range_decision), RANGE_ROW_BYTES a batch: a window buffers a
# whole group (a range), and a 10M-batch audit at Spark's default 1 GiB heap (local mode: 217 MiB of
# execution memory a task on 2 cores) completes with ranges of 250,000 (870 bytes a batch) and fails
# with one window group of 3.3M (docs/benchmarks.md). DEFAULT_RANGE_BATCHES is the smallest range
# the plan gives and the one it gives when the memory is unknown (Spark Connect; a cluster manager
# that does not say its executors' cores). Fewer ranges are fewer passes: 4M batches in 4 histories
# on 2 cores, 89 s in 16 ranges against 76 s in 4 (one a history).
DEFAULT_RANGE_BATCHES = 250_000
RANGE_ROW_BYTES = 1024
# Tiny ranges (a test's) share tasks: a task's fixed cost is worth this many batches.
MIN_TASK_BATCHES = 10_000
# Replayed by the window steps, the replayed rows are held (persisted) for the state from this many
# batches; fewer are checkpointed at once (the sample's audit: 2 s less than replaying them again for
# the state, 7 s less than a persisted plan). The one-pass replay holds no row: it keeps the state
# itself, a row per producer (the verdicts' write 2 to 4 s faster than over held rows at 4M batches).
HOLD_BATCHES = 1_000_000
# The row groups of ``batch_verdicts``, in bytes before compression. A Parquet read skips and splits
# a file at row groups: at Parquet's default 128 MiB, a 4M-batch audit wrote a file of 2.7M rows (two
# partitions' histories) as a group of 2.5M rows and one of 137k, and `segaudit explain` of one
# partition read 2.5M rows (1.0-3.5 s); at 16 MiB (about 280k rows a group) it reads one or two
# groups (0.6-1.1 s), and a scan of the verdicts splits a file evenly between cores
# (docs/benchmarks.md).
VERDICT_ROW_GROUP_BYTES = 16 * MIB
# Carry tables up to this many rows (producers x ranges) are broadcast to the replay's tasks.
BROADCAST_ROWS = 500_000
# An incremental audit of up to this many new batches, when every history continues (its earlier
# verdicts kept as files) and the records (read whole) are as few, reads only small tables: the new
# batches, the state the previous audit left, the records. Its queries are then planned once each,
# as wide as the cores (``single_plan_conf``), not stage by stage (a 10M-batch log with 100k new
# batches: the audit 1.8 s shorter, docs/benchmarks.md). Replicas compared, a history replayed
# whole, or earlier verdicts looked back on, and Spark's own planning takes over
# (analytics.audit.audit_plan.audit_plan).
FEW_BATCHES = 1_000_000

# -- Spark --------------------------------------------------------------------------------------

# A table Spark wrote below this size is read once into one in-memory table for many queries
# (analytics.spark.tables.read_table); a larger one is read where it is used.
SMALL_TABLE_BYTES = 16 * MIB
# Independent Spark actions run at once (analytics.spark.concurrent): each a job of its own, which the
# scheduler interleaves; more threads add no cores.
MAX_THREADS = 4
# A cold JVM auditing a small log spends most of its CPU in HotSpot's optimizing compiler (C2)
# compiling Spark code it then runs a few times (the bundled sample: 41 of 75 JVM CPU-seconds).
# Up to this much input a local session runs the quick compiler (C1) alone, which is done with
# that code sooner (docs/benchmarks.md measures both sides of the line); beyond it, C2 pays back
# (analytics.spark.session.jit_options).
QUICK_START_BYTES = 256 * MIB
# Catalyst generates Java for every operator and expression of a query, which Janino compiles; a cold
# JVM auditing a tiny log spends more time compiling that code than running it (the bundled sample,
# 0.1 MB: the audit 33.5 s with it, 24.8 s without). Up to this much input a new local session
# evaluates interpreted instead: operators one by one, expressions by Spark's interpreted evaluators
# (the path Spark falls back to when generated code fails to compile; Spark's expression tests check
# both). By 4 MiB (30k batches) the two cost the same, at 17 MiB generated code is 15 s faster, and
# an incremental audit, which joins its few new batches with the tables of the whole log, is slower
# interpreted (docs/benchmarks.md; analytics.spark.session.evaluation_conf).
INTERPRETED_BYTES = 1 * MIB
# The share of the machine's memory (physical, or the container's limit when lower) a new local
# session's JVM may take as its heap. Half, not DuckDB's 80%: the heap is not all a local session
# holds. Beside it the same machine runs the JVM's memory outside the heap (metaspace, code cache,
# thread stacks, Netty's and Parquet's direct buffers), the segaudit process, a Python worker per
# core (the export's reader: 8 MiB windows and their Arrow batches) and the OS page cache that every
# Parquet read and spill file goes through. Measured at a 1 GiB heap, the process tree of a local
# audit peaked at 1.7 GiB resident and an export's at 1.3 GiB (docs/benchmarks.md): 0.3-0.7 GiB
# beyond the heap before any page cache, so the other half leaves room for both on any machine large
# enough to be sized at all (analytics.spark.memory).
DRIVER_MEMORY_SHARE = 0.5
# The largest heap given: below 32 GiB HotSpot keeps object references 4 bytes wide (compressed
# oops); a 32 GiB heap holds fewer objects than a 31 GiB one, and a larger share is better left to
# the page cache.
DRIVER_MEMORY_CAP_MIB = 31 * 1024
