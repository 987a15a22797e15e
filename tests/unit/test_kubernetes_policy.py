"""The Kubernetes manifests against Pod Security's "restricted" level and their own
NetworkPolicies, offline: the files under deploy/kubernetes read as they are (the
containers suite renders them with kustomize and validates them against the schemas).

The restricted level's rules, as Kubernetes documents them: no host namespaces, ports or
paths; only ephemeral, projected and claimed volumes; a non-root user; the runtime's (or a
local) seccomp profile; no privilege escalation; every capability dropped, at most
NET_BIND_SERVICE added back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

MANIFESTS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
           "persistentVolumeClaim", "projected", "secret"}


def resources() -> list[dict[str, Any]]:
    return [d for p in sorted(MANIFESTS.glob("*.yaml"))
            for d in yaml.safe_load_all(p.read_text()) if d]


def pods(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], dict[str, str]]]:
    """Each workload's name, pod spec and pod labels."""
    for d in docs:
        if d["kind"] in WORKLOADS:
            t = d["spec"]["template"]
            yield d["metadata"]["name"], t["spec"], t["metadata"].get("labels", {})


def restricted(name: str, pod: dict[str, Any]) -> list[str]:
    """What in ``pod`` the restricted level forbids, each said with where."""
    bad = [f"{name}: {k}" for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)]
    bad += [f"{name}: volume {v['name']} is not of an allowed type"
            for v in pod.get("volumes", []) if not set(v) - {"name"} <= VOLUMES]
    psc = pod.get("securityContext", {})
    for c in pod.get("initContainers", []) + pod["containers"]:
        where = f"{name}/{c['name']}"
        sc = c.get("securityContext", {})
        if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
            bad.append(f"{where}: runAsNonRoot is not true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            bad.append(f"{where}: runs as user 0")
        seccomp = sc.get("seccompProfile", psc.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            bad.append(f"{where}: seccompProfile is {seccomp!r}")
        if sc.get("privileged"):
            bad.append(f"{where}: privileged")
        if sc.get("allowPrivilegeEscalation", True):
            bad.append(f"{where}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities", {})
        if "ALL" not in caps.get("drop", []):
            bad.append(f"{where}: capabilities do not drop ALL")
        if not set(caps.get("add", [])) <= {"NET_BIND_SERVICE"}:
            bad.append(f"{where}: adds capabilities {caps['add']}")
        bad += [f"{where}: hostPort {p['hostPort']}" for p in c.get("ports", [])
                if p.get("hostPort")]
    return bad


def test_the_namespace_enforces_the_restricted_level() -> None:
    (ns,) = [d for d in resources() if d["kind"] == "Namespace"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("name", sorted(n for n, _, _ in pods(resources())))
def test_each_workload_meets_the_restricted_level(name: str) -> None:
    (pod,) = [p for n, p, _ in pods(resources()) if n == name]
    assert restricted(name, pod) == []


def test_the_check_sees_what_the_restricted_level_forbids() -> None:
    pod = {"hostNetwork": True, "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
           "containers": [{"name": "c", "securityContext": {"privileged": True},
                           "ports": [{"containerPort": 80, "hostPort": 80}]}]}
    said = restricted("w", pod)
    for what in ("hostNetwork", "volume h", "runAsNonRoot", "seccompProfile", "privileged",
                 "allowPrivilegeEscalation", "drop ALL", "hostPort 80"):
        assert any(what in s for s in said), (what, said)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def test_ingress_is_denied_unless_a_policy_lets_it_and_each_policy_names_real_pods() -> None:
    docs = resources()
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    workloads = list(pods(docs))
    assert any(p["spec"]["podSelector"] == {} and p["spec"]["policyTypes"] == ["Ingress"]
               and not p["spec"].get("ingress") for p in policies), "no default deny"
    for p in policies:
        spec = p["spec"]
        targets = [(n, pod) for n, pod, labels in workloads
                   if _selects(spec["podSelector"], labels)]
        assert targets, f"{p['metadata']['name']} selects no pod"
        for rule in spec.get("ingress", []):
            for peer in rule.get("from", []):
                assert any(_selects(peer["podSelector"], labels) for _, _, labels in workloads
                           ), f"{p['metadata']['name']}: {peer} selects no pod"
            for port in rule.get("ports", []):
                named = {q.get("name") for _, pod in targets for c in pod["containers"]
                         for q in c.get("ports", [])}
                assert port["port"] in named, f"{p['metadata']['name']}: port {port['port']}"


def test_only_the_api_is_open_to_every_peer() -> None:
    """A rule without ``from`` lets anyone in: only the API's."""
    docs = resources()
    open_to_all = [p["metadata"]["name"] for p in docs if p["kind"] == "NetworkPolicy"
                   for rule in p["spec"].get("ingress", []) if "from" not in rule]
    assert open_to_all == ["squall-api"]
