# The environment lock of a report archive, read inside the kernel.
# ag_envlock.c sends this file followed by one line that calls
# _ja_envlock(B64) with the notebook's code cells (a base64 JSON list).
# It imports what the notebook imports (the kernel is a fresh sandboxed one
# when `archive pack` runs on its own), then reports every loaded top-level
# module with its file, distribution and version, as JSON on stdout.


def _ja_envlock(sources_b64):
    import ast
    import base64
    import json
    import platform
    import sys
    from importlib import import_module, metadata

    sources = json.loads(base64.b64decode(sources_b64).decode("utf-8"))
    wanted = set()
    for src in sources:
        # IPython magics and shell escapes are not Python.
        lines = [ln for ln in src.splitlines()
                 if not ln.lstrip().startswith(("%", "!"))]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                wanted.update(a.name.split(".")[0] for a in node.names)
            elif (isinstance(node, ast.ImportFrom) and node.module
                  and node.level == 0):
                wanted.add(node.module.split(".")[0])
    for name in sorted(wanted):
        try:
            import_module(name)
        except Exception:
            pass
    try:
        dists = metadata.packages_distributions()
    except Exception:
        dists = {}
    modules = {}
    for name, mod in sorted(sys.modules.items()):
        if "." in name or name.startswith("_") or mod is None:
            continue
        entry = {}
        path = getattr(mod, "__file__", None)
        if isinstance(path, str):
            entry["file"] = path
        owners = dists.get(name) or []
        if owners:
            entry["distribution"] = owners[0]
            try:
                entry["version"] = metadata.version(owners[0])
            except Exception:
                pass
        if "version" not in entry:
            version = getattr(mod, "__version__", None)
            if isinstance(version, str):
                entry["version"] = version
        modules[name] = entry
    return json.dumps({
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "notebook_imports": sorted(wanted),
        "modules": modules,
    })


def _ja_env_versions(names_b64):
    # For `archive rerun`: the versions a fresh kernel would give the
    # modules the archived notebook imported, without importing them.
    # names_b64 is a base64 JSON object {module: distribution or null}.
    import base64
    import importlib.util
    import json
    import platform
    from importlib import metadata

    wanted = json.loads(base64.b64decode(names_b64).decode("utf-8"))
    modules = {}
    for name, dist in sorted(wanted.items()):
        entry = {}
        try:
            if dist:
                entry["version"] = metadata.version(dist)
            elif importlib.util.find_spec(name) is None:
                entry["missing"] = True
        except Exception:
            entry["missing"] = True
        modules[name] = entry
    return json.dumps({"python": platform.python_version(),
                       "modules": modules})
