"""A throwaway PostgreSQL server for tests and benchmarks.

`PostgresServer` runs `initdb` in a temporary directory and starts the server listening only on
a Unix socket in that directory (no TCP port), then stops it and removes the directory. Start to
first query takes about a second. PostgreSQL refuses to run as root: as root, `initdb` and
`pg_ctl` run as the `postgres` system user that Debian's package creates.

The binaries are found in `AUTORECAP_PG_BIN`, else on `PATH`, else in the newest
`/usr/lib/postgresql/*/bin` (Debian's layout).

May import: the standard library.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

SYSTEM_USER = "postgres"


class PostgresUnavailableError(RuntimeError):
    """PostgreSQL's binaries are not installed, or the server would not start."""


def find_binaries() -> Path:
    """The folder holding `initdb` and `pg_ctl`."""
    named = os.environ.get("AUTORECAP_PG_BIN")
    if named:
        return Path(named)
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    for folder in reversed(versions):
        if (folder / "pg_ctl").exists():
            return folder
    raise PostgresUnavailableError(
        "PostgreSQL is not installed: `apt-get install -y postgresql` (make test does it), "
        "or set AUTORECAP_PG_BIN to the folder holding initdb and pg_ctl"
    )


class PostgresServer:
    """A PostgreSQL server of its own (see the module docstring). `durable=False` (tests)
    turns fsync off; a benchmark comparing stores keeps it on."""

    def __init__(self, *, durable: bool = False, max_connections: int = 200) -> None:
        self.durable = durable
        self.max_connections = max_connections
        self.bin = find_binaries()
        self.folder: Path | None = None

    @property
    def url(self) -> str:
        """The server's `postgres` database, over its socket."""
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        assert self.folder is not None, "start the server first"
        return f"postgresql://postgres@/{quote(name)}?host={quote(str(self.folder), safe='/')}"

    def start(self) -> str:
        """Make the cluster and start it; returns `url`."""
        self.folder = Path(tempfile.mkdtemp(prefix="autorecap-pg-"))
        data = self.folder / "data"
        as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        if as_root:
            shutil.chown(self.folder, SYSTEM_USER)
        settings = [
            f"-k {self.folder}",
            "-c listen_addresses=''",
            f"-c max_connections={self.max_connections}",
        ]
        if not self.durable:
            settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        try:
            self._run(
                as_root,
                "initdb",
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            )
            self._run(
                as_root,
                "pg_ctl",
                "-D",
                str(data),
                "-l",
                str(self.folder / "server.log"),
                "-w",
                "-t",
                "30",
                "-o",
                " ".join(settings),
                "start",
            )
        except BaseException:
            self._remove()
            raise
        return self.url

    def create_database(self, name: str) -> str:
        """A new empty database on this server; returns its URL."""
        import psycopg  # here: the module itself needs only the standard library

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def stop(self) -> None:
        """Stop the server at once and remove its folder."""
        if self.folder is None:
            return
        as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        with contextlib.suppress(PostgresUnavailableError):
            self._run(as_root, "pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "stop")
        self._remove()

    def log(self) -> str:
        """The server's log so far (for a test that failed)."""
        if self.folder is None:
            return ""
        path = self.folder / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def _run(self, as_root: bool, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if as_root:
            command = ["runuser", "-u", SYSTEM_USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise PostgresUnavailableError(
                f"{program} failed ({done.returncode}): {done.stderr.strip() or done.stdout}\n"
                f"{self.log()}"
            )

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
