"""Compress large JSON documents with lz4 on PostgreSQL.

A conversation's state is one document of about 1 MB per 1,000 messages, rewritten at
every checkpoint. PostgreSQL compresses values that large with pglz by default,
which made saving it about four times slower than storing it; lz4 (PostgreSQL 14+)
compresses nearly as well as fast as it copies. Only values written from now on are
affected; other databases, and servers built without lz4, are left as they are.
"""

from django.db import DatabaseError, migrations, transaction

COLUMNS = (("AgentState", "state_data"), ("DisplayMessage", "content"))


def use_lz4(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or connection.pg_version < 140000:
        return
    quote = schema_editor.quote_name
    for model_name, column in COLUMNS:
        table = apps.get_model("sagents_django", model_name)._meta.db_table
        try:
            with transaction.atomic(using=connection.alias):
                schema_editor.execute(
                    f"ALTER TABLE {quote(table)} ALTER COLUMN {quote(column)} "
                    "SET COMPRESSION lz4"
                )
        except DatabaseError:
            pass  # a server built without lz4 keeps pglz


class Migration(migrations.Migration):
    dependencies = [("sagents_django", "0001_initial")]

    operations = [migrations.RunPython(use_lz4, migrations.RunPython.noop)]
