"""Import paths and plugins: the one place effsearch imports a user's code.

``model.name``, ``dataset.name`` and a study file's ``plugins`` may name code by import path
(``package.module:callable``, or a module). Naming one runs it, as a Python script would:
treat such config and study files as trusted code. Modules are looked up on ``sys.path``
with the current folder first (as ``python -m`` does), and every process effsearch starts
(study workers, data-parallel ranks) imports the same plugins: the parent lists them in
``EFFSEARCH_PLUGINS`` and children call :func:`import_plugins` with none given.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from effsearch.config.fields import ConfigError

PLUGINS_ENV = "EFFSEARCH_PLUGINS"
MODULE_HINT = (
    "it must be importable from the current folder or the Python path (a package installed in this "
    "environment, or PYTHONPATH)"
)


def add_search_path(folder: str | os.PathLike | None = None) -> None:
    """Put ``folder`` (default: the current folder) on ``sys.path`` and in ``PYTHONPATH``, so this
    process and the ones it starts find modules there."""
    path = os.path.abspath(os.fspath(folder) if folder is not None else os.getcwd())
    if path not in sys.path:
        sys.path.insert(0, path)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if path not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([path, *parts])


def import_module(name: str, field: str) -> ModuleType:
    """Import module ``name``; a ConfigError naming ``field`` if it is missing or fails."""
    add_search_path()
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise ConfigError(field, f"no module named {e.name!r}; {MODULE_HINT}") from None
        raise ConfigError(field, f"importing {name!r} failed: {type(e).__name__}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the user's module raised: show its error, named
        raise ConfigError(field, f"importing {name!r} raised {type(e).__name__}: {_short(e)}") from None


def load_object(path: str, field: str) -> Any:
    """The object at ``package.module:attr.sub``; a ConfigError naming ``field`` if it is not there."""
    module_name, _, attr = path.partition(":")
    obj = import_module(module_name, field)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(field, f"module {module_name!r} has no attribute {attr!r} ({path!r})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(field, f"{path!r} is a {type(obj).__name__}, not a callable")
    return obj


def import_plugins(modules: list[str] | tuple[str, ...] | None = None, field: str = "plugins") -> list[str]:
    """Import each plugin module and list them in ``EFFSEARCH_PLUGINS`` for child processes;
    with ``modules`` None, import those the parent listed there. Returns the modules imported.
    Errors name ``field[i]``, or the flag itself where ``field`` is one (``--plugin``: each
    value is its own flag, and the user wrote no list to index)."""
    if modules is None:
        modules = [m for m in os.environ.get(PLUGINS_ENV, "").split(",") if m]
    for i, name in enumerate(modules):
        where = field if field.startswith("--") else f"{field}[{i}]"
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(where, f"must be a module name such as mypkg.effsearch_models; got {name!r}")
        import_module(name.strip(), where)
    listed = [m for m in os.environ.get(PLUGINS_ENV, "").split(",") if m]
    os.environ[PLUGINS_ENV] = ",".join(dict.fromkeys([*listed, *(m.strip() for m in modules)]))
    return list(modules)


def resolve_paths(model_name: str, dataset_name: str) -> None:
    """Import the code ``model.name`` and ``dataset.name`` name by import path, without calling it:
    a path that does not resolve is refused before torch, the data or Composer is loaded (a typo
    answered in a second, not after half a minute of set-up). Other names pass untouched."""
    from effsearch.config.sources import IMPORT_PATH, dataset_kind, hf_folder, model_kind

    if model_kind(model_name) == "import" and IMPORT_PATH.match(model_name):
        load_object(model_name, "model.name")
    folder = hf_folder(model_name)
    if folder is not None:
        check_hf_folder(folder)
    if dataset_kind(dataset_name) == "import" and IMPORT_PATH.match(dataset_name):
        load_object(dataset_name, "dataset.name")


def check_hf_folder(folder: str) -> Path:
    """The folder ``model.name: hf:FOLDER`` names, holding the config.json ``save_pretrained``
    writes; a ConfigError naming model.name where it does not (a relative path is read from the
    current folder)."""
    path = Path(folder).expanduser()
    if not (path / "config.json").is_file():
        where = "" if path.is_absolute() else f" (read from the current folder, {Path.cwd()})"
        raise ConfigError(
            "model.name",
            f"hf:{folder}: {path.absolute()} is no folder holding a model's config.json{where}; hf: takes a "
            "transformers config class (hf:BertConfig: fresh weights) or a folder save_pretrained wrote",
        )
    if not any((path / name).is_file() for name in WEIGHTS):
        raise ConfigError(
            "model.name",
            f"hf:{folder}: {path.absolute()} holds a config.json and no weights ({', '.join(WEIGHTS)}): "
            "hf:FOLDER fine-tunes a saved model; for fresh weights give its config class (hf:BertConfig) "
            "and its fields as model.kwargs",
        )
    return path


# What save_pretrained writes a model's weights as (one file, or an index of shards).
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def raised(e: BaseException) -> str:
    """The user's code's error as a message shows it: its type, its text (cut short) and the
    file:line it came from, without a traceback."""
    import traceback

    at = traceback.extract_tb(e.__traceback__)[-1]
    return f"{type(e).__name__}: {_short(e)} ({at.filename}:{at.lineno})"


def _short(e: BaseException, limit: int = 300) -> str:
    text = str(e)
    return text if len(text) <= limit else text[:limit] + "..."
