"""The interface contract in code: the vocabulary (:mod:`.vocabulary`) and the Arrow schema of every
table (:mod:`.schemas`). The bottom layer: it imports nothing else of segaudit, and everything
that names a verdict, a status, an error kind, a table or a column imports it."""

from analytics.contract import schemas, vocabulary
from analytics.contract.schemas import OUT_SCHEMAS, READ_SCHEMAS
from analytics.contract.vocabulary import *  # noqa: F403 - the vocabulary is the package's namespace

__all__ = ["schemas", "vocabulary", "OUT_SCHEMAS", "READ_SCHEMAS", *[n for n in dir(vocabulary) if n.isupper()],
           "dedup_key_meaning", "log_dir_of", "TopicKind", "topic_kind", "topics_exempt"]
