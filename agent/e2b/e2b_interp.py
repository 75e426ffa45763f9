# The E2B code interpreter's helpers inside the kernel, kept in a module of
# their own (_ja_e2b) so the user's namespace holds none of their names.
# Contexts are namespaces of the one IPython shell: switching saves the
# current user module/namespace and installs the other (a new context
# starts with a fresh one), then changes to the context's directory.
import json as _json
import os as _os
import sys as _sys

_state = {"cur": "default", "saved": {}, "cwd": {"default": "/home/user"},
          "env": []}


def setup(env_json):
    _os.environ.update(_json.loads(env_json))
    _os.makedirs("/home/user", exist_ok=True)
    _os.chdir("/home/user")


def _shell():
    return get_ipython()  # noqa: F821 (IPython's builtin)


def _capture(ip):
    return (ip.user_module, ip.user_ns, ip.user_ns_hidden, ip.ns_table)


def _install(ip, saved):
    ip.user_module, ip.user_ns, ip.user_ns_hidden, ip.ns_table = saved
    _sys.modules["__main__"] = ip.user_module


def switch(ctx, cwd):
    ip = _shell()
    if _state["cur"] != ctx:
        _state["saved"][_state["cur"]] = _capture(ip)
        saved = _state["saved"].pop(ctx, None)
        if saved is None:
            ip.init_create_namespaces()
            ip.init_user_ns()
            _sys.modules["__main__"] = ip.user_module
        else:
            _install(ip, saved)
        _state["cur"] = ctx
    if cwd:
        _state["cwd"][ctx] = cwd
    _os.chdir(_state["cwd"].get(ctx, "/home/user"))


def forget(ctx):
    """Drop a context's namespace (its variables are gone)."""
    ip = _shell()
    if _state["cur"] == ctx:
        ip.reset(new_session=False)
    else:
        _state["saved"].pop(ctx, None)


def env_push(env_json):
    new = _json.loads(env_json)
    _state["env"].append({k: _os.environ.get(k) for k in new})
    _os.environ.update(new)


def env_pop():
    old = _state["env"].pop() if _state["env"] else {}
    for k, v in old.items():
        if v is None:
            _os.environ.pop(k, None)
        else:
            _os.environ[k] = v
