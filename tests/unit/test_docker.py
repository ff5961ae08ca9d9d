"""Lint of docker/ (images, compose, KubeRay manifests) and docs/deploy.md.

There is no Docker engine or Kubernetes cluster here or in CI, so nothing is built or started:
these tests check statically what would otherwise only break on a user's machine.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from tuner.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
COMPOSE_FILE = DOCKER / "compose.yaml"
ENV_EXAMPLE = DOCKER / ".env.example"
KUBERAY = DOCKER / "kuberay"
DEPLOY_DOC = REPO / "docs" / "deploy.md"

DOCKERFILES = ("Dockerfile.api", "Dockerfile.ray", "Dockerfile.gpu-worker", "Dockerfile.mlflow")
RAY_DOCKERFILES = ("Dockerfile.api", "Dockerfile.ray", "Dockerfile.gpu-worker")
SERVICES = {"postgres", "mlflow", "ray-head", "gpu-worker", "api"}
# Services that run Ray processes or talk to the Ray Jobs API.
RAY_SERVICES = ("ray-head", "gpu-worker", "api")
STORAGE_VOLUME = "tune-storage"
SECRET_NAME = re.compile(r"TOKEN|PASSWORD|SECRET|DATABASE_URL|BACKEND_STORE_URI")
# ${VAR}, ${VAR:-default}, ${VAR:?error}; `$${VAR}` is compose's escape for a literal `$`.
COMPOSE_VAR = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)")
TUNER_VAR = re.compile(r"\bTUNER_[A-Z][A-Z0-9_]*")


# --- loading -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict)
    assert isinstance(data.get("services"), dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def manifests() -> list[dict]:
    docs = []
    for path in sorted(KUBERAY.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return docs


@pytest.fixture(scope="module")
def raycluster(manifests: list[dict]) -> dict:
    found = [d for d in manifests if d.get("kind") == "RayCluster"]
    assert len(found) == 1, "docker/kuberay must hold exactly one RayCluster"
    return found[0]


@pytest.fixture(scope="module")
def api_deployment(manifests: list[dict]) -> dict:
    found = [
        d
        for d in manifests
        if d.get("kind") == "Deployment" and d["metadata"]["name"] == "tuner-api"
    ]
    assert len(found) == 1, "docker/kuberay must hold the tuner-api Deployment"
    return found[0]


def env_example() -> dict[str, str]:
    out = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f".env.example: not KEY=VALUE: {line!r}"
            out[key.strip()] = value.strip()
    return out


def setting_env_names() -> set[str]:
    prefix = Settings.model_config.get("env_prefix", "")
    assert prefix == "TUNER_"
    return {prefix + name.upper() for name in Settings.model_fields}


def pyproject_ray_version() -> str:
    # a regex, not tomllib: the project still supports Python 3.10
    text = (REPO / "pyproject.toml").read_text()
    pins = re.findall(r"""^\s*["']ray(?:\[[^\]]*\])?==([^"']+)["']""", text, flags=re.M)
    assert len(pins) == 1, f"pyproject.toml must pin ray exactly once, got {pins}"
    return pins[0]


# --- Dockerfile parsing --------------------------------------------------------------------


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, buf = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        line = buf + line
        buf = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not buf, f"{path.name}: dangling line continuation"
    return out


def expanded_text(path: Path) -> str:
    """The Dockerfile's instructions with ${ARG} / $ARG replaced by the ARG defaults."""
    instrs = instructions(path)
    args = {}
    for word, rest in instrs:
        if word == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            args[name.strip()] = value.strip().strip("\"'")
    text = "\n".join(f"{word} {rest}" for word, rest in instrs)
    for name, value in args.items():
        text = text.replace("${" + name + "}", value)
        text = re.sub(r"\$" + name + r"\b", value, text)
    return text


def exec_or_shell(rest: str) -> list[str]:
    return json.loads(rest) if rest.startswith("[") else shlex.split(rest)


def copy_sources(path: Path) -> list[str]:
    """Sources of COPY/ADD from the build context (not --from another stage or image)."""
    sources = []
    for word, rest in instructions(path):
        if word not in ("COPY", "ADD"):
            continue
        parts = exec_or_shell(rest)
        flags = [p for p in parts if p.startswith("--")]
        if any(f.startswith("--from") for f in flags):
            continue
        operands = [p for p in parts if not p.startswith("--")]
        assert len(operands) >= 2, f"{path.name}: {word} {rest}"
        sources += operands[:-1]
    return sources


# --- compose helpers -----------------------------------------------------------------------


def service_env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def volume_mounts(service: dict) -> list[tuple[str, str]]:
    """(source, target) of each volume entry, short or long syntax."""
    out = []
    for vol in service.get("volumes", []):
        if isinstance(vol, dict):
            out.append((str(vol.get("source", "")), str(vol["target"])))
        else:
            parts = str(vol).split(":")
            out.append((parts[0], parts[1]) if len(parts) > 1 else ("", parts[0]))
    return out


def is_bind(source: str) -> bool:
    return source.startswith((".", "/", "~"))


def image_repo(image: str) -> str:
    """registry.example.com/tuner-ray:0.1.0 -> tuner-ray; tuner-ray:${TAG} -> tuner-ray."""
    return image.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]


def command_words(service: dict, dockerfile: Path | None) -> list[str]:
    cmd = service.get("command")
    if cmd is None and dockerfile is not None:
        cmds = [rest for word, rest in instructions(dockerfile) if word == "CMD"]
        cmd = cmds[-1] if cmds else ""
        return exec_or_shell(cmd)
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


# --- k8s helpers ---------------------------------------------------------------------------


def pod_specs(doc: dict) -> list[tuple[str, dict]]:
    """(label, pod spec) of every pod template in a RayCluster or Deployment."""
    if doc["kind"] == "RayCluster":
        spec = doc["spec"]
        out = [("head", spec["headGroupSpec"]["template"]["spec"])]
        out += [(g["groupName"], g["template"]["spec"]) for g in spec.get("workerGroupSpecs", [])]
        return out
    if doc["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return [(doc["metadata"]["name"], doc["spec"]["template"]["spec"])]
    return []


def containers(doc: dict) -> list[tuple[str, dict]]:
    return [
        (f"{label}/{c['name']}", c)
        for label, pod in pod_specs(doc)
        for c in pod.get("containers", []) + pod.get("initContainers", [])
    ]


def k8s_env(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


# --- files and references ------------------------------------------------------------------


def test_the_expected_files_exist():
    for name in DOCKERFILES:
        assert (DOCKER / name).is_file(), name
    for path in (COMPOSE_FILE, ENV_EXAMPLE, DEPLOY_DOC, KUBERAY / "raycluster.yaml"):
        assert path.is_file(), path
    for name in ("tuner-api.yaml", "mlflow.yaml"):
        assert (KUBERAY / name).is_file(), name


def test_compose_has_the_services(services: dict):
    assert set(services) == SERVICES


def test_build_dockerfiles_exist_and_every_image_is_built(services: dict):
    built = set()
    for name, svc in services.items():
        build = svc.get("build")
        if build is None:
            continue
        assert isinstance(build, dict), f"{name}: build must name context and dockerfile"
        context = (COMPOSE_FILE.parent / build["context"]).resolve()
        assert context == REPO, f"{name}: build context must be the repo root, got {context}"
        dockerfile = context / build["dockerfile"]
        assert dockerfile.is_file(), f"{name}: {dockerfile} does not exist"
        built.add(dockerfile.name)
    assert built == set(DOCKERFILES)


@pytest.mark.parametrize("name", DOCKERFILES)
def test_copy_sources_exist_and_are_not_dockerignored(name: str):
    path = DOCKER / name
    sources = copy_sources(path)
    ignore = DOCKER / f"{name}.dockerignore"
    ignore_lines = ignore.read_text().splitlines() if ignore.is_file() else []
    allow_list = "*" in [line.strip() for line in ignore_lines]
    for src in sources:
        if src in (".", "./"):
            continue
        assert "$" not in src, f"{name}: COPY source {src!r} depends on a variable"
        assert list(REPO.glob(src.rstrip("/"))), f"{name}: COPY {src}: not in the repo"
        if allow_list:
            assert f"!{src.rstrip('/')}" in [line.strip().rstrip("/") for line in ignore_lines], (
                f"{name}: {src} is excluded by {ignore.name}"
            )
    if name in RAY_DOCKERFILES:
        # the package must be in the image: trials and sweep drivers import it
        assert {"pyproject.toml", "tuner"} <= {s.rstrip("/") for s in sources} or "." in sources


def test_compose_bind_mounts_exist(services: dict):
    binds = [
        (name, src)
        for name, svc in services.items()
        for src, _ in volume_mounts(svc)
        if is_bind(src)
    ]
    assert binds, "expected the postgres init script to be bind-mounted"
    for name, src in binds:
        assert (COMPOSE_FILE.parent / src).exists(), f"{name}: bind source {src} does not exist"


def test_named_volumes_are_declared(compose: dict, services: dict):
    declared = set(compose.get("volumes") or {})
    used = {
        src
        for svc in services.values()
        for src, _ in volume_mounts(svc)
        if src and not is_bind(src)
    }
    assert STORAGE_VOLUME in used
    assert used <= declared, f"undeclared volumes: {used - declared}"


# --- variables and settings ----------------------------------------------------------------


def test_compose_variables_match_env_example():
    used = set(COMPOSE_VAR.findall(COMPOSE_FILE.read_text()))
    listed = set(env_example())
    assert {"RAY_AUTH_TOKEN", "TUNER_API_TOKEN", "POSTGRES_PASSWORD"} <= used
    assert used - listed == set(), "compose reads variables missing from .env.example"
    assert listed - used == set(), ".env.example lists variables compose never reads"


def test_env_example_holds_no_secret_values():
    for key, value in env_example().items():
        if SECRET_NAME.search(key):
            assert value == "", f".env.example must leave {key} empty"


def test_tuner_variables_are_real_settings(services: dict, manifests: list[dict]):
    used: dict[str, str] = {}
    for name, svc in services.items():
        for key in service_env(svc):
            if key.startswith("TUNER_"):
                used[key] = f"compose service {name}"
    for var in TUNER_VAR.findall(COMPOSE_FILE.read_text()):
        used.setdefault(var, "compose.yaml")
    for key in env_example():
        if key.startswith("TUNER_"):
            used.setdefault(key, ".env.example")
    for doc in manifests:
        for label, container in containers(doc):
            for key in k8s_env(container):
                if key.startswith("TUNER_"):
                    used.setdefault(key, f"{doc['kind']} {label}")
    for var in TUNER_VAR.findall(DEPLOY_DOC.read_text()):
        used.setdefault(var, "docs/deploy.md")
    for name in DOCKERFILES:
        for var in TUNER_VAR.findall(expanded_text(DOCKER / name)):
            used.setdefault(var, name)
    assert used, "no TUNER_ settings found at all"
    unknown = {k: where for k, where in used.items() if k not in setting_env_names()}
    assert unknown == {}, "not fields of tuner.settings.Settings"


def test_services_get_their_settings(services: dict):
    for name in RAY_SERVICES:
        env = service_env(services[name])
        for key in ("TUNER_STORAGE_PATH", "TUNER_MLFLOW_TRACKING_URI", "TUNER_DATABASE_URL"):
            assert env.get(key), f"{name}: {key} not set"
        assert env["TUNER_MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
        assert "@postgres:5432/" in env["TUNER_DATABASE_URL"]
    api = service_env(services["api"])
    assert api["TUNER_RAY_ADDRESS"] == "http://ray-head:8265"
    # Ray nodes run on the cluster; an address there would mean "connect elsewhere"
    assert "TUNER_RAY_ADDRESS" not in service_env(services["ray-head"])


def test_no_secrets_baked_into_images():
    for name in DOCKERFILES:
        for word, rest in instructions(DOCKER / name):
            if word in ("ENV", "ARG"):
                assert not SECRET_NAME.search(rest.split("=")[0]), f"{name}: {word} {rest}"


def test_compose_secrets_come_from_variables(services: dict):
    for name, svc in services.items():
        for key, value in service_env(svc).items():
            if SECRET_NAME.search(key):
                assert "${" in value, f"{name}: {key} is a literal, use a variable from .env"


def test_k8s_secrets_come_from_secrets(manifests: list[dict]):
    checked = 0
    for doc in manifests:
        for label, container in containers(doc):
            for key, entry in k8s_env(container).items():
                if SECRET_NAME.search(key):
                    assert "value" not in entry, f"{label}: {key} must come from a Secret"
                    assert entry["valueFrom"]["secretKeyRef"]["name"]
                    checked += 1
    assert checked >= 4


# --- health, ordering, devices, ports ------------------------------------------------------


def test_every_service_has_a_healthcheck(services: dict):
    for name, svc in services.items():
        check = svc.get("healthcheck")
        assert check, f"{name}: no healthcheck"
        assert not check.get("disable"), f"{name}: healthcheck disabled"
        test = check.get("test")
        assert test, f"{name}: empty healthcheck"
        assert test not in (["NONE"], "NONE"), f"{name}: empty healthcheck"


@pytest.mark.parametrize("name", DOCKERFILES)
def test_images_have_a_healthcheck_and_a_non_root_user(name: str):
    instrs = instructions(DOCKER / name)
    checks = [rest for word, rest in instrs if word == "HEALTHCHECK"]
    assert checks, f"{name}: no HEALTHCHECK"
    assert checks[-1] != "NONE", f"{name}: no HEALTHCHECK"
    users = [rest for word, rest in instrs if word == "USER"]
    assert users, f"{name}: runs as root"
    assert users[-1].split(":")[0] not in ("root", "0"), f"{name}: runs as root"


def test_depends_on_waits_for_healthy(services: dict):
    seen = 0
    for name, svc in services.items():
        deps = svc.get("depends_on")
        if deps is None:
            continue
        assert isinstance(deps, dict), f"{name}: depends_on as a list does not wait for health"
        for dep, opts in deps.items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            assert (opts or {}).get("condition") == "service_healthy", f"{name} -> {dep}"
            seen += 1
    assert set(services["api"]["depends_on"]) == {"postgres", "mlflow", "ray-head"}
    assert set(services["gpu-worker"]["depends_on"]) == {"ray-head"}
    assert set(services["mlflow"]["depends_on"]) == {"postgres"}
    assert seen >= 5


def test_gpu_worker_reserves_an_nvidia_device(services: dict):
    devices = services["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"]
    nvidia = [d for d in devices if d.get("driver") == "nvidia" and "gpu" in d["capabilities"]]
    assert nvidia, "gpu-worker reserves no nvidia GPU"
    count = nvidia[0].get("count")
    assert count == "all" or (isinstance(count, int) and count >= 1) or nvidia[0].get("device_ids")


def test_ray_nodes_start_with_the_right_roles(services: dict):
    head = command_words(services["ray-head"], DOCKER / "Dockerfile.ray")
    assert head[:2] == ["ray", "start"]
    assert "--head" in head
    assert "--block" in head
    assert "--dashboard-host=0.0.0.0" in head
    assert "--port=6379" in head
    worker = command_words(services["gpu-worker"], DOCKER / "Dockerfile.gpu-worker")
    assert worker[:2] == ["ray", "start"]
    assert "--address=ray-head:6379" in worker
    assert "--block" in worker
    assert "--head" not in worker


def test_api_serves_on_published_port_8000_with_a_token(services: dict):
    api = services["api"]
    targets = []
    for port in api.get("ports", []):
        if isinstance(port, dict):
            targets.append(str(port["target"]))
        else:
            targets.append(str(port).rsplit(":", 1)[-1].split("/")[0])
    assert "8000" in targets, f"api publishes {api.get('ports')}"
    words = command_words(api, DOCKER / "Dockerfile.api")
    assert words[:2] == ["tuner", "serve"]
    joined = " ".join(words).replace("=", " ")
    assert "--host 0.0.0.0" in joined
    assert "--port 8000" in joined
    assert "${TUNER_API_TOKEN" in service_env(api)["TUNER_API_TOKEN"]


def test_ray_auth_token_on_every_ray_service(services: dict):
    for name in RAY_SERVICES:
        env = service_env(services[name])
        assert env.get("RAY_AUTH_MODE") == "token", name
        assert env.get("RAY_AUTH_TOKEN", "").startswith("${RAY_AUTH_TOKEN"), name


def test_shared_storage_is_mounted_where_settings_point(services: dict):
    paths = set()
    for name in RAY_SERVICES:
        svc = services[name]
        targets = [dst for src, dst in volume_mounts(svc) if src == STORAGE_VOLUME]
        assert len(targets) == 1, f"{name}: {STORAGE_VOLUME} not mounted"
        assert service_env(svc)["TUNER_STORAGE_PATH"] == targets[0], name
        paths.add(targets[0])
    assert len(paths) == 1, f"{STORAGE_VOLUME} mounted at different paths: {paths}"


# --- versions ------------------------------------------------------------------------------


def ray_versions(text: str) -> set[str]:
    pins = re.findall(r"\bray(?:\[[^\]]*\])?==([0-9][0-9A-Za-z.+-]*[0-9A-Za-z])", text)
    tags = re.findall(r"rayproject/ray:([0-9][0-9.]*[0-9])", text)
    return set(pins) | set(tags)


def test_ray_version_is_the_same_everywhere(raycluster: dict):
    pinned = pyproject_ray_version()
    assert pinned == "2.60.0"
    for name in DOCKERFILES:
        found = ray_versions(expanded_text(DOCKER / name))
        if name in RAY_DOCKERFILES:
            assert found == {pinned}, f"{name}: Ray {found}, pyproject pins {pinned}"
        else:
            assert found <= {pinned}, f"{name}: Ray {found}"
    assert str(raycluster["spec"]["rayVersion"]) == pinned


@pytest.mark.parametrize("name", DOCKERFILES)
def test_images_use_python_311(name: str):
    text = expanded_text(DOCKER / name)
    found = set(re.findall(r"python:?(3\.\d+)", text))
    found |= {f"3.{m}" for m in re.findall(r"-py3(\d+)\b", text)}
    assert found == {"3.11"}, f"{name}: Python {found or 'not pinned'}"


# --- KubeRay -------------------------------------------------------------------------------


def test_raycluster_shape(raycluster: dict):
    assert raycluster["apiVersion"] == "ray.io/v1"
    spec = raycluster["spec"]
    assert spec["headGroupSpec"]["rayStartParams"]["dashboard-host"] == "0.0.0.0"
    for key, value in spec["headGroupSpec"]["rayStartParams"].items():
        assert isinstance(value, str), f"rayStartParams.{key} must be a string"
    gpu_groups = [
        g
        for g in spec["workerGroupSpecs"]
        if any(
            int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)) >= 1
            for c in g["template"]["spec"]["containers"]
        )
    ]
    assert gpu_groups, "no worker group has an nvidia.com/gpu limit"
    for g in spec["workerGroupSpecs"]:
        assert g["minReplicas"] <= g["replicas"] <= g["maxReplicas"], g["groupName"]


def test_k8s_images_are_the_ones_compose_builds(
    services: dict, raycluster: dict, api_deployment: dict
):
    built = {
        svc["build"]["dockerfile"].rsplit("/", 1)[-1]: image_repo(svc["image"])
        for svc in services.values()
        if "build" in svc
    }
    spec = raycluster["spec"]
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert image_repo(head["image"]) == built["Dockerfile.ray"]
    for g in spec["workerGroupSpecs"]:
        c = g["template"]["spec"]["containers"][0]
        gpu = int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
        want = built["Dockerfile.gpu-worker"] if gpu else built["Dockerfile.ray"]
        assert image_repo(c["image"]) == want, g["groupName"]
    api = api_deployment["spec"]["template"]["spec"]["containers"][0]
    assert image_repo(api["image"]) == built["Dockerfile.api"]


def test_k8s_ray_auth_and_shared_storage(raycluster: dict, api_deployment: dict, manifests):
    pvcs = {d["metadata"]["name"]: d for d in manifests if d["kind"] == "PersistentVolumeClaim"}
    paths = set()
    for doc in (raycluster, api_deployment):
        for label, pod in pod_specs(doc):
            claims = {
                v["name"]: v["persistentVolumeClaim"]["claimName"]
                for v in pod.get("volumes", [])
                if "persistentVolumeClaim" in v
            }
            for c in pod["containers"]:
                env = k8s_env(c)
                assert env["RAY_AUTH_MODE"]["value"] == "token", label
                assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"], label
                storage = env["TUNER_STORAGE_PATH"]["value"]
                mounts = [m for m in c.get("volumeMounts", []) if m["mountPath"] == storage]
                assert len(mounts) == 1, f"{label}: nothing mounted at {storage}"
                claim = claims[mounts[0]["name"]]
                assert claim in pvcs, f"{label}: PVC {claim} not defined in docker/kuberay"
                assert "ReadWriteMany" in pvcs[claim]["spec"]["accessModes"]
                paths.add(storage)
    assert len(paths) == 1


def test_k8s_api_points_at_the_head_service(raycluster: dict, api_deployment: dict):
    c = api_deployment["spec"]["template"]["spec"]["containers"][0]
    env = k8s_env(c)
    head_svc = f"{raycluster['metadata']['name']}-head-svc"
    assert env["TUNER_RAY_ADDRESS"]["value"] == f"http://{head_svc}:8265"
    assert env["TUNER_API_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert c["command"][:2] == ["tuner", "serve"]
    assert "0.0.0.0" in c["command"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/api/v1/healthz"


# --- docs ----------------------------------------------------------------------------------


def test_deploy_doc_covers_the_four_setups():
    text = DEPLOY_DOC.read_text()
    for needle in (
        "make run",
        "num_gpus_per_learner: 0.25",
        "docker/compose.yaml",
        "ray start --head",
        "ray start --address",
        "RAY_AUTH_TOKEN",
        "TUNER_RAY_ADDRESS=http://head:8265",
        "helm install kuberay-operator kuberay/kuberay-operator",
        "kubectl",
        "docker/kuberay/raycluster.yaml",
        "tests/unit/test_docker.py",
        "not built",
    ):
        assert needle in text, f"docs/deploy.md does not mention {needle!r}"


def test_specs_in_deploy_doc_are_valid():
    from tuner.spec import parse_spec

    blocks = re.findall(r"```yaml\n(.*?)```", DEPLOY_DOC.read_text(), flags=re.S)
    specs = [b for b in (yaml.safe_load(b) for b in blocks) if isinstance(b, dict)]
    specs = [s for s in specs if "algorithm" in s]
    assert specs, "docs/deploy.md shows no example spec"
    for data in specs:
        spec = parse_spec(data)
        assert spec.resources.num_gpus_per_learner == 0.25


@pytest.mark.parametrize("name", DOCKERFILES)
def test_images_build_from_any_package_index_with_the_pinned_torch(name: str):
    """Where PyPI or download.pytorch.org cannot be reached: every image takes the
    indexes as build args (pip reads them from the environment) and the repo's
    constraints; torch is installed alone, from TORCH_INDEX_URL, at the version
    constraints.txt pins, and never unpinned."""
    text = (DOCKER / name).read_text()
    args = dict(re.findall(r"^ARG (\w+)(?:=(.*))?$", text, flags=re.M))
    assert {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT"} <= set(args), args
    assert args["PIP_CONSTRAINT"] == "/tmp/constraints.txt"
    first_pip = text.index("pip install")
    assert text.index("COPY constraints.txt /tmp/constraints.txt") < first_pip
    pinned = re.search(r"^torch==(\S+)$", (REPO / "constraints.txt").read_text(), flags=re.M)
    installs = " ".join(re.findall(r"RUN pip install[^\n]*(?:\\\n[^\n]*)*", text))
    if name in RAY_DOCKERFILES:
        assert args["TORCH_VERSION"] == pinned.group(1)
        assert 'pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"' in text
        assert "--extra-index-url" not in text  # an added index cannot stand in for one
        assert not re.search(r"(?<![\w\"])torch(?![=\w])", installs), installs
    else:
        assert "torch" not in installs


def test_make_images_builds_each_image_with_docker_or_podman():
    makefile = (REPO / "Makefile").read_text()
    target = makefile[makefile.index("\nimages:") :].split("\n\n", 1)[0]
    assert "--format docker" in target
    assert "podman" in makefile
    for image in ("api", "ray", "gpu-worker", "mlflow"):
        assert image in target
    assert "docker/Dockerfile.$$image" in target
