"""The deployment artifacts of deploy/: what a cluster or a host would refuse,
found here first.

Every Kubernetes manifest validates strictly (an unknown field is an error)
against the Kubernetes schemas of the oldest and newest versions we support,
offline, with kubernetes-validate; the agent-sandbox resources, whose CRDs
that has no schema for, against a schema of the fields we use with each
embedded core object (pod template, volume claims, network policy) validated
as the core type it is. The load balancer's ConfigMap is exactly what
render.py makes of deploy/nginx/runbox.conf, and nginx accepts it. Then the
properties a deployment depends on: readiness on /healthz, a volume of its
own for every node's state directory, the token from a Secret, the budgets
and selectors aimed at the right pods, one image name, a grace period longer
than runbox's. The systemd unit passes systemd-analyze.

Run by `make test-deploy` (mk/deploy.mk), which provides kubernetes-validate.
"""
import copy
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

try:
    import jsonschema
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError, ValidationError
except ImportError:  # reported by the tests that need it, not at collection
    kubernetes_validate = None

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
MANIFESTS = sorted(KUBERNETES.glob("*.yaml"))
SANDBOX_MANIFESTS = sorted((KUBERNETES / "agent-sandbox").glob("*.yaml"))
UNIT = DEPLOY / "systemd" / "runbox.service"
# The oldest Kubernetes these manifests are for (PodDisruptionBudget's
# unhealthyPodEvictionPolicy is GA there) and the newest the validator knows.
VERSIONS = os.environ.get("RUNBOX_KUBERNETES_VERSIONS", "1.31 1.37").split()
STATE_DIR = "/var/lib/runbox"
PORT = 8080


def load(path):
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def one(kind, name):
    found = [doc for path in MANIFESTS + SANDBOX_MANIFESTS for doc in load(path)
             if doc["kind"] == kind and doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def need_validator():
    if kubernetes_validate is None:
        pytest.fail("kubernetes-validate is not installed: run `make test-deploy`")


def validate(doc, version):
    """Strict validation; the error names the path and the problem."""
    need_validator()
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except ValidationError as e:
        path = ".".join(str(p) for p in e.path)
        pytest.fail(f"{doc['kind']} {doc['metadata'].get('name')}: {path}: {e.message}")
    except SchemaNotFoundError as e:
        pytest.fail(e.message)


def selects(selector, labels):
    """Whether a label selector (matchLabels only, as ours are) selects labels."""
    assert set(selector) <= {"matchLabels"}, "only matchLabels selectors are checked here"
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


# runbox's pods: the StatefulSet's and the SandboxTemplate's.
def runbox_pods():
    statefulset = one("StatefulSet", "runbox")
    template = one("SandboxTemplate", "runbox")
    return {
        "StatefulSet": (statefulset["spec"]["template"], statefulset["spec"]["volumeClaimTemplates"]),
        "SandboxTemplate": (template["spec"]["podTemplate"], template["spec"]["volumeClaimTemplates"]),
    }


def runbox_container(pod):
    containers = [c for c in pod["spec"]["containers"] if c["name"] == "runbox"]
    assert len(containers) == 1
    return containers[0]


def option(args, name):
    assert args.count(name) == 1, f"{name} given {args.count(name)} times in {args}"
    return args[args.index(name) + 1]


# ---- Schemas ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_validates_strictly(path, version):
    docs = load(path)
    assert docs, f"{path} has no resource"
    for doc in docs:
        validate(doc, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_strict_validation_refuses_an_unknown_field(version):
    need_validator()
    statefulset = copy.deepcopy(one("StatefulSet", "runbox"))
    runbox_container(statefulset["spec"]["template"])["readynessProbe"] = {"httpGet": {"path": "/healthz"}}
    with pytest.raises(ValidationError):
        kubernetes_validate.validate(statefulset, version, strict=True)


# The agent-sandbox resources (extensions.agents.x-k8s.io/v1beta1): their
# fields, unknown ones refused; what they embed is checked as core objects.
LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
METADATA = {
    "type": "object", "required": ["name"], "additionalProperties": False,
    "properties": {"name": NAME, "namespace": NAME, "labels": LABELS, "annotations": LABELS},
}
SANDBOX_SCHEMAS = {
    "SandboxTemplate": {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "extensions.agents.x-k8s.io/v1beta1"},
            "kind": {"const": "SandboxTemplate"},
            "metadata": METADATA,
            "spec": {
                "type": "object", "required": ["podTemplate"], "additionalProperties": False,
                "properties": {
                    "podTemplate": {
                        "type": "object", "required": ["spec"], "additionalProperties": False,
                        "properties": {
                            "metadata": {"type": "object", "additionalProperties": False,
                                         "properties": {"labels": LABELS, "annotations": LABELS}},
                            "spec": {"type": "object"},
                        },
                    },
                    "volumeClaimTemplates": {"type": "array", "items": {
                        "type": "object", "required": ["metadata", "spec"], "additionalProperties": False,
                        "properties": {"metadata": METADATA, "spec": {"type": "object"}},
                    }},
                    "service": {"type": "boolean"},
                    "networkPolicyManagement": {"enum": ["Managed", "Unmanaged"]},
                    "networkPolicy": {"type": "object", "additionalProperties": False, "properties": {
                        "ingress": {"type": "array"}, "egress": {"type": "array"}}},
                    "envVarsInjectionPolicy": {"enum": ["Allowed", "Overrides", "Disallowed"]},
                    "volumeClaimTemplatesPolicy": {"enum": ["Allowed", "Overrides", "Disallowed"]},
                },
            },
        },
    },
    "SandboxWarmPool": {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "extensions.agents.x-k8s.io/v1beta1"},
            "kind": {"const": "SandboxWarmPool"},
            "metadata": METADATA,
            "spec": {
                "type": "object", "required": ["sandboxTemplateRef"], "additionalProperties": False,
                "properties": {
                    "replicas": {"type": "integer", "minimum": 0},
                    "sandboxTemplateRef": {"type": "object", "required": ["name"], "additionalProperties": False,
                                           "properties": {"name": NAME}},
                    "updateStrategy": {"type": "object", "additionalProperties": False,
                                       "properties": {"type": {"enum": ["Recreate", "OnReplenish"]}}},
                },
            },
        },
    },
}


def sandbox_errors(doc):
    need_validator()
    schema = SANDBOX_SCHEMAS.get(doc.get("kind"))
    assert schema, f"no schema here for {doc.get('kind')}"
    return [f"{'.'.join(map(str, e.path))}: {e.message}"
            for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]


@pytest.mark.parametrize("path", SANDBOX_MANIFESTS, ids=lambda p: p.name)
def test_agent_sandbox_resource_has_only_known_fields(path):
    for doc in load(path):
        assert sandbox_errors(doc) == []


def test_agent_sandbox_schema_refuses_an_unknown_field():
    template = copy.deepcopy(one("SandboxTemplate", "runbox"))
    template["spec"]["podTemplates"] = template["spec"].pop("podTemplate")
    assert sandbox_errors(template)


@pytest.mark.parametrize("version", VERSIONS)
def test_sandbox_template_embeds_valid_core_objects(version):
    spec = one("SandboxTemplate", "runbox")["spec"]
    pod = spec["podTemplate"]
    validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "runbox"},
              "template": {"metadata": pod.get("metadata", {}), "spec": pod["spec"]}}, version)
    for claim in spec["volumeClaimTemplates"]:
        validate({"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim}, version)
    validate({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "runbox"},
              "spec": {"podSelector": {}, **spec["networkPolicy"]}}, version)


def test_warm_pool_refers_to_the_template():
    pool = one("SandboxWarmPool", "runbox")
    assert pool["spec"]["sandboxTemplateRef"]["name"] == one("SandboxTemplate", "runbox")["metadata"]["name"]


# ---- The load balancer's ConfigMap -----------------------------------------------------

def render_module():
    spec = importlib.util.spec_from_file_location("render", KUBERNETES / "render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def configmap():
    return one("ConfigMap", "runbox-lb")["data"]


def test_configmap_is_what_render_writes():
    result = subprocess.run([sys.executable, str(KUBERNETES / "render.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_configmap_carries_runbox_conf_verbatim():
    assert configmap()["runbox.conf"] == (DEPLOY / "nginx" / "runbox.conf").read_text()


def test_render_follows_a_change_to_runbox_conf(tmp_path, monkeypatch):
    render = render_module()
    changed = tmp_path / "runbox.conf"
    changed.write_text((DEPLOY / "nginx" / "runbox.conf").read_text() + "# a change\n")
    monkeypatch.setitem(render.SOURCES, "runbox.conf", changed)
    text = render.render(3, "")
    assert text != (KUBERNETES / "lb-configmap.yaml").read_text()
    assert yaml.safe_load(text)["data"]["runbox.conf"].endswith("# a change\n")


@pytest.mark.parametrize("text", ["", "x", "x\n", "x\n\n", "  indented\nnot\n", "\n\nafter blank lines\n",
                                  "tab\there\n", "trailing  \n", "# not a comment\n- not a list\n"])
def test_render_block_scalars_load_back_exactly(text):
    render = render_module()
    document = f"data:\n  key: {render.block_scalar(text, 4, 2)}\n  next: 1\n"
    assert yaml.safe_load(document)["data"] == {"key": text, "next": 1}


def node_lines():
    return [line for line in configmap()["runbox-nodes.conf"].splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_node_list_is_the_statefulsets_pods():
    statefulset = one("StatefulSet", "runbox")
    name, service = statefulset["metadata"]["name"], statefulset["spec"]["serviceName"]
    assert one("Service", service)["spec"]["clusterIP"] == "None"
    expected = [f"server {name}-{i}.{service}:{PORT} max_fails=0;"
                for i in range(statefulset["spec"]["replicas"])]
    assert node_lines() == expected


def test_render_writes_full_names_with_a_domain():
    text = render_module().node_list(2, "runbox.svc.cluster.local")
    assert "server runbox-1.runbox.runbox.svc.cluster.local:8080 max_fails=0;" in text


def test_lb_mounts_the_configmap_and_runs_its_script():
    lb = one("Deployment", "runbox-lb")["spec"]["template"]["spec"]
    [volume] = [v for v in lb["volumes"] if v.get("configMap")]
    assert volume["configMap"]["name"] == "runbox-lb"
    [container] = lb["containers"]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert container["command"] == ["/bin/sh", f"{mount['mountPath']}/run-nginx.sh"]
    assert re.search(r"^\s*include runbox\.conf;", configmap()["nginx.conf"], re.M)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lb_files(directory, listen_port):
    """The ConfigMap's files in directory, the nodes at 127.0.0.x (nginx -t
    resolves names) and nginx listening on a free loopback port."""
    data = configmap()
    for i, line in enumerate(node_lines()):
        data["runbox-nodes.conf"] = data["runbox-nodes.conf"].replace(
            line, re.sub(r"server \S+:(\d+)", rf"server 127.0.0.{i + 2}:\1", line))
    assert "runbox-0" not in data["runbox-nodes.conf"]
    data["runbox.conf"] = data["runbox.conf"].replace(f"listen {PORT};", f"listen 127.0.0.1:{listen_port};")
    for name, text in data.items():
        (directory / name).write_text(text)


def need_nginx():
    if not shutil.which("nginx"):
        pytest.skip("nginx is not installed")


def test_nginx_accepts_the_configmap(tmp_path):
    need_nginx()
    lb_files(tmp_path, free_port())
    result = subprocess.run(["nginx", "-t", "-q", "-e", "stderr", "-p", f"{tmp_path}/",
                             "-c", str(tmp_path / "nginx.conf")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_lb_script_serves_reloads_on_change_and_stops_on_sigterm(tmp_path):
    need_nginx()
    port = free_port()
    conf = tmp_path / "conf"
    conf.mkdir()
    lb_files(conf, port)
    env = dict(os.environ, NGINX_PREFIX=f"{tmp_path}/prefix/", RESOLVE_SECONDS="1")
    script = subprocess.Popen(["/bin/sh", str(conf / "run-nginx.sh")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert script.poll() is None and time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.1)
        with open(conf / "runbox-nodes.conf", "a") as f:
            f.write("# changed\n")
        time.sleep(3)
        script.send_signal(signal.SIGTERM)
        output, _ = script.communicate(timeout=15)
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
    assert script.returncode == 0, output
    assert "changed: reloading" in output
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


# ---- What the deployment depends on ---------------------------------------------------

@pytest.mark.parametrize("owner", ["StatefulSet", "SandboxTemplate"])
def test_runbox_is_ready_on_healthz_and_alive_on_livez(owner):
    pod, _ = runbox_pods()[owner]
    container = runbox_container(pod)
    [port] = container["ports"]
    assert port["containerPort"] == PORT
    assert option(container["args"], "--listen") == f"0.0.0.0:{PORT}"
    for probe, path in [("readinessProbe", "/healthz"), ("livenessProbe", "/livez")]:
        assert container[probe]["httpGet"]["path"] == path
        assert container[probe]["httpGet"]["port"] in (PORT, port["name"])


@pytest.mark.parametrize("owner", ["StatefulSet", "SandboxTemplate"])
def test_every_runbox_pod_has_a_volume_of_its_own_for_the_state_directory(owner):
    pod, claims = runbox_pods()[owner]
    container = runbox_container(pod)
    [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == STATE_DIR]
    assert mount["name"] in [claim["metadata"]["name"] for claim in claims]
    assert mount["name"] not in [v["name"] for v in pod["spec"].get("volumes", [])]  # not shadowed
    [claim] = [c for c in claims if c["metadata"]["name"] == mount["name"]]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]


@pytest.mark.parametrize("owner", ["StatefulSet", "SandboxTemplate"])
def test_the_token_comes_from_a_secret(owner):
    pod, _ = runbox_pods()[owner]
    container = runbox_container(pod)
    token_file = Path(option(container["args"], "--token-file"))
    [mount] = [m for m in container["volumeMounts"] if Path(m["mountPath"]) == token_file.parent]
    assert mount.get("readOnly") is True
    [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == "runbox-token"
    assert [item["path"] for item in volume["secret"]["items"]] == [token_file.name]
    assert volume["secret"]["defaultMode"] == 0o400
    assert not [e for e in container.get("env", []) if "TOKEN" in e["name"]]


@pytest.mark.parametrize("owner", ["StatefulSet", "SandboxTemplate"])
def test_grace_period_outlasts_the_drain_and_runbox_grace(owner):
    pod, _ = runbox_pods()[owner]
    container = runbox_container(pod)
    grace = int(option(container["args"], "--grace"))
    hook = " ".join(container["lifecycle"]["preStop"]["exec"]["command"])
    hook_seconds = int(re.search(r"--max-time (\d+)", hook).group(1))
    assert pod["spec"]["terminationGracePeriodSeconds"] > hook_seconds + grace
    assert "/v1/admin/drain" in hook and "-X POST" in hook
    # The token reaches curl on its standard input, not on its command line.
    assert "-K -" in hook and "-H" not in hook.split("|")[1]


@pytest.mark.parametrize("owner", ["StatefulSet", "SandboxTemplate"])
def test_runbox_pods_take_nothing_from_the_host_but_privileged(owner):
    pod, _ = runbox_pods()[owner]
    spec = pod["spec"]
    assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
    assert not [v for v in spec.get("volumes", []) if "hostPath" in v]
    assert spec["automountServiceAccountToken"] is False
    context = runbox_container(pod)["securityContext"]
    assert context["privileged"] is True and context["readOnlyRootFilesystem"] is True
    assert "capabilities" not in context  # privileged has them all: adding some would only mislead


def test_runbox_pdb_selects_the_statefulsets_pods_only():
    pdb = one("PodDisruptionBudget", "runbox")["spec"]
    assert pdb["maxUnavailable"] == 1
    assert selects(pdb["selector"], one("StatefulSet", "runbox")["spec"]["template"]["metadata"]["labels"])
    assert not selects(pdb["selector"], one("Deployment", "runbox-lb")["spec"]["template"]["metadata"]["labels"])


@pytest.mark.parametrize("kind,name", [("StatefulSet", "runbox"), ("Deployment", "runbox-lb")])
def test_workload_selector_matches_its_pods(kind, name):
    spec = one(kind, name)["spec"]
    assert selects(spec["selector"], spec["template"]["metadata"]["labels"])


@pytest.mark.parametrize("service,ours,other", [("runbox", "StatefulSet/runbox", "Deployment/runbox-lb"),
                                                ("runbox-lb", "Deployment/runbox-lb", "StatefulSet/runbox")])
def test_services_select_their_pods_only(service, ours, other):
    selector = {"matchLabels": one("Service", service)["spec"]["selector"]}
    labels = {ref: one(*ref.split("/"))["spec"]["template"]["metadata"]["labels"] for ref in (ours, other)}
    assert selects(selector, labels[ours]) and not selects(selector, labels[other])
    port = one("Service", service)["spec"]["ports"][0]
    assert port["port"] == PORT and port["targetPort"] == "http"


def test_lb_pdb_and_network_policies_select_their_pods():
    lb = one("Deployment", "runbox-lb")["spec"]["template"]["metadata"]["labels"]
    node = one("StatefulSet", "runbox")["spec"]["template"]["metadata"]["labels"]
    assert selects(one("PodDisruptionBudget", "runbox-lb")["spec"]["selector"], lb)
    runbox_policy = one("NetworkPolicy", "runbox")["spec"]
    assert selects(runbox_policy["podSelector"], node) and not selects(runbox_policy["podSelector"], lb)
    [ingress] = runbox_policy["ingress"]
    assert [selects(peer["podSelector"], lb) for peer in ingress["from"]] == [True]
    lb_policy = one("NetworkPolicy", "runbox-lb")["spec"]
    assert selects(lb_policy["podSelector"], lb) and not selects(lb_policy["podSelector"], node)
    assert any(selects(peer.get("podSelector", {"matchLabels": {"-": "-"}}), node)
               for rule in lb_policy["egress"] for peer in rule["to"])


def test_lb_runs_unprivileged():
    pod = one("Deployment", "runbox-lb")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    [container] = pod["containers"]
    context = container["securityContext"]
    assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
    assert context["capabilities"]["drop"] == ["ALL"]


def test_image_names_agree():
    version = re.search(r"project\(runbox VERSION (\S+)", (REPO / "CMakeLists.txt").read_text()).group(1)
    images = {owner: runbox_container(pod)["image"] for owner, (pod, _) in runbox_pods().items()}
    assert set(images.values()) == {f"runbox:{version}"}, images
    # build.sh tags the image with runbox's version, which is the project's.
    assert 'tag=$version' in (DEPLOY / "image" / "build.sh").read_text()


# ---- systemd --------------------------------------------------------------------------

def unit_settings():
    settings = {}
    for line in UNIT.read_text().splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def need_systemd_analyze():
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")


def units_here(tmp_path):
    """The units with runbox's path replaced by one that exists here (verify
    checks that the commands they run are executables), runbox.service first."""
    runbox = REPO / "build" / "runbox"
    program = str(runbox) if os.access(runbox, os.X_OK) else shutil.which("true")
    paths = []
    for unit in (UNIT, UNIT.with_name("runbox-storage.service")):
        path = tmp_path / unit.name
        path.write_text(unit.read_text().replace("/usr/local/bin/runbox", program))
        paths.append(str(path))
    return paths


def test_systemd_units_verify(tmp_path):
    need_systemd_analyze()
    result = subprocess.run(["systemd-analyze", "verify", *units_here(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_systemd_unit_exposure_stays_low(tmp_path):
    # systemd's own score of the sandboxing, 0 (none exposed) to 10 (an
    # unsandboxed service: 9.6); --threshold is ten times the score.
    need_systemd_analyze()
    result = subprocess.run(["systemd-analyze", "security", "--offline=true", "--threshold=50",
                             units_here(tmp_path)[0]], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-400:] + result.stderr


def test_systemd_unit_keeps_only_the_capabilities_runbox_needs():
    settings = unit_settings()
    [caps] = settings["CapabilityBoundingSet"]
    # Each one needed (deploy/systemd/runbox.service says what for); no other.
    assert set(caps.split()) == {"CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_SYS_CHROOT",
                                 "CAP_MKNOD", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_KILL", "CAP_SYS_PTRACE", "CAP_NET_ADMIN",
                                 "CAP_NET_BIND_SERVICE"}
    for setting in ("NoNewPrivileges", "ProtectKernelTunables", "ProtectKernelModules", "ProtectHome",
                    "PrivateTmp", "LockPersonality", "RestrictRealtime", "RestrictSUIDSGID"):
        assert settings[setting] == ["yes"], setting
    assert settings["ProtectSystem"] == ["strict"]
    assert settings["ProtectControlGroups"] == ["no"]  # runbox makes a cgroup per execution


def test_systemd_stop_outlasts_runbox_grace_and_the_token_is_a_credential():
    settings = unit_settings()
    [start] = settings["ExecStart"]
    args = start.split()
    assert option(args, "--state-dir") == f"/var/lib/{settings['StateDirectory'][0]}"
    assert option(args, "--token-file") == "%d/token"
    assert settings["LoadCredential"] == ["token:/etc/runbox/token"]
    assert int(settings["TimeoutStopSec"][0]) > int(option(args, "--grace"))
    assert settings["KillMode"] == ["mixed"]
    # The sessions' image is mounted in the host's namespace first.
    assert settings["Requires"] == ["runbox-storage.service"]
    assert "runbox-storage.service" in settings["After"]
    assert "UMask" not in settings  # 0077 keeps every sandbox from starting


# ---- Scripts ------------------------------------------------------------------------

@pytest.mark.parametrize("shell,script", [
    ("bash", "deploy/image/build.sh"), ("bash", "deploy/image/smoke-test.sh"),
    ("sh", "deploy/image/entrypoint.sh"), ("sh", "deploy/kubernetes/lb/run-nginx.sh")])
def test_script_parses(shell, script):
    result = subprocess.run([shell, "-n", str(REPO / script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
