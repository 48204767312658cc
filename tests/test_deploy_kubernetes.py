"""The Kubernetes base (deploy/kubernetes/, kustomize): every resource validates against the
Kubernetes schemas offline (kubernetes-validate, strict), and the resources agree with each
other, with the image (the Containerfile) and with the gateway: labels and selectors, names,
ports, where the configuration file is read, the user, the writable folders, and probes that
pass against a real gateway started with the ConfigMap's file.

The base is plain resources (the kustomization lists them and does nothing else), so reading
the files it lists is rendering it; where a kustomize is at hand (``kubectl kustomize``) its
rendering is compared too.
"""

from __future__ import annotations

import json
import re
import runpy
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from conftest import gateway_env
from wire import HttpServer

REPO = Path(__file__).resolve().parent.parent
BASE = REPO / "deploy" / "kubernetes"
HEALTHCHECK = REPO / "deploy" / "container" / "healthcheck.py"
TOKEN = "kubernetes-probe-token-31f0a7"
LABEL = "app.kubernetes.io/name"


# --- what the files say -------------------------------------------------------------------


def kustomization() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    return data


def rendered() -> list[dict[str, Any]]:
    """Every resource the base lists, in its order."""
    docs = []
    for name in kustomization()["resources"]:
        docs.extend(d for d in yaml.safe_load_all((BASE / name).read_text()) if d is not None)
    return docs


def one(kind: str) -> dict[str, Any]:
    found = [doc for doc in rendered() if doc["kind"] == kind]
    assert len(found) == 1, f"{kind}: {len(found)} found"
    return found[0]


def gateway_container() -> dict[str, Any]:
    containers = one("Deployment")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["gateway"]
    container: dict[str, Any] = containers[0]
    return container


def containerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the image's last stage; continuation lines joined."""
    lines: list[str] = []
    pending = ""
    for raw in (REPO / "Containerfile").read_text().splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        pending += raw.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        lines.append(pending)
        pending = ""
    last = max(i for i, line in enumerate(lines) if line.split()[0] == "FROM")
    return [(w, " ".join(r.split())) for w, _, r in (line.partition(" ") for line in lines[last:])]


def image(instruction: str) -> str:
    values = [rest for word, rest in containerfile() if word == instruction]
    assert len(values) == 1, f"{instruction}: {values}"
    return values[0]


def image_env() -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S+)", image("ENV")))


def image_command() -> list[str]:
    return [*json.loads(image("ENTRYPOINT")), *json.loads(image("CMD"))]


def image_copies() -> dict[str, str]:
    """Destination in the image → source in the build context, of the final stage's COPYs."""
    return dict(
        reversed(rest.split())
        for word, rest in containerfile()
        if word == "COPY" and not rest.startswith("--from")
    )


def probes() -> dict[str, list[str]]:
    container = gateway_container()
    return {
        kind: container[kind]["exec"]["command"]
        for kind in ("startupProbe", "livenessProbe", "readinessProbe")
    }


# --- the tests ------------------------------------------------------------------------------


def test_the_base_is_plain_resources_and_lists_every_manifest_in_its_folder():
    assert set(kustomization()) == {"apiVersion", "kind", "resources"}
    listed = kustomization()["resources"]
    on_disk = sorted(p.name for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk and len(set(listed)) == len(listed)
    kinds = sorted(doc["kind"] for doc in rendered())
    assert kinds == [
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "Service",
    ]


def test_every_resource_validates_against_the_kubernetes_schemas_strictly():
    version = kubernetes_validate.latest_version()
    for doc in rendered():
        # Raises ValidationError naming the field (strict: an unknown field is an error too).
        kubernetes_validate.validate(doc, version, strict=True)


def test_a_wrong_field_fails_the_validation_the_suite_relies_on():
    deployment = one("Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["periodSecond"] = 5
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, kubernetes_validate.latest_version(), strict=True)


def test_selectors_labels_and_names_agree():
    deployment, service = one("Deployment"), one("Service")
    hpa, pdb = one("HorizontalPodAutoscaler"), one("PodDisruptionBudget")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector == {LABEL: "mcp-gateway"} and selector.items() <= pod_labels.items()
    assert service["spec"]["selector"] == selector
    assert pdb["spec"]["selector"]["matchLabels"] == selector
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert all(c["labelSelector"]["matchLabels"] == selector for c in spread)
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": deployment["apiVersion"],
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    # Applying the base again sets replicas back to the autoscaler's floor, no lower.
    assert deployment["spec"]["replicas"] == hpa["spec"]["minReplicas"] >= 2
    assert hpa["spec"]["maxReplicas"] > hpa["spec"]["minReplicas"]
    # A drain can always go ahead: the budget leaves room below the floor.
    assert pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]
    assert all(doc["metadata"]["labels"][LABEL] == "mcp-gateway" for doc in rendered())


def test_ports_agree_with_the_image_and_the_service():
    command = image_command()
    port = int(command[command.index("--port") + 1])
    assert command[command.index("--host") + 1] == "0.0.0.0"
    assert image("EXPOSE") == str(port)
    (container_port,) = gateway_container()["ports"]
    assert container_port["containerPort"] == port
    (service_port,) = one("Service")["spec"]["ports"]
    assert service_port["targetPort"] == container_port["name"]
    # The probes give no port: the check's default must be the image's.
    assert runpy.run_path(str(HEALTHCHECK))["DEFAULT_PORT"] == port


def test_the_configmap_is_mounted_where_the_image_reads_its_configuration():
    container = gateway_container()
    volumes = {v["name"]: v for v in one("Deployment")["spec"]["template"]["spec"]["volumes"]}
    config_path = Path(image_env()["MCP_GATEWAY_CONFIG"])
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == str(config_path.parent)]
    assert mount["readOnly"] is True
    configmap = one("ConfigMap")
    assert volumes[mount["name"]]["configMap"]["name"] == configmap["metadata"]["name"]
    assert set(configmap["data"]) == {config_path.name}
    # The Service's name is among the Host names the gateway accepts.
    toml = tomllib.loads(configmap["data"][config_path.name])
    service = one("Service")["metadata"]["name"]
    assert {service, f"{service}:*"} <= set(toml["gateway"]["allowed_hosts"])


def test_tokens_come_from_the_secret_the_docs_create():
    tokens, services = gateway_container()["envFrom"]
    name = tokens["secretRef"]["name"]
    assert "optional" not in tokens["secretRef"]  # no Secret, no pod: never an open gateway
    # The URLs of the shared audit database and limit store: only for deployments using them
    # (one that names them in its configuration without the URLs refuses to start).
    assert services["secretRef"]["optional"] is True
    docs = (REPO / "docs" / "deploy.md").read_text()
    kustomization = (BASE / "kustomization.yaml").read_text()
    for secret in (name, services["secretRef"]["name"]):
        assert f"kubectl create secret generic {secret}" in docs
        assert f"kubectl create secret generic {secret}" in kustomization
    for variable in ("MCP_GATEWAY_AUDIT_DATABASE_URL", "MCP_GATEWAY_LIMIT_REDIS_URL"):
        assert variable in docs and variable in kustomization
    # Nothing secret in the ConfigMap or the Deployment: its one variable is the pod's name.
    assert "MCP_GATEWAY_TOKEN" not in yaml.safe_dump(one("ConfigMap"))
    (replica,) = gateway_container()["env"]
    assert replica == {
        "name": "MCP_GATEWAY_REPLICA_NAME",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
    }


def test_the_pod_runs_as_the_images_non_root_user_on_a_read_only_root():
    spec = one("Deployment")["spec"]["template"]["spec"]
    uid, gid = (int(x) for x in image("USER").split(":"))
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert (spec["securityContext"]["runAsUser"], spec["securityContext"]["runAsGroup"]) == (
        uid,
        gid,
    )
    assert uid != 0 and spec["automountServiceAccountToken"] is False
    context = gateway_container()["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    # Everything the gateway writes is on a volume: the audit log and the schema cache (the
    # image's XDG folders), relative data paths (its working directory), temporary files.
    writable = [
        Path(m["mountPath"])
        for m in gateway_container()["volumeMounts"]
        if not m.get("readOnly", False)
    ]
    env = image_env()
    for folder in (env["XDG_STATE_HOME"], env["XDG_CACHE_HOME"], image("WORKDIR"), "/tmp"):
        assert any(Path(folder).is_relative_to(w) for w in writable), folder
    resources = gateway_container()["resources"]
    assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}


def test_the_probes_run_the_images_check_on_the_gateways_health_paths():
    copies = image_copies()
    for kind, command in probes().items():
        python, *flags, script, path = command
        assert python == "/opt/mcp-gateway/bin/python" and flags == ["-I", "-S"], kind
        assert copies[script] == HEALTHCHECK.relative_to(REPO).as_posix(), kind
        assert path == ("/readyz" if kind == "readinessProbe" else "/healthz"), kind
    healthcheck = json.loads(image("HEALTHCHECK").split(" CMD ", 1)[1])
    assert healthcheck == probes()["livenessProbe"]


@pytest.fixture(scope="module")
def gateway_from_the_configmap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """The gateway with the ConfigMap's file and the token the Secret would give."""
    work = tmp_path_factory.mktemp("kubernetes")
    config = work / "gateway.toml"
    config.write_text(one("ConfigMap")["data"]["gateway.toml"])
    env = gateway_env(
        MCP_GATEWAY_CONFIG=str(config), MCP_GATEWAY_TOKEN=TOKEN, MCP_GATEWAY_PLUGINS="queue"
    )
    with HttpServer(work, env) as server:
        yield server


def _probe(command: list[str], port: int, **env: str) -> subprocess.CompletedProcess[str]:
    """A probe's command as the kubelet runs it in the pod, here: this repository's script,
    this interpreter, the test gateway's port; the environment is the pod's."""
    _python, *flags, _script, path = command
    return subprocess.run(
        [sys.executable, *flags, str(HEALTHCHECK), path, str(port)],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_each_probe_passes_against_a_gateway_started_with_the_configmap(
    gateway_from_the_configmap, tmp_path
):
    server = gateway_from_the_configmap
    config = tmp_path / "gateway.toml"
    config.write_text(one("ConfigMap")["data"]["gateway.toml"])
    pod = {"MCP_GATEWAY_CONFIG": str(config), "MCP_GATEWAY_TOKEN": TOKEN}
    for kind, command in probes().items():
        done = _probe(command, server.port, **pod)
        assert (done.returncode, done.stderr) == (0, ""), kind
    # The Host header it sends is what makes it pass: the gateway refuses its own address.
    assert server.client.get(server.url + "/healthz").status_code == 421


def test_a_probe_fails_with_one_line_when_the_gateway_refuses_it(
    gateway_from_the_configmap, tmp_path
):
    server = gateway_from_the_configmap
    config = tmp_path / "gateway.toml"
    config.write_text(one("ConfigMap")["data"]["gateway.toml"])
    readiness = probes()["readinessProbe"]
    pod = {"MCP_GATEWAY_CONFIG": str(config), "MCP_GATEWAY_TOKEN": "wrong-token-5e2b"}
    wrong = _probe(readiness, server.port, **pod)
    assert wrong.returncode == 1 and wrong.stderr.count("\n") == 1
    assert wrong.stderr.startswith("healthcheck: GET /readyz: HTTP 401")
    assert "wrong-token-5e2b" not in wrong.stderr


@pytest.mark.skipif(
    not (shutil.which("kustomize") or shutil.which("kubectl")),
    reason="neither kustomize nor kubectl (kubectl kustomize) is on PATH",
)
def test_kustomize_renders_the_same_resources():
    cmd = ["kustomize", "build"] if shutil.which("kustomize") else ["kubectl", "kustomize"]
    done = subprocess.run([*cmd, str(BASE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    theirs = [d for d in yaml.safe_load_all(done.stdout) if d is not None]

    def key(doc: dict[str, Any]) -> tuple[str, str]:
        return doc["kind"], doc["metadata"]["name"]

    assert sorted(theirs, key=key) == sorted(rendered(), key=key)
