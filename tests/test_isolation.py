"""kvcore is standard library only; the CLI path never imports torch, fastapi or pydantic."""

import inspect
import subprocess
import sys

import kvcore

HEAVY = ("torch", "triton", "fastapi", "pydantic", "numpy", "starlette", "uvicorn", "jinja2")


def imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_kvcore_imports_nothing_heavy():
    mods = imported_after("import kvcore; kvcore.plan")
    assert not {m for m in mods if m.split(".")[0] in HEAVY}


def test_cli_plan_imports_nothing_heavy():
    mods = imported_after(
        "from app.cli import main\nimport io, contextlib\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['qwen3.5-27b', '--gpu', '4090', '--json'])"
    )
    assert not {m for m in mods if m.split(".")[0] in HEAVY}


def test_exported_members():
    public = {name for name in dir(kvcore)
              if not name.startswith("_") and not inspect.ismodule(getattr(kvcore, name))}
    assert set(kvcore.__all__) == public
    for name in kvcore.__all__:
        assert getattr(kvcore, name) is not None
