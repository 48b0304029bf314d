"""Injected faults: a Hub that is down, slow or corrupt; a full measurement database; a GPU out
of memory, missing, or too slow during measure. Each gives a clear error, loses nothing stored,
and leaves the server serving."""

import sqlite3
import subprocess
import sys
import types

import pytest
from fastapi.testclient import TestClient

from app.web import create_app
from kvcore import HubError, KvplanError, load_model
from kvcore.store import list_measurements, save_measurement


def hub_raising(monkeypatch, exc=None, payload=None, tmp_path=None):
    errors = types.SimpleNamespace(**{
        name: type(name, (Exception,), {}) for name in (
            "GatedRepoError", "RepositoryNotFoundError", "RevisionNotFoundError",
            "EntryNotFoundError", "LocalEntryNotFoundError")})

    def download(repo, filename, revision=None):
        if exc is not None:
            raise exc
        path = tmp_path / filename
        path.write_bytes(payload)
        return str(path)

    monkeypatch.setitem(sys.modules, "huggingface_hub",
                        types.SimpleNamespace(hf_hub_download=download, errors=errors))
    monkeypatch.setitem(sys.modules, "huggingface_hub.errors", errors)


@pytest.mark.parametrize("exc", [ConnectionRefusedError("hub down"), TimeoutError("read timed out")])
def test_hub_down_or_slow(monkeypatch, exc):
    hub_raising(monkeypatch, exc=exc)
    with pytest.raises(HubError, match="fetching 'someone/model-x/config.json' failed"):
        load_model("someone/model-x")
    client = TestClient(create_app())
    r = client.post("/api/v1/plan", json={"model": "someone/model-y"})
    assert r.status_code == 422 and r.json()["field"] == "model"
    assert client.get("/api/v1/healthz").status_code == 200


def test_corrupt_cached_config(monkeypatch, tmp_path):
    hub_raising(monkeypatch, payload=b"\x00\xffnot json", tmp_path=tmp_path)
    with pytest.raises(HubError, match="not valid JSON"):
        load_model("someone/corrupt")


def test_full_disk_loses_no_measurement(monkeypatch, tmp_path):
    db = tmp_path / "m.sqlite3"
    row = {"model": "qwen3-8b", "kv_k": "f16", "kv_v": "f16", "context": 1, "sequences": 1,
           "device": "cpu", "predicted_bytes": 1, "allocated_bytes": 1}
    save_measurement(row, db)
    import kvcore.store as store

    real_connect = store._connect

    class Full:
        def __init__(self, con):
            self.con = con

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def execute(self, sql, *args):
            if sql.startswith("INSERT"):
                raise sqlite3.OperationalError("database or disk is full")
            return self.con.execute(sql, *args)

        def close(self):
            self.con.close()

    monkeypatch.setattr(store, "_connect", lambda path: Full(real_connect(path)))
    with pytest.raises(KvplanError, match="could not be stored.*disk is full"):
        save_measurement(row, db)
    monkeypatch.setattr(store, "_connect", real_connect)
    assert len(list_measurements(db)) == 1


@pytest.fixture
def measuring_client(monkeypatch, tmp_path):
    from app import api as api_mod
    from app.settings import Settings

    monkeypatch.setattr(api_mod, "get_settings",
                        lambda: Settings(True, None, 5, tmp_path / "m.sqlite3"))
    return TestClient(create_app())


def test_gpu_out_of_memory_is_a_clear_error(monkeypatch, measuring_client):
    def oom(*a, **k):
        return subprocess.CompletedProcess(a, 1, "", "torch.OutOfMemoryError: CUDA out of memory.")

    monkeypatch.setattr(subprocess, "run", oom)
    r = measuring_client.post("/api/v1/measure", json={"model": "qwen3-8b"})
    assert r.status_code == 507 and "out of memory" in r.json()["error"]
    assert measuring_client.get("/api/v1/healthz").status_code == 200


def test_measure_time_limit(monkeypatch, measuring_client):
    def slow(*a, **k):
        raise subprocess.TimeoutExpired(a, 5)

    monkeypatch.setattr(subprocess, "run", slow)
    r = measuring_client.post("/api/v1/measure", json={"model": "qwen3-8b"})
    assert r.status_code == 504 and "5 s limit" in r.json()["error"]


def test_missing_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    from kvcore.measure import measure

    with pytest.raises(KvplanError, match="no CUDA device here"):
        measure(load_model("qwen3-8b"), context=64, device="cuda", progress=None)


def test_body_too_large():
    from app.web import MAX_BODY_BYTES

    client = TestClient(create_app())
    r = client.post("/api/v1/plan", content=b"{" + b" " * MAX_BODY_BYTES + b"}",
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["ok"] is False


def test_deep_config_object_is_refused():
    deep: dict = {"model_type": "llama"}
    node = deep
    for _ in range(200):
        node["x"] = {}
        node = node["x"]
    client = TestClient(create_app())
    r = client.post("/api/v1/plan", json={"config": deep})
    assert r.status_code in (400, 422) and r.json()["ok"] is False


def test_hub_client_refuses_other_hosts():
    hf = pytest.importorskip("huggingface_hub")
    from kvcore import hub

    assert hub.host_allowed("huggingface.co") and hub.host_allowed("cas-bridge.xethub.hf.co")
    assert not hub.host_allowed("huggingface.co.evil.example")
    assert not hub.host_allowed("example.com")
    if not hub._guard_client(hf):
        pytest.skip("this huggingface_hub has no client factory")
    from huggingface_hub.utils import _http

    with pytest.raises(hub.OffHubRedirect):
        _http.get_session().get("https://example.com/config.json")
