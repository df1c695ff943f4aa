"""The gradebook: which database, what it holds, and the merge of the workers' gradebooks into the class's course.

With sqlite each worker grades into its own copy of the gradebook (sqlite is not safe for concurrent writers) and
:func:`publish_course` merges the copies row by row into ``OUT/course/gradebook.db``; nbgrader's ids are UUIDs, so
rows never collide. With ``--db postgresql://…`` every worker (and every machine) writes to the one database.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

from manyheads.course.layout import CourseLayout
from manyheads_grader.nbgrader.command import alembic_on_path

CONFIG_FILE = CourseLayout.CONFIG_FILE


def normalise_db(url: str) -> str:
    """``postgresql://`` with the psycopg2 driver when psycopg (3) is not installed (SQLAlchemy's default)."""
    if url.startswith("postgresql://"):
        import importlib.util

        if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2") is not None:
            return "postgresql+psycopg2://" + url[len("postgresql://") :]
    return url


def released(db: str, assignment: str) -> bool:
    """Whether the gradebook at ``db`` already holds the assignment with its notebooks."""
    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SQLAlchemyError

    for attempt in range(5):  # opening a new gradebook creates its tables: two graders may race to do it
        try:
            with alembic_on_path(), Gradebook(db, "manyheads") as gb:
                return bool(gb.find_assignment(assignment).notebooks)
        except MissingEntry:
            return False
        except SQLAlchemyError:
            if attempt == 4:
                raise
            time.sleep(1 + attempt)
    return False


def scores(db: str, assignment: str, students: list[str]) -> dict[str, dict]:
    from nbgrader.api import Gradebook, MissingEntry

    found = {}
    with alembic_on_path(), Gradebook(db, "manyheads") as gb:
        for student in students:
            try:
                sub = gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            [nb] = sub.notebooks
            found[student] = {g.name: (g.auto_score, g.max_score, g.needs_manual_grade, g.cell_type) for g in nb.grades}
    return found


def merge_sqlite(target: Path, sources: list[Path]) -> None:
    """Merge worker gradebooks into ``target`` (a copy of the master gradebook): every row once, in FK order."""
    from nbgrader.api import Base

    tables = [t.name for t in Base.metadata.sorted_tables]
    with sqlite3.connect(target) as con:
        for i, source in enumerate(sources):
            con.execute(f"ATTACH DATABASE ? AS w{i}", (str(source),))
            for table in tables:
                con.execute(f"INSERT OR IGNORE INTO main.{table} SELECT * FROM w{i}.{table}")
            con.commit()
            con.execute(f"DETACH DATABASE w{i}")


def publish_course(dest: Path, master: Path, workers: list, assignment: str, db: str) -> None:
    """OUT/course: an nbgrader course with the release, the graded notebooks and (with sqlite) the merged gradebook."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in (CONFIG_FILE, "solutions", "exercises"):
        (shutil.copytree if (master / name).is_dir() else shutil.copy2)(master / name, dest / name)
    if not db.startswith("postgresql"):
        shutil.copy2(master / "gradebook.db", dest / "gradebook.db")
        merge_sqlite(dest / "gradebook.db", [w.root / "gradebook.db" for w in workers])
    else:
        with open(dest / CONFIG_FILE, "a", encoding="utf-8") as config:
            config.write(f"\n# Written by manyheads grade: the class's gradebook.\nc.CourseDirectory.db_url = {db!r}\n")
    for worker in workers:
        for step in ("autograded", "feedback"):
            if (worker.root / step).is_dir():
                shutil.copytree(worker.root / step, dest / step, dirs_exist_ok=True)
        for submitted in worker.root.glob("submitted-*"):
            shutil.copytree(submitted, dest / "submitted", dirs_exist_ok=True)
