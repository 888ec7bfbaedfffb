"""Storage fixtures shared by the suite: buckets on the real servers (`tests/services.py`) and one `Remote` per scheme.

A `Remote` knows a fresh URL prefix on its server and how to configure the environment for it, including
wrong credentials and an endpoint routed through a `FlakyProxy`. `credential_free_environment` strips the
machine's cloud credentials and disables metadata-server probes. Loaded for every test by `tests/conftest.py`
(`pytest_plugins`); nothing here is autouse.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from streaming.storage.registry import clear_storage_cache
from tests.servers.flaky_proxy import FlakyProxy
from tests.servers.hub_and_sftp import known_hosts_line
from tests.services import OCI_FINGERPRINT, OCI_TENANCY, OCI_USER, Service, free_port

BUCKET = "storage-tests"
CREDENTIAL_PREFIXES = ("AWS_", "AZURE_", "DATABRICKS_", "GOOGLE_", "GCS_", "OCI_", "S3_", "CLOUDSDK_")
CREDENTIAL_PREFIXES += ("HF_", "COMPOSER_SFTP_")  # hf:// and sftp://
REMOTE_SCHEMES = ["s3", "gs", "azure", "abfss", "azure-dl", "oci", "dbfs", "volumes", "hf", "sftp"]
ALL_SCHEMES = ["local", *REMOTE_SCHEMES]
SECRETS = {"wrong-secret-value-123", "dapi-wrong-token-456", "hf_WrongToken789"}


@pytest.fixture
def credential_free_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[None]:
    """No credentials of the machine, no metadata-server probes, and no backend cached across tests.

    Not autouse: the conftests of the directories that talk to storage request it from an autouse fixture.
    """
    for name in list(os.environ):
        if name.startswith(CREDENTIAL_PREFIXES) or name in (
            "STORAGE_EMULATOR_HOST",
            "MOSAICML_STREAMING_AWS_REQUESTER_PAYS",
        ):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "missing-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "missing-aws-credentials"))
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "missing-databrickscfg"))
    monkeypatch.setenv("OCI_CONFIG_FILE", str(tmp_path / "missing-oci-config"))
    clear_storage_cache()
    yield
    clear_storage_cache()


@dataclass
class Remote:
    """One scheme's test location: `root` is a fresh, empty URL prefix."""

    scheme: str
    root: str
    monkeypatch: pytest.MonkeyPatch
    configure: Callable[[str | None], None]
    break_credentials: Callable[[], None] = lambda: None
    port: int | None = None
    proxies: list[FlakyProxy] = field(default_factory=list)

    def url(self, relative: str) -> str:
        return self.root.rstrip("/") + "/" + relative

    def through_proxy(self) -> FlakyProxy:
        """Route this scheme's endpoint through a new FlakyProxy and return it."""
        proxy = FlakyProxy(self.port)
        self.proxies.append(proxy)
        self.configure(f"http://127.0.0.1:{proxy.port}")
        clear_storage_cache()
        return proxy

    def unreachable(self) -> None:
        """Point this scheme's endpoint at a loopback port where nothing listens."""
        self.configure(f"http://127.0.0.1:{free_port()}")
        clear_storage_cache()


@pytest.fixture(scope="session")
def s3_bucket(seaweedfs: Service) -> str:
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=seaweedfs.endpoint,
        region_name="us-east-1",
        aws_access_key_id=seaweedfs.extra["key"],
        aws_secret_access_key=seaweedfs.extra["secret"],
    )
    client.create_bucket(Bucket=BUCKET)
    return BUCKET


@pytest.fixture(scope="session")
def gcs_bucket(fake_gcs: Service) -> str:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    os.environ["STORAGE_EMULATOR_HOST"] = fake_gcs.endpoint
    try:
        storage.Client(project="test", credentials=AnonymousCredentials()).create_bucket(BUCKET)
    finally:
        del os.environ["STORAGE_EMULATOR_HOST"]
    return BUCKET


@pytest.fixture(scope="session")
def azure_container(azurite: Service) -> str:
    from azure.storage.blob import BlobServiceClient

    BlobServiceClient.from_connection_string(azurite.extra["connection_string"]).create_container(BUCKET)
    return BUCKET


@pytest.fixture(scope="session")
def oci_bucket(fake_oci: Service) -> str:
    import oci

    config = oci.config.from_file(str(fake_oci.extra["config_file"]))
    client = oci.object_storage.ObjectStorageClient(config, service_endpoint=fake_oci.endpoint)
    client.create_bucket(
        fake_oci.extra["namespace"],
        oci.object_storage.models.CreateBucketDetails(name=BUCKET, compartment_id=OCI_TENANCY),
    )
    return BUCKET


def _azure_connection_string(service: Service, endpoint: str | None, key: str | None = None) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={service.extra['account']};"
        f"AccountKey={key or service.extra['key']};BlobEndpoint={endpoint or service.endpoint}/"
        f"{service.extra['account']};"
    )


def make_remote(scheme: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Remote:
    """Build the `Remote` for `scheme`, starting its server if needed."""
    unique = uuid.uuid4().hex[:12]
    if scheme == "local":
        return Remote(scheme, str(tmp_path / "remote"), monkeypatch, lambda endpoint: None)
    if scheme == "fuse":  # `/Volumes/...` on the FUSE mount with a volume's limits (tests/volume_fuse.py)
        root, _ = request.getfixturevalue("fuse_volume_mount").folder()
        return Remote(scheme, root, monkeypatch, lambda endpoint: None)
    if scheme == "s3":
        server: Service = request.getfixturevalue("seaweedfs")
        bucket = request.getfixturevalue("s3_bucket")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", server.extra["key"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", server.extra["secret"])
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

        def configure(endpoint: str | None) -> None:
            monkeypatch.setenv("S3_ENDPOINT_URL", endpoint or server.endpoint)

        configure(None)
        return Remote(
            scheme,
            f"s3://{bucket}/{unique}",
            monkeypatch,
            configure,
            lambda: monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value-123"),
            server.port,
        )
    if scheme == "gs":
        server = request.getfixturevalue("fake_gcs")
        bucket = request.getfixturevalue("gcs_bucket")

        def configure(endpoint: str | None) -> None:
            monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint or server.endpoint)

        def break_credentials() -> None:
            monkeypatch.delenv("STORAGE_EMULATOR_HOST")
            monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing-key.json"))

        configure(None)
        return Remote(scheme, f"gs://{bucket}/{unique}", monkeypatch, configure, break_credentials, server.port)
    if scheme in ("azure", "abfss", "azure-dl"):
        server = request.getfixturevalue("azurite")
        container = request.getfixturevalue("azure_container")

        def configure(endpoint: str | None) -> None:
            monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", _azure_connection_string(server, endpoint))

        def break_credentials() -> None:
            wrong = "d3Jvbmcta2V5LXdyb25nLXNlY3JldC12YWx1ZS0xMjM="
            SECRETS.add(wrong)
            monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", _azure_connection_string(server, None, wrong))

        configure(None)
        root = {
            "azure": f"azure://{container}/{unique}",
            "azure-dl": f"azure-dl://{container}/{unique}",
            "abfss": f"abfss://{container}@{server.extra['account']}.dfs.core.windows.net/{unique}",
        }[scheme]
        return Remote(scheme, root, monkeypatch, configure, break_credentials, server.port)
    if scheme == "oci":
        server = request.getfixturevalue("fake_oci")
        bucket = request.getfixturevalue("oci_bucket")
        monkeypatch.setenv("OCI_CONFIG_FILE", str(server.extra["config_file"]))

        def configure(endpoint: str | None) -> None:
            monkeypatch.setenv("OCI_OBJECT_STORAGE_ENDPOINT", endpoint or server.endpoint)

        def break_credentials() -> None:
            wrong = tmp_path / "wrong-oci-config"
            wrong.write_text(
                f"[DEFAULT]\nuser={OCI_USER}\nfingerprint={OCI_FINGERPRINT.replace('ab', 'cd')}\n"
                f"tenancy={OCI_TENANCY}\nregion=us-ashburn-1\nkey_file={server.extra['key_file']}\n"
            )
            monkeypatch.setenv("OCI_CONFIG_FILE", str(wrong))

        configure(None)
        return Remote(
            scheme,
            f"oci://{bucket}@{server.extra['namespace']}/{unique}",
            monkeypatch,
            configure,
            break_credentials,
            server.port,
        )
    if scheme in ("dbfs", "volumes"):
        server = request.getfixturevalue("fake_databricks")
        monkeypatch.setenv("DATABRICKS_TOKEN", server.extra["token"])

        def configure(endpoint: str | None) -> None:
            monkeypatch.setenv("DATABRICKS_HOST", endpoint or server.endpoint)

        configure(None)
        root = f"dbfs:/tmp/{unique}" if scheme == "dbfs" else f"dbfs:/Volumes/main/default/vol/{unique}"
        return Remote(
            scheme,
            root,
            monkeypatch,
            configure,
            lambda: monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-wrong-token-456"),
            server.port,
        )
    if scheme == "hf":
        server = request.getfixturevalue("fake_hf_hub")
        SECRETS.add(server.extra["token"])
        monkeypatch.setenv("HF_TOKEN", server.extra["token"])

        def configure(endpoint: str | None) -> None:
            monkeypatch.setenv("HF_ENDPOINT", endpoint or server.endpoint)

        configure(None)
        return Remote(
            scheme,
            f"hf://datasets/{server.extra['repo']}/{unique}",
            monkeypatch,
            configure,
            lambda: monkeypatch.setenv("HF_TOKEN", "hf_WrongToken789"),
            server.port,
        )
    if scheme == "sftp":
        # The URL names a host and port, not an environment variable: it points at a pass-through proxy, and
        # re-pointing the endpoint (a flaky proxy, a dead port) re-points that proxy.
        server = request.getfixturevalue("sftp_server")
        SECRETS.add(server.extra["password"])
        front = FlakyProxy(server.port)
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text(known_hosts_line(server, front.port))
        monkeypatch.setenv("COMPOSER_SFTP_KNOWN_HOSTS_FILE", str(known_hosts))
        monkeypatch.setenv("COMPOSER_SFTP_KEY_FILE", str(server.extra["key_file"]))

        def configure(endpoint: str | None) -> None:
            front.target_port = int(endpoint.rsplit(":", 1)[1]) if endpoint else server.port

        root = f"sftp://{server.extra['user']}@127.0.0.1:{front.port}/data/{unique}"
        return Remote(
            scheme,
            root,
            monkeypatch,
            configure,
            lambda: monkeypatch.setenv("COMPOSER_SFTP_KEY_FILE", str(server.extra["other_key_file"])),
            server.port,
            [front],
        )
    raise ValueError(f"unknown test scheme {scheme!r}; valid: {ALL_SCHEMES}")


@pytest.fixture
def remote_factory(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[Callable]:
    """`remote_factory(scheme) -> Remote`; closes the Remote's proxies afterwards."""
    made: list[Remote] = []

    def factory(scheme: str) -> Remote:
        made.append(make_remote(scheme, request, monkeypatch, tmp_path))
        return made[-1]

    yield factory
    for remote in made:
        for proxy in remote.proxies:
            proxy.close()
