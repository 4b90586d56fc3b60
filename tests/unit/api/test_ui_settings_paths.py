"""The /ui reads its vendored scripts and its example queries where the settings say, not by a path of
the checkout (`ApiSettings.ui_vendor_dir`, `ApiSettings.cypher_examples_path`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.cypher.ui import cypher_examples
from api.settings import ApiSettings
from api.ui import mount


def test_the_ui_serves_the_vendored_scripts_from_the_configured_directory(tmp_path: Path) -> None:
    vendor = tmp_path / "vendor"
    (vendor / "htmx.org" / "dist").mkdir(parents=True)
    (vendor / "htmx.org" / "dist" / "htmx.min.js").write_text("/* the configured htmx */")
    app = FastAPI()
    mount(app, ApiSettings(ui_vendor_dir=vendor, tasks_dir=None))
    with TestClient(app) as client:
        served = client.get("/ui/static/htmx.min.js")
        assert served.status_code == 200 and served.text == "/* the configured htmx */"
        # cytoscape is not in the configured directory: a clear 404 naming the fix, not the checkout's copy
        missing = client.get("/ui/static/cytoscape.min.js")
        assert missing.status_code == 404 and "npm ci" in missing.text


def test_the_vendor_directory_and_the_examples_file_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGRAPH_UI_VENDOR_DIR", str(tmp_path / "vendor"))
    monkeypatch.setenv("REGRAPH_CYPHER_EXAMPLES_PATH", str(tmp_path / "examples.md"))
    settings = ApiSettings()
    assert settings.ui_vendor_dir == tmp_path / "vendor"
    assert settings.cypher_examples_path == tmp_path / "examples.md"


def test_the_examples_are_read_from_the_given_file(tmp_path: Path) -> None:
    doc = tmp_path / "examples.md"
    doc.write_text("# Ours\n\n## Count techniques\n\n```cypher\nMATCH (t:Technique) RETURN count(t)\n```\n")
    assert cypher_examples(doc) == [
        {"title": "Count techniques", "query": "MATCH (t:Technique) RETURN count(t)", "parameters": "{}"}
    ]
    assert cypher_examples(tmp_path / "absent.md") == []
    # by default the documented examples of the checkout are offered
    assert cypher_examples(ApiSettings().cypher_examples_path) == cypher_examples()
    assert cypher_examples()
