"""Installing into an environment that already has its torch (README, "Into an environment
that already has its torch"): the README's commands, run as written on the wheel of this
checkout, into a fresh virtual environment that holds the lock's torch and torchvision,
offline from the local uv cache as ``uv sync`` fills it (which serves the lock's files,
and pylock.toml files exported from it, but not a resolve). The torch there must stay the one it
had, and ``effsearch train`` must train there, from the installed wheel."""

import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.markers import Marker

ROOT = Path(__file__).resolve().parents[2]


LOCK = tomllib.loads((ROOT / "uv.lock").read_text())


def locked(name: str) -> str:
    (version,) = {p["version"] for p in LOCK["package"] if p["name"] == name}
    return version


def closure(*names: str) -> set[str]:
    """The packages ``names`` need in uv.lock, recursively (extras included, markers ignored:
    the export below keeps only this platform's)."""
    by_name = {p["name"]: p for p in LOCK["package"]}
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for dep in by_name[name].get("dependencies", []):
            todo.append(dep["name"])
            for extra in dep.get("extra", []):
                todo.extend(d["name"] for d in by_name[dep["name"]]["optional-dependencies"][extra])
    return seen


def only(pylock: str, keep: set[str]) -> str:
    """A pylock.toml with the [[packages]] entries of ``keep`` alone."""
    head, *entries = pylock.split("\n[[packages]]\n")
    kept = [e for e in entries if tomllib.loads(e)["name"] in keep]
    return "\n[[packages]]\n".join([head, *kept])


def readme_install_commands() -> list[list[str]]:
    """The bash block of the README that exports the lock without torch, as argument lists."""
    text = (ROOT / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```bash\n")[1:]]
    (block,) = [b for b in blocks if "--prune torch" in b]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{shlex.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def env_versions(python: Path) -> dict:
    """Every distribution in the environment, by normalised name."""
    out = run(
        [
            python,
            "-c",
            "import json, importlib.metadata as m; "
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))",
        ]
    )
    return {k.lower().replace("_", "-").replace(".", "-"): v for k, v in json.loads(out.stdout).items()}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_readme_installs_effsearch_beside_an_environment_torch_without_touching_it(tmp_path):
    uv = shutil.which("uv")
    assert uv, "uv is not on PATH (README, quick start: python3 -m pip install uv)"
    offline = {**os.environ, "UV_OFFLINE": "1", "UV_NO_PROGRESS": "1"}
    offline.pop("VIRTUAL_ENV", None)
    dist, env = tmp_path / "dist", tmp_path / "env"
    run([uv, "build", "--wheel", "--out-dir", dist, ROOT], env=offline)
    (wheel,) = dist.glob("effsearch-*.whl")
    with zipfile.ZipFile(wheel) as z:  # PEP 561: type checkers read the installed package's annotations
        assert "effsearch/py.typed" in z.namelist()
    # The user's environment: the lock's torch and torchvision with what they need, nothing else.
    torch, vision = locked("torch"), locked("torchvision")
    run([uv, "venv", "--python", sys.executable, env], env=offline)
    python = env / "bin" / "python"
    full = run(
        [uv, "export", "--frozen", "--format", "pylock.toml", "--no-emit-project", "--all-extras"],
        cwd=ROOT,
        env=offline,
    ).stdout
    user = tmp_path / "pylock.user.toml"
    user.write_text(only(full, closure("torch", "torchvision")))
    run([uv, "pip", "install", "--no-config", "--python", python, "-r", user], env=offline)
    assert {p: v for p, v in env_versions(python).items() if p in ("torch", "torchvision")} == {
        "torch": torch,
        "torchvision": vision,
    }

    commands = readme_install_commands()
    assert [c[:3] for c in commands] == [
        ["uv", "export", "--frozen"],
        ["uv", "pip", "install"],
        ["uv", "pip", "install"],
    ], commands
    deps = tmp_path / "pylock.deps.toml"
    for cmd in commands:
        cmd = [
            deps if a == "pylock.deps.toml" else python if a == "ENV/bin/python" else wheel if a == "." else a
            for a in cmd
        ]
        run([uv, *cmd[1:]], cwd=ROOT, env=offline)
    pins = {
        p["name"]: p["version"]
        for p in tomllib.loads(deps.read_text())["packages"]
        if "marker" not in p or Marker(p["marker"]).evaluate()
    }
    assert "torch" not in pins and "torchvision" not in pins, pins
    got = env_versions(python)
    assert {p: got.get(p) for p in pins} == pins, "the rest is not at the lock's versions"
    assert (got["torch"], got["torchvision"]) == (torch, vision), got
    assert got["effsearch"] == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

    # Outside the checkout, so only the installed wheel can be imported.
    work = tmp_path / "work"
    (work / "configs").mkdir(parents=True)
    shutil.copy(ROOT / "configs" / "quickstart.yaml", work / "configs")
    proc = run(
        [env / "bin" / "effsearch", "train", "configs/quickstart.yaml", "--set", "epochs=1"],
        cwd=work,
        env={**os.environ, "TQDM_DISABLE": "1"},
    )
    (result,) = work.glob("runs/*/result.json")
    r = json.loads(result.read_text())
    assert r["status"] == "completed", proc.stdout
    assert r["versions"]["torch"].split("+")[0] == torch, r["versions"]
    where = run([python, "-c", "import effsearch; print(effsearch.__file__)"], cwd=work).stdout
    assert Path(where.strip()).is_relative_to(env), where
