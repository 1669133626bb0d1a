"""The deployment files (deploy/kubernetes, deploy/systemd, deploy/compose) checked against the code.

None of their images can be pulled here, so these check what can be checked without them: every file parses
(PyYAML; `kubectl kustomize` and `systemd-analyze verify` where they run), every `pin` command and every PIN_
variable they name exists (read from the CLI and the settings), every long-running role of the CLI has a
Deployment, a unit and a Compose service, each with its probes on the role's own endpoints, and the Prometheus job
names are deploy/prometheus/prometheus.example.yml's.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer
import yaml

from pin.cli import app
from pin.local.up import ROLES as UP_ROLES
from pin.observability.metrics import LIVENESS_PATHS, READINESS_PATHS
from pin.settings import CONSUMER_GROUPS, Settings

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
SYSTEMD = DEPLOY / "systemd"
COMPOSE = DEPLOY / "compose"
EXAMPLE = DEPLOY / "prometheus" / "prometheus.example.yml"
# the API's own probe paths (pin/api/app.py): liveness /healthz, readiness /readyz
API_LIVENESS, API_READINESS = "/healthz", "/readyz"
PIN_VARIABLE = re.compile(r"\bPIN_[A-Z0-9_]*[A-Z0-9]\b")
ROOT_COMMAND = typer.main.get_command(app)


# --- what the code says -------------------------------------------------------------------------------------------


def long_running_roles() -> dict[str, list[str]]:
    """Every long-running role of the CLI, by the name its process logs with: its `pin` arguments."""
    commands: dict[str, Any] = ROOT_COMMAND.commands  # type: ignore[attr-defined]
    roles = {"api": ["api"], "relay": ["relay"]}
    roles.update({name: ["worker", name] for name in commands["worker"].commands})
    roles.update({f"consume-{group}": ["consume", group] for group in CONSUMER_GROUPS})
    assert all(argv[0] in commands for argv in roles.values())
    # `pin up` runs one process of each (and the API)
    assert {tuple(argv) for name, argv in roles.items() if name != "api"} == set(UP_ROLES)
    return roles


def role_of(argv: list[str]) -> str | None:
    """The role a `pin` argument list runs, if it is a long-running one."""
    for role, prefix in long_running_roles().items():
        if argv[: len(prefix)] == prefix:
            return role
    return None


def check_pin_command(argv: list[str]) -> None:
    """``pin *argv`` is a command of the CLI, its options and arguments accepted (parsed, not run)."""
    command: Any = ROOT_COMMAND
    rest = list(argv)
    while hasattr(command, "commands"):
        assert rest, f"`pin {' '.join(argv)}`: a group, not a command"
        assert rest[0] in command.commands, f"`pin {' '.join(argv)}`: no such command"
        command = command.commands[rest.pop(0)]
    try:
        command.make_context("pin", rest)
    except Exception as exc:
        pytest.fail(f"`pin {' '.join(argv)}` is refused by the CLI: {exc}")
    if argv[0] == "consume":
        assert argv[1] in CONSUMER_GROUPS, f"`pin {' '.join(argv)}`: no such consumer group"


def settings_variables() -> set[str]:
    """Every PIN_ variable the settings read."""
    return set(Settings.variables())


def metrics_port_default() -> None:
    """PIN_METRICS_HOST's default serves the local machine only: the deployment files must set it."""
    assert Settings.variable_default("PIN_METRICS_HOST") == "127.0.0.1"


def example_jobs() -> dict[str, list[int]]:
    """The example Prometheus configuration's jobs and the ports of their targets."""
    config = yaml.safe_load(EXAMPLE.read_text())
    return {
        job["job_name"]: [int(t.rsplit(":", 1)[1]) for group in job["static_configs"] for t in group["targets"]]
        for job in config["scrape_configs"]
    }


def job_of(role: str) -> str:
    """The Prometheus job of a role: one per role, one for every consumer group together."""
    job = "pin-consumers" if role.startswith("consume-") else f"pin-{role}"
    assert job in example_jobs(), f"{role}: no job {job} in {EXAMPLE.name}"
    return job


def image_user() -> int:
    """The uid the image runs as (its Containerfile's USER)."""
    [user] = re.findall(r"^USER (\d+):\d+$", (DEPLOY / "container" / "Containerfile").read_text(), re.MULTILINE)
    return int(user)


def principal_of(role: str) -> str | None:
    """The Kafka principal (`pin acls`) a role authenticates as: the relay's, a group's; None without a broker."""
    if role == "relay":
        return "relay"
    return role.removeprefix("consume-") if role.startswith("consume-") else None


def deploy_files() -> Iterator[Path]:
    """The files of the deployment kinds this checks."""
    for folder in (KUBERNETES, SYSTEMD, COMPOSE, DEPLOY / "container"):
        yield from sorted(path for path in folder.rglob("*") if path.is_file())


# --- every file ---------------------------------------------------------------------------------------------------


def test_every_yaml_file_parses() -> None:
    files = [path for path in DEPLOY.rglob("*") if path.suffix in {".yml", ".yaml"}]
    assert len(files) > 20
    for path in files:
        documents = list(yaml.safe_load_all(path.read_text()))
        assert documents, path
        assert all(document is not None for document in documents), path


def test_every_pin_variable_named_is_a_setting() -> None:
    known = settings_variables()
    named: dict[str, set[str]] = {}
    for path in deploy_files():
        for name in PIN_VARIABLE.findall(path.read_text()):
            named.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    assert {"PIN_DATABASE_URL", "PIN_METRICS_PORT", "PIN_METRICS_HOST", "PIN_KAFKA_CLIENT_CONFIG"} <= set(named)
    unknown = {name: sorted(paths) for name, paths in named.items() if name not in known}
    assert not unknown, f"not settings of pin.settings.Settings: {unknown}"


def test_every_pin_command_named_in_a_comment_exists() -> None:
    quoted = re.compile(r"`pin ([a-z][a-z -]*[a-z])`")
    seen = 0
    for path in deploy_files():
        for words in quoted.findall(path.read_text()):
            argv = words.split()
            while argv and not _is_command_path(argv):
                argv.pop()  # prose after the command (`pin relay`, one process)
            assert argv, f"{path.relative_to(ROOT)}: `pin {words}` is no command"
            seen += 1
    assert seen > 10


def _is_command_path(argv: list[str]) -> bool:
    command: Any = ROOT_COMMAND
    for word in argv:
        if not hasattr(command, "commands"):
            return word in CONSUMER_GROUPS  # `pin consume crm`
        if word not in command.commands:
            return False
        command = command.commands[word]
    return True


# --- Kubernetes ---------------------------------------------------------------------------------------------------


def kustomize(folder: Path) -> list[dict[str, Any]]:
    """The resources a kustomization lists, read the way kustomize reads them (files and folders, recursively)."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    resources: list[dict[str, Any]] = []
    for entry in kustomization["resources"]:
        path = (folder / entry).resolve()
        if path.is_dir():
            resources += kustomize(path)
        else:
            resources += [document for document in yaml.safe_load_all(path.read_text()) if document]
    return resources


def test_kustomize_renders_both_kustomizations_where_kubectl_runs() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed here (the YAML itself is checked by the other tests)")
    for folder in (KUBERNETES, KUBERNETES / "migrate"):
        rendered = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=60,
                                  check=False)  # fmt: skip
        assert rendered.returncode == 0, rendered.stderr
        documents = [document for document in yaml.safe_load_all(rendered.stdout) if document]
        assert sorted((d["kind"], d["metadata"]["name"]) for d in documents) == sorted(
            (d["kind"], d["metadata"]["name"]) for d in kustomize(folder)
        )
        assert {d["metadata"].get("namespace", "pin") for d in documents} == {"pin"}
        images = {c["image"] for d in documents if d["kind"] in {"Deployment", "Job"}
                  for c in _containers(d)}  # fmt: skip
        assert len(images) == 1, "every container runs the one image"
        assert "/" in images.pop(), "the image is the one kustomize sets"


def _containers(resource: dict[str, Any]) -> list[dict[str, Any]]:
    spec = resource["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def _config(resources: list[dict[str, Any]]) -> dict[str, str]:
    [config] = [r for r in resources if r["kind"] == "ConfigMap" and r["metadata"]["name"] == "pin-config"]
    data: dict[str, str] = config["data"]
    return data


def test_every_role_has_a_deployment_with_probes_on_its_own_endpoints() -> None:
    resources = kustomize(KUBERNETES)
    config = _config(resources)
    assert config["PIN_METRICS_HOST"] == "0.0.0.0"  # noqa: S104 - reachable by the kubelet's probes and Prometheus
    metrics_port_default()
    deployments = {r["metadata"]["name"]: r for r in resources if r["kind"] == "Deployment"}
    budgets = [r for r in resources if r["kind"] == "PodDisruptionBudget"]
    stop_timeout = Settings.variable_default("PIN_STOP_TIMEOUT_SECONDS")
    found: dict[str, str] = {}
    for name, deployment in deployments.items():
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        check_pin_command(container["args"])
        role = role_of(container["args"])
        assert role is not None, f"{name}: {container['args']} is no long-running role"
        assert role not in found.values(), f"two Deployments run {role}"
        found[name] = role
        assert deployment["spec"]["replicas"] >= 2, f"{name}: one replica cannot survive a node"
        pod = deployment["spec"]["template"]
        assert pod["spec"]["terminationGracePeriodSeconds"] > stop_timeout
        assert pod["spec"]["securityContext"]["runAsUser"] == image_user(), f"{name}: not the image's user"
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        ports = {port["name"]: port["containerPort"] for port in container["ports"]}
        if role == "api":
            port = int(container["args"][container["args"].index("--port") + 1])
            liveness, readiness = {API_LIVENESS}, {API_READINESS}
        else:
            port = int(config["PIN_METRICS_PORT"])
            liveness, readiness = LIVENESS_PATHS, READINESS_PATHS
        for probe, paths in (("livenessProbe", liveness), ("readinessProbe", readiness)):
            check = container[probe]["httpGet"]
            assert check["path"] in paths, f"{name}: {probe} on {check['path']}"
            assert ports[check["port"]] == port, f"{name}: {probe} on another port than the role's"
            assert container[probe]["timeoutSeconds"] > 2, "above the readiness probe's own bound per dependency"
        annotations = pod["metadata"]["annotations"]
        assert annotations["prometheus.io/job"] == job_of(role)
        assert int(annotations["prometheus.io/port"]) == port
        resources_of = container["resources"]
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(resources_of[kind]), f"{name}: {kind}"
        secrets = {
            item["name"]: item["valueFrom"]["secretKeyRef"]["key"]
            for item in container.get("env", [])
            if "secretKeyRef" in item.get("valueFrom", {})
        }
        principal = principal_of(role)
        if principal is None:
            assert "PIN_KAFKA_CLIENT_CONFIG" not in secrets
        else:
            assert secrets["PIN_KAFKA_CLIENT_CONFIG"] == principal, f"{name}: another principal's credentials"
            Settings().kafka.principal(principal)  # a principal `pin acls` grants to
        labels = pod["metadata"]["labels"]
        covering = [b for b in budgets if b["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        assert len(covering) == 1, f"{name}: {len(covering)} PodDisruptionBudgets"
    assert sorted(found.values()) == sorted(long_running_roles()), "a role without a Deployment"
    assert {job_of(role) for role in found.values()} == set(example_jobs())
    [service] = [r for r in resources if r["kind"] == "Service"]
    api_labels = deployments["pin-api"]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= api_labels.items()


def test_the_migration_job_is_applied_before_the_roles() -> None:
    roles = kustomize(KUBERNETES)
    assert not [r for r in roles if r["kind"] == "Job"], "the Job is applied on its own, before the roles"
    [job] = [r for r in kustomize(KUBERNETES / "migrate") if r["kind"] == "Job"]
    spec = job["spec"]["template"]["spec"]
    assert [c["args"] for c in spec["initContainers"]] == [["migrate"]]
    assert [c["args"] for c in spec["containers"]] == [["topics"]]  # after the schema, as the operator
    for container in _containers(job):
        check_pin_command(container["args"])
    [topics] = spec["containers"]
    assert [e["valueFrom"]["secretKeyRef"]["key"] for e in topics["env"]] == ["operator"]
    readme = (KUBERNETES / "kustomization.yaml").read_text()
    assert readme.index("apply -k deploy/kubernetes/migrate") < readme.index("wait --for=condition=complete")
    assert readme.index("wait --for=condition=complete") < readme.index("apply -k deploy/kubernetes\n")


# --- systemd ------------------------------------------------------------------------------------------------------


def unit(path: Path) -> dict[str, list[str]]:
    """A unit's settings, by key (a key may repeat); comments and sections left out."""
    values: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            values.setdefault(key.strip(), []).append(value.strip())
    return values


def _pin_argv(exec_start: str) -> list[str]:
    binary, *argv = shlex.split(exec_start)
    assert binary == "/opt/pin/bin/pin", exec_start
    return argv


def test_every_role_has_a_unit_with_its_probes_and_the_examples_port() -> None:
    metrics_port_default()
    jobs = example_jobs()
    target = unit(SYSTEMD / "pin.target")
    wants = {name for line in target["Wants"] for name in line.split()}
    seen: dict[str, str] = {}
    for path in sorted(SYSTEMD.glob("pin-*.service")):
        settings = unit(path)
        argvs = [_pin_argv(line) for line in settings.get("ExecStart", []) if "/opt/pin/bin/pin" in line]
        for argv in argvs:
            check_pin_command(argv)
        roles = [role_of(argv) for argv in argvs]
        if path.name == "pin-migrate.service":
            assert argvs == [["migrate"], ["topics"]]
            continue
        if not any(roles):
            continue
        [role] = roles
        assert role is not None
        assert path.name == f"pin-{role}.service"
        seen[role] = path.name
        assert "pin-migrate.service" in settings["Requires"]
        assert "pin-migrate.service" in settings["After"][0]
        environment = dict(item.split("=", 1) for line in settings.get("Environment", []) for item in line.split())
        if role == "api":
            [argv] = argvs
            port = int(argv[argv.index("--port") + 1])
        else:
            port = int(environment["PIN_METRICS_PORT"])
            assert environment["PIN_METRICS_HOST"] == "0.0.0.0"  # noqa: S104 - a remote Prometheus scrapes it
        assert port in jobs[job_of(role)], f"{path.name}: port {port} is not the example's for {job_of(role)}"
        [ready] = settings["ExecStartPost"]
        address = urlsplit(ready.split()[-1])
        assert (address.port, address.path) == (port, API_READINESS if role == "api" else "/readyz")
        assert address.path in (READINESS_PATHS if role != "api" else {API_READINESS})
        assert f"pin-liveness@pin-{role}:{port}.timer" in wants, f"{role}: no liveness probe"
        assert path.name in wants
        principal = principal_of(role)
        if principal is not None:
            assert f"/etc/pin/{role}.env" in settings["EnvironmentFile"], f"{role}: no credentials of its own"
    assert sorted(seen) == sorted(long_running_roles()), "a role without a unit"
    probe = (SYSTEMD / "pin-probe").read_text()
    assert "/healthz" in probe
    assert "/healthz" in LIVENESS_PATHS  # so the one path is every role's liveness, the API's too
    assert "pin-probe %i" in (SYSTEMD / "pin-liveness@.service").read_text()


def test_the_units_verify_where_systemd_analyze_runs(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None or not Path("/usr/lib/systemd/system").is_dir():
        pytest.skip("systemd-analyze is not installed here (the units' contents are checked by the other test)")
    # a root of its own: the system's units (sysinit.target, ...), these units, and stand-ins for the commands they
    # run (verify refuses a unit whose command is not executable)
    shutil.copytree("/usr/lib/systemd/system", tmp_path / "usr/lib/systemd/system", symlinks=True)
    units = tmp_path / "etc/systemd/system"
    units.mkdir(parents=True)
    names = []
    for path in sorted(SYSTEMD.iterdir()):
        if path.suffix in {".service", ".timer", ".target"}:
            shutil.copy(path, units / path.name)
            names.append(path.name)
            for line in path.read_text().splitlines():
                if line.startswith(("ExecStart=", "ExecStartPost=")):
                    stand_in = tmp_path / shlex.split(line.split("=", 1)[1].lstrip("-"))[0].lstrip("/")
                    stand_in.parent.mkdir(parents=True, exist_ok=True)
                    stand_in.write_text("#!/bin/sh\n")
                    stand_in.chmod(0o755)
    verified = subprocess.run([analyze, "verify", "--man=no", f"--root={tmp_path}", *names], cwd=units,
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert (verified.returncode, verified.stdout + verified.stderr) == (0, ""), verified.stderr


# --- Compose ------------------------------------------------------------------------------------------------------


def test_every_role_has_a_compose_service_with_its_probe() -> None:
    compose = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    services: dict[str, Any] = compose["services"]
    seen: dict[str, str] = {}
    for name, service in services.items():
        command = service.get("command")
        if not isinstance(command, list) or not service.get("image", "").startswith("${IMAGE:"):
            continue
        check_pin_command(command)
        environment = service["environment"]
        assert not (set(environment) - settings_variables()), f"{name}: only PIN_* configuration"
        role = role_of(command)
        if role is None:
            assert command in (["migrate"], ["topics"]), name
            assert service["restart"] == "no"
            continue
        seen[role] = name
        assert service["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
        assert service["depends_on"]["topics"] == {"condition": "service_completed_successfully"}
        port = int(command[command.index("--port") + 1]) if role == "api" else int(environment["PIN_METRICS_PORT"])
        if role != "api":
            assert environment["PIN_METRICS_HOST"] == "0.0.0.0"  # noqa: S104 - Prometheus is another container
        probe = " ".join(service["healthcheck"]["test"])
        address = urlsplit(re.search(r"http://[^']+", probe).group(0))  # type: ignore[union-attr]
        assert address.port == port, f"{name}: its probe asks another port"
        assert address.path in (READINESS_PATHS | LIVENESS_PATHS if role != "api" else {API_READINESS, API_LIVENESS})
    assert sorted(seen) == sorted(long_running_roles()), "a role without a Compose service"

    # the production-like parts: PostgreSQL, Kafka in KRaft mode, Prometheus with the rules, Grafana provisioned
    assert "postgres" in services["postgres"]["image"]
    kafka = services["kafka"]
    assert "apache/kafka" in kafka["image"]
    assert set(kafka["environment"]["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert "KAFKA_ZOOKEEPER_CONNECT" not in kafka["environment"]
    prometheus = services["prometheus"]
    mounts = {volume.split(":")[1]: volume.split(":")[0] for volume in prometheus["volumes"]}
    assert (COMPOSE / mounts["/etc/prometheus/rules"]).resolve() == DEPLOY / "prometheus"
    config = yaml.safe_load((COMPOSE / mounts["/etc/prometheus/prometheus.yml"]).read_text())
    assert [rule.rsplit("/", 1)[0] for rule in config["rule_files"]] == ["/etc/prometheus/rules"]
    assert list(DEPLOY.glob("prometheus/" + config["rule_files"][0].rsplit("/", 1)[1]))
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == set(example_jobs()), "the Compose Prometheus's jobs are the example's"
    for role, name in seen.items():
        targets = [t for group in jobs[job_of(role)]["static_configs"] for t in group["targets"]]
        assert any(target.split(":")[0] == name for target in targets), f"{job_of(role)} does not scrape {name}"
    grafana = services["grafana"]
    mounts = {volume.split(":")[1]: volume.split(":")[0] for volume in grafana["volumes"]}
    provisioning = COMPOSE / mounts["/etc/grafana/provisioning"]
    assert provisioning.resolve() == DEPLOY / "grafana" / "provisioning"
    [provider] = yaml.safe_load((provisioning / "dashboards" / "pin.yml").read_text())["providers"]
    assert (COMPOSE / mounts[provider["options"]["path"]]).resolve() == DEPLOY / "grafana" / "dashboards"
    assert "PROMETHEUS_URL" in grafana["environment"]
