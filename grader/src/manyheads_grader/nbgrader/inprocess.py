"""Inside an nbgrader process (``command``, ``session``): the same results as two of nbgrader's
steps, without their waste. Each replaces one function of nbgrader's with one that returns or raises exactly what it
would; tests/grader/test_nbgrader_session.py compares them.

* A new gradebook is stamped with the schema's newest revision, which nbgrader learns by running ``alembic heads``
  as a child process: a second Python start and alembic's imports, 2-3 s of the release on 2 cores. The same revision
  is read here from the same migration scripts.
* Every nbgrader cell's metadata is checked against nbgrader's schema with ``jsonschema.validate``, which first checks
  the schema itself against JSON Schema's meta-schema: about 20 cells a notebook, twice (autograde and feedback), a
  tenth of a second of CPU a notebook. Here the schema is checked once, the first time it is used.
"""

from __future__ import annotations

from typing import Any


def speed_up() -> None:
    """Install both replacements (idempotent)."""
    import nbgrader.api
    import nbgrader.nbgraderformat.common

    nbgrader.api.get_alembic_version = alembic_head
    nbgrader.nbgraderformat.common.jsonschema = _SchemaCheckedOnce()


def alembic_head() -> str:
    """The newest revision of nbgrader's gradebook schema, as the first word of ``alembic heads`` gives it."""
    import nbgrader.api
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    with nbgrader.api._temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        heads = ScriptDirectory.from_config(Config(ini)).get_heads()
    if len(heads) != 1:  # nbgrader's own code takes the first line of `alembic heads`; one head is all it ships
        raise RuntimeError(f"nbgrader's migrations have {len(heads)} heads, expected one")
    return heads[0]


class _SchemaCheckedOnce:
    """``jsonschema`` as nbgrader's metadata validator uses it (``validate``), with each schema checked once."""

    def __init__(self) -> None:
        self._validators: dict[int, tuple[Any, Any]] = {}

    def __getattr__(self, name: str) -> Any:
        import jsonschema

        return getattr(jsonschema, name)

    def validate(self, instance: Any, schema: Any, cls: Any = None, *args: Any, **kwargs: Any) -> None:
        """``jsonschema.validate``: raises the same SchemaError (a bad schema) or ValidationError (its best match)."""
        import jsonschema
        from jsonschema import exceptions, validators

        if cls is not None or args or kwargs:  # not how nbgrader calls it: jsonschema's own
            return jsonschema.validate(instance, schema, cls, *args, **kwargs)
        known = self._validators.get(id(schema))
        if known is None or known[0] is not schema:
            kind = validators.validator_for(schema)
            kind.check_schema(schema)
            known = self._validators[id(schema)] = (schema, kind(schema))
        error = exceptions.best_match(known[1].iter_errors(instance))
        if error is not None:
            raise error
