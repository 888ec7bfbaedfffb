"""The bundle (`bundle/`) as the real Databricks CLI validates, deploys and runs it, against a stand-in workspace.

`tests/servers/fake_workspace.py` answers the endpoints the CLI calls as the workspace does and refuses what it
refuses; a job run there runs the deployed notebook on this machine with the job's parameters, so a deploy-then-run
shows the dataset each job wrote. The documentation's deploy commands run here exactly as the page shows them.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

from tests.bundle.conftest import (
    REPO,
    SERVICE_PRINCIPAL,
    SERVICE_PRINCIPAL_TOKEN,
    TABLE,
    USER,
    USER_TOKEN,
    Workspace,
)

pytestmark = pytest.mark.services
DOCS_PAGE = REPO / "docs" / "incremental-job.md"
JOBS = {"mds_incremental": "events", "mds_incremental_serverless": "events_serverless"}
ROWS = 100


def targets() -> list[str]:
    return list(_root()["targets"])


def documented_commands() -> list[list[str]]:
    """The shell blocks of the page's deploy section: the user's (first) and the service principal's (second)."""
    text = DOCS_PAGE.read_text()
    section = text[text.index("## Deploy it") :]
    section = section[: section.index("\n## ", 1)]
    return [block.strip().splitlines() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def run_documented(workspace: Workspace, lines: list[str], token: str, checkout: Path) -> list[str]:
    """Run a documented block line by line (`cd` and `databricks ...`, nothing else); each command's stdout."""
    cwd, outputs = checkout, []
    for line in lines:
        argv = shlex.split(line)
        if argv[0] == "cd":
            cwd = cwd / argv[1]
            continue
        assert argv[0] == "databricks", f"the page shows a command CI does not run: {line}"
        outputs.append(workspace.run(argv[1:], token, cwd).stdout)
    return outputs


def resolved(workspace: Workspace, target: str, token: str, checkout: Path) -> dict[str, Any]:
    """The bundle's configuration as the CLI resolves it for `target` and the principal of `token`."""
    done = workspace.run(["bundle", "validate", "-t", target, "--output", "json"], token, checkout / "bundle")
    return json.loads(done.stdout)


def job_parameters(config: dict[str, Any]) -> dict[str, dict[str, str]]:
    jobs = config["resources"]["jobs"]
    return {key: jobs[key]["tasks"][0]["notebook_task"]["base_parameters"] for key in jobs}


def deployed_jobs(workspace: Workspace, token: str) -> dict[str, dict[str, Any]]:
    listed = json.loads(workspace.api("GET", "/api/2.2/jobs/list", token)).get("jobs", [])
    found = {}
    for job in listed:
        detail = json.loads(workspace.api("GET", f"/api/2.2/jobs/get?job_id={job['job_id']}", token))
        acl = json.loads(workspace.api("GET", f"/api/2.0/permissions/jobs/{job['job_id']}", token))
        detail["acl"] = {
            entry.get("user_name") or entry.get("service_principal_name") or entry.get("group_name"): entry[
                "all_permissions"
            ][0]["permission_level"]
            for entry in acl["access_control_list"]
        }
        found[detail["settings"]["name"]] = detail
    return found


def write_table(path: Path) -> None:
    from deltalake import write_deltalake

    ids = list(range(ROWS))
    events = pa.table({"id": pa.array(ids, pa.int64()), "text": [f"event {i}" for i in ids]})
    write_deltalake(str(path), events, configuration={"delta.enableChangeDataFeed": "true"})


def dataset_ids(folder: Path) -> list[int]:
    from streaming import LocalDataset

    dataset = LocalDataset(str(folder))
    return sorted(int(dataset[i]["id"]) for i in range(dataset.num_samples))


@pytest.mark.parametrize("token", [USER_TOKEN, SERVICE_PRINCIPAL_TOKEN], ids=["user", "service_principal"])
def test_validate_strict_passes_on_every_target(workspace_factory, checkout, token):
    workspace = workspace_factory(owners=(USER, SERVICE_PRINCIPAL))
    me = json.loads(workspace.run(["current-user", "me", "--output", "json"], token, checkout).stdout)
    assert me["userName"] == {USER_TOKEN: USER, SERVICE_PRINCIPAL_TOKEN: SERVICE_PRINCIPAL}[token]
    assert targets() == ["dev", "prod"]
    for target in targets():
        done = workspace.run(["bundle", "validate", "--strict", "-t", target], token, checkout / "bundle")
        assert "Validation OK!" in done.stdout, done.stdout + done.stderr


def test_every_target_and_job_writes_its_own_dataset(workspace_factory, checkout):
    """dev (per deployer) and prod never share a dataset, and no two jobs of a target write one."""
    workspace = workspace_factory()
    outs = []
    for target, token in [("dev", USER_TOKEN), ("dev", SERVICE_PRINCIPAL_TOKEN), ("prod", SERVICE_PRINCIPAL_TOKEN)]:
        outs += [
            parameters["out"] for parameters in job_parameters(resolved(workspace, target, token, checkout)).values()
        ]
    assert len(set(outs)) == len(outs) == 6, outs
    for out in outs:
        assert out.startswith("/Volumes/main/default/mds_demo/"), out
        assert not any(other.startswith(out + "/") for other in outs), f"{out} holds another dataset"


@pytest.mark.spark
def test_the_documented_commands_deploy_as_a_user_and_run_both_jobs(workspace_factory, checkout, tmp_path):
    """The page's first block, as written: create the volume, validate, deploy `dev`, run both jobs."""
    table = tmp_path / "events_table"
    write_table(table)
    workspace = workspace_factory(volumes=(), tables={TABLE: table})
    user_block, _ = documented_commands()
    bundle = checkout / "bundle"
    missing = workspace.run(["bundle", "deploy", "-t", "dev"], USER_TOKEN, bundle, check=False)
    assert missing.returncode != 0 and "volume main.default.mds_demo does not exist" in missing.stderr, missing.stderr
    quoted = re.search(r"with\s+`(Error: volume [^`]+)`", DOCS_PAGE.read_text())
    assert quoted is not None and quoted.group(1) in missing.stderr, "the page quotes another error than the CLI's"
    outputs = run_documented(workspace, user_block, USER_TOKEN, checkout)
    config = resolved(workspace, "dev", USER_TOKEN, checkout)
    parameters = job_parameters(config)
    # The wheel is where both jobs install it from.
    for key in JOBS:
        wheel = workspace.root / parameters[key]["install"].lstrip("/")
        assert wheel.is_file() and wheel.name.endswith("-py3-none-any.whl"), wheel
    # Each `bundle run` printed what the notebook returned, and each job's dataset holds the table's rows.
    for key, output in zip(JOBS, outputs[-2:]):
        result = json.loads(output.strip().splitlines()[-1])
        assert (result["method"], result["version"], result["samples"]) == ("snapshot", 0, ROWS), output
        out = parameters[key]["out"]
        assert out.endswith("/" + JOBS[key]) and config["workspace"]["current_user"]["short_name"] in out
        assert dataset_ids(workspace.root / out.lstrip("/")) == list(range(ROWS))
    jobs = deployed_jobs(workspace, USER_TOKEN)
    assert len(jobs) == 2
    for job in jobs.values():
        assert (job["creator_user_name"], job["run_as_user_name"], job["acl"][USER]) == (USER, USER, "IS_OWNER")


def test_the_documented_commands_deploy_prod_as_a_service_principal(workspace_factory, checkout):
    """The page's second block, as written, by a service principal: it owns the jobs and they run as it."""
    workspace = workspace_factory(owners=(USER, SERVICE_PRINCIPAL))
    _, service_principal_block = documented_commands()
    run_documented(workspace, service_principal_block, SERVICE_PRINCIPAL_TOKEN, checkout)
    jobs = deployed_jobs(workspace, SERVICE_PRINCIPAL_TOKEN)
    assert sorted(jobs) == ["mds-incremental", "mds-incremental-serverless"]
    for job in jobs.values():
        assert job["creator_user_name"] == job["run_as_user_name"] == SERVICE_PRINCIPAL
        assert "run_as" not in job["settings"]
        assert job["acl"] == {SERVICE_PRINCIPAL: "IS_OWNER", "admins": "CAN_MANAGE"}
        out = job["settings"]["tasks"][0]["notebook_task"]["base_parameters"]["out"]
        assert out.startswith("/Volumes/main/default/mds_demo/prod/"), out
    paused = jobs["mds-incremental-serverless"]["settings"]["trigger"]["pause_status"]
    assert paused == "PAUSED" and jobs["mds-incremental"]["settings"]["trigger"].get("pause_status") != "PAUSED"
    # A redeploy of the same checkout changes nothing.
    again = workspace.run(["bundle", "deploy", "-t", "prod"], SERVICE_PRINCIPAL_TOKEN, checkout / "bundle")
    assert "Resources: 0 created, 0 changed, 0 deleted, 4 unchanged" in again.stdout + again.stderr, again.stderr
    # A changed variable updates both jobs in place (jobs/reset), their owner and permissions kept.
    changed = workspace.run(
        ["bundle", "deploy", "-t", "prod", "--var", "table=main.sales.orders"],
        SERVICE_PRINCIPAL_TOKEN,
        checkout / "bundle",
    )
    assert "Resources: 0 created, 2 changed, 0 deleted, 2 unchanged" in changed.stdout + changed.stderr, changed.stderr
    updated = deployed_jobs(workspace, SERVICE_PRINCIPAL_TOKEN)
    assert {job["job_id"] for job in updated.values()} == {job["job_id"] for job in jobs.values()}
    for job in updated.values():
        assert job["settings"]["trigger"]["table_update"]["table_names"] == ["main.sales.orders"]
        assert job["acl"] == {SERVICE_PRINCIPAL: "IS_OWNER", "admins": "CAN_MANAGE"}


def test_a_service_principal_named_as_user_name_is_refused(workspace_factory, checkout):
    """The bundle as it was (`run_as: user_name: ${workspace.current_user.userName}`) cannot be deployed by a service
    principal: the Jobs API takes no application id as a user name."""
    workspace = workspace_factory(owners=(USER, SERVICE_PRINCIPAL))
    path = checkout / "bundle" / "databricks.yml"
    root = yaml.safe_load(path.read_text())
    root["targets"]["prod"]["run_as"] = {"user_name": "${workspace.current_user.userName}"}
    path.write_text(yaml.safe_dump(root, sort_keys=False))
    done = workspace.run(["bundle", "deploy", "-t", "prod"], SERVICE_PRINCIPAL_TOKEN, checkout / "bundle", check=False)
    assert done.returncode != 0
    assert f"Principal: UserName({SERVICE_PRINCIPAL}) does not exist" in done.stderr, done.stderr


def test_the_node_type_follows_the_cloud(workspace_factory, checkout):
    """On Azure the AWS default is refused and the documented `--var node_type_id=Standard_D4ds_v5` deploys."""
    workspace = workspace_factory(cloud="azure")
    bundle = checkout / "bundle"
    refused = workspace.run(["bundle", "deploy", "-t", "dev"], USER_TOKEN, bundle, check=False)
    assert refused.returncode != 0 and "Node type i3.xlarge is not supported" in refused.stderr, refused.stderr
    workspace.run(["bundle", "deploy", "-t", "dev", "--var", "node_type_id=Standard_D4ds_v5"], USER_TOKEN, bundle)
    (job,) = [j for j in deployed_jobs(workspace, USER_TOKEN).values() if j["settings"].get("job_clusters")]
    assert job["settings"]["job_clusters"][0]["new_cluster"]["node_type_id"] == "Standard_D4ds_v5"


@pytest.mark.parametrize("cloud", ["aws", "azure", "gcp"])
def test_each_clouds_documented_node_type_is_the_one_its_jobs_api_takes(workspace_factory, cloud):
    """The page's node type per cloud (the default on AWS) is accepted there and refused on the other clouds."""
    documented = {"aws": _root()["variables"]["node_type_id"]["default"]}
    flat = DOCS_PAGE.read_text().replace("\n", " ")
    for name, key in (("Azure", "azure"), ("GCP", "gcp")):
        found = re.search(rf"on {name}(?: deploy)? with `--var node_type_id=([^`]+)`", flat)
        assert found is not None, f"the page gives no node type for {name}"
        documented[key] = found.group(1)
    workspace = workspace_factory(cloud=cloud)
    for other, node_type in documented.items():
        cluster = {
            "job_cluster_key": "c",
            "new_cluster": {"spark_version": "15.4.x-scala2.12", "node_type_id": node_type},
        }
        body = {"name": "j", "job_clusters": [cluster], "tasks": [{"task_key": "t", "job_cluster_key": "c"}]}
        request = ("POST", "/api/2.2/jobs/create", USER_TOKEN, json.dumps(body).encode())
        if other == cloud:
            assert "job_id" in json.loads(workspace.api(*request))
        else:
            assert f"Node type {node_type} is not supported" in workspace.refusal(*request)[1]["message"]


def _root() -> dict[str, Any]:
    return yaml.safe_load((REPO / "bundle" / "databricks.yml").read_text())


def test_the_workspace_refuses_what_the_service_refuses(workspace_factory):
    """The stand-in's refusals that the bundle must not trip on, each as the service words it."""
    workspace = workspace_factory()

    def refusal(method: str, path: str, body: dict[str, Any], token: str = USER_TOKEN) -> str:
        return workspace.refusal(method, path, token, json.dumps(body).encode())[1]["message"]

    task = {"task_key": "t", "notebook_task": {"notebook_path": "/Users/x/nb"}}
    create = "/api/2.2/jobs/create"
    assert refusal("POST", create, {"name": "j", "tasks": [task], "run_as": {"user_name": SERVICE_PRINCIPAL}}) == (
        f"Principal: UserName({SERVICE_PRINCIPAL}) does not exist"
    )
    assert "ServicePrincipalName(" in refusal(
        "POST", create, {"name": "j", "tasks": [task], "run_as": {"service_principal_name": USER}}
    )
    assert "can not be provided for notebook task t" in refusal(
        "POST", create, {"name": "j", "tasks": [{**task, "environment_key": "e"}]}
    )
    assert "job cluster key c, which is not defined" in refusal(
        "POST", create, {"name": "j", "tasks": [{**task, "job_cluster_key": "c"}]}
    )
    job_id = json.loads(workspace.api("POST", create, USER_TOKEN, json.dumps({"name": "j", "tasks": [task]}).encode()))
    acl = {"access_control_list": [{"user_name": SERVICE_PRINCIPAL, "permission_level": "CAN_MANAGE"}]}
    permissions = f"/api/2.0/permissions/jobs/{job_id['job_id']}"
    assert refusal("PUT", permissions, acl) == f"Principal: UserName({SERVICE_PRINCIPAL}) does not exist"
    group_owner = {"access_control_list": [{"group_name": "admins", "permission_level": "IS_OWNER"}]}
    assert "cannot be the owner" in refusal("PUT", permissions, group_owner)
    assert refusal("GET", "/api/2.1/unity-catalog/volumes/main.default.missing", {}) == (
        "Volume 'main.default.missing' does not exist."
    )
    assert "does not exist" in refusal("PUT", "/api/2.0/fs/files/Volumes/main/default/missing/x.whl", {})
    # A run of a notebook that is not in the workspace fails, as the service's run does.
    run = json.loads(workspace.api("POST", "/api/2.2/jobs/run-now", USER_TOKEN, json.dumps(job_id).encode()))
    for _ in range(100):
        state = json.loads(workspace.api("GET", f"/api/2.2/jobs/runs/get?run_id={run['run_id']}", USER_TOKEN))["state"]
        if state["life_cycle_state"] == "TERMINATED":
            break
        time.sleep(0.1)
    assert state["result_state"] == "FAILED" and "Unable to access the notebook" in state["state_message"]
    assert workspace.refusal("GET", "/api/2.0/preview/scim/v2/Me", "dapi-not-a-token")[0] == 401
