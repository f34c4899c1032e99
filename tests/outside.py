"""Outside readers of OUT's Delta tables, as a user's own tools open them: DuckDB (``delta_scan``, its
``delta`` and ``httpfs`` extensions from PyPI) and ``deltalake``, locally and in a bucket, with the
standard AWS environment."""

from __future__ import annotations

import os
from urllib.parse import urlparse


def duckdb_connection():
    """DuckDB with its ``delta`` and ``httpfs`` extensions loaded and, when ``AWS_ENDPOINT_URL`` names an
    S3 server, a secret for it (path-style, from the environment's keys)."""
    import duckdb
    import duckdb_ext

    con = duckdb.connect(config={"extension_directory": os.path.join(list(duckdb_ext.__path__)[0], "extensions")})
    con.execute("LOAD httpfs; LOAD delta")
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        url = urlparse(endpoint)
        con.execute(f"""CREATE SECRET bucket (TYPE s3, KEY_ID '{os.environ["AWS_ACCESS_KEY_ID"]}',
                        SECRET '{os.environ["AWS_SECRET_ACCESS_KEY"]}', REGION '{os.environ.get("AWS_REGION", "us-east-1")}',
                        ENDPOINT '{url.netloc}', URL_STYLE 'path', USE_SSL {str(url.scheme == "https").lower()})""")
    return con


def duckdb_rows(con, table_uri: str) -> int:
    return con.execute(f"SELECT count(*) FROM delta_scan('{table_uri}')").fetchone()[0]


def deltalake_rows(table_uri: str) -> int:
    from deltalake import DeltaTable

    from analytics.publish.tables import storage_options

    return DeltaTable(table_uri, storage_options=storage_options()).to_pyarrow_table().num_rows
