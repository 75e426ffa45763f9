# The E2B code interpreter's helpers inside the kernel. Run once in the
# user's namespace, this installs the module _ja_e2b and leaves no name of
# its own behind. Contexts are namespaces of the one IPython shell:
# switching saves the current user module/namespace and installs the
# other (a new context starts with a fresh one), then changes to the
# context's directory.
def __ja_e2b_install():
    import json
    import os
    import sys
    import types

    from IPython import get_ipython

    home = "/home/user"
    state = {"cur": "default", "saved": {}, "cwd": {"default": home},
             "env": []}

    def setup(env_json):
        os.environ.update(json.loads(env_json))
        os.makedirs(home, exist_ok=True)
        os.chdir(home)

    def switch(ctx, cwd):
        ip = get_ipython()
        if state["cur"] != ctx:
            state["saved"][state["cur"]] = (ip.user_module, ip.user_ns,
                                            ip.user_ns_hidden, ip.ns_table)
            saved = state["saved"].pop(ctx, None)
            if saved is None:
                ip.init_create_namespaces()
                ip.init_user_ns()
            else:
                (ip.user_module, ip.user_ns, ip.user_ns_hidden,
                 ip.ns_table) = saved
            sys.modules["__main__"] = ip.user_module
            state["cur"] = ctx
        if cwd:
            state["cwd"][ctx] = cwd
        os.chdir(state["cwd"].get(ctx, home))

    def forget(ctx):
        """Drop a context's namespace (its variables are gone)."""
        if state["cur"] == ctx:
            get_ipython().reset(new_session=False)
        else:
            state["saved"].pop(ctx, None)

    def env_push(env_json):
        new = json.loads(env_json)
        state["env"].append({k: os.environ.get(k) for k in new})
        os.environ.update(new)

    def env_pop():
        old = state["env"].pop() if state["env"] else {}
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    m = types.ModuleType("_ja_e2b")
    m.setup, m.switch, m.forget = setup, switch, forget
    m.env_push, m.env_pop = env_push, env_pop
    sys.modules["_ja_e2b"] = m


__ja_e2b_install()
del __ja_e2b_install
