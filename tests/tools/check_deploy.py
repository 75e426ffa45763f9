"""Check the Kubernetes manifests under deploy/k8s and the YAML in
docs/scale-out.md against the sandbox claims the doc makes; print TAP.

    /usr/bin/python3 tests/tools/check_deploy.py [REPO_ROOT]

Every manifest must parse (Debian's python3-yaml), the kernel pod template
is rendered the way Enterprise Gateway's launcher renders it (jinja2,
trim_blocks, lstrip_blocks, no autoescape) and the pod it makes is checked:
gVisor, limits, read-only root, non-root, no capabilities, no service
account token, size-capped tmpfs only, no client-controlled sandbox
settings; a deny-all NetworkPolicy must select it. Then each check is run
against a copy of the manifests with the property it protects removed, and
must fail there: a check that cannot fail is reported as a failure.
"""
import copy
import glob
import json
import os
import re
import sys

import jinja2
import yaml

NS = "jupyter-agent"
KERNELSPEC = "python_sandboxed"
PROXY = "enterprise_gateway.services.processproxies.k8s.KubernetesProcessProxy"
# What EG sets itself for every kernel (launch_kubernetes.py lower-cases
# each KERNEL_* variable into a template keyword).
BENIGN = {
    "kernel_pod_name": "alice-5e1b2c3d",
    "kernel_namespace": NS,
    "kernel_id": "5e1b2c3d-0000-4000-8000-000000000001",
    "kernel_username": "alice",
    "kernel_name": KERNELSPEC,
    "kernel_language": "python",
}
# What a hostile client may add: every KERNEL_* EG's stock template reads,
# and values built to break out of a YAML string.
INJECT = 'x"\n  hostNetwork: true\n  y: "'
HOSTILE = dict(
    BENIGN,
    kernel_uid=0,
    kernel_gid=0,
    kernel_image="evil/image:latest",
    kernel_cpus_limit="64",
    kernel_memory_limit="512Gi",
    kernel_working_dir="/",
    kernel_service_account_name="enterprise-gateway",
    kernel_volumes=[{"name": "root", "hostPath": {"path": "/"}}],
    kernel_volume_mounts=[{"name": "root", "mountPath": "/host"}],
    kernel_username=INJECT,
    kernel_pod_name=INJECT,
)
# The local box's defaults (sandbox/sb_policy.c) the pod mirrors.
MEMORY_LIMIT = 2 * 1024**3
CPU_LIMIT = 1.0
PIDS_LIMIT = 128


# ---------------------------------------------------------------- loading


class World:
    """The manifests as parsed objects, plus the raw kernelspec files."""

    def __init__(self, root):
        self.root = root
        self.docs = []  # (file, object) for every YAML document
        self.errors = []
        for path in sorted(glob.glob(os.path.join(root, "deploy/k8s/*.yaml"))):
            rel = os.path.relpath(path, root)
            try:
                with open(path) as f:
                    for doc in yaml.safe_load_all(f):
                        if doc is not None:
                            self.docs.append((rel, doc))
            except yaml.YAMLError as e:
                self.errors.append("%s: %s" % (rel, e))
        spec = os.path.join(root, "deploy/k8s/kernelspec", KERNELSPEC)
        with open(os.path.join(spec, "kernel.json")) as f:
            self.kernel_json_text = f.read()
        with open(os.path.join(spec, "kernel-pod.yaml.j2")) as f:
            self.template = f.read()
        with open(os.path.join(root, "docs/scale-out.md")) as f:
            self.doc_text = f.read()

    def objs(self, kind, namespace=None):
        return [d for _, d in self.docs
                if d.get("kind") == kind and
                (namespace is None or meta(d).get("namespace") == namespace)]

    def one(self, kind, name):
        for d in self.objs(kind):
            if meta(d).get("name") == name:
                return d
        return None

    def kernel_json(self):
        return json.loads(self.kernel_json_text)

    def render(self, keywords):
        """The template as EG's launch_kubernetes.py renders it."""
        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                                 autoescape=False)
        text = env.from_string(self.template).render(**keywords)
        return [d for d in yaml.safe_load_all(text) if d is not None]

    def kernel_pod(self, keywords=BENIGN):
        pods = [d for d in self.render(keywords) if d.get("kind") == "Pod"]
        if len(pods) != 1:
            raise Check("the template makes %d pods, not one" % len(pods))
        return pods[0]

    def eg_container(self):
        dep = self.one("Deployment", "enterprise-gateway")
        if dep is None:
            raise Check("no enterprise-gateway Deployment")
        return dep["spec"]["template"]["spec"]["containers"][0]

    def eg_env(self):
        return {e["name"]: e.get("value") for e in
                self.eg_container().get("env", [])}


class Check(Exception):
    """A property does not hold; the text says which and where."""


def meta(d):
    return d.get("metadata") or {}


def need(cond, text):
    if not cond:
        raise Check(text)


def quantity(v):
    """A Kubernetes quantity as a float (bytes or cores)."""
    s = str(v)
    units = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4,
             "k": 1e3, "M": 1e6, "G": 1e9, "m": 1e-3}
    for u, f in units.items():
        if s.endswith(u):
            return float(s[:-len(u)]) * f
    return float(s)


def selects(selector, labels):
    """Whether a podSelector selects a pod with these labels."""
    need(set(selector) <= {"matchLabels"},
         "podSelector uses %s; only matchLabels is checked" % sorted(selector))
    return all(labels.get(k) == v
               for k, v in (selector.get("matchLabels") or {}).items())


def containers(pod):
    spec = pod["spec"]
    return spec.get("initContainers", []) + spec.get("containers", [])


# ----------------------------------------------------------------- checks
# Each takes a World and raises Check when its property does not hold.


def c_parse(w):
    need(not w.errors, "; ".join(w.errors))
    need(w.docs, "no manifests under deploy/k8s")
    for f, d in w.docs:
        need(isinstance(d, dict) and d.get("apiVersion") and d.get("kind"),
             "%s: a document without apiVersion and kind" % f)
        if d["kind"] != "Kustomization":
            need(meta(d).get("name"), "%s: a %s without a name" % (f, d["kind"]))


def c_kustomization(w):
    k = [d for _, d in w.docs if d.get("kind") == "Kustomization"]
    need(len(k) == 1, "deploy/k8s needs exactly one kustomization.yaml")
    k = k[0]
    listed = set(k.get("resources", []))
    on_disk = {os.path.basename(f) for f, _ in w.docs} - {"kustomization.yaml"}
    need(listed == on_disk, "kustomization resources %s != files %s"
         % (sorted(listed), sorted(on_disk)))
    generated = set()
    for g in k.get("configMapGenerator", []):
        generated.add(g["name"])
        for f in g.get("files", []):
            need(os.path.isfile(os.path.join(w.root, "deploy/k8s", f)),
                 "configMapGenerator file %s is missing" % f)
    dep = w.one("Deployment", "enterprise-gateway")
    for v in dep["spec"]["template"]["spec"].get("volumes", []):
        if "configMap" in v:
            need(v["configMap"]["name"] in generated,
                 "volume %s uses a ConfigMap nothing generates" % v["name"])


def c_kernelspec(w):
    kj = w.kernel_json()
    pp = kj["metadata"]["process_proxy"]
    need(pp["class_name"] == PROXY, "process_proxy class_name is not %s" % PROXY)
    launcher = "/usr/local/share/jupyter/kernels/%s/scripts/launch_kubernetes.py" \
        % KERNELSPEC
    need(launcher in kj["argv"], "argv does not run %s" % launcher)
    pod = w.kernel_pod()
    images = {c["image"] for c in pod["spec"]["containers"]}
    need(images == {pp["config"]["image_name"]},
         "pod image %s != kernel.json image_name %s (the image puller "
         "pulls the latter)" % (sorted(images), pp["config"]["image_name"]))
    init = w.one("Deployment", "enterprise-gateway")["spec"]["template"][
        "spec"]["initContainers"]
    script = " ".join(" ".join(c.get("command", [])) for c in init)
    for f in ("kernel.json", "kernel-pod.yaml.j2", "launch_kubernetes.py"):
        need(f in script, "the init container does not install %s" % f)
    need("/kernels/%s" % KERNELSPEC in script,
         "the init container does not fill /kernels/%s" % KERNELSPEC)


def c_gvisor(w):
    pod = w.kernel_pod()
    need(pod["spec"].get("runtimeClassName") == "gvisor",
         "the kernel pod has no runtimeClassName: gvisor")
    rc = w.one("RuntimeClass", "gvisor")
    need(rc is not None and rc.get("handler") == "runsc",
         "no RuntimeClass gvisor with handler runsc")


def c_limits(w):
    pod = w.kernel_pod()
    for c in containers(pod):
        lim = (c.get("resources") or {}).get("limits") or {}
        need("memory" in lim and "cpu" in lim,
             "container %s has no memory and cpu limits" % c["name"])
        need(quantity(lim["memory"]) <= MEMORY_LIMIT,
             "container %s memory limit %s is over 2Gi" % (c["name"], lim["memory"]))
        need(quantity(lim["cpu"]) <= CPU_LIMIT,
             "container %s cpu limit %s is over 1" % (c["name"], lim["cpu"]))
    lr = w.objs("LimitRange", NS)
    need(lr, "no LimitRange in %s" % NS)
    mx = [x.get("max", {}) for r in lr for x in r["spec"]["limits"]
          if x.get("type") == "Container"]
    need(mx and all(quantity(m["memory"]) <= MEMORY_LIMIT and
                    quantity(m["cpu"]) <= CPU_LIMIT for m in mx),
         "the LimitRange does not cap containers at 2Gi and 1 CPU")


def c_pids(w):
    blocks = [d for d in doc_yaml(w) if isinstance(d, dict) and
              d.get("kind") == "KubeletConfiguration"]
    need(blocks, "docs/scale-out.md shows no KubeletConfiguration")
    need(all(d.get("podPidsLimit") == PIDS_LIMIT for d in blocks),
         "the KubeletConfiguration's podPidsLimit is not %d" % PIDS_LIMIT)


def c_readonly_root(w):
    for c in containers(w.kernel_pod()):
        sc = c.get("securityContext") or {}
        need(sc.get("readOnlyRootFilesystem") is True,
             "container %s has a writable root" % c["name"])


def c_identity(w):
    pod = w.kernel_pod()
    psc = pod["spec"].get("securityContext") or {}
    for c in containers(pod):
        sc = dict(psc, **(c.get("securityContext") or {}))
        need(sc.get("runAsNonRoot") is True,
             "container %s may run as root (runAsNonRoot)" % c["name"])
        need(sc.get("runAsUser") not in (None, 0),
             "container %s has no non-zero runAsUser" % c["name"])
        need((sc.get("seccompProfile") or {}).get("type") == "RuntimeDefault",
             "container %s has no RuntimeDefault seccomp profile" % c["name"])
        need(sc.get("allowPrivilegeEscalation") is False,
             "container %s allows privilege escalation" % c["name"])
        need(not sc.get("privileged"), "container %s is privileged" % c["name"])


def c_capabilities(w):
    for c in containers(w.kernel_pod()):
        caps = (c.get("securityContext") or {}).get("capabilities") or {}
        need("ALL" in (caps.get("drop") or []),
             "container %s does not drop ALL capabilities" % c["name"])
        need(not caps.get("add"), "container %s adds capabilities" % c["name"])


def c_no_token(w):
    spec = w.kernel_pod()["spec"]
    need(spec.get("automountServiceAccountToken") is False,
         "the kernel pod mounts a service account token")
    sa = spec.get("serviceAccountName", "default")
    acct = w.one("ServiceAccount", sa)
    need(acct is not None and acct.get("automountServiceAccountToken") is False,
         "service account %s is missing or automounts its token" % sa)
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        for b in w.objs(kind):
            need(all(s.get("name") != sa for s in b.get("subjects", [])),
                 "%s %s grants %s rights" % (kind, meta(b)["name"], sa))


def c_host(w):
    spec = w.kernel_pod()["spec"]
    for k in ("hostNetwork", "hostPID", "hostIPC"):
        need(not spec.get(k), "the kernel pod sets %s" % k)
    for v in spec.get("volumes", []):
        need(set(v) == {"name", "emptyDir"},
             "volume %s is not an emptyDir" % v.get("name"))
        ed = v["emptyDir"] or {}
        need(ed.get("medium") == "Memory" and ed.get("sizeLimit"),
             "volume %s is not a size-capped tmpfs" % v["name"])
    mounts = {m["name"] for c in containers(w.kernel_pod())
              for m in c.get("volumeMounts", [])}
    need("workspace" in mounts, "no workspace volume is mounted")


def c_client_cannot_change(w):
    """A client's KERNEL_* values change nothing but the names EG gives."""
    good = w.kernel_pod(BENIGN)
    bad = w.kernel_pod(HOSTILE)
    need(bad["metadata"]["name"] == INJECT,
         "an injected pod name did not stay one string")
    bad["metadata"]["name"] = good["metadata"]["name"]
    diff = [k for k in set(good) | set(bad) if good.get(k) != bad.get(k)]
    need(not diff, "client KERNEL_* variables change the pod's %s" % diff)


def c_network(w):
    labels = w.kernel_pod()["metadata"]["labels"]
    pols = [p for p in w.objs("NetworkPolicy", NS)
            if selects(p["spec"].get("podSelector") or {}, labels)]
    deny = [p for p in pols
            if {"Ingress", "Egress"} <= set(p["spec"].get("policyTypes", []))
            and not p["spec"].get("egress") and not p["spec"].get("ingress")]
    need(deny, "no NetworkPolicy with policyTypes Ingress+Egress and no "
         "rules selects the kernel pods")
    eg_labels = w.one("Deployment", "enterprise-gateway")["spec"][
        "template"]["metadata"]["labels"]
    for p in pols:
        for rule in p["spec"].get("egress", []) or []:
            need(rule.get("to") and rule.get("ports"),
                 "%s lets kernels send anywhere or on any port" % meta(p)["name"])
            for peer in rule["to"]:
                need(set(peer) == {"podSelector"} and
                     selects(peer["podSelector"], eg_labels),
                     "%s lets kernels reach more than the gateway" % meta(p)["name"])
        for rule in p["spec"].get("ingress", []) or []:
            need(rule.get("from"),
                 "%s lets anyone reach the kernels" % meta(p)["name"])
            for peer in rule["from"]:
                need(set(peer) == {"podSelector"} and
                     selects(peer["podSelector"], eg_labels),
                     "%s lets more than the gateway reach kernels" % meta(p)["name"])


def c_namespace(w):
    env = w.eg_env()
    need(env.get("EG_NAMESPACE") == NS and env.get("EG_SHARED_NAMESPACE") == "True",
         "kernels do not go in the gateway's namespace %s" % NS)
    ns = w.one("Namespace", NS)
    need(ns is not None and meta(ns).get("labels", {}).get(
        "pod-security.kubernetes.io/enforce") == "restricted",
        "namespace %s does not enforce Pod Security 'restricted'" % NS)
    need(not w.objs("ClusterRole") and not w.objs("ClusterRoleBinding"),
         "a ClusterRole lets the gateway make pods outside %s" % NS)
    roles = w.objs("Role", NS)
    need(any(r for r in roles for rule in r.get("rules", [])
             if "pods" in rule.get("resources", []) and
             "create" in rule.get("verbs", [])), "no Role lets EG create pods")
    for r in roles:
        for rule in r.get("rules", []):
            need("*" not in rule.get("resources", []) + rule.get("verbs", []),
                 "Role %s uses a wildcard" % meta(r)["name"])
            need(not {"secrets", "namespaces", "rolebindings"} &
                 set(rule.get("resources", [])),
                 "Role %s grants more than pods" % meta(r)["name"])


def c_gateway_env(w):
    for e in w.eg_container().get("env", []):
        need("valueFrom" not in e,
             "EG's env %s comes from a secret; the launcher copies EG's "
             "environment into every kernel pod" % e["name"])
        need(not re.search(r"TOKEN|PASSWORD|SECRET|_KEY$|KEYFILE", e["name"]),
             "EG's env holds %s, which kernel pods would see" % e["name"])
    env = w.eg_env()
    need(json.loads(env.get("EG_ALLOWED_KERNELS", "[]")) == [KERNELSPEC],
         "EG_ALLOWED_KERNELS is not [%s]" % KERNELSPEC)
    need(int(env.get("EG_CULL_IDLE_TIMEOUT", "0")) > 0, "culling is off")
    need(env.get("EG_LIST_KERNELS") == "False",
         "GET /api/kernels lists every user's kernels")
    quota = w.objs("ResourceQuota", NS)
    need(quota and all(int(q["spec"]["hard"]["pods"]) >=
                       int(env["KG_MAX_KERNELS"]) + 1 for q in quota),
         "the ResourceQuota refuses pods before EG's own KG_MAX_KERNELS")


def c_image_puller(w):
    ds = w.one("DaemonSet", "kernel-image-puller")
    need(ds is not None, "no kernel-image-puller DaemonSet")
    need(meta(ds)["namespace"] != NS,
         "the image puller (hostPath) shares the kernels' namespace")
    env = {e["name"]: e.get("value") for e in
           ds["spec"]["template"]["spec"]["containers"][0].get("env", [])}
    need(env.get("KIP_GATEWAY_HOST", "").startswith("https://enterprise-gateway."),
         "the image puller does not ask the gateway over TLS")
    rc = w.one("RuntimeClass", "gvisor")
    need(ds["spec"]["template"]["spec"].get("nodeSelector") ==
         rc["scheduling"]["nodeSelector"],
         "the image puller does not run on the gVisor kernel nodes")


def doc_yaml(w):
    out = []
    for block in re.findall(r"```ya?ml\n(.*?)```", w.doc_text, re.S):
        out.extend(d for d in yaml.safe_load_all(block) if d is not None)
    return out


def c_doc(w):
    blocks = re.findall(r"```ya?ml\n(.*?)```", w.doc_text, re.S)
    need(blocks, "docs/scale-out.md has no yaml blocks")
    for i, b in enumerate(blocks, 1):
        try:
            list(yaml.safe_load_all(b))
        except yaml.YAMLError as e:
            raise Check("yaml block %d of docs/scale-out.md: %s" % (i, e))
    for path in set(re.findall(r"deploy/k8s/[\w./-]+\w", w.doc_text)):
        need(os.path.exists(os.path.join(w.root, path)),
             "docs/scale-out.md names %s, which does not exist" % path)


CHECKS = [
    (c_parse, "every manifest under deploy/k8s parses as YAML"),
    (c_kustomization, "kustomization.yaml lists every manifest and file it needs"),
    (c_kernelspec, "the kernelspec uses KubernetesProcessProxy, our template and the image the puller pulls"),
    (c_gvisor, "the kernel pod runs under gVisor (runtimeClassName gvisor, handler runsc)"),
    (c_limits, "every kernel container has memory and CPU limits no larger than a local box's"),
    (c_pids, "the doc's kubelet configuration caps pids per pod at our default"),
    (c_readonly_root, "every kernel container has a read-only root filesystem"),
    (c_identity, "kernel containers run as a non-root uid, RuntimeDefault seccomp, no escalation"),
    (c_capabilities, "kernel containers drop ALL capabilities and add none"),
    (c_no_token, "kernel pods hold no service account token and the account has no rights"),
    (c_host, "kernel pods share nothing with the node: no host namespaces, only size-capped tmpfs volumes"),
    (c_client_cannot_change, "KERNEL_* variables a client sends cannot change the kernel pod's sandbox"),
    (c_network, "a deny-all NetworkPolicy selects kernel pods; they reach only the gateway"),
    (c_namespace, "kernels stay in one restricted namespace; EG has a namespaced Role only"),
    (c_gateway_env, "EG's environment holds no secret; allowed kernels, culling and limits set"),
    (c_image_puller, "the kernel image puller runs on kernel nodes, outside the kernels' namespace"),
    (c_doc, "every yaml block in docs/scale-out.md parses and every path it names exists"),
]


# ------------------------------------------------------------- mutations
# Each removes one protected property from a copy; the named check must
# then fail.


def sub_all(old, new):
    """Replace every occurrence in the template (pod and container level)."""
    def mutate(w):
        need(old in w.template, "mutation target %r not in the template" % old)
        w.template = w.template.replace(old, new)
    return mutate


def sub(old, new):
    def mutate(w):
        need(old in w.template, "mutation target %r not in the template" % old)
        w.template = w.template.replace(old, new, 1)
    return mutate


def obj_edit(kind, name, fn):
    def mutate(w):
        fn(w.one(kind, name))
    return mutate


def drop_policy(w):
    w.docs = [(f, d) for f, d in w.docs if not (
        d.get("kind") == "NetworkPolicy" and meta(d)["name"] == "kernels-deny-all")]


def eg_env_add(name, entry):
    def mutate(w):
        w.eg_container()["env"].append(dict(entry, name=name))
    return mutate


def eg_env_set(name, value):
    def mutate(w):
        for e in w.eg_container()["env"]:
            if e["name"] == name:
                e["value"] = value
    return mutate


def doc_sub(old, new):
    def mutate(w):
        need(old in w.doc_text, "mutation target %r not in the doc" % old)
        w.doc_text = w.doc_text.replace(old, new, 1)
    return mutate


MUTATIONS = [
    (c_parse, "a manifest that is not YAML", lambda w: w.errors.append("x.yaml: broken")),
    (c_gvisor, "runtimeClassName removed", sub("  runtimeClassName: gvisor\n", "")),
    (c_limits, "the memory limit removed", sub("          memory: 2Gi\n", "")),
    (c_limits, "a limit raised to 8Gi", sub("          memory: 2Gi\n", "          memory: 8Gi\n")),
    (c_pids, "podPidsLimit changed in the doc", doc_sub("podPidsLimit: 128\n```", "podPidsLimit: -1\n```")),
    (c_readonly_root, "readOnlyRootFilesystem off", sub("readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false")),
    (c_identity, "runAsNonRoot removed", sub_all("    runAsNonRoot: true\n", "")),
    (c_identity, "uid 0", sub_all("runAsUser: 1000", "runAsUser: 0")),
    (c_identity, "seccomp Unconfined", sub_all("type: RuntimeDefault", "type: Unconfined")),
    (c_capabilities, "capabilities kept", sub("drop: [ALL]", "drop: []")),
    (c_capabilities, "a capability added", sub("drop: [ALL]", "drop: [ALL]\n          add: [SYS_ADMIN]")),
    (c_no_token, "the token mounted", sub("automountServiceAccountToken: false", "automountServiceAccountToken: true")),
    (c_no_token, "the kernels' account bound to a Role", lambda w: w.docs.append(("x.yaml", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "x", "namespace": NS},
        "subjects": [{"kind": "ServiceAccount", "name": "jupyter-kernel"}]}))),
    (c_host, "a hostPath volume", sub("  volumes:\n", "  volumes:\n    - name: host\n      hostPath: {path: /}\n")),
    (c_host, "a tmpfs without sizeLimit", sub("        sizeLimit: 512Mi\n", "")),
    (c_client_cannot_change, "KERNEL_UID honoured", sub("    runAsUser: 1000\n", "    runAsUser: {{ kernel_uid | default(1000) }}\n")),
    (c_client_cannot_change, "a name not escaped", sub("{{ kernel_pod_name | tojson }}", '"{{ kernel_pod_name }}"')),
    (c_network, "the deny-all policy removed", drop_policy),
    (c_network, "egress opened to the world", obj_edit("NetworkPolicy", "kernels-allow-gateway", lambda p: p["spec"]["egress"].append({"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443}]}))),
    (c_network, "ingress from anyone", obj_edit("NetworkPolicy", "kernels-allow-gateway", lambda p: p["spec"]["ingress"].append({}))),
    (c_namespace, "a ClusterRole for EG", lambda w: w.docs.append(("x.yaml", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"}}))),
    (c_namespace, "per-kernel namespaces", eg_env_set("EG_SHARED_NAMESPACE", "False")),
    (c_gateway_env, "the token in EG's env", eg_env_add("EG_AUTH_TOKEN", {"valueFrom": {"secretKeyRef": {"name": "eg-auth", "key": "token"}}})),
    (c_gateway_env, "culling off", eg_env_set("EG_CULL_IDLE_TIMEOUT", "0")),
    (c_image_puller, "the puller in the kernels' namespace", obj_edit("DaemonSet", "kernel-image-puller", lambda d: d["metadata"].update(namespace=NS))),
    (c_kernelspec, "template image differs from image_name", sub("image: docker.io/elyra/kernel-py:3.2.3", "image: docker.io/elyra/kernel-py:latest")),
    (c_doc, "a yaml block that does not parse", doc_sub("```yaml\n", "```yaml\n: [\n")),
]


def run(check, w):
    try:
        check(w)
        return None
    except Check as e:
        return str(e)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError,
            jinja2.TemplateError, yaml.YAMLError) as e:
        return "%s: %s" % (type(e).__name__, e)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    n = failed = 0

    def ok(cond, text, why=None):
        nonlocal n, failed
        n += 1
        print("%s %d - %s" % ("ok" if cond else "not ok", n, text))
        if not cond:
            failed += 1
            if why:
                print("# " + why.replace("\n", "\n# "))

    base = World(root)
    for check, text in CHECKS:
        why = run(check, base)
        ok(why is None, text, why)
    for check, text, mutate in MUTATIONS:
        w = copy.deepcopy(base)
        try:
            mutate(w)
        except Check as e:
            ok(False, "the check notices: %s" % text, str(e))
            continue
        why = run(check, w)
        ok(why is not None, "the check notices: %s" % text,
           "%s still passes" % check.__name__)
    print("1..%d" % n)
    print("%d passed, %d failed" % (n - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
