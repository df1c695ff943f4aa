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


def remove_students(db_file: Path, assignment: str, students: list[str]) -> None:
    """Remove the students' submissions of ``assignment`` (and their grades and comments) from a sqlite gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    with alembic_on_path(), Gradebook(f"sqlite:///{db_file}", "manyheads") as gb:
        for student in students:
            try:
                gb.remove_submission(assignment, student)
            except MissingEntry:
                continue


def carry_students(source: Path, dest: Path, assignment: str, students: list[str]) -> list[str]:
    """Copy the students' submissions of ``assignment`` from the sqlite gradebook ``source`` into ``dest`` (whose
    release may be another: ids are matched by assignment, notebook and cell name), with their grades, manual
    scores and comments; parts ``dest``'s release no longer has are left out. Returns the students carried."""
    if not students:
        return []
    marks = ",".join("?" * len(students))
    with sqlite3.connect(dest) as con:
        con.execute("ATTACH DATABASE ? AS src", (str(source),))
        _map_release(con, assignment)
        con.execute(
            f"CREATE TEMP TABLE subs AS SELECT sa.id AS id FROM src.submitted_assignment sa "
            f"JOIN a_map ON sa.assignment_id = a_map.old WHERE sa.student_id IN ({marks})",
            students,
        )
        con.execute(f"INSERT OR IGNORE INTO main.student SELECT * FROM src.student WHERE id IN ({marks})", students)
        con.execute(
            "INSERT INTO main.submitted_assignment (id, assignment_id, student_id, timestamp, extension) "
            "SELECT sa.id, a_map.new, sa.student_id, sa.timestamp, sa.extension FROM src.submitted_assignment "
            "sa JOIN a_map ON sa.assignment_id = a_map.old WHERE sa.id IN (SELECT id FROM subs)"
        )
        con.execute(
            "INSERT INTO main.submitted_notebook (id, assignment_id, notebook_id, flagged, "
            "late_submission_penalty) SELECT sn.id, sn.assignment_id, n_map.new, sn.flagged, "
            "sn.late_submission_penalty FROM src.submitted_notebook sn JOIN n_map ON sn.notebook_id = "
            "n_map.old WHERE sn.assignment_id IN (SELECT id FROM subs)"
        )
        for table, columns in (
            ("grade", "auto_score, manual_score, extra_credit, needs_manual_grade"),
            ("comment", "auto_comment, manual_comment"),
        ):
            con.execute(
                f"INSERT INTO main.{table} (id, notebook_id, cell_id, {columns}) SELECT t.id, t.notebook_id, "
                f"c_map.new, {', '.join('t.' + c.strip() for c in columns.split(','))} FROM src.{table} t "
                f"JOIN c_map ON t.cell_id = c_map.old WHERE t.notebook_id IN (SELECT sn.id FROM "
                f"src.submitted_notebook sn WHERE sn.assignment_id IN (SELECT id FROM subs))"
            )
        carried = [
            row[0]
            for row in con.execute("SELECT student_id FROM main.submitted_assignment WHERE id IN (SELECT id FROM subs)")
        ]
        con.commit()
        for temp in ("a_map", "n_map", "c_map", "subs"):
            con.execute(f"DROP TABLE temp.{temp}")
        con.execute("DETACH DATABASE src")
    return sorted(carried)


def _map_release(con: sqlite3.Connection, assignment: str) -> None:
    """Temp tables a_map, n_map, c_map: the release's ids in the attached ``src`` -> in ``main``, by name."""
    con.execute(
        "CREATE TEMP TABLE a_map AS SELECT s.id AS old, m.id AS new FROM src.assignment s "
        "JOIN main.assignment m ON m.name = s.name WHERE s.name = ?",
        (assignment,),
    )
    con.execute(
        "CREATE TEMP TABLE n_map AS SELECT s.id AS old, m.id AS new FROM src.notebook s "
        "JOIN a_map ON s.assignment_id = a_map.old JOIN main.notebook m "
        "ON m.assignment_id = a_map.new AND m.name = s.name"
    )
    con.execute(
        "CREATE TEMP TABLE c_map AS SELECT s.id AS old, m.id AS new FROM src.base_cell s "
        "JOIN n_map ON s.notebook_id = n_map.old JOIN main.base_cell m "
        "ON m.notebook_id = n_map.new AND m.name = s.name AND m.type = s.type"
    )


STUDENT_FOLDERS = ("autograded", "feedback", "submitted")  # OUT/course/<folder>/<student>/: nbgrader's files


def carry_folders(source: Path, dest: Path, students: list[str]) -> None:
    """The students' nbgrader folders of course ``source`` copied into course ``dest`` (replacing theirs)."""
    for folder in STUDENT_FOLDERS:
        for student in students:
            if (source / folder / student).is_dir():
                shutil.rmtree(dest / folder / student, ignore_errors=True)
                shutil.copytree(source / folder / student, dest / folder / student)
