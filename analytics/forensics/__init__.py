"""Post-incident questions over an audit: ``explain`` one offset, a ``producer``'s history, ``sql``.

``explain`` and ``producer`` read the Parquet tables with pyarrow and answer in about a second,
with no Spark session: :mod:`.tables` (the reads, and why they stay small), :mod:`.offset`
(``explain``), :mod:`.producer` (``producer``), :mod:`.transactional` (who a producer id was, from
the coordinator's log), :mod:`.reasoning` (the sentences of an
explanation). ``sql`` is Spark SQL over every table (:mod:`.sql`). Results are small Python values.
"""

from analytics.forensics.offset import BATCH_FIELDS, Explanation, explain
from analytics.forensics.producer import ProducerHistory, producer_history
from analytics.forensics.reasoning import utc
from analytics.forensics.sql import register_views, run_sql
from analytics.forensics.tables import NotFound
from analytics.forensics.transactional import TransactionalIdHistory, transactional_id_history

__all__ = ["BATCH_FIELDS", "Explanation", "NotFound", "ProducerHistory", "explain", "producer_history",
           "register_views", "run_sql", "TransactionalIdHistory", "transactional_id_history", "utc"]
